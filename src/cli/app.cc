#include "cli/app.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "cli/terminal.h"

namespace rightsize::cli {

std::string Context::StorePath() const {
  if (!db_path.empty()) return db_path;
  return DefaultStorePath([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  });
}

StoreOptions Context::StoreOpts() const {
  auto flag_or_env = [](const std::string& flag, const char* env) {
    if (!flag.empty()) return flag;
    const char* v = std::getenv(env);
    return std::string(v != nullptr ? v : "");
  };
  return {flag_or_env(tsdb_write_url, "RIGHTSIZE_TSDB_WRITE_URL"),
          flag_or_env(tsdb_query_url, "RIGHTSIZE_TSDB_QUERY_URL")};
}

StatusOr<Store*> Context::OpenedStore() {
  if (!store_) {
    RS_ASSIGN_OR_RETURN(store_, OpenStore(StorePath(), StoreOpts()));
  }
  return store_.get();
}

int RunCli(int argc, char** argv) {
  spdlog::set_pattern("rightsize: %l: %v");
  CLI::App app{
      "rightsize: find and recover the capacity that HPC and GPU jobs request but do not use.\n"
      "Exit codes: 0 ok, 1 usage error, 2 bad input, 3 internal error."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("rightsize ") + RIGHTSIZE_VERSION);
  Context ctx;
  app.add_option("--db", ctx.db_path,
                 "Store: an SQLite file, or a PostgreSQL database as a postgresql://user@host/db "
                 "URL (default: $RIGHTSIZE_DB, else $XDG_DATA_HOME/rightsize/rightsize.db or "
                 "~/.local/share/rightsize/rightsize.db)")
      ->type_name("PATH|URL");
  app.add_option("--tsdb-write-url", ctx.tsdb_write_url,
                 "Keep jobs' samples in a Prometheus-compatible TSDB: its remote-write URL, e.g. "
                 "http://vm:8428/api/v1/write (default: $RIGHTSIZE_TSDB_WRITE_URL; with "
                 "--tsdb-query-url; see docs/scale-tsdb.md)")
      ->type_name("URL");
  app.add_option("--tsdb-query-url", ctx.tsdb_query_url,
                 "The same TSDB's query API base, e.g. http://vm:8428 (default: "
                 "$RIGHTSIZE_TSDB_QUERY_URL)")
      ->type_name("URL");

  Action action;
  AddIngestCommands(app, ctx, &action);
  AddReportCommand(app, ctx, &action);
  AddJobCommand(app, ctx, &action);
  AddModelCommands(app, ctx, &action);
  AddDiagnoseCommand(app, ctx, &action);
  AddRunCommand(app, ctx, &action);
  AddAgentCommand(app, ctx, &action);
  AddAdviseCommand(app, ctx, &action);
  AddServeCommand(app, ctx, &action);
  AddSubmitCommand(app, ctx, &action);
  AddSimulateCommand(app, ctx, &action);
  AddMcpCommand(app, ctx, &action);
  AddDocsCommand(app, &action);

  // For `run`, the command after "--" is the job's, not ours: keep it away from the parser.
  // Only a "--" among run's own options counts: one after the command word is the command's.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "run") continue;
    static constexpr std::string_view kTakesValue[] = {"--interval", "--stacks", "--log",
                                                       "--name",     "--mem",    "--nvml",
                                                       "--dcgm",     "--script", "--powercap"};
    for (int j = i + 1; j < argc; ++j) {
      std::string_view word = argv[j];
      if (word == "--") {
        for (int k = j + 1; k < argc; ++k) ctx.run_command.emplace_back(argv[k]);
        argc = j;
        break;
      }
      if (!word.starts_with("-")) break;  // the command itself: parsed as a prefix command
      if (std::find(std::begin(kTakesValue), std::end(kTakesValue), word) !=
          std::end(kTakesValue)) {
        ++j;
      }
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (!action) return kExitUsage;
  try {
    return action();
  } catch (const std::exception& e) {
    fmt::print(stderr, "rightsize: internal error: {}\n", e.what());
    return kExitInternal;
  }
}

}  // namespace rightsize::cli

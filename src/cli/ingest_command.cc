// `rightsize ingest sacct|swf|clustercockpit|slurm`: load accounting into the store.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/terminal.h"
#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/sacct.h"
#include "ingest/swf.h"
#include "report/render.h"

extern char** environ;

namespace rightsize::cli {

namespace {

struct CommonFlags {
  std::string cluster;
  bool strict = false;
  bool json = false;
};

void AddCommonFlags(CLI::App* cmd, CommonFlags* f) {
  cmd->add_option("--cluster", f->cluster,
                  "Cluster name stored with each job (default: the trace file's name for SWF; "
                  "the Cluster (sacct) or cluster (ClusterCockpit) column, else 'default')");
  cmd->add_flag("--strict", f->strict, "Stop at the first malformed line (exit 2)");
  cmd->add_flag("--json", f->json, "Print the ingest summary as JSON");
}

nlohmann::json StatsJson(const IngestStats& s, const Status& st) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : s.errors) {
    errors.push_back({{"file", e.file}, {"line", e.line}, {"message", e.message}});
  }
  return {{"file", s.file},
          {"cluster", s.cluster},
          {"lines", s.lines},
          {"records", s.records},
          {"stored", s.stored},
          {"skipped", s.skipped},
          {"errors", errors},
          {"notes", s.notes},
          {"seconds", s.seconds},
          {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.message())}};
}

// Ingests each file with a fresh parser from `make_parser`; prints per-file summaries.
int IngestFiles(Context& ctx, const std::vector<std::string>& files, const CommonFlags& flags,
                bool allow_empty, const std::function<std::unique_ptr<RecordParser>()>& make_parser,
                const std::function<std::string(const std::string&)>& default_cluster) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  nlohmann::json out = nlohmann::json::array();
  int exit_code = kExitOk;
  int64_t total_stored = 0, total_skipped = 0;
  constexpr int kPrintedErrors = 20;
  for (const auto& file : files) {
    auto parser = make_parser();
    IngestOptions options;
    options.strict = flags.strict;
    options.override_cluster = !flags.cluster.empty();
    options.allow_empty = allow_empty;
    int printed = 0;
    options.on_error = [&](const IngestError& e) {
      if (flags.json) return;
      if (printed++ < kPrintedErrors) {
        fmt::print(stderr, "{}\n", e.ToString());
      } else if (printed == kPrintedErrors + 1) {
        fmt::print(stderr, "{}: more malformed lines; only the first {} are shown\n", e.file,
                   kPrintedErrors);
      }
    };
    ProgressBar bar(fmt::format("ingest {}", file));
    options.progress = [&](int64_t done, int64_t total) { bar.Update(done, total); };
    std::string cluster = flags.cluster.empty() ? default_cluster(file) : flags.cluster;
    IngestStats stats;
    Status st = IngestFile(file, *parser, **store, cluster, options, &stats);
    bar.Done();
    total_stored += stats.stored;
    total_skipped += stats.skipped;
    if (flags.json) {
      out.push_back(StatsJson(stats, st));
    } else {
      fmt::print(
          "{}: {} lines, {} jobs stored in cluster '{}', {} malformed lines skipped "
          "({:.2f} s)\n",
          stats.file, FormatThousands(static_cast<double>(stats.lines), 0),
          FormatThousands(static_cast<double>(stats.stored), 0), stats.cluster,
          FormatThousands(static_cast<double>(stats.skipped), 0), stats.seconds);
      for (const auto& note : stats.notes) fmt::print("{}: note: {}\n", stats.file, note);
    }
    if (!st.ok()) {
      if (!flags.json) fmt::print(stderr, "rightsize: {}\n", st.message());
      exit_code = std::max(exit_code, ExitCodeFor(st));
    }
  }
  if (flags.json) {
    fmt::print("{}\n", nlohmann::json{{"files", out},
                                      {"stored", total_stored},
                                      {"skipped", total_skipped},
                                      {"store", ctx.StorePath()}}
                           .dump(2));
  }
  return exit_code;
}

std::vector<std::string> SplitColumns(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// Runs `argv` with its stdout written to `out_path`; returns its exit status.
StatusOr<int> RunToFile(const std::vector<std::string>& argv, const std::string& out_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Status::IoError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) {
    return Status::IoError(fmt::format("waiting for {}: {}", argv[0], std::strerror(errno)));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

void AddIngestCommands(CLI::App& app, Context& ctx, Action* action) {
  auto* ingest = app.add_subcommand("ingest", "Load job accounting into the store");
  ingest->require_subcommand(1);

  // ingest sacct
  {
    auto* cmd = ingest->add_subcommand(
        "sacct",
        "Read `sacct -P` output (with or without a header, any column order); steps are "
        "merged into their jobs. Re-ingesting the same jobs replaces them, never duplicates.");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    auto delimiter = std::make_shared<std::string>();
    auto columns = std::make_shared<std::string>();
    auto print_format = std::make_shared<bool>(false);
    cmd->add_option("files", *files, "sacct output files (.gz works), or - for stdin")
        ->type_name("FILE|-");
    AddCommonFlags(cmd, flags.get());
    cmd->add_option("--delimiter", *delimiter,
                    "Field separator, as sacct's --delimiter (default: '|', or detected)");
    cmd->add_option("--columns", *columns,
                    "Column names of a headerless file, as sacct --format (default: the "
                    "--print-format list)");
    cmd->add_flag("--print-format", *print_format,
                  "Print the sacct --format list rightsize reads best, and exit");
    cmd->callback([&ctx, action, files, flags, delimiter, columns, print_format] {
      *action = [&ctx, files, flags, delimiter, columns, print_format]() -> int {
        if (*print_format) {
          fmt::print("{}\n", kSacctFormat);
          return kExitOk;
        }
        if (files->empty()) {
          fmt::print(stderr, "rightsize: ingest sacct needs a FILE (or - for stdin)\n");
          return kExitUsage;
        }
        SacctOptions opts;
        opts.delimiter = *delimiter;
        opts.columns = SplitColumns(*columns);
        return IngestFiles(
            ctx, *files, *flags, false, [opts] { return std::make_unique<SacctParser>(opts); },
            [](const std::string&) { return std::string("default"); });
      };
    });
  }

  // ingest swf
  {
    auto* cmd = ingest->add_subcommand(
        "swf",
        "Read Standard Workload Format traces (.swf or .swf.gz; 18 fields, -1 = unknown); "
        "header comments are kept as cluster metadata");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("files", *files, "SWF files, or - for stdin")->required()->type_name("FILE");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, files, flags] {
      *action = [&ctx, files, flags]() -> int {
        return IngestFiles(
            ctx, *files, *flags, false, [] { return std::make_unique<SwfParser>(); },
            [](const std::string& f) { return ClusterNameFromPath(f); });
      };
    });
  }

  // ingest clustercockpit
  {
    auto* cmd = ingest->add_subcommand(
        "clustercockpit",
        "Read ClusterCockpit job tables exported as CSV (.csv or .csv.gz; header line, columns by "
        "name): measured CPU load, memory, GPU utilisation and GPU memory per job. Running "
        "jobs are skipped; re-ingesting replaces, never duplicates.");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("files", *files, "CSV files (.gz works), or - for stdin")
        ->required()
        ->type_name("FILE|-");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, files, flags] {
      *action = [&ctx, files, flags]() -> int {
        return IngestFiles(
            ctx, *files, *flags, false, [] { return std::make_unique<ClusterCockpitParser>(); },
            [](const std::string&) { return std::string("default"); });
      };
    });
  }

  // ingest slurm
  {
    auto* cmd = ingest->add_subcommand(
        "slurm", "Run sacct on this cluster for a time window and ingest its output");
    auto since = std::make_shared<std::string>("14d");
    auto until = std::make_shared<std::string>();
    auto sacct = std::make_shared<std::string>("sacct");
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("--since", *since, "Start of the window: 14d, 12h, or 2024-01-31")
        ->capture_default_str();
    cmd->add_option("--until", *until, "End of the window (default: now)");
    cmd->add_option("--sacct", *sacct, "The sacct program to run")->capture_default_str();
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, since, until, sacct, flags] {
      *action = [&ctx, since, until, sacct, flags]() -> int {
        int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
        auto from = ParseTimeSpec(*since, now);
        if (!from.ok()) return Fail(from.status().WithContext("--since"));
        int64_t to = now;
        if (!until->empty()) {
          auto t = ParseTimeSpec(*until, now);
          if (!t.ok()) return Fail(t.status().WithContext("--until"));
          to = *t;
        }
        // sacct reads times in the cluster's local zone.
        auto local = [](int64_t t) {
          auto tt = static_cast<time_t>(t);
          std::tm tm{};
          localtime_r(&tt, &tm);
          return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900,
                             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        };
        std::string tmp = (std::filesystem::temp_directory_path() /
                           fmt::format("rightsize-sacct-{}.psv", getpid()))
                              .string();
        std::vector<std::string> argv = {*sacct,
                                         "--parsable2",
                                         "--allusers",
                                         "--starttime=" + local(*from),
                                         "--endtime=" + local(to),
                                         std::string("--format=") + kSacctFormat};
        auto rc = RunToFile(argv, tmp);
        if (!rc.ok()) {
          std::filesystem::remove(tmp);
          return Fail(rc.status());
        }
        if (*rc != 0) {
          std::filesystem::remove(tmp);
          return Fail(Status::IoError(fmt::format("{} exited with status {}", *sacct, *rc)));
        }
        int code = IngestFiles(
            ctx, {tmp}, *flags, true, [] { return std::make_unique<SacctParser>(SacctOptions{}); },
            [](const std::string&) { return std::string("default"); });
        std::filesystem::remove(tmp);
        return code;
      };
    });
  }
}

}  // namespace rightsize::cli

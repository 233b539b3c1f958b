// The `rightsize` command line: one executable, one subcommand per capability.
//
// Each command parses its flags with CLI11, opens the store it needs, calls the components and
// prints either aligned human tables or, with --json, the documented JSON schema. Exit codes:
// 0 ok, 1 usage, 2 bad input, 3 internal error.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "report/prices.h"
#include "slurm/follower.h"
#include "store/store.h"

namespace rightsize::cli {

// State shared by the subcommands: the global flags and the store, opened on first use.
class Context {
 public:
  std::string db_path;  // --db; empty = the default path
  // --tsdb-write-url / --tsdb-query-url, else $RIGHTSIZE_TSDB_WRITE_URL / _QUERY_URL: samples in
  // a Prometheus-compatible TSDB (store/store.h's StoreOptions).
  std::string tsdb_write_url, tsdb_query_url;
  // `rightsize run [OPTIONS] -- CMD…`: the words after "--", split off before parsing so that
  // CLI11 never sees the command's own options.
  std::vector<std::string> run_command;
  StatusOr<Store*> OpenedStore();
  std::string StorePath() const;
  StoreOptions StoreOpts() const;

 private:
  std::unique_ptr<Store> store_;
};

// A subcommand's action returns the process exit code.
using Action = std::function<int()>;

void AddIngestCommands(CLI::App& app, Context& ctx, Action* action);
void AddReportCommand(CLI::App& app, Context& ctx, Action* action);
void AddJobCommand(CLI::App& app, Context& ctx, Action* action);
void AddModelCommands(CLI::App& app, Context& ctx, Action* action);
void AddDiagnoseCommand(CLI::App& app, Context& ctx, Action* action);
void AddRunCommand(CLI::App& app, Context& ctx, Action* action);
void AddAgentCommand(CLI::App& app, Context& ctx, Action* action);
void AddAdviseCommand(CLI::App& app, Context& ctx, Action* action);
void AddServeCommand(CLI::App& app, Context& ctx, Action* action);

// `ingest slurm` (and `serve --follow-slurm`, in a thread of its own): slurm::Follower over
// [from, to], printing as `ingest slurm` does (json: each pass's document and each diagnosis
// as JSON), until `stop` (or `passes`). Returns the exit code.
struct SlurmIngestOptions : slurm::FollowerOptions {
  bool json = false;
};
int IngestSlurm(Context& ctx, const SlurmIngestOptions& o, int64_t from, int64_t to,
                const std::atomic<bool>& stop);
void AddSubmitCommand(CLI::App& app, Context& ctx, Action* action);
void AddSimulateCommand(CLI::App& app, Context& ctx, Action* action);
void AddMcpCommand(CLI::App& app, Context& ctx, Action* action);
// `gendocs` (hidden): man pages and bash/zsh completion from `app`'s command tree.
void AddDocsCommand(CLI::App& app, Action* action);

// Runs the CLI; returns the exit code.
int RunCli(int argc, char** argv);

}  // namespace rightsize::cli

// The `rightsize` command line: one executable, one subcommand per capability.
//
// Each command parses its flags with CLI11, opens the store it needs, calls the components and
// prints either aligned human tables or, with --json, the documented JSON schema. Exit codes:
// 0 ok, 1 usage, 2 bad input, 3 internal error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/server.h"
#include "store/store.h"

namespace rightsize::cli {

// State shared by the subcommands: the global flags and the store, opened on first use.
class Context {
 public:
  std::string db_path;  // --db; empty = the default path
  // `rightsize run [OPTIONS] -- CMD…`: the words after "--", split off before parsing so that
  // CLI11 never sees the command's own options.
  std::vector<std::string> run_command;
  StatusOr<Store*> OpenedStore();
  std::string StorePath() const;

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

// The folder `advise` and `predict` read a job's code from by default: the script's own.
std::string DefaultCodeDir(const std::string& script_path);
void AddServeCommand(CLI::App& app, Context& ctx, Action* action);
void AddSubmitCommand(CLI::App& app, Context& ctx, Action* action);

// `rightsize predict` for the HTTP API (POST /api/v1/predict): the rightsize.predict/v1 document.
StatusOr<nlohmann::json> PredictForServer(Store& store, const PredictInput& in);

// Runs the CLI; returns the exit code.
int RunCli(int argc, char** argv);

}  // namespace rightsize::cli

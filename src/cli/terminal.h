// Terminal helpers for the CLI: a progress bar that only draws on a terminal, and the
// documented exit codes. (Tables and number formats live with the report's renderers.)
// Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/status.h"

namespace rightsize::cli {

// Exit codes (README.md, "Exit codes").
constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

// The exit code for a failed Status.
int ExitCodeFor(const Status& status);

// Prints "rightsize: <message>" to stderr and returns the exit code for it.
int Fail(const Status& status);

// SIGINT and SIGTERM set the flag StopFlag() returns instead of ending the process: the
// long-running commands (serve, agent, ingest slurm --follow) stop cleanly when it is set.
void CatchStopSignals();
std::atomic<bool>& StopFlag();

// Draws "label [#####.....] 45%  12.3 MB" on stderr when it is a terminal; otherwise silent.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  void Update(int64_t done, int64_t total);
  void Done();

 private:
  std::string label_;
  bool enabled_;
  int last_permille_ = -1;
  bool drawn_ = false;
};

}  // namespace rightsize::cli

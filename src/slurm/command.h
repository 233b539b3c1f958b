// RunCommand: runs one of SLURM's programs (sacct, sinfo, scontrol, sbatch) and waits for it.
//
// The program is looked up in PATH (posix_spawnp) and gets this process's environment; its
// stderr is ours (sbatch's and the job_submit hook's messages show). Its stdout goes to a file
// or is captured. Failure: a program that cannot be started, or a file that cannot be made, is
// an IoError; a program that runs and fails is not an error, its exit status says so. Every
// descriptor opened here is closed on every path. Thread-safe (descriptors are close-on-exec,
// so a program started by another thread never holds our pipe open).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace rightsize::slurm {

struct CommandResult {
  int exit_status = 0;  // the program's exit status; 128 + N when signal N killed it
  std::string out;      // its stdout, when captured
};

// Runs argv[0] with `argv`. Its stdout is written to `stdout_path` (created or truncated,
// mode 0600) or, when `stdout_path` is empty, captured in CommandResult::out.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const std::string& stdout_path = "");

}  // namespace rightsize::slurm

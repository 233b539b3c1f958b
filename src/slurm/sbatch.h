// Submitting a job script with sbatch, as `rightsize submit` does: with its sbatch options and,
// when changes were applied, a private copy of the rewritten script (named as sbatch would have
// named the original); the job id read from sbatch's answer.
//
// Failure: sbatch that cannot be started, or a copy that cannot be written (IoError). sbatch
// refusing the job is not an error: its exit status and output say so. The copy is removed on
// every path. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace rightsize::slurm {

struct SbatchRequest {
  std::string sbatch = "sbatch";  // the program
  std::vector<std::string> args;  // sbatch's own options
  std::string script_path;        // the script as written
  // The script to submit instead, when its text was changed: written to a private copy.
  std::optional<std::string> rewritten;
  std::string job_name;  // -J for the copy, when the script names none ("" = none)
  std::vector<std::string> script_args;
};

struct SbatchResult {
  int exit_code = 0;
  std::string out;                    // sbatch's stdout
  std::optional<std::string> job_id;  // when sbatch accepted the job
};

StatusOr<SbatchResult> RunSbatch(const SbatchRequest& request);

}  // namespace rightsize::slurm

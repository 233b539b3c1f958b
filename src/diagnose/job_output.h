// Where a batch job's output file (slurm-N.out) is: one search, shared by everyone who
// diagnoses a SLURM job — the accounting follower, `rightsize diagnose JOBID` and the node
// agent — so that they read the same file and reach the same diagnosis.
//
// The callers gather hints (from sacct and scontrol, a stored diagnosis, or the job's own
// processes in /proc) and FindJobOutput tries them in order of trust: the job_submit.lua hook's
// out= pattern, the path SLURM or the job's stdout names, files an earlier diagnosis read, then
// slurm-<id>.out in each folder given. Pure functions apart from stat(2); thread-safe.
#pragma once

#include <string>
#include <vector>

namespace rightsize {

struct JobOutputHints {
  std::string job_id;              // "123", "6_64" (an array task)
  std::string job_id_raw;          // the task's own id ("70" for 6_64); "" = job_id
  std::string name, user;          // for %x and %u
  std::string out_pattern;         // the hook's out= (%j %A %a %x %u %% as in sbatch --output)
  std::string stdout_path;         // scontrol's StdOut, or where the job's stdout pointed
  std::vector<std::string> known;  // files an earlier diagnosis of the job read
  std::vector<std::string> dirs;   // folders that may hold slurm-<id>.out (log folder, work dir)
};

// SLURM's output file pattern with %j %A %a %x %u %% filled in from `hints`.
std::string ResolveOutputPattern(const std::string& pattern, const JobOutputHints& hints);

// The first candidate that is a regular file; "" when none is.
std::string FindJobOutput(const JobOutputHints& hints);

}  // namespace rightsize

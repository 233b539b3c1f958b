// RunJob: runs one command as a job and measures it like the agent does — `rightsize run`
// without its flags, its printing, its diagnosis or the store.
//
// The command is forked and exec'd in a process group of its own, inside a memory cgroup of its
// own when the hierarchy lets us make one (root on cgroup v1, or a delegated v2 subtree: exact
// peak memory, OOM kills, and a memory limit the kernel enforces). Its stdout and stderr are
// relayed to the given descriptors and copied to a log file; it is sampled every interval with a
// JobMonitor (its processes, its cgroup, NVML, DCGM), its stacks too when asked; when it has
// exited, RunJob returns its usage record and outcome.
//
// Ownership: everything RunJob makes (pipes, the log file's descriptor, the cgroup, the stack
// sampler) is released before it returns, on every path. A temporary log (no log_path given)
// belongs to the result and is removed with it, so a caller can still diagnose from it. While
// the job runs, SIGINT and SIGTERM are forwarded to its process group (when forward_signals);
// the previous handlers are put back afterwards. Failures to set the job up (no cgroup for a
// memory limit, a log that cannot be written, pipe or fork failing) and a stacks file that
// cannot be written are returned as a Status; a command that fails, cannot be found or is
// killed is a result (its outcome says so). Not thread-safe: one job at a time in a process, as
// signal handlers are process-wide.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu.h"
#include "core/job.h"
#include "core/status.h"
#include "diagnose/diagnosis.h"

namespace rightsize {

struct JobRunOptions {
  std::vector<std::string> argv;  // the command; argv[0] is looked up in PATH
  std::string name;               // the job's name; "" = argv[0]'s base name
  std::string user;               // the record's user ("" = unknown)
  double interval_s = 1;          // between samples
  bool use_cgroup = true;         // try to make a memory cgroup for the job
  // A memory limit, enforced by the job's cgroup (an error when none could be made).
  std::optional<int64_t> memory_limit_bytes;
  std::string stacks_path;  // "": no stacks; else folded stacks ("a;b;c count") written here
  std::string log_path;     // "": a temporary file, removed with the result
  std::string gpu_library = "libnvidia-ml.so.1";
  std::string dcgm_library;                           // "": libdcgm.so.4, then .so.3, then .so
  std::string powercap_root = "/sys/class/powercap";  // RAPL, for the job's CPU energy
  bool summary_series = false;  // the summary holds every metric's time series
  bool forward_signals = true;
  int relay_stdout_fd = 1, relay_stderr_fd = 2;  // where the output goes (-1: nowhere)
};

// Removes a file when destroyed (the temporary log). Copy deleted; move leaves the source empty.
class TempFile {
 public:
  TempFile() = default;
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  TempFile(TempFile&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempFile& operator=(TempFile&& other) noexcept;
  ~TempFile() noexcept { Remove(); }

 private:
  void Remove() noexcept;
  std::string path_;
};

struct JobRunResult {
  JobRecord job;  // cluster "local", source "run": identity, usage and outcome
  double elapsed_s = 0;
  double cpu_time_s = 0;      // of the reaped process tree (wait4)
  double mean_cpu_cores = 0;  // cpu_time_s / elapsed_s
  std::string cgroup;         // the job's cgroup path as /proc/PID/cgroup writes it; "" for none
  bool gpu_available = false, dcgm_available = false;
  std::string gpu_status, dcgm_status;
  bool rapl_available = false;
  std::string rapl_status;      // "RAPL: 1 package (intel-rapl:0)" or "RAPL absent: …"
  nlohmann::json summary;       // JobMonitor::SummaryJson: peaks, means, totals (and series)
  bool stacks_sampled = false;  // and written to options.stacks_path
  // Why no stacks were sampled, when they were asked for; when they were, what the sampler
  // noted ("pid 12: Python 3.12 frames not supported: native frames only"), or "".
  std::string stacks_note;
  std::string log_path;  // the job's output, readable while the result lives

  // What a diagnosis of a failure can use (see diagnose/diagnosis.h, Telemetry).
  std::optional<int64_t> memory_limit_bytes;
  int64_t oom_kills = 0;
  std::vector<std::pair<double, double>> memory_series;  // (seconds, peak bytes), oldest first
  std::optional<int64_t> gpu_memory_total_bytes;
  std::vector<GpuEvent> gpu_events;

  TempFile temp_log;  // the temporary log, when no log_path was given
};

// Runs `options.argv` to its end; see the file comment. InvalidArgument for an empty command or
// a memory limit without a cgroup; IoError when the job cannot be set up or the stacks written.
[[nodiscard]] StatusOr<JobRunResult> RunJob(const JobRunOptions& options);

// The diagnosis of a run that did not complete, from its log, record and what was measured
// (memory series and limit, OOM kills, GPU memory, Xid events); nullopt for a completed run.
std::optional<Diagnosis> DiagnoseRun(const JobRunResult& run);

// The rightsize.run/v1 document of a run: the command, the job record, its usage and summary,
// what the GPU and DCGM sources said, the cgroup, and the diagnosis (null when none).
nlohmann::json JobRunJson(const JobRunResult& run, const std::vector<std::string>& argv,
                          const std::optional<Diagnosis>& diagnosis);

}  // namespace rightsize

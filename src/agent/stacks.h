// StackSampler: samples the user-space call stacks of running processes and folds them into
// flame-graph input ("comm;outer;...;inner" -> count).
//
// How: one perf_event_open event per thread (software cpu-clock in frequency mode, user space
// only, frame-pointer call chains from the kernel) with its own mmap'd ring buffer. Threads that
// appear after AddProcess are picked up by Refresh(). Symbolisation (elfutils libdwfl, from each
// process's /proc/PID/maps, through /proc/PID/root so containerised jobs resolve against their
// own files) happens in Poll(), in the owner thread, never in the sampled processes; names are
// cached per process and rebuilt when a process execs or maps new code. Frames that resolve to
// no symbol read "lib.so+0x1234", frames in no mapped file (JIT code) "[unknown]". Code built
// without frame pointers (most distro libraries, CPython) gives short or partly wrong stacks:
// that is a limit of kernel call chains, not a failure. Python jobs show their native frames
// (_PyEval_EvalFrameDefault and friends), not Python functions. The first Poll after a process
// is added, execs or loads a library pays once for reading those files' symbol tables (tens of
// milliseconds for CPython, more for very large libraries); with DEBUGINFOD_URLS set in the
// agent's environment, libdwfl may also fetch debug files over the network there.
//
// Ownership: the sampler owns every perf fd, ring mapping and libdwfl handle; destroying it
// stops sampling. Memory is bounded: at most `max_threads` rings, at most `max_stacks` distinct
// stacks between TakeFolded() calls (further stacks are counted under "[other]"), and a bounded
// name cache per process.
//
// Failure: Create() fails when this host refuses perf events altogether (IoError: permissions,
// perf_event_paranoid, seccomp, no kernel support) or the options are impossible
// (InvalidArgument). Processes and threads that vanish, or that we may not trace, are skipped
// and counted (skipped_threads(), last_skip_reason()), never an error; samples the kernel had to
// drop because a ring was full are counted in lost().
//
// Thread-safety: none. One owner thread calls every method (the agent's collector loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/proc.h"
#include "core/status.h"

namespace rightsize {

struct StackSamplerOptions {
  // Samples per second of CPU time, per thread. 49 (not 50) avoids lock-step with timers.
  int frequency_hz = 49;
  // Frames kept per stack; deeper stacks lose their outermost frames and are rooted at
  // "[truncated]". The kernel refuses more than kernel.perf_event_max_stack (127 by default).
  int max_depth = 64;
  // Data pages per thread's ring buffer (a power of two). A sample is ~100-600 bytes, so the
  // default 8 pages hold a few seconds at 49 Hz; what overflows is counted in lost().
  size_t ring_pages = 8;
  // Distinct folded stacks kept between TakeFolded() calls; the rest are counted as "[other]".
  size_t max_stacks = 10000;
  // Threads sampled at once, across all processes: each costs an fd and (ring_pages + 1)
  // pages of locked memory. Threads past the cap are skipped and counted.
  size_t max_threads = 1024;
};

class StackSampler {
 public:
  // Checks the options and that this host lets us open a sampling event at all (on the calling
  // thread), so that a refusal is reported once, clearly, rather than as skipped threads.
  static StatusOr<std::unique_ptr<StackSampler>> Create(StackSamplerOptions options = {});
  ~StackSampler();
  StackSampler(const StackSampler&) = delete;
  StackSampler& operator=(const StackSampler&) = delete;

  // Starts sampling every thread of `pid` (from /proc/PID/task). A process that is gone or that
  // we may not trace is skipped and counted, not an error. Adding a watched pid again picks up
  // its new threads.
  void AddProcess(int pid);
  // Picks up new threads of the watched processes, drains and closes the events of threads that
  // ended, and forgets processes that exited (or whose pid now belongs to another process).
  void Refresh();
  // Drains the ring buffers into the aggregate; call every second or so. Fails only on a ring
  // record the kernel cannot have written (a bug); the ring is resynchronised and the other
  // rings are still drained.
  Status Poll();
  // The folded stacks since the last TakeFolded(), then cleared.
  std::map<std::string, int64_t> TakeFolded();

  // Cumulative since Create().
  int64_t samples() const { return samples_; }
  int64_t lost() const { return lost_; }
  int64_t skipped_threads() const { return skipped_threads_; }
  // Why the last thread or process was skipped ("" if none was): for the agent's warning log.
  const std::string& last_skip_reason() const { return last_skip_reason_; }
  // Threads being sampled now.
  size_t watched_threads() const;

 private:
  struct Process;
  class PerfEvent;

  explicit StackSampler(StackSamplerOptions options);
  void Skip(int64_t threads, std::string reason);
  // Opens events for the threads in `tids` (sorted, from /proc/PID/task) that have none.
  void OpenThreads(Process& process, const std::vector<int>& tids);
  // Drains and closes the events of ended threads, opens new ones. False when the process is
  // gone (or its pid was reused), after draining what it left.
  bool RefreshProcess(Process& process);
  Status Drain(Process& process, PerfEvent& event);
  // One ring record: `record` points at its perf_event_header, `record_bytes` long.
  void HandleRecord(Process& process, uint32_t type, uint16_t misc, const uint64_t* record,
                    size_t record_bytes);
  void AddSample(Process& process, const uint64_t* ips, uint64_t nr, uint64_t ip);

  StackSamplerOptions options_;
  ProcFs proc_;  // the real /proc: perf events and libdwfl only make sense for live processes
  uint64_t poll_generation_ = 0;  // bumped per Poll/Refresh: bounds symbol rebuilds per process
  std::map<int, std::unique_ptr<Process>> processes_;  // by pid
  std::unordered_map<std::string, int64_t> folded_;
  int64_t other_stacks_ = 0;  // samples whose stack did not fit under max_stacks
  int64_t samples_ = 0;
  int64_t lost_ = 0;
  int64_t skipped_threads_ = 0;
  std::string last_skip_reason_;
  Status pending_error_;  // from a drain in Refresh/AddProcess, returned by the next Poll
  std::vector<uint64_t> record_scratch_;  // a record that wraps around the ring's end
  std::vector<uint64_t> frame_scratch_;
};

}  // namespace rightsize

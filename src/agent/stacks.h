// StackSampler: samples the user-space call stacks of running processes and folds them into
// flame-graph input ("comm;outer;...;inner" -> count).
//
// How: one perf_event_open event per thread (software cpu-clock in frequency mode, user space
// only, frame-pointer call chains from the kernel) with its own mmap'd ring buffer. Threads that
// appear after AddProcess are picked up by Refresh(). Symbolisation (elfutils libdwfl, from each
// process's /proc/PID/maps, through /proc/PID/root so containerised jobs resolve against their
// own files) happens in Poll(), in the owner thread, never in the sampled processes; names are
// cached per process and rebuilt when a process execs or maps new code. Only addresses inside
// executable mappings count as code: a "return address" pointing at data (what a frame-pointer
// chain through code built without frame pointers yields) reads "[unknown]", and frames that
// resolve to no symbol read "lib.so+0x1234" with the file's own (ELF) address, what addr2line
// takes. Code in anonymous memory is named from the process's perf map (/tmp/perf-PID.map, as
// written by `python3.12 -X perf`, Node and JVM agents; see perf_map.h), else "[unknown]". Code
// built without frame pointers (most distro libraries, CPython) gives short or partly wrong
// native stacks: a limit of kernel call chains, not a failure.
//
// Python: for CPython 3.11 processes (python_frames, on by default) a thread of the sampler's
// own reads every thread's Python stack from the process's memory at frequency_hz
// (python_stacks.h), stamped with CLOCK_MONOTONIC like the perf samples. Each sample of such a
// thread gets the Python stack read nearest to it in time (within 3 sampling periods, at least
// 50 ms), spliced in place of the interpreter loop: "python3.11;<module> (train.py:40);main
// (train.py:31);step (train.py:12);PyNumber_Multiply" — Python frames, each "qualname
// (file.py:LINE)", where the native stack had _PyEval_EvalFrameDefault (above the native
// frames, where the chain lost the loop); the native frames above the outermost interpreter
// loop are left out (main, Py_RunMain, or junk where the chain broke), those below it (C called
// from Python) kept. Error of this design: the Python stack is
// read up to half a sampling period (10 ms at 49 Hz; more when the host is busy and the reader
// lags, up to the tolerance) before or after the sample, so in code whose Python stack changes
// faster than that a sample can be given the function called just before or after; over many
// samples the shares stay right. Reading a stack does not stop the process: a read torn by the
// running interpreter ends that stack early, it is never followed into garbage. Other Python
// versions, and 3.11 interpreters without the needed symbols, keep native frames, and notes()
// says so once ("Python 3.12 frames not supported: native frames only"); 3.12's -X perf
// trampolines are named from its perf map where the native chain reaches them. A process in
// another pid namespace (a container) names its threads by its own ids: they are mapped to ours
// through /proc/PID/task/TID/status (NSpid). The first Poll after a process is added, execs or
// loads a library pays once for reading those files' symbol tables (tens of milliseconds for
// CPython, more for very large libraries); with DEBUGINFOD_URLS set in the agent's environment,
// libdwfl may also fetch debug files over the network there.
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
// Thread-safety: none. One owner thread calls every method (the agent's collector loop); the
// Python reader thread shares only PythonStackPoller's locked hand-over with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/proc.h"
#include "agent/python_stacks.h"
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
  // Name the Python functions of CPython 3.11 processes (read from their memory at the sampling
  // frequency, on a thread of the sampler's own); false: native frames only.
  bool python_frames = true;
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
  // What a user should know about the stacks, each said once (at most 16): "pid 12: Python
  // 3.12 frames not supported: native frames only".
  const std::vector<std::string>& notes() const { return notes_; }

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
  void AddSample(Process& process, const uint64_t* ips, uint64_t nr, uint64_t ip, int tid,
                 int64_t time_ns);
  void Note(std::string note);
  // Looks for a readable CPython in a process whose symbols were rebuilt.
  void UpdatePython(Process& process);
  // Moves the poller's Python stacks into their threads' histories.
  void TakePythonStacks();
  // The Python stack read nearest to `time_ns` in thread `tid`, if one is close enough.
  const std::vector<PythonFrame>* PythonStackAt(const Process& process, int tid,
                                                int64_t time_ns) const;
  // Appends the frames of a sample that ran Python to `key`: Python frames in place of the
  // interpreter loop's native frames.
  static void SplicePython(const std::vector<PythonFrame>& python,
                           const std::vector<std::string>& names, std::string& key);

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
  std::vector<std::string> name_scratch_;
  std::vector<std::string> notes_;
  std::unique_ptr<PythonStackPoller> python_;  // null without options_.python_frames
};

}  // namespace rightsize

// PythonStacks: the Python functions a CPython 3.11 process is running, read from its memory the
// way py-spy and Austin do (process_vm_readv; nothing is injected and the target is never
// stopped), so that StackSampler can name Python functions, files and lines in its stacks
// instead of only the interpreter's C frames.
//
// How: Find() looks for the interpreter (the python binary or libpython) among a process's
// modules, reads _PyRuntime, Py_Version, PyCode_Type and PyUnicode_Type from its symbol table,
// and accepts only Python 3.11 (the layout comes from python3.11-dev's headers at build time,
// py311_layout.h). Any other version, a build without the layout, or an interpreter without
// those symbols gives a note ("Python 3.12 frames not supported: native frames only") and no
// reader. ReadStacks() walks interpreters -> thread states -> cframe -> current_frame ->
// previous, and names each frame "qualname (file.py:LINE)" from its code object (the line from
// co_linetable at prev_instr, CPython 3.11's location table format).
//
// PythonStackPoller reads the watched processes' stacks on its own thread at the sampler's
// frequency and timestamps each read (CLOCK_MONOTONIC, the clock of the perf samples), so each
// perf sample can be given the Python stack read nearest to it in time.
//
// Races: the target runs while we read, so a read can be torn (a frame popped under us).
// Every pointer is checked before it is followed (code objects must have PyCode_Type as type,
// strings PyUnicode_Type, sizes are capped, walks bounded by max_depth); a read that fails
// ends that thread's stack there. Garbage is never followed into unbounded reads.
//
// Thread-safety: a PythonStacks object is used by one thread at a time (the poller's).
// PythonStackPoller's methods may be called from one owner thread while its own thread runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/py311_layout.h"
#include "core/mutex.h"

typedef struct Dwfl Dwfl;

namespace rightsize {

struct PythonFrame {
  std::string name;    // "qualname (file.py:LINE)"
  bool entry = false;  // the first frame run by its call of _PyEval_EvalFrameDefault
  bool operator==(const PythonFrame&) const = default;
};

struct PythonThreadStack {
  int native_tid = 0;               // the thread's id in the target's pid namespace
  std::vector<PythonFrame> frames;  // outermost first
};

// The source line of the code unit at `byte_offset` (2 x the instruction index) in a CPython
// 3.11 code object whose co_linetable is `linetable` and co_firstlineno `first_line`
// (Objects/locations.md). -1 where the table has no line for it.
int Python311Line(std::string_view linetable, int first_line, int byte_offset);

class PythonStacks {
 public:
  struct Found {
    std::unique_ptr<PythonStacks> stacks;  // null when there is nothing to read
    std::string note;  // why not, for a Python process we cannot read ("" if none is Python)
  };
  // Looks for a CPython interpreter among the modules libdwfl reported for `pid`.
  static Found Find(int pid, Dwfl* dwfl);

  // Each Python thread's stack now. Threads whose stack cannot be read are left out.
  std::vector<PythonThreadStack> ReadStacks(size_t max_depth);

  const std::string& interpreter() const { return interpreter_; }

 private:
  PythonStacks(int pid, uint64_t runtime, uint64_t code_type, uint64_t str_type,
               const RsPy311Layout& layout, std::string interpreter)
      : pid_(pid),
        runtime_(runtime),
        code_type_(code_type),
        str_type_(str_type),
        layout_(layout),
        interpreter_(std::move(interpreter)) {}

  bool Read(uint64_t address, void* out, size_t bytes) const;
  bool ReadPointer(uint64_t address, uint64_t* out) const { return Read(address, out, 8); }
  // A str object's text (UTF-8), or "" if it is not a str.
  std::string ReadString(uint64_t address) const;
  // The frame name for a code object at the instruction `prev_instr` points to; "" if `code`
  // is not a code object.
  std::string FrameName(uint64_t code, uint64_t prev_instr);

  struct CachedName {
    uint64_t qualname, filename;  // must still match: the code object may have been replaced
    std::string name;
  };
  int pid_;
  uint64_t runtime_, code_type_, str_type_;
  RsPy311Layout layout_;
  std::string interpreter_;
  std::unordered_map<uint64_t, std::unordered_map<uint64_t, CachedName>> names_;  // code, instr
  size_t cached_names_ = 0;
};

struct PythonSnapshot {
  int64_t time_ns = 0;  // CLOCK_MONOTONIC, mid-read
  int pid = 0;
  int tid = 0;  // native_thread_id
  std::shared_ptr<const std::vector<PythonFrame>> frames;
};

class PythonStackPoller {
 public:
  PythonStackPoller(int frequency_hz, size_t max_depth);
  ~PythonStackPoller();
  PythonStackPoller(const PythonStackPoller&) = delete;
  PythonStackPoller& operator=(const PythonStackPoller&) = delete;

  // Starts (or restarts, after an exec) reading `pid`'s stacks; the thread starts on first use.
  void Watch(int pid, std::unique_ptr<PythonStacks> stacks) EXCLUDES(mu_);
  void Forget(int pid) EXCLUDES(mu_);
  // The snapshots read since the last call, oldest first. At most kMaxPending are kept between
  // calls (the oldest are dropped).
  std::vector<PythonSnapshot> Take() EXCLUDES(mu_);

  static constexpr size_t kMaxPending = 1 << 16;

 private:
  void Run() EXCLUDES(mu_);

  const int frequency_hz_;
  const size_t max_depth_;
  Mutex mu_;
  CondVar wake_;
  // shared_ptr: the poller's thread keeps a process it is reading alive across a Forget().
  std::map<int, std::shared_ptr<PythonStacks>> processes_ GUARDED_BY(mu_);
  std::vector<PythonSnapshot> pending_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first Watch(), on the owner thread
};

}  // namespace rightsize

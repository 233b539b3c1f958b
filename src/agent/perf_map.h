// PerfMap: the names a JIT gives its generated code, from the perf map file it writes
// (/tmp/perf-PID.map: one "START SIZE name" line per function, START and SIZE in hex), as
// `python3.12 -X perf` (PYTHONPERFSUPPORT=1), Node's --perf-basic-prof and the JVM's agents do.
// StackSampler asks it for frames in memory that no mapped file explains.
//
// Python's trampolines, named "py::func:/path/file.py", read "func (file.py)"; other names as
// written. The file is appended to while the process runs: Update() reads what was added since
// the last call (a file that shrank, i.e. was rewritten, is read afresh). Later lines for the
// same start replace earlier ones, so a JIT that reuses memory names its newest code.
//
// Bounds: at most kMaxEntries functions and kMaxBytes read per process; past them the map stops
// growing and truncated() says so. Lines that do not parse are skipped and counted.
//
// Thread-safety: none; one owner (the sampler's thread). Failure: a missing or unreadable file
// is an empty map, never an error (most processes have none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace rightsize {

class PerfMap {
 public:
  static constexpr size_t kMaxEntries = 1 << 18;
  static constexpr uint64_t kMaxBytes = uint64_t{64} << 20;

  explicit PerfMap(std::string path) : path_(std::move(path)) {}

  // Reads what the file gained since the last call. True when the map changed.
  bool Update();
  // The name of the function containing `address`, or nullptr.
  const std::string* Lookup(uint64_t address) const;

  const std::string& path() const { return path_; }
  size_t size() const { return entries_.size(); }
  int64_t bad_lines() const { return bad_lines_; }
  bool truncated() const { return truncated_; }

  // "py::func:/path/file.py" -> "func (file.py)"; other names unchanged (';' made ':').
  static std::string FrameName(std::string_view name);

 private:
  void AddLine(std::string_view line);

  struct Entry {
    uint64_t end;
    std::string name;
  };
  std::string path_;
  uint64_t read_bytes_ = 0;            // of the file, consumed up to the last complete line
  std::map<uint64_t, Entry> entries_;  // by start
  int64_t bad_lines_ = 0;
  bool truncated_ = false;
};

}  // namespace rightsize

// Source hints: the lines of a job's code and script that decide how much memory and time it
// needs — the batch size, the data-loader workers, the precision, activation checkpointing,
// the learning rate — so a diagnosis can say "batch_size=64 at train.py:42 → 32".
//
// A pattern scan of Python sources and the job script's command lines, not a parser: it finds
// literal assignments, keyword arguments and argparse defaults. Bounded: at most kMaxFiles
// files of at most kMaxFileBytes each; unreadable files are skipped. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rightsize {

struct SourceHint {
  enum class Kind { kBatchSize, kNumWorkers, kPrecision, kCheckpointing, kLearningRate };
  Kind kind;
  std::string file;   // as found (relative to the code folder when scanned from one)
  int line = 0;       // 1-based
  std::string text;   // the line, trimmed
  std::string value;  // "64", "bf16", "" when the line only shows the feature is used
};

inline constexpr int kMaxHintFiles = 2000;
inline constexpr size_t kMaxHintFileBytes = 1 << 20;

// Scans `dir` recursively for *.py files (skipping virtual environments and hidden folders).
std::vector<SourceHint> ScanSourceDir(const std::string& dir);
// Scans one file (a job script or a Python file).
std::vector<SourceHint> ScanSourceFile(const std::string& path, const std::string& shown_name);

// The line `line` of `path`, trimmed; nullopt when unreadable.
std::optional<std::string> ReadSourceLine(const std::string& path, int line);

// The file under `dir` that a traceback path names ("/home/a/proj/train.py" → "dir/train.py"
// or "dir/proj/train.py"): the longest matching suffix; "" when none.
std::string FindSourceFile(const std::string& dir, const std::string& traceback_path);

}  // namespace rightsize

// ScanLog: one streaming pass over a job's log that finds every failure signature.
//
// The log is read in blocks (plain or gzip, a file or standard input), so memory stays bounded
// whatever its size: a 10 GB log costs the same few megabytes as a small one. All signatures
// are searched at once with one RE2 automaton (linear time, no backtracking); a line that
// matches is then matched against each signature to name it and pull out its facts. Lines are
// split on "\n"; a progress bar's "\r" updates are one line, and only the part around a match
// is kept as evidence. Lines longer than a block are searched in block-sized pieces.
// ScanLogFile reads on the calling thread and scans blocks on one worker per core, merging the
// results in order (two blocks per worker in flight at most).
//
// Bad input is not an error: NUL bytes, invalid UTF-8, ANSI colours and enormous lines are
// counted in LogScan and the evidence text is cleaned to valid UTF-8. Only a file that cannot
// be opened or read is an IoError. Thread-safe (the compiled signatures are shared, read-only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace rightsize {

// One line that matched one signature.
struct SignatureHit {
  int signature = 0;  // index into AllSignatures()
  int64_t line = 0;   // 1-based
  std::string text;   // the line, cleaned (valid UTF-8, no colours), at most ~400 bytes
  std::vector<std::pair<std::string, std::string>> facts;  // named groups that matched
};

struct LogScan {
  std::string file;  // as given ("-" is "<stdin>")
  int64_t bytes = 0;
  int64_t lines = 0;
  int64_t nul_bytes = 0;        // binary content
  int64_t long_lines = 0;       // lines longer than a block, searched in pieces
  std::vector<int64_t> counts;  // per signature: how many lines matched
  // The hits in line order; per signature the first and the last few are kept (counts has
  // them all), so a log that repeats one warning a million times stays small.
  std::vector<SignatureHit> hits;
  // The last lines of the log ("\r" progress updates split), cleaned: for progress and for
  // showing what the job printed last.
  std::vector<std::pair<int64_t, std::string>> tail;
};

struct ScanOptions {
  size_t block_bytes = 4 << 20;
  size_t keep_first = 8;  // hits kept per signature from the start of the log
  size_t keep_last = 32;  // and from its end
  size_t tail_lines = 200;
};

// Scans a file ("-" = standard input; gzip detected from the content).
StatusOr<LogScan> ScanLogFile(const std::string& path, const ScanOptions& options = {});
// Scans text already in memory (tests, logs captured by the agent).
LogScan ScanLogText(std::string_view text, std::string name = "<text>",
                    const ScanOptions& options = {});

// `text` as valid UTF-8 for reports: ANSI escapes removed, control characters as spaces,
// invalid bytes as U+FFFD, cut to about `max_bytes` with "…".
std::string CleanLogText(std::string_view text, size_t max_bytes = 400);

}  // namespace rightsize

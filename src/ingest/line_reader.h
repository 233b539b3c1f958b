// LineReader: reads text lines from a file, a gzip file, or standard input, in bounded memory.
//
// gzip is detected from the content (zlib reads plain files transparently), so "trace.swf" and
// "trace.swf.gz" both work. A truncated gzip stream, a binary file (NUL bytes) and a line over
// kMaxLineBytes are reported as BadInput with the file and line; memory stays bounded whatever
// the input size. Not thread-safe.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rightsize {

class LineReader {
 public:
  static constexpr size_t kMaxLineBytes = 1 << 20;

  // Opens `path`; "-" reads standard input.
  static StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets *line to the next line (without "\n" or "\r\n"); valid until the next call. Returns
  // false at the end of the input. A line over kMaxLineBytes is an error naming its number;
  // the next call resumes on the line after it.
  StatusOr<bool> Next(std::string_view* line);

  // Whether the error Next just returned was an over-long line, which skips only that line
  // (reading may go on); other errors end the input.
  bool last_error_was_overlong_line() const { return overlong_line_; }
  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  // The name used in messages ("<stdin>" for "-").
  const std::string& name() const { return name_; }
  // Bytes of the underlying file consumed so far, and its size (-1 when unknown, e.g. a
  // pipe): for progress bars.
  int64_t bytes_consumed() const;
  int64_t total_bytes() const { return total_bytes_; }

 private:
  LineReader(gzFile file, std::string name, int64_t total_bytes);
  Status Fill();
  StatusOr<bool> Check(std::string_view* line) const;

  gzFile file_;
  std::string name_;
  int64_t total_bytes_;
  std::unique_ptr<char[]> buf_;
  size_t begin_ = 0;  // first unread byte in buf_
  size_t end_ = 0;    // one past the last valid byte in buf_
  bool eof_ = false;
  bool skipping_long_line_ = false;
  bool overlong_line_ = false;
  int64_t line_number_ = 0;
  std::string carry_;  // a line that straddles a buffer refill
};

}  // namespace rightsize

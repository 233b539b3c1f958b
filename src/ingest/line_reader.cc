#include "ingest/line_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fd.h"

namespace rightsize {

namespace {
constexpr size_t kBufferBytes = 1 << 18;
}

StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  UniqueFd fd(path == "-" ? dup(STDIN_FILENO) : open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  int64_t size = -1;
  if (fstat(fd.get(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::BadInput(fmt::format("{} is a folder, not a file", path));
    }
    if (S_ISREG(st.st_mode)) size = st.st_size;
  }
  gzFile file = gzdopen(fd.get(), "rb");
  if (file == nullptr) {
    return Status::IoError(fmt::format("cannot read {}: out of memory", path));
  }
  (void)fd.release();  // the gzFile owns it now: gzclose closes it
  gzbuffer(file, 1 << 17);
  return std::unique_ptr<LineReader>(new LineReader(file, path == "-" ? "<stdin>" : path, size));
}

LineReader::LineReader(gzFile file, std::string name, int64_t total_bytes)
    : file_(file),
      name_(std::move(name)),
      total_bytes_(total_bytes),
      buf_(new char[kBufferBytes]) {}

LineReader::~LineReader() { gzclose(file_); }

int64_t LineReader::bytes_consumed() const { return static_cast<int64_t>(gzoffset(file_)); }

Status LineReader::Fill() {
  begin_ = 0;
  end_ = 0;
  int n = gzread(file_, buf_.get(), static_cast<unsigned>(kBufferBytes));
  if (n < 0) {
    int err = 0;
    const char* msg = gzerror(file_, &err);
    return Status::BadInput(fmt::format("{}: cannot read after line {}: {}", name_, line_number_,
                                        err == Z_ERRNO ? std::strerror(errno) : msg));
  }
  if (n == 0) {
    eof_ = true;
    int err = 0;
    gzerror(file_, &err);
    // zlib reports a stream cut short as Z_BUF_ERROR at the end.
    if (err == Z_BUF_ERROR) {
      return Status::BadInput(
          fmt::format("{}: the gzip data is truncated (unexpected end of file after line {})",
                      name_, line_number_));
    }
    if (err != Z_OK) {
      return Status::BadInput(fmt::format("{}: cannot decompress after line {}: {}", name_,
                                          line_number_, gzerror(file_, &err)));
    }
  }
  end_ = static_cast<size_t>(n);
  return Status::Ok();
}

StatusOr<bool> LineReader::Next(std::string_view* line) {
  carry_.clear();
  overlong_line_ = false;
  bool have_partial = false;
  while (true) {
    if (begin_ == end_) {
      if (!eof_) RS_RETURN_IF_ERROR(Fill());
      if (begin_ == end_) {
        skipping_long_line_ = false;
        if (!have_partial) return false;
        *line = carry_;  // the last line has no newline
        ++line_number_;
        return Check(line);
      }
    }
    const char* start = buf_.get() + begin_;
    const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    size_t len = nl != nullptr ? static_cast<size_t>(nl - start) : end_ - begin_;
    begin_ += len + (nl != nullptr ? 1 : 0);
    if (skipping_long_line_) {
      if (nl != nullptr) skipping_long_line_ = false;
      continue;
    }
    if (nl != nullptr && !have_partial) {
      // The common case: the whole line is in the buffer, no copy.
      *line = std::string_view(start, len);
      ++line_number_;
      return Check(line);
    }
    carry_.append(start, len);
    have_partial = true;
    if (carry_.size() > kMaxLineBytes) {
      ++line_number_;
      if (carry_.find('\0') != std::string::npos) {
        eof_ = true;  // a binary file: stop reading it at once
        begin_ = end_;
        carry_.clear();
        return Status::BadInput(fmt::format("{}:{}: binary data (NUL bytes); expected a text file",
                                            name_, line_number_));
      }
      carry_.clear();
      skipping_long_line_ = nl == nullptr;
      overlong_line_ = true;
      return Status::BadInput(fmt::format("{}:{}: line longer than {} MiB; is this the right file?",
                                          name_, line_number_, kMaxLineBytes >> 20));
    }
    if (nl != nullptr) {
      *line = carry_;
      ++line_number_;
      return Check(line);
    }
  }
}

StatusOr<bool> LineReader::Check(std::string_view* line) const {
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  if (line->find('\0') != std::string_view::npos) {
    *line = std::string_view();
    return Status::BadInput(
        fmt::format("{}:{}: binary data (NUL bytes); expected a text file", name_, line_number_));
  }
  return true;
}

}  // namespace rightsize

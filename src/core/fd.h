// UniqueFd: the owner of one file descriptor.
//
// Every descriptor rightsize opens (files, pipes, perf events) lives in a UniqueFd, so that it
// is closed on every path, early returns and errors included. Copy is deleted; a move leaves the
// source empty (-1); the destructor closes and never throws (an error from close(2) is dropped:
// the descriptor is gone either way, and nothing useful can be done about it there). A value
// type like any other: not thread-safe to mutate concurrently. Modelled on fmt's `class file`
// (fmt/os.h), without the I/O: callers use get() with the system calls they need.
#pragma once

#include <utility>

namespace rightsize {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  // Takes ownership of `fd` (a negative value: empty).
  explicit UniqueFd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() noexcept { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Hands the descriptor over to the caller, who closes it; leaves this empty.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and takes `fd` instead.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// Both ends of a pipe2(2) made with `flags` (O_CLOEXEC, O_NONBLOCK); empty ends when it failed,
// with errno set.
struct Pipe {
  UniqueFd read, write;
};
Pipe MakePipe(int flags) noexcept;

}  // namespace rightsize

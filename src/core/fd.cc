#include "core/fd.h"

#include <fcntl.h>
#include <unistd.h>

namespace rightsize {

void UniqueFd::reset(int fd) noexcept {
  int old = std::exchange(fd_, fd < 0 ? -1 : fd);
  // Not retried on EINTR: on Linux the descriptor is released even then, and a retry could
  // close one another thread has just been given.
  if (old >= 0) ::close(old);
}

Pipe MakePipe(int flags) noexcept {
  int fds[2];
  if (pipe2(fds, flags) != 0) return {};
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace rightsize

// libFuzzer target for `rightsize serve --config`: LoadServerConfig (server/server.h), the
// access file read at start (tokens, admins, user_header, max_batch_bytes). It reads a path, so
// the bytes go through an in-memory file (memfd, /proc/self/fd/N), not the disk. Seeds:
// corpus/serve_config/.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "server/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("serve_config_fuzz", 0);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  auto config = rightsize::LoadServerConfig("/proc/self/fd/" + std::to_string(fd));
  if (config.ok()) {
    (void)(config->agent_tokens.size() + config->user_tokens.size() + config->admins.size());
  } else {
    (void)config.status().message().size();
  }
  return 0;
}

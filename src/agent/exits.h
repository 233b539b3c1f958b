// ExitWatcher: how the processes the agent watches ended, though they are not its children.
//
// Only a parent can wait(2) for a process; the agent watches jobs started by SLURM or by hand.
// The kernel tells any listener (CAP_NET_ADMIN, in the host's network namespace) how every task
// exits through taskstats (generic netlink "TASKSTATS", a listener registered on every CPU):
// each exit's wait(2) status, pid and thread group. Open() registers; Drain() reads what has
// queued since the last call without blocking. A burst of exits larger than the socket buffer
// loses some notifications (counted in lost()): the jobs they belonged to end with their
// outcome unknown, as without a watcher. Not thread-safe: one owner (the agent's loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/fd.h"
#include "core/status.h"

namespace rightsize {

class ExitWatcher {
 public:
  // Unavailable (no CONFIG_TASKSTATS, no CAP_NET_ADMIN, another network namespace): the error
  // says which, for the agent to print once.
  static StatusOr<std::unique_ptr<ExitWatcher>> Open();
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;
  ~ExitWatcher();

  // Calls `fn(pid, wait_status)` for each process (thread group leader) that exited since the
  // last call; `wait_status` is as waitpid(2) writes it (WIFEXITED, WEXITSTATUS, WTERMSIG).
  void Drain(const std::function<void(int64_t pid, int wait_status)>& fn);

  int64_t lost() const { return lost_; }

 private:
  ExitWatcher(UniqueFd fd, uint16_t family, std::string cpus)
      : fd_(std::move(fd)), family_(family), cpus_(std::move(cpus)) {}
  UniqueFd fd_;
  uint16_t family_;
  std::string cpus_;  // the registered CPU list ("0-15"), deregistered on destruction
  int64_t lost_ = 0;
};

}  // namespace rightsize

#include "agent/exits.h"

#include <fmt/format.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

namespace rightsize {

namespace {

constexpr size_t kAlign = NLA_ALIGNTO;
size_t Aligned(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// One generic netlink request: header, family header, one string or u16 attribute.
std::vector<char> Request(uint16_t type, uint8_t cmd, uint16_t attr, const void* value, size_t size,
                          uint32_t seq) {
  std::vector<char> buf(NLMSG_HDRLEN + GENL_HDRLEN + Aligned(NLA_HDRLEN + size), 0);
  auto* nl = reinterpret_cast<nlmsghdr*>(buf.data());
  nl->nlmsg_len = static_cast<uint32_t>(buf.size());
  nl->nlmsg_type = type;
  nl->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nl->nlmsg_seq = seq;
  auto* genl = reinterpret_cast<genlmsghdr*>(buf.data() + NLMSG_HDRLEN);
  genl->cmd = cmd;
  genl->version = 1;
  auto* na = reinterpret_cast<nlattr*>(buf.data() + NLMSG_HDRLEN + GENL_HDRLEN);
  na->nla_type = attr;
  na->nla_len = static_cast<uint16_t>(NLA_HDRLEN + size);
  std::memcpy(reinterpret_cast<char*>(na) + NLA_HDRLEN, value, size);
  return buf;
}

// Calls fn(type, payload, length) for each attribute in [p, p + len).
template <typename Fn>
void ForEachAttr(const char* p, size_t len, Fn fn) {
  while (len >= NLA_HDRLEN) {
    nlattr a;
    std::memcpy(&a, p, sizeof a);
    if (a.nla_len < NLA_HDRLEN || a.nla_len > len) return;
    fn(a.nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, a.nla_len - NLA_HDRLEN);
    size_t step = std::min(len, Aligned(a.nla_len));
    p += step;
    len -= step;
  }
}

// Sends `req` and reads until its acknowledgement; fn gets every other message's genl payload.
Status Exchange(int fd, const std::vector<char>& req, uint32_t seq, const char* what,
                const std::function<void(const char*, size_t)>& fn) {
  if (send(fd, req.data(), req.size(), 0) < 0) {
    return Status::IoError(fmt::format("taskstats: {}: {}", what, std::strerror(errno)));
  }
  std::vector<char> buf(64 << 10);
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) continue;  // exits overran the buffer meanwhile
    if (n < 0) return Status::IoError(fmt::format("taskstats: {}: {}", what, std::strerror(errno)));
    auto left = static_cast<size_t>(n);
    for (const char* p = buf.data(); left >= NLMSG_HDRLEN;) {
      nlmsghdr h;
      std::memcpy(&h, p, sizeof h);
      if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > left) break;
      if (h.nlmsg_type == NLMSG_ERROR && h.nlmsg_seq == seq) {
        int err = 0;
        std::memcpy(&err, p + NLMSG_HDRLEN, sizeof err);
        if (err == 0) return Status::Ok();
        return Status::IoError(fmt::format("taskstats: {}: {}", what, std::strerror(-err)));
      }
      if (fn && h.nlmsg_seq == seq && h.nlmsg_len >= NLMSG_HDRLEN + GENL_HDRLEN) {
        fn(p + NLMSG_HDRLEN + GENL_HDRLEN, h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN);
      }
      size_t step = std::min(left, static_cast<size_t>(NLMSG_ALIGN(h.nlmsg_len)));
      p += step;
      left -= step;
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<ExitWatcher>> ExitWatcher::Open() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC));
  if (!fd) return Status::IoError(fmt::format("netlink: {}", std::strerror(errno)));
  // Exits come in bursts (a build, a job's end): room for tens of thousands. As root the
  // system's cap (rmem_max) does not apply.
  int rcvbuf = 8 << 20;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    return Status::IoError(fmt::format("netlink bind: {}", std::strerror(errno)));
  }
  // The family's id.
  const char name[] = TASKSTATS_GENL_NAME;
  uint16_t family = 0;
  RS_RETURN_IF_ERROR(Exchange(
      fd.get(),
      Request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, name, sizeof name, 1), 1,
      "no TASKSTATS family (a kernel without CONFIG_TASKSTATS, or another network namespace)",
      [&](const char* p, size_t len) {
        ForEachAttr(p, len, [&](uint16_t type, const char* v, size_t n) {
          if (type == CTRL_ATTR_FAMILY_ID && n >= sizeof family)
            std::memcpy(&family, v, sizeof family);
        });
      }));
  if (family == 0) return Status::IoError("taskstats: the kernel named no family id");
  // Every CPU the kernel may run a task on (it refuses CPUs that cannot exist).
  long possible = sysconf(_SC_NPROCESSORS_CONF);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  Status registered = Status::IoError("taskstats: no CPU count");
  std::string cpus;
  for (long n : {possible, online}) {
    if (n <= 0) continue;
    cpus = fmt::format("0-{}", n - 1);
    registered = Exchange(fd.get(),
                          Request(family, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
                                  cpus.c_str(), cpus.size() + 1, 2),
                          2, "registering for exits (needs CAP_NET_ADMIN)", nullptr);
    if (registered.ok()) break;
  }
  if (!registered.ok()) return registered;
  return std::unique_ptr<ExitWatcher>(new ExitWatcher(std::move(fd), family, std::move(cpus)));
}

ExitWatcher::~ExitWatcher() {
  if (!fd_) return;
  auto req = Request(family_, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
                     cpus_.c_str(), cpus_.size() + 1, 3);
  (void)send(fd_.get(), req.data(), req.size(), MSG_DONTWAIT);  // closing the socket suffices
}

void ExitWatcher::Drain(const std::function<void(int64_t pid, int wait_status)>& fn) {
  std::vector<char> buf(64 << 10);
  for (;;) {
    ssize_t n = recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {
      ++lost_;  // some exits were dropped; the rest are still queued
      continue;
    }
    if (n <= 0) return;  // EAGAIN: nothing more
    auto left = static_cast<size_t>(n);
    for (const char* p = buf.data(); left >= NLMSG_HDRLEN;) {
      nlmsghdr h;
      std::memcpy(&h, p, sizeof h);
      if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > left) break;
      if (h.nlmsg_type == family_ && h.nlmsg_len >= NLMSG_HDRLEN + GENL_HDRLEN) {
        // TASKSTATS_TYPE_AGGR_PID (each task) or _AGGR_TGID (a whole thread group), each
        // holding its id and a struct taskstats; a thread's own exit is not the process's.
        ForEachAttr(p + NLMSG_HDRLEN + GENL_HDRLEN, h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN,
                    [&](uint16_t type, const char* v, size_t len) {
                      if (type != TASKSTATS_TYPE_AGGR_PID) return;
                      ForEachAttr(v, len, [&](uint16_t inner, const char* s, size_t size) {
                        if (inner != TASKSTATS_TYPE_STATS) return;
                        taskstats ts{};
                        std::memcpy(&ts, s, std::min(size, sizeof ts));
                        if (size < offsetof(taskstats, ac_tgid) + sizeof ts.ac_tgid) return;
                        if (ts.ac_pid != ts.ac_tgid) return;
                        fn(ts.ac_pid, static_cast<int>(ts.ac_exitcode));
                      });
                    });
      }
      size_t step = std::min(left, static_cast<size_t>(NLMSG_ALIGN(h.nlmsg_len)));
      p += step;
      left -= step;
    }
  }
}

}  // namespace rightsize

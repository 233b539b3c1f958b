#include "agent/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/units.h"

namespace rightsize {
namespace {

// Bounds past which a value is garbage, not a measurement.
constexpr double kMaxCpuSeconds = 100.0 * 365 * 86400;  // a century of CPU time
constexpr int64_t kMaxBytes = int64_t{1} << 50;         // a PiB of memory or I/O
constexpr int64_t kMaxThreads = 1 << 22;

std::optional<int64_t> ToInt(std::string_view s) {
  int64_t v = 0;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

// "VmRSS:	  123456 kB" → bytes.
std::optional<int64_t> StatusKb(const std::string& text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      size_t colon = at + key.size();
      if (colon < text.size() && text[colon] == ':') {
        auto kb = ToInt(std::string_view(text).substr(colon + 1));
        if (!kb || *kb < 0 || *kb > kMaxBytes / 1024) return std::nullopt;
        return *kb * 1024;
      }
    }
    at += key.size();
  }
  return std::nullopt;
}

struct DirCloser {
  void operator()(DIR* d) const noexcept { closedir(d); }
};

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text, int64_t clock_ticks,
                                      int64_t page_bytes) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat st;
  auto pid = ToInt(text.substr(0, open));
  if (!pid || *pid <= 0) return std::nullopt;
  st.pid = *pid;
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  // Fields after the command, numbered as in proc(5): 3 state, 4 ppid, … 10 minflt, 12 majflt,
  // 14 utime, 15 stime, 20 num_threads, 22 starttime, 24 rss. The agent parses 400 of these
  // a second: no allocation per field.
  std::array<std::string_view, 22> f;
  size_t nf = 0;
  std::string_view rest = text.substr(close + 1);
  size_t i = 0;
  while (i < rest.size() && nf < f.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\n')) ++i;
    size_t j = i;
    while (j < rest.size() && rest[j] != ' ' && rest[j] != '\n') ++j;
    if (j > i) f[nf++] = rest.substr(i, j - i);
    i = j;
  }
  if (nf < 22) return std::nullopt;
  auto field = [&](int n) { return ToInt(f[static_cast<size_t>(n - 3)]); };
  st.state = f[0].empty() ? '?' : f[0][0];
  auto ppid = field(4), minflt = field(10), majflt = field(12), utime = field(14),
       stime = field(15), threads = field(20), start = field(22), rss = field(24);
  if (!ppid || !utime || !stime || !threads || !start || !rss || !minflt || !majflt) {
    return std::nullopt;
  }
  if (*ppid < 0 || *utime < 0 || *stime < 0 || *threads < 0 || *threads > kMaxThreads ||
      *start < 0 || *rss < 0 || *minflt < 0 || *majflt < 0) {
    return std::nullopt;
  }
  st.ppid = *ppid;
  st.user_s = static_cast<double>(*utime) / static_cast<double>(clock_ticks);
  st.system_s = static_cast<double>(*stime) / static_cast<double>(clock_ticks);
  if (st.user_s > kMaxCpuSeconds || st.system_s > kMaxCpuSeconds) return std::nullopt;
  if (*rss > kMaxBytes / page_bytes) return std::nullopt;
  st.rss_bytes = *rss * page_bytes;
  st.threads = *threads;
  st.start_ticks = *start;
  st.minor_faults = *minflt;
  st.major_faults = *majflt;
  return st;
}

ProcFs::ProcFs(std::string root, int64_t clock_ticks, int64_t page_bytes)
    : root_(std::move(root)),
      clock_ticks_(clock_ticks > 0 ? clock_ticks : sysconf(_SC_CLK_TCK)),
      page_bytes_(page_bytes > 0 ? page_bytes : sysconf(_SC_PAGESIZE)) {
  struct statfs fs {};
  proc_fs_ = statfs(root_.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

std::optional<std::string> ProcFs::Read(int64_t pid, const char* file, size_t max_bytes) {
  return ReadPath(root_ + "/" + std::to_string(pid) + "/" + file, max_bytes);
}

std::optional<std::string> ProcFs::ReadPath(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;  // gone, or not ours to read
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    // The kernel hands a small /proc file over in one read: a short read is the end, and saves
    // the agent a syscall per file per process per second.
    if (static_cast<size_t>(n) < sizeof(buf)) break;
    if (out.size() > max_bytes) {  // a hostile or corrupt entry: do not follow it
      ++rejected_;
      return std::nullopt;
    }
  }
  return out;
}

void ProcFs::set_keep_stat_open(bool keep) {
  keep_stat_open_ = keep;
  rlimit lim{};
  size_t cap = kMaxOpenStats;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    cap = std::min<size_t>(cap, lim.rlim_cur / 4);
  }
  max_open_stats_ = keep ? cap : 0;
  if (!keep) {
    kept_.clear();
    kept_files_ = 0;
  }
}

std::vector<int64_t> ProcFs::Pids() {
  std::vector<int64_t> pids;
  std::unique_ptr<DIR, DirCloser> dir(opendir(root_.c_str()));
  if (!dir) return pids;
  while (dirent* e = readdir(dir.get())) {
    auto pid = ToInt(e->d_name);
    if (pid && *pid > 0 && std::strspn(e->d_name, "0123456789") == std::strlen(e->d_name)) {
      pids.push_back(*pid);
    }
  }
  if (!kept_.empty()) {
    std::vector<int64_t> sorted = pids;
    std::sort(sorted.begin(), sorted.end());
    for (auto it = kept_.begin(); it != kept_.end();) {
      if (std::binary_search(sorted.begin(), sorted.end(), it->first)) {
        ++it;
      } else {
        CloseKept(it->second);
        it = kept_.erase(it);
      }
    }
  }
  return pids;
}

void ProcFs::CloseKept(std::array<UniqueFd, kKeptFiles>& fds) {
  for (UniqueFd& fd : fds) {
    if (fd) {
      fd.reset();
      --kept_files_;
    }
  }
}

size_t ProcFs::ReadKept(int64_t pid, KeptFile which, char* buf, size_t size) {
  static constexpr const char* kNames[kKeptFiles] = {"stat", "schedstat", "io"};
  auto pread_all = [&](int fd) {
    ssize_t n;
    do {
      n = pread(fd, buf, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  };
  UniqueFd* kept = nullptr;
  if (max_open_stats_ > 0) {
    auto it = kept_.find(pid);
    if (it != kept_.end()) {
      kept = &it->second[which];
      if (*kept) {
        ssize_t n = pread_all(kept->get());
        if (n > 0 && static_cast<size_t>(n) < size) return static_cast<size_t>(n);
        // The process it was opened for is gone (its pid may be someone else's now): afresh.
        CloseKept(it->second);
      }
    }
  }
  std::string path = root_ + "/" + std::to_string(pid) + "/" + kNames[which];
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return 0;
  ssize_t n = pread_all(fd.get());
  if (n <= 0 || static_cast<size_t>(n) >= size) {
    if (n >= static_cast<ssize_t>(size)) ++rejected_;
    return 0;
  }
  if (max_open_stats_ > 0 && kept_files_ < max_open_stats_) {
    if (kept == nullptr) kept = &kept_[pid][which];
    *kept = std::move(fd);
    ++kept_files_;
  }
  return static_cast<size_t>(n);
}

std::optional<int64_t> ProcFs::RunNs(int64_t pid) {
  char buf[256];
  size_t n = ReadKept(pid, kSchedStat, buf, sizeof(buf));
  if (n == 0) return std::nullopt;
  // "sum_exec_runtime run_delay timeslices": nanoseconds on a CPU, then the rest.
  int64_t ns = 0;
  auto [end, ec] = std::from_chars(buf, buf + n, ns);
  if (ec != std::errc() || end == buf || ns < 0 || (end < buf + n && *end != ' ')) {
    ++rejected_;
    return std::nullopt;
  }
  return ns;
}

std::optional<ProcStat> ProcFs::Stat(int64_t pid) {
  char buf[4096];
  size_t n = ReadKept(pid, kStat, buf, sizeof(buf));
  if (n == 0) return std::nullopt;
  auto st = ParseProcStat(std::string_view(buf, n), clock_ticks_, page_bytes_);
  if (!st || st->pid != pid) {
    ++rejected_;
    return std::nullopt;
  }
  return st;
}

std::optional<ProcMemory> ProcFs::Memory(int64_t pid, bool with_pss) {
  auto text = Read(pid, "status");
  if (!text) return std::nullopt;
  ProcMemory m;
  m.rss_bytes = StatusKb(*text, "VmRSS");
  m.peak_rss_bytes = StatusKb(*text, "VmHWM");
  m.swap_bytes = StatusKb(*text, "VmSwap");
  if (with_pss) {
    if (auto rollup = Read(pid, "smaps_rollup")) m.pss_bytes = StatusKb(*rollup, "Pss");
  }
  return m;
}

std::optional<ProcIo> ProcFs::Io(int64_t pid) {
  char buf[1024];
  size_t n = ReadKept(pid, kIo, buf, sizeof(buf));
  if (n == 0) return std::nullopt;
  const std::string text_buf(buf, n);
  const std::string* text = &text_buf;
  ProcIo io;
  for (auto [key, out] :
       {std::pair{"read_bytes", &io.read_bytes}, std::pair{"write_bytes", &io.write_bytes}}) {
    size_t at = text->find(std::string("\n") + key + ":");
    if (at == std::string::npos && text->rfind(std::string(key) + ":", 0) == 0) at = 0;
    if (at == std::string::npos) continue;
    auto v = ToInt(std::string_view(*text).substr(text->find(':', at) + 1));
    if (v && *v >= 0 && *v < kMaxBytes) {
      *out = *v;
    } else if (v) {
      ++rejected_;
    }
  }
  return io;
}

std::optional<std::string> ProcFs::Environ(int64_t pid, const std::string& name) {
  auto text = Read(pid, "environ", 1 << 20);
  if (!text) return std::nullopt;
  std::string prefix = name + "=";
  size_t at = 0;
  while (at < text->size()) {
    size_t end = text->find('\0', at);
    if (end == std::string::npos) end = text->size();
    if (text->compare(at, prefix.size(), prefix) == 0) {
      return text->substr(at + prefix.size(), end - at - prefix.size());
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> ProcFs::Cgroup(int64_t pid) {
  auto text = Read(pid, "cgroup");
  if (!text) return std::nullopt;
  std::optional<std::string> v1_memory;
  size_t at = 0;
  while (at < text->size()) {
    size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(at, end - at);
    at = end + 1;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (line.compare(0, 2, "0:") == 0 && controllers.empty() && path != "/") return path;
    if (controllers == "memory" || controllers.find("memory,") == 0 ||
        controllers.find(",memory") != std::string::npos) {
      v1_memory = path;
    }
  }
  return v1_memory;
}

std::optional<std::string> ProcFs::NetNamespace(int64_t pid) {
  std::string path =
      root_ + "/" + (pid == 0 ? std::string("self") : std::to_string(pid)) + "/ns/net";
  char buf[128];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::optional<std::string> ProcFs::Link(int64_t pid, const char* what) {
  std::string path = root_ + "/" + std::to_string(pid) + "/" + what;
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) == sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::optional<int64_t> ProcFs::NodeOomKills() {
  auto text = ReadPath(root_ + "/vmstat", 64 << 10);
  if (!text) return std::nullopt;
  size_t at = text->find("\noom_kill ");
  if (at == std::string::npos) return std::nullopt;
  at += 10;
  size_t end = text->find('\n', at);
  auto v = ToInt(std::string_view(*text).substr(at, end == std::string::npos ? end : end - at));
  if (!v || *v < 0) {
    ++rejected_;
    return std::nullopt;
  }
  return v;
}

std::optional<NetCounters> ProcFs::NetDev(int64_t pid) {
  auto text = Read(pid, "net/dev");
  if (!text) return std::nullopt;
  NetCounters c;
  size_t at = 0;
  int line_no = 0;
  while (at < text->size()) {
    size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + at, end - at);
    at = end + 1;
    if (++line_no <= 2) continue;  // two header lines
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (Trim(line.substr(0, colon)) == "lo") continue;  // the namespace talking to itself
    // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit likewise.
    std::vector<int64_t> v;
    std::string_view rest = line.substr(colon + 1);
    while (!rest.empty()) {
      rest = Trim(rest);
      size_t sp = rest.find_first_of(" \t");
      auto field = rest.substr(0, sp);
      if (field.empty()) break;
      auto n = ParseInt(field);
      if (!n || *n < 0 || *n > (int64_t{1} << 60)) {
        ++rejected_;
        return std::nullopt;
      }
      v.push_back(*n);
      rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp);
    }
    if (v.size() < 10) {
      ++rejected_;
      return std::nullopt;
    }
    c.rx_bytes += v[0];
    c.rx_packets += v[1];
    c.tx_bytes += v[8];
    c.tx_packets += v[9];
  }
  return c;
}

std::optional<int64_t> ProcFs::LastPid() {
  if (!same_pid_namespace_) {
    // loadavg's last pid is the reader's pid namespace's: it speaks for `root` only when that
    // is the agent's own (not a host /proc mounted into a container without the host's pids),
    // i.e. when `root` numbers this process as it numbers itself.
    char buf[32];
    ssize_t n = readlink((root_ + "/self").c_str(), buf, sizeof(buf));
    same_pid_namespace_ =
        n > 0 && ToInt(std::string_view(buf, static_cast<size_t>(n))) == int64_t{getpid()};
  }
  if (!*same_pid_namespace_) return std::nullopt;
  // "0.52 0.58 0.59 1/467 12345": the last field is the most recently created pid.
  auto text = ReadPath(root_ + "/loadavg", 256);
  if (!text) return std::nullopt;
  size_t space = text->find_last_of(' ');
  if (space == std::string::npos) return std::nullopt;
  auto pid = ToInt(std::string_view(*text).substr(space + 1));
  if (!pid || *pid < 0) {
    ++rejected_;
    return std::nullopt;
  }
  return pid;
}

std::optional<double> ProcFs::Uptime() {
  auto text = ReadPath(root_ + "/uptime", 256);
  if (!text) return std::nullopt;
  double v = 0;
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, v);
  if (ec != std::errc() || p == text->data() || v < 0 || v > kMaxCpuSeconds) {
    ++rejected_;
    return std::nullopt;
  }
  return v;
}

std::optional<double> ProcFs::AgeS(const ProcStat& st, double uptime_s) const {
  double started = static_cast<double>(st.start_ticks) / static_cast<double>(clock_ticks_);
  // A start after the uptime is a clock or fixture mismatch, not a process from the future.
  if (started > uptime_s + 1) return std::nullopt;
  return std::max(0.0, uptime_s - started);
}

std::optional<int64_t> ProcFs::Uid(int64_t pid) {
  auto text = Read(pid, "status");
  if (!text) return std::nullopt;
  size_t at = text->find("\nUid:");
  if (at == std::string::npos) return std::nullopt;
  size_t start = text->find_first_not_of(" \t", at + 5);
  if (start == std::string::npos) return std::nullopt;
  size_t end = text->find_first_of(" \t\n", start);
  return ParseInt(std::string_view(*text).substr(start, end - start));
}

std::optional<int64_t> ProcFs::OpenFiles(int64_t pid) {
  std::string path = root_ + "/" + std::to_string(pid) + "/fd";
  if (proc_fs_) {
    // Linux 6.2+ gives the count as the fd directory's size: one stat instead of an open, two
    // getdents, an fstat and a close. Older kernels say 0 there (so does a process with no
    // open file): then the directory is listed.
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return std::nullopt;
    if (st.st_size > 0) return static_cast<int64_t>(st.st_size);
  }
  std::unique_ptr<DIR, DirCloser> dir(opendir(path.c_str()));
  if (!dir) return std::nullopt;
  int64_t n = 0;
  while (dirent* e = readdir(dir.get())) {
    if (e->d_name[0] != '.') ++n;
  }
  return n;
}

std::vector<ProcStat> ProcFs::Tree(int64_t root) {
  std::multimap<int64_t, ProcStat> by_parent;
  std::optional<ProcStat> top;
  for (int64_t pid : Pids()) {
    auto st = Stat(pid);
    if (!st) continue;
    if (pid == root) top = *st;
    by_parent.emplace(st->ppid, std::move(*st));
  }
  std::vector<ProcStat> out;
  if (!top) return out;
  out.push_back(*top);
  for (size_t i = 0; i < out.size(); ++i) {
    auto [b, e] = by_parent.equal_range(out[i].pid);
    for (auto it = b; it != e; ++it) {
      if (it->second.pid != root) out.push_back(it->second);
    }
  }
  return out;
}

}  // namespace rightsize

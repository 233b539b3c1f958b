#include "agent/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <re2/re2.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <functional>
#include <string>

#include "core/fd.h"

namespace rightsize {
namespace {

// Larger than any cgroup file worth reading (io.stat of a node with many disks is a few KiB).
constexpr size_t kMaxFileBytes = 1 << 20;

// Reads `fd` from offset 0 to its end into `out` with pread (a kept descriptor is re-read from the
// start). A counter file is one record, which the kernel hands over in one read: with
// `one_record`, a short read is the end, which saves a second call per file (a list of records,
// cgroup.procs, may come in short reads: it is read up to the end). False on an error (ENODEV:
// the cgroup was removed).
bool PreadAll(int fd, std::string* out, bool one_record) {
  out->clear();
  char buf[4096];
  while (out->size() <= kMaxFileBytes) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(out->size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    out->append(buf, static_cast<size_t>(n));
    if (n == 0 || (one_record && static_cast<size_t>(n) < sizeof buf)) break;
  }
  return true;
}

// A pseudo-file read whole with open/read: a stream's locale and buffer set-up cost more than
// the read itself, and the agent reads a dozen of these per container every second.
bool ReadSmallFile(const std::string& path, std::string* out, bool one_record) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.valid() && PreadAll(fd.get(), out, one_record);
}

constexpr int64_t kMaxBytes = int64_t{1} << 50;
// cgroup v1 reports "no limit" as a page-aligned LONG_MAX.
constexpr int64_t kUnlimitedV1 = int64_t{1} << 62;

std::optional<int64_t> ParseInt(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<CgroupJob> JobFromCgroupPath(std::string_view path) {
  static const RE2 slurm_v1(R"re((.*/slurm[^/]*/uid_(\d+)/job_(\d+))(?:/step_([\w]+))?)re");
  static const RE2 slurm_v2(R"re((.*/slurmstepd\.scope/job_(\d+))(?:/step_([\w]+))?)re");
  static const RE2 kube_fs(
      R"re((.*/kubepods(?:/(burstable|besteffort))?/pod([0-9a-f-]{36}))(/([0-9a-f]{12,64}))?(?:/.*)?)re");
  static const RE2 kube_systemd(
      R"re((.*/kubepods(?:-(burstable|besteffort))?-pod([0-9a-f_]{36})\.slice)(/(?:cri-containerd|docker|crio)-([0-9a-f]{12,64})\.scope)?(?:/.*)?)re");
  CgroupJob job;
  std::string base, uid, id, step, qos, container, container_part;
  if (RE2::PartialMatch(path, slurm_v1, &base, &uid, &id, &step)) {
    job.uid = uid;
  } else if (RE2::PartialMatch(path, slurm_v2, &base, &id, &step)) {
  } else if (RE2::FullMatch(path, kube_fs, &base, &qos, &id, &container_part, &container) ||
             RE2::FullMatch(path, kube_systemd, &base, &qos, &id, &container_part, &container)) {
    job.kind = CgroupJob::Kind::kKubernetes;
    for (char& c : id) {
      if (c == '_') c = '-';  // the systemd driver writes the pod UID with underscores
    }
    job.qos = qos.empty() ? "guaranteed" : qos;
    job.container_id = container;
    // Seen from a container's own cgroup namespace, a host path starts with "/..": the kubepods
    // hierarchy then hangs from the root the agent was given.
    if (size_t at = base.find("/kubepods");
        at != std::string::npos && at > 0 && base.compare(0, 3, "/..") == 0) {
      base.erase(0, at);
    }
    if (!container.empty()) job.container_path = base + container_part;
  } else {
    return std::nullopt;
  }
  job.job_id = id;
  job.step = step;
  job.path = base;
  return job;
}

std::vector<CgroupJob> CgroupFs::KubeContainers(bool relist_all) {
  namespace fs = std::filesystem;
  std::vector<CgroupJob> out;
  std::map<std::string, PodDir> pod_dirs;
  const fs::path top = v2_ ? fs::path(root_) : fs::path(root_) / "memory";
  // kubepods → qos → pod → container: four levels at most below the hierarchy's root.
  std::function<void(const fs::path&, const std::string&, int)> walk = [&](const fs::path& dir,
                                                                           const std::string& rel,
                                                                           int depth) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      std::string name = it->path().filename().string();
      if (depth == 0 && name.rfind("kubepods", 0) != 0) continue;
      std::string child = rel + "/" + name;
      if (!relist_all) {
        // A pod the last call listed: unchanged when its link count is (see below), which
        // spares matching its name again.
        if (auto last = pod_dirs_.find(child); last != pod_dirs_.end()) {
          struct stat st {};
          if (stat(it->path().c_str(), &st) != 0) continue;  // removed meanwhile
          if (st.st_nlink >= 2 && last->second.links == st.st_nlink) {
            out.insert(out.end(), last->second.containers.begin(), last->second.containers.end());
            pod_dirs.insert(pod_dirs_.extract(last));
            continue;
          }
        }
      }
      auto job = JobFromCgroupPath(child);
      if (job && !job->container_path.empty()) {
        if (job->container_path == child) out.push_back(std::move(*job));
        continue;  // a container's own sub-cgroups are the container's
      }
      if (job && job->path == child) {
        // A pod: its link count is 2 + its subdirectories (on the kernel's cgroup file
        // systems, ext4, tmpfs), so an unchanged count means the same containers, unless one
        // replaced another. A file system that counts 1 for every directory says nothing.
        struct stat st {};
        if (stat(it->path().c_str(), &st) != 0) continue;  // removed meanwhile
        auto last = pod_dirs_.find(child);
        if (!relist_all && last != pod_dirs_.end() && st.st_nlink >= 2 &&
            last->second.links == st.st_nlink) {
          out.insert(out.end(), last->second.containers.begin(), last->second.containers.end());
          pod_dirs.insert(pod_dirs_.extract(last));
          continue;
        }
        size_t first = out.size();
        if (depth < 3) walk(it->path(), child, depth + 1);
        pod_dirs[child] = {st.st_nlink, {out.begin() + static_cast<ptrdiff_t>(first), out.end()}};
        continue;
      }
      if (depth < 3) walk(it->path(), child, depth + 1);
    }
  };
  walk(top, "", 0);
  pod_dirs_ = std::move(pod_dirs);  // pods gone are forgotten
  std::sort(out.begin(), out.end(), [](const CgroupJob& a, const CgroupJob& b) {
    return a.container_path < b.container_path;
  });
  return out;
}

bool CgroupFs::Exists(const std::string& path) const {
  struct stat st {};
  return stat(Dir(path, "memory").c_str(), &st) == 0;
}

std::vector<int64_t> CgroupFs::Procs(const std::string& path) const {
  std::vector<int64_t> pids;
  std::string text;
  if (!ReadSmallFile(Dir(path, "memory") + "/cgroup.procs", &text, false)) return pids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    int64_t pid = 0;
    auto [next, ec] = std::from_chars(p, end, pid);
    if (ec != std::errc()) {
      ++p;  // a newline
      continue;
    }
    if (pid > 0) pids.push_back(pid);  // 0: a process outside our PID namespace
    p = next;
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

CgroupFs::CgroupFs(std::string root) : root_(std::move(root)) {
  struct stat st {};
  v2_ = stat((root_ + "/cgroup.controllers").c_str(), &st) == 0;
  struct statfs fs {};
  const std::string top = v2_ ? root_ : root_ + "/memory";
  cgroup_fs_ = statfs(top.c_str(), &fs) == 0 &&
               (fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC);
}

void CgroupFs::set_keep_open(bool keep) {
  kept_.clear();
  max_kept_ = 0;
  if (!keep || !cgroup_fs_) return;
  rlimit lim{};
  max_kept_ = kMaxKept;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    max_kept_ = std::min<size_t>(max_kept_, lim.rlim_cur / 8);
  }
}

void CgroupFs::Release(const std::string& path) {
  if (kept_.empty()) return;
  for (const char* controller : {"memory", "cpu", "cpuacct", "pids", "blkio"}) {
    const std::string prefix = Dir(path, controller) + "/";
    auto it = kept_.lower_bound(prefix);
    while (it != kept_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
      it = kept_.erase(it);
    }
    if (v2_) break;  // one directory for every controller
  }
}

bool CgroupFs::ReadFile(const std::string& file, std::string* out) {
  if (max_kept_ == 0) return ReadSmallFile(file, out, true);
  if (auto it = kept_.find(file); it != kept_.end()) {
    if (!it->second.valid()) return false;  // not there when the cgroup was first read
    if (PreadAll(it->second.get(), out, true)) return true;
    kept_.erase(it);  // the cgroup was removed, and maybe made again: the path says which
  }
  UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT && in_live_cgroup_ && kept_.size() < max_kept_) {
    // Missing while its cgroup is there (no blkio group for the container, a kernel without
    // memory.peak): it does not appear later. Remembered (an invalid descriptor) until
    // Release(), so it is not looked up again every few seconds.
    kept_.emplace(file, UniqueFd());
    return false;
  }
  if (!fd.valid() || !PreadAll(fd.get(), out, true)) return false;
  if (kept_.size() < max_kept_) kept_.emplace(file, std::move(fd));
  return true;
}

std::optional<int64_t> CgroupFs::Tasks(const std::string& path) {
  std::string text;
  if (!ReadFile(Dir(path, "pids") + "/pids.current", &text)) return std::nullopt;
  return IntIn(text);
}

std::string CgroupFs::Dir(const std::string& path, const char* controller) const {
  return v2_ ? root_ + path : root_ + "/" + controller + path;
}

std::optional<std::string> CgroupFs::ReadText(const std::string& file) {
  std::string text;
  if (!ReadFile(file, &text)) return std::nullopt;
  if (text.size() > kMaxFileBytes) {
    ++rejected_;
    return std::nullopt;
  }
  return text;
}

std::optional<int64_t> CgroupFs::ReadInt(const std::string& file) {
  auto text = ReadText(file);
  if (!text) return std::nullopt;
  return IntIn(*text);
}

std::optional<int64_t> CgroupFs::IntIn(const std::string& text) {
  if (text.rfind("max", 0) == 0) return std::nullopt;  // v2 "no limit"
  auto v = ParseInt(text);
  if (!v || *v < 0) {
    ++rejected_;
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> CgroupFs::KeyValue(const std::string& file, std::string_view key) {
  auto text = ReadText(file);
  if (!text) return std::nullopt;
  return KeyIn(*text, key);
}

std::optional<int64_t> CgroupFs::KeyIn(std::string_view text, std::string_view key) {
  // "key value" lines (memory.events, cpu.stat, memory.oom_control).
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t space = line.find(' ');
    if (space == std::string_view::npos || line.substr(0, space) != key) continue;
    std::string_view value = line.substr(space + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    auto n = ParseInt(value);
    if (!n || *n < 0) {
      ++rejected_;
      return std::nullopt;
    }
    return n;
  }
  return std::nullopt;
}

std::optional<CgroupCounters> CgroupFs::Read(const std::string& path, bool all) {
  CgroupCounters c;
  std::string mem = Dir(path, "memory");
  auto sane = [&](std::optional<int64_t> v) -> std::optional<int64_t> {
    if (v && *v > kMaxBytes) {
      if (*v < kUnlimitedV1) ++rejected_;  // not the "unlimited" marker: garbage
      return std::nullopt;
    }
    return v;
  };
  // The memory in use first: when it cannot be read, whether the cgroup is still there says if
  // the job ended (one stat only then, not one per read).
  auto usage = ReadText(mem + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!usage && !Exists(path)) return std::nullopt;  // the job ended
  if (usage) c.memory_bytes = sane(IntIn(*usage));
  // The cgroup is there: a file missing below is missing for good (see ReadFile).
  struct LiveCgroup {
    bool* flag;
    ~LiveCgroup() { *flag = false; }
  } live{&in_live_cgroup_};
  in_live_cgroup_ = usage.has_value();
  if (v2_) {
    if (!all) {
      if (auto stat = ReadText(mem + "/cpu.stat")) {
        if (auto usec = KeyIn(*stat, "usage_usec")) c.cpu_s = *usec / 1e6;
      }
      return c;
    }
    c.memory_peak_bytes = sane(ReadInt(mem + "/memory.peak"));
    c.memory_limit_bytes = sane(ReadInt(mem + "/memory.max"));
    c.swap_bytes = sane(ReadInt(mem + "/memory.swap.current"));
    c.oom_kills = KeyValue(mem + "/memory.events", "oom_kill");
    if (auto stat = ReadText(mem + "/cpu.stat")) {  // one read for its three counters
      if (auto usec = KeyIn(*stat, "usage_usec")) c.cpu_s = *usec / 1e6;
      c.throttled_periods = KeyIn(*stat, "nr_throttled");
      if (auto usec = KeyIn(*stat, "throttled_usec")) c.throttled_s = *usec / 1e6;
    }
    // io.stat: "8:0 rbytes=… wbytes=… rios=…" per device.
    if (auto io = ReadText(mem + "/io.stat")) {
      static const RE2 re(R"re(rbytes=(\d+) wbytes=(\d+))re");
      re2::StringPiece in(*io);
      int64_t r = 0, w = 0, total_r = 0, total_w = 0;
      while (RE2::FindAndConsume(&in, re, &r, &w)) {
        total_r += r;
        total_w += w;
      }
      c.io_read_bytes = total_r;
      c.io_write_bytes = total_w;
    }
  } else {
    std::string cpu = Dir(path, "cpuacct");
    if (auto ns = ReadInt(cpu + "/cpuacct.usage")) c.cpu_s = static_cast<double>(*ns) / 1e9;
    if (!all) return c;
    c.memory_peak_bytes = sane(ReadInt(mem + "/memory.max_usage_in_bytes"));
    c.memory_limit_bytes = sane(ReadInt(mem + "/memory.limit_in_bytes"));
    c.oom_kills = KeyValue(mem + "/memory.oom_control", "oom_kill");
    std::string cpu_ctl = Dir(path, "cpu");
    if (auto stat = ReadText(cpu_ctl + "/cpu.stat")) {
      c.throttled_periods = KeyIn(*stat, "nr_throttled");
      if (auto ns = KeyIn(*stat, "throttled_time")) c.throttled_s = *ns / 1e9;
    }
    // blkio: "8:0 Read 1234" lines.
    if (auto io = ReadText(Dir(path, "blkio") + "/blkio.throttle.io_service_bytes")) {
      static const RE2 re(R"re(\d+:\d+ (Read|Write) (\d+))re");
      re2::StringPiece in(*io);
      std::string op;
      int64_t n = 0, total_r = 0, total_w = 0;
      while (RE2::FindAndConsume(&in, re, &op, &n)) (op == "Read" ? total_r : total_w) += n;
      c.io_read_bytes = total_r;
      c.io_write_bytes = total_w;
    }
  }
  return c;
}

}  // namespace rightsize

// Cgroups: which job a cgroup belongs to, and what the kernel counted for it.
//
// JobFromCgroupPath recognises SLURM steps under cgroup v1 (/slurm/uid_U/job_J/step_S) and v2
// (/system.slice/slurmstepd.scope/job_J/step_S), and Kubernetes pods under both cgroup drivers
// (/kubepods/burstable/pod<uid>/<container>, kubepods-burstable-pod<uid>.slice/cri-…scope),
// with the pod UID, container id and QoS class; KubeContainers() lists every container's cgroup
// under the kubepods hierarchy, for an agent that watches pods rather than processes (a
// container's cgroup is its identity, and the kubelet names it). CgroupFs reads a cgroup's memory,
// CPU, I/O and OOM-kill counters from a hierarchy root it is given (/sys/fs/cgroup, or a fixture
// tree), v1 or v2. A cgroup that vanished gives nullopt; a value that does not parse or is absurd
// is left out and counted in rejected(). Not thread-safe: one owner.
//
// With set_keep_open (the agent, which reads every container's counters every second), the
// counter files are kept open and re-read from offset 0 with pread: no path walk, open or close
// per read. Only on a real cgroup file system: there a removed cgroup's open files fail with
// ENODEV, also when a cgroup of the same path was made since, so a kept file is dropped and the
// path opened afresh (a fixture tree of plain files would go on reading a deleted file). The
// process lists (cgroup.procs) are never kept: on cgroup v1 an open file re-reads the pid list
// the kernel cached for it, which stays cached while it is read again within a second (measured:
// a process that joined was not listed).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fd.h"

namespace rightsize {

struct CgroupJob {
  enum class Kind { kSlurm, kKubernetes };
  Kind kind = Kind::kSlurm;
  std::string job_id;        // SLURM job id, or the pod UID
  std::string step;          // "0", "batch", "extern"; "" for the job itself
  std::string uid;           // SLURM v1 paths carry the user's uid
  std::string container_id;  // Kubernetes
  std::string qos;           // "guaranteed", "burstable", "besteffort"
  std::string path;          // the cgroup path of the job (or pod) itself
  // Kubernetes: the container's own cgroup ("" for a path at the pod's level). A path seen
  // from another cgroup namespace ("/../../kubepods/…") is given from the hierarchy's root.
  std::string container_path;
};

// The job a cgroup path belongs to; nullopt for anything else.
std::optional<CgroupJob> JobFromCgroupPath(std::string_view path);

struct CgroupCounters {
  std::optional<int64_t> memory_bytes;       // memory.current / memory.usage_in_bytes
  std::optional<int64_t> memory_peak_bytes;  // memory.peak / memory.max_usage_in_bytes
  std::optional<int64_t> memory_limit_bytes;
  std::optional<int64_t> swap_bytes;
  std::optional<int64_t> oom_kills;  // memory.events oom_kill / memory.oom_control oom_kill
  std::optional<double> cpu_s;       // user + system
  std::optional<int64_t> throttled_periods;
  std::optional<double> throttled_s;
  std::optional<int64_t> io_read_bytes, io_write_bytes;
};

class CgroupFs {
 public:
  explicit CgroupFs(std::string root = "/sys/fs/cgroup");
  bool v2() const { return v2_; }
  // The counters of the cgroup at `path` (as /proc/PID/cgroup writes it); nullopt when gone.
  // `all` false: only what changes from second to second (memory in use and CPU time); the
  // peak, limit, OOM kills, throttling and I/O (counters that only grow, or rarely change) are
  // left unset, for a caller that reads them every few samples.
  std::optional<CgroupCounters> Read(const std::string& path, bool all = true);
  // The directory of `path` for `controller` ("memory", "cpuacct") on this hierarchy.
  std::string Dir(const std::string& path, const char* controller) const;
  int64_t rejected() const { return rejected_; }

  // Every Kubernetes container's cgroup on this hierarchy (v1: under the memory controller),
  // for both kubelet cgroup drivers: kubepods[/<qos>]/pod<UID>/<id> and
  // kubepods.slice/…/kubepods[-<qos>]-pod<UID>.slice/{cri-containerd,crio,docker}-<id>.scope.
  // Nothing (not an error) where there is no kubepods hierarchy.
  // With `relist_all` false, a pod's directory whose count of subdirectories (its link count) is
  // the same as at the last call is not listed again: its containers are those the last call
  // found there. A container that replaced another of the same pod between two calls is then
  // found only by a call with `relist_all`.
  std::vector<CgroupJob> KubeContainers(bool relist_all = true);
  // Whether the cgroup `path` (as JobFromCgroupPath gives it) is still there.
  bool Exists(const std::string& path) const;
  // The processes in the cgroup at `path` (its cgroup.procs; v1: the memory controller's), as
  // the host's PID namespace numbers them; empty when it has none or is gone.
  std::vector<int64_t> Procs(const std::string& path) const;
  // The tasks (threads) in the cgroup at `path`, from its pids controller (pids.current): a
  // change says the process list may have changed, for a fraction of the cost of listing it.
  // nullopt without a pids controller for it, or when it is gone.
  std::optional<int64_t> Tasks(const std::string& path);

  // Keeps the counter files open (see the file comment): at most kMaxKept files, and never more
  // than an eighth of the process's file limit; beyond, files are opened for each read. No effect
  // unless the root is a cgroup (v1 or v2) file system.
  void set_keep_open(bool keep);
  static constexpr size_t kMaxKept = 4096;
  bool keeps_open() const { return max_kept_ > 0; }
  // Closes the kept files of the cgroup at `path` (a job that ended).
  void Release(const std::string& path);

 private:
  // A counter file's text, through its kept descriptor when there is one.
  bool ReadFile(const std::string& file, std::string* out);
  std::optional<int64_t> ReadInt(const std::string& file);
  // A file's text as a count (nullopt for v2's "max"; garbage is counted in rejected()).
  std::optional<int64_t> IntIn(const std::string& text);
  std::optional<std::string> ReadText(const std::string& file);
  std::optional<int64_t> KeyValue(const std::string& file, std::string_view key);
  // The value of `key` in "key value" lines; nullopt when absent or not a count.
  std::optional<int64_t> KeyIn(std::string_view text, std::string_view key);
  std::string root_;
  bool v2_ = false;
  bool cgroup_fs_ = false;  // the root is a kernel cgroup file system, not a fixture tree
  size_t max_kept_ = 0;
  // File path -> descriptor; an invalid one for a file missing from a live cgroup.
  std::map<std::string, UniqueFd> kept_;
  bool in_live_cgroup_ = false;  // Read() has read the cgroup's memory in use just now
  // KubeContainers: per pod directory, its link count and containers at the last call.
  struct PodDir {
    uint64_t links = 0;
    std::vector<CgroupJob> containers;
  };
  std::map<std::string, PodDir> pod_dirs_;
  int64_t rejected_ = 0;
};

}  // namespace rightsize

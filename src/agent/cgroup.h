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
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  std::vector<CgroupJob> KubeContainers() const;
  // Whether the cgroup `path` (as JobFromCgroupPath gives it) is still there.
  bool Exists(const std::string& path) const;
  // The processes in the cgroup at `path` (its cgroup.procs; v1: the memory controller's), as
  // the host's PID namespace numbers them; empty when it has none or is gone.
  std::vector<int64_t> Procs(const std::string& path) const;

 private:
  std::optional<int64_t> ReadInt(const std::string& file);
  std::optional<std::string> ReadText(const std::string& file);
  std::optional<int64_t> KeyValue(const std::string& file, std::string_view key);
  // The value of `key` in "key value" lines; nullopt when absent or not a count.
  std::optional<int64_t> KeyIn(std::string_view text, std::string_view key);
  std::string root_;
  bool v2_ = false;
  int64_t rejected_ = 0;
};

}  // namespace rightsize

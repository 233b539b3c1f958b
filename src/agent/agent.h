// Agent: watches every job on a node. Each cycle it finds the jobs (SLURM steps and Kubernetes
// pods by their cgroup paths, SLURM jobs under proctrack/linuxproc by SLURM_JOB_ID in the
// processes' environment), samples each with a JobMonitor, and when a job is gone turns its
// monitor into the job's usage record.
//
// A SLURM job's record carries how it ended as far as the node can tell, before accounting
// says (sacct's record replaces the agent's state when it arrives; see store.h): its cgroup's
// OOM kills make it OUT_OF_MEMORY; otherwise its main process's (the oldest one's) exit, read
// by an ExitWatcher, makes it COMPLETED (0) or FAILED (the exit code, or the signal, with
// OUT_OF_MEMORY for a SIGKILL while the node's OOM killer struck). Without either the state
// stays empty: "ended, state from accounting pending". A failed job is diagnosed from its
// output file (found by diagnose/job_output.h from where its stdout pointed and its working
// directory) and the telemetry, like a container (TakeDiagnoses, shipped with the record).
//
// With options.kubernetes (a DaemonSet), the jobs are the containers under the kubepods cgroup
// hierarchy instead (CgroupFs::KubeContainers, either cgroup driver, v1 or v2), each named by the
// kubelet (Kubelet: "<namespace>/<pod>/<container>", its request, the GPUs it holds). A
// container is watched from the cycle its cgroup appears; one the kubelet never names within
// kUnnamedGiveUpS (a pod's sandbox) is dropped. It ends when its cgroup goes, or when the
// kubelet says it terminated and no process is left in it; its record waits up to kEndWaitS for
// the kubelet to report how it ended (exit code, reason), then carries its cgroup's own memory
// peak and OOM kills, state COMPLETED, FAILED or OUT_OF_MEMORY. A failed container is diagnosed
// from its logs under options.pod_logs_dir (TakeDiagnoses). Metrics() renders the live view in
// Prometheus text format with a cap on the number of jobs exported (cardinality). Not thread-safe:
// the caller serialises Cycle() and Metrics() (the CLI holds a mutex around both).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/cgroup.h"
#include "agent/dcgm.h"
#include "agent/exits.h"
#include "agent/gpu.h"
#include "agent/kubelet.h"
#include "agent/monitor.h"
#include "agent/proc.h"
#include "agent/rapl.h"
#include "agent/stacks.h"
#include "core/job.h"
#include "core/telemetry.h"
#include "diagnose/diagnosis.h"

namespace rightsize {

// One job found on the node: its identity and its processes now.
struct DiscoveredJob {
  std::string key;   // "slurm:123", "k8s:<pod uid>"
  std::string kind;  // "slurm", "kubernetes"
  std::string job_id;
  std::string cgroup;  // the job's cgroup path ("" under proctrack/linuxproc)
  std::string qos;     // Kubernetes QoS class
  std::vector<int64_t> pids;
  std::vector<ProcStat> stats;  // the processes' stat as discovery read it (with a cache)
  // Kubernetes: the cgroup's task count (pids.current) when this list was made; nullopt
  // without a pids controller.
  std::optional<int64_t> tasks;
};

// What discovery learned about each process, so the next cycle reads only its stat: a process
// (pid + start time) keeps its job for life.
struct DiscoveryCache {
  struct Entry {
    int64_t start_ticks = 0;
    std::optional<DiscoveredJob> job;  // identity only (pids empty); nullopt: not a job's
    // A job's process: its last stat, and its main thread's CPU time (schedstat) when that
    // stat was current (-1: unknown).
    std::optional<ProcStat> last;
    int64_t run_ns = -1;
  };
  std::map<int64_t, Entry> by_pid;
  int64_t cycle = 0;
  // The last pid created when /proc was last listed (-1: unknown). While it stays the same no
  // process has been created, and the known processes are all there is to read: /proc is
  // listed again only when it moves, or every 30th cycle.
  int64_t last_pid = -1;
  // A sleeping process's stat is re-read at least this often (in cycles), whatever schedstat
  // says: a resident size that shrinks under memory pressure without the process running.
  static constexpr int64_t kFullStatEvery = 10;
};

// The jobs on the node now, from every process's cgroup and (for SLURM without cgroups) its
// SLURM_JOB_ID. Processes that vanish while being read are skipped. With a cache, a process
// seen before costs one read of its stat; a single-threaded job process that has not run since
// (its schedstat CPU time unchanged: its CPU time, memory and state cannot have grown) costs one
// read of schedstat, a quarter of that, and keeps its last stat.
std::vector<DiscoveredJob> DiscoverJobs(ProcFs& proc, DiscoveryCache* cache = nullptr);

struct AgentOptions {
  std::string cluster;             // for the usage records ("" = the node's name)
  size_t max_exported_jobs = 500;  // jobs in /metrics; the rest are counted, not exported
  bool ship = false;               // keep new samples for TakeTelemetry() (a server to ship to)
  bool sample_stacks = false;      // sample each job's call stacks (perf events, 49 Hz)
  // Watch the kubepods containers (named through set_kubelet) instead of processes.
  bool kubernetes = false;
  std::string pod_logs_dir = "/var/log/pods";  // the kubelet's podLogsDir
};

// A failed container's record and the diagnosis of its failure.
struct DiagnosedRecord {
  JobRecord job;
  Diagnosis diagnosis;
};

class Agent {
 public:
  // `gpu` may be null.
  Agent(ProcFs* proc, CgroupFs* cgroups, GpuSource* gpu, AgentOptions options);

  // DCGM's profiling fields for every job watched from now on (see JobMonitor::set_dcgm). May be
  // null; it must outlive the agent.
  void set_dcgm(DcgmSource* dcgm) { dcgm_ = dcgm; }
  // How the watched processes exit (SLURM jobs; see the file comment). May be null (their end
  // state is then left to accounting); it must outlive the agent.
  void set_exits(ExitWatcher* exits) { exits_ = exits; }
  // The node's RAPL meter, read once a cycle and shared out to the jobs by their CPU time (see
  // JobMonitor). May be null; it must outlive the agent.
  void set_cpu_energy(CpuEnergyMeter* meter) { cpu_energy_ = meter; }
  // Names the containers with options.kubernetes. May be null (nothing is named, so nothing is
  // recorded); it must outlive the agent.
  void set_kubelet(Kubelet* kubelet) { kubelet_ = kubelet; }

  // Kubernetes: how long a container may stay unnamed before it is taken for a pod's sandbox,
  // and how long an ended container's record waits for the kubelet's word on how it ended.
  static constexpr double kUnnamedGiveUpS = 30;
  static constexpr double kEndWaitS = 30;
  // Kubernetes: the kubelet is asked every this many cycles, and whenever a container is new,
  // unnamed or ending.
  static constexpr int64_t kKubeletEveryCycles = 10;
  static constexpr int64_t kWalkEveryCycles = 5;  // the kubepods tree walk (Kubernetes)
  // Every pod's directory listed again (not only those whose count of containers changed).
  static constexpr int64_t kRelistAllEveryCycles = 30;
  // Kubernetes: a container's memory and CPU are its cgroup's, read every cycle; its process
  // list (cgroup.procs) is read again when its task count changed, and in any case, with its
  // processes' stat (resident size, threads), every this many cycles. In between, a process
  // new to the list has its stat read at once and the others keep their last one.
  static constexpr int64_t kProcessesEveryCycles = 10;

  // One sampling cycle at `now_s` (seconds on the caller's clock; `now_unix` for records).
  // Returns the usage records of the jobs that ended since the last cycle.
  std::vector<JobRecord> Cycle(double now_s, int64_t now_unix);

  // For shipping (options.ship): each running job's record (what the agent knows of it: ids,
  // user, name and request from its SLURM environment, start) with the samples and stacks
  // taken since the last call. Sample times are Unix seconds.
  std::vector<JobTelemetry> TakeTelemetry();
  // The diagnoses of the failed jobs and containers that ended since the last call.
  std::vector<DiagnosedRecord> TakeDiagnoses() { return std::exchange(diagnosed_, {}); }
  // Why the kubelet did not answer at the last asking ("" when it did).
  const std::string& kubelet_error() const { return kubelet_error_; }

  // Why stack sampling is off ("" when on or not asked for).
  const std::string& stacks_note() const { return stacks_note_; }

  // Prometheus text exposition format (version 0.0.4).
  std::string Metrics() const;

  size_t jobs() const { return jobs_.size(); }

 private:
  struct Watched {
    DiscoveredJob job;
    std::unique_ptr<JobMonitor> monitor;
    std::unique_ptr<StackSampler> stacks;   // when options.sample_stacks and perf allows it
    std::map<std::string, int64_t> folded;  // stacks drained since the last TakeTelemetry
    JobRecord record;                       // identity and request, read once
    double first_s = 0, last_s = 0;
    int64_t first_unix = 0;
    // Kubernetes: the container's id and pod, what the kubelet said of it (once named), and
    // when an ended container stops waiting for its termination.
    std::string container_id, pod_uid;
    std::optional<KubeContainer> kube;
    double seen_s = 0, end_wait_until_s = 0;
    // SLURM: the id discovery knows the job by ("70" for the array task 6_64); its main
    // process (the oldest: the batch script), where that process's stdout and working
    // directory were, and how its processes exited (pid -> wait status, from exits_).
    std::string raw_id;
    int64_t root_pid = 0;
    std::string stdout_path, work_dir;
    std::map<int64_t, int> exits;
    // The node's OOM kill count read before the last cycle that saw the job's processes.
    std::optional<int64_t> node_oom_before;
  };
  // A SLURM job's end state from what the agent saw (see the file comment).
  JobOutcome AgentOutcome(const Watched& w);
  // The diagnosis of an ended job that failed, from its output `log_files` and telemetry.
  Diagnosis DiagnoseEnded(const Watched& w, const JobRecord& r,
                          const std::vector<std::string>& log_files, bool cri_logs);
  JobRecord Identify(const DiscoveredJob& job, int64_t first_unix);
  // The Kubernetes cycle (see the file comment).
  std::vector<JobRecord> KubeCycle(double now_s, int64_t now_unix);
  // The containers under kubepods now, with their processes (not those ended or ignored);
  // `present` gets every container's key.
  std::vector<DiscoveredJob> DiscoverContainers(std::set<std::string>* present);
  // This cycle's reading of the node's GPUs (none when `any` is false).
  void SampleNodeGpus(bool any, std::optional<GpuSnapshot>* nvml,
                      std::optional<DcgmSnapshot>* dcgm);
  // A new Watched for `job`.
  Watched Watch(const DiscoveredJob& job, double now_s, int64_t now_unix);
  // Samples `w` with this cycle's `job` (stacks, monitor, start time, memory limit).
  void SampleWatched(Watched& w, DiscoveredJob job, double now_s, int64_t now_unix,
                     const JobMonitor::NodeGpu& node);
  // The ended container's usage record (and its diagnosis, when it failed).
  JobRecord EndContainer(Watched& w, double now_s);
  JobTelemetry TelemetryOf(Watched& w);
  // Closes the cgroup files kept open for a job that is forgotten.
  void Release(const Watched& w);
  ProcFs* proc_;
  CgroupFs* cgroups_;
  GpuSource* gpu_;
  DcgmSource* dcgm_ = nullptr;
  ExitWatcher* exits_ = nullptr;
  CpuEnergyMeter* cpu_energy_ = nullptr;
  AgentOptions options_;
  std::map<std::string, Watched> jobs_;
  DiscoveryCache cache_;
  int64_t cycles_ = 0, finished_ = 0;
  std::string stacks_note_;
  std::vector<JobTelemetry> finished_telemetry_;  // ended jobs' last batch entries
  // Kubernetes.
  Kubelet* kubelet_ = nullptr;
  std::map<std::string, Watched> ending_;  // cgroup gone, waiting for the kubelet's word
  std::set<std::string> done_;     // ended while their cgroup stays (terminated, no process)
  std::set<std::string> ignored_;  // never named: sandboxes
  int64_t last_kubelet_cycle_ = -1000;
  int64_t last_walk_cycle_ = 0, last_relist_all_cycle_ = 0;
  bool relist_all_ = false;            // a container went away: the next walk lists every pod
  std::vector<CgroupJob> containers_;  // the last walk's containers
  std::string kubelet_error_;
  int64_t kubelet_errors_ = 0, unnamed_dropped_ = 0;
  std::vector<DiagnosedRecord> diagnosed_;
};

}  // namespace rightsize

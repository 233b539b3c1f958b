#include "agent/agent.h"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <utility>

#include "agent/cri_log.h"
#include "core/units.h"
#include "diagnose/job_output.h"
#include "diagnose/log_scan.h"

namespace rightsize {

namespace {

bool IsJobNumber(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

// The job a process belongs to, from its cgroup or its environment; nullopt for none.
std::optional<DiscoveredJob> IdentifyProcess(ProcFs& proc, int64_t pid) {
  // SLURM's own step daemon sits in the job's cgroup (v1) but is not the job's work: its
  // ~6 MiB per step would count as the job's memory. Read once per process (the cache keeps
  // the answer).
  if (auto st = proc.Stat(pid); st && st->comm == "slurmstepd") return std::nullopt;
  if (auto path = proc.Cgroup(pid)) {
    if (auto cg = JobFromCgroupPath(*path)) {
      bool slurm = cg->kind == CgroupJob::Kind::kSlurm;
      DiscoveredJob job;
      job.key = (slurm ? "slurm:" : "k8s:") + cg->job_id;
      job.kind = slurm ? "slurm" : "kubernetes";
      job.job_id = cg->job_id;
      job.cgroup = cg->path;
      job.qos = cg->qos;
      return job;
    }
  }
  // proctrack/linuxproc: no cgroup per job, but every task carries its job id.
  auto id = proc.Environ(pid, "SLURM_JOB_ID");
  if (!id || id->empty() || id->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  DiscoveredJob job;
  job.key = "slurm:" + *id;
  job.kind = "slurm";
  job.job_id = *id;
  return job;
}

}  // namespace

std::vector<DiscoveredJob> DiscoverJobs(ProcFs& proc, DiscoveryCache* cache) {
  std::map<std::string, DiscoveredJob> found;
  std::map<int64_t, DiscoveryCache::Entry> alive;
  std::vector<int64_t> pids;
  std::optional<int64_t> last_pid = cache ? proc.LastPid() : std::nullopt;
  if (cache && last_pid && *last_pid == cache->last_pid && cache->cycle % 30 != 0) {
    pids.reserve(cache->by_pid.size());
    for (const auto& [pid, entry] : cache->by_pid) pids.push_back(pid);
  } else {
    pids = proc.Pids();  // read after the last pid: a process made in between is listed
  }
  if (cache) cache->last_pid = last_pid.value_or(-1);
  for (int64_t pid : pids) {
    std::optional<DiscoveredJob> identity;
    std::optional<ProcStat> st;
    if (cache) {
      auto it = cache->by_pid.find(pid);
      // A process known not to be a job's needs no reading each cycle; every 30th cycle checks
      // that its pid was not reused by a new process.
      if (it != cache->by_pid.end() && !it->second.job && cache->cycle % 30 != 0) {
        alive[pid] = it->second;
        continue;
      }
      int64_t run_ns = -1;  // -1: not read, or unreadable
      if (it != cache->by_pid.end() && it->second.job && it->second.last &&
          it->second.last->threads == 1) {
        run_ns = proc.RunNs(pid).value_or(-1);
        if (run_ns >= 0 && run_ns == it->second.run_ns &&
            (cache->cycle + pid) % DiscoveryCache::kFullStatEvery != 0) {
          st = it->second.last;  // it has not run since: nothing in its stat has moved
        }
      }
      if (!st) st = proc.Stat(pid);
      if (!st) continue;
      if (it != cache->by_pid.end() && it->second.start_ticks == st->start_ticks) {
        identity = it->second.job;
      } else {
        identity = IdentifyProcess(proc, pid);
        run_ns = -1;  // a new process: schedstat was read before we knew
      }
      DiscoveryCache::Entry& entry = alive[pid];
      entry = {st->start_ticks, identity, std::nullopt, -1};
      if (identity) {
        entry.last = st;
        entry.run_ns = run_ns;
      }
    } else {
      identity = IdentifyProcess(proc, pid);
    }
    if (!identity) continue;
    DiscoveredJob& job = found[identity->key];
    if (job.key.empty()) job = *identity;
    job.pids.push_back(pid);
    if (st) job.stats.push_back(std::move(*st));  // the monitor need not read it again
  }
  if (cache) {
    cache->by_pid = std::move(alive);  // forget processes that ended
    ++cache->cycle;
  }
  std::vector<DiscoveredJob> out;
  for (auto& [key, job] : found) {
    std::sort(job.pids.begin(), job.pids.end());
    out.push_back(std::move(job));
  }
  return out;
}

Agent::Agent(ProcFs* proc, CgroupFs* cgroups, GpuSource* gpu, AgentOptions options)
    : proc_(proc), cgroups_(cgroups), gpu_(gpu), options_(std::move(options)) {}

void Agent::SampleNodeGpus(bool any, std::optional<GpuSnapshot>* nvml,
                           std::optional<DcgmSnapshot>* dcgm) {
  if (!any || gpu_ == nullptr || !gpu_->available()) return;
  if (auto snap = gpu_->Sample(); snap.ok()) *nvml = std::move(*snap);
  if (*nvml && dcgm_ != nullptr && dcgm_->available()) {
    if (auto snap = dcgm_->Sample(); snap.ok()) *dcgm = std::move(*snap);
  }
}

Agent::Watched Agent::Watch(const DiscoveredJob& job, double now_s, int64_t now_unix) {
  Watched w;
  w.monitor = std::make_unique<JobMonitor>(proc_, job.cgroup.empty() ? nullptr : cgroups_, gpu_, 0,
                                           job.cgroup);
  w.monitor->set_read_every(options_.kubernetes ? JobMonitor::kContainer : JobMonitor::kSparse);
  w.monitor->set_keep_new(options_.ship);
  w.monitor->set_dcgm(dcgm_);
  w.monitor->set_cpu_energy(cpu_energy_);
  w.first_s = now_s;
  w.seen_s = now_s;
  w.first_unix = now_unix;
  if (!options_.kubernetes) w.record = Identify(job, now_unix);
  w.raw_id = job.job_id;
  if (options_.sample_stacks && stacks_note_.empty()) {
    auto sampler = StackSampler::Create();
    if (sampler.ok()) {
      w.stacks = std::move(*sampler);
    } else {
      stacks_note_ = sampler.status().message();  // perf refused: say so once, go on
    }
  }
  return w;
}

void Agent::SampleWatched(Watched& w, DiscoveredJob job, double now_s, int64_t now_unix,
                          const JobMonitor::NodeGpu& node) {
  if (w.stacks) {
    // New processes at once; new threads of known ones every fifth cycle (a /proc walk).
    const auto& before = w.monitor->pids();
    bool refresh = cycles_ % 5 == 0;
    for (int64_t pid : job.pids) {
      if (refresh || before.count(pid) == 0) w.stacks->AddProcess(static_cast<int>(pid));
    }
    if (refresh) w.stacks->Refresh();
    (void)w.stacks->Poll();  // a bad ring record is resynchronised; the samples go on
  }
  std::string job_id = std::move(w.job.job_id);
  w.job = std::move(job);
  // Kubernetes: the kubelet's name, once given; SLURM: the record's id ("6_64" for an array
  // task, where discovery knows only the task's own job id).
  w.job.job_id = options_.kubernetes ? std::move(job_id) : w.record.job_id;
  if (!options_.kubernetes && !w.job.pids.empty()) {
    // The main process: the oldest (the batch script, or the command started by hand).
    int64_t root = w.job.pids.front();
    int64_t oldest = -1;
    for (const ProcStat& st : w.job.stats) {
      if (oldest < 0 || st.start_ticks < oldest) {
        oldest = st.start_ticks;
        root = st.pid;
      }
    }
    if (root != w.root_pid) {
      // Read while it lives: where its output goes (slurm-N.out) and where it ran.
      w.root_pid = root;
      w.stdout_path = proc_->Link(root, "fd/1").value_or("");
      w.work_dir = proc_->Link(root, "cwd").value_or("");
    }
  }
  bool first = w.monitor->samples() == 0;
  w.monitor->Sample(now_s, &w.job.pids, &w.job.stats, &node);
  w.last_s = now_s;
  if (first) {
    // Dated from its oldest process, not from when this agent first saw it.
    double before = now_s - w.monitor->started_s().value_or(now_s);
    w.first_s = now_s - before;
    w.first_unix = now_unix - static_cast<int64_t>(std::llround(before));
    w.record.start_time = w.first_unix;
  }
  if (!w.record.request.memory_bytes && w.monitor->memory_limit_bytes()) {
    w.record.request.memory_bytes = w.monitor->memory_limit_bytes();
  }
}

std::vector<JobRecord> Agent::Cycle(double now_s, int64_t now_unix) {
  if (options_.kubernetes) return KubeCycle(now_s, now_unix);
  ++cycles_;
  // Read before the processes are listed: a job seen alive below died after this count.
  std::optional<int64_t> node_oom =
      exits_ != nullptr && !jobs_.empty() ? proc_->NodeOomKills() : std::nullopt;
  std::vector<DiscoveredJob> now = DiscoverJobs(*proc_, &cache_);
  if (exits_ != nullptr) {
    // Exits since the last cycle, of the processes each job had then.
    std::map<int64_t, Watched*> by_pid;
    for (auto& [key, w] : jobs_) {
      for (int64_t pid : w.job.pids) by_pid[pid] = &w;
    }
    exits_->Drain([&](int64_t pid, int status) {
      if (auto it = by_pid.find(pid); it != by_pid.end()) it->second->exits[pid] = status;
    });
  }
  // The node's GPUs once for every job (see JobMonitor::NodeGpu).
  std::optional<GpuSnapshot> nvml;
  std::optional<DcgmSnapshot> dcgm;
  SampleNodeGpus(!now.empty(), &nvml, &dcgm);
  // Every cycle, jobs or not, so an interval is always one cycle long.
  std::optional<CpuEnergyMeter::Interval> cpu_energy;
  if (cpu_energy_ != nullptr && cpu_energy_->available()) cpu_energy = cpu_energy_->Read();
  const JobMonitor::NodeGpu node{nvml ? &*nvml : nullptr, dcgm ? &*dcgm : nullptr,
                                 cpu_energy ? &*cpu_energy : nullptr};
  std::map<std::string, bool> seen;
  for (DiscoveredJob& job : now) {
    seen[job.key] = true;
    auto it = jobs_.find(job.key);
    if (it == jobs_.end()) it = jobs_.emplace(job.key, Watch(job, now_s, now_unix)).first;
    SampleWatched(it->second, std::move(job), now_s, now_unix, node);
    it->second.node_oom_before = node_oom;
  }
  std::vector<JobRecord> ended;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    // Its processes are gone, but its cgroup may still be there (SLURM removes it a little
    // later): the CPU the job used after the last sample is in its counter.
    it->second.monitor->Finish(now_s);
    const Watched& w = it->second;
    // What it asked for (SLURM's environment) goes with it: the job card weighs the use
    // against it until accounting's record replaces this one.
    JobRecord r = w.record;
    // Seen from the first to the last cycle it was there: the run time, to one interval.
    r.start_time = w.first_unix;
    r.end_time = w.first_unix + static_cast<int64_t>(std::llround(w.last_s - w.first_s));
    r.usage = w.monitor->Usage(w.last_s - w.first_s, std::nullopt, std::nullopt);
    r.outcome = AgentOutcome(w);
    std::optional<ShippedDiagnosis> shipped;
    if (r.outcome.state == "FAILED" || r.outcome.state == "OUT_OF_MEMORY") {
      JobOutputHints hints;
      hints.job_id = r.job_id;
      hints.job_id_raw = w.raw_id;
      hints.name = w.record.request.job_name;
      hints.user = w.record.request.user;
      hints.stdout_path = w.stdout_path;
      hints.dirs = {w.work_dir};
      std::string log = FindJobOutput(hints);
      Diagnosis d = DiagnoseEnded(
          w, r, log.empty() ? std::vector<std::string>{} : std::vector<std::string>{log}, false);
      shipped = ShippedDiagnosis{std::string(FailureClassName(d.cls)), d.confidence,
                                 DiagnosisToJson(d).dump()};
      diagnosed_.push_back({r, std::move(d)});
    }
    if (options_.ship) {
      // The last samples and the final record go out with the next batch.
      JobTelemetry t = TelemetryOf(it->second);
      t.job = r;
      t.diagnosis = std::move(shipped);
      finished_telemetry_.push_back(std::move(t));
    }
    ended.push_back(std::move(r));
    ++finished_;
    Release(it->second);
    it = jobs_.erase(it);
  }
  return ended;
}

std::vector<DiscoveredJob> Agent::DiscoverContainers(std::set<std::string>* present) {
  std::vector<DiscoveredJob> out;
  // Walking the kubepods tree lists every pod's control files too: it is redone every few
  // cycles, and in between the containers it found are read directly (a new container is seen
  // within kWalkEveryCycles seconds; one that ended reads as gone at once). A walk lists again
  // only the pods whose number of containers changed, unless a container went away since the
  // last one (another may have replaced it) or kRelistAllEveryCycles have passed.
  if (cycles_ - last_walk_cycle_ >= kWalkEveryCycles || last_walk_cycle_ == 0) {
    const bool all = relist_all_ || cycles_ - last_relist_all_cycle_ >= kRelistAllEveryCycles ||
                     last_relist_all_cycle_ == 0;
    containers_ = cgroups_->KubeContainers(all);
    last_walk_cycle_ = cycles_;
    if (all) {
      last_relist_all_cycle_ = cycles_;
      relist_all_ = false;
    }
  }
  int64_t index = 0;
  for (const CgroupJob& cg : containers_) {
    DiscoveredJob job;
    job.key.reserve(5 + cg.job_id.size() + cg.container_id.size());
    job.key.append("k8s:").append(cg.job_id).append("/").append(cg.container_id);
    present->insert(job.key);
    if (done_.count(job.key) > 0 || ignored_.count(job.key) > 0) continue;
    job.kind = "kubernetes";
    job.cgroup = cg.container_path;
    job.qos = cg.qos;
    // The last cycle's list and stats, unless this container's full reading is due (staggered,
    // so the cost is spread over the cycles).
    auto watched = jobs_.find(job.key);
    DiscoveredJob* last = watched != jobs_.end() && (cycles_ + index++) % kProcessesEveryCycles != 0
                              ? &watched->second.job
                              : nullptr;
    job.tasks = cgroups_->Tasks(job.cgroup);
    std::vector<int64_t> pids;
    if (last != nullptr && job.tasks && job.tasks == last->tasks &&
        last->stats.size() == last->pids.size()) {
      // Nothing moved: the last cycle's processes and stats as they are. Taken, not copied
      // (SampleWatched replaces the watched job's with this one).
      job.pids = std::move(last->pids);
      job.stats = std::move(last->stats);
      last->pids.clear();
      last->stats.clear();
      out.push_back(std::move(job));
      continue;
    }
    if (last != nullptr && job.tasks && job.tasks == last->tasks) {
      pids = last->pids;
    } else {
      pids = cgroups_->Procs(job.cgroup);
      if (pids.empty() && !cgroups_->Exists(job.cgroup)) {
        present->erase(job.key);  // removed since the last walk
        relist_all_ = true;
        continue;
      }
    }
    for (int64_t pid : pids) {
      if (last != nullptr && last->stats.size() == last->pids.size()) {
        auto at = std::lower_bound(last->pids.begin(), last->pids.end(), pid);
        if (at != last->pids.end() && *at == pid) {
          job.pids.push_back(pid);
          job.stats.push_back(last->stats[static_cast<size_t>(at - last->pids.begin())]);
          continue;
        }
      }
      // A process that exits while being read is not the container's any more.
      if (auto st = proc_->Stat(pid)) {
        job.pids.push_back(pid);
        job.stats.push_back(std::move(*st));
      }
    }
    out.push_back(std::move(job));
  }
  return out;
}

void Agent::Release(const Watched& w) {
  if (cgroups_ != nullptr && !w.job.cgroup.empty()) cgroups_->Release(w.job.cgroup);
}

namespace {

// How a container ended: the cgroup's OOM kills or the kubelet's OOMKilled first (a container
// killed by the kernel exits 137 like one killed by anything else), then its exit code.
JobOutcome KubeOutcome(const std::optional<ContainerTermination>& end, int64_t oom_kills) {
  JobOutcome o;
  if (end) {
    o.exit_code = end->exit_code;
    o.signal = end->signal;
    if (!o.signal && end->exit_code > 128 && end->exit_code < 160) o.signal = end->exit_code - 128;
  }
  if (oom_kills > 0 || (end && end->reason == "OOMKilled")) {
    o.state = "OUT_OF_MEMORY";
  } else if (end) {
    o.state = end->exit_code == 0 ? "COMPLETED" : "FAILED";
  }
  return o;  // no word from the kubelet (the pod was deleted with it): the state stays unknown
}

}  // namespace

JobOutcome Agent::AgentOutcome(const Watched& w) {
  JobOutcome o;
  std::optional<int> status;
  if (auto it = w.exits.find(w.root_pid); it != w.exits.end()) status = it->second;
  bool killed = false;
  if (status && WIFSIGNALED(*status)) {
    o.signal = WTERMSIG(*status);
    o.exit_code = 128 + *o.signal;  // as a shell reports it
    killed = *o.signal == SIGKILL;
  } else if (status && WIFEXITED(*status)) {
    o.exit_code = WEXITSTATUS(*status);
  }
  // The kernel's OOM killer sends SIGKILL: one that struck on the node while the job's main
  // process died of SIGKILL killed it (its cgroup's own count, when it has one, is exact).
  bool node_oom = false;
  if (killed && w.node_oom_before) {
    auto after = proc_->NodeOomKills();
    node_oom = after && *after > *w.node_oom_before;
  }
  if (w.monitor->oom_kills() > 0 || node_oom) {
    o.state = "OUT_OF_MEMORY";
  } else if (o.exit_code) {
    o.state = *o.exit_code == 0 ? "COMPLETED" : "FAILED";
  }
  return o;  // no word on its end: the state waits for accounting
}

Diagnosis Agent::DiagnoseEnded(const Watched& w, const JobRecord& r,
                               const std::vector<std::string>& log_files, bool cri_logs) {
  DiagnoseInput in;
  in.job = r;
  Telemetry tel;
  tel.memory_limit_bytes = w.monitor->memory_limit_bytes();
  tel.oom_kills = w.monitor->oom_kills();
  for (const auto& p : w.monitor->memory().Points()) {
    tel.memory.emplace_back(static_cast<double>(p.t_s), p.max);
  }
  tel.gpu_memory_peak_bytes = r.usage.peak_gpu_memory_bytes;
  tel.gpu_memory_total_bytes = w.monitor->gpu_memory_total_bytes();
  for (const GpuEvent& e : w.monitor->gpu_events()) tel.xids.emplace_back(e.device_index, e.xid);
  in.telemetry = tel;
  std::vector<LogScan> scans;
  if (cri_logs && !log_files.empty()) {
    if (auto log = ReadCriLogs(log_files); log.ok()) {
      scans.push_back(ScanLogText(log->text, log_files.back()));
    }
  } else if (!cri_logs) {
    for (const std::string& file : log_files) {
      if (auto scan = ScanLogFile(file); scan.ok()) scans.push_back(std::move(*scan));
    }
  }
  // Without its log (rotated away, no --pod-logs mount, an output the agent cannot read) the
  // record and telemetry still speak.
  return DiagnoseScans(std::move(scans), in);
}

JobRecord Agent::EndContainer(Watched& w, double now_s) {
  w.monitor->Finish(now_s);
  JobRecord r = w.record;
  r.end_time = w.first_unix + static_cast<int64_t>(std::llround(w.last_s - w.first_s));
  r.usage = w.monitor->Usage(w.last_s - w.first_s, std::nullopt, std::nullopt);
  r.outcome = KubeOutcome(w.kube->terminated, w.monitor->oom_kills());
  std::optional<ShippedDiagnosis> shipped;
  if (r.outcome.state == "FAILED" || r.outcome.state == "OUT_OF_MEMORY") {
    const KubeContainer& k = *w.kube;
    Diagnosis d = DiagnoseEnded(w, r,
                                ContainerLogFiles(options_.pod_logs_dir, k.namespace_name, k.pod,
                                                  k.pod_uid, k.container, k.restart_count),
                                true);
    // Shipped with the record: the server has no access to the node's logs.
    shipped = ShippedDiagnosis{std::string(FailureClassName(d.cls)), d.confidence,
                               DiagnosisToJson(d).dump()};
    diagnosed_.push_back({r, std::move(d)});
  }
  if (options_.ship) {
    JobTelemetry t = TelemetryOf(w);
    t.job = r;
    t.diagnosis = std::move(shipped);
    finished_telemetry_.push_back(std::move(t));
  }
  ++finished_;
  return r;
}

std::vector<JobRecord> Agent::KubeCycle(double now_s, int64_t now_unix) {
  ++cycles_;
  std::set<std::string> present;
  std::vector<DiscoveredJob> now = DiscoverContainers(&present);
  // A container that ended while its cgroup stayed is forgotten once the cgroup goes.
  std::erase_if(done_, [&](const std::string& key) { return present.count(key) == 0; });
  std::erase_if(ignored_, [&](const std::string& key) { return present.count(key) == 0; });

  bool ask = cycles_ - last_kubelet_cycle_ >= kKubeletEveryCycles || !ending_.empty();
  for (const DiscoveredJob& job : now) {
    auto it = jobs_.find(job.key);
    // New, unnamed, or with no process left (it may have ended): the kubelet knows.
    if (it == jobs_.end() || !it->second.kube || job.pids.empty()) ask = true;
  }
  if (kubelet_ != nullptr && ask) {
    Status st = kubelet_->Refresh();
    kubelet_error_ = st.ok() ? std::string() : st.message();
    if (!st.ok()) ++kubelet_errors_;
    last_kubelet_cycle_ = cycles_;
  }
  std::optional<GpuSnapshot> nvml;
  std::optional<DcgmSnapshot> dcgm;
  SampleNodeGpus(!now.empty(), &nvml, &dcgm);
  // Every cycle, jobs or not, so an interval is always one cycle long.
  std::optional<CpuEnergyMeter::Interval> cpu_energy;
  if (cpu_energy_ != nullptr && cpu_energy_->available()) cpu_energy = cpu_energy_->Read();
  const JobMonitor::NodeGpu node{nvml ? &*nvml : nullptr, dcgm ? &*dcgm : nullptr,
                                 cpu_energy ? &*cpu_energy : nullptr};

  auto name = [&](Watched& w) {
    const KubeContainer* k = kubelet_ != nullptr ? kubelet_->Find(w.container_id) : nullptr;
    if (k == nullptr) return;
    if (!w.kube) {
      w.record.cluster = options_.cluster;
      w.record.job_id = k->RecordId();
      w.record.source = "kubernetes";
      w.record.request = k->request;
      if (w.record.request.qos.empty()) w.record.request.qos = w.job.qos;
      w.record.outcome.state = "RUNNING";
      w.record.start_time = w.first_unix;
      w.job.job_id = k->RecordId();
      w.monitor->set_gpu_uuids({k->gpu_uuids.begin(), k->gpu_uuids.end()});
    }
    w.kube = *k;  // the latest word: restarts, termination, devices
  };

  std::vector<JobRecord> ended;
  std::set<std::string> seen;
  for (DiscoveredJob& job : now) {
    seen.insert(job.key);
    auto it = jobs_.find(job.key);
    if (it == jobs_.end()) {
      Watched w = Watch(job, now_s, now_unix);
      w.monitor->set_peak_from_cgroup(true);
      size_t slash = job.key.find('/');
      w.pod_uid = job.key.substr(4, slash - 4);
      w.container_id = job.key.substr(slash + 1);
      it = jobs_.emplace(job.key, std::move(w)).first;
    }
    Watched& w = it->second;
    name(w);
    if (!w.kube && kubelet_ != nullptr && kubelet_->answered() &&
        now_s - w.seen_s >= kUnnamedGiveUpS) {
      ++unnamed_dropped_;  // a sandbox, or a container the kubelet no longer lists
      ignored_.insert(job.key);
      Release(w);
      jobs_.erase(it);
      continue;
    }
    const bool empty = job.pids.empty();
    SampleWatched(w, std::move(job), now_s, now_unix, node);
    if (w.kube && w.kube->terminated && empty) {
      done_.insert(it->first);  // ended, its cgroup not yet removed
      ended.push_back(EndContainer(w, now_s));
      Release(w);
      jobs_.erase(it);
    }
  }
  // Cgroups gone: their records wait for the kubelet to say how they ended.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    it->second.end_wait_until_s = now_s + kEndWaitS;
    ending_.insert(jobs_.extract(it++));
  }
  for (auto it = ending_.begin(); it != ending_.end();) {
    Watched& w = it->second;
    name(w);
    if (w.kube && (w.kube->terminated || now_s >= w.end_wait_until_s)) {
      ended.push_back(EndContainer(w, now_s));
    } else if (!w.kube && now_s >= w.end_wait_until_s) {
      ++unnamed_dropped_;
    } else {
      ++it;
      continue;
    }
    Release(w);
    it = ending_.erase(it);
  }
  return ended;
}

JobRecord Agent::Identify(const DiscoveredJob& job, int64_t first_unix) {
  JobRecord r;
  r.cluster = options_.cluster;
  r.job_id = job.job_id;
  r.source = "agent";
  r.start_time = first_unix;
  r.outcome.state = "RUNNING";
  if (job.pids.empty()) return r;
  int64_t pid = job.pids.front();
  // What SLURM tells every process of the job (absent for Kubernetes pods).
  auto env = [&](const char* name) { return proc_->Environ(pid, name).value_or(""); };
  // An array task has a job id of its own (SLURM_JOB_ID), but accounting names it
  // "<array job>_<task>": so is it recorded, or the report would count each task twice.
  if (std::string array = env("SLURM_ARRAY_JOB_ID"), task = env("SLURM_ARRAY_TASK_ID");
      IsJobNumber(array) && IsJobNumber(task)) {
    r.job_id = array + "_" + task;
  }
  r.request.user = env("SLURM_JOB_USER");
  r.request.job_name = env("SLURM_JOB_NAME");
  r.request.partition = env("SLURM_JOB_PARTITION");
  r.request.account = env("SLURM_JOB_ACCOUNT");
  if (auto cpus = ParseDouble(env("SLURM_CPUS_ON_NODE")); cpus && *cpus > 0) r.request.cpus = cpus;
  if (auto mb = ParseInt(env("SLURM_MEM_PER_NODE")); mb && *mb > 0) {
    r.request.memory_bytes = *mb * kMiB;
  }
  if (r.request.user.empty()) {
    if (auto uid = proc_->Uid(pid)) {
      struct passwd pw {};
      struct passwd* found = nullptr;
      char buf[1024];
      if (getpwuid_r(static_cast<uid_t>(*uid), &pw, buf, sizeof buf, &found) == 0 && found) {
        r.request.user = found->pw_name;
      } else {
        r.request.user = std::to_string(*uid);
      }
    }
  }
  return r;
}

JobTelemetry Agent::TelemetryOf(Watched& w) {
  JobTelemetry t;
  t.job = w.record;
  for (auto& [metric, points] : w.monitor->TakeNew()) {
    auto& out = t.samples[metric];
    out.reserve(points.size());
    for (const auto& [t_ms, v] : points) {
      // The monitor's clock is the agent's (milliseconds since it started): map it to Unix time.
      double unix_s =
          static_cast<double>(w.first_unix) + static_cast<double>(t_ms) / 1000 - w.first_s;
      out.push_back(Sample{static_cast<int64_t>(std::llround(unix_s * 1000)), v});
    }
  }
  if (w.stacks) {
    (void)w.stacks->Poll();
    t.stacks = w.stacks->TakeFolded();
  }
  return t;
}

std::vector<JobTelemetry> Agent::TakeTelemetry() {
  std::vector<JobTelemetry> out = std::exchange(finished_telemetry_, {});
  for (auto& [key, w] : jobs_) {
    if (options_.kubernetes && !w.kube) continue;  // not named yet: nothing to file it under
    out.push_back(TelemetryOf(w));
  }
  return out;
}

std::string Agent::Metrics() const {
  std::string out;
  auto metric = [&](const char* name, const char* help, const char* type) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  struct Row {
    const char* name;
    const char* help;
    const char* series;
  };
  static constexpr Row kRows[] = {
      {"rightsize_job_memory_bytes", "Resident memory of the job's processes.", "memory_bytes"},
      {"rightsize_job_cpu_cores", "CPU cores the job used over the last interval.", "cpu_cores"},
      {"rightsize_job_processes", "Processes of the job.", "processes"},
      {"rightsize_job_threads", "Threads of the job.", "threads"},
      {"rightsize_job_gpu_memory_bytes", "GPU memory of the job's own processes.",
       "gpu_memory_bytes"},
      {"rightsize_job_gpu_util_pct", "Mean utilisation of the job's GPUs.", "gpu_util_pct"},
      // DCGM's profiling fields (when DCGM is there and the GPUs can be profiled).
      {"rightsize_job_gpu_sm_active_pct",
       "Mean share of time the SMs of the job's GPUs had work (DCGM).", "gpu_sm_active_pct"},
      {"rightsize_job_gpu_sm_occupancy_pct",
       "Mean warps resident on the job's GPUs' SMs, percent of the maximum (DCGM).",
       "gpu_sm_occupancy_pct"},
      {"rightsize_job_gpu_tensor_active_pct",
       "Mean share of time the tensor cores of the job's GPUs were busy (DCGM).",
       "gpu_tensor_active_pct"},
      {"rightsize_job_gpu_dram_active_pct",
       "Mean share of time the memory interface of the job's GPUs was busy (DCGM).",
       "gpu_dram_active_pct"},
  };
  size_t exported = std::min(jobs_.size(), options_.max_exported_jobs);
  // Each exported job's summary once, not once per row.
  std::vector<nlohmann::json> summaries;
  for (const auto& [key, w] : jobs_) {
    if (summaries.size() >= exported) break;
    summaries.push_back(w.monitor->SummaryJson(false)["metrics"]);
  }
  for (const Row& row : kRows) {
    metric(row.name, row.help, "gauge");
    size_t n = 0;
    for (const auto& [key, w] : jobs_) {
      if (n >= exported) break;
      const nlohmann::json& m = summaries[n++];
      if (!m.contains(row.series) || w.job.job_id.empty()) continue;
      out += fmt::format("{}{{job_id=\"{}\",kind=\"{}\"}} {}\n", row.name, w.job.job_id, w.job.kind,
                         m[row.series]["last"].get<double>());
    }
  }
  // Energy so far, per job and device kind (gpu: NVML; cpu: its share of RAPL's packages).
  metric("rightsize_job_energy_joules_total", "Energy the job used so far, by device kind.",
         "counter");
  {
    size_t n = 0;
    for (const auto& [key, w] : jobs_) {
      if (n >= exported) break;
      const nlohmann::json& m = summaries[n++];
      if (w.job.job_id.empty()) continue;
      for (const char* device : {"gpu", "cpu"}) {
        std::string series = fmt::format("{}_energy_j", device);
        if (!m.contains(series)) continue;
        out += fmt::format(
            "rightsize_job_energy_joules_total{{job_id=\"{}\",kind=\"{}\",device=\"{}\"}} {}\n",
            w.job.job_id, w.job.kind, device, m[series]["last"].get<double>());
      }
    }
  }
  metric("rightsize_agent_jobs", "Jobs watched on this node.", "gauge");
  out += fmt::format("rightsize_agent_jobs {}\n", jobs_.size());
  metric("rightsize_agent_jobs_not_exported",
         "Jobs watched but left out of these metrics by the cardinality cap.", "gauge");
  out += fmt::format("rightsize_agent_jobs_not_exported {}\n", jobs_.size() - exported);
  metric("rightsize_agent_cycles_total", "Sampling cycles since start.", "counter");
  out += fmt::format("rightsize_agent_cycles_total {}\n", cycles_);
  metric("rightsize_agent_jobs_finished_total", "Jobs whose usage record was written.", "counter");
  out += fmt::format("rightsize_agent_jobs_finished_total {}\n", finished_);
  if (options_.kubernetes) {
    metric("rightsize_agent_kubelet_errors_total",
           "Times the kubelet's pod list or PodResources did not answer.", "counter");
    out += fmt::format("rightsize_agent_kubelet_errors_total {}\n", kubelet_errors_);
    metric("rightsize_agent_unnamed_containers_total",
           "Container cgroups the kubelet never named (pod sandboxes), left unrecorded.",
           "counter");
    out += fmt::format("rightsize_agent_unnamed_containers_total {}\n", unnamed_dropped_);
  }
  metric("rightsize_agent_rejected_values_total",
         "Values from /proc or cgroups rejected as garbage.", "counter");
  out += fmt::format("rightsize_agent_rejected_values_total {}\n",
                     proc_->rejected() + (cgroups_ ? cgroups_->rejected() : 0));
  metric("rightsize_agent_gpu_available", "1 when NVML answers.", "gauge");
  out += fmt::format("rightsize_agent_gpu_available {}\n", gpu_ && gpu_->available() ? 1 : 0);
  metric("rightsize_agent_dcgm_available", "1 when DCGM answers with profiling fields.", "gauge");
  out += fmt::format("rightsize_agent_dcgm_available {}\n", dcgm_ && dcgm_->available() ? 1 : 0);
  metric("rightsize_agent_dcgm_rejected_values_total",
         "Values from DCGM rejected as impossible (a ratio outside 0..1).", "counter");
  out += fmt::format("rightsize_agent_dcgm_rejected_values_total {}\n",
                     dcgm_ ? dcgm_->rejected_values() : 0);
  return out;
}

}  // namespace rightsize

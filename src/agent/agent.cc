#include "agent/agent.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace rightsize {

namespace {

// The job a process belongs to, from its cgroup or its environment; nullopt for none.
std::optional<DiscoveredJob> IdentifyProcess(ProcFs& proc, int64_t pid) {
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
  for (int64_t pid : proc.Pids()) {
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
      st = proc.Stat(pid);
      if (!st) continue;
      if (it != cache->by_pid.end() && it->second.start_ticks == st->start_ticks) {
        identity = it->second.job;
      } else {
        identity = IdentifyProcess(proc, pid);
      }
      alive[pid] = {st->start_ticks, identity};
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

std::vector<JobRecord> Agent::Cycle(double now_s, int64_t now_unix) {
  ++cycles_;
  std::vector<DiscoveredJob> now = DiscoverJobs(*proc_, &cache_);
  std::map<std::string, bool> seen;
  for (DiscoveredJob& job : now) {
    seen[job.key] = true;
    auto it = jobs_.find(job.key);
    if (it == jobs_.end()) {
      Watched w;
      w.monitor = std::make_unique<JobMonitor>(proc_, job.cgroup.empty() ? nullptr : cgroups_, gpu_,
                                               0, job.cgroup);
      w.monitor->set_sparse_reads(true);
      w.first_s = now_s;
      w.first_unix = now_unix;
      it = jobs_.emplace(job.key, std::move(w)).first;
    }
    it->second.job = std::move(job);
    it->second.monitor->Sample(now_s, &it->second.job.pids, &it->second.job.stats);
    it->second.last_s = now_s;
  }
  std::vector<JobRecord> ended;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    const Watched& w = it->second;
    JobRecord r;
    r.cluster = options_.cluster;
    r.job_id = w.job.job_id;
    r.source = "agent";
    // Seen from the first to the last cycle it was there: the run time, to one interval.
    r.start_time = w.first_unix;
    r.end_time = w.first_unix + static_cast<int64_t>(std::llround(w.last_s - w.first_s));
    r.usage = w.monitor->Usage(w.last_s - w.first_s, std::nullopt, std::nullopt);
    ended.push_back(std::move(r));
    ++finished_;
    it = jobs_.erase(it);
  }
  return ended;
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
  };
  size_t exported = std::min(jobs_.size(), options_.max_exported_jobs);
  for (const Row& row : kRows) {
    metric(row.name, row.help, "gauge");
    size_t n = 0;
    for (const auto& [key, w] : jobs_) {
      if (n++ >= exported) break;
      nlohmann::json summary = w.monitor->SummaryJson(false);
      const auto& m = summary["metrics"];
      if (!m.contains(row.series)) continue;
      out += fmt::format("{}{{job=\"{}\",kind=\"{}\"}} {}\n", row.name, w.job.job_id, w.job.kind,
                         m[row.series]["last"].get<double>());
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
  metric("rightsize_agent_rejected_values_total",
         "Values from /proc or cgroups rejected as garbage.", "counter");
  out += fmt::format("rightsize_agent_rejected_values_total {}\n",
                     proc_->rejected() + (cgroups_ ? cgroups_->rejected() : 0));
  metric("rightsize_agent_gpu_available", "1 when NVML answers.", "gauge");
  out += fmt::format("rightsize_agent_gpu_available {}\n", gpu_ && gpu_->available() ? 1 : 0);
  return out;
}

}  // namespace rightsize

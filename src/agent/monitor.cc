#include "agent/monitor.h"

#include <algorithm>
#include <cmath>

namespace rightsize {

JobMonitor::JobMonitor(ProcFs* proc, CgroupFs* cgroups, GpuSource* gpu, int64_t root_pid,
                       std::string cgroup_path)
    : proc_(proc),
      cgroups_(cgroups),
      gpu_(gpu),
      root_pid_(root_pid),
      cgroup_path_(std::move(cgroup_path)) {
  series_["memory_bytes"];  // always present, possibly empty
}

void JobMonitor::Sample(double now_s, const std::vector<int64_t>* pids,
                        const std::vector<ProcStat>* stats, const NodeGpu* node) {
  int64_t t = SetSampleTime(now_s);
  ++samples_;
  // The processes' stat: the caller's when it read them (no copy: the agent samples hundreds
  // of processes a second), else read here.
  std::vector<ProcStat> own;
  const std::vector<ProcStat>* given =
      stats != nullptr && pids != nullptr && stats->size() == pids->size() ? stats : nullptr;
  if (given == nullptr && pids != nullptr) {
    for (int64_t pid : *pids) {
      if (auto st = proc_->Stat(pid)) own.push_back(std::move(*st));
    }
  } else if (given == nullptr) {
    own = proc_->Tree(root_pid_);
  }
  const std::vector<ProcStat>& tree = given != nullptr ? *given : own;
  // The pid set changes rarely from one sample to the next: rebuilt only when it did.
  bool same_pids = pids_.size() == tree.size();
  if (same_pids) {
    for (const ProcStat& p : tree) {
      if (pids_.count(p.pid) == 0) {
        same_pids = false;
        break;
      }
    }
  }
  if (!same_pids) {
    pids_.clear();
    for (const ProcStat& p : tree) pids_.insert(p.pid);
  }
  const bool first = !last_t_;
  double cpu_delta = 0;
  double cpu_before = 0;  // first sample: what the processes did before we saw them
  int64_t rss = 0, threads = 0, open_files = 0;
  // This sample's CPU per process, sorted by (pid, start) like the last one, which it replaces
  // (two vectors swapped: no allocation once they have grown).
  cpu_now_.clear();
  for (const ProcStat& p : tree) {
    std::pair<int64_t, int64_t> key{p.pid, p.start_ticks};
    double cpu = p.user_s + p.system_s;
    auto seen = std::lower_bound(cpu_seen_.begin(), cpu_seen_.end(), key,
                                 [](const auto& e, const auto& k) { return e.first < k; });
    // A process first seen now did its work since the last sample (or since it started).
    if (first) {
      cpu_before += cpu;
    } else {
      cpu_delta +=
          seen == cpu_seen_.end() || seen->first != key ? cpu : std::max(0.0, cpu - seen->second);
    }
    cpu_now_.emplace_back(key, cpu);
    rss += p.rss_bytes;
    threads += p.threads;
    // Listing every process's fds is the costliest read: every tenth sample is enough.
    if ((samples_ - 1) % fd_every_ == 0) {
      if (auto fds = proc_->OpenFiles(p.pid)) open_files += *fds;
    }
    // Per-process I/O counters only grow: every fifth sample loses at most the last seconds of
    // a process that exits.
    if (auto io = (samples_ - 1) % io_every_ == 0 ? proc_->Io(p.pid) : std::nullopt) {
      auto& [r, w] = io_seen_[key];
      r = std::max(r, io->read_bytes.value_or(0));
      w = std::max(w, io->write_bytes.value_or(0));
    }
  }
  std::sort(cpu_now_.begin(), cpu_now_.end());
  cpu_seen_.swap(cpu_now_);
  std::optional<int64_t> cg_memory;
  if (cgroups_ && !cgroup_path_.empty()) {
    // The counters that only grow (peak, OOM kills, throttling) lose nothing read every few
    // samples; Finish reads them all once more.
    const bool all = (samples_ - 1) % cgroup_all_every_ == 0;
    if (auto c = cgroups_->Read(cgroup_path_, all)) {
      cg_memory = c->memory_bytes;
      if (c->memory_limit_bytes) memory_limit_ = c->memory_limit_bytes;
      if (c->memory_peak_bytes) {
        cgroup_peak_ = std::max(cgroup_peak_.value_or(0), *c->memory_peak_bytes);
      }
      if (c->oom_kills) oom_kills_ = std::max(oom_kills_, *c->oom_kills);
      if (c->throttled_s) Add("cpu_throttled_s", t, *c->throttled_s);
      if (c->cpu_s) {
        // The cgroup's CPU time counts every process, even those that came and went between
        // two samples: better than the per-process sum.
        if (cgroup_cpu_last_ && last_t_ && now_s > *last_t_) {
          cpu_delta = std::max(0.0, *c->cpu_s - *cgroup_cpu_last_);
        } else if (first) {
          cpu_before = std::max(cpu_before, *c->cpu_s);  // since the job's cgroup was made
        }
        cgroup_cpu_last_ = c->cpu_s;
      }
    }
  }
  // The CPU packages' energy since the last sample: the agent's reading for every job, or the
  // meter's own (a first reading only sets the meter's baseline to this sample).
  std::optional<CpuEnergyMeter::Interval> cpu_energy;
  if (node != nullptr && node->cpu_energy != nullptr) {
    cpu_energy = *node->cpu_energy;
  } else if (node == nullptr && cpu_meter_ != nullptr && cpu_meter_->available()) {
    cpu_energy = cpu_meter_->Read();
  }
  if (first) {
    StartAt(now_s, tree, cpu_before);
  } else if (now_s > *last_t_) {
    cpu_total_ += cpu_delta;
    Add("cpu_cores", t, cpu_delta / (now_s - *last_t_));
    if (cpu_energy) {
      cpu_energy_j_ = cpu_energy_j_.value_or(0) + CpuEnergyMeter::JobShareJ(*cpu_energy, cpu_delta);
      Add("cpu_energy_j", t, *cpu_energy_j_);
    }
  }
  last_t_ = now_s;
  // The cgroup's figure includes the page cache; the processes' RSS is what they hold.
  Add("memory_bytes", t, static_cast<double>(rss));
  if (cg_memory) Add("cgroup_memory_bytes", t, static_cast<double>(*cg_memory));
  Add("processes", t, static_cast<double>(tree.size()));
  Add("threads", t, static_cast<double>(threads));
  if ((samples_ - 1) % fd_every_ == 0) Add("open_files", t, static_cast<double>(open_files));
  int64_t r = 0, w = 0;
  for (const auto& [key, rw] : io_seen_) {
    r += rw.first;
    w += rw.second;
  }
  io_read_ = r;
  io_write_ = w;
  Add("io_read_bytes", t, static_cast<double>(r));
  Add("io_write_bytes", t, static_cast<double>(w));
  // Network: only a job in a namespace of its own (a container, a pod) has traffic that is its
  // alone; in the host's namespace the counters are the whole node's, so none are reported.
  if (!tree.empty() && (samples_ - 1) % io_every_ == 0) {
    // The agent's own namespace is the host's (it runs with the host network, as a daemon or a
    // DaemonSet with hostNetwork); pid 1's may not be readable in a container.
    if (!host_netns_) host_netns_ = proc_->NetNamespace(0).value_or("");
    auto ns = proc_->NetNamespace(tree.front().pid);
    if (ns && !host_netns_->empty() && *ns != *host_netns_) {
      if (auto net = proc_->NetDev(tree.front().pid)) {
        Add("net_rx_bytes", t, static_cast<double>(net->rx_bytes));
        Add("net_tx_bytes", t, static_cast<double>(net->tx_bytes));
        Add("net_rx_packets", t, static_cast<double>(net->rx_packets));
        Add("net_tx_packets", t, static_cast<double>(net->tx_packets));
      }
    }
  }

  if (node != nullptr) {
    if (node->nvml != nullptr) SampleGpu(now_s, *node->nvml, node->dcgm);
  } else if (gpu_ && gpu_->available()) {
    auto snap = gpu_->Sample();
    if (snap.ok()) {
      std::optional<DcgmSnapshot> dcgm;
      if (dcgm_ != nullptr && dcgm_->available()) {
        // The host engine going away loses the DCGM metrics only.
        if (auto d = dcgm_->Sample(); d.ok()) dcgm = std::move(*d);
      }
      SampleGpu(now_s, *snap, dcgm ? &*dcgm : nullptr);
    }
  }
}

void JobMonitor::SampleGpu(double now_s, const GpuSnapshot& snap, const DcgmSnapshot* dcgm) {
  int64_t t = SetSampleTime(now_s);
  int64_t job_gpu_memory = 0;
  bool on_gpu = false;
  for (const GpuProcessSample& p : snap.processes) {
    if (pids_.count(p.pid) == 0) continue;
    on_gpu = true;
    gpu_devices_.insert(p.device_index);
    job_gpu_memory += p.used_memory_bytes.value_or(0);
  }
  gpu_processes_seen_ |= on_gpu;
  if (!gpu_uuids_.empty() && !pids_.empty()) {
    int64_t held_used = 0;
    for (const GpuDeviceSample& d : snap.devices) {
      if (gpu_uuids_.count(d.uuid) == 0) continue;
      on_gpu = true;
      gpu_devices_.insert(d.index);
      held_used += d.memory_used_bytes.value_or(0);
    }
    // The devices are the job's alone (a device plugin gives a GPU to one container); when
    // NVML has never listed its processes, what is used on them is the job's.
    if (!gpu_processes_seen_) job_gpu_memory = held_used;
  }
  if (on_gpu) {
    double util = 0;
    int n = 0;
    int64_t total = 0;
    for (const GpuDeviceSample& d : snap.devices) {
      if (gpu_devices_.count(d.index) == 0) continue;
      if (d.util_pct) {
        util += *d.util_pct;
        ++n;
      }
      total += d.memory_total_bytes.value_or(0);
    }
    Add("gpu_memory_bytes", t, static_cast<double>(job_gpu_memory));
    if (n > 0) Add("gpu_util_pct", t, util / n);
    if (total > 0) gpu_total_ = total;
    if (dcgm != nullptr) SampleDcgm(t, snap.devices, *dcgm);
  }
  SampleGpuEnergy(now_s, snap);
  for (const GpuEvent& e : snap.events) {
    // An Xid on a device the job uses, or naming one of its processes.
    if (gpu_devices_.count(e.device_index) > 0 || (e.pid && pids_.count(*e.pid) > 0)) {
      gpu_events_.push_back(e);
      // As a series too, so that it is shipped and stored with the job: the Xid code.
      Add("gpu_xid", t, static_cast<double>(e.xid));
    }
  }
}

void JobMonitor::SampleGpuEnergy(double now_s, const GpuSnapshot& snap) {
  double power_w = 0;
  bool any_power = false;
  for (const GpuDeviceSample& d : snap.devices) {
    if (gpu_devices_.count(d.index) == 0) continue;
    GpuEnergyState& st = gpu_energy_[d.index];
    if (d.energy_mj) {
      // A counter below the last reading: the driver was reloaded and the interval is lost.
      if (st.last_mj && *d.energy_mj >= *st.last_mj) {
        gpu_counter_mj_ += static_cast<int64_t>(*d.energy_mj - *st.last_mj);
      }
      gpu_energy_known_ = gpu_by_counter_ = true;
      st.last_power_w.reset();
    } else if (d.power_w) {
      if (st.last_power_w && now_s > st.last_s) {
        gpu_power_time_j_ += (*st.last_power_w + *d.power_w) / 2 * (now_s - st.last_s);
      }
      gpu_energy_known_ = gpu_by_power_ = true;
    }
    st.last_mj = d.energy_mj;
    st.last_power_w = d.energy_mj ? std::nullopt : d.power_w;
    st.last_s = now_s;
    if (d.power_w) {
      power_w += *d.power_w;
      any_power = true;
    }
  }
  int64_t t = SetSampleTime(now_s);
  if (any_power) Add("gpu_power_w", t, power_w);
  if (auto j = gpu_energy_j()) Add("gpu_energy_j", t, *j);
}

std::optional<double> JobMonitor::gpu_energy_j() const {
  if (!gpu_energy_known_) return std::nullopt;
  return static_cast<double>(gpu_counter_mj_) / 1000.0 + gpu_power_time_j_;
}

void JobMonitor::SampleDcgm(int64_t t_s, const std::vector<GpuDeviceSample>& nvml,
                            const DcgmSnapshot& snap) {
  // Ratios: the mean over the job's GPUs that report one, like gpu_util_pct. Rates: the sum.
  struct Field {
    const char* metric;
    std::optional<double> DcgmDeviceSample::*value;
    bool sum;
  };
  static constexpr Field kFields[] = {
      {"gpu_sm_active_pct", &DcgmDeviceSample::sm_active_pct, false},
      {"gpu_sm_occupancy_pct", &DcgmDeviceSample::sm_occupancy_pct, false},
      {"gpu_tensor_active_pct", &DcgmDeviceSample::tensor_active_pct, false},
      {"gpu_dram_active_pct", &DcgmDeviceSample::dram_active_pct, false},
      {"gpu_gr_engine_active_pct", &DcgmDeviceSample::gr_engine_active_pct, false},
      {"gpu_pcie_tx_bytes_per_s", &DcgmDeviceSample::pcie_tx_bytes_per_s, true},
      {"gpu_pcie_rx_bytes_per_s", &DcgmDeviceSample::pcie_rx_bytes_per_s, true},
      {"gpu_nvlink_tx_bytes_per_s", &DcgmDeviceSample::nvlink_tx_bytes_per_s, true},
      {"gpu_nvlink_rx_bytes_per_s", &DcgmDeviceSample::nvlink_rx_bytes_per_s, true},
  };
  std::vector<const DcgmDeviceSample*> mine;
  for (const DcgmDeviceSample& d : snap.devices) {
    if (auto index = NvmlIndexOf(d, nvml); index && gpu_devices_.count(*index) > 0) {
      mine.push_back(&d);
    }
  }
  for (const Field& f : kFields) {
    double total = 0;
    int n = 0;
    for (const DcgmDeviceSample* d : mine) {
      if (const std::optional<double>& v = d->*f.value) {
        total += *v;
        ++n;
      }
    }
    if (n > 0) Add(f.metric, t_s, f.sum ? total : total / n);
  }
}

void JobMonitor::StartAt(double now_s, const std::vector<ProcStat>& tree, double cpu_before) {
  // The job began when its oldest process did: the agent finds a job up to a cycle late, or
  // long after it started when the agent itself was restarted.
  std::optional<double> age;
  if (auto uptime = tree.empty() ? std::nullopt : proc_->Uptime()) {
    for (const ProcStat& p : tree) {
      if (auto a = proc_->AgeS(p, *uptime)) age = std::max(age.value_or(0), *a);
    }
  }
  started_s_ = now_s - age.value_or(0);
  cpu_total_ += cpu_before;
  if (!age || *age < 0.5 || cpu_before <= 0) return;
  // What the job did before it was seen, as its mean rate over that span, one point a second
  // so the series integrates to it. A span longer than kMaxBackfillS (an agent restarted under
  // a long job) stays a gap in the series: its shape is unknown; the total still counts it.
  if (*age > kMaxBackfillS) return;
  double rate = cpu_before / *age;
  auto n = static_cast<int64_t>(std::llround(*age));
  int64_t t = SetSampleTime(now_s);
  for (int64_t i = std::max<int64_t>(n, 1) - 1; i >= 0; --i) Add("cpu_cores", t - i, rate);
}

void JobMonitor::Finish(double now_s) {
  if (!cgroups_ || cgroup_path_.empty()) return;
  auto c = cgroups_->Read(cgroup_path_);
  if (!c) return;
  if (c->memory_peak_bytes) {
    cgroup_peak_ = std::max(cgroup_peak_.value_or(0), *c->memory_peak_bytes);
  }
  if (c->oom_kills) oom_kills_ = std::max(oom_kills_, *c->oom_kills);
  if (!cgroup_cpu_last_ || !last_t_ || now_s <= *last_t_) return;
  if (!c->cpu_s || *c->cpu_s <= *cgroup_cpu_last_) return;
  double delta = *c->cpu_s - *cgroup_cpu_last_;
  cpu_total_ += delta;
  Add("cpu_cores", static_cast<int64_t>(std::floor(now_s)), delta / (now_s - *last_t_));
  cgroup_cpu_last_ = c->cpu_s;
  last_t_ = now_s;
}

ResourceUsage JobMonitor::Usage(double elapsed_s, std::optional<double> cpu_time_s,
                                std::optional<int64_t> max_process_rss_bytes) const {
  ResourceUsage u;
  u.elapsed_s = elapsed_s;
  if (cpu_time_s) {
    u.cpu_time_s = cpu_time_s;
  } else if (samples_ > 0) {
    u.cpu_time_s = cpu_total_;
  }
  // The largest of what each source saw: the cgroup's peak is exact; a single process's peak
  // (wait4) is exact for it; the sampled sum may miss a short spike but sees the whole tree.
  int64_t peak = static_cast<int64_t>(series_.at("memory_bytes").peak());
  auto cgroup_sampled = series_.find("cgroup_memory_bytes");
  if (peak_from_cgroup_ && cgroup_peak_) {
    peak = *cgroup_peak_;
  } else if (peak_from_cgroup_ && cgroup_sampled != series_.end() &&
             !cgroup_sampled->second.empty()) {
    peak = static_cast<int64_t>(cgroup_sampled->second.peak());
  } else if (cgroup_peak_) {
    peak = std::max(peak, *cgroup_peak_);
  }
  if (max_process_rss_bytes) peak = std::max(peak, *max_process_rss_bytes);
  if (peak > 0) u.peak_rss_bytes = peak;
  const MetricSeries& mem = series_.at("memory_bytes");
  if (!mem.empty()) u.avg_rss_bytes = static_cast<int64_t>(mem.mean());
  if (auto it = series_.find("gpu_memory_bytes"); it != series_.end()) {
    u.peak_gpu_memory_bytes = static_cast<int64_t>(it->second.peak());
  }
  if (auto it = series_.find("gpu_util_pct"); it != series_.end()) {
    u.gpu_util_pct = it->second.mean();
  }
  u.io_read_bytes = io_read_;
  u.io_write_bytes = io_write_;
  u.gpu_energy_j = gpu_energy_j();
  u.cpu_energy_j = cpu_energy_j_;
  return u;
}

nlohmann::json JobMonitor::SummaryJson(bool with_series) const {
  nlohmann::json j = nlohmann::json::object();
  j["samples"] = samples_;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, s] : series_) {
    if (s.empty()) continue;
    nlohmann::json m = {{"peak", s.peak()}, {"mean", s.mean()}, {"last", s.last()}};
    if (with_series) {
      nlohmann::json points = nlohmann::json::array();
      for (const auto& p : s.Points()) points.push_back({p.t_s, p.mean, p.max});
      m["points"] = points;  // [t_s, mean, max]
    }
    metrics[name] = m;
  }
  j["metrics"] = metrics;
  j["oom_kills"] = oom_kills_;
  j["memory_limit_bytes"] = memory_limit_ ? nlohmann::json(*memory_limit_) : nlohmann::json();
  nlohmann::json events = nlohmann::json::array();
  for (const GpuEvent& e : gpu_events_) {
    events.push_back({{"device", e.device_index},
                      {"xid", e.xid},
                      {"pid", e.pid ? nlohmann::json(*e.pid) : nlohmann::json()}});
  }
  j["gpu_events"] = events;
  j["gpu_devices"] = std::vector<int>(gpu_devices_.begin(), gpu_devices_.end());
  // Energy, with how each figure was had: unknown is null with the reason, never 0.
  nlohmann::json energy = nlohmann::json::object();
  auto gpu_j = gpu_energy_j();
  energy["gpu_j"] = gpu_j ? nlohmann::json(*gpu_j) : nlohmann::json();
  energy["gpu_method"] = gpu_by_counter_ && gpu_by_power_ ? "counter and power x time"
                         : gpu_by_counter_                ? "counter"
                         : gpu_by_power_                  ? "power x time"
                         : gpu_devices_.empty()           ? "no GPU used"
                                                          : "no energy counter nor power reading";
  energy["cpu_j"] = cpu_energy_j_ ? nlohmann::json(*cpu_energy_j_) : nlohmann::json();
  energy["cpu_status"] = cpu_meter_ != nullptr ? cpu_meter_->status() : "not measured";
  j["energy"] = energy;
  return j;
}

}  // namespace rightsize

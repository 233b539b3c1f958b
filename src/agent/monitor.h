// JobMonitor: one job's resource use, second by second, from its processes (/proc), its cgroup
// and its GPUs, kept as bounded series and summed up at the end as the job's usage record.
//
// A job is a process tree (a root pid and its descendants, found again at every sample, so
// children that come and go are counted), optionally with a cgroup (exact memory peak, OOM
// kills, CPU throttling). GPU memory is the job's own: the NVML per-process memory of its pids,
// so jobs sharing a GPU are told apart; GPU utilisation is the mean of the devices its
// processes use, and so are DCGM's profiling ratios (SM, tensor, DRAM activity) when a DCGM
// source is set, while its PCIe and NVLink rates are summed over those devices. Energy: the
// job's GPUs' (every device it was ever seen on, from then on) by NVML's energy counter, or by
// power x time (trapezoids between samples) on a GPU without one; NVML has no per-process
// energy, so jobs sharing a GPU are each charged the device's whole energy. Its CPU energy is
// its share of the RAPL packages' energy by its share of the node's CPU time, interval by
// interval (agent/rapl.h). Processes vanishing mid-read are normal and skipped. Not thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/cgroup.h"
#include "agent/dcgm.h"
#include "agent/gpu.h"
#include "agent/proc.h"
#include "agent/rapl.h"
#include "agent/series.h"
#include "core/job.h"

namespace rightsize {

class JobMonitor {
 public:
  // `proc` is required; `cgroups` and `gpu` may be null (none, or no driver). The cgroup path
  // is as /proc/PID/cgroup writes it ("" for none).
  JobMonitor(ProcFs* proc, CgroupFs* cgroups, GpuSource* gpu, int64_t root_pid,
             std::string cgroup_path);

  // What the GPUs of the node said this cycle, read once for all jobs (the agent): one NVML
  // and DCGM reading per cycle rather than one per job, and every job sees the Xid events (an
  // event set is drained by whoever reads it). A null snapshot: that source had nothing.
  struct NodeGpu {
    const GpuSnapshot* nvml = nullptr;
    const DcgmSnapshot* dcgm = nullptr;
    // The CPU packages' energy and the node's CPU time since the last cycle (RAPL present).
    const CpuEnergyMeter::Interval* cpu_energy = nullptr;
  };

  // Reads everything once; `now_s` is the caller's clock (seconds since the job started).
  // With `pids`, the job is those processes (the agent found them by cgroup or environment)
  // instead of the root pid's tree.
  // `stats`, when given, are those processes' stat already read (the agent's discovery).
  // `node`, when given, is this cycle's GPU readings; without it the monitor reads its sources.
  void Sample(double now_s, const std::vector<int64_t>* pids = nullptr,
              const std::vector<ProcStat>* stats = nullptr, const NodeGpu* node = nullptr);

  // How often (in samples) the costlier reads are done: each process's open files (a listing of
  // /proc/PID/fd), each process's I/O counters and the network namespace's, and the cgroup's
  // growing counters (peak, OOM kills, throttling, I/O; Finish reads them all once more) and
  // limit. `rightsize run` (one job) reads them every time.
  struct ReadEvery {
    int64_t open_files = 1, io = 1, cgroup_all = 1;
  };
  // The agent watches hundreds of processes: open files every tenth sample, the rest every fifth.
  static constexpr ReadEvery kSparse{10, 5, 5};
  // A Kubernetes container's memory and CPU come from its cgroup every sample: its processes'
  // open files once a minute, their I/O counters every 20th sample (a process that exits loses
  // at most its last 20 seconds of I/O), the cgroup's growing counters every tenth.
  static constexpr ReadEvery kContainer{60, 20, 10};
  void set_read_every(ReadEvery every) {
    fd_every_ = std::max<int64_t>(every.open_files, 1);
    io_every_ = std::max<int64_t>(every.io, 1);
    cgroup_all_every_ = std::max<int64_t>(every.cgroup_all, 1);
  }

  // Shipping to a server: with keep_new on, every sample is also kept until TakeNew() hands
  // it over (per metric, (time on the caller's clock in milliseconds, value)); at most kMaxNew
  // per metric are kept, the oldest dropped, so a server that is down for long costs bounded
  // memory. The series above bucket by whole seconds; a shipped sample keeps its millisecond,
  // so two samples less than a second apart (--interval 0.5) stay two points on the server.
  void set_keep_new(bool keep) { keep_new_ = keep; }
  using PendingSamples = std::vector<std::pair<int64_t, double>>;
  std::map<std::string, PendingSamples, std::less<>> TakeNew() { return std::exchange(new_, {}); }
  static constexpr size_t kMaxNew = 3600;

  // DCGM's profiling fields for the GPUs the job uses (those NVML finds its processes on):
  // gpu_sm_active_pct, gpu_sm_occupancy_pct, gpu_tensor_active_pct, gpu_dram_active_pct,
  // gpu_gr_engine_active_pct and gpu_{pcie,nvlink}_{tx,rx}_bytes_per_s. May be null or
  // unavailable; it must outlive the monitor.
  void set_dcgm(DcgmSource* dcgm) { dcgm_ = dcgm; }

  // The node's RAPL meter: read by Sample() itself when no NodeGpu is given (`rightsize run`),
  // and its status() is the summary's word on CPU energy ("RAPL absent: …"). May be null; it
  // must outlive the monitor.
  void set_cpu_energy(CpuEnergyMeter* meter) { cpu_meter_ = meter; }

  // The GPUs the job holds by UUID, as a device plugin assigned them (a Kubernetes container's
  // nvidia.com/gpu): they are the job's GPUs whether or not NVML lists its processes on them,
  // and while it has never listed one of its processes (a PID namespace NVML cannot see into, a
  // driver without per-process accounting) the job's GPU memory is the memory used on those
  // devices, whenever the job has processes.
  void set_gpu_uuids(std::set<std::string> uuids) { gpu_uuids_ = std::move(uuids); }

  // The job's memory peak is its cgroup's own when the cgroup reports one (memory.peak,
  // memory.max_usage_in_bytes), else the highest cgroup usage sampled, else the processes' RSS:
  // a container is limited and OOM-killed on its cgroup's count, page cache included. Off, the
  // peak is the largest of the three (`rightsize run`, SLURM jobs).
  void set_peak_from_cgroup(bool on) { peak_from_cgroup_ = on; }

  // When the job started on the caller's clock: its oldest process's start, read at the first
  // sample (that sample's time when the start is unknown). nullopt before any sample.
  std::optional<double> started_s() const { return started_s_; }
  // CPU seconds the job used, from its processes' start: what it did before the first sample
  // counts too (the cgroup's total when it has one, else its processes').
  double cpu_seconds() const { return cpu_total_; }
  // Longest span before the first sample filled in the cores series (see StartAt).
  static constexpr double kMaxBackfillS = 600;
  int64_t samples() const { return samples_; }

  // The job's processes are gone: reads its cgroup's CPU, peak and OOM-kill counters once more
  // (when the cgroup still exists) so what happened between the last sample and the exit (the
  // CPU used, the allocation that got it killed) is not lost.
  void Finish(double now_s);

  // The pids of the job seen at the last sample (for the stack sampler).
  const std::set<int64_t>& pids() const { return pids_; }

  // The usage record: `elapsed_s` and, when the caller has them from wait4(), the exact CPU
  // time and largest single-process RSS of the reaped tree.
  ResourceUsage Usage(double elapsed_s, std::optional<double> cpu_time_s,
                      std::optional<int64_t> max_process_rss_bytes) const;

  // Peaks, means and totals of every metric, the GPU events and the series (rightsize.run/v1).
  nlohmann::json SummaryJson(bool with_series) const;

  // What the diagnosis can use: the memory limit, OOM kills, the memory series near the end.
  std::optional<int64_t> memory_limit_bytes() const { return memory_limit_; }
  int64_t oom_kills() const { return oom_kills_; }
  const MetricSeries& memory() const { return series_.at("memory_bytes"); }
  const std::vector<GpuEvent>& gpu_events() const { return gpu_events_; }
  std::optional<int64_t> gpu_memory_total_bytes() const { return gpu_total_; }

 private:
  void StartAt(double now_s, const std::vector<ProcStat>& tree, double cpu_before);
  // The DCGM metrics of the job's GPUs; `nvml` is NVML's view, to match DCGM's GPUs with it.
  void SampleDcgm(int64_t t_s, const std::vector<GpuDeviceSample>& nvml, const DcgmSnapshot& snap);
  void SampleGpu(double now_s, const GpuSnapshot& snap, const DcgmSnapshot* dcgm);
  // The energy of the job's GPUs since the last sample (see the class comment).
  void SampleGpuEnergy(double now_s, const GpuSnapshot& snap);
  std::optional<double> gpu_energy_j() const;
  // `t_s` is floor(now_s) of the sample (or a second before it, for a backfilled point): the
  // shipped time adds the millisecond within the second that SetSampleTime took.
  void Add(std::string_view metric, int64_t t_s, double v) {
    auto it = series_.find(metric);  // no string made for a metric already there
    if (it == series_.end()) it = series_.emplace(std::string(metric), MetricSeries()).first;
    it->second.Add(t_s, v);
    if (keep_new_) {
      auto at = new_.find(metric);
      if (at == new_.end()) at = new_.emplace(std::string(metric), PendingSamples()).first;
      auto& pending = at->second;
      if (pending.size() >= kMaxNew) pending.erase(pending.begin());
      pending.emplace_back(t_s * 1000 + sample_ms_, v);
    }
  }
  // The whole second of `now_s` (what the series bucket by); keeps its milliseconds for Add.
  int64_t SetSampleTime(double now_s) {
    double second = std::floor(now_s);
    sample_ms_ = std::clamp<int64_t>(std::llround((now_s - second) * 1000), 0, 999);
    return static_cast<int64_t>(second);
  }

  ProcFs* proc_;
  CgroupFs* cgroups_;
  GpuSource* gpu_;
  DcgmSource* dcgm_ = nullptr;
  int64_t root_pid_;
  std::string cgroup_path_;
  std::map<std::string, MetricSeries, std::less<>> series_;
  bool keep_new_ = false;
  int64_t sample_ms_ = 0;  // the millisecond within the second of the sample being taken
  std::map<std::string, PendingSamples, std::less<>> new_;
  // CPU seconds per process at the last sample, by (pid, start time), sorted; cpu_now_ is the
  // sample being taken (kept to reuse its storage).
  std::vector<std::pair<std::pair<int64_t, int64_t>, double>> cpu_seen_, cpu_now_;
  std::optional<double> last_t_, started_s_;
  double cpu_total_ = 0;
  std::optional<double> cgroup_cpu_last_;
  std::set<int64_t> pids_;
  std::set<int> gpu_devices_;
  std::set<std::string> gpu_uuids_;
  bool gpu_processes_seen_ = false;  // NVML has listed one of the job's processes
  bool peak_from_cgroup_ = false;
  std::optional<int64_t> memory_limit_, cgroup_peak_, gpu_total_;
  int64_t oom_kills_ = 0;
  int64_t io_read_ = 0, io_write_ = 0;
  // Per-process I/O at the last sample: exited processes keep what they did.
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> io_seen_;
  std::vector<GpuEvent> gpu_events_;
  int64_t samples_ = 0;
  std::optional<std::string> host_netns_;  // the agent's network namespace, read once
  int64_t fd_every_ = 1, io_every_ = 1, cgroup_all_every_ = 1;
  // Energy. Per GPU of the job: the last counter reading (mJ) or, without a counter, the last
  // power reading, and when it was taken.
  struct GpuEnergyState {
    std::optional<uint64_t> last_mj;
    std::optional<double> last_power_w;
    double last_s = 0;
  };
  std::map<int, GpuEnergyState> gpu_energy_;
  int64_t gpu_counter_mj_ = 0;  // integer millijoules: the counters' differences, exactly
  double gpu_power_time_j_ = 0;
  bool gpu_energy_known_ = false, gpu_by_counter_ = false, gpu_by_power_ = false;
  CpuEnergyMeter* cpu_meter_ = nullptr;
  std::optional<double> cpu_energy_j_;
};

}  // namespace rightsize

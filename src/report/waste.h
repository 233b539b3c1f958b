// The waste report: how much of what jobs reserved they really used, what the rest cost, and
// how much a right-sizing policy would have recovered.
//
// BuildWasteReport streams the jobs that ended in [since, until) from a Store (or takes them
// from a vector), aggregates in one pass into compact per-job arrays, and returns a
// WasteReport that render.h prints as text, JSON or HTML. Pure computation: no clock, no
// environment, no I/O besides the store scan; thread-compatible.
//
// Semantics (the README copies this section)
// ------------------------------------------
// Units. Hours are wall-clock hours; core-hours are allocated CPUs (as SLURM counts them) x
// hours; GB means GiB (2^30 bytes), as SLURM prints "G"; GB-hours are GiB held x hours;
// GPU-hours are GPUs x hours. Dollars come from the PriceTable.
//
// Jobs counted. Every job whose end time falls in [since, until) (and in `cluster`, when set)
// counts in `jobs`. Resource-hours need elapsed_s > 0. A field the source did not record is
// unknown, never 0: each sum uses only the jobs whose needed fields are known and says how many
// that was (jobs_with_allocation, jobs_with_usage). A figure no job could contribute to is
// unknown (null in JSON, "unknown" in text), not 0.
//
// Per resource, for each job with elapsed_s > 0:
//   CPU        allocated = AllocatedCpus() x elapsed; used = cpu_time_s (user + system).
//   Memory     allocated = AllocatedMemoryBytes() x elapsed; used = peak_rss_bytes x elapsed
//              (the reservation a perfect request would have held), or avg_rss_bytes x elapsed
//              when no peak is known; `used_basis` says which: peak, average or mixed.
//   GPU        allocated = AllocatedGpus() x elapsed, for jobs with at least one GPU;
//              used = allocated x gpu_util_pct / 100.
//   GPU memory allocated = GPUs x the type's memory (PriceTable) x elapsed; used =
//              peak_gpu_memory_bytes x elapsed; only when both the peak and the type's
//              capacity are known.
//   Time       requested = time_limit_s, elapsed = elapsed_s, over jobs with a finite limit.
// For each: `allocated_*` sums every job whose allocation is known; `used_*`, `wasted_*` and
// `efficiency` use only the jobs whose usage is known too (their allocation is
// `allocated_*_with_usage`). wasted = sum over jobs of max(0, allocated - used) (a job that
// used more than it held wastes nothing; it does not offset another's waste);
// efficiency = used / allocated_with_usage (can exceed 1 for CPU when SMT threads were busy).
//
// Recoverable capacity, two figures:
// (a) Upper bound: each job re-run with a right-sized request: memory 1.2 x its observed peak
//     (the memory basis above); CPUs ceil(1.2 x mean cores used), mean cores used =
//     cpu_time_s / elapsed_s, at least 1; GPUs ceil(1.2 x GPUs x util / 100), at least 1 when
//     util > 0, 0 when the GPUs sat idle at 0%. Recoverable = max(0, allocated - right-sized)
//     x elapsed. It needs hindsight, so it is an upper bound.
// (b) History policy: what a scheduler could have suggested at submission, using only what it
//     knew then. Jobs are taken in submit-time order (start time, then end time, when the
//     submit time is unknown). A job's history is the last 5 jobs with the same user and job
//     name (the same user alone when the job has no name), same cluster, that ENDED strictly
//     before this job was submitted and whose need is known (per resource). With at least 3
//     such jobs, suggested = 1.2 x the largest need among them (CPUs and GPUs rounded up to
//     whole units, at least 1), never above the job's own allocation; otherwise the request is
//     kept and nothing is saved. Need is: peak memory, mean cores used, GPUs x util / 100.
//     A suggestion that covers the job's own need saves (allocated - suggested) x elapsed for
//     that resource. One that falls below it under-provisions the job (`jobs_under_provisioned`,
//     and per resource): too little memory kills the job, so it saves nothing and its lost run
//     (suggested x elapsed for every suggested resource) is subtracted before it re-runs on its
//     original request; too few cores or GPUs only slow it, so that resource saves nothing for
//     this job while the others still do. A job whose own need is unknown saves nothing for
//     that resource (its suggestion cannot be checked). The window's first jobs have no
//     history, so this figure is conservative.
//     Neither figure is ever negative: a resource whose lost runs outweigh its savings
//     recovers 0, and the lost runs are reported beside it (lost_core_hours, lost_gb_hours,
//     lost_gpu_hours, lost_dollars); net_dollars = savings - lost runs keeps the sign.
//
// The headline (render.h prints it first): the upper bound in dollars, scaled from the window
// to a month (x 365 / 12 / window_days) and a year (x 365 / window_days) when the window is at
// least a day long; the idle-GPU jobs (a GPU job whose utilisation is known and under 10%,
// the histogram's 0-10% bucket), their count, GPU-hours and GPU dollars, the costliest
// kIdleGpuListMax of them listed by GPU dollars (ties by cluster and job id).
//
// One cluster per report (ReportOptions::choose_cluster, the CLI's default): when no cluster
// is named and the window holds jobs of several, the report covers one and says which and why
// (`cluster_choice`): among the clusters whose newest job in the window ended within 7 days of
// the newest job of any cluster (those with current data), the one with the most jobs in the
// window (ties by name). The others are listed with their job counts.
//
// Showback (ReportOptions::showback = "account" or "user"): per account or user, the jobs,
// allocated, used and wasted dollars and the upper bound's recoverable dollars, summed per
// job exactly as the totals are, so the rows add up to the report's figures (showback.h
// rounds them to cents so that they still do).
//
// Cost: allocated, used, wasted and recoverable dollars = core-hours x cpu_core_hour +
// GB-hours x memory_gb_hour + GPU-hours x the GPU type's price (default_gpu_hour when the
// type is unknown or unlisted; such types are listed). GPU memory is not priced separately.
//
// Typical request vs real need: per resource, the median per-job allocation and the median
// per-job use (over jobs with usage), and the share that could be saved = upper-bound
// recoverable / allocated_with_usage. For time: median limit, median elapsed, and the share
// of the limit left unused.
//
// Groups (`by`: user, account, partition, gpu-type, job-name; default user): per group the
// jobs, wasted core-hours, GB-hours, GPU-hours and dollars, allocated dollars, and the CPU,
// memory and GPU efficiency of the group (used / allocated hours over its jobs with usage, an
// hour-weighted mean). Top wasters = the top_n groups by wasted dollars (ties by name); when
// `by` is given, `groups` lists all of them in that order. An empty key is "(unknown)".
//
// Efficiency histogram: per job with usage, efficiency in buckets 0-10%, ..., 90-100% (100%
// exactly falls in 90-100%), >100%, for CPU, memory and GPU.
//
// Daily: per UTC day of the job's end time (a job counts wholly on the day it ended), the
// allocated and used core-hours, GB-hours and GPU-hours and the wasted dollars; every day from
// the first to the last end is present when they are at most ten years apart, else only the
// days with jobs (`daily_sparse`): the rows never outnumber the jobs plus ten years of days.
//
// Energy: report/energy.h states its rules (`energy`: kWh, CO2e, the unused GPU reservation's kWh).
//
// Implausible jobs. A stored job with a value outside core/plausible.h's ranges (a run time of
// 1e30 s, an end time past 2200: written before the readers checked, or by another writer) is
// left out of every figure and counted in `jobs_implausible`, with the first one named.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "report/energy.h"
#include "report/prices.h"
#include "report/queue.h"
#include "store/store.h"

namespace rightsize {

struct ReportOptions {
  std::optional<int64_t> since;  // end_time >= since (Unix seconds)
  std::optional<int64_t> until;  // end_time < until
  std::string cluster;           // "" = all clusters
  std::string by;                // "", "user", "account", "partition", "gpu-type", "job-name"
  int top_n = 10;
  // When `cluster` is "" and the jobs span several clusters, report only the one chosen as
  // described above (the CLI sets it unless --all-clusters).
  bool choose_cluster = false;
  std::string showback;  // "", "account" or "user": fill WasteReport::showback
};

// The accepted values of ReportOptions::showback.
inline constexpr std::array<const char*, 2> kShowbackKeys = {"account", "user"};
// GPU utilisation under this counts a GPU job as idle; the idle list keeps this many jobs.
inline constexpr double kIdleGpuUtilPct = 10;
inline constexpr size_t kIdleGpuListMax = 100;
// Clusters whose newest job ended within this long of the newest of all have current data.
inline constexpr int64_t kCurrentClusterSpanS = 7 * 86400;

// The accepted values of ReportOptions::by, for the CLI's help and validation.
inline constexpr std::array<const char*, 5> kReportGroupKeys = {"user", "account", "partition",
                                                                "gpu-type", "job-name"};

// The rules of the two recoverable figures, in one sentence each (printed in every format).
extern const char* const kUpperBoundRule;
extern const char* const kHistoryPolicyRule;

// One resource's sums. The unit (core-hours, GB-hours, GPU-hours) depends on the resource.
struct ResourceWaste {
  int64_t jobs_with_allocation = 0;            // elapsed > 0 and allocation known
  int64_t jobs_with_usage = 0;                 // of those, usage known too
  std::optional<double> allocated;             // all jobs_with_allocation
  std::optional<double> allocated_with_usage;  // only jobs_with_usage
  std::optional<double> used;
  std::optional<double> wasted;
  std::optional<double> efficiency;  // used / allocated_with_usage
  // Dollars (not for GPU memory, which the GPU price covers).
  std::optional<double> allocated_dollars;
  std::optional<double> used_dollars;
  std::optional<double> wasted_dollars;
};

struct CpuWaste : ResourceWaste {
  std::optional<double> requested_cores_total;  // sum of request.cpus, all jobs that know it
};

struct MemoryWaste : ResourceWaste {
  std::string used_basis;  // "peak", "average", "mixed"; "" when no job has usage
  int64_t jobs_with_peak = 0;
  int64_t jobs_with_average_only = 0;
};

struct GpuWaste : ResourceWaste {
  int64_t gpu_jobs = 0;  // jobs with at least one GPU allocated
};

struct GpuMemoryWaste : ResourceWaste {
  int64_t jobs_capacity_unknown = 0;  // peak known but the GPU type's memory is not
};

struct TimeWaste {
  int64_t jobs_with_limit = 0;
  std::optional<double> requested_hours;      // sum of time limits
  std::optional<double> elapsed_hours;        // sum of elapsed, same jobs
  std::optional<double> efficiency;           // elapsed / requested
  std::optional<double> total_elapsed_hours;  // all jobs with elapsed > 0, limit or not
};

struct RecoverableAmounts {
  std::optional<double> core_hours;  // unknown when no job had the usage to judge
  std::optional<double> gb_hours;
  std::optional<double> gpu_hours;
  double dollars = 0;
};

struct HistoryPolicyResult : RecoverableAmounts {
  int64_t jobs_with_history = 0;       // jobs that got at least one suggestion
  int64_t jobs_under_provisioned = 0;  // a suggestion fell below the job's own need
  int64_t cpu_under_provisioned = 0;
  int64_t memory_under_provisioned = 0;
  int64_t gpu_under_provisioned = 0;
  double lost_dollars = 0;  // runs killed for lack of memory, already subtracted from `dollars`
  // The lost runs' resource-hours, already subtracted from the figures above (never below 0).
  double lost_core_hours = 0, lost_gb_hours = 0, lost_gpu_hours = 0;
  double net_dollars = 0;  // savings - lost runs; negative when the kills cost more
};

struct CostSummary {
  std::string currency;
  std::string prices_source;
  double cpu_core_hour = 0;
  double memory_gb_hour = 0;
  double default_gpu_hour = 0;
  double allocated_dollars = 0;  // every job with a known allocation
  std::optional<double> used_dollars;
  std::optional<double> wasted_dollars;  // jobs with usage only
  std::vector<std::string> gpu_types_at_default_price;
};

struct TypicalRow {
  std::string resource;  // "cpu", "memory", "gpu", "time"
  std::string unit;      // "cores", "GB", "GPUs", "hours"
  int64_t jobs = 0;      // jobs with usage
  std::optional<double> median_request;
  std::optional<double> median_used;
  std::optional<double> share_recoverable;  // time: share of the limit left unused
};

struct GroupRow {
  std::string key;
  int64_t jobs = 0;
  double wasted_core_hours = 0;
  double wasted_gb_hours = 0;
  double wasted_gpu_hours = 0;
  double wasted_dollars = 0;
  double allocated_dollars = 0;
  std::optional<double> cpu_efficiency;
  std::optional<double> memory_efficiency;
  std::optional<double> gpu_efficiency;
};

inline constexpr int kHistogramBuckets = 11;  // 0-10, ..., 90-100, >100 (%)
struct EfficiencyHistogram {
  std::string resource;  // "cpu", "memory", "gpu"
  std::array<int64_t, kHistogramBuckets> jobs{};
};
// "0-10%", …, "90-100%", ">100%".
std::string HistogramBucketLabel(int bucket);

struct DailyRow {
  int64_t day_start = 0;  // Unix seconds of 00:00 UTC
  int64_t jobs = 0;
  double allocated_core_hours = 0, used_core_hours = 0;
  double allocated_gb_hours = 0, used_gb_hours = 0;
  double allocated_gpu_hours = 0, used_gpu_hours = 0;
  double wasted_dollars = 0;
};

// A GPU job whose GPUs sat under kIdleGpuUtilPct.
struct IdleGpuJob {
  std::string cluster, job_id, user, account, gpu_type;
  int gpus = 0;
  double hours = 0;          // elapsed
  double util_pct = 0;       // mean GPU utilisation
  double gpu_dollars = 0;    // GPUs x hours x the type's price
  double total_dollars = 0;  // every resource the job held, at list prices
};

struct IdleGpuSummary {
  int64_t jobs = 0;            // all idle GPU jobs (the list may hold fewer)
  int64_t jobs_with_util = 0;  // GPU jobs whose utilisation is known
  double gpu_hours = 0, gpu_dollars = 0;
  std::vector<IdleGpuJob> list;  // the costliest kIdleGpuListMax, by gpu_dollars
};

// How the report picked its cluster (see "One cluster per report").
struct ClusterCount {
  std::string cluster;
  int64_t jobs = 0;
  std::optional<int64_t> last_end;
};
struct ClusterChoice {
  std::string chosen;                // "" when no choice was made (one cluster, or asked)
  std::vector<ClusterCount> others;  // the clusters left out, most jobs first
  int64_t chosen_jobs = 0;
};

// One showback row, exact dollars (showback.h rounds them).
struct ShowbackAcc {
  std::string key;  // "(unknown)" when empty
  int64_t jobs = 0;
  double core_hours = 0, gpu_hours = 0;  // allocated
  double allocated_dollars = 0, used_dollars = 0, wasted_dollars = 0;
  double recoverable_dollars = 0;  // upper bound: allocated - right-sized
};

struct WasteReport {
  std::optional<int64_t> since, until;         // as asked
  std::optional<int64_t> first_end, last_end;  // of the jobs found
  double window_days = 0;             // until - since when both given, else last_end - first_end
  std::vector<std::string> clusters;  // sorted
  std::string by;                     // the grouping used for top_wasters ("user")
  bool by_given = false;              // whether `groups` is filled
  int64_t jobs = 0;
  int64_t jobs_with_elapsed = 0;
  int64_t jobs_implausible = 0;   // left out of every figure (see above)
  std::string first_implausible;  // "cluster/job: field usage.elapsed_s: expected …"
  CpuWaste cpu;                   // core-hours
  MemoryWaste memory;             // GB-hours
  GpuWaste gpu;                   // GPU-hours
  GpuMemoryWaste gpu_memory;      // GB-hours of GPU memory
  TimeWaste time;
  RecoverableAmounts upper_bound;
  HistoryPolicyResult history_policy;
  CostSummary cost;
  std::vector<TypicalRow> typical;
  std::vector<GroupRow> top_wasters;
  std::vector<GroupRow> groups;
  std::vector<EfficiencyHistogram> efficiency_histogram;  // cpu, memory, gpu
  std::vector<DailyRow> daily;
  bool daily_sparse = false;  // only the days with jobs (the span is over ten years)
  IdleGpuSummary idle_gpu;
  ClusterChoice cluster_choice;
  std::string showback_by;            // "" unless asked
  std::vector<ShowbackAcc> showback;  // sorted by key
  EnergySummary energy;
  QueueWhatIf queue;  // filled by AddQueueWhatIf (rightsize report, the MCP report tool)
};

// Picks the cluster to report from per-cluster counts (see "One cluster per report"); "" when
// there are fewer than two.
ClusterChoice ChooseCluster(std::vector<ClusterCount> counts);

// Scans the store and builds the report. InvalidArgument for a bad `by` or top_n < 0 or
// since >= until; the store's status when the scan fails.
StatusOr<WasteReport> BuildWasteReport(Store& store, const ReportOptions& opts,
                                       const PriceTable& prices);

// Fills `report->queue` ("what the queue would have done", report/queue.h) for a report of one
// cluster with jobs, from `store`: the window's jobs on the cluster's CPUs (its metadata's
// swf.MaxProcs or cpus, else the largest job seen). Every door that renders a store's report
// (`rightsize report`, the MCP report tool) calls it, so their documents are the same.
void AddQueueWhatIf(Store& store, WasteReport* report);

// The same over jobs in memory (tests, tools); applies the since/until/cluster filter itself.
StatusOr<WasteReport> BuildWasteReport(std::span<const JobRecord> jobs, const ReportOptions& opts,
                                       const PriceTable& prices);

}  // namespace rightsize

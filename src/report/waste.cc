#include "report/waste.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/plausible.h"

namespace rightsize {

const char* const kUpperBoundRule =
    "Upper bound: every job re-run with 1.2x its observed peak memory, ceil(1.2x its mean cores "
    "used) CPUs (at least 1) and ceil(1.2x GPUs x utilisation) GPUs (0 if they sat idle); "
    "recoverable = (allocated - right-sized) x elapsed. Needs hindsight, so no scheduler could "
    "reach it.";
const char* const kHistoryPolicyRule =
    "History policy: at submission, suggest 1.2x the largest need among the same user's (and "
    "job name's) last 5 jobs that had already ended, when there are at least 3, never above "
    "the request; savings = (allocated - suggested) x elapsed. A suggestion below the job's "
    "real need under-provisions it: too little memory kills it (its lost run, suggested x "
    "elapsed, is subtracted), too few cores or GPUs slow it (that resource saves nothing).";

namespace {

constexpr double kSecondsPerHour = 3600.0;
constexpr double kHeadroom = 1.2;
constexpr int kHistoryDepth = 5;
constexpr int kHistoryMinJobs = 3;
constexpr int64_t kSecondsPerDay = 86400;
// Days without jobs are listed between the first and the last end only while the span is at
// most this long (ten years); past it `daily` lists the days that have jobs, so its length is
// bounded by the number of jobs, never by how far apart their times are.
constexpr int64_t kMaxDenseDailyDays = 3653;
const double kUnknown = std::numeric_limits<double>::quiet_NaN();

bool Known(double v) { return !std::isnan(v); }

// Rounds up to whole units, forgiving floating-point noise (1.2 x 2.5 = 3.0000000000000004).
double CeilUnits(double v) { return std::ceil(v - 1e-9); }

std::optional<double> If(bool known, double v) {
  return known ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> Ratio(double num, double den, bool known) {
  if (!known || den <= 0) return std::nullopt;
  return num / den;
}

double Median(std::vector<double>& v) {
  size_t n = v.size();
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  double upper = *mid;
  if (n % 2 == 1) return upper;
  double lower = *std::max_element(v.begin(), mid);
  return (lower + upper) / 2;
}

std::optional<double> MedianOrNull(std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return Median(v);
}

int HistogramBucket(double efficiency) {
  if (efficiency > 1.0 + 1e-12) return kHistogramBuckets - 1;
  int b = static_cast<int>(std::floor(efficiency * 10 + 1e-9));
  return std::clamp(b, 0, kHistogramBuckets - 2);
}

int64_t DayStart(int64_t t) {
  int64_t d = t / kSecondsPerDay;
  if (t % kSecondsPerDay < 0) --d;
  return d * kSecondsPerDay;
}

// Sums for one resource while scanning.
struct ResourceAcc {
  int64_t jobs_alloc = 0, jobs_usage = 0;
  double alloc = 0, alloc_wu = 0, used = 0, wasted = 0;
  double alloc_usd = 0, used_usd = 0, wasted_usd = 0;
  double upper_bound = 0;  // recoverable resource-hours
  std::array<int64_t, kHistogramBuckets> histogram{};
  std::vector<double> request_per_job, used_per_job;  // for medians, jobs with usage

  // One job: allocated and used resource-hours (used NaN when unknown), price per hour.
  void Add(double alloc_h, double used_h, double price) {
    ++jobs_alloc;
    alloc += alloc_h;
    alloc_usd += alloc_h * price;
    if (!Known(used_h)) return;
    ++jobs_usage;
    alloc_wu += alloc_h;
    used += used_h;
    used_usd += used_h * price;
    double w = std::max(0.0, alloc_h - used_h);
    wasted += w;
    wasted_usd += w * price;
    if (alloc_h > 0) ++histogram[HistogramBucket(used_h / alloc_h)];
  }

  void Fill(ResourceWaste& out, bool priced) const {
    out.jobs_with_allocation = jobs_alloc;
    out.jobs_with_usage = jobs_usage;
    bool a = jobs_alloc > 0, u = jobs_usage > 0;
    out.allocated = If(a, alloc);
    out.allocated_with_usage = If(u, alloc_wu);
    out.used = If(u, used);
    out.wasted = If(u, wasted);
    out.efficiency = Ratio(used, alloc_wu, u);
    if (priced) {
      out.allocated_dollars = If(a, alloc_usd);
      out.used_dollars = If(u, used_usd);
      out.wasted_dollars = If(u, wasted_usd);
    }
  }
};

struct GroupAcc {
  int64_t jobs = 0;
  double wasted_core_h = 0, wasted_gb_h = 0, wasted_gpu_h = 0, wasted_usd = 0, alloc_usd = 0;
  double cpu_used = 0, cpu_alloc = 0, mem_used = 0, mem_alloc = 0, gpu_used = 0, gpu_alloc = 0;
  bool cpu_known = false, mem_known = false, gpu_known = false;
};

// What the history policy needs of one job. NaN marks an unknown value.
struct JobFacts {
  int64_t order_time = 0;  // submit, else start, else end
  int64_t end_time = 0;
  bool has_order_time = false, has_end = false;
  int32_t key = -1;  // history key id
  double elapsed_h = 0;
  double alloc_cpus = kUnknown, alloc_mem_gb = kUnknown, alloc_gpus = kUnknown;
  double need_cpus = kUnknown, need_mem_gb = kUnknown, need_gpus = kUnknown;
  double gpu_price = 0;
};

// The needs of the last kHistoryDepth ended jobs of one key, per resource.
struct Ring {
  std::array<double, kHistoryDepth> values{};
  int count = 0;
  int next = 0;
  void Push(double v) {
    values[static_cast<size_t>(next)] = v;
    next = (next + 1) % kHistoryDepth;
    count = std::min(count + 1, kHistoryDepth);
  }
  // The largest of the remembered needs, or NaN with too little history.
  double Max() const {
    if (count < kHistoryMinJobs) return kUnknown;
    return *std::max_element(values.begin(), values.begin() + count);
  }
};
struct KeyHistory {
  Ring cpu, mem, gpu;
};

// One job being added: where its figures go, and its dollars so far.
struct JobAdd {
  JobFacts f;
  GroupAcc& group;
  DailyRow* day;
  double elapsed_s, eh;  // run time, in seconds and hours
  double alloc_usd = 0, wasted_usd = 0;
  double used_usd = 0, upper_bound_usd = 0;  // for showback
  std::optional<IdleGpuJob> idle;            // set when its GPUs sat idle
};

class WasteAggregator {
 public:
  WasteAggregator(const ReportOptions& opts, const PriceTable& prices)
      : opts_(opts), prices_(prices), by_(opts.by.empty() ? "user" : opts.by), energy_(prices) {}

  void Add(const JobRecord& job);
  WasteReport Finish();
  void FinishIdleAndShowback(WasteReport& r);

 private:
  GroupAcc& Group(const JobRecord& job);
  void AddShowback(const JobRecord& job, const JobAdd* a);
  void AddCpu(const JobRecord& job, JobAdd& a);
  void AddMemory(const JobRecord& job, JobAdd& a);
  void AddGpus(const JobRecord& job, JobAdd& a);
  void AddHistoryFacts(const JobRecord& job, JobFacts f);
  void RunHistoryPolicy(HistoryPolicyResult& out);

  const ReportOptions& opts_;
  const PriceTable& prices_;
  const std::string by_;

  int64_t jobs_ = 0, jobs_with_elapsed_ = 0;
  int64_t jobs_implausible_ = 0;
  std::string first_implausible_;
  std::optional<int64_t> first_end_, last_end_;
  std::set<std::string> clusters_;
  bool requested_cores_known_ = false;
  double requested_cores_ = 0;
  ResourceAcc cpu_, mem_, gpu_, gpu_mem_;
  int64_t mem_peak_jobs_ = 0, mem_avg_jobs_ = 0, gpu_jobs_ = 0, gpu_mem_cap_unknown_ = 0;
  double gpu_upper_bound_usd_ = 0;
  int64_t time_jobs_ = 0;
  double time_limit_h_ = 0, time_elapsed_h_ = 0, total_elapsed_h_ = 0;
  std::vector<double> time_limit_per_job_, time_elapsed_per_job_;
  std::set<std::string> default_priced_types_;
  std::unordered_map<std::string, int32_t> group_ids_;
  std::vector<std::pair<std::string, GroupAcc>> groups_;
  std::unordered_map<std::string, int32_t> history_keys_;
  std::vector<JobFacts> facts_;
  std::map<int64_t, DailyRow> daily_;
  IdleGpuSummary idle_;
  std::vector<IdleGpuJob> idle_jobs_;
  std::unordered_map<std::string, int32_t> showback_ids_;
  std::vector<ShowbackAcc> showback_;
  EnergyAccumulator energy_;
};

// Showback rows sum per job exactly what the totals sum, so that they add up to them.
void WasteAggregator::AddShowback(const JobRecord& job, const JobAdd* a) {
  if (opts_.showback.empty()) return;
  std::string key = opts_.showback == "account" ? job.request.account : job.request.user;
  if (key.empty()) key = "(unknown)";
  auto [it, inserted] = showback_ids_.try_emplace(key, static_cast<int32_t>(showback_.size()));
  if (inserted) showback_.push_back(ShowbackAcc{.key = key});
  ShowbackAcc& row = showback_[static_cast<size_t>(it->second)];
  ++row.jobs;
  if (a == nullptr) return;  // no run time: counted, adds no hours
  row.allocated_dollars += a->alloc_usd;
  row.used_dollars += a->used_usd;
  row.wasted_dollars += a->wasted_usd;
  row.recoverable_dollars += a->upper_bound_usd;
  if (Known(a->f.alloc_cpus)) row.core_hours += a->f.alloc_cpus * a->eh;
  if (Known(a->f.alloc_gpus)) row.gpu_hours += a->f.alloc_gpus * a->eh;
}

GroupAcc& WasteAggregator::Group(const JobRecord& job) {
  std::string key;
  const std::string& by = by_;
  if (by == "user") {
    key = job.request.user;
  } else if (by == "account") {
    key = job.request.account;
  } else if (by == "partition") {
    key = job.request.partition;
  } else if (by == "job-name") {
    key = job.request.job_name;
  } else {  // gpu-type
    auto gpus = job.AllocatedGpus();
    if (!gpus || *gpus <= 0) {
      key = "(no GPU)";
    } else {
      key = job.GpuType().empty() ? "(untyped)" : LowerAscii(job.GpuType());
    }
  }
  if (key.empty()) key = "(unknown)";
  auto [it, inserted] = group_ids_.try_emplace(key, static_cast<int32_t>(groups_.size()));
  if (inserted) groups_.emplace_back(key, GroupAcc{});
  return groups_[static_cast<size_t>(it->second)].second;
}

void WasteAggregator::Add(const JobRecord& job) {
  // A store written before the readers checked ranges (or by another writer) can hold a run
  // time of 1e30 s or a wrapped end time: such a job is left out and counted, so every sum
  // below stays finite and the daily rows stay few.
  if (Status st = CheckJobRecord(job); !st.ok()) {
    if (jobs_implausible_++ == 0) {
      first_implausible_ = fmt::format("{}/{}: {}", job.cluster, job.job_id, st.message());
    }
    return;
  }
  ++jobs_;
  clusters_.insert(job.cluster);
  if (job.end_time) {
    first_end_ = first_end_ ? std::min(*first_end_, *job.end_time) : *job.end_time;
    last_end_ = last_end_ ? std::max(*last_end_, *job.end_time) : *job.end_time;
  }
  if (job.request.cpus) {
    requested_cores_known_ = true;
    requested_cores_ += *job.request.cpus;
  }
  GroupAcc& group = Group(job);
  ++group.jobs;
  if (!job.usage.elapsed_s || *job.usage.elapsed_s <= 0) {
    AddShowback(job, nullptr);
    return;
  }
  ++jobs_with_elapsed_;

  const double elapsed_s = *job.usage.elapsed_s;
  const double eh = elapsed_s / kSecondsPerHour;
  total_elapsed_h_ += eh;
  DailyRow* day = nullptr;
  if (job.end_time) {
    auto [it, inserted] = daily_.try_emplace(DayStart(*job.end_time));
    day = &it->second;
    day->day_start = it->first;
    ++day->jobs;
  }
  JobAdd a{JobFacts{}, group, day, elapsed_s, eh};
  a.f.elapsed_h = eh;
  AddCpu(job, a);
  AddMemory(job, a);
  AddGpus(job, a);
  energy_.Add(job);
  // Time limit.
  if (job.request.time_limit_s && *job.request.time_limit_s > 0) {
    ++time_jobs_;
    double limit_h = static_cast<double>(*job.request.time_limit_s) / kSecondsPerHour;
    time_limit_h_ += limit_h;
    time_elapsed_h_ += eh;
    time_limit_per_job_.push_back(limit_h);
    time_elapsed_per_job_.push_back(eh);
  }

  group.alloc_usd += a.alloc_usd;
  group.wasted_usd += a.wasted_usd;
  if (day) day->wasted_dollars += a.wasted_usd;
  AddShowback(job, &a);
  if (a.idle) {
    a.idle->total_dollars = a.alloc_usd;
    ++idle_.jobs;
    idle_.gpu_hours += a.idle->gpus * a.idle->hours;
    idle_.gpu_dollars += a.idle->gpu_dollars;
    idle_jobs_.push_back(std::move(*a.idle));
  }
  AddHistoryFacts(job, a.f);
}

void WasteAggregator::AddCpu(const JobRecord& job, JobAdd& a) {
  if (auto cpus = job.AllocatedCpus()) {
    a.f.alloc_cpus = *cpus;
    double alloc_h = *cpus * a.eh;
    double used_h = kUnknown;
    if (job.usage.cpu_time_s) {
      used_h = *job.usage.cpu_time_s / kSecondsPerHour;
      a.f.need_cpus = *job.usage.cpu_time_s / a.elapsed_s;
      double right = std::max(1.0, CeilUnits(kHeadroom * a.f.need_cpus));
      cpu_.upper_bound += std::max(0.0, *cpus - right) * a.eh;
      a.upper_bound_usd += std::max(0.0, *cpus - right) * a.eh * prices_.cpu_core_hour;
      a.used_usd += used_h * prices_.cpu_core_hour;
      cpu_.request_per_job.push_back(*cpus);
      cpu_.used_per_job.push_back(a.f.need_cpus);
      a.group.cpu_known = true;
      a.group.cpu_alloc += alloc_h;
      a.group.cpu_used += used_h;
      double w = std::max(0.0, alloc_h - used_h);
      a.group.wasted_core_h += w;
      a.wasted_usd += w * prices_.cpu_core_hour;
      if (a.day != nullptr) a.day->used_core_hours += used_h;
    }
    cpu_.Add(alloc_h, used_h, prices_.cpu_core_hour);
    a.alloc_usd += alloc_h * prices_.cpu_core_hour;
    if (a.day != nullptr) a.day->allocated_core_hours += alloc_h;
  }
}

void WasteAggregator::AddMemory(const JobRecord& job, JobAdd& a) {
  if (auto mem = job.AllocatedMemoryBytes()) {
    double alloc_gb = static_cast<double>(*mem) / static_cast<double>(kGiB);
    a.f.alloc_mem_gb = alloc_gb;
    double alloc_h = alloc_gb * a.eh;
    double used_h = kUnknown;
    std::optional<int64_t> used_bytes = job.usage.peak_rss_bytes;
    if (used_bytes) {
      ++mem_peak_jobs_;
    } else if (job.usage.avg_rss_bytes) {
      used_bytes = job.usage.avg_rss_bytes;
      ++mem_avg_jobs_;
    }
    if (used_bytes) {
      a.f.need_mem_gb = static_cast<double>(*used_bytes) / static_cast<double>(kGiB);
      used_h = a.f.need_mem_gb * a.eh;
      mem_.upper_bound += std::max(0.0, alloc_gb - kHeadroom * a.f.need_mem_gb) * a.eh;
      a.upper_bound_usd +=
          std::max(0.0, alloc_gb - kHeadroom * a.f.need_mem_gb) * a.eh * prices_.memory_gb_hour;
      a.used_usd += used_h * prices_.memory_gb_hour;
      mem_.request_per_job.push_back(alloc_gb);
      mem_.used_per_job.push_back(a.f.need_mem_gb);
      a.group.mem_known = true;
      a.group.mem_alloc += alloc_h;
      a.group.mem_used += used_h;
      double w = std::max(0.0, alloc_h - used_h);
      a.group.wasted_gb_h += w;
      a.wasted_usd += w * prices_.memory_gb_hour;
      if (a.day != nullptr) a.day->used_gb_hours += used_h;
    }
    mem_.Add(alloc_h, used_h, prices_.memory_gb_hour);
    a.alloc_usd += alloc_h * prices_.memory_gb_hour;
    if (a.day != nullptr) a.day->allocated_gb_hours += alloc_h;
  }
}

void WasteAggregator::AddGpus(const JobRecord& job, JobAdd& a) {
  if (auto gpus = job.AllocatedGpus()) {
    const std::string& type = job.GpuType();
    double price = prices_.GpuHourPrice(type);
    a.f.gpu_price = price;
    double g = std::max(0, *gpus);
    a.f.alloc_gpus = g;
    double alloc_h = g * a.eh;
    double used_h = kUnknown;
    if (g > 0) {
      ++gpu_jobs_;
      if (!prices_.HasGpuPrice(type)) default_priced_types_.insert(type.empty() ? "" : type);
      if (job.usage.gpu_util_pct) {
        double util = std::clamp(*job.usage.gpu_util_pct, 0.0, 100.0) / 100.0;
        a.f.need_gpus = g * util;
        used_h = alloc_h * util;
        double right = util > 0 ? std::max(1.0, CeilUnits(kHeadroom * a.f.need_gpus)) : 0.0;
        gpu_.upper_bound += std::max(0.0, g - right) * a.eh;
        gpu_upper_bound_usd_ += std::max(0.0, g - right) * a.eh * price;
        a.upper_bound_usd += std::max(0.0, g - right) * a.eh * price;
        a.used_usd += used_h * price;
        ++idle_.jobs_with_util;
        if (HistogramBucket(util) == 0) {  // the 0-10% bucket, so the two counts agree
          a.idle = IdleGpuJob{.cluster = job.cluster,
                              .job_id = job.job_id,
                              .user = job.request.user,
                              .account = job.request.account,
                              .gpu_type = type,
                              .gpus = *gpus,
                              .hours = a.eh,
                              .util_pct = util * 100,
                              .gpu_dollars = alloc_h * price};
        }
        gpu_.request_per_job.push_back(g);
        gpu_.used_per_job.push_back(a.f.need_gpus);
        a.group.gpu_known = true;
        a.group.gpu_alloc += alloc_h;
        a.group.gpu_used += used_h;
        double w = alloc_h - used_h;
        a.group.wasted_gpu_h += w;
        a.wasted_usd += w * price;
        if (a.day != nullptr) a.day->used_gpu_hours += used_h;
      }
    }
    // A job with a known count of 0 GPUs counts as a known (zero) GPU allocation.
    if (g > 0) {
      gpu_.Add(alloc_h, used_h, price);
    } else {
      ++gpu_.jobs_alloc;
    }
    a.alloc_usd += alloc_h * price;
    if (a.day != nullptr) a.day->allocated_gpu_hours += alloc_h;

    if (g > 0 && job.usage.peak_gpu_memory_bytes) {
      double peak_gb =
          static_cast<double>(*job.usage.peak_gpu_memory_bytes) / static_cast<double>(kGiB);
      double cap_gb = prices_.GpuMemoryGb(type, peak_gb / g);
      if (cap_gb > 0) {
        gpu_mem_.Add(g * cap_gb * a.eh, peak_gb * a.eh, 0);
      } else {
        ++gpu_mem_cap_unknown_;
      }
    }
  }
}

// Facts for the history policy: only jobs with a user can have a history.
void WasteAggregator::AddHistoryFacts(const JobRecord& job, JobFacts f) {
  if (!job.request.user.empty()) {
    std::string key = job.cluster;
    key += '\x1f';
    key += job.request.user;
    key += '\x1f';
    key += job.request.job_name;
    auto [it, inserted] =
        history_keys_.try_emplace(std::move(key), static_cast<int32_t>(history_keys_.size()));
    f.key = it->second;
    if (job.end_time) {
      f.has_end = true;
      f.end_time = *job.end_time;
    }
    std::optional<int64_t> order = job.submit_time  ? job.submit_time
                                   : job.start_time ? job.start_time
                                                    : job.end_time;
    if (order) {
      f.has_order_time = true;
      f.order_time = *order;
    }
    facts_.push_back(f);
  }
}

void WasteAggregator::RunHistoryPolicy(HistoryPolicyResult& out) {
  // Sort (time, index) pairs rather than indices with a comparator that reads facts_: the
  // pairs are contiguous, so the two sorts stay in cache (they were a fifth of a report).
  std::vector<std::pair<int64_t, uint32_t>> order_keys, end_keys;
  order_keys.reserve(facts_.size());
  end_keys.reserve(facts_.size());
  for (uint32_t i = 0; i < facts_.size(); ++i) {
    if (facts_[i].has_order_time) order_keys.emplace_back(facts_[i].order_time, i);
    if (facts_[i].has_end) end_keys.emplace_back(facts_[i].end_time, i);
  }
  std::sort(order_keys.begin(), order_keys.end());
  std::sort(end_keys.begin(), end_keys.end());
  std::vector<uint32_t> by_order, by_end;
  by_order.reserve(order_keys.size());
  by_end.reserve(end_keys.size());
  for (const auto& [t, i] : order_keys) by_order.push_back(i);
  for (const auto& [t, i] : end_keys) by_end.push_back(i);

  std::vector<KeyHistory> history(history_keys_.size());
  double core_h = 0, gb_h = 0, gpu_h = 0;
  size_t next_end = 0;
  for (uint32_t i : by_order) {
    const JobFacts& f = facts_[i];
    // Admit every job that ended strictly before this one was submitted.
    while (next_end < by_end.size() && facts_[by_end[next_end]].end_time < f.order_time) {
      const JobFacts& done = facts_[by_end[next_end]];
      KeyHistory& h = history[static_cast<size_t>(done.key)];
      if (Known(done.need_cpus)) h.cpu.Push(done.need_cpus);
      if (Known(done.need_mem_gb)) h.mem.Push(done.need_mem_gb);
      if (Known(done.need_gpus) && done.alloc_gpus > 0) h.gpu.Push(done.need_gpus);
      ++next_end;
    }
    const KeyHistory& h = history[static_cast<size_t>(f.key)];

    // Suggestions, NaN where none can be made.
    double s_cpu = kUnknown, s_mem = kUnknown, s_gpu = kUnknown;
    if (Known(f.alloc_cpus) && Known(h.cpu.Max())) {
      s_cpu = std::min(f.alloc_cpus, std::max(1.0, CeilUnits(kHeadroom * h.cpu.Max())));
    }
    if (Known(f.alloc_mem_gb) && Known(h.mem.Max())) {
      s_mem = std::min(f.alloc_mem_gb, kHeadroom * h.mem.Max());
    }
    if (Known(f.alloc_gpus) && f.alloc_gpus > 0 && Known(h.gpu.Max())) {
      s_gpu = std::min(f.alloc_gpus, std::max(1.0, CeilUnits(kHeadroom * h.gpu.Max())));
    }
    if (!Known(s_cpu) && !Known(s_mem) && !Known(s_gpu)) continue;
    ++out.jobs_with_history;

    // A suggestion equal to the allocation changes nothing, so it cannot under-provision.
    auto under = [](double suggested, double alloc, double need) {
      return Known(suggested) && Known(need) && suggested < alloc && suggested < need - 1e-9;
    };
    bool cpu_under = under(s_cpu, f.alloc_cpus, f.need_cpus);
    bool mem_under = under(s_mem, f.alloc_mem_gb, f.need_mem_gb);
    bool gpu_under = under(s_gpu, f.alloc_gpus, f.need_gpus);
    out.cpu_under_provisioned += cpu_under;
    out.memory_under_provisioned += mem_under;
    out.gpu_under_provisioned += gpu_under;
    const double eh = f.elapsed_h;
    if (cpu_under || mem_under || gpu_under) ++out.jobs_under_provisioned;
    if (mem_under) {
      // Too little memory kills the job: the run on the suggested request is lost and it is
      // re-run on its original request, so it saves nothing and costs the lost run.
      double lost_usd = 0;
      if (Known(s_cpu)) {
        core_h -= s_cpu * eh;
        out.lost_core_hours += s_cpu * eh;
        lost_usd += s_cpu * eh * prices_.cpu_core_hour;
      }
      gb_h -= s_mem * eh;
      out.lost_gb_hours += s_mem * eh;
      lost_usd += s_mem * eh * prices_.memory_gb_hour;
      if (Known(s_gpu)) {
        gpu_h -= s_gpu * eh;
        out.lost_gpu_hours += s_gpu * eh;
        lost_usd += s_gpu * eh * f.gpu_price;
      }
      out.lost_dollars += lost_usd;
      out.dollars -= lost_usd;
      continue;
    }
    // Too few cores or GPUs slow the job down rather than kill it: that resource saves
    // nothing for this job (its work still needs need x elapsed), the others still save.
    if (Known(s_cpu) && Known(f.need_cpus) && !cpu_under) {
      double saved = (f.alloc_cpus - s_cpu) * eh;
      core_h += saved;
      out.dollars += saved * prices_.cpu_core_hour;
    }
    if (Known(s_mem) && Known(f.need_mem_gb)) {
      double saved = (f.alloc_mem_gb - s_mem) * eh;
      gb_h += saved;
      out.dollars += saved * prices_.memory_gb_hour;
    }
    if (Known(s_gpu) && Known(f.need_gpus) && !gpu_under) {
      double saved = (f.alloc_gpus - s_gpu) * eh;
      gpu_h += saved;
      out.dollars += saved * f.gpu_price;
    }
  }
  // A resource (or a policy) whose lost runs outweigh its savings recovers nothing: the
  // figures stop at 0 and the losses are reported beside them.
  out.net_dollars = out.dollars;
  out.dollars = std::max(0.0, out.dollars);
  out.core_hours = If(cpu_.jobs_usage > 0, std::max(0.0, core_h));
  out.gb_hours = If(mem_.jobs_usage > 0, std::max(0.0, gb_h));
  out.gpu_hours = If(gpu_.jobs_usage > 0, std::max(0.0, gpu_h));
}

WasteReport WasteAggregator::Finish() {
  WasteReport r;
  r.since = opts_.since;
  r.until = opts_.until;
  r.first_end = first_end_;
  r.last_end = last_end_;
  std::optional<int64_t> from = opts_.since ? opts_.since : first_end_;
  std::optional<int64_t> to = opts_.until ? opts_.until : last_end_;
  if (from && to && *to > *from) {
    r.window_days = static_cast<double>(*to - *from) / static_cast<double>(kSecondsPerDay);
  }
  r.clusters.assign(clusters_.begin(), clusters_.end());
  r.by = opts_.by.empty() ? "user" : opts_.by;
  r.by_given = !opts_.by.empty();
  r.jobs = jobs_;
  r.jobs_with_elapsed = jobs_with_elapsed_;
  r.jobs_implausible = jobs_implausible_;
  r.first_implausible = first_implausible_;
  r.energy = energy_.Finish();

  cpu_.Fill(r.cpu, true);
  if (requested_cores_known_) r.cpu.requested_cores_total = requested_cores_;
  mem_.Fill(r.memory, true);
  r.memory.jobs_with_peak = mem_peak_jobs_;
  r.memory.jobs_with_average_only = mem_avg_jobs_;
  if (mem_.jobs_usage > 0) {
    r.memory.used_basis = mem_avg_jobs_ == 0 ? "peak" : mem_peak_jobs_ == 0 ? "average" : "mixed";
  }
  gpu_.Fill(r.gpu, true);
  r.gpu.gpu_jobs = gpu_jobs_;
  gpu_mem_.Fill(r.gpu_memory, false);
  r.gpu_memory.jobs_capacity_unknown = gpu_mem_cap_unknown_;

  r.time.jobs_with_limit = time_jobs_;
  r.time.requested_hours = If(time_jobs_ > 0, time_limit_h_);
  r.time.elapsed_hours = If(time_jobs_ > 0, time_elapsed_h_);
  r.time.efficiency = Ratio(time_elapsed_h_, time_limit_h_, time_jobs_ > 0);
  r.time.total_elapsed_hours = If(jobs_with_elapsed_ > 0, total_elapsed_h_);

  r.upper_bound.core_hours = If(cpu_.jobs_usage > 0, cpu_.upper_bound);
  r.upper_bound.gb_hours = If(mem_.jobs_usage > 0, mem_.upper_bound);
  r.upper_bound.gpu_hours = If(gpu_.jobs_usage > 0, gpu_.upper_bound);
  r.upper_bound.dollars =
      cpu_.upper_bound * prices_.cpu_core_hour + mem_.upper_bound * prices_.memory_gb_hour;
  RunHistoryPolicy(r.history_policy);

  r.upper_bound.dollars += gpu_upper_bound_usd_;  // GPU prices vary by type, so summed per job

  r.cost.currency = prices_.currency;
  r.cost.prices_source = prices_.source_note;
  r.cost.cpu_core_hour = prices_.cpu_core_hour;
  r.cost.memory_gb_hour = prices_.memory_gb_hour;
  r.cost.default_gpu_hour = prices_.default_gpu_hour;
  r.cost.allocated_dollars = cpu_.alloc_usd + mem_.alloc_usd + gpu_.alloc_usd;
  bool any_usage = cpu_.jobs_usage + mem_.jobs_usage + gpu_.jobs_usage > 0;
  r.cost.used_dollars = If(any_usage, cpu_.used_usd + mem_.used_usd + gpu_.used_usd);
  r.cost.wasted_dollars = If(any_usage, cpu_.wasted_usd + mem_.wasted_usd + gpu_.wasted_usd);
  r.cost.gpu_types_at_default_price.assign(default_priced_types_.begin(),
                                           default_priced_types_.end());

  auto typical = [](const char* resource, const char* unit, ResourceAcc& acc) {
    TypicalRow row{resource,
                   unit,
                   acc.jobs_usage,
                   MedianOrNull(acc.request_per_job),
                   MedianOrNull(acc.used_per_job),
                   Ratio(acc.upper_bound, acc.alloc_wu, acc.jobs_usage > 0)};
    return row;
  };
  r.typical.push_back(typical("cpu", "cores", cpu_));
  r.typical.push_back(typical("memory", "GB", mem_));
  r.typical.push_back(typical("gpu", "GPUs", gpu_));
  double unused_limit_h = 0;
  for (size_t i = 0; i < time_limit_per_job_.size(); ++i) {
    unused_limit_h += std::max(0.0, time_limit_per_job_[i] - time_elapsed_per_job_[i]);
  }
  r.typical.push_back(TypicalRow{"time", "hours", time_jobs_, MedianOrNull(time_limit_per_job_),
                                 MedianOrNull(time_elapsed_per_job_),
                                 Ratio(unused_limit_h, time_limit_h_, time_jobs_ > 0)});

  std::vector<GroupRow> rows;
  rows.reserve(groups_.size());
  for (const auto& [key, g] : groups_) {
    GroupRow row;
    row.key = key;
    row.jobs = g.jobs;
    row.wasted_core_hours = g.wasted_core_h;
    row.wasted_gb_hours = g.wasted_gb_h;
    row.wasted_gpu_hours = g.wasted_gpu_h;
    row.wasted_dollars = g.wasted_usd;
    row.allocated_dollars = g.alloc_usd;
    row.cpu_efficiency = Ratio(g.cpu_used, g.cpu_alloc, g.cpu_known);
    row.memory_efficiency = Ratio(g.mem_used, g.mem_alloc, g.mem_known);
    row.gpu_efficiency = Ratio(g.gpu_used, g.gpu_alloc, g.gpu_known);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const GroupRow& a, const GroupRow& b) {
    if (a.wasted_dollars != b.wasted_dollars) return a.wasted_dollars > b.wasted_dollars;
    return a.key < b.key;
  });
  size_t top = std::min(rows.size(), static_cast<size_t>(opts_.top_n));
  r.top_wasters.assign(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(top));
  if (r.by_given) r.groups = std::move(rows);

  FinishIdleAndShowback(r);

  r.efficiency_histogram = {
      {"cpu", cpu_.histogram}, {"memory", mem_.histogram}, {"gpu", gpu_.histogram}};

  if (!daily_.empty()) {
    int64_t first = daily_.begin()->first, last = daily_.rbegin()->first;
    r.daily_sparse = (last - first) / kSecondsPerDay >= kMaxDenseDailyDays;
    if (r.daily_sparse) last = first - 1;  // the loop below is skipped
    for (const auto& [day, row] : daily_) {
      if (r.daily_sparse) r.daily.push_back(row);
    }
    for (int64_t d = first; d <= last; d += kSecondsPerDay) {
      auto it = daily_.find(d);
      if (it != daily_.end()) {
        r.daily.push_back(it->second);
      } else {
        DailyRow empty;
        empty.day_start = d;
        r.daily.push_back(empty);
      }
    }
  }
  return r;
}

void WasteAggregator::FinishIdleAndShowback(WasteReport& r) {
  auto costlier = [](const IdleGpuJob& a, const IdleGpuJob& b) {
    if (a.gpu_dollars != b.gpu_dollars) return a.gpu_dollars > b.gpu_dollars;
    if (a.cluster != b.cluster) return a.cluster < b.cluster;
    return a.job_id < b.job_id;
  };
  size_t keep = std::min(idle_jobs_.size(), kIdleGpuListMax);
  std::partial_sort(idle_jobs_.begin(), idle_jobs_.begin() + static_cast<std::ptrdiff_t>(keep),
                    idle_jobs_.end(), costlier);
  idle_jobs_.resize(keep);
  r.idle_gpu = std::move(idle_);
  r.idle_gpu.list = std::move(idle_jobs_);

  r.showback_by = opts_.showback;
  r.showback = std::move(showback_);
  std::sort(r.showback.begin(), r.showback.end(),
            [](const ShowbackAcc& a, const ShowbackAcc& b) { return a.key < b.key; });
}

Status ValidateOptions(const ReportOptions& opts) {
  if (!opts.by.empty() &&
      std::find_if(kReportGroupKeys.begin(), kReportGroupKeys.end(),
                   [&](const char* k) { return opts.by == k; }) == kReportGroupKeys.end()) {
    return Status::InvalidArgument(fmt::format(
        "--by {}: expected one of user, account, partition, gpu-type, job-name", Quote(opts.by)));
  }
  if (!opts.showback.empty() && opts.showback != "account" && opts.showback != "user") {
    return Status::InvalidArgument(
        fmt::format("--showback {}: expected account or user", Quote(opts.showback)));
  }
  if (opts.top_n < 0) return Status::InvalidArgument("the number of top wasters must be >= 0");
  if (opts.since && opts.until && *opts.since >= *opts.until) {
    return Status::InvalidArgument(fmt::format("--since {} is not before --until {}",
                                               FormatTimestamp(*opts.since),
                                               FormatTimestamp(*opts.until)));
  }
  return Status::Ok();
}

}  // namespace

std::string HistogramBucketLabel(int bucket) {
  if (bucket >= kHistogramBuckets - 1) return ">100%";
  return fmt::format("{}-{}%", bucket * 10, bucket * 10 + 10);
}

ClusterChoice ChooseCluster(std::vector<ClusterCount> counts) {
  ClusterChoice choice;
  std::erase_if(counts, [](const ClusterCount& c) { return c.jobs == 0; });
  if (counts.size() < 2) return choice;
  std::optional<int64_t> newest;
  for (const auto& c : counts) {
    if (c.last_end && (!newest || *c.last_end > *newest)) newest = c.last_end;
  }
  auto current = [&](const ClusterCount& c) {
    if (!newest) return true;  // no end times at all: every cluster is as current
    return c.last_end && *newest - *c.last_end <= kCurrentClusterSpanS;
  };
  // Current clusters first, then the most jobs, then by name.
  std::sort(counts.begin(), counts.end(), [&](const ClusterCount& a, const ClusterCount& b) {
    if (current(a) != current(b)) return current(a);
    if (a.jobs != b.jobs) return a.jobs > b.jobs;
    return a.cluster < b.cluster;
  });
  choice.chosen = counts.front().cluster;
  choice.chosen_jobs = counts.front().jobs;
  choice.others.assign(counts.begin() + 1, counts.end());
  std::sort(choice.others.begin(), choice.others.end(),
            [](const ClusterCount& a, const ClusterCount& b) {
              if (a.jobs != b.jobs) return a.jobs > b.jobs;
              return a.cluster < b.cluster;
            });
  return choice;
}

namespace {

bool InWindow(const JobRecord& job, const ReportOptions& opts) {
  if (!opts.cluster.empty() && job.cluster != opts.cluster) return false;
  if (opts.since && (!job.end_time || *job.end_time < *opts.since)) return false;
  if (opts.until && (!job.end_time || *job.end_time >= *opts.until)) return false;
  return true;
}

// The per-cluster counts of the window, from the store: one count and one newest-job lookup
// per cluster, so choosing costs little next to the report's scan.
StatusOr<std::vector<ClusterCount>> CountClusters(Store& store, const ReportOptions& opts) {
  RS_ASSIGN_OR_RETURN(std::vector<std::string> clusters, store.Clusters());
  std::vector<ClusterCount> counts;
  if (clusters.size() < 2) return counts;
  for (const auto& name : clusters) {
    JobFilter filter;
    filter.lean = true;
    filter.cluster = name;
    filter.ended_since = opts.since;
    filter.ended_until = opts.until;
    ClusterCount c{.cluster = name};
    RS_ASSIGN_OR_RETURN(c.jobs, store.CountJobs(filter));
    filter.newest = 1;
    RS_RETURN_IF_ERROR(store.ScanJobs(filter, [&](const JobRecord& job) {
      c.last_end = job.end_time;
      return true;
    }));
    counts.push_back(std::move(c));
  }
  return counts;
}

}  // namespace

StatusOr<WasteReport> BuildWasteReport(Store& store, const ReportOptions& asked,
                                       const PriceTable& prices) {
  RS_RETURN_IF_ERROR(ValidateOptions(asked));
  ReportOptions opts = asked;
  ClusterChoice choice;
  if (opts.choose_cluster && opts.cluster.empty()) {
    RS_ASSIGN_OR_RETURN(std::vector<ClusterCount> counts, CountClusters(store, opts));
    choice = ChooseCluster(std::move(counts));
    opts.cluster = choice.chosen;
  }
  JobFilter filter;
  filter.lean = true;  // the report needs no node lists, I/O or exit codes
  filter.cluster = opts.cluster;
  filter.ended_since = opts.since;
  filter.ended_until = opts.until;
  WasteAggregator agg(opts, prices);
  RS_RETURN_IF_ERROR(store.ScanJobs(filter, [&](const JobRecord& job) {
    agg.Add(job);
    return true;
  }));
  WasteReport r = agg.Finish();
  r.cluster_choice = std::move(choice);
  return r;
}

StatusOr<WasteReport> BuildWasteReport(std::span<const JobRecord> jobs, const ReportOptions& asked,
                                       const PriceTable& prices) {
  RS_RETURN_IF_ERROR(ValidateOptions(asked));
  ReportOptions opts = asked;
  ClusterChoice choice;
  if (opts.choose_cluster && opts.cluster.empty()) {
    std::map<std::string, ClusterCount> by_cluster;
    for (const JobRecord& job : jobs) {
      if (!InWindow(job, opts)) continue;
      ClusterCount& c = by_cluster[job.cluster];
      c.cluster = job.cluster;
      ++c.jobs;
      if (job.end_time && (!c.last_end || *job.end_time > *c.last_end)) c.last_end = job.end_time;
    }
    std::vector<ClusterCount> counts;
    for (auto& [name, c] : by_cluster) counts.push_back(std::move(c));
    choice = ChooseCluster(std::move(counts));
    opts.cluster = choice.chosen;
  }
  WasteAggregator agg(opts, prices);
  for (const JobRecord& job : jobs) {
    if (InWindow(job, opts)) agg.Add(job);
  }
  WasteReport r = agg.Finish();
  r.cluster_choice = std::move(choice);
  return r;
}

}  // namespace rightsize

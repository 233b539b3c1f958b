#include "report/job_card.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "core/units.h"
#include "report/energy.h"
#include "report/render.h"

namespace rightsize {

namespace {

using nlohmann::json;

constexpr double kHeadroom = 1.2;
constexpr double kTimeHeadroom = 1.5;
constexpr double kMoreHeadroom = 1.5;  // after an OOM kill or a timeout

double CeilUnits(double v) { return std::ceil(v - 1e-9); }
double Round4(double v) { return std::round(v * 1e4) / 1e4; }
template <typename T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json Num(const std::optional<double>& v) { return v ? json(Round4(*v)) : json(nullptr); }

// Everything the card shows, computed once for both renderers.
struct Card {
  // CPU
  std::optional<double> req_cpus, alloc_cpus, mean_cores, cpu_eff;
  std::optional<int64_t> suggested_cpus;
  // Memory
  std::optional<int64_t> alloc_mem, used_mem;
  std::string mem_basis;  // "peak", "average", ""
  std::optional<double> mem_eff;
  std::optional<int64_t> suggested_mem;  // whole job
  std::string mem_flag;                  // "--mem=20G"
  // GPU
  std::optional<int> gpus;
  std::string gpu_type;
  std::optional<double> util_pct, gpu_eff;
  std::optional<int64_t> suggested_gpus;
  std::optional<int64_t> gpu_mem_capacity, gpu_mem_peak;
  std::optional<double> gpu_mem_eff;
  // Time
  std::optional<double> limit_s, elapsed_s, time_eff, suggested_limit_s;
  std::string time_flag;
  // Cost
  std::optional<double> alloc_usd, used_usd, wasted_usd;
  std::vector<std::string> more;  // after an OOM kill or a timeout: ask for more, shown first
  std::vector<std::string> advice, unknown;
  // The job was stopped at a limit ("memory", "time", "" for none): its run was cut short, so
  // its use is no guide to a smaller request.
  std::string killed_by;
};

// "memory" for a job killed for memory, "time" for one stopped at its time limit, else "".
// `diagnosis_class` "host_oom" makes a FAILED job (a MemoryError) one that ran out of memory.
std::string KilledBy(const JobRecord& job, std::string_view diagnosis_class) {
  const std::string& s = job.outcome.state;
  if (s.rfind("OUT_OF_ME", 0) == 0 || diagnosis_class == "host_oom") return "memory";
  if (s == "TIMEOUT" || s == "DEADLINE") return "time";
  return "";
}

// What the job cost, allocated and used, as far as its record says.
struct Cost {
  double alloc_usd = 0, used_usd = 0;
  bool alloc_known = false, used_known = false;
};

// CPUs: allocated, kept busy, the -c to ask for.
void CardCpu(const JobRecord& job, const PriceTable& prices, bool ran, Card& c, Cost& cost) {
  const auto& u = job.usage;
  c.req_cpus = job.request.cpus;
  c.alloc_cpus = job.AllocatedCpus();
  if (ran && u.cpu_time_s) {
    c.mean_cores = *u.cpu_time_s / *u.elapsed_s;
    cost.used_usd += *u.cpu_time_s / 3600 * prices.cpu_core_hour;
    cost.used_known = true;
  }
  if (c.alloc_cpus && ran) {
    cost.alloc_usd += *c.alloc_cpus * *u.elapsed_s / 3600 * prices.cpu_core_hour;
    cost.alloc_known = true;
  }
  if (c.alloc_cpus && c.mean_cores && *c.alloc_cpus > 0) {
    c.cpu_eff = *c.mean_cores / *c.alloc_cpus;
    auto want = RoundCpuRequest(kHeadroom * *c.mean_cores);
    if (static_cast<double>(want) < *c.alloc_cpus && c.killed_by.empty()) {
      c.suggested_cpus = want;
      c.advice.push_back(fmt::format(
          "CPU: this job kept {:.1f} of its {} CPUs busy on average ({}); ask for -c {} next "
          "time.",
          *c.mean_cores, FormatThousands(*c.alloc_cpus, 0), FormatPercent(*c.cpu_eff), want));
    }
  }
  if (!c.alloc_cpus) c.unknown.push_back("CPUs allocated");
  if (!u.cpu_time_s) c.unknown.push_back("CPU time used");
}

// Memory: allocated, used (peak, else average), the --mem to ask for.
void CardMemory(const JobRecord& job, const PriceTable& prices, bool ran, Card& c, Cost& cost) {
  const auto& u = job.usage;
  c.alloc_mem = job.AllocatedMemoryBytes();
  if (u.peak_rss_bytes) {
    c.used_mem = u.peak_rss_bytes;
    c.mem_basis = "peak";
  } else if (u.avg_rss_bytes) {
    c.used_mem = u.avg_rss_bytes;
    c.mem_basis = "average";
  }
  double gib_h = ran ? *u.elapsed_s / 3600 / static_cast<double>(kGiB) : 0;
  if (c.alloc_mem && ran) {
    cost.alloc_usd += static_cast<double>(*c.alloc_mem) * gib_h * prices.memory_gb_hour;
  }
  if (c.used_mem && ran) {
    cost.used_usd += static_cast<double>(*c.used_mem) * gib_h * prices.memory_gb_hour;
    cost.used_known = true;
  }
  int nodes = std::max(1, job.alloc.nodes.value_or(job.request.nodes.value_or(1)));
  auto flag_for = [&](int64_t bytes) {
    return "--mem=" + MemoryFlagValue(nodes > 1
                                          ? RoundMemoryRequest(static_cast<double>(bytes) / nodes)
                                          : bytes);
  };
  std::string per_node = nodes > 1 ? fmt::format(" per node ({} nodes)", nodes) : "";
  if (c.killed_by == "memory" && (c.alloc_mem || c.used_mem)) {
    // Its real need is above what it reached: a larger request, never a smaller one.
    int64_t reached = std::max(c.alloc_mem.value_or(0), c.used_mem.value_or(0));
    int64_t more = RoundMemoryRequest(kMoreHeadroom * static_cast<double>(reached));
    c.suggested_mem = more;
    c.mem_flag = flag_for(more);
    c.more.push_back(fmt::format(
        "Memory: this job ran out of memory at {}{}; ask for more: {}{} next time (or make it "
        "use less).",
        FormatMemory(reached),
        c.alloc_mem ? fmt::format(" ({} allocated)", FormatMemory(*c.alloc_mem)) : "", c.mem_flag,
        per_node));
  }
  if (c.alloc_mem && c.used_mem && *c.alloc_mem > 0) {
    c.mem_eff = static_cast<double>(*c.used_mem) / static_cast<double>(*c.alloc_mem);
    int64_t want = RoundMemoryRequest(kHeadroom * static_cast<double>(*c.used_mem));
    if (want < *c.alloc_mem && c.killed_by.empty()) {
      c.suggested_mem = want;
      c.mem_flag = flag_for(want);
      c.advice.push_back(
          fmt::format("Memory: this job used {} of its {} ({} {}); ask for {}{} next time.",
                      FormatPercent(*c.mem_eff), FormatMemory(*c.alloc_mem),
                      FormatMemory(*c.used_mem), c.mem_basis, c.mem_flag, per_node));
    }
    if (c.mem_basis == "average" && c.killed_by.empty()) {
      c.advice.push_back(
          "Memory: only the average use is known, not the peak; leave more headroom than "
          "suggested.");
    }
  }
  if (!c.alloc_mem) c.unknown.push_back("memory allocated");
  if (!c.used_mem) c.unknown.push_back("memory used (no peak or average recorded)");
}

// GPUs: allocated, busy, their memory, how many to ask for.
void CardGpus(const JobRecord& job, const PriceTable& prices, bool ran, Card& c, Cost& cost) {
  const auto& u = job.usage;
  c.gpus = job.AllocatedGpus();
  c.gpu_type = job.GpuType();
  if (c.gpus && *c.gpus > 0) {
    double gpu_price = prices.GpuHourPrice(c.gpu_type);
    if (ran) {
      cost.alloc_usd += *c.gpus * *u.elapsed_s / 3600 * gpu_price;
      cost.alloc_known = true;
    }
    if (u.gpu_util_pct) {
      double util = std::clamp(*u.gpu_util_pct, 0.0, 100.0) / 100;
      c.util_pct = *u.gpu_util_pct;
      c.gpu_eff = util;
      if (ran) {
        cost.used_usd += *c.gpus * util * *u.elapsed_s / 3600 * gpu_price;
        cost.used_known = true;
      }
      if (util == 0) {
        c.advice.push_back(fmt::format(
            "GPU: its {} GPU(s) sat idle (0% utilisation); does this job need a GPU at all?",
            *c.gpus));
      } else {
        auto want = static_cast<int64_t>(std::max(1.0, CeilUnits(kHeadroom * *c.gpus * util)));
        if (want < *c.gpus && c.killed_by.empty()) {
          c.suggested_gpus = want;
          c.advice.push_back(fmt::format(
              "GPU: its {} GPUs were {} busy on average; --gpus={} would likely do (check the "
              "code can use fewer GPUs).",
              *c.gpus, FormatPercent(util), want));
        }
      }
    } else {
      c.unknown.push_back("GPU utilisation");
    }
    double peak_per_gpu_gb =
        u.peak_gpu_memory_bytes
            ? static_cast<double>(*u.peak_gpu_memory_bytes) / static_cast<double>(kGiB) / *c.gpus
            : 0;
    double cap_gb = prices.GpuMemoryGb(c.gpu_type, peak_per_gpu_gb);
    if (cap_gb > 0) {
      c.gpu_mem_capacity =
          static_cast<int64_t>(std::llround(cap_gb * static_cast<double>(kGiB))) * *c.gpus;
    }
    c.gpu_mem_peak = u.peak_gpu_memory_bytes;
    if (c.gpu_mem_capacity && c.gpu_mem_peak && *c.gpu_mem_capacity > 0) {
      c.gpu_mem_eff =
          static_cast<double>(*c.gpu_mem_peak) / static_cast<double>(*c.gpu_mem_capacity);
    }
    if (!c.gpu_mem_peak) c.unknown.push_back("GPU memory used");
    if (!c.gpu_mem_capacity) {
      c.unknown.push_back(c.gpu_type.empty() ? "GPU type (so its memory size)"
                                             : "memory size of GPU type " + c.gpu_type);
    }
  } else if (!c.gpus) {
    c.unknown.push_back("GPUs allocated");
  }
}

// Time: the limit against the run, the --time to ask for.
void CardTime(const JobRecord& job, bool ran, Card& c) {
  if (job.request.time_limit_s) c.limit_s = static_cast<double>(*job.request.time_limit_s);
  if (c.killed_by == "time" && c.limit_s && *c.limit_s > 0) {
    double more = static_cast<double>(RoundTimeRequest(kMoreHeadroom * *c.limit_s));
    c.suggested_limit_s = more;
    c.time_flag = "--time=" + TimeFlagValue(more);
    c.more.push_back(fmt::format(
        "Time: this job hit its {} limit before it finished; ask for more: {} next time (or "
        "checkpoint and resume).",
        FormatDuration(*c.limit_s), c.time_flag));
  }
  if (c.limit_s && c.elapsed_s && *c.limit_s > 0) {
    c.time_eff = *c.elapsed_s / *c.limit_s;
    double want = RoundTimeRequest(kTimeHeadroom * *c.elapsed_s);
    // A job stopped at a limit ran shorter than it would have: its run time is no guide. A
    // running job's run time is not known yet.
    if (c.killed_by.empty() && job.end_time && want < *c.limit_s) {
      c.suggested_limit_s = want;
      c.time_flag = "--time=" + FormatDuration(want);
      c.advice.push_back(fmt::format(
          "Time: this job ran {} of its {} limit ({}); {} would do and lets the scheduler "
          "backfill it sooner.",
          FormatDuration(*c.elapsed_s), FormatDuration(*c.limit_s), FormatPercent(*c.time_eff),
          c.time_flag));
    }
  }
  if (!c.limit_s) {
    c.unknown.push_back(job.request.time_unlimited ? "time limit (unlimited)" : "time limit");
  }
  if (!ran) c.unknown.push_back("elapsed time");
}

Card BuildCard(const JobRecord& job, const PriceTable& prices, std::string_view diagnosis_class) {
  Card c;
  c.killed_by = KilledBy(job, diagnosis_class);
  const auto& u = job.usage;
  const bool ran = u.elapsed_s && *u.elapsed_s > 0;
  if (ran) c.elapsed_s = u.elapsed_s;
  Cost cost;
  CardCpu(job, prices, ran, c, cost);
  CardMemory(job, prices, ran, c, cost);
  CardGpus(job, prices, ran, c, cost);
  CardTime(job, ran, c);
  if (!job.end_time && ran) {
    // A running job's figures are its use so far; its peak may still grow.
    for (std::string& a : c.advice) a = "So far: " + a;
  }
  if (cost.alloc_known) c.alloc_usd = cost.alloc_usd;
  if (cost.used_known) {
    c.used_usd = cost.used_usd;
    c.wasted_usd = std::max(0.0, cost.alloc_usd - cost.used_usd);
  }
  if (!c.killed_by.empty()) {
    c.advice.push_back(
        "Its other figures are from a run cut short: right-size them from a run that "
        "completes.");
  } else if (c.advice.empty() && (c.cpu_eff || c.mem_eff || c.gpu_eff)) {
    c.advice.push_back("This job's request fits what it used; nothing to change.");
  }
  // What stopped the job comes first.
  c.advice.insert(c.advice.begin(), c.more.begin(), c.more.end());
  return c;
}

std::string Opt(const std::optional<double>& v, const std::function<std::string(double)>& f) {
  return v ? f(*v) : std::string("unknown");
}

}  // namespace

std::string OutcomeText(const JobRecord& job) {
  const std::string& s = job.outcome.state;
  const auto& exit = job.outcome.exit_code;
  const auto& signal = job.outcome.signal;
  std::string by_signal = signal && *signal > 0 ? fmt::format(" (signal {})", *signal) : "";
  if (s == "RUNNING" || s == "PENDING" || s == "REQUEUED" || s == "SUSPENDED") return "";
  // SLURM records exit 0 for a job it stopped: the state says what happened, not the code.
  if (s == "TIMEOUT") {
    return job.request.time_limit_s
               ? fmt::format("hit its {} time limit",
                             FormatDuration(static_cast<double>(*job.request.time_limit_s)))
               : "hit its time limit";
  }
  if (s == "DEADLINE") return "stopped at its deadline";
  if (s.rfind("OUT_OF_ME", 0) == 0) return "ran out of memory";
  if (s.rfind("CANCELLED", 0) == 0) return "cancelled" + by_signal;
  if (s == "PREEMPTED") return "preempted";
  if (s == "NODE_FAIL") return "its node failed";
  if (s == "BOOT_FAIL") return "its node failed to boot";
  if (exit) return fmt::format("exit {}", *exit) + by_signal;
  if (signal && *signal > 0) return fmt::format("killed by signal {}", *signal);
  return "";
}

std::string RenderJobCardText(const JobRecord& job, const PriceTable& prices,
                              std::string_view diagnosis_class) {
  Card c = BuildCard(job, prices, diagnosis_class);
  auto safe = [](const std::string& s) { return s.empty() ? "?" : SafeTerminalText(s, 64); };
  std::string out = fmt::format("Job {} on {}", safe(job.job_id), safe(job.cluster));
  if (!job.request.job_name.empty()) out += ": " + safe(job.request.job_name);
  out += "\n";
  out += fmt::format("  user {}, account {}, partition {}\n", safe(job.request.user),
                     safe(job.request.account), safe(job.request.partition));
  out += fmt::format("  state {}", safe(job.outcome.state));
  if (std::string how = OutcomeText(job); !how.empty()) out += " (" + how + ")";
  if (job.start_time) out += ", started " + FormatTimestamp(*job.start_time);
  if (job.end_time) out += ", ended " + FormatTimestamp(*job.end_time);
  if (!job.end_time && c.elapsed_s) {
    out += fmt::format("\n  running for {}: use so far, from the agent's samples",
                       FormatDuration(*c.elapsed_s));
  }
  out += "\n\n";

  auto mem = [](std::optional<int64_t> b) { return b ? FormatMemory(*b) : "unknown"; };
  auto cores = [](double v) {
    return FormatThousands(v, v == std::floor(v) ? 0 : 1) + (v == 1 ? " core" : " cores");
  };
  std::vector<std::vector<std::string>> rows = {
      {"", "allocated", "used", "efficiency", "suggested"},
      {"CPU", Opt(c.alloc_cpus, cores),
       c.mean_cores ? fmt::format("{:.1f} cores (mean)", *c.mean_cores) : "unknown",
       Opt(c.cpu_eff, FormatPercent),
       c.suggested_cpus ? fmt::format("-c {}", *c.suggested_cpus) : "-"},
      {"Memory", mem(c.alloc_mem),
       c.used_mem ? mem(c.used_mem) + " (" + c.mem_basis + ")" : "unknown",
       Opt(c.mem_eff, FormatPercent), c.mem_flag.empty() ? "-" : c.mem_flag},
  };
  if (!c.gpus || *c.gpus > 0) {
    std::string alloc =
        c.gpus ? fmt::format("{} x {}", *c.gpus, c.gpu_type.empty() ? "GPU" : safe(c.gpu_type))
               : "unknown";
    rows.push_back({"GPU", alloc, c.util_pct ? fmt::format("{:.0f}% busy", *c.util_pct) : "unknown",
                    Opt(c.gpu_eff, FormatPercent),
                    c.suggested_gpus ? fmt::format("--gpus={}", *c.suggested_gpus) : "-"});
    if (c.gpus) {
      rows.push_back({"GPU memory", mem(c.gpu_mem_capacity),
                      c.gpu_mem_peak ? mem(c.gpu_mem_peak) + " (peak)" : "unknown",
                      Opt(c.gpu_mem_eff, FormatPercent), "-"});
    }
  }
  auto dur = [](double s) { return FormatDuration(s); };
  rows.push_back({"Time", c.limit_s ? dur(*c.limit_s) + " limit" : "unknown", Opt(c.elapsed_s, dur),
                  Opt(c.time_eff, FormatPercent), c.time_flag.empty() ? "-" : c.time_flag});
  // Align like the report tables.
  std::vector<size_t> widths(5, 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line = "  " + row[0] + std::string(widths[0] - row[0].size(), ' ');
    for (size_t i = 1; i < row.size(); ++i) {
      line += "  " + row[i] + std::string(widths[i] - row[i].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (c.alloc_usd) {
    out += fmt::format("\n  Cost at list prices: {} allocated", FormatDollars(*c.alloc_usd));
    if (c.wasted_usd) out += fmt::format(", {} of it unused", FormatDollars(*c.wasted_usd));
    out += ".\n";
  }
  out += JobEnergyText(job, prices);
  if (!c.advice.empty()) {
    out += "\nAdvice\n";
    for (const auto& a : c.advice) out += "  - " + a + "\n";
  }
  if (!c.unknown.empty()) {
    out += "\nNot recorded for this job: ";
    for (size_t i = 0; i < c.unknown.size(); ++i) out += (i ? ", " : "") + c.unknown[i];
    out += ".\n";
  }
  return out;
}

json RenderJobCardJson(const JobRecord& job, const PriceTable& prices,
                       std::string_view diagnosis_class) {
  Card c = BuildCard(job, prices, diagnosis_class);
  json j;
  j["schema"] = "rightsize.job/v1";
  j["job"] = job;
  std::string how = OutcomeText(job);
  j["outcome_text"] = how.empty() ? json(nullptr) : json(how);
  j["cpu"] = {{"requested_cores", Num(c.req_cpus)},
              {"allocated_cores", Num(c.alloc_cpus)},
              {"mean_cores_used", Num(c.mean_cores)},
              {"efficiency", Num(c.cpu_eff)},
              {"suggested_cores", OrNull(c.suggested_cpus)}};
  j["memory"] = {{"allocated_bytes", OrNull(c.alloc_mem)},
                 {"used_bytes", OrNull(c.used_mem)},
                 {"used_basis", c.mem_basis.empty() ? json(nullptr) : json(c.mem_basis)},
                 {"efficiency", Num(c.mem_eff)},
                 {"suggested_bytes", OrNull(c.suggested_mem)},
                 {"suggested_flag", c.mem_flag.empty() ? json(nullptr) : json(c.mem_flag)}};
  j["gpu"] = {{"allocated_gpus", OrNull(c.gpus)},
              {"gpu_type", c.gpu_type.empty() ? json(nullptr) : json(c.gpu_type)},
              {"util_pct", Num(c.util_pct)},
              {"efficiency", Num(c.gpu_eff)},
              {"suggested_gpus", OrNull(c.suggested_gpus)}};
  j["gpu_memory"] = {{"capacity_bytes", OrNull(c.gpu_mem_capacity)},
                     {"peak_bytes", OrNull(c.gpu_mem_peak)},
                     {"efficiency", Num(c.gpu_mem_eff)}};
  j["time"] = {{"limit_s", Num(c.limit_s)},
               {"elapsed_s", Num(c.elapsed_s)},
               {"efficiency", Num(c.time_eff)},
               {"suggested_limit_s", Num(c.suggested_limit_s)},
               {"suggested_flag", c.time_flag.empty() ? json(nullptr) : json(c.time_flag)}};
  j["cost"] = {{"currency", prices.currency},
               {"allocated_dollars", Num(c.alloc_usd)},
               {"used_dollars", Num(c.used_usd)},
               {"wasted_dollars", Num(c.wasted_usd)}};
  j["energy"] = JobEnergyJson(job, prices);
  j["advice"] = c.advice;
  j["stopped_at_limit"] = c.killed_by.empty() ? json(nullptr) : json(c.killed_by);
  j["unknown"] = c.unknown;
  return j;
}

}  // namespace rightsize

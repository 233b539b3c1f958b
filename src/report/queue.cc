#include "report/queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>

#include "core/units.h"
#include "report/waste.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace rightsize {

const char* const kQueueRule =
    "Right-sized time limit: at submission, 1.2x the longest run among the same user's (and job "
    "name's) last 5 jobs that had already ended, when there are at least 3, never above the "
    "job's own limit. Both runs replayed through EASY backfilling on the cluster's CPUs; a job "
    "that outruns its right-sized limit is killed there and resubmitted with its own limit.";

namespace {

constexpr double kHeadroom = 1.2;
constexpr size_t kDepth = 5;
constexpr size_t kMinJobs = 3;

QueueFigures Figures(const sim::Metrics& m) {
  return {m.mean_wait_s, m.p95_wait_s, m.avebsld, m.utilisation, m.killed, m.lost_proc_hours};
}

// The right-sized limit of every job of `w` by the history policy, keyed by job id.
std::unordered_map<std::string, int64_t> RightSizedLimits(std::span<const JobRecord> records,
                                                          const sim::Workload& w) {
  std::unordered_map<std::string, const JobRecord*> by_id;
  for (const JobRecord& r : records) by_id.emplace(r.job_id, &r);
  struct Ended {
    int64_t end_s;
    std::string key;
    int64_t run_s;
  };
  std::vector<Ended> ended;
  for (const sim::SimJob& j : w.jobs) {
    auto it = by_id.find(j.id);
    if (it == by_id.end() || it->second->request.user.empty()) continue;
    const JobRecord& r = *it->second;
    int64_t end = r.end_time.value_or(j.submit_s + j.run_s);
    ended.push_back({end, r.request.user + "\x1f" + r.request.job_name, j.run_s});
  }
  std::sort(ended.begin(), ended.end(),
            [](const Ended& a, const Ended& b) { return a.end_s < b.end_s; });
  std::unordered_map<std::string, std::deque<int64_t>> history;
  std::unordered_map<std::string, int64_t> out;
  size_t next = 0;
  for (const sim::SimJob& j : w.jobs) {  // in submit order
    while (next < ended.size() && ended[next].end_s < j.submit_s) {
      auto& h = history[ended[next].key];
      h.push_back(ended[next].run_s);
      if (h.size() > kDepth) h.pop_front();
      ++next;
    }
    auto it = by_id.find(j.id);
    if (it == by_id.end() || it->second->request.user.empty()) continue;
    auto h = history.find(it->second->request.user + "\x1f" + it->second->request.job_name);
    if (h == history.end() || h->second.size() < kMinJobs) continue;
    int64_t longest = *std::max_element(h->second.begin(), h->second.end());
    auto suggested = static_cast<int64_t>(std::ceil(kHeadroom * static_cast<double>(longest)));
    if (suggested < j.limit_s) out[j.id] = std::max<int64_t>(suggested, 1);
  }
  return out;
}

std::string Hours(double s) { return fmt::format("{:.2f} h", s / 3600.0); }

}  // namespace

QueueWhatIf SimulateQueue(std::span<const JobRecord> jobs, double machine_cpus) {
  QueueWhatIf q;
  if (!(machine_cpus >= 1)) {
    q.why_not = "the cluster's CPU count is not known (ingest sinfo)";
    return q;
  }
  q.machine_cpus = static_cast<int64_t>(machine_cpus);
  std::vector<JobRecord> copy(jobs.begin(), jobs.end());
  sim::Workload w = sim::WorkloadFromRecords(copy, sim::SizeUnit::kProcessors, q.machine_cpus);
  q.jobs = static_cast<int64_t>(w.jobs.size());
  q.left_out = static_cast<int64_t>(jobs.size()) - q.jobs;
  if (w.jobs.empty()) {
    q.why_not = "no job has a submit time, a run time, a time limit and a CPU count";
    return q;
  }
  sim::SimOptions o{sim::Policy::kEasy, q.machine_cpus};
  auto before = sim::Simulate(w.jobs, o);
  if (!before.ok()) {
    q.why_not = before.status().message();
    return q;
  }
  std::vector<sim::SimJob> right = w.jobs;
  auto limits = RightSizedLimits(jobs, w);
  for (sim::SimJob& j : right) {
    auto it = limits.find(j.id);
    if (it == limits.end()) continue;
    j.limit_s = it->second;
    ++q.right_sized;
  }
  auto after = sim::Simulate(right, o);
  if (!after.ok()) {
    q.why_not = after.status().message();
    return q;
  }
  q.before = Figures(sim::Summarise(w.jobs, *before, q.machine_cpus));
  q.after = Figures(sim::Summarise(right, *after, q.machine_cpus));
  q.simulated = true;
  return q;
}

std::vector<std::string> QueueSentences(const QueueWhatIf& q) {
  if (!q.simulated) return {"Not simulated: " + q.why_not + "."};
  std::vector<std::string> out;
  out.push_back(fmt::format(
      "{} jobs replayed through EASY backfilling on {} CPUs ({} left out: no submit time, run "
      "time, time limit or CPU count); {} of them got a right-sized time limit.",
      q.jobs, q.machine_cpus, q.left_out, q.right_sized));
  out.push_back(fmt::format(
      "Mean wait {} with the users' limits, {} right-sized; p95 wait {} -> {}; bounded slowdown "
      "(AVEbsld) {:.2f} -> {:.2f}; {} jobs killed at their right-sized limit and run again, "
      "{:.1f} core-hours lost to the kills.",
      Hours(q.before.mean_wait_s), Hours(q.after.mean_wait_s), Hours(q.before.p95_wait_s),
      Hours(q.after.p95_wait_s), q.before.avebsld, q.after.avebsld, q.after.killed,
      q.after.lost_core_hours));
  return out;
}

nlohmann::json QueueJson(const QueueWhatIf& q) {
  auto fig = [](const QueueFigures& f) {
    return nlohmann::json{{"mean_wait_s", f.mean_wait_s}, {"p95_wait_s", f.p95_wait_s},
                          {"avebsld", f.avebsld},         {"utilisation", f.utilisation},
                          {"killed", f.killed},           {"lost_core_hours", f.lost_core_hours}};
  };
  if (!q.simulated) return {{"simulated", false}, {"why_not", q.why_not}};
  return {{"simulated", true},       {"policy", "easy"},       {"machine_cpus", q.machine_cpus},
          {"jobs", q.jobs},          {"left_out", q.left_out}, {"right_sized", q.right_sized},
          {"before", fig(q.before)}, {"after", fig(q.after)},  {"rule", kQueueRule}};
}

std::string QueueSvg(const QueueWhatIf& q) {
  if (!q.simulated) return "";
  struct Bar {
    const char* label;
    double before, after;
    const char* unit;
  };
  const std::array<Bar, 3> bars = {
      Bar{"mean wait", q.before.mean_wait_s / 3600, q.after.mean_wait_s / 3600, "h"},
      Bar{"p95 wait", q.before.p95_wait_s / 3600, q.after.p95_wait_s / 3600, "h"},
      Bar{"AVEbsld", q.before.avebsld, q.after.avebsld, ""}};
  // One panel per figure, each scaled to its own larger bar.
  constexpr int kPanelW = 220, kH = 180, kTop = 30, kBase = 150, kBarW = 60;
  std::string out = fmt::format(
      "<svg class=\"queue\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"wait and slowdown "
      "before and after right-sizing\">\n",
      kPanelW * 3, kH + 20);
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    int x0 = static_cast<int>(i) * kPanelW + 20;
    double top = std::max({b.before, b.after, 1e-9});
    auto bar = [&](int x, double v, const char* color, const char* who) {
      int h = static_cast<int>(std::lround((kBase - kTop) * v / top));
      return fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} {}: "
          "{:.2f}{}</title></rect>\n<text class=\"ax\" x=\"{}\" y=\"{}\" "
          "text-anchor=\"middle\">{:.2f}{}</text>\n",
          x, kBase - h, kBarW, h, color, b.label, who, v, b.unit, x + kBarW / 2, kBase - h - 4, v,
          b.unit);
    };
    out += bar(x0, b.before, "#9aa5b8", "users' limits");
    out += bar(x0 + kBarW + 20, b.after, "#3b6fd8", "right-sized");
    out += fmt::format(
        "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n<text class=\"lg\" "
        "x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x0 - 10, kBase, x0 + 2 * kBarW + 30, kBase, x0 + kBarW + 10, kBase + 20, b.label);
  }
  out += fmt::format(
      "<rect x=\"20\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#9aa5b8\"/><text class=\"lg\" "
      "x=\"38\" y=\"{}\">users' limits</text><rect x=\"160\" y=\"{}\" width=\"12\" height=\"12\" "
      "fill=\"#3b6fd8\"/><text class=\"lg\" x=\"178\" y=\"{}\">right-sized</text>\n",
      kH + 2, kH + 12, kH + 2, kH + 12);
  out += "</svg>\n";
  return out;
}

void AddQueueWhatIf(Store& store, WasteReport* report) {
  if (report->clusters.size() != 1 || report->jobs == 0) return;
  const std::string& cluster = report->clusters.front();
  double machine_cpus = 0;
  if (auto meta = store.GetClusterMeta(cluster); meta.ok()) {
    for (const char* key : {"swf.MaxProcs", "cpus"}) {
      auto it = meta->find(key);
      if (it == meta->end()) continue;
      if (auto v = ParseDouble(it->second); v && *v > 0) machine_cpus = *v;
    }
  }
  std::vector<JobRecord> jobs;
  JobFilter f;
  f.cluster = cluster;
  Status scanned = store.ScanJobs(f, [&](const JobRecord& j) {
    // The report's window (waste.cc's InWindow).
    bool in = !((report->since && (!j.end_time || *j.end_time < *report->since)) ||
                (report->until && (!j.end_time || *j.end_time >= *report->until)));
    if (in) jobs.push_back(j);
    return true;
  });
  if (!scanned.ok()) {
    report->queue = QueueWhatIf{.why_not = std::string(scanned.message())};
    return;
  }
  report->queue = SimulateQueue(jobs, machine_cpus);
}

}  // namespace rightsize

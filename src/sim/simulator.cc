#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>

namespace rightsize::sim {

std::string_view PolicyName(Policy p) {
  switch (p) {
    case Policy::kFcfs:
      return "fcfs";
    case Policy::kEasy:
      return "easy";
    case Policy::kEasyPlusPlus:
      return "easy++";
  }
  return "?";
}

StatusOr<Policy> ParsePolicy(std::string_view name) {
  if (name == "fcfs") return Policy::kFcfs;
  if (name == "easy") return Policy::kEasy;
  if (name == "easy++" || name == "easypp") return Policy::kEasyPlusPlus;
  return Status::InvalidArgument(
      fmt::format("--policy: expected fcfs, easy or easy++, got \"{}\"", name));
}

namespace {

// At equal times pyss handles a prediction running out first, then submissions (in input
// order), then terminations (in the order the jobs started).
enum EventType : int { kPredictionOver = 0, kSubmit = 1, kEnd = 2 };

struct Event {
  int64_t t;
  int type;
  int64_t seq;
  int job;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (type != o.type) return type > o.type;
    return seq > o.seq;
  }
};

struct Running {
  int job;
  int64_t procs;
  int64_t start;
  int64_t plan_end;  // when the scheduler expects the processors back
  int64_t end;       // when the job really ends (or is killed)
};

class Machine {
 public:
  Machine(const std::vector<SimJob>& jobs, const SimOptions& o)
      : jobs_(jobs), o_(o), n_(o.machine_procs) {
    size_t k = jobs.size();
    limit_.resize(k);
    estimate_.resize(k);
    attempt_.assign(k, 0);
    slot_.assign(k, -1);
    out_.jobs.resize(k);
    for (size_t i = 0; i < k; ++i) limit_[i] = jobs[i].limit_s;
  }

  SimResult Run() {
    // Initial submissions in (submit, input order); the heap holds everything else.
    std::vector<int> order(jobs_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return jobs_[a].submit_s < jobs_[b].submit_s; });
    seq_ = static_cast<int64_t>(order.size());
    size_t next = 0;
    while (next < order.size() || !heap_.empty()) {
      Event e;
      if (next < order.size()) {
        Event s{jobs_[order[next]].submit_s, kSubmit, static_cast<int64_t>(next), order[next]};
        if (heap_.empty() || heap_.top() > s) {
          e = s;
          ++next;
        } else {
          e = heap_.top();
          heap_.pop();
        }
      } else {
        e = heap_.top();
        heap_.pop();
      }
      now_ = e.t;
      ++out_.events;
      switch (e.type) {
        case kSubmit:
          OnSubmit(e.job);
          break;
        case kEnd:
          OnEnd(e.job);
          break;
        case kPredictionOver:
          OnPredictionOver(e.job);
          break;
        default:
          break;
      }
    }
    return std::move(out_);
  }

 private:
  void Push(int64_t t, int type, int job) { heap_.push(Event{t, type, seq_++, job}); }

  // Processors free now: a job whose planned end has come is free even before its
  // termination event at the same time is handled (pyss frees by the plan).
  int64_t FreeNow() const {
    int64_t free = n_;
    for (const Running& r : running_) {
      if (PlanEnd(r) > now_) free -= r.procs;
    }
    return free;
  }

  // A job still running at its planned end whose correction (another job's, at the same
  // second) is not handled yet is planned to its corrected end already.
  int64_t PlanEnd(const Running& r) const {
    return r.plan_end > now_ || r.end <= now_ ? r.plan_end : CorrectedEnd(r);
  }

  // Where the plan of a running job that outlived it at `now_` goes next: its first correction
  // step past now (first submission with a given estimate only), else its limit.
  int64_t CorrectedEnd(const Running& r) const {
    int64_t limit_end = r.start + limit_[r.job];
    if (attempt_[r.job] == 0 && jobs_[r.job].estimate_s > 0) {
      for (int64_t step : jobs_[r.job].corrections_s) {
        int64_t end = r.start + step;
        if (end >= limit_end) break;
        if (end > now_) return end;
      }
    }
    return limit_end;
  }

  int64_t PlannedRun(int j) const {
    return o_.policy == Policy::kEasyPlusPlus ? estimate_[j] : limit_[j];
  }

  void OnSubmit(int j) {
    if (o_.policy == Policy::kEasyPlusPlus) estimate_[j] = EstimateAtSubmit(j);
    queue_.push_back(j);
    // pyss's EASY tries only when the new job fits now, its EASY++ always: the same starts on
    // both derived traces (docs/simulate.md).
    Schedule();
  }

  int64_t EstimateAtSubmit(int j) const {
    int64_t limit = limit_[j];
    if (attempt_[j] == 0 && jobs_[j].estimate_s > 0) return std::min(jobs_[j].estimate_s, limit);
    if (jobs_[j].estimate_s == 0) {
      auto it = last2_.find(jobs_[j].user);
      if (jobs_[j].user >= 0 && it != last2_.end() && it->second.count >= 2) {
        int64_t mean = (it->second.runs[0] + it->second.runs[1] + 1) / 2;
        return std::clamp<int64_t>(mean, 1, limit);
      }
    }
    return limit;
  }

  void OnEnd(int j) {
    int slot = slot_[j];
    Running r = running_[slot];
    running_[slot] = running_.back();
    slot_[running_[slot].job] = slot;
    running_.pop_back();
    slot_[j] = -1;
    JobOutcome& o = out_.jobs[j];
    bool killed = jobs_[j].run_s > limit_[j];
    if (killed) {
      o.killed = true;
      o.lost_proc_s += r.procs * (r.end - r.start);
      if (jobs_[j].resubmit_limit_s > 0) {
        limit_[j] = jobs_[j].resubmit_limit_s;
        ++attempt_[j];
        Push(now_, kSubmit, j);
      }
    } else if (jobs_[j].user >= 0) {
      Last2& l = last2_[jobs_[j].user];
      l.runs[1] = l.runs[0];
      l.runs[0] = r.end - r.start;
      ++l.count;
    }
    Schedule();
  }

  // EASY++ correction: the job outlived its prediction; plan with its next correction (then
  // its limit) from now on.
  void OnPredictionOver(int j) {
    int slot = slot_[j];
    if (slot < 0) return;
    Running& r = running_[slot];
    if (r.plan_end != now_) return;
    r.plan_end = CorrectedEnd(r);
    if (r.plan_end < r.end) Push(r.plan_end, kPredictionOver, j);
    Schedule();
  }

  void Start(int j, bool backfilled) {
    if (j == head_) head_ = -1;  // a resubmitted job that is the head again gets a new promise
    int64_t run = std::min(jobs_[j].run_s, limit_[j]);
    Running r{j, jobs_[j].procs, now_, now_ + PlannedRun(j), now_ + run};
    slot_[j] = static_cast<int>(running_.size());
    running_.push_back(r);
    JobOutcome& o = out_.jobs[j];
    o.start_s = now_;
    o.end_s = r.end;
    o.backfilled = backfilled;
    Push(r.end, kEnd, j);
    if (r.plan_end < r.end) Push(r.plan_end, kPredictionOver, j);
  }

  // The earliest time at which the head `first` fits, with `free` processors free now and each
  // running job's processors back at its planned end (or, `by_limit`, its start plus limit);
  // `extra` gets the processors free then beyond the head's, at most those free now.
  int64_t Shadow(int first, int64_t free, bool by_limit, int64_t* extra) {
    ends_.clear();
    for (const Running& r : running_) {
      int64_t end = by_limit ? r.start + limit_[r.job] : PlanEnd(r);
      if (end > now_) ends_.emplace_back(end, r.procs);
    }
    std::sort(ends_.begin(), ends_.end());
    int64_t at_shadow = free;
    int64_t shadow = now_;
    for (size_t i = 0; i < ends_.size() && at_shadow < jobs_[first].procs;) {
      shadow = ends_[i].first;
      while (i < ends_.size() && ends_[i].first == shadow) at_shadow += ends_[i++].second;
    }
    *extra = std::min(at_shadow - jobs_[first].procs, free);
    return shadow;
  }

  void Schedule() {
    if (queue_.empty()) return;
    int64_t free = FreeNow();
    size_t head = 0;
    while (head < queue_.size() && jobs_[queue_[head]].procs <= free) {
      Start(queue_[head], false);
      free -= jobs_[queue_[head]].procs;
      ++head;
    }
    if (head > 0) queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head));
    if (o_.policy == Policy::kFcfs || queue_.size() <= 1 || free <= 0) return;

    // The head's reservation: the earliest time enough processors come back by the plan.
    int first = queue_[0];
    bool by_limit = false;  // the guard: this pass plans with limits, as EASY does
    if (o_.head_guard && o_.policy == Policy::kEasyPlusPlus) {
      // The guard's promise is EASY's: taken once, when the job becomes the head.
      if (head_ != first) {
        head_ = first;
        int64_t unused = 0;
        head_promise_ = Shadow(first, free, true, &unused);
      }
      by_limit = now_ >= head_promise_;
    }
    int64_t extra = 0;  // free at the shadow time beyond the head's
    int64_t shadow = Shadow(first, free, by_limit, &extra);
    int64_t nonextra = free - extra;
    candidates_.assign(queue_.begin() + 1, queue_.end());
    if (o_.policy == Policy::kEasyPlusPlus) {
      std::stable_sort(candidates_.begin(), candidates_.end(),
                       [&](int a, int b) { return estimate_[a] < estimate_[b]; });
    }
    bool started = false;
    for (int j : candidates_) {
      if (extra + nonextra <= 0) break;
      int64_t procs = jobs_[j].procs;
      if (now_ + (by_limit ? limit_[j] : PlannedRun(j)) > shadow) {
        if (procs > extra) continue;
        extra -= procs;
      } else {
        if (procs > extra + nonextra) continue;
        nonextra -= procs;
        if (nonextra < 0) {
          extra += nonextra;
          nonextra = 0;
        }
      }
      Start(j, true);
      started = true;
    }
    if (started) {
      std::erase_if(queue_, [&](int j) { return slot_[j] >= 0; });
    }
  }

  struct Last2 {
    int64_t runs[2] = {0, 0};
    int64_t count = 0;
  };

  const std::vector<SimJob>& jobs_;
  SimOptions o_;
  int64_t n_;
  int64_t now_ = 0;
  int head_ = -1;             // the head the guard's promise is for
  int64_t head_promise_ = 0;  // EASY's reservation for it
  int64_t seq_ = 0;
  std::vector<int64_t> limit_, estimate_;
  std::vector<int> attempt_, slot_;
  std::vector<Running> running_;
  std::vector<int> queue_, candidates_;
  std::vector<std::pair<int64_t, int64_t>> ends_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  std::unordered_map<int64_t, Last2> last2_;
  SimResult out_;
};

}  // namespace

StatusOr<SimResult> Simulate(const std::vector<SimJob>& jobs, const SimOptions& options) {
  if (options.machine_procs <= 0) {
    return Status::InvalidArgument(
        fmt::format("machine size must be > 0 processors, got {}", options.machine_procs));
  }
  if (jobs.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("too many jobs for one simulation");
  }
  for (const SimJob& j : jobs) {
    auto bad = [&](std::string_view what, int64_t v) {
      return Status::InvalidArgument(fmt::format("job {}: {} must be > 0, got {}", j.id, what, v));
    };
    if (j.run_s <= 0) return bad("run time", j.run_s);
    if (j.limit_s <= 0) return bad("time limit", j.limit_s);
    if (j.procs <= 0) return bad("processors", j.procs);
    if (j.estimate_s < 0) return bad("estimate", j.estimate_s);
    if (j.resubmit_limit_s < 0) return bad("resubmission limit", j.resubmit_limit_s);
    for (size_t i = 0; i < j.corrections_s.size(); ++i) {
      if (j.corrections_s[i] <= (i == 0 ? 0 : j.corrections_s[i - 1])) {
        return Status::InvalidArgument(
            fmt::format("job {}: corrections must be > 0 and ascending, got {} after {}", j.id,
                        j.corrections_s[i], i == 0 ? 0 : j.corrections_s[i - 1]));
      }
    }
    if (j.procs > options.machine_procs) {
      return Status::InvalidArgument(
          fmt::format("job {} asks for {} processors; the machine has {}", j.id, j.procs,
                      options.machine_procs));
    }
  }
  return Machine(jobs, options).Run();
}

Metrics Summarise(const std::vector<SimJob>& jobs, const SimResult& result, int64_t machine_procs) {
  Metrics m;
  m.jobs = static_cast<int64_t>(jobs.size());
  if (jobs.empty()) return m;
  std::vector<double> waits;
  waits.reserve(jobs.size());
  double sum_wait = 0, sum_bsld = 0, busy = 0;
  int64_t first_submit = INT64_MAX, last_end = INT64_MIN;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SimJob& j = jobs[i];
    const JobOutcome& o = result.jobs[i];
    double wait = static_cast<double>(o.start_s - j.submit_s);
    double ran = static_cast<double>(o.end_s - o.start_s);
    waits.push_back(wait);
    sum_wait += wait;
    double response = static_cast<double>(o.end_s - j.submit_s);
    sum_bsld += std::max(1.0, response / std::max(ran, 10.0));
    busy += static_cast<double>(j.procs) * ran + static_cast<double>(o.lost_proc_s);
    first_submit = std::min(first_submit, j.submit_s);
    last_end = std::max(last_end, o.end_s);
    if (o.killed) ++m.killed;
    if (o.backfilled) ++m.backfilled;
    m.lost_proc_hours += static_cast<double>(o.lost_proc_s) / 3600.0;
  }
  auto n = static_cast<double>(jobs.size());
  m.mean_wait_s = sum_wait / n;
  m.avebsld = sum_bsld / n;
  std::sort(waits.begin(), waits.end());
  size_t rank = static_cast<size_t>(std::ceil(0.95 * n));
  m.p95_wait_s = waits[std::max<size_t>(rank, 1) - 1];
  m.makespan_s = last_end - first_submit;
  if (m.makespan_s > 0) {
    m.utilisation = busy / (static_cast<double>(machine_procs) * static_cast<double>(m.makespan_s));
  }
  return m;
}

}  // namespace rightsize::sim

#include "predict/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <unordered_set>

#include "core/mutex.h"
#include "core/units.h"
#include "jobscript/job_script.h"
#include "model/code_change.h"
#include "model/dataset.h"
#include "model/history.h"
#include "model/predictor.h"
#include "model/target.h"
#include "predict/cluster.h"
#include "predict/code_estimate.h"
#include "report/prices.h"
#include "report/render.h"
#include "store/changes.h"

namespace rightsize {

namespace {

// The finished jobs one history scan of a prediction read (a user's or a job name's newest),
// in the store's order, and whether there were more than it reads.
struct FinishedScan {
  std::vector<JobRecord> finished;
  bool more = false;
};
using ScanKey = std::tuple<std::string, int, std::string, int64_t>;  // cluster, pass, name, now

// A prediction's past: the user's and the program's finished jobs and the history built from
// them (global medians of the model set included). Immutable once built: shared by the
// predictions of a session and, through a PredictCache, by later sessions.
struct PastJobs {
  std::vector<std::shared_ptr<const FinishedScan>> scans;  // own what `jobs` points to
  std::vector<const JobRecord*> jobs;                      // oldest first
  History history;
  std::vector<std::string> notes;  // a view with more jobs than read
};
// cluster, user, job name, now, model version (-1: none).
using PastKey = std::tuple<std::string, std::string, std::string, int64_t, int64_t>;

}  // namespace

struct PredictCache::Impl {
  static constexpr size_t kMaxEntries = 4096;
  // The generation a session's reads may use: the current one after checking its connection.
  uint64_t Check(Store& store) {
    bool changed = HistoryChangedSinceLastAsked(store);
    MutexLock lock(mu);
    if (changed) {
      ++generation;
      pasts.clear();
    }
    return generation;
  }
  std::shared_ptr<const PastJobs> Find(const PastKey& key, uint64_t as_of) {
    MutexLock lock(mu);
    if (as_of != generation) return nullptr;
    auto it = pasts.find(key);
    if (it == pasts.end()) return nullptr;
    ++hits;
    return it->second;
  }
  void Put(const PastKey& key, uint64_t as_of, std::shared_ptr<const PastJobs> past) {
    MutexLock lock(mu);
    if (as_of != generation) return;  // read before a change another connection saw
    if (pasts.size() >= kMaxEntries) pasts.clear();
    pasts.emplace(key, std::move(past));
  }

  mutable Mutex mu;
  uint64_t generation GUARDED_BY(mu) = 0;
  std::map<PastKey, std::shared_ptr<const PastJobs>> pasts GUARDED_BY(mu);
  int64_t hits GUARDED_BY(mu) = 0;
};

// What a PredictSession has read, by what it was read for.
struct PredictSession::Reads {  // NOLINT(bugprone-exception-escape): json's move may throw
  std::map<std::string, StatusOr<std::string>> clusters;  // PickCluster's `given` -> answer
  std::map<std::string, StatusOr<int64_t>> versions;      // cluster -> newest model version
  struct Model {
    int64_t version = 0;
    std::shared_ptr<const ModelSet> set;
    std::shared_ptr<std::shared_mutex> mu;  // the cache's lock of the set (null: not cached)
  };
  std::map<std::string, Model> models;  // cluster -> its model (only loads that succeeded)
  std::map<std::string, ClusterContext> contexts;           // cluster -> shape
  std::map<std::string, StatusOr<PriceTable>> price_files;  // PredictRequest::prices -> table
  std::map<ScanKey, std::shared_ptr<const FinishedScan>> scans;
  std::map<PastKey, std::shared_ptr<const PastJobs>> pasts;
  PredictCache::Impl* shared = nullptr;  // with the generation its entries must have
  uint64_t generation = 0;
};

namespace {

// How many of the user's (and the program's) newest finished jobs a prediction reads.
constexpr int64_t kMaxPastJobs = 2500;

// Rounds a suggestion up to what a request is written in (core/units.h: the one rule).
double RoundUp(Target t, double v) {
  if (!std::isfinite(v)) return v;  // unbounded stays unbounded
  switch (t) {
    case Target::kRuntime:
      return static_cast<double>(RoundTimeRequest(v));
    case Target::kPeakMemory:
    case Target::kGpuMemory:
      return static_cast<double>(RoundMemoryRequest(v));
    case Target::kCpuCores:
      return static_cast<double>(RoundCpuRequest(v));
    case Target::kGpuUtil:
      return v;
  }
  return v;
}

std::string TableRow(Target t, const std::string& p10, const std::string& p50,
                     const std::string& p90, const std::string& request,
                     const std::string& too_small, const std::string& suggested) {
  return fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", NameOf(t), p10, p50,
                     p90, request, too_small, suggested);
}

// What one prediction has read and said so far; the steps below fill it in order.
struct Work {  // NOLINT(bugprone-exception-escape): json's move may throw
  const PredictRequest& req;
  JobScript script;
  std::optional<nlohmann::json> from_code;  // the code's reading of GPU memory
  std::string cluster;
  JobRecord job;
  int64_t now = 0;
  nlohmann::json notes = nlohmann::json::array();
  // The model: from the cache when the caller keeps one.
  std::shared_ptr<const ModelSet> held;
  // The cached set's lock (ModelCache::Entry), taken around each use of its boosters only;
  // owned here too, as the cache may replace its entry (another thread loaded the same version)
  // while this prediction still uses it. Null for a set read for this prediction alone.
  std::shared_ptr<std::shared_mutex> held_mu;
  const ModelSet* set = nullptr;
  std::shared_ptr<const PastJobs> past;  // shared by the session and maybe its cache
  ClusterContext context;
  std::vector<float> row;
  std::optional<double> gpu_capacity;
  // What is said per target.
  nlohmann::json targets = nlohmann::json::object();
  std::string table;
  std::vector<std::string> why_lines;
  std::vector<std::string> unmeasured;  // targets the user's finished jobs never measured
  // The change-aware prediction (model/code_change.h): this job's code, its program's last run
  // with code and that run's, what changed between them, and the cluster's calibration.
  std::optional<StoredJobCode> code;
  CodeReading reading;
  const JobRecord* prev_job = nullptr;
  CodeReading prev_reading;
  // prev_job and the program's runs before it that ran the same code (SameCode), newest
  // first, at most kRepeatRuns: what a change moves, or what a repeat (`repeat`) is.
  std::vector<const JobRecord*> prev_same;
  bool repeat = false;
  std::vector<std::string> changed;
  std::string change_kind;    // ChangeKind from the previous run's code to this job's
  bool program_seen = false;  // the program (user and job name) has finished jobs
  CodeCalibration calibration;
};

// The cluster the job is for; one the store has never seen still gets an answer, from the
// script and the code alone, with a note.
Status PickJobCluster(PredictSession& session, Work& w) {
  auto cluster = session.Cluster(w.req.cluster);
  if (!cluster.ok() && cluster.status().code() == Status::Code::kNotFound) {
    cluster = w.req.cluster.empty() ? std::string("default") : w.req.cluster;
    w.notes.push_back(
        fmt::format("the store has no jobs of cluster {}: no history to learn from, only "
                    "what the script{} says",
                    *cluster, w.from_code ? " and its code" : ""));
  }
  if (!cluster.ok()) return cluster.status();
  w.cluster = *cluster;
  return Status::Ok();
}

// The job as submitted: the script's request with the request's overrides.
void BuildJob(Work& w) {
  const PredictRequest& r = w.req;
  w.job.cluster = w.cluster;
  w.job.request = w.script.request;
  if (!r.user.empty()) w.job.request.user = r.user;
  if (w.job.request.user.empty() && !r.submission) {
    const char* u = std::getenv("USER");
    w.job.request.user = u != nullptr ? u : "";
  }
  if (!r.account.empty()) w.job.request.account = r.account;
  if (!r.partition.empty()) w.job.request.partition = r.partition;
  if (w.job.request.job_name.empty()) {
    // sbatch names a job after its script when -J is not given.
    w.job.request.job_name = std::filesystem::path(r.script).filename().string();
  }
  w.now = r.now > 0 ? r.now : static_cast<int64_t>(std::time(nullptr));
  w.job.submit_time = w.now;
}

Status LoadModel(Store& store, ModelCache* models, PredictSession& session,
                 PredictSession::Reads& reads, Work& w) {
  auto load = [&]() -> StatusOr<ModelSet> {
    RS_ASSIGN_OR_RETURN(auto stored, store.GetModel(w.cluster, 0));
    RS_ASSIGN_OR_RETURN(auto parsed, ModelSet::Deserialize(stored.blob));
    parsed.version = stored.version;
    return parsed;
  };
  auto version = session.ModelVersion(w.cluster);
  auto read = reads.models.find(w.cluster);
  if (version.ok() && read != reads.models.end() && read->second.version == *version) {
    w.held = read->second.set;
    w.held_mu = read->second.mu;
  } else if (version.ok()) {
    if (models != nullptr) {
      RS_ASSIGN_OR_RETURN(auto entry, models->Get(w.cluster, *version, load));
      w.held = entry.set;
      w.held_mu = entry.mu;
    } else {
      RS_ASSIGN_OR_RETURN(auto parsed, load());
      w.held = std::make_shared<const ModelSet>(std::move(parsed));
    }
    reads.models[w.cluster] = {*version, w.held, w.held_mu};
  } else if (version.status().code() == Status::Code::kNotFound) {
    // How far the cluster is from its first model: `train` fits a target from min_rows finished
    // jobs that measured it. Not counted where only the targets are read (the webhook's
    // latency budget).
    JobFilter finished;
    finished.cluster = w.cluster;
    finished.ended_since = 0;
    int64_t ended = -1;
    if (w.req.text) {
      RS_ASSIGN_OR_RETURN(ended, store.CountJobs(finished));
    }
    auto needed = static_cast<int64_t>(TrainOptions{}.min_rows);
    std::string when =
        ended < 0 ? std::string("run `rightsize train`")
        : ended >= needed
            ? fmt::format("it has {} finished jobs: run `rightsize train`", ended)
            : fmt::format(
                  "{} more finished jobs are needed: `rightsize train` fits a model from "
                  "{}, the cluster has {}",
                  needed - ended, needed, ended);
    w.notes.push_back(fmt::format(
        "no model for cluster {} yet ({}): the answers below are the last-two baseline, "
        "without intervals",
        w.cluster, when));
  } else {
    return version.status();
  }
  w.set = w.held.get();
  return Status::Ok();
}

// The past this job's features come from: the user's newest finished jobs and the program's,
// at most kMaxPastJobs of each. The features read the last few runs of each view and its counts
// and means; beyond a few thousand jobs only those counts and means differ (over the newest
// kMaxPastJobs instead of all), and reading a user's 50,000 jobs took 0.4 s.
// Reads one scan of ReadPast (pass 0: the user's, 1: the job name's), or takes it from the
// session's reads: a review's containers share their namespace, which is their user.
StatusOr<std::shared_ptr<const FinishedScan>> ScanPast(Store& store, PredictSession::Reads& reads,
                                                       const Work& w, int pass) {
  JobFilter filter;
  filter.cluster = w.cluster;
  filter.ended_until = w.now + 1;
  if (pass == 0) {
    filter.user = w.job.request.user;
  } else {
    filter.job_name = w.job.request.job_name;
  }
  ScanKey key{w.cluster, pass, pass == 0 ? filter.user : filter.job_name, w.now};
  if (auto known = reads.scans.find(key); known != reads.scans.end()) return known->second;
  filter.newest = kMaxPastJobs + 1;  // one more: to know there are more
  auto scan = std::make_shared<FinishedScan>();
  int64_t read = 0;
  RS_RETURN_IF_ERROR(store.ScanJobs(filter, [&](const JobRecord& j) {
    if (++read > kMaxPastJobs) return false;
    if (j.end_time && *j.end_time <= w.now) scan->finished.push_back(j);
    return true;
  }));
  scan->more = read > kMaxPastJobs;
  std::shared_ptr<const FinishedScan> read_now = std::move(scan);
  reads.scans.emplace(std::move(key), read_now);
  return read_now;
}

// The past this job's features come from: the user's newest finished jobs and the program's,
// at most kMaxPastJobs of each. The features read the last few runs of each view and its counts
// and means; beyond a few thousand jobs only those counts and means differ (over the newest
// kMaxPastJobs instead of all), and reading a user's 50,000 jobs took 0.4 s.
StatusOr<std::shared_ptr<const PastJobs>> BuildPast(Store& store, PredictSession::Reads& reads,
                                                    const Work& w) {
  auto past = std::make_shared<PastJobs>();
  std::unordered_set<std::string_view> seen;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 0 && w.job.request.user.empty()) continue;
    RS_ASSIGN_OR_RETURN(auto scan, ScanPast(store, reads, w, pass));
    for (const JobRecord& j : scan->finished) {
      if (seen.insert(j.job_id).second) past->jobs.push_back(&j);
    }
    if (scan->more) {
      past->notes.push_back(fmt::format(
          "{} has more than {} finished jobs: the counts and means of its history are read "
          "from the newest {}",
          pass == 0 ? fmt::format("user {}", w.job.request.user)
                    : fmt::format("job name {}", w.job.request.job_name),
          FormatThousands(static_cast<double>(kMaxPastJobs), 0),
          FormatThousands(static_cast<double>(kMaxPastJobs), 0)));
    }
    past->scans.push_back(std::move(scan));
  }
  std::sort(past->jobs.begin(), past->jobs.end(),
            [](const JobRecord* a, const JobRecord* b) { return *a->end_time < *b->end_time; });
  for (const JobRecord* j : past->jobs) past->history.AddFinished(*j);
  if (w.set != nullptr) {
    for (Target t : kAllTargets) {
      past->history.SetGlobalMedian(t, w.set->global_median[static_cast<int>(t)]);
    }
  }
  return std::shared_ptr<const PastJobs>(std::move(past));
}

// The job's past: from the session's reads, else from the cache it shares with others while
// the store has not changed, else read now (and kept in both).
Status ReadPast(Store& store, PredictSession::Reads& reads, Work& w) {
  PastKey key{w.cluster, w.job.request.user, w.job.request.job_name, w.now,
              w.set != nullptr ? w.set->version : -1};
  if (auto known = reads.pasts.find(key); known != reads.pasts.end()) {
    w.past = known->second;
  } else if (auto shared =
                 reads.shared != nullptr ? reads.shared->Find(key, reads.generation) : nullptr) {
    w.past = shared;
    reads.pasts.emplace(key, std::move(shared));
  } else {
    RS_ASSIGN_OR_RETURN(w.past, BuildPast(store, reads, w));
    reads.pasts.emplace(key, w.past);
    if (reads.shared != nullptr) reads.shared->Put(key, reads.generation, w.past);
  }
  for (const auto& note : w.past->notes) w.notes.push_back(note);
  return Status::Ok();
}

// The job's features against the cluster as `rightsize ingest slurm` last saw it (sinfo), not
// as the model was trained; and one GPU's memory, the request of a GPU job.
void ReadCluster(Store& store, PredictSession::Reads& reads, Work& w) {
  auto known = reads.contexts.find(w.cluster);
  if (known == reads.contexts.end()) {
    known = reads.contexts.emplace(w.cluster, ContextFor(store, w.cluster)).first;
  }
  w.context = known->second;
  if (w.context.partitions.empty() && w.set != nullptr) w.context = w.set->context;
  const NodeShape* nodes = w.context.NodesOf(w.job.request.partition);
  if (w.job.request.partition.empty() && nodes != nullptr) {
    w.notes.push_back(
        fmt::format("no partition given: the cluster's default, {}", w.context.default_partition));
  }
  w.row.assign(Layout().cols(), 0.0F);
  w.past->history.Features(w.job, w.now, w.context, w.row.data());
  if (w.job.AllocatedGpus().value_or(0) > 0) {
    const PriceTable* prices = w.req.price_table;
    if (prices == nullptr) {
      auto parsed = reads.price_files.find(w.req.prices);
      if (parsed == reads.price_files.end()) {
        parsed = reads.price_files.emplace(w.req.prices, PricesFor(w.req.prices)).first;
      }
      if (parsed->second.ok()) prices = &*parsed->second;
    }
    if (prices != nullptr) {
      // A request without a GPU type gets the partition's.
      std::string type = w.job.GpuType();
      if (type.empty() && nodes != nullptr) type = nodes->gpu_type;
      double bytes = prices->GpuMemoryBytes(type, 1);  // one GPU's, as the request
      if (bytes > 0) w.gpu_capacity = bytes;
    }
  }
}

// The program's last finished run whose code is stored, what changed since, and how far the
// cluster's past changes say to trust the code (`train` stores it; neutral without).
Status ReadCodeChange(Store& store, Work& w) {
  if (!w.code) return Status::Ok();
  w.code->cluster = w.cluster;
  w.reading = ReadCode(w.code->facts, w.code->estimate, w.code->program, w.code->code_hash);
  std::string key = ProgramKey(w.job);
  int looked = 0;
  for (auto it = w.past->jobs.rbegin(); it != w.past->jobs.rend() && looked < 5; ++it) {
    const JobRecord& run = **it;
    if (ProgramKey(run) != key) continue;
    w.program_seen = true;
    ++looked;
    auto prev = store.GetJobCode(w.cluster, run.job_id);
    if (prev.status().code() == Status::Code::kNotFound) continue;
    if (!prev.ok()) return prev.status();
    w.prev_job = &run;
    w.prev_reading = ReadCode(prev->facts, prev->estimate, prev->program, prev->code_hash);
    w.prev_same = {&run};
    w.repeat = SameCode(w.prev_reading, w.reading);
    w.changed = ChangedFacts(w.prev_reading, w.reading);
    w.change_kind = ChangeKind(w.prev_reading, w.reading);
    if (w.changed.empty() && !prev->code_hash.empty() && prev->code_hash != w.code->code_hash) {
      w.notes.push_back(fmt::format(
          "the code changed since the last run of this program (job {}), but none of the facts "
          "its estimate reads did",
          run.job_id));
    }
    // The runs before it with the same code, while they last.
    for (++it; it != w.past->jobs.rend() && w.prev_same.size() < kRepeatRuns; ++it) {
      if (ProgramKey(**it) != key) continue;
      auto same = store.GetJobCode(w.cluster, (*it)->job_id);
      if (same.status().code() == Status::Code::kNotFound) break;
      if (!same.ok()) return same.status();
      if (!SameCode(ReadCode(same->facts, same->estimate, same->program, same->code_hash),
                    w.prev_reading)) {
        break;
      }
      w.prev_same.push_back(*it);
    }
    break;
  }
  auto meta = store.GetClusterMeta(w.cluster);
  if (meta.ok()) {
    if (auto it = meta->find(kCodeCalibrationMeta); it != meta->end()) {
      w.calibration = CodeCalibration::FromJson(nlohmann::json::parse(it->second, nullptr, false));
    }
  }
  return Status::Ok();
}

// Moves the history's prediction of `t` by what the code says changed since the program's last
// run, or, for a program new to a user without history, to the code's calibrated figure; says
// so in `why_lines` and tj["code_change"]. Returns the spread (sd of the log) it adds to the
// interval; 0 (and `p` as it was) where the code says nothing.
double MoveByCode(Work& w, Target t, TargetPrediction& p, nlohmann::json& tj) {
  if (!w.code) return 0;
  if (w.prev_job != nullptr) {
    std::vector<double> measured;
    for (const JobRecord* run : w.prev_same) {
      if (auto v = TargetValue(*run, t); v && *v > 0) measured.push_back(*v);
    }
    auto before = SameCodeMean(measured);
    if (!before) return 0;
    std::string runs = measured.size() == 1
                           ? fmt::format("last run of this program (job {})", w.prev_job->job_id)
                           : fmt::format("last {} runs of this program (newest: job {})",
                                         measured.size(), w.prev_job->job_id);
    const char* verb = t == Target::kRuntime ? "ran" : "used";
    if (w.repeat) {
      // The same files and facts again: what those runs measured, and the interval of how
      // the cluster's past repeats missed such a mean.
      p.point = *before;
      p.log_point = std::log(*before);
      p.own_errors = w.calibration.RepeatErrors(t);
      auto repeats =
          static_cast<int64_t>(w.calibration.repeat_log_error[static_cast<int>(t)].size());
      std::string said = fmt::format(
          "the same code and facts as the {}, which {} {} (mean); {}", runs, verb,
          FormatTargetValue(t, *before),
          p.own_errors ? fmt::format("interval from {} past repeats of this cluster", repeats)
                       : fmt::format("interval from the history's errors ({} past repeats of this "
                                     "cluster, {} needed for their own)",
                                     repeats, QuantileGrid::CountToBound(0.9)));
      w.why_lines.push_back(fmt::format("  {}: {}", NameOf(t), said));
      tj["code_change"] = {{"repeat", true},
                           {"previous_job", w.prev_job->job_id},
                           {"previous_runs", measured.size()},
                           {"previous_mean", *before},
                           {"past_repeats", repeats},
                           {"why", said}};
      return 0;
    }
    auto x = CodeLogRatio(t, w.prev_reading, w.reading, before);
    // A change the code cannot size (x = 0 with other facts: an optimizer, a precision, workers)
    // still moves from the last runs' measurement, not from the history's, which the change
    // may mislead. Code not known to have changed (no hash, the same facts) keeps the history's.
    const std::string& kind = w.change_kind;
    if (!x || (std::abs(*x) < 1e-9 && !CodeChanged(w.prev_reading, w.reading))) return 0;
    ChangeFit fit = w.calibration.Fit(t, kind);
    double slope = fit.slope;
    double fixed = std::min(fit.fixed, 0.9 * *before);
    double shift = fit.Applied(*x, *before);
    p.log_point = std::log(*before) + shift;
    p.point = std::exp(p.log_point);
    double spread = fit.Spread(*x, *before);
    int64_t n = fit.changes;
    int64_t n_kind = fit.of_kind;
    std::string said = fmt::format(
        "{}; {} {} {}; the code says ×{:.2f}, applied ×{:.2f} ({}{})",
        w.changed.empty() ? std::string("the code's estimate changed")
                          : fmt::format("{}", fmt::join(w.changed, ", ")),
        runs, verb, FormatTargetValue(t, *before), std::exp(*x), std::exp(shift),
        fixed > 0
            ? fmt::format("{} of it does not grow with the work; ", FormatTargetValue(t, fixed))
            : std::string(),
        n == 0 ? std::string("no past changes on this cluster to calibrate on")
        : n_kind > 0
            ? fmt::format("slope {:.2f} from {} past changes of {} among {} of this cluster", slope,
                          n_kind, kind, n)
            : fmt::format("slope {:.2f} from {} past changes of this cluster", slope, n));
    w.why_lines.push_back(fmt::format("  {}: {}", NameOf(t), said));
    tj["code_change"] = {{"changed", w.changed},
                         {"previous_job", w.prev_job->job_id},
                         {"previous_runs", measured.size()},
                         {"previous_mean", *before},
                         {"code_ratio", std::exp(*x)},
                         {"applied_ratio", std::exp(shift)},
                         {"kind", kind},
                         {"slope", slope},
                         {"fixed_part", fixed},
                         {"past_changes", n},
                         {"spread", spread},
                         {"why", said}};
    return spread;
  }
  if (w.program_seen || p.group != 0 || t == Target::kGpuMemory) return 0;
  auto figure = CodeFigure(t, w.reading);
  auto correction = w.calibration.EstimateCorrection(t);
  if (!figure || !correction) return 0;
  double target = std::log(*figure) + correction->first;
  double shift = target - p.log_point;
  p.log_point = target;
  p.point = std::exp(target);
  std::string said = fmt::format(
      "a new program: its code's estimate, × {:.2f} (the median of measured to estimated over "
      "{} past jobs of this cluster)",
      std::exp(correction->first), w.calibration.estimate_log_ratio[static_cast<int>(t)].size());
  w.why_lines.push_back(fmt::format("  {}: {}", NameOf(t), said));
  tj["code_change"] = {{"new_program", true},
                       {"applied_ratio", std::exp(shift)},
                       {"spread", correction->second},
                       {"why", said}};
  return correction->second;
}

// GPU memory without a model of it: the code's own reading.
void PredictFromCode(Work& w, Target t, const std::optional<double>& request, nlohmann::json tj) {
  const nlohmann::json& c = *w.from_code;
  for (const char* q : {"p10", "p50", "p90"}) tj[q] = c[q];
  tj["source"] = "code";
  tj["code"] = c;
  if (w.req.text) {
    w.table += TableRow(t, FormatTargetValue(t, c["p10"].get<double>()),
                        FormatTargetValue(t, c["p50"].get<double>()),
                        FormatTargetValue(t, c["p90"].get<double>()),
                        request ? FormatTargetValue(t, *request) : "-", "", "");
  }
  w.targets[std::string(NameOf(t))] = std::move(tj);
}

// Without a model: the baseline closest on this cluster's jobs so far, as `train` chose it
// (last-two before any training). Says only what this cluster's jobs have measured.
void PredictFromBaseline(Work& w, Target t, const std::optional<double>& request,
                         const std::array<float, kNumBaselines>& baselines, nlohmann::json tj) {
  Baseline fb = Baseline::kLast2;
  if (w.set != nullptr) {
    if (auto f = w.set->fallback.find(t); f != w.set->fallback.end()) fb = f->second;
  }
  float b = baselines[static_cast<int>(fb)];
  if (!std::isfinite(b) || std::isnan(w.past->history.GlobalMedian(t))) return;
  if (w.code && b > 0) {  // moved by what the code says changed, as the model's would be
    TargetPrediction moved;
    moved.point = b;
    moved.log_point = std::log(b);
    moved.group = 1;  // not a new program's: the baseline has this user's past
    MoveByCode(w, t, moved, tj);
    b = static_cast<float>(moved.point);
  }
  tj["source"] = fmt::format("baseline:{}", NameOf(fb));
  if (w.set != nullptr) {
    w.notes.push_back(fmt::format(
        "{}: too few finished jobs for a model yet; p50 is the {} baseline (the closest on "
        "this cluster's finished jobs; last-two under {} of them), without an interval",
        NameOf(t), NameOf(fb), kMinFallbackJobs));
  }
  tj["p50"] = b;
  if (w.req.text) {
    w.table += TableRow(t, "", FormatTargetValue(t, b), "",
                        request ? FormatTargetValue(t, *request) : "-", "", "");
  }
  w.targets[std::string(NameOf(t))] = std::move(tj);
}

// The request to suggest at the asked risk. Above the request the history holds only jobs
// stopped there (time limit, OOM kill), so the upper tail is not known beyond it: never
// suggest more than twice the request, and never more cores than asked for (too few cores
// slow a job down, they do not kill it). Sets `used` to the risk the suggestion is made at.
double SuggestRequest(Work& w, Target t, const TargetPrediction& p,
                      const std::optional<double>& request, const std::optional<double>& too_small,
                      double* used) {
  const PredictRequest& r = w.req;
  double suggested = p.RequestQuantile(1 - r.risk);
  *used = p.EffectiveRisk(r.risk);
  if (request && *too_small <= r.risk) {
    suggested = p.Suggest(r.risk, r.per_job_risk ? RiskScope::kJob : RiskScope::kCluster, used);
    if (*used < r.risk / 1.1) {  // the correction never raises the risk (kRiskFactorMax)
      w.notes.push_back(fmt::format(
          "{}: recent jobs outgrew their suggested requests more often than the risk said, so "
          "this one is made at a {:.2g}% risk for your {:.2g}%",
          NameOf(t), 100 * *used, 100 * r.risk));
    }
  } else if (request && *too_small < 0.1) {
    suggested = *request;  // a small but real chance of needing more: keep the request
  } else if (request) {
    suggested = std::min(suggested, (t == Target::kCpuCores ? 1 : 2) * *request);
  }
  suggested = RoundUp(t, suggested);
  double job_risk = p.ProbTooSmall(suggested);
  if (request && suggested < *request && job_risk > 1.5 * r.risk && !r.per_job_risk) {
    w.notes.push_back(fmt::format(
        "{}: this job would outgrow the suggested request with a {:.2g}% chance: the {:.2g}% "
        "asked for is a share of all jobs, and a large request, whose cut frees the most, "
        "takes more of it than a small one (--per-job-risk bounds this job's own)",
        NameOf(t), 100 * job_risk, 100 * r.risk));
  }
  if (request && suggested > *request) {
    w.notes.push_back(fmt::format("{}: the request ({}) is probably too small; ask for {}",
                                  NameOf(t), FormatTargetValue(t, *request),
                                  FormatTargetValue(t, suggested)));
  }
  return suggested;
}

// The risk at which a smaller request than `request` would first be suggested (the lowest of
// kSuggestRisks above the asked risk, then 20%), and that request; nullopt when none is.
struct FirstCut {
  double risk = 0, suggested = 0;
};
std::optional<FirstCut> FirstSuggestion(const Work& w, Target t, const TargetPrediction& p,
                                        double request, double too_small) {
  std::vector<double> ladder(kSuggestRisks.begin(), kSuggestRisks.end());
  ladder.push_back(0.2);
  for (double risk : ladder) {
    if (risk <= w.req.risk || too_small > risk) continue;
    double s = RoundUp(
        t, p.Suggest(risk, w.req.per_job_risk ? RiskScope::kJob : RiskScope::kCluster, nullptr));
    if (s < request) return FirstCut{risk, s};
  }
  return std::nullopt;
}

// Says why a request is kept as it is at the asked risk, in `tj` ("suggested_at_risk",
// "suggested_there") and a note: most often the model was checked on too few jobs to bound so
// small a risk (a conformal bound at risk r needs 1/r - 1 of them), which the user can only
// read off a table where the request is far above p90 as "nothing to change".
void WhyKept(Work& w, Target t, const TargetPrediction& p, double request, double too_small,
             nlohmann::json& tj) {
  tj["suggested_at_risk"] = nullptr;
  tj["suggested_there"] = nullptr;
  if (t == Target::kGpuUtil) return;
  auto first = FirstSuggestion(w, t, p, request, too_small);
  const QuantileGrid& grid = p.RequestGrid();
  int64_t needed = QuantileGrid::CountToBound(1 - w.req.risk);
  std::string why =
      too_small > w.req.risk
          ? fmt::format("it is too small for {:.2g}% of jobs like this one, more than the risk",
                        100 * too_small)
      : grid.n < needed
          ? fmt::format(
                "the model was checked on {} {} like it, too few to bound a {:.2g}% "
                "risk ({} are needed)",
                grid.n, p.group < 2 && &grid == &GroupGrid(*p.model, p.group) ? "users" : "jobs",
                100 * w.req.risk, needed)
          : "no smaller request kept the held-out jobs' kills within it";
  std::string then = first ? fmt::format("; at --risk {:g} it suggests {}", first->risk,
                                         FormatTargetValue(t, first->suggested))
                           : "; no risk up to 20% suggests less";
  w.notes.push_back(fmt::format("{}: the request ({}) is kept at a {:.2g}% risk: {}{}", NameOf(t),
                                FormatTargetValue(t, request), 100 * w.req.risk, why, then));
  if (first) {
    tj["suggested_at_risk"] = first->risk;
    tj["suggested_there"] = first->suggested;
  }
}

// The features that moved this prediction most (SHAP values of the trees): the "why" entries
// of the document and one line of the text.
nlohmann::json Explain(Work& w, Target t, const TargetModel& m, float anchor,
                       const std::string& anchor_from) {
  std::vector<float> gathered;
  for (int c : m.columns) gathered.push_back(w.row[c]);
  std::vector<float> contrib;
  nlohmann::json why = nlohmann::json::array();
  {
    std::unique_lock<std::shared_mutex> alone;  // a DMatrix prediction: no other beside it
    if (w.held_mu) alone = std::unique_lock<std::shared_mutex>(*w.held_mu);
    if (!m.median.Contributions(gathered.data(), 1, gathered.size(), &contrib).ok()) return why;
  }
  std::vector<size_t> order(m.columns.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return std::abs(contrib[a]) > std::abs(contrib[b]); });
  std::string line;
  for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k) {
    size_t c = order[k];
    if (contrib[c] == 0) break;
    const std::string& name = Layout().names[m.columns[c]];
    std::string words = DescribeFeature(name);
    why.push_back(
        {{"feature", name},
         {"description", words},
         {"value", std::isnan(gathered[c]) ? nlohmann::json(nullptr) : nlohmann::json(gathered[c])},
         {"factor", std::exp(contrib[c])}});
    // A missing value moves the trees too: the job has no such past.
    line += fmt::format("{}{}{} ×{:.2f}", line.empty() ? "" : "; ", words,
                        std::isnan(gathered[c]) ? ": none" : "", std::exp(contrib[c]));
  }
  if (!line.empty()) {
    std::string start = std::isfinite(anchor) && anchor > 0
                            ? fmt::format("{} ({})", anchor_from, FormatTargetValue(t, anchor))
                            : "the cluster's typical job";
    w.why_lines.push_back(fmt::format("  {}: from {}, {}", NameOf(t), start, line));
  }
  return why;
}

// A target the cluster's model predicts: quantiles, the suggested request and why.
Status PredictFromModel(Work& w, Target t, const TargetModel& m,
                        const std::optional<double>& request,
                        const std::array<float, kNumBaselines>& baselines, nlohmann::json tj) {
  std::string anchor_from;
  float anchor = w.past->history.Anchor(w.job, t, baselines, &anchor_from);
  std::shared_lock<std::shared_mutex> beside;  // in-place predictions run side by side
  if (w.held_mu) beside = std::shared_lock<std::shared_mutex>(*w.held_mu);
  RS_ASSIGN_OR_RETURN(
      auto p, PredictTarget(m, w.row.data(), baselines, anchor, request, SubmitWeight(t, w.job)));
  if (beside.owns_lock()) beside.unlock();
  double spread = MoveByCode(w, t, p, tj);
  // The interval with the code's doubt in it (as it was where the code says nothing).
  auto quantile = [&](double q) {
    double v = p.Quantile(q);
    if (spread <= 0 || !(v > 0)) return v;
    return std::exp(p.log_point + WidenLogOffset(std::log(v) - p.log_point, q, spread));
  };
  std::optional<double> too_small;
  if (request) too_small = p.ProbTooSmall(*request);
  double used = 0;
  double suggested = SuggestRequest(w, t, p, request, too_small, &used);
  tj["source"] = "model";
  // An unbounded quantile (too few jobs or users to bound it) is null in JSON.
  auto bound = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  tj["p10"] = bound(std::max(0.0, quantile(0.1)));
  tj["p50"] = p.point;
  tj["p90"] = bound(quantile(0.9));
  tj["suggested_request"] = bound(suggested);
  if (request && suggested >= *request && (t != Target::kCpuCores || *request > 1)) {
    WhyKept(w, t, p, *request, *too_small, tj);
  }
  tj["risk_used"] = used;
  tj["job_risk"] = p.ProbTooSmall(suggested);
  tj["history"] = HistoryGroupName(p.group);
  if (p.group == 0) w.unmeasured.emplace_back(NameOf(t));
  if (!std::isfinite(quantile(0.9))) {
    // Groups 0 and 1 count users (TrainTarget, GroupGrid).
    bool users = p.group < 2;
    std::string who = !users         ? "held-out jobs"
                      : p.group == 0 ? "users the cluster had not seen before"
                                     : "users with a few past jobs";
    w.notes.push_back(fmt::format(
        "{}: p90 is unbounded: too few {} to check the model on ({}; {} are needed to bound "
        "it)",
        NameOf(t), who, p.Grid().n, QuantileGrid::CountToBound(0.9)));
  }
  tj["prob_request_too_small"] = too_small ? nlohmann::json(*too_small) : nlohmann::json(nullptr);
  if (t == Target::kGpuMemory && w.from_code) {
    tj["code"] = *w.from_code;
    if (p.group == 0 && !tj.contains("code_change")) {  // no history: the code's reading
      for (const char* q : {"p10", "p50", "p90"}) tj[q] = (*w.from_code)[q];
      tj["source"] = "code";
    }
  }
  tj["why"] = w.req.explain ? Explain(w, t, m, anchor, anchor_from) : nlohmann::json::array();
  if (w.req.text) {
    w.table += TableRow(t, FormatTargetValue(t, quantile(0.1)), FormatTargetValue(t, p.point),
                        FormatTargetValue(t, quantile(0.9)),
                        request ? FormatTargetValue(t, *request) : "-",
                        too_small ? fmt::format("{:.1f}%", 100 * *too_small) : "-",
                        t == Target::kGpuUtil ? "-" : FormatTargetValue(t, suggested));
  }
  w.targets[std::string(NameOf(t))] = std::move(tj);
  return Status::Ok();
}

Status PredictTargets(Work& w) {
  for (Target t : kAllTargets) {
    bool gpu_target = t == Target::kGpuMemory || t == Target::kGpuUtil;
    if (gpu_target && w.job.AllocatedGpus().value_or(0) == 0) continue;
    auto request = TargetRequest(w.job, t, w.gpu_capacity);
    auto baselines = w.past->history.Baselines(w.job, w.now, t);
    nlohmann::json tj;
    tj["unit"] = InfoOf(t).unit;
    tj["request"] = request ? nlohmann::json(*request) : nlohmann::json(nullptr);
    const TargetModel* model = nullptr;
    if (w.set != nullptr) {
      if (auto it = w.set->targets.find(t); it != w.set->targets.end()) model = &it->second;
    }
    if (model == nullptr && t == Target::kGpuMemory && w.from_code) {
      PredictFromCode(w, t, request, std::move(tj));
    } else if (model == nullptr) {
      PredictFromBaseline(w, t, request, baselines, std::move(tj));
    } else {
      RS_RETURN_IF_ERROR(PredictFromModel(w, t, *model, request, baselines, std::move(tj)));
    }
  }
  if (!w.unmeasured.empty()) {
    // A user with finished jobs that did not measure a target (CPU cores of jobs under a
    // minute) is told which, not that they have no jobs at all.
    bool has_jobs = std::any_of(w.past->jobs.begin(), w.past->jobs.end(), [&](const JobRecord* j) {
      return j->request.user == w.job.request.user;
    });
    std::string user = w.job.request.user.empty() ? "(unknown)" : w.job.request.user;
    w.notes.push_back(
        has_jobs ? fmt::format("the finished jobs of user {} in cluster {} never measured {}: "
                               "{} intervals are those of users the cluster had not seen "
                               "before, and wider",
                               user, w.cluster, fmt::join(w.unmeasured, " or "),
                               w.unmeasured.size() == 1 ? "its" : "their")
                 : fmt::format("user {} has no finished jobs in cluster {}: the intervals are "
                               "those of users the cluster had not seen before, and wider",
                               user, w.cluster));
  }
  return Status::Ok();
}

// The most similar past jobs: same user and name, then same user and request, then the user's,
// then the program's; the newest first. Returns the document's list; appends to `text`.
nlohmann::json SimilarJobs(const Work& w, std::string* text) {
  std::vector<std::pair<int, const JobRecord*>> ranked;
  std::string sig = RequestSignature(w.job);
  for (const JobRecord* j : w.past->jobs) {
    bool same_user = j->request.user == w.job.request.user;
    int score = (same_user && j->request.job_name == w.job.request.job_name) ? 3
                : (same_user && RequestSignature(*j) == sig)                 ? 2
                : same_user                                                  ? 1
                                                                             : 0;
    ranked.emplace_back(score, j);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return *a.second->end_time > *b.second->end_time;
  });
  nlohmann::json similar = nlohmann::json::array();
  for (size_t k = 0; k < std::min<size_t>(3, ranked.size()); ++k) {
    const JobRecord& j = *ranked[k].second;
    nlohmann::json sj = {{"job_id", j.job_id},
                         {"user", j.request.user},
                         {"job_name", j.request.job_name},
                         {"end_time", *j.end_time},
                         {"state", j.outcome.state}};
    std::string used;
    for (Target t : kAllTargets) {
      auto v = TargetValue(j, t);
      if (!v) continue;
      sj[std::string(NameOf(t))] = *v;
      used += fmt::format(" {} {}", NameOf(t), FormatTargetValue(t, *v));
    }
    *text += fmt::format("  {} {} ({}, ended {}):{}\n", j.job_id, j.request.job_name,
                         j.request.user, FormatTimestamp(*j.end_time), used);
    similar.push_back(std::move(sj));
  }
  return similar;
}

PredictionOutput Finish(Work& w, nlohmann::json warnings, std::string warnings_text) {
  const PredictRequest& r = w.req;
  PredictionOutput result;
  if (!r.text) {  // the targets only (PredictRequest::text)
    result.doc = {{"schema", "rightsize.predict/v1"}, {"targets", std::move(w.targets)}};
    return result;
  }
  std::string similar_text;
  nlohmann::json similar = SimilarJobs(w, &similar_text);
  const ModelSet* set = w.set;
  result.doc = {{"schema", "rightsize.predict/v1"},
                {"script", r.script},
                {"cluster", w.cluster},
                {"user", w.job.request.user},
                {"job_name", w.job.request.job_name},
                {"risk", r.risk},
                {"per_job_risk", r.per_job_risk},
                {"model", set != nullptr ? nlohmann::json{{"version", set->version},
                                                          {"trained_at", set->trained_at},
                                                          {"jobs", set->jobs}}
                                         : nlohmann::json(nullptr)},
                {"targets", w.targets},
                {"similar_jobs", similar},
                {"warnings", std::move(warnings)},
                {"notes", w.notes}};
  result.warnings = std::move(warnings_text);
  std::string& text = result.text;
  text +=
      fmt::format("{}: user {}, cluster {}, {}\n", r.script,
                  w.job.request.user.empty() ? "(unknown)" : w.job.request.user, w.cluster,
                  set != nullptr ? fmt::format("model version {} ({} jobs)", set->version,
                                               FormatThousands(static_cast<double>(set->jobs), 0))
                                 : std::string("no model"));
  text += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "", "p10", "p50",
                      "p90", "request", "too small", fmt::format("at {:.1f}%", 100 * r.risk));
  text += w.table;
  if (w.from_code) text += (*w.from_code)["text"].get<std::string>();
  if (!w.why_lines.empty()) {
    text += "why:\n";
    for (const auto& l : w.why_lines) text += l + "\n";
  }
  if (!similar_text.empty()) text += "similar past jobs:\n" + similar_text;
  for (const auto& n : w.notes) text += fmt::format("note: {}\n", n.get<std::string>());
  return result;
}

}  // namespace

StatusOr<PredictionOutput> PredictJob(Store& store, const PredictRequest& request,
                                      ModelCache* models) {
  PredictSession session(store, models);
  return session.Predict(request);
}

PredictCache::PredictCache() : impl_(std::make_unique<Impl>()) {}

PredictCache::~PredictCache() = default;

int64_t PredictCache::hits() const {
  MutexLock lock(impl_->mu);
  return impl_->hits;
}

PredictSession::PredictSession(Store& store, ModelCache* models, PredictCache* cache)
    : store_(store), models_(models), reads_(std::make_unique<Reads>()) {
  if (cache != nullptr) {
    reads_->shared = &cache->impl();
    reads_->generation = reads_->shared->Check(store);
  }
}

PredictSession::~PredictSession() = default;

StatusOr<std::string> PredictSession::Cluster(const std::string& given) {
  auto known = reads_->clusters.find(given);
  if (known == reads_->clusters.end()) {
    known = reads_->clusters.emplace(given, PickCluster(store_, given)).first;
    // The cluster picked has jobs: naming it picks it (PickCluster reads the same list).
    if (known->second.ok() && *known->second != given) {
      reads_->clusters.emplace(*known->second, *known->second);
    }
  }
  return known->second;
}

StatusOr<int64_t> PredictSession::ModelVersion(const std::string& cluster) {
  auto known = reads_->versions.find(cluster);
  if (known == reads_->versions.end()) {
    known = reads_->versions.emplace(cluster, store_.LatestModelVersion(cluster)).first;
  }
  return known->second;
}

StatusOr<PredictionOutput> PredictSession::Predict(const PredictRequest& request) {
  Store& store = store_;
  StatusOr<JobScript> script = Status::NotFound("no script");
  if (request.submission) {
    script = *request.submission;
  } else if (request.script_text) {
    script = ParseJobScript(*request.script_text, request.sbatch_args);
  } else {
    script = ParseJobScriptFile(request.script, request.sbatch_args);
  }
  if (!script.ok()) return script.status();
  Work w{request, std::move(*script)};
  nlohmann::json warnings = nlohmann::json::array();
  std::string warnings_text;
  for (const auto& warning : w.script.warnings) {
    warnings.push_back({{"line", warning.line}, {"message", warning.message}});
    warnings_text += fmt::format("{}: {}\n", request.script, warning.ToString());
  }
  // The code's own reading of GPU memory: the prediction on a cold start, else shown beside.
  if ((!request.script_text && !request.submission) || !request.code.empty()) {
    JobCodeReading code = ReadCode(w.script, request.script, request.code, request.environment);
    w.from_code = std::move(code.gpu_memory);
    if (code.stored.ok()) w.code = std::move(*code.stored);
  }
  RS_RETURN_IF_ERROR(PickJobCluster(*this, w));
  BuildJob(w);
  RS_RETURN_IF_ERROR(LoadModel(store, models_, *this, *reads_, w));
  RS_RETURN_IF_ERROR(ReadPast(store, *reads_, w));
  RS_RETURN_IF_ERROR(ReadCodeChange(store, w));
  ReadCluster(store, *reads_, w);
  RS_RETURN_IF_ERROR(PredictTargets(w));
  PredictionOutput out = Finish(w, std::move(warnings), std::move(warnings_text));
  out.code = std::move(w.code);
  return out;
}

std::string PredictionTable(const nlohmann::json& doc) {
  std::string out = fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "", "p10", "p50",
                                "p90", "request", "suggested");
  for (const auto& item : doc["targets"].items()) {
    const std::string& name = item.key();
    const nlohmann::json& t = item.value();
    bool bytes = t.value("unit", "") == "bytes";
    bool secs = t.value("unit", "") == "s";
    auto cell = [&](const char* key) -> std::string {
      auto it = t.find(key);
      if (it == t.end() || !it->is_number()) return "-";
      double v = it->get<double>();
      if (bytes) return FormatMemory(static_cast<int64_t>(v));
      if (secs) return FormatDuration(v);
      return fmt::format("{:.1f}", v);
    };
    out += fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", name, cell("p10"),
                       cell("p50"), cell("p90"), cell("request"), cell("suggested_request"));
  }
  for (const auto& n : doc["notes"]) out += fmt::format("note: {}\n", n.get<std::string>());
  return out;
}

}  // namespace rightsize

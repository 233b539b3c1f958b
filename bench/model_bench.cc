// In-process benchmarks of the predictor: what `rightsize predict` does for one job script
// once its process is up (parse the script, read the user's past, compute the features and
// the baselines, predict every trained target), and the training steps behind `rightsize
// train`. Models are trained here on real traces: the bundled HPC2N excerpt (run time and
// CPU cores), the KTH SP2 log from test/data, and the LLNL Atlas log from
// /work/shared/data/traces when that folder exists (skipped otherwise).
//
// The predict benchmarks time every call with std::chrono and report its p50 and p99 in
// microseconds as counters (p50_us, p99_us), beside Google Benchmark's mean.
// Run through `make bench`, which records the figures in docs/benchmarks.md's format.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "ingest/ingest.h"
#include "ingest/swf.h"
#include "jobscript/job_script.h"
#include "model/dataset.h"
#include "model/history.h"
#include "model/predictor.h"
#include "store/store.h"

namespace rightsize {
namespace {

std::string SourceDir() { return RIGHTSIZE_SOURCE_DIR; }

struct TraceFile {
  const char* name;
  std::string path;
};

// The traces a benchmark can run on; a missing file is skipped (only the shared one can be).
std::vector<TraceFile> Traces() {
  std::vector<TraceFile> all = {
      {"hpc2n", SourceDir() + "/data/traces/HPC2N-excerpt-alea.swf.gz"},
      {"kth", SourceDir() + "/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz"},
      {"llnl", "/work/shared/data/traces/LLNL-Atlas-2006-2.1-cln.swf.gz"},
  };
  std::erase_if(all, [](const TraceFile& t) { return !std::filesystem::exists(t.path); });
  return all;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A store file in the temp folder, removed with its WAL when done.
class TempStore {
 public:
  explicit TempStore(std::string_view tag) {
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("rs-model-bench-{}-{}.db", getpid(), tag);
    Remove();
    store_ = std::move(OpenStore(path_.string())).value();
  }
  ~TempStore() {
    store_.reset();
    Remove();
  }
  TempStore(const TempStore&) = delete;
  TempStore& operator=(const TempStore&) = delete;
  Store& store() { return *store_; }

 private:
  void Remove() {
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path_.string() + ext);
  }
  std::filesystem::path path_;
  std::unique_ptr<Store> store_;
};

// One trace, ingested into a store and trained on the way `rightsize train` does it.
struct Trained {
  std::unique_ptr<TempStore> store;
  std::string cluster = "bench";
  ClusterContext context;
  std::vector<JobRecord> jobs;  // as scanned from the store
  Dataset dataset;
  std::vector<size_t> ended_rows;  // dataset rows with an end time
  ModelSet model;                  // serialised and read back, as `predict` gets it
  std::string user;                // the user with the most finished jobs
  int64_t user_jobs = 0;
  int64_t now = 0;  // just after the last job ended
};

// The trained traces, by name. Emptied before main returns: the models hold XGBoost handles,
// and XGBoost's own statics, created after this map, are destroyed before it.
std::map<std::string, std::unique_ptr<Trained>>& TrainedCache() {
  static std::map<std::string, std::unique_ptr<Trained>> cache;
  return cache;
}

const Trained& TrainedOn(const TraceFile& trace) {
  auto& slot = TrainedCache()[trace.name];
  if (slot) return *slot;
  auto t = std::make_unique<Trained>();
  t->store = std::make_unique<TempStore>(trace.name);
  Store& store = t->store->store();
  SwfParser parser;
  IngestOptions options;
  options.override_cluster = true;
  IngestStats stats;
  Status st = IngestFile(trace.path, parser, store, t->cluster, options, &stats);
  if (!st.ok()) {
    fmt::print(stderr, "model_bench: {}: {}\n", trace.path, st.ToString());
    std::exit(1);
  }
  // As `rightsize train` reads the cluster's size (cli/model_commands.cc, ContextFor).
  if (auto meta = store.GetClusterMeta(t->cluster); meta.ok()) {
    if (auto it = meta->find("swf.MaxProcs"); it != meta->end()) {
      t->context.total_cpus = std::stod(it->second);
    }
  }
  JobFilter all;
  all.cluster = t->cluster;
  (void)store.ScanJobs(all, [&](const JobRecord& j) {
    t->jobs.push_back(j);
    return true;
  });
  std::map<std::string, int64_t> per_user;
  for (const auto& j : t->jobs) {
    if (!j.end_time) continue;
    t->now = std::max(t->now, *j.end_time + 1);
    ++per_user[j.request.user];
  }
  for (const auto& [u, n] : per_user) {
    if (n > t->user_jobs) {
      t->user = u;
      t->user_jobs = n;
    }
  }
  std::vector<JobRecord> jobs = t->jobs;
  History history;
  t->dataset = BuildDataset(jobs, t->context, &history);
  for (size_t r = 0; r < t->dataset.rows(); ++r) {
    if (t->dataset.end[r] != std::numeric_limits<int64_t>::max()) t->ended_rows.push_back(r);
  }
  ModelSet set;
  set.cluster = t->cluster;
  set.context = t->context;
  set.jobs = static_cast<int64_t>(t->dataset.rows());
  for (Target target : kAllTargets) {
    set.global_median[static_cast<int>(target)] = history.GlobalMedian(target);
    auto m = TrainTarget(t->dataset, target, t->ended_rows, TrainOptions{});
    if (m.ok()) set.targets.emplace(target, std::move(*m));
  }
  std::string blob = set.Serialize();
  (void)store.PutModel(t->cluster, 0, set.jobs, blob);
  auto loaded = ModelSet::Deserialize(blob);
  if (!loaded.ok()) {
    fmt::print(stderr, "model_bench: {}\n", loaded.status().ToString());
    std::exit(1);
  }
  t->model = std::move(*loaded);
  slot = std::move(t);
  return *slot;
}

// The targets a trace has enough values of to train (TrainOptions::min_rows), found by parsing
// it without training, so that registering the benchmarks stays cheap.
std::vector<Target> TargetsOf(const TraceFile& trace) {
  SwfParser parser;
  std::vector<JobRecord> jobs;
  gzFile f = gzopen(trace.path.c_str(), "rb");
  if (f == nullptr) return {};
  char buf[1 << 16];
  while (gzgets(f, buf, sizeof buf) != nullptr) {
    std::string_view l(buf);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.remove_suffix(1);
    (void)parser.ParseLine(l, jobs);
  }
  gzclose(f);
  std::vector<Target> out;
  for (Target target : kAllTargets) {
    auto n = std::count_if(jobs.begin(), jobs.end(), [&](const JobRecord& j) {
      return j.end_time && TargetValue(j, target).has_value();
    });
    if (static_cast<size_t>(n) >= TrainOptions{}.min_rows) out.push_back(target);
  }
  return out;
}

// Per-call wall times, reported as p50 and p99 counters (µs).
class Latencies {
 public:
  explicit Latencies(benchmark::State& state) : state_(state) {}
  ~Latencies() {
    if (us_.empty()) return;
    std::sort(us_.begin(), us_.end());
    auto at = [&](double q) {
      return us_[std::min(us_.size() - 1,
                          static_cast<size_t>(q * static_cast<double>(us_.size())))];
    };
    state_.counters["p50_us"] = at(0.5);
    state_.counters["p99_us"] = at(0.99);
    state_.counters["max_us"] = us_.back();
  }
  Latencies(const Latencies&) = delete;
  Latencies& operator=(const Latencies&) = delete;
  template <typename Fn>
  void Time(Fn fn) {
    auto start = std::chrono::steady_clock::now();
    fn();
    us_.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }

 private:
  benchmark::State& state_;
  std::vector<double> us_;
};

const std::string& ScriptText() {
  static const std::string text = ReadFile(SourceDir() + "/test/data/scripts/mpi_job.sh");
  return text;
}
constexpr double kRisk = 0.01;  // `predict`'s default --risk

// The job the script describes, as `predict` builds it.
StatusOr<JobRecord> JobFromScript(const Trained& t) {
  RS_ASSIGN_OR_RETURN(auto script, ParseJobScript(ScriptText()));
  JobRecord job;
  job.cluster = t.cluster;
  job.request = script.request;
  job.request.user = t.user;
  if (job.request.job_name.empty()) job.request.job_name = "mpi_job.sh";
  job.submit_time = t.now;
  return job;
}

// The past `predict` reads: the user's finished jobs, then the program's, oldest end first.
Status ReadPast(Store& store, const Trained& t, const JobRecord& job,
                std::vector<JobRecord>* past) {
  past->clear();
  std::set<std::string> seen;
  for (int pass = 0; pass < 2; ++pass) {
    JobFilter filter;
    filter.cluster = t.cluster;
    filter.ended_until = t.now + 1;
    if (pass == 0) {
      filter.user = job.request.user;
    } else {
      filter.job_name = job.request.job_name;
    }
    RS_RETURN_IF_ERROR(store.ScanJobs(filter, [&](const JobRecord& j) {
      if (j.end_time && *j.end_time <= t.now && seen.insert(j.job_id).second) past->push_back(j);
      return true;
    }));
  }
  std::sort(past->begin(), past->end(),
            [](const JobRecord& a, const JobRecord& b) { return *a.end_time < *b.end_time; });
  return Status::Ok();
}

void FillHistory(const std::vector<JobRecord>& past, const ModelSet& set, History* history) {
  for (const auto& j : past) history->AddFinished(j);
  for (Target target : kAllTargets) {
    history->SetGlobalMedian(target, set.global_median[static_cast<int>(target)]);
  }
}

// Features, baselines and every trained target's prediction and quantiles; with `why`, also
// the SHAP contributions `predict` prints under "why:". Returns how many targets it predicted.
StatusOr<int> PredictAll(const ModelSet& set, const History& history, const JobRecord& job,
                         int64_t now, bool why) {
  float row[1024];
  if (Layout().cols() > 1024) return Status::Internal("too many feature columns");
  history.Features(job, now, set.context, row);
  int predicted = 0;
  double sink = 0;
  for (Target target : kAllTargets) {
    bool gpu_target = target == Target::kGpuMemory || target == Target::kGpuUtil;
    if (gpu_target && job.AllocatedGpus().value_or(0) == 0) continue;
    auto request = TargetRequest(job, target);
    auto baselines = history.Baselines(job, now, target);
    auto it = set.targets.find(target);
    if (it == set.targets.end()) continue;
    const TargetModel& m = it->second;
    double weight = SubmitWeight(target, job);
    RS_ASSIGN_OR_RETURN(
        auto p,
        PredictTarget(m, row, baselines, history.Anchor(job, target, baselines), request, weight));
    sink += p.Quantile(1 - kRisk) + p.Quantile(0.1) + p.Quantile(0.9) + p.point;
    if (request) sink += p.Suggest(kRisk);
    if (request) sink += p.ProbTooSmall(*request);
    if (why) {
      std::vector<float> gathered, contrib;
      for (int c : m.columns) gathered.push_back(row[c]);
      RS_RETURN_IF_ERROR(m.median.Contributions(gathered.data(), 1, gathered.size(), &contrib));
      sink += contrib[0];
    }
    ++predicted;
  }
  benchmark::DoNotOptimize(sink);
  return predicted;
}

void SetLabel(benchmark::State& state, const Trained& t, int targets, size_t past) {
  state.SetLabel(fmt::format("{} jobs, {} targets, user {} with {} past jobs", t.jobs.size(),
                             targets, t.user, past));
}

// The warm path: the model loaded and the user's history already in memory (what a resident
// service would keep); per call the script is parsed and every target predicted.
void BM_PredictWarmHistory(benchmark::State& state, const TraceFile& trace) {
  const Trained& t = TrainedOn(trace);
  auto job = JobFromScript(t);
  std::vector<JobRecord> past;
  if (!job.ok() || !ReadPast(t.store->store(), t, *job, &past).ok()) {
    state.SkipWithError("setup");
    return;
  }
  History history;
  FillHistory(past, t.model, &history);
  int targets = 0;
  {
    Latencies lat(state);
    for (auto _ : state) {
      lat.Time([&] {
        auto j = JobFromScript(t);
        auto n = j.ok() ? PredictAll(t.model, history, *j, t.now, false) : j.status();
        targets = n.ok() ? *n : -1;
      });
    }
  }
  if (targets < 0) state.SkipWithError("predict failed");
  SetLabel(state, t, targets, past.size());
}

// As `predict` does once the user's past is read: the History is built per call from the
// user's (and the program's) finished jobs, then the script parsed and every target predicted.
void BM_PredictBuildHistory(benchmark::State& state, const TraceFile& trace) {
  const Trained& t = TrainedOn(trace);
  auto job = JobFromScript(t);
  std::vector<JobRecord> past;
  if (!job.ok() || !ReadPast(t.store->store(), t, *job, &past).ok()) {
    state.SkipWithError("setup");
    return;
  }
  int targets = 0;
  {
    Latencies lat(state);
    for (auto _ : state) {
      lat.Time([&] {
        auto j = JobFromScript(t);
        History history;
        FillHistory(past, t.model, &history);
        auto n = j.ok() ? PredictAll(t.model, history, *j, t.now, false) : j.status();
        targets = n.ok() ? *n : -1;
      });
    }
  }
  if (targets < 0) state.SkipWithError("predict failed");
  SetLabel(state, t, targets, past.size());
}

// As above, with the past read from the SQLite store per call (by user, then by job name, as
// `predict` reads it). With `cli`, also what else `predict` does in-process: load the newest
// model from the store and compute the SHAP contributions it prints as "why".
void BM_PredictFromStore(benchmark::State& state, const TraceFile& trace, bool cli) {
  const Trained& t = TrainedOn(trace);
  Store& store = t.store->store();
  int targets = 0;
  size_t past_jobs = 0;
  {
    Latencies lat(state);
    std::vector<JobRecord> past;
    for (auto _ : state) {
      lat.Time([&] {
        auto j = JobFromScript(t);
        if (!j.ok()) {
          targets = -1;
          return;
        }
        std::optional<ModelSet> loaded;
        if (cli) {
          auto stored = store.GetModel(t.cluster, 0);
          if (stored.ok()) {
            auto parsed = ModelSet::Deserialize(stored->blob);
            if (parsed.ok()) loaded = std::move(*parsed);
          }
          if (!loaded) {
            targets = -1;
            return;
          }
        }
        const ModelSet& set = cli ? *loaded : t.model;
        if (!ReadPast(store, t, *j, &past).ok()) {
          targets = -1;
          return;
        }
        History history;
        FillHistory(past, set, &history);
        auto n = PredictAll(set, history, *j, t.now, cli);
        targets = n.ok() ? *n : -1;
      });
    }
    past_jobs = past.size();
  }
  if (targets < 0) state.SkipWithError("predict failed");
  SetLabel(state, t, targets, past_jobs);
}

// One target's PredictTarget alone (the trees and the quantiles), for each trained target.
void BM_PredictTarget(benchmark::State& state, const TraceFile& trace, Target target) {
  const Trained& t = TrainedOn(trace);
  auto it = t.model.targets.find(target);
  if (it == t.model.targets.end()) {
    state.SkipWithError("the target was not trained");
    return;
  }
  const TargetModel& m = it->second;
  size_t r = t.ended_rows.back();
  const float* row = t.dataset.row(r);
  const auto& baselines = t.dataset.baseline[static_cast<int>(target)][r];
  float anchor = t.dataset.anchor[static_cast<int>(target)][r];
  {
    Latencies lat(state);
    for (auto _ : state) {
      lat.Time([&] {
        auto p = PredictTarget(m, row, baselines, anchor, std::nullopt, 1.0);
        benchmark::DoNotOptimize(p);
      });
    }
  }
}

// Reading the stored model (CBOR + XGBoost's UBJSON): every `predict` process pays it once.
void BM_ModelLoad(benchmark::State& state, const TraceFile& trace) {
  const Trained& t = TrainedOn(trace);
  Store& store = t.store->store();
  {
    Latencies lat(state);
    for (auto _ : state) {
      lat.Time([&] {
        auto stored = store.GetModel(t.cluster, 0);
        if (!stored.ok()) return;
        auto parsed = ModelSet::Deserialize(stored->blob);
        benchmark::DoNotOptimize(parsed);
      });
    }
  }
  state.SetLabel(fmt::format("{} targets", t.model.targets.size()));
}

// `train`'s two steps: the chronological pass over every job, and one target's trees.
void BM_BuildDataset(benchmark::State& state, const TraceFile& trace) {
  const Trained& t = TrainedOn(trace);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<JobRecord> jobs = t.jobs;
    state.ResumeTiming();
    History history;
    Dataset d = BuildDataset(jobs, t.context, &history);
    benchmark::DoNotOptimize(d.x.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(t.jobs.size()));
}

void BM_TrainTarget(benchmark::State& state, const TraceFile& trace, Target target) {
  const Trained& t = TrainedOn(trace);
  size_t rows = 0;
  for (auto _ : state) {
    auto m = TrainTarget(t.dataset, target, t.ended_rows, TrainOptions{});
    if (!m.ok()) {
      state.SkipWithError(m.status().ToString().c_str());
      return;
    }
    rows = static_cast<size_t>(m->trained_rows + m->calibration_rows);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(rows));
}

void RegisterAll() {
  for (const TraceFile& trace : Traces()) {
    auto name = [&](std::string_view what) { return fmt::format("{}/{}", what, trace.name); };
    benchmark::RegisterBenchmark(name("BM_PredictWarmHistory").c_str(), BM_PredictWarmHistory,
                                 trace)
        ->MinTime(1.0)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(name("BM_PredictBuildHistory").c_str(), BM_PredictBuildHistory,
                                 trace)
        ->MinTime(1.0)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(name("BM_PredictFromStore").c_str(), BM_PredictFromStore, trace,
                                 false)
        ->MinTime(1.0)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(name("BM_PredictFromStoreCli").c_str(), BM_PredictFromStore, trace,
                                 true)
        ->MinTime(1.0)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    for (Target target : TargetsOf(trace)) {
      benchmark::RegisterBenchmark(
          fmt::format("BM_PredictTarget/{}/{}", trace.name, NameOf(target)).c_str(),
          BM_PredictTarget, trace, target)
          ->MinTime(0.5)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark(name("BM_ModelLoad").c_str(), BM_ModelLoad, trace)
        ->MinTime(0.5)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(name("BM_BuildDataset").c_str(), BM_BuildDataset, trace)
        ->Iterations(3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(fmt::format("BM_TrainTarget/{}/runtime", trace.name).c_str(),
                                 BM_TrainTarget, trace, Target::kRuntime)
        ->Iterations(3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace rightsize

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  rightsize::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  rightsize::TrainedCache().clear();
  return 0;
}

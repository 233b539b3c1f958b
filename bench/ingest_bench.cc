// In-process benchmarks of the hot paths: parsing and storing SWF and sacct records, and
// building the report over 300,000 jobs. Inputs are real traces shipped in test/data and
// data/traces, replicated with fresh job ids to reach the sizes the targets name.
// Run through `make bench`, which records the figures in docs/benchmarks.md's format.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "ingest/ingest.h"
#include "ingest/sacct.h"
#include "ingest/swf.h"
#include "report/prices.h"
#include "report/waste.h"
#include "store/store.h"

namespace rightsize {
namespace {

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return lines;
  char buf[1 << 16];
  while (gzgets(f, buf, sizeof buf) != nullptr) {
    std::string l(buf);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    lines.push_back(l);
  }
  gzclose(f);
  return lines;
}

std::string SourceDir() { return RIGHTSIZE_SOURCE_DIR; }

// `copies` copies of the KTH SP2 trace's records, each copy with its own job ids.
const std::vector<std::string>& SwfLines(int copies) {
  static std::map<int, std::vector<std::string>> cache;
  auto& out = cache[copies];
  if (!out.empty()) return out;
  auto lines = ReadLines(SourceDir() + "/test/data/swf/KTH-SP2-1996-2.1-cln.swf.gz");
  int64_t id = 0;
  for (int c = 0; c < copies; ++c) {
    for (const auto& l : lines) {
      if (l.empty() || l[0] == ';') continue;
      auto p = l.find_first_not_of(' ');
      auto sp = l.find(' ', p);
      out.push_back(fmt::format("{}{}", ++id, l.substr(sp)));
    }
  }
  return out;
}

// The 4,285 real UB CCR sacct rows, replicated with fresh job ids.
const std::vector<std::string>& SacctLines(int copies) {
  static std::map<int, std::vector<std::string>> cache;
  auto& out = cache[copies];
  if (!out.empty()) return out;
  auto lines = ReadLines(SourceDir() +
                         "/test/data/sacct/sites/"
                         "ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz");
  out.push_back(lines.at(0));  // header
  for (int c = 0; c < copies; ++c) {
    for (size_t i = 1; i < lines.size(); ++i) {
      // Prefix both id columns so each copy is a new set of jobs.
      out.push_back(fmt::format("{}{}|{}{}", c + 1, lines[i].substr(0, lines[i].find('|')), c + 1,
                                lines[i].substr(lines[i].find('|') + 1)));
    }
  }
  return out;
}

class TempStore {
 public:
  TempStore() {
    path_ = std::filesystem::temp_directory_path() / fmt::format("rs-bench-{}.db", getpid());
    Remove();
    store_ = std::move(OpenStore(path_.string())).value();
  }
  ~TempStore() {
    store_.reset();
    Remove();
  }
  Store& store() { return *store_; }

 private:
  void Remove() {
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path_.string() + ext);
  }
  std::filesystem::path path_;
  std::unique_ptr<Store> store_;
};

void BM_SwfParse(benchmark::State& state) {
  const auto& lines = SwfLines(1);
  for (auto _ : state) {
    SwfParser parser;
    std::vector<JobRecord> out;
    out.reserve(lines.size());
    for (const auto& l : lines) (void)parser.ParseLine(l, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
}
BENCHMARK(BM_SwfParse)->Unit(benchmark::kMillisecond);

// Parse + store, as `rightsize ingest swf` does it (IngestFile over a temp file).
void IngestBench(benchmark::State& state, const std::vector<std::string>& lines,
                 const std::function<std::unique_ptr<RecordParser>()>& make) {
  auto file = std::filesystem::temp_directory_path() / fmt::format("rs-bench-{}.in", getpid());
  {
    std::ofstream out(file);
    for (const auto& l : lines) out << l << '\n';
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto store = std::make_unique<TempStore>();
    auto parser = make();
    state.ResumeTiming();
    IngestStats stats;
    Status st = IngestFile(file.string(), *parser, store->store(), "bench", {}, &stats);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
  std::filesystem::remove(file);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
}

void BM_SwfIngest(benchmark::State& state) {
  IngestBench(state, SwfLines(static_cast<int>(state.range(0))),
              [] { return std::make_unique<SwfParser>(); });
}
BENCHMARK(BM_SwfIngest)->Arg(11)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_SacctIngest(benchmark::State& state) {
  IngestBench(state, SacctLines(static_cast<int>(state.range(0))),
              [] { return std::make_unique<SacctParser>(SacctOptions{}); });
}
BENCHMARK(BM_SacctIngest)->Arg(35)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// Storing already-parsed records, 10,000 to a transaction: the store's share of an ingest.
void BM_StoreUpsert(benchmark::State& state) {
  SwfParser parser;
  std::vector<JobRecord> jobs;
  for (const auto& l : SwfLines(11)) (void)parser.ParseLine(l, jobs);
  for (auto& j : jobs) j.cluster = "bench";
  for (auto _ : state) {
    state.PauseTiming();
    auto store = std::make_unique<TempStore>();
    state.ResumeTiming();
    for (size_t i = 0; i < jobs.size(); i += 10000) {
      std::span<const JobRecord> batch(jobs.data() + i, std::min<size_t>(10000, jobs.size() - i));
      if (!store->store().UpsertJobs(batch).ok()) state.SkipWithError("upsert");
    }
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(jobs.size()));
}
BENCHMARK(BM_StoreUpsert)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// The report over 300,000+ stored jobs (KTH x 11 = 313,379 jobs).
void BM_Report(benchmark::State& state) {
  TempStore store;
  SwfParser parser;
  std::vector<JobRecord> jobs;
  for (const auto& l : SwfLines(11)) (void)parser.ParseLine(l, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].cluster = "bench";
  if (!store.store().UpsertJobs(jobs).ok()) state.SkipWithError("store");
  PriceTable prices;
  prices.cpu_core_hour = 0.03;
  prices.memory_gb_hour = 0.004;
  prices.default_gpu_hour = 3;
  for (auto _ : state) {
    auto report = BuildWasteReport(store.store(), ReportOptions{}, prices);
    if (!report.ok()) state.SkipWithError(report.status().ToString().c_str());
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(jobs.size()));
}
BENCHMARK(BM_Report)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

}  // namespace
}  // namespace rightsize

BENCHMARK_MAIN();

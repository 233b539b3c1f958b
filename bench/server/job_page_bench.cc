// job_page_bench: how fast `rightsize serve` answers a job page on a big store.
//
//   job_page_bench build --db PATH
//     Builds (once: a store that already holds this layout is kept) a store of 100,000 jobs and
//     ~50 million samples through the real Store API (WriteTelemetry), cluster "bench":
//       - 99,000 short jobs (ids 1..99000): 3 metrics x 35 s at 1 Hz, one chunk per series;
//       - 500 one-hour jobs written in large batches (ids 100001..100500): 11 metrics x 3,600 s at
//         1 Hz, as `WriteTelemetry` chunks them from whole-hour batches;
//       - 500 one-hour jobs written as the agent does (ids 200001..200500): the same samples,
//         but in 5-second batches (the agent's default --ship-interval), so 720 small chunks per
//         series.
//     Prints the build time and the store's size on disk.
//   job_page_bench measure --url http://127.0.0.1:PORT [--pages 300] [--seed 1] [--keep-alive 0|1]
//     Against a server on that store: per class of job, --pages random jobs, each one page =
//     GET /api/v1/jobs/bench/{id} then GET /api/v1/jobs/bench/{id}/series?from=START&to=START+3600
//     (all metrics, the server's default step), one after the other on one keep-alive
//     connection (--keep-alive 0: a new connection per request); prints p50/p99/max of the page
//     (both requests) and of each request.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "store/store.h"

namespace {

using Clock = std::chrono::steady_clock;
using rightsize::JobTelemetry;
using rightsize::Sample;

constexpr const char* kCluster = "bench";
// Changing the layout changes this, so an old cached store is rebuilt.
constexpr const char* kSpec =
    "jobs=100000;short=99000x3x35;bulk=500x11x3600;agent=500x11x3600/5s;v1";
constexpr int kShortJobs = 99'000;
constexpr int kLongJobs = 500;                // per kind (bulk-written, agent-written)
constexpr int64_t kBaseTime = 1'762'000'000;  // Nov 2025

const char* const kMetrics[] = {"cpu_cores",      "memory_bytes",     "cgroup_memory_bytes",
                                "gpu_util_pct",   "gpu_memory_bytes", "io_read_bytes",
                                "io_write_bytes", "processes",        "threads",
                                "open_files",     "cpu_throttled_s"};

int64_t StartOf(int id) { return kBaseTime + static_cast<int64_t>(id % 100'000) * 25; }

rightsize::JobRecord Record(int id, int64_t start, int64_t elapsed_s) {
  rightsize::JobRecord j;
  j.cluster = kCluster;
  j.job_id = std::to_string(id);
  j.source = "agent";
  j.start_time = start;
  j.end_time = start + elapsed_s;
  j.request.user = fmt::format("user{:03d}", id % 300);
  j.request.account = fmt::format("acct{:02d}", id % 40);
  j.request.partition = id % 3 == 0 ? "gpu" : "cpu";
  j.request.job_name = fmt::format("job{}", id % 1000);
  j.request.cpus = 8;
  j.request.memory_bytes = int64_t{32} << 30;
  j.request.gpus = id % 3 == 0 ? 1 : 0;
  j.request.time_limit_s = 7200;
  j.usage.elapsed_s = static_cast<double>(elapsed_s);
  j.usage.cpu_time_s = static_cast<double>(elapsed_s) * 3.5;
  j.usage.peak_rss_bytes = int64_t{6} << 30;
  j.outcome.state = "COMPLETED";
  return j;
}

void AddSeries(JobTelemetry* t, int metrics, int64_t from_s, int seconds, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (int m = 0; m < metrics; ++m) {
    auto& points = t->samples[kMetrics[m]];
    double base = m == 0 ? 3.5 : m == 3 ? 70 : 1e9 * (m + 1);
    for (int s = 0; s < seconds; ++s)
      points.push_back(Sample{(from_s + s) * 1000, base * noise(rng)});
  }
}

int Build(const std::string& db) {
  {
    auto store = rightsize::OpenStore(db);
    if (store.ok()) {
      auto meta = (*store)->GetClusterMeta(kCluster);
      if (meta.ok() && meta->count("job_page_bench") && meta->at("job_page_bench") == kSpec) {
        fmt::print("store {} already built ({})\n", db, kSpec);
        return 0;
      }
    }
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  auto opened = rightsize::OpenStore(db);
  if (!opened.ok()) {
    fmt::print(stderr, "{}\n", opened.status().message());
    return 1;
  }
  auto& store = **opened;
  std::mt19937_64 rng(42);
  int64_t seq = 0, samples = 0;
  auto t0 = Clock::now();
  auto write = [&](const std::vector<JobTelemetry>& batch) {
    auto ok = store.WriteTelemetry("bench-agent", ++seq, batch);
    if (!ok.ok() || !*ok) {
      fmt::print(stderr, "WriteTelemetry: {}\n", ok.ok() ? "refused" : ok.status().message());
      std::exit(1);
    }
    for (const auto& t : batch) {
      for (const auto& [m, p] : t.samples) samples += static_cast<int64_t>(p.size());
    }
  };
  // Short jobs, 1,000 per transaction.
  std::vector<JobTelemetry> batch;
  for (int id = 1; id <= kShortJobs; ++id) {
    JobTelemetry t;
    t.job = Record(id, StartOf(id), 35);
    AddSeries(&t, 3, StartOf(id), 35, rng);
    batch.push_back(std::move(t));
    if (batch.size() == 1000) {
      write(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) write(batch);
  batch.clear();
  auto t_short = Clock::now();
  // One-hour jobs from whole-hour batches, 10 per transaction.
  for (int k = 1; k <= kLongJobs; ++k) {
    int id = 100'000 + k;
    JobTelemetry t;
    t.job = Record(id, StartOf(id), 3600);
    AddSeries(&t, 11, StartOf(id), 3600, rng);
    batch.push_back(std::move(t));
    if (batch.size() == 10) {
      write(batch);
      batch.clear();
    }
  }
  auto t_bulk = Clock::now();
  // One-hour jobs as the agent ships them: a 5-second batch at a time (one transaction per job
  // here, 720 entries, to keep the build short; the chunks are what 720 posts would store).
  for (int k = 1; k <= kLongJobs; ++k) {
    int id = 200'000 + k;
    int64_t start = StartOf(id);
    std::vector<JobTelemetry> entries;
    entries.reserve(720);
    for (int b = 0; b < 720; ++b) {
      JobTelemetry t;
      t.job = Record(id, start, 3600);
      AddSeries(&t, 11, start + b * 5, 5, rng);
      if (b % 12 == 0) t.stacks["python;main;train_step;matmul"] = 5;
      entries.push_back(std::move(t));
    }
    write(entries);
  }
  auto t_agent = Clock::now();
  rightsize::Status st = store.PutClusterMeta(kCluster, {{"job_page_bench", kSpec}});
  if (!st.ok()) {
    fmt::print(stderr, "{}\n", st.message());
    return 1;
  }
  opened->reset();  // close: checkpoints the WAL into the main file
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  uintmax_t bytes = 0;
  for (const char* suffix : {"", "-wal"}) {
    std::error_code ec;
    auto n = std::filesystem::file_size(db + suffix, ec);
    if (!ec) bytes += n;
  }
  fmt::print(
      "built {}: 100,000 jobs, {} samples in {:.1f} s ({:.0f} samples/s): short jobs {:.1f} s, "
      "bulk-written 1 h jobs {:.1f} s, agent-written 1 h jobs {:.1f} s; {:.2f} GiB on disk "
      "({:.1f} bytes/sample)\n",
      db, samples, secs(t0, t_agent), static_cast<double>(samples) / secs(t0, t_agent),
      secs(t0, t_short), secs(t_short, t_bulk), secs(t_bulk, t_agent),
      static_cast<double>(bytes) / (1 << 30),
      static_cast<double>(bytes) / static_cast<double>(samples));
  return 0;
}

struct Timings {
  std::vector<double> page_ms, job_ms, series_ms;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(k, v.size() - 1)];
}

int Measure(const std::string& url, int pages, uint64_t seed, bool keep_alive) {
  httplib::Client client(url);
  client.set_keep_alive(keep_alive);
  client.set_tcp_nodelay(true);  // as browsers and curl do
  client.set_read_timeout(std::chrono::seconds(60));
  std::mt19937_64 rng(seed);
  struct Kind {
    const char* name;
    int first, count;
  };
  const Kind kinds[] = {{"random job of the 100,000 (99% short)", 0, 0},
                        {"1 h x 11 metrics, written in whole-hour batches", 100'001, kLongJobs},
                        {"1 h x 11 metrics, written in 5 s agent batches", 200'001, kLongJobs}};
  int failures = 0;
  double worst_p99 = 0;
  for (const Kind& kind : kinds) {
    Timings t;
    for (int i = 0; i < pages; ++i) {
      int id;
      if (kind.count == 0) {
        uint64_t r = rng() % 100'000;
        id = r < kShortJobs ? static_cast<int>(r) + 1
                            : (r % 2 ? 100'001 : 200'001) + static_cast<int>(r % kLongJobs);
      } else {
        id = kind.first + static_cast<int>(rng() % static_cast<uint64_t>(kind.count));
      }
      int64_t start = StartOf(id);
      auto a = Clock::now();
      auto job = client.Get(fmt::format("/api/v1/jobs/{}/{}", kCluster, id));
      auto b = Clock::now();
      auto series = client.Get(fmt::format("/api/v1/jobs/{}/{}/series?from={}&to={}", kCluster, id,
                                           start, start + 3600));
      auto c = Clock::now();
      if (!job || job->status != 200 || !series || series->status != 200) {
        ++failures;
        if (failures < 5) {
          fmt::print(stderr, "job {}: {} / {}\n", id,
                     job ? std::to_string(job->status) : "no answer",
                     series ? std::to_string(series->status) : "no answer");
        }
        continue;
      }
      auto ms = [](auto x, auto y) {
        return std::chrono::duration<double, std::milli>(y - x).count();
      };
      t.page_ms.push_back(ms(a, c));
      t.job_ms.push_back(ms(a, b));
      t.series_ms.push_back(ms(b, c));
    }
    double p99 = Pct(t.page_ms, 0.99);
    worst_p99 = std::max(worst_p99, p99);
    fmt::print(
        "{:<50} {} pages: page p50 {:6.2f} ms p99 {:6.2f} ms max {:6.2f} ms | job p50 {:.2f} p99 "
        "{:.2f} | series p50 {:.2f} p99 {:.2f} ms\n",
        kind.name, t.page_ms.size(), Pct(t.page_ms, 0.5), p99, Pct(t.page_ms, 1.0),
        Pct(t.job_ms, 0.5), Pct(t.job_ms, 0.99), Pct(t.series_ms, 0.5), Pct(t.series_ms, 0.99));
  }
  fmt::print("worst page p99 {:.2f} ms (target < 20 ms: {}); {} failed pages\n", worst_p99,
             worst_p99 < 20 ? "met" : "NOT met", failures);
  return failures == 0 ? 0 : 1;
}

int Usage() {
  std::fprintf(stderr,
               "usage: job_page_bench build --db PATH\n"
               "       job_page_bench measure --url http://HOST:PORT [--pages 300] [--seed 1] "
               "[--keep-alive 0|1]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string cmd = argv[1], db, url;
  int pages = 300;
  uint64_t seed = 1;
  bool keep_alive = true;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--db")
      db = v;
    else if (a == "--url")
      url = v;
    else if (a == "--pages")
      pages = std::stoi(v);
    else if (a == "--seed")
      seed = std::stoull(v);
    else if (a == "--keep-alive")
      keep_alive = v != "0";
    else
      return Usage();
  }
  if (cmd == "build" && !db.empty()) return Build(db);
  if (cmd == "measure" && !url.empty()) return Measure(url, pages, seed, keep_alive);
  return Usage();
}

// ingest_load: a load generator for `rightsize serve`'s telemetry endpoint (docs/api.md,
// POST /api/v1/telemetry). It starts nothing itself: point it at a running server.
//
// Each of --agents threads is one agent with its own keep-alive connection, watching one running
// job, and posts batches the way src/agent/shipper.cc does (TelemetryBatchJson, gzip by
// cpp-httplib's client, seq strictly increasing): --metrics metrics (the agent's 11 by default)
// with --samples-per-batch samples each (1 Hz, so one batch covers that many seconds of the job,
// the times advancing from batch to batch), and a few folded stacks. Closed loop by default (an
// agent posts its next batch as soon as the previous one is answered: the server's capacity);
// --batches-per-agent-s R paces each agent instead (latency at a given load).
//
// With --pre-encode, every agent builds and gzips its batches before the clock starts and only
// sends them during the run: on a machine that hosts both, the generator then takes little of
// the CPU that real agents would spend on their own nodes (the server's work per batch is the
// same). Enough batches for 500,000 samples/s are prepared; an agent that runs out stops, and
// the figure is then marked a lower bound.
//
// Reports, over the measured window (after --warmup-s): accepted samples/s (summed from the
// server's 200 answers), batches/s, p50/p99/max post latency, answers by status and transport
// errors, and the CPU time of this process and (with --server-pid) of the server, since on a
// small machine both share the cores.
//
// Usage: ingest_load --url http://127.0.0.1:8080 [--agents 200] [--seconds 30]
//          [--samples-per-batch 60] [--metrics 11] [--token T] [--server-pid PID]
//          [--batches-per-agent-s R] [--warmup-s 2] [--no-gzip] [--tcp-nodelay] [--pre-encode]
#include <fmt/format.h>
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/shipper.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string url;
  int agents = 200;
  double seconds = 30;
  double warmup_s = 2;
  int samples_per_batch = 60;
  int metrics = 11;
  int stacks = 3;
  std::string token;
  int server_pid = 0;
  double batches_per_agent_s = 0;  // 0: closed loop
  bool gzip = true;
  bool tcp_nodelay = false;  // the shipper does not set it (yet)
  bool pre_encode = false;
};

// The moment the run starts, once every agent has its batches ready (--pre-encode).
struct StartLine {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point measure_from, end;  // written before `go`
};

std::string Gzip(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The metrics src/agent sends (docs/api.md), then made-up ones when --metrics asks for more.
const char* const kMetrics[] = {"cpu_cores",      "memory_bytes",     "cgroup_memory_bytes",
                                "gpu_util_pct",   "gpu_memory_bytes", "io_read_bytes",
                                "io_write_bytes", "processes",        "threads",
                                "open_files",     "cpu_throttled_s"};

std::string MetricName(int i) {
  return i < 11 ? std::string(kMetrics[i]) : fmt::format("extra_metric_{}", i);
}

struct AgentResult {
  std::vector<uint32_t> latency_us;  // measured window only
  int64_t samples = 0, batches = 0;
  std::map<int, int64_t> statuses;
  std::map<std::string, int64_t> errors;  // transport errors by name
  std::map<int, std::string> example;     // the first answer of each non-200 status
  bool exhausted = false;                 // --pre-encode: ran out of prepared batches
};

// One simulated agent: builds a batch, posts it, repeats until `end`.
void RunAgent(const Options& opt, int index, int64_t run_id, StartLine* line, AgentResult* out) {
  httplib::Client client(opt.url);
  client.set_compress(opt.gzip && !opt.pre_encode);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(opt.tcp_nodelay);
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(std::chrono::seconds(30));
  client.set_write_timeout(std::chrono::seconds(30));
  httplib::Headers headers;
  if (!opt.token.empty()) headers.emplace("Authorization", "Bearer " + opt.token);
  if (opt.pre_encode && opt.gzip) headers.emplace("Content-Encoding", "gzip");

  std::mt19937_64 rng(static_cast<uint64_t>(run_id) * 1000 + static_cast<uint64_t>(index));
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  const std::string agent = fmt::format("load-{}-node{:03d}", run_id, index);
  rightsize::JobTelemetry t;
  t.job.cluster = "load";
  t.job.job_id = fmt::format("{}{:04d}", run_id % 100000, index);
  t.job.source = "agent";
  t.job.outcome.state = "RUNNING";
  const int64_t start_s = static_cast<int64_t>(std::time(nullptr)) - 3600;
  t.job.start_time = start_s;
  t.job.request.user = fmt::format("user{:02d}", index % 50);
  t.job.request.job_name = "train";
  t.job.request.cpus = 8;
  t.job.request.memory_bytes = int64_t{32} << 30;
  t.job.request.gpus = 1;
  const std::vector<std::string> stacks = {"python;main;train_step;forward;matmul",
                                           "python;main;train_step;backward;conv2d",
                                           "python;main;load_batch;read", "python;main;log"};
  int64_t last_seq = 0;
  int64_t next_t_s = start_s;
  auto next_body = [&] {
    t.samples.clear();
    t.stacks.clear();
    for (int m = 0; m < opt.metrics; ++m) {
      auto& points = t.samples[MetricName(m)];
      points.reserve(static_cast<size_t>(opt.samples_per_batch));
      double base = m == 0 ? 4.0 : m == 3 ? 70.0 : 1e9 * (1 + m);
      for (int k = 0; k < opt.samples_per_batch; ++k) {
        points.push_back({(next_t_s + k) * 1000, base * (1 + noise(rng))});
      }
    }
    for (int s = 0; s < opt.stacks; ++s) {
      t.stacks[stacks[static_cast<size_t>(s) % stacks.size()]] =
          1 + static_cast<int64_t>(rng() % 50);
    }
    next_t_s += opt.samples_per_batch;
    auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    last_seq = std::max(last_seq + 1, static_cast<int64_t>(now_ms));
    return rightsize::TelemetryBatchJson(agent, last_seq, {t}).dump();
  };
  std::vector<std::string> prepared;
  if (opt.pre_encode) {
    double per_s =
        500000.0 / (static_cast<double>(opt.agents) * opt.samples_per_batch * opt.metrics);
    auto n = static_cast<size_t>(std::ceil((opt.warmup_s + opt.seconds) * per_s)) + 2;
    prepared.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::string body = next_body();
      prepared.push_back(opt.gzip ? Gzip(body) : std::move(body));
    }
  }
  ++line->ready;
  while (!line->go.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Clock::time_point measure_from = line->measure_from, end = line->end;
  size_t next_prepared = 0;
  auto next_send = Clock::now();
  while (Clock::now() < end) {
    if (opt.batches_per_agent_s > 0) {
      std::this_thread::sleep_until(next_send);
      next_send += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(1.0 / opt.batches_per_agent_s));
      if (Clock::now() >= end) break;
    }
    std::string body;
    if (opt.pre_encode) {
      if (next_prepared == prepared.size()) {
        out->exhausted = true;
        break;
      }
      body = std::move(prepared[next_prepared++]);
    } else {
      body = next_body();
    }

    auto sent = Clock::now();
    auto res = client.Post("/api/v1/telemetry", headers, body, "application/json");
    auto done = Clock::now();
    bool measured = sent >= measure_from && done <= end;
    if (!measured) continue;
    out->latency_us.push_back(static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(done - sent).count(), UINT32_MAX)));
    if (!res) {
      ++out->errors[httplib::to_string(res.error())];
      continue;
    }
    ++out->statuses[res->status];
    if (res->status != 200 && !out->example.count(res->status)) {
      out->example[res->status] = res->body.substr(0, 300);
    }
    if (res->status == 200) {
      auto j = nlohmann::json::parse(res->body, nullptr, false);
      if (!j.is_discarded() && j.contains("accepted")) {
        out->samples += j["accepted"].value("samples", int64_t{0});
        ++out->batches;
      }
    }
  }
}

double CpuSeconds(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int Usage(const char* msg) {
  std::fprintf(stderr,
               "%s\nusage: ingest_load --url http://HOST:PORT [--agents 200] [--seconds 30] "
               "[--warmup-s 2] [--samples-per-batch 60] [--metrics 11] [--stacks 3] [--token T] "
               "[--server-pid PID] [--batches-per-agent-s R] [--no-gzip] [--tcp-nodelay]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--url")
      opt.url = value();
    else if (a == "--agents")
      opt.agents = std::stoi(value());
    else if (a == "--seconds")
      opt.seconds = std::stod(value());
    else if (a == "--warmup-s")
      opt.warmup_s = std::stod(value());
    else if (a == "--samples-per-batch")
      opt.samples_per_batch = std::stoi(value());
    else if (a == "--metrics")
      opt.metrics = std::stoi(value());
    else if (a == "--stacks")
      opt.stacks = std::stoi(value());
    else if (a == "--token")
      opt.token = value();
    else if (a == "--server-pid")
      opt.server_pid = std::stoi(value());
    else if (a == "--batches-per-agent-s")
      opt.batches_per_agent_s = std::stod(value());
    else if (a == "--no-gzip")
      opt.gzip = false;
    else if (a == "--tcp-nodelay")
      opt.tcp_nodelay = true;
    else if (a == "--pre-encode")
      opt.pre_encode = true;
    else
      return Usage(("unknown argument " + a).c_str());
  }
  if (opt.url.empty()) return Usage("--url is required");
  if (opt.agents < 1 || opt.samples_per_batch < 1 || opt.metrics < 1 || opt.seconds <= 0) {
    return Usage("--agents, --samples-per-batch, --metrics and --seconds must be positive");
  }

  int64_t run_id = static_cast<int64_t>(std::time(nullptr)) % 1000000;
  StartLine line;
  std::vector<AgentResult> results(static_cast<size_t>(opt.agents));
  std::vector<std::thread> threads;
  threads.reserve(results.size());
  double server_cpu0 = 0, self_cpu0 = 0;
  for (int i = 0; i < opt.agents; ++i) {
    threads.emplace_back(RunAgent, std::cref(opt), i, run_id, &line, &results[i]);
  }
  while (line.ready.load() < opt.agents) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto start = Clock::now();
  auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(opt.warmup_s));
  auto end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(opt.seconds));
  line.measure_from = measure_from;
  line.end = end;
  line.go.store(true, std::memory_order_release);
  std::this_thread::sleep_until(measure_from);
  if (opt.server_pid > 0) server_cpu0 = CpuSeconds(opt.server_pid);
  self_cpu0 = SelfCpuSeconds();
  std::this_thread::sleep_until(end);
  double server_cpu = opt.server_pid > 0 ? CpuSeconds(opt.server_pid) - server_cpu0 : 0;
  double self_cpu = SelfCpuSeconds() - self_cpu0;
  for (auto& t : threads) t.join();

  AgentResult all;
  for (auto& r : results) {
    all.latency_us.insert(all.latency_us.end(), r.latency_us.begin(), r.latency_us.end());
    all.samples += r.samples;
    all.batches += r.batches;
    for (auto [s, n] : r.statuses) all.statuses[s] += n;
    for (auto& [e, n] : r.errors) all.errors[e] += n;
    for (auto& [s, body] : r.example) all.example.emplace(s, body);
    all.exhausted = all.exhausted || r.exhausted;
  }
  std::sort(all.latency_us.begin(), all.latency_us.end());
  auto pct = [&](double p) {
    if (all.latency_us.empty()) return 0.0;
    size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(all.latency_us.size()))) - 1;
    return all.latency_us[std::min(k, all.latency_us.size() - 1)] / 1000.0;
  };
  std::string statuses, errors;
  for (auto [s, n] : all.statuses) statuses += fmt::format(" {}:{}", s, n);
  for (auto& [e, n] : all.errors) errors += fmt::format(" {}:{}", e, n);
  fmt::print(
      "agents {} samples/batch {} ({} metrics x {} s) window {:.0f} s: accepted {:.0f} samples/s, "
      "{:.1f} batches/s; post latency p50 {:.1f} ms p99 {:.1f} ms max {:.1f} ms; answers{}; "
      "transport errors:{}\n",
      opt.agents, opt.samples_per_batch * opt.metrics, opt.metrics, opt.samples_per_batch,
      opt.seconds, static_cast<double>(all.samples) / opt.seconds,
      static_cast<double>(all.batches) / opt.seconds, pct(0.5), pct(0.99),
      all.latency_us.empty() ? 0.0 : all.latency_us.back() / 1000.0, statuses,
      errors.empty() ? " none" : errors);
  for (auto& [s, body] : all.example) fmt::print("first {} answer: {}\n", s, body);
  if (all.exhausted) {
    fmt::print("some agents ran out of prepared batches: the rate above is a lower bound\n");
  }
  if (opt.pre_encode) fmt::print("batches prepared before the run (--pre-encode)\n");
  fmt::print("cpu: load generator {:.2f} cores", self_cpu / opt.seconds);
  if (opt.server_pid > 0) {
    fmt::print(", server {:.2f} cores = {:.0f} samples per server CPU-second",
               server_cpu / opt.seconds,
               server_cpu > 0 ? static_cast<double>(all.samples) / server_cpu : 0.0);
  }
  fmt::print("\n");
  bool failed = all.batches == 0 || !all.errors.empty();
  for (auto [s, n] : all.statuses) failed = failed || s != 200;
  return failed ? 1 : 0;
}

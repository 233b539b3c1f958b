// fleet_load: a whole cluster of simulated `rightsize agent`s against `rightsize serve` (issue 27's
// load test), and the job page on a full store. It starts no server: bench/load_test.sh does, on
// whichever backend, and adds the store's side (samples stored, bytes per sample).
//
//   fleet_load ingest --url URL --nodes N [--seconds 60] [--gpus 8] [--jobs-per-node 8]
//       [--interval-s 1] [--ship-interval-s 5] [--connections 8] [--server-pid PID]
//       [--cluster NAME] [--token T] [--tsdb-write-url URL [--every-batch 1]]
//     N nodes, each with --gpus GPUs and --jobs-per-node running jobs (8: a job per GPU, the
//     heavier case; 1: one job holding all the node's GPUs). Each job has the agent's real metric
//     set on a SLURM GPU node with DCGM and RAPL (src/agent/monitor.cc): 21 metrics every sample,
//     cpu_throttled_s every 5th and open_files every 10th (JobMonitor::kSparse); the GPU metrics
//     are the job's (summed or averaged over its GPUs, as the agent ships them). Each node samples
//     every --interval-s and ships one batch per --ship-interval-s, built as the shipper builds it
//     (TelemetryBatchJson, gzip by cpp-httplib, TCP_NODELAY, seq = Unix ms, strictly increasing
//     per node). The nodes' ship times are spread evenly over the interval (agents start at
//     different moments) and shared out over --connections keep-alive connections, one thread
//     each: open loop, each batch sent when due or, if its connection is behind, as soon as it
//     is free. A batch whose due time falls after the end of the run is not sent (counted as
//     "not_sent"). Refused batches are counted, not retried, unless --resend 1.
//     --url may name several servers, "http://a:8080,http://b:8080" as `agent --server A,B`.
//     --resend 1 makes each node what the agent's shipper is (agent/shipper.cc): its batches
//     queue (its spool) until acknowledged, in order, with their numbers; a connection failure or
//     a 5xx moves the node to the next server and sends the same batch again at once, and when
//     every server failed in turn the node waits a second (the agent's first backoff) while its
//     new batches queue behind; a 409 is resynced as the shipper does (this very batch stored
//     before: acknowledged; else renumbered above the server's last). After the run the nodes
//     go on sending what they hold for up to --drain-s (60) seconds. The line then adds what was
//     retried (by status or error), failovers, batches resent, 409s acknowledged or renumbered,
//     batches refused for good ("dropped") or never acknowledged ("unacked", lost), and outage_s:
//     per recovery, the seconds from a node's first failed try to its next acknowledged batch.
//     Prints one JSON line: offered and accepted samples/s, samples acknowledged, batches by
//     status, transport errors, batch latency p50/p99/max, how late batches left (lag), the CPU
//     of this process and of the server (--server-pid, utime+stime from /proc/PID/stat) and of
//     the server's busiest thread (/proc/PID/task: under load, the store's one writer, whose CPU
//     per sample bounds what a single writer can take), the load average before and after.
//
//     With --tsdb-write-url the nodes are agents with `--tsdb-write-url`: each batch's samples go
//     to the TSDB by remote write first (remote_write/remote_write.h, the agent's encoding) and
//     the server gets the batch without them; "acknowledged" then counts the samples the TSDB
//     took of batches the server answered 200, and samples_per_server_cpu_s is per those. As the
//     agent does (agent/sent_records.h), a batch leaves out the records the server already has
//     (sent again once a minute) and is not posted when none is left (batches_tsdb_only: its
//     samples, in the TSDB, count as acknowledged); --every-batch 1 posts every batch with all
//     its records, as agents did before.
//   fleet_load pages --url URL [--jobs 100000] [--requests 200] [--cluster NAME] [--token T]
//       [--server-pid PID]
//     Fills the store through the API (POST /api/v1/telemetry): --jobs ended jobs of 3 metrics x
//     10 s each, 1,000 per batch, then one hour-long 8-GPU job with the full metric set at 1 Hz in
//     720 five-second batches (the agent's shipping). Then times, interleaved, --requests times
//     each (after 20 warm-up rounds) from one keep-alive connection: GET the job
//     (/api/v1/jobs/C/ID), its /series (all metrics: the dashboard's first call), its /series for
//     each metric, and the job list as the dashboard's Jobs page asks for it
//     (/api/v1/jobs?limit=100). Prints one JSON line: p50/p99/max per request kind. With
//     --server-pid, then --requests more /series (all metrics) alone: their p50/p99 and the
//     server's CPU per request (series_all_alone_ms, series_all_server_cpu_ms).
#include <fmt/format.h>
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/sent_records.h"
#include "agent/shipper.h"
#include "core/json_text.h"
#include "remote_write/remote_write.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The agent's per-job metrics on a SLURM GPU node with DCGM and RAPL, and how often (in samples)
// each is sent (JobMonitor::kSparse: the cgroup's growing counters every 5th, open files every
// 10th).
struct MetricSpec {
  const char* name;
  int every;
};
constexpr MetricSpec kMetrics[] = {
    {"cpu_cores", 1},
    {"cpu_energy_j", 1},
    {"memory_bytes", 1},
    {"cgroup_memory_bytes", 1},
    {"processes", 1},
    {"threads", 1},
    {"io_read_bytes", 1},
    {"io_write_bytes", 1},
    {"gpu_memory_bytes", 1},
    {"gpu_util_pct", 1},
    {"gpu_power_w", 1},
    {"gpu_energy_j", 1},
    {"gpu_sm_active_pct", 1},
    {"gpu_sm_occupancy_pct", 1},
    {"gpu_tensor_active_pct", 1},
    {"gpu_dram_active_pct", 1},
    {"gpu_gr_engine_active_pct", 1},
    {"gpu_pcie_tx_bytes_per_s", 1},
    {"gpu_pcie_rx_bytes_per_s", 1},
    {"gpu_nvlink_tx_bytes_per_s", 1},
    {"gpu_nvlink_rx_bytes_per_s", 1},
    {"cpu_throttled_s", 5},
    {"open_files", 10},
};
constexpr int kMetricCount = static_cast<int>(std::size(kMetrics));

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One simulated job: its record and the state of its counters.
struct SimJob {
  rightsize::JobRecord record;
  int gpus = 1;
  int64_t samples = 0;  // taken so far (for the sparse metrics)
  double cpu_energy_j = 0, gpu_energy_j = 0, io_read = 0, io_write = 0, throttled_s = 0;
};

// Appends one sample of every metric due at this sample to `t` (at `t_ms`).
void SampleJob(SimJob& job, int64_t t_ms, double interval_s, std::mt19937_64& rng,
               rightsize::JobTelemetry* t) {
  std::uniform_real_distribution<double> u(-1, 1);
  const double g = job.gpus;
  double cpu = 6 + u(rng), power = g * (520 + 60 * u(rng)), util = std::round(85 + 10 * u(rng));
  job.cpu_energy_j += 9 * cpu * interval_s;
  job.gpu_energy_j += power * interval_s;
  job.io_read += std::round(4e7 * (1 + u(rng)));
  job.io_write += std::round(5e6 * (1 + u(rng)));
  job.throttled_s += std::max(0.0, 0.01 * u(rng));
  auto gib = [](double x) { return std::round(x * 1073741824.0 / 4096) * 4096; };
  const double values[kMetricCount] = {
      cpu,
      job.cpu_energy_j,
      gib(40 + 2 * u(rng)),
      gib(48 + 2 * u(rng)),
      12,
      std::round(180 + 4 * u(rng)),
      job.io_read,
      job.io_write,
      gib(g * (60 + u(rng))),
      util,
      power,
      job.gpu_energy_j,
      util - 5 + 2 * u(rng),
      45 + 5 * u(rng),
      30 + 10 * u(rng),
      50 + 10 * u(rng),
      util - 2 + u(rng),
      g * 2e9 * (1 + 0.2 * u(rng)),
      g * 2.5e9 * (1 + 0.2 * u(rng)),
      g * 5e10 * (1 + 0.2 * u(rng)),
      g * 5e10 * (1 + 0.2 * u(rng)),
      job.throttled_s,
      std::round(300 + 10 * u(rng)),
  };
  for (int m = 0; m < kMetricCount; ++m) {
    if (job.samples % kMetrics[m].every == 0) {
      t->samples[kMetrics[m].name].push_back(rightsize::Sample{t_ms, values[m]});
    }
  }
  ++job.samples;
}

rightsize::JobRecord RunningJob(const std::string& cluster, const std::string& id,
                                const std::string& user, int gpus, int64_t start_s) {
  rightsize::JobRecord r;
  r.cluster = cluster;
  r.job_id = id;
  r.source = "agent";
  r.start_time = start_s;
  r.outcome.state = "RUNNING";
  r.request.user = user;
  r.request.account = "acct" + user.substr(user.size() - 2);
  r.request.partition = "gpu";
  r.request.job_name = "train";
  r.request.cpus = 8.0 * gpus;
  r.request.memory_bytes = (int64_t{64} << 30) * gpus;
  r.request.gpus = gpus;
  r.request.time_limit_s = 86400;
  return r;
}

// utime + stime of a process, or of one of its threads.
double ProcCpuSeconds(int pid, const std::string& tid = "") {
  std::ifstream in(tid.empty() ? fmt::format("/proc/{}/stat", pid)
                               : fmt::format("/proc/{}/task/{}/stat", pid, tid));
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

// CPU seconds of each of the process's threads, by thread id.
std::map<std::string, double> ThreadCpuSeconds(int pid) {
  std::map<std::string, double> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    const std::string tid = e.path().filename().string();
    out[tid] = ProcCpuSeconds(pid, tid);
  }
  return out;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

json LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  return json::array({a, b, c});
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(k == 0 ? 0 : k - 1, v.size() - 1)];
}

json Summary(const std::vector<double>& ms) {
  auto r = [](double x) { return std::round(x * 100) / 100; };
  return {{"n", ms.size()},
          {"p50", r(Pct(ms, 0.5))},
          {"p99", r(Pct(ms, 0.99))},
          {"max", r(Pct(ms, 1.0))}};
}

httplib::Headers AuthHeaders(const std::string& token) {
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  return h;
}

void ConfigureClient(httplib::Client& c) {
  c.set_compress(true);  // as the shipper: gzip request bodies
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_connection_timeout(std::chrono::seconds(10));
  c.set_read_timeout(std::chrono::seconds(30));
  c.set_write_timeout(std::chrono::seconds(30));
}

// ---- ingest ----------------------------------------------------------------------------------

struct IngestOptions {
  std::string url, cluster, token;
  // Agents that remote-write their samples to a TSDB themselves (`agent --tsdb-write-url`): the
  // samples go there and the server gets batches without them.
  std::string tsdb_write_url;
  // 1: such agents post every batch to the server, as before agent/sent_records.h (comparison).
  int every_batch = 0;
  int nodes = 100, gpus = 8, jobs_per_node = 8, connections = 8, server_pid = 0;
  double seconds = 60, interval_s = 1, ship_interval_s = 5;
  // As the agent's shipper (agent/shipper.cc): a batch not acknowledged stays queued and is sent
  // again, on the next server after a connection failure or 5xx; a 409 is resynced.
  bool resend = false;
  double drain_s = 60;  // after the run, how long queued batches are still resent
};

// "http://a:1,http://b:2" as `agent --server A,B`.
std::vector<std::string> SplitUrls(const std::string& urls) {
  std::vector<std::string> out;
  std::stringstream in(urls);
  for (std::string u; std::getline(in, u, ',');) {
    if (!u.empty()) out.push_back(u);
  }
  return out;
}

// A batch made and not yet acknowledged (the agent's queue and spool).
struct Pending {
  int64_t seq = 0, samples = 0;
  std::string body;
  Clock::time_point due;
  int tries = 0;
};

struct Node {
  std::string agent;
  std::vector<SimJob> jobs;
  double phase_s = 0;
  int64_t last_seq = 0;
  std::mt19937_64 rng;
  std::deque<Pending> queue;
  size_t server = 0;               // the server its batches go to (--url's list)
  Clock::time_point retry_at{};    // after every server failed in turn: the agent's backoff
  Clock::time_point down_since{};  // its first failed try since its last acknowledged batch
  rightsize::SentRecords sent;     // with --tsdb-write-url: the records the server has
};

struct WorkerResult {
  std::vector<double> latency_ms, lag_ms;
  int64_t samples_made = 0, samples_acked = 0, batches_sent = 0, batches_acked = 0;
  int64_t not_sent = 0, body_bytes = 0;
  // --resend: tries that failed and were retried (by status or error), moves to the next
  // server, batches sent more than once, 409s answered "stored before" (their samples counted)
  // or renumbered, batches refused for good (4xx), batches never acknowledged.
  std::map<std::string, int64_t> retried;
  int64_t failovers = 0, resent = 0, replays_acked = 0, renumbered = 0, dropped = 0, unacked = 0;
  int64_t nodes_shipped = 0, jobs_shipped = 0;  // nodes that made a batch, and their jobs
  std::vector<double> outage_s;   // per recovery: first failed try to the next acknowledgement
  int64_t batches_tsdb_only = 0;  // agent-direct batches with nothing for the server
  std::map<std::string, int64_t> statuses, errors;
  std::map<std::string, std::string> example;  // the first answer of each non-200 status
};

// Sends `node`'s queued batches in order until the queue is empty or every server failed in turn
// (--resend), or its one batch once (without).
void SendQueued(const IngestOptions& opt, std::vector<std::unique_ptr<httplib::Client>>& clients,
                const httplib::Headers& headers, Node* node, bool tsdb, WorkerResult* out) {
  size_t failed_in_turn = 0;
  while (!node->queue.empty()) {
    Pending& b = node->queue.front();
    const auto start = Clock::now();
    if (b.tries++ == 0) {
      out->lag_ms.push_back(std::chrono::duration<double, std::milli>(start - b.due).count());
    } else {
      ++out->resent;
    }
    auto res =
        clients[node->server]->Post("/api/v1/telemetry", headers, b.body, "application/json");
    const auto done = Clock::now();
    out->latency_ms.push_back(std::chrono::duration<double, std::milli>(done - start).count());
    std::string failure;  // a connection failure or 5xx: the batch is kept, the next server tried
    bool acked = false;
    if (!res) {
      failure = httplib::to_string(res.error());
      ++out->errors[failure];
    } else {
      std::string status = std::to_string(res->status);
      ++out->statuses[status];
      if (res->status == 200) {
        auto answer = json::parse(res->body, nullptr, false);
        if (answer.is_object() && answer.contains("accepted")) {
          out->samples_acked += tsdb ? b.samples : answer["accepted"].value("samples", int64_t{0});
          ++out->batches_acked;
          acked = true;
        } else {
          failure = "200 without accepted";
        }
      } else if (res->status >= 500) {
        failure = status;
        out->example.emplace(status, res->body.substr(0, 300));
      } else if (res->status == 409 && opt.resend) {
        // As Shipper::Resync: this very batch stored before (its answer was lost), or renumber
        // it and those behind it above the server's last.
        auto j = json::parse(res->body, nullptr, false);
        const bool has = j.is_object() && j.contains("last_seq") && j["last_seq"].is_number();
        const int64_t last = has ? j["last_seq"].get<int64_t>() : 0;
        if (has && j.value("reason", "") == "replayed" && last == b.seq) {
          out->samples_acked += b.samples;
          ++out->batches_acked;
          ++out->replays_acked;
          acked = true;
        } else if (has) {
          int64_t seq = last + 1;
          for (Pending& q : node->queue) {
            if (q.seq >= seq) break;
            auto body = json::parse(q.body, nullptr, false);
            if (body.is_object()) body["seq"] = seq;
            q.body = rightsize::JsonText(body);
            q.seq = seq++;
          }
          node->last_seq = std::max(node->last_seq, node->queue.back().seq);
          ++out->renumbered;
          continue;
        } else {
          out->example.emplace(status, res->body.substr(0, 300));
          ++out->dropped;
          node->queue.pop_front();
          continue;
        }
      } else {
        out->example.emplace(status, res->body.substr(0, 300));
        ++out->dropped;  // refused for good: resending would fail the same way
        node->queue.pop_front();
        continue;
      }
    }
    if (acked) {
      if (node->down_since != Clock::time_point{}) {
        out->outage_s.push_back(std::chrono::duration<double>(done - node->down_since).count());
        node->down_since = {};
      }
      node->queue.pop_front();
      failed_in_turn = 0;
      continue;
    }
    if (!opt.resend) {  // counted, not retried
      ++out->unacked;
      node->queue.pop_front();
      continue;
    }
    ++out->retried[failure];
    if (node->down_since == Clock::time_point{}) node->down_since = start;
    if (clients.size() > 1) {
      node->server = (node->server + 1) % clients.size();
      ++out->failovers;
    }
    if (++failed_in_turn >= clients.size()) {
      node->retry_at = done + std::chrono::seconds(1);  // the agent's first backoff
      return;
    }
  }
}

void RunConnection(const IngestOptions& opt, std::vector<Node*> nodes, Clock::time_point t0,
                   int64_t wall0_ms, WorkerResult* out) {
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (const std::string& url : SplitUrls(opt.url)) {
    clients.push_back(std::make_unique<httplib::Client>(url));
    ConfigureClient(*clients.back());
  }
  const httplib::Headers headers = AuthHeaders(opt.token);
  std::unique_ptr<rightsize::RemoteWriteClient> tsdb;
  if (!opt.tsdb_write_url.empty()) {
    auto created = rightsize::RemoteWriteClient::Create(opt.tsdb_write_url);
    if (!created.ok()) {
      ++out->errors[created.status().message()];
      return;
    }
    tsdb = std::move(*created);
  }
  const auto end =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.seconds));
  const int per_batch =
      std::max(1, static_cast<int>(std::lround(opt.ship_interval_s / opt.interval_s)));
  // Nodes whose servers all failed: tried again after their backoff, between the others' batches.
  auto retry_stalled = [&] {
    const auto now = Clock::now();
    for (Node* n : nodes) {
      if (!n->queue.empty() && n->retry_at <= now) {
        SendQueued(opt, clients, headers, n, tsdb != nullptr, out);
      }
    }
  };
  // Round 0 ships at the node's phase, with the samples of the interval before: the nodes were
  // running before the run began, so every node ships seconds / ship interval batches.
  for (int64_t round = 0;; ++round) {
    bool any = false;
    for (Node* node : nodes) {
      const double due_s = node->phase_s + static_cast<double>(round) * opt.ship_interval_s;
      const auto due =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(due_s));
      if (due >= end) continue;
      any = true;
      if (Clock::now() >= end) {
        ++out->not_sent;
        continue;
      }
      if (opt.resend) retry_stalled();
      std::this_thread::sleep_until(due);
      // The samples of the interval that just ended, on this node's sampling grid.
      std::vector<rightsize::JobTelemetry> batch;
      batch.reserve(node->jobs.size());
      int64_t samples = 0;
      for (SimJob& job : node->jobs) {
        rightsize::JobTelemetry t;
        t.job = job.record;
        for (int k = per_batch - 1; k >= 0; --k) {
          double at_s = due_s - k * opt.interval_s;
          SampleJob(job, wall0_ms + std::llround(at_s * 1000), opt.interval_s, node->rng, &t);
        }
        for (const auto& [m, points] : t.samples) samples += static_cast<int64_t>(points.size());
        batch.push_back(std::move(t));
      }
      node->last_seq = std::max(node->last_seq + 1, UnixMs());
      if (tsdb) {
        // As the agent's shipper does: the samples by remote write first, then the batch
        // without them.
        auto bodies = rightsize::EncodeRemoteWrite(batch);
        bool ok = bodies.ok();
        for (size_t b = 0; ok && b < bodies->size(); ++b) {
          auto posted = tsdb->Post((*bodies)[b], static_cast<size_t>(samples));
          if (!posted.ok()) {
            ++out->errors[posted.message().substr(0, 120)];
            ok = false;
          }
        }
        if (!ok) continue;
        for (auto& t : batch) t.samples.clear();
        // The records the server has already stay out (agent/sent_records.h); a batch left
        // empty is not posted: its samples are in the TSDB, delivered.
        if (!opt.every_batch) {
          node->sent.Filter<int>(&batch, nullptr, node->last_seq);
          if (batch.empty()) {
            out->samples_made += samples;
            out->samples_acked += samples;  // the TSDB took them all (above)
            ++out->batches_tsdb_only;
            continue;
          }
        }
      }
      std::string body =
          rightsize::JsonText(rightsize::TelemetryBatchJson(node->agent, node->last_seq, batch));
      out->samples_made += samples;
      out->body_bytes += static_cast<int64_t>(body.size());
      ++out->batches_sent;
      node->queue.push_back(Pending{node->last_seq, samples, std::move(body), due, 0});
      // A node whose servers all failed waits for its backoff; its new batch waits behind.
      if (!opt.resend || node->queue.size() == 1 || node->retry_at <= Clock::now()) {
        SendQueued(opt, clients, headers, node, tsdb != nullptr, out);
      }
    }
    if (!any) break;
  }
  // The agents go on after the run: what they still hold is sent until it is acknowledged or
  // --drain-s passes.
  const auto drain_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(opt.resend ? opt.drain_s : 0));
  while (Clock::now() < drain_end) {
    bool left = false;
    for (Node* n : nodes) left = left || !n->queue.empty();
    if (!left) break;
    retry_stalled();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (Node* n : nodes) {
    out->unacked += static_cast<int64_t>(n->queue.size());
    if (n->last_seq > 0) {
      ++out->nodes_shipped;
      out->jobs_shipped += static_cast<int64_t>(n->jobs.size());
    }
  }
}

int Ingest(const IngestOptions& opt) {
  const int64_t run = UnixMs() % 100'000'000;
  const std::string cluster = opt.cluster.empty() ? fmt::format("load{}", run) : opt.cluster;
  const int64_t start_s = UnixMs() / 1000 - 600;
  std::vector<Node> nodes(static_cast<size_t>(opt.nodes));
  const int gpus_per_job = std::max(1, opt.gpus / opt.jobs_per_node);
  for (int k = 0; k < opt.nodes; ++k) {
    Node& n = nodes[static_cast<size_t>(k)];
    n.agent = fmt::format("{}-gpu{:05d}", cluster, k);
    n.phase_s = opt.ship_interval_s * (k + 1) / opt.nodes;  // (0, ship interval]
    n.rng.seed(static_cast<uint64_t>(k) * 7919 + 1);
    for (int j = 0; j < opt.jobs_per_node; ++j) {
      SimJob job;
      job.gpus = gpus_per_job;
      job.record = RunningJob(cluster, fmt::format("{}", int64_t{k} * 100 + j + 1),
                              fmt::format("user{:03d}", (k * 7 + j) % 500), gpus_per_job, start_s);
      n.jobs.push_back(std::move(job));
    }
  }
  const int connections = std::min(opt.connections, opt.nodes);
  std::vector<std::vector<Node*>> shares(static_cast<size_t>(connections));
  for (int k = 0; k < opt.nodes; ++k) {
    shares[static_cast<size_t>(k % connections)].push_back(&nodes[static_cast<size_t>(k)]);
  }
  std::vector<WorkerResult> results(static_cast<size_t>(connections));
  json load_before = LoadAverage();
  const double server_cpu0 = opt.server_pid > 0 ? ProcCpuSeconds(opt.server_pid) : 0;
  const auto threads0 =
      opt.server_pid > 0 ? ThreadCpuSeconds(opt.server_pid) : std::map<std::string, double>{};
  const double self_cpu0 = SelfCpuSeconds();
  const auto t0 = Clock::now();
  const int64_t wall0_ms = UnixMs();
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back(RunConnection, std::cref(opt), shares[static_cast<size_t>(c)], t0,
                         wall0_ms, &results[static_cast<size_t>(c)]);
  }
  for (auto& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double server_cpu_s = opt.server_pid > 0 ? ProcCpuSeconds(opt.server_pid) - server_cpu0 : 0;
  const double self_cpu_s = SelfCpuSeconds() - self_cpu0;
  // The busiest server thread: under load, the one that writes to the store (group commit),
  // whose CPU per sample bounds what one writer can take.
  double top_thread_cpu_s = 0;
  if (opt.server_pid > 0) {
    for (const auto& [tid, cpu] : ThreadCpuSeconds(opt.server_pid)) {
      auto before = threads0.find(tid);
      top_thread_cpu_s =
          std::max(top_thread_cpu_s, cpu - (before == threads0.end() ? 0 : before->second));
    }
  }

  WorkerResult all;
  for (auto& r : results) {
    all.latency_ms.insert(all.latency_ms.end(), r.latency_ms.begin(), r.latency_ms.end());
    all.lag_ms.insert(all.lag_ms.end(), r.lag_ms.begin(), r.lag_ms.end());
    all.samples_made += r.samples_made;
    all.samples_acked += r.samples_acked;
    all.batches_sent += r.batches_sent;
    all.batches_acked += r.batches_acked;
    all.batches_tsdb_only += r.batches_tsdb_only;
    all.not_sent += r.not_sent;
    for (auto& [k, n] : r.retried) all.retried[k] += n;
    all.failovers += r.failovers;
    all.resent += r.resent;
    all.replays_acked += r.replays_acked;
    all.renumbered += r.renumbered;
    all.dropped += r.dropped;
    all.unacked += r.unacked;
    all.nodes_shipped += r.nodes_shipped;
    all.jobs_shipped += r.jobs_shipped;
    all.outage_s.insert(all.outage_s.end(), r.outage_s.begin(), r.outage_s.end());
    all.body_bytes += r.body_bytes;
    for (auto& [s, n] : r.statuses) all.statuses[s] += n;
    for (auto& [e, n] : r.errors) all.errors[e] += n;
    for (auto& [s, b] : r.example) all.example.emplace(s, b);
  }
  // What the nodes would send in the window: every metric's share of the samples.
  double per_job_s = 0;
  for (const MetricSpec& m : kMetrics) per_job_s += 1.0 / m.every;
  const double offered = opt.nodes * opt.jobs_per_node * per_job_s / opt.interval_s;
  auto r1 = [](double x) { return std::round(x * 10) / 10; };
  json out = {
      {"tool", "fleet_load ingest"},
      {"cluster", cluster},
      {"nodes", opt.nodes},
      {"gpus_per_node", opt.gpus},
      {"jobs_per_node", opt.jobs_per_node},
      {"metrics_per_job", kMetricCount},
      {"interval_s", opt.interval_s},
      {"ship_interval_s", opt.ship_interval_s},
      {"connections", connections},
      {"seconds", opt.seconds},
      {"wall_s", r1(wall_s)},
      {"offered_samples_per_s", std::round(offered)},
      {"samples_made", all.samples_made},
      {"samples_acked", all.samples_acked},
      {"accepted_samples_per_s",
       std::round(static_cast<double>(all.samples_acked) / std::max(wall_s, opt.seconds))},
      {"batches_sent", all.batches_sent},
      {"batches_acked", all.batches_acked},
      {"batches_tsdb_only", all.batches_tsdb_only},
      {"batches_not_sent", all.not_sent},
      {"json_bytes_per_sample", all.samples_made > 0 ? r1(static_cast<double>(all.body_bytes) /
                                                          static_cast<double>(all.samples_made))
                                                     : 0.0},
      {"servers", SplitUrls(opt.url)},
      {"resend", opt.resend},
      {"nodes_shipped", all.nodes_shipped},
      {"jobs_shipped", all.jobs_shipped},
      {"batches_unacked", all.unacked},
      {"batches_dropped", all.dropped},
      {"retried", all.retried},
      {"failovers", all.failovers},
      {"batches_resent", all.resent},
      {"replays_acked", all.replays_acked},
      {"renumbered", all.renumbered},
      {"outage_s", Summary(all.outage_s)},
      {"statuses", all.statuses},
      {"transport_errors", all.errors},
      {"refusal_examples", all.example},
      {"latency_ms", Summary(all.latency_ms)},
      {"lag_ms", Summary(all.lag_ms)},
      {"driver_cores", std::round(self_cpu_s / wall_s * 100) / 100},
      {"loadavg_before", load_before},
      {"loadavg_after", LoadAverage()},
  };
  if (opt.server_pid > 0) {
    out["server_cpu_s"] = std::round(server_cpu_s * 100) / 100;
    out["server_cores"] = std::round(server_cpu_s / wall_s * 100) / 100;
    out["samples_per_server_cpu_s"] =
        server_cpu_s > 0 ? std::round(static_cast<double>(all.samples_acked) / server_cpu_s) : 0;
    out["server_busiest_thread_cores"] = std::round(top_thread_cpu_s / wall_s * 100) / 100;
    out["samples_per_busiest_thread_cpu_s"] =
        top_thread_cpu_s > 0 ? std::round(static_cast<double>(all.samples_acked) / top_thread_cpu_s)
                             : 0;
  }
  fmt::print("{}\n", rightsize::JsonText(out));
  bool failed = all.batches_acked == 0 || all.unacked > 0 || all.dropped > 0;
  if (!opt.resend) {
    failed = failed || !all.errors.empty();
    for (auto& [s, n] : all.statuses) failed = failed || s != "200";
  }
  return failed ? 1 : 0;
}

// ---- pages -----------------------------------------------------------------------------------

struct PagesOptions {
  std::string url, cluster = "pages", token;
  int jobs = 100'000, requests = 200;
  int server_pid = 0;  // its CPU per series_all request, in a phase of their own
};

constexpr const char* kLongJob = "hour-8gpu";

// POSTs one batch; false (with a line on stderr) unless the server took it whole.
bool Post(httplib::Client& client, const httplib::Headers& headers, const std::string& agent,
          int64_t* seq, const std::vector<rightsize::JobTelemetry>& jobs) {
  *seq = std::max(*seq + 1, UnixMs());
  auto res = client.Post("/api/v1/telemetry", headers,
                         rightsize::JsonText(rightsize::TelemetryBatchJson(agent, *seq, jobs)),
                         "application/json");
  if (res && res->status == 200) return true;
  fmt::print(stderr, "fleet_load pages: a batch was refused: {}\n",
             res ? fmt::format("{} {}", res->status, res->body.substr(0, 300))
                 : httplib::to_string(res.error()));
  return false;
}

int Pages(const PagesOptions& opt) {
  httplib::Client client(opt.url);
  ConfigureClient(client);
  client.set_read_timeout(std::chrono::seconds(120));
  const httplib::Headers headers = AuthHeaders(opt.token);
  const int64_t now_s = UnixMs() / 1000;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);

  // 1. The filler: --jobs ended jobs over the last two days, 3 metrics x 10 s each.
  auto t0 = Clock::now();
  int64_t seq = 0, fill_samples = 0;
  std::vector<rightsize::JobTelemetry> batch;
  for (int id = 1; id <= opt.jobs; ++id) {
    rightsize::JobTelemetry t;
    int64_t end_s = now_s - 7200 - static_cast<int64_t>(id) * 172'800 / std::max(opt.jobs, 1);
    int64_t elapsed = 60 + id % 7200;
    t.job = RunningJob(opt.cluster, std::to_string(id), fmt::format("user{:03d}", id % 500),
                       id % 4 == 0 ? 1 : 0, end_s - elapsed);
    t.job.end_time = end_s;
    t.job.outcome.state = id % 20 == 0 ? "FAILED" : "COMPLETED";
    t.job.outcome.exit_code = id % 20 == 0 ? 1 : 0;
    t.job.usage.elapsed_s = static_cast<double>(elapsed);
    t.job.usage.cpu_time_s = static_cast<double>(elapsed) * (1 + id % 8);
    t.job.usage.peak_rss_bytes = int64_t{1 + id % 60} << 30;
    for (int s = 0; s < 10; ++s) {
      const int64_t t_ms = (end_s - 10 + s) * 1000;
      t.samples["cpu_cores"].push_back({t_ms, std::round(100 * (4 + 3 * u(rng))) / 100});
      t.samples["memory_bytes"].push_back({t_ms, std::round((8 + 4 * u(rng)) * 1048576) * 1024});
      t.samples["gpu_util_pct"].push_back({t_ms, std::round(50 + 40 * u(rng))});
    }
    fill_samples += 30;
    batch.push_back(std::move(t));
    if (batch.size() == 1000 || id == opt.jobs) {
      if (!Post(client, headers, "filler", &seq, batch)) return 1;
      batch.clear();
    }
  }
  const double fill_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // 2. The hour-long 8-GPU job, as its node's agent ships it: 720 batches of 5 s.
  SimJob job;
  job.gpus = 8;
  const int64_t job_start = now_s - 3600 - 120;
  job.record = RunningJob(opt.cluster, kLongJob, "user007", 8, job_start);
  int64_t long_seq = 0, long_samples = 0;
  auto t1 = Clock::now();
  for (int b = 0; b < 720; ++b) {
    rightsize::JobTelemetry t;
    t.job = job.record;
    if (b == 719) {
      t.job.end_time = job_start + 3600;
      t.job.outcome.state = "COMPLETED";
      t.job.outcome.exit_code = 0;
      t.job.usage.elapsed_s = 3600;
      t.job.usage.cpu_time_s = 3600 * 48;
      t.job.usage.peak_rss_bytes = int64_t{42} << 30;
    }
    for (int s = 1; s <= 5; ++s) {
      SampleJob(job, (job_start + int64_t{b} * 5 + s) * 1000, 1, rng, &t);
    }
    for (const auto& [m, p] : t.samples) long_samples += static_cast<int64_t>(p.size());
    if (!Post(client, headers, "node-hour", &long_seq, {t})) return 1;
  }
  const double long_s = std::chrono::duration<double>(Clock::now() - t1).count();
  // A TSDB makes new series searchable a moment after they are written: the timing starts once
  // the job's charts have every metric (at once on SQLite), waiting at most 60 s.
  const std::string charts = fmt::format("/api/v1/jobs/{}/{}/series", opt.cluster, kLongJob);
  double visible_s = -1;
  for (auto w0 = Clock::now(); std::chrono::duration<double>(Clock::now() - w0).count() < 60;) {
    auto res = client.Get(charts, headers);
    auto doc = res && res->status == 200 ? json::parse(res->body, nullptr, false) : json();
    int full = 0;
    if (doc.is_object() && doc.contains("series") && doc["series"].is_object()) {
      for (const auto& [m, points] : doc["series"].items()) full += points.empty() ? 0 : 1;
    }
    if (full == kMetricCount) {
      visible_s = std::chrono::duration<double>(Clock::now() - w0).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  // 3. The requests, interleaved so that every kind sees the same conditions.
  const std::string base = fmt::format("/api/v1/jobs/{}/{}", opt.cluster, kLongJob);
  std::vector<std::pair<std::string, std::string>> kinds = {
      {"job", base},
      {"series_all", base + "/series"},
      {"job_list", "/api/v1/jobs?limit=100"},
  };
  for (const MetricSpec& m : kMetrics) {
    kinds.emplace_back(std::string("series_") + m.name, base + "/series?metric=" + m.name);
  }
  std::map<std::string, std::vector<double>> ms;
  int failures = 0;
  std::string first_failure;
  for (int round = -20; round < opt.requests; ++round) {
    for (const auto& [kind, path] : kinds) {
      auto a = Clock::now();
      auto res = client.Get(path, headers);
      auto b = Clock::now();
      bool ok = res && res->status == 200 && res->body.size() > 2;
      if (ok && kind == "series_all") {
        auto doc = json::parse(res->body, nullptr, false);
        ok = doc.is_object() && doc.contains("series") && doc["series"].size() == kMetricCount;
      }
      if (!ok) {
        if (first_failure.empty()) {
          first_failure =
              fmt::format("{}: {}", path,
                          res ? fmt::format("{} {}", res->status, res->body.substr(0, 200))
                              : httplib::to_string(res.error()));
        }
        ++failures;
        continue;
      }
      if (round >= 0) ms[kind].push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
  }
  std::vector<double> per_metric_p99;
  json out = {{"tool", "fleet_load pages"},
              {"cluster", opt.cluster},
              {"jobs", opt.jobs + 1},
              {"fill_samples", fill_samples},
              {"fill_s", std::round(fill_s * 10) / 10},
              {"fill_jobs_per_s", std::round(opt.jobs / fill_s)},
              {"long_job", fmt::format("{}/{}", opt.cluster, kLongJob)},
              {"long_job_samples", long_samples},
              {"long_job_ship_s", std::round(long_s * 10) / 10},
              {"long_job_visible_after_s", std::round(visible_s * 10) / 10},
              {"requests_per_kind", opt.requests},
              {"failures", failures}};
  if (!first_failure.empty()) out["first_failure"] = first_failure;
  json per_metric = json::object();
  for (auto& [kind, v] : ms) {
    if (kind.rfind("series_", 0) == 0 && kind != "series_all") {
      per_metric[kind.substr(7)] = Summary(v);
      per_metric_p99.push_back(Pct(v, 0.99));
    } else {
      out[kind + "_ms"] = Summary(v);
    }
  }
  out["series_per_metric_ms"] = per_metric;
  if (opt.server_pid > 0) {
    // The job page's charts alone, --requests times: the server's CPU per request.
    std::vector<double> alone;
    const double cpu0 = ProcCpuSeconds(opt.server_pid);
    for (int i = 0; i < opt.requests; ++i) {
      auto a = Clock::now();
      auto res = client.Get(base + "/series", headers);
      auto b = Clock::now();
      if (!res || res->status != 200) {
        ++failures;
        continue;
      }
      alone.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    const double cpu_s = ProcCpuSeconds(opt.server_pid) - cpu0;
    out["series_all_alone_ms"] = Summary(alone);
    out["series_all_server_cpu_ms"] =
        std::round(cpu_s * 1000 / std::max<double>(1, static_cast<double>(alone.size())) * 100) /
        100;
    out["failures"] = failures;
  }
  out["series_one_metric_worst_p99_ms"] = std::round(Pct(per_metric_p99, 1.0) * 100) / 100;
  out["loadavg"] = LoadAverage();
  fmt::print("{}\n", rightsize::JsonText(out));
  return failures == 0 ? 0 : 1;
}

int Usage(const std::string& why) {
  fmt::print(stderr,
             "{}\nusage: fleet_load ingest --url URL --nodes N [--seconds 60] [--gpus 8] "
             "[--jobs-per-node 8] [--interval-s 1] [--ship-interval-s 5] [--connections 8] "
             "[--server-pid PID] [--cluster NAME] [--token T] "
             "[--tsdb-write-url URL [--every-batch 1]] [--resend 0|1] [--drain-s 60]\n"
             "       fleet_load pages --url URL [--jobs 100000] [--requests 200] "
             "[--cluster NAME] [--token T] [--server-pid PID]\n",
             why);
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage("a subcommand is required: ingest or pages");
  const std::string cmd = argv[1];
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; i += 2) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) return Usage("expected --flag VALUE at " + a);
    flags[a.substr(2)] = argv[i + 1];
  }
  auto take = [&](const char* name, auto* into) -> bool {
    auto it = flags.find(name);
    if (it == flags.end()) return true;
    try {
      using T = std::remove_pointer_t<decltype(into)>;
      if constexpr (std::is_same_v<T, std::string>) {
        *into = it->second;
      } else if constexpr (std::is_same_v<T, int>) {
        size_t used = 0;
        *into = std::stoi(it->second, &used);
        if (used != it->second.size()) return false;
      } else {
        size_t used = 0;
        *into = std::stod(it->second, &used);
        if (used != it->second.size()) return false;
      }
    } catch (const std::exception&) {
      return false;
    }
    flags.erase(it);
    return true;
  };
  bool ok = true;
  if (cmd == "ingest") {
    IngestOptions o;
    ok = take("url", &o.url) && take("cluster", &o.cluster) && take("token", &o.token) &&
         take("nodes", &o.nodes) && take("gpus", &o.gpus) &&
         take("jobs-per-node", &o.jobs_per_node) && take("connections", &o.connections) &&
         take("server-pid", &o.server_pid) && take("seconds", &o.seconds) &&
         take("interval-s", &o.interval_s) && take("ship-interval-s", &o.ship_interval_s) &&
         take("tsdb-write-url", &o.tsdb_write_url) && take("drain-s", &o.drain_s) &&
         take("every-batch", &o.every_batch);
    int resend = 0;
    ok = ok && take("resend", &resend) && (resend == 0 || resend == 1);
    o.resend = resend == 1;
    if (!ok) return Usage("a flag's value is not a number (--resend: 0 or 1)");
    if (!flags.empty()) return Usage("unknown flag --" + flags.begin()->first);
    if (SplitUrls(o.url).empty()) return Usage("--url is required");
    if (o.drain_s < 0) return Usage("--drain-s must be >= 0");
    if (o.nodes < 1 || o.gpus < 1 || o.jobs_per_node < 1 || o.connections < 1 || o.seconds <= 0 ||
        o.interval_s <= 0 || o.ship_interval_s < o.interval_s) {
      return Usage(
          "--nodes, --gpus, --jobs-per-node, --connections, --seconds and --interval-s must be "
          "positive, --ship-interval-s at least --interval-s");
    }
    return Ingest(o);
  }
  if (cmd == "pages") {
    PagesOptions o;
    ok = take("url", &o.url) && take("cluster", &o.cluster) && take("token", &o.token) &&
         take("jobs", &o.jobs) && take("requests", &o.requests) &&
         take("server-pid", &o.server_pid);
    if (!ok) return Usage("a flag's value is not a number");
    if (!flags.empty()) return Usage("unknown flag --" + flags.begin()->first);
    if (o.url.empty()) return Usage("--url is required");
    if (o.jobs < 0 || o.requests < 1) return Usage("--jobs >= 0 and --requests >= 1");
    return Pages(o);
  }
  return Usage("unknown subcommand " + cmd);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {  // out of memory, a thread that cannot start
    std::fprintf(stderr, "fleet_load: %s\n", e.what());
    return 1;
  }
}

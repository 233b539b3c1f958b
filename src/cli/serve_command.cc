// `rightsize serve`: the HTTP API, the dashboard and /metrics over one store (docs/api.md).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <thread>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/units.h"
#include "jobscript/k8s_workload.h"
#include "report/prices.h"
#include "server/http_server.h"
#include "server/replica_roles.h"
#include "server/server.h"

namespace rightsize::cli {

namespace {

// --train-every: "0" (off), seconds, or an age as --since takes it ("1h", "30m", "90s", "1d").
StatusOr<double> ParsePeriod(const std::string& text) {
  if (auto n = ParseDouble(text); n && *n >= 0) return *n;
  constexpr int64_t kNow = int64_t{1} << 40;
  auto t = text.find_first_of("-:T") == std::string::npos ? ParseTimeSpec(text, kNow)
                                                          : Status::BadInput("");
  if (!t.ok() || *t > kNow) {
    return Status::BadInput(
        fmt::format("expected a duration like 1h, 30m, 90s or 0 (off), got '{}'", text));
  }
  return static_cast<double>(kNow - *t);
}

void SayServe(const std::string& line) { fmt::print(stderr, "rightsize serve: {}\n", line); }

}  // namespace

void AddServeCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve the HTTP API, the dashboard (open http://HOST:PORT/ in a browser) and Prometheus "
      "/metrics from the store; agents post their telemetry here");
  struct Flags {
    std::string listen = "127.0.0.1:8080", tls_cert, tls_key, config, prices;
    int threads = 32, max_connections = 4096, max_per_address = 128;
    bool follow_slurm = false;
    SlurmIngestOptions slurm;
    std::string follow_since = "1d";
    AdmissionSettings admission;
    std::string floor_memory = "256Mi";
    std::string train_every = "1h";
    int64_t train_min_new_jobs = 20;
    double lead_retry_s = 30;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option(
      "--listen", f->listen,
      "HOST:PORT to listen on (default 127.0.0.1:8080; port 0: any free port, printed)");
  cmd->add_option("--tls-cert", f->tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  cmd->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--config", f->config,
                  "JSON access config: agent_tokens, user_tokens, admins, user_header, "
                  "trusted_proxies, max_batch_bytes (docs/api.md), tsdb_write_url, "
                  "tsdb_query_url (docs/scale-tsdb.md). Without it the server is open to anyone "
                  "who can reach it");
  cmd->add_option("--prices", f->prices, "Price table JSON (default: the built-in one)");
  cmd->add_option("--threads", f->threads,
                  "Worker threads kept when idle (default 32); they start on demand, one per open "
                  "connection, up to --max-connections")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-connections", f->max_connections,
                  "Connections served at once (a thread each); more wait for a free one")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-per-address", f->max_per_address,
                  "Open connections of one client address beyond which its further ones must "
                  "send their request at once, and requests in flight beyond which its further "
                  "ones get 503 (except /healthz); keep it above what a reverse proxy in front "
                  "sends at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--train-every", f->train_every,
                  "Train each cluster's model this often (1h, 30m, 90s; 0: never), when at least "
                  "--train-min-new-jobs more jobs have ended since the last training. Of several "
                  "replicas on one store only the one holding the 'train' role trains; every "
                  "replica predicts with the newest model in the store")
      ->capture_default_str();
  cmd->add_option("--train-min-new-jobs", f->train_min_new_jobs,
                  "Finished jobs a cluster needs beyond those of its last training to be trained "
                  "again (--train-every)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--lead-retry", f->lead_retry_s,
                  "Seconds between a replica's tries to take the 'train' or 'follow' role while "
                  "another replica holds it: the longest a role stays without a replica after "
                  "its holder dies")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_flag("--follow-slurm", f->follow_slurm,
                "Also run `rightsize ingest slurm --follow` in the server: ingest the jobs that "
                "end from sacct and diagnose the failed ones (instead of a separate service); "
                "each pass and diagnosis is a JSON line on stdout. Of several replicas on one "
                "store given --follow-slurm, only the one holding the 'follow' role follows; "
                "another takes over when it stops");
  cmd->add_option("--follow-since", f->follow_since,
                  "How far back the first sacct pass reaches (--follow-slurm; a restarted server "
                  "catches up; nothing is stored twice)")
      ->capture_default_str();
  cmd->add_option("--follow-interval", f->slurm.interval_s, "Seconds between sacct passes")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--sacct", f->slurm.sacct, "The sacct program (--follow-slurm)")
      ->capture_default_str();
  cmd->add_option("--scontrol", f->slurm.scontrol, "The scontrol program (--follow-slurm)")
      ->capture_default_str();
  cmd->add_option("--log-dir", f->slurm.log_dir,
                  "Where jobs' slurm-N.out files are when nothing else says (--follow-slurm)");
  cmd->add_option("--admission-deadline-ms", f->admission.deadline_ms,
                  "Kubernetes admission: answer \"allowed, unchanged\" when predicting takes "
                  "longer than this (keep it under the webhook's timeoutSeconds)")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  cmd->add_option("--admission-min-history", f->admission.min_history,
                  "Kubernetes admission: finished runs of a workload (namespace, owner, "
                  "container) before enforce changes its resources")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--admission-floor-cpu", f->admission.floor_cpu_cores,
                  "Kubernetes admission: enforce never sets a cpu request or limit below this "
                  "(cores)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--admission-floor-memory", f->floor_memory,
                  "Kubernetes admission: enforce never sets a memory request or limit below "
                  "this (a quantity: 256Mi, 1Gi)")
      ->capture_default_str();
  cmd->add_option("--admission-max-inflight", f->admission.max_inflight,
                  "Kubernetes admission: more reviews at once are answered \"allowed, "
                  "unchanged\" at once (overload)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--cluster", f->admission.cluster,
                  "Kubernetes admission: the cluster whose model and history the webhook uses "
                  "(default: the store's only cluster)");
  cmd->footer(
      "The store is --db (or $RIGHTSIZE_DB or the default store); jobs' samples go to the "
      "TSDB of --tsdb-write-url/--tsdb-query-url or the config file's tsdb_write_url/"
      "tsdb_query_url when set. Endpoints: /healthz, /metrics, "
      "/api/v1/{telemetry,jobs,predict,report,overview}, the Kubernetes admission webhook "
      "POST /k8s/admit/{advise,enforce}; see docs/api.md. Several replicas may serve one "
      "store behind a load balancer (docs/scale-replicas.md): any replica answers any request; "
      "training and the SLURM follower run on one of them, elected through the store. SIGINT or "
      "SIGTERM stops the server after the requests in flight.");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      ServerOptions opts;
      opts.db = ctx.StorePath();
      if (!f->config.empty()) {
        auto cfg = LoadServerConfig(f->config);
        if (!cfg.ok()) return Fail(cfg.status());
        opts.config = std::move(*cfg);
      }
      // The TSDB for samples: the global flags (or their environment), else the config file.
      StoreOptions tsdb = ctx.StoreOpts();
      if (tsdb.tsdb_write_url.empty() && tsdb.tsdb_query_url.empty()) tsdb = opts.config.store;
      opts.store = tsdb;
      ctx.tsdb_write_url = tsdb.tsdb_write_url;  // the sacct follower's store too
      ctx.tsdb_query_url = tsdb.tsdb_query_url;
      const ServerConfig opts_config = opts.config;
      auto follow_from = ParseTimeSpec(f->follow_since, std::time(nullptr));
      if (!follow_from.ok()) return Fail(follow_from.status().WithContext("--follow-since"));
      auto train_every_s = ParsePeriod(f->train_every);
      if (!train_every_s.ok()) return Fail(train_every_s.status().WithContext("--train-every"));
      auto prices = PricesFor(f->prices);
      if (!prices.ok()) return Fail(prices.status());
      opts.prices = std::move(*prices);
      auto floor_memory = ParseQuantity(f->floor_memory);
      if (!floor_memory.ok()) {
        return Fail(floor_memory.status().WithContext("--admission-floor-memory"));
      }
      f->admission.floor_memory_bytes = static_cast<int64_t>(std::llround(*floor_memory));
      opts.admission = f->admission;
      ApiServer api(std::move(opts));
      Status st = api.Init();
      if (!st.ok()) return Fail(st);

      HttpServeOptions http_options;
      http_options.listen = f->listen;
      http_options.tls_cert = f->tls_cert;
      http_options.tls_key = f->tls_key;
      http_options.threads = f->threads;
      http_options.max_threads = std::max(f->threads, f->max_connections);
      http_options.max_per_address = f->max_per_address;
      auto front = HttpFront::Bind(api, http_options);
      if (!front.ok()) return Fail(front.status());
      HttpFront& http = **front;
      if (!f->config.empty()) {
        fmt::print(stderr, "rightsize serve: access from {}\n", f->config);
        for (const auto& w : ConfigWarnings(opts_config)) {
          fmt::print(stderr, "rightsize serve: warning: {}\n", w);
        }
      } else {
        fmt::print(stderr,
                   "rightsize serve: no --config: open to anyone who can connect (everyone is an "
                   "admin, agents need no token)\n");
      }
      fmt::print(stderr, "rightsize serve: {}://{}:{}/ (store {}{})\n",
                 http.tls() ? "https" : "http", http.host(), http.port(), ctx.StorePath(),
                 tsdb.tsdb_write_url.empty() ? "" : ", samples to " + tsdb.tsdb_write_url);
      fmt::print("listening on {}:{}\n", http.host(), http.port());
      std::fflush(stdout);
      // The handler only sets a flag (Stop() is not async-signal-safe); a watcher acts on it.
      CatchStopSignals();
      std::atomic<bool>& stop = StopFlag();
      std::atomic<bool> done{false};
      std::thread watcher([&] {
        while (!done) {
          if (stop) {
            http.Stop();
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
      std::thread follower, trainer;
      if (f->follow_slurm) {
        f->slurm.follow = true;
        f->slurm.json = true;  // one JSON line per pass and per diagnosis, after "listening on"
        follower = std::thread([&ctx, &stop, f] {
          ElectedOptions elected{ctx.StorePath(), "follow", f->lead_retry_s, f->lead_retry_s};
          RunElected(
              elected, stop,
              [&](Store&) {
                // From --follow-since before now: a replica that takes over catches up on what
                // ended while the role had no holder (nothing is stored twice).
                auto from = ParseTimeSpec(f->follow_since, std::time(nullptr));
                SayServe("this replica runs the SLURM follower");
                int code = from.ok() ? IngestSlurm(ctx, f->slurm, *from, 0, stop) : kExitOk;
                if (code != kExitOk && !stop) {
                  SayServe(
                      "the sacct follower stopped; it starts again while this replica "
                      "holds the 'follow' role");
                }
              },
              SayServe);
        });
      }
      if (*train_every_s > 0) {
        trainer = std::thread([&ctx, &stop, f, every_s = *train_every_s] {
          ElectedOptions elected{ctx.StorePath(), "train", every_s, f->lead_retry_s};
          RunElected(
              elected, stop,
              [&](Store& store) {
                auto trained = TrainDueClusters(store, f->train_min_new_jobs);
                if (!trained.ok()) {
                  SayServe(fmt::format("training failed (tried again in {:g} s): {}", every_s,
                                       trained.status().ToString()));
                  return;
                }
                for (const auto& t : *trained) SayServe(t.line);
              },
              SayServe);
        });
      }
      bool ok = http.Serve();
      done = true;
      stop = true;  // the follower too, when the server stopped on its own
      watcher.join();
      if (follower.joinable()) follower.join();
      if (trainer.joinable()) trainer.join();
      return ok ? kExitOk : Fail(Status::IoError("the server stopped with an error"));
    };
  });
}

}  // namespace rightsize::cli

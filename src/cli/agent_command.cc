// `rightsize agent`: watches every job on this node, writes their usage records, serves
// /metrics.
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent.h"
#include "agent/shipper.h"
#include "cli/app.h"
#include "cli/listen.h"
#include "cli/terminal.h"

namespace rightsize::cli {
namespace {

std::atomic<bool> g_stop{false};
void Stop(int) { g_stop = true; }

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

void AddAgentCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "agent",
      "Watch every job on this node (SLURM steps, Kubernetes pods, SLURM_JOB_ID processes): "
      "write each job's usage record when it ends and serve live /metrics");
  struct Flags {
    double interval_s = 1;
    std::string listen, cluster, proc_root = "/proc", cgroup_root = "/sys/fs/cgroup";
    std::string gpu_library = "libnvidia-ml.so.1";
    std::string dcgm_library;  // "": libdcgm.so.4, then .so.3, then .so
    size_t max_jobs = 500;
    std::string server, token, token_file, spool;
    bool no_spool = false;
    double ship_interval_s = 5;
    bool stacks = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--interval", f->interval_s, "Seconds between samples (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--listen", f->listen,
                  "Serve Prometheus /metrics on HOST:PORT (port 0: any free port, printed)");
  cmd->add_option("--cluster", f->cluster, "Cluster name for the records (default: the host's)");
  cmd->add_option("--max-jobs", f->max_jobs, "Jobs exported in /metrics at most (default 500)");
  cmd->add_option("--proc-root", f->proc_root,
                  "Where the host's /proc is mounted (default /proc; /host/proc in a container)");
  cmd->add_option("--cgroup-root", f->cgroup_root, "Where the cgroup hierarchy is mounted");
  cmd->add_option("--nvml", f->gpu_library, "The NVML library to load (default libnvidia-ml.so.1)");
  cmd->add_option("--dcgm", f->dcgm_library,
                  "The DCGM library to load for SM, tensor and DRAM activity (default "
                  "libdcgm.so.4, then libdcgm.so.3, then libdcgm.so); it uses nv-hostengine on "
                  "127.0.0.1 when one runs, else an engine of its own");
  cmd->add_option("--server", f->server,
                  "Ship live samples, stacks and records to `rightsize serve` at this URL "
                  "(http://HOST:PORT) instead of writing records to the store");
  cmd->add_option("--token", f->token,
                  "Agent token for --server (one of the server's agent_tokens); default "
                  "$RIGHTSIZE_AGENT_TOKEN. Prefer --token-file: arguments are visible in ps");
  cmd->add_option("--token-file", f->token_file, "File holding the agent token");
  cmd->add_option("--spool", f->spool,
                  "Folder where batches wait until the server has them, across agent restarts "
                  "(default /var/spool/rightsize as root, else ~/.local/state/rightsize/spool; "
                  "capped at 256 MiB, oldest dropped)");
  cmd->add_flag("--no-spool", f->no_spool, "Keep unsent batches in memory only");
  cmd->add_option("--ship-interval", f->ship_interval_s, "Seconds between batches (default 5)")
      ->check(CLI::Range(0.2, 3600.0));
  cmd->add_flag("--stacks", f->stacks,
                "Sample each job's call stacks (perf events, 49 Hz) for the flame graphs");
  cmd->footer(
      "Usage records go to the store (--db, $RIGHTSIZE_DB or the default store), one per job "
      "when it ends; with --server, live samples, stacks and the records go to that server "
      "instead (queued and retried while it is unreachable). The agent runs niced; SIGINT or "
      "SIGTERM stops it.");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      // Never compete with the jobs it watches.
      setpriority(PRIO_PROCESS, 0, 10);
      std::string cluster = f->cluster;
      if (cluster.empty()) cluster = HostName();
      // With --server the records go there; the local store is only opened without it.
      Store* local = nullptr;
      std::unique_ptr<Shipper> shipper;
      if (f->server.empty()) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        local = *store;
      } else {
        ShipperOptions so;
        so.url = f->server;
        so.agent = cluster + "/" + HostName();
        if (!f->token.empty()) {
          so.token = f->token;
        } else if (!f->token_file.empty()) {
          std::ifstream in(f->token_file);
          if (!std::getline(in, so.token) || so.token.empty()) {
            return Fail(
                Status::NotFound("--token-file: cannot read a token from " + f->token_file));
          }
        } else if (const char* t = std::getenv("RIGHTSIZE_AGENT_TOKEN")) {
          so.token = t;
        }
        if (!f->no_spool) {
          so.spool_dir = f->spool;
          if (so.spool_dir.empty()) {
            const char* home = std::getenv("HOME");
            so.spool_dir = geteuid() == 0 || home == nullptr
                               ? "/var/spool/rightsize"
                               : std::string(home) + "/.local/state/rightsize/spool";
            // One folder per agent identity: two agents never send each other's batches.
            std::string name = so.agent;
            for (char& c : name) {
              if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
            }
            so.spool_dir += "/" + name;
          }
        }
        auto s = Shipper::Create(so);
        if (!s.ok()) return Fail(s.status());
        shipper = std::move(*s);
        if (shipper->stats().recovered > 0) {
          fmt::print(stderr, "rightsize agent: {} unsent batches from {} will be sent first\n",
                     shipper->stats().recovered, so.spool_dir);
        }
      }
      ProcFs proc(f->proc_root);
      proc.set_keep_stat_open(true);  // one pread per process per cycle, no open/close
      CgroupFs cgroups(f->cgroup_root);
      std::unique_ptr<GpuSource> gpu = OpenNvml(f->gpu_library);
      if (!gpu->available()) fmt::print(stderr, "rightsize agent: GPU off: {}\n", gpu->status());
      // DCGM only where NVML answers: its fields are matched to jobs through NVML's processes.
      DcgmOptions dcgm_options;
      dcgm_options.update_interval_s = f->interval_s;
      std::unique_ptr<DcgmSource> dcgm = gpu->available() ? OpenDcgm(f->dcgm_library, dcgm_options)
                                                          : NoDcgmSource("no GPU driver");
      if (gpu->available() && !dcgm->available()) {
        fmt::print(stderr, "rightsize agent: DCGM off: {}\n", dcgm->status());
      }
      AgentOptions ao;
      ao.cluster = cluster;
      ao.max_exported_jobs = f->max_jobs;
      ao.ship = shipper != nullptr;
      ao.sample_stacks = f->stacks;
      Agent agent(&proc, &cgroups, gpu.get(), ao);
      agent.set_dcgm(dcgm.get());
      std::mutex mu;  // guards `agent`: the sampling loop and the HTTP thread both use it

      httplib::Server server;
      std::thread http;
      if (!f->listen.empty()) {
        server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
          std::lock_guard lock(mu);
          res.set_content(agent.Metrics(), "text/plain; version=0.0.4");
        });
        auto bound = BindListen(server, f->listen);
        if (!bound.ok()) return Fail(bound.status());
        fmt::print(stderr, "rightsize agent: /metrics on {}:{}\n", bound->host, bound->port);
        http = std::thread([&server] { server.listen_after_bind(); });
      }
      struct sigaction sa {};
      sa.sa_handler = Stop;
      sigaction(SIGINT, &sa, nullptr);
      sigaction(SIGTERM, &sa, nullptr);

      auto start = std::chrono::steady_clock::now();
      int status = kExitOk;
      bool stacks_warned = false;
      double next_ship = f->ship_interval_s;
      while (!g_stop) {
        double now =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::vector<JobRecord> ended;
        std::vector<JobTelemetry> batch;
        {
          std::lock_guard lock(mu);
          ended = agent.Cycle(now, std::time(nullptr));
          if (f->stacks && !agent.stacks_note().empty() && !stacks_warned) {
            fmt::print(stderr, "rightsize agent: no stacks: {}\n", agent.stacks_note());
            stacks_warned = true;
          }
          if (shipper && now >= next_ship) {
            batch = agent.TakeTelemetry();
            next_ship = now + f->ship_interval_s;
          }
        }
        if (shipper && !batch.empty()) {
          shipper->Enqueue(std::move(batch), static_cast<int64_t>(std::time(nullptr)) * 1000);
        }
        if (local != nullptr && !ended.empty()) {
          // A job the store holds from sacct keeps sacct's record and gains this usage (the
          // store merges; see store.h).
          Status st = local->UpsertJobs(ended);
          if (!st.ok()) {
            // A store that refuses (disk full, locked) must not stop the watching.
            fmt::print(stderr, "rightsize agent: {} usage records not stored: {}\n", ended.size(),
                       st.ToString());
          }
        }
        auto next = start + std::chrono::duration<double>((std::floor(now / f->interval_s) + 1) *
                                                          f->interval_s);
        // A quarter of a second at a time, to notice a stop (the signal may land on another
        // thread): 20 ms naps were a tenth of the agent's own CPU in wake-ups.
        while (!g_stop && std::chrono::steady_clock::now() < next) {
          std::this_thread::sleep_until(std::min<std::chrono::steady_clock::time_point>(
              std::chrono::time_point_cast<std::chrono::steady_clock::duration>(next),
              std::chrono::steady_clock::now() + std::chrono::milliseconds(250)));
        }
      }
      if (http.joinable()) {
        server.stop();
        http.join();
      }
      if (shipper) {
        // What the jobs did since the last batch, then a short wait for the queue to drain.
        {
          std::lock_guard lock(mu);
          shipper->Enqueue(agent.TakeTelemetry(), static_cast<int64_t>(std::time(nullptr)) * 1000);
        }
        if (!shipper->Flush(5)) {
          fmt::print(stderr, "rightsize agent: {} batches not delivered: {}\n",
                     shipper->stats().queued, shipper->stats().last_error);
        }
      }
      return status;
    };
  });
}

}  // namespace rightsize::cli

// `rightsize agent`: watches every job on this node, writes their usage records, serves
// /metrics.
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent.h"
#include "cli/app.h"
#include "cli/terminal.h"

namespace rightsize::cli {
namespace {

std::atomic<bool> g_stop{false};
void Stop(int) { g_stop = true; }

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
    size_t max_jobs = 500;
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
  cmd->footer(
      "Usage records go to the store (--db, $RIGHTSIZE_DB or the default store), one per job "
      "when it ends. The agent runs niced; SIGINT or SIGTERM stops it.");
  cmd->callback([&ctx, action, f] {
    *action = [&ctx, f]() -> int {
      // Never compete with the jobs it watches.
      setpriority(PRIO_PROCESS, 0, 10);
      std::string cluster = f->cluster;
      if (cluster.empty()) {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        cluster = host;
      }
      auto store = ctx.OpenedStore();
      if (!store.ok()) return Fail(store.status());
      ProcFs proc(f->proc_root);
      CgroupFs cgroups(f->cgroup_root);
      std::unique_ptr<GpuSource> gpu = OpenNvml(f->gpu_library);
      if (!gpu->available()) fmt::print(stderr, "rightsize agent: GPU off: {}\n", gpu->status());
      Agent agent(&proc, &cgroups, gpu.get(), AgentOptions{cluster, f->max_jobs});
      std::mutex mu;  // guards `agent`: the sampling loop and the HTTP thread both use it

      httplib::Server server;
      std::thread http;
      if (!f->listen.empty()) {
        size_t colon = f->listen.rfind(':');
        if (colon == std::string::npos) {
          return Fail(Status::InvalidArgument("--listen: expected HOST:PORT, got " + f->listen));
        }
        std::string host = f->listen.substr(0, colon);
        int port = std::atoi(f->listen.c_str() + colon + 1);
        server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
          std::lock_guard lock(mu);
          res.set_content(agent.Metrics(), "text/plain; version=0.0.4");
        });
        if (port == 0) {
          port = server.bind_to_any_port(host.empty() ? "0.0.0.0" : host);
        } else if (!server.bind_to_port(host.empty() ? "0.0.0.0" : host, port)) {
          port = -1;
        }
        if (port < 0) return Fail(Status::IoError("--listen: cannot listen on " + f->listen));
        fmt::print(stderr, "rightsize agent: /metrics on {}:{}\n", host, port);
        http = std::thread([&server] { server.listen_after_bind(); });
      }
      struct sigaction sa {};
      sa.sa_handler = Stop;
      sigaction(SIGINT, &sa, nullptr);
      sigaction(SIGTERM, &sa, nullptr);

      auto start = std::chrono::steady_clock::now();
      int status = kExitOk;
      while (!g_stop) {
        double now =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::vector<JobRecord> ended;
        {
          std::lock_guard lock(mu);
          ended = agent.Cycle(now, std::time(nullptr));
        }
        if (!ended.empty()) {
          Status st = (*store)->UpsertJobs(ended);
          if (!st.ok()) {
            // A store that refuses (disk full, locked) must not stop the watching.
            fmt::print(stderr, "rightsize agent: {} usage records not stored: {}\n", ended.size(),
                       st.ToString());
          }
        }
        auto next = start + std::chrono::duration<double>((std::floor(now / f->interval_s) + 1) *
                                                          f->interval_s);
        while (!g_stop && std::chrono::steady_clock::now() < next) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      if (http.joinable()) {
        server.stop();
        http.join();
      }
      return status;
    };
  });
}

}  // namespace rightsize::cli

// `rightsize agent`: watches every job on this node, writes their usage records, serves
// /metrics.
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "agent/node_agent.h"
#include "agent/shipper.h"
#include "cli/app.h"
#include "cli/terminal.h"
#include "diagnose/stored_telemetry.h"
#include "server/metrics_endpoint.h"

namespace rightsize::cli {
namespace {

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

struct AgentFlags {
  double interval_s = 1;
  std::string listen, cluster, proc_root = "/proc", cgroup_root = "/sys/fs/cgroup";
  std::string gpu_library = "libnvidia-ml.so.1";
  std::string powercap = "/sys/class/powercap";
  std::string dcgm_library;  // "": libdcgm.so.4, then .so.3, then .so
  size_t max_jobs = 500;
  std::vector<std::string> servers;  // --server: the server, then its other replicas
  std::string token, token_file, spool, tsdb_write_url;
  bool no_spool = false;
  double ship_interval_s = 5;
  bool stacks = false;
  // Kubernetes (a DaemonSet).
  bool kubernetes = false;
  std::string node_name;  // "" = $NODE_NAME, else the host's name
  KubeletOptions kubelet;
  std::string pod_logs = "/var/log/pods";
};

// With --server: the shipper, which first sends what a previous agent left in the spool.
StatusOr<std::unique_ptr<Shipper>> OpenShipper(const AgentFlags& f, const std::string& cluster,
                                               const std::string& node) {
  AgentShipSettings settings;
  settings.url = f.servers.front();
  settings.more_urls.assign(f.servers.begin() + 1, f.servers.end());
  settings.agent_name = cluster + "/" + node;
  settings.token = f.token;
  settings.token_file = f.token_file;
  if (const char* t = std::getenv("RIGHTSIZE_AGENT_TOKEN")) settings.env_token = t;
  settings.spool = f.spool;
  settings.no_spool = f.no_spool;
  settings.root = geteuid() == 0;
  if (const char* home = std::getenv("HOME")) settings.home = home;
  RS_ASSIGN_OR_RETURN(ShipperOptions so, AgentShipperOptions(settings));
  so.tsdb_write_url = f.tsdb_write_url;
  RS_ASSIGN_OR_RETURN(std::unique_ptr<Shipper> shipper, Shipper::Create(so));
  if (shipper->stats().recovered > 0) {
    fmt::print(stderr, "rightsize agent: {} unsent batches from {} will be sent first\n",
               shipper->stats().recovered, so.spool_dir);
  }
  return shipper;
}

NodeAgentOptions NodeOptions(const AgentFlags& f, const std::string& cluster) {
  NodeAgentOptions o;
  o.interval_s = f.interval_s;
  o.ship_interval_s = f.ship_interval_s;
  o.proc_root = f.proc_root;
  o.cgroup_root = f.cgroup_root;
  o.gpu_library = f.gpu_library;
  o.dcgm_library = f.dcgm_library;
  o.powercap_root = f.powercap;
  o.agent.cluster = cluster;
  o.agent.max_exported_jobs = f.max_jobs;
  o.agent.sample_stacks = f.stacks;
  o.agent.kubernetes = f.kubernetes;
  o.agent.pod_logs_dir = f.pod_logs;
  o.kubelet = f.kubelet;
  return o;
}

int RunAgent(Context& ctx, const AgentFlags& f) {
  // Never compete with the jobs it watches.
  setpriority(PRIO_PROCESS, 0, 10);
  // In a DaemonSet the pod's host name is the pod's; the node's name comes from the downward API.
  std::string node_name = f.node_name;
  if (node_name.empty()) {
    const char* env = std::getenv("NODE_NAME");
    node_name = env != nullptr && *env != '\0' ? env : HostName();
  }
  std::string cluster = f.cluster.empty() ? node_name : f.cluster;
  // With --server the records go there; the local store is only opened without it.
  Store* local = nullptr;
  std::unique_ptr<Shipper> shipper;
  if (f.servers.empty() && !f.tsdb_write_url.empty()) {
    return Fail(Status::InvalidArgument(
        "--tsdb-write-url needs --server: the agent writes samples to the TSDB and the rest to "
        "the server"));
  }
  if (f.servers.empty()) {
    auto store = ctx.OpenedStore();
    if (!store.ok()) return Fail(store.status());
    local = *store;
  } else {
    auto s = OpenShipper(f, cluster, node_name);
    if (!s.ok()) return Fail(s.status());
    shipper = std::move(*s);
  }
  NodeAgent node(NodeOptions(f, cluster), std::move(shipper));
  if (!node.gpu_available()) {
    fmt::print(stderr, "rightsize agent: GPU off: {}\n", node.gpu_status());
  }
  if (node.gpu_available() && !node.dcgm_available()) {
    fmt::print(stderr, "rightsize agent: DCGM off: {}\n", node.dcgm_status());
  }
  if (!node.exits_status().empty()) {
    fmt::print(stderr,
               "rightsize agent: jobs' exit codes not watched (their state waits for "
               "accounting): {}\n",
               node.exits_status());
  }
  // The jobs' CPU energy is unknown without RAPL: said here, never reported as 0.
  fmt::print(stderr, "rightsize agent: CPU energy {}: {}\n", node.rapl_available() ? "on" : "off",
             node.rapl_status());
  MetricsEndpoint metrics([&node] { return node.Metrics(); });
  if (!f.listen.empty()) {
    auto bound = metrics.Start(f.listen);
    if (!bound.ok()) return Fail(bound.status());
    fmt::print(stderr, "rightsize agent: /metrics on {}:{}\n", bound->host, bound->port);
  }
  CatchStopSignals();

  NodeAgent::Callbacks callbacks;
  callbacks.stacks_off = [](const std::string& note) {
    fmt::print(stderr, "rightsize agent: no stacks: {}\n", note);
  };
  callbacks.kubelet_error = [](const std::string& error) {
    if (error.empty()) {
      fmt::print(stderr, "rightsize agent: the kubelet answers again\n");
    } else {
      fmt::print(stderr, "rightsize agent: kubelet: {}\n", error);
    }
  };
  callbacks.diagnosed = [local](const std::vector<DiagnosedRecord>& diagnosed) {
    for (const DiagnosedRecord& d : diagnosed) {
      fmt::print(stderr, "rightsize agent: {} {}: {}\n", d.job.job_id, d.job.outcome.state,
                 d.diagnosis.summary);
      if (local == nullptr) continue;
      Status st = SaveDiagnosis(*local, d.job, d.diagnosis, std::time(nullptr));
      if (!st.ok()) {
        fmt::print(stderr, "rightsize agent: diagnosis of {} not stored: {}\n", d.job.job_id,
                   st.ToString());
      }
    }
  };
  callbacks.ended = [local](const std::vector<JobRecord>& ended) {
    if (local == nullptr) return;
    // A job the store holds from sacct keeps sacct's record and gains this usage (the store
    // merges; see store.h).
    Status st = local->UpsertJobs(ended);
    if (!st.ok()) {
      // A store that refuses (disk full, locked) must not stop the watching.
      fmt::print(stderr, "rightsize agent: {} usage records not stored: {}\n", ended.size(),
                 st.ToString());
    }
  };
  node.Run(StopFlag(), callbacks);
  metrics.Stop();
  // What the jobs did since the last batch, then a short wait for the queue to drain.
  if (!node.FinishShipping(5)) {
    fmt::print(stderr, "rightsize agent: {} batches not delivered: {}\n",
               node.shipper()->stats().queued, node.shipper()->stats().last_error);
  }
  if (node.shipper()) {
    Shipper::Stats s = node.shipper()->stats();
    fmt::print(stderr,
               "rightsize agent: shipped {} of {} samples in {} batches ({} renumbered after a "
               "409, {} dropped)\n",
               s.samples_delivered, s.samples_made, s.sent, s.resynced, s.dropped);
    if (s.failovers > 0) {
      fmt::print(stderr, "rightsize agent: moved to the next --server {} times\n", s.failovers);
    }
  }
  return kExitOk;
}

}  // namespace

void AddAgentCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "agent",
      "Watch every job on this node (SLURM steps, Kubernetes pods, SLURM_JOB_ID processes; with "
      "--kubernetes, every container of every pod): write each job's usage record when it ends "
      "and serve live /metrics");
  auto f = std::make_shared<AgentFlags>();
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
  cmd->add_option("--powercap", f->powercap,
                  "Where RAPL's powercap zones are, for the jobs' CPU energy (default "
                  "/sys/class/powercap; /host/sys/class/powercap in a container)");
  cmd->add_option("--server", f->servers,
                  "Ship live samples, stacks and records to `rightsize serve` at this URL "
                  "(http://HOST:PORT) instead of writing records to the store. Replicas of one "
                  "server (one store): give it several times or as a comma list; when one "
                  "cannot be reached or answers 5xx, batches go to the next one, with the same "
                  "spool and numbering (docs/scale-replicas.md)")
      ->delimiter(',');
  cmd->add_option("--token", f->token,
                  "Agent token for --server (one of the server's agent_tokens); default "
                  "$RIGHTSIZE_AGENT_TOKEN. Prefer --token-file: arguments are visible in ps");
  cmd->add_option("--token-file", f->token_file, "File holding the agent token");
  cmd->add_option("--spool", f->spool,
                  "Folder where batches wait until the server has them, across agent restarts "
                  "(default /var/spool/rightsize as root, else ~/.local/state/rightsize/spool; "
                  "capped at 256 MiB, oldest dropped)");
  cmd->add_flag("--no-spool", f->no_spool, "Keep unsent batches in memory only");
  cmd->add_option("--tsdb-write-url", f->tsdb_write_url,
                  "With --server: write the samples to this Prometheus-compatible TSDB by remote "
                  "write (e.g. http://vm:8428/api/v1/write) and send the server only the job "
                  "records it does not have yet (new or changed, and all once a minute); the "
                  "server reads the samples back with its --tsdb-query-url (see "
                  "docs/scale-tsdb.md)")
      ->type_name("URL");
  cmd->add_option("--ship-interval", f->ship_interval_s, "Seconds between batches (default 5)")
      ->check(CLI::Range(0.2, 3600.0));
  cmd->add_flag("--stacks", f->stacks,
                "Sample each job's call stacks (perf events, 49 Hz) for the flame graphs");
  cmd->add_flag("--kubernetes", f->kubernetes,
                "Watch the Kubernetes containers under the kubepods cgroups (a DaemonSet) instead "
                "of SLURM jobs: each container is a record <namespace>/<pod>/<container>, named "
                "by the kubelet");
  cmd->add_option("--node-name", f->node_name,
                  "This node's name, for the records and the agent's identity (default "
                  "$NODE_NAME, else the host's name)");
  cmd->add_option("--kubelet-url", f->kubelet.url,
                  "The kubelet, for its pod list (GET /pods): default https://127.0.0.1:10250; "
                  "http://127.0.0.1:10255 for its read-only port");
  cmd->add_option("--kubelet-token-file", f->kubelet.token_file,
                  "Bearer token for the kubelet, read at each request (default "
                  "/var/run/secrets/kubernetes.io/serviceaccount/token; none when missing)");
  cmd->add_option("--kubelet-ca-file", f->kubelet.ca_file,
                  "CA certificate that signed the kubelet's serving certificate");
  cmd->add_flag("--kubelet-insecure-tls", f->kubelet.insecure_tls,
                "Do not verify the kubelet's serving certificate");
  cmd->add_option("--pod-resources-socket", f->kubelet.pod_resources_socket,
                  "The kubelet's PodResources API, for the GPUs each container holds (default "
                  "/var/lib/kubelet/pod-resources/kubelet.sock)");
  cmd->add_option("--pod-logs", f->pod_logs,
                  "The kubelet's pod log folder, for diagnosing failed containers (default "
                  "/var/log/pods)");
  cmd->footer(
      "Usage records go to the store (--db, $RIGHTSIZE_DB or the default store), one per job "
      "when it ends; with --server, live samples, stacks and the records go to that server "
      "instead (queued and retried while it is unreachable). With --kubernetes, a failed "
      "container is diagnosed from its logs as it ends (stored with its record without "
      "--server, printed either way). The agent runs niced; SIGINT or SIGTERM stops it.");
  cmd->callback([&ctx, action, f] { *action = [&ctx, f]() -> int { return RunAgent(ctx, *f); }; });
}

}  // namespace rightsize::cli

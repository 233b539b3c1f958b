// NodeAgent: `rightsize agent` without its flags, its printing or the store. It opens the node's
// sources (/proc, the cgroup hierarchy, NVML, DCGM where NVML answers, and with
// options.agent.kubernetes the kubelet), runs the Agent's
// sampling cycle every interval until told to stop, hands the records of the jobs that ended to
// the caller (who stores them) and, with a Shipper, hands the live telemetry to it every ship
// interval.
//
// Ownership: the NodeAgent owns the sources, the Agent and the Shipper. Thread-safety: Metrics()
// may be called from any thread (the /metrics server) while Run() runs on the owner's thread;
// everything else is for the owner. Nothing here fails: a GPU library that does not load leaves
// the GPU off (gpu_available() false, gpu_status() says why), a job's stacks that cannot be
// sampled are reported once through the callback.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/dcgm.h"
#include "agent/exits.h"
#include "agent/gpu.h"
#include "agent/kubelet.h"
#include "agent/proc.h"
#include "agent/rapl.h"
#include "agent/shipper.h"
#include "core/job.h"
#include "core/mutex.h"
#include "core/status.h"

namespace rightsize {

struct NodeAgentOptions {
  double interval_s = 1;       // between sampling cycles
  double ship_interval_s = 5;  // between telemetry batches (with a shipper)
  std::string proc_root = "/proc", cgroup_root = "/sys/fs/cgroup";
  std::string gpu_library = "libnvidia-ml.so.1";
  std::string dcgm_library;                           // "": libdcgm.so.4, then .so.3, then .so
  std::string powercap_root = "/sys/class/powercap";  // RAPL, for the jobs' CPU energy
  AgentOptions agent;      // agent.ship is set from whether there is a shipper
  KubeletOptions kubelet;  // with agent.kubernetes
};

class NodeAgent {
 public:
  // `shipper` may be null (the records then only go to Run()'s callback).
  NodeAgent(NodeAgentOptions options, std::unique_ptr<Shipper> shipper);
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  bool gpu_available() const { return gpu_->available(); }
  std::string gpu_status() const { return gpu_->status(); }
  bool dcgm_available() const { return dcgm_->available(); }
  // Why the jobs' exit codes are not watched ("" when they are, or for Kubernetes): their end
  // state then waits for accounting.
  const std::string& exits_status() const { return exits_status_; }
  std::string dcgm_status() const { return dcgm_->status(); }
  bool rapl_available() const { return rapl_.available(); }
  const std::string& rapl_status() const { return rapl_.status(); }

  // The live view, Prometheus text format. Thread-safe.
  std::string Metrics();

  struct Callbacks {
    // The usage records of the jobs that ended in a cycle (never called with none).
    std::function<void(const std::vector<JobRecord>&)> ended;
    // Why stack sampling is off, once (when options.agent.sample_stacks).
    std::function<void(const std::string&)> stacks_off;
    // The diagnoses of failed jobs and containers, with their records (never with none).
    std::function<void(const std::vector<DiagnosedRecord>&)> diagnosed;
    // Why the kubelet does not answer, each time that changes ("" when it answers again).
    std::function<void(const std::string&)> kubelet_error;
  };
  // Samples every interval (on the interval's grid from the start) until `stop` is set; checks
  // it at every cycle and at least once a second.
  void Run(const std::atomic<bool>& stop, const Callbacks& callbacks);

  // With a shipper: ships what the jobs did since the last batch, then waits up to `timeout_s`
  // for the queue to drain. True when nothing is left undelivered (or there is no shipper).
  bool FinishShipping(double timeout_s);
  // Null without one.
  const Shipper* shipper() const { return shipper_.get(); }

 private:
  // One cycle at `now_s` on the run's clock; returns the ended jobs' records.
  std::vector<JobRecord> Cycle(double now_s, double* next_ship_s, const Callbacks& callbacks,
                               std::vector<DiagnosedRecord>* diagnosed);

  NodeAgentOptions options_;
  std::unique_ptr<Shipper> shipper_;
  ProcFs proc_;
  CgroupFs cgroups_;
  std::unique_ptr<GpuSource> gpu_;
  std::unique_ptr<DcgmSource> dcgm_;
  std::unique_ptr<Kubelet> kubelet_;    // with options.agent.kubernetes
  std::unique_ptr<ExitWatcher> exits_;  // null when unavailable (exits_status_ says why)
  std::string exits_status_;
  CpuEnergyMeter rapl_;
  Mutex mu_;  // the sampling loop and the /metrics thread both use agent_
  Agent agent_ GUARDED_BY(mu_);
  bool stacks_warned_ = false;
  std::string kubelet_error_;  // the last one reported
};

// What `agent --server` was told about shipping, for AgentShipperOptions. The environment and
// the user are the caller's to read (STYLE.md rule 9).
struct AgentShipSettings {
  std::string url;                     // the server
  std::vector<std::string> more_urls;  // its other replicas (ShipperOptions::more_urls)
  std::string agent_name;              // "<cluster>/<host>"
  std::string token, token_file;
  std::string env_token;  // $RIGHTSIZE_AGENT_TOKEN, "" when unset
  std::string spool;      // "" = the default folder
  bool no_spool = false;
  bool root = false;                // the default spool is /var/spool/rightsize for root
  std::optional<std::string> home;  // $HOME; without it, the default is root's too
};

// The shipper's options: the token given, else read from token_file (NotFound when that holds
// none), else the environment's; the spool folder given, else the default one for this user with
// one folder per agent identity, so two agents never send each other's batches.
StatusOr<ShipperOptions> AgentShipperOptions(const AgentShipSettings& settings);

}  // namespace rightsize

#include "agent/node_agent.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <thread>
#include <utility>

namespace rightsize {

namespace {

// DCGM only where NVML answers: its fields are matched to jobs through NVML's processes.
std::unique_ptr<DcgmSource> OpenDcgmFor(const GpuSource& gpu, const NodeAgentOptions& options) {
  if (!gpu.available()) return NoDcgmSource("no GPU driver");
  DcgmOptions dcgm_options;
  dcgm_options.update_interval_s = options.interval_s;
  return OpenDcgm(options.dcgm_library, dcgm_options);
}

AgentOptions WithShip(AgentOptions options, bool ship) {
  options.ship = ship;
  return options;
}

}  // namespace

NodeAgent::NodeAgent(NodeAgentOptions options, std::unique_ptr<Shipper> shipper)
    : options_(std::move(options)),
      shipper_(std::move(shipper)),
      proc_(options_.proc_root),
      cgroups_(options_.cgroup_root),
      gpu_(OpenNvml(options_.gpu_library)),
      dcgm_(OpenDcgmFor(*gpu_, options_)),
      kubelet_(options_.agent.kubernetes ? std::make_unique<Kubelet>(options_.kubelet) : nullptr),
      rapl_(options_.powercap_root, options_.proc_root),
      agent_(&proc_, &cgroups_, gpu_.get(), WithShip(options_.agent, shipper_ != nullptr)) {
  proc_.set_keep_stat_open(true);  // one pread per process per cycle, no open/close
  cgroups_.set_keep_open(true);    // likewise for the cgroups' counters
  agent_.set_dcgm(dcgm_.get());
  agent_.set_cpu_energy(&rapl_);
  agent_.set_kubelet(kubelet_.get());
  // How SLURM jobs' processes exit (the kubelet says it for containers); only for the real
  // /proc, whose pids the kernel's notifications name.
  if (!options_.agent.kubernetes && options_.proc_root == "/proc") {
    auto exits = ExitWatcher::Open();
    if (exits.ok()) {
      exits_ = std::move(*exits);
      MutexLock lock(mu_);
      agent_.set_exits(exits_.get());
    } else {
      exits_status_ = exits.status().message();
    }
  }
}

std::string NodeAgent::Metrics() {
  std::string out;
  {
    MutexLock lock(mu_);
    out = agent_.Metrics();
  }
  if (shipper_) {
    Shipper::Stats s = shipper_->stats();
    out += fmt::format(
        "# HELP rightsize_agent_batches_sent_total Telemetry batches the server has taken.\n"
        "# TYPE rightsize_agent_batches_sent_total counter\nrightsize_agent_batches_sent_total {}\n"
        "# HELP rightsize_agent_batches_dropped_total Telemetry batches given up (queue or spool "
        "full, refused by the server).\n# TYPE rightsize_agent_batches_dropped_total counter\n"
        "rightsize_agent_batches_dropped_total {}\n"
        "# HELP rightsize_agent_batches_resynced_total Batches renumbered above the server's last "
        "after a 409.\n# TYPE rightsize_agent_batches_resynced_total counter\n"
        "rightsize_agent_batches_resynced_total {}\n"
        "# HELP rightsize_agent_batches_queued Telemetry batches waiting to be sent.\n"
        "# TYPE rightsize_agent_batches_queued gauge\nrightsize_agent_batches_queued {}\n"
        "# HELP rightsize_agent_samples_made_total Samples put in telemetry batches.\n"
        "# TYPE rightsize_agent_samples_made_total counter\n"
        "rightsize_agent_samples_made_total {}\n"
        "# HELP rightsize_agent_samples_delivered_total Samples in batches the server has taken.\n"
        "# TYPE rightsize_agent_samples_delivered_total counter\n"
        "rightsize_agent_samples_delivered_total {}\n"
        "# HELP rightsize_agent_server_failovers_total Moves to the next --server after one "
        "could not be reached or answered 5xx.\n"
        "# TYPE rightsize_agent_server_failovers_total counter\n"
        "rightsize_agent_server_failovers_total {}\n",
        s.sent, s.dropped, s.resynced, s.queued, s.samples_made, s.samples_delivered, s.failovers);
  }
  return out;
}

std::vector<JobRecord> NodeAgent::Cycle(double now_s, double* next_ship_s,
                                        const Callbacks& callbacks,
                                        std::vector<DiagnosedRecord>* diagnosed) {
  std::vector<JobRecord> ended;
  std::vector<JobTelemetry> batch;
  {
    MutexLock lock(mu_);
    ended = agent_.Cycle(now_s, std::time(nullptr));
    *diagnosed = agent_.TakeDiagnoses();
    if (agent_.kubelet_error() != kubelet_error_) {
      kubelet_error_ = agent_.kubelet_error();
      if (callbacks.kubelet_error) callbacks.kubelet_error(kubelet_error_);
    }
    if (options_.agent.sample_stacks && !agent_.stacks_note().empty() && !stacks_warned_) {
      if (callbacks.stacks_off) callbacks.stacks_off(agent_.stacks_note());
      stacks_warned_ = true;
    }
    if (shipper_ && now_s >= *next_ship_s) {
      batch = agent_.TakeTelemetry();
      *next_ship_s = now_s + options_.ship_interval_s;
    }
  }
  if (shipper_ && !batch.empty()) {
    shipper_->Enqueue(std::move(batch), static_cast<int64_t>(std::time(nullptr)) * 1000);
  }
  return ended;
}

void NodeAgent::Run(const std::atomic<bool>& stop, const Callbacks& callbacks) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  double next_ship_s = options_.ship_interval_s;
  const double interval_s = options_.interval_s;
  while (!stop) {
    double now = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<DiagnosedRecord> diagnosed;
    std::vector<JobRecord> ended = Cycle(now, &next_ship_s, callbacks, &diagnosed);
    if (!ended.empty() && callbacks.ended) callbacks.ended(ended);
    if (!diagnosed.empty() && callbacks.diagnosed) callbacks.diagnosed(diagnosed);
    auto next =
        start + std::chrono::duration<double>((std::floor(now / interval_s) + 1) * interval_s);
    // A second at most at a time, to notice a stop (the signal may land on another thread):
    // one wake-up per cycle at the usual interval. 20 ms naps were a tenth of the agent's own
    // CPU in wake-ups, and quarter-second ones still three wake-ups a cycle for nothing.
    while (!stop && Clock::now() < next) {
      std::this_thread::sleep_until(
          std::min<Clock::time_point>(std::chrono::time_point_cast<Clock::duration>(next),
                                      Clock::now() + std::chrono::seconds(1)));
    }
  }
}

bool NodeAgent::FinishShipping(double timeout_s) {
  if (!shipper_) return true;
  {
    MutexLock lock(mu_);
    shipper_->Enqueue(agent_.TakeTelemetry(), static_cast<int64_t>(std::time(nullptr)) * 1000);
  }
  return shipper_->Flush(timeout_s);
}

StatusOr<ShipperOptions> AgentShipperOptions(const AgentShipSettings& s) {
  ShipperOptions so;
  so.url = s.url;
  so.more_urls = s.more_urls;
  so.agent = s.agent_name;
  if (!s.token.empty()) {
    so.token = s.token;
  } else if (!s.token_file.empty()) {
    std::ifstream in(s.token_file);
    if (!std::getline(in, so.token) || so.token.empty()) {
      return Status::NotFound("--token-file: cannot read a token from " + s.token_file);
    }
  } else {
    so.token = s.env_token;
  }
  if (s.no_spool) return so;
  so.spool_dir = s.spool;
  if (so.spool_dir.empty()) {
    so.spool_dir =
        s.root || !s.home ? "/var/spool/rightsize" : *s.home + "/.local/state/rightsize/spool";
    // One folder per agent identity: two agents never send each other's batches.
    std::string name = so.agent;
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
    }
    so.spool_dir += "/" + name;
  }
  return so;
}

}  // namespace rightsize

// ApiServer: the HTTP API, the dashboard and the Prometheus exposition of `rightsize serve`
// (docs/api.md is the contract).
//
// Stateless apart from its store: every request reads or writes the store, so several servers
// can share one. Requests run on cpp-httplib's worker threads; each takes a Store connection
// from a small pool (a Store is single-threaded; SQLite's WAL lets the readers run while one
// writes). Access (ServerConfig): agents post telemetry with a token; people are known by a
// header that a reverse proxy sets or by a token, see their own jobs, and admins see all.
// Bad input gets a 4xx with {"error": …} and a counter in /metrics; a handler never throws
// into the HTTP library: an unexpected exception (std::bad_alloc included) is a 500 with
// {"error": …} for that request only, counted in rightsize_http_internal_errors_total.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "model/model_cache.h"
#include "report/prices.h"
#include "server/telemetry.h"
#include "store/store.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace rightsize {

class PredictCache;

struct ServerConfig {
  bool open = true;  // no config file: no authentication, everyone is an admin
  // Agent token -> the agent names it may speak for (patterns: '*' matches any run of
  // characters, "gpu1/*"); an empty list (agent_tokens written as a plain list of tokens) lets
  // the token use any name. Either way batch numbers are kept per agent name AND token, so a
  // batch under another token can never block an agent's.
  std::map<std::string, std::vector<std::string>> agent_tokens;
  std::map<std::string, std::string> user_tokens;  // token -> user name
  std::set<std::string> admins;
  std::string user_header;  // e.g. "X-Remote-User", set by the site's reverse proxy
  // Addresses or CIDRs ("10.0.0.5", "10.1.0.0/16", "::1") whose user_header is believed; empty:
  // anyone's (with a warning at start, ConfigWarnings).
  std::vector<std::string> trusted_proxies;
  size_t max_batch_bytes = size_t{16} << 20;
  // tsdb_write_url, tsdb_query_url: samples in a Prometheus-compatible TSDB (StoreOptions);
  // `serve`'s --tsdb-*-url flags win over them.
  StoreOptions store;
};

// Reads the JSON config file (docs/api.md, "Access"). BadInput naming the field.
StatusOr<ServerConfig> LoadServerConfig(const std::string& path);
// What `serve` warns about at start (e.g. a user_header believed from any address).
std::vector<std::string> ConfigWarnings(const ServerConfig& config);
// True when `address` (an IPv4 or IPv6 address as text) is in `cidr` ("10.0.0.0/8", "::1").
bool AddressInCidr(const std::string& address, const std::string& cidr);

// The Kubernetes admission webhook's settings (`serve --admission-*`, src/k8s/admission.h).
struct AdmissionSettings {
  int deadline_ms = 250;  // later than this, the answer is "allowed, unchanged"
  int min_history = 3;    // finished runs of a workload before enforce patches it
  double floor_cpu_cores = 0.1;
  int64_t floor_memory_bytes = int64_t{256} << 20;
  int max_inflight = 64;  // more admissions at once are answered "unchanged" at once
  std::string cluster;    // whose model and history ("" = the store's only cluster)
};

struct ServerOptions {
  std::string db;      // the store's location
  StoreOptions store;  // passed to every OpenStore (the TSDB for samples, if any)
  ServerConfig config;
  PriceTable prices;
  std::function<int64_t()> now_s;  // the clock (tests set it); default: the system clock
  TelemetryLimits limits;
  AdmissionSettings admission;
  // Tests only: runs before every routed handler with the route's name; may throw (to show that
  // an exception, std::bad_alloc included, stays within its request).
  std::function<void(const std::string& route)> before_handler;
};

class ApiServer {
 public:
  explicit ApiServer(ServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Opens one store connection (so a bad --db fails at start, not at the first request).
  Status Init();
  // Adds every route to `http`.
  void Mount(httplib::Server& http);

  // The handlers, without HTTP (the load benchmark and the tests call them directly).
  struct Reply {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
  };
  struct Caller {
    std::string user;  // "" when unknown
    bool admin = false;
    bool agent = false;
    bool known = false;  // identified somehow (or the server is open)
    // An agent's token: a short stable name of it (the key of its agents' batch numbers; ""
    // on an open server) and the agent names it may use (nullptr: any).
    std::string agent_token_id;
    const std::vector<std::string>* agent_names = nullptr;
  };
  Reply Telemetry(const Caller& who, const std::string& body);
  Reply Jobs(const Caller& who, const std::multimap<std::string, std::string>& query);
  Reply Job(const Caller& who, const std::string& cluster, const std::string& id);
  Reply Series(const Caller& who, const std::string& cluster, const std::string& id,
               const std::multimap<std::string, std::string>& query);
  Reply Stacks(const Caller& who, const std::string& cluster, const std::string& id, bool json);
  Reply Phases(const Caller& who, const std::string& cluster, const std::string& id);
  Reply Predict(const Caller& who, const std::string& body);
  // POST /k8s/admit/{advise,enforce}: an AdmissionReview in, its response out (never denies;
  // overload, a missing store or model and the deadline answer "allowed, unchanged").
  // `arrived` is when the request was read (the deadline runs from it).
  Reply Admission(bool enforce, const std::string& body,
                  std::chrono::steady_clock::time_point arrived);
  Reply Report(const Caller& who, const std::multimap<std::string, std::string>& query);
  Reply Overview(const Caller& who);
  Reply Health();
  std::string Metrics();

  // Who is calling, from the headers (Authorization: Bearer, the proxy's user header, believed
  // only from trusted_proxies when that list is set) and the peer's address.
  Caller Identify(const std::function<std::string(const std::string&)>& header,
                  const std::string& remote_addr = "") const;

  // The HTTP front's events for /metrics: a request or connection that failed inside (any
  // exception), and requests or connections refused by its limits, by reason.
  void CountInternalError(const std::string& what);
  void CountRefused(const std::string& reason);

 private:
  class StoreLease;
  StatusOr<std::unique_ptr<Store>> Acquire();
  void Release(std::unique_ptr<Store> store);
  // The job if it exists and `who` may see it.
  StatusOr<JobRecord> VisibleJob(Store& store, const Caller& who, const std::string& cluster,
                                 const std::string& id);
  void Count(const std::string& route, int status, double seconds);
  // Adds what a stored batch's jobs used since their last batch to rightsize_energy_joules_total.
  void CountEnergy(const TelemetryBatch& batch);
  Reply OverviewOf(const Caller& who, bool with_waste);
  int64_t Now() const;

  // Group commit: request threads hand their decoded batches to one writer thread, which
  // stores everything that arrived meanwhile in one transaction (SQLite has one writer anyway;
  // many threads each committing would queue on its lock and sleep in its busy handler).
  struct PendingWrite;
  static constexpr size_t kMaxQueuedWrites = 2048;  // beyond: 503, the agents retry later
  // `busy` is set when the queue is full (the caller answers 503).
  StatusOr<bool> Write(const TelemetryBatch& batch, bool* busy);
  void WriterLoop();

  ServerOptions options_;
  // Each cluster's model, read once per version, not once per prediction (thread-safe).
  ModelCache models_;
  // The past of workloads the admission webhook reviewed, kept while the store does not change
  // (predict/predict.h; thread-safe).
  std::unique_ptr<PredictCache> predict_cache_;
  Mutex write_mu_;
  CondVar write_cv_;
  std::deque<PendingWrite*> writes_ GUARDED_BY(write_mu_);
  bool stop_writer_ GUARDED_BY(write_mu_) = false;
  std::thread writer_;
  Mutex pool_mu_;
  std::vector<std::unique_ptr<Store>> pool_ GUARDED_BY(pool_mu_);

  // The overview's waste figures per (cluster, viewer: "*" for admins), with when made.
  static constexpr int64_t kWasteCacheS = 60;
  Mutex waste_mu_;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, nlohmann::json>> waste_cache_
      GUARDED_BY(waste_mu_);

  Mutex metrics_mu_;
  // (route, status) -> count
  std::map<std::pair<std::string, int>, int64_t> requests_ GUARDED_BY(metrics_mu_);
  std::map<std::string, double> seconds_ GUARDED_BY(metrics_mu_);    // route -> total seconds
  std::map<std::string, int64_t> rejected_ GUARDED_BY(metrics_mu_);  // reason -> batches or entries
  std::atomic<int64_t> samples_{0}, batches_{0};
  std::atomic<int64_t> internal_errors_{0};
  std::map<std::string, int64_t> refused_ GUARDED_BY(metrics_mu_);  // reason -> count
  // Telemetry body bytes read (after decompression): what callers made the server inflate.
  std::atomic<int64_t> telemetry_body_bytes_{0};
  std::atomic<int> admissions_in_flight_{0};
  // (mode, outcome: advised, enforced, unchanged, overload) -> count
  std::map<std::pair<std::string, std::string>, int64_t> admissions_ GUARDED_BY(metrics_mu_);
  // Energy: (cluster, device "gpu"/"cpu") -> joules since start; and each running job's last
  // cumulative figure ((cluster, job, device) -> joules), dropped when its record ends.
  std::map<std::pair<std::string, std::string>, double> energy_j_ GUARDED_BY(metrics_mu_);
  std::map<std::tuple<std::string, std::string, std::string>, double> energy_seen_j_
      GUARDED_BY(metrics_mu_);
  static constexpr size_t kMaxEnergyJobs = 100'000;  // agents that died mid-job leave entries
};

}  // namespace rightsize

#include "server/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/json_text.h"
#include "core/units.h"
#include "k8s/admission.h"
#include "predict/predict.h"
#include "report/energy.h"
#include "report/job_card.h"
#include "report/job_phases.h"
#include "report/job_series.h"
#include "report/live.h"
#include "report/render.h"
#include "report/waste.h"
#include "server/assets.h"
#include "server/recent.h"

namespace rightsize {

namespace {

using Query = std::multimap<std::string, std::string>;

constexpr size_t kMaxSeriesMetrics = 32;

ApiServer::Reply Error(int status, const std::string& message) {
  return {status, JsonText(nlohmann::json{{"error", message}}), "application/json"};
}

ApiServer::Reply Json(const nlohmann::json& j, int status = 200) {
  return {status, JsonText(j), "application/json"};
}

// The HTTP status for a failed Status.
int HttpStatus(const Status& st) {
  switch (st.code()) {
    case Status::Code::kNotFound:
      return 404;
    case Status::Code::kBadInput:
    case Status::Code::kInvalidArgument:
      return 400;
    default:
      return 500;
  }
}

std::string Param(const Query& q, const std::string& key) {
  auto it = q.find(key);
  return it == q.end() ? std::string() : it->second;
}

// A time parameter: Unix seconds, an age ("14d") or a date ("2024-01-31").
StatusOr<std::optional<int64_t>> TimeParam(const Query& q, const std::string& key, int64_t now) {
  std::string v = Param(q, key);
  if (v.empty()) return std::optional<int64_t>();
  if (auto n = ParseDouble(v)) return std::optional<int64_t>(static_cast<int64_t>(*n));
  auto t = ParseTimeSpec(v, now);
  if (!t.ok()) {
    return Status::BadInput(
        fmt::format("{}: expected Unix seconds, an age like 14d or a date "
                    "like 2024-01-31, got '{}'",
                    key, v));
  }
  return std::optional<int64_t>(*t);
}

nlohmann::json OrNull(std::optional<double> v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

struct Efficiency {
  std::optional<double> cpu, memory, gpu, time;
};

Efficiency EfficiencyOf(const JobRecord& j) {
  Efficiency e;
  double elapsed = j.usage.elapsed_s.value_or(0);
  if (elapsed > 0 && j.usage.cpu_time_s && j.AllocatedCpus().value_or(0) > 0) {
    e.cpu = *j.usage.cpu_time_s / (elapsed * *j.AllocatedCpus());
  }
  auto peak = j.usage.peak_rss_bytes ? j.usage.peak_rss_bytes : j.usage.avg_rss_bytes;
  if (peak && j.AllocatedMemoryBytes().value_or(0) > 0) {
    e.memory = static_cast<double>(*peak) / static_cast<double>(*j.AllocatedMemoryBytes());
  }
  if (j.usage.gpu_util_pct && j.AllocatedGpus().value_or(0) > 0) {
    e.gpu = *j.usage.gpu_util_pct / 100.0;
  }
  if (elapsed > 0 && j.request.time_limit_s.value_or(0) > 0) {
    e.time = elapsed / static_cast<double>(*j.request.time_limit_s);
  }
  return e;
}

nlohmann::json EfficiencyJson(const Efficiency& e) {
  return {{"cpu", OrNull(e.cpu)},
          {"memory", OrNull(e.memory)},
          {"gpu", OrNull(e.gpu)},
          {"time", OrNull(e.time)}};
}

template <typename T>
nlohmann::json OrNullT(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// One row of the job list: what a table of jobs shows.
// `running_now` (server/recent.h): only a job running now has an elapsed time that grows with
// the clock; an UNKNOWN job of a 2002 trace has none.
nlohmann::json JobRow(const JobRecord& j, int64_t now, bool running_now) {
  Efficiency e = EfficiencyOf(j);
  std::optional<double> elapsed = j.usage.elapsed_s;
  if (!elapsed && running_now && j.start_time) {
    elapsed = static_cast<double>(std::max<int64_t>(0, now - *j.start_time));
  }
  return {{"cluster", j.cluster},
          {"job_id", j.job_id},
          {"user", j.request.user},
          {"account", j.request.account},
          {"partition", j.request.partition},
          {"name", j.request.job_name},
          {"state", j.outcome.state},
          {"running_now", running_now},
          {"source", j.source},
          {"start_time", OrNullT(j.start_time)},
          {"end_time", OrNullT(j.end_time)},
          {"elapsed_s", OrNull(elapsed)},
          {"cpus", OrNullT(j.AllocatedCpus())},
          {"cpu_efficiency", OrNull(e.cpu)},
          {"memory_bytes", OrNullT(j.AllocatedMemoryBytes())},
          {"peak_memory_bytes", OrNullT(j.usage.peak_rss_bytes)},
          {"memory_efficiency", OrNull(e.memory)},
          {"gpus", OrNullT(j.AllocatedGpus())},
          {"gpu_type", j.GpuType()},
          {"gpu_util_pct", OrNullT(j.usage.gpu_util_pct)},
          {"peak_gpu_memory_bytes", OrNullT(j.usage.peak_gpu_memory_bytes)}};
}

std::string Base64UrlEncode(std::string_view in) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (unsigned char c : in) {
    buf = (buf << 8) | c;
    bits += 8;
    while (bits >= 6) {
      out.push_back(kChars[(buf >> (bits - 6)) & 63]);
      bits -= 6;
    }
  }
  if (bits > 0) out.push_back(kChars[(buf << (6 - bits)) & 63]);
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view in) {
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-') {
      v = 62;
    } else if (c == '_') {
      v = 63;
    } else {
      return std::nullopt;
    }
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      out.push_back(static_cast<char>((buf >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The metric's limit for a job: what it holds of that resource.
// The address's bytes (16 for IPv6, 4 for IPv4 and IPv4-mapped IPv6); empty when malformed.
std::vector<unsigned char> AddressBytes(const std::string& text) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) return {buf, buf + 4};
  if (inet_pton(AF_INET6, text.c_str(), buf) != 1) return {};
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(kMapped, kMapped + 12, buf)) return {buf + 12, buf + 16};
  return {buf, buf + 16};
}

// The prediction as `who` may see it: other users' jobs left out of similar_jobs.
nlohmann::json PredictionFor(const ApiServer::Caller& who, nlohmann::json doc) {
  if (who.admin) return doc;
  auto it = doc.find("similar_jobs");
  if (it == doc.end() || !it->is_array()) return doc;
  nlohmann::json own = nlohmann::json::array();
  for (auto& j : *it) {
    if (j.is_object() && j.value("user", std::string()) == who.user) own.push_back(std::move(j));
  }
  *it = std::move(own);
  return doc;
}

}  // namespace

bool AddressInCidr(const std::string& address, const std::string& cidr) {
  size_t slash = cidr.find('/');
  std::vector<unsigned char> net = AddressBytes(cidr.substr(0, slash));
  std::vector<unsigned char> addr = AddressBytes(address);
  if (net.empty() || addr.size() != net.size()) return false;
  size_t bits = net.size() * 8;
  if (slash != std::string::npos) {
    auto b = ParseInt(cidr.substr(slash + 1));
    if (!b || *b < 0 || static_cast<size_t>(*b) > bits) return false;
    bits = static_cast<size_t>(*b);
  }
  for (size_t i = 0; i < bits; ++i) {
    unsigned mask = 0x80u >> (i % 8);
    if ((net[i / 8] & mask) != (addr[i / 8] & mask)) return false;
  }
  return true;
}

std::vector<std::string> ConfigWarnings(const ServerConfig& config) {
  std::vector<std::string> out;
  if (!config.open && !config.user_header.empty() && config.trusted_proxies.empty()) {
    out.push_back(fmt::format(
        "user_header {} is believed from ANY address that can connect: anyone who reaches the "
        "server directly can claim to be any user (an admin too). Set trusted_proxies to the "
        "reverse proxy's addresses (docs/api.md, \"Access\")",
        config.user_header));
  }
  return out;
}

StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::BadInput(path + ": expected a JSON object (see docs/api.md, \"Access\")");
  }
  ServerConfig c;
  c.open = false;
  auto strings = [&](const char* key, std::set<std::string>* out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::Ok();
    if (!it->is_array()) {
      return Status::BadInput(fmt::format("{}: {}: expected a list of strings", path, key));
    }
    for (const auto& v : *it) {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return Status::BadInput(
            fmt::format("{}: {}: expected non-empty strings, got {}", path, key, v.dump()));
      }
      out->insert(v.get<std::string>());
    }
    return Status::Ok();
  };
  if (auto it = j.find("agent_tokens"); it != j.end()) {
    // The list form (every token may use any agent name) is kept for older configs; the object
    // form binds each token to the agents it speaks for.
    if (it->is_array()) {
      std::set<std::string> tokens;
      RS_RETURN_IF_ERROR(strings("agent_tokens", &tokens));
      for (const auto& t : tokens) c.agent_tokens[t] = {};
    } else if (it->is_object()) {
      for (const auto& [token, names] : it->items()) {
        bool ok = !token.empty() && names.is_array() && !names.empty();
        for (const auto& n : names) ok = ok && n.is_string() && !n.get<std::string>().empty();
        if (!ok) {
          return Status::BadInput(fmt::format(
              "{}: agent_tokens: expected {{\"token\": [\"cluster/node\", \"cluster/*\", …]}} "
              "(the agent names each token may use) or a list of tokens",
              path));
        }
        auto& allowed = c.agent_tokens[token];
        for (const auto& n : names) allowed.push_back(n.get<std::string>());
      }
    } else {
      return Status::BadInput(fmt::format(
          "{}: agent_tokens: expected {{\"token\": [agent names]}} or a list of tokens", path));
    }
  }
  RS_RETURN_IF_ERROR(strings("admins", &c.admins));
  if (auto it = j.find("user_tokens"); it != j.end()) {
    if (!it->is_object()) {
      return Status::BadInput(path + ": user_tokens: expected {\"token\": \"user\"}");
    }
    for (const auto& [token, user] : it->items()) {
      if (token.empty() || !user.is_string() || user.get<std::string>().empty()) {
        return Status::BadInput(path + ": user_tokens: expected non-empty token -> user name");
      }
      c.user_tokens[token] = user.get<std::string>();
    }
  }
  if (auto it = j.find("user_header"); it != j.end()) {
    if (!it->is_string()) return Status::BadInput(path + ": user_header: expected a header name");
    c.user_header = it->get<std::string>();
  }
  if (auto it = j.find("trusted_proxies"); it != j.end()) {
    std::set<std::string> proxies;
    RS_RETURN_IF_ERROR(strings("trusted_proxies", &proxies));
    for (const auto& p : proxies) {
      // A CIDR must contain its own network address; a bare address, itself.
      std::string base = p.substr(0, p.find('/'));
      if (AddressBytes(base).empty() || !AddressInCidr(base, p)) {
        return Status::BadInput(fmt::format(
            "{}: trusted_proxies: expected IP addresses or CIDRs (10.0.0.5, 10.1.0.0/16, ::1), "
            "got '{}'",
            path, p));
      }
      c.trusted_proxies.push_back(p);
    }
  }
  if (auto it = j.find("max_batch_bytes"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1024) {
      return Status::BadInput(path + ": max_batch_bytes: expected a whole number >= 1024");
    }
    c.max_batch_bytes = it->get<size_t>();
  }
  for (auto [key, field] : {std::pair{"tsdb_write_url", &c.store.tsdb_write_url},
                            std::pair{"tsdb_query_url", &c.store.tsdb_query_url}}) {
    if (auto it = j.find(key); it != j.end()) {
      if (!it->is_string() || it->get<std::string>().empty()) {
        return Status::BadInput(
            fmt::format("{}: {}: expected a URL (docs/scale-tsdb.md)", path, key));
      }
      *field = it->get<std::string>();
    }
  }
  for (const auto& [key, value] : j.items()) {
    static const std::set<std::string> kKnown = {
        "agent_tokens",    "user_tokens",     "admins",         "user_header",
        "trusted_proxies", "max_batch_bytes", "tsdb_write_url", "tsdb_query_url"};
    if (!kKnown.count(key)) {
      return Status::BadInput(
          fmt::format("{}: unknown setting '{}' (known: agent_tokens, user_tokens, admins, "
                      "user_header, trusted_proxies, max_batch_bytes, tsdb_write_url, "
                      "tsdb_query_url)",
                      path, key));
    }
  }
  return c;
}

// A store connection from the pool, returned to it when the lease ends.
class ApiServer::StoreLease {
 public:
  StoreLease(ApiServer* server, std::unique_ptr<Store> store)
      : server_(server), store_(std::move(store)) {}
  ~StoreLease() {
    if (store_) server_->Release(std::move(store_));
  }
  StoreLease(const StoreLease&) = delete;
  StoreLease& operator=(const StoreLease&) = delete;
  Store& operator*() { return *store_; }
  Store* operator->() { return store_.get(); }

 private:
  ApiServer* server_;
  std::unique_ptr<Store> store_;
};

#define RS_LEASE(lease)                                                   \
  auto lease##_or = Acquire();                                            \
  if (!lease##_or.ok()) return Error(500, lease##_or.status().message()); \
  StoreLease lease(this, std::move(*lease##_or))

namespace {

// The dashboard's files gzipped once, at the first request: compressing app.js and uPlot for
// every page load cost more than serving them (and more still on a busy server).
std::string Gzip(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    return {};
  }
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

// nullptr for an asset gzip does not make smaller (or that failed to compress).
const std::string* GzippedAsset(std::string_view path) {
  static const std::map<std::string_view, std::string> gzipped = [] {
    std::map<std::string_view, std::string> m;
    for (const auto& [p, asset] : EmbeddedAssets()) {
      std::string gz = Gzip(asset.data);
      if (!gz.empty() && gz.size() < asset.data.size()) m.emplace(p, std::move(gz));
    }
    return m;
  }();
  auto it = gzipped.find(path);
  return it == gzipped.end() ? nullptr : &it->second;
}

}  // namespace

struct ApiServer::PendingWrite {
  const TelemetryBatch* batch = nullptr;
  // Its own: one shared condition variable woke every waiting request thread at each commit,
  // and the context switches cost more than the writes.
  CondVar cv;
  bool done = false;              // guarded by write_mu_
  StatusOr<bool> result = false;  // guarded by write_mu_
};

ApiServer::ApiServer(ServerOptions options)
    : options_(std::move(options)), predict_cache_(std::make_unique<PredictCache>()) {}

ApiServer::~ApiServer() {
  {
    MutexLock lock(write_mu_);
    stop_writer_ = true;
  }
  write_cv_.NotifyAll();
  if (writer_.joinable()) writer_.join();
}

Status ApiServer::Init() {
  RS_ASSIGN_OR_RETURN(auto store, OpenStore(options_.db, options_.store));
  Release(std::move(store));
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

StatusOr<bool> ApiServer::Write(const TelemetryBatch& batch, bool* busy) {
  PendingWrite w;
  w.batch = &batch;
  MutexLock lock(write_mu_);
  if (!writer_.joinable()) return Status::Internal("the server was not initialised");
  if (writes_.size() >= kMaxQueuedWrites) {
    *busy = true;
    return Status::IoError("the server is busy storing other batches: retry later");
  }
  writes_.push_back(&w);
  write_cv_.NotifyOne();  // only the writer waits on it
  while (!w.done) w.cv.Wait(lock);
  return std::move(w.result);
}

void ApiServer::WriterLoop() {
  std::unique_ptr<Store> store;
  MutexLock lock(write_mu_);
  while (true) {
    while (!stop_writer_ && writes_.empty()) write_cv_.Wait(lock);
    if (writes_.empty() && stop_writer_) break;
    // Everything that queued up while the last transaction ran, bounded so that one commit
    // never holds the lock for long.
    std::vector<PendingWrite*> group;
    while (!writes_.empty() && group.size() < 512) {
      group.push_back(writes_.front());
      writes_.pop_front();
    }
    lock.Unlock();
    std::vector<Store::TelemetryWrite> batch;
    for (PendingWrite* w : group) batch.push_back({w->batch->agent, w->batch->seq, w->batch->jobs});
    StatusOr<std::vector<bool>> stored = Status::Internal("no store");
    if (!store) {
      auto opened = OpenStore(options_.db, options_.store);
      if (opened.ok()) {
        store = std::move(*opened);
      } else {
        stored = opened.status();
      }
    }
    if (store) stored = store->WriteTelemetryGroup(batch);
    lock.Lock();
    for (size_t i = 0; i < group.size(); ++i) {
      group[i]->result =
          stored.ok() ? StatusOr<bool>((*stored)[i]) : StatusOr<bool>(stored.status());
      group[i]->done = true;
      // Under the lock: once woken, the request thread returns and its PendingWrite is gone.
      group[i]->cv.NotifyOne();
    }
  }
}

StatusOr<std::unique_ptr<Store>> ApiServer::Acquire() {
  {
    MutexLock lock(pool_mu_);
    if (!pool_.empty()) {
      auto s = std::move(pool_.back());
      pool_.pop_back();
      return s;
    }
  }
  return OpenStore(options_.db, options_.store);
}

void ApiServer::Release(std::unique_ptr<Store> store) {
  MutexLock lock(pool_mu_);
  if (pool_.size() < 64) pool_.push_back(std::move(store));
}

int64_t ApiServer::Now() const {
  return options_.now_s ? options_.now_s() : static_cast<int64_t>(std::time(nullptr));
}

ApiServer::Caller ApiServer::Identify(const std::function<std::string(const std::string&)>& header,
                                      const std::string& remote_addr) const {
  Caller c;
  const ServerConfig& cfg = options_.config;
  std::string auth = header("Authorization");
  std::string token;
  if (auth.rfind("Bearer ", 0) == 0) token = std::string(Trim(auth.substr(7)));
  bool trusted = cfg.trusted_proxies.empty() ||
                 std::any_of(cfg.trusted_proxies.begin(), cfg.trusted_proxies.end(),
                             [&](const std::string& p) { return AddressInCidr(remote_addr, p); });
  if (!cfg.user_header.empty() && trusted) c.user = header(cfg.user_header);
  if (cfg.open) {
    c.known = c.admin = c.agent = true;
    return c;
  }
  if (!token.empty()) {
    if (auto it = cfg.agent_tokens.find(token); it != cfg.agent_tokens.end()) {
      c.agent = true;
      c.agent_token_id = AgentTokenId(token);
      if (!it->second.empty()) c.agent_names = &it->second;
    }
    if (auto it = cfg.user_tokens.find(token); it != cfg.user_tokens.end()) c.user = it->second;
  }
  c.known = !c.user.empty();
  c.admin = c.known && cfg.admins.count(c.user) > 0;
  return c;
}

StatusOr<JobRecord> ApiServer::VisibleJob(Store& store, const Caller& who,
                                          const std::string& cluster, const std::string& id) {
  auto job = store.GetJob(cluster, id);
  if (!job.ok()) return job.status();
  if (!who.admin && job->request.user != who.user) {
    // The same answer as for a job that does not exist: ids are not a way to probe.
    return Status::NotFound(fmt::format("no job {}", id));
  }
  return job;
}

ApiServer::Reply ApiServer::Health() {
  auto store = Acquire();
  if (!store.ok()) {
    return Json({{"status", "unavailable"}, {"error", store.status().message()}}, 503);
  }
  StoreLease lease(this, std::move(*store));
  auto n = lease->CountJobs({});
  if (!n.ok()) return Json({{"status", "unavailable"}, {"error", n.status().message()}}, 503);
  return Json({{"status", "ok"}, {"version", RIGHTSIZE_VERSION}, {"jobs", *n}});
}

ApiServer::Reply ApiServer::Telemetry(const Caller& who, const std::string& body) {
  auto reject = [&](int status, const std::string& reason, const std::string& msg) {
    MutexLock lock(metrics_mu_);
    ++rejected_[reason];
    return Error(status, msg);
  };
  if (!who.agent) {
    return reject(401, "unauthorized",
                  "an agent token is required (Authorization: Bearer <token from agent_tokens>)");
  }
  TelemetryLimits limits = options_.limits;
  limits.now_s = Now();
  auto batch = DecodeTelemetry(body, limits);
  if (!batch.ok()) return reject(400, "malformed", batch.status().message());
  if (who.agent_names && !AgentNameAllowed(batch->agent, *who.agent_names)) {
    std::string allowed;
    for (const auto& n : *who.agent_names) allowed += (allowed.empty() ? "" : ", ") + n;
    return reject(403, "agent_name",
                  fmt::format("agent {}: this token may only send as {} (agent_tokens)",
                              batch->agent, allowed));
  }
  // A refused seq says where the agent stands, so that it can number its batch above the last
  // one stored (agent/shipper.h) instead of losing it.
  int64_t max_seq = limits.now_s * 1000 + limits.max_seq_ahead_ms;
  std::string key = AgentSeqKey(batch->agent, who.agent_token_id);
  auto refuse_seq = [&](const std::string& reason, const std::string& msg) {
    int64_t last = 0;
    if (auto store = Acquire(); store.ok()) {
      StoreLease lease(this, std::move(*store));
      if (auto l = lease->LastTelemetrySeq(key); l.ok()) last = *l;
    }
    {
      MutexLock lock(metrics_mu_);
      ++rejected_[reason];
    }
    fmt::print(stderr, "rightsize serve: telemetry of agent {} refused: {}\n", batch->agent, msg);
    return Json({{"error", msg},
                 {"reason", reason},
                 {"agent", batch->agent},
                 {"seq", batch->seq},
                 {"last_seq", last},
                 {"max_seq", max_seq}},
                409);
  };
  if (batch->seq > max_seq) {
    return refuse_seq(
        "seq_ahead",
        fmt::format("batch {} of agent {} is numbered more than {} s ahead of the "
                    "server's clock (seq is Unix milliseconds; at most {})",
                    batch->seq, batch->agent, limits.max_seq_ahead_ms / 1000, max_seq));
  }
  std::string agent = batch->agent;
  batch->agent = key;
  bool busy = false;
  auto stored = Write(*batch, &busy);
  batch->agent = agent;
  if (!stored.ok()) {
    // 503: the agent keeps the batch and retries with backoff.
    if (busy) {
      MutexLock lock(metrics_mu_);
      ++rejected_["busy"];
    }
    // A store or TSDB that is down or refuses (IoError) is unavailable too: 503, not a bug.
    bool unavailable = busy || stored.status().code() == Status::Code::kIoError;
    return Error(unavailable ? 503 : 500, stored.status().message());
  }
  if (!*stored) {
    return refuse_seq("replayed",
                      fmt::format("batch {} of agent {} is not above the last one stored: "
                                  "already received, or numbered below the agent's last (each "
                                  "batch's seq must be above the last one's)",
                                  batch->seq, batch->agent));
  }
  samples_ += batch->samples;
  ++batches_;
  CountEnergy(*batch);
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& r : batch->rejected) rejected.push_back({{"path", r.path}, {"error", r.error}});
  nlohmann::json out = {
      {"accepted",
       {{"jobs", batch->jobs.size()}, {"samples", batch->samples}, {"stacks", batch->stacks}}},
      {"rejected", rejected}};
  if (batch->rejected.empty()) return Json(out);
  {
    MutexLock lock(metrics_mu_);
    rejected_["invalid_entry"] += static_cast<int64_t>(batch->rejected.size());
  }
  out["error"] = fmt::format("{} of {} job entries rejected", batch->rejected.size(),
                             batch->rejected.size() + batch->jobs.size());
  return Json(out, 422);
}

ApiServer::Reply ApiServer::Jobs(const Caller& who, const Query& q) {
  int64_t now = Now();
  JobFilter f;
  f.cluster = Param(q, "cluster");
  f.user = Param(q, "user");
  f.account = Param(q, "account");
  f.state = Param(q, "state");
  for (char& c : f.state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!who.admin) {
    if (!f.user.empty() && f.user != who.user) return Json({{"jobs", nlohmann::json::array()}});
    f.user = who.user;
  }
  auto since = TimeParam(q, "since", now);
  if (!since.ok()) return Error(400, since.status().message());
  auto until = TimeParam(q, "until", now);
  if (!until.ok()) return Error(400, until.status().message());
  f.ended_since = *since;
  f.ended_until = *until;
  if (std::string e = Param(q, "efficiency_below"); !e.empty()) {
    auto v = ParseDouble(e);
    if (!v || *v < 0) {
      return Error(400, "efficiency_below: expected a number from 0 to 1, got '" + e + "'");
    }
    f.efficiency_below = *v;
  }
  JobPage page;
  if (std::string l = Param(q, "limit"); !l.empty()) {
    auto v = ParseInt(l);
    if (!v || *v < 1 || *v > 1000) return Error(400, "limit: expected 1 to 1000, got '" + l + "'");
    page.limit = static_cast<int>(*v);
  }
  if (std::string c = Param(q, "cursor"); !c.empty()) {
    auto raw = Base64UrlDecode(c);
    if (!raw) return Error(400, "cursor: expected the next_cursor of a previous page");
    page.after = *raw;
  }
  RS_LEASE(store);
  RunningNow running_now(*store, now);
  // Running jobs have no end time: since/until select them by start time instead.
  auto list = store->ListJobs(f, page);
  if (!list.ok()) return Error(HttpStatus(list.status()), list.status().message());
  if ((f.ended_since || f.ended_until) && !page.after &&
      (f.state.empty() || f.state == "RUNNING")) {
    JobFilter running = f;
    running.ended_since.reset();
    running.ended_until.reset();
    running.state = "RUNNING";
    auto r = store->ListJobs(running, JobPage{1000, std::nullopt});
    if (!r.ok()) return Error(500, r.status().message());
    std::vector<JobRecord> live;
    for (auto& j : r->jobs) {
      if (j.end_time || !j.start_time) continue;
      if (f.ended_since && *j.start_time < *f.ended_since) continue;
      if (f.ended_until && *j.start_time >= *f.ended_until) continue;
      auto is = running_now.Is(j);
      if (!is.ok()) return Error(500, is.status().message());
      if (*is) live.push_back(std::move(j));
    }
    list->jobs.insert(list->jobs.begin(), live.begin(), live.end());
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& j : list->jobs) {
    auto is = running_now.Is(j);
    if (!is.ok()) return Error(500, is.status().message());
    // state=RUNNING lists what the overview counts: the jobs running now.
    if (f.state == "RUNNING" && !*is) continue;
    rows.push_back(JobRow(j, now, *is));
  }
  nlohmann::json out = {{"jobs", rows}};
  if (list->next) out["next_cursor"] = Base64UrlEncode(*list->next);
  return Json(out);
}

ApiServer::Reply ApiServer::Job(const Caller& who, const std::string& cluster,
                                const std::string& id) {
  RS_LEASE(store);
  auto job = VisibleJob(*store, who, cluster, id);
  if (!job.ok()) return Error(HttpStatus(job.status()), job.status().message());
  // A running job's efficiency is its use so far, from its samples.
  auto live = WithUsageSoFar(*store, *job, Now());
  if (!live.ok()) return Error(500, live.status().message());
  nlohmann::json out = {{"job", *job}, {"efficiency", EfficiencyJson(EfficiencyOf(*live))}};
  RunningNow running_now(*store, Now());
  auto is = running_now.Is(*job);
  if (!is.ok()) return Error(500, is.status().message());
  out["summary"] = JobRow(*job, Now(), *is);
  auto diag = store->GetDiagnosis(job->cluster, job->job_id);
  // The advice and cost `rightsize job` prints, from the same card (report/job_card.h), told
  // the stored diagnosis as `rightsize job` is (a MemoryError is a job that ran out of memory).
  out["card"] = RenderJobCardJson(*live, options_.prices, diag.ok() ? diag->cls : "");
  out["card"].erase("job");
  out["energy"] = JobEnergyJson(*live, options_.prices);  // kWh and CO2e (report/energy.h)
  auto pred = store->GetPrediction(job->cluster, job->job_id);
  out["prediction"] = nullptr;
  if (pred.ok()) {
    auto doc = nlohmann::json::parse(pred->document, nullptr, false);
    // A prediction made for another user than the job's (stored on a job id before the job
    // arrived) is not shown to people: it is not about their job.
    bool about_this_job =
        who.admin || !doc.is_object() || doc.value("user", job->request.user) == job->request.user;
    if (!doc.is_discarded() && about_this_job) out["prediction"] = PredictionFor(who, doc);
  }
  out["diagnosis"] = nullptr;
  if (diag.ok()) {
    auto doc = nlohmann::json::parse(diag->document, nullptr, false);
    if (!doc.is_discarded()) out["diagnosis"] = doc;
  }
  auto metrics = store->SampleMetrics(job->cluster, job->job_id);
  if (!metrics.ok()) return Error(500, metrics.status().message());
  out["metrics"] = *metrics;
  auto stacks = store->GetStacks(job->cluster, job->job_id);
  out["has_stacks"] = stacks.ok() && !stacks->empty();
  return Json(out);
}

ApiServer::Reply ApiServer::Series(const Caller& who, const std::string& cluster,
                                   const std::string& id, const Query& q) {
  RS_LEASE(store);
  auto job = VisibleJob(*store, who, cluster, id);
  if (!job.ok()) return Error(HttpStatus(job.status()), job.status().message());
  std::vector<std::string> metrics;
  if (std::string m = Param(q, "metric"); !m.empty()) {
    std::stringstream ss(m);
    std::string one;
    std::set<std::string> seen;
    while (std::getline(ss, one, ',')) {
      if (!one.empty() && seen.insert(one).second) metrics.push_back(one);
    }
    // Each metric is up to 100,000 points: the answer's size is bounded by their number.
    if (metrics.size() > kMaxSeriesMetrics) {
      return Error(
          400, fmt::format("metric: at most {} names, got {}", kMaxSeriesMetrics, metrics.size()));
    }
  }  // none: every metric the job has
  auto num = [&](const char* key) -> StatusOr<std::optional<double>> {
    std::string v = Param(q, key);
    if (v.empty()) return std::optional<double>();
    auto d = ParseDouble(v);
    if (!d || !std::isfinite(*d) || *d < 0 || *d > 1e10) {
      return Status::BadInput(
          fmt::format("{}: expected Unix seconds (or seconds for step), got '{}'", key, v));
    }
    return std::optional<double>(*d);
  };
  auto from = num("from");
  auto to = num("to");
  auto step = num("step");
  for (auto* s : {&from, &to, &step}) {
    if (!s->ok()) return Error(400, s->status().message());
  }
  SeriesWindow window{std::move(metrics), *from, *to, *step};
  auto doc = JobSeriesJson(*store, *job, window, options_.prices, Now());
  if (!doc.ok()) return Error(HttpStatus(doc.status()), doc.status().message());
  return Json(*doc);
}

ApiServer::Reply ApiServer::Stacks(const Caller& who, const std::string& cluster,
                                   const std::string& id, bool json) {
  RS_LEASE(store);
  auto job = VisibleJob(*store, who, cluster, id);
  if (!job.ok()) return Error(HttpStatus(job.status()), job.status().message());
  auto stacks = store->GetStacks(job->cluster, job->job_id);
  if (!stacks.ok()) return Error(500, stacks.status().message());
  if (json) {
    int64_t total = 0;
    for (const auto& [s, n] : *stacks) total += n;
    return Json({{"stacks", *stacks}, {"samples", total}});
  }
  std::string out;
  for (const auto& [s, n] : *stacks) out += fmt::format("{} {}\n", s, n);
  return {200, out, "text/plain; charset=utf-8"};
}

// The job's phases from its samples (report/job_phases.h): computed on request, apart from the
// job document, so that the job page's first answer does not wait for a long job's series.
ApiServer::Reply ApiServer::Phases(const Caller& who, const std::string& cluster,
                                   const std::string& id) {
  RS_LEASE(store);
  auto job = VisibleJob(*store, who, cluster, id);
  if (!job.ok()) return Error(HttpStatus(job.status()), job.status().message());
  auto doc = JobPhasesJson(*store, *job);
  if (!doc.ok()) return Error(HttpStatus(doc.status()), doc.status().message());
  return Json({{"phases", *doc}});
}

ApiServer::Reply ApiServer::Predict(const Caller& who, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Error(400, "expected a JSON object with \"script\"");
  }
  PredictRequest in;
  in.script_text.emplace();
  std::string name;
  auto text = [&](const char* key, std::string* out) -> bool {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return true;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  std::string job_id;
  for (auto [key, out] :
       std::initializer_list<std::pair<const char*, std::string*>>{{"script", &*in.script_text},
                                                                   {"name", &name},
                                                                   {"cluster", &in.cluster},
                                                                   {"user", &in.user},
                                                                   {"account", &in.account},
                                                                   {"partition", &in.partition},
                                                                   {"job_id", &job_id}}) {
    if (!text(key, out)) return Error(400, fmt::format("{}: expected a string", key));
  }
  if (in.script_text->empty()) {
    return Error(400, "script: required (the job script's text)");
  }
  in.script = name.empty() ? "script" : name;  // sbatch's job name without -J
  if (auto it = j.find("args"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return Error(400, "args: expected a list of strings");
    for (const auto& a : *it) {
      if (!a.is_string()) return Error(400, "args: expected a list of strings");
      in.sbatch_args.push_back(a.get<std::string>());
    }
  }
  if (auto it = j.find("risk"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() <= 0 || it->get<double>() >= 0.5) {
      return Error(400, "risk: expected a number between 0 and 0.5");
    }
    in.risk = it->get<double>();
  }
  if (auto it = j.find("per_job_risk"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return Error(400, "per_job_risk: expected true or false");
    in.per_job_risk = it->get<bool>();
  }
  if (!who.admin) {
    if (!in.user.empty() && in.user != who.user) {
      return Error(403, "you may only predict your own jobs");
    }
    in.user = who.user;
  }
  in.now = Now();
  in.price_table = &options_.prices;
  RS_LEASE(store);
  auto out = PredictJob(*store, in, &models_);
  if (!out.ok()) return Error(HttpStatus(out.status()), out.status().message());
  out->doc = PredictionFor(who, std::move(out->doc));
  const nlohmann::json* pred = &out->doc;
  if (!job_id.empty()) {
    std::string cluster = pred->value("cluster", in.cluster);
    if (!who.admin) {
      // People store predictions on their own jobs only (a job not in the store yet may be
      // theirs: stored, and shown with the job only if the job turns out to be theirs).
      auto existing = store->GetJob(cluster, job_id);
      if (existing.ok() && existing->request.user != who.user) {
        return Error(403, fmt::format("job {} is not yours: a prediction is stored only on your "
                                      "own jobs (send no job_id to predict without storing)",
                                      job_id));
      }
    }
    StoredPrediction p;
    p.cluster = cluster;
    p.job_id = job_id;
    p.created_at = in.now;
    p.document = JsonText(*pred);
    Status st = store->PutPrediction(p);
    if (st.ok() && out->code) {  // the code, where the request named a folder to read it from
      StoredJobCode code = *out->code;
      code.job_id = job_id;
      code.created_at = in.now;
      st = store->PutJobCode(code);
    }
    if (!st.ok()) return Error(500, st.message());
  }
  return Json(*pred);
}

ApiServer::Reply ApiServer::Admission(bool enforce, const std::string& body,
                                      std::chrono::steady_clock::time_point arrived) {
  AdmissionMode mode = enforce ? AdmissionMode::kEnforce : AdmissionMode::kAdvise;
  nlohmann::json review = nlohmann::json::parse(body, nullptr, false);
  if (review.is_discarded() || !review.is_object()) {
    return Error(400, "expected an AdmissionReview (admission.k8s.io/v1) JSON object");
  }
  const AdmissionSettings& settings = options_.admission;
  auto counted = [&](const nlohmann::json& answer) {
    std::string outcome = "unchanged";
    const nlohmann::json& response = answer["response"];
    if (response.contains("auditAnnotations")) {
      outcome = response["auditAnnotations"].value("outcome", outcome);
    }
    MutexLock lock(metrics_mu_);
    ++admissions_[{std::string(AdmissionModeName(mode)), outcome}];
    return Json(answer);
  };
  // Counted while the prediction runs; past the bound, answered at once without the store.
  struct InFlight {
    std::atomic<int>& n;
    ~InFlight() { --n; }
  } in_flight{admissions_in_flight_};
  if (admissions_in_flight_.fetch_add(1) >= settings.max_inflight) {
    nlohmann::json answer = AllowUnchanged(
        review, fmt::format("rightsize: overloaded ({} admissions in flight): unchanged",
                            settings.max_inflight));
    answer["response"]["auditAnnotations"]["outcome"] = "overload";
    return counted(answer);
  }
  AdmissionOptions o;
  o.cluster = settings.cluster;
  o.deadline = std::chrono::milliseconds(settings.deadline_ms);
  o.min_history = settings.min_history;
  o.floor_cpu_cores = settings.floor_cpu_cores;
  o.floor_memory_bytes = settings.floor_memory_bytes;
  o.prices = &options_.prices;
  o.cache = predict_cache_.get();
  o.now_s = Now();
  o.arrived = arrived;
  auto store = Acquire();
  if (!store.ok()) {
    return counted(AllowUnchanged(
        review, fmt::format("rightsize: no store ({}): unchanged", store.status().message())));
  }
  StoreLease lease(this, std::move(*store));
  auto answer = Admit(*lease, &models_, o, mode, review);
  if (!answer.ok()) return Error(400, answer.status().message());
  return counted(*answer);
}

namespace {

// The report of the jobs `who` may see.
StatusOr<WasteReport> ReportFor(Store& store, const ApiServer::Caller& who,
                                const ReportOptions& opts, const PriceTable& prices) {
  if (who.admin) return BuildWasteReport(store, opts, prices);
  std::vector<JobRecord> jobs;
  JobFilter f;
  f.cluster = opts.cluster;
  f.user = who.user;
  f.ended_since = opts.since;
  f.ended_until = opts.until;
  RS_RETURN_IF_ERROR(store.ScanJobs(f, [&](const JobRecord& j) {
    jobs.push_back(j);
    return true;
  }));
  return BuildWasteReport(jobs, opts, prices);
}

}  // namespace

ApiServer::Reply ApiServer::Report(const Caller& who, const Query& q) {
  int64_t now = Now();
  ReportOptions opts;
  auto since = TimeParam(q, "since", now);
  if (!since.ok()) return Error(400, since.status().message());
  auto until = TimeParam(q, "until", now);
  if (!until.ok()) return Error(400, until.status().message());
  opts.since = since->value_or(now - int64_t{14} * 86400);
  opts.until = *until;
  opts.by = Param(q, "by");
  opts.cluster = Param(q, "cluster");
  RS_LEASE(store);
  // Without dates: the last 14 days, or the 14 days up to the last job that ended when none
  // ended in them (a store of old accounting), and the answer says so.
  std::optional<DataWindow> chosen;
  if (!*since && !*until) {
    JobFilter f;
    f.cluster = opts.cluster;
    if (!who.admin) f.user = who.user;
    auto w = DefaultWindow(*store, f, now, 14);
    if (!w.ok()) return Error(500, w.status().message());
    if (w->shifted) {
      opts.since = w->since;
      opts.until = w->until;
    }
    chosen = *w;
  }
  auto report = ReportFor(*store, who, opts, options_.prices);
  if (!report.ok()) return Error(HttpStatus(report.status()), report.status().message());
  // "What the queue would have done", as `rightsize report` and the MCP report tool give it. It
  // replays every job of the cluster, so only a report of every job (an admin's) has it.
  if (who.admin) AddQueueWhatIf(*store, &*report);
  nlohmann::json doc = RenderJson(*report);
  if (chosen) {
    doc["window"]["default"] = chosen->shifted ? "latest_with_data" : "last_14_days";
    doc["window"]["note"] = chosen->shifted ? nlohmann::json(chosen->note) : nlohmann::json();
  }
  return Json(doc);
}

ApiServer::Reply ApiServer::Overview(const Caller& who) { return OverviewOf(who, true); }

ApiServer::Reply ApiServer::OverviewOf(const Caller& who, bool with_waste) {
  int64_t now = Now();
  RS_LEASE(store);
  auto clusters = store->Clusters();
  if (!clusters.ok()) return Error(500, clusters.status().message());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& cluster : *clusters) {
    JobFilter f;
    f.cluster = cluster;
    f.state = "RUNNING";
    if (!who.admin) f.user = who.user;
    auto running = store->ListJobs(f, JobPage{10000, std::nullopt});
    if (!running.ok()) return Error(500, running.status().message());
    double a_cpus = 0, a_mem = 0, a_gpus = 0, a_gmem = 0, u_cpus = 0, u_mem = 0, u_gpus = 0,
           u_gmem = 0;
    int64_t n = 0;
    RunningNow running_now(*store, now);
    for (const auto& j : running->jobs) {
      // An old export's RUNNING rows are not running now (server/recent.h).
      auto is = running_now.Is(j);
      if (!is.ok()) return Error(500, is.status().message());
      if (!*is) continue;
      ++n;
      a_cpus += j.AllocatedCpus().value_or(0);
      a_mem += static_cast<double>(j.AllocatedMemoryBytes().value_or(0));
      int gpus = j.AllocatedGpus().value_or(0);
      a_gpus += gpus;
      a_gmem += options_.prices.GpuMemoryBytes(j.GpuType(), gpus);
      auto last = [&](const char* metric) {
        double v = 0;
        (void)store->ReadSamples(j.cluster, j.job_id, metric, (now - 120) * 1000,
                                 now * 1000 + 60000, [&](const Sample& s) { v = s.value; });
        return v;
      };
      u_cpus += last("cpu_cores");
      u_mem += last("memory_bytes");
      if (gpus > 0) {
        u_gpus += gpus * last("gpu_util_pct") / 100.0;
        u_gmem += last("gpu_memory_bytes");
      }
    }
    nlohmann::json c = {{"cluster", cluster},
                        {"running_jobs", n},
                        {"now",
                         {{"allocated",
                           {{"cpus", a_cpus},
                            {"memory_bytes", a_mem},
                            {"gpus", a_gpus},
                            {"gpu_memory_bytes", a_gmem}}},
                          {"used",
                           {{"cpus", u_cpus},
                            {"memory_bytes", u_mem},
                            {"gpus", u_gpus},
                            {"gpu_memory_bytes", u_gmem}}}}}};
    if (!with_waste) {
      out.push_back(std::move(c));
      continue;
    }
    // Waste over a day and a week reads every job that ended in it: computed at most once a
    // minute per cluster and viewer, however often dashboards poll.
    std::pair<std::string, std::string> key{cluster, who.admin ? std::string("*") : who.user};
    {
      MutexLock lock(waste_mu_);
      auto it = waste_cache_.find(key);
      if (it != waste_cache_.end() && now - it->second.first < kWasteCacheS) {
        c.update(it->second.second);
        out.push_back(std::move(c));
        continue;
      }
    }
    // The week is the last 7 days, or the 7 days up to the last job that ended when none ended
    // in them (old accounting), so the card of a cluster known only from history is not empty.
    JobFilter visible;
    visible.cluster = cluster;
    if (!who.admin) visible.user = who.user;
    auto week = DefaultWindow(*store, visible, now, 7);
    if (!week.ok()) return Error(500, week.status().message());
    nlohmann::json waste = nlohmann::json::object();
    for (auto [name, since, until] :
         {std::tuple<const char*, int64_t, int64_t>{"today", now - now % 86400, now + 1},
          {"week", week->since, week->until}}) {
      ReportOptions opts;
      opts.cluster = cluster;
      opts.since = since;
      opts.until = until;
      opts.top_n = 5;
      auto r = ReportFor(*store, who, opts, options_.prices);
      if (!r.ok()) return Error(500, r.status().message());
      nlohmann::json top = nlohmann::json::array();
      for (const auto& g : r->top_wasters) {
        top.push_back({{"user", g.key},
                       {"jobs", g.jobs},
                       {"wasted_dollars", g.wasted_dollars},
                       {"wasted_gpu_hours", g.wasted_gpu_hours},
                       {"wasted_core_hours", g.wasted_core_hours}});
      }
      waste[name] = {{"jobs", r->jobs},
                     {"wasted_gpu_hours", OrNull(r->gpu.wasted)},
                     {"wasted_core_hours", OrNull(r->cpu.wasted)},
                     {"wasted_gb_hours", OrNull(r->memory.wasted)},
                     {"wasted_dollars", OrNull(r->cost.wasted_dollars)},
                     {"top_wasters", top},
                     {"since", since},
                     {"until", until}};
    }
    waste["week"]["latest_with_data"] = week->shifted;
    waste["week"]["note"] = week->shifted ? nlohmann::json(week->note) : nlohmann::json();
    {
      MutexLock lock(waste_mu_);
      waste_cache_[key] = {now, waste};
    }
    c.update(waste);
    out.push_back(std::move(c));
  }
  return Json({{"clusters", out}, {"user", who.user}, {"admin", who.admin}});
}

void ApiServer::CountInternalError(const std::string& what) {
  ++internal_errors_;
  (void)what;  // the answer carries it; counting must not allocate much when memory is short
}

void ApiServer::CountRefused(const std::string& reason) {
  MutexLock lock(metrics_mu_);
  ++refused_[reason];
}

void ApiServer::CountEnergy(const TelemetryBatch& batch) {
  MutexLock lock(metrics_mu_);
  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    const JobTelemetry& t = batch.jobs[i];
    for (const char* device : {"gpu", "cpu"}) {
      auto key = std::make_tuple(t.job.cluster, t.job.job_id, std::string(device));
      std::string metric = fmt::format("{}_energy_j", device);
      auto it = t.samples.find(metric);
      // The agent's series is cumulative: what is new is the rise since its last batch. The
      // agent says where that batch ended (energy_before_j), so that a batch counts once among
      // replicas that take turns storing a job's batches; from an agent that does not, the
      // rise since the last batch this server saw.
      if (it != t.samples.end() && !it->second.empty()) {
        double now = it->second.back().value;
        auto seen = energy_seen_j_.find(key);
        double before = seen == energy_seen_j_.end() ? 0 : seen->second;
        if (i < batch.energy_before_j.size()) {
          if (auto b = batch.energy_before_j[i].find(metric); b != batch.energy_before_j[i].end()) {
            before = b->second;
          }
        }
        if (now > before) energy_j_[{t.job.cluster, device}] += now - before;
        if (seen != energy_seen_j_.end()) {
          seen->second = std::max(seen->second, now);
        } else if (energy_seen_j_.size() < kMaxEnergyJobs) {
          energy_seen_j_.emplace(key, now);
        }
      }
      if (t.job.end_time) energy_seen_j_.erase(key);
    }
  }
}

void ApiServer::Count(const std::string& route, int status, double seconds) {
  MutexLock lock(metrics_mu_);
  ++requests_[{route, status}];
  seconds_[route] += seconds;
}

std::string ApiServer::Metrics() {
  std::string out;
  {
    MutexLock lock(metrics_mu_);
    out +=
        "# HELP rightsize_http_requests_total HTTP requests by route and status.\n"
        "# TYPE rightsize_http_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += fmt::format("rightsize_http_requests_total{{route=\"{}\",code=\"{}\"}} {}\n",
                         key.first, key.second, n);
    }
    out +=
        "# HELP rightsize_http_request_seconds_total Time spent answering, by route.\n"
        "# TYPE rightsize_http_request_seconds_total counter\n";
    for (const auto& [route, s] : seconds_) {
      out += fmt::format("rightsize_http_request_seconds_total{{route=\"{}\"}} {}\n", route, s);
    }
    out +=
        "# HELP rightsize_telemetry_rejected_total Telemetry batches or entries refused, by "
        "reason.\n# TYPE rightsize_telemetry_rejected_total counter\n";
    for (const char* reason :
         {"unauthorized", "malformed", "too_large", "replayed", "invalid_entry"}) {
      auto it = rejected_.find(reason);
      out += fmt::format("rightsize_telemetry_rejected_total{{reason=\"{}\"}} {}\n", reason,
                         it == rejected_.end() ? 0 : it->second);
    }
    out +=
        "# HELP rightsize_http_refused_total Requests or connections refused or limited by the "
        "server's limits, by reason.\n# TYPE rightsize_http_refused_total counter\n";
    for (const char* reason : {"too_large", "per_address"}) {
      auto it = refused_.find(reason);
      out += fmt::format("rightsize_http_refused_total{{reason=\"{}\"}} {}\n", reason,
                         it == refused_.end() ? 0 : it->second);
    }
    out +=
        "# HELP rightsize_admissions_total Kubernetes admission reviews answered, by mode and "
        "outcome.\n# TYPE rightsize_admissions_total counter\n";
    for (const auto& [key, n] : admissions_) {
      out += fmt::format("rightsize_admissions_total{{mode=\"{}\",outcome=\"{}\"}} {}\n", key.first,
                         key.second, n);
    }
  }
  out += fmt::format(
      "# HELP rightsize_telemetry_samples_total Samples stored from agents.\n"
      "# TYPE rightsize_telemetry_samples_total counter\nrightsize_telemetry_samples_total {}\n"
      "# HELP rightsize_telemetry_batches_total Agent batches stored.\n"
      "# TYPE rightsize_telemetry_batches_total counter\nrightsize_telemetry_batches_total {}\n"
      "# HELP rightsize_http_internal_errors_total Requests or connections that failed inside "
      "the server (an exception, memory exhausted): each answered 500 or closed, alone.\n"
      "# TYPE rightsize_http_internal_errors_total counter\n"
      "rightsize_http_internal_errors_total {}\n"
      "# HELP rightsize_telemetry_body_bytes_total Telemetry body bytes read, after "
      "decompression.\n# TYPE rightsize_telemetry_body_bytes_total counter\n"
      "rightsize_telemetry_body_bytes_total {}\n",
      samples_.load(), batches_.load(), internal_errors_.load(), telemetry_body_bytes_.load());
  {
    MutexLock lock(metrics_mu_);
    out +=
        "# HELP rightsize_energy_joules_total Energy of the jobs agents watched since the server "
        "started, by cluster and device (gpu: NVML; cpu: the jobs' share of RAPL).\n"
        "# TYPE rightsize_energy_joules_total counter\n";
    for (const auto& [key, joules] : energy_j_) {
      out += fmt::format("rightsize_energy_joules_total{{cluster=\"{}\",device=\"{}\"}} {}\n",
                         LabelValue(key.first), key.second, joules);
    }
  }
  Caller admin;
  admin.admin = admin.known = true;
  Reply ov = OverviewOf(admin, false);
  if (ov.status == 200) {
    auto j = nlohmann::json::parse(ov.body, nullptr, false);
    std::string running;
    std::map<std::string, std::string> by_metric;  // metric name -> its sample lines
    for (const auto& c : j["clusters"]) {
      std::string name = LabelValue(c["cluster"].get<std::string>());
      running += fmt::format("rightsize_running_jobs{{cluster=\"{}\"}} {}\n", name,
                             c["running_jobs"].get<int64_t>());
      for (const char* r : {"cpus", "memory_bytes", "gpus", "gpu_memory_bytes"}) {
        for (const char* what : {"allocated", "used"}) {
          by_metric[fmt::format("rightsize_{}_{}", what, r)] +=
              fmt::format("rightsize_{}_{}{{cluster=\"{}\"}} {}\n", what, r, name,
                          c["now"][what][r].get<double>());
        }
      }
    }
    out +=
        "# HELP rightsize_running_jobs Jobs running now.\n# TYPE rightsize_running_jobs gauge\n" +
        running;
    for (const auto& [metric, lines] : by_metric) {
      bool held = metric.rfind("rightsize_allocated_", 0) == 0;
      out += fmt::format("# HELP {} What running jobs {} now.\n# TYPE {} gauge\n{}", metric,
                         held ? "hold" : "use", metric, lines);
    }
  }
  return out;
}

void ApiServer::Mount(httplib::Server& http) {
  auto caller = [this](const httplib::Request& req) {
    return Identify([&](const std::string& name) { return req.get_header_value(name); },
                    req.remote_addr);
  };
  auto send = [this](const std::string& route, httplib::Response& res, const Reply& r,
                     std::chrono::steady_clock::time_point start) {
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
    Count(route, r.status,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  // Wraps a handler: identifies the caller, refuses unknown people, turns exceptions into 500.
  auto route = [=, this](std::string name, bool people,
                         std::function<Reply(const httplib::Request&, const Caller&)> fn) {
    return [=, this](const httplib::Request& req, httplib::Response& res) {
      auto start = std::chrono::steady_clock::now();
      Caller who = caller(req);
      Reply r;
      if (people && !who.known) {
        r = Error(401, options_.config.user_header.empty()
                           ? "who are you? send Authorization: Bearer <token from user_tokens>"
                           : "who are you? the " + options_.config.user_header +
                                 " header (set by the proxy) or a user token is required");
      } else {
        // Whatever fails in a handler fails this request only (500, counted); the error's
        // text is built after the handler's memory is released.
        std::string failure;
        try {
          if (options_.before_handler) options_.before_handler(name);
          r = fn(req, who);
        } catch (const std::bad_alloc&) {
          failure =
              "out of memory answering this request: ask for less (a shorter range, a "
              "smaller limit)";
        } catch (const std::exception& e) {
          failure = std::string("internal error: ") + e.what();
        } catch (...) {
          failure = "internal error: unknown exception";
        }
        if (!failure.empty()) {
          CountInternalError(failure);
          r = Error(500, failure);
        }
      }
      send(name, res, r, start);
    };
  };
  auto query = [](const httplib::Request& req) {
    return Query(req.params.begin(), req.params.end());
  };

  http.Get("/healthz",
           route("/healthz", false, [this](const auto&, const auto&) { return Health(); }));
  http.Get("/metrics", route("/metrics", false, [this](const auto&, const auto&) {
             return Reply{200, Metrics(), "text/plain; version=0.0.4; charset=utf-8"};
           }));
  // Telemetry: the token is checked from the headers before a byte of the body is read, and the
  // body is read through a content receiver that stops at the cap, so neither a caller without a
  // token nor a gzip bomb can make the server inflate more than max_batch_bytes (and one chunk).
  http.Post("/api/v1/telemetry", [this, caller, send](const httplib::Request& req,
                                                      httplib::Response& res,
                                                      const httplib::ContentReader& reader) {
    auto start = std::chrono::steady_clock::now();
    Caller who = caller(req);
    Reply r;
    if (!who.agent) {
      r = Telemetry(who, "");                 // 401, counted
      res.set_header("Connection", "close");  // the unread body must not be read as a request
      send("/api/v1/telemetry", res, r, start);
      return;
    }
    std::string body;
    bool too_large = false;
    size_t cap = options_.config.max_batch_bytes;
    reader([&](const char* data, size_t n) {
      telemetry_body_bytes_ += static_cast<int64_t>(n);
      if (body.size() + n > cap) {
        too_large = true;
        return false;  // stops reading and inflating at once
      }
      body.append(data, n);
      return true;
    });
    if (too_large) {
      {
        MutexLock lock(metrics_mu_);
        ++rejected_["too_large"];
      }
      res.set_header("Connection", "close");
      r = Error(413, fmt::format("the batch is over {} bytes (after decompression): send smaller "
                                 "batches (max_batch_bytes)",
                                 cap));
    } else {
      std::string failure;  // as route()'s: this request only, counted
      try {
        r = Telemetry(who, body);
      } catch (const std::bad_alloc&) {
        failure = "out of memory storing this batch: send smaller batches";
      } catch (const std::exception& e) {
        failure = std::string("internal error: ") + e.what();
      } catch (...) {
        failure = "internal error: unknown exception";
      }
      if (!failure.empty()) {
        CountInternalError(failure);
        r = Error(500, failure);
      }
    }
    send("/api/v1/telemetry", res, r, start);
  });
  http.Get("/api/v1/jobs",
           route("/api/v1/jobs", true, [this, query](const auto& req, const auto& who) {
             return Jobs(who, query(req));
           }));
  http.Get(R"(/api/v1/jobs/([^/]+)/([^/]+)/series)",
           route("/api/v1/jobs/series", true, [this, query](const auto& req, const auto& who) {
             return Series(who, req.matches[1], req.matches[2], query(req));
           }));
  http.Get(R"(/api/v1/jobs/([^/]+)/([^/]+)/stacks)",
           route("/api/v1/jobs/stacks", true, [this](const auto& req, const auto& who) {
             return Stacks(who, req.matches[1], req.matches[2],
                           req.get_param_value("format") == "json");
           }));
  http.Get(R"(/api/v1/jobs/([^/]+)/([^/]+)/phases)",
           route("/api/v1/jobs/phases", true, [this](const auto& req, const auto& who) {
             return Phases(who, req.matches[1], req.matches[2]);
           }));
  http.Get(R"(/api/v1/jobs/([^/]+)/([^/]+))",
           route("/api/v1/jobs/job", true, [this](const auto& req, const auto& who) {
             return Job(who, req.matches[1], req.matches[2]);
           }));
  http.Get(R"(/api/v1/jobs/([^/]+))",
           route("/api/v1/jobs/job", true, [this](const auto& req, const auto& who) {
             return Job(who, "", req.matches[1]);
           }));
  http.Post("/api/v1/predict",
            route("/api/v1/predict", true,
                  [this](const auto& req, const auto& who) { return Predict(who, req.body); }));
  // The Kubernetes admission webhook: the apiserver posts AdmissionReviews here (one path per
  // mode, matched by the namespace label in the MutatingWebhookConfiguration). No caller
  // identity: the apiserver authenticates the server by its certificate.
  for (bool enforce : {false, true}) {
    std::string path = enforce ? "/k8s/admit/enforce" : "/k8s/admit/advise";
    http.Post(path, route(path, false, [this, enforce](const auto& req, const auto&) {
                return Admission(enforce, req.body, std::chrono::steady_clock::now());
              }));
  }
  http.Get("/api/v1/report",
           route("/api/v1/report", true, [this, query](const auto& req, const auto& who) {
             return Report(who, query(req));
           }));
  http.Get("/api/v1/overview",
           route("/api/v1/overview", true,
                 [this](const auto&, const auto& who) { return Overview(who); }));
  http.Get("/api/.*", route("/api/other", false, [](const auto& req, const auto&) {
             return Error(404, "no such endpoint: " + req.path + " (see docs/api.md)");
           }));
  http.Get("/(.*)", [](const httplib::Request& req, httplib::Response& res) {
    const auto& assets = EmbeddedAssets();
    auto it = assets.find(req.path);
    if (it == assets.end()) it = assets.find("/");  // the app routes by #hash; / for anything else
    if (it == assets.end()) {
      res.status = 404;
      res.set_content("the dashboard was not built into this binary", "text/plain");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("Vary", "Accept-Encoding");
    const std::string* gz = GzippedAsset(it->first);
    if (gz != nullptr &&
        req.get_header_value("Accept-Encoding").find("gzip") != std::string::npos) {
      // A fixed-length provider is sent as it is: the library compresses only bodies.
      res.set_header("Content-Encoding", "gzip");
      res.set_content_provider(gz->size(), std::string(it->second.content_type),
                               [gz](size_t offset, size_t length, httplib::DataSink& sink) {
                                 return sink.write(gz->data() + offset,
                                                   std::min(length, gz->size() - offset));
                               });
      return;
    }
    res.set_content(std::string(it->second.data), std::string(it->second.content_type).c_str());
  });
}

}  // namespace rightsize

// Hostile telemetry against a real server (issue 31): forged batch numbers, gzip bombs and
// implausible values. The server is a real ApiServer behind a real HttpFront on loopback; the
// agent side is the real Shipper.
#include "server/telemetry.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "agent/shipper.h"
#include "core/json_text.h"
#include "server/http_server.h"
#include "server/server.h"
#include "store/store.h"

namespace rightsize {
namespace {

std::string TempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("rightsize-telemetry-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A real server on 127.0.0.1 (any port), with the access config `config_json`.
class LiveServer {
 public:
  // `shared_db`: the store of another LiveServer (a second replica); else a new one.
  LiveServer(const std::string& name, const std::string& config_json, size_t max_batch = 0,
             const std::string& shared_db = "") {
    std::string config = TempPath(name + ".json");
    std::ofstream(config) << config_json;
    auto cfg = LoadServerConfig(config);
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    ServerOptions o;
    o.db = shared_db.empty() ? TempPath(name + ".db") : shared_db;
    if (shared_db.empty()) std::filesystem::remove(o.db);
    if (cfg.ok()) o.config = *cfg;
    if (max_batch) o.config.max_batch_bytes = max_batch;
    db_ = o.db;
    api_ = std::make_unique<ApiServer>(std::move(o));
    EXPECT_TRUE(api_->Init().ok());
    HttpServeOptions ho;
    ho.listen = "127.0.0.1:0";
    ho.threads = 8;
    auto front = HttpFront::Bind(*api_, ho);
    EXPECT_TRUE(front.ok()) << front.status().ToString();
    front_ = std::move(*front);
    thread_ = std::thread([this] { front_->Serve(); });
  }
  ~LiveServer() {
    front_->Stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(front_->port()); }
  int port() const { return front_->port(); }
  ApiServer& api() { return *api_; }
  const std::string& db() const { return db_; }

 private:
  std::string db_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpFront> front_;
  std::thread thread_;
};

// One batch's worth of a running job: one cpu_cores sample at `t_s`.
std::vector<JobTelemetry> OneSample(const std::string& job_id, double t_s, double value) {
  JobTelemetry t;
  t.job.cluster = "c1";
  t.job.job_id = job_id;
  t.job.request.user = "alice";
  t.job.outcome.state = "RUNNING";
  t.samples["cpu_cores"].push_back({static_cast<int64_t>(t_s * 1000), value});
  return {t};
}

int64_t StoredSamples(const std::string& db, const std::string& job_id) {
  auto store = OpenStore(db);
  EXPECT_TRUE(store.ok());
  int64_t n = 0;
  auto st = (*store)->ReadSamples("c1", job_id, "cpu_cores", 0, std::numeric_limits<int64_t>::max(),
                                  [&](const Sample&) { ++n; });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return n;
}

httplib::Result PostBatch(const std::string& url, const std::string& token,
                          const std::string& agent, int64_t seq, const std::string& job_id) {
  httplib::Client client(url);
  httplib::Headers h = {{"Authorization", "Bearer " + token}};
  double now_s = static_cast<double>(NowMs()) / 1000;
  auto body = JsonText(TelemetryBatchJson(agent, seq, OneSample(job_id, now_s, 1)));
  return client.Post("/api/v1/telemetry", h, body, "application/json");
}

// Sends `n` batches through a real Shipper and waits until they are delivered.
Shipper::Stats Ship(const std::string& url, const std::string& token, const std::string& agent,
                    const std::string& job_id, int n) {
  ShipperOptions so;
  so.url = url;
  so.token = token;
  so.agent = agent;
  so.timeout_s = 10;
  auto shipper = Shipper::Create(so);
  EXPECT_TRUE(shipper.ok());
  int64_t t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    (*shipper)->Enqueue(OneSample(job_id, static_cast<double>(t0) / 1000 - n + i, i), t0 + i);
  }
  EXPECT_TRUE((*shipper)->Flush(60));
  return (*shipper)->stats();
}

// Issue 31, defect 4: one forged batch numbered 2^63 - 1 under the real agent's name made the
// server refuse every later batch of the real agent, and the agent dropped them silently.
TEST(TelemetryIdentity, AForgedBatchNumberLosesNoRealBatch) {
  // The old list form of agent_tokens: any token may use any name.
  LiveServer server("forged", R"({"agent_tokens": ["real-token", "other-token"]})");
  const std::string agent = "c1/node1";
  // Another token, the real agent's name, the largest number: refused, with the reason.
  auto forged =
      PostBatch(server.url(), "other-token", agent, std::numeric_limits<int64_t>::max(), "f1");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 409) << forged->body;
  EXPECT_NE(forged->body.find("ahead of the server's clock"), std::string::npos) << forged->body;
  // A number the clock allows (half an hour ahead), sent with another token: kept apart from the
  // real agent's numbers, so it blocks nothing.
  auto near = PostBatch(server.url(), "other-token", agent, NowMs() + 1'800'000, "f2");
  ASSERT_TRUE(near);
  EXPECT_EQ(near->status, 200) << near->body;

  auto stats = Ship(server.url(), "real-token", agent, "real", 5);
  EXPECT_EQ(StoredSamples(server.db(), "real"), 5) << stats.last_error;
  EXPECT_EQ(stats.dropped, 0);

  // The real token itself (stolen, or a second agent of the same name) moves the agent's number
  // half an hour ahead: the real agent is refused, logs the server's reason, resyncs above it
  // and loses nothing.
  auto stolen = PostBatch(server.url(), "real-token", agent, NowMs() + 1'800'000, "f3");
  ASSERT_TRUE(stolen);
  EXPECT_EQ(stolen->status, 200) << stolen->body;
  stats = Ship(server.url(), "real-token", agent, "real2", 5);
  EXPECT_EQ(StoredSamples(server.db(), "real2"), 5) << stats.last_error;
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_NE(stats.last_error.find("not above the last one stored"), std::string::npos)
      << stats.last_error;
}

// With agent_tokens mapping each token to its agents, a token cannot speak for another's.
TEST(TelemetryIdentity, ATokenSpeaksOnlyForItsAgents) {
  LiveServer server("bound",
                    R"({"agent_tokens": {"gpu-token": ["gpu1/*"], "cpu-token": ["cpu1/n1"]}})");
  auto own = PostBatch(server.url(), "gpu-token", "gpu1/node7", NowMs(), "g1");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
  auto other = PostBatch(server.url(), "cpu-token", "gpu1/node7", NowMs() + 1000, "g2");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403) << other->body;
  EXPECT_NE(other->body.find("cpu1/n1"), std::string::npos) << other->body;
  EXPECT_EQ(StoredSamples(server.db(), "g2"), 0);

  // A malformed mapping fails with a message naming the setting.
  std::string bad = TempPath("bad.json");
  std::ofstream(bad) << R"({"agent_tokens": {"t": []}})";
  auto cfg = LoadServerConfig(bad);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("agent_tokens"), std::string::npos);
}

// A gzip stream of `segments` MiB of zeros, about 1 KB per MiB: each segment is the same
// deflate blocks after a full flush, so a 4 MB bomb (4 GiB inflated) costs one MiB to make. It
// has no trailer: a reader that stops at its cap never gets there.
std::string GzipBomb(int segments) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string zeros(size_t{1} << 20, '\0');
  std::string segment(size_t{64} << 10, '\0');
  z.next_in = reinterpret_cast<Bytef*>(zeros.data());
  z.avail_in = static_cast<uInt>(zeros.size());
  z.next_out = reinterpret_cast<Bytef*>(segment.data());
  z.avail_out = static_cast<uInt>(segment.size());
  EXPECT_EQ(deflate(&z, Z_FULL_FLUSH), Z_OK);
  segment.resize(segment.size() - z.avail_out);
  deflateEnd(&z);
  std::string bomb = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};  // gzip header, no name
  bomb.reserve(bomb.size() + segment.size() * segments);
  for (int i = 0; i < segments; ++i) bomb += segment;
  return bomb;
}

// POSTs `body` to the telemetry route on a raw socket, sending it from another thread while
// the answer is read, as browsers and curl do: a server that answers before reading the body
// (and closes) is heard even though the rest of the upload fails. Returns the status line and
// the answer's body ("" when none came).
std::pair<std::string, std::string> RawPost(int port, const std::string& headers,
                                            const std::string& body) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {"", ""};
  }
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string request =
      "POST /api/v1/telemetry HTTP/1.1\r\nHost: test\r\n" + headers +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  std::thread writer([&] {
    size_t sent = 0;
    while (sent < request.size()) {
      ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server answered and closed: the rest is not wanted
      sent += static_cast<size_t>(n);
    }
  });
  std::string answer;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    auto head_end = answer.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    auto cl = answer.find("Content-Length: ");
    if (cl != std::string::npos &&
        answer.size() >= head_end + 4 + std::stoul(answer.substr(cl + 16))) {
      break;
    }
  }
  ::shutdown(fd, SHUT_RDWR);
  writer.join();
  ::close(fd);
  auto line_end = answer.find("\r\n");
  auto head_end = answer.find("\r\n\r\n");
  if (line_end == std::string::npos || head_end == std::string::npos) return {"", ""};
  return {answer.substr(0, line_end), answer.substr(head_end + 4)};
}

int64_t Counter(const std::string& metrics, const std::string& name) {
  auto at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(metrics.substr(at + name.size() + 2));
}

// Energy: the agents' series are cumulative per job; the server's counter adds what is new in
// each batch, per cluster and device, and forgets a job once its record has ended.
TEST(TelemetryEnergy, TheClusterCounterAddsWhatEachBatchAdds) {
  LiveServer server("energy", R"({"agent_tokens": ["real-token"]})");
  httplib::Client client(server.url());
  httplib::Headers h = {{"Authorization", "Bearer real-token"}};
  const int64_t t0 = NowMs() - 60'000;
  auto batch = [&](int64_t seq, const std::string& job_id, std::vector<double> gpu_j, bool ended) {
    JobTelemetry t;
    t.job.cluster = "c1";
    t.job.job_id = job_id;
    t.job.request.user = "alice";
    t.job.outcome.state = ended ? "COMPLETED" : "RUNNING";
    if (ended) t.job.end_time = t0 / 1000 + 50;
    for (size_t i = 0; i < gpu_j.size(); ++i) {
      t.samples["gpu_energy_j"].push_back({t0 + seq * 10'000 + static_cast<int64_t>(i), gpu_j[i]});
    }
    t.samples["cpu_energy_j"].push_back({t0 + seq * 10'000, 2.5 * static_cast<double>(seq)});
    auto r =
        client.Post("/api/v1/telemetry", h, JsonText(TelemetryBatchJson("c1/node1", t0 + seq, {t})),
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  };
  batch(1, "e1", {1000, 2000}, false);
  batch(2, "e1", {4000}, false);
  batch(3, "e1", {5000}, true);
  batch(4, "e2", {100}, false);
  std::string metrics = server.api().Metrics();
  EXPECT_NE(metrics.find("# TYPE rightsize_energy_joules_total counter"), std::string::npos);
  EXPECT_NE(metrics.find("rightsize_energy_joules_total{cluster=\"c1\",device=\"gpu\"} 5100\n"),
            std::string::npos)
      << metrics;
  // e1: 2.5, 5, 7.5 cumulative (7.5 J); e2: 10 J.
  EXPECT_NE(metrics.find("rightsize_energy_joules_total{cluster=\"c1\",device=\"cpu\"} 17.5\n"),
            std::string::npos)
      << metrics;
}

// Issue 27: two replicas on one store. The agent's shipper moves to the second when the first
// stops, and the energy counters of the two add up to what the job used: the second replica,
// which never saw the job's earlier batches, counts only what its batches added (the agent says
// where its previous batch ended), not the job's whole cumulative figure again.
TEST(TelemetryEnergy, ReplicasTakingTurnsCountEachJouleOnce) {
  auto first = std::make_unique<LiveServer>("energy-a", R"({"agent_tokens": ["real-token"]})");
  LiveServer second("energy-b", R"({"agent_tokens": ["real-token"]})", 0, first->db());
  ShipperOptions so;
  so.url = first->url();
  so.more_urls = {second.url()};
  so.token = "real-token";
  so.agent = "c1/node1";
  so.timeout_s = 10;
  auto shipper = Shipper::Create(so);
  ASSERT_TRUE(shipper.ok()) << shipper.status().ToString();
  const int64_t t0 = NowMs() - 60'000;
  auto batch = [&](int i, double gpu_j) {
    JobTelemetry t;
    t.job.cluster = "c1";
    t.job.job_id = "e1";
    t.job.request.user = "alice";
    t.job.outcome.state = "RUNNING";
    t.samples["gpu_energy_j"].push_back({t0 + i * 1000, gpu_j});
    (*shipper)->Enqueue({t}, t0 + i);
    EXPECT_TRUE((*shipper)->Flush(30));
  };
  batch(0, 1000);
  batch(1, 1500);
  std::string first_metrics = first->api().Metrics();
  first.reset();  // the first replica goes away; the agent moves to the second
  batch(2, 2100);
  batch(3, 2400);
  auto counted = [](const std::string& metrics) {
    const std::string name = "rightsize_energy_joules_total{cluster=\"c1\",device=\"gpu\"} ";
    size_t at = metrics.find(name);
    return at == std::string::npos ? 0.0 : std::stod(metrics.substr(at + name.size()));
  };
  EXPECT_EQ(counted(first_metrics), 1500) << first_metrics;
  std::string second_metrics = second.api().Metrics();
  EXPECT_EQ(counted(second_metrics), 900) << second_metrics;  // 2400 - 1500, not 2400
  Shipper::Stats stats = (*shipper)->stats();
  EXPECT_EQ(stats.sent, 4);
  EXPECT_GE(stats.failovers, 1);
  EXPECT_EQ(stats.dropped, 0);
  auto store = OpenStore(second.db());
  ASSERT_TRUE(store.ok());
  int64_t stored = 0;
  ASSERT_TRUE((*store)
                  ->ReadSamples("c1", "e1", "gpu_energy_j", 0, std::numeric_limits<int64_t>::max(),
                                [&](const Sample&) { ++stored; })
                  .ok());
  EXPECT_EQ(stored, 4);
}

// Issue 31, defect 5: a 4 MB gzip bomb was inflated (~10 s of CPU) before the token was
// checked, and answered 413 instead of 401.
TEST(TelemetryBomb, RefusedBeforeInflatingAndCappedWhileInflating) {
  const size_t cap = size_t{1} << 20;
  LiveServer server("bomb", R"({"agent_tokens": ["real-token"]})", cap);
  std::string bomb = GzipBomb(4000);
  ASSERT_GT(bomb.size(), size_t{3} << 20);  // ~4 MB that inflate to ~4 GiB
  // The bomb's first MiB inflates to zeros (it is a real gzip stream).
  {
    z_stream z{};
    ASSERT_EQ(inflateInit2(&z, 16 + 15), Z_OK);
    std::string out(size_t{1} << 20, 'x');
    z.next_in = reinterpret_cast<Bytef*>(bomb.data());
    z.avail_in = 64 << 10;
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = inflate(&z, Z_NO_FLUSH);
    inflateEnd(&z);
    ASSERT_TRUE(rc == Z_OK || rc == Z_BUF_ERROR) << rc;
    EXPECT_EQ(z.avail_out, 0u);
    EXPECT_EQ(out.find_first_not_of('\0'), std::string::npos);
  }
  std::string gz = "Content-Encoding: gzip\r\n";
  auto [anonymous, anonymous_body] = RawPost(server.port(), gz, bomb);
  EXPECT_EQ(anonymous, "HTTP/1.1 401 Unauthorized") << anonymous_body;
  // Not one byte was inflated for a caller without a token.
  EXPECT_EQ(Counter(server.api().Metrics(), "rightsize_telemetry_body_bytes_total"), 0);

  auto [capped, capped_body] =
      RawPost(server.port(), gz + "Authorization: Bearer real-token\r\n", bomb);
  EXPECT_EQ(capped, "HTTP/1.1 413 Payload Too Large") << capped_body;
  EXPECT_NE(capped_body.find("\"error\""), std::string::npos) << capped_body;
  // Inflating stopped at the cap (one decompressed chunk past it at most), not at 4 GiB.
  int64_t inflated = Counter(server.api().Metrics(), "rightsize_telemetry_body_bytes_total");
  EXPECT_GT(inflated, static_cast<int64_t>(cap));
  EXPECT_LT(inflated, static_cast<int64_t>(cap + (size_t{1} << 20)));

  // And the server goes on answering.
  httplib::Client after(server.url());
  auto health = after.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// Issue 31, defect 1 for telemetry: one impossible number (1e300 s of CPU, 9e18 bytes, a
// negative or infinite sample, a time years away) rejects its entry with a message, never
// stored; the batch's other entries are kept.
TEST(TelemetryRanges, ImplausibleValuesRejectTheirEntryOnly) {
  int64_t now = NowMs() / 1000;
  auto entry = [&](const std::string& id, const std::string& job_extra,
                   const std::string& samples) {
    return R"({"job":{"cluster":"c1","job_id":")" + id + R"(","request":{"user":"alice"})" +
           job_extra + R"(},"samples":{)" + samples + "}}";
  };
  std::string good_sample = R"("cpu_cores":[[)" + std::to_string(now - 10) + ",2]]";
  auto at = [&](int64_t t, const std::string& v) {
    return "[[" + std::to_string(t) + "," + v + "]]";
  };
  std::vector<std::pair<std::string, std::string>> bad = {
      {entry("cpu", R"(,"usage":{"cpu_time_s":1e300})", good_sample), ".job.usage.cpu_time_s"},
      {entry("mem", R"(,"usage":{"peak_memory_bytes":9e18})", good_sample),
       ".job.usage.peak_memory_bytes"},
      {entry("eff", R"(,"allocation":{"cpus":2},"usage":{"elapsed_s":60,"cpu_time_s":1e8})",
             good_sample),
       ".job.usage.cpu_time_s"},
      {entry("neg", "", R"("memory_bytes":)" + at(now - 5, "-4096")), ".samples.memory_bytes[0]"},
      {entry("pct", "", R"("gpu_util_pct":)" + at(now - 5, "250")), ".samples.gpu_util_pct[0]"},
      {entry("big", "", R"("memory_bytes":)" + at(now - 5, "9e18")), ".samples.memory_bytes[0]"},
      {entry("future", "", R"("cpu_cores":)" + at(now + 30 * 86400, "1")), ".samples.cpu_cores[0]"},
      {entry("past", "", R"("cpu_cores":)" + at(now - 2 * 366 * 86400, "1")),
       ".samples.cpu_cores[0]"},
      {entry("end", R"(,"end_time":)" + std::to_string(now + 400 * 86400), good_sample),
       ".job.end_time"},
      {entry("start", R"(,"start_time":-5)", good_sample), ".job.start_time"},
  };
  std::string body = R"({"schema":"rightsize.telemetry/v1","agent":"c1/n1","seq":)" +
                     std::to_string(now * 1000) + R"(,"jobs":[)" + entry("ok", "", good_sample);
  for (const auto& [e, path] : bad) body += "," + e;
  body += "]}";

  std::string db = TempPath("ranges.db");
  std::filesystem::remove(db);
  ServerOptions o;
  o.db = db;
  ApiServer api(std::move(o));
  ASSERT_TRUE(api.Init().ok());
  ApiServer::Caller agent;
  agent.agent = agent.known = agent.admin = true;
  auto r = api.Telemetry(agent, body);
  ASSERT_EQ(r.status, 422) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["accepted"]["jobs"], 1);
  ASSERT_EQ(j["rejected"].size(), bad.size()) << r.body;
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(j["rejected"][i]["path"], fmt::format("jobs[{}]{}", i + 1, bad[i].second))
        << j["rejected"][i].dump();
    EXPECT_NE(j["rejected"][i]["error"].get<std::string>().find("expected"), std::string::npos);
  }
  // JSON has no NaN or infinity, and a number too large for a double is not JSON either: the
  // whole body is refused.
  std::string inf = R"({"schema":"rightsize.telemetry/v1","agent":"c1/n1","seq":)" +
                    std::to_string(now * 1000 + 1) + R"(,"jobs":[)" +
                    entry("inf", "", R"("cpu_cores":)" + at(now - 5, "1e400")) + "]}";
  EXPECT_EQ(api.Telemetry(agent, inf).status, 400);

  auto store = OpenStore(db);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->GetJob("c1", "ok").ok());
  EXPECT_FALSE((*store)->GetJob("c1", "inf").ok());
  for (const char* id :
       {"cpu", "mem", "eff", "neg", "inf", "pct", "big", "future", "past", "end", "start"}) {
    EXPECT_FALSE((*store)->GetJob("c1", id).ok()) << id << " was stored";
  }
}

}  // namespace
}  // namespace rightsize

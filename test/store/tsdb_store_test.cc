// The TSDB path of the store (store/tsdb_store.h) against real engines that each test starts in
// a temporary directory: Debian's victoria-metrics and prometheus (remote-write receiver on).
#include "store/tsdb_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "remote_write/remote_write.h"
#include "report/job_series.h"
#include "store/store.h"

namespace rightsize {

// Exact: the engines give back the very double that was sent.
bool operator==(const Sample& a, const Sample& b) { return a.t_ms == b.t_ms && a.value == b.value; }

namespace {

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// One engine process in a temp dir, killed (by its pid) at the end.
class Engine {
 public:
  Engine(const std::string& kind, const std::filesystem::path& dir) : kind_(kind), dir_(dir) {}
  ~Engine() { Stop(); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts it and waits until it answers (a few tries on other ports if one was taken).
  ::testing::AssertionResult Start() {
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      std::vector<std::string> args;
      std::string data = (dir_ / fmt::format("data{}", attempt)).string();
      std::string listen = fmt::format("127.0.0.1:{}", port_);
      if (kind_ == "victoria-metrics") {
        // The default -search.latencyOffset (30 s) on purpose: the store must see past it.
        args = {"/usr/bin/victoria-metrics", "-storageDataPath=" + data,
                "-httpListenAddr=" + listen, "-retentionPeriod=100y", "-loggerLevel=WARN"};
      } else {
        std::string config = (dir_ / "prometheus.yml").string();
        // Out-of-order samples (a batch sent again, a second batch overlapping the first)
        // are accepted within the window: docs/scale-tsdb.md says to set it.
        std::ofstream(config) << "storage:\n  tsdb:\n    out_of_order_time_window: 30d\n";
        args = {"/usr/bin/prometheus",
                "--config.file=" + config,
                "--storage.tsdb.path=" + data,
                "--web.listen-address=" + listen,
                "--web.enable-remote-write-receiver",
                "--storage.tsdb.retention.time=100y",
                "--log.level=warn"};
      }
      log_ = (dir_ / "engine.log").string();
      pid_ = ::fork();
      if (pid_ == 0) {
        FILE* f = std::freopen(log_.c_str(), "a", stdout);
        (void)f;
        ::dup2(::fileno(stdout), 2);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        std::_Exit(127);
      }
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(std::chrono::milliseconds(200));
      std::string ready = kind_ == "victoria-metrics" ? "/health" : "/-/ready";
      for (int i = 0; i < 300; ++i) {
        auto r = c.Get(ready);
        if (r && r->status == 200) return ::testing::AssertionSuccess();
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // exited (port taken?): try another port
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      Stop();
    }
    std::ifstream in(log_);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return ::testing::AssertionFailure() << kind_ << " did not start; its log:\n" << text;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // What VictoriaMetrics buffers becomes searchable now (Prometheus: at once anyway).
  void Flush() const {
    if (kind_ != "victoria-metrics") return;
    httplib::Client c("127.0.0.1", port_);
    (void)c.Get("/internal/force_flush");
  }

  std::string Base() const { return fmt::format("http://127.0.0.1:{}", port_); }
  StoreOptions Options() const { return {Base() + "/api/v1/write", Base()}; }

 private:
  std::string kind_;
  std::filesystem::path dir_;
  std::string log_;
  int port_ = -1;
  pid_t pid_ = -1;
};

JobTelemetry Job(const std::string& cluster, const std::string& id,
                 std::map<std::string, std::vector<Sample>> samples) {
  JobTelemetry jt;
  jt.job.cluster = cluster;
  jt.job.job_id = id;
  jt.job.source = "agent";
  jt.job.start_time = 1;
  jt.job.outcome.state = "RUNNING";
  jt.job.request.user = "alice";
  jt.samples = std::move(samples);
  jt.stacks = {{"main;train;step", 3}};
  return jt;
}

class TsdbStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("rightsize-tsdb-test-{}-{}", ::getpid(), name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    engine_ = std::make_unique<Engine>(GetParam(), dir_);
    ASSERT_TRUE(engine_->Start());
    auto store = OpenStore((dir_ / "rs.db").string(), engine_->Options());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    // An hour ago, on a whole second plus a few ms: the engines keep milliseconds.
    t0_ = (static_cast<int64_t>(std::time(nullptr)) - 3600) * 1000 + 123;
  }
  void TearDown() override {
    store_.reset();
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<Sample> Read(const std::string& metric, int64_t from_ms = 0,
                           int64_t to_ms = std::numeric_limits<int64_t>::max(),
                           const std::string& cluster = "c1", const std::string& job = "j1") {
    std::vector<Sample> out;
    Status st = store_->ReadSamples(cluster, job, metric, from_ms, to_ms,
                                    [&](const Sample& s) { out.push_back(s); });
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  }
  // Reads until `n` samples are there (VictoriaMetrics makes new series searchable within a
  // second or so, even after a flush), then what is there.
  std::vector<Sample> ReadWhen(size_t n, const std::string& metric, int64_t from_ms = 0,
                               int64_t to_ms = std::numeric_limits<int64_t>::max(),
                               const std::string& cluster = "c1", const std::string& job = "j1") {
    std::vector<Sample> got;
    for (int i = 0; i < 200; ++i) {
      engine_->Flush();
      got = Read(metric, from_ms, to_ms, cluster, job);
      if (got.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return got;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Store> store_;
  int64_t t0_ = 0;
};

TEST_P(TsdbStoreTest, ReadsBackTheExactSamplesAndKeepsTheRestInTheInnerStore) {
  // Values as the agent sends them (VictoriaMetrics keeps about 12 significant digits, and no
  // subnormal: docs/scale-tsdb.md).
  std::vector<Sample> mem = {{t0_, 1.5e9}, {t0_ + 1000, 1.5e9 + 0.25}, {t0_ + 2001, 428571428.5}};
  std::vector<Sample> cores = {{t0_, 0.125}, {t0_ + 1000, 2}, {t0_ + 2001, 0}};
  std::vector<Sample> odd = {{t0_, -1}, {t0_ + 500, 0.001}};
  std::vector<JobTelemetry> batch = {
      Job("c1", "j1", {{"memory_bytes", mem}, {"cpu_cores", cores}, {"gpu0/util.pct", odd}})};
  auto stored = store_->WriteTelemetry("node1", 10, batch);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_TRUE(*stored);

  EXPECT_EQ(ReadWhen(3, "memory_bytes"), mem);
  EXPECT_EQ(ReadWhen(3, "cpu_cores"), cores);
  EXPECT_EQ(ReadWhen(2, "gpu0/util.pct"), odd);
  // Both ends of the window count; the samples outside it do not.
  EXPECT_EQ(Read("memory_bytes", t0_ + 1000, t0_ + 2001), (std::vector<Sample>{mem[1], mem[2]}));
  EXPECT_EQ(Read("memory_bytes", t0_ + 1, t0_ + 1000), (std::vector<Sample>{mem[1]}));
  EXPECT_TRUE(Read("memory_bytes", t0_ + 3000, t0_ + 9000).empty());
  EXPECT_TRUE(Read("memory_bytes", 0, std::numeric_limits<int64_t>::max(), "c2").empty());
  EXPECT_TRUE(Read("no_such_metric").empty());

  auto metrics = store_->SampleMetrics("c1", "j1");
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  EXPECT_EQ(*metrics, (std::vector<std::string>{"cpu_cores", "gpu0/util.pct", "memory_bytes"}));
  auto none = store_->SampleMetrics("c1", "j2");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  // Records, stacks and the batch number are the inner store's.
  auto job = store_->GetJob("c1", "j1");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->request.user, "alice");
  auto stacks = store_->GetStacks("c1", "j1");
  ASSERT_TRUE(stacks.ok());
  EXPECT_EQ(stacks->at("main;train;step"), 3);
  EXPECT_EQ(*store_->LastTelemetrySeq("node1"), 10);

  // None of it went to the SQLite file's samples: it alone (no TSDB) has none.
  auto plain = OpenStore((dir_ / "rs.db").string());
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->SampleMetrics("c1", "j1")->empty());
  EXPECT_TRUE((*plain)->GetJob("c1", "j1").ok());
}

TEST_P(TsdbStoreTest, LabelValuesWithQuotesAndBackslashesAreEscaped) {
  std::string cluster = "lab \"west\"", job = "7\\8\n9";
  std::vector<Sample> mem = {{t0_, 42}};
  std::vector<JobTelemetry> batch = {Job(cluster, job, {{"memory_bytes", mem}})};
  ASSERT_TRUE(store_->WriteTelemetry("node1", 1, batch).ok());
  EXPECT_EQ(ReadWhen(1, "memory_bytes", 0, std::numeric_limits<int64_t>::max(), cluster, job), mem);
  EXPECT_EQ(*store_->SampleMetrics(cluster, job), std::vector<std::string>{"memory_bytes"});
}

TEST_P(TsdbStoreTest, SamplesOfTheLastSecondsAreVisible) {
  // VictoriaMetrics hides the last 30 s of a query at "now" by default: the live view's reads
  // (RunningNow: up to now + 60 s) must see them anyway.
  int64_t now_ms = static_cast<int64_t>(std::time(nullptr)) * 1000;
  std::vector<Sample> cores = {{now_ms - 5000, 1}, {now_ms - 4000, 2}};
  std::vector<JobTelemetry> batch = {Job("c1", "j1", {{"cpu_cores", cores}})};
  ASSERT_TRUE(store_->WriteTelemetry("node1", 1, batch).ok());
  EXPECT_EQ(ReadWhen(2, "cpu_cores", now_ms - 120000, now_ms + 60000), cores);
}

TEST_P(TsdbStoreTest, AReplayedBatchIsRefusedAndSendsNothing) {
  std::vector<Sample> first = {{t0_, 1}, {t0_ + 1000, 2}};
  std::vector<JobTelemetry> a = {Job("c1", "j1", {{"memory_bytes", first}})};
  ASSERT_TRUE(*store_->WriteTelemetry("node1", 5, a));
  // The same number (a retry after a lost answer) and a lower one, with other samples.
  std::vector<JobTelemetry> b = {Job("c1", "j1", {{"memory_bytes", {{t0_ + 5000, 99}}}})};
  auto again = store_->WriteTelemetry("node1", 5, b);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  auto older = store_->WriteTelemetry("node1", 4, b);
  ASSERT_TRUE(older.ok());
  EXPECT_FALSE(*older);
  // In one group: node2's batch is new, node1's 5 is not, node2's 3 after its 7 is not.
  std::vector<JobTelemetry> c = {Job("c1", "j2", {{"memory_bytes", {{t0_, 7}}}})};
  std::vector<Store::TelemetryWrite> group = {{"node2", 7, c}, {"node1", 5, b}, {"node2", 3, b}};
  auto stored = store_->WriteTelemetryGroup(group);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(*stored, (std::vector<bool>{true, false, false}));

  EXPECT_EQ(ReadWhen(1, "memory_bytes", 0, std::numeric_limits<int64_t>::max(), "c1", "j2"),
            (std::vector<Sample>{{t0_, 7}}));
  EXPECT_EQ(ReadWhen(2, "memory_bytes"), first);  // no 99
  EXPECT_EQ(*store_->LastTelemetrySeq("node1"), 5);
  EXPECT_EQ(*store_->LastTelemetrySeq("node2"), 7);
}

TEST_P(TsdbStoreTest, TwoBatchesOfOneSeriesMerge) {
  // The second batch starts at the same time as the first and interleaves with it (two
  // samples in one whole second): nothing is replaced, nothing lost.
  std::vector<Sample> one = {{t0_, 1}, {t0_ + 1000, 2}, {t0_ + 2000, 3}};
  std::vector<Sample> two = {{t0_, 1}, {t0_ + 500, 1.5}, {t0_ + 1500, 2.5}, {t0_ + 3000, 4}};
  std::vector<JobTelemetry> a = {Job("c1", "j1", {{"memory_bytes", one}})};
  std::vector<JobTelemetry> b = {Job("c1", "j1", {{"memory_bytes", two}})};
  ASSERT_TRUE(*store_->WriteTelemetry("node1", 1, a));
  ASSERT_TRUE(*store_->WriteTelemetry("node1", 2, b));
  std::vector<Sample> want = {{t0_, 1},          {t0_ + 500, 1.5}, {t0_ + 1000, 2},
                              {t0_ + 1500, 2.5}, {t0_ + 2000, 3},  {t0_ + 3000, 4}};
  EXPECT_EQ(ReadWhen(want.size(), "memory_bytes"), want);
}

// The job page's charts (report/job_series.h: a mean and a max per step) come from the engine's
// aggregates on the TSDB path: they must be what the embedded store answers for the same samples,
// for the page's own window and for windows whose last step is cut short or that are not whole
// milliseconds.
TEST_P(TsdbStoreTest, JobChartsAreThoseOfTheEmbeddedStore) {
  const int64_t s0 = t0_ / 1000;  // the job's start, a whole second
  std::map<std::string, std::vector<Sample>> samples;
  for (int64_t i = 0; i < 400; ++i) {
    // 1 Hz with a few ms of jitter, samples on some steps' first and last milliseconds (where
    // an engine's window [t - d, t] of Prometheus 2.x would take one twice: the store reads
    // those raw, docs/scale-tsdb.md).
    int64_t ms = (i * 37) % 1000;
    if (i % 5 == 0) ms = 0;
    if (i % 11 == 0) ms = 999;
    int64_t t = (s0 + i) * 1000 + ms;
    samples["cpu_cores"].push_back({t, static_cast<double>((i * 7) % 13) / 4});
    if (i < 100 || i > 160) samples["memory_bytes"].push_back({t, 1e9 + static_cast<double>(i)});
    if (i % 3 == 0) samples["gpu_util_pct"].push_back({t + 500, static_cast<double>(i % 101)});
  }
  JobTelemetry jt = Job("c1", "j1", samples);
  jt.job.start_time = s0;
  jt.job.end_time = s0 + 300;  // samples past the end (and past the page's window) too
  jt.job.outcome.state = "COMPLETED";
  std::vector<JobTelemetry> batch = {jt};
  ASSERT_TRUE(*store_->WriteTelemetry("node1", 1, batch));
  auto embedded = OpenStore(":memory:");
  ASSERT_TRUE(embedded.ok());
  ASSERT_TRUE(*(*embedded)->WriteTelemetry("node1", 1, batch));
  for (const auto& [m, v] : samples) ASSERT_EQ(ReadWhen(v.size(), m).size(), v.size()) << m;
  auto job = store_->GetJob("c1", "j1");
  ASSERT_TRUE(job.ok());

  const double s = static_cast<double>(s0);
  std::vector<SeriesWindow> windows = {
      {},                                       // the page's first call: the job + 60 s, 1 s steps
      {{}, s, s + 301.5, 4},                    // 4 s steps, the last one cut at `to`
      {{}, s + 10, s + 399, 10},                // 10 s steps, the last one cut 1 s short
      {{}, s + 5, s + 105, 9.091},              // 11 steps, `to` their last millisecond
      {{"memory_bytes"}, s + 2.5, s + 200, 7},  // from on a half second
      {{}, s, s + 300, 2.0005},                 // steps that are not whole milliseconds
      {{"cpu_cores"}, s, s + 400, 0.02},        // 20,000 steps
      {{"cpu_cores"}, s + 5, s + 5, 1},         // one millisecond
  };
  for (size_t w = 0; w < windows.size(); ++w) {
    SCOPED_TRACE(fmt::format("window {}", w));
    auto want = JobSeriesJson(**embedded, *job, windows[w], PriceTable{}, s0 + 1000);
    auto got = JobSeriesJson(*store_, *job, windows[w], PriceTable{}, s0 + 1000);
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)["from"], (*want)["from"]);
    EXPECT_EQ((*got)["to"], (*want)["to"]);
    EXPECT_EQ((*got)["step"], (*want)["step"]);
    ASSERT_EQ((*got)["series"].size(), (*want)["series"].size());
    size_t points = 0;
    for (const auto& [m, want_points] : (*want)["series"].items()) {
      SCOPED_TRACE(m);
      const auto& got_points = (*got)["series"][m];
      ASSERT_EQ(got_points.size(), want_points.size());
      points += want_points.size();
      for (size_t i = 0; i < want_points.size(); ++i) {
        EXPECT_EQ(got_points[i][0], want_points[i][0]) << "point " << i;
        // The mean: the same sum, perhaps added in another order.
        double g = got_points[i][1], e = want_points[i][1];
        EXPECT_NEAR(g, e, 1e-12 * std::max(1.0, std::abs(e))) << "point " << i;
        EXPECT_EQ(got_points[i][2], want_points[i][2]) << "point " << i;
      }
    }
    EXPECT_GT(points, 0u);
  }
}

TEST_P(TsdbStoreTest, AnEngineThatIsDownOrRefusesIsAnErrorAndNothingIsCommitted) {
  std::vector<JobTelemetry> batch = {Job("c1", "j1", {{"memory_bytes", {{t0_, 1}}}})};
  // A path the engine does not serve: it refuses (404/400).
  StoreOptions wrong = engine_->Options();
  wrong.tsdb_write_url = engine_->Base() + "/api/v1/no-such-write";
  auto refusing = OpenStore((dir_ / "rs.db").string(), wrong);
  ASSERT_TRUE(refusing.ok());
  auto st = (*refusing)->WriteTelemetry("node1", 1, batch);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), Status::Code::kIoError);
  EXPECT_NE(st.status().message().find("refused 1 samples: HTTP 4"), std::string::npos)
      << st.status().message();
  EXPECT_EQ(*store_->LastTelemetrySeq("node1"), 0);
  EXPECT_FALSE(store_->GetJob("c1", "j1").ok());

  // The engine stopped: writes and reads fail with where and why; the batch can be sent again.
  engine_->Stop();
  auto down = store_->WriteTelemetry("node1", 1, batch);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Status::Code::kIoError);
  EXPECT_NE(down.status().message().find("cannot send 1 samples to the TSDB at " + engine_->Base() +
                                         "/api/v1/write"),
            std::string::npos)
      << down.status().message();
  EXPECT_EQ(*store_->LastTelemetrySeq("node1"), 0);
  EXPECT_FALSE(store_->GetJob("c1", "j1").ok());
  Status read = store_->ReadSamples("c1", "j1", "memory_bytes", 0, 1, [](const Sample&) {});
  EXPECT_EQ(read.code(), Status::Code::kIoError);
  EXPECT_NE(read.message().find("cannot read samples from the TSDB at " + engine_->Base()),
            std::string::npos)
      << read.message();
  EXPECT_FALSE(store_->SampleMetrics("c1", "j1").ok());

  ASSERT_TRUE(engine_->Start());  // a fresh engine on another port; the retry lands
  auto store = OpenStore((dir_ / "rs.db").string(), engine_->Options());
  ASSERT_TRUE(store.ok());
  store_ = std::move(*store);
  auto retry = store_->WriteTelemetry("node1", 1, batch);
  ASSERT_TRUE(retry.ok()) << retry.status().message();
  EXPECT_TRUE(*retry);
  EXPECT_EQ(ReadWhen(1, "memory_bytes"), (std::vector<Sample>{{t0_, 1}}));
}

INSTANTIATE_TEST_SUITE_P(Engines, TsdbStoreTest,
                         ::testing::Values("victoria-metrics", "prometheus"), [](const auto& info) {
                           return info.param == "prometheus" ? std::string("Prometheus")
                                                             : std::string("VictoriaMetrics");
                         });

TEST(TsdbStoreOpenTest, BadUrlsAreClearErrors) {
  auto only_one = OpenStore(":memory:", {"http://127.0.0.1:8428/api/v1/write", ""});
  ASSERT_FALSE(only_one.ok());
  EXPECT_NE(only_one.status().message().find("needs both"), std::string::npos);
  auto no_scheme = OpenStore(":memory:", {"vm:8428/api/v1/write", "http://vm:8428"});
  ASSERT_FALSE(no_scheme.ok());
  EXPECT_EQ(no_scheme.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(no_scheme.status().message().find("'vm:8428/api/v1/write'"), std::string::npos);
  auto no_path = OpenStore(":memory:", {"http://vm:8428", "http://vm:8428"});
  ASSERT_FALSE(no_path.ok());
  EXPECT_NE(no_path.status().message().find("has no path"), std::string::npos);
}

TEST(TsdbStoreOpenTest, MetricNamesMapBothWays) {
  EXPECT_EQ(TsdbMetricName("memory_bytes"), "rightsize_job_memory_bytes");
  EXPECT_EQ(TsdbMetricName("gpu0/util.pct"), "rightsize_job_gpu0:2futil:2epct");
  for (const char* m : {"memory_bytes", "gpu0/util.pct", "a:b", "ü"}) {
    EXPECT_EQ(MetricOfTsdbName(TsdbMetricName(m)), std::string(m));
  }
  EXPECT_EQ(MetricOfTsdbName("node_cpu_seconds_total"), std::nullopt);
  EXPECT_EQ(MetricOfTsdbName("rightsize_job_a:zz"), std::nullopt);
}

}  // namespace
}  // namespace rightsize

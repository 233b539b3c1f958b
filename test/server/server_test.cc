// The server's pieces without HTTP: decoding agents' batches, the store's telemetry tables,
// and the API handlers' answers (visibility, series buckets). The HTTP path, access config,
// TLS and a real agent are in test/cli/serve_cli_test.sh.
#include "server/server.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/job.h"
#include "report/live.h"
#include "server/telemetry.h"
#include "store/store.h"

namespace rightsize {
namespace {

std::string TempDb(const char* name) {
  auto p = std::filesystem::temp_directory_path() /
           (std::string("rightsize-server-test-") + name + "-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

TEST(JobRecordFromJson, RoundTripsWhatToJsonWrites) {
  JobRecord j;
  j.cluster = "c";
  j.job_id = "12_3";
  j.start_time = 1700000000;
  j.end_time = 1700003600;
  j.request.user = "alice";
  j.request.cpus = 4;
  j.request.memory_bytes = int64_t{8} << 30;
  j.request.memory_scope = MemoryScope::kPerNode;
  j.usage.peak_rss_bytes = int64_t{3} << 30;
  j.usage.cpu_time_s = 1234.5;
  j.outcome.state = "COMPLETED";
  j.outcome.exit_code = 0;
  auto back = JobRecordFromJson(nlohmann::json(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(nlohmann::json(*back), nlohmann::json(j));
}

TEST(JobRecordFromJson, NamesTheWrongField) {
  auto j = nlohmann::json::parse(R"({"cluster":"c","job_id":"1","request":{"cpus":"four"}})");
  auto r = JobRecordFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("request.cpus: expected a number"), std::string::npos)
      << r.status().message();
  j = nlohmann::json::parse(R"({"cluster":"c","job_id":"1","usage":{"peak_memory_bytes":1e30}})");
  r = JobRecordFromJson(j);
  ASSERT_FALSE(r.ok());  // would overflow int64: refused, not undefined behaviour
  EXPECT_NE(r.status().message().find("usage.peak_memory_bytes"), std::string::npos);
  EXPECT_FALSE(JobRecordFromJson(nlohmann::json::parse(R"({"job_id":"1"})")).ok());
}

TEST(DecodeTelemetry, KeepsValidEntriesAndSaysWhereTheOthersWentWrong) {
  auto b = DecodeTelemetry(R"({"schema":"rightsize.telemetry/v1","agent":"n1","seq":3,"jobs":[
    {"job":{"cluster":"c","job_id":"1"},"samples":{"cpu_cores":[[100.5,2],[99,1]]},
     "stacks":{"a;b":3}},
    {"job":{"cluster":"c","job_id":"2"},"samples":{"cpu_cores":[[100,null]]}},
    {"job":{"cluster":"c","job_id":"3"},"stacks":{"a;b":-1}},
    {"job":{"cluster":"c","job_id":"4"},"samples":{"bad name!":[]}},
    {"job":{"cluster":"c","job_id":"5"},"samples":{"m":[[1700000000000,1]]}}]})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->agent, "n1");
  EXPECT_EQ(b->seq, 3);
  ASSERT_EQ(b->jobs.size(), 1u);
  const auto& s = b->jobs[0].samples.at("cpu_cores");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].t_ms, 99000);  // sorted by time
  EXPECT_EQ(s[1].t_ms, 100500);
  EXPECT_EQ(b->jobs[0].job.source, "agent");
  EXPECT_EQ(b->samples, 2);
  ASSERT_EQ(b->rejected.size(), 4u);
  EXPECT_EQ(b->rejected[0].path, "jobs[1].samples.cpu_cores[0]");
  EXPECT_EQ(b->rejected[1].path, "jobs[2].stacks[\"a;b\"]");
  EXPECT_EQ(b->rejected[2].path, "jobs[3].samples");
  // Milliseconds where seconds belong: a unit mistake, not a date in the year 55,000.
  EXPECT_EQ(b->rejected[3].path, "jobs[4].samples.m[0]");
}

// A failed pod is diagnosed on its node, where its logs are: the diagnosis travels with its
// record, and the server keeps it where `rightsize diagnose` and the dashboard read it.
TEST(DecodeTelemetry, AnAgentsDiagnosisIsKeptWithTheJob) {
  auto b = DecodeTelemetry(R"({"schema":"rightsize.telemetry/v1","agent":"n1","seq":4,"jobs":[
    {"job":{"cluster":"c","job_id":"ml/etl-x7k2p/main","end_time":1700000000},
     "diagnosis":{"schema":"rightsize.diagnosis/v1","class":"import_error","confidence":0.9,
                  "summary":"No module named 'torchvision'"}},
    {"job":{"cluster":"c","job_id":"2"},"diagnosis":{"schema":"rightsize.diagnosis/v1",
                  "class":"import_error","confidence":7}},
    {"job":{"cluster":"c","job_id":"3"},"diagnosis":"it broke"}]})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->jobs.size(), 1u);
  ASSERT_TRUE(b->jobs[0].diagnosis.has_value());
  EXPECT_EQ(b->jobs[0].diagnosis->cls, "import_error");
  ASSERT_EQ(b->rejected.size(), 2u);
  EXPECT_EQ(b->rejected[0].path, "jobs[1].diagnosis.confidence");
  EXPECT_EQ(b->rejected[1].path, "jobs[2].diagnosis");

  auto store = OpenStore(TempDb("diagnosis"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(*(*store)->WriteTelemetry(b->agent, b->seq, b->jobs));
  auto kept = (*store)->GetDiagnosis("c", "ml/etl-x7k2p/main");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->cls, "import_error");
  EXPECT_DOUBLE_EQ(kept->confidence, 0.9);
  EXPECT_EQ(kept->created_at, 1700000000);
  EXPECT_NE(kept->document.find("torchvision"), std::string::npos);
}

TEST(DecodeTelemetry, RefusesWhatIsNotABatch) {
  for (const char* body :
       {"", "[]", "{", R"({"schema":"x"})",
        R"({"schema":"rightsize.telemetry/v1","seq":1,"jobs":[]})",
        R"({"schema":"rightsize.telemetry/v1","agent":"a","seq":0,"jobs":[]})",
        R"({"schema":"rightsize.telemetry/v1","agent":"a","seq":1,"jobs":{}})"}) {
    auto b = DecodeTelemetry(body);
    EXPECT_FALSE(b.ok()) << body;
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), Status::Code::kBadInput) << body;
    }
  }
  TelemetryLimits small;
  small.max_jobs = 2;
  auto b = DecodeTelemetry(
      R"({"schema":"rightsize.telemetry/v1","agent":"a","seq":1,"jobs":[{},{},{}]})", small);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("at most 2"), std::string::npos);
}

// 100,000 nested brackets: refused before parsing (dumping such a value for an error message
// once overflowed the stack and took the server down).
TEST(DecodeTelemetry, RefusesDeepNestingWithoutRecursing) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  auto b = DecodeTelemetry(deep);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("nests"), std::string::npos);
  std::string in_sample = R"({"schema":"rightsize.telemetry/v1","agent":"a","seq":1,"jobs":[)"
                          R"({"job":{"cluster":"c","job_id":"1"},"samples":{"m":[[1,)" +
                          std::string(20, '[') + std::string(20, ']') + "]]}}]}";
  b = DecodeTelemetry(in_sample);  // within the depth limit: the entry is rejected, named
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->rejected.size(), 1u);
  EXPECT_NE(b->rejected[0].error.find("an array"), std::string::npos) << b->rejected[0].error;
}

JobTelemetry Running(const std::string& id, const std::string& user, int64_t t0_s, int n) {
  JobTelemetry t;
  t.job.cluster = "c";
  t.job.job_id = id;
  t.job.source = "agent";
  t.job.request.user = user;
  t.job.request.cpus = 4;
  t.job.start_time = t0_s;
  t.job.outcome.state = "RUNNING";
  for (int i = 0; i < n; ++i) {
    t.samples["cpu_cores"].push_back(Sample{(t0_s + i) * 1000, static_cast<double>(i % 5)});
  }
  return t;
}

TEST(StoreTelemetry, SeriesComeBackExactlyAcrossChunksAndRanges) {
  auto store = OpenStore(TempDb("series"));
  ASSERT_TRUE(store.ok());
  // 2 h at 1 Hz: 7,200 samples, split into 10-minute chunks.
  std::vector<JobTelemetry> jobs = {Running("1", "alice", 1'700'000'000, 7200)};
  auto ok = (*store)->WriteTelemetry("n1", 1, jobs);
  ASSERT_TRUE(ok.ok() && *ok);
  std::vector<Sample> got;
  auto read = [&](int64_t from_s, int64_t to_s) {
    got.clear();
    ASSERT_TRUE((*store)
                    ->ReadSamples("c", "1", "cpu_cores", from_s * 1000, to_s * 1000,
                                  [&](const Sample& s) { got.push_back(s); })
                    .ok());
  };
  read(0, 2'000'000'000);
  ASSERT_EQ(got.size(), 7200u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].t_ms, (1'700'000'000 + static_cast<int64_t>(i)) * 1000);
    ASSERT_EQ(got[i].value, static_cast<double>(i % 5));
  }
  read(1'700'003'000, 1'700'003'009);  // inside a chunk that starts before `from`
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got.front().t_ms, 1'700'003'000'000);
  auto metrics = (*store)->SampleMetrics("c", "1");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(*metrics, std::vector<std::string>{"cpu_cores"});
}

TEST(StoreTelemetry, ReplaysAreRefusedAndStoreNothing) {
  auto store = OpenStore(TempDb("replay"));
  ASSERT_TRUE(store.ok());
  std::vector<JobTelemetry> jobs = {Running("1", "alice", 1000, 3)};
  jobs[0].stacks["main;spin"] = 5;
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 10, jobs));
  ASSERT_FALSE(*(*store)->WriteTelemetry("n1", 10, jobs));
  ASSERT_FALSE(*(*store)->WriteTelemetry("n1", 9, jobs));
  ASSERT_TRUE(*(*store)->WriteTelemetry("n2", 1, jobs));  // another agent's own numbering
  auto stacks = (*store)->GetStacks("c", "1");
  ASSERT_TRUE(stacks.ok());
  EXPECT_EQ(stacks->at("main;spin"), 10);  // n1 once + n2 once, not the refused replays
}

TEST(StoreTelemetry, AnAccountingRecordIsNotReplacedByTheAgents) {
  auto store = OpenStore(TempDb("merge"));
  ASSERT_TRUE(store.ok());
  JobRecord acct;
  acct.cluster = "c";
  acct.job_id = "1";
  acct.source = "sacct";
  acct.outcome.state = "COMPLETED";
  ASSERT_TRUE((*store)->UpsertJobs(std::vector<JobRecord>{acct}).ok());
  std::vector<JobTelemetry> jobs = {Running("1", "alice", 1000, 3)};
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 1, jobs));
  auto j = (*store)->GetJob("c", "1");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->source, "sacct");
  EXPECT_EQ(j->outcome.state, "COMPLETED");
  int n = 0;
  ASSERT_TRUE(
      (*store)->ReadSamples("c", "1", "cpu_cores", 0, INT64_MAX, [&](const Sample&) { ++n; }).ok());
  EXPECT_EQ(n, 3);  // the samples are still the job's
  // The agent's final record adds what accounting lacked (no MaxRSS here), and only that.
  JobTelemetry end = Running("1", "alice", 1010, 1);
  end.job.end_time = 1012;
  end.job.usage.peak_rss_bytes = 123 << 20;
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 2, std::vector<JobTelemetry>{end}));
  j = (*store)->GetJob("c", "1");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->source, "sacct");
  EXPECT_EQ(j->outcome.state, "COMPLETED");
  ASSERT_TRUE(j->usage.peak_rss_bytes.has_value());
  EXPECT_EQ(*j->usage.peak_rss_bytes, 123 << 20);
}

// Every batch of a running job carries the same record, which the store does not rewrite; the
// record that comes when the job ends must still replace it, in the same group commit too.
TEST(StoreTelemetry, TheEndRecordReplacesTheRunningOneAfterIdenticalBatches) {
  auto store = OpenStore(TempDb("ends"));
  ASSERT_TRUE(store.ok());
  JobTelemetry a = Running("1", "alice", 1000, 5), b = Running("1", "alice", 1005, 5);
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 1, std::vector<JobTelemetry>{a}));
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 2, std::vector<JobTelemetry>{b}));
  JobTelemetry end = Running("1", "alice", 1010, 2);
  end.job.end_time = 1012;
  end.job.outcome.state = "COMPLETED";
  end.job.usage.peak_rss_bytes = 123 << 20;
  JobTelemetry again = Running("1", "alice", 1020, 1);  // a late batch of the same job
  again.job = end.job;
  std::vector<JobTelemetry> one = {b}, two = {end}, three = {again};
  std::vector<Store::TelemetryWrite> group = {{"n2", 1, one}, {"n1", 3, two}, {"n1", 4, three}};
  auto stored = (*store)->WriteTelemetryGroup(group);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  auto j = (*store)->GetJob("c", "1");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->outcome.state, "COMPLETED");
  EXPECT_EQ(j->end_time, 1012);
  EXPECT_EQ(j->usage.peak_rss_bytes, int64_t{123} << 20);
  int n = 0;
  ASSERT_TRUE(
      (*store)->ReadSamples("c", "1", "cpu_cores", 0, INT64_MAX, [&](const Sample&) { ++n; }).ok());
  EXPECT_EQ(n, 13);
}

// The server's pool holds several connections: a cluster one of them added must be visible to
// the others, and two of them adding clusters must not hand out the same id.
TEST(StoreTelemetry, ConnectionsSeeEachOthersClusters) {
  std::string db = TempDb("conns");
  auto a = OpenStore(db);
  auto b = OpenStore(db);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<JobTelemetry> x = {Running("1", "alice", 1000, 1)};
  x[0].job.cluster = "x";
  ASSERT_TRUE(*(*a)->WriteTelemetry("n", 1, x));
  EXPECT_TRUE((*b)->GetJob("x", "1").ok());
  JobRecord y, z;
  y.cluster = "y";
  y.job_id = "1";
  z.cluster = "z";
  z.job_id = "1";
  ASSERT_TRUE((*b)->UpsertJobs(std::vector<JobRecord>{y}).ok());
  ASSERT_TRUE((*a)->UpsertJobs(std::vector<JobRecord>{z}).ok());
  for (const char* c : {"x", "y", "z"}) {
    auto j = (*a)->GetJob(c, "1");
    ASSERT_TRUE(j.ok()) << c;
    EXPECT_EQ(j->cluster, c);
  }
}

// Two connections taking turns writing the same job (the server's writer and an agent-side
// writer, or two servers): no "database is locked" from a read transaction left open.
TEST(StoreTelemetry, ConnectionsTakeTurnsWritingTheSameJob) {
  std::string db = TempDb("turns");
  auto a = OpenStore(db);
  auto b = OpenStore(db);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 1; i <= 20; ++i) {
    std::vector<JobTelemetry> jobs = {Running("1", "alice", 1000 + i * 10, 5)};
    Store& s = i % 2 ? **a : **b;
    auto ok = s.WriteTelemetry(i % 2 ? "a" : "b", i, jobs);
    ASSERT_TRUE(ok.ok()) << "write " << i << ": " << ok.status().ToString();
    ASSERT_TRUE(*ok);
  }
  int n = 0;
  ASSERT_TRUE(
      (*a)->ReadSamples("c", "1", "cpu_cores", 0, INT64_MAX, [&](const Sample&) { ++n; }).ok());
  EXPECT_EQ(n, 20 * 5);
}

TEST(StoreTelemetry, ListJobsPagesNewestFirstWithRunningOnTop) {
  auto store = OpenStore(TempDb("list"));
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> ended;
  for (int i = 0; i < 25; ++i) {
    JobRecord r;
    r.cluster = "c";
    r.job_id = std::to_string(i);
    r.end_time = 1000 + i;
    r.request.user = i % 2 ? "bob" : "alice";
    ended.push_back(r);
  }
  ASSERT_TRUE((*store)->UpsertJobs(ended).ok());
  std::vector<JobTelemetry> live = {Running("live", "alice", 5000, 1)};
  ASSERT_TRUE(*(*store)->WriteTelemetry("n1", 1, live));
  std::vector<std::string> order;
  JobPage page;
  page.limit = 7;
  for (int pages = 0; pages < 10; ++pages) {
    auto list = (*store)->ListJobs({}, page);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    for (const auto& j : list->jobs) order.push_back(j.job_id);
    if (!list->next) break;
    page.after = list->next;
  }
  ASSERT_EQ(order.size(), 26u);
  EXPECT_EQ(order[0], "live");
  EXPECT_EQ(order[1], "24");
  EXPECT_EQ(order[25], "0");
  JobFilter f;
  f.user = "bob";
  auto bob = (*store)->ListJobs(f, JobPage{100, std::nullopt});
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(bob->jobs.size(), 12u);
  page.after = "garbage";
  EXPECT_FALSE((*store)->ListJobs({}, page).ok());
}

TEST(ApiServer, PeopleSeeTheirOwnJobsAndAdminsAll) {
  ServerOptions o;
  o.db = TempDb("api");
  o.config.open = false;
  o.config.user_tokens = {{"t-alice", "alice"}, {"t-ops", "ops"}};
  o.config.admins = {"ops"};
  // The jobs' last samples are 0.9 s old: running now (server/recent.h).
  o.now_s = [] { return int64_t{4100}; };
  ApiServer api(o);
  ASSERT_TRUE(api.Init().ok());
  auto store = OpenStore(o.db);
  std::vector<JobTelemetry> jobs = {Running("a1", "alice", 4000, 100),
                                    Running("b1", "bob", 4000, 100)};
  ASSERT_TRUE(*(*store)->WriteTelemetry("n", 1, jobs));
  auto who = [&](const std::string& token) {
    return api.Identify(
        [&](const std::string& h) { return h == "Authorization" ? "Bearer " + token : ""; });
  };
  auto alice = who("t-alice"), ops = who("t-ops"), nobody = who("nope");
  EXPECT_TRUE(alice.known);
  EXPECT_FALSE(alice.admin);
  EXPECT_TRUE(ops.admin);
  EXPECT_FALSE(nobody.known);
  EXPECT_EQ(api.Job(alice, "c", "a1").status, 200);
  EXPECT_EQ(api.Job(alice, "c", "b1").status, 404);
  EXPECT_EQ(api.Job(ops, "c", "b1").status, 200);
  auto list = nlohmann::json::parse(api.Jobs(alice, {}).body);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["job_id"], "a1");
  EXPECT_EQ(nlohmann::json::parse(api.Jobs(ops, {}).body)["jobs"].size(), 2u);
  // 100 samples 0,1,2,3,4,0,… from t=4000 in steps of 10 s: every bucket has mean 2, max 4.
  auto series = nlohmann::json::parse(
      api.Series(alice, "c", "a1",
                 {{"metric", "cpu_cores"}, {"from", "4000"}, {"to", "4099"}, {"step", "10"}})
          .body);
  const auto& pts = series["series"]["cpu_cores"];
  ASSERT_EQ(pts.size(), 10u);
  for (const auto& p : pts) {
    EXPECT_DOUBLE_EQ(p[1].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(p[2].get<double>(), 4.0);
  }
  EXPECT_EQ(series["limits"]["cpu_cores"], 4.0);
  auto overview = nlohmann::json::parse(api.Overview(ops).body);
  EXPECT_EQ(overview["clusters"][0]["running_jobs"], 2);
  EXPECT_DOUBLE_EQ(overview["clusters"][0]["now"]["allocated"]["cpus"].get<double>(), 8.0);
  EXPECT_EQ(nlohmann::json::parse(api.Overview(alice).body)["clusters"][0]["running_jobs"], 1);
}

// Dashboards poll the overview: what is running now is live, the day's and week's waste (which
// reads every job that ended in them) is recomputed at most once a minute.
TEST(ApiServer, OverviewWasteIsAtMostAMinuteOldAndRunningJobsAreLive) {
  ServerOptions o;
  o.db = TempDb("overview");
  auto clock = std::make_shared<int64_t>(100000);
  o.now_s = [clock] { return *clock; };
  ApiServer api(o);
  ASSERT_TRUE(api.Init().ok());
  auto store = OpenStore(o.db);
  ASSERT_TRUE(store.ok());
  auto finished = [](const std::string& id, int64_t end) {
    JobRecord j;
    j.cluster = "c";
    j.job_id = id;
    j.request.user = "alice";
    j.request.cpus = 8;
    j.alloc.cpus = 8;
    j.start_time = end - 3600;
    j.end_time = end;
    j.usage.elapsed_s = 3600;
    j.usage.cpu_time_s = 3600;
    j.outcome.state = "COMPLETED";
    return j;
  };
  std::vector<JobRecord> first = {finished("f1", 99000)};
  ASSERT_TRUE((*store)->UpsertJobs(first).ok());
  ApiServer::Caller ops;
  ops.known = ops.admin = true;
  auto week_jobs = [&] {
    auto j = nlohmann::json::parse(api.Overview(ops).body);
    return j["clusters"][0]["week"]["jobs"].get<int64_t>();
  };
  EXPECT_EQ(week_jobs(), 1);
  std::vector<JobRecord> second = {finished("f2", 99500)};
  ASSERT_TRUE((*store)->UpsertJobs(second).ok());
  std::vector<JobTelemetry> running = {Running("r1", "alice", 99990, 5)};
  ASSERT_TRUE(*(*store)->WriteTelemetry("n", 1, running));
  auto now = nlohmann::json::parse(api.Overview(ops).body);
  EXPECT_EQ(now["clusters"][0]["running_jobs"], 1);  // live
  EXPECT_EQ(now["clusters"][0]["week"]["jobs"], 1);  // the minute-old figure
  *clock += 61;
  EXPECT_EQ(week_jobs(), 2);
}

// A running job has no accounting record yet: its page shows its efficiency so far, from the
// samples (here 4 CPUs held for 100 s, cores 0,1,2,3,4,0,… a second: 2 cores on average).
TEST(ApiServer, ARunningJobsEfficiencyIsItsUseSoFar) {
  ServerOptions o;
  o.db = TempDb("live");
  o.now_s = [] { return int64_t{4100}; };
  ApiServer api(o);
  ASSERT_TRUE(api.Init().ok());
  auto store = OpenStore(o.db);
  ASSERT_TRUE(store.ok());
  std::vector<JobTelemetry> jobs = {Running("a1", "alice", 4000, 100)};
  jobs[0].job.alloc.cpus = 4;
  for (int i = 0; i < 100; ++i) {
    jobs[0].samples["memory_bytes"].push_back(Sample{(4000 + i) * 1000, i == 50 ? 3e9 : 1e9});
  }
  ASSERT_TRUE(*(*store)->WriteTelemetry("n", 1, jobs));
  ApiServer::Caller ops;
  ops.known = ops.admin = true;
  auto page = nlohmann::json::parse(api.Job(ops, "c", "a1").body);
  ASSERT_TRUE(page["efficiency"]["cpu"].is_number()) << page.dump();
  EXPECT_NEAR(page["efficiency"]["cpu"].get<double>(), 0.5, 1e-9);

  auto job = (*store)->GetJob("c", "a1");
  ASSERT_TRUE(job.ok());
  LiveUsage live;
  auto so_far = WithUsageSoFar(**store, *job, 4100, &live);
  ASSERT_TRUE(so_far.ok());
  EXPECT_EQ(so_far->usage.peak_rss_bytes, int64_t{3000000000});
  EXPECT_NEAR(so_far->usage.cpu_time_s.value_or(0), 200, 1e-9);
  EXPECT_NEAR(so_far->usage.elapsed_s.value_or(0), 100, 1e-9);
  EXPECT_EQ(live.as_of_s, 4099);
  EXPECT_EQ(live.memory_bytes_now, int64_t{1000000000});
  // The last minute: 60 samples of 0..4, mean 2.
  EXPECT_NEAR(live.cores_now.value_or(0), 2.0, 1e-9);
  // An agent that was down for ten minutes: the gap counts no CPU.
  std::vector<JobTelemetry> later = {Running("a1", "alice", 4700, 1)};
  later[0].samples["cpu_cores"] = {Sample{4700 * 1000, 4.0}};
  ASSERT_TRUE(*(*store)->WriteTelemetry("n", 2, later));
  auto gap = UsageSoFar(**store, *job, 4701);
  ASSERT_TRUE(gap.ok());
  EXPECT_NEAR(gap->so_far.cpu_time_s.value_or(0), 200, 1e-9);
}

// A job seen early, whose start (4000.9 s) was stored as 4000 and asked about at 4002.7 s (4002):
// five half-second samples of one busy core cover 2.5 s, so two whole seconds of elapsed time
// would make that one core 1.25 cores, and the efficiency on two CPUs 62%, not 50%.
TEST(ApiServer, EarlyInAJobTheElapsedTimeCoversItsSamples) {
  auto store = OpenStore(TempDb("early"));
  ASSERT_TRUE(store.ok());
  std::vector<JobTelemetry> jobs = {Running("e1", "alice", 4000, 0)};
  jobs[0].job.alloc.cpus = 2;
  for (int i = 0; i < 5; ++i)
    jobs[0].samples["cpu_cores"].push_back(Sample{4000600 + i * 500, 1.0});
  ASSERT_TRUE(*(*store)->WriteTelemetry("n", 1, jobs));
  auto job = (*store)->GetJob("c", "e1");
  ASSERT_TRUE(job.ok());
  auto so_far = WithUsageSoFar(**store, *job, 4002, nullptr);
  ASSERT_TRUE(so_far.ok());
  EXPECT_NEAR(so_far->usage.cpu_time_s.value_or(0), 2.5, 1e-9);
  EXPECT_NEAR(so_far->usage.elapsed_s.value_or(0), 2.5, 1e-9);
}

JobRecord Finished(const std::string& id, const std::string& user, int64_t end_s) {
  JobRecord j;
  j.cluster = "c";
  j.job_id = id;
  j.source = "slurm";
  j.request.user = user;
  j.request.job_name = "train";
  j.request.cpus = 4;
  j.request.memory_bytes = int64_t{8} << 30;
  j.request.time_limit_s = 7200;
  j.submit_time = end_s - 3700;
  j.start_time = end_s - 3600;
  j.end_time = end_s;
  j.usage.elapsed_s = 3600;
  j.usage.peak_rss_bytes = int64_t{2} << 30;
  j.usage.cpu_time_s = 3600.0 * 3;
  j.outcome.state = "COMPLETED";
  j.outcome.exit_code = 0;
  return j;
}

// Issue 31, defects 6 and 7: a person's prediction neither writes to another user's job nor
// shows another user's jobs among its similar jobs; admins see and write everything.
TEST(ApiServer, PredictionsStayWithinTheUsersOwnJobs) {
  ServerOptions o;
  o.db = TempDb("predict-visibility");
  o.config.open = false;
  o.config.user_tokens = {{"t-alice", "alice"}, {"t-ops", "ops"}};
  o.config.admins = {"ops"};
  o.now_s = [] { return int64_t{100000}; };
  ApiServer api(o);
  ASSERT_TRUE(api.Init().ok());
  auto store = OpenStore(o.db);
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> jobs = {Finished("a1", "alice", 50000), Finished("b1", "bob", 60000),
                                 Finished("b2", "bob", 70000), Finished("b3", "bob", 80000)};
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  auto who = [&](const std::string& token) {
    return api.Identify(
        [&](const std::string& h) { return h == "Authorization" ? "Bearer " + token : ""; });
  };
  auto alice = who("t-alice"), ops = who("t-ops");
  const std::string script = "#!/bin/bash\n#SBATCH -n 4\nsrun ./train\n";
  auto body = [&](const std::string& job_id) {
    nlohmann::json b = {{"script", script}, {"name", "train"}, {"cluster", "c"}};
    if (!job_id.empty()) b["job_id"] = job_id;
    return b.dump();
  };
  // Writing to bob's job: refused with a reason, and nothing stored there.
  auto onto_bob = api.Predict(alice, body("b3"));
  EXPECT_EQ(onto_bob.status, 403) << onto_bob.body;
  EXPECT_NE(nlohmann::json::parse(onto_bob.body)["error"].get<std::string>().find("not yours"),
            std::string::npos);
  EXPECT_FALSE((*store)->GetPrediction("c", "b3").ok());
  // Her own job: stored.
  EXPECT_EQ(api.Predict(alice, body("a1")).status, 200);
  EXPECT_TRUE((*store)->GetPrediction("c", "a1").ok());
  // Similar jobs: hers only (bob's runs of the same name are history for the model, not hers
  // to read); an admin sees bob's too.
  auto mine = nlohmann::json::parse(api.Predict(alice, body("")).body);
  ASSERT_TRUE(mine["similar_jobs"].is_array()) << mine.dump();
  ASSERT_FALSE(mine["similar_jobs"].empty()) << mine.dump();
  for (const auto& j : mine["similar_jobs"]) EXPECT_EQ(j["user"], "alice") << mine.dump();
  auto all = nlohmann::json::parse(api.Predict(ops, body("b3")).body);
  bool bobs = false;
  for (const auto& j : all["similar_jobs"]) bobs = bobs || j["user"] == "bob";
  EXPECT_TRUE(bobs) << all.dump();
  EXPECT_TRUE((*store)->GetPrediction("c", "b3").ok());  // an admin may store on any job
  // The stored prediction on a1, read back by alice: still only her jobs.
  auto a1 = nlohmann::json::parse(api.Job(alice, "c", "a1").body);
  for (const auto& j : a1["prediction"]["similar_jobs"]) EXPECT_EQ(j["user"], "alice");
}

// Issue 31, defect 8: user_header is believed only from trusted_proxies when the list is set,
// and `serve` warns when it is not.
TEST(ApiServer, TheUserHeaderIsBelievedOnlyFromTrustedProxies) {
  ServerOptions o;
  o.db = TempDb("proxies");
  o.config.open = false;
  o.config.user_header = "X-Remote-User";
  o.config.admins = {"ops"};
  EXPECT_EQ(ConfigWarnings(o.config).size(), 1u);
  o.config.trusted_proxies = {"10.1.0.0/16", "::1"};
  EXPECT_TRUE(ConfigWarnings(o.config).empty());
  ApiServer api(o);
  auto from = [&](const std::string& addr) {
    return api.Identify([](const std::string& h) { return h == "X-Remote-User" ? "ops" : ""; },
                        addr);
  };
  EXPECT_TRUE(from("10.1.2.3").admin);
  EXPECT_TRUE(from("::1").admin);
  EXPECT_TRUE(from("::ffff:10.1.2.3").admin);
  EXPECT_FALSE(from("10.2.0.1").known);
  EXPECT_FALSE(from("127.0.0.1").known);
  EXPECT_FALSE(from("").known);
  EXPECT_TRUE(AddressInCidr("192.168.1.77", "192.168.1.0/24"));
  EXPECT_FALSE(AddressInCidr("192.168.2.77", "192.168.1.0/24"));
  EXPECT_TRUE(AddressInCidr("fd00::5", "fd00::/8"));
  EXPECT_FALSE(AddressInCidr("10.0.0.1", "not-an-address"));

  auto path = std::filesystem::temp_directory_path() /
              ("rightsize-proxies-" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << R"({"user_header": "X-Remote-User", "trusted_proxies": ["10.0.0.0/33"]})";
  auto bad = LoadServerConfig(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("trusted_proxies"), std::string::npos);
  std::ofstream(path) << R"({"user_header": "X-Remote-User", "trusted_proxies": ["10.0.0.0/8"]})";
  auto good = LoadServerConfig(path.string());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->trusted_proxies, std::vector<std::string>{"10.0.0.0/8"});
  std::filesystem::remove(path);
}

TEST(ServerConfigTest, NamesTheTsdbOfTheSamples) {
  auto path = std::filesystem::temp_directory_path() /
              ("rightsize-tsdb-config-" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << R"({"tsdb_write_url": "http://vm:8428/api/v1/write",
                             "tsdb_query_url": "http://vm:8428"})";
  auto good = LoadServerConfig(path.string());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->store.tsdb_write_url, "http://vm:8428/api/v1/write");
  EXPECT_EQ(good->store.tsdb_query_url, "http://vm:8428");
  std::ofstream(path) << R"({"tsdb_query_url": 8428})";
  auto bad = LoadServerConfig(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tsdb_query_url: expected a URL"), std::string::npos)
      << bad.status().message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rightsize

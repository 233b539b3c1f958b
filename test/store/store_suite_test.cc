// The Store contract (store/store.h), run on every backend: each test runs on an SQLite file
// and on a real PostgreSQL 15 that the test binary starts (test/store/postgres_fixture.h).
// SQLite's file-format tests (upgrades of old files, its indexes) stay in sqlite_store_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "postgres_fixture.h"
#include "store/changes.h"
#include "store/store.h"

namespace rightsize {
namespace {

class StoreSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      std::string why;
      auto url = testing::FreshPostgresDatabase(&why);
      if (!url) GTEST_SKIP() << why;
      location_ = *url;
    } else {
      dir_ = std::filesystem::temp_directory_path() /
             ("rightsize-store-suite-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::remove_all(dir_);
      location_ = (dir_ / "sub" / "rs.db").string();
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A new Store object on this test's store (a second server, a reopen).
  StatusOr<std::unique_ptr<Store>> Open() { return OpenStore(location_); }

  // The ids of the jobs ScanJobs gives, in its order.
  static Status ScanIds(Store& store, const JobFilter& f, std::vector<std::string>* ids) {
    return store.ScanJobs(f, [&](const JobRecord& j) {
      ids->push_back(j.job_id);
      return true;
    });
  }
  static JobRecord Job(const std::string& id, int64_t end, const std::string& user = "alice") {
    JobRecord j;
    j.cluster = "c1";
    j.job_id = id;
    j.source = "test";
    j.end_time = end;
    j.submit_time = end - 100;
    j.request.user = user;
    j.request.cpus = 4;
    j.request.memory_bytes = 16 * kGiB;
    j.request.memory_scope = MemoryScope::kPerNode;
    j.request.time_limit_s = 3600;
    j.alloc.gpus = 2;
    j.alloc.gpu_type = "a100";
    j.usage.elapsed_s = 50;
    j.usage.peak_rss_bytes = 3 * kGiB;
    j.outcome.state = "COMPLETED";
    j.outcome.exit_code = 0;
    return j;
  }
  static std::vector<JobTelemetry> Telemetry(const JobRecord& job, const std::string& metric,
                                             std::vector<Sample> samples) {
    JobTelemetry t;
    t.job = job;
    t.samples[metric] = std::move(samples);
    return {t};
  }
  static std::vector<std::pair<int64_t, double>> Samples(Store& store, const std::string& job_id,
                                                         const std::string& metric) {
    std::vector<std::pair<int64_t, double>> got;
    EXPECT_TRUE(store
                    .ReadSamples("c1", job_id, metric, 0, INT64_MAX,
                                 [&](const Sample& x) { got.emplace_back(x.t_ms, x.value); })
                    .ok());
    return got;
  }

  std::filesystem::path dir_;
  std::string location_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreSuite, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST_P(StoreSuite, RoundTripsEveryFieldAndKeepsUnknownsUnknown) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  JobRecord j = Job("42_3", 1000);
  ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  auto got = (*store)->GetJob("c1", "42_3");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->request.user, "alice");
  EXPECT_EQ(*got->request.memory_bytes, 16 * kGiB);
  EXPECT_EQ(got->request.memory_scope, MemoryScope::kPerNode);
  EXPECT_EQ(*got->alloc.gpus, 2);
  EXPECT_EQ(got->alloc.gpu_type, "a100");
  EXPECT_EQ(*got->usage.peak_rss_bytes, 3 * kGiB);
  EXPECT_FALSE(got->usage.cpu_time_s.has_value());  // unknown stays unknown, not 0
  EXPECT_FALSE(got->usage.gpu_util_pct.has_value());
  EXPECT_EQ(*got->outcome.exit_code, 0);
  EXPECT_FALSE(got->outcome.signal.has_value());
}

TEST_P(StoreSuite, ReingestingReplacesInsteadOfDuplicating) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> jobs = {Job("1", 100), Job("2", 200)};
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  jobs[1].outcome.state = "FAILED";
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 2);
  EXPECT_EQ((*store)->GetJob("c1", "2")->outcome.state, "FAILED");
  // The same id in another cluster is another job.
  JobRecord other = Job("2", 300);
  other.cluster = "c2";
  ASSERT_TRUE((*store)->UpsertJobs({&other, 1}).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 3);
  EXPECT_EQ(*(*store)->Clusters(), (std::vector<std::string>{"c1", "c2"}));
}

// The agent measures what sacct may not have (a job's peak memory when accounting has no
// MaxRSS); whichever record arrives first, the stored job keeps the scheduler's description and
// every measurement.
TEST_P(StoreSuite, AgentAndSchedulerRecordsOfAJobMerge) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  // Numeric ids and ids the store hashes (Kubernetes pods) take different statements.
  for (std::string prefix : {"", "pod-"}) {
    SCOPED_TRACE(prefix);
    JobRecord sacct = Job(prefix + "7", 1000);
    sacct.source = "sacct";
    sacct.start_time = 920;
    sacct.usage.peak_rss_bytes.reset();  // no MaxRSS in accounting
    sacct.usage.elapsed_s = 80;
    JobRecord agent;
    agent.cluster = "c1";
    agent.job_id = prefix + "7";
    agent.source = "agent";
    agent.start_time = 921;
    agent.end_time = 1001;
    agent.usage.elapsed_s = 79;
    agent.usage.peak_rss_bytes = 5 * kGiB;
    agent.usage.gpu_util_pct = 40;

    // The agent's record first, then sacct's.
    ASSERT_TRUE((*store)->UpsertJobs({&agent, 1}).ok());
    ASSERT_TRUE((*store)->UpsertJobs({&sacct, 1}).ok());
    auto got = (*store)->GetJob("c1", prefix + "7");
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->source, "sacct");
    EXPECT_EQ(got->outcome.state, "COMPLETED");
    EXPECT_EQ(got->request.user, "alice");
    EXPECT_EQ(*got->usage.elapsed_s, 80);  // the scheduler's own figure wins
    EXPECT_EQ(*got->usage.peak_rss_bytes, 5 * kGiB);
    EXPECT_EQ(*got->usage.gpu_util_pct, 40);

    // sacct's record first, then the agent's: the same job.
    JobRecord sacct2 = sacct, agent2 = agent;
    sacct2.job_id = agent2.job_id = prefix + "8";
    ASSERT_TRUE((*store)->UpsertJobs({&sacct2, 1}).ok());
    ASSERT_TRUE((*store)->UpsertJobs({&agent2, 1}).ok());
    got = (*store)->GetJob("c1", prefix + "8");
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->source, "sacct");
    EXPECT_EQ(got->outcome.state, "COMPLETED");
    EXPECT_EQ(*got->end_time, 1000);
    EXPECT_EQ(*got->usage.elapsed_s, 80);
    EXPECT_EQ(*got->usage.peak_rss_bytes, 5 * kGiB);

    // sacct re-ingested (its final record, still no MaxRSS) keeps the agent's peak, and a
    // larger peak from accounting wins over a smaller measured one.
    ASSERT_TRUE((*store)->UpsertJobs({&sacct2, 1}).ok());
    EXPECT_EQ(*(*store)->GetJob("c1", prefix + "8")->usage.peak_rss_bytes, 5 * kGiB);
    sacct2.usage.peak_rss_bytes = 6 * kGiB;
    ASSERT_TRUE((*store)->UpsertJobs({&sacct2, 1}).ok());
    EXPECT_EQ(*(*store)->GetJob("c1", prefix + "8")->usage.peak_rss_bytes, 6 * kGiB);

    // A requeued run (same id, another start) is another run: nothing of the first is kept.
    JobRecord requeued = sacct2;
    requeued.start_time = 5000;
    requeued.end_time = 5100;
    requeued.usage.peak_rss_bytes.reset();
    requeued.usage.gpu_util_pct.reset();
    ASSERT_TRUE((*store)->UpsertJobs({&requeued, 1}).ok());
    got = (*store)->GetJob("c1", prefix + "8");
    EXPECT_EQ(*got->start_time, 5000);
    EXPECT_FALSE(got->usage.peak_rss_bytes.has_value());
  }
  EXPECT_EQ(*(*store)->CountJobs({}), 4);
}

TEST_P(StoreSuite, ScansFilterByEndTimeAndUser) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> jobs = {Job("3", 300, "bob"), Job("1", 100), Job("2", 200)};
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  std::vector<std::string> ids;
  JobFilter f;
  f.ended_since = 150;  // scans are unordered: sort what comes back
  ASSERT_TRUE(ScanIds(**store, f, &ids).ok());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"2", "3"}));
  f = JobFilter();
  f.user = "bob";
  EXPECT_EQ(*(*store)->CountJobs(f), 1);
  f = JobFilter();
  f.ended_until = 200;
  EXPECT_EQ(*(*store)->CountJobs(f), 1);
}

// `predict` reads a user's newest finished jobs, not all of them: newest first, running jobs
// (no end yet) left out.
TEST_P(StoreSuite, ScansCanTakeTheNewestFinishedJobs) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> jobs = {Job("1", 100), Job("4", 400), Job("2", 200), Job("3", 300),
                                 Job("5", 500, "bob")};
  JobRecord running = Job("6", 0);
  running.end_time.reset();
  jobs.push_back(running);
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  JobFilter f;
  f.user = "alice";
  f.ended_until = 400;
  f.newest = 2;
  std::vector<std::string> ids;
  ASSERT_TRUE(ScanIds(**store, f, &ids).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"3", "2"}));
  f.ended_until.reset();
  f.newest = 10;
  ids.clear();
  ASSERT_TRUE(ScanIds(**store, f, &ids).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"4", "3", "2", "1"}));
}

TEST_P(StoreSuite, DiagnosisIsKeptWithTheJobAndReplaced) {
  {
    auto store = Open();
    ASSERT_TRUE(store.ok());
    EXPECT_EQ((*store)->GetDiagnosis("c1", "7").status().code(), Status::Code::kNotFound);
    StoredDiagnosis d{"c1", "7", 1000, "host_oom", 0.9, R"({"class":"host_oom"})"};
    ASSERT_TRUE((*store)->PutDiagnosis(d).ok());
    d.cls = "timeout";
    d.created_at = 2000;
    ASSERT_TRUE((*store)->PutDiagnosis(d).ok());
  }
  auto store = Open();  // survives reopening
  ASSERT_TRUE(store.ok());
  auto got = (*store)->GetDiagnosis("c1", "7");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->cls, "timeout");
  EXPECT_EQ(got->created_at, 2000);
  EXPECT_EQ(got->document, R"({"class":"host_oom"})");
  EXPECT_FALSE((*store)->GetDiagnosis("c2", "7").ok());
}

// Issue 28: `rightsize diagnose` run where the job's output could not be read replaced the
// follower's host_oom 1.0 with unknown 0.55. A weaker diagnosis never replaces a stronger one.
TEST_P(StoreSuite, AWeakerDiagnosisNeverReplacesAStrongerOne) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  auto cls = [&] {
    auto got = (*store)->GetDiagnosis("c1", "8");
    return got.ok() ? fmt::format("{} {:.2f}", got->cls, got->confidence) : std::string("none");
  };
  ASSERT_TRUE((*store)->PutDiagnosis({"c1", "8", 1000, "unknown", 0.3, "{}"}).ok());
  ASSERT_TRUE((*store)->PutDiagnosis({"c1", "8", 1100, "host_oom", 1.0, "{}"}).ok());
  EXPECT_EQ(cls(), "host_oom 1.00") << "an unknown gives way to anything";
  ASSERT_TRUE((*store)->PutDiagnosis({"c1", "8", 1200, "unknown", 0.55, "{}"}).ok());
  EXPECT_EQ(cls(), "host_oom 1.00") << "unknown never replaces a class";
  ASSERT_TRUE((*store)->PutDiagnosis({"c1", "8", 1300, "app_error", 0.6, "{}"}).ok());
  EXPECT_EQ(cls(), "host_oom 1.00") << "nor does a less confident class";
  ASSERT_TRUE((*store)->PutDiagnosis({"c1", "8", 1400, "gpu_oom", 1.0, "{}"}).ok());
  EXPECT_EQ(cls(), "gpu_oom 1.00") << "one as confident replaces it";
}

// What a cache of the past asks (store/changes.h): each connection hears of a finished job or
// a job's code written by any connection, and not of a running job's progress, of a finished job
// stored again unchanged, or of its own earlier question's answer twice. A bulk load is heard of
// once, at its end, or at the next open when it died.
TEST_P(StoreSuite, TheHistoryChangesWithFinishedJobsOnly) {
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a.ok() && b.ok());
  Store& sa = **a;
  Store& sb = **b;
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa));  // the first question
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sb));
  EXPECT_FALSE(HistoryChangedSinceLastAsked(sa));

  JobRecord running = Job("r", 0);
  running.end_time.reset();
  ASSERT_TRUE(sb.UpsertJobs({&running, 1}).ok());
  running.usage.peak_rss_bytes = 5 * kGiB;
  ASSERT_TRUE(sb.UpsertJobs({&running, 1}).ok());
  ASSERT_TRUE(sb.PutPrediction({"c1", "r", 10, "{}"}).ok());
  EXPECT_FALSE(HistoryChangedSinceLastAsked(sa)) << "a running job's progress";
  EXPECT_FALSE(HistoryChangedSinceLastAsked(sb));

  JobRecord done = Job("1", 1000);
  ASSERT_TRUE(sb.UpsertJobs({&done, 1}).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "a finished job written by another connection";
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sb)) << "a finished job written by this one";
  ASSERT_TRUE(sb.UpsertJobs({&done, 1}).ok());
  EXPECT_FALSE(HistoryChangedSinceLastAsked(sa)) << "the same finished job stored again";
  running.end_time = 2000;  // the running job ends
  ASSERT_TRUE(sb.UpsertJobs({&running, 1}).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "a running job that ended";
  StoredJobCode code;
  code.cluster = "c1";
  code.job_id = "1";
  code.created_at = 900;
  code.code_hash = "ab";
  code.program = "train.py";
  code.facts = "{}";
  ASSERT_TRUE(sb.PutJobCode(code).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "a job's code";

  ASSERT_TRUE(sb.SetBulkLoad(true).ok());
  JobRecord bulk = Job("2", 1500);
  ASSERT_TRUE(sb.UpsertJobs({&bulk, 1}).ok());
  EXPECT_FALSE(HistoryChangedSinceLastAsked(sa)) << "heard of before the bulk load's end";
  ASSERT_TRUE(sb.SetBulkLoad(false).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "the bulk load's end";
  // A bulk load that died: the next open repairs the triggers and says the history changed.
  ASSERT_TRUE(sb.SetBulkLoad(true).ok());
  JobRecord lost = Job("3", 1600);
  ASSERT_TRUE(sb.UpsertJobs({&lost, 1}).ok());
  b->reset();
  auto c = Open();
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "a bulk load that died";
  JobRecord after = Job("4", 1700);
  ASSERT_TRUE((*c)->UpsertJobs({&after, 1}).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "the triggers came back";
}

TEST_P(StoreSuite, EveryKindOfJobIdIsKeptApart) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  // Numeric ids, array tasks, het components, pending arrays, leading zeros, names, and ids
  // too large for a SLURM job number: each is its own job, found again by its id.
  std::vector<std::string> ids = {"7",   "7_0",         "7_1",        "70",
                                  "7+1", "7_[1-5%2]",   "007",        "pod-3f2a",
                                  "",    "99999999999", "4294967296", "4294967295_4194302"};
  std::vector<JobRecord> jobs;
  for (size_t i = 0; i < ids.size(); ++i) {
    jobs.push_back(Job(ids[i], 1000 + static_cast<int64_t>(i)));
    jobs.back().request.job_name = "name-" + ids[i];
  }
  JobRecord other = Job("7", 5000);
  other.cluster = "c2";
  jobs.push_back(other);
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), static_cast<int64_t>(ids.size() + 1));
  for (const auto& id : ids) {
    auto got = (*store)->GetJob("c1", id);
    ASSERT_TRUE(got.ok()) << id << ": " << got.status().ToString();
    EXPECT_EQ(got->request.job_name, "name-" + id);
  }
  // Without a cluster, the most recently ended match wins.
  EXPECT_EQ((*store)->GetJob("", "7")->cluster, "c2");
  EXPECT_FALSE((*store)->GetJob("c3", "7").ok());
}

TEST_P(StoreSuite, LeanScansLeaveDescriptiveFieldsUnset) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord j = Job("5", 500);
  j.alloc.node_list = "node[1-4]";
  j.usage.io_read_bytes = 42;
  ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  JobFilter f;
  f.lean = true;
  int seen = 0;
  ASSERT_TRUE((*store)
                  ->ScanJobs(f,
                             [&](const JobRecord& got) {
                               ++seen;
                               EXPECT_EQ(got.job_id, "5");
                               EXPECT_EQ(*got.request.memory_bytes, 16 * kGiB);  // sums need it
                               EXPECT_EQ(*got.usage.peak_rss_bytes, 3 * kGiB);
                               EXPECT_EQ(got.alloc.node_list, "");  // descriptive: left out
                               EXPECT_FALSE(got.usage.io_read_bytes.has_value());
                               return true;
                             })
                  .ok());
  EXPECT_EQ(seen, 1);
}

TEST_P(StoreSuite, GetJobSaysWhatIsMissing) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  auto got = (*store)->GetJob("", "404");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kNotFound);
  EXPECT_NE(got.status().message().find("no job 404"), std::string::npos);
}

// Two batches whose samples of a series start at the same millisecond (the first batch of a
// job holds one sample, the next one starts at that time again): both batches' samples are kept,
// and a batch sent twice (renumbered after a lost answer) adds nothing.
TEST_P(StoreSuite, BatchesStartingAtTheSameTimeAreMergedNotReplaced) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().message();
  JobRecord job = Job("7", 2000);
  job.end_time.reset();
  auto batch = [&](std::vector<Sample> samples) {
    JobTelemetry t;
    t.job = job;
    t.samples["memory_bytes"] = std::move(samples);
    return std::vector<JobTelemetry>{t};
  };
  auto first = batch({{1'000'000, 5}});
  auto second = batch({{1'000'000, 6}, {1'000'500, 7}, {1'001'000, 8}});
  ASSERT_TRUE(*(*store)->WriteTelemetry("a", 1, first));
  ASSERT_TRUE(*(*store)->WriteTelemetry("a", 2, second));
  ASSERT_TRUE(*(*store)->WriteTelemetry("a", 3, second));  // the same samples again
  std::vector<std::pair<int64_t, double>> got;
  ASSERT_TRUE((*store)
                  ->ReadSamples("c1", "7", "memory_bytes", 0, 2'000'000,
                                [&](const Sample& x) { got.emplace_back(x.t_ms, x.value); })
                  .ok());
  std::vector<std::pair<int64_t, double>> want = {
      {1'000'000, 5}, {1'000'000, 6}, {1'000'500, 7}, {1'001'000, 8}};
  EXPECT_EQ(got, want);
}

// Two servers on one store file: one of them trains; when it goes, the other takes over.
TEST_P(StoreSuite, OneOfTwoStoresOnAFileLeadsARoleUntilItCloses) {
  auto first = Open();
  auto second = Open();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(*(*first)->TryLead("train"));
  EXPECT_TRUE(*(*first)->TryLead("train"));  // still its own
  EXPECT_FALSE(*(*second)->TryLead("train"));
  EXPECT_TRUE(*(*second)->TryLead("follow"));  // another role, another lock
  first->reset();
  EXPECT_TRUE(*(*second)->TryLead("train"));
}

// A user pages through the job list: newest first, running jobs on top, every job once, and a
// filter holds on every page. A cursor that is not one is refused.
TEST_P(StoreSuite, TheJobListPagesNewestFirstWithoutGapsOrRepeats) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<JobRecord> jobs;
  for (int i = 1; i <= 25; ++i) {
    jobs.push_back(Job(std::to_string(i), 1000 + 10 * (i % 7), i % 5 == 0 ? "bob" : "alice"));
  }
  JobRecord running = Job("run", 0);
  running.end_time.reset();
  jobs.push_back(running);
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  JobPage page;
  page.limit = 4;
  std::vector<std::string> seen;
  std::optional<int64_t> last_end;
  int pages = 0;
  while (true) {
    auto list = (*store)->ListJobs({}, page);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    ++pages;
    for (const auto& j : list->jobs) {
      if (seen.empty()) {
        EXPECT_EQ(j.job_id, "run") << "a running job comes first";
      }
      if (!seen.empty() && last_end) {
        EXPECT_LE(j.end_time.value_or(INT64_MAX), *last_end);
      }
      last_end = j.end_time.value_or(INT64_MAX);
      seen.push_back(j.job_id);
    }
    if (!list->next) break;
    page.after = list->next;
  }
  EXPECT_EQ(pages, 7);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "a job listed twice";
  EXPECT_EQ(seen.size(), 26u);
  JobFilter bob;
  bob.user = "bob";
  auto bobs = (*store)->ListJobs(bob, {});
  ASSERT_TRUE(bobs.ok());
  EXPECT_EQ(bobs->jobs.size(), 5u);
  EXPECT_FALSE(bobs->next.has_value());
  JobPage bad;
  bad.after = "yesterday";
  EXPECT_EQ((*store)->ListJobs({}, bad).status().code(), Status::Code::kInvalidArgument);
}

TEST_P(StoreSuite, FiltersByStateAndEfficiencyAndCountsThem) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord idle = Job("1", 100);  // 3 of 16 GiB, and its CPU time unknown
  JobRecord busy = Job("2", 200);
  busy.usage.peak_rss_bytes = 15 * kGiB;
  busy.usage.cpu_time_s = 190;  // of 4 CPUs x 50 s
  busy.outcome.state = "FAILED";
  JobRecord zero = Job("3", 300);  // nothing allocated: no efficiency, no error
  zero.request.memory_bytes = 0;
  zero.request.cpus = 0;
  std::vector<JobRecord> jobs = {idle, busy, zero};
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  JobFilter f;
  f.efficiency_below = 0.5;
  std::vector<std::string> ids;
  ASSERT_TRUE(ScanIds(**store, f, &ids).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"1"}));
  f = JobFilter();
  f.state = "FAILED";
  EXPECT_EQ(*(*store)->CountJobs(f), 1);
  f.cluster = "c2";
  EXPECT_EQ(*(*store)->CountJobs(f), 0);
}

// A report scans more jobs than one page of the backend's reads, and may stop early.
TEST_P(StoreSuite, AScanSeesEveryJobOfALargeStoreOnceAndCanStop) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 45'000; ++i) jobs.push_back(Job(std::to_string(i + 1), 1000 + i));
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  int64_t n = 0, sum = 0;
  ASSERT_TRUE((*store)
                  ->ScanJobs({},
                             [&](const JobRecord& j) {
                               ++n;
                               sum += std::stoll(j.job_id);
                               return true;
                             })
                  .ok());
  EXPECT_EQ(n, 45'000);
  EXPECT_EQ(sum, int64_t{45'000} * 45'001 / 2);
  n = 0;
  ASSERT_TRUE((*store)->ScanJobs({}, [&](const JobRecord&) { return ++n < 3; }).ok());
  EXPECT_EQ(n, 3);
}

// One batch that names a job twice (sacct's running line, then its final one) stores one job,
// merged as two batches would be.
TEST_P(StoreSuite, ABatchNamingAJobTwiceStoresItOnce) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord first = Job("9", 1000);
  first.usage.gpu_util_pct = 30;
  JobRecord second = Job("9", 1000);
  second.outcome.state = "FAILED";
  std::vector<JobRecord> jobs = {first, Job("10", 900), second};
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 2);
  auto got = (*store)->GetJob("c1", "9");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->outcome.state, "FAILED");
  EXPECT_EQ(*got->usage.gpu_util_pct, 30) << "the first record's measurement is kept";
}

// Batches that mix stored and new jobs, one after the other (PostgreSQL copies new jobs
// straight into the table and merges stored ones another way): every job once, the changes
// kept, nothing else touched.
TEST_P(StoreSuite, BatchesMixingStoredAndNewJobsStoreEveryJobOnce) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  std::vector<JobRecord> first = {Job("1", 100), Job("2", 200)};
  ASSERT_TRUE((*store)->UpsertJobs(first).ok());
  JobRecord changed = Job("1", 100);
  changed.outcome.state = "FAILED";
  std::vector<JobRecord> mixed = {Job("3", 300), changed, Job("4", 400), Job("2", 200)};
  ASSERT_TRUE((*store)->UpsertJobs(mixed).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 4);
  EXPECT_EQ((*store)->GetJob("c1", "1")->outcome.state, "FAILED");
  EXPECT_EQ((*store)->GetJob("c1", "2")->outcome.state, "COMPLETED");
  std::vector<JobRecord> fresh = {Job("5", 500), Job("6", 600)};
  ASSERT_TRUE((*store)->UpsertJobs(fresh).ok());
  std::vector<JobRecord> again = {Job("7", 700), Job("5", 500)};
  again[1].usage.gpu_util_pct = 12;
  ASSERT_TRUE((*store)->UpsertJobs(again).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 7);
  EXPECT_EQ(*(*store)->GetJob("c1", "5")->usage.gpu_util_pct, 12);
  auto seven = (*store)->GetJob("c1", "7");
  ASSERT_TRUE(seven.ok()) << seven.status().ToString();
  EXPECT_EQ(*seven->end_time, 700);
  EXPECT_EQ(seven->alloc.gpu_type, "a100");
  // Each job is listed once.
  auto list = (*store)->ListJobs({}, JobPage{});
  ASSERT_TRUE(list.ok());
  std::set<std::string> ids;
  for (const JobRecord& j : list->jobs) ids.insert(j.job_id);
  EXPECT_EQ(ids.size(), 7u);
  EXPECT_EQ(list->jobs.size(), 7u);
}

// A bulk load (a large ingest): PostgreSQL splits each batch by job over several connections.
// A job named twice in a batch is merged in order, a re-ingest replaces, each job stored once.
TEST_P(StoreSuite, ABulkLoadStoresEveryJobOnceInOrder) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->SetBulkLoad(true).ok());
  std::vector<JobRecord> batch;
  for (int i = 0; i < 6000; ++i) batch.push_back(Job(std::to_string(i), 1000 + i));
  batch[7].usage.gpu_util_pct = 30;
  JobRecord again = Job("7", 1007);
  again.outcome.state = "FAILED";
  batch.push_back(again);
  ASSERT_TRUE((*store)->UpsertJobs(batch).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 6000);
  auto seven = (*store)->GetJob("c1", "7");
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(seven->outcome.state, "FAILED") << "the later record of the job";
  EXPECT_EQ(*seven->usage.gpu_util_pct, 30) << "the earlier record's measurement is kept";
  // Stored and new jobs in one batch, one of them changed.
  batch.pop_back();
  batch[100].outcome.state = "TIMEOUT";
  for (int i = 6000; i < 6500; ++i) batch.push_back(Job(std::to_string(i), 1000 + i));
  ASSERT_TRUE((*store)->UpsertJobs(batch).ok());
  ASSERT_TRUE((*store)->SetBulkLoad(false).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 6500);
  EXPECT_EQ((*store)->GetJob("c1", "100")->outcome.state, "TIMEOUT");
  JobFilter alice;
  alice.user = "alice";
  std::set<std::string> ids;
  ASSERT_TRUE((*store)
                  ->ScanJobs(alice,
                             [&](const JobRecord& j) {
                               EXPECT_TRUE(ids.insert(j.job_id).second) << j.job_id;
                               return true;
                             })
                  .ok());
  EXPECT_EQ(ids.size(), 6500u);
}

TEST_P(StoreSuite, TextWithTabsNewlinesAndBackslashesRoundTrips) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord j = Job("1", 100);
  j.request.job_name = "a\tb\nc\\d\re 'quoted' \"x\" ünïcode";
  j.alloc.node_list = "\\N";
  ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  auto got = (*store)->GetJob("c1", "1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->request.job_name, j.request.job_name);
  EXPECT_EQ(got->alloc.node_list, "\\N");
}

TEST_P(StoreSuite, ClusterMetadataIsKeptPerClusterAndReplacedPerKey) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutClusterMeta("c1", {{"MaxNodes", "128"}, {"Note", "x"}}).ok());
  ASSERT_TRUE((*store)->PutClusterMeta("c1", {{"MaxNodes", "256"}}).ok());
  ASSERT_TRUE((*store)->PutClusterMeta("c2", {{"MaxNodes", "4"}}).ok());
  auto meta = (*store)->GetClusterMeta("c1");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(*meta, (std::map<std::string, std::string>{{"MaxNodes", "256"}, {"Note", "x"}}));
  EXPECT_TRUE((*store)->GetClusterMeta("c3")->empty());
}

// `train` stores versions 1, 2, …; `predict` reads the newest or a given one; old versions go.
TEST_P(StoreSuite, ModelsAreVersionedAndTheLastFewKept) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->LatestModelVersion("c1").status().code(), Status::Code::kNotFound);
  EXPECT_NE((*store)->GetModel("c1", 0).status().message().find("rightsize train"),
            std::string::npos);
  std::string blob("\0\x01\xff model \\x00 bytes", 20);
  for (int v = 1; v <= 7; ++v) {
    auto put = (*store)->PutModel("c1", 1000 + v, int64_t{10} * v, blob + std::to_string(v));
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    EXPECT_EQ(*put, v);
  }
  EXPECT_EQ(*(*store)->PutModel("c2", 5, 1, "other"), 1) << "each cluster numbers its own";
  EXPECT_EQ(*(*store)->LatestModelVersion("c1"), 7);
  auto newest = (*store)->GetModel("c1", 0);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->version, 7);
  EXPECT_EQ(newest->trained_at, 1007);
  EXPECT_EQ(newest->jobs, 70);
  EXPECT_EQ(newest->blob, blob + "7");
  EXPECT_EQ((*store)->GetModel("c1", 3)->blob, blob + "3");
  EXPECT_EQ((*store)->GetModel("c1", 2).status().code(), Status::Code::kNotFound)
      << "only the last five are kept";
}

// An agent's batches: samples, stacks and the job's record stored together; a replayed batch
// (same or older seq) stores nothing; each agent counts its own batches; a group commit stores
// several agents' batches and says which were replays.
TEST_P(StoreSuite, TelemetryIsStoredOnceAndReadBack) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord job = Job("7", 0);
  job.source = "agent";
  job.end_time.reset();
  job.start_time = 900;
  auto batch = Telemetry(job, "gpu_util", {{1'000'000, 10}, {1'001'000, 20}, {1'002'000, 30}});
  batch[0].samples["memory_bytes"] = {{1'000'000, 1e9}};
  batch[0].stacks["main;train;step"] = 3;
  EXPECT_EQ(*(*store)->LastTelemetrySeq("node1"), 0);
  ASSERT_TRUE(*(*store)->WriteTelemetry("node1", 1, batch));
  EXPECT_FALSE(*(*store)->WriteTelemetry("node1", 1, batch)) << "a replay";
  EXPECT_EQ(*(*store)->LastTelemetrySeq("node1"), 1);
  EXPECT_EQ(
      Samples(**store, "7", "gpu_util"),
      (std::vector<std::pair<int64_t, double>>{{1'000'000, 10}, {1'001'000, 20}, {1'002'000, 30}}));
  EXPECT_EQ(*(*store)->SampleMetrics("c1", "7"),
            (std::vector<std::string>{"gpu_util", "memory_bytes"}));
  EXPECT_EQ(*(*store)->GetStacks("c1", "7"),
            (std::map<std::string, int64_t>{{"main;train;step", 3}}));
  auto running = (*store)->GetJob("c1", "7");
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->source, "agent");
  EXPECT_FALSE(running->end_time.has_value());

  // A range read returns only what lies in it.
  std::vector<int64_t> times;
  ASSERT_TRUE((*store)
                  ->ReadSamples("c1", "7", "gpu_util", 1'000'500, 1'001'500,
                                [&](const Sample& x) { times.push_back(x.t_ms); })
                  .ok());
  EXPECT_EQ(times, (std::vector<int64_t>{1'001'000}));

  // The next batch adds samples and stack counts; the job ends.
  auto next = Telemetry(job, "gpu_util", {{1'003'000, 40}});
  next[0].job.end_time = 1010;
  next[0].stacks["main;train;step"] = 2;
  JobTelemetry other_job;
  other_job.job = Job("8", 0);
  other_job.job.source = "agent";
  other_job.job.end_time.reset();
  other_job.samples["gpu_util"] = {{1'000'000, 99}};
  std::vector<JobTelemetry> other_batch = {other_job};
  std::vector<Store::TelemetryWrite> group = {
      {"node1", 2, next}, {"node2", 5, other_batch}, {"node1", 2, next}};
  auto stored = (*store)->WriteTelemetryGroup(group);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(*(*store)->LastTelemetrySeq("node2"), 5);
  EXPECT_EQ(Samples(**store, "7", "gpu_util").size(), 4u);
  EXPECT_EQ(Samples(**store, "8", "gpu_util").size(), 1u);
  EXPECT_EQ((*store)->GetStacks("c1", "7")->at("main;train;step"), 5);
  EXPECT_EQ(*(*store)->GetJob("c1", "7")->end_time, 1010);
  EXPECT_TRUE((*store)->SampleMetrics("c1", "9")->empty());
  EXPECT_TRUE((*store)->GetStacks("c1", "9")->empty());
}

// sacct described the job; the agent's telemetry adds its measurements once the job ended, and
// never replaces the scheduler's description. A failure the agent diagnosed is kept.
TEST_P(StoreSuite, TelemetryOfAJobTheSchedulerDescribedOnlyAddsUsage) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord sacct = Job("11", 2000);
  sacct.source = "sacct";
  sacct.start_time = 1000;
  sacct.usage.peak_rss_bytes.reset();
  ASSERT_TRUE((*store)->UpsertJobs({&sacct, 1}).ok());
  JobRecord agent;
  agent.cluster = "c1";
  agent.job_id = "11";
  agent.source = "agent";
  agent.start_time = 1001;
  agent.end_time = 2001;
  agent.usage.peak_rss_bytes = 7 * kGiB;
  auto batch = Telemetry(agent, "memory_bytes", {{1'500'000, 7e9}});
  batch[0].diagnosis = ShippedDiagnosis{"host_oom", 1.0, R"({"class":"host_oom"})"};
  ASSERT_TRUE(*(*store)->WriteTelemetry("node1", 1, batch));
  auto got = (*store)->GetJob("c1", "11");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->source, "sacct");
  EXPECT_EQ(got->request.user, "alice");
  EXPECT_EQ(*got->end_time, 2000);
  EXPECT_EQ(*got->usage.peak_rss_bytes, 7 * kGiB);
  EXPECT_EQ((*store)->GetDiagnosis("c1", "11")->cls, "host_oom");
}

TEST_P(StoreSuite, JobCodeIsStoredReplacedAndScannedPerCluster) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->GetJobCode("c1", "1").status().code(), Status::Code::kNotFound);
  StoredJobCode code{"c1", "1", 900, "abc", "train.py", R"({"framework":"torch"})", ""};
  ASSERT_TRUE((*store)->PutJobCode(code).ok());
  code.code_hash = "def";
  code.estimate = R"({"memory_bytes":1})";
  ASSERT_TRUE((*store)->PutJobCode(code).ok());
  StoredJobCode other{"c1", "2", 901, "", "run.sh", "{}", ""};
  ASSERT_TRUE((*store)->PutJobCode(other).ok());
  StoredJobCode elsewhere{"c2", "1", 902, "x", "a.py", "{}", ""};
  ASSERT_TRUE((*store)->PutJobCode(elsewhere).ok());
  auto got = (*store)->GetJobCode("c1", "1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->code_hash, "def");
  EXPECT_EQ(got->program, "train.py");
  EXPECT_EQ(got->facts, R"({"framework":"torch"})");
  EXPECT_EQ(got->estimate, R"({"memory_bytes":1})");
  std::vector<std::string> ids;
  ASSERT_TRUE((*store)
                  ->ScanJobCode("c1",
                                [&](const StoredJobCode& c) {
                                  ids.push_back(c.job_id);
                                  return true;
                                })
                  .ok());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "2"}));
}

TEST_P(StoreSuite, APredictionIsKeptWithItsJobAndReplaced) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->GetPrediction("c1", "5").status().code(), Status::Code::kNotFound);
  ASSERT_TRUE((*store)->PutPrediction({"c1", "5", 100, R"({"v":1})"}).ok());
  ASSERT_TRUE((*store)->PutPrediction({"c1", "5", 200, R"({"v":2})"}).ok());
  auto again = Open();  // another server reads it
  ASSERT_TRUE(again.ok());
  auto got = (*again)->GetPrediction("c1", "5");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->created_at, 200);
  EXPECT_EQ(got->document, R"({"v":2})");
  EXPECT_FALSE((*again)->GetPrediction("c2", "5").ok());
}

// The database server dropped the store's connection (a restart, a failover): the next call
// connects again instead of failing for the rest of the server's life.
class PostgresStoreTest : public StoreSuite {};
INSTANTIATE_TEST_SUITE_P(Backends, PostgresStoreTest, ::testing::Values("postgresql"),
                         [](const auto& info) { return info.param; });

TEST_P(PostgresStoreTest, AStoreOutlivesADroppedConnection) {
  auto store = Open();
  ASSERT_TRUE(store.ok());
  JobRecord j = Job("1", 100);
  ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  ASSERT_TRUE(*(*store)->TryLead("train"));
  PGconn* admin = PQconnectdb(location_.c_str());
  PGresult* r = PQexec(admin,
                       "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND pid <> pg_backend_pid()");
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(admin);
  PQclear(r);
  PQfinish(admin);
  auto got = (*store)->GetJob("c1", "1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  JobRecord k = Job("2", 200);
  ASSERT_TRUE((*store)->UpsertJobs({&k, 1}).ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 2);
  EXPECT_TRUE(*(*store)->TryLead("train")) << "the role is taken again on the new connection";
}

// Two bulk loads of the same jobs at once (two `ingest` processes, each over several
// connections): both succeed and each job is stored once, with the records' values.
TEST_P(PostgresStoreTest, ConcurrentBulkLoadsOfTheSameJobsStoreEachOnce) {
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<JobRecord> batch;
  for (int i = 0; i < 20000; ++i) batch.push_back(Job(std::to_string(i), 1000 + i));
  ASSERT_TRUE((*a)->SetBulkLoad(true).ok());
  ASSERT_TRUE((*b)->SetBulkLoad(true).ok());
  for (int round = 0; round < 3; ++round) {  // new jobs, then stored ones, twice
    Status sa, sb;
    std::thread ta([&] { sa = (*a)->UpsertJobs(batch); });
    std::thread tb([&] { sb = (*b)->UpsertJobs(batch); });
    ta.join();
    tb.join();
    ASSERT_TRUE(sa.ok()) << sa.ToString();
    ASSERT_TRUE(sb.ok()) << sb.ToString();
  }
  ASSERT_TRUE((*a)->SetBulkLoad(false).ok());
  ASSERT_TRUE((*b)->SetBulkLoad(false).ok());
  EXPECT_EQ(*(*a)->CountJobs({}), 20000);
  std::set<std::string> ids;
  ASSERT_TRUE((*a)->ScanJobs({},
                             [&](const JobRecord& j) {
                               EXPECT_TRUE(ids.insert(j.job_id).second) << j.job_id;
                               return true;
                             })
                  .ok());
  EXPECT_EQ(ids.size(), 20000u);
  EXPECT_EQ(*(*a)->GetJob("c1", "19999")->end_time, 20999);
}

// A version-1 database (its past's indexes led by the cluster) is migrated on open: the
// indexes lead with the user's and the program's name, and the jobs are all there.
TEST_P(PostgresStoreTest, AVersionOneDatabaseGetsTheNameLedIndexes) {
  {
    auto store = Open();
    ASSERT_TRUE(store.ok());
    JobRecord j = Job("1", 100);
    ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  }
  auto sql = [&](const char* statement) {
    PGconn* conn = PQconnectdb(location_.c_str());
    PGresult* r = PQexec(conn, statement);
    EXPECT_TRUE(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
        << PQerrorMessage(conn);
    std::string out = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    PQfinish(conn);
    return out;
  };
  sql("DROP INDEX jobs_by_user, jobs_by_name; "
      "CREATE INDEX jobs_by_user ON jobs (cluster, user_name, end_time); "
      "CREATE INDEX jobs_by_name ON jobs (cluster, job_name, end_time); "
      "UPDATE rightsize_schema SET version = 1");
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(sql("SELECT version FROM rightsize_schema"), "2");
  EXPECT_NE(sql("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_by_user'")
                .find("(user_name, cluster, end_time)"),
            std::string::npos);
  EXPECT_NE(sql("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_by_name'")
                .find("(job_name, cluster, end_time)"),
            std::string::npos);
  JobFilter alice;
  alice.cluster = "c1";
  alice.user = "alice";
  EXPECT_EQ(*(*store)->CountJobs(alice), 1);
}

}  // namespace
}  // namespace rightsize

#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "store/changes.h"
#include "store/store.h"

namespace rightsize {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rightsize-store-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    path_ = (dir_ / "sub" / "rs.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

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

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SqliteStoreTest, RoundTripsEveryFieldAndKeepsUnknownsUnknown) {
  auto store = OpenStore(path_);
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

TEST_F(SqliteStoreTest, ReingestingReplacesInsteadOfDuplicating) {
  auto store = OpenStore(path_);
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
TEST_F(SqliteStoreTest, AgentAndSchedulerRecordsOfAJobMerge) {
  auto store = OpenStore(path_);
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

TEST_F(SqliteStoreTest, ScansFilterByEndTimeAndUser) {
  auto store = OpenStore(path_);
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
TEST_F(SqliteStoreTest, ScansCanTakeTheNewestFinishedJobs) {
  auto store = OpenStore(path_);
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

TEST_F(SqliteStoreTest, DataSurvivesReopenAndSchemaIsVersioned) {
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    JobRecord j = Job("7", 700);
    ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
    ASSERT_TRUE((*store)->PutClusterMeta("c1", {{"swf.MaxProcs", "100"}}).ok());
  }
  auto store = OpenStore(path_);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->CountJobs({}), 1);
  EXPECT_EQ((*(*store)->GetClusterMeta("c1")).at("swf.MaxProcs"), "100");
  // The file says which schema it holds.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), kSqliteSchemaVersion);
  sqlite3_finalize(stmt);
  // A file from a newer rightsize is refused, not damaged.
  sqlite3_exec(db, "PRAGMA user_version = 999", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto newer = OpenStore(path_);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer"), std::string::npos);
}

// Schema 5 keeps the models in a rowid table (a WITHOUT ROWID key dragged the model's blob
// through every lookup of the newest version); a version-4 file keeps its models on upgrade.
TEST_F(SqliteStoreTest, ModelsSurviveTheUpgradeFromSchemaFour) {
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutModel("c1", 100, 10, std::string(300000, 'a')).ok());
    ASSERT_TRUE((*store)->PutModel("c1", 200, 20, std::string(300000, 'b')).ok());
  }
  // The file as schema 4 wrote it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(
          db,
          "CREATE TABLE models_v4 (cluster TEXT NOT NULL, version INTEGER NOT NULL, "
          "trained_at INTEGER NOT NULL, jobs INTEGER NOT NULL, blob BLOB NOT NULL, "
          "PRIMARY KEY (cluster, version)) WITHOUT ROWID;"
          "INSERT INTO models_v4 SELECT * FROM models; DROP TABLE models;"
          "ALTER TABLE models_v4 RENAME TO models; DROP TABLE job_code;"
          "DROP TABLE history_generation; DROP TRIGGER jobs_history_insert;"
          "DROP TRIGGER jobs_history_update; DROP TRIGGER jobs_history_delete;"
          "ALTER TABLE jobs DROP COLUMN gpu_energy_j; ALTER TABLE jobs DROP COLUMN cpu_energy_j; "
          "ALTER TABLE jobs DROP COLUMN node_energy_j; "
          "PRAGMA user_version = 4;",
          nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(*(*store)->LatestModelVersion("c1"), 2);
  auto newest = (*store)->GetModel("c1", 0);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->version, 2);
  EXPECT_EQ(newest->jobs, 20);
  EXPECT_EQ(newest->blob, std::string(300000, 'b'));
  EXPECT_EQ((*store)->GetModel("c1", 1)->blob, std::string(300000, 'a'));
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = 'models'", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  EXPECT_EQ(sql.find("WITHOUT ROWID"), std::string::npos) << sql;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, DiagnosisIsKeptWithTheJobAndReplaced) {
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ((*store)->GetDiagnosis("c1", "7").status().code(), Status::Code::kNotFound);
    StoredDiagnosis d{"c1", "7", 1000, "host_oom", 0.9, R"({"class":"host_oom"})"};
    ASSERT_TRUE((*store)->PutDiagnosis(d).ok());
    d.cls = "timeout";
    d.created_at = 2000;
    ASSERT_TRUE((*store)->PutDiagnosis(d).ok());
  }
  auto store = OpenStore(path_);  // survives reopening
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
TEST_F(SqliteStoreTest, AWeakerDiagnosisNeverReplacesAStrongerOne) {
  auto store = OpenStore(path_);
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

// Schema 6 keeps the code each job ran; a version-5 file (no job_code table) upgrades in place,
// keeping its jobs, and then stores code.
// Schema 8 added the jobs' energy: a version-7 file keeps its jobs, with the energy unknown, and
// stores energy from then on.
TEST_F(SqliteStoreTest, AVersionSevenFileGainsTheJobsEnergy) {
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    JobRecord j = Job("1", 1000);
    ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE jobs DROP COLUMN gpu_energy_j; ALTER TABLE jobs DROP COLUMN "
                         "cpu_energy_j; ALTER TABLE jobs DROP COLUMN node_energy_j; PRAGMA "
                         "user_version = 7;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto old = (*store)->GetJob("c1", "1");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(old->usage.gpu_energy_j.has_value());
  EXPECT_FALSE(old->usage.node_energy_j.has_value());
  JobRecord j = Job("2", 2000);
  j.usage.gpu_energy_j = 3'600'000.125;
  j.usage.cpu_energy_j = 12.5;
  j.usage.node_energy_j = 4'000'000;
  ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  auto got = (*store)->GetJob("c1", "2");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->usage.gpu_energy_j, 3'600'000.125);
  EXPECT_EQ(got->usage.cpu_energy_j, 12.5);
  EXPECT_EQ(got->usage.node_energy_j, 4'000'000.0);
}

TEST_F(SqliteStoreTest, JobCodeIsKeptAndAVersionFiveFileUpgrades) {
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    JobRecord j = Job("1", 1000);
    ASSERT_TRUE((*store)->UpsertJobs({&j, 1}).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(
          db,
          "DROP TABLE job_code; DROP TABLE history_generation; DROP TRIGGER "
          "jobs_history_insert; DROP TRIGGER jobs_history_update; DROP TRIGGER "
          "jobs_history_delete; "
          "ALTER TABLE jobs DROP COLUMN gpu_energy_j; ALTER TABLE jobs DROP COLUMN cpu_energy_j; "
          "ALTER TABLE jobs DROP COLUMN node_energy_j; "
          "PRAGMA user_version = 5;",
          nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(*(*store)->CountJobs({}), 1);
  EXPECT_EQ((*store)->GetJobCode("c1", "1").status().code(), Status::Code::kNotFound);
  StoredJobCode c{"c1",
                  "1",
                  900,
                  "abc",
                  "train.py",
                  R"({"facts":{"batch_size":{"value":16}}})",
                  R"({"p50":1e9})"};
  ASSERT_TRUE((*store)->PutJobCode(c).ok());
  c.job_id = "2";
  c.code_hash = "def";
  ASSERT_TRUE((*store)->PutJobCode(c).ok());
  c.facts = R"({"facts":{"batch_size":{"value":32}}})";
  ASSERT_TRUE((*store)->PutJobCode(c).ok());  // replaces job 2's
  StoredJobCode other{"c2", "1", 900, "x", "infer.py", "{}", ""};
  ASSERT_TRUE((*store)->PutJobCode(other).ok());
  auto got = (*store)->GetJobCode("c1", "1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->code_hash, "abc");
  EXPECT_EQ(got->program, "train.py");
  EXPECT_EQ(got->created_at, 900);
  EXPECT_EQ(got->estimate, R"({"p50":1e9})");
  std::map<std::string, std::string> facts;
  ASSERT_TRUE((*store)
                  ->ScanJobCode("c1",
                                [&](const StoredJobCode& s) {
                                  facts[s.job_id] = s.facts;
                                  return true;
                                })
                  .ok());
  ASSERT_EQ(facts.size(), 2U);  // c2's is not c1's
  EXPECT_EQ(facts["2"], R"({"facts":{"batch_size":{"value":32}}})");
}

TEST_F(SqliteStoreTest, BulkLoadDropsThePastIndexesAndTheyComeBack) {
  auto count_indexes = [this] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                       "('jobs_by_user', 'jobs_by_name')",
                       -1, &stmt, nullptr);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    int n = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
  };
  {
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(count_indexes(), 2);
    ASSERT_TRUE((*store)->SetBulkLoad(true).ok());
    EXPECT_EQ(count_indexes(), 0);
    ASSERT_TRUE((*store)->SetBulkLoad(false).ok());
    EXPECT_EQ(count_indexes(), 2);
    // A bulk load that never finished (the process died)...
    ASSERT_TRUE((*store)->SetBulkLoad(true).ok());
  }
  // ...is repaired by the next open.
  auto again = OpenStore(path_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(count_indexes(), 2);
}

// What a cache of the past asks (store/changes.h): each connection hears of a finished job or
// a job's code written by any connection, and not of a running job's progress, of a finished job
// stored again unchanged, or of its own earlier question's answer twice. A bulk load is heard of
// once, at its end, or at the next open when it died.
TEST_F(SqliteStoreTest, TheHistoryChangesWithFinishedJobsOnly) {
  auto a = OpenStore(path_);
  auto b = OpenStore(path_);
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
  auto c = OpenStore(path_);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "a bulk load that died";
  JobRecord after = Job("4", 1700);
  ASSERT_TRUE((*c)->UpsertJobs({&after, 1}).ok());
  EXPECT_TRUE(HistoryChangedSinceLastAsked(sa)) << "the triggers came back";
}

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotAStore) {
  std::filesystem::create_directories(dir_);
  std::string bogus = (dir_ / "notes.txt").string();
  std::ofstream(bogus) << "this is not a database, just some text that is long enough\n";
  auto store = OpenStore(bogus);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not a rightsize store"), std::string::npos);
}

TEST_F(SqliteStoreTest, EveryKindOfJobIdIsKeptApart) {
  auto store = OpenStore(path_);
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

TEST_F(SqliteStoreTest, LeanScansLeaveDescriptiveFieldsUnset) {
  auto store = OpenStore(path_);
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

TEST_F(SqliteStoreTest, GetJobSaysWhatIsMissing) {
  auto store = OpenStore(path_);
  ASSERT_TRUE(store.ok());
  auto got = (*store)->GetJob("", "404");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kNotFound);
  EXPECT_NE(got.status().message().find("no job 404"), std::string::npos);
}

// Two batches whose samples of a series start at the same millisecond (the first batch of a
// job holds one sample, the next one starts at that time again): both batches' samples are kept,
// and a batch sent twice (renumbered after a lost answer) adds nothing.
TEST_F(SqliteStoreTest, BatchesStartingAtTheSameTimeAreMergedNotReplaced) {
  auto store = OpenSqliteStore(path_);
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
TEST_F(SqliteStoreTest, OneOfTwoStoresOnAFileLeadsARoleUntilItCloses) {
  auto first = OpenSqliteStore(path_);
  auto second = OpenSqliteStore(path_);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(*(*first)->TryLead("train"));
  EXPECT_TRUE(*(*first)->TryLead("train"));  // still its own
  EXPECT_FALSE(*(*second)->TryLead("train"));
  EXPECT_TRUE(*(*second)->TryLead("follow"));  // another role, another lock
  first->reset();
  EXPECT_TRUE(*(*second)->TryLead("train"));
}

TEST(DefaultStorePathTest, FollowsXdgAndOverrides) {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* k) -> std::optional<std::string> {
      auto it = m.find(k);
      return it == m.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  };
  EXPECT_EQ(DefaultStorePath(env({{"HOME", "/home/a"}})),
            "/home/a/.local/share/rightsize/rightsize.db");
  EXPECT_EQ(DefaultStorePath(env({{"HOME", "/home/a"}, {"XDG_DATA_HOME", "/x"}})),
            "/x/rightsize/rightsize.db");
  EXPECT_EQ(DefaultStorePath(env({{"RIGHTSIZE_DB", "/tmp/r.db"}, {"HOME", "/h"}})), "/tmp/r.db");
}

}  // namespace
}  // namespace rightsize

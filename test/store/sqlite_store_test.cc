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

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotAStore) {
  std::filesystem::create_directories(dir_);
  std::string bogus = (dir_ / "notes.txt").string();
  std::ofstream(bogus) << "this is not a database, just some text that is long enough\n";
  auto store = OpenStore(bogus);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not a rightsize store"), std::string::npos);
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

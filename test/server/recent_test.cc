// The dashboard's API on a store of old data (issue 28): jobs of a 2002 trace with no end time,
// RUNNING rows of a sacct export made long ago, accounting that ended years ago. What counts as
// running now and which window is shown by default: server/recent.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "report/job_card.h"
#include "report/live.h"
#include "report/prices.h"
#include "server/server.h"
#include "store/store.h"

namespace rightsize {
namespace {

constexpr int64_t kNow = 1'796'000'000;      // 2026-11-30
constexpr int64_t kFeb2023 = 1'676'000'000;  // 2023-02-10T03:33:20Z

std::string TempDb(const char* name) {
  auto p = std::filesystem::temp_directory_path() /
           (std::string("rightsize-recent-test-") + name + "-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

JobRecord Job(const std::string& cluster, const std::string& id, const std::string& state,
              std::optional<int64_t> start, std::optional<int64_t> end) {
  JobRecord j;
  j.cluster = cluster;
  j.job_id = id;
  j.source = "sacct";
  j.request.user = "alice";
  j.request.cpus = 8;
  j.alloc.cpus = 8;
  j.start_time = start;
  j.end_time = end;
  if (start && end) {
    j.usage.elapsed_s = static_cast<double>(*end - *start);
    j.usage.cpu_time_s = *j.usage.elapsed_s * 2;  // 2 of 8 cores busy
  }
  j.outcome.state = state;
  return j;
}

// An agent's job with samples from `first_s` to `last_s`, one a second.
JobTelemetry AgentJob(const std::string& cluster, const std::string& id, int64_t first_s,
                      int64_t last_s) {
  JobTelemetry t;
  t.job = Job(cluster, id, "RUNNING", first_s, std::nullopt);
  t.job.source = "agent";
  for (int64_t s = first_s; s <= last_s; ++s) {
    t.samples["cpu_cores"].push_back(Sample{s * 1000, 1.5});
    t.samples["memory_bytes"].push_back(Sample{s * 1000, 1e9});
  }
  return t;
}

class RecentData : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.db = TempDb(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o_.now_s = [] { return kNow; };
    api_ = std::make_unique<ApiServer>(o_);
    ASSERT_TRUE(api_->Init().ok());
    auto store = OpenStore(o_.db);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    ops_.known = ops_.admin = true;
  }
  void Put(std::vector<JobRecord> jobs) { ASSERT_TRUE(store_->UpsertJobs(jobs).ok()); }
  nlohmann::json Get(const ApiServer::Reply& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body);
  }
  nlohmann::json ClusterCard(const std::string& name) {
    auto all = Get(api_->Overview(ops_));
    for (const auto& c : all["clusters"]) {
      if (c["cluster"] == name) return c;
    }
    ADD_FAILURE() << "no card for cluster " << name << " in " << all.dump();
    return {};
  }

  ServerOptions o_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<Store> store_;
  ApiServer::Caller ops_;
};

// The HPC2N trace of 2002 has jobs in state UNKNOWN without an end time: the job list must not
// show them as running for "8845d 15h".
TEST_F(RecentData, AJobOfAnOldTraceWithoutAnEndHasNoElapsedTimeFromTheClock) {
  Put({Job("HPC2N", "7", "UNKNOWN", 1'030'000'000, std::nullopt),
       Job("HPC2N", "8", "COMPLETED", 1'030'000'000, 1'030'003'600)});
  auto rows = Get(api_->Jobs(ops_, {}))["jobs"];
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    if (r["job_id"] == "7") {
      EXPECT_TRUE(r["elapsed_s"].is_null()) << r.dump();
      EXPECT_EQ(r["running_now"], false);
    } else {
      EXPECT_EQ(r["elapsed_s"], 3600.0);
    }
  }
  EXPECT_EQ(ClusterCard("HPC2N")["running_jobs"], 0);
}

// `rightsize job` and the job page's efficiency on that job: no "running for 8846-06:02:37" and
// no time efficiency of 2,653,876 %: no agent ever sampled it, so nothing is known of it so far.
TEST_F(RecentData, TheJobCardOfAnOldJobWithoutAnEndDoesNotRunForYears) {
  auto old = Job("HPC2N", "7", "UNKNOWN", 1'030'000'000, std::nullopt);
  old.request.time_limit_s = 8 * 3600;
  Put({old});
  auto view = ViewJob(*store_, "HPC2N", "7", kNow);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->job.usage.elapsed_s.has_value()) << *view->job.usage.elapsed_s;
  auto prices = PricesFor("");
  ASSERT_TRUE(prices.ok());
  std::string card = RenderJobCardText(view->job, *prices);
  EXPECT_EQ(card.find("running for"), std::string::npos) << card;
  auto page = Get(api_->Job(ops_, "HPC2N", "7"));
  EXPECT_TRUE(page["efficiency"]["time"].is_null()) << page["efficiency"].dump();
  EXPECT_TRUE(page["summary"]["elapsed_s"].is_null());
}

// A sacct export of 2024 lists 3 jobs as RUNNING: in 2026 they are not running now. Jobs an agent
// sees alive are; a job whose agent stopped sending 20 minutes ago is not; a fresh export's
// RUNNING rows are. The overview's count and the RUNNING list agree, cluster by cluster.
TEST_F(RecentData, RunningNowMeansSeenAliveRecentlyAndCountsMatchTheList) {
  const int64_t apr2024 = 1'713'400'000;
  Put({Job("habrok", "1", "RUNNING", apr2024 - 7200, std::nullopt),
       Job("habrok", "2", "RUNNING", apr2024 - 3600, std::nullopt),
       Job("habrok", "3", "RUNNING", apr2024, std::nullopt),
       Job("habrok", "4", "COMPLETED", apr2024 - 9000, apr2024 - 100),
       Job("fresh", "10", "RUNNING", kNow - 5 * 3600, std::nullopt),
       Job("fresh", "11", "COMPLETED", kNow - 9 * 3600, kNow - 2 * 3600)});
  std::vector<JobTelemetry> live = {AgentJob("live", "100", kNow - 300, kNow - 5),
                                    AgentJob("live", "101", kNow - 3600, kNow - 1200)};
  ASSERT_TRUE(*store_->WriteTelemetry("node1", 1, live));

  std::map<std::string, int64_t> want = {{"habrok", 0}, {"fresh", 1}, {"live", 1}};
  for (const auto& [cluster, n] : want) {
    auto card = ClusterCard(cluster);
    EXPECT_EQ(card["running_jobs"], n) << cluster;
    auto list = Get(api_->Jobs(ops_, {{"cluster", cluster}, {"state", "RUNNING"}}))["jobs"];
    EXPECT_EQ(static_cast<int64_t>(list.size()), n) << cluster << ": " << list.dump();
    for (const auto& r : list) EXPECT_EQ(r["running_now"], true) << r.dump();
  }
  EXPECT_DOUBLE_EQ(ClusterCard("habrok")["now"]["allocated"]["cpus"].get<double>(), 0.0);
  // The stale rows are still listed, as what accounting last said, without a growing clock.
  auto all = Get(api_->Jobs(ops_, {{"cluster", "habrok"}}))["jobs"];
  ASSERT_EQ(all.size(), 4u);
  for (const auto& r : all) {
    if (r["state"] == "RUNNING") {
      EXPECT_EQ(r["running_now"], false);
      EXPECT_TRUE(r["elapsed_s"].is_null()) << r.dump();
    }
  }
  auto job = Get(api_->Job(ops_, "live", "100"));
  EXPECT_EQ(job["summary"]["running_now"], true);
  EXPECT_NEAR(job["summary"]["elapsed_s"].get<double>(), 300, 1);
}

// A store of 2023 accounting: the report without dates shows the 14 days up to the last job
// that ended, and says so; with a recent job it is the last 14 days again.
TEST_F(RecentData, TheReportDefaultsToTheLatestWindowWithDataAndSaysSo) {
  Put({Job("alex", "1", "COMPLETED", kFeb2023 - 7200, kFeb2023),
       Job("alex", "2", "COMPLETED", kFeb2023 - 86400 * 2, kFeb2023 - 86400),
       Job("alex", "3", "COMPLETED", kFeb2023 - 86400 * 30, kFeb2023 - 86400 * 29)});
  auto r = Get(api_->Report(ops_, {}));
  EXPECT_EQ(r["jobs"], 2) << r["window"].dump();
  EXPECT_EQ(r["window"]["default"], "latest_with_data");
  EXPECT_EQ(r["window"]["note"],
            "no jobs ended in the last 14 days; showing the 14 days up to 2023-02-10");
  // Dates given: exactly those, no note.
  auto given = Get(api_->Report(ops_, {{"since", "14d"}}));
  EXPECT_EQ(given["jobs"], 0);
  EXPECT_FALSE(given["window"].contains("note"));

  // The overview's week, likewise.
  auto card = ClusterCard("alex");
  EXPECT_EQ(card["week"]["jobs"], 2);
  EXPECT_EQ(card["week"]["latest_with_data"], true);
  EXPECT_EQ(card["week"]["note"],
            "no jobs ended in the last 7 days; showing the 7 days up to 2023-02-10");
  EXPECT_GT(card["week"]["wasted_core_hours"].get<double>(), 0);

  Put({Job("alex", "4", "COMPLETED", kNow - 7200, kNow - 3600)});
  auto recent = Get(api_->Report(ops_, {}));
  EXPECT_EQ(recent["jobs"], 1);
  EXPECT_EQ(recent["window"]["default"], "last_14_days");
  EXPECT_TRUE(recent["window"]["note"].is_null());
}

// A person sees their own jobs: the default window follows the last of *their* jobs.
TEST_F(RecentData, APersonsDefaultWindowIsTheirOwnLatest) {
  auto bob_job = Job("alex", "9", "COMPLETED", kNow - 7200, kNow - 3600);
  bob_job.request.user = "bob";
  Put({Job("alex", "1", "COMPLETED", kFeb2023 - 7200, kFeb2023), bob_job});
  ApiServer::Caller alice;
  alice.known = true;
  alice.user = "alice";
  auto r = Get(api_->Report(alice, {}));
  EXPECT_EQ(r["jobs"], 1);
  EXPECT_EQ(r["window"]["default"], "latest_with_data");
}

// The report's "what the queue would have done" (issue 29), as `rightsize report` has it: the
// window's jobs replayed through EASY on the cluster's CPUs. Only in a report of every job.
TEST_F(RecentData, TheAdminsReportSaysWhatTheQueueWouldHaveDone) {
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 6; ++i) {
    // Each asks for 8 h and runs 1 h on 8 of the cluster's 16 CPUs; they queue.
    JobRecord j = Job("q", std::to_string(i + 1), "COMPLETED", kNow - 86400 + i * 3600,
                      kNow - 86400 + i * 3600 + 3600);
    j.submit_time = kNow - 86400;
    j.request.time_limit_s = 8 * 3600;
    jobs.push_back(j);
  }
  Put(jobs);
  auto r = Get(api_->Report(ops_, {}));
  ASSERT_TRUE(r.contains("queue")) << r.dump();
  EXPECT_EQ(r["queue"]["simulated"], false);
  EXPECT_EQ(r["queue"]["why_not"], "the cluster's CPU count is not known (ingest sinfo)");

  ASSERT_TRUE(store_->PutClusterMeta("q", {{"cpus", "16"}}).ok());
  r = Get(api_->Report(ops_, {}));
  EXPECT_EQ(r["queue"]["simulated"], true) << r["queue"].dump();
  EXPECT_EQ(r["queue"]["machine_cpus"], 16);
  EXPECT_EQ(r["queue"]["jobs"], 6);
  EXPECT_GT(r["queue"]["before"]["mean_wait_s"].get<double>(), 0);

  ApiServer::Caller alice;
  alice.known = true;
  alice.user = "alice";
  auto own = Get(api_->Report(alice, {}));
  EXPECT_EQ(own["jobs"], 6);
  EXPECT_FALSE(own.contains("queue"));
}

}  // namespace
}  // namespace rightsize

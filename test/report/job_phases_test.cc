// A stored job's phases (report/job_phases.h) as `rightsize job` prints them and the dashboard
// draws them: from the samples the agent stored, against what the job was allocated.
#include "report/job_phases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/telemetry.h"
#include "report/live.h"
#include "report/prices.h"
#include "store/store.h"

namespace rightsize {
namespace {

constexpr int64_t kStart = 1'796'000'000;
constexpr double kGiB = 1024.0 * 1024 * 1024;

class JobPhases : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("rightsize-job-phases-" + std::to_string(getpid()) + ".db"))
                .string();
    std::filesystem::remove(path_);
    auto store = OpenStore(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + s);
  }

  // A job on 4 cores and 8 GiB: 120 s of preprocessing on one core at 1 GiB, then 120 s of
  // work on 4 cores at 6 GiB, one sample a second, as an agent ships them.
  JobRecord StoreTwoPhaseJob() {
    JobTelemetry t;
    t.job.cluster = "c";
    t.job.job_id = "42";
    t.job.source = "agent";
    t.job.request.user = "alice";
    t.job.alloc.cpus = 4;
    t.job.alloc.memory_bytes = static_cast<int64_t>(8 * kGiB);
    t.job.start_time = kStart;
    t.job.end_time = kStart + 240;
    t.job.outcome.state = "COMPLETED";
    for (int64_t s = 0; s < 240; ++s) {
      bool work = s >= 120;
      t.samples["cpu_cores"].push_back({(kStart + s) * 1000, work ? 3.9 : 1.0});
      t.samples["memory_bytes"].push_back({(kStart + s) * 1000, (work ? 6 : 1) * kGiB});
    }
    std::vector<JobTelemetry> jobs = {t};
    EXPECT_TRUE(store_->WriteTelemetry("node1", 1, jobs).ok());
    return t.job;
  }

  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(JobPhases, AJobThatChangesHalfWayIsTwoPhasesWithTheFirstsIdleReservationFreed) {
  JobRecord job = StoreTwoPhaseJob();
  auto doc = JobPhasesJson(*store_, job);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const auto& phases = (*doc)["phases"];
  ASSERT_EQ(phases.size(), 2u) << doc->dump();
  // The boundary where the work started, in seconds from the job's start.
  EXPECT_NEAR(phases[1]["start_s"].get<double>(), 120, 3);
  EXPECT_EQ((*doc)["from"], kStart);
  EXPECT_EQ(phases[0]["step_cores"], 1);
  EXPECT_EQ(phases[1]["step_cores"], 4);
  // Against 4 cores and 8 GiB held for 240 s, a first step of 1 core frees 3 cores for 120 s
  // and a second step at the 6 GiB peak frees 2 GiB for its 120 s and 7 GiB for the first's.
  const auto& split = (*doc)["split"];
  EXPECT_NEAR(split["freed_core_s"].get<double>(), 3 * 120, 3 * 3);
  EXPECT_NEAR(split["freed_memory_byte_s"].get<double>() / kGiB, 7 * 120 + 2 * 120, 30);
  EXPECT_EQ(split["reserved_cores"], 4);
}

TEST_F(JobPhases, RightsizeJobPrintsThePhasesAndTheirJsonCarriesThem) {
  StoreTwoPhaseJob();
  auto view = ViewJob(*store_, "c", "42", kStart + 1000);
  ASSERT_TRUE(view.ok()) << view.status().message();
  PriceTable prices;
  std::string text = JobViewText(*view, prices);
  EXPECT_NE(text.find("phases (2 of them"), std::string::npos) << text;
  EXPECT_NE(text.find("1. 0:00:00 - 0:02:"), std::string::npos) << text;
  EXPECT_NE(text.find("0.10 core-hours"), std::string::npos) << text;  // 3 cores × 120 s
  EXPECT_EQ(JobViewJson(*view, prices)["phases"]["phases"].size(), 2u);
}

TEST_F(JobPhases, AJobWithoutSamplesHasNoPhases) {
  JobRecord job;
  job.cluster = "c";
  job.job_id = "7";
  job.source = "sacct";
  job.outcome.state = "COMPLETED";
  ASSERT_TRUE(store_->UpsertJobs(std::vector<JobRecord>{job}).ok());
  auto doc = JobPhasesJson(*store_, job);
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc->is_null());
  auto view = ViewJob(*store_, "c", "7", kStart);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(JobViewText(*view, PriceTable{}).find("phases"), std::string::npos);
}

}  // namespace
}  // namespace rightsize

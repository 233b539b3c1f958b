#include "report/job_card.h"

#include <gtest/gtest.h>

#include <string>

#include "report_fixtures.h"

namespace rightsize {
namespace {

using testing::GiB;
using testing::Job;
using testing::RoundPrices;

constexpr int64_t kT0 = 1700006400;

// 16 CPUs, 256 GiB and a 1-day limit; ran 2 h, 3.2 cores busy, 16.5 GiB peak.
JobRecord Oversized() {
  JobRecord j = Job("4242", "alice", 16, 256, 7200, kT0);
  j.request.job_name = "assemble";
  j.request.time_limit_s = 86400;
  j.usage.cpu_time_s = 3.2 * 7200;
  j.usage.peak_rss_bytes = GiB(16.5);
  j.alloc.gpus = 0;
  return j;
}

TEST(JobCardTest, SuggestsRightSizedFlags) {
  std::string text = RenderJobCardText(Oversized(), RoundPrices());
  // 16.5 / 256 = 6.4%; 1.2 x 16.5 = 19.8 -> 20G.
  EXPECT_NE(text.find("this job used 6% of its 256G"), std::string::npos) << text;
  EXPECT_NE(text.find("--mem=20G"), std::string::npos) << text;
  // 1.2 x 3.2 = 3.84 -> 4 cores.
  EXPECT_NE(text.find("-c 4"), std::string::npos);
  // 1.5 x 2 h = 3 h.
  EXPECT_NE(text.find("--time=03:00:00"), std::string::npos);
}

TEST(JobCardTest, JsonCarriesFiguresAndNullsForUnknowns) {
  nlohmann::json card = RenderJobCardJson(Oversized(), RoundPrices());
  EXPECT_EQ(card["schema"], "rightsize.job/v1");
  EXPECT_EQ(card["job"]["job_id"], "4242");
  EXPECT_EQ(card["cpu"]["suggested_cores"], 4);
  EXPECT_DOUBLE_EQ(card["cpu"]["efficiency"].get<double>(), 0.2);
  EXPECT_EQ(card["memory"]["suggested_bytes"], GiB(20));
  EXPECT_EQ(card["memory"]["suggested_flag"], "--mem=20G");
  EXPECT_EQ(card["memory"]["used_basis"], "peak");
  EXPECT_EQ(card["time"]["suggested_limit_s"], 10800.0);
  EXPECT_TRUE(card["gpu"]["util_pct"].is_null());
  // 16 x 2 x 0.1 + 256 x 2 x 0.01 allocated.
  EXPECT_NEAR(card["cost"]["allocated_dollars"].get<double>(), 3.2 + 5.12, 1e-9);
}

TEST(JobCardTest, ListsWhatIsUnknown) {
  JobRecord j = Job("7", "bob", 4, 8, 600, kT0);
  j.alloc.gpus = 2;
  j.alloc.gpu_type = "h100";
  std::string text = RenderJobCardText(j, RoundPrices());
  EXPECT_NE(text.find("Not recorded for this job: CPU time used, memory used"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU utilisation"), std::string::npos);
  EXPECT_NE(text.find("memory size of GPU type h100"), std::string::npos);
  nlohmann::json card = RenderJobCardJson(j, RoundPrices());
  EXPECT_TRUE(card["cpu"]["mean_cores_used"].is_null());
  EXPECT_TRUE(card["memory"]["efficiency"].is_null());
  EXPECT_TRUE(card["cost"]["wasted_dollars"].is_null());
}

TEST(JobCardTest, NeverSuggestsLessForAJobThatRanOutOfMemoryOrTime) {
  JobRecord j = Oversized();
  j.outcome.state = "OUT_OF_MEMORY";
  std::string oom = RenderJobCardText(j, RoundPrices());
  EXPECT_EQ(oom.find("--mem="), std::string::npos);
  EXPECT_NE(oom.find("ran out of memory"), std::string::npos);
  j.outcome.state = "TIMEOUT";
  j.usage.elapsed_s = 86400;
  std::string timeout = RenderJobCardText(j, RoundPrices());
  EXPECT_EQ(timeout.find("--time="), std::string::npos);
  EXPECT_NE(timeout.find("hit its 1-00:00:00 limit"), std::string::npos);
}

TEST(JobCardTest, IdleGpusAreCalledOut) {
  JobRecord j = Oversized();
  j.alloc.gpus = 4;
  j.alloc.gpu_type = "a100";
  j.usage.gpu_util_pct = 0;
  j.usage.peak_gpu_memory_bytes = 0;
  std::string text = RenderJobCardText(j, RoundPrices());
  EXPECT_NE(text.find("sat idle"), std::string::npos) << text;
  EXPECT_NE(text.find("4 x a100"), std::string::npos);
  EXPECT_NE(text.find("160G"), std::string::npos);  // 4 x 40 GiB of GPU memory
}

}  // namespace
}  // namespace rightsize

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

TEST(JobCardTest, AfterAnOomAsksForMoreMemoryFirstAndForNothingLess) {
  JobRecord j = Oversized();  // its 3.2 of 16 cores would otherwise suggest -c 4
  j.outcome.state = "OUT_OF_MEMORY";
  j.usage.peak_rss_bytes = GiB(256);
  std::string oom = RenderJobCardText(j, RoundPrices());
  // 1.5 x the 256G it reached.
  size_t advice = oom.find("Advice\n  - Memory: this job ran out of memory at 256G");
  EXPECT_NE(advice, std::string::npos) << oom;
  EXPECT_NE(oom.find("ask for more: --mem=384G"), std::string::npos) << oom;
  EXPECT_EQ(oom.find("-c 4"), std::string::npos) << oom;
  EXPECT_EQ(oom.find("--time="), std::string::npos) << oom;  // its run was cut short
  nlohmann::json card = RenderJobCardJson(j, RoundPrices());
  EXPECT_EQ(card["memory"]["suggested_bytes"], GiB(384));
  EXPECT_EQ(card["stopped_at_limit"], "memory");
  EXPECT_TRUE(card["cpu"]["suggested_cores"].is_null());
  EXPECT_EQ(card["advice"][0].get<std::string>().rfind("Memory: this job ran out of memory", 0),
            0u);
}

TEST(JobCardTest, AfterATimeoutAsksForMoreTimeFirstAndForNothingLess) {
  JobRecord j = Oversized();
  j.outcome.state = "TIMEOUT";
  j.outcome.exit_code = 0;  // what sacct records for a job stopped at its limit
  j.usage.elapsed_s = 86400;
  std::string timeout = RenderJobCardText(j, RoundPrices());
  EXPECT_NE(timeout.find("Advice\n  - Time: this job hit its 1-00:00:00 limit"), std::string::npos)
      << timeout;
  EXPECT_NE(timeout.find("ask for more: --time=1-12:00:00"), std::string::npos) << timeout;
  EXPECT_EQ(timeout.find("--mem=20G"), std::string::npos) << timeout;
  EXPECT_EQ(timeout.find("-c 4"), std::string::npos) << timeout;
  // Its state says what happened; SLURM's exit code 0 would say it succeeded.
  EXPECT_NE(timeout.find("state TIMEOUT (hit its 1-00:00:00 time limit)"), std::string::npos)
      << timeout;
  EXPECT_EQ(timeout.find("exit code 0"), std::string::npos) << timeout;
  nlohmann::json card = RenderJobCardJson(j, RoundPrices());
  EXPECT_EQ(card["outcome_text"], "hit its 1-00:00:00 time limit");
  EXPECT_EQ(card["time"]["suggested_limit_s"], 129600.0);
}

TEST(JobCardTest, OutcomeTextGivesTheExitCodeOfAFailedJob) {
  JobRecord j = Oversized();
  j.outcome.state = "FAILED";
  j.outcome.exit_code = 1;
  EXPECT_EQ(OutcomeText(j), "exit 1");
  j.outcome.state = "CANCELLED";
  j.outcome.exit_code = 0;
  j.outcome.signal = 15;
  EXPECT_EQ(OutcomeText(j), "cancelled (signal 15)");
  j.outcome.state = "RUNNING";
  EXPECT_EQ(OutcomeText(j), "");
}

TEST(JobCardTest, OneCoreIsSingular) {
  JobRecord j = Job("8", "carol", 1, 4, 3600, kT0);
  j.usage.cpu_time_s = 0.5 * 3600;
  std::string text = RenderJobCardText(j, RoundPrices());
  EXPECT_NE(text.find("  CPU     1 core     0.5 cores (mean)"), std::string::npos) << text;
  EXPECT_EQ(text.find("1 cores"), std::string::npos) << text;
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

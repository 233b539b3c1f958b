#include "report/waste.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <vector>

#include "report/render.h"
#include "report_fixtures.h"
#include "store/store.h"

namespace rightsize {
namespace {

using testing::GiB;
using testing::Job;
using testing::RoundPrices;

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1700006400;  // 2023-11-15T00:00:00Z, a midnight

// Three jobs whose totals are worked out by hand in the comments.
std::vector<JobRecord> ThreeJobs() {
  // alice: 4 CPUs for 1 h, 2 core-hours used; 8 GiB held, 2 GiB peak; no GPU; 2 h limit.
  JobRecord a = Job("1", "alice", 4, 8, 3600, kT0 + 3600);
  a.usage.cpu_time_s = 7200;
  a.usage.peak_rss_bytes = GiB(2);
  a.alloc.gpus = 0;
  a.request.time_limit_s = 7200;
  // bob: 2 CPUs for 2 h, 1 core-hour used; 4 GiB held, 4 GiB peak; 2 A100s at 50%; 4 h limit.
  JobRecord b = Job("2", "bob", 2, 4, 7200, kT0 + 7200);
  b.usage.cpu_time_s = 3600;
  b.usage.peak_rss_bytes = GiB(4);
  b.alloc.gpus = 2;
  b.alloc.gpu_type = "a100";
  b.usage.gpu_util_pct = 50;
  b.request.time_limit_s = 14400;
  // carol: 8 CPUs and 16 GiB for 0.5 h, nothing else known.
  JobRecord c = Job("3", "carol", 8, 16, 1800, kT0 + 9000);
  return {a, b, c};
}

TEST(WasteReportTest, TotalsMatchHandComputedFigures) {
  auto jobs = ThreeJobs();
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs, 3);
  EXPECT_EQ(r->clusters, std::vector<std::string>{"c1"});

  // CPU: allocated 4x1 + 2x2 + 8x0.5 = 12; with usage 8; used 2 + 1 = 3; wasted 2 + 3 = 5.
  EXPECT_DOUBLE_EQ(*r->cpu.allocated, 12);
  EXPECT_DOUBLE_EQ(*r->cpu.allocated_with_usage, 8);
  EXPECT_DOUBLE_EQ(*r->cpu.used, 3);
  EXPECT_DOUBLE_EQ(*r->cpu.wasted, 5);
  EXPECT_DOUBLE_EQ(*r->cpu.efficiency, 3.0 / 8);
  EXPECT_EQ(r->cpu.jobs_with_allocation, 3);
  EXPECT_EQ(r->cpu.jobs_with_usage, 2);
  EXPECT_DOUBLE_EQ(*r->cpu.requested_cores_total, 14);

  // Memory: allocated 8 + 8 + 8 = 24 GB-h; with usage 16; used 2 + 8 = 10; wasted 6.
  EXPECT_DOUBLE_EQ(*r->memory.allocated, 24);
  EXPECT_DOUBLE_EQ(*r->memory.used, 10);
  EXPECT_DOUBLE_EQ(*r->memory.wasted, 6);
  EXPECT_DOUBLE_EQ(*r->memory.efficiency, 10.0 / 16);
  EXPECT_EQ(r->memory.used_basis, "peak");

  // GPU: bob's 2 GPUs x 2 h = 4 GPU-h, 50% busy.
  EXPECT_EQ(r->gpu.gpu_jobs, 1);
  EXPECT_EQ(r->gpu.jobs_with_allocation, 2);  // alice's known 0 counts as known
  EXPECT_DOUBLE_EQ(*r->gpu.allocated, 4);
  EXPECT_DOUBLE_EQ(*r->gpu.used, 2);
  EXPECT_DOUBLE_EQ(*r->gpu.wasted, 2);

  // Time: limits 2 h + 4 h, elapsed 1 h + 2 h (carol has no limit).
  EXPECT_EQ(r->time.jobs_with_limit, 2);
  EXPECT_DOUBLE_EQ(*r->time.requested_hours, 6);
  EXPECT_DOUBLE_EQ(*r->time.elapsed_hours, 3);
  EXPECT_DOUBLE_EQ(*r->time.total_elapsed_hours, 3.5);

  // Upper bound. CPU: alice 2 cores -> ceil(2.4) = 3, frees 1 x 1 h; bob 0.5 -> 1, frees
  // 1 x 2 h. Memory: alice 8 - 2.4 = 5.6 x 1 h; bob needs 4.8 > 4, frees 0. GPU: bob
  // ceil(1.2 x 2 x 0.5) = 2, frees 0.
  EXPECT_DOUBLE_EQ(*r->upper_bound.core_hours, 3);
  EXPECT_NEAR(*r->upper_bound.gb_hours, 5.6, 1e-9);
  EXPECT_DOUBLE_EQ(*r->upper_bound.gpu_hours, 0);
  EXPECT_NEAR(r->upper_bound.dollars, 3 * 0.1 + 5.6 * 0.01, 1e-9);

  // Cost: 12 x 0.1 + 24 x 0.01 + 4 x 2 allocated; wasted 5 x 0.1 + 6 x 0.01 + 2 x 2.
  EXPECT_NEAR(r->cost.allocated_dollars, 9.44, 1e-9);
  EXPECT_NEAR(*r->cost.wasted_dollars, 4.56, 1e-9);
  EXPECT_TRUE(r->cost.gpu_types_at_default_price.empty());
}

TEST(WasteReportTest, UnknownUsageIsUnknownNotZero) {
  JobRecord j = Job("1", "alice", 4, 8, 3600, kT0);
  auto none = BuildWasteReport(std::vector<JobRecord>{j}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(none.ok());
  EXPECT_DOUBLE_EQ(*none->cpu.allocated, 4);
  EXPECT_FALSE(none->cpu.used.has_value());
  EXPECT_FALSE(none->cpu.wasted.has_value());
  EXPECT_FALSE(none->cpu.efficiency.has_value());
  EXPECT_EQ(none->cpu.jobs_with_usage, 0);
  EXPECT_FALSE(none->memory.used.has_value());
  EXPECT_EQ(none->memory.used_basis, "");
  EXPECT_FALSE(none->gpu.allocated.has_value());  // no job said how many GPUs it had
  EXPECT_FALSE(none->upper_bound.core_hours.has_value());
  EXPECT_FALSE(none->cost.wasted_dollars.has_value());

  // A job that really used 0 CPU time is a known 0.
  j.usage.cpu_time_s = 0;
  auto zero = BuildWasteReport(std::vector<JobRecord>{j}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(zero.ok());
  ASSERT_TRUE(zero->cpu.used.has_value());
  EXPECT_DOUBLE_EQ(*zero->cpu.used, 0);
  EXPECT_DOUBLE_EQ(*zero->cpu.efficiency, 0);
}

TEST(WasteReportTest, MemoryFallsBackToAverageAndSaysSo) {
  JobRecord peak = Job("1", "alice", 1, 8, 3600, kT0);
  peak.usage.peak_rss_bytes = GiB(4);
  JobRecord avg = Job("2", "alice", 1, 8, 3600, kT0);
  avg.usage.avg_rss_bytes = GiB(2);
  auto r = BuildWasteReport(std::vector<JobRecord>{peak, avg}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->memory.used_basis, "mixed");
  EXPECT_EQ(r->memory.jobs_with_peak, 1);
  EXPECT_EQ(r->memory.jobs_with_average_only, 1);
  EXPECT_DOUBLE_EQ(*r->memory.used, 6);
  auto only_avg = BuildWasteReport(std::vector<JobRecord>{avg}, ReportOptions{}, RoundPrices());
  EXPECT_EQ(only_avg->memory.used_basis, "average");
}

TEST(WasteReportTest, JobsWithoutElapsedCountButAddNoHours) {
  JobRecord ran = Job("1", "alice", 4, 8, 3600, kT0);
  JobRecord cancelled = Job("2", "alice", 4, 8, 0, kT0);
  cancelled.usage.cpu_time_s = 0;
  auto r = BuildWasteReport(std::vector<JobRecord>{ran, cancelled}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->jobs, 2);
  EXPECT_EQ(r->jobs_with_elapsed, 1);
  EXPECT_DOUBLE_EQ(*r->cpu.allocated, 4);
  EXPECT_EQ(r->cpu.jobs_with_usage, 0);
}

// Three earlier "train" jobs of alice, each peaking at 2 GiB, ending at kT0 + 100, 200, 300.
std::vector<JobRecord> History() {
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 3; ++i) {
    JobRecord j = Job("h" + std::to_string(i), "alice", 1, 10, 3600, kT0 + 100 * (i + 1));
    j.request.job_name = "train";
    j.alloc.cpus.reset();
    j.request.cpus.reset();
    j.submit_time = kT0 - 10000;
    j.usage.peak_rss_bytes = GiB(2);
    jobs.push_back(j);
  }
  return jobs;
}

TEST(WasteReportTest, HistoryPolicyNeverUsesJobsThatEndedAfterSubmission) {
  auto jobs = History();
  // A big job submitted early that ends *after* the target's submission: it must not count.
  JobRecord late = Job("late", "alice", 1, 10, 3600, kT0 + 1500);
  late.request.job_name = "train";
  late.alloc.cpus.reset();
  late.submit_time = kT0 - 9000;
  late.usage.peak_rss_bytes = GiB(8);
  jobs.push_back(late);
  // The target: submitted at kT0 + 1200 with 10 GiB, peaks at 2 GiB, runs 1 h.
  JobRecord target = Job("target", "alice", 1, 10, 3600, kT0 + 5000);
  target.request.job_name = "train";
  target.alloc.cpus.reset();
  target.submit_time = kT0 + 1200;
  target.usage.peak_rss_bytes = GiB(2);
  jobs.push_back(target);

  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  // Only the target has 3 ended jobs behind it: suggestion 1.2 x 2 = 2.4 GiB (had the late
  // job counted, it would be 9.6 GiB and save 0.4), saving (10 - 2.4) x 1 h.
  EXPECT_EQ(r->history_policy.jobs_with_history, 1);
  EXPECT_EQ(r->history_policy.jobs_under_provisioned, 0);
  EXPECT_NEAR(*r->history_policy.gb_hours, 7.6, 1e-9);
  EXPECT_NEAR(r->history_policy.dollars, 7.6 * 0.01, 1e-9);
}

TEST(WasteReportTest, HistoryPolicyNeedsAJobToHaveEndedStrictlyBeforeSubmission) {
  auto jobs = History();
  JobRecord target = Job("target", "alice", 1, 10, 3600, kT0 + 5000);
  target.request.job_name = "train";
  target.submit_time = kT0 + 300;  // the third history job ends at this very second
  target.usage.peak_rss_bytes = GiB(2);
  jobs.push_back(target);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->history_policy.jobs_with_history, 0);
  EXPECT_DOUBLE_EQ(*r->history_policy.gb_hours, 0);
}

TEST(WasteReportTest, HistoryPolicyKeysOnUserAndJobName) {
  auto jobs = History();
  JobRecord other_name = Job("x", "alice", 1, 10, 3600, kT0 + 5000);
  other_name.request.job_name = "eval";
  other_name.usage.peak_rss_bytes = GiB(2);
  JobRecord other_user = Job("y", "bob", 1, 10, 3600, kT0 + 5000);
  other_user.request.job_name = "train";
  other_user.usage.peak_rss_bytes = GiB(2);
  jobs.push_back(other_name);
  jobs.push_back(other_user);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->history_policy.jobs_with_history, 0);
}

TEST(WasteReportTest, UnderProvisionedJobsAreCountedAndTheirLostRunSubtracted) {
  auto jobs = History();
  // Needs 4 GiB but history suggests 2.4 GiB: it would have run out of memory.
  JobRecord hungry = Job("hungry", "alice", 1, 10, 7200, kT0 + 9000);
  hungry.request.job_name = "train";
  hungry.alloc.cpus.reset();
  hungry.submit_time = kT0 + 1000;
  hungry.usage.peak_rss_bytes = GiB(4);
  jobs.push_back(hungry);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->history_policy.jobs_with_history, 1);
  EXPECT_EQ(r->history_policy.jobs_under_provisioned, 1);
  EXPECT_EQ(r->history_policy.memory_under_provisioned, 1);
  EXPECT_EQ(r->history_policy.cpu_under_provisioned, 0);
  // The lost run held 2.4 GiB for 2 h: reported as lost, and the memory the policy recovers
  // stops at 0 rather than going negative; the net keeps the sign.
  EXPECT_NEAR(*r->history_policy.gb_hours, 0, 1e-9);
  EXPECT_NEAR(r->history_policy.lost_gb_hours, 4.8, 1e-9);
  EXPECT_NEAR(r->history_policy.lost_dollars, 4.8 * 0.01, 1e-9);
  EXPECT_NEAR(r->history_policy.dollars, 0, 1e-9);
  EXPECT_NEAR(r->history_policy.net_dollars, -4.8 * 0.01, 1e-9);
  // The upper bound, with hindsight, still frees 10 - 4.8 GiB for 2 h.
  EXPECT_NEAR(*r->upper_bound.gb_hours, 10.4 + 3 * 7.6, 1e-9);
}

TEST(WasteReportTest, TooFewCoresSlowAJobWithoutKillingIt) {
  // History: 3 jobs of 8 cores that used 1 core each, peaking at 2 GiB of their 10.
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 3; ++i) {
    JobRecord j = Job("h" + std::to_string(i), "alice", 8, 10, 3600, kT0 + 100 * (i + 1));
    j.request.job_name = "train";
    j.submit_time = kT0 - 10000;
    j.usage.cpu_time_s = 3600;  // 1 core busy
    j.usage.peak_rss_bytes = GiB(2);
    jobs.push_back(j);
  }
  // The target keeps 6 cores busy for 2 h: the suggested 2 cores (ceil 1.2 x 1) would slow it,
  // not kill it. Its memory suggestion (2.4 GiB) covers its 2 GiB peak.
  JobRecord busy = Job("busy", "alice", 8, 10, 7200, kT0 + 9000);
  busy.request.job_name = "train";
  busy.submit_time = kT0 + 1000;
  busy.usage.cpu_time_s = 6 * 7200;
  busy.usage.peak_rss_bytes = GiB(2);
  jobs.push_back(busy);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->history_policy.jobs_under_provisioned, 1);
  EXPECT_EQ(r->history_policy.cpu_under_provisioned, 1);
  EXPECT_EQ(r->history_policy.memory_under_provisioned, 0);
  EXPECT_DOUBLE_EQ(r->history_policy.lost_dollars, 0);             // nothing was killed
  EXPECT_NEAR(*r->history_policy.core_hours, 0, 1e-9);             // the cores save nothing
  EXPECT_NEAR(*r->history_policy.gb_hours, (10 - 2.4) * 2, 1e-9);  // memory still saves
}

// Issue 28: the report printed "-0.01" recoverable core-hours when a short job killed for lack
// of memory lost a run and nothing else saved cores.
TEST(WasteReportTest, RecoverableIsNeverNegativeWhenAShortJobWouldHaveBeenKilled) {
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 3; ++i) {
    JobRecord j = Job("h" + std::to_string(i), "alice", 1, 10, 3600, kT0 + int64_t{100} * (i + 1));
    j.request.job_name = "prep";
    j.submit_time = kT0 - 10000;
    j.usage.cpu_time_s = 3600;
    j.usage.peak_rss_bytes = GiB(1);
    jobs.push_back(j);
  }
  // 30 s on 1 core needing 4 GiB: the suggested 1.2 GiB kills it, losing 1 core x 30 s.
  JobRecord killed = Job("k", "alice", 1, 10, 30, kT0 + 9000);
  killed.request.job_name = "prep";
  killed.submit_time = kT0 + 1000;
  killed.usage.cpu_time_s = 30;
  killed.usage.peak_rss_bytes = GiB(4);
  jobs.push_back(killed);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->history_policy.memory_under_provisioned, 1);
  EXPECT_GE(*r->history_policy.core_hours, 0);
  EXPECT_GE(*r->history_policy.gb_hours, 0);
  EXPECT_GE(r->history_policy.dollars, 0);
  std::string text = RenderText(*r);
  EXPECT_EQ(text.find("-0.01"), std::string::npos) << text;
  EXPECT_EQ(text.find("-$"), std::string::npos) << text;
  // The loss is still reported, beside the figures.
  EXPECT_NEAR(r->history_policy.lost_core_hours, 30.0 / 3600, 1e-9);
  EXPECT_LT(r->history_policy.net_dollars, 0);
}

TEST(WasteReportTest, IdleGpuJobsAreTheZeroToTenPercentBucketCostliestFirst) {
  std::vector<JobRecord> jobs;
  const double utils[] = {0, 5, 9.99, 10, 50};
  for (int i = 0; i < 5; ++i) {
    JobRecord j =
        Job(std::to_string(i), "u" + std::to_string(i), 4, 16, 3600 * (i + 1), kT0 + 86400 + i);
    j.alloc.gpus = 2;
    j.alloc.gpu_type = "a100";
    j.usage.gpu_util_pct = utils[i];
    jobs.push_back(j);
  }
  JobRecord unknown = Job("u", "x", 4, 16, 3600, kT0 + 86400);
  unknown.alloc.gpus = 8;  // utilisation unknown: never listed as idle
  jobs.push_back(unknown);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_gpu.jobs, 3);
  EXPECT_EQ(r->idle_gpu.jobs_with_util, 5);
  EXPECT_EQ(r->idle_gpu.jobs, r->efficiency_histogram[2].jobs[0]);  // the same 0-10% bucket
  ASSERT_EQ(r->idle_gpu.list.size(), 3u);
  // 2 A100s at $2 for 3 h, 2 h and 1 h.
  EXPECT_EQ(r->idle_gpu.list[0].job_id, "2");
  EXPECT_NEAR(r->idle_gpu.list[0].gpu_dollars, 2 * 3 * 2.0, 1e-9);
  EXPECT_EQ(r->idle_gpu.list[2].job_id, "0");
  EXPECT_NEAR(r->idle_gpu.gpu_hours, 2 * (1 + 2 + 3), 1e-9);
  EXPECT_NEAR(r->idle_gpu.gpu_dollars, 2 * (1 + 2 + 3) * 2.0, 1e-9);
  std::string headline;
  for (const auto& line : HeadlineSentences(*r)) headline += line + "\n";
  EXPECT_NE(headline.find("3 of the 5 GPU jobs whose utilisation is known sat at 0-10%"),
            std::string::npos)
      << headline;
  EXPECT_NE(RenderText(*r).find("3h 00m"), std::string::npos);
}

std::vector<JobRecord> ThreeClusters() {
  std::vector<JobRecord> jobs;
  auto add = [&](const std::string& cluster, int n, int64_t last_end) {
    for (int i = 0; i < n; ++i) {
      JobRecord j = Job(cluster + std::to_string(i), "u", 1, 1, 60, last_end - i);
      j.cluster = cluster;
      jobs.push_back(j);
    }
  };
  add("old", 50, kT0 - 400 * kDay);  // the most jobs, but years old
  add("big", 30, kT0 - 6 * kDay);    // current, most jobs among current
  add("new", 20, kT0);               // the newest
  return jobs;
}

TEST(WasteReportTest, OneClusterPerReportTheBusiestWithCurrentData) {
  auto jobs = ThreeClusters();
  ReportOptions opts;
  opts.choose_cluster = true;
  auto r = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->clusters, std::vector<std::string>{"big"});
  EXPECT_EQ(r->jobs, 30);
  EXPECT_EQ(r->cluster_choice.chosen, "big");
  ASSERT_EQ(r->cluster_choice.others.size(), 2u);
  EXPECT_EQ(r->cluster_choice.others[0].cluster, "old");
  EXPECT_EQ(r->cluster_choice.others[1].cluster, "new");
  ASSERT_EQ(ClusterChoiceSentences(*r).size(), 1u);
  std::string text = ClusterChoiceSentences(*r)[0];
  EXPECT_NE(text.find("this report covers big (30 jobs)"), std::string::npos) << text;
  EXPECT_NE(text.find("--all-clusters"), std::string::npos) << text;
  EXPECT_NE(text.find("old (50 jobs"), std::string::npos) << text;

  // Asked for all, or for one: no choice is made.
  opts.choose_cluster = false;
  r = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->jobs, 100);
  EXPECT_TRUE(r->cluster_choice.chosen.empty());
  opts.choose_cluster = true;
  opts.cluster = "old";
  r = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->jobs, 50);
  EXPECT_TRUE(r->cluster_choice.chosen.empty());
  EXPECT_EQ(RenderText(*r).find("--all-clusters"), std::string::npos);
}

TEST(WasteReportTest, StoreChoosesTheSameClusterAsTheVector) {
  auto jobs = ThreeClusters();
  auto dir = std::filesystem::temp_directory_path() /
             ("rs_choice_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = OpenStore((dir / "s.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());
  ReportOptions opts;
  opts.choose_cluster = true;
  auto r = BuildWasteReport(**store, opts, RoundPrices());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cluster_choice.chosen, "big");
  EXPECT_EQ(r->jobs, 30);
  ASSERT_EQ(r->cluster_choice.others.size(), 2u);
  EXPECT_EQ(r->cluster_choice.others[0].jobs, 50);
  std::filesystem::remove_all(dir);
}

TEST(WasteReportTest, HistoryPolicyUsesOnlyTheLastFiveEndedJobs) {
  std::vector<JobRecord> jobs;
  // Six ended jobs: the oldest peaked at 9 GiB, the five after it at 1 GiB.
  for (int i = 0; i < 6; ++i) {
    JobRecord j = Job("h" + std::to_string(i), "alice", 1, 10, 3600, kT0 + 100 * (i + 1));
    j.alloc.cpus.reset();
    j.submit_time = kT0 - 100000;
    j.usage.peak_rss_bytes = GiB(i == 0 ? 9 : 1);
    jobs.push_back(j);
  }
  JobRecord target = Job("t", "alice", 1, 10, 3600, kT0 + 5000);
  target.alloc.cpus.reset();
  target.submit_time = kT0 + 1000;
  target.usage.peak_rss_bytes = GiB(1);
  jobs.push_back(target);
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(*r->history_policy.gb_hours, 10 - 1.2, 1e-9);
}

TEST(WasteReportTest, UpperBoundRoundsCoresAndGpusUp) {
  // 16 CPUs, 2.5 cores busy on average: ceil(3.0) = 3 cores, frees 13 for 1 h.
  JobRecord cpu = Job("1", "alice", 16, 1, 3600, kT0);
  cpu.usage.cpu_time_s = 2.5 * 3600;
  // 8 GPUs 10% busy: ceil(0.96) = 1 GPU, frees 7; 4 idle GPUs free all 4.
  JobRecord gpu = Job("2", "bob", 1, 1, 3600, kT0);
  gpu.alloc.gpus = 8;
  gpu.usage.gpu_util_pct = 10;
  JobRecord idle = Job("3", "bob", 1, 1, 3600, kT0);
  idle.alloc.gpus = 4;
  idle.alloc.gpu_type = "mi250";
  idle.usage.gpu_util_pct = 0;
  auto r = BuildWasteReport(std::vector<JobRecord>{cpu, gpu, idle}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(*r->upper_bound.core_hours, 13);
  EXPECT_DOUBLE_EQ(*r->upper_bound.gpu_hours, 11);
  // Untyped and unlisted GPUs are priced at the default and listed.
  EXPECT_EQ(r->cost.gpu_types_at_default_price, (std::vector<std::string>{"", "mi250"}));
}

TEST(WasteReportTest, TopWastersRankByWastedDollarsAndGroupsNeedBy) {
  auto jobs = ThreeJobs();
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->top_wasters.size(), 3u);
  // bob wastes 2 GPU-hours ($4) + 3 core-hours; alice 2 core-h + 6 GB-h; carol unknown ($0).
  EXPECT_EQ(r->top_wasters[0].key, "bob");
  EXPECT_NEAR(r->top_wasters[0].wasted_dollars, 4.3, 1e-9);
  EXPECT_EQ(r->top_wasters[1].key, "alice");
  EXPECT_NEAR(r->top_wasters[1].wasted_dollars, 0.26, 1e-9);
  EXPECT_DOUBLE_EQ(*r->top_wasters[1].cpu_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(*r->top_wasters[1].memory_efficiency, 0.25);
  EXPECT_FALSE(r->top_wasters[2].cpu_efficiency.has_value());
  EXPECT_TRUE(r->groups.empty());

  ReportOptions by_gpu;
  by_gpu.by = "gpu-type";
  by_gpu.top_n = 1;
  auto g = BuildWasteReport(jobs, by_gpu, RoundPrices());
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->top_wasters.size(), 1u);
  EXPECT_EQ(g->top_wasters[0].key, "a100");
  ASSERT_EQ(g->groups.size(), 2u);
  EXPECT_EQ(g->groups[1].key, "(no GPU)");
}

TEST(WasteReportTest, RejectsAnUnknownGroupingAndAnEmptyWindow) {
  ReportOptions bad;
  bad.by = "colour";
  auto r = BuildWasteReport(std::vector<JobRecord>{}, bad, RoundPrices());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("colour"), std::string::npos);

  ReportOptions backwards;
  backwards.since = kT0;
  backwards.until = kT0;
  EXPECT_FALSE(BuildWasteReport(std::vector<JobRecord>{}, backwards, RoundPrices()).ok());
}

TEST(WasteReportTest, EfficiencyHistogramBuckets) {
  std::vector<JobRecord> jobs;
  for (double used_cores : {0.05, 0.375 * 4, 4.0, 6.0}) {
    JobRecord j = Job("j", "alice", 4, 1, 3600, kT0);
    j.usage.cpu_time_s = used_cores * 3600;
    jobs.push_back(j);
  }
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->efficiency_histogram.size(), 3u);
  const auto& cpu = r->efficiency_histogram[0].jobs;
  EXPECT_EQ(cpu[0], 1);   // 1.25%
  EXPECT_EQ(cpu[3], 1);   // 37.5%
  EXPECT_EQ(cpu[9], 1);   // exactly 100%
  EXPECT_EQ(cpu[10], 1);  // 150%
  EXPECT_EQ(HistogramBucketLabel(0), "0-10%");
  EXPECT_EQ(HistogramBucketLabel(10), ">100%");
}

TEST(WasteReportTest, DailySeriesCoversEveryDayFromFirstToLastEnd) {
  JobRecord a = Job("1", "alice", 2, 1, 3600, kT0 + 10);
  a.usage.cpu_time_s = 3600;
  JobRecord b = Job("2", "alice", 2, 1, 3600, kT0 + 2 * kDay + 10);
  auto r = BuildWasteReport(std::vector<JobRecord>{a, b}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->daily.size(), 3u);
  EXPECT_EQ(r->daily[0].day_start, kT0);
  EXPECT_DOUBLE_EQ(r->daily[0].allocated_core_hours, 2);
  EXPECT_DOUBLE_EQ(r->daily[0].used_core_hours, 1);
  EXPECT_EQ(r->daily[1].jobs, 0);
  EXPECT_EQ(r->daily[2].jobs, 1);
  EXPECT_DOUBLE_EQ(r->window_days, 2.0);
}

TEST(WasteReportTest, StoreScanAppliesTheWindowLikeTheVectorOverload) {
  auto dir =
      std::filesystem::temp_directory_path() /
      ("rightsize_waste_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = OpenStore((dir / "jobs.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto jobs = ThreeJobs();
  ASSERT_TRUE((*store)->UpsertJobs(jobs).ok());

  ReportOptions opts;
  opts.since = kT0 + 3600;  // alice's job ends exactly here: included
  opts.until = kT0 + 9000;  // carol's ends here: excluded
  auto from_store = BuildWasteReport(**store, opts, RoundPrices());
  ASSERT_TRUE(from_store.ok()) << from_store.status().ToString();
  auto from_vector = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(from_vector.ok());
  EXPECT_EQ(from_store->jobs, 2);
  EXPECT_EQ(from_vector->jobs, 2);
  EXPECT_DOUBLE_EQ(*from_store->cpu.allocated, 8);
  EXPECT_DOUBLE_EQ(*from_vector->cpu.allocated, 8);
  EXPECT_DOUBLE_EQ(from_store->window_days, 5400.0 / kDay);
  std::filesystem::remove_all(dir);
}

// Issue 31: a store written before the readers checked ranges held a run time of 1e30 s and
// end times centuries away; `report` on it grew to 18.9 GB (a row per day of the span).
TEST(WasteReportTest, AnImplausibleStoredJobIsLeftOutAndNamed) {
  auto dir =
      std::filesystem::temp_directory_path() /
      ("rightsize_waste_bad_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = OpenStore((dir / "jobs.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  JobRecord good = Job("1", "alice", 4, 8, 3600, kT0 + 3600);
  good.usage.cpu_time_s = 7200;
  // What the SWF reader stored for "1 0 10 1e30 4 …" before it checked: a wrapped end time.
  JobRecord wrapped = Job("2", "bob", 4, 8, 1e30, kT0);
  wrapped.end_time = std::numeric_limits<int64_t>::min();
  wrapped.request.time_limit_s = std::numeric_limits<int64_t>::min();
  // A run time of 1e11 s beside a real trace: 3,000 years.
  JobRecord far = Job("3", "carol", 4, 8, 1e11, kT0 + 100000000000);
  ASSERT_TRUE((*store)->UpsertJobs(std::vector<JobRecord>{good, wrapped, far}).ok());

  auto r = BuildWasteReport(**store, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs, 1);
  EXPECT_EQ(r->jobs_implausible, 2);
  EXPECT_NE(r->first_implausible.find("field "), std::string::npos) << r->first_implausible;
  EXPECT_DOUBLE_EQ(*r->cpu.allocated, 4);  // alice's job alone, finite
  ASSERT_EQ(r->daily.size(), 1u);
  std::string text = RenderText(*r);
  EXPECT_NE(text.find("2 stored jobs have implausible values and are left out of every figure"),
            std::string::npos)
      << text;
  EXPECT_LT(RenderJson(*r).dump().size(), 20000u);
  std::filesystem::remove_all(dir);
}

// The daily rows are bounded by the jobs, not by how far apart their end times are.
TEST(WasteReportTest, DailyRowsAreOnlyDaysWithJobsOverMoreThanTenYears) {
  JobRecord a = Job("1", "alice", 2, 1, 3600, 946684800 + 10);   // 2000-01-01
  JobRecord b = Job("2", "alice", 2, 1, 3600, 1577836800 + 10);  // 2020-01-01
  auto r = BuildWasteReport(std::vector<JobRecord>{a, b}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->daily.size(), 2u);  // not 7,306
  EXPECT_TRUE(r->daily_sparse);
  EXPECT_EQ(r->daily[0].day_start, 946684800);
  EXPECT_EQ(r->daily[1].day_start, 1577836800);
  EXPECT_NE(RenderText(*r).find("the daily figures list only the days with jobs"),
            std::string::npos);
}

}  // namespace
}  // namespace rightsize

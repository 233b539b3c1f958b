#include "report/render.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "report_fixtures.h"

namespace rightsize {
namespace {

using testing::GiB;
using testing::Job;
using testing::RoundPrices;

constexpr int64_t kT0 = 1700006400;  // 2023-11-15T00:00:00Z

// A small fixed set of jobs covering every section: usage known and unknown, GPUs, history.
std::vector<JobRecord> SmallJobs() {
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 5; ++i) {
    JobRecord j = Job(std::to_string(100 + i), "alice", 8, 32, 3600, kT0 + 3600 * (i + 1));
    j.request.job_name = "train";
    j.request.account = "physics";
    j.request.partition = "cpu";
    j.submit_time = kT0 + 3600 * i;
    j.usage.cpu_time_s = 2 * 3600;
    j.usage.peak_rss_bytes = GiB(4);
    j.request.time_limit_s = 4 * 3600;
    j.alloc.gpus = 0;
    jobs.push_back(j);
  }
  JobRecord gpu = Job("200", "bob", 16, 128, 7200, kT0 + 86400 + 7200);
  gpu.request.job_name = "finetune";
  gpu.request.account = "ml";
  gpu.request.partition = "gpu";
  gpu.alloc.gpus = 4;
  gpu.alloc.gpu_type = "a100";
  gpu.usage.cpu_time_s = 4 * 7200;
  gpu.usage.peak_rss_bytes = GiB(60);
  gpu.usage.gpu_util_pct = 30;
  gpu.usage.peak_gpu_memory_bytes = GiB(48);
  gpu.request.time_limit_s = 24 * 3600;
  jobs.push_back(gpu);
  JobRecord unknown = Job("300", "carol", 4, 16, 1800, kT0 + 2 * 86400);
  unknown.request.account = "chem";
  jobs.push_back(unknown);
  return jobs;
}

WasteReport SmallReport(const std::string& by = "") {
  ReportOptions opts;
  opts.by = by;
  auto r = BuildWasteReport(SmallJobs(), opts, RoundPrices());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(RenderJsonTest, MatchesTheGoldenFile) {
  nlohmann::json got = RenderJson(SmallReport("account"));
  const std::string path =
      std::string(RIGHTSIZE_TEST_DATA_DIR) + "/report/golden/small_report.json";
  const char* update = std::getenv("RIGHTSIZE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << got.dump(2) << "\n";
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << "; run with RIGHTSIZE_UPDATE_GOLDEN=1 to create it";
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json want = nlohmann::json::parse(text.str());
  EXPECT_TRUE(got == want) << "differences (JSON patch from golden to rendered):\n"
                           << nlohmann::json::diff(want, got).dump(2)
                           << "\nIf the change is intended, rerun with RIGHTSIZE_UPDATE_GOLDEN=1.";
}

TEST(RenderJsonTest, UnknownUsageIsNullAndTheSchemaIsNamed) {
  JobRecord j = Job("1", "alice", 4, 8, 3600, kT0);
  auto r = BuildWasteReport(std::vector<JobRecord>{j}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  nlohmann::json out = RenderJson(*r);
  EXPECT_EQ(out["schema"], "rightsize.report/v1");
  EXPECT_EQ(out["jobs"], 1);
  EXPECT_EQ(out["cpu"]["allocated_core_hours"], 4.0);
  EXPECT_TRUE(out["cpu"]["used_core_hours"].is_null());
  EXPECT_TRUE(out["cpu"]["efficiency"].is_null());
  EXPECT_EQ(out["cpu"]["jobs_with_usage"], 0);
  EXPECT_TRUE(out["memory"]["used_basis"].is_null());
  EXPECT_TRUE(out["gpu"]["allocated_gpu_hours"].is_null());
  EXPECT_TRUE(out["recoverable"]["upper_bound"]["core_hours"].is_null());
  EXPECT_TRUE(out["groups"].is_null());
  for (const char* key : {"window", "clusters", "memory", "gpu_memory", "time", "recoverable",
                          "cost", "typical", "top_wasters", "efficiency_histogram", "daily"}) {
    EXPECT_TRUE(out.contains(key)) << key;
  }
}

TEST(RenderTextTest, StartsWithAPlainLanguageSummary) {
  std::string text = RenderText(SmallReport());
  // 5 x 8 + 16 x 2 + 4 x 0.5 = 74 core-hours; used 10 + 8 = 18 of 72 with usage = 25%.
  EXPECT_NE(text.find("Over 2.0 days, 7 jobs allocated 74 core-hours and used 25%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(history policy)"), std::string::npos);
  EXPECT_NE(text.find("(upper bound)"), std::string::npos);
  EXPECT_NE(text.find("Top 3 wasters by user"), std::string::npos);
  EXPECT_NE(text.find("90-100%"), std::string::npos);
}

TEST(RenderTextTest, FormatsNumbersForPeople) {
  EXPECT_EQ(FormatThousands(1234567.8, 0), "1,234,568");
  EXPECT_EQ(FormatThousands(-1234.5, 1), "-1,234.5");
  EXPECT_EQ(FormatThousands(999, 0), "999");
  EXPECT_EQ(FormatAmount(1234567), "1.2M");
  EXPECT_EQ(FormatAmount(12345), "12,345");
  EXPECT_EQ(FormatAmount(12.34), "12.3");
  EXPECT_EQ(FormatDollars(1234.5), "$1,234");
  EXPECT_EQ(FormatDollars(12.345), "$12.35");
  EXPECT_EQ(FormatPercent(0.4), "40%");
  EXPECT_EQ(FormatPercent(0.004), "0.4%");
}

TEST(RenderTextTest, NeutralisesTerminalEscapesInUserStrings) {
  auto jobs = SmallJobs();
  jobs[0].request.user = "mallory\x1b[2J";
  auto r = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  std::string text = RenderText(*r);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("mallory?[2J"), std::string::npos);
}

TEST(RenderTextTest, SaysSoWhenNoJobsEnded) {
  auto r = BuildWasteReport(std::vector<JobRecord>{}, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_NE(RenderText(*r).find("No jobs ended in this window"), std::string::npos);
  EXPECT_NE(RenderHtml(*r).find("No jobs ended in this window"), std::string::npos);
}

TEST(RenderHtmlTest, EscapesScriptInJobNamesAndUsers) {
  auto jobs = SmallJobs();
  for (auto& j : jobs) {
    j.request.job_name = "<script>alert('x')</script>";
    j.request.user = "\"><img src=x onerror=alert(1)>";
  }
  ReportOptions opts;
  opts.by = "job-name";
  auto by_name = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(by_name.ok());
  std::string html = RenderHtml(*by_name);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);

  auto by_user = BuildWasteReport(jobs, ReportOptions{}, RoundPrices());
  ASSERT_TRUE(by_user.ok());
  html = RenderHtml(*by_user);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&quot;&gt;&lt;img src=x"), std::string::npos);
}

TEST(RenderHtmlTest, IsOneSelfContainedFileWithCharts) {
  std::string html = RenderHtml(SmallReport("account"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // Histogram, core-hours and GPU-hours over time, wasted dollars per day, groups.
  size_t charts = 0;
  for (size_t pos = html.find("<svg"); pos != std::string::npos; pos = html.find("<svg", pos + 1)) {
    ++charts;
  }
  EXPECT_EQ(charts, 5u);
  EXPECT_NE(html.find("All groups by account"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace rightsize

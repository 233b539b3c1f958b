#include "report/showback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
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

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), 0LL); }

TEST(ShowbackTest, ApportionCentsAddsUpAndMovesNoRowByACent) {
  // Three thirds of $1.00: 33.33... cents each; the missing cent goes to the first by key.
  std::vector<double> thirds(3, 1.0 / 3);
  auto cents = ApportionCents(thirds, 100, {"b", "a", "c"});
  EXPECT_EQ(Sum(cents), 100);
  EXPECT_EQ(cents, (std::vector<int64_t>{33, 34, 33}));
  // Largest remainder wins: 0.006 and 0.004 of a dollar, total 1 cent.
  cents = ApportionCents({0.006, 0.004}, 1, {"x", "y"});
  EXPECT_EQ(cents, (std::vector<int64_t>{1, 0}));
  // Random rows against their own rounded total.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dollars(0, 5000);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> rows(1 + round % 40);
    std::vector<std::string> keys;
    double total = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i] = dollars(rng);
      total += rows[i];
      keys.push_back(std::to_string(i));
    }
    int64_t total_cents = std::llround(total * 100);
    cents = ApportionCents(rows, total_cents, keys);
    ASSERT_EQ(Sum(cents), total_cents);
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_LT(std::fabs(cents[i] - rows[i] * 100), 1);
  }
  // A total that does not match still comes out exact, and an empty table is empty.
  EXPECT_EQ(Sum(ApportionCents({1.0, 2.0}, 305, {"a", "b"})), 305);
  EXPECT_EQ(Sum(ApportionCents({1.0, 2.0}, 295, {"a", "b"})), 295);
  EXPECT_TRUE(ApportionCents({}, 0, {}).empty());
}

std::vector<JobRecord> Departments() {
  std::vector<JobRecord> jobs;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> frac(0.01, 1.0);
  const char* accounts[] = {"physics", "chem", "bio", ""};
  for (int i = 0; i < 200; ++i) {
    double cpus = 1 + i % 16;
    JobRecord j = Job(std::to_string(i), "user" + std::to_string(i % 7), cpus, 4 + i % 60,
                      60 + 97 * i, kT0 + int64_t{600} * i);
    j.request.account = accounts[i % 4];
    if (i % 5 != 0) {
      j.usage.cpu_time_s = cpus * *j.usage.elapsed_s * frac(rng);
      j.usage.peak_rss_bytes = GiB((4 + i % 60) * frac(rng));
    }
    if (i % 3 == 0) {
      j.alloc.gpus = 1 + i % 4;
      j.alloc.gpu_type = i % 2 == 0 ? "a100" : "v100";
      if (i % 9 != 0) j.usage.gpu_util_pct = 100 * frac(rng);
    }
    jobs.push_back(j);
  }
  JobRecord never_ran = Job("nr", "user1", 4, 4, 0, kT0);  // counts, adds no dollars
  never_ran.usage.elapsed_s.reset();
  never_ran.request.account = "chem";
  jobs.push_back(never_ran);
  return jobs;
}

int64_t Cents(double d) { return std::llround(d * 100); }

TEST(ShowbackTest, RowsAddUpToTheReportsTotalsToTheCent) {
  for (const char* by : {"account", "user"}) {
    ReportOptions opts;
    opts.showback = by;
    auto r = BuildWasteReport(Departments(), opts, RoundPrices());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ShowbackTable t = MakeShowback(*r);
    EXPECT_EQ(t.by, by);
    EXPECT_EQ(t.total.allocated_cents, Cents(r->cost.allocated_dollars));
    EXPECT_EQ(*t.total.used_cents, Cents(*r->cost.used_dollars));
    EXPECT_EQ(*t.total.wasted_cents, Cents(*r->cost.wasted_dollars));
    EXPECT_EQ(t.total.recoverable_cents, Cents(r->upper_bound.dollars));
    int64_t jobs = 0, alloc = 0, used = 0, wasted = 0, rec = 0, right = 0;
    double share = 0;
    for (const auto& row : t.rows) {
      jobs += row.jobs;
      alloc += row.allocated_cents;
      used += *row.used_cents;
      wasted += *row.wasted_cents;
      rec += row.recoverable_cents;
      right += row.right_sized_cents;
      share += row.share;
    }
    EXPECT_EQ(jobs, r->jobs);
    EXPECT_EQ(alloc, t.total.allocated_cents);
    EXPECT_EQ(used, *t.total.used_cents);
    EXPECT_EQ(wasted, *t.total.wasted_cents);
    EXPECT_EQ(rec, t.total.recoverable_cents);
    EXPECT_EQ(right, t.total.right_sized_cents);
    EXPECT_NEAR(share, 1, 1e-9);
    // Biggest spender first.
    for (size_t i = 1; i < t.rows.size(); ++i) {
      EXPECT_GE(t.rows[i - 1].allocated_cents, t.rows[i].allocated_cents);
    }
  }
}

TEST(ShowbackTest, AccountsAreRowsAndAnEmptyAccountIsUnknown) {
  ReportOptions opts;
  opts.showback = "account";
  auto r = BuildWasteReport(Departments(), opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  std::vector<std::string> keys;
  for (const auto& row : MakeShowback(*r).rows) keys.push_back(row.key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"(unknown)", "bio", "chem", "physics"}));
  // Without --showback the report carries no rows.
  auto plain = BuildWasteReport(Departments(), ReportOptions{}, RoundPrices());
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->showback.empty());
  opts.showback = "queue";
  EXPECT_EQ(BuildWasteReport(Departments(), opts, RoundPrices()).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(ShowbackTest, CsvColumnsAddUpAndDefuseFormulasAndQuotes) {
  auto jobs = Departments();
  jobs[1].request.account = "=HYPERLINK(\"http://x\",\"a,b\")";
  ReportOptions opts;
  opts.showback = "account";
  auto r = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  std::string csv = RenderShowbackCsv(*r);
  EXPECT_NE(csv.find("\"'=HYPERLINK(\"\"http://x\"\",\"\"a,b\"\")\""), std::string::npos) << csv;
  // Sum the allocated column (the 5th) in cents over the rows; the last line is the total.
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("account,jobs,core_hours,gpu_hours,allocated_USD,", 0), 0u) << line;
  std::vector<int64_t> alloc;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    // The key may be quoted with commas inside: take the fields from the end.
    std::vector<std::string> fields;
    std::string field;
    std::istringstream ls(line.substr(0, line.size() - 1));  // drop \r
    while (std::getline(ls, field, ',')) fields.push_back(field);
    ASSERT_GE(fields.size(), 10u) << line;
    alloc.push_back(std::llround(std::stod(fields[fields.size() - 6]) * 100));
  }
  ASSERT_GE(alloc.size(), 2u);
  int64_t total = alloc.back();
  alloc.pop_back();
  EXPECT_EQ(Sum(alloc), total);
  EXPECT_EQ(total, std::llround(r->cost.allocated_dollars * 100));
}

TEST(ShowbackTest, JsonIsVersionedAndHtmlEscapesKeys) {
  auto jobs = Departments();
  jobs[2].request.account = "<script>alert(1)</script>";
  ReportOptions opts;
  opts.showback = "account";
  auto r = BuildWasteReport(jobs, opts, RoundPrices());
  ASSERT_TRUE(r.ok());
  nlohmann::json j = RenderShowbackJson(*r);
  EXPECT_EQ(j["schema"], "rightsize.showback/v1");
  EXPECT_EQ(j["by"], "account");
  EXPECT_EQ(j["total"]["allocated_dollars"].get<double>(),
            std::llround(r->cost.allocated_dollars * 100) / 100.0);
  EXPECT_FALSE(j["rows"].empty());
  std::string html = RenderShowbackHtml(*r);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  std::string text = RenderShowbackText(*r);
  EXPECT_NE(text.find("total"), std::string::npos);
  EXPECT_NE(text.find("largest remainders"), std::string::npos);
}

}  // namespace
}  // namespace rightsize

#include "ingest/swf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "store/store.h"
#include "test_util.h"

namespace rightsize {
namespace {

TEST(SwfParserTest, ReadsAllFieldsOfARealTrace) {
  SwfParser parser;
  auto r = ParseFile(parser, DataPath("swf/KTH-SP2-1996-2.1-cln.swf.gz"));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.jobs.size(), 28489u);
  // First record: "1 0 964980 97225 56 -1 -1 56 210000 -1 1 1 1 -1 -1 -1 -1 -1"
  const JobRecord& j = r.jobs.front();
  EXPECT_EQ(j.job_id, "1");
  EXPECT_EQ(*j.submit_time, 843480031);  // UnixStartTime + 0
  EXPECT_EQ(*j.start_time, 843480031 + 964980);
  EXPECT_EQ(*j.end_time, 843480031 + 964980 + 97225);
  EXPECT_DOUBLE_EQ(*j.usage.elapsed_s, 97225);
  EXPECT_DOUBLE_EQ(*j.alloc.cpus, 56);
  EXPECT_DOUBLE_EQ(*j.request.cpus, 56);
  EXPECT_EQ(*j.request.time_limit_s, 210000);
  EXPECT_EQ(j.outcome.state, "COMPLETED");
  EXPECT_EQ(j.request.user, "user1");
  // -1 means unknown: never 0.
  EXPECT_FALSE(j.usage.cpu_time_s.has_value());
  EXPECT_FALSE(j.usage.avg_rss_bytes.has_value());
  EXPECT_FALSE(j.request.memory_bytes.has_value());
  EXPECT_EQ(parser.metadata().at("swf.MaxProcs"), "100");
  EXPECT_EQ(parser.metadata().at("swf.UnixStartTime"), "843480031");
}

TEST(SwfParserTest, UsageFieldsArePerProcessor) {
  SwfParser parser;
  // procs 4, avg CPU 100 s/proc, used mem 2048 KB/proc, req mem 4096 KB/proc, status 0.
  auto r = ParseText(parser, "7 10 5 200 4 100 2048 4 600 4096 0 3 2 9 1 2 -1 -1\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  const JobRecord& j = r.jobs.at(0);
  EXPECT_DOUBLE_EQ(*j.usage.cpu_time_s, 400);
  EXPECT_EQ(*j.usage.avg_rss_bytes, 4 * 2048 * 1024);
  EXPECT_EQ(*j.request.memory_bytes, 4 * 4096 * 1024);
  EXPECT_EQ(j.request.memory_scope, MemoryScope::kPerCpu);
  EXPECT_EQ(j.outcome.state, "FAILED");
  EXPECT_EQ(j.request.job_name, "exe9");
  EXPECT_EQ(j.request.partition, "2");
}

TEST(SwfParserTest, BadLinesNameTheField) {
  SwfParser parser;
  auto r = ParseText(parser,
                     "; MaxProcs: 8\n"
                     "1 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "2 0 0 ten 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "3 0 0 10 1\n"
                     "4 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1 {extra} q_1d\n");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].find("3: field run time: expected a number"), std::string::npos)
      << r.errors[0];
  EXPECT_NE(r.errors[1].find("4: expected 18 fields, got 5"), std::string::npos) << r.errors[1];
  EXPECT_EQ(r.jobs.size(), 2u);  // 1 and 4 (extended SWF's extra fields are ignored)
}

// Issue 31: one bad number used to be stored and poison the report (end time -9.2e18,
// requested time and memory stored as INT64_MIN). Each is now a bad line naming the field.
TEST(SwfParserTest, ImplausibleNumbersAreBadLinesNamingTheField) {
  SwfParser parser;
  auto r = ParseText(parser,
                     "1 0 10 1e30 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "2 0 10 inf 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "3 18446744073709551616 10 60 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "4 0 10 60 4 -1 -1 4 1e25 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "5 0 10 60 4 -1 -1 4 7200 1e308 1 1 1 -1 -1 -1 -1 -1\n"
                     "6 0 10 60 4 100000 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n"
                     "7 0 10 60 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n");
  ASSERT_EQ(r.errors.size(), 6u);
  EXPECT_EQ(r.errors[0],
            "1: field run time: expected a duration from 0 to 10 years (315,576,000 s), got "
            "'1e30'");
  EXPECT_EQ(r.errors[1], "2: field run time: expected a number (-1 for unknown), got 'inf'");
  EXPECT_EQ(r.errors[2],
            "3: field submit time: expected a time from 1970 to 2200, got "
            "'18446744073709551616'");
  EXPECT_EQ(r.errors[3],
            "4: field requested time: expected a time limit from 0 to 100 years "
            "(3,155,760,000 s), got '1e25'");
  EXPECT_EQ(r.errors[4],
            "5: field requested memory: expected a memory size from 0 to 64 PiB, got '1e308'");
  EXPECT_NE(r.errors[5].find("6: field average CPU time: expected a CPU efficiency of at most "
                             "1,000%"),
            std::string::npos)
      << r.errors[5];
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].job_id, "7");
}

TEST(SwfParserTest, ExtraFieldsAreABadLineUnlessAleaExtended) {
  SwfParser parser;
  auto r = ParseText(parser,
                     "1 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1 7 8\n"
                     "2 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1 {1,2} q_1d 1:ppn=1\n"
                     "3 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1 {1} q_1d 1:ppn=1 more\n");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].find("1: expected 18 fields, got 20"), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[1].find("3: expected 18 fields, got 22"), std::string::npos) << r.errors[1];
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].job_id, "2");  // Alea's extended SWF (wagap-2013) is still read
}

// Ingests through IngestFile into a SQLite store, as `rightsize ingest swf` does.
class SwfIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rightsize-swf-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = OpenStore((dir_ / "rs.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  IngestStats Ingest(const std::string& text) {
    std::string path = (dir_ / "t.swf").string();
    std::ofstream(path) << text;
    SwfParser parser;
    IngestStats stats;
    Status st = IngestFile(path, parser, *store_, "t", IngestOptions(), &stats);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return stats;
  }
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(SwfIngestTest, ARepeatedJobCountsAsReplacedNotAsNewJobs) {
  std::string row = "1 0 10 100 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n";
  IngestStats first = Ingest(row + row + row + row + row);
  EXPECT_EQ(first.stored, 5);
  EXPECT_EQ(first.new_jobs, 1);
  EXPECT_NE(IngestSummaryText(first).find("5 jobs stored in cluster 't' (1 new, 4 replaced jobs "
                                          "already stored)"),
            std::string::npos)
      << IngestSummaryText(first);
  IngestStats again = Ingest(row);
  EXPECT_EQ(again.new_jobs, 0);
  EXPECT_NE(IngestSummaryText(again).find("(0 new, 1 replaced jobs already stored)"),
            std::string::npos)
      << IngestSummaryText(again);
  auto n = store_->CountJobs({});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
}

TEST_F(SwfIngestTest, ImplausibleLinesAreSkippedCountedAndNamedWithFileAndLine) {
  IngestStats s = Ingest(
      "1 0 10 100 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "2 0 10 1e30 4 -1 -1 4 7200 -1 1 1 1 -1 -1 -1 -1 -1\n");
  EXPECT_EQ(s.stored, 1);
  EXPECT_EQ(s.skipped, 1);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors[0].ToString(),
            (dir_ / "t.swf").string() +
                ":2: field run time: expected a duration from 0 to 10 years (315,576,000 s), got "
                "'1e30'");
}

TEST(SwfParserTest, ClusterNameComesFromTheFileName) {
  EXPECT_EQ(ClusterNameFromPath("/x/KTH-SP2-1996-2.1-cln.swf.gz"), "KTH-SP2-1996-2.1-cln");
  EXPECT_EQ(ClusterNameFromPath("trace.swf"), "trace");
  EXPECT_EQ(ClusterNameFromPath("-"), "default");
}

}  // namespace
}  // namespace rightsize

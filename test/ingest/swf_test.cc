#include "ingest/swf.h"

#include <gtest/gtest.h>

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

TEST(SwfParserTest, ClusterNameComesFromTheFileName) {
  EXPECT_EQ(ClusterNameFromPath("/x/KTH-SP2-1996-2.1-cln.swf.gz"), "KTH-SP2-1996-2.1-cln");
  EXPECT_EQ(ClusterNameFromPath("trace.swf"), "trace");
  EXPECT_EQ(ClusterNameFromPath("-"), "default");
}

}  // namespace
}  // namespace rightsize

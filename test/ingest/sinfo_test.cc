// sinfo output: partitions with their nodes' cores, memory and GPUs, the default marked.
#include "ingest/sinfo.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace rightsize {
namespace {

TEST(SinfoTest, PartitionsAreMergedAcrossNodeTypesWithTheDefaultMarked) {
  // As `sinfo --format='%P|%D|%c|%m|%G'` prints it (with its header): one line per partition
  // and node configuration.
  auto parts = ParseSinfo(
      "PARTITION|NODES|CPUS|MEMORY|GRES\n"
      "batch*|10|128|515000|(null)\n"
      "gpu|4|64|1030000|gpu:a100:4(S:0-1)\n"
      "gpu|2|96|1030000|gpu:h100:8(S:0-1),shard:8\n"
      "big|1|256+|2060000+|gpu:2\n",
      "sinfo.txt");
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 3u);
  const PartitionShape& batch = (*parts)[0];
  EXPECT_EQ(batch.name, "batch");
  EXPECT_TRUE(batch.is_default);
  EXPECT_EQ(batch.nodes, 10);
  EXPECT_EQ(batch.cpus_per_node, 128);
  EXPECT_EQ(batch.memory_per_node, int64_t{515000} * 1024 * 1024);
  EXPECT_EQ(batch.gpus_per_node, 0);
  const PartitionShape& gpu = (*parts)[1];
  EXPECT_FALSE(gpu.is_default);
  EXPECT_EQ(gpu.nodes, 6);           // both node types
  EXPECT_EQ(gpu.cpus_per_node, 96);  // the largest
  EXPECT_EQ(gpu.gpus_per_node, 8);
  EXPECT_EQ(gpu.gpu_type, "h100");  // the type of the node with the most GPUs
  EXPECT_EQ((*parts)[2].gpus_per_node, 2);
  EXPECT_EQ((*parts)[2].gpu_type, "");
  EXPECT_EQ((*parts)[2].cpus_per_node, 256);

  // Kept as cluster metadata and read back the same.
  auto meta = PartitionMeta(*parts);
  EXPECT_EQ(meta["default_partition"], "batch");
  EXPECT_EQ(meta["partition.gpu.gpu_type"], "h100");
  meta["swf.MaxProcs"] = "1024";  // other metadata is left alone
  auto by_name = *parts;          // the metadata lists them by name
  std::sort(by_name.begin(), by_name.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  EXPECT_EQ(PartitionsFromMeta(meta), by_name);
}

TEST(SinfoTest, BadLinesNameTheLineAndTheField) {
  auto wrong_format = ParseSinfo("batch* up 1-00:00:00 10 idle node[01-10]\n", "out.txt");
  ASSERT_FALSE(wrong_format.ok());
  EXPECT_EQ(wrong_format.status().message(),
            "out.txt:1: 1 fields, expected 5 (sinfo --noheader --format='%P|%D|%c|%m|%G')");
  auto bad_mem = ParseSinfo("batch*|10|128|515000|(null)\ngpu|4|64|lots|(null)\n", "s");
  ASSERT_FALSE(bad_mem.ok());
  EXPECT_EQ(bad_mem.status().message(),
            "s:2: memory per node (%m) is \"lots\", expected MiB as a whole number up to 2^30");
  auto bad_gres = ParseSinfo("gpu|4|64|1000|gpu:a100:four\n", "s");
  ASSERT_FALSE(bad_gres.ok());
  EXPECT_NE(bad_gres.status().message().find("generic resources"), std::string::npos);
  EXPECT_FALSE(ParseSinfo("\n\n", "empty").ok());
}

TEST(SinfoTest, ValuesThatWouldOverflowAreBadLines) {
  // 2^43 MiB is 2^63 bytes: it wrapped to a negative memory per node (found by sinfo_fuzz).
  auto huge_mem = ParseSinfo("batch*|10|128|8796093022208|(null)\n", "s");
  ASSERT_FALSE(huge_mem.ok());
  EXPECT_EQ(huge_mem.status().message(),
            "s:1: memory per node (%m) is \"8796093022208\", expected MiB as a whole number up to "
            "2^30");
  EXPECT_FALSE(ParseSinfo("batch*|9223372036854775807|128|1000|(null)\n", "s").ok());
  EXPECT_FALSE(ParseSinfo("batch*|10|9223372036854775807|1000|(null)\n", "s").ok());
  auto largest = ParseSinfo("batch*|16777216|1048576|1073741824|(null)\n", "s");
  ASSERT_TRUE(largest.ok()) << largest.status().message();
  EXPECT_EQ((*largest)[0].memory_per_node, int64_t{1} << 50);
}

}  // namespace
}  // namespace rightsize

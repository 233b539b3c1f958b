#include "core/units.h"

#include <gtest/gtest.h>

namespace rightsize {
namespace {

int64_t Mem(std::string_view text, int64_t unit = kMiB) {
  auto m = ParseSlurmMemory(text, unit);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->has_value());
  return (*m)->bytes;
}

TEST(UnitsTest, ParsesMemoryAsSlurmPrintsIt) {
  EXPECT_EQ(Mem("4000M"), 4000 * kMiB);
  EXPECT_EQ(Mem("4G"), 4 * kGiB);
  EXPECT_EQ(Mem("2.50T"), 2 * kTiB + kTiB / 2);
  EXPECT_EQ(Mem("1294440K"), 1294440 * kKiB);
  EXPECT_EQ(Mem("438.50M"), static_cast<int64_t>(438.5 * kMiB));
  EXPECT_EQ(Mem("0", 1), 0);
  EXPECT_EQ(Mem("934556828", 1), 934556828);
  EXPECT_EQ(Mem("500", kMiB), 500 * kMiB);  // ReqMem without a unit is MiB
}

TEST(UnitsTest, OldSacctMemorySuffixesGiveTheScope) {
  auto per_cpu = ParseSlurmMemory("3000Mc", kMiB);
  ASSERT_TRUE(per_cpu.ok());
  EXPECT_EQ((*per_cpu)->bytes, 3000 * kMiB);
  EXPECT_EQ((*per_cpu)->scope, MemoryScope::kPerCpu);
  auto per_node = ParseSlurmMemory("191846Mn", kMiB);
  ASSERT_TRUE(per_node.ok());
  EXPECT_EQ((*per_node)->bytes, 191846 * kMiB);
  EXPECT_EQ((*per_node)->scope, MemoryScope::kPerNode);
  auto gn = ParseSlurmMemory("4Gn", kMiB);
  ASSERT_TRUE(gn.ok());
  EXPECT_EQ((*gn)->bytes, 4 * kGiB);
}

TEST(UnitsTest, DecodesTheOldPerCpuFlagBit) {
  // Seen in real UB CCR accounting: 2147486648Mn with ReqTRES mem=24000M for 8 CPUs.
  auto m = ParseSlurmMemory("2147486648Mn", kMiB);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->bytes, 3000 * kMiB);
  EXPECT_EQ((*m)->scope, MemoryScope::kPerCpu);
}

TEST(UnitsTest, RejectsMalformedMemoryWithWhatWasExpected) {
  auto m = ParseSlurmMemory("lots", kMiB);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("expected a memory size"), std::string::npos);
  EXPECT_NE(m.status().message().find("'lots'"), std::string::npos);
  EXPECT_FALSE(ParseSlurmMemory("-4G", kMiB).ok());
  EXPECT_FALSE(ParseSlurmMemory("4X", kMiB).ok());
  auto empty = ParseSlurmMemory("", kMiB);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

double Dur(std::string_view text) {
  auto d = ParseSlurmDuration(text);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->has_value());
  EXPECT_EQ((*d)->kind, SlurmDuration::Kind::kValue);
  return (*d)->seconds;
}

TEST(UnitsTest, ParsesEveryDurationForm) {
  EXPECT_DOUBLE_EQ(Dur("1-04:33:44"), 86400 + 4 * 3600 + 33 * 60 + 44);
  EXPECT_DOUBLE_EQ(Dur("12-14:16:39"), 12 * 86400 + 14 * 3600 + 16 * 60 + 39);
  EXPECT_DOUBLE_EQ(Dur("02:14:11"), 2 * 3600 + 14 * 60 + 11);
  EXPECT_DOUBLE_EQ(Dur("00:00.081"), 0.081);
  EXPECT_DOUBLE_EQ(Dur("01:05.753"), 65.753);
  EXPECT_DOUBLE_EQ(Dur("451-06:00:24"), 451 * 86400 + 6 * 3600 + 24);
  EXPECT_DOUBLE_EQ(Dur("2-00"), 2 * 86400);                      // D-HH
  EXPECT_DOUBLE_EQ(Dur("1-02:30"), 86400 + 2 * 3600 + 30 * 60);  // D-HH:MM
}

TEST(UnitsTest, SpecialLimitsAreNotNumbers) {
  auto u = ParseSlurmDuration("UNLIMITED");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)->kind, SlurmDuration::Kind::kUnlimited);
  auto p = ParseSlurmDuration("Partition_Limit");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->kind, SlurmDuration::Kind::kPartitionLimit);
  auto i = ParseSlurmDuration("INVALID");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ((*i)->kind, SlurmDuration::Kind::kInvalid);
  EXPECT_FALSE(ParseSlurmDuration("1:2:3:4").ok());
  EXPECT_FALSE(ParseSlurmDuration("ab:cd").ok());
  EXPECT_FALSE(ParseSlurmDuration("-5").ok());
}

TEST(UnitsTest, ParsesTimestampsAndNone) {
  auto t = ParseSlurmTimestamp("2023-08-31T12:29:47");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(**t, 1693484987);
  EXPECT_EQ(FormatTimestamp(**t), "2023-08-31T12:29:47");
  for (const char* none : {"None", "Unknown", ""}) {
    auto n = ParseSlurmTimestamp(none);
    ASSERT_TRUE(n.ok());
    EXPECT_FALSE(n->has_value()) << none;
  }
  EXPECT_FALSE(ParseSlurmTimestamp("2023-13-01T00:00:00").ok());
  EXPECT_FALSE(ParseSlurmTimestamp("yesterday").ok());
}

TEST(UnitsTest, SummarizesTresStrings) {
  auto s = SummarizeTres("cpu=4,mem=16G,node=1,billing=4,gres/gpu=2,gres/gpu:a100=2", kMiB);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s->cpus, 4);
  EXPECT_EQ(*s->memory_bytes, 16 * kGiB);
  EXPECT_EQ(*s->nodes, 1);
  EXPECT_EQ(*s->gpus, 2);
  EXPECT_EQ(s->gpu_type, "a100");

  auto usage = SummarizeTres(
      "cpu=15:33:58,energy=0,fs/disk=934556828,gres/gpumem=20500736K,gres/gpuutil=90,"
      "mem=1294440K,pages=3310,vmem=10379460K",
      1);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_DOUBLE_EQ(*usage->cpu_seconds, 15 * 3600 + 33 * 60 + 58);
  EXPECT_EQ(*usage->gpu_memory_bytes, 20500736 * kKiB);
  EXPECT_DOUBLE_EQ(*usage->gpu_util_pct, 90);
  EXPECT_EQ(*usage->disk_bytes, 934556828);
  EXPECT_EQ(*usage->memory_bytes, 1294440 * kKiB);

  auto mixed = SummarizeTres("gres/gpu:a100=1,gres/gpu:v100=2", kMiB);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(*mixed->gpus, 3);
  EXPECT_EQ(mixed->gpu_type, "mixed");

  auto bad = SummarizeTres("cpu=4,mem", kMiB);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mem'"), std::string::npos);
  auto bad_mem = SummarizeTres("cpu=4,mem=huge", kMiB);
  ASSERT_FALSE(bad_mem.ok());
  EXPECT_NE(bad_mem.status().message().find("TRES item mem"), std::string::npos);
}

TEST(UnitsTest, ParsesJobIdsOfEveryKind) {
  auto plain = ParseJobId("123");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->job, "123");
  EXPECT_EQ(plain->step, "");

  auto array = ParseJobId("39889258_1426.batch");
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(array->job, "39889258_1426");
  EXPECT_EQ(array->base, 39889258);
  EXPECT_EQ(*array->array_task, 1426);
  EXPECT_EQ(array->step, "batch");

  auto pending = ParseJobId("123_[1-5%2]");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->job, "123_[1-5%2]");
  EXPECT_EQ(pending->array_spec, "[1-5%2]");

  auto het = ParseJobId("123+1.0");
  ASSERT_TRUE(het.ok());
  EXPECT_EQ(het->job, "123+1");
  EXPECT_EQ(*het->het_offset, 1);
  EXPECT_EQ(het->step, "0");

  auto ext = ParseJobId("7965768.extern");
  ASSERT_TRUE(ext.ok());
  EXPECT_EQ(ext->step, "extern");

  EXPECT_FALSE(ParseJobId("abc").ok());
  EXPECT_FALSE(ParseJobId("12x").ok());
  EXPECT_FALSE(ParseJobId("12.").ok());
}

TEST(UnitsTest, FormatsMemoryForASuggestedRequest) {
  EXPECT_EQ(FormatMemory(48 * kGiB), "48G");
  EXPECT_EQ(FormatMemory(800 * kMiB), "800M");
  EXPECT_EQ(FormatMemory(kGiB + kGiB / 2), "1.5G");
  EXPECT_EQ(FormatDuration(86400 + 3661), "1-01:01:01");
  EXPECT_EQ(FormatDuration(59), "00:00:59");
}

TEST(UnitsTest, ParsesTimeSpecs) {
  int64_t now = 1700000000;
  EXPECT_EQ(*ParseTimeSpec("14d", now), now - 14 * 86400);
  EXPECT_EQ(*ParseTimeSpec("12h", now), now - 12 * 3600);
  EXPECT_EQ(*ParseTimeSpec("2w", now), now - 14 * 86400);
  EXPECT_EQ(*ParseTimeSpec("2023-08-31", now), 1693440000);
  EXPECT_EQ(*ParseTimeSpec("2023-08-31T12:29:47", now), 1693484987);
  auto bad = ParseTimeSpec("fortnight", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace rightsize

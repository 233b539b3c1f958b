#include "report/prices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rightsize {
namespace {

const std::string kDefaultPrices = std::string(RIGHTSIZE_TEST_DATA_DIR) + "/../share/prices.json";

TEST(PriceTableTest, DefaultTableLoadsAndNamesASourceForEveryPrice) {
  auto table = LoadPriceTable(kDefaultPrices);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_GT(table->cpu_core_hour, 0);
  EXPECT_GT(table->memory_gb_hour, 0);
  EXPECT_GT(table->default_gpu_hour, 0);
  EXPECT_FALSE(table->source_note.empty());
  for (const char* key : {"cpu_core_hour", "memory_gb_hour", "default_gpu_hour"}) {
    EXPECT_FALSE(table->sources[key].empty()) << key;
  }
  for (const char* gpu : {"a100", "h100", "v100", "a40", "t4", "l40s", "a10"}) {
    EXPECT_TRUE(table->HasGpuPrice(gpu)) << gpu;
    EXPECT_FALSE(table->sources[std::string("gpu:") + gpu].empty()) << gpu;
    EXPECT_GT(table->GpuMemoryGb(gpu), 0) << gpu;
  }
  // An H100 costs more than an A100, which costs more than a T4.
  EXPECT_GT(table->GpuHourPrice("h100"), table->GpuHourPrice("a100"));
  EXPECT_GT(table->GpuHourPrice("a100"), table->GpuHourPrice("t4"));
}

TEST(PriceTableTest, GpuTypesMatchCaseInsensitivelyAndUnknownTypesGetTheDefault) {
  auto table = ParsePriceTable(R"({"cpu_core_hour": 0.05, "memory_gb_hour": 0.005,
      "default_gpu_hour": 1.5, "gpus": {"A100": {"price": 3, "memory_gb": 80}}})",
                               "t.json");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_DOUBLE_EQ(table->cpu_core_hour, 0.05);
  EXPECT_DOUBLE_EQ(table->GpuHourPrice("a100"), 3);
  EXPECT_DOUBLE_EQ(table->GpuHourPrice("A100"), 3);
  EXPECT_DOUBLE_EQ(table->GpuMemoryGb("a100"), 80);
  EXPECT_DOUBLE_EQ(table->GpuHourPrice("mi250"), 1.5);
  EXPECT_DOUBLE_EQ(table->GpuHourPrice(""), 1.5);
  EXPECT_DOUBLE_EQ(table->GpuMemoryGb("mi250"), 0);
}

TEST(PriceTableTest, AModelSoldInSeveralSizesTakesTheSmallestThatFitsThePeak) {
  auto table = ParsePriceTable(
      R"({"cpu_core_hour": 0.03, "memory_gb_hour": 0.004, "default_gpu_hour": 3,
          "gpus": {"V100": {"price": 2.5, "memory_gb": [32, 16]}, "t4": {"price": 0.3,
          "memory_gb": 16}}})",
      "inline");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->GpuMemoryGb("v100"), 16);  // no peak known: the smaller size
  EXPECT_EQ(table->GpuMemoryGb("v100", 12.0), 16);
  EXPECT_EQ(table->GpuMemoryGb("v100", 19.6), 32);  // Habrok's V100 that used 19.6 GiB
  EXPECT_EQ(table->GpuMemoryGb("v100", 40.0), 0);   // no such V100: capacity unknown
  EXPECT_EQ(table->GpuMemoryGb("t4", 17.0), 0);
  auto bad = ParsePriceTable(
      R"({"cpu_core_hour": 0.03, "memory_gb_hour": 0.004, "default_gpu_hour": 3,
          "gpus": {"v100": {"price": 2.5, "memory_gb": [16, "big"]}}})",
      "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpus.v100.memory_gb"), std::string::npos);
}

TEST(PriceTableTest, BadJsonNamesTheFile) {
  auto table = ParsePriceTable("{\"cpu_core_hour\": 0.1,", "site-prices.json");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), Status::Code::kBadInput);
  EXPECT_NE(table.status().message().find("site-prices.json"), std::string::npos);
  EXPECT_NE(table.status().message().find("not valid JSON"), std::string::npos);
}

TEST(PriceTableTest, MissingFieldNamesTheFileAndTheField) {
  auto table =
      ParsePriceTable(R"({"cpu_core_hour": 0.1, "default_gpu_hour": 2})", "site-prices.json");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), Status::Code::kBadInput);
  EXPECT_EQ(table.status().message(), "site-prices.json: field memory_gb_hour: missing");

  auto no_price = ParsePriceTable(
      R"({"cpu_core_hour": {"source": "x"}, "memory_gb_hour": 1, "default_gpu_hour": 2})",
      "p.json");
  ASSERT_FALSE(no_price.ok());
  EXPECT_EQ(no_price.status().message(), "p.json: field cpu_core_hour.price: missing");
}

TEST(PriceTableTest, WrongTypesAndNegativePricesNameTheField) {
  auto table = ParsePriceTable(R"({"cpu_core_hour": 0.1, "memory_gb_hour": 0.01,
      "default_gpu_hour": 2, "gpus": {"a100": {"price": -3}}})",
                               "p.json");
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("p.json: field gpus.a100.price"), std::string::npos)
      << table.status().message();

  auto text = ParsePriceTable(
      R"({"cpu_core_hour": "cheap", "memory_gb_hour": 0.01, "default_gpu_hour": 2})", "p.json");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("field cpu_core_hour"), std::string::npos);
}

TEST(PriceTableTest, MissingFileIsNotFound) {
  auto table = LoadPriceTable("/nonexistent/rightsize/prices.json");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), Status::Code::kNotFound);
  EXPECT_NE(table.status().message().find("/nonexistent/rightsize/prices.json"), std::string::npos);
}

TEST(PriceTableTest, LoadPriceTableReportsFieldErrorsWithThePath) {
  auto dir = std::filesystem::temp_directory_path() / "rightsize_prices_test";
  std::filesystem::create_directories(dir);
  auto path = (dir / "bad.json").string();
  std::ofstream(path) << R"({"cpu_core_hour": 0.1, "memory_gb_hour": 0.01})";
  auto table = LoadPriceTable(path);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().message(), path + ": field default_gpu_hour: missing");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rightsize

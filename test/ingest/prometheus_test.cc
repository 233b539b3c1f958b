// The pure parts of `ingest prometheus`; the reader itself is tested against a real Prometheus
// (test/integration/prometheus/ingest_prometheus_test.sh).
#include "ingest/prometheus.h"

#include <gtest/gtest.h>

namespace rightsize {
namespace {

TEST(PrometheusIngestTest, GpuModelNamesBecomePriceTableTypes) {
  // dcgm-exporter's modelName is NVML's device name.
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA A100-SXM4-40GB"), "a100");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA A100 80GB PCIe"), "a100-80gb");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeOfModelName("Tesla V100-SXM2-32GB"), "v100-32gb");
  EXPECT_EQ(GpuTypeOfModelName("Tesla V100-PCIE-16GB"), "v100");
  EXPECT_EQ(GpuTypeOfModelName("Tesla T4"), "t4");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA L40S"), "l40s");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA A10G"), "a10g");
  EXPECT_EQ(GpuTypeOfModelName("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
  EXPECT_EQ(GpuTypeOfModelName(""), "");
}

TEST(PrometheusIngestTest, HeaderFlags) {
  auto h = ParseHeaderFlag("Authorization: Bearer abc:def");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->first, "Authorization");
  EXPECT_EQ(h->second, "Bearer abc:def");
  auto tenant = ParseHeaderFlag("X-Scope-OrgID:lab");
  ASSERT_TRUE(tenant.ok());
  EXPECT_EQ(tenant->second, "lab");
  EXPECT_FALSE(ParseHeaderFlag("no colon").ok());
  EXPECT_FALSE(ParseHeaderFlag(": value").ok());
}

TEST(PrometheusIngestTest, BadOptionsFailBeforeAnyRequest) {
  PrometheusOptions o;
  o.from_s = 100;
  o.to_s = 200;
  o.url = "localhost:9090";
  auto r = ReadPrometheus(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected http://"), std::string::npos);
  o.url = "http://127.0.0.1:9";
  o.to_s = 100;
  r = ReadPrometheus(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("window is empty"), std::string::npos);
}

}  // namespace
}  // namespace rightsize

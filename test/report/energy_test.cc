// Energy in the job card and the waste report: kWh from the record's joules, CO2e at the price
// file's grid factor (none: not shown), the unused GPU reservation at the type's idle power.
#include "report/energy.h"

#include <gtest/gtest.h>

#include <vector>

#include "report/job_card.h"
#include "report/render.h"
#include "report/waste.h"
#include "report_fixtures.h"

namespace rightsize {
namespace {

using testing::Job;
using testing::RoundPrices;

constexpr int64_t kT0 = 1700000000;

PriceTable GridPrices() {
  PriceTable p = RoundPrices();
  p.grid_gco2e_per_kwh = 400;
  p.sources["grid_gco2e_per_kwh"] = "the site's utility, 2025";
  p.gpu_idle_w_by_type["a100"] = 50;
  return p;
}

TEST(EnergyTest, TheJobCardShowsKwhAndCo2) {
  JobRecord j = Job("1", "alice", 4, 8, 3600, kT0);
  j.usage.gpu_energy_j = 3'600'000;  // 1 kWh
  j.usage.cpu_energy_j = 720'000;    // 0.2 kWh
  std::string text = RenderJobCardText(j, GridPrices());
  EXPECT_NE(text.find("Energy: 1.20 kWh (GPUs 1.00 kWh, CPU share 0.2 kWh), 0.48 kg CO2e at "
                      "400 g/kWh."),
            std::string::npos)
      << text;
  nlohmann::json card = RenderJobCardJson(j, GridPrices());
  EXPECT_DOUBLE_EQ(card["energy"]["kwh"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(card["energy"]["co2e_kg"].get<double>(), 0.48);
  EXPECT_EQ(card["job"]["usage"]["gpu_energy_j"].get<double>(), 3'600'000);

  // Without a grid factor (the built-in table) there is no CO2e, and unmeasured is unknown.
  text = RenderJobCardText(j, RoundPrices());
  EXPECT_EQ(text.find("CO2e"), std::string::npos) << text;
  EXPECT_TRUE(RenderJobCardJson(j, RoundPrices())["energy"]["co2e_kg"].is_null());
  JobRecord unmeasured = Job("2", "alice", 4, 8, 3600, kT0);
  EXPECT_NE(RenderJobCardText(unmeasured, GridPrices()).find("Energy: unknown"), std::string::npos);
  EXPECT_TRUE(RenderJobCardJson(unmeasured, GridPrices())["energy"]["kwh"].is_null());
}

TEST(EnergyTest, SlurmsNodeEnergyIsPreferredOverTheAgentsParts) {
  JobRecord j = Job("1", "alice", 4, 8, 3600, kT0);
  j.usage.gpu_energy_j = 1000;
  j.usage.node_energy_j = 5000;
  EXPECT_EQ(JobEnergyJ(j), 5000.0);
  j.usage.node_energy_j.reset();
  j.usage.cpu_energy_j = 500;
  EXPECT_EQ(JobEnergyJ(j), 1500.0);
}

TEST(EnergyTest, TheReportTotalsTheWindowAndTheIdleReservation) {
  JobRecord gpu_job = Job("1", "alice", 4, 8, 3600, kT0);
  gpu_job.alloc.gpus = 4;
  gpu_job.alloc.gpu_type = "a100";
  gpu_job.usage.gpu_util_pct = 25;             // 3 of 4 GPU-hours unused
  gpu_job.usage.gpu_energy_j = 2 * 3'600'000;  // 2 kWh
  JobRecord untyped = Job("2", "bob", 4, 8, 7200, kT0);
  untyped.alloc.gpus = 1;
  untyped.usage.gpu_util_pct = 0;  // 2 GPU-hours unused, idle power unknown
  JobRecord slurm = Job("3", "carol", 4, 8, 3600, kT0);
  slurm.usage.node_energy_j = 3'600'000;
  JobRecord unmeasured = Job("4", "dave", 4, 8, 3600, kT0);

  auto r = BuildWasteReport(std::vector<JobRecord>{gpu_job, untyped, slurm, unmeasured},
                            ReportOptions{}, GridPrices());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const EnergySummary& e = r->energy;
  EXPECT_EQ(e.jobs_with_energy, 2);
  EXPECT_EQ(e.jobs_without_energy, 2);
  EXPECT_DOUBLE_EQ(*e.kwh, 3.0);
  EXPECT_DOUBLE_EQ(*e.co2e_kg, 1.2);
  EXPECT_DOUBLE_EQ(*e.unused_gpu_hours, 5.0);
  EXPECT_DOUBLE_EQ(*e.unused_gpu_kwh, 3 * 50 / 1000.0);  // the a100's 3 h at 50 W
  EXPECT_DOUBLE_EQ(e.unused_gpu_hours_idle_unknown, 2.0);
  EXPECT_EQ(e.gpu_types_without_idle_power, std::vector<std::string>{"(untyped)"});

  nlohmann::json j = RenderJson(*r)["energy"];
  EXPECT_DOUBLE_EQ(j["kwh"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["unused_gpu_kwh"].get<double>(), 0.15);
  std::string text = RenderText(*r);
  EXPECT_NE(text.find("Energy: 3.00 kWh measured for 2 of 4 jobs"), std::string::npos) << text;
  EXPECT_NE(text.find("cost 0.15 kWh where the GPUs idled"), std::string::npos) << text;
  std::string html = RenderHtml(*r);
  EXPECT_NE(html.find("<h2>Energy</h2>"), std::string::npos);
  EXPECT_NE(html.find("((untyped)) are left unknown"), std::string::npos) << html;
}

TEST(EnergyTest, AWindowWithoutMeasurementsSaysSoAndShowsNoCo2) {
  auto r = BuildWasteReport(std::vector<JobRecord>{Job("1", "alice", 4, 8, 3600, kT0)},
                            ReportOptions{}, RoundPrices());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->energy.kwh.has_value());
  EXPECT_TRUE(RenderJson(*r)["energy"]["kwh"].is_null());
  std::string text = RenderText(*r);
  EXPECT_NE(text.find("Energy: unknown"), std::string::npos) << text;
  EXPECT_NE(text.find("CO2e: not shown: the price file gives no grid_gco2e_per_kwh."),
            std::string::npos)
      << text;
}

TEST(EnergyTest, ThePriceFileCarriesTheGridFactorAndIdlePower) {
  auto p = ParsePriceTable(R"({"cpu_core_hour": 0.03, "memory_gb_hour": 0.004,
      "default_gpu_hour": 2, "grid_gco2e_per_kwh": {"value": 350, "source": "utility 2025"},
      "gpus": {"A100": {"price": 3, "idle_w": 55}}})",
                           "p.json");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->grid_gco2e_per_kwh, 350.0);
  EXPECT_EQ(p->sources.at("grid_gco2e_per_kwh"), "utility 2025");
  EXPECT_EQ(p->GpuIdleW("a100"), 55.0);
  EXPECT_FALSE(p->GpuIdleW("h100").has_value());

  auto bad = ParsePriceTable(R"({"cpu_core_hour": 0.03, "memory_gb_hour": 0.004,
      "default_gpu_hour": 2, "grid_gco2e_per_kwh": -1})",
                             "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.json: field grid_gco2e_per_kwh: expected grams"),
            std::string::npos)
      << bad.status().message();
  bad = ParsePriceTable(R"({"cpu_core_hour": 0.03, "memory_gb_hour": 0.004,
      "default_gpu_hour": 2, "gpus": {"t4": {"price": 1, "idle_w": "cool"}}})",
                        "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field gpus.t4.idle_w"), std::string::npos);
  // The built-in table gives no grid factor: CO2e is not shown until a site gives one.
  auto builtin = PricesFor("");
  ASSERT_TRUE(builtin.ok());
  EXPECT_FALSE(builtin->grid_gco2e_per_kwh.has_value());
}

}  // namespace
}  // namespace rightsize

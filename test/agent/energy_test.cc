// Energy per job: the GPUs' through the fake libnvidia-ml.so.1 (test/agent/fake_nvml.c: its
// `energy=` counter in mJ, or none), the CPU packages' through a fixture tree laid out exactly
// like /sys/class/powercap and /proc, and the real /sys/class/powercap of the machine.
#include "report/energy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/gpu.h"
#include "agent/monitor.h"
#include "agent/proc.h"
#include "agent/rapl.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;

class Tree {
 public:
  Tree() {
    root_ = fs::temp_directory_path() /
            ("rs_energy_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(root_);
  }
  ~Tree() { fs::remove_all(root_); }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  void Write(const std::string& rel, const std::string& text) const {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string path(const std::string& rel = "") const { return (root_ / rel).string(); }

 private:
  fs::path root_;
  static inline int counter_ = 0;
};

// /proc/PID/stat of a process that used `utime` ticks (100 a second here).
std::string StatLine(int pid, int64_t utime) {
  return std::to_string(pid) + " (train) S 1 1 1 0 -1 4194560 500 0 2 0 " + std::to_string(utime) +
         " 0 0 0 20 0 1 0 12345 1000000 1000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 "
         "0 0 0 0\n";
}

// /proc/stat's first line with `busy` ticks of user time and some idle.
std::string ProcStat(int64_t busy) {
  return "cpu  " + std::to_string(busy) + " 0 0 90000 10 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n";
}

// A RAPL zone as the kernel lays it out under /sys/class/powercap.
void Zone(const Tree& t, const std::string& dir, const std::string& name, uint64_t energy_uj,
          uint64_t max_uj = 262143328850) {
  t.Write("powercap/" + dir + "/name", name + "\n");
  t.Write("powercap/" + dir + "/energy_uj", std::to_string(energy_uj) + "\n");
  t.Write("powercap/" + dir + "/max_energy_range_uj", std::to_string(max_uj) + "\n");
}

class EnergyTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("RIGHTSIZE_FAKE_NVML"); }
  void NvmlScript(const std::string& text) {
    std::ofstream(t_.path("nvml.script")) << text;
    ::setenv("RIGHTSIZE_FAKE_NVML", t_.path("nvml.script").c_str(), 1);
  }
  Tree t_;
};

// The acceptance: a job's GPU energy is the counter's difference, to the joule: 3,600,000,000
// mJ between its first and last sample is 1 kWh exactly.
TEST_F(EnergyTest, GpuEnergyIsTheNvmlCountersDifference) {
  t_.Write("proc/200/stat", StatLine(200, 100));
  ProcFs proc(t_.path("proc"), 100, 4096);
  NvmlScript(
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=700000 energy=5000000000\n"
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=650000 energy=6234567891 "
      "from_sample=2\n"
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=300000 energy=8600000000 "
      "from_sample=4\n"
      "gpu 1 uuid=GPU-b util=0 total=85899345920 used=1 power=60000 energy=9999999999\n"
      "proc 0 pid=200 used=1073741824\n");
  auto nvml = OpenNvml(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  for (int s = 0; s < 5; ++s) m.Sample(s * 10.0);  // samples 1 to 5

  ResourceUsage u = m.Usage(40, std::nullopt, std::nullopt);
  ASSERT_TRUE(u.gpu_energy_j.has_value());
  EXPECT_EQ(*u.gpu_energy_j, 3'600'000.0);  // GPU 1 is not the job's
  JobRecord job;
  job.usage = u;
  EXPECT_EQ(JobEnergyJson(job, PriceTable{})["kwh"].get<double>(), 1.0);
  nlohmann::json summary = m.SummaryJson(false);
  EXPECT_EQ(summary["energy"]["gpu_method"], "counter");
  EXPECT_EQ(summary["metrics"]["gpu_energy_j"]["last"].get<double>(), 3'600'000.0);
  EXPECT_EQ(summary["metrics"]["gpu_power_w"]["last"].get<double>(), 300.0);
}

// A GPU without the counter (before Volta): trapezoids of the power readings over time.
TEST_F(EnergyTest, WithoutACounterGpuEnergyIsPowerTimesTime) {
  t_.Write("proc/200/stat", StatLine(200, 100));
  ProcFs proc(t_.path("proc"), 100, 4096);
  NvmlScript(
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=200000\n"
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=300000 from_sample=2\n"
      "proc 0 pid=200 used=1073741824\n");
  auto nvml = OpenNvml(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  m.Sample(0);   // 200 W
  m.Sample(10);  // 300 W: (200 + 300) / 2 x 10 s
  m.Sample(20);  // 300 W: 300 x 10 s
  EXPECT_EQ(m.Usage(20, std::nullopt, std::nullopt).gpu_energy_j, 2500.0 + 3000.0);
  EXPECT_EQ(m.SummaryJson(false)["energy"]["gpu_method"], "power x time");
}

// A library without nvmlDeviceGetTotalEnergyConsumption at all (older drivers): the counter
// the script has is out of reach, and power x time stands in.
TEST_F(EnergyTest, ALibraryWithoutTheEnergyCallFallsBackToPower) {
  t_.Write("proc/200/stat", StatLine(200, 100));
  ProcFs proc(t_.path("proc"), 100, 4096);
  NvmlScript(
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=400000 energy=1000\n"
      "proc 0 pid=200 used=1073741824\n");
  auto nvml = OpenNvml(FAKE_NVML_MINIMAL_PATH);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  m.Sample(0);
  m.Sample(5);
  EXPECT_EQ(m.Usage(5, std::nullopt, std::nullopt).gpu_energy_j, 2000.0);
}

// A job that never ran on a GPU has an unknown GPU energy, not 0 J.
TEST_F(EnergyTest, AJobOffTheGpusHasNoGpuEnergy) {
  t_.Write("proc/200/stat", StatLine(200, 100));
  ProcFs proc(t_.path("proc"), 100, 4096);
  NvmlScript("gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=400000 energy=1000\n");
  auto nvml = OpenNvml(FAKE_NVML_PATH);
  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  m.Sample(0);
  m.Sample(5);
  EXPECT_FALSE(m.Usage(5, std::nullopt, std::nullopt).gpu_energy_j.has_value());
  EXPECT_EQ(m.SummaryJson(false)["energy"]["gpu_method"], "no GPU used");
}

// The node agent: one NVML and one RAPL reading a cycle for every job; the job's energy goes to
// its record and to /metrics as a counter.
TEST_F(EnergyTest, TheAgentExportsEachJobsEnergyAndRecordsIt) {
  Zone(t_, "intel-rapl:0", "package-0", 1'000'000);
  t_.Write("proc/stat", ProcStat(1000));
  t_.Write("proc/30/stat", StatLine(30, 100));
  t_.Write("proc/30/cgroup", "0::/user.slice\n");
  t_.Write("proc/30/environ", std::string("SLURM_JOB_ID=33\0HOME=/root\0", 28));
  t_.Write("cgroup/cgroup.controllers", "memory\n");
  ProcFs proc(t_.path("proc"), 100, 4096);
  CgroupFs cgroups(t_.path("cgroup"));
  NvmlScript(
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=700000 energy=1000000000\n"
      "gpu 0 uuid=GPU-a util=90 total=85899345920 used=1 power=700000 energy=4600000000 "
      "from_sample=3\n"
      "proc 0 pid=30 used=1073741824\n");
  auto nvml = OpenNvml(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  CpuEnergyMeter meter(t_.path("powercap"), t_.path("proc"), 100);
  Agent agent(&proc, &cgroups, nvml.get(), AgentOptions{"node1", 10});
  agent.set_cpu_energy(&meter);
  EXPECT_TRUE(agent.Cycle(0, 1000).empty());
  Zone(t_, "intel-rapl:0", "package-0", 9'000'000);  // 8 J
  t_.Write("proc/stat", ProcStat(1400));             // the node: 4 CPU seconds
  t_.Write("proc/30/stat", StatLine(30, 200));       // the job: 1 of them
  EXPECT_TRUE(agent.Cycle(10, 1010).empty());
  EXPECT_TRUE(agent.Cycle(20, 1020).empty());  // the counter has moved by 3.6e9 mJ
  std::string metrics = agent.Metrics();
  EXPECT_NE(metrics.find("# TYPE rightsize_job_energy_joules_total counter"), std::string::npos);
  EXPECT_NE(metrics.find("rightsize_job_energy_joules_total{job_id=\"33\",kind=\"slurm\","
                         "device=\"gpu\"} 3600000\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_job_energy_joules_total{job_id=\"33\",kind=\"slurm\","
                         "device=\"cpu\"} 2\n"),
            std::string::npos)
      << metrics;
  fs::remove_all(t_.path("proc/30"));
  auto ended = agent.Cycle(30, 1030);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].usage.gpu_energy_j, 3'600'000.0);
  EXPECT_EQ(ended[0].usage.cpu_energy_j, 2.0);
}

TEST(RaplTest, ReadsThePackageZonesAcrossAWrapAround) {
  Tree t;
  const uint64_t max = 262143328850;
  Zone(t, "intel-rapl:0", "package-0", max - 1'000'000);  // 1 J before the wrap
  Zone(t, "intel-rapl:0:0", "core", 5);                   // part of package 0
  Zone(t, "intel-rapl:1", "package-1", 10'000'000);
  Zone(t, "intel-rapl:2", "psys", 0);             // the SoC, packages included
  t.Write("powercap/intel-rapl/enabled", "1\n");  // the control type, no zone
  t.Write("proc/stat", ProcStat(1000));
  CpuEnergyMeter meter(t.path("powercap"), t.path("proc"), 100);
  ASSERT_TRUE(meter.available()) << meter.status();
  EXPECT_EQ(meter.status(), "RAPL: 2 packages (intel-rapl:0, intel-rapl:1)");

  Zone(t, "intel-rapl:0", "package-0", 2'000'000);   // wrapped: 1 J + 2 J
  Zone(t, "intel-rapl:0:0", "core", 999'000'000);    // not counted
  Zone(t, "intel-rapl:1", "package-1", 14'500'000);  // 4.5 J
  Zone(t, "intel-rapl:2", "psys", 999'000'000);      // not counted
  t.Write("proc/stat", ProcStat(1400));              // 4 s of CPU on the node
  auto interval = meter.Read();
  ASSERT_TRUE(interval.has_value());
  EXPECT_DOUBLE_EQ(interval->package_j, 7.5);
  EXPECT_DOUBLE_EQ(interval->node_cpu_s, 4.0);
  // A job with 1 of the node's 4 CPU seconds gets a quarter.
  EXPECT_DOUBLE_EQ(CpuEnergyMeter::JobShareJ(*interval, 1.0), 1.875);
  EXPECT_DOUBLE_EQ(CpuEnergyMeter::JobShareJ(*interval, 9.0), 7.5);  // never more than all
  EXPECT_EQ(CpuEnergyMeter::JobShareJ(CpuEnergyMeter::Interval{7.5, 0}, 1.0), 0);
}

// The job's CPU energy through JobMonitor, as `rightsize run` reads it (the monitor reads the
// meter at each sample; the first sample sets the baseline).
TEST(RaplTest, AJobsCpuEnergyIsItsShareOfThePackages) {
  Tree t;
  Zone(t, "intel-rapl:0", "package-0", 1'000'000);
  t.Write("proc/stat", ProcStat(1000));
  t.Write("proc/200/stat", StatLine(200, 100));
  ProcFs proc(t.path("proc"), 100, 4096);
  CpuEnergyMeter meter(t.path("powercap"), t.path("proc"), 100);
  JobMonitor m(&proc, nullptr, nullptr, 200, "");
  m.set_cpu_energy(&meter);
  m.Sample(0);
  Zone(t, "intel-rapl:0", "package-0", 9'000'000);  // 8 J
  t.Write("proc/stat", ProcStat(1400));             // the node: 4 CPU seconds
  t.Write("proc/200/stat", StatLine(200, 200));     // the job: 1 of them
  m.Sample(10);
  EXPECT_DOUBLE_EQ(m.Usage(10, std::nullopt, std::nullopt).cpu_energy_j.value_or(-1), 2.0);
  EXPECT_EQ(m.SummaryJson(false)["energy"]["cpu_status"], "RAPL: 1 package (intel-rapl:0)");
}

TEST(RaplTest, NoPowercapFolderIsRaplAbsentAndTheJobsCpuEnergyUnknown) {
  Tree t;
  t.Write("proc/stat", ProcStat(1000));
  t.Write("proc/200/stat", StatLine(200, 100));
  CpuEnergyMeter meter(t.path("no-powercap"), t.path("proc"), 100);
  EXPECT_FALSE(meter.available());
  EXPECT_EQ(meter.status(), "RAPL absent: " + t.path("no-powercap") + " does not exist");
  EXPECT_FALSE(meter.Read().has_value());
  ProcFs proc(t.path("proc"), 100, 4096);
  JobMonitor m(&proc, nullptr, nullptr, 200, "");
  m.set_cpu_energy(&meter);
  m.Sample(0);
  t.Write("proc/200/stat", StatLine(200, 200));
  m.Sample(10);
  EXPECT_FALSE(m.Usage(10, std::nullopt, std::nullopt).cpu_energy_j.has_value());
  nlohmann::json energy = m.SummaryJson(false)["energy"];
  EXPECT_TRUE(energy["cpu_j"].is_null());
  EXPECT_EQ(energy["cpu_status"].get<std::string>().rfind("RAPL absent: ", 0), 0u);
}

TEST(RaplTest, AFolderWithoutPackageZonesIsRaplAbsent) {
  Tree t;
  Zone(t, "intel-rapl:0", "psys", 1);
  Zone(t, "dtpm:0", "soc", 1);
  CpuEnergyMeter meter(t.path("powercap"), t.path("proc"), 100);
  EXPECT_FALSE(meter.available());
  EXPECT_EQ(meter.status(),
            "RAPL absent: " + t.path("powercap") + " has no intel-rapl package zone");
}

// This machine has no RAPL (a VM): the real path must say so. On a machine with RAPL the
// meter must find it instead; either way the status names what it found.
TEST(RaplTest, TheRealPowercapFolderIsReadOrSaidToBeAbsent) {
  CpuEnergyMeter meter;
  if (!fs::exists("/sys/class/powercap")) {
    EXPECT_FALSE(meter.available());
    EXPECT_EQ(meter.status(), "RAPL absent: /sys/class/powercap does not exist");
  } else {
    EXPECT_EQ(meter.status().rfind(meter.available() ? "RAPL: " : "RAPL absent: ", 0), 0u)
        << meter.status();
  }
}

}  // namespace
}  // namespace rightsize

// The DCGM collector against a fake libdcgm.so.4 (test/agent/fake_dcgm.c) that answers from a
// script: see that file for the script's format. The last tests run it with the fake
// libnvidia-ml.so.1 through a JobMonitor and an Agent, as the node agent does.
#include "agent/dcgm.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "agent/agent.h"
#include "agent/monitor.h"
#include "agent/proc.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFakeDcgm = FAKE_DCGM_PATH;
constexpr const char* kFakeNvml = FAKE_NVML_PATH;

class DcgmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rs_dcgm_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(dir_);
    // Held for the whole test, so the fake's counters outlive the sources' dlclose.
    fake_ = dlopen(kFakeDcgm, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << dlerror();
    state_ = reinterpret_cast<StateFn*>(dlsym(fake_, "rightsize_fake_dcgm_state"));
    ASSERT_NE(state_, nullptr);
  }
  void TearDown() override {
    ::unsetenv("RIGHTSIZE_FAKE_DCGM");
    ::unsetenv("RIGHTSIZE_FAKE_NVML");
    if (fake_ != nullptr) dlclose(fake_);
    fs::remove_all(dir_);
  }

  void Script(const std::string& text) {
    const fs::path path = dir_ / "dcgm.script";
    std::ofstream(path) << text;
    ::setenv("RIGHTSIZE_FAKE_DCGM", path.c_str(), 1);
  }
  void NvmlScript(const std::string& text) {
    const fs::path path = dir_ / "nvml.script";
    std::ofstream(path) << text;
    ::setenv("RIGHTSIZE_FAKE_NVML", path.c_str(), 1);
  }

  // The source for `text`, which must come up.
  std::unique_ptr<DcgmSource> Open(const std::string& text, DcgmOptions options = {}) {
    Script(text);
    auto source = OpenDcgm(kFakeDcgm, std::move(options));
    EXPECT_TRUE(source->available()) << source->status();
    return source;
  }

  static DcgmSnapshot MustSample(DcgmSource& source) {
    StatusOr<DcgmSnapshot> snap = source.Sample();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return snap.ok() ? std::move(snap).value() : DcgmSnapshot{};
  }

  // What the fake holds now: "init_refs", "connections", "embedded", "groups", "field_groups",
  // "watches", "update_usec", "connect_timeout_ms".
  long long State(const char* what) const { return state_(what); }

  fs::path dir_;
  static inline int counter_ = 0;

 private:
  using StateFn = long long(const char*);
  void* fake_ = nullptr;
  StateFn* state_ = nullptr;
};

// Two GPUs: an H100 at work (NVLink and all) and an idle L4 with no NVLink.
const char* const kTwoGpus =
    "gpu 0 uuid=GPU-aaaa nvml_index=0 gr=0.9 sm=0.62 occupancy=0.31 tensor=0.45 dram=0.27 "
    "pcie_tx=1500000000 pcie_rx=250000000 nvlink_tx=40000000000 nvlink_rx=39000000000\n"
    "# An idle board without NVLink.\n"
    "gpu 1 uuid=GPU-bbbb nvml_index=1 gr=0.1 sm=0.05 occupancy=0.02 tensor=0 dram=0.01 "
    "pcie_tx=1000 pcie_rx=2000\n";

TEST_F(DcgmTest, MissingLibraryIsUnavailableAndSaysWhichLibrary) {
  const std::string missing = (dir_ / "libdcgm.so.4").string();
  auto source = OpenDcgm(missing);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("no DCGM"), std::string::npos) << source->status();
  EXPECT_NE(source->status().find(missing), std::string::npos) << source->status();
  // The agent can keep sampling an unavailable source: it simply has nothing to say.
  StatusOr<DcgmSnapshot> snap = source->Sample();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->devices.empty());
  EXPECT_EQ(source->rejected_values(), 0);
}

TEST_F(DcgmTest, LibraryWithoutDcgmSymbolsIsUnavailable) {
  auto source = OpenDcgm("libc.so.6");
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("not a usable DCGM library"), std::string::npos)
      << source->status();
  EXPECT_NE(source->status().find("dcgmInit"), std::string::npos) << source->status();
}

TEST_F(DcgmTest, InitFailureIsUnavailableWithDcgmsReason) {
  ::unsetenv("RIGHTSIZE_FAKE_DCGM");  // the fake's broken install
  auto source = OpenDcgm(kFakeDcgm);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("dcgmInit: DCGM Initialization Error (DCGM error -7)"),
            std::string::npos)
      << source->status();
  EXPECT_EQ(State("init_refs"), 0);
}

TEST_F(DcgmTest, ReportsEachGpusProfilingFieldsThroughTheHostEngine) {
  auto source = Open(kTwoGpus);
  EXPECT_EQ(source->status(), std::string("DCGM ") + kFakeDcgm +
                                  " via host engine 127.0.0.1, 2 GPUs, profiling on 2");
  EXPECT_EQ(State("connections"), 1);
  EXPECT_EQ(State("embedded"), 0);
  EXPECT_EQ(State("connect_timeout_ms"), 1000);

  DcgmSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.devices.size(), 2u);
  const DcgmDeviceSample& h100 = snap.devices[0];
  EXPECT_EQ(h100.gpu_id, 0u);
  EXPECT_EQ(h100.uuid, "GPU-aaaa");
  EXPECT_EQ(h100.nvml_index, 0);
  EXPECT_EQ(h100.profiling_off, "");
  // DCGM's ratios come out as percent, like NVML's utilisation.
  EXPECT_NEAR(h100.gr_engine_active_pct.value_or(-1), 90, 1e-9);
  EXPECT_NEAR(h100.sm_active_pct.value_or(-1), 62, 1e-9);
  EXPECT_NEAR(h100.sm_occupancy_pct.value_or(-1), 31, 1e-9);
  EXPECT_NEAR(h100.tensor_active_pct.value_or(-1), 45, 1e-9);
  EXPECT_NEAR(h100.dram_active_pct.value_or(-1), 27, 1e-9);
  EXPECT_EQ(h100.pcie_tx_bytes_per_s, 1.5e9);
  EXPECT_EQ(h100.pcie_rx_bytes_per_s, 2.5e8);
  EXPECT_EQ(h100.nvlink_tx_bytes_per_s, 4e10);
  EXPECT_EQ(h100.nvlink_rx_bytes_per_s, 3.9e10);

  const DcgmDeviceSample& l4 = snap.devices[1];
  EXPECT_EQ(l4.uuid, "GPU-bbbb");
  EXPECT_EQ(l4.nvml_index, 1);
  EXPECT_NEAR(l4.sm_active_pct.value_or(-1), 5, 1e-9);
  EXPECT_EQ(l4.tensor_active_pct, 0.0);  // idle: 0, not unknown
  EXPECT_EQ(l4.pcie_rx_bytes_per_s, 2000.0);
  EXPECT_FALSE(l4.nvlink_tx_bytes_per_s.has_value());  // not supported: unknown, not 0 B/s
  EXPECT_FALSE(l4.nvlink_rx_bytes_per_s.has_value());
  EXPECT_EQ(source->rejected_values(), 0);
}

TEST_F(DcgmTest, WithoutAHostEngineRunsAnEmbeddedOne) {
  auto source = Open("hostengine absent\n" + std::string(kTwoGpus));
  EXPECT_NE(source->status().find("embedded"), std::string::npos) << source->status();
  // Why the host engine was not used, for the operator who thought it ran.
  EXPECT_NE(source->status().find("Host engine connection invalid/disconnected (DCGM error -21)"),
            std::string::npos)
      << source->status();
  EXPECT_EQ(State("connections"), 0);
  EXPECT_EQ(State("embedded"), 1);
  EXPECT_NEAR(MustSample(*source).devices.at(0).sm_active_pct.value_or(-1), 62, 1e-9);
}

TEST_F(DcgmTest, NeitherHostEngineNorEmbeddedEngineIsUnavailableAndSaysBoth) {
  Script("hostengine absent\nembedded_error -7\n" + std::string(kTwoGpus));
  auto source = OpenDcgm(kFakeDcgm);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("host engine 127.0.0.1: Host engine connection invalid"),
            std::string::npos)
      << source->status();
  EXPECT_NE(source->status().find("embedded engine: DCGM Initialization Error"), std::string::npos)
      << source->status();
  EXPECT_EQ(State("init_refs"), 0);  // dcgmShutdown balanced the dcgmInit
}

// One GPU that cannot be profiled fails a watch on every group that holds it; the others must
// still be profiled, and that GPU must still be matched to NVML and say why it has nothing.
TEST_F(DcgmTest, AGpuThatCannotBeProfiledKeepsItsFieldsUnknownAndSaysWhy) {
  auto source = Open(
      "gpu 0 uuid=GPU-aaaa nvml_index=0 sm=0.62 tensor=0.45 dram=0.27\n"
      "gpu 1 uuid=GPU-bbbb nvml_index=1 sm=0.5 profiling=na\n");
  EXPECT_NE(source->status().find("2 GPUs, profiling on 1 (GPU 1: Profiling is not supported"),
            std::string::npos)
      << source->status();
  DcgmSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.devices.size(), 2u);
  EXPECT_NEAR(snap.devices[0].sm_active_pct.value_or(-1), 62, 1e-9);
  EXPECT_NEAR(snap.devices[0].dram_active_pct.value_or(-1), 27, 1e-9);
  EXPECT_EQ(snap.devices[0].profiling_off, "");
  const DcgmDeviceSample& off = snap.devices[1];
  EXPECT_EQ(off.uuid, "GPU-bbbb");
  EXPECT_EQ(off.nvml_index, 1);
  EXPECT_FALSE(off.sm_active_pct.has_value());
  EXPECT_FALSE(off.tensor_active_pct.has_value());
  EXPECT_EQ(off.profiling_off,
            "Profiling is not supported for this group of GPUs or GPU. (DCGM error -36)");
  EXPECT_EQ(source->rejected_values(), 0);
  // The group of both, GPU 0's own group; identity on both, profiling on GPU 0: GPU 1's group
  // was given back at once.
  EXPECT_EQ(State("groups"), 2);
  EXPECT_EQ(State("watches"), 2);
}

TEST_F(DcgmTest, ProfilingModuleNotLoadedTurnsTheSourceOff) {
  Script("prof_error -33\n" + std::string(kTwoGpus));
  auto source = OpenDcgm(kFakeDcgm);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("profiling off: This request is serviced by a module of DCGM "
                                  "that is not currently loaded (DCGM error -33)"),
            std::string::npos)
      << source->status();
  // Everything taken on the way was given back.
  EXPECT_EQ(State("watches"), 0);
  EXPECT_EQ(State("groups"), 0);
  EXPECT_EQ(State("field_groups"), 0);
  EXPECT_EQ(State("connections"), 0);
  EXPECT_EQ(State("init_refs"), 0);
}

TEST_F(DcgmTest, ImpossibleValuesAreLeftOutAndCounted) {
  auto source = Open(
      "gpu 0 uuid=GPU-aaaa nvml_index=0 gr=0.9 sm=1.7 occupancy=0.5 tensor=-0.2 dram=nan "
      "pcie_tx=-5 pcie_rx=100000000000000 nvlink_tx=0\n");
  DcgmDeviceSample d = MustSample(*source).devices.at(0);
  EXPECT_FALSE(d.sm_active_pct.has_value());      // 170% of the time
  EXPECT_FALSE(d.tensor_active_pct.has_value());  // negative time
  EXPECT_FALSE(d.dram_active_pct.has_value());    // not a number
  EXPECT_FALSE(d.pcie_tx_bytes_per_s.has_value());
  EXPECT_FALSE(d.pcie_rx_bytes_per_s.has_value());  // 100 TB/s over PCIe
  // The sane readings of the same sample are kept.
  EXPECT_NEAR(d.gr_engine_active_pct.value_or(-1), 90, 1e-9);
  EXPECT_NEAR(d.sm_occupancy_pct.value_or(-1), 50, 1e-9);
  EXPECT_EQ(d.nvlink_tx_bytes_per_s, 0.0);
  EXPECT_EQ(source->rejected_values(), 5);
  MustSample(*source);
  EXPECT_EQ(source->rejected_values(), 10);  // counted at every sample that has them
}

// DCGM's sentinels (no value yet, not supported) and a failed field are unknown, not garbage.
TEST_F(DcgmTest, BlankAndFailedValuesAreUnknownNotRejected) {
  auto source = Open("gpu 0 uuid=GPU-aaaa nvml_index=0 sm=na tensor=err dram=0.3\n");
  DcgmDeviceSample d = MustSample(*source).devices.at(0);
  EXPECT_FALSE(d.sm_active_pct.has_value());
  EXPECT_FALSE(d.tensor_active_pct.has_value());
  EXPECT_FALSE(d.pcie_tx_bytes_per_s.has_value());  // not scripted: not supported
  EXPECT_NEAR(d.dram_active_pct.value_or(-1), 30, 1e-9);
  EXPECT_EQ(source->rejected_values(), 0);
}

TEST_F(DcgmTest, LosingTheHostEngineFailsTheSampleWithDcgmsReason) {
  auto source = Open("lose_hostengine_after 2\n" + std::string(kTwoGpus));
  EXPECT_TRUE(source->Sample().ok());  // one call per GPU
  StatusOr<DcgmSnapshot> snap = source->Sample();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Status::Code::kIoError);
  EXPECT_NE(snap.status().message().find("Host engine connection invalid"), std::string::npos)
      << snap.status().ToString();
}

TEST_F(DcgmTest, WatchesAtTheAgentsInterval) {
  DcgmOptions options;
  options.update_interval_s = 0.5;
  auto source = Open(kTwoGpus, options);
  EXPECT_EQ(State("update_usec"), 500000);
  source.reset();
  // Faster than 10 Hz is not asked of the host engine, which other clients share.
  options.update_interval_s = 0.01;
  source = Open(kTwoGpus, options);
  EXPECT_EQ(State("update_usec"), 100000);
}

// Closing a source gives back all it took from DCGM, newest first, in both watch layouts.
TEST_F(DcgmTest, ClosingTheSourceReleasesEverything) {
  for (const std::string& gpu1 : {std::string("sm=0.5"), std::string("profiling=na")}) {
    SCOPED_TRACE(gpu1);
    auto source = Open("gpu 0 uuid=GPU-aaaa sm=0.1\ngpu 1 uuid=GPU-bbbb " + gpu1 + "\n");
    EXPECT_EQ(State("init_refs"), 1);
    EXPECT_EQ(State("connections"), 1);
    EXPECT_EQ(State("field_groups"), 2);  // identity, profiling
    EXPECT_GE(State("watches"), 2);
    source.reset();
    EXPECT_EQ(State("watches"), 0);
    EXPECT_EQ(State("groups"), 0);
    EXPECT_EQ(State("field_groups"), 0);
    EXPECT_EQ(State("connections"), 0);
    EXPECT_EQ(State("init_refs"), 0);
  }
}

TEST_F(DcgmTest, ABadScriptLineFailsLoudly) {
  Script("gpu 0 uuid=GPU-aaaa sm_active=0.5\n");  // typo: the key is sm
  EXPECT_FALSE(OpenDcgm(kFakeDcgm)->available());
}

TEST_F(DcgmTest, NoDcgmSourceSaysWhy) {
  auto source = NoDcgmSource("no GPU driver");
  EXPECT_FALSE(source->available());
  EXPECT_EQ(source->status(), "no GPU driver");
  StatusOr<DcgmSnapshot> snap = source->Sample();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->devices.empty());
}

// DCGM numbers GPUs its own way: they are matched to NVML's by UUID, and by DCGM's NVML index
// only where a UUID is missing.
TEST(DcgmMatchTest, GpusAreMatchedToNvmlByUuidThenByIndex) {
  std::vector<GpuDeviceSample> nvml(2);
  nvml[0].index = 0;
  nvml[0].uuid = "GPU-aaaa";
  nvml[1].index = 1;
  nvml[1].uuid = "GPU-bbbb";
  DcgmDeviceSample d;
  d.gpu_id = 5;
  d.uuid = "GPU-bbbb";
  d.nvml_index = 0;  // wrong, but the UUID wins
  EXPECT_EQ(NvmlIndexOf(d, nvml), 1);
  d.uuid = "GPU-cccc";  // a GPU NVML does not have: not index 0's, whatever DCGM says
  EXPECT_EQ(NvmlIndexOf(d, nvml), std::nullopt);
  d.uuid = "";
  EXPECT_EQ(NvmlIndexOf(d, nvml), 0);
  d.nvml_index = std::nullopt;
  EXPECT_EQ(NvmlIndexOf(d, nvml), std::nullopt);
}

// --- Through the agent's monitor, with the fake NVML telling which GPU the job is on. ---

// A fixture tree of /proc files.
class Tree {
 public:
  Tree() {
    root_ = fs::temp_directory_path() /
            ("rs_dcgm_tree_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
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
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
  static inline int counter_ = 0;
};

// A /proc/PID/stat line (utime/stime in ticks, rss in pages).
std::string StatLine(int pid, const std::string& comm, int ppid, int64_t utime, int rss) {
  return std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) +
         " 1 1 0 -1 4194560 500 0 2 0 " + std::to_string(utime) + " 0 0 0 20 0 1 0 12345 1000000 " +
         std::to_string(rss) + " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
}

// NVML sees the job's process on GPU 1 (GPU-bbbb); DCGM numbers that GPU 3 and lists it after
// GPU-aaaa, which it numbers 7. The job's metrics must be GPU-bbbb's values, not GPU 7's and not
// a mean of both.
const char* const kNvmlTwoGpus =
    "gpu 0 uuid=GPU-aaaa util=99 total=85899345920 used=1\n"
    "gpu 1 uuid=GPU-bbbb util=40 total=85899345920 used=1\n";
const char* const kDcgmTwoGpusOutOfOrder =
    "gpu 7 uuid=GPU-aaaa nvml_index=0 sm=0.99 occupancy=0.9 tensor=0.95 dram=0.9 "
    "pcie_tx=9000000000 nvlink_tx=100000000000\n"
    "gpu 3 uuid=GPU-bbbb nvml_index=1 sm=0.62 occupancy=0.31 tensor=0.45 dram=0.27 "
    "pcie_tx=1500000000 pcie_rx=250000000\n";

TEST_F(DcgmTest, TheJobsSeriesHoldsItsOwnGpusProfilingFields) {
  Tree t;
  t.Write("200/stat", StatLine(200, "train", 1, 100, 1000));
  ProcFs proc(t.path(), 100, 4096);
  NvmlScript(std::string(kNvmlTwoGpus) + "proc 1 pid=200 used=1073741824\n");
  auto nvml = OpenNvml(kFakeNvml);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  auto dcgm = Open(kDcgmTwoGpusOutOfOrder);

  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  m.set_dcgm(dcgm.get());
  for (int s = 0; s < 3; ++s) m.Sample(s);
  nlohmann::json metrics = m.SummaryJson(true)["metrics"];
  ASSERT_TRUE(metrics.contains("gpu_sm_active_pct")) << metrics.dump();
  EXPECT_NEAR(metrics["gpu_sm_active_pct"]["mean"].get<double>(), 62, 1e-9);
  EXPECT_NEAR(metrics["gpu_sm_active_pct"]["peak"].get<double>(), 62, 1e-9);
  EXPECT_EQ(metrics["gpu_sm_active_pct"]["points"].size(), 3u);  // one a sample
  EXPECT_NEAR(metrics["gpu_sm_occupancy_pct"]["last"].get<double>(), 31, 1e-9);
  EXPECT_NEAR(metrics["gpu_tensor_active_pct"]["last"].get<double>(), 45, 1e-9);
  EXPECT_NEAR(metrics["gpu_dram_active_pct"]["last"].get<double>(), 27, 1e-9);
  EXPECT_EQ(metrics["gpu_pcie_tx_bytes_per_s"]["last"].get<double>(), 1.5e9);
  EXPECT_EQ(metrics["gpu_pcie_rx_bytes_per_s"]["last"].get<double>(), 2.5e8);
  // GPU-bbbb has no NVLink; GPU-aaaa's traffic is not the job's.
  EXPECT_FALSE(metrics.contains("gpu_nvlink_tx_bytes_per_s"));
  // Not scripted for either GPU: no series rather than a series of zeros.
  EXPECT_FALSE(metrics.contains("gpu_gr_engine_active_pct"));
  EXPECT_NEAR(metrics["gpu_util_pct"]["last"].get<double>(), 40, 1e-9);  // NVML's, as before
}

TEST_F(DcgmTest, AJobOnNoGpuGetsNoDcgmMetrics) {
  Tree t;
  t.Write("200/stat", StatLine(200, "cpu_only", 1, 100, 1000));
  ProcFs proc(t.path(), 100, 4096);
  NvmlScript(kNvmlTwoGpus);
  auto nvml = OpenNvml(kFakeNvml);
  auto dcgm = Open(kDcgmTwoGpusOutOfOrder);
  JobMonitor m(&proc, nullptr, nvml.get(), 200, "");
  m.set_dcgm(dcgm.get());
  m.Sample(0);
  m.Sample(1);
  nlohmann::json metrics = m.SummaryJson(false)["metrics"];
  for (const char* name :
       {"gpu_sm_active_pct", "gpu_tensor_active_pct", "gpu_pcie_tx_bytes_per_s"}) {
    EXPECT_FALSE(metrics.contains(name)) << name;
  }
}

TEST_F(DcgmTest, TheAgentExportsAndShipsTheJobsDcgmMetrics) {
  Tree t;
  t.Write("10/stat", StatLine(10, "train", 1, 100, 1000));
  t.Write("10/cgroup", "12:memory:/slurm/uid_1000/job_11/step_0\n");
  ProcFs proc(t.path(), 100, 4096);
  NvmlScript(std::string(kNvmlTwoGpus) + "proc 1 pid=10 used=1073741824\n");
  auto nvml = OpenNvml(kFakeNvml);
  auto dcgm = Open(kDcgmTwoGpusOutOfOrder);
  AgentOptions options;
  options.cluster = "node1";
  options.ship = true;
  Agent agent(&proc, nullptr, nvml.get(), options);
  agent.set_dcgm(dcgm.get());
  agent.Cycle(0, 1000);
  agent.Cycle(1, 1001);

  std::string metrics = agent.Metrics();
  EXPECT_NE(metrics.find("rightsize_job_gpu_sm_active_pct{job_id=\"11\",kind=\"slurm\"} 62"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_job_gpu_tensor_active_pct{job_id=\"11\",kind=\"slurm\"} 45"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_agent_dcgm_available 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("rightsize_agent_dcgm_rejected_values_total 0"), std::string::npos);

  std::vector<JobTelemetry> batch = agent.TakeTelemetry();
  ASSERT_EQ(batch.size(), 1u);
  ASSERT_TRUE(batch[0].samples.count("gpu_dram_active_pct") > 0);
  const auto& dram = batch[0].samples.at("gpu_dram_active_pct");
  ASSERT_EQ(dram.size(), 2u);
  EXPECT_NEAR(dram.back().value, 27, 1e-9);
}

// Two jobs on two GPUs: the agent reads the GPUs once a cycle for both, so each job gets its own
// GPU's figures and the Xid on GPU 1 reaches the job there (read per job, the first job's read
// drained the event set and the Xid was lost).
TEST_F(DcgmTest, EachJobGetsItsOwnGpusFiguresAndXidsFromOneReadingPerCycle) {
  Tree t;
  t.Write("10/stat", StatLine(10, "train", 1, 100, 1000));
  t.Write("10/cgroup", "12:memory:/slurm/uid_1000/job_11/step_0\n");
  t.Write("20/stat", StatLine(20, "train", 1, 100, 1000));
  t.Write("20/cgroup", "12:memory:/slurm/uid_1000/job_12/step_0\n");
  ProcFs proc(t.path(), 100, 4096);
  NvmlScript(std::string(kNvmlTwoGpus) +
             "proc 0 pid=10 used=1073741824\n"
             "proc 1 pid=20 used=2147483648\n"
             "xid 1 79 at_sample=2\n");
  auto nvml = OpenNvml(kFakeNvml);
  ASSERT_TRUE(nvml->available()) << nvml->status();
  auto dcgm = Open(kDcgmTwoGpusOutOfOrder);
  AgentOptions options;
  options.cluster = "node1";
  options.ship = true;
  Agent agent(&proc, nullptr, nvml.get(), options);
  agent.set_dcgm(dcgm.get());
  for (int c = 0; c < 4; ++c) agent.Cycle(c, 1000 + c);

  std::map<std::string, JobTelemetry> jobs;
  for (JobTelemetry& j : agent.TakeTelemetry()) jobs[j.job.job_id] = std::move(j);
  ASSERT_EQ(jobs.size(), 2u);
  auto last = [&](const std::string& id, const std::string& metric) {
    const auto& s = jobs.at(id).samples;
    return s.count(metric) > 0 && !s.at(metric).empty() ? s.at(metric).back().value : -1.0;
  };
  EXPECT_NEAR(last("11", "gpu_util_pct"), 99, 1e-9);
  EXPECT_NEAR(last("12", "gpu_util_pct"), 40, 1e-9);
  EXPECT_NEAR(last("11", "gpu_sm_active_pct"), 99, 1e-9);
  EXPECT_NEAR(last("12", "gpu_sm_active_pct"), 62, 1e-9);
  EXPECT_EQ(last("12", "gpu_memory_bytes"), 2147483648.0);
  EXPECT_EQ(last("12", "gpu_xid"), 79);
  EXPECT_EQ(jobs.at("12").samples.at("gpu_xid").size(), 1u);  // delivered once
  EXPECT_EQ(jobs.at("11").samples.count("gpu_xid"), 0u);      // not on its GPU
}

}  // namespace
}  // namespace rightsize

// The GPU collector against a fake libnvidia-ml.so.1 (test/agent/fake_nvml.c) that answers from a
// script: see that file for the script's format and how it counts samples.
#include "agent/gpu.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace rightsize {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFakeNvml = FAKE_NVML_PATH;

// Each test writes a script to its own directory and points the fake at it.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rs_gpu_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("RIGHTSIZE_FAKE_NVML");
    fs::remove_all(dir_);
  }

  void Script(const std::string& text) {
    const fs::path path = dir_ / "nvml.script";
    std::ofstream(path) << text;
    ::setenv("RIGHTSIZE_FAKE_NVML", path.c_str(), 1);
  }

  // The source for `text`, which must come up.
  std::unique_ptr<GpuSource> Open(const std::string& text) {
    Script(text);
    auto source = OpenNvml(kFakeNvml);
    EXPECT_TRUE(source->available()) << source->status();
    return source;
  }

  static GpuSnapshot MustSample(GpuSource& source) {
    StatusOr<GpuSnapshot> snap = source.Sample();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return snap.ok() ? std::move(snap).value() : GpuSnapshot{};
  }

  fs::path dir_;
  static inline int counter_ = 0;
};

const char* const kTwoGpus =
    "driver 550.54.15\n"
    "gpu 0 uuid=GPU-11111111-2222-3333-4444-555555555555 name=NVIDIA H100 80GB HBM3 "
    "bus=00000000:3B:00.0 util=87 memutil=40 used=41943040000 total=85899345920 power=350000 "
    "sm=1980 mem=2619 temp=66 ecc=0\n"
    "# A board without ECC or power readings.\n"
    "gpu 1 uuid=GPU-66666666-7777-8888-9999-000000000000 name=NVIDIA L4 bus=00000000:5E:00.0 "
    "util=3 memutil=1 used=524288000 total=24152899584 sm=210 mem=405 temp=38\n";

TEST_F(GpuTest, MissingLibraryIsUnavailableAndSaysWhichLibrary) {
  const std::string missing = (dir_ / "libnvidia-ml.so.1").string();
  auto source = OpenNvml(missing);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("no GPU driver"), std::string::npos) << source->status();
  EXPECT_NE(source->status().find(missing), std::string::npos) << source->status();
  // The agent can keep sampling an unavailable source: it simply has nothing to say.
  StatusOr<GpuSnapshot> snap = source->Sample();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->devices.empty());
  EXPECT_TRUE(snap->events.empty());
}

TEST_F(GpuTest, LibraryWithoutNvmlSymbolsIsUnavailable) {
  auto source = OpenNvml("libc.so.6");
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("nvmlInit_v2"), std::string::npos) << source->status();
}

TEST_F(GpuTest, DriverNotLoadedIsUnavailableWithNvmlsReason) {
  ::unsetenv("RIGHTSIZE_FAKE_NVML");  // the fake's "no kernel module"
  auto source = OpenNvml(kFakeNvml);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("Driver Not Loaded"), std::string::npos) << source->status();
}

TEST_F(GpuTest, BrokenDriverIsUnavailableWithNvmlsErrorString) {
  Script("init_error 18\n" + std::string(kTwoGpus));
  auto source = OpenNvml(kFakeNvml);
  EXPECT_FALSE(source->available());
  EXPECT_NE(source->status().find("RM has detected an NVML/RM version mismatch"), std::string::npos)
      << source->status();
  EXPECT_NE(source->status().find("nvmlInit_v2"), std::string::npos) << source->status();
}

TEST_F(GpuTest, ReportsEachGpuAsScripted) {
  auto source = Open(kTwoGpus);
  EXPECT_EQ(source->status(), "NVML 550.54.15, 2 GPUs");

  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.devices.size(), 2u);
  const GpuDeviceSample& h100 = snap.devices[0];
  EXPECT_EQ(h100.index, 0);
  EXPECT_EQ(h100.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(h100.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(h100.util_pct, 87.0);
  EXPECT_EQ(h100.memory_util_pct, 40.0);
  EXPECT_EQ(h100.memory_used_bytes, 41943040000);
  EXPECT_EQ(h100.memory_total_bytes, 85899345920);
  EXPECT_EQ(h100.power_w, 350.0);  // NVML reports milliwatts
  EXPECT_EQ(h100.sm_clock_mhz, 1980);
  EXPECT_EQ(h100.memory_clock_mhz, 2619);
  EXPECT_EQ(h100.temperature_c, 66);
  EXPECT_EQ(h100.ecc_uncorrected_volatile, 0);  // supported and zero, not unknown

  const GpuDeviceSample& l4 = snap.devices[1];
  EXPECT_EQ(l4.index, 1);
  EXPECT_EQ(l4.name, "NVIDIA L4");
  EXPECT_EQ(l4.util_pct, 3.0);
  EXPECT_EQ(l4.sm_clock_mhz, 210);
  EXPECT_FALSE(l4.power_w.has_value());  // not supported: unknown, not 0 W
  EXPECT_FALSE(l4.ecc_uncorrected_volatile.has_value());

  EXPECT_TRUE(snap.processes.empty());
  EXPECT_TRUE(snap.events.empty());
  EXPECT_EQ(source->rejected_values(), 0);
}

// An old driver (no _v3 process query) or a stripped-down library: what it lacks reads as
// unsupported, and the rest still works.
TEST_F(GpuTest, MissingOptionalEntryPointsReadAsUnsupported) {
  Script(std::string(kTwoGpus) + "proc 0 pid=4242 used=1073741824\nxid 0 79 at_sample=1\n");
  auto source = OpenNvml(FAKE_NVML_MINIMAL_PATH);
  ASSERT_TRUE(source->available()) << source->status();
  EXPECT_EQ(source->status(), "NVML 550.54.15, 2 GPUs, no Xid events");
  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.devices.size(), 2u);
  EXPECT_EQ(snap.devices[0].util_pct, 87.0);
  EXPECT_EQ(snap.devices[0].temperature_c, 66);
  EXPECT_FALSE(snap.devices[0].sm_clock_mhz.has_value());
  EXPECT_FALSE(snap.devices[0].ecc_uncorrected_volatile.has_value());
  ASSERT_EQ(snap.processes.size(), 1u);  // through nvmlDeviceGetComputeRunningProcesses_v2
  EXPECT_EQ(snap.processes[0].pid, 4242);
  EXPECT_TRUE(snap.events.empty());
}

TEST_F(GpuTest, ValuesFollowTheGpuOverTime) {
  auto source = Open(
      "gpu 0 uuid=GPU-a util=10 total=1000 used=100\n"
      "gpu 0 uuid=GPU-a util=95 total=1000 used=900 from_sample=3\n");
  EXPECT_EQ(source->status(), "NVML 550.54.15, 1 GPU");
  EXPECT_EQ(MustSample(*source).devices.at(0).util_pct, 10.0);
  EXPECT_EQ(MustSample(*source).devices.at(0).util_pct, 10.0);
  GpuSnapshot third = MustSample(*source);
  EXPECT_EQ(third.devices.at(0).util_pct, 95.0);
  EXPECT_EQ(third.devices.at(0).memory_used_bytes, 900);
}

TEST_F(GpuTest, ProcessAppearsOnTheGpuItRunsOn) {
  auto source = Open(std::string(kTwoGpus) +
                     "proc 1 pid=4242 used=1073741824 from_sample=2\n"
                     "proc 1 pid=4343 used=na from_sample=2 until_sample=3\n");
  EXPECT_TRUE(MustSample(*source).processes.empty());

  GpuSnapshot second = MustSample(*source);
  ASSERT_EQ(second.processes.size(), 2u);
  EXPECT_EQ(second.processes[0].device_index, 1);
  EXPECT_EQ(second.processes[0].pid, 4242);
  EXPECT_EQ(second.processes[0].used_memory_bytes, 1073741824);
  // NVML may not know a process's memory (no permission); that is unknown, not 0 and not junk.
  EXPECT_EQ(second.processes[1].pid, 4343);
  EXPECT_FALSE(second.processes[1].used_memory_bytes.has_value());
  EXPECT_EQ(source->rejected_values(), 0);

  GpuSnapshot third = MustSample(*source);
  ASSERT_EQ(third.processes.size(), 1u);  // 4343 exited
  EXPECT_EQ(third.processes[0].pid, 4242);
}

TEST_F(GpuTest, ReadsEveryProcessWhenTheListGrowsBetweenCalls) {
  // The "how many?" answer says 1, but 20 are running by the time the list is read.
  auto source = Open(
      "gpu 0 uuid=GPU-a total=85899345920 used=1 undercount=1\n"
      "proc 0 pid=1000 used=1048576 repeat=20\n");
  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.processes.size(), 20u);
  EXPECT_EQ(snap.processes.front().pid, 1000);
  EXPECT_EQ(snap.processes.back().pid, 1019);
}

// NVIDIA's 535.43-535.86 drivers wrote 32-byte entries where nvml.h says 24, and a 16-byte
// layout has been seen too: each process must still come out whole, and (under ASan) the wider
// entries must not write past the collector's buffer.
TEST_F(GpuTest, ProcessesComeOutRightWhateverEntryLayoutTheDriverWrites) {
  for (int entry_bytes : {16, 24, 32}) {
    SCOPED_TRACE(entry_bytes);
    auto source = Open("process_entry_bytes " + std::to_string(entry_bytes) +
                       "\n"
                       "gpu 0 uuid=GPU-a total=85899345920 used=1\n"
                       "proc 0 pid=101 used=1073741824\n"
                       "proc 0 pid=202 used=2147483648\n"
                       "proc 0 pid=303 used=na\n"
                       // Enough to fill the buffer, so wider entries would overrun it.
                       "proc 0 pid=1000 used=1048576 repeat=40\n");
    GpuSnapshot snap = MustSample(*source);
    ASSERT_EQ(snap.processes.size(), 43u);
    EXPECT_EQ(snap.processes[0].pid, 101);
    EXPECT_EQ(snap.processes[0].used_memory_bytes, 1073741824);
    EXPECT_EQ(snap.processes[1].pid, 202);
    EXPECT_EQ(snap.processes[1].used_memory_bytes, 2147483648);
    EXPECT_EQ(snap.processes[2].pid, 303);
    EXPECT_FALSE(snap.processes[2].used_memory_bytes.has_value());
    EXPECT_EQ(snap.processes[42].pid, 1039);
    EXPECT_EQ(snap.processes[42].used_memory_bytes, 1048576);
    EXPECT_EQ(source->rejected_values(), 0);
  }
}

TEST_F(GpuTest, AnImplausiblyLongProcessListIsDroppedAndCounted) {
  auto source = Open(
      "gpu 0 uuid=GPU-a total=85899345920 used=1\n"
      "gpu 1 uuid=GPU-b total=85899345920 used=1\n"
      "proc 0 pid=1000 used=1 repeat=5000\n"
      "proc 1 pid=77 used=1\n");
  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.processes.size(), 1u);  // GPU 1's list is still read
  EXPECT_EQ(snap.processes[0].pid, 77);
  EXPECT_EQ(source->rejected_values(), 1);
}

TEST_F(GpuTest, XidEventIsDeliveredOnce) {
  auto source = Open(std::string(kTwoGpus) + "xid 1 79 at_sample=2\n");
  EXPECT_TRUE(MustSample(*source).events.empty());

  GpuSnapshot second = MustSample(*source);
  ASSERT_EQ(second.events.size(), 1u);
  EXPECT_EQ(second.events[0].device_index, 1);
  EXPECT_EQ(second.events[0].xid, 79);
  EXPECT_FALSE(second.events[0].pid.has_value());  // NVML's event record has no PID

  EXPECT_TRUE(MustSample(*source).events.empty());
}

TEST_F(GpuTest, SeveralPendingXidsAllArriveInOneSample) {
  auto source = Open(std::string(kTwoGpus) +
                     "xid 0 13 at_sample=1\n"
                     "xid 0 31 at_sample=1\n"
                     "xid 1 48 at_sample=1\n");
  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.events.size(), 3u);
  EXPECT_EQ(snap.events[0].xid, 13);
  EXPECT_EQ(snap.events[1].xid, 31);
  EXPECT_EQ(snap.events[2].device_index, 1);
  EXPECT_EQ(snap.events[2].xid, 48);
}

TEST_F(GpuTest, GpusWithoutXidEventsStillReportTheRest) {
  auto source = Open(
      "gpu 0 uuid=GPU-a util=50 xid_events=na\n"
      "xid 0 79 at_sample=1\n");
  EXPECT_EQ(source->status(), "NVML 550.54.15, 1 GPU, no Xid events");
  GpuSnapshot snap = MustSample(*source);
  EXPECT_EQ(snap.devices.at(0).util_pct, 50.0);
  EXPECT_TRUE(snap.events.empty());
}

TEST_F(GpuTest, AbsurdValuesAreLeftOutAndCounted) {
  auto source = Open(
      "gpu 0 uuid=GPU-a util=150 memutil=40 used=90000000000 total=85899345920 power=-1 "
      "sm=1980 mem=2619 temp=-5 ecc=0\n");
  GpuSnapshot snap = MustSample(*source);
  const GpuDeviceSample& d = snap.devices.at(0);
  EXPECT_FALSE(d.util_pct.has_value());           // over 100%
  EXPECT_EQ(d.memory_util_pct, 40.0);             // the sane half of the same reading is kept
  EXPECT_FALSE(d.memory_used_bytes.has_value());  // more used than installed
  EXPECT_FALSE(d.memory_total_bytes.has_value());
  EXPECT_FALSE(d.power_w.has_value());        // -1 mW arrives as 4294967295 mW
  EXPECT_FALSE(d.temperature_c.has_value());  // -5 °C arrives as ~4 billion
  EXPECT_EQ(d.sm_clock_mhz, 1980);
  EXPECT_EQ(d.ecc_uncorrected_volatile, 0);
  // util + (used, total) + power + temperature.
  EXPECT_EQ(source->rejected_values(), 5);
}

TEST_F(GpuTest, ProcessUsingMoreMemoryThanTheGpuHasIsRejected) {
  auto source = Open(
      "gpu 0 uuid=GPU-a total=1000 used=500\n"
      "proc 0 pid=7 used=2000\n");
  GpuSnapshot snap = MustSample(*source);
  ASSERT_EQ(snap.processes.size(), 1u);
  EXPECT_FALSE(snap.processes[0].used_memory_bytes.has_value());
  EXPECT_EQ(source->rejected_values(), 1);
}

TEST_F(GpuTest, LosingTheDriverMidRunFailsTheSampleWithNvmlsReason) {
  auto source = Open(std::string(kTwoGpus) + "count_error 15 from_sample=2\n");
  EXPECT_TRUE(source->Sample().ok());
  StatusOr<GpuSnapshot> snap = source->Sample();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Status::Code::kIoError);
  EXPECT_NE(snap.status().message().find("GPU is lost"), std::string::npos)
      << snap.status().ToString();
}

TEST_F(GpuTest, ABadScriptLineFailsLoudly) {
  Script("gpu 0 utilisation=5\n");  // typo: the key is util
  auto source = OpenNvml(kFakeNvml);
  EXPECT_FALSE(source->available());
}

// Closing a source gives back what it took from NVML: its nvmlInit reference and its event set.
TEST_F(GpuTest, ClosingTheSourceShutsNvmlDownAndFreesTheEventSet) {
  // Hold the fake ourselves, so its counters outlive the sources' dlclose.
  std::unique_ptr<void, int (*)(void*)> fake(dlopen(kFakeNvml, RTLD_NOW | RTLD_LOCAL), dlclose);
  ASSERT_NE(fake, nullptr) << dlerror();
  using StateFn = void(int*, int*);
  auto* state = reinterpret_cast<StateFn*>(dlsym(fake.get(), "rightsize_fake_nvml_state"));
  ASSERT_NE(state, nullptr);
  int init_refs = -1;
  int event_sets = -1;

  auto first = Open(kTwoGpus);
  auto second = Open(kTwoGpus);
  state(&init_refs, &event_sets);
  EXPECT_EQ(init_refs, 2);
  EXPECT_EQ(event_sets, 2);

  first.reset();
  state(&init_refs, &event_sets);
  EXPECT_EQ(init_refs, 1);
  EXPECT_EQ(event_sets, 1);
  EXPECT_TRUE(second->Sample().ok());  // the other source is unaffected

  second.reset();
  state(&init_refs, &event_sets);
  EXPECT_EQ(init_refs, 0);
  EXPECT_EQ(event_sets, 0);
}

TEST_F(GpuTest, NoGpuSourceSaysWhy) {
  auto source = NoGpuSource("GPU collection switched off");
  EXPECT_FALSE(source->available());
  EXPECT_EQ(source->status(), "GPU collection switched off");
  StatusOr<GpuSnapshot> snap = source->Sample();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->devices.empty());
}

}  // namespace
}  // namespace rightsize

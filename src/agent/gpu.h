// The node agent's GPU collector: per-device utilisation, memory, power, clocks, temperature and
// ECC counts, the compute processes on each GPU, and Xid error events, read through NVIDIA's
// management library (NVML).
//
// NVML is loaded at run time with dlopen, so rightsize builds and runs on machines without the
// NVIDIA driver: there OpenNvml() returns a source that is not available() and says why in
// status(). Nothing here throws; a missing library, missing symbols or a failed nvmlInit are
// states, not errors. The fake libnvidia-ml.so.1 in test/agent/ goes through the same code.
//
// Ownership: a GpuSource owns the library handle, NVML's initialisation and its event set, and
// releases them (event set, nvmlShutdown, dlclose) when destroyed. Snapshots are plain values.
// Thread-compatible: one owner thread calls Sample(); distinct sources may live on distinct
// threads (NVML itself is thread-safe and reference-counts nvmlInit).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace rightsize {

struct GpuDeviceSample {
  int index = 0;  // NVML's enumeration order (not necessarily CUDA_VISIBLE_DEVICES order)
  std::string uuid, name, pci_bus_id;
  // A field stays nullopt when the device does not support it or reported an impossible value
  // (see GpuSource::rejected_values()).
  std::optional<double> util_pct, memory_util_pct;
  std::optional<int64_t> memory_used_bytes, memory_total_bytes;
  std::optional<double> power_w;
  // nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver last loaded (Volta and
  // later; nullopt on older boards and where the library lacks the call).
  std::optional<uint64_t> energy_mj;
  std::optional<int> sm_clock_mhz, memory_clock_mhz, temperature_c;
  std::optional<int64_t> ecc_uncorrected_volatile;  // since the driver last loaded
};

struct GpuProcessSample {
  int device_index = 0;
  int64_t pid = 0;  // as NVML sees it: the host PID namespace
  std::optional<int64_t> used_memory_bytes;
};

struct GpuEvent {
  int device_index = 0;  // -1 when NVML names a device that was not enumerated
  int64_t xid = 0;
  // NVML's event record carries no PID, so this is nullopt for events read from NVML; it is here
  // for sources that can attribute an Xid to a process (the kernel log line often names it).
  std::optional<int64_t> pid;
};

struct GpuSnapshot {
  std::vector<GpuDeviceSample> devices;
  std::vector<GpuProcessSample> processes;  // compute processes on every device
  std::vector<GpuEvent> events;             // Xid events since the last Sample()
};

// The OS/hardware boundary (STYLE.md rule 3): NVML, or none.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual bool available() const = 0;
  // "NVML 550.54.15, 8 GPUs" or why it is off: "no GPU driver: libnvidia-ml.so.1: cannot open
  // shared object file: No such file or directory".
  virtual const std::string& status() const = 0;
  // Never blocks longer than a few ms (event wait with timeout 0); a field a device does not
  // support stays nullopt. An unavailable source returns an empty snapshot. Fails (IoError) only
  // when NVML cannot enumerate the GPUs at all.
  virtual StatusOr<GpuSnapshot> Sample() = 0;
  // How many values NVML reported that cannot be true (utilisation over 100%, more memory used
  // than installed, a temperature of 4 billion degrees) and were left out, since this source
  // opened. A rising count means a driver or hardware problem worth a look.
  virtual int64_t rejected_values() const = 0;
};

// Loads `library` with dlopen (RTLD_NOW|RTLD_LOCAL) and initialises NVML. A missing library,
// missing symbols or a failed nvmlInit give a source with available() == false and a status()
// that says why: never an error or a crash. The real NVML path and the fake are the same code.
// May take seconds on a node without persistence mode (nvmlInit brings the GPUs up); call it
// once at start-up, not per sample.
std::unique_ptr<GpuSource> OpenNvml(const std::string& library = "libnvidia-ml.so.1");

// A source with no GPUs, for nodes where GPU collection is switched off; status() is `reason`.
std::unique_ptr<GpuSource> NoGpuSource(std::string reason);

}  // namespace rightsize

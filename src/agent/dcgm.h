// The node agent's DCGM collector: the profiling counters NVML does not have (how much of the
// time the GPU's engines and SMs were busy, how full the SMs were, tensor-core and DRAM activity,
// PCIe and NVLink traffic), read per GPU through NVIDIA's Data Center GPU Manager.
//
// libdcgm is loaded at run time with dlopen, like NVML (see gpu.h): without it, or without a
// driver, OpenDcgm() returns a source that is not available() and says why in status(). It
// connects to a running host engine (nv-hostengine on 127.0.0.1, the usual deployment, shared
// with dcgm-exporter) and else starts an engine embedded in this process. A GPU that cannot be
// profiled (DCGM_ST_PROFILING_NOT_SUPPORTED, the profiling module not loaded) keeps its fields
// nullopt and says why in its sample; when no GPU can be profiled the source is not available().
// Nothing here throws. The fake libdcgm.so.4 in test/agent/ goes through the same code.
//
// Ownership: a DcgmSource owns the library handle, DCGM's initialisation, the connection (or the
// embedded engine), its GPU groups, field groups and watches, and releases them newest first
// (unwatch, destroy the groups, disconnect or stop the engine, dcgmShutdown, dlclose) when
// destroyed. DCGM's initialisation is per process, so open one source per process. Snapshots
// are plain values. Thread-compatible: one owner thread calls Sample().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu.h"
#include "core/status.h"

namespace rightsize {

struct DcgmDeviceSample {
  unsigned int gpu_id = 0;  // DCGM's id: not necessarily NVML's index
  // The keys to match this GPU with NVML's GpuDeviceSample (see NvmlIndexOf): its UUID, and the
  // NVML index DCGM reports for it ("" and nullopt while DCGM has not read them).
  std::string uuid;
  std::optional<int> nvml_index;
  // Why this GPU has no profiling fields ("" when it has them), e.g. "Profiling is not
  // supported for this group of GPUs or GPU. (DCGM error -36)".
  std::string profiling_off;
  // Shares of time (DCGM's ratios, as percent like GpuDeviceSample::util_pct), over DCGM's last
  // update interval. nullopt: not supported, no value yet, or impossible (counted as rejected).
  std::optional<double> gr_engine_active_pct;  // DCGM_FI_PROF_GR_ENGINE_ACTIVE
  std::optional<double> sm_active_pct;         // DCGM_FI_PROF_SM_ACTIVE
  std::optional<double> sm_occupancy_pct;      // DCGM_FI_PROF_SM_OCCUPANCY
  std::optional<double> tensor_active_pct;     // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
  std::optional<double> dram_active_pct;       // DCGM_FI_PROF_DRAM_ACTIVE
  // Mean rates over DCGM's last update interval.
  std::optional<double> pcie_tx_bytes_per_s, pcie_rx_bytes_per_s;      // DCGM_FI_PROF_PCIE_*
  std::optional<double> nvlink_tx_bytes_per_s, nvlink_rx_bytes_per_s;  // DCGM_FI_PROF_NVLINK_*
};

struct DcgmSnapshot {
  std::vector<DcgmDeviceSample> devices;  // every GPU DCGM supports, in DCGM's order
};

// The OS/hardware boundary (STYLE.md rule 3): DCGM, or none.
class DcgmSource {
 public:
  virtual ~DcgmSource() = default;
  virtual bool available() const = 0;
  // "DCGM libdcgm.so.4 via host engine 127.0.0.1, 8 GPUs, profiling on 8", or why it is off:
  // "no DCGM: libdcgm.so.4: cannot open shared object file: No such file or directory".
  virtual const std::string& status() const = 0;
  // The latest values DCGM holds (its own update runs at the interval given to OpenDcgm; this
  // only reads them). An unavailable source returns an empty snapshot. Fails (IoError) only when
  // the host engine is gone; a GPU DCGM cannot read keeps its fields nullopt.
  virtual StatusOr<DcgmSnapshot> Sample() = 0;
  // Values DCGM reported that cannot be true (a ratio outside [0, 1], a negative or absurd
  // byte rate) and were left out, since this source opened.
  virtual int64_t rejected_values() const = 0;
};

struct DcgmOptions {
  double update_interval_s = 1;  // how often DCGM updates the fields (the agent's interval)
  std::string host_engine = "127.0.0.1";   // nv-hostengine's address ("HOST" or "HOST:PORT")
  unsigned int connect_timeout_ms = 1000;  // then the embedded engine is tried
};

// Loads `library` (by default libdcgm.so.4, then libdcgm.so.3, then libdcgm.so) with dlopen
// (RTLD_NOW|RTLD_LOCAL), initialises DCGM, connects to the host engine or starts an embedded
// one, and watches the profiling fields on every GPU. A missing library, missing symbols, a
// failed init or connection, or no GPU that can be profiled give a source with available() ==
// false and a status() that says why: never an error or a crash. May take a second or two (the
// connection attempt, the embedded engine's start); call it once at start-up.
std::unique_ptr<DcgmSource> OpenDcgm(const std::string& library = "", DcgmOptions options = {});

// A source without DCGM, for nodes where it is off or pointless (no GPU driver); status() is
// `reason`.
std::unique_ptr<DcgmSource> NoDcgmSource(std::string reason);

// The NVML index (GpuDeviceSample::index) of the GPU `d` describes, matched by UUID, else by
// the NVML index DCGM reports when NVML has that index; nullopt when neither matches.
std::optional<int> NvmlIndexOf(const DcgmDeviceSample& d, const std::vector<GpuDeviceSample>& nvml);

}  // namespace rightsize

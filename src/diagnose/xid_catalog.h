// A compiled-in catalogue of NVIDIA Xid error codes: the numbers the NVIDIA kernel driver logs as
// "NVRM: Xid (PCI:...): <code>, ..." when a GPU, its firmware, its links or the job running on it
// fails. For each code it says what happened, where the usual cause lies, whether the fix is on
// the node or in the job, and what an operator or user should do next.
//
// The meanings are paraphrased from NVIDIA's own Xid documentation: the Xid catalog for Ampere
// and newer GPUs (docs.nvidia.com/deploy/xid-errors, with its resolution buckets and the Xid
// 144-150 NVLink5 decode tables), the older Xid table for Volta and earlier, and the GPU memory
// error management guide for ECC and row remapping. Codes the catalogue marks "Unused" on
// Ampere and newer but that older GPUs still log (56, 57, 58, 61, 122, 123) are kept and say
// so. Codes with no reliable description are left out rather than guessed; FindXid() returns
// nullptr for them.
//
// The data is immutable and lives in static storage, so every function here is thread-safe and
// the returned pointers and views stay valid for the life of the program.
#pragma once

#include <span>
#include <string_view>

namespace rightsize {

// Where the usual cause of an Xid lies. kUnknown is used for codes whose documented causes span
// several of the other classes with none dominant (and for codes the caller could not look up).
enum class XidCause {
  kApplication,   // The job's own code or input (illegal address, bad launch, killed process).
  kDriver,        // The NVIDIA driver or GPU firmware (GSP, PMU, FECS micro-controllers).
  kHardware,      // The GPU board itself (engines, memory interface, initialisation).
  kMemoryEcc,     // GPU memory errors: ECC, page retirement, row remapping.
  kNvlink,        // NVLink / NVSwitch / C2C links between GPUs or to the CPU.
  kBus,           // The host system: PCIe link, slot, riser, platform.
  kThermalPower,  // Cooling or power delivery.
  kUnknown,
};

// "application", "driver", "hardware", "memory_ecc", "nvlink", "bus", "thermal_power",
// "unknown".
std::string_view XidCauseName(XidCause c);

struct XidInfo {
  int code;
  std::string_view name;     // "GPU has fallen off the bus"
  std::string_view meaning;  // one or two sentences
  XidCause cause;
  // True when the fix is on the node (drain/reset/reboot/RMA), false when it is the job's code
  // or input.
  bool node_action;
  std::string_view action;  // what to do
};

// nullptr when the code is not in the catalogue.
const XidInfo* FindXid(int code);

// All entries, sorted by code.
std::span<const XidInfo> AllXids();

}  // namespace rightsize

#include "diagnose/xid_catalog.h"

#include <algorithm>
#include <array>

namespace rightsize {

namespace {

// Shared advice, so the same situation reads the same way wherever it appears.
constexpr std::string_view kResetGpu =
    "drain the node and reset the GPU (nvidia-smi -r); if it repeats, collect "
    "nvidia-bug-report.sh and contact support";

// NVLink5 errors (Xid 144-150) carry a sub-unit name, an IntrInfo word and an error status;
// NVIDIA's decode table turns those into "ignore" or "reset the GPU".
constexpr std::string_view kNvlink5Action =
    "decode the IntrInfo and error-status words in the message with NVIDIA's Xid 144-150 table; "
    "for fatal statuses drain the node and reset the GPU (nvidia-smi -r), for non-fatal ones no "
    "action is needed; contact support if fatal errors repeat";

// Sorted by code: FindXid() binary-searches it, and static_asserts below keep it that way.
constexpr std::array kXids = {
    XidInfo{
        .code = 8,
        .name = "GPU stopped processing",
        .meaning = "A channel's work stopped making progress (FIFO idle timeout) and the driver "
                   "tore it down. NVIDIA lists the driver, the application, the PCIe bus and "
                   "overheating as possible causes.",
        .cause = XidCause::kUnknown,
        .node_action = false,
        .action = "restart the job; if it repeats on the same GPU while the same code runs fine "
                  "elsewhere, drain the node, check GPU temperatures and PCIe errors, and reset "
                  "the GPU (nvidia-smi -r)",
    },
    XidInfo{
        .code = 13,
        .name = "Graphics engine exception",
        .meaning = "A kernel of the job faulted inside the GPU's compute engine: typically an "
                   "out-of-bounds array access, otherwise an illegal instruction or register. "
                   "Rarely a hardware fault or a driver bug shows up the same way.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "a bug in the job's code: rerun with CUDA_LAUNCH_BLOCKING=1 under "
                  "compute-sanitizer (memcheck) or cuda-gdb to find the faulting kernel; if "
                  "known-good code keeps failing on one GPU, run DCGM diagnostics (dcgmi diag "
                  "-r 3) on it",
    },
    XidInfo{
        .code = 31,
        .name = "GPU memory page fault",
        .meaning = "The GPU's memory management unit reported a fault: a unit on the chip "
                   "accessed an address the job does not own. Usually a bug in the job; "
                   "occasionally a driver or hardware fault.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "a bug in the job's code (illegal address): run with CUDA_LAUNCH_BLOCKING=1 / "
                  "compute-sanitizer or cuda-gdb; if faults repeat on the same GPU across "
                  "different jobs, run DCGM diagnostics on that GPU",
    },
    XidInfo{
        .code = 32,
        .name = "Invalid or corrupted push buffer stream",
        .meaning = "The DMA engine that carries the driver's command stream to the GPU over PCIe "
                   "reported a fault. NVIDIA attributes these mainly to PCIe signal-quality "
                   "problems, not to the application.",
        .cause = XidCause::kBus,
        .node_action = true,
        .action = "restart the job; if it repeats, drain the node and check the PCIe link (AER "
                  "errors in dmesg, link width and generation in nvidia-smi -q), then reseat the "
                  "GPU or riser",
    },
    XidInfo{
        .code = 38,
        .name = "Driver firmware error",
        .meaning = "The firmware of the GPU's context-switch micro-controller (FECS) hit a "
                   "watchdog timeout.",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = "restart the job; if it repeats, reset the GPU or reboot the node and update "
                  "the driver; report persistent cases to NVIDIA with nvidia-bug-report.sh",
    },
    XidInfo{
        .code = 43,
        .name = "GPU stopped processing",
        .meaning = "The job hit a software-induced fault on the GPU and its GPU context was "
                   "terminated (reset channel verification error). The GPU itself stays healthy.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "look at the job's own error output and any Xid 13/31 logged just before; "
                  "the GPU needs no action",
    },
    XidInfo{
        .code = 45,
        .name = "Preemptive cleanup, due to previous errors",
        .meaning = "The driver tore down the job's GPU channels because the process was "
                   "aborted (Ctrl-C, kill, time limit, GPU reset) or because of an earlier error "
                   "such as an ECC error. It is a consequence, not a cause.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "act on the other Xids logged around it, if any; if it appears alone on an "
                  "NVSwitch system, check that nvidia-fabricmanager is running and restart it",
    },
    XidInfo{
        .code = 46,
        .name = "GPU stopped processing",
        .meaning = "The GPU stopped responding to the driver (GPU timeout error).",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 48,
        .name = "Double-bit ECC error",
        .meaning = "The GPU detected an uncorrectable (double-bit) ECC error in its memory or "
                   "on-chip SRAM; the running application is told and usually dies. The error "
                   "persists until the GPU is reset or the node rebooted.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r) or reboot; if Xid 63/64 "
                  "follow, row remapping is handling it; otherwise check nvidia-smi -q -d ECC, "
                  "run field diagnostics and RMA the GPU if errors continue",
    },
    XidInfo{
        .code = 54,
        .name = "Auxiliary power is not connected to the GPU board",
        .meaning = "The GPU is running without its auxiliary power connection and has cut its "
                   "clocks.",
        .cause = XidCause::kThermalPower,
        .node_action = true,
        .action = "drain the node and check that the GPU is seated and its auxiliary power "
                  "cables are connected",
    },
    XidInfo{
        .code = 56,
        .name = "Display engine error",
        .meaning = "The GPU's display engine reported an exception. Documented for Volta and "
                   "older GPUs; NVIDIA lists it as unused on Ampere and newer. Causes listed: "
                   "hardware or driver.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = "reset the GPU or reboot the node; if it repeats, contact support and consider "
                  "an RMA",
    },
    XidInfo{
        .code = 57,
        .name = "Error programming video memory interface",
        .meaning = "The driver failed to set up (link-train) the interface to the GPU's memory. "
                   "Documented for Volta and older GPUs; unused on Ampere and newer. Causes "
                   "listed: hardware, driver, framebuffer corruption.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = "drain the node and reset the GPU or reboot; if it repeats, RMA the GPU",
    },
    XidInfo{
        .code = 58,
        .name = "Unstable video memory interface detected",
        .meaning = "The interface to the GPU's memory is unstable, or an EDC (memory bus error "
                   "detection) error occurred; the log line says which. Documented for Volta and "
                   "older GPUs; unused on Ampere and newer.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = "drain the node and reset the GPU or reboot; if it repeats, RMA the GPU",
    },
    XidInfo{
        .code = 61,
        .name = "Internal micro-controller breakpoint/warning",
        .meaning = "The GPU's power-management micro-controller (PMU) hit a firmware breakpoint "
                   "or warning. Documented for Volta and older GPUs; unused on Ampere and newer.",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 62,
        .name = "Internal micro-controller halt",
        .meaning = "The GPU's power-management micro-controller (PMU) halted. NVIDIA lists the "
                   "driver/firmware, the hardware and overheating as possible causes.",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r); if it repeats, check GPU "
                  "temperatures, update the driver and contact support",
    },
    XidInfo{
        .code = 63,
        .name = "GPU memory remapping event",
        .meaning = "The GPU handled a memory ECC error by recording a row remap (Ampere and "
                   "newer) or a page retirement (older GPUs) in its InfoROM. The repair takes "
                   "effect at the next GPU reset (driver reload on older GPUs).",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "check row-remapping status with nvidia-smi -q -d ROW_REMAPPER; reset the GPU "
                  "to apply pending remaps (drain first, at a convenient time); a rising count "
                  "is a warning sign for Xid 64",
    },
    XidInfo{
        .code = 64,
        .name = "GPU memory remapping failure",
        .meaning = "The GPU failed to record a row remap or page retirement after a memory ECC "
                   "error, for example because it has no spare rows left.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "drain the node and reset the GPU; check nvidia-smi -q -d ROW_REMAPPER for a "
                  "remapping failure; if one is recorded or the error repeats, RMA the GPU",
    },
    XidInfo{
        .code = 68,
        .name = "NVDEC0 exception",
        .meaning = "The GPU's first video decoder engine (NVDEC) reported an error. NVIDIA lists "
                   "hardware or driver as causes.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = "restart the job; if video-decoder errors repeat on the same GPU, drain the "
                  "node and contact support",
    },
    XidInfo{
        .code = 69,
        .name = "Graphics engine class error",
        .meaning = "The GPU's compute/graphics engine rejected a command it was given. NVIDIA's "
                   "catalogue points first at the application or CUDA stack sending bad data or "
                   "methods; a driver bug is the alternative.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "restart the job and check the application's CUDA stack (runtime and library "
                  "versions against the driver); if known-good code keeps failing, report to "
                  "NVIDIA",
    },
    XidInfo{
        .code = 74,
        .name = "NVLink error",
        .meaning = "The GPU detected a problem on an NVLink connection to another GPU or an "
                   "NVSwitch. The fault may be the link itself or the device at its far end; the "
                   "error persists until the GPU is reset or the node rebooted.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "drain the node and reset the GPU or reboot; inspect the links with nvidia-smi "
                  "nvlink -s / -e and decode the error registers with NVIDIA's Xid catalogue; if "
                  "it returns after a reset, reseat or contact the hardware vendor",
    },
    XidInfo{
        .code = 79,
        .name = "GPU has fallen off the bus",
        .meaning = "The driver tried to reach the GPU over PCIe and it was not there, usually "
                   "because the PCIe link went down; failing GPU hardware or power and, less "
                   "often, a driver problem can also cause it.",
        .cause = XidCause::kBus,
        .node_action = true,
        .action = "drain the node and reboot it (a GPU reset rarely recovers this); check the "
                  "kernel PCIe/AER messages and the BMC event log; if it repeats, reseat the GPU "
                  "and riser, check power, and RMA",
    },
    XidInfo{
        .code = 92,
        .name = "High single-bit ECC error rate",
        .meaning = "The GPU is correcting single-bit memory errors at an unusually high rate. "
                   "The errors were corrected, so running work is not affected.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "no immediate action; watch the ECC counters (nvidia-smi -q -d ECC) and row "
                  "remapping; if the rate stays high, run field diagnostics and contact support",
    },
    XidInfo{
        .code = 94,
        .name = "Contained ECC error",
        .meaning = "An uncorrectable memory error was contained to one application (A100 and "
                   "newer): that application must be restarted, other work on the GPU is "
                   "unaffected.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "resubmit the job; drain and reset the GPU when convenient to apply the row "
                  "remap (check nvidia-smi -q -d ROW_REMAPPER)",
    },
    XidInfo{
        .code = 95,
        .name = "Uncontained ECC error",
        .meaning = "An uncorrectable memory error could not be contained to one application "
                   "(A100 and newer): every application on the GPU is affected, and the GPU must "
                   "be reset before anything runs on it again.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r) before rerunning; on an A100 "
                  "without MIG reboot the node; if it repeats, RMA the GPU",
    },
    XidInfo{
        .code = 109,
        .name = "Context switch timeout error",
        .meaning = "The GPU failed to switch between contexts in time. NVIDIA lists every cause "
                   "class as possible: application, driver, hardware, memory, bus and thermal.",
        .cause = XidCause::kUnknown,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 119,
        .name = "GSP RPC timeout",
        .meaning = "The driver timed out waiting for the GPU System Processor (GSP), the "
                   "firmware core on the GPU, to answer a request.",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r); if it persists, power-cycle "
                  "the node; if it returns after a power cycle, update driver and firmware and "
                  "follow NVIDIA's GPU debug guidelines (nvidia-bug-report.sh)",
    },
    XidInfo{
        .code = 120,
        .name = "GSP error",
        .meaning = "Code running on the GPU System Processor (GSP), the firmware core on the "
                   "GPU, hit an error.",
        .cause = XidCause::kDriver,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r); if it persists, power-cycle "
                  "the node; if it returns after a power cycle, update driver and firmware and "
                  "follow NVIDIA's GPU debug guidelines (nvidia-bug-report.sh)",
    },
    XidInfo{
        .code = 121,
        .name = "C2C link corrected error",
        .meaning = "The driver saw corrected errors on the chip-to-chip (C2C) NVLink between the "
                   "GPU and its Grace CPU (GB200). They were corrected and have no operational "
                   "impact.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "no immediate action; reset the GPU in a maintenance window to retrain the "
                  "link; if it keeps repeating, check the VBIOS version and contact support",
    },
    XidInfo{
        .code = 122,
        .name = "SPI PMU RPC read failure",
        .meaning = "An SPI read request handled through the GPU's power-management "
                   "micro-controller (PMU) failed (SPI_PMU_RPC_READ_FAIL). NVIDIA lists hardware "
                   "or driver as causes and marks the code unused on Ampere and newer.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 123,
        .name = "SPI PMU RPC write failure",
        .meaning = "An SPI write request handled through the GPU's power-management "
                   "micro-controller (PMU) failed (SPI_PMU_RPC_WRITE_FAIL). NVIDIA lists hardware "
                   "or driver as causes and marks the code unused on Ampere and newer.",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 137,
        .name = "NVLink privilege error",
        .meaning = "The remote memory management unit reported a fault: an illegal peer-to-peer "
                   "access over NVLink. Usually a bug in the job; occasionally a driver or "
                   "hardware fault.",
        .cause = XidCause::kApplication,
        .node_action = false,
        .action = "a bug in the job's code (illegal peer-to-peer access): run with "
                  "CUDA_LAUNCH_BLOCKING=1 / compute-sanitizer or cuda-gdb; report to NVIDIA if "
                  "that is inconclusive",
    },
    XidInfo{
        .code = 140,
        .name = "Unrecovered ECC error",
        .meaning = "Uncorrectable GPU memory errors occurred in a way that kept the driver from "
                   "marking the bad pages for offlining or row remapping.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r); if it happens again, "
                  "contact the hardware vendor and RMA the GPU",
    },
    XidInfo{
        .code = 143,
        .name = "GPU initialization error",
        .meaning = "The driver could not bring the GPU up, for example because its boot "
                   "firmware did not report completion (Hopper and newer).",
        .cause = XidCause::kHardware,
        .node_action = true,
        .action = "drain the node, reset the GPU or reboot, and confirm it appears in "
                  "nvidia-smi; if initialisation keeps failing, contact support and RMA",
    },
    XidInfo{
        .code = 144,
        .name = "NVLink SAW error",
        .meaning = "The SAW unit of a Blackwell GPU's NVLink5 logic reported an error. Some error "
                   "statuses are fatal to the GPU and lead to ECC errors (Xid 48) and crashed "
                   "jobs; others are harmless.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = kNvlink5Action,
    },
    XidInfo{
        .code = 145,
        .name = "NVLink RLW error",
        .meaning = "The RLW unit of a Blackwell GPU's NVLink5 logic reported an error. Depending "
                   "on the sub-unit and status it is harmless, kills the affected job, or is "
                   "fatal to the GPU.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "decode the IntrInfo and error-status words with NVIDIA's Xid 144-150 table; "
                  "follow the Xid 154 logged with it if there is one (otherwise restart the "
                  "job); for fatal statuses drain the node and reset the GPU (nvidia-smi -r)",
    },
    XidInfo{
        .code = 146,
        .name = "NVLink TLW error",
        .meaning = "The TLW unit (control, receive or transmit path) of a Blackwell GPU's "
                   "NVLink5 logic reported an error; one error status is fatal, the others are "
                   "not.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = kNvlink5Action,
    },
    XidInfo{
        .code = 147,
        .name = "NVLink TREX error",
        .meaning = "The TREX unit of a Blackwell GPU's NVLink5 logic reported a non-fatal error; "
                   "NVIDIA does not expect it in production.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "no action needed; contact support if it repeats",
    },
    XidInfo{
        .code = 148,
        .name = "NVLink NVLPW_CTRL error",
        .meaning = "The NVLPW control unit of a Blackwell GPU's NVLink5 logic reported a "
                   "non-fatal, software-side error.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "no action needed; contact support if it repeats",
    },
    XidInfo{
        .code = 149,
        .name = "NVLink NETIR error",
        .meaning = "A Blackwell NVLink5 link event: most often a link going down (because of "
                   "the link itself, cables, the peer device, or an intentional software "
                   "action), or a bit-error-rate warning. Link-down events put the GPU into a "
                   "drain-and-reset state.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r) for link-down and fatal "
                  "events; decode the reason with NVIDIA's Xid 144-150 table and check the "
                  "cables, transceivers and the peer GPU or switch; bit-error-rate events need "
                  "no reset",
    },
    XidInfo{
        .code = 150,
        .name = "NVLink MSE error",
        .meaning = "The NVLink5 MSE firmware of a Blackwell GPU reported a degraded state or a "
                   "watchdog timeout; NVIDIA classes both as fatal to the GPU.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = kResetGpu,
    },
    XidInfo{
        .code = 154,
        .name = "GPU recovery action changed",
        .meaning = "The driver states the recovery another Xid needs: None, Drain P2P, Drain and "
                   "Reset, GPU Reset Required or Node Reboot Required. It always accompanies "
                   "another Xid, which holds the cause.",
        .cause = XidCause::kUnknown,
        .node_action = true,
        .action = "do what the message says (drain, reset the GPU with nvidia-smi -r, or reboot "
                  "the node) and look up the Xid logged with it for the cause",
    },
    XidInfo{
        .code = 155,
        .name = "NVLink software-defined error",
        .meaning = "An NVLink5 link was taken down on purpose (flagged as intentional, including "
                   "transitions to sleep) on a Blackwell GPU.",
        .cause = XidCause::kNvlink,
        .node_action = true,
        .action = "drain the node and reset the GPU (nvidia-smi -r); if nobody meant to take "
                  "the link down, find out what software or operator did",
    },
    XidInfo{
        .code = 163,
        .name = "Power smoothing circuitry disengaged",
        .meaning = "The GPU's power-smoothing hardware switched itself off, because of thermal "
                   "events or a timeout; the GPU keeps working but its power draw may swing.",
        .cause = XidCause::kThermalPower,
        .node_action = true,
        .action = "no GPU reset required; fix the thermal events if power smoothing is wanted; "
                  "if it was disabled by a timeout, reload the driver or reset the GPU",
    },
    XidInfo{
        .code = 164,
        .name = "Power smoothing circuitry low lifetime",
        .meaning = "The GPU's power-smoothing hardware is close to the end of its lifetime and "
                   "will soon be disabled.",
        .cause = XidCause::kThermalPower,
        .node_action = true,
        .action = "monitor power swings; plan to replace the GPU if power smoothing is needed",
    },
    XidInfo{
        .code = 165,
        .name = "Power smoothing circuitry lifetime exhausted",
        .meaning = "The GPU's power-smoothing hardware has worn out; the driver disables it and "
                   "the GPU's power draw will swing.",
        .cause = XidCause::kThermalPower,
        .node_action = true,
        .action = "check that the data-centre power can absorb the swings; replace the GPU if "
                  "they are not acceptable",
    },
    XidInfo{
        .code = 171,
        .name = "Uncorrectable DRAM error",
        .meaning = "Logged with Xid 48 to say the uncorrectable ECC error was in the GPU's DRAM "
                   "(its main memory).",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "handle as Xid 48: drain the node and reset the GPU; follow the Xid 63/64 "
                  "row-remapping guidance (nvidia-smi -q -d ROW_REMAPPER)",
    },
    XidInfo{
        .code = 172,
        .name = "Uncorrectable SRAM error",
        .meaning = "Logged with Xid 48 to say the uncorrectable ECC error was in on-chip SRAM "
                   "rather than DRAM.",
        .cause = XidCause::kMemoryEcc,
        .node_action = true,
        .action = "handle as Xid 48: drain the node and reset the GPU; if nvidia-smi reports the "
                  "SRAM error threshold exceeded, run field diagnostics and RMA",
    },
};

constexpr bool ByCode(const XidInfo& a, const XidInfo& b) { return a.code < b.code; }

static_assert(std::is_sorted(kXids.begin(), kXids.end(), ByCode), "kXids must be sorted");
static_assert(std::adjacent_find(kXids.begin(), kXids.end(),
                                 [](const XidInfo& a, const XidInfo& b) {
                                   return a.code == b.code;
                                 }) == kXids.end(),
              "kXids must not repeat a code");

}  // namespace

std::string_view XidCauseName(XidCause c) {
  switch (c) {
    case XidCause::kApplication:
      return "application";
    case XidCause::kDriver:
      return "driver";
    case XidCause::kHardware:
      return "hardware";
    case XidCause::kMemoryEcc:
      return "memory_ecc";
    case XidCause::kNvlink:
      return "nvlink";
    case XidCause::kBus:
      return "bus";
    case XidCause::kThermalPower:
      return "thermal_power";
    case XidCause::kUnknown:
      return "unknown";
  }
  return "unknown";
}

const XidInfo* FindXid(int code) {
  auto it = std::lower_bound(kXids.begin(), kXids.end(), code,
                             [](const XidInfo& info, int wanted) { return info.code < wanted; });
  if (it == kXids.end() || it->code != code) return nullptr;
  return &*it;
}

std::span<const XidInfo> AllXids() { return kXids; }

}  // namespace rightsize

#include "agent/gpu.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "agent/dlsym.h"

namespace rightsize {
namespace {

// ---------------------------------------------------------------------------------------------
// NVML's C ABI, declared here because nvml.h is not installed where rightsize builds. Layouts,
// constants and signatures match nvml.h of NVML API version 12 (CUDA 12.2, driver R535), and
// NVIDIA's current online reference shows the same layouts, except where drivers broke them (see
// ProcessEntryStride). Type names are nvml.h's own so each can be checked against the header.
// ---------------------------------------------------------------------------------------------

using nvmlReturn_t = int;  // an enum in nvml.h: int-sized in the C ABI
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;

constexpr unsigned int kNvmlClockSm = 1;                     // NVML_CLOCK_SM
constexpr unsigned int kNvmlClockMem = 2;                    // NVML_CLOCK_MEM
constexpr unsigned int kNvmlTemperatureGpu = 0;              // NVML_TEMPERATURE_GPU
constexpr unsigned int kNvmlMemoryErrorTypeUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr unsigned int kNvmlVolatileEcc = 0;                 // NVML_VOLATILE_ECC
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;
// NVML_VALUE_NOT_AVAILABLE (-1) as it lands in an unsigned long long field.
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

// Buffer sizes from nvml.h: NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
constexpr unsigned int kNameBufferSize = 96;
constexpr unsigned int kUuidBufferSize = 96;
constexpr unsigned int kDriverVersionBufferSize = 80;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};
struct nvmlUtilization_t {
  unsigned int gpu;  // percent
  unsigned int memory;
};
struct nvmlMemory_t {  // v1: what nvmlDeviceGetMemoryInfo fills
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlProcessInfo_t (= nvmlProcessInfo_v2_t), filled by nvmlDeviceGetComputeRunningProcesses_v3
// and _v2; only its field offsets are relied on (see ProcessEntryStride).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // 0xFFFFFFFF without MIG
  unsigned int computeInstanceId;  // 0xFFFFFFFF without MIG
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// A wrong layout would read garbage rather than fail, so pin the sizes the LP64 ABI gives them.
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlProcessInfo_t) == 24 && offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8);
static_assert(sizeof(nvmlEventData_t) == 32 && offsetof(nvmlEventData_t, eventData) == 16);

// The entry points used, resolved with dlsym. The first four are required; any other may be
// missing from an old or stripped-down library and then reads as "not supported".
struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;  // nvmlInit_v2
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;                 // _v2
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;  // _v2

  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  // _v3
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power_mw)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*energy_mj)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*clock_mhz)(nvmlDevice_t, unsigned int, unsigned int*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned int, unsigned int*) = nullptr;
  nvmlReturn_t (*ecc_total)(nvmlDevice_t, unsigned int, unsigned int,
                            unsigned long long*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;  // _v3/_v2
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;  // _v2
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
};

using dl::Bind;
using dl::BindRequired;
std::string DlError() { return dl::Error(); }

// Fills `api`; returns "" or, when a required symbol is missing, the loader's complaint about
// the first one missing.
std::string BindApi(void* lib, NvmlApi* api) {
  std::string error;
  if (!BindRequired(lib, "nvmlInit_v2", api->init, &error) ||
      !BindRequired(lib, "nvmlShutdown", api->shutdown, &error) ||
      !BindRequired(lib, "nvmlDeviceGetCount_v2", api->get_count, &error) ||
      !BindRequired(lib, "nvmlDeviceGetHandleByIndex_v2", api->get_handle, &error)) {
    return error;
  }
  Bind(lib, "nvmlErrorString", api->error_string);
  Bind(lib, "nvmlSystemGetDriverVersion", api->driver_version);
  Bind(lib, "nvmlDeviceGetName", api->name);
  Bind(lib, "nvmlDeviceGetUUID", api->uuid);
  Bind(lib, "nvmlDeviceGetPciInfo_v3", api->pci_info);
  Bind(lib, "nvmlDeviceGetUtilizationRates", api->utilization);
  Bind(lib, "nvmlDeviceGetMemoryInfo", api->memory);
  Bind(lib, "nvmlDeviceGetPowerUsage", api->power_mw);
  Bind(lib, "nvmlDeviceGetTotalEnergyConsumption", api->energy_mj);
  Bind(lib, "nvmlDeviceGetClockInfo", api->clock_mhz);
  Bind(lib, "nvmlDeviceGetTemperature", api->temperature);
  Bind(lib, "nvmlDeviceGetTotalEccErrors", api->ecc_total);
  Bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api->processes);
  // _v3 arrived with driver R510 and is missing from 535.98; _v2 (R450 on) takes the same
  // entries. Drivers before R450 have neither and report no processes.
  if (api->processes == nullptr) {
    Bind(lib, "nvmlDeviceGetComputeRunningProcesses_v2", api->processes);
  }
  Bind(lib, "nvmlEventSetCreate", api->event_set_create);
  Bind(lib, "nvmlDeviceRegisterEvents", api->register_events);
  Bind(lib, "nvmlEventSetWait_v2", api->event_set_wait);
  Bind(lib, "nvmlEventSetFree", api->event_set_free);
  dlerror();  // a missing optional symbol is not an error worth keeping
  return "";
}

// "Driver Not Loaded (NVML error 9)": NVML's words for people, the number for searching.
std::string ErrorText(const NvmlApi& api, nvmlReturn_t rc) {
  const char* text = api.error_string != nullptr ? api.error_string(rc) : nullptr;
  return fmt::format("{} (NVML error {})", text != nullptr ? text : "unknown error", rc);
}

// The dlopen handle and, once nvmlInit_v2 succeeded, the obligation to call nvmlShutdown.
class NvmlLibrary {
 public:
  using ShutdownFn = nvmlReturn_t();

  NvmlLibrary() = default;
  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  NvmlLibrary(NvmlLibrary&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)),
        shutdown_(std::exchange(other.shutdown_, nullptr)) {}
  NvmlLibrary& operator=(NvmlLibrary&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, nullptr);
      shutdown_ = std::exchange(other.shutdown_, nullptr);
    }
    return *this;
  }
  ~NvmlLibrary() noexcept { Reset(); }

  void* get() const { return handle_; }
  // nvmlInit_v2 succeeded: balance it with `shutdown` (nvmlShutdown) before dlclose.
  void SetInitialised(ShutdownFn* shutdown) { shutdown_ = shutdown; }

 private:
  void Reset() noexcept {
    // NVML reference-counts initialisation, so this releases only our share; its result is
    // ignored because there is nothing useful to do about a failed shutdown.
    if (shutdown_ != nullptr) shutdown_();
    shutdown_ = nullptr;
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }

  void* handle_ = nullptr;
  ShutdownFn* shutdown_ = nullptr;
};

// An NVML event set (nvmlEventSetCreate / nvmlEventSetFree). Must be freed before nvmlShutdown,
// which member order in NvmlGpuSource ensures.
class EventSet {
 public:
  using FreeFn = nvmlReturn_t(nvmlEventSet_t);

  EventSet() = default;
  EventSet(nvmlEventSet_t set, FreeFn* free) : set_(set), free_(free) {}
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  EventSet(EventSet&& other) noexcept
      : set_(std::exchange(other.set_, nullptr)), free_(std::exchange(other.free_, nullptr)) {}
  EventSet& operator=(EventSet&& other) noexcept {
    if (this != &other) {
      Reset();
      set_ = std::exchange(other.set_, nullptr);
      free_ = std::exchange(other.free_, nullptr);
    }
    return *this;
  }
  ~EventSet() noexcept { Reset(); }

  nvmlEventSet_t get() const { return set_; }

 private:
  void Reset() noexcept {
    if (set_ != nullptr && free_ != nullptr) free_(set_);
    set_ = nullptr;
    free_ = nullptr;
  }

  nvmlEventSet_t set_ = nullptr;
  FreeFn* free_ = nullptr;
};

// Bounds past which a reading is not a measurement but a driver or hardware fault.
constexpr unsigned int kMaxDevices = 1024;        // NVML supports a few dozen per node
constexpr unsigned int kMaxPowerMw = 10'000'000;  // 10 kW: several times any GPU's draw
constexpr unsigned int kMaxClockMhz = 100'000;    // GDDR memory clocks read 10-15 GHz
constexpr unsigned int kMaxTemperatureC = 200;    // GPUs shut down near 100 °C
constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
// The per-device process list: read at most this many entries, with a little room for
// processes that start between the size query and the read.
constexpr size_t kMaxProcessesPerDevice = 4096;
constexpr unsigned int kProcessHeadroom = 8;
constexpr size_t kMaxProcessEntryBytes = 32;  // see ProcessEntryStride
constexpr unsigned char kUnwritten = 0xA5;    // a fill no PID or instance ID is made of
// Events drained per Sample(): a storm of Xids is reported over several samples, not in one
// unbounded burst.
constexpr int kMaxEventsPerSample = 256;

// A field of an entry NVML wrote into a byte buffer; memcpy, since the buffer holds no objects.
template <typename T>
T Load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// How far apart NVML put the process entries in `buf` (n of them), or 0 if no known layout reads
// as real processes. nvml.h says 24 bytes (nvmlProcessInfo_v2_t), but drivers 535.43 to 535.86
// wrote 32-byte entries through the same _v3 symbol (a usedGpuCcProtectedMemory field added
// without a version bump, then taken out again), and a 16-byte v1 layout has been reported from
// a _v3 call too. pid and usedGpuMemory sit at the same offsets in all three, so only the stride
// is in doubt; the right one is the first under which every entry has a real PID (Linux caps
// them at 2^22) and, where the layout has them, MIG instance IDs that are "none" or small. The
// buffer is pre-filled with kUnwritten, so reading past what NVML wrote fails these checks.
size_t ProcessEntryStride(const std::vector<unsigned char>& buf, size_t n) {
  constexpr unsigned int kMaxPid = 1U << 22;
  constexpr unsigned int kMaxInstanceId = 1024;
  auto plausible_id = [](unsigned int id) { return id == 0xFFFFFFFFU || id < kMaxInstanceId; };
  for (size_t stride : {size_t{24}, size_t{32}, size_t{16}}) {
    bool ok = true;
    for (size_t i = 0; ok && i < n; ++i) {
      const unsigned char* e = buf.data() + i * stride;
      const auto pid = Load<unsigned int>(e + offsetof(nvmlProcessInfo_t, pid));
      ok = pid != 0 && pid <= kMaxPid;
      if (ok && stride >= 24) {
        ok = plausible_id(Load<unsigned int>(e + offsetof(nvmlProcessInfo_t, gpuInstanceId))) &&
             plausible_id(Load<unsigned int>(e + offsetof(nvmlProcessInfo_t, computeInstanceId)));
      }
    }
    if (ok) return stride;
  }
  return 0;
}

class NoGpu final : public GpuSource {
 public:
  explicit NoGpu(std::string reason) : status_(std::move(reason)) {}
  bool available() const override { return false; }
  const std::string& status() const override { return status_; }
  StatusOr<GpuSnapshot> Sample() override { return GpuSnapshot{}; }
  int64_t rejected_values() const override { return 0; }

 private:
  std::string status_;
};

class NvmlGpuSource final : public GpuSource {
 public:
  NvmlGpuSource(NvmlLibrary lib, const NvmlApi& api) : lib_(std::move(lib)), api_(api) {}

  // Enumerates the GPUs, registers for Xid events and writes status(); never fails, since a
  // GPU count that cannot be read now is retried by every Sample().
  void Start();

  bool available() const override { return true; }
  const std::string& status() const override { return status_; }
  StatusOr<GpuSnapshot> Sample() override;
  int64_t rejected_values() const override { return rejected_; }

 private:
  struct Device {
    nvmlDevice_t handle = nullptr;  // null when NVML could not give one (GPU lost)
    std::string uuid, name, pci_bus_id;
  };

  void Enumerate(unsigned int count);
  void ReadIdentity(unsigned int index, Device* d);
  void SetUpEvents();
  GpuDeviceSample ReadDevice(int index, const Device& d);
  void ReadProcesses(int index, const Device& d, std::optional<int64_t> total_bytes,
                     std::vector<GpuProcessSample>* out);
  void DrainEvents(std::vector<GpuEvent>* out);

  // `value` if it is at most `max`; otherwise nullopt, counted as rejected.
  std::optional<int64_t> Plausible(uint64_t value, uint64_t max) {
    if (value > max) {
      ++rejected_;
      return std::nullopt;
    }
    return static_cast<int64_t>(value);
  }

  // Members are destroyed in reverse order, so the event set is freed before lib_ calls
  // nvmlShutdown and dlclose.
  NvmlLibrary lib_;
  NvmlApi api_;
  EventSet events_;
  std::vector<Device> devices_;
  int registered_for_events_ = 0;
  std::string driver_version_;
  std::string status_;
  int64_t rejected_ = 0;
};

void NvmlGpuSource::Start() {
  if (api_.driver_version != nullptr) {
    char buf[kDriverVersionBufferSize] = {};
    if (api_.driver_version(buf, sizeof buf) == kNvmlSuccess) {
      driver_version_.assign(buf, strnlen(buf, sizeof buf));
    }
  }
  const std::string driver = driver_version_.empty() ? "(driver version unknown)" : driver_version_;
  unsigned int count = 0;
  nvmlReturn_t rc = api_.get_count(&count);
  if (rc != kNvmlSuccess) {
    status_ = fmt::format("NVML {}, GPU count unknown: {}", driver, ErrorText(api_, rc));
    return;
  }
  if (count > kMaxDevices) {
    ++rejected_;
    status_ = fmt::format("NVML {}, implausible GPU count {}", driver, count);
    return;
  }
  Enumerate(count);
  status_ = fmt::format("NVML {}, {} GPU{}", driver, count, count == 1 ? "" : "s");
  if (count > 0 && registered_for_events_ == 0) status_ += ", no Xid events";
}

void NvmlGpuSource::Enumerate(unsigned int count) {
  devices_.assign(count, Device{});
  for (unsigned int i = 0; i < count; ++i) ReadIdentity(i, &devices_[i]);
  SetUpEvents();
}

void NvmlGpuSource::ReadIdentity(unsigned int index, Device* d) {
  if (api_.get_handle(index, &d->handle) != kNvmlSuccess) {
    d->handle = nullptr;
    return;
  }
  // Bounded copies: a buffer NVML failed to terminate must not run into the stack.
  if (api_.uuid != nullptr) {
    char buf[kUuidBufferSize] = {};
    if (api_.uuid(d->handle, buf, sizeof buf) == kNvmlSuccess) {
      d->uuid.assign(buf, strnlen(buf, sizeof buf));
    }
  }
  if (api_.name != nullptr) {
    char buf[kNameBufferSize] = {};
    if (api_.name(d->handle, buf, sizeof buf) == kNvmlSuccess) {
      d->name.assign(buf, strnlen(buf, sizeof buf));
    }
  }
  if (api_.pci_info != nullptr) {
    nvmlPciInfo_t pci{};
    if (api_.pci_info(d->handle, &pci) == kNvmlSuccess) {
      d->pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
    }
  }
}

void NvmlGpuSource::SetUpEvents() {
  events_ = EventSet();
  registered_for_events_ = 0;
  if (api_.event_set_create == nullptr || api_.register_events == nullptr ||
      api_.event_set_wait == nullptr || api_.event_set_free == nullptr) {
    return;
  }
  nvmlEventSet_t set = nullptr;
  if (api_.event_set_create(&set) != kNvmlSuccess || set == nullptr) return;
  events_ = EventSet(set, api_.event_set_free);
  for (const Device& d : devices_) {
    // Consumer boards and some virtual GPUs answer NOT_SUPPORTED; they simply report no Xids.
    if (d.handle != nullptr &&
        api_.register_events(d.handle, kNvmlEventTypeXidCriticalError, set) == kNvmlSuccess) {
      ++registered_for_events_;
    }
  }
  if (registered_for_events_ == 0) events_ = EventSet();
}

StatusOr<GpuSnapshot> NvmlGpuSource::Sample() {
  unsigned int count = 0;
  nvmlReturn_t rc = api_.get_count(&count);
  if (rc != kNvmlSuccess) {
    return Status::IoError(fmt::format("NVML: cannot count GPUs: {}", ErrorText(api_, rc)));
  }
  if (count > kMaxDevices) {
    ++rejected_;
    return Status::IoError(fmt::format("NVML: implausible GPU count {}", count));
  }
  // NVML fixes its device list at nvmlInit, so this only fires when the count was unreadable at
  // start; re-enumerating is cheap and keeps handles and indexes consistent.
  if (count != devices_.size()) Enumerate(count);

  GpuSnapshot snap;
  snap.devices.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    Device& d = devices_[i];
    // A GPU that had no handle (lost, or being reset) may be back.
    if (d.handle == nullptr) {
      ReadIdentity(static_cast<unsigned int>(i), &d);
      if (d.handle != nullptr && events_.get() != nullptr &&
          api_.register_events(d.handle, kNvmlEventTypeXidCriticalError, events_.get()) ==
              kNvmlSuccess) {
        ++registered_for_events_;
      }
    }
    snap.devices.push_back(ReadDevice(static_cast<int>(i), d));
    ReadProcesses(static_cast<int>(i), d, snap.devices.back().memory_total_bytes, &snap.processes);
  }
  DrainEvents(&snap.events);
  return snap;
}

GpuDeviceSample NvmlGpuSource::ReadDevice(int index, const Device& d) {
  GpuDeviceSample s;
  s.index = index;
  s.uuid = d.uuid;
  s.name = d.name;
  s.pci_bus_id = d.pci_bus_id;
  if (d.handle == nullptr) return s;
  nvmlDevice_t h = d.handle;

  if (nvmlUtilization_t u{};
      api_.utilization != nullptr && api_.utilization(h, &u) == kNvmlSuccess) {
    if (auto v = Plausible(u.gpu, 100)) s.util_pct = static_cast<double>(*v);
    if (auto v = Plausible(u.memory, 100)) s.memory_util_pct = static_cast<double>(*v);
  }
  if (nvmlMemory_t m{}; api_.memory != nullptr && api_.memory(h, &m) == kNvmlSuccess) {
    // Which of the two is wrong cannot be told, so an impossible pair drops both.
    if (m.total == 0 || m.total > kMaxInt64 || m.used > m.total) {
      rejected_ += 2;
    } else {
      s.memory_used_bytes = static_cast<int64_t>(m.used);
      s.memory_total_bytes = static_cast<int64_t>(m.total);
    }
  }
  if (unsigned int mw = 0; api_.power_mw != nullptr && api_.power_mw(h, &mw) == kNvmlSuccess) {
    if (auto v = Plausible(mw, kMaxPowerMw)) s.power_w = static_cast<double>(*v) / 1000.0;
  }
  // NOT_SUPPORTED before Volta: the job's energy is then power x time (JobMonitor).
  if (unsigned long long mj = 0;
      api_.energy_mj != nullptr && api_.energy_mj(h, &mj) == kNvmlSuccess) {
    if (auto v = Plausible(mj, kMaxInt64)) s.energy_mj = static_cast<uint64_t>(*v);
  }
  if (api_.clock_mhz != nullptr) {
    if (unsigned int mhz = 0; api_.clock_mhz(h, kNvmlClockSm, &mhz) == kNvmlSuccess) {
      if (auto v = Plausible(mhz, kMaxClockMhz)) s.sm_clock_mhz = static_cast<int>(*v);
    }
    if (unsigned int mhz = 0; api_.clock_mhz(h, kNvmlClockMem, &mhz) == kNvmlSuccess) {
      if (auto v = Plausible(mhz, kMaxClockMhz)) s.memory_clock_mhz = static_cast<int>(*v);
    }
  }
  if (unsigned int c = 0;
      api_.temperature != nullptr && api_.temperature(h, kNvmlTemperatureGpu, &c) == kNvmlSuccess) {
    if (auto v = Plausible(c, kMaxTemperatureC)) s.temperature_c = static_cast<int>(*v);
  }
  // NOT_SUPPORTED on boards without ECC or with it switched off: stays nullopt, which is
  // different from a count of 0.
  if (unsigned long long n = 0;
      api_.ecc_total != nullptr &&
      api_.ecc_total(h, kNvmlMemoryErrorTypeUncorrected, kNvmlVolatileEcc, &n) == kNvmlSuccess) {
    s.ecc_uncorrected_volatile = Plausible(n, kMaxInt64);
  }
  return s;
}

void NvmlGpuSource::ReadProcesses(int index, const Device& d, std::optional<int64_t> total_bytes,
                                  std::vector<GpuProcessSample>* out) {
  if (api_.processes == nullptr || d.handle == nullptr) return;
  // NVML's protocol: a count of 0 asks how many; SUCCESS then means none are running.
  unsigned int needed = 0;
  nvmlReturn_t rc = api_.processes(d.handle, &needed, nullptr);
  std::vector<unsigned char> buf;
  size_t capacity = 0;
  while (rc == kNvmlErrorInsufficientSize) {
    // The list can grow between calls; each retry at least doubles, up to the bound.
    if (capacity == kMaxProcessesPerDevice) {
      ++rejected_;  // more processes than any GPU can host: not a list worth trusting
      return;
    }
    capacity = std::min(kMaxProcessesPerDevice,
                        std::max<size_t>(size_t{needed} + kProcessHeadroom, capacity * 2));
    // Room for the widest entry any driver has written (see ProcessEntryStride), so a driver
    // whose entries are wider than nvml.h says cannot write past the buffer.
    buf.assign(capacity * kMaxProcessEntryBytes, kUnwritten);
    needed = static_cast<unsigned int>(capacity);
    rc = api_.processes(d.handle, &needed, reinterpret_cast<nvmlProcessInfo_t*>(buf.data()));
  }
  if (rc != kNvmlSuccess) return;
  const size_t n = std::min<size_t>(needed, capacity);
  const size_t stride = ProcessEntryStride(buf, n);
  if (stride == 0) {
    ++rejected_;  // no layout reads as processes: the whole list is untrustworthy
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* entry = buf.data() + i * stride;
    GpuProcessSample s;
    s.device_index = index;
    s.pid = Load<unsigned int>(entry + offsetof(nvmlProcessInfo_t, pid));
    const auto used = Load<unsigned long long>(entry + offsetof(nvmlProcessInfo_t, usedGpuMemory));
    // Not available: no permission to see other users' usage, or Windows WDDM. Not an error.
    if (used != kNvmlValueNotAvailable) {
      s.used_memory_bytes = Plausible(used, total_bytes ? *total_bytes : kMaxInt64);
    }
    out->push_back(s);
  }
}

void NvmlGpuSource::DrainEvents(std::vector<GpuEvent>* out) {
  if (events_.get() == nullptr) return;
  for (int n = 0; n < kMaxEventsPerSample; ++n) {
    nvmlEventData_t data{};
    // Timeout 0: return at once. TIMEOUT means none pending; after any other failure the next
    // Sample() tries again, and events still queued in the set arrive then.
    if (api_.event_set_wait(events_.get(), &data, 0) != kNvmlSuccess) return;
    if ((data.eventType & kNvmlEventTypeXidCriticalError) == 0) continue;
    GpuEvent e;
    e.device_index = -1;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i].handle == data.device) e.device_index = static_cast<int>(i);
    }
    std::optional<int64_t> xid = Plausible(data.eventData, kMaxInt64);
    if (!xid) continue;
    e.xid = *xid;
    out->push_back(e);
  }
}

}  // namespace

std::unique_ptr<GpuSource> NoGpuSource(std::string reason) {
  return std::make_unique<NoGpu>(std::move(reason));
}

std::unique_ptr<GpuSource> OpenNvml(const std::string& library) {
  dlerror();
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace, where they could satisfy some
  // other library's references by accident.
  NvmlLibrary lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (lib.get() == nullptr) return NoGpuSource(fmt::format("no GPU driver: {}", DlError()));
  NvmlApi api;
  if (std::string missing = BindApi(lib.get(), &api); !missing.empty()) {
    return NoGpuSource(fmt::format("not a usable NVML library: {}", missing));
  }
  // The message is formatted while `lib` is loaded: nvmlErrorString's text lives inside it.
  if (nvmlReturn_t rc = api.init(); rc != kNvmlSuccess) {
    return NoGpuSource(fmt::format("GPU driver not usable: nvmlInit_v2: {}", ErrorText(api, rc)));
  }
  lib.SetInitialised(api.shutdown);
  auto source = std::make_unique<NvmlGpuSource>(std::move(lib), api);
  source->Start();
  return source;
}

}  // namespace rightsize

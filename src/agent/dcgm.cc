#include "agent/dcgm.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "agent/dlsym.h"

namespace rightsize {
namespace {

// ---------------------------------------------------------------------------------------------
// DCGM's C ABI, declared here because DCGM's headers are not installed where rightsize builds
// (Debian packages none). Layouts, constants and signatures match dcgm_structs.h, dcgm_fields.h
// and dcgm_agent.h of DCGM 3.x and 4.x (NVIDIA/DCGM on GitHub, dcgmlib/); type names are DCGM's
// own so each can be checked against the headers.
// ---------------------------------------------------------------------------------------------

using dcgmReturn_t = int;  // an enum in dcgm_structs.h: int-sized in the C ABI
using dcgmHandle_t = uintptr_t;
using dcgmGpuGrp_t = uintptr_t;
using dcgmFieldGrp_t = uintptr_t;

constexpr dcgmReturn_t kDcgmOk = 0;                    // DCGM_ST_OK
constexpr dcgmReturn_t kDcgmNoData = -14;              // DCGM_ST_NO_DATA
constexpr dcgmReturn_t kDcgmConnectionNotValid = -21;  // DCGM_ST_CONNECTION_NOT_VALID
constexpr int kDcgmGroupEmpty = 1;                     // DCGM_GROUP_EMPTY (dcgmGroupType_t)
constexpr int kDcgmOperationModeAuto = 1;      // DCGM_OPERATION_MODE_AUTO: DCGM updates by itself
constexpr unsigned short kDcgmFtDouble = 'd';  // DCGM_FT_DOUBLE
constexpr unsigned short kDcgmFtInt64 = 'i';   // DCGM_FT_INT64
constexpr unsigned short kDcgmFtString = 's';  // DCGM_FT_STRING
// DCGM's "no value" sentinels (not found, not supported, no permission, ...) sit at and just
// above these bases (DCGM_INT64_BLANK, DCGM_FP64_BLANK = 2^47, DCGM_STR_BLANK "<<<...>>>").
constexpr int64_t kDcgmInt64Blank = 0x7ffffffffffffff0;
constexpr double kDcgmFp64Blank = 140737488355328.0;
constexpr size_t kDcgmMaxStrLength = 256;    // DCGM_MAX_STR_LENGTH
constexpr size_t kDcgmMaxBlobLength = 4096;  // DCGM_MAX_BLOB_LENGTH

// Field ids, dcgm_fields.h.
constexpr unsigned short kFieldNvmlIndex = 52;         // DCGM_FI_DEV_NVML_INDEX (int64)
constexpr unsigned short kFieldUuid = 54;              // DCGM_FI_DEV_UUID (string)
constexpr unsigned short kFieldGrEngineActive = 1001;  // DCGM_FI_PROF_GR_ENGINE_ACTIVE (ratio)
constexpr unsigned short kFieldSmActive = 1002;        // DCGM_FI_PROF_SM_ACTIVE
constexpr unsigned short kFieldSmOccupancy = 1003;     // DCGM_FI_PROF_SM_OCCUPANCY
constexpr unsigned short kFieldTensorActive = 1004;    // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
constexpr unsigned short kFieldDramActive = 1005;      // DCGM_FI_PROF_DRAM_ACTIVE
constexpr unsigned short kFieldPcieTx = 1009;          // DCGM_FI_PROF_PCIE_TX_BYTES (bytes/s)
constexpr unsigned short kFieldPcieRx = 1010;          // DCGM_FI_PROF_PCIE_RX_BYTES
constexpr unsigned short kFieldNvlinkTx = 1011;        // DCGM_FI_PROF_NVLINK_TX_BYTES
constexpr unsigned short kFieldNvlinkRx = 1012;        // DCGM_FI_PROF_NVLINK_RX_BYTES

// The identity fields first: a GPU that cannot be profiled is asked for these alone.
constexpr std::array<unsigned short, 2> kIdentityFields = {kFieldUuid, kFieldNvmlIndex};
constexpr std::array<unsigned short, 9> kProfilingFields = {
    kFieldGrEngineActive, kFieldSmActive, kFieldSmOccupancy, kFieldTensorActive, kFieldDramActive,
    kFieldPcieTx,         kFieldPcieRx,   kFieldNvlinkTx,    kFieldNvlinkRx};
constexpr size_t kAllFieldCount = kIdentityFields.size() + kProfilingFields.size();

struct dcgmFieldValue_v1 {
  unsigned int version;  // dcgmFieldValue_version1
  unsigned short fieldId;
  unsigned short fieldType;  // DCGM_FT_*
  int status;                // a dcgmReturn_t for this one value
  int64_t ts;                // microseconds since 1970
  union {
    int64_t i64;
    double dbl;
    char str[kDcgmMaxStrLength];
    char blob[kDcgmMaxBlobLength];
  } value;
};
struct dcgmConnectV2Params_v2 {
  unsigned int version;                 // dcgmConnectV2Params_version2
  unsigned int persistAfterDisconnect;  // 0: our watches end with our connection
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;
};

// A wrong layout would read garbage rather than fail, so pin what the LP64 ABI gives them.
static_assert(sizeof(dcgmFieldValue_v1) == 4120 && offsetof(dcgmFieldValue_v1, ts) == 16 &&
              offsetof(dcgmFieldValue_v1, value) == 24);
static_assert(sizeof(dcgmConnectV2Params_v2) == 16);

// MAKE_DCGM_VERSION: the struct's size in the low 24 bits, its version above.
constexpr unsigned int DcgmVersion(size_t size, unsigned int version) {
  return static_cast<unsigned int>(size | (size_t{version} << 24U));
}
constexpr unsigned int kFieldValueVersion1 = DcgmVersion(sizeof(dcgmFieldValue_v1), 1);
constexpr unsigned int kConnectV2ParamsVersion2 = DcgmVersion(sizeof(dcgmConnectV2Params_v2), 2);

// The entry points used, resolved with dlsym. The connection pairs are each optional as long as
// one of them is there; errorString and dcgmUpdateAllFields are only nice to have.
struct DcgmApi {
  dcgmReturn_t (*init)() = nullptr;
  dcgmReturn_t (*shutdown)() = nullptr;
  dcgmReturn_t (*supported_devices)(dcgmHandle_t, unsigned int*, int*) = nullptr;
  dcgmReturn_t (*group_create)(dcgmHandle_t, int, const char*, dcgmGpuGrp_t*) = nullptr;
  dcgmReturn_t (*group_add_device)(dcgmHandle_t, dcgmGpuGrp_t, unsigned int) = nullptr;
  dcgmReturn_t (*group_destroy)(dcgmHandle_t, dcgmGpuGrp_t) = nullptr;
  dcgmReturn_t (*field_group_create)(dcgmHandle_t, int, unsigned short*, const char*,
                                     dcgmFieldGrp_t*) = nullptr;
  dcgmReturn_t (*field_group_destroy)(dcgmHandle_t, dcgmFieldGrp_t) = nullptr;
  dcgmReturn_t (*watch_fields)(dcgmHandle_t, dcgmGpuGrp_t, dcgmFieldGrp_t, long long, double,
                               int) = nullptr;
  dcgmReturn_t (*unwatch_fields)(dcgmHandle_t, dcgmGpuGrp_t, dcgmFieldGrp_t) = nullptr;
  dcgmReturn_t (*latest_values)(dcgmHandle_t, int, unsigned short*, unsigned int,
                                dcgmFieldValue_v1*) = nullptr;

  dcgmReturn_t (*connect_v2)(const char*, dcgmConnectV2Params_v2*, dcgmHandle_t*) = nullptr;
  dcgmReturn_t (*connect)(const char*, dcgmHandle_t*) = nullptr;
  dcgmReturn_t (*disconnect)(dcgmHandle_t) = nullptr;
  dcgmReturn_t (*start_embedded)(int, dcgmHandle_t*) = nullptr;  // dcgmOperationMode_t
  dcgmReturn_t (*stop_embedded)(dcgmHandle_t) = nullptr;
  dcgmReturn_t (*update_all_fields)(dcgmHandle_t, int) = nullptr;
  const char* (*error_string)(dcgmReturn_t) = nullptr;  // "errorString"
};

using dl::Bind;
using dl::BindRequired;
std::string DlError() { return dl::Error(); }

// Fills `api`; returns "" or what is missing.
std::string BindApi(void* lib, DcgmApi* api) {
  std::string error;
  if (!BindRequired(lib, "dcgmInit", api->init, &error) ||
      !BindRequired(lib, "dcgmShutdown", api->shutdown, &error) ||
      !BindRequired(lib, "dcgmGetAllSupportedDevices", api->supported_devices, &error) ||
      !BindRequired(lib, "dcgmGroupCreate", api->group_create, &error) ||
      !BindRequired(lib, "dcgmGroupAddDevice", api->group_add_device, &error) ||
      !BindRequired(lib, "dcgmGroupDestroy", api->group_destroy, &error) ||
      !BindRequired(lib, "dcgmFieldGroupCreate", api->field_group_create, &error) ||
      !BindRequired(lib, "dcgmFieldGroupDestroy", api->field_group_destroy, &error) ||
      !BindRequired(lib, "dcgmWatchFields", api->watch_fields, &error) ||
      !BindRequired(lib, "dcgmUnwatchFields", api->unwatch_fields, &error) ||
      !BindRequired(lib, "dcgmGetLatestValuesForFields", api->latest_values, &error)) {
    return error;
  }
  Bind(lib, "dcgmConnect_v2", api->connect_v2);
  Bind(lib, "dcgmConnect", api->connect);
  Bind(lib, "dcgmDisconnect", api->disconnect);
  Bind(lib, "dcgmStartEmbedded", api->start_embedded);
  Bind(lib, "dcgmStopEmbedded", api->stop_embedded);
  Bind(lib, "dcgmUpdateAllFields", api->update_all_fields);
  Bind(lib, "errorString", api->error_string);
  dlerror();  // a missing optional symbol is not an error worth keeping
  const bool can_connect =
      (api->connect_v2 != nullptr || api->connect != nullptr) && api->disconnect != nullptr;
  const bool can_embed = api->start_embedded != nullptr && api->stop_embedded != nullptr;
  if (!can_connect && !can_embed) {
    return "neither dcgmConnect_v2/dcgmDisconnect nor dcgmStartEmbedded/dcgmStopEmbedded";
  }
  return "";
}

// The dlopen handle. Copy deleted, move leaves the source empty.
class DlLibrary {
 public:
  DlLibrary() = default;
  explicit DlLibrary(void* handle) : handle_(handle) {}
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;
  DlLibrary(DlLibrary&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  DlLibrary& operator=(DlLibrary&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~DlLibrary() noexcept { Reset(); }

  void* get() const { return handle_; }

 private:
  void Reset() noexcept {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }
  void* handle_ = nullptr;
};

// What a source took from DCGM (initialisation, the connection, groups, field groups, watches),
// each pushed as soon as it is taken and released newest first when the source goes: watches
// before the groups they name, groups before the connection, the connection before
// dcgmShutdown. A release is a plain function pointer and its arguments, so releasing cannot
// throw; its result is ignored, since nothing useful can be done about a failed release.
class Releases {
 public:
  using Fn = void (*)(const DcgmApi& api, uintptr_t handle, uintptr_t a, uintptr_t b);

  explicit Releases(const DcgmApi* api) : api_(api) {}
  Releases(const Releases&) = delete;
  Releases& operator=(const Releases&) = delete;
  ~Releases() noexcept {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      it->fn(*api_, it->handle, it->a, it->b);
    }
  }

  void Push(Fn fn, uintptr_t handle = 0, uintptr_t a = 0, uintptr_t b = 0) {
    steps_.push_back(Step{fn, handle, a, b});
  }

 private:
  struct Step {
    Fn fn;
    uintptr_t handle, a, b;
  };
  const DcgmApi* api_;
  std::vector<Step> steps_;
};

// Bounds past which a reading is not a measurement.
constexpr int kMaxDevices = 1024;  // DCGM handles 32 per node (DCGM_MAX_NUM_DEVICES)
// 10 TB/s: several times any link (NVLink 5 moves 1.8 TB/s per GPU, PCIe 6 x16 about 0.25).
constexpr double kMaxLinkBytesPerS = 1e13;
// DCGM's update interval: faster than 10 Hz buys nothing for a per-job view and costs the
// host engine (and every other client of it) profiling passes.
constexpr double kMinUpdateIntervalS = 0.1;
constexpr double kMaxUpdateIntervalS = 3600;

// Group and field-group names must be unique in the host engine, which other clients share.
std::string UniqueName(const char* what) {
  static std::atomic<int> counter{0};
  return fmt::format("rightsize_{}_{}_{}", ::getpid(), ++counter, what);
}

class NoDcgm final : public DcgmSource {
 public:
  explicit NoDcgm(std::string reason) : status_(std::move(reason)) {}
  bool available() const override { return false; }
  const std::string& status() const override { return status_; }
  StatusOr<DcgmSnapshot> Sample() override { return DcgmSnapshot{}; }
  int64_t rejected_values() const override { return 0; }

 private:
  std::string status_;
};

class DcgmProfilingSource final : public DcgmSource {
 public:
  DcgmProfilingSource() = default;
  // Releases_ keeps a pointer to api_: the object stays where it was made.
  DcgmProfilingSource(const DcgmProfilingSource&) = delete;
  DcgmProfilingSource& operator=(const DcgmProfilingSource&) = delete;

  // Everything OpenDcgm does: "" when the source works, else why it does not (what was taken
  // so far is released when the object goes).
  std::string Open(const std::string& library, const DcgmOptions& options);

  bool available() const override { return true; }
  const std::string& status() const override { return status_; }
  StatusOr<DcgmSnapshot> Sample() override;
  int64_t rejected_values() const override { return rejected_; }

 private:
  struct Device {
    unsigned int gpu_id = 0;
    bool profiled = false;
    std::string profiling_off;
    std::string uuid;  // kept once read: identity does not change while the engine runs
    std::optional<int> nvml_index;
  };

  std::string Load(const std::string& library);
  std::string Connect(const DcgmOptions& options);
  std::string Watch(const DcgmOptions& options);
  // Watches the profiling fields on GPUs one by one, after a watch on all of them failed (one
  // GPU that cannot be profiled fails a whole group).
  void WatchEach(dcgmFieldGrp_t fields, long long update_us, double keep_age_s, int keep_samples);
  void Read(const dcgmFieldValue_v1* values, const unsigned short* fields, size_t n, Device* d,
            DcgmDeviceSample* s);

  // "Host engine connection invalid/disconnected (DCGM error -21)".
  std::string ErrorText(dcgmReturn_t rc) const {
    const char* text = api_.error_string != nullptr ? api_.error_string(rc) : nullptr;
    return fmt::format("{} (DCGM error {})", text != nullptr ? text : "unknown error", rc);
  }

  // A ratio as percent: nullopt outside [0, 1] (NaN included), counted as rejected.
  std::optional<double> RatioPct(std::optional<double> v) {
    if (!v) return std::nullopt;
    if (!(*v >= 0 && *v <= 1)) {
      ++rejected_;
      return std::nullopt;
    }
    return *v * 100;
  }
  std::optional<double> Rate(std::optional<double> v) {
    if (!v) return std::nullopt;
    if (!(*v >= 0 && *v <= kMaxLinkBytesPerS)) {
      ++rejected_;
      return std::nullopt;
    }
    return v;
  }

  // Destroyed in reverse order: the releases run while the library is still loaded.
  DlLibrary lib_;
  DcgmApi api_;
  Releases releases_{&api_};
  dcgmHandle_t handle_ = 0;
  std::string library_, mode_;
  std::vector<Device> devices_;
  std::vector<dcgmFieldValue_v1> values_;  // DCGM's answer for one GPU, reused (4 KiB each)
  std::string status_;
  int64_t rejected_ = 0;
};

std::string DcgmProfilingSource::Open(const std::string& library, const DcgmOptions& options) {
  if (std::string why = Load(library); !why.empty()) return why;
  if (dcgmReturn_t rc = api_.init(); rc != kDcgmOk) {
    return fmt::format("DCGM not usable: dcgmInit: {}", ErrorText(rc));
  }
  releases_.Push([](const DcgmApi& api, uintptr_t, uintptr_t, uintptr_t) { api.shutdown(); });
  if (std::string why = Connect(options); !why.empty()) return why;
  return Watch(options);
}

std::string DcgmProfilingSource::Load(const std::string& library) {
  const std::vector<std::string> candidates =
      library.empty() ? std::vector<std::string>{"libdcgm.so.4", "libdcgm.so.3", "libdcgm.so"}
                      : std::vector<std::string>{library};
  std::string first_error;
  for (const std::string& candidate : candidates) {
    dlerror();
    // RTLD_LOCAL: DCGM's symbols stay out of the global namespace.
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      lib_ = DlLibrary(handle);
      library_ = candidate;
      break;
    }
    if (first_error.empty()) first_error = DlError();
  }
  if (lib_.get() == nullptr) {
    if (candidates.size() == 1) return "no DCGM: " + first_error;
    return fmt::format("no DCGM: {} (also tried {}, {})", first_error, candidates[1],
                       candidates[2]);
  }
  if (std::string missing = BindApi(lib_.get(), &api_); !missing.empty()) {
    return fmt::format("not a usable DCGM library: {}: {}", library_, missing);
  }
  return "";
}

std::string DcgmProfilingSource::Connect(const DcgmOptions& options) {
  std::string engine_error = "this libdcgm cannot connect to a host engine";
  if ((api_.connect_v2 != nullptr || api_.connect != nullptr) && api_.disconnect != nullptr) {
    dcgmHandle_t handle = 0;
    dcgmReturn_t rc = kDcgmOk;
    if (api_.connect_v2 != nullptr) {
      dcgmConnectV2Params_v2 params{};
      params.version = kConnectV2ParamsVersion2;
      params.timeoutMs = options.connect_timeout_ms;
      rc = api_.connect_v2(options.host_engine.c_str(), &params, &handle);
    } else {
      rc = api_.connect(options.host_engine.c_str(), &handle);
    }
    if (rc == kDcgmOk) {
      handle_ = handle;
      releases_.Push(
          [](const DcgmApi& api, uintptr_t h, uintptr_t, uintptr_t) { api.disconnect(h); }, handle);
      mode_ = "via host engine " + options.host_engine;
      return "";
    }
    engine_error = fmt::format("host engine {}: {}", options.host_engine, ErrorText(rc));
  }
  if (api_.start_embedded == nullptr || api_.stop_embedded == nullptr) {
    return fmt::format("DCGM not usable: {}; this libdcgm has no embedded engine", engine_error);
  }
  // AUTO: the embedded engine updates the watched fields on its own thread, like a host engine.
  dcgmHandle_t handle = 0;
  if (dcgmReturn_t rc = api_.start_embedded(kDcgmOperationModeAuto, &handle); rc != kDcgmOk) {
    return fmt::format("DCGM not usable: {}; embedded engine: {}", engine_error, ErrorText(rc));
  }
  handle_ = handle;
  releases_.Push(
      [](const DcgmApi& api, uintptr_t h, uintptr_t, uintptr_t) { api.stop_embedded(h); }, handle);
  mode_ = fmt::format("embedded (no {})", engine_error);
  return "";
}

std::string DcgmProfilingSource::Watch(const DcgmOptions& options) {
  // Room for far more GPUs than DCGM writes (DCGM_MAX_NUM_DEVICES), should a version raise it.
  std::vector<unsigned int> ids(kMaxDevices);
  int count = 0;
  if (dcgmReturn_t rc = api_.supported_devices(handle_, ids.data(), &count); rc != kDcgmOk) {
    return fmt::format("DCGM {}: cannot list the GPUs: {}", mode_, ErrorText(rc));
  }
  if (count < 0 || count > kMaxDevices) {
    ++rejected_;
    return fmt::format("DCGM {}: implausible GPU count {}", mode_, count);
  }
  if (count == 0) return fmt::format("DCGM {}: no GPU that DCGM supports", mode_);
  devices_.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < devices_.size(); ++i) devices_[i].gpu_id = ids[i];
  values_.resize(kAllFieldCount);

  dcgmGpuGrp_t all = 0;
  std::string name = UniqueName("gpus");
  if (dcgmReturn_t rc = api_.group_create(handle_, kDcgmGroupEmpty, name.c_str(), &all);
      rc != kDcgmOk) {
    return fmt::format("DCGM {}: cannot make a GPU group: {}", mode_, ErrorText(rc));
  }
  releases_.Push(
      [](const DcgmApi& api, uintptr_t h, uintptr_t g, uintptr_t) { api.group_destroy(h, g); },
      handle_, all);
  for (const Device& d : devices_) {
    if (dcgmReturn_t rc = api_.group_add_device(handle_, all, d.gpu_id); rc != kDcgmOk) {
      return fmt::format("DCGM {}: cannot add GPU {} to a group: {}", mode_, d.gpu_id,
                         ErrorText(rc));
    }
  }
  auto field_group = [&](const auto& ids_in, const char* what, dcgmFieldGrp_t* out) {
    auto fields = ids_in;  // DCGM takes a non-const array
    std::string fg_name = UniqueName(what);
    dcgmReturn_t rc = api_.field_group_create(handle_, static_cast<int>(fields.size()),
                                              fields.data(), fg_name.c_str(), out);
    if (rc == kDcgmOk) {
      releases_.Push([](const DcgmApi& api, uintptr_t h, uintptr_t fg,
                        uintptr_t) { api.field_group_destroy(h, fg); },
                     handle_, *out);
    }
    return rc;
  };
  dcgmFieldGrp_t identity = 0;
  dcgmFieldGrp_t profiling = 0;
  if (dcgmReturn_t rc = field_group(kIdentityFields, "identity", &identity); rc != kDcgmOk) {
    return fmt::format("DCGM {}: cannot make a field group: {}", mode_, ErrorText(rc));
  }
  if (dcgmReturn_t rc = field_group(kProfilingFields, "profiling", &profiling); rc != kDcgmOk) {
    return fmt::format("DCGM {}: cannot make a field group: {}", mode_, ErrorText(rc));
  }

  const double interval_s =
      std::clamp(options.update_interval_s, kMinUpdateIntervalS, kMaxUpdateIntervalS);
  const auto update_us = static_cast<long long>(std::llround(interval_s * 1e6));
  // Only the latest value is read: keep two samples, whatever their age (as dcgmi dmon does).
  constexpr double kKeepAgeS = 0;
  constexpr int kKeepSamples = 2;
  auto unwatch = [](const DcgmApi& api, uintptr_t h, uintptr_t g, uintptr_t fg) {
    api.unwatch_fields(h, g, fg);
  };
  if (dcgmReturn_t rc =
          api_.watch_fields(handle_, all, identity, update_us, kKeepAgeS, kKeepSamples);
      rc != kDcgmOk) {
    return fmt::format("DCGM {}: cannot watch the GPUs' identity: {}", mode_, ErrorText(rc));
  }
  releases_.Push(unwatch, handle_, all, identity);
  if (dcgmReturn_t rc =
          api_.watch_fields(handle_, all, profiling, update_us, kKeepAgeS, kKeepSamples);
      rc == kDcgmOk) {
    releases_.Push(unwatch, handle_, all, profiling);
    for (Device& d : devices_) d.profiled = true;
  } else {
    WatchEach(profiling, update_us, kKeepAgeS, kKeepSamples);
  }

  const auto off =
      std::find_if(devices_.begin(), devices_.end(), [](const Device& d) { return !d.profiled; });
  const auto profiled =
      std::count_if(devices_.begin(), devices_.end(), [](const Device& d) { return d.profiled; });
  if (profiled == 0) {
    return fmt::format("DCGM {} {}: profiling off: {}", library_, mode_, off->profiling_off);
  }
  // The first values now rather than after one interval (a host engine updates on its own too).
  if (api_.update_all_fields != nullptr) api_.update_all_fields(handle_, 1);
  status_ = fmt::format("DCGM {} {}, {} GPU{}, profiling on {}", library_, mode_, count,
                        count == 1 ? "" : "s", profiled);
  if (off != devices_.end()) {
    status_ += fmt::format(" (GPU {}: {})", off->gpu_id, off->profiling_off);
  }
  return "";
}

void DcgmProfilingSource::WatchEach(dcgmFieldGrp_t fields, long long update_us, double keep_age_s,
                                    int keep_samples) {
  for (Device& d : devices_) {
    dcgmGpuGrp_t group = 0;
    std::string name = UniqueName("gpu");
    dcgmReturn_t rc = api_.group_create(handle_, kDcgmGroupEmpty, name.c_str(), &group);
    if (rc != kDcgmOk) {
      d.profiling_off = ErrorText(rc);  // e.g. the host engine's 64 groups are taken
      continue;
    }
    rc = api_.group_add_device(handle_, group, d.gpu_id);
    if (rc == kDcgmOk) {
      rc = api_.watch_fields(handle_, group, fields, update_us, keep_age_s, keep_samples);
    }
    if (rc != kDcgmOk) {
      d.profiling_off = ErrorText(rc);
      api_.group_destroy(handle_, group);  // held by nothing: give it back now
      continue;
    }
    d.profiled = true;
    releases_.Push(
        [](const DcgmApi& api, uintptr_t h, uintptr_t g, uintptr_t) { api.group_destroy(h, g); },
        handle_, group);
    releases_.Push([](const DcgmApi& api, uintptr_t h, uintptr_t g,
                      uintptr_t fg) { api.unwatch_fields(h, g, fg); },
                   handle_, group, fields);
  }
}

// A value as a number; nullopt when DCGM has none for it (one of its blank sentinels: no data
// yet, not supported, no permission) or it is not numeric. NaN passes, for the range checks to
// reject and count.
std::optional<double> Number(const dcgmFieldValue_v1& v) {
  if (v.fieldType == kDcgmFtDouble) {
    if (v.value.dbl >= kDcgmFp64Blank) return std::nullopt;
    return v.value.dbl;
  }
  if (v.fieldType == kDcgmFtInt64) {
    if (v.value.i64 >= kDcgmInt64Blank) return std::nullopt;
    return static_cast<double>(v.value.i64);
  }
  return std::nullopt;
}

StatusOr<DcgmSnapshot> DcgmProfilingSource::Sample() {
  std::array<unsigned short, kAllFieldCount> fields{};
  std::copy(kIdentityFields.begin(), kIdentityFields.end(), fields.begin());
  std::copy(kProfilingFields.begin(), kProfilingFields.end(),
            fields.begin() + kIdentityFields.size());
  DcgmSnapshot snap;
  snap.devices.reserve(devices_.size());
  for (Device& d : devices_) {
    DcgmDeviceSample s;
    s.gpu_id = d.gpu_id;
    s.profiling_off = d.profiling_off;
    const size_t n = d.profiled ? kAllFieldCount : kIdentityFields.size();
    // An entry DCGM leaves unwritten must not read as a value of 0.
    for (size_t i = 0; i < n; ++i) {
      values_[i].version = kFieldValueVersion1;
      values_[i].fieldId = 0;
      values_[i].fieldType = 0;
      values_[i].status = kDcgmNoData;
    }
    dcgmReturn_t rc = api_.latest_values(handle_, static_cast<int>(d.gpu_id), fields.data(),
                                         static_cast<unsigned int>(n), values_.data());
    if (rc == kDcgmConnectionNotValid) {
      return Status::IoError(fmt::format("DCGM: lost the host engine: {}", ErrorText(rc)));
    }
    // Any other failure (a GPU lost or being reset) leaves this GPU's fields unknown.
    if (rc == kDcgmOk) Read(values_.data(), fields.data(), n, &d, &s);
    s.uuid = d.uuid;
    s.nvml_index = d.nvml_index;
    snap.devices.push_back(std::move(s));
  }
  return snap;
}

void DcgmProfilingSource::Read(const dcgmFieldValue_v1* values, const unsigned short* fields,
                               size_t n, Device* d, DcgmDeviceSample* s) {
  for (size_t i = 0; i < n; ++i) {
    const dcgmFieldValue_v1& v = values[i];
    // Not supported, not watched (yet), no permission: unknown, not an error.
    if (v.status != kDcgmOk) continue;
    if (v.fieldId != fields[i]) {
      ++rejected_;  // an answer to a question not asked
      continue;
    }
    switch (v.fieldId) {
      case kFieldUuid:
        if (v.fieldType == kDcgmFtString) {
          // Bounded: a string DCGM failed to terminate must not run past the buffer.
          std::string uuid(v.value.str, strnlen(v.value.str, sizeof v.value.str));
          if (!uuid.empty() && uuid.rfind("<<<", 0) != 0) d->uuid = std::move(uuid);
        }
        break;
      case kFieldNvmlIndex:
        if (auto x = Number(v)) {
          if (*x >= 0 && *x < kMaxDevices && std::floor(*x) == *x) {
            d->nvml_index = static_cast<int>(*x);
          } else {
            ++rejected_;
          }
        }
        break;
      case kFieldGrEngineActive:
        s->gr_engine_active_pct = RatioPct(Number(v));
        break;
      case kFieldSmActive:
        s->sm_active_pct = RatioPct(Number(v));
        break;
      case kFieldSmOccupancy:
        s->sm_occupancy_pct = RatioPct(Number(v));
        break;
      case kFieldTensorActive:
        s->tensor_active_pct = RatioPct(Number(v));
        break;
      case kFieldDramActive:
        s->dram_active_pct = RatioPct(Number(v));
        break;
      case kFieldPcieTx:
        s->pcie_tx_bytes_per_s = Rate(Number(v));
        break;
      case kFieldPcieRx:
        s->pcie_rx_bytes_per_s = Rate(Number(v));
        break;
      case kFieldNvlinkTx:
        s->nvlink_tx_bytes_per_s = Rate(Number(v));
        break;
      case kFieldNvlinkRx:
        s->nvlink_rx_bytes_per_s = Rate(Number(v));
        break;
      default:
        break;
    }
  }
}

}  // namespace

std::unique_ptr<DcgmSource> NoDcgmSource(std::string reason) {
  return std::make_unique<NoDcgm>(std::move(reason));
}

std::unique_ptr<DcgmSource> OpenDcgm(const std::string& library, DcgmOptions options) {
  auto source = std::make_unique<DcgmProfilingSource>();
  // The reason is formatted while the library is loaded (errorString's text lives inside it);
  // `source` releases what it took when it goes.
  if (std::string why = source->Open(library, options); !why.empty()) {
    return NoDcgmSource(std::move(why));
  }
  return source;
}

std::optional<int> NvmlIndexOf(const DcgmDeviceSample& d,
                               const std::vector<GpuDeviceSample>& nvml) {
  if (!d.uuid.empty()) {
    for (const GpuDeviceSample& g : nvml) {
      if (g.uuid == d.uuid) return g.index;
    }
  }
  // By index only where a UUID is missing on one side: two known UUIDs that differ are two GPUs.
  if (d.nvml_index) {
    for (const GpuDeviceSample& g : nvml) {
      if (g.index == *d.nvml_index && (g.uuid.empty() || d.uuid.empty())) return g.index;
    }
  }
  return std::nullopt;
}

}  // namespace rightsize

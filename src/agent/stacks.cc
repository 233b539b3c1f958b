#include "agent/stacks.h"

#include <cxxabi.h>
#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "agent/perf_map.h"
#include "agent/python_stacks.h"
#include "core/fd.h"

namespace rightsize {
namespace {

constexpr char kUnknownFrame[] = "[unknown]";
// Per-process frame-name cache entries; past this the cache starts over (a JIT or a huge
// binary must not grow it without bound).
constexpr size_t kMaxCachedFrames = 1 << 16;
// CPython's interpreter loop: where a sample's native stack runs Python code.
constexpr std::string_view kEvalFrame = "_PyEval_EvalFrameDefault";
// Python stacks kept per thread, and how far back (in time) from the newest.
constexpr size_t kMaxPythonSnapshots = 1024;
constexpr int64_t kPythonHistoryNs = 10'000'000'000;
// Distinct notes kept for notes().
constexpr size_t kMaxNotes = 16;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

struct DirCloser {
  void operator()(DIR* dir) const noexcept { closedir(dir); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

struct DwflCloser {
  void operator()(Dwfl* dwfl) const noexcept { dwfl_end(dwfl); }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflCloser>;

struct FreeDeleter {
  void operator()(char* p) const noexcept { std::free(p); }  // NOLINT(*-no-malloc)
};

// Folded stacks separate frames with ';' and the count with the last space: a ';' inside a
// name would split a frame in two.
std::string Sanitize(std::string name) {
  std::replace(name.begin(), name.end(), ';', ':');
  std::replace(name.begin(), name.end(), '\n', ' ');
  return name;
}

// A symbol-table name as people read it: without its version ("clock_gettime@@GLIBC_2.17"),
// which would also defeat the demangler, and demangled.
std::string Demangle(const char* symbol) {
  const std::string name(symbol, std::strcspn(symbol, "@"));
  if (name.starts_with("_Z")) {
    int status = 0;
    std::unique_ptr<char, FreeDeleter> demangled(
        abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status));
    if (status == 0 && demangled != nullptr) return Sanitize(demangled.get());
  }
  return Sanitize(name);
}

// "libfoo.so" for "/usr/lib/libfoo.so", "[vdso]" for libdwfl's "[vdso: 123]".
std::string ModuleLabel(const char* module_name) {
  if (module_name == nullptr) return "[unknown]";
  std::string_view name(module_name);
  if (name.starts_with("[vdso")) return "[vdso]";
  const size_t slash = name.rfind('/');
  return Sanitize(std::string(slash == std::string_view::npos ? name : name.substr(slash + 1)));
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Thread ids of `pid`. NotFound when the process is gone.
StatusOr<std::vector<int>> ListThreads(int pid) {
  const std::string path = fmt::format("/proc/{}/task", pid);
  DirPtr dir(opendir(path.c_str()));
  if (dir == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) {
      return Status::NotFound(fmt::format("pid {}: no such process", pid));
    }
    return Status::IoError(fmt::format("{}: {}", path, ErrnoText(err)));
  }
  std::vector<int> tids;
  while (const dirent* entry = readdir(dir.get())) {
    char* end = nullptr;
    const long tid = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && tid > 0) tids.push_back(static_cast<int>(tid));
  }
  // An empty task list is a process that is being reaped.
  if (tids.empty()) return Status::NotFound(fmt::format("pid {}: no such process", pid));
  std::sort(tids.begin(), tids.end());
  return tids;
}

perf_event_attr MakeAttr(const StackSamplerOptions& options) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = static_cast<uint64_t>(options.frequency_hz);
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_IP | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  // Sample times on CLOCK_MONOTONIC (steady_clock), the clock PythonStackPoller stamps its
  // reads with, so each sample finds the Python stack read nearest to it.
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  // User space only: needs no privilege beyond ptrace access at perf_event_paranoid <= 2, and
  // the job's own code is what the flame graph is for.
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  attr.sample_max_stack = static_cast<uint16_t>(options.max_depth);
  // COMM records flagged COMM_EXEC tell us a process exec'd; MMAP records (executable mappings
  // only) that it loaded code. Either makes its cached symbols stale.
  attr.comm = 1;
  attr.comm_exec = 1;
  attr.mmap = 1;
  return attr;
}

int PerfEventOpen(perf_event_attr* attr, int tid) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, attr, tid, /*cpu=*/-1, /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
}

// Turns a perf_event_open errno into a Status a person can act on.
Status OpenError(int err, const StackSamplerOptions& options, const std::string& target) {
  const std::string what = fmt::format("perf_event_open({}): {}", target, ErrnoText(err));
  switch (err) {
    case EACCES:
    case EPERM: {
      std::string paranoid = ReadFirstLine("/proc/sys/kernel/perf_event_paranoid");
      return Status::IoError(fmt::format(
          "{}: sampling needs CAP_PERFMON (or root), or kernel.perf_event_paranoid <= 2 (it is "
          "{}) and ptrace access to the process; in a container, also a seccomp profile that "
          "allows perf_event_open",
          what, paranoid.empty() ? "unreadable" : paranoid));
    }
    case ESRCH:
      return Status::NotFound(what);
    case ENOSYS:
      return Status::IoError(what + ": this kernel has no perf events (CONFIG_PERF_EVENTS)");
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
      return Status::IoError(what + ": the software cpu-clock event is not supported here");
    case EINVAL:
    case EOVERFLOW:
      return Status::InvalidArgument(fmt::format(
          "{}: frequency_hz={} may exceed kernel.perf_event_max_sample_rate or max_depth={} "
          "kernel.perf_event_max_stack",
          what, options.frequency_hz, options.max_depth));
    case EMFILE:
    case ENFILE:
      return Status::IoError(what + ": out of file descriptors (raise RLIMIT_NOFILE)");
    default:
      return Status::IoError(what);
  }
}

// The /proc/PID/map_files entry of the mapping that starts at `start`: the only way to read a
// binary that was deleted or replaced while the process runs (needs CAP_SYS_ADMIN).
std::string MapFilesPath(int pid, uint64_t start) {
  const std::string dir_path = fmt::format("/proc/{}/map_files", pid);
  DirPtr dir(opendir(dir_path.c_str()));
  if (dir == nullptr) return "";
  const std::string prefix = fmt::format("{:x}-", start);
  while (const dirent* entry = readdir(dir.get())) {
    if (std::string_view(entry->d_name).starts_with(prefix)) {
      return dir_path + "/" + entry->d_name;
    }
  }
  return "";
}

// The executable mappings [start, end) of `pid`, sorted; empty when its maps cannot be read.
std::vector<std::pair<uint64_t, uint64_t>> ReadCodeRanges(int pid) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::ifstream in(fmt::format("/proc/{}/maps", pid));
  std::string line;
  bool readable = false;
  while (std::getline(in, line)) {
    readable = true;
    uint64_t start = 0;
    uint64_t end = 0;
    char perms[5] = {};
    // NOLINTNEXTLINE(cert-err34-c): a line that does not parse is skipped
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s", &start, &end, perms) == 3 &&
        perms[2] == 'x' && start < end) {
      ranges.emplace_back(start, end);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  // A process with no executable mapping is still readable: say so with an empty range.
  if (readable && ranges.empty()) ranges.emplace_back(0, 0);
  return ranges;
}

// `tid` of `pid` as the thread itself sees it (the last NSpid entry of its status); `tid`
// itself when that cannot be read.
int NamespaceTid(int pid, int tid) {
  std::ifstream in(pid == tid ? fmt::format("/proc/{}/status", pid)
                              : fmt::format("/proc/{}/task/{}/status", pid, tid));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("NSpid:")) continue;
    const size_t last = line.find_last_of(" \t");
    if (last == std::string::npos) break;
    const int ns_tid = std::atoi(line.c_str() + last + 1);
    return ns_tid > 0 ? ns_tid : tid;
  }
  return tid;
}

// `pid` as the process itself sees it: what a JIT names its perf map by.
int NamespacePid(int pid) { return NamespaceTid(pid, pid); }

}  // namespace

// Owns one perf event fd and its ring buffer mapping. Copy deleted; move leaves the source
// empty.
class StackSampler::PerfEvent {
 public:
  // Opens a sampling event on thread `tid` (0: the calling thread) and maps its ring. NotFound
  // if the thread is gone.
  static StatusOr<PerfEvent> Open(const StackSamplerOptions& options, int tid) {
    perf_event_attr attr = MakeAttr(options);
    PerfEvent event;
    event.fd_.reset(PerfEventOpen(&attr, tid));
    if (!event.fd_) {
      const int err = errno;
      return OpenError(err, options,
                       tid == 0 ? "the calling thread" : fmt::format("thread {}", tid));
    }
    const auto page_bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t map_bytes = (options.ring_pages + 1) * page_bytes;
    // Writable, so the kernel honours data_tail and never overwrites unread records: when the
    // ring is full it drops samples and tells us how many in a PERF_RECORD_LOST.
    void* base = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, event.fd_.get(), 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      return Status::IoError(fmt::format(
          "ring buffer for thread {} ({} bytes): {}{}", tid, map_bytes, ErrnoText(err),
          err == EPERM || err == ENOMEM
              ? " (over kernel.perf_event_mlock_kb and RLIMIT_MEMLOCK: lower ring_pages or "
                "max_threads, or grant CAP_IPC_LOCK)"
              : ""));
    }
    event.base_ = base;
    event.map_bytes_ = map_bytes;
    const auto* meta = static_cast<const perf_event_mmap_page*>(base);
    // data_offset/data_size exist since Linux 4.1; before that the data follows the first page.
    event.data_offset_ = meta->data_offset != 0 ? meta->data_offset : page_bytes;
    event.data_bytes_ = meta->data_size != 0 ? meta->data_size : options.ring_pages * page_bytes;
    return event;
  }

  PerfEvent() = default;
  PerfEvent(const PerfEvent&) = delete;
  PerfEvent& operator=(const PerfEvent&) = delete;
  PerfEvent(PerfEvent&& other) noexcept { *this = std::move(other); }
  PerfEvent& operator=(PerfEvent&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::move(other.fd_);
      base_ = std::exchange(other.base_, nullptr);
      map_bytes_ = std::exchange(other.map_bytes_, 0);
      data_offset_ = std::exchange(other.data_offset_, 0);
      data_bytes_ = std::exchange(other.data_bytes_, 0);
    }
    return *this;
  }
  ~PerfEvent() noexcept { Reset(); }

  // Whether the thread has exited (the kernel reports POLLHUP on its event).
  bool Ended() const {
    pollfd pfd = {.fd = fd_.get(), .events = POLLIN, .revents = 0};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
  }

  // Calls on_record(header, record) for every complete record, oldest first, then hands the
  // space back to the kernel. `record` points at the header, 8-byte aligned; a record that wraps
  // around the end of the ring is copied into `scratch` first. Returns Internal (after skipping
  // to the newest data) when a header is impossible, which only a bug can cause.
  template <typename OnRecord>
  Status ForEachRecord(std::vector<uint64_t>& scratch, OnRecord&& on_record) {
    auto* meta = static_cast<perf_event_mmap_page*>(base_);
    // Acquire pairs with the kernel's release of data_head: the records before it are visible.
    const uint64_t head = std::atomic_ref<__u64>(meta->data_head).load(std::memory_order_acquire);
    uint64_t tail = meta->data_tail;  // only we write it
    const char* data = static_cast<const char*>(base_) + data_offset_;
    Status status;
    while (head - tail >= sizeof(perf_event_header)) {
      const size_t offset = tail & (data_bytes_ - 1);
      perf_event_header header;
      CopyOut(data, offset, &header, sizeof(header));
      if (header.size < sizeof(header) || header.size > head - tail || header.size % 8 != 0) {
        status = Status::Internal(fmt::format(
            "perf ring: impossible record (type {}, size {}) with {} bytes unread; skipped them",
            header.type, header.size, head - tail));
        tail = head;
        break;
      }
      const uint64_t* record = nullptr;
      if (offset + header.size <= data_bytes_) {
        record = reinterpret_cast<const uint64_t*>(data + offset);
      } else {
        scratch.resize(header.size / 8);
        CopyOut(data, offset, scratch.data(), header.size);
        record = scratch.data();
      }
      on_record(header, record);
      tail += header.size;
    }
    // Release: our reads of the records happen before the kernel may reuse their space.
    std::atomic_ref<__u64>(meta->data_tail).store(tail, std::memory_order_release);
    return status;
  }

 private:
  void CopyOut(const char* data, size_t offset, void* out, size_t bytes) const {
    const size_t first = std::min(bytes, data_bytes_ - offset);
    std::memcpy(out, data + offset, first);
    std::memcpy(static_cast<char*>(out) + first, data, bytes - first);
  }

  void Reset() noexcept {
    if (base_ != nullptr) munmap(base_, map_bytes_);
    base_ = nullptr;
    fd_.reset();
  }

  UniqueFd fd_;
  void* base_ = nullptr;
  size_t map_bytes_ = 0;
  size_t data_offset_ = 0;
  size_t data_bytes_ = 0;  // a power of two
};

namespace {

// Function names for addresses in one process, from its /proc/PID/maps via libdwfl. Built
// eagerly when the process is added (so samples of a process that exits before the next Poll
// still resolve from the files it had mapped) and rebuilt, at most once per Poll, after it
// exec'd or mapped new code. Not movable: libdwfl modules point back at it.
class ProcessSymbols {
 public:
  explicit ProcessSymbols(int pid) : pid_(pid) {}
  ProcessSymbols(const ProcessSymbols&) = delete;
  ProcessSymbols& operator=(const ProcessSymbols&) = delete;

  void OnExec() {
    stale_ = true;
    exec_pending_ = true;
  }
  void OnCodeMapped() { stale_ = true; }

  // The frame name for `address`; valid until the next call.
  const std::string& FrameName(uint64_t address, uint64_t generation) {
    if (stale_ && built_generation_ != generation) Rebuild(generation);
    // A JIT appends to its perf map as it compiles: read what it added, once per Poll.
    if (perf_map_ != nullptr && perf_map_generation_ != generation) {
      perf_map_generation_ = generation;
      if (perf_map_->Update()) names_.clear();
    }
    auto it = names_.find(address);
    if (it != names_.end()) return it->second;
    if (names_.size() >= kMaxCachedFrames) names_.clear();
    return names_.emplace(address, Resolve(address)).first->second;
  }

  void Rebuild(uint64_t generation) {
    built_generation_ = generation;
    stale_ = false;
    names_.clear();
    const bool exec = std::exchange(exec_pending_, false);
    // Gone (or not ours to read): the old modules still name code mapped before, unless the
    // process exec'd since, when they would name the wrong program.
    std::vector<std::pair<uint64_t, uint64_t>> code = ReadCodeRanges(pid_);
    if (code.empty()) {
      if (exec) {
        dwfl_.reset();
        code_ranges_.clear();
      }
      return;
    }
    code_ranges_ = std::move(code);
    ++builds_;
    if (perf_map_ == nullptr || exec) {
      perf_map_ = std::make_unique<PerfMap>(
          fmt::format("/proc/{}/root/tmp/perf-{}.map", pid_, NamespacePid(pid_)));
      perf_map_generation_ = 0;
    }
    if (dwfl_ == nullptr) dwfl_.reset(dwfl_begin(&kCallbacks));
    if (dwfl_ == nullptr) return;
    // Re-reporting keeps modules whose name and range did not change, with their loaded ELF
    // and symbol tables, so a dlopen costs only the new library.
    dwfl_report_begin(dwfl_.get());
    dwfl_linux_proc_report(dwfl_.get(), pid_);
    dwfl_report_end(dwfl_.get(), nullptr, nullptr);
    dwfl_getmodules(dwfl_.get(), &SetModuleUserData, this, 0);
  }

  static int SetModuleUserData(Dwfl_Module* /*module*/, void** userdata, const char* /*name*/,
                               Dwarf_Addr /*start*/, void* self) {
    *userdata = self;
    return DWARF_CB_OK;
  }

  // libdwfl's find_elf: opens a mapped file through /proc/PID/root, so a job in a container
  // resolves against its own libraries, not the host's files of the same name; a deleted file
  // through /proc/PID/map_files. Falls back to libdwfl's own lookup (host path, vDSO).
  static int FindElf(Dwfl_Module* module, void** userdata, const char* module_name, Dwarf_Addr base,
                     char** file_name, Elf** elf) {
    const auto* self = static_cast<const ProcessSymbols*>(*userdata);
    if (self != nullptr && module_name[0] == '/') {
      const std::string_view name(module_name);
      const std::string path = name.ends_with(" (deleted)")
                                   ? MapFilesPath(self->pid_, base)
                                   : fmt::format("/proc/{}/root{}", self->pid_, name);
      struct stat st;
      // Only regular files: a mapped device could block on open.
      if (!path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (fd) {
          *file_name = strdup(path.c_str());
          return fd.release();  // libdwfl owns it now
        }
      }
    }
    return dwfl_linux_proc_find_elf(module, userdata, module_name, base, file_name, elf);
  }

  // Builds since creation: tells the sampler to look for an interpreter again.
  uint64_t builds() const { return builds_; }
  Dwfl* dwfl() const { return dwfl_.get(); }

 private:
  std::string Resolve(uint64_t address) const {
    // JIT code first: it lives in anonymous memory mapped after our last look at the maps.
    if (perf_map_ != nullptr) {
      if (const std::string* name = perf_map_->Lookup(address)) return *name;
    }
    // Only addresses in executable mappings are code. A frame-pointer chain through code built
    // without frame pointers (CPython, most libraries) yields "return addresses" that are
    // really data, and libdwfl's module ranges span a library's data and bss too, so such junk
    // would otherwise be labelled as code of whichever file happens to lie around it.
    if (!code_ranges_.empty()) {
      auto it = std::upper_bound(code_ranges_.begin(), code_ranges_.end(),
                                 std::make_pair(address, UINT64_MAX));
      if (it == code_ranges_.begin() || address >= std::prev(it)->second) return kUnknownFrame;
    }
    if (dwfl_ == nullptr) return kUnknownFrame;
    Dwfl_Module* module = dwfl_addrmodule(dwfl_.get(), address);
    if (module == nullptr) return kUnknownFrame;  // JIT code without a map, or unmapped since
    if (const char* symbol = dwfl_module_addrname(module, address)) return Demangle(symbol);
    Dwarf_Addr start = 0;
    const char* name =
        dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
    // The address as the file's own symbol tables and addr2line count it (the ELF virtual
    // address: the load bias taken off), not the distance from the module's first mapping.
    Dwarf_Addr bias = 0;
    const uint64_t file_address =
        dwfl_module_getelf(module, &bias) != nullptr ? address - bias : address - start;
    return fmt::format("{}+{:#x}", ModuleLabel(name), file_address);
  }

  static char* debuginfo_path_;  // libdwfl wants a char**; null means its default path
  static const Dwfl_Callbacks kCallbacks;

  int pid_;
  DwflPtr dwfl_;
  std::vector<std::pair<uint64_t, uint64_t>> code_ranges_;  // executable mappings, sorted
  std::unique_ptr<PerfMap> perf_map_;
  uint64_t perf_map_generation_ = 0;
  uint64_t builds_ = 0;
  bool stale_ = false;
  bool exec_pending_ = false;
  uint64_t built_generation_ = 0;
  std::unordered_map<uint64_t, std::string> names_;
};

char* ProcessSymbols::debuginfo_path_ = nullptr;
const Dwfl_Callbacks ProcessSymbols::kCallbacks = {
    .find_elf = &ProcessSymbols::FindElf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = &ProcessSymbols::debuginfo_path_,
};

}  // namespace

struct StackSampler::Process {
  Process(int pid, int64_t start_ticks) : pid(pid), start_ticks(start_ticks), symbols(pid) {}

  const int pid;
  const int64_t start_ticks;         // with the pid, names the process: a reused pid is another one
  std::string comm;                  // the root frame of its stacks
  std::map<int, PerfEvent> threads;  // by tid
  std::set<int> skipped_tids;        // counted once, not retried while they live
  ProcessSymbols symbols;
  uint64_t python_checked_build = 0;  // symbols.builds() when we last looked for CPython
  bool python = false;                // the poller reads its Python stacks
  // The Python stacks read of each thread (by tid), oldest first, the last kPythonHistoryNs.
  std::unordered_map<int, std::deque<PythonSnapshot>> python_history;
  bool other_pid_namespace = false;      // its thread ids differ from ours
  std::unordered_map<int, int> ns_tids;  // its own thread id -> ours, when they differ
};

StatusOr<std::unique_ptr<StackSampler>> StackSampler::Create(StackSamplerOptions options) {
  if (options.frequency_hz < 1) {
    return Status::InvalidArgument(
        fmt::format("stack sampler: frequency_hz must be >= 1, not {}", options.frequency_hz));
  }
  if (options.max_depth < 1 || options.max_depth > UINT16_MAX) {
    return Status::InvalidArgument(
        fmt::format("stack sampler: max_depth must be in [1, 65535], not {}", options.max_depth));
  }
  if (options.ring_pages == 0 || (options.ring_pages & (options.ring_pages - 1)) != 0) {
    return Status::InvalidArgument(fmt::format(
        "stack sampler: ring_pages must be a power of two, not {}", options.ring_pages));
  }
  if (options.max_stacks == 0 || options.max_threads == 0) {
    return Status::InvalidArgument("stack sampler: max_stacks and max_threads must be >= 1");
  }
  // One event (and ring) on this thread, closed at once: what every thread will get, so a host
  // that refuses it (or options the kernel rejects) fails here, once, clearly.
  StatusOr<PerfEvent> probe = PerfEvent::Open(options, 0);
  if (!probe.ok()) return probe.status().WithContext("stack sampler unavailable");
  return std::unique_ptr<StackSampler>(new StackSampler(options));
}

StackSampler::StackSampler(StackSamplerOptions options) : options_(options) {
  if (options_.python_frames) {
    python_ = std::make_unique<PythonStackPoller>(options_.frequency_hz,
                                                  static_cast<size_t>(options_.max_depth));
  }
}
StackSampler::~StackSampler() = default;

size_t StackSampler::watched_threads() const {
  size_t n = 0;
  for (const auto& [pid, process] : processes_) n += process->threads.size();
  return n;
}

void StackSampler::Skip(int64_t threads, std::string reason) {
  skipped_threads_ += threads;
  last_skip_reason_ = std::move(reason);
}

void StackSampler::AddProcess(int pid) {
  if (pid <= 0) {
    Skip(1, fmt::format("pid {}: not a process id", pid));
    return;
  }
  if (auto it = processes_.find(pid); it != processes_.end()) {
    if (RefreshProcess(*it->second)) return;
    if (python_ != nullptr && it->second->python) python_->Forget(pid);
    processes_.erase(it);  // exited, or the pid now names another process: start afresh
  }
  StatusOr<std::vector<int>> tids = ListThreads(pid);
  const std::optional<ProcStat> stat = proc_.Stat(pid);
  if (!tids.ok() || !stat) {
    Skip(1, tids.ok() ? fmt::format("pid {}: no such process", pid) : tids.status().message());
    return;
  }
  auto process = std::make_unique<Process>(pid, stat->start_ticks);
  OpenThreads(*process, *tids);
  if (process->threads.empty()) {
    if (process->skipped_tids.empty()) Skip(1, fmt::format("pid {}: exited", pid));
    return;
  }
  // Names and symbols are read after the events exist, so that an exec from here on arrives as
  // a COMM_EXEC record and nothing read before it lingers.
  const std::optional<ProcStat> named = proc_.Stat(pid);
  process->comm = Sanitize(named ? named->comm : stat->comm);
  process->symbols.Rebuild(poll_generation_);
  UpdatePython(*process);  // start reading its Python stacks now, not from the next Poll
  processes_.emplace(pid, std::move(process));
}

void StackSampler::OpenThreads(Process& process, const std::vector<int>& tids) {
  size_t watched = watched_threads();
  for (const int tid : tids) {
    if (process.threads.contains(tid) || process.skipped_tids.contains(tid)) continue;
    if (watched >= options_.max_threads) {
      process.skipped_tids.insert(tid);
      Skip(1, fmt::format("thread {} of pid {}: already sampling max_threads={} threads", tid,
                          process.pid, options_.max_threads));
      continue;
    }
    StatusOr<PerfEvent> event = PerfEvent::Open(options_, tid);
    if (event.ok()) {
      process.threads.emplace(tid, std::move(*event));
      ++watched;
    } else if (event.status().code() != Status::Code::kNotFound) {
      process.skipped_tids.insert(tid);
      Skip(1, fmt::format("pid {}: {}", process.pid, event.status().message()));
    }
    // NotFound: the thread ended between the listing and the open; nothing to sample.
  }
}

bool StackSampler::RefreshProcess(Process& process) {
  StatusOr<std::vector<int>> tids = ListThreads(process.pid);
  const std::optional<ProcStat> stat = proc_.Stat(process.pid);
  const bool alive = tids.ok() && stat && stat->start_ticks == process.start_ticks;
  for (auto it = process.threads.begin(); it != process.threads.end();) {
    const bool listed = alive && std::binary_search(tids->begin(), tids->end(), it->first);
    if (listed && !it->second.Ended()) {
      ++it;
      continue;
    }
    // Its last samples are still in the ring: keep them.
    Status drained = Drain(process, it->second);
    if (!drained.ok() && pending_error_.ok()) pending_error_ = drained;
    it = process.threads.erase(it);
  }
  if (!alive) return false;
  std::erase_if(process.skipped_tids,
                [&](int tid) { return !std::binary_search(tids->begin(), tids->end(), tid); });
  OpenThreads(process, *tids);
  return true;
}

void StackSampler::Refresh() {
  ++poll_generation_;
  for (auto it = processes_.begin(); it != processes_.end();) {
    if (RefreshProcess(*it->second)) {
      ++it;
    } else {
      if (python_ != nullptr && it->second->python) python_->Forget(it->first);
      it = processes_.erase(it);
    }
  }
}

void StackSampler::Note(std::string note) {
  if (notes_.size() < kMaxNotes && std::find(notes_.begin(), notes_.end(), note) == notes_.end()) {
    notes_.push_back(std::move(note));
  }
}

void StackSampler::UpdatePython(Process& process) {
  if (python_ == nullptr) return;
  // A new program image (or the first look): is it CPython, and can we read it?
  if (process.symbols.builds() == process.python_checked_build) return;
  process.python_checked_build = process.symbols.builds();
  PythonStacks::Found found = PythonStacks::Find(process.pid, process.symbols.dwfl());
  if (!found.note.empty()) Note(fmt::format("pid {}: {}", process.pid, found.note));
  process.python = found.stacks != nullptr;
  process.other_pid_namespace = NamespacePid(process.pid) != process.pid;
  process.ns_tids.clear();
  if (process.python) {
    python_->Watch(process.pid, std::move(found.stacks));
  } else {
    python_->Forget(process.pid);
    process.python_history.clear();
  }
}

void StackSampler::TakePythonStacks() {
  if (python_ == nullptr) return;
  std::set<int> remapped;  // processes whose thread ids were looked up in this call
  // The poller's reads since the last Poll, into each thread's history.
  for (PythonSnapshot& snapshot : python_->Take()) {
    auto it = processes_.find(snapshot.pid);
    if (it == processes_.end()) continue;
    Process& process = *it->second;
    if (process.other_pid_namespace) {
      // The interpreter knows its threads by their ids in its own pid namespace (a container);
      // perf by ours.
      auto ours = process.ns_tids.find(snapshot.tid);
      if (ours == process.ns_tids.end()) {
        if (!remapped.insert(process.pid).second) continue;
        process.ns_tids.clear();
        for (const auto& [tid, event] : process.threads) {
          process.ns_tids[NamespaceTid(process.pid, tid)] = tid;
        }
        ours = process.ns_tids.find(snapshot.tid);
        if (ours == process.ns_tids.end()) continue;
      }
      snapshot.tid = ours->second;
    }
    std::deque<PythonSnapshot>& history = process.python_history[snapshot.tid];
    history.push_back(std::move(snapshot));
    while (history.size() > kMaxPythonSnapshots ||
           history.back().time_ns - history.front().time_ns > kPythonHistoryNs) {
      history.pop_front();
    }
  }
  // Threads that ended (or stopped running Python) long ago: no sample will ask for them.
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  for (auto& [pid, process] : processes_) {
    std::erase_if(process->python_history, [&](const auto& entry) {
      return entry.second.empty() || now_ns - entry.second.back().time_ns > kPythonHistoryNs;
    });
  }
}

Status StackSampler::Poll() {
  ++poll_generation_;
  Status status = std::exchange(pending_error_, Status::Ok());
  TakePythonStacks();
  for (auto& [pid, process] : processes_) {
    UpdatePython(*process);
    for (auto& [tid, event] : process->threads) {
      Status drained = Drain(*process, event);
      if (!drained.ok() && status.ok()) status = drained.WithContext(fmt::format("thread {}", tid));
    }
    UpdatePython(*process);  // it exec'd during the drain: read the new program from now on
  }
  return status;
}

Status StackSampler::Drain(Process& process, PerfEvent& event) {
  return event.ForEachRecord(record_scratch_,
                             [&](const perf_event_header& header, const uint64_t* record) {
                               HandleRecord(process, header.type, header.misc, record, header.size);
                             });
}

void StackSampler::HandleRecord(Process& process, uint32_t type, uint16_t misc,
                                const uint64_t* record, size_t record_bytes) {
  const char* payload = reinterpret_cast<const char*>(record) + sizeof(perf_event_header);
  const size_t payload_bytes = record_bytes - sizeof(perf_event_header);
  switch (type) {
    case PERF_RECORD_SAMPLE: {
      // PERF_SAMPLE_IP | TID | TIME | CALLCHAIN: u64 ip; u32 pid, tid; u64 time; u64 nr;
      // u64 ips[nr].
      constexpr size_t kFixed = 4 * sizeof(uint64_t);
      uint64_t ip = 0;
      uint32_t tid = 0;
      uint64_t time_ns = 0;
      uint64_t nr = 0;
      if (payload_bytes >= kFixed) {
        std::memcpy(&ip, payload, sizeof(ip));
        std::memcpy(&tid, payload + sizeof(uint64_t) + sizeof(uint32_t), sizeof(tid));
        std::memcpy(&time_ns, payload + 2 * sizeof(uint64_t), sizeof(time_ns));
        std::memcpy(&nr, payload + 3 * sizeof(uint64_t), sizeof(nr));
      }
      if (payload_bytes < kFixed || nr > (payload_bytes - kFixed) / sizeof(uint64_t)) {
        ++lost_;  // cannot happen with our attributes; a sample we could not use
        return;
      }
      // After the header, ip, pid/tid, time and nr.
      AddSample(process, record + 1 + 4, nr, ip, static_cast<int>(tid),
                static_cast<int64_t>(time_ns));
      return;
    }
    case PERF_RECORD_LOST: {
      // u64 id; u64 lost: samples the kernel dropped because the ring was full.
      uint64_t lost = 0;
      if (payload_bytes >= 2 * sizeof(uint64_t)) {
        std::memcpy(&lost, payload + sizeof(uint64_t), sizeof(lost));
      }
      lost_ += static_cast<int64_t>(lost);
      return;
    }
    case PERF_RECORD_COMM: {
      // u32 pid, tid; char comm[] (NUL-terminated). Renamed threads do not concern us.
      if ((misc & PERF_RECORD_MISC_COMM_EXEC) == 0 || payload_bytes <= 8) return;
      const char* comm = payload + 8;
      process.comm = Sanitize(std::string(comm, strnlen(comm, payload_bytes - 8)));
      process.symbols.OnExec();
      return;
    }
    case PERF_RECORD_MMAP: {
      // u32 pid, tid; u64 addr, len, pgoff; char filename[]. Anonymous executable memory
      // (JITs map it all the time) has no symbols to reload.
      constexpr size_t kFilename = 8 + 3 * sizeof(uint64_t);
      if (payload_bytes > kFilename && payload[kFilename] == '/') {
        process.symbols.OnCodeMapped();
      }
      return;
    }
    default:
      return;  // THROTTLE/UNTHROTTLE, and records we did not ask for
  }
}

const std::vector<PythonFrame>* StackSampler::PythonStackAt(const Process& process, int tid,
                                                            int64_t time_ns) const {
  if (!process.python) return nullptr;
  auto it = process.python_history.find(tid);
  if (it == process.python_history.end() || it->second.empty()) return nullptr;
  const std::deque<PythonSnapshot>& history = it->second;
  auto later = std::lower_bound(
      history.begin(), history.end(), time_ns,
      [](const PythonSnapshot& snapshot, int64_t t) { return snapshot.time_ns < t; });
  const PythonSnapshot* nearest = nullptr;
  if (later != history.end()) nearest = &*later;
  if (later != history.begin()) {
    const PythonSnapshot& earlier = *std::prev(later);
    if (nearest == nullptr || time_ns - earlier.time_ns < nearest->time_ns - time_ns) {
      nearest = &earlier;
    }
  }
  // Three sampling periods (at least 50 ms) either way: the poller runs at the sampling rate,
  // so a thread without a read that close was not running Python then (or we fell behind).
  const int64_t tolerance_ns =
      std::max<int64_t>(3'000'000'000LL / options_.frequency_hz, 50'000'000LL);
  if (nearest == nullptr || std::llabs(nearest->time_ns - time_ns) > tolerance_ns) return nullptr;
  return nearest->frames.get();
}

void StackSampler::AddSample(Process& process, const uint64_t* ips, uint64_t nr, uint64_t ip,
                             int tid, int64_t time_ns) {
  ++samples_;
  // The call chain is innermost first, with context markers (PERF_CONTEXT_USER) between the
  // addresses; its first user address is the sampled ip itself.
  std::vector<uint64_t>& frames = frame_scratch_;
  frames.clear();
  for (uint64_t i = 0; i < nr; ++i) {
    if (ips[i] < PERF_CONTEXT_MAX) frames.push_back(ips[i]);
  }
  if (frames.empty() && ip != 0) frames.push_back(ip);

  // Native frame names, outermost first.
  std::vector<std::string>& names = name_scratch_;
  names.clear();
  bool last_unknown = false;
  for (size_t i = frames.size(); i-- > 0;) {
    // Return addresses point after their call; one byte back is the call itself, inside the
    // caller even when the call is its last instruction (a noreturn callee).
    const uint64_t address = i == 0 ? frames[i] : frames[i] - 1;
    const std::string& name = process.symbols.FrameName(address, poll_generation_);
    // Runs of unresolvable frames (JIT code) are one frame: they only multiply stacks.
    const bool unknown = name == kUnknownFrame;
    if (unknown && last_unknown) continue;
    last_unknown = unknown;
    names.push_back(name);
  }

  std::string key = process.comm;
  const std::vector<PythonFrame>* python = PythonStackAt(process, tid, time_ns);
  if (python == nullptr || python->empty()) {
    if (frames.size() >= static_cast<size_t>(options_.max_depth)) key += ";[truncated]";
    for (const std::string& name : names) {
      key += ';';
      key += name;
    }
  } else {
    SplicePython(*python, names, key);
  }

  if (auto it = folded_.find(key); it != folded_.end()) {
    ++it->second;
  } else if (folded_.size() < options_.max_stacks) {
    folded_.emplace(std::move(key), 1);
  } else {
    ++other_stacks_;
  }
}

void StackSampler::SplicePython(const std::vector<PythonFrame>& python,
                                const std::vector<std::string>& names, std::string& key) {
  // The interpreter loop's native frames, outermost first, and the Python frames each ran:
  // a call of _PyEval_EvalFrameDefault starts at an entry frame and runs the Python calls
  // made from it until one goes through C again.
  std::vector<size_t> evals;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kEvalFrame) evals.push_back(i);
  }
  std::vector<std::pair<size_t, size_t>> groups;  // [begin, end) in `python`
  for (size_t i = 0; i < python.size(); ++i) {
    if (i == 0 || python[i].entry) groups.emplace_back(i, i);
    groups.back().second = i + 1;
  }
  auto append_python = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      key += ';';
      key += python[i].name;
    }
  };
  auto append_native = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      key += ';';
      key += names[i];
    }
  };
  // The native frames above the outermost interpreter loop (main, Py_RunMain, or junk where
  // the frame-pointer chain broke) are left out: the Python frames say where the time went.
  if (!evals.empty() && evals.size() == groups.size()) {
    for (size_t g = 0; g < groups.size(); ++g) {
      append_python(groups[g].first, groups[g].second);
      // The C code between this loop and the next (a builtin calling back into Python).
      append_native(evals[g] + 1, g + 1 < evals.size() ? evals[g + 1] : names.size());
    }
    return;
  }
  // The chain lost or gained interpreter frames: all Python frames, then the native frames
  // inside the innermost interpreter loop (what the Python code was calling).
  append_python(0, python.size());
  size_t inner = evals.empty() ? 0 : evals.back() + 1;
  // Where the chain broke, its outermost frames are junk that resolved to nothing.
  while (inner < names.size() && names[inner] == kUnknownFrame) ++inner;
  append_native(inner, names.size());
}

std::map<std::string, int64_t> StackSampler::TakeFolded() {
  std::map<std::string, int64_t> folded;
  while (!folded_.empty()) {
    auto node = folded_.extract(folded_.begin());
    folded.emplace(std::move(node.key()), node.mapped());
  }
  if (other_stacks_ > 0) folded["[other]"] += std::exchange(other_stacks_, 0);
  return folded;
}

}  // namespace rightsize

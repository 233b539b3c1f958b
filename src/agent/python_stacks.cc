#include "agent/python_stacks.h"

#include <elfutils/libdwfl.h>
#include <fmt/format.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <regex>
#include <utility>

namespace rightsize {
namespace {

// Caps on what one read may follow: a torn read must not send us into huge copies.
constexpr size_t kMaxStringChars = 1024;
constexpr int64_t kMaxLinetableBytes = 1 << 16;
constexpr size_t kMaxInterpreters = 64;
constexpr size_t kMaxThreadStates = 4096;
constexpr size_t kMaxCachedNames = 1 << 15;

template <typename T>
T Field(const std::vector<uint8_t>& buffer, size_t offset) {
  T value{};
  if (offset + sizeof(T) <= buffer.size()) std::memcpy(&value, buffer.data() + offset, sizeof(T));
  return value;
}

void AppendUtf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x110000) {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += '?';
  }
}

struct Interpreter {
  std::string module;  // its file name, for notes
  std::optional<uint64_t> runtime, version, code_type, str_type;
};

int CollectInterpreter(Dwfl_Module* module, void** /*userdata*/, const char* name,
                       Dwarf_Addr /*start*/, void* arg) {
  auto* found = static_cast<std::vector<Interpreter>*>(arg);
  std::string_view base(name == nullptr ? "" : name);
  if (const size_t slash = base.rfind('/'); slash != std::string_view::npos) {
    base.remove_prefix(slash + 1);
  }
  // python3.11, python3.11d, libpython3.11.so.1.0, python2.7; not python_helper.so.
  static const std::regex kInterpreter(R"(^(lib)?python[23](\.[0-9]+)?[a-z]*(\.so.*)?$)");
  if (!std::regex_match(base.begin(), base.end(), kInterpreter)) return DWARF_CB_OK;
  Interpreter interpreter{.module = std::string(base)};
  const int symbols = dwfl_module_getsymtab(module);
  for (int i = 0; i < symbols; ++i) {
    GElf_Sym sym;
    GElf_Addr address = 0;
    const char* symbol =
        dwfl_module_getsym_info(module, i, &sym, &address, nullptr, nullptr, nullptr);
    if (symbol == nullptr || sym.st_shndx == SHN_UNDEF) continue;
    const std::string_view s(symbol);
    if (s == "_PyRuntime") {
      interpreter.runtime = address;
    } else if (s == "Py_Version") {
      interpreter.version = address;
    } else if (s == "PyCode_Type") {
      interpreter.code_type = address;
    } else if (s == "PyUnicode_Type") {
      interpreter.str_type = address;
    }
  }
  found->push_back(std::move(interpreter));
  return DWARF_CB_OK;
}

}  // namespace

int Python311Line(std::string_view linetable, int first_line, int byte_offset) {
  if (byte_offset < 0) return first_line;  // a frame that has not started: CPython says so too
  const auto* table = reinterpret_cast<const uint8_t*>(linetable.data());
  const size_t size = linetable.size();
  size_t pos = 0;
  auto varint = [&]() -> uint32_t {
    if (pos >= size) return 0;
    uint32_t read = table[pos++];
    uint32_t value = read & 63;
    uint32_t shift = 0;
    while ((read & 64) != 0 && pos < size && shift < 24) {
      read = table[pos++];
      shift += 6;
      value |= (read & 63) << shift;
    }
    return value;
  };
  int line = first_line;
  int address = 0;
  while (pos < size) {
    const uint8_t first = table[pos++];
    if ((first & 0x80) == 0) return -1;  // not an entry's start: not a 3.11 table
    const int code = (first >> 3) & 15;
    const int length = ((first & 7) + 1) * 2;  // bytes of bytecode the entry covers
    int delta = 0;
    if (code == 13 || code == 14) {  // no columns / long form: a signed varint line delta
      const uint32_t u = varint();
      delta = (u & 1) != 0 ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
    } else if (code >= 10 && code <= 12) {  // one-line forms
      delta = code - 10;
    }
    while (pos < size && (table[pos] & 0x80) == 0) ++pos;  // the rest of the entry
    line += delta;
    if (byte_offset < address + length) return code == 15 ? -1 : line;
    address += length;
  }
  return -1;
}

PythonStacks::Found PythonStacks::Find(int pid, Dwfl* dwfl) {
  Found found;
  if (dwfl == nullptr) return found;
  std::vector<Interpreter> interpreters;
  dwfl_getmodules(dwfl, &CollectInterpreter, &interpreters, 0);
  if (interpreters.empty()) return found;
  // libpython when the binary links it, else the binary itself.
  auto it = std::find_if(interpreters.begin(), interpreters.end(),
                         [](const Interpreter& i) { return i.runtime.has_value(); });
  const Interpreter& interpreter = it != interpreters.end() ? *it : interpreters.front();
  std::string version;
  uint32_t version_hex = 0;
  if (interpreter.version) {
    iovec local = {.iov_base = &version_hex, .iov_len = sizeof(version_hex)};
    iovec remote = {.iov_base = reinterpret_cast<void*>(*interpreter.version),
                    .iov_len = sizeof(version_hex)};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(version_hex)) {
      version = fmt::format("{}.{}", version_hex >> 24, (version_hex >> 16) & 0xff);
    }
  }
  if (version.empty()) {  // before 3.11 there is no Py_Version: the file name says it
    static const std::regex kVersion(R"(python(\d+\.\d+))");
    std::smatch match;
    if (std::regex_search(interpreter.module, match, kVersion)) version = match[1];
  }
  const std::string python = version.empty() ? "Python" : "Python " + version;
  if (version != "3.11") {
    found.note = python + " frames not supported: native frames only";
    return found;
  }
  // Alphas and betas of 3.11 still changed these structures; release candidates did not.
  if (version_hex != 0 && ((version_hex >> 4) & 0xf) < 0xc) {
    found.note = fmt::format(
        "Python 3.11 pre-release ({:#x}) frames not supported: native "
        "frames only",
        version_hex);
    return found;
  }
  RsPy311Layout layout;
  if (RsPy311GetLayout(&layout) == 0) {
    found.note = python + " frames not supported by this build (no python3.11-dev headers): " +
                 "native frames only";
    return found;
  }
  if (!interpreter.runtime || !interpreter.code_type || !interpreter.str_type) {
    found.note = fmt::format(
        "{} frames not supported: {} has no _PyRuntime, PyCode_Type or PyUnicode_Type symbol: "
        "native frames only",
        python, interpreter.module);
    return found;
  }
  found.stacks.reset(new PythonStacks(pid, *interpreter.runtime, *interpreter.code_type,
                                      *interpreter.str_type, layout,
                                      fmt::format("{} ({})", python, interpreter.module)));
  return found;
}

bool PythonStacks::Read(uint64_t address, void* out, size_t bytes) const {
  if (address == 0) return false;
  iovec local = {.iov_base = out, .iov_len = bytes};
  iovec remote = {.iov_base = reinterpret_cast<void*>(address), .iov_len = bytes};
  return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
}

std::string PythonStacks::ReadString(uint64_t address) const {
  std::vector<uint8_t> header(layout_.str_ascii_data);
  if (!Read(address, header.data(), header.size())) return "";
  if (Field<uint64_t>(header, layout_.object_type) != str_type_) return "";
  const auto length = Field<int64_t>(header, layout_.str_length);
  const auto state = Field<uint32_t>(header, layout_.str_state);
  if (length < 0 || (state & layout_.str_compact_mask) == 0 ||
      (state & layout_.str_ready_mask) == 0) {
    return "";
  }
  const bool ascii = (state & layout_.str_ascii_mask) != 0;
  const uint32_t kind = (state & layout_.str_kind_mask) >> layout_.str_kind_shift;
  if (kind != 1 && kind != 2 && kind != 4) return "";
  const size_t chars = std::min(static_cast<size_t>(length), kMaxStringChars);
  std::vector<uint8_t> data(chars * kind);
  const uint64_t start = address + (ascii ? layout_.str_ascii_data : layout_.str_compact_data);
  if (!data.empty() && !Read(start, data.data(), data.size())) return "";
  std::string out;
  out.reserve(chars);
  for (size_t i = 0; i < chars; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, data.data() + i * kind, kind);  // little-endian, like the target
    AppendUtf8(out, c);
  }
  return out;
}

std::string PythonStacks::FrameName(uint64_t code, uint64_t prev_instr) {
  std::vector<uint8_t> header(layout_.code_code_adaptive);
  if (!Read(code, header.data(), header.size())) return "";
  if (Field<uint64_t>(header, layout_.object_type) != code_type_) return "";
  const auto qualname = Field<uint64_t>(header, layout_.code_qualname);
  const auto filename = Field<uint64_t>(header, layout_.code_filename);
  auto& by_instr = names_[code];
  if (auto it = by_instr.find(prev_instr);
      it != by_instr.end() && it->second.qualname == qualname && it->second.filename == filename) {
    return it->second.name;
  }
  const auto first_line = Field<int32_t>(header, layout_.code_firstlineno);
  const auto linetable = Field<uint64_t>(header, layout_.code_linetable);
  int line = first_line;
  std::vector<uint8_t> size_buffer(layout_.bytes_data);
  if (Read(linetable, size_buffer.data(), size_buffer.size())) {
    const auto table_bytes = Field<int64_t>(size_buffer, layout_.var_size);
    if (table_bytes > 0 && table_bytes <= kMaxLinetableBytes) {
      std::string table(static_cast<size_t>(table_bytes), '\0');
      if (Read(linetable + layout_.bytes_data, table.data(), table.size())) {
        const int64_t offset = static_cast<int64_t>(prev_instr) -
                               static_cast<int64_t>(code + layout_.code_code_adaptive);
        if (offset >= INT32_MIN && offset <= INT32_MAX) {
          line = Python311Line(table, first_line, static_cast<int>(offset));
        }
      }
    }
  }
  std::string function = ReadString(qualname);
  std::string file = ReadString(filename);
  if (const size_t slash = file.rfind('/'); slash != std::string::npos) file.erase(0, slash + 1);
  if (function.empty()) function.push_back('?');  // not = "?": GCC 12 warns falsely
  std::string name = line > 0 ? fmt::format("{} ({}:{})", function, file, line)
                              : fmt::format("{} ({})", function, file);
  std::replace(name.begin(), name.end(), ';', ':');
  std::replace(name.begin(), name.end(), '\n', ' ');
  if (cached_names_ >= kMaxCachedNames) {
    names_.clear();
    cached_names_ = 0;
  }
  ++cached_names_;
  names_[code][prev_instr] = CachedName{.qualname = qualname, .filename = filename, .name = name};
  return name;
}

std::vector<PythonThreadStack> PythonStacks::ReadStacks(size_t max_depth) {
  std::vector<PythonThreadStack> stacks;
  std::vector<uint8_t> frame(layout_.frame_bytes);
  uint64_t interp = 0;
  if (!ReadPointer(runtime_ + layout_.runtime_interpreters_head, &interp)) return stacks;
  for (size_t ni = 0; interp != 0 && ni < kMaxInterpreters; ++ni) {
    uint64_t tstate = 0;
    if (!ReadPointer(interp + layout_.interp_threads_head, &tstate)) break;
    for (size_t nt = 0; tstate != 0 && nt < kMaxThreadStates; ++nt) {
      uint64_t native_tid = 0;
      uint64_t cframe = 0;
      uint64_t current = 0;
      if (!Read(tstate + layout_.tstate_native_thread_id, &native_tid, sizeof(native_tid)) ||
          !ReadPointer(tstate + layout_.tstate_cframe, &cframe)) {
        break;
      }
      PythonThreadStack stack;
      stack.native_tid = static_cast<int>(native_tid);
      if (cframe != 0 && ReadPointer(cframe + layout_.cframe_current_frame, &current)) {
        for (size_t depth = 0; current != 0 && depth < max_depth; ++depth) {
          if (!Read(current, frame.data(), frame.size())) break;
          std::string name = FrameName(Field<uint64_t>(frame, layout_.frame_code),
                                       Field<uint64_t>(frame, layout_.frame_prev_instr));
          if (name.empty()) break;  // not a code object: a torn read
          stack.frames.push_back(
              PythonFrame{.name = std::move(name),
                          .entry = Field<uint8_t>(frame, layout_.frame_is_entry) != 0});
          current = Field<uint64_t>(frame, layout_.frame_previous);
        }
      }
      std::reverse(stack.frames.begin(), stack.frames.end());
      if (!stack.frames.empty()) stacks.push_back(std::move(stack));
      if (!ReadPointer(tstate + layout_.tstate_next, &tstate)) break;
    }
    if (!ReadPointer(interp + layout_.interp_next, &interp)) break;
  }
  return stacks;
}

PythonStackPoller::PythonStackPoller(int frequency_hz, size_t max_depth)
    : frequency_hz_(std::max(frequency_hz, 1)), max_depth_(max_depth) {}

PythonStackPoller::~PythonStackPoller() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void PythonStackPoller::Watch(int pid, std::unique_ptr<PythonStacks> stacks) {
  MutexLock lock(mu_);
  processes_[pid] = std::move(stacks);
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void PythonStackPoller::Forget(int pid) {
  MutexLock lock(mu_);
  processes_.erase(pid);
}

std::vector<PythonSnapshot> PythonStackPoller::Take() {
  MutexLock lock(mu_);
  return std::exchange(pending_, {});
}

void PythonStackPoller::Run() {
  const auto period = std::chrono::nanoseconds(1'000'000'000 / frequency_hz_);
  auto next = std::chrono::steady_clock::now();
  // The last stack of each thread, so an unchanged stack shares its frames.
  std::map<std::pair<int, int>, std::shared_ptr<const std::vector<PythonFrame>>> last;
  MutexLock lock(mu_);
  while (!stop_) {
    std::vector<std::pair<int, std::shared_ptr<PythonStacks>>> processes(processes_.begin(),
                                                                         processes_.end());
    lock.Unlock();
    std::vector<PythonSnapshot> read;
    for (auto& [pid, stacks] : processes) {
      const auto before = std::chrono::steady_clock::now();
      std::vector<PythonThreadStack> threads = stacks->ReadStacks(max_depth_);
      const auto after = std::chrono::steady_clock::now();
      const int64_t time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  (before + (after - before) / 2).time_since_epoch())
                                  .count();
      for (PythonThreadStack& thread : threads) {
        auto& shared = last[{pid, thread.native_tid}];
        if (shared == nullptr || *shared != thread.frames) {
          shared = std::make_shared<const std::vector<PythonFrame>>(std::move(thread.frames));
        }
        read.push_back(PythonSnapshot{
            .time_ns = time_ns, .pid = pid, .tid = thread.native_tid, .frames = shared});
      }
    }
    if (last.size() > kMaxPending) last.clear();
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind (a busy host): do not burst to catch up
    lock.Lock();
    pending_.insert(pending_.end(), std::make_move_iterator(read.begin()),
                    std::make_move_iterator(read.end()));
    if (pending_.size() > kMaxPending) {
      pending_.erase(pending_.begin(),
                     pending_.begin() + static_cast<std::ptrdiff_t>(pending_.size() - kMaxPending));
    }
    while (!stop_ && wake_.WaitUntil(lock, next)) {
    }
  }
}

}  // namespace rightsize

#include "agent/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "core/fd.h"

namespace rightsize {
namespace {

bool ParseHex(std::string_view& text, uint64_t* out) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  if (ec != std::errc() || end == text.data()) return false;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return true;
}

}  // namespace

std::string PerfMap::FrameName(std::string_view name) {
  std::string out;
  // CPython 3.12+: "py::" qualname ":" filename; the file name may itself hold ':'.
  if (name.starts_with("py::")) {
    name.remove_prefix(4);
    const size_t colon = name.find(':');
    if (colon != std::string_view::npos) {
      std::string_view file = name.substr(colon + 1);
      const size_t slash = file.rfind('/');
      if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
      out = std::string(name.substr(0, colon));
      if (!file.empty()) out += " (" + std::string(file) + ")";
    } else {
      out = std::string(name);
    }
  } else {
    out = std::string(name);
  }
  std::replace(out.begin(), out.end(), ';', ':');
  return out;
}

void PerfMap::AddLine(std::string_view line) {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string_view rest = line;
  if (!ParseHex(rest, &start) || rest.empty() || rest.front() != ' ') {
    ++bad_lines_;
    return;
  }
  rest.remove_prefix(1);
  if (!ParseHex(rest, &size) || rest.size() < 2 || rest.front() != ' ' || size == 0 ||
      start + size < start) {
    ++bad_lines_;
    return;
  }
  rest.remove_prefix(1);
  if (entries_.size() >= kMaxEntries && !entries_.contains(start)) {
    truncated_ = true;
    return;
  }
  entries_[start] = Entry{.end = start + size, .name = FrameName(rest)};
}

bool PerfMap::Update() {
  UniqueFd fd(open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return false;
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  bool changed = false;
  if (file_bytes < read_bytes_) {  // rewritten: start over
    entries_.clear();
    read_bytes_ = 0;
    truncated_ = false;
    changed = true;
  }
  if (file_bytes == read_bytes_ || truncated_) return changed;
  const uint64_t want = std::min(file_bytes, kMaxBytes) - std::min(read_bytes_, kMaxBytes);
  if (want == 0) {
    truncated_ = true;
    return changed;
  }
  std::string data(want, '\0');
  const ssize_t n = pread(fd.get(), data.data(), data.size(), static_cast<off_t>(read_bytes_));
  if (n <= 0) return changed;
  data.resize(static_cast<size_t>(n));
  // Only complete lines: the writer may be in the middle of one.
  const size_t last_newline = data.rfind('\n');
  if (last_newline == std::string::npos) return changed;
  std::string_view text(data.data(), last_newline + 1);
  read_bytes_ += last_newline + 1;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) AddLine(line);
  }
  if (read_bytes_ >= kMaxBytes) truncated_ = true;
  return true;
}

const std::string* PerfMap::Lookup(uint64_t address) const {
  auto it = entries_.upper_bound(address);
  if (it == entries_.begin()) return nullptr;
  --it;
  return address < it->second.end ? &it->second.name : nullptr;
}

}  // namespace rightsize

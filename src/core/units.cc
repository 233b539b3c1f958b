#include "core/units.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>

namespace rightsize {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

Status Expected(const char* what, std::string_view got) {
  return Status::BadInput(fmt::format("expected {}, got {}", what, Quote(got)));
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

std::string Quote(std::string_view text) {
  std::string out = "'";
  size_t n = 0;
  for (char c : text) {
    if (++n > 40) {
      out += "…";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<double> ParseDouble(std::string_view text) {
  double v = 0;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

const char* MemoryScopeName(MemoryScope scope) {
  switch (scope) {
    case MemoryScope::kUnknown:
      return "unknown";
    case MemoryScope::kPerCpu:
      return "per_cpu";
    case MemoryScope::kPerNode:
      return "per_node";
    case MemoryScope::kPerJob:
      return "per_job";
    case MemoryScope::kPerGpu:
      return "per_gpu";
  }
  return "unknown";
}

int64_t SizeSuffixBytes(char suffix) {
  switch (suffix) {
    case 'K':
    case 'k':
      return kKiB;
    case 'M':
    case 'm':
      return kMiB;
    case 'G':
    case 'g':
      return kGiB;
    case 'T':
    case 't':
      return kTiB;
    case 'P':
    case 'p':
      return 1024 * kTiB;
    default:
      return 0;
  }
}

StatusOr<std::optional<MemoryAmount>> ParseSlurmMemory(std::string_view text,
                                                       int64_t default_unit_bytes) {
  text = Trim(text);
  if (text.empty()) return std::optional<MemoryAmount>();
  MemoryAmount out;
  std::string_view num = text;
  // Old sacct: trailing c (per CPU) or n (per node) after the unit.
  if (num.back() == 'c' || num.back() == 'n') {
    out.scope = num.back() == 'c' ? MemoryScope::kPerCpu : MemoryScope::kPerNode;
    num.remove_suffix(1);
  }
  int64_t unit = num.empty() ? 0 : SizeSuffixBytes(num.back());
  if (unit != 0) {
    num.remove_suffix(1);
  } else {
    unit = default_unit_bytes;
  }
  auto value = ParseDouble(num);
  if (!value || *value < 0) return Expected("a memory size like 4000M, 4G or 2.50T", text);
  double mib = *value * static_cast<double>(unit) / static_cast<double>(kMiB);
  // SLURM <= 17 stored "per CPU" as bit 31 of the MiB value (MEM_PER_CPU); some sacct builds
  // print that raw. No real node has 2 PiB of memory, so the bit is unambiguous.
  constexpr double kMemPerCpuFlag = 2147483648.0;
  if (unit == kMiB && mib >= kMemPerCpuFlag && mib < 2 * kMemPerCpuFlag) {
    mib -= kMemPerCpuFlag;
    out.scope = MemoryScope::kPerCpu;
  }
  double bytes = mib * static_cast<double>(kMiB);
  if (bytes > 9.0e18) return Expected("a memory size below 8 EiB", text);
  out.bytes = static_cast<int64_t>(std::llround(bytes));
  return std::optional<MemoryAmount>(out);
}

StatusOr<std::optional<SlurmDuration>> ParseSlurmDuration(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::optional<SlurmDuration>();
  SlurmDuration d;
  if (EqualsIgnoreCase(text, "UNLIMITED") || EqualsIgnoreCase(text, "INFINITE")) {
    d.kind = SlurmDuration::Kind::kUnlimited;
    return std::optional<SlurmDuration>(d);
  }
  if (EqualsIgnoreCase(text, "Partition_Limit")) {
    d.kind = SlurmDuration::Kind::kPartitionLimit;
    return std::optional<SlurmDuration>(d);
  }
  if (EqualsIgnoreCase(text, "INVALID")) {
    d.kind = SlurmDuration::Kind::kInvalid;
    return std::optional<SlurmDuration>(d);
  }
  const char* kWhat = "a duration like 1-02:03:04, 02:03:04, 03:04.567 or UNLIMITED";
  std::string_view rest = text;
  int64_t days = 0;
  bool has_days = false;
  if (auto dash = rest.find('-'); dash != std::string_view::npos) {
    auto v = ParseInt(rest.substr(0, dash));
    if (!v || *v < 0) return Expected(kWhat, text);
    days = *v;
    has_days = true;
    rest = rest.substr(dash + 1);
  }
  // Split on ':' into at most three parts.
  std::string_view parts[3];
  int n = 0;
  while (true) {
    auto colon = rest.find(':');
    if (n == 3) return Expected(kWhat, text);
    parts[n++] = rest.substr(0, colon);
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  double fields[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    // Only the last part may have a fraction (MM:SS.mmm).
    auto v = (i == n - 1) ? ParseDouble(parts[i]) : std::optional<double>();
    if (i != n - 1) {
      auto iv = ParseInt(parts[i]);
      if (iv) v = static_cast<double>(*iv);
    }
    if (!v || *v < 0) return Expected(kWhat, text);
    fields[i] = *v;
  }
  double seconds = 0;
  if (has_days) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    seconds = fields[0] * 3600 + (n > 1 ? fields[1] * 60 : 0) + (n > 2 ? fields[2] : 0);
  } else if (n == 3) {
    seconds = fields[0] * 3600 + fields[1] * 60 + fields[2];
  } else if (n == 2) {
    seconds = fields[0] * 60 + fields[1];
  } else {
    seconds = fields[0];
  }
  d.seconds = static_cast<double>(days) * 86400 + seconds;
  return std::optional<SlurmDuration>(d);
}

StatusOr<std::optional<int64_t>> ParseSlurmTimestamp(std::string_view text) {
  text = Trim(text);
  if (text.empty() || EqualsIgnoreCase(text, "None") || EqualsIgnoreCase(text, "Unknown") ||
      text == "0") {
    return std::optional<int64_t>();
  }
  if (auto v = ParseInt(text)) return std::optional<int64_t>(*v);
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != ' ') || text[13] != ':' || text[16] != ':') {
    return Expected("a time like 2023-08-31T12:29:47", text);
  }
  auto num = [&](size_t pos, size_t len) { return ParseInt(text.substr(pos, len)); };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       s = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !s || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 ||
      *mi > 59 || *s > 60) {
    return Expected("a time like 2023-08-31T12:29:47", text);
  }
  // The seconds timegm gives (a day past the month's end, such as 02-31, counts on into the
  // next month; second 60 is the next minute's 0), by calendar arithmetic instead of libc's
  // normalising of a struct tm, at a fraction of its cost: every sacct line has three.
  using namespace std::chrono;
  const sys_days day = year_month_day(year(static_cast<int>(*y)), month(static_cast<unsigned>(*mo)),
                                      std::chrono::day(static_cast<unsigned>(*d)));
  return std::optional<int64_t>(int64_t{day.time_since_epoch().count()} * 86400 + *h * 3600 +
                                *mi * 60 + *s);
}

std::string FormatTimestamp(int64_t unix_s) {
  auto t = static_cast<time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  auto total = static_cast<int64_t>(std::llround(seconds));
  int64_t days = total / 86400;
  int64_t h = (total / 3600) % 24, m = (total / 60) % 60, s = total % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, h, m, s);
  return fmt::format("{:02}:{:02}:{:02}", h, m, s);
}

std::string FormatMemory(int64_t bytes) {
  if (bytes <= 0) return "0";
  struct Unit {
    int64_t size;
    char suffix;
  };
  const Unit units[] = {{kTiB, 'T'}, {kGiB, 'G'}, {kMiB, 'M'}, {kKiB, 'K'}};
  for (const auto& u : units) {
    if (bytes >= u.size) {
      double v = static_cast<double>(bytes) / static_cast<double>(u.size);
      if (v >= 100 || std::fabs(v - std::round(v)) < 0.05) {
        return fmt::format("{}{}", static_cast<int64_t>(std::ceil(v - 0.05)), u.suffix);
      }
      return fmt::format("{:.1f}{}", std::ceil(v * 10) / 10, u.suffix);
    }
  }
  return fmt::format("{}", bytes);
}

std::string FormatThousands(double value, int decimals) {
  if (!std::isfinite(value)) return "unknown";
  std::string s = fmt::format("{:.{}f}", std::fabs(value), decimals);
  size_t dot = s.find('.');
  std::string int_part = s.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string out;
  for (size_t i = 0; i < int_part.size(); ++i) {
    if (i > 0 && (int_part.size() - i) % 3 == 0) out += ',';
    out += int_part[i];
  }
  bool negative = value < 0 && std::stod(s) != 0;
  return (negative ? "-" : "") + out + frac;
}

int64_t RoundMemoryRequest(double bytes) {
  if (!(bytes > 0)) bytes = 0;
  double step = bytes < 4.0 * static_cast<double>(kGiB) ? 256.0 * static_cast<double>(kMiB)
                                                        : static_cast<double>(kGiB);
  // A hair above a step (floating-point noise from a product) does not take the next one.
  double steps = std::max(1.0, std::ceil(bytes / step - 1e-9));
  return static_cast<int64_t>(steps * step);
}

int64_t RoundTimeRequest(double seconds) {
  if (!(seconds > 0)) seconds = 0;
  return static_cast<int64_t>(std::max(1.0, std::ceil(seconds / 60 - 1e-9))) * 60;
}

int64_t RoundCpuRequest(double cores) {
  if (!(cores > 0)) cores = 0;
  return static_cast<int64_t>(std::max(1.0, std::ceil(cores - 1e-9)));
}

std::string MemoryFlagValue(int64_t bytes) {
  if (bytes <= 0) return "0";
  if (bytes % kGiB == 0) return fmt::format("{}G", bytes / kGiB);
  return fmt::format("{}M", (bytes + kMiB - 1) / kMiB);
}

std::string TimeFlagValue(double seconds) {
  if (!(seconds > 0)) seconds = 0;
  auto minutes = static_cast<int64_t>(std::ceil(seconds / 60 - 1e-9));
  return FormatDuration(static_cast<double>(minutes * 60));
}

std::string HumanBytes(double bytes) {
  if (!(bytes > 0)) bytes = 0;
  if (bytes >= static_cast<double>(kGiB)) return fmt::format("{:.2f} GiB", bytes / kGiB);
  return fmt::format("{:.1f} MiB", bytes / kMiB);
}

StatusOr<TresSummary> SummarizeTres(std::string_view text, int64_t default_mem_unit_bytes) {
  TresSummary s;
  int typed_gpus = 0;
  text = Trim(text);
  // Walks the items in place (no allocation: this runs for several fields of every sacct line).
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Expected("a TRES item like cpu=4 or gres/gpu:a100=2", item);
    }
    struct {
      std::string_view name, value;
    } it{item.substr(0, eq), item.substr(eq + 1)};
    auto fail = [&](const Status& st) {
      return st.WithContext("TRES item " + std::string(it.name));
    };
    if (it.name == "cpu") {
      if (auto v = ParseDouble(it.value)) {
        s.cpus = *v;
      } else {
        // In TRESUsage* the cpu item is a CPU time ("15:33:58").
        auto d = ParseSlurmDuration(it.value);
        if (!d.ok()) return fail(d.status());
        if (d->has_value() && (*d)->kind == SlurmDuration::Kind::kValue) {
          s.cpu_seconds = (*d)->seconds;
        }
      }
    } else if (it.name == "mem") {
      auto m = ParseSlurmMemory(it.value, default_mem_unit_bytes);
      if (!m.ok()) return fail(m.status());
      if (m->has_value()) s.memory_bytes = (*m)->bytes;
    } else if (it.name == "node") {
      auto v = ParseInt(it.value);
      if (!v) return fail(Expected("a node count", it.value));
      s.nodes = static_cast<int>(*v);
    } else if (it.name == "gres/gpu") {
      auto v = ParseInt(it.value);
      if (!v) return fail(Expected("a GPU count", it.value));
      s.gpus = static_cast<int>(*v);
    } else if (it.name.substr(0, 9) == "gres/gpu:") {
      auto v = ParseInt(it.value);
      if (!v) return fail(Expected("a GPU count", it.value));
      std::string_view type = it.name.substr(9);
      if (s.gpu_type.empty()) {
        s.gpu_type = std::string(type);
      } else if (s.gpu_type != type) {
        s.gpu_type = "mixed";
      }
      typed_gpus += static_cast<int>(*v);
    } else if (it.name == "gres/gpumem") {
      auto m = ParseSlurmMemory(it.value, 1);
      if (!m.ok()) return fail(m.status());
      if (m->has_value()) s.gpu_memory_bytes = (*m)->bytes;
    } else if (it.name == "gres/gpuutil") {
      auto v = ParseDouble(it.value);
      if (!v) return fail(Expected("a GPU utilisation in percent", it.value));
      s.gpu_util_pct = *v;
    } else if (it.name == "fs/disk") {
      auto m = ParseSlurmMemory(it.value, 1);
      if (!m.ok()) return fail(m.status());
      if (m->has_value()) s.disk_bytes = (*m)->bytes;
    }
  }
  if (!s.gpus && typed_gpus > 0) s.gpus = typed_gpus;
  return s;
}

StatusOr<JobIdParts> ParseJobId(std::string_view text) {
  text = Trim(text);
  const char* kWhat = "a job id like 123, 123_4, 123+1 or 123.batch";
  JobIdParts out;
  std::string_view job = text;
  // The step follows the first '.' after any bracketed array spec.
  size_t bracket_end = job.find(']');
  size_t dot = job.find('.', bracket_end == std::string_view::npos ? 0 : bracket_end);
  if (dot != std::string_view::npos) {
    out.step = std::string(job.substr(dot + 1));
    job = job.substr(0, dot);
    if (out.step.empty()) return Expected(kWhat, text);
  }
  size_t i = 0;
  while (i < job.size() && job[i] >= '0' && job[i] <= '9') ++i;
  auto base = ParseInt(job.substr(0, i));
  if (!base) return Expected(kWhat, text);
  out.base = *base;
  std::string_view rest = job.substr(i);
  if (!rest.empty() && rest.front() == '_') {
    rest.remove_prefix(1);
    if (!rest.empty() && rest.front() == '[') {
      if (rest.back() != ']') return Expected(kWhat, text);
      out.array_spec = std::string(rest);
    } else {
      auto task = ParseInt(rest);
      if (!task || *task < 0) return Expected(kWhat, text);
      out.array_task = *task;
    }
  } else if (!rest.empty() && rest.front() == '+') {
    rest.remove_prefix(1);
    auto off = ParseInt(rest);
    if (!off || *off < 0) return Expected(kWhat, text);
    out.het_offset = static_cast<int>(*off);
  } else if (!rest.empty()) {
    return Expected(kWhat, text);
  }
  out.job = std::string(job);
  return out;
}

}  // namespace rightsize

namespace rightsize {
StatusOr<int64_t> ParseTimeSpec(std::string_view text, int64_t now_s) {
  text = Trim(text);
  const char* kWhat = "a time like 14d, 12h, 2w, 2024-01-31 or 2024-01-31T08:00:00";
  if (text.size() >= 2) {
    int64_t unit = 0;
    switch (text.back()) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      case 'w':
        unit = int64_t{7} * 86400;
        break;
      default:
        break;
    }
    if (unit != 0) {
      auto n = ParseInt(text.substr(0, text.size() - 1));
      if (n && *n >= 0) return now_s - *n * unit;
    }
  }
  if (text.size() == 10) {
    auto t = ParseSlurmTimestamp(std::string(text) + "T00:00:00");
    if (t.ok() && t->has_value()) return **t;
  }
  auto t = ParseSlurmTimestamp(text);
  if (t.ok() && t->has_value() && text.find('-') != std::string_view::npos) return **t;
  return Status::InvalidArgument(fmt::format("expected {}, got {}", kWhat, Quote(text)));
}
void Split(std::string_view line, std::string_view delim, std::vector<std::string_view>* out) {
  out->clear();
  size_t pos = 0;
  while (true) {
    size_t next = line.find(delim, pos);
    if (next == std::string_view::npos) {
      out->push_back(line.substr(pos));
      return;
    }
    out->push_back(line.substr(pos, next - pos));
    pos = next + delim.size();
  }
}

std::vector<std::string_view> Split(std::string_view line, std::string_view delim) {
  std::vector<std::string_view> out;
  Split(line, delim, &out);
  return out;
}

}  // namespace rightsize

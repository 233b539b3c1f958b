#include "agent/rapl.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace rightsize {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);
  if (in.bad()) return std::nullopt;
  return text;
}

// "intel-rapl:0" but not "intel-rapl:0:1" (a sub-zone) nor "intel-rapl" (the control type).
bool IsTopLevelZone(const std::string& name) {
  constexpr std::string_view kPrefix = "intel-rapl:";
  if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

CpuEnergyMeter::CpuEnergyMeter(std::string powercap_root, std::string proc_root,
                               int64_t clock_ticks)
    : proc_root_(std::move(proc_root)),
      clock_ticks_(static_cast<double>(clock_ticks > 0 ? clock_ticks : sysconf(_SC_CLK_TCK))) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(powercap_root, ec)) {
    status_ = fmt::format("RAPL absent: {} does not exist", powercap_root);
    return;
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(powercap_root, ec)) {
    std::string name = entry.path().filename().string();
    if (IsTopLevelZone(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> unreadable;
  std::string found;
  for (const std::string& name : names) {
    std::string dir = powercap_root + "/" + name;
    std::optional<std::string> zone_name = ReadSmallFile(dir + "/name");
    if (!zone_name || zone_name->rfind("package", 0) != 0) continue;  // psys: contains packages
    Zone z;
    z.dir = dir;
    z.last_uj = ReadCounter(dir, "energy_uj");
    z.max_range_uj = ReadCounter(dir, "max_energy_range_uj").value_or(0);
    if (!z.last_uj || z.max_range_uj == 0) {
      unreadable.push_back(name);
      continue;
    }
    found += fmt::format("{}{}", found.empty() ? "" : ", ", name);
    zones_.push_back(std::move(z));
  }
  if (!zones_.empty()) {
    status_ =
        fmt::format("RAPL: {} package{} ({})", zones_.size(), zones_.size() == 1 ? "" : "s", found);
    last_busy_s_ = NodeBusyS();
  } else if (!unreadable.empty()) {
    status_ =
        fmt::format("RAPL absent: {}/{}/energy_uj cannot be read (root only since Linux 5.10)",
                    powercap_root, unreadable.front());
  } else {
    status_ = fmt::format("RAPL absent: {} has no intel-rapl package zone", powercap_root);
  }
}

std::optional<uint64_t> CpuEnergyMeter::ReadCounter(const std::string& dir,
                                                    const char* file) const {
  std::optional<std::string> text = ReadSmallFile(dir + "/" + file);
  if (!text) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end == text->data()) return std::nullopt;
  return v;
}

std::optional<double> CpuEnergyMeter::NodeBusyS() const {
  std::optional<std::string> line = ReadSmallFile(proc_root_ + "/stat");
  if (!line || line->rfind("cpu ", 0) != 0) return std::nullopt;
  std::istringstream in(line->substr(4));
  // user nice system idle iowait irq softirq steal: idle and iowait are not work.
  uint64_t f[8] = {};
  for (uint64_t& v : f) {
    if (!(in >> v)) return std::nullopt;
  }
  const uint64_t busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  return static_cast<double>(busy) / clock_ticks_;
}

std::optional<CpuEnergyMeter::Interval> CpuEnergyMeter::Read() {
  if (zones_.empty()) return std::nullopt;
  Interval out;
  for (Zone& z : zones_) {
    std::optional<uint64_t> now = ReadCounter(z.dir, "energy_uj");
    if (now && z.last_uj && *now <= z.max_range_uj && *z.last_uj <= z.max_range_uj) {
      // Below the last reading: the counter wrapped at max_energy_range_uj.
      const uint64_t delta =
          *now >= *z.last_uj ? *now - *z.last_uj : z.max_range_uj - *z.last_uj + *now;
      out.package_j += static_cast<double>(delta) / 1e6;
    }
    z.last_uj = now;  // an unreadable reading restarts the zone's baseline
  }
  std::optional<double> busy = NodeBusyS();
  std::optional<double> last = std::exchange(last_busy_s_, busy);
  if (!busy || !last) return std::nullopt;
  out.node_cpu_s = std::max(0.0, *busy - *last);
  return out;
}

double CpuEnergyMeter::JobShareJ(const Interval& interval, double job_cpu_s) {
  if (interval.node_cpu_s <= 0 || job_cpu_s <= 0) return 0;
  return interval.package_j * std::min(1.0, job_cpu_s / interval.node_cpu_s);
}

}  // namespace rightsize

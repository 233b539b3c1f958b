// CPU package energy from RAPL (Intel, and AMD since Zen through the same driver), read through
// the kernel's powercap interface, with the node's busy CPU time over the same interval so a
// job's share can be apportioned by its CPU time (JobMonitor).
//
// The zones read are the top-level package zones, `<powercap>/intel-rapl:N` whose `name` is
// "package-N": their sub-zones (core, uncore, dram) are parts of the package, and "psys" (the
// whole SoC on laptops) contains it, so adding either would count energy twice. Each zone's
// `energy_uj` is a counter in microjoules that wraps at `max_energy_range_uj`; a reading below
// the last one is a wrap, and the interval's energy is what was left to the range plus the new
// reading. No zone, no powercap folder, or counters that cannot be read (root-only since Linux
// 5.10): the meter is not available() and status() says why, starting "RAPL absent" so the
// agent's log and `rightsize run --json` say it rather than reporting 0.
//
// Both roots are parameters (STYLE.md rule 9): tests lay out a fixture tree exactly like sysfs
// and procfs. Not thread-safe: one owner reads it once per cycle.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rightsize {

class CpuEnergyMeter {
 public:
  // Finds the package zones and takes the first reading (the baseline of the first interval).
  explicit CpuEnergyMeter(std::string powercap_root = "/sys/class/powercap",
                          std::string proc_root = "/proc", int64_t clock_ticks = 0);

  bool available() const { return !zones_.empty(); }
  // "RAPL: 2 packages (intel-rapl:0, intel-rapl:1)" or "RAPL absent: /sys/class/powercap does
  // not exist".
  const std::string& status() const { return status_; }

  // What happened since the last Read() (or since construction): the packages' joules and the
  // node's busy CPU seconds (user, nice, system, irq, softirq, steal from /proc/stat). nullopt
  // when not available, or when /proc/stat cannot be read.
  struct Interval {
    double package_j = 0;
    double node_cpu_s = 0;
  };
  std::optional<Interval> Read();

  // The job's share of an interval's package energy: package_j x job_cpu_s / node_cpu_s, at
  // most all of it (the job's and the node's CPU time are read a moment apart); 0 on an idle
  // node.
  static double JobShareJ(const Interval& interval, double job_cpu_s);

 private:
  struct Zone {
    std::string dir;
    uint64_t max_range_uj = 0;
    std::optional<uint64_t> last_uj;
  };
  std::optional<uint64_t> ReadCounter(const std::string& dir, const char* file) const;
  std::optional<double> NodeBusyS() const;

  std::string proc_root_;
  double clock_ticks_;
  std::vector<Zone> zones_;
  std::optional<double> last_busy_s_;
  std::string status_;
};

}  // namespace rightsize

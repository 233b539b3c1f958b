// ProcFs: what the kernel says about processes, read from /proc or from a fixture tree with the
// same layout (tests), so no logic here reads the real /proc directly (STYLE.md rule 9).
//
// Every reader returns nullopt when the process is gone (it may vanish between listing and
// reading: that is normal) or when its entry is garbage. Garbage — a field that does not
// parse, a negative or absurd value (more CPU time than a century, more memory than a PiB) —
// is rejected and counted in rejected(), never trusted. Not thread-safe: one owner.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/fd.h"

namespace rightsize {

struct ProcStat {
  int64_t pid = 0;
  int64_t ppid = 0;
  std::string comm;
  char state = '?';
  double user_s = 0;    // utime
  double system_s = 0;  // stime
  int64_t threads = 0;
  int64_t start_ticks = 0;  // since boot, in clock ticks: with pid, identifies a process
  int64_t rss_bytes = 0;
  int64_t minor_faults = 0, major_faults = 0;
};

struct ProcMemory {
  std::optional<int64_t> rss_bytes, peak_rss_bytes, swap_bytes;  // VmRSS, VmHWM, VmSwap
  std::optional<int64_t> pss_bytes;                              // smaps_rollup, when readable
};

struct ProcIo {
  std::optional<int64_t> read_bytes, write_bytes;  // storage I/O (read_bytes/write_bytes)
};

// A network namespace's traffic, summed over its interfaces except loopback (/proc/PID/net/dev).
struct NetCounters {
  int64_t rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
};

class ProcFs {
 public:
  // `root` is "/proc" or a fixture; clock ticks and page size are the kernel's (sysconf).
  explicit ProcFs(std::string root = "/proc", int64_t clock_ticks = 0, int64_t page_bytes = 0);

  ProcFs(const ProcFs&) = delete;
  ProcFs& operator=(const ProcFs&) = delete;

  // Lists the processes; with keep_stat_open, also closes the kept stat files of those gone.
  std::vector<int64_t> Pids();
  std::optional<ProcStat> Stat(int64_t pid);
  // Nanoseconds the process's main thread has spent on a CPU (/proc/PID/schedstat): a quarter
  // of the cost of stat, so the agent asks it first whether a single-threaded process ran at
  // all since its last stat. nullopt when unreadable (no CONFIG_SCHED_INFO) or malformed.
  std::optional<int64_t> RunNs(int64_t pid);
  // The agent reads every process's stat (or schedstat) every second and its io every fifth:
  // keeping these files open and re-reading them from the start saves the path walk, open and
  // close of each read (at most kMaxOpenStats files, and never more than a quarter of the
  // process's file limit; beyond, files are opened for each read).
  void set_keep_stat_open(bool keep);
  static constexpr size_t kMaxOpenStats = 4096;
  std::optional<ProcMemory> Memory(int64_t pid, bool with_pss = false);
  std::optional<ProcIo> Io(int64_t pid);
  // One variable of the process's initial environment (SLURM_JOB_ID), when readable.
  std::optional<std::string> Environ(int64_t pid, const std::string& name);
  // The process's cgroup path: the v2 entry ("0::/…"), else the v1 memory controller's.
  std::optional<std::string> Cgroup(int64_t pid);
  // The process's network namespace ("net:[4026531840]"), when readable; pid 0: this process's.
  std::optional<std::string> NetNamespace(int64_t pid);
  // The traffic of the process's network namespace; nullopt when unreadable or malformed
  // (a line whose counters are not numbers is rejected and counted, not trusted).
  std::optional<NetCounters> NetDev(int64_t pid);
  // Where one of the process's links points: "fd/1" (its stdout: a SLURM job's slurm-N.out),
  // "cwd". nullopt when unreadable or gone.
  std::optional<std::string> Link(int64_t pid, const char* what);
  // OOM kills on the node since boot (/proc/vmstat's oom_kill, Linux 4.13+): the kernel's OOM
  // killer, whatever cgroup (or none) the victim was in.
  std::optional<int64_t> NodeOomKills();
  // The real user id (the first field of status's Uid line), when readable.
  std::optional<int64_t> Uid(int64_t pid);
  // Open file descriptors (entries of /proc/PID/fd), when readable.
  std::optional<int64_t> OpenFiles(int64_t pid);

  // The most recently created pid (/proc/loadavg's last field): unchanged, no process was
  // created since. nullopt when it cannot be trusted for `root` (another pid namespace's /proc,
  // a fixture without a `self` link to this process) or is unreadable.
  std::optional<int64_t> LastPid();

  // Seconds since boot (/proc/uptime), the clock processes' start times count on.
  std::optional<double> Uptime();
  // How long ago the process started, given Uptime(); nullopt when its start is after it.
  std::optional<double> AgeS(const ProcStat& st, double uptime_s) const;

  // `root` and every descendant alive now (children found through ppid).
  std::vector<ProcStat> Tree(int64_t root);

  int64_t rejected() const { return rejected_; }
  const std::string& root() const { return root_; }

 private:
  std::optional<std::string> Read(int64_t pid, const char* file, size_t max_bytes = 64 << 10);
  std::optional<std::string> ReadPath(const std::string& path, size_t max_bytes);
  // The files re-read every few seconds, kept open per process while keep_stat_open is on.
  enum KeptFile { kStat = 0, kSchedStat = 1, kIo = 2 };
  static constexpr size_t kKeptFiles = 3;
  // Reads the file into buf (0: gone, unreadable, or as large as buf: garbage, counted).
  size_t ReadKept(int64_t pid, KeptFile which, char* buf, size_t size);
  void CloseKept(std::array<UniqueFd, kKeptFiles>& fds);
  std::string root_;
  bool proc_fs_ = false;  // root_ is a kernel proc file system, not a fixture tree
  bool keep_stat_open_ = false;
  size_t max_open_stats_ = 0;  // files, not processes
  size_t kept_files_ = 0;
  std::optional<bool> same_pid_namespace_;  // see LastPid(); decided once
  std::unordered_map<int64_t, std::array<UniqueFd, kKeptFiles>> kept_;  // pid -> fds (or empty)
  int64_t clock_ticks_;
  int64_t page_bytes_;
  int64_t rejected_ = 0;
};

// Parses one /proc/PID/stat line (the command name may hold spaces and parentheses). nullopt
// when it is malformed or its numbers are out of range.
std::optional<ProcStat> ParseProcStat(std::string_view text, int64_t clock_ticks,
                                      int64_t page_bytes);

}  // namespace rightsize

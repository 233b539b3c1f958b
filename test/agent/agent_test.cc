#include "agent/agent.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/cgroup.h"
#include "agent/exits.h"
#include "agent/monitor.h"
#include "agent/proc.h"
#include "agent/series.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;

// A fixture tree of /proc or /sys/fs/cgroup files.
class Tree {
 public:
  Tree() {
    root_ = fs::temp_directory_path() /
            ("rs_agent_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(root_);
  }
  ~Tree() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) const {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
  static inline int counter_ = 0;
};

// A /proc/PID/stat line: utime/stime in ticks (100/s), rss in pages (4 KiB).
std::string StatLine(int pid, const std::string& comm, int ppid, int64_t utime, int stime, int rss,
                     int threads = 1) {
  return std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) +
         " 1 1 0 -1 4194560 500 0 2 0 " + std::to_string(utime) + " " + std::to_string(stime) +
         " 0 0 20 0 " + std::to_string(threads) + " 0 12345 1000000 " + std::to_string(rss) +
         " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
}

TEST(ProcTest, ParsesStatIncludingOddCommandNames) {
  auto st = ParseProcStat(StatLine(42, "my (weird) proc", 1, 250, 50, 1000, 3), 100, 4096);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->pid, 42);
  EXPECT_EQ(st->comm, "my (weird) proc");
  EXPECT_EQ(st->ppid, 1);
  EXPECT_DOUBLE_EQ(st->user_s, 2.5);
  EXPECT_DOUBLE_EQ(st->system_s, 0.5);
  EXPECT_EQ(st->threads, 3);
  EXPECT_EQ(st->rss_bytes, 1000 * 4096);
  EXPECT_FALSE(ParseProcStat("garbage", 100, 4096).has_value());
  EXPECT_FALSE(ParseProcStat("42 (x) S 1 2 3", 100, 4096).has_value());
  // A century of CPU time, or negative memory, is not a measurement.
  EXPECT_FALSE(ParseProcStat(StatLine(42, "x", 1, 900000000000, 0, 10), 100, 4096).has_value());
  EXPECT_FALSE(ParseProcStat(StatLine(42, "x", 1, 1, 0, -5), 100, 4096).has_value());
}

TEST(ProcTest, FixtureTreeGivesTheJobsProcessesAndRejectsGarbage) {
  Tree t;
  t.Write("100/stat", StatLine(100, "bash", 1, 10, 0, 500));
  t.Write("101/stat", StatLine(101, "python", 100, 300, 20, 25000, 8));
  t.Write("102/stat", StatLine(102, "other", 1, 5, 0, 100));
  t.Write("103/stat", StatLine(103, "grandchild", 101, 1, 0, 100));
  t.Write("104/stat", "104 (evil) S 101 not numbers at all\n");
  t.Write("101/status", "Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nVmSwap:\t0 kB\n");
  t.Write("101/io", "rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 8192\n");
  t.Write("101/environ", std::string("PATH=/bin\0SLURM_JOB_ID=777\0", 28));
  t.Write("101/cgroup", "12:memory:/slurm/uid_1000/job_777/step_0\n11:cpuacct,cpu:/slurm\n");
  t.Write("100/cgroup", "0::/system.slice/slurmstepd.scope/job_778/step_batch\n");
  ProcFs proc(t.path(), 100, 4096);
  auto tree = proc.Tree(100);
  std::set<int64_t> pids;
  for (const auto& p : tree) pids.insert(p.pid);
  EXPECT_EQ(pids, (std::set<int64_t>{100, 101, 103}));
  EXPECT_GE(proc.rejected(), 1);  // 104's stat
  auto mem = proc.Memory(101);
  ASSERT_TRUE(mem.has_value());
  EXPECT_EQ(mem->rss_bytes, 102400 * 1024);
  EXPECT_EQ(mem->peak_rss_bytes, 204800 * 1024);
  auto io = proc.Io(101);
  ASSERT_TRUE(io.has_value());
  EXPECT_EQ(io->read_bytes, 4096);
  EXPECT_EQ(io->write_bytes, 8192);
  EXPECT_EQ(proc.Environ(101, "SLURM_JOB_ID"), "777");
  EXPECT_EQ(proc.Cgroup(101), "/slurm/uid_1000/job_777/step_0");
  EXPECT_EQ(proc.Cgroup(100), "/system.slice/slurmstepd.scope/job_778/step_batch");
  EXPECT_FALSE(proc.Stat(999).has_value());  // gone: not an error
}

// A pod's network namespace: its interfaces' traffic, loopback left out; a garbled line is
// rejected, not read as traffic; the real /proc names namespaces so the monitor can tell a job
// with its own namespace from one that shares the host's (whose counters are the node's).
TEST(ProcTest, NetworkCountersOfTheJobsNamespace) {
  Tree t;
  const char* header =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
      "drop fifo colls carrier compressed\n";
  t.Write("200/net/dev", std::string(header) +
                             "    lo: 5000 50 0 0 0 0 0 0 5000 50 0 0 0 0 0 0\n"
                             "  eth0: 1000000 700 0 0 0 0 0 0 250000 300 0 0 0 0 0 0\n"
                             "  eth1: 24 1 0 0 0 0 0 0 76 2 0 0 0 0 0 0\n");
  t.Write("201/net/dev", std::string(header) + "  eth0: 12 abc 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n");
  ProcFs proc(t.path(), 100, 4096);
  auto net = proc.NetDev(200);
  ASSERT_TRUE(net.has_value());
  EXPECT_EQ(net->rx_bytes, 1000024);
  EXPECT_EQ(net->tx_bytes, 250076);
  EXPECT_EQ(net->rx_packets, 701);
  EXPECT_EQ(net->tx_packets, 302);
  int64_t before = proc.rejected();
  EXPECT_FALSE(proc.NetDev(201).has_value());
  EXPECT_EQ(proc.rejected(), before + 1);
  ProcFs real;
  auto self = real.NetNamespace(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->rfind("net:[", 0), 0u) << *self;
}

// The agent keeps each process's stat file open between cycles: the figures still move, and a
// process that exits (its pid possibly reused) is read as gone, not as its old self.
TEST(ProcTest, KeptOpenStatFilesStayCurrentAndForgetExitedProcesses) {
  ProcFs proc;
  proc.set_keep_stat_open(true);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile double x = 0;
    for (;;) x = x + 1;  // spins until killed
  }
  auto first = proc.Stat(child);
  ASSERT_TRUE(first.has_value());
  usleep(300000);
  auto second = proc.Stat(child);
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->user_s + second->system_s, first->user_s + first->system_s);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(proc.Stat(child).has_value());
  auto self = proc.Stat(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->pid, getpid());
  (void)proc.Pids();  // closes what is gone; still reads the living
  EXPECT_TRUE(proc.Stat(getpid()).has_value());
}

// schedstat's run time moves for a process that runs and stands still for one that sleeps (what
// the agent relies on to skip a sleeper's stat); a garbage entry is rejected and counted.
TEST(ProcTest, RunTimeMovesOnlyForAProcessThatRuns) {
  ProcFs proc;
  proc.set_keep_stat_open(true);
  pid_t spinner = fork();
  ASSERT_GE(spinner, 0);
  if (spinner == 0) {
    volatile double x = 0;
    for (;;) x = x + 1;
  }
  pid_t sleeper = fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  usleep(100000);
  auto spin0 = proc.RunNs(spinner), sleep0 = proc.RunNs(sleeper);
  usleep(300000);
  auto spin1 = proc.RunNs(spinner), sleep1 = proc.RunNs(sleeper);
  kill(spinner, SIGKILL);
  kill(sleeper, SIGKILL);
  waitpid(spinner, nullptr, 0);
  waitpid(sleeper, nullptr, 0);
  ASSERT_TRUE(spin0 && spin1 && sleep0 && sleep1);
  EXPECT_GT(*spin1 - *spin0, 10'000'000);  // > 10 ms of the 300 ms, even on a busy machine
  EXPECT_EQ(*sleep1, *sleep0);
  EXPECT_FALSE(proc.RunNs(spinner).has_value());  // gone

  Tree t;
  t.Write("7/schedstat", "-5 0 0\n");
  t.Write("8/schedstat", "123456789 42 7\n");
  ProcFs fixture(t.path(), 100, 4096);
  EXPECT_FALSE(fixture.RunNs(7).has_value());
  EXPECT_EQ(fixture.rejected(), 1);
  EXPECT_EQ(fixture.RunNs(8), 123456789);
}

// A single-threaded job process whose schedstat CPU time has not moved keeps its last stat (it
// cannot have used CPU or grown), until it runs again or its periodic full read comes round;
// a multi-threaded one is read every cycle (schedstat is its main thread's only).
TEST(DiscoveryTest, ASleepingProcessKeepsItsLastStatUntilItRuns) {
  Tree t;
  const int64_t sleeper = 21, threaded = 22;  // phases of the periodic full read: 1 and 2
  t.Write("21/stat", StatLine(21, "sleep", 1, 100, 0, 1000));
  t.Write("21/environ", std::string("SLURM_JOB_ID=5\0", 15));
  t.Write("21/schedstat", "1000000000 0 10\n");
  t.Write("22/stat", StatLine(22, "train", 1, 100, 0, 1000, 8));
  t.Write("22/environ", std::string("SLURM_JOB_ID=5\0", 15));
  t.Write("22/schedstat", "1000000000 0 10\n");
  ProcFs proc(t.path(), 100, 4096);
  DiscoveryCache cache;
  auto rss_of = [&](int64_t pid) -> int64_t {
    auto jobs = DiscoverJobs(proc, &cache);
    for (const auto& j : jobs) {
      for (const auto& st : j.stats) {
        if (st.pid == pid) return st.rss_bytes;
      }
    }
    return -1;
  };
  while (cache.cycle < 3) (void)rss_of(sleeper);  // cycles 0-2: both known, baselines set
  // Both stats change, their main threads' CPU time does not.
  t.Write("21/stat", StatLine(21, "sleep", 1, 100, 0, 2000));
  t.Write("22/stat", StatLine(22, "train", 1, 150, 0, 2000, 8));
  ASSERT_EQ(cache.cycle, 3);
  EXPECT_EQ(rss_of(sleeper), 1000 * 4096);       // cycle 3: kept
  EXPECT_EQ(rss_of(threaded), 2000 * 4096);      // cycle 4: read, whatever schedstat says
  t.Write("21/schedstat", "1000500000 0 11\n");  // it ran
  EXPECT_EQ(rss_of(sleeper), 2000 * 4096);       // cycle 5
  t.Write("21/stat", StatLine(21, "sleep", 1, 100, 0, 3000));
  while (cache.cycle < 9) EXPECT_EQ(rss_of(sleeper), 2000 * 4096);  // cycles 6-8: kept
  EXPECT_EQ(rss_of(sleeper), 3000 * 4096);  // cycle 9: (9 + 21) % 10 == 0, the full read
}

// /proc is listed again only when a process has been created since (loadavg's last pid moved)
// or every 30th cycle; and only when `root` is this process's own pid namespace's.
TEST(DiscoveryTest, ProcIsListedAgainOnlyWhenAProcessWasCreated) {
  for (bool own_namespace : {true, false}) {
    SCOPED_TRACE(own_namespace ? "own pid namespace" : "another pid namespace");
    Tree t;
    if (own_namespace) {
      fs::create_directory_symlink(std::to_string(getpid()), fs::path(t.path()) / "self");
    } else {
      fs::create_directory_symlink("999999", fs::path(t.path()) / "self");
    }
    t.Write("loadavg", "0.10 0.20 0.30 1/80 31\n");
    t.Write("31/stat", StatLine(31, "a", 1, 100, 0, 100));
    t.Write("31/environ", std::string("SLURM_JOB_ID=5\0", 15));
    ProcFs proc(t.path(), 100, 4096);
    DiscoveryCache cache;
    auto pids = [&] {
      auto jobs = DiscoverJobs(proc, &cache);
      return jobs.empty() ? std::vector<int64_t>{} : jobs[0].pids;
    };
    EXPECT_EQ(pids(), (std::vector<int64_t>{31}));
    // A process appears but loadavg says none was created: a real /proc cannot do that, so
    // the cache is trusted and /proc not listed (in its own namespace).
    t.Write("32/stat", StatLine(32, "b", 31, 100, 0, 100));
    t.Write("32/environ", std::string("SLURM_JOB_ID=5\0", 15));
    const std::vector<int64_t> want =
        own_namespace ? std::vector<int64_t>{31} : std::vector<int64_t>{31, 32};
    EXPECT_EQ(pids(), want);
    t.Write("loadavg", "0.10 0.20 0.30 1/81 32\n");
    EXPECT_EQ(pids(), (std::vector<int64_t>{31, 32}));
    // A process that ends is gone at once, listed or not.
    fs::remove_all(fs::path(t.path()) / "31");
    EXPECT_EQ(pids(), (std::vector<int64_t>{32}));
  }
}

TEST(CgroupTest, RecognisesSlurmAndKubernetesJobs) {
  auto v1 = JobFromCgroupPath("/slurm/uid_1000/job_123/step_0/task_0");
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->job_id, "123");
  EXPECT_EQ(v1->step, "0");
  EXPECT_EQ(v1->uid, "1000");
  EXPECT_EQ(v1->path, "/slurm/uid_1000/job_123");
  auto v2 = JobFromCgroupPath("/system.slice/slurmstepd.scope/job_456/step_batch/user/task_0");
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->job_id, "456");
  EXPECT_EQ(v2->step, "batch");
  auto pod = JobFromCgroupPath(
      "/kubepods/burstable/pod3f1c9a2e-1111-2222-3333-444455556666/"
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ(pod->kind, CgroupJob::Kind::kKubernetes);
  EXPECT_EQ(pod->job_id, "3f1c9a2e-1111-2222-3333-444455556666");
  EXPECT_EQ(pod->qos, "burstable");
  EXPECT_EQ(pod->container_id.size(), 64u);
  auto systemd = JobFromCgroupPath(
      "/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod3f1c9a2e_1111_2222_3333_444455556666.slice/"
      "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope");
  ASSERT_TRUE(systemd.has_value());
  EXPECT_EQ(systemd->job_id, "3f1c9a2e-1111-2222-3333-444455556666");
  EXPECT_EQ(systemd->qos, "besteffort");
  auto guaranteed = JobFromCgroupPath("/kubepods/pod3f1c9a2e-1111-2222-3333-444455556666");
  ASSERT_TRUE(guaranteed.has_value());
  EXPECT_EQ(guaranteed->qos, "guaranteed");
  EXPECT_FALSE(JobFromCgroupPath("/user.slice/user-1000.slice/session-3.scope").has_value());
}

TEST(CgroupTest, ReadsV2AndV1Counters) {
  Tree v2;
  v2.Write("cgroup.controllers", "cpu io memory pids\n");
  std::string job = "/system.slice/slurmstepd.scope/job_9";
  v2.Write(job.substr(1) + "/memory.current", "1048576000\n");
  v2.Write(job.substr(1) + "/memory.peak", "2097152000\n");
  v2.Write(job.substr(1) + "/memory.max", "max\n");
  v2.Write(job.substr(1) + "/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
  v2.Write(job.substr(1) + "/cpu.stat",
           "usage_usec 4500000\nuser_usec 4000000\nsystem_usec 500000\nnr_periods 10\n"
           "nr_throttled 4\nthrottled_usec 250000\n");
  v2.Write(job.substr(1) + "/io.stat",
           "8:0 rbytes=1000 wbytes=2000 rios=1 wios=2\n"
           "8:16 rbytes=24 wbytes=48 rios=1 wios=1\n");
  CgroupFs c2(v2.path());
  EXPECT_TRUE(c2.v2());
  auto r = c2.Read(job);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->memory_bytes, 1048576000);
  EXPECT_EQ(r->memory_peak_bytes, 2097152000);
  EXPECT_FALSE(r->memory_limit_bytes.has_value());  // "max": no limit
  EXPECT_EQ(r->oom_kills, 1);
  EXPECT_DOUBLE_EQ(*r->cpu_s, 4.5);
  EXPECT_EQ(r->throttled_periods, 4);
  EXPECT_EQ(r->io_read_bytes, 1024);
  EXPECT_EQ(r->io_write_bytes, 2048);
  EXPECT_FALSE(c2.Read("/gone").has_value());

  Tree v1;
  std::string step = "/slurm/uid_0/job_5/step_0";
  v1.Write("memory" + step + "/memory.usage_in_bytes", "5000\n");
  v1.Write("memory" + step + "/memory.max_usage_in_bytes", "9000\n");
  v1.Write("memory" + step + "/memory.limit_in_bytes", "9223372036854771712\n");
  v1.Write("memory" + step + "/memory.oom_control",
           "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  v1.Write("cpuacct" + step + "/cpuacct.usage", "2500000000\n");
  CgroupFs c1(v1.path());
  EXPECT_FALSE(c1.v2());
  auto r1 = c1.Read(step);
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->memory_bytes, 5000);
  EXPECT_EQ(r1->memory_peak_bytes, 9000);
  EXPECT_FALSE(r1->memory_limit_bytes.has_value());  // v1's "unlimited"
  EXPECT_EQ(r1->oom_kills, 2);
  EXPECT_DOUBLE_EQ(*r1->cpu_s, 2.5);
  EXPECT_EQ(c1.rejected(), 0);
  v1.Write("memory" + step + "/memory.usage_in_bytes", "lots\n");
  auto bad = c1.Read(step);
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(bad->memory_bytes.has_value());
  EXPECT_EQ(c1.rejected(), 1);
}

TEST(AgentTest, DiscoversSlurmAndKubernetesJobsAndEndsThem) {
  Tree t;
  t.Write("10/stat", StatLine(10, "python", 1, 100, 0, 1000));
  t.Write("10/cgroup", "12:memory:/slurm/uid_1000/job_11/step_0\n");
  t.Write("11/stat", StatLine(11, "python", 10, 100, 0, 2000));
  t.Write("11/cgroup", "12:memory:/slurm/uid_1000/job_11/step_0/task_1\n");
  t.Write("20/stat", StatLine(20, "server", 1, 100, 0, 500));
  t.Write("20/cgroup",
          "0::/kubepods/burstable/pod3f1c9a2e-1111-2222-3333-444455556666/abcdef012345\n");
  t.Write("30/stat", StatLine(30, "lmp", 1, 100, 0, 300));
  t.Write("30/cgroup", "0::/user.slice\n");
  t.Write("30/environ", std::string("SLURM_JOB_ID=33\0HOME=/root\0", 28));
  t.Write("40/stat", StatLine(40, "sshd", 1, 1, 0, 10));
  t.Write("40/cgroup", "0::/system.slice/ssh.service\n");
  // SLURM's step daemon in the job's cgroup is not the job's work.
  t.Write("50/stat", StatLine(50, "slurmstepd", 1, 1, 0, 1500));
  t.Write("50/cgroup", "12:memory:/slurm/uid_1000/job_11/step_0\n");
  ProcFs proc(t.path(), 100, 4096);
  auto jobs = DiscoverJobs(proc);
  std::map<std::string, std::vector<int64_t>> by_key;
  for (const auto& j : jobs) by_key[j.key] = j.pids;
  EXPECT_EQ(by_key.size(), 3u);
  EXPECT_EQ(by_key["slurm:11"], (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(by_key["k8s:3f1c9a2e-1111-2222-3333-444455556666"], (std::vector<int64_t>{20}));
  EXPECT_EQ(by_key["slurm:33"], (std::vector<int64_t>{30}));

  Tree cg;
  CgroupFs cgroups(cg.path());
  Agent agent(&proc, &cgroups, nullptr, AgentOptions{"node1", 2});
  EXPECT_TRUE(agent.Cycle(0, 1000).empty());
  EXPECT_EQ(agent.jobs(), 3u);
  std::string metrics = agent.Metrics();
  EXPECT_NE(metrics.find("rightsize_job_memory_bytes{job_id=\"11\",kind=\"slurm\"} 12288000"),
            std::string::npos)
      << metrics;
  // The cardinality cap: 3 jobs, 2 exported.
  EXPECT_NE(metrics.find("rightsize_agent_jobs_not_exported 1"), std::string::npos);
  // Job 33 ends: its record comes out once, with what was seen.
  fs::remove_all(t.path() + "/30");
  auto ended = agent.Cycle(5, 1005);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].job_id, "33");
  EXPECT_EQ(ended[0].cluster, "node1");
  EXPECT_EQ(ended[0].source, "agent");
  EXPECT_EQ(ended[0].usage.peak_rss_bytes, 300 * 4096);
  // No /proc/uptime in this tree: the job is dated from when the agent first saw it.
  EXPECT_EQ(ended[0].start_time, 1000);
  EXPECT_EQ(agent.jobs(), 2u);
  EXPECT_TRUE(agent.Cycle(6, 1006).empty());
}

// sacct names an array task "6_64"; its processes carry its own job id (SLURM_JOB_ID=70) too.
// Recorded under the raw id, the report counted each task twice (issue 28: 136 jobs for 72).
TEST(AgentTest, AnArrayTaskIsRecordedUnderItsArrayName) {
  Tree t;
  const std::string env70("SLURM_JOB_ID=70\0SLURM_ARRAY_JOB_ID=6\0SLURM_ARRAY_TASK_ID=64\0", 60);
  const std::string env71("SLURM_JOB_ID=71\0SLURM_ARRAY_JOB_ID=6\0SLURM_ARRAY_TASK_ID=65\0", 60);
  // Task 64 found by its environment (proctrack/linuxproc), task 65 by its cgroup.
  t.Write("30/stat", StatLine(30, "python", 1, 100, 0, 300));
  t.Write("30/cgroup", "0::/user.slice\n");
  t.Write("30/environ", env70);
  t.Write("31/stat", StatLine(31, "python", 1, 100, 0, 400));
  t.Write("31/cgroup", "12:memory:/slurm/uid_1000/job_71/step_batch\n");
  t.Write("31/environ", env71);
  ProcFs proc(t.path(), 100, 4096);
  Tree cg;
  CgroupFs cgroups(cg.path());
  Agent agent(&proc, &cgroups, nullptr, AgentOptions{"node1"});
  EXPECT_TRUE(agent.Cycle(0, 1000).empty());
  std::string metrics = agent.Metrics();
  EXPECT_NE(metrics.find("rightsize_job_processes{job_id=\"6_64\",kind=\"slurm\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_job_processes{job_id=\"6_65\",kind=\"slurm\"} 1"),
            std::string::npos)
      << metrics;
  fs::remove_all(t.path() + "/30");
  fs::remove_all(t.path() + "/31");
  auto ended = agent.Cycle(5, 1005);
  ASSERT_EQ(ended.size(), 2u);
  std::set<std::string> ids = {ended[0].job_id, ended[1].job_id};
  EXPECT_EQ(ids, (std::set<std::string>{"6_64", "6_65"}));
}

// Without a word on how it ended (no exit watcher, no cgroup OOM kill), a job's state is not
// made up: it ended, and accounting will say how (issue 28: the state was null with no marker).
TEST(AgentTest, AJobWhoseEndIsUnknownWaitsForAccounting) {
  Tree t;
  t.Write("30/stat", StatLine(30, "python", 1, 100, 0, 300));
  t.Write("30/cgroup", "0::/user.slice\n");
  t.Write("30/environ", std::string("SLURM_JOB_ID=33\0", 16));
  ProcFs proc(t.path(), 100, 4096);
  Tree cg;
  CgroupFs cgroups(cg.path());
  Agent agent(&proc, &cgroups, nullptr, AgentOptions{"node1"});
  EXPECT_TRUE(agent.Cycle(0, 1000).empty());
  fs::remove_all(t.path() + "/30");
  auto ended = agent.Cycle(5, 1005);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].outcome.state, "");
  EXPECT_FALSE(ended[0].outcome.exit_code);
  nlohmann::json j = ended[0];
  EXPECT_EQ(j["outcome"]["state_source"], "pending") << j.dump();
  EXPECT_TRUE(agent.TakeDiagnoses().empty());
}

// At --interval 0.5 two samples fall in one second: each ships at its own millisecond (stamped
// at whole seconds, the second batch's first sample had the first batch's last time, and the
// server's store replaced one with the other).
TEST(AgentTest, SamplesHalfASecondApartShipHalfASecondApart) {
  Tree t;
  t.Write("30/stat", StatLine(30, "python", 1, 100, 0, 300));
  t.Write("30/cgroup", "0::/user.slice\n");
  t.Write("30/environ", std::string("SLURM_JOB_ID=33\0", 16));
  ProcFs proc(t.path(), 100, 4096);
  Tree cg;
  CgroupFs cgroups(cg.path());
  AgentOptions options{"node1"};
  options.ship = true;
  Agent agent(&proc, &cgroups, nullptr, options);
  agent.Cycle(10.0, 1000);
  std::vector<JobTelemetry> first = agent.TakeTelemetry();
  agent.Cycle(10.5, 1000);
  std::vector<JobTelemetry> second = agent.TakeTelemetry();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  const auto& a = first[0].samples["memory_bytes"];
  const auto& b = second[0].samples["memory_bytes"];
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].t_ms - a[0].t_ms, 500);
}

// The kernel's word on how a process that is not ours exited (taskstats).
TEST(ExitWatcherTest, ReportsTheExitStatusOfAProcessItDidNotStart) {
  auto watcher = ExitWatcher::Open();
  ASSERT_TRUE(watcher.ok()) << "the agent's tests run as root: " << watcher.status().message();
  pid_t exited = fork();
  if (exited == 0) _exit(3);
  pid_t killed = fork();
  if (killed == 0) {
    pause();
    _exit(0);
  }
  kill(killed, SIGKILL);
  waitpid(exited, nullptr, 0);
  waitpid(killed, nullptr, 0);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 200 && seen.size() < 2; ++i) {
    (*watcher)->Drain([&](int64_t pid, int status) {
      if (pid == exited || pid == killed) seen[pid] = status;
    });
    if (seen.size() < 2) usleep(10000);
  }
  ASSERT_EQ(seen.count(exited), 1u);
  EXPECT_TRUE(WIFEXITED(seen[exited]));
  EXPECT_EQ(WEXITSTATUS(seen[exited]), 3);
  ASSERT_EQ(seen.count(killed), 1u);
  EXPECT_TRUE(WIFSIGNALED(seen[killed]));
  EXPECT_EQ(WTERMSIG(seen[killed]), SIGKILL);
}

TEST(SeriesTest, AWeekLongJobCostsBoundedMemory) {
  MetricSeries s;
  const int64_t week = 7 * 86400;
  for (int64_t t = 0; t < week; ++t) s.Add(t, t == 5000 ? 1000.0 : 1.0);
  EXPECT_EQ(s.count(), week);
  EXPECT_DOUBLE_EQ(s.peak(), 1000.0);  // a spike long folded away still counts
  EXPECT_NEAR(s.mean(), 1.0 + 999.0 / week, 1e-9);
  EXPECT_LE(s.stored_points(), 3601u + 8641u + 8641u);
  auto points = s.Points();
  for (size_t i = 1; i < points.size(); ++i) EXPECT_LT(points[i - 1].t_s, points[i].t_s);
  // The minute bucket that held the spike keeps it as its maximum.
  bool kept = false;
  for (const auto& p : points) kept |= p.max == 1000.0;
  EXPECT_TRUE(kept);
}

TEST(MonitorTest, CpuCoresAndMemoryOfTheTree) {
  Tree t;
  t.Write("200/stat", StatLine(200, "bash", 1, 0, 0, 100));
  t.Write("201/stat", StatLine(201, "work", 200, 100, 0, 25600));
  ProcFs proc(t.path(), 100, 4096);
  JobMonitor m(&proc, nullptr, nullptr, 200, "");
  m.Sample(0);
  // Two seconds later the worker has used 3 more CPU seconds: 1.5 cores.
  t.Write("201/stat", StatLine(201, "work", 200, 400, 0, 51200));
  m.Sample(2);
  ResourceUsage u = m.Usage(2, std::nullopt, std::nullopt);
  EXPECT_EQ(u.peak_rss_bytes, (100 + 51200) * 4096);
  auto j = m.SummaryJson(false);
  EXPECT_DOUBLE_EQ(j["metrics"]["cpu_cores"]["peak"].get<double>(), 1.5);
  EXPECT_EQ(j["metrics"]["processes"]["last"].get<double>(), 2);
}

// The agent sees a job up to a cycle after it started: what it did before counts, and the job
// is dated from its oldest process (processes start at 123.45 s after boot in StatLine).
TEST(MonitorTest, CpuUsedBeforeTheFirstSampleCounts) {
  Tree t;
  t.Write("uptime", "133.45 250.00\n");  // the job is 10 s old at the first sample
  t.Write("201/stat", StatLine(201, "work", 1, 100, 0, 256));
  ProcFs proc(t.path(), 100, 4096);
  JobMonitor m(&proc, nullptr, nullptr, 201, "");
  m.Sample(50);
  ASSERT_TRUE(m.started_s().has_value());
  EXPECT_NEAR(*m.started_s(), 40, 1e-6);
  t.Write("201/stat", StatLine(201, "work", 1, 400, 0, 256));
  m.Sample(52);
  EXPECT_NEAR(m.cpu_seconds(), 4.0, 1e-9);
  ResourceUsage u = m.Usage(12, std::nullopt, std::nullopt);
  ASSERT_TRUE(u.cpu_time_s.has_value());
  EXPECT_NEAR(*u.cpu_time_s, 4.0, 1e-9);
  // The cores series integrates to the same total: 10 points of 0.1 core, then 1.5 cores.
  double integral = 0;
  auto j = m.SummaryJson(true);
  for (const auto& p : j["metrics"]["cpu_cores"]["points"]) integral += p[1].get<double>();
  EXPECT_NEAR(integral, 1.0 + 1.5, 1e-9);
  EXPECT_EQ(j["metrics"]["cpu_cores"]["points"].size(), 11u);
}

// Restarted under a day-old job, the agent dates it right and counts its CPU, but leaves the
// series before its first sample empty rather than invent a shape for it.
TEST(MonitorTest, ARestartedAgentDatesTheJobFromItsStart) {
  Tree t;
  t.Write("uptime", "86523.45 0\n");
  t.Write("10/stat", StatLine(10, "python", 1, 8640000, 0, 256));
  t.Write("10/cgroup", "0::/user.slice\n");
  t.Write("10/environ", std::string("SLURM_JOB_ID=7\0", 15));
  ProcFs proc(t.path(), 100, 4096);
  JobMonitor m(&proc, nullptr, nullptr, 10, "");
  m.Sample(0);
  EXPECT_NEAR(*m.started_s(), -86400, 1e-6);
  EXPECT_NEAR(m.cpu_seconds(), 86400, 1e-6);
  EXPECT_FALSE(m.SummaryJson(false)["metrics"].contains("cpu_cores"));

  Agent agent(&proc, nullptr, nullptr, AgentOptions{"node1", 2});
  EXPECT_TRUE(agent.Cycle(3, 200000).empty());
  fs::remove_all(t.path() + "/10");
  auto ended = agent.Cycle(4, 200001);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].start_time, 200000 - 86400);
  EXPECT_EQ(ended[0].end_time, 200000);
  EXPECT_NEAR(ended[0].usage.cpu_time_s.value_or(0), 86400, 1e-6);
}

}  // namespace
}  // namespace rightsize

#include "agent/job_runner.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/cgroup.h"

namespace rightsize {
namespace {

// Descriptors open in this process now.
int OpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class JobRunnerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("job_runner_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    fds_before_ = OpenFds();
    ASSERT_GT(fds_before_, 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Quiet (no relay to the test's output), no GPU library (hermetic), no signal handlers.
  JobRunOptions Options(std::vector<std::string> argv) const {
    JobRunOptions o;
    o.argv = std::move(argv);
    o.interval_s = 0.1;
    o.gpu_library = "libnvidia-ml-absent-for-tests.so";
    o.forward_signals = false;
    o.relay_stdout_fd = -1;
    o.relay_stderr_fd = -1;
    return o;
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  int fds_before_ = 0;
};

TEST_F(JobRunnerTest, ExitCodeAndStateOfAFailingCommand) {
  auto run = RunJob(Options({"/bin/sh", "-c", "exit 3"}));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->job.outcome.exit_code, 3);
  EXPECT_EQ(run->job.outcome.state, "FAILED");
  EXPECT_FALSE(run->job.outcome.signal.has_value());
  EXPECT_EQ(run->job.request.job_name, "sh");
  EXPECT_EQ(run->job.source, "run");
  EXPECT_EQ(run->job.cluster, "local");
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, CompletedCommandWithItsNameAndRunTime) {
  JobRunOptions o = Options({"/bin/sh", "-c", "sleep 0.5"});
  o.name = "napper";
  o.user = "someone";
  auto run = RunJob(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->job.outcome.exit_code, 0);
  EXPECT_EQ(run->job.outcome.state, "COMPLETED");
  EXPECT_EQ(run->job.request.job_name, "napper");
  EXPECT_EQ(run->job.request.user, "someone");
  // It slept half a second: the run time is at least that (no upper bound on a busy machine).
  EXPECT_GE(run->elapsed_s, 0.45);
  ASSERT_TRUE(run->job.usage.elapsed_s.has_value());
  EXPECT_DOUBLE_EQ(*run->job.usage.elapsed_s, run->elapsed_s);
  EXPECT_GE(run->job.end_time, run->job.start_time);
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, PeakMemoryOfAProcessThatHolds50MB) {
  // python3 is one of the packages scripts/install-deps.sh installs.
  ASSERT_TRUE(Exists("/usr/bin/python3"));
  auto run = RunJob(Options(
      {"/usr/bin/python3", "-c",
       "import time; x = bytearray(b'\\x01') * 50_000_000; time.sleep(0.5); print(len(x))"}));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->job.outcome.state, "COMPLETED");
  ASSERT_TRUE(run->job.usage.peak_rss_bytes.has_value());
  // 50 MB touched, plus the interpreter (about 10 MB): not less, and not twice as much.
  EXPECT_GE(*run->job.usage.peak_rss_bytes, 50'000'000);
  EXPECT_LE(*run->job.usage.peak_rss_bytes, 100'000'000);
  EXPECT_GE(run->elapsed_s, 0.45);
  EXPECT_GT(run->cpu_time_s, 0);
  EXPECT_EQ(OpenFds(), fds_before_);
}

// The look at the job's cgroup after it ended must not be plotted as a sample: its processes
// are gone, so it would read 0 B of memory and 0 processes at the end of every chart.
TEST_F(JobRunnerTest, SeriesEndAtTheLastSampleOfTheRunningProcess) {
  ASSERT_TRUE(Exists("/usr/bin/python3"));
  JobRunOptions o = Options({"/usr/bin/python3", "-c",
                             "import time; x = bytearray(b'\\x01') * 20_000_000; time.sleep(0.5)"});
  o.summary_series = true;
  auto run = RunJob(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_FALSE(run->memory_series.empty());
  EXPECT_GT(run->memory_series.back().second, 1e6)
      << "the memory series ends at " << run->memory_series.back().second << " bytes";
  for (const char* metric : {"memory_bytes", "processes", "threads"}) {
    const nlohmann::json& points = run->summary["metrics"][metric]["points"];
    ASSERT_TRUE(points.is_array() && !points.empty()) << metric;
    EXPECT_GT(points.back()[1].get<double>(), 0) << metric << " ends at " << points.back();
    EXPECT_GT(run->summary["metrics"][metric]["last"].get<double>(), 0) << metric;
  }
}

TEST_F(JobRunnerTest, OutputGoesToTheLogAndTheRelay) {
  JobRunOptions o = Options({"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"});
  o.log_path = Path("job.log");
  int relay[2];
  ASSERT_EQ(pipe(relay), 0);
  o.relay_stdout_fd = relay[1];
  auto run = RunJob(o);
  close(relay[1]);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  char buf[64] = {};
  ssize_t got = read(relay[0], buf, sizeof(buf) - 1);
  close(relay[0]);
  EXPECT_EQ(std::string(buf, got > 0 ? static_cast<size_t>(got) : 0), "to-stdout\n");
  EXPECT_EQ(run->log_path, o.log_path);
  std::string log = ReadFile(o.log_path);
  EXPECT_NE(log.find("to-stdout\n"), std::string::npos) << log;
  EXPECT_NE(log.find("to-stderr\n"), std::string::npos) << log;
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, TemporaryLogLivesAsLongAsTheResult) {
  std::string log_path;
  {
    auto run = RunJob(Options({"/bin/sh", "-c", "echo hello"}));
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    log_path = run->log_path;
    ASSERT_FALSE(log_path.empty());
    EXPECT_EQ(ReadFile(log_path), "hello\n");
  }
  EXPECT_FALSE(Exists(log_path));
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, CommandThatDoesNotExistFailsWith127AndLeaksNothing) {
  JobRunOptions o = Options({"/nonexistent/program-for-job-runner-test"});
  o.log_path = Path("missing.log");
  auto run = RunJob(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->job.outcome.exit_code, 127);
  EXPECT_EQ(run->job.outcome.state, "FAILED");
  EXPECT_NE(ReadFile(o.log_path).find("No such file or directory"), std::string::npos);
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, LogThatCannotBeWrittenIsAnErrorAndLeaksNothing) {
  JobRunOptions o = Options({"/bin/true"});
  o.log_path = Path("no/such/folder/job.log");
  auto run = RunJob(o);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Status::Code::kIoError);
  EXPECT_NE(run.status().message().find("cannot write"), std::string::npos);
  EXPECT_EQ(OpenFds(), fds_before_);
  // Nor is a cgroup left behind.
  CgroupFs cgroups;
  EXPECT_FALSE(Exists(cgroups.Dir("/rightsize_run_" + std::to_string(getpid()), "memory")));
}

TEST_F(JobRunnerTest, MemoryLimitWithoutACgroupIsRefused) {
  JobRunOptions o = Options({"/bin/true"});
  o.use_cgroup = false;
  o.memory_limit_bytes = int64_t{64} << 20;
  auto run = RunJob(o);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, EmptyCommandIsRefused) {
  auto run = RunJob(Options({}));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(JobRunnerTest, CgroupIsRemovedWhenTheJobEnds) {
  auto run = RunJob(Options({"/bin/true"}));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // make test runs as root, where the runner can always make the job's memory cgroup.
  ASSERT_FALSE(run->cgroup.empty()) << "no memory cgroup was made for the job";
  CgroupFs cgroups;
  EXPECT_FALSE(Exists(cgroups.Dir(run->cgroup, "memory")));
  EXPECT_EQ(OpenFds(), fds_before_);
}

TEST_F(JobRunnerTest, StacksAreWrittenOrSaidWhyNot) {
  JobRunOptions o = Options({"/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"});
  o.stacks_path = Path("stacks.folded");
  auto run = RunJob(o);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  if (run->stacks_sampled) {
    EXPECT_TRUE(Exists(o.stacks_path));
    EXPECT_TRUE(run->stacks_note.empty());
  } else {
    EXPECT_FALSE(run->stacks_note.empty());
  }
  // The perf events and their rings are gone with the sampler.
  EXPECT_EQ(OpenFds(), fds_before_);
}

}  // namespace
}  // namespace rightsize

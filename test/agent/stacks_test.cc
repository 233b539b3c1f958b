// Tests of StackSampler against real processes: hot_loop (test/agent/hot_loop.c), started as a
// child. Where this host refuses perf events (a locked-down container), the tests skip and say
// why rather than fail.
#include "agent/stacks.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace rightsize {
namespace {

// Far above any kernel's pid_max (at most 2^22), so never a live process.
constexpr int kNoSuchPid = 0x3fffffff;

// A child process with its stdin and stdout on pipes; killed and reaped when destroyed.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (stdin_ >= 0) close(stdin_);
    if (stdout_ >= 0) close(stdout_);
  }

  int pid() const { return pid_; }

  // Whether the child printed a line equal to `want` within `timeout`.
  bool WaitForLine(const std::string& want, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string line;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd = {.fd = stdout_, .events = POLLIN, .revents = 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char c = 0;
      if (read(stdout_, &c, 1) != 1) return false;
      if (c != '\n') {
        line += c;
      } else if (line == want) {
        return true;
      } else {
        line.clear();
      }
    }
    return false;
  }

  void SendLine(const std::string& line) {
    const std::string data = line + "\n";
    ASSERT_EQ(write(stdin_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  // Reaps the child; returns its wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  int pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
};

std::vector<std::string> Frames(const std::string& stack) {
  std::vector<std::string> frames;
  size_t begin = 0;
  for (size_t end; (end = stack.find(';', begin)) != std::string::npos; begin = end + 1) {
    frames.push_back(stack.substr(begin, end - begin));
  }
  frames.push_back(stack.substr(begin));
  return frames;
}

// The samples of stacks in which `outer` is a caller of `inner`.
int64_t SamplesWithCall(const std::map<std::string, int64_t>& folded, const std::string& outer,
                        const std::string& inner) {
  int64_t n = 0;
  for (const auto& [stack, count] : folded) {
    const std::vector<std::string> frames = Frames(stack);
    const auto o = std::find(frames.begin(), frames.end(), outer);
    if (o != frames.end() && std::find(o + 1, frames.end(), inner) != frames.end()) n += count;
  }
  return n;
}

int64_t Total(const std::map<std::string, int64_t>& folded) {
  return std::accumulate(folded.begin(), folded.end(), int64_t{0},
                         [](int64_t sum, const auto& entry) { return sum + entry.second; });
}

// Polls every 250 ms for `duration` (more often than the agent, to exercise the rings). The
// sampler counts CPU time, so on a busy machine it goes on, for up to 4 s more, until
// `min_samples` came in: a starved child must not fail the test, a sampler that sees nothing
// still does.
void SampleFor(StackSampler& sampler, std::chrono::milliseconds duration, int64_t min_samples) {
  const std::chrono::milliseconds kPollInterval(250);
  const std::chrono::milliseconds limit = duration + std::chrono::seconds(4);
  for (auto waited = std::chrono::milliseconds(0);
       waited < duration || (sampler.samples() < min_samples && waited < limit);
       waited += kPollInterval) {
    std::this_thread::sleep_for(kPollInterval);
    Status status = sampler.Poll();
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
}

// `var` names a declaration, so it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
// Creates a sampler into `var`, or skips the test where the host refuses perf events.
#define CREATE_SAMPLER_OR_SKIP(var, options)                                        \
  StatusOr<std::unique_ptr<StackSampler>> var##_or = StackSampler::Create(options); \
  if (!var##_or.ok() && var##_or.status().code() == Status::Code::kIoError) {       \
    GTEST_SKIP() << var##_or.status().ToString();                                   \
  }                                                                                 \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status().ToString();                       \
  StackSampler& var = **var##_or

// Adds `pid`, or skips the test when we may not trace it (e.g. no ptrace access in CI).
#define ADD_PROCESS_OR_SKIP(sampler, pid)                                            \
  (sampler).AddProcess(pid);                                                         \
  if ((sampler).skipped_threads() > 0) GTEST_SKIP() << (sampler).last_skip_reason(); \
  ASSERT_GT((sampler).watched_threads(), 0u)
// NOLINTEND(bugprone-macro-parentheses)

StackSamplerOptions At99Hz() {
  StackSamplerOptions options;
  options.frequency_hz = 99;
  return options;
}

TEST(StackSamplerTest, FindsTheHotFunctionUnderMain) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({HOT_LOOP_PATH, "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());

  SampleFor(sampler, std::chrono::milliseconds(1500), 100);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_GT(sampler.samples(), 50);
  EXPECT_GT(SamplesWithCall(folded, "main", "rightsize_test_hot_loop"), sampler.samples() / 2);
  EXPECT_EQ(Total(folded), sampler.samples());  // every sample in exactly one stack
  for (const auto& [stack, count] : folded) {
    EXPECT_EQ(Frames(stack).front(), "hot_loop") << stack;  // rooted at the process name
    EXPECT_GT(count, 0);
  }
}

TEST(StackSamplerTest, TakeFoldedClears) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({HOT_LOOP_PATH, "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(500), 10);

  EXPECT_FALSE(sampler.TakeFolded().empty());
  EXPECT_TRUE(sampler.TakeFolded().empty());
}

TEST(StackSamplerTest, MissingProcessIsSkippedNotFatal) {
  CREATE_SAMPLER_OR_SKIP(sampler, StackSamplerOptions());
  sampler.AddProcess(kNoSuchPid);
  sampler.AddProcess(-1);

  EXPECT_EQ(sampler.skipped_threads(), 2);
  EXPECT_NE(sampler.last_skip_reason().find("-1"), std::string::npos);
  EXPECT_EQ(sampler.watched_threads(), 0u);
  sampler.Refresh();
  EXPECT_TRUE(sampler.Poll().ok());
  EXPECT_TRUE(sampler.TakeFolded().empty());
}

TEST(StackSamplerTest, RejectsImpossibleOptions) {
  StackSamplerOptions odd_ring;
  odd_ring.ring_pages = 3;
  EXPECT_EQ(StackSampler::Create(odd_ring).status().code(), Status::Code::kInvalidArgument);
  StackSamplerOptions no_rate;
  no_rate.frequency_hz = 0;
  EXPECT_EQ(StackSampler::Create(no_rate).status().code(), Status::Code::kInvalidArgument);
}

// A one-page ring at 999 Hz fills between polls and wraps: the kernel's drops are counted as
// lost, and what was kept still parses into the right stacks.
TEST(StackSamplerTest, FullRingCountsLostSamplesAndKeepsTheRest) {
  StackSamplerOptions options;
  options.frequency_hz = 999;
  options.ring_pages = 1;
  CREATE_SAMPLER_OR_SKIP(sampler, options);
  Child child({HOT_LOOP_PATH, "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());

  SampleFor(sampler, std::chrono::milliseconds(1000), 300);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_GT(sampler.lost(), 0);
  EXPECT_GT(sampler.samples(), 50);
  EXPECT_EQ(Total(folded), sampler.samples());
  EXPECT_GT(SamplesWithCall(folded, "main", "rightsize_test_hot_loop"), sampler.samples() / 2);
}

TEST(StackSamplerTest, CountsStacksPastTheCapAsOther) {
  StackSamplerOptions options = At99Hz();
  options.max_stacks = 1;
  CREATE_SAMPLER_OR_SKIP(sampler, options);
  Child child({HOT_LOOP_PATH, "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());

  SampleFor(sampler, std::chrono::milliseconds(1000), 50);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  // hot_loop's time splits between rightsize_test_hot_loop and rightsize_test_mix.
  ASSERT_EQ(folded.size(), 2u);
  EXPECT_GT(folded.count("[other]"), 0u);
  EXPECT_EQ(Total(folded), sampler.samples());
}

// The process execs after we attached: its stacks are named from the new program.
TEST(StackSamplerTest, FollowsExec) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({"/bin/sh", "-c", "read line && exec \"$0\" 5", HOT_LOOP_PATH});
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  child.SendLine("go");
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));

  SampleFor(sampler, std::chrono::milliseconds(1000), 60);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  const int64_t hot = SamplesWithCall(folded, "main", "rightsize_test_hot_loop");
  EXPECT_GT(hot, 30);
  for (const auto& [stack, count] : folded) {
    if (stack.find("rightsize_test_hot_loop") != std::string::npos) {
      EXPECT_EQ(Frames(stack).front(), "hot_loop") << stack;
    }
  }
}

// Threads started after AddProcess are sampled once Refresh() sees them.
TEST(StackSamplerTest, RefreshPicksUpNewThreads) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({HOT_LOOP_PATH, "1.5", "2"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  EXPECT_EQ(sampler.watched_threads(), 1u);

  child.SendLine("go");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  sampler.Refresh();
  EXPECT_EQ(sampler.watched_threads(), 3u);
  SampleFor(sampler, std::chrono::milliseconds(1000), 100);

  const std::map<std::string, int64_t> folded = sampler.TakeFolded();
  EXPECT_GT(SamplesWithCall(folded, "rightsize_test_thread_main", "rightsize_test_hot_loop"), 50);
}

TEST(StackSamplerTest, SkipsThreadsPastMaxThreads) {
  StackSamplerOptions options;
  options.max_threads = 2;
  CREATE_SAMPLER_OR_SKIP(sampler, options);
  Child child({HOT_LOOP_PATH, "1", "2"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  child.SendLine("go");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  sampler.Refresh();
  sampler.Refresh();  // a skipped thread is counted once, not once per Refresh

  EXPECT_EQ(sampler.watched_threads(), 2u);
  EXPECT_EQ(sampler.skipped_threads(), 1);
  EXPECT_NE(sampler.last_skip_reason().find("max_threads"), std::string::npos);
}

// A process that exits between polls: Refresh closes its events, and the samples it left in
// the rings are still counted and named.
TEST(StackSamplerTest, KeepsTheSamplesOfAProcessThatExited) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({HOT_LOOP_PATH, "0.5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  child.Wait();

  sampler.Refresh();
  EXPECT_EQ(sampler.watched_threads(), 0u);
  ASSERT_TRUE(sampler.Poll().ok());
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_GT(SamplesWithCall(folded, "main", "rightsize_test_hot_loop"), 30);
  EXPECT_EQ(sampler.skipped_threads(), 0);
}

}  // namespace
}  // namespace rightsize

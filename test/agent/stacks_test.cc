// Tests of StackSampler against real processes: hot_loop (test/agent/hot_loop.c), started as a
// child. Where this host refuses perf events (a locked-down container), the tests skip and say
// why rather than fail.
#include "agent/stacks.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "agent/perf_map.h"

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

// --- JIT code and junk frames ---

TEST(PerfMapTest, ReadsNamesAndWhatIsAppended) {
  const std::string path = ::testing::TempDir() + "/rs-perf-" + std::to_string(getpid()) + ".map";
  {
    std::ofstream out(path);
    out << "1000 100 py::train_step:/home/alice/model/train.py\n"
        << "not a line\n"
        << "2000 10 LazyCompile:*foo;bar app.js:3\n";
  }
  PerfMap map(path);
  EXPECT_TRUE(map.Update());
  ASSERT_NE(map.Lookup(0x1000), nullptr);
  EXPECT_EQ(*map.Lookup(0x10ff), "train_step (train.py)");
  EXPECT_EQ(map.Lookup(0x1100), nullptr);
  EXPECT_EQ(*map.Lookup(0x2005), "LazyCompile:*foo:bar app.js:3");  // ';' would split a frame
  EXPECT_EQ(map.bad_lines(), 1);
  EXPECT_FALSE(map.Update());  // nothing new
  {
    std::ofstream out(path, std::ios::app);
    out << "3000 20 py::<module>:/srv/x.py\n4000 20 py::partial";  // a line being written
  }
  EXPECT_TRUE(map.Update());
  EXPECT_EQ(*map.Lookup(0x3000), "<module> (x.py)");
  EXPECT_EQ(map.Lookup(0x4000), nullptr);
  std::remove(path.c_str());
}

TEST(StackSamplerTest, NamesJitCodeFromItsPerfMap) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({JIT_FRAME_PATH, "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  const std::string map_path = "/tmp/perf-" + std::to_string(child.pid()) + ".map";
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(1500), 100);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();
  std::remove(map_path.c_str());  // the child is killed before it can

  // main called the code in anonymous memory, which called the callee: the map names it.
  EXPECT_GT(SamplesWithCall(folded, "main", "jitted_func (jit.py)"), sampler.samples() / 2);
  EXPECT_GT(SamplesWithCall(folded, "jitted_func (jit.py)", "rightsize_test_jit_callee"),
            sampler.samples() / 2);
}

// A frame-pointer chain that runs through code built without frame pointers hands the kernel
// data as return addresses: they are "[unknown]", not a symbol or a file offset of whatever
// module lies around them (the "libz.so+0x353bbf under _PyEval_EvalFrameDefault" of issue 28).
TEST(StackSamplerTest, ReturnAddressesIntoDataAreUnknown) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({JIT_FRAME_PATH, "--junk", "5"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(5)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(1500), 100);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  int64_t under_junk = 0;
  for (const auto& [stack, count] : folded) {
    const std::vector<std::string> frames = Frames(stack);
    auto it = std::find(frames.begin(), frames.end(), "rightsize_test_junk_frame");
    if (it == frames.end()) continue;
    ASSERT_NE(it, frames.begin());
    EXPECT_EQ(*std::prev(it), "[unknown]") << stack;
    under_junk += count;
  }
  EXPECT_GT(under_junk, sampler.samples() / 2);
}

// --- Python ---

constexpr char kPython311[] = "/usr/bin/python3.11";

// The samples whose stacks run <module> -> outer -> middle -> hot_loop of python_prog.py, at
// the lines of those calls and in hot_loop's loop.
int64_t SamplesInHotLoop(const std::map<std::string, int64_t>& folded) {
  const std::vector<std::string> chain = {
      "<module> (python_prog.py:26)", "outer (python_prog.py:23)", "middle (python_prog.py:16)"};
  int64_t n = 0;
  for (const auto& [stack, count] : folded) {
    const std::vector<std::string> frames = Frames(stack);
    auto it = std::search(frames.begin(), frames.end(), chain.begin(), chain.end());
    if (it == frames.end() || it + 3 == frames.end()) continue;
    const std::string& hot = *(it + 3);
    if (hot == "hot_loop (python_prog.py:10)" || hot == "hot_loop (python_prog.py:11)") {
      n += count;
    }
  }
  return n;
}

bool AnyFrameContains(const std::map<std::string, int64_t>& folded, const std::string& text) {
  return std::any_of(folded.begin(), folded.end(), [&](const auto& entry) {
    return entry.first.find(text) != std::string::npos;
  });
}

TEST(StackSamplerTest, NamesPythonFunctionsFilesAndLines) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child({kPython311, PYTHON_PROG, "6"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(10)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(2500), 150);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_TRUE(sampler.notes().empty()) << sampler.notes().front();
  // The first Poll finds the interpreter; from then on nearly every sample runs hot_loop.
  EXPECT_GT(SamplesInHotLoop(folded), sampler.samples() / 2);
  for (const auto& [stack, count] : folded) {
    EXPECT_EQ(Frames(stack).front(), "python3.11") << stack;
  }
}

TEST(StackSamplerTest, NativeFramesOnlyWhenPythonFramesAreOff) {
  StackSamplerOptions options = At99Hz();
  options.python_frames = false;
  CREATE_SAMPLER_OR_SKIP(sampler, options);
  Child child({kPython311, PYTHON_PROG, "3"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(10)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(1000), 50);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_FALSE(AnyFrameContains(folded, "python_prog.py"));
  EXPECT_TRUE(AnyFrameContains(folded, "_PyEval_EvalFrameDefault"));
}

// In a container the interpreter knows its threads by the ids of its own pid namespace.
TEST(StackSamplerTest, NamesPythonFramesInAnotherPidNamespace) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  Child child(
      {"/usr/bin/unshare", "--pid", "--fork", "--kill-child", kPython311, PYTHON_PROG, "6"});
  if (!child.WaitForLine("ready", std::chrono::seconds(10))) {
    GTEST_SKIP() << "unshare --pid refused here (it needs CAP_SYS_ADMIN)";
  }
  // unshare's only child is the interpreter, pid 1 in the new namespace.
  int python_pid = 0;
  std::ifstream(fmt::format("/proc/{0}/task/{0}/children", child.pid())) >> python_pid;
  ASSERT_GT(python_pid, 0);
  ADD_PROCESS_OR_SKIP(sampler, python_pid);
  SampleFor(sampler, std::chrono::milliseconds(2500), 150);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  EXPECT_GT(SamplesInHotLoop(folded), sampler.samples() / 2);
}

// A copy of python3.11 whose Py_Version says 3.12: an interpreter whose layout we do not know.
std::string PythonClaiming312(const std::string& dir) {
  const std::string path = dir + "/python3.11";
  std::filesystem::copy_file(kPython311, path, std::filesystem::copy_options::overwrite_existing);
  elf_version(EV_CURRENT);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return "";
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  int64_t offset = -1;
  std::vector<std::pair<GElf_Shdr, Elf_Scn*>> sections;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr) sections.emplace_back(shdr, scn);
  }
  for (const auto& [shdr, scn] : sections) {
    if (shdr.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data != nullptr && i < shdr.sh_size / shdr.sh_entsize; ++i) {
      GElf_Sym sym;
      gelf_getsym(data, static_cast<int>(i), &sym);
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name == nullptr || std::string(name) != "Py_Version") continue;
      for (const auto& [holder, unused] : sections) {
        if (holder.sh_type == SHT_PROGBITS && sym.st_value >= holder.sh_addr &&
            sym.st_value < holder.sh_addr + holder.sh_size) {
          offset = static_cast<int64_t>(holder.sh_offset + (sym.st_value - holder.sh_addr));
        }
      }
    }
  }
  elf_end(elf);
  const uint32_t version = 0x030c01f0;  // 3.12.1 final
  const bool patched =
      offset > 0 && pwrite(fd, &version, sizeof(version), offset) == sizeof(version);
  close(fd);
  return patched ? path : "";
}

TEST(StackSamplerTest, OtherPythonVersionsGetNativeFramesAndANote) {
  CREATE_SAMPLER_OR_SKIP(sampler, At99Hz());
  std::string dir = ::testing::TempDir() + "/rs-python312-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string python = PythonClaiming312(dir);
  ASSERT_FALSE(python.empty()) << "could not patch Py_Version in a copy of " << kPython311;
  Child child({python, PYTHON_PROG, "3"});
  ASSERT_TRUE(child.WaitForLine("ready", std::chrono::seconds(10)));
  ADD_PROCESS_OR_SKIP(sampler, child.pid());
  SampleFor(sampler, std::chrono::milliseconds(1000), 50);
  const std::map<std::string, int64_t> folded = sampler.TakeFolded();

  ASSERT_EQ(sampler.notes().size(), 1u);
  EXPECT_NE(sampler.notes()[0].find("Python 3.12 frames not supported: native frames only"),
            std::string::npos)
      << sampler.notes()[0];
  EXPECT_FALSE(AnyFrameContains(folded, "python_prog.py"));
  EXPECT_TRUE(AnyFrameContains(folded, "_PyEval_EvalFrameDefault"));
  std::filesystem::remove_all(dir);
}

// Python311Line against CPython's own reading of the same tables (code.co_lines()), for every
// instruction of functions with loops, long jumps and multi-line expressions.
TEST(Python311LineTest, AgreesWithCPython) {
  const std::string script = R"(
import json, sys
def f(a, b):
    total = 0
    for i in range(a):
        if i % 3 == 0:
            total += (i *
                      b)
        else:
            total -= 1
    return [x for x in range(total)
            if x]
cases = []
inner = [c for c in f.__code__.co_consts if hasattr(c, 'co_lines')]
for code in [f.__code__] + inner + [compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')]:
    cases.append({'table': code.co_linetable.hex(), 'first': code.co_firstlineno,
                  'lines': [[s, e, -1 if l is None else l] for s, e, l in code.co_lines()]})
print(json.dumps(cases))
)";
  const std::string script_path =
      ::testing::TempDir() + "/rs-linetable-" + std::to_string(getpid()) + ".py";
  std::ofstream(script_path) << script;
  const std::string command = std::string(kPython311) + " " + script_path + " " + PYTHON_PROG;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0);
  std::remove(script_path.c_str());
  const nlohmann::json cases = nlohmann::json::parse(out);
  ASSERT_EQ(cases.size(), 3u);
  int checked = 0;
  for (const auto& c : cases) {
    std::string table;
    const std::string hex = c["table"];
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      table += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    for (const auto& range : c["lines"]) {
      for (int offset = range[0]; offset < range[1].get<int>(); offset += 2) {
        EXPECT_EQ(Python311Line(table, c["first"], offset), range[2].get<int>())
            << "offset " << offset;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace rightsize

#include "agent/job_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

#include "agent/cgroup.h"
#include "agent/dcgm.h"
#include "agent/monitor.h"
#include "agent/proc.h"
#include "agent/stacks.h"
#include "core/fd.h"

namespace rightsize {

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

void TempFile::Remove() noexcept {
  if (!path_.empty()) unlink(path_.c_str());
  path_.clear();
}

namespace {

std::atomic<int> g_forward_signal{0};
void RecordSignal(int sig) { g_forward_signal = sig; }

// While alive, SIGINT and SIGTERM are recorded (for RunJob to forward to the job) instead of
// stopping us; the previous handlers are put back on destruction.
class SignalForwarding {
 public:
  explicit SignalForwarding(bool on) : on_(on) {
    if (!on_) return;
    g_forward_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = RecordSignal;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
  ~SignalForwarding() noexcept {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  bool on_;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Writes all of `data` to `fd`, retrying short writes; errors are dropped (a closed terminal
// must not stop the job).
void WriteAll(int fd, const char* data, size_t n) {
  if (fd < 0) return;
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// The job's memory cgroup (and cpuacct on v1), under ours, removed on destruction; none until
// Make() succeeds. Copy deleted (it is never moved).
class JobCgroup {
 public:
  explicit JobCgroup(CgroupFs& cgroups) : cgroups_(&cgroups) {}

  // Makes it when the hierarchy lets us (root on cgroup v1, or a delegated v2 subtree).
  void Make(ProcFs& proc, const std::string& name) {
    auto self = proc.Cgroup(getpid());
    if (!self) return;
    std::string path = (*self == "/" ? "" : *self) + "/" + name;
    if (mkdir(cgroups_->Dir(path, "memory").c_str(), 0755) != 0) return;
    path_ = path;
    if (!cgroups_->v2()) {
      // cpuacct too, for the CPU time of processes that come and go between samples.
      std::string cpu = cgroups_->Dir(path, "cpuacct");
      if (mkdir(cpu.c_str(), 0755) != 0 && errno != EEXIST) cpu.clear();
    }
  }

  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;
  ~JobCgroup() noexcept { Remove(); }

  void Remove() noexcept {
    if (path_.empty()) return;
    rmdir(cgroups_->Dir(path_, "memory").c_str());
    if (!cgroups_->v2()) rmdir(cgroups_->Dir(path_, "cpuacct").c_str());
    path_.clear();
  }

  // The path as /proc/PID/cgroup writes it; "" for none.
  const std::string& path() const { return path_; }

  // A memory limit the kernel enforces (with no swap to escape to).
  Status SetMemoryLimit(int64_t bytes) {
    std::string limit = std::to_string(bytes);
    std::string dir = cgroups_->Dir(path_, "memory");
    bool ok = false;
    for (std::string file : {"memory.max", "memory.limit_in_bytes", "memory.swap.max",
                             "memory.memsw.limit_in_bytes"}) {
      std::string value = file == "memory.swap.max" ? "0" : limit;
      UniqueFd fd(open((dir + "/" + file).c_str(), O_WRONLY | O_CLOEXEC));
      if (!fd) continue;
      bool wrote =
          write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size());
      if (wrote && (file == "memory.max" || file == "memory.limit_in_bytes")) ok = true;
    }
    if (!ok) return Status::IoError("--mem: cannot set the memory limit in " + dir);
    return Status::Ok();
  }

  // In the forked child: joins the cgroup(s) before exec, so every descendant is in it.
  void Join(pid_t pid) const {
    if (path_.empty()) return;
    std::string text = std::to_string(pid);
    for (const char* ctl : {"memory", "cpuacct"}) {
      UniqueFd fd(open((cgroups_->Dir(path_, ctl) + "/cgroup.procs").c_str(), O_WRONLY));
      if (fd) WriteAll(fd.get(), text.data(), text.size());
      if (cgroups_->v2()) break;
    }
  }

 private:
  CgroupFs* cgroups_;
  std::string path_;
};

// In the forked child: into its own process group and the job's cgroup, output to the pipes,
// then the command. Never returns.
[[noreturn]] void ExecJob(const std::vector<std::string>& argv, const JobCgroup& cgroup, int out_fd,
                          int err_fd) {
  setpgid(0, 0);
  cgroup.Join(getpid());
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::string msg = fmt::format("rightsize run: {}: {}\n", argv[0], std::strerror(errno));
  WriteAll(2, msg.data(), msg.size());
  _exit(127);
}

// How the job's root process ended (wait4).
struct Reaped {
  int status = 0;
  rusage ru{};
  double exited_s = 0;  // since the start
};

// One running job: its output pipes, its log, its monitor and stack sampler.
class RunningJob {
 public:
  // `out` and `err` are the read ends of the job's output pipes; `log_fd` stays the caller's.
  RunningJob(const JobRunOptions& options, pid_t child, UniqueFd out, UniqueFd err, int log_fd,
             JobMonitor& monitor, std::chrono::steady_clock::time_point start)
      : options_(options),
        child_(child),
        out_(std::move(out)),
        err_(std::move(err)),
        log_fd_(log_fd),
        monitor_(monitor),
        start_(start) {}

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Starts the stack sampler; on failure, says why in `note`.
  void StartStacks(std::string* note) {
    auto s = StackSampler::Create(StackSamplerOptions{});
    if (!s.ok()) {
      *note = s.status().message();
      return;
    }
    sampler_ = std::move(*s);
    sampler_->AddProcess(static_cast<int>(child_));
  }
  StackSampler* sampler() { return sampler_.get(); }

  // Relays the job's output and samples it until it has exited and its pipes have closed (at
  // most 2 s after its exit: a daemonised grandchild may keep them open).
  Reaped Watch() {
    Reaped reaped;
    monitor_.Sample(Elapsed());
    double next_sample = options_.interval_s;
    bool exited = false;
    while (!exited || (open_pipes() > 0 && Elapsed() - reaped.exited_s < 2)) {
      if (int sig = g_forward_signal.exchange(0)) kill(-child_, sig);
      double wait_s = std::max(0.0, next_sample - Elapsed());
      Relay(exited ? 100 : static_cast<int>(std::min(wait_s, 0.25) * 1000));
      if (exited) continue;
      if (wait4(child_, &reaped.status, WNOHANG, &reaped.ru) == child_) {
        exited = true;
        reaped.exited_s = Elapsed();
      } else if (Elapsed() >= next_sample) {
        Sample();
        next_sample += options_.interval_s;
      }
    }
    return reaped;
  }

 private:
  int open_pipes() const { return (out_ ? 1 : 0) + (err_ ? 1 : 0); }

  void Sample() {
    monitor_.Sample(Elapsed());
    if (!sampler_) return;
    for (int64_t pid : monitor_.pids()) sampler_->AddProcess(static_cast<int>(pid));
    sampler_->Refresh();
    (void)sampler_->Poll();
  }

  // Waits up to `timeout_ms` for output and copies what came to its relay and the log; a pipe
  // at its end (or failing) is closed.
  void Relay(int timeout_ms) {
    pollfd fds[2] = {{out_.get(), POLLIN, 0}, {err_.get(), POLLIN, 0}};
    if (poll(fds, 2, timeout_ms) <= 0) return;
    UniqueFd* pipes[2] = {&out_, &err_};
    const int relay[2] = {options_.relay_stdout_fd, options_.relay_stderr_fd};
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t got = read(fds[i].fd, buf_, sizeof(buf_));
      if (got > 0) {
        WriteAll(relay[i], buf_, static_cast<size_t>(got));
        WriteAll(log_fd_, buf_, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        pipes[i]->reset();
      }
    }
  }

  const JobRunOptions& options_;
  pid_t child_;
  UniqueFd out_, err_;
  int log_fd_;
  JobMonitor& monitor_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<StackSampler> sampler_;
  char buf_[65536];
};

// The job's record from how it ended and what the monitor saw.
JobRecord MakeRecord(const JobRunOptions& options, const JobMonitor& monitor, pid_t child,
                     int64_t start_unix, const Reaped& reaped, double* cpu_time_s) {
  JobRecord job;
  job.cluster = "local";
  job.job_id = fmt::format("run-{}-{}", start_unix, child);
  job.source = "run";
  job.submit_time = start_unix;
  job.start_time = start_unix;
  job.end_time = start_unix + static_cast<int64_t>(std::llround(reaped.exited_s));
  const std::string& program = options.argv[0];
  job.request.job_name =
      options.name.empty() ? program.substr(program.rfind('/') + 1) : options.name;
  job.request.user = options.user;
  const rusage& ru = reaped.ru;
  *cpu_time_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  job.usage = monitor.Usage(reaped.exited_s, *cpu_time_s, int64_t{ru.ru_maxrss} * 1024);
  // Block I/O of the reaped tree, exact even for processes that lived between two samples
  // (wait4 counts 512-byte blocks).
  job.usage.io_read_bytes =
      std::max(job.usage.io_read_bytes.value_or(0), int64_t{ru.ru_inblock} * 512);
  job.usage.io_write_bytes =
      std::max(job.usage.io_write_bytes.value_or(0), int64_t{ru.ru_oublock} * 512);
  const int status = reaped.status;
  if (WIFEXITED(status)) {
    job.outcome.exit_code = WEXITSTATUS(status);
    job.outcome.state = WEXITSTATUS(status) == 0 ? "COMPLETED" : "FAILED";
  } else if (WIFSIGNALED(status)) {
    job.outcome.signal = WTERMSIG(status);
    job.outcome.exit_code = 128 + WTERMSIG(status);
    job.outcome.state =
        WTERMSIG(status) == SIGKILL && monitor.oom_kills() > 0 ? "OUT_OF_MEMORY" : "FAILED";
  }
  return job;
}

Status WriteStacks(StackSampler& sampler, const std::string& path) {
  (void)sampler.Poll();
  std::ofstream out(path);
  for (const auto& [stack, count] : sampler.TakeFolded()) out << stack << ' ' << count << '\n';
  if (!out) return Status::IoError(path + ": cannot write the stacks");
  return Status::Ok();
}

// The result's monitor-derived parts: summary and what a diagnosis can use.
void TakeMonitorView(const JobMonitor& monitor, bool series, JobRunResult* r) {
  r->summary = monitor.SummaryJson(series);
  r->memory_limit_bytes = monitor.memory_limit_bytes();
  r->oom_kills = monitor.oom_kills();
  for (const auto& p : monitor.memory().Points()) {
    r->memory_series.emplace_back(static_cast<double>(p.t_s), p.max);
  }
  r->gpu_memory_total_bytes = monitor.gpu_memory_total_bytes();
  r->gpu_events = monitor.gpu_events();
}

}  // namespace

StatusOr<JobRunResult> RunJob(const JobRunOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("run: give the command to run");
  JobRunResult result;
  ProcFs proc;
  CgroupFs cgroups;
  std::unique_ptr<GpuSource> gpu = OpenNvml(options.gpu_library);
  DcgmOptions dcgm_options;
  dcgm_options.update_interval_s = options.interval_s;
  std::unique_ptr<DcgmSource> dcgm = gpu->available() ? OpenDcgm(options.dcgm_library, dcgm_options)
                                                      : NoDcgmSource("no GPU driver");
  CpuEnergyMeter rapl(options.powercap_root, proc.root());
  JobCgroup cgroup(cgroups);
  if (options.use_cgroup) cgroup.Make(proc, fmt::format("rightsize_run_{}", getpid()));
  if (options.memory_limit_bytes) {
    if (cgroup.path().empty()) {
      return Status::InvalidArgument(
          "--mem needs a memory cgroup of its own, and none could be made here");
    }
    RS_RETURN_IF_ERROR(cgroup.SetMemoryLimit(*options.memory_limit_bytes));
  }

  // Output: relayed and captured for the diagnosis.
  result.log_path = options.log_path;
  if (result.log_path.empty()) {
    result.log_path = fmt::format("/tmp/rightsize-run-{}.log", getpid());
  }
  UniqueFd log(open(result.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log) return Status::IoError(result.log_path + ": cannot write: " + std::strerror(errno));
  if (options.log_path.empty()) result.temp_log = TempFile(result.log_path);
  Pipe out = MakePipe(O_CLOEXEC);
  Pipe err = out.read ? MakePipe(O_CLOEXEC) : Pipe{};
  if (!out.read || !err.read) {
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  auto start = std::chrono::steady_clock::now();
  int64_t start_unix = std::time(nullptr);
  pid_t child = fork();
  if (child < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (child == 0) ExecJob(options.argv, cgroup, out.write.get(), err.write.get());
  out.write.reset();
  err.write.reset();
  SignalForwarding forwarding(options.forward_signals);

  JobMonitor monitor(&proc, cgroup.path().empty() ? nullptr : &cgroups, gpu.get(), child,
                     cgroup.path());
  monitor.set_dcgm(dcgm.get());
  monitor.set_cpu_energy(&rapl);
  RunningJob running(options, child, std::move(out.read), std::move(err.read), log.get(), monitor,
                     start);
  if (!options.stacks_path.empty()) running.StartStacks(&result.stacks_note);
  Reaped reaped = running.Watch();
  log.reset();
  result.elapsed_s = reaped.exited_s;
  // A last look at the cgroup (peak, OOM kills, the CPU since the last sample) now that the
  // job is over; not a sample: its processes are gone, and it would end every series at 0.
  monitor.Finish(result.elapsed_s);
  result.job = MakeRecord(options, monitor, child, start_unix, reaped, &result.cpu_time_s);
  result.mean_cpu_cores = result.elapsed_s > 0 ? result.cpu_time_s / result.elapsed_s : 0;
  result.cgroup = cgroup.path();
  cgroup.Remove();
  if (StackSampler* sampler = running.sampler()) {
    RS_RETURN_IF_ERROR(WriteStacks(*sampler, options.stacks_path));
    result.stacks_sampled = true;
    for (const std::string& note : sampler->notes()) {
      result.stacks_note += (result.stacks_note.empty() ? "" : "; ") + note;
    }
  }
  TakeMonitorView(monitor, options.summary_series, &result);
  result.gpu_available = gpu->available();
  result.gpu_status = gpu->status();
  result.dcgm_available = dcgm->available();
  result.dcgm_status = dcgm->status();
  result.rapl_available = rapl.available();
  result.rapl_status = rapl.status();
  return result;
}

std::optional<Diagnosis> DiagnoseRun(const JobRunResult& run) {
  if (run.job.outcome.state == "COMPLETED") return std::nullopt;
  DiagnoseInput in;
  in.log_paths = {run.log_path};
  in.job = run.job;
  Telemetry tel;
  tel.memory_limit_bytes = run.memory_limit_bytes;
  tel.oom_kills = run.oom_kills;
  tel.memory = run.memory_series;
  tel.gpu_memory_peak_bytes = run.job.usage.peak_gpu_memory_bytes;
  tel.gpu_memory_total_bytes = run.gpu_memory_total_bytes;
  for (const GpuEvent& e : run.gpu_events) tel.xids.emplace_back(e.device_index, e.xid);
  in.telemetry = tel;
  auto d = Diagnose(in);
  if (!d.ok()) return std::nullopt;
  return std::move(*d);
}

// The rightsize.run/v1 document.
nlohmann::json JobRunJson(const JobRunResult& run, const std::vector<std::string>& argv,
                          const std::optional<Diagnosis>& diagnosis) {
  nlohmann::json j;
  j["schema"] = "rightsize.run/v1";
  j["command"] = argv;
  nlohmann::json record;
  to_json(record, run.job);
  j["job"] = record;
  j["usage"] = record["usage"];
  j["usage"]["mean_cpu_cores"] = run.mean_cpu_cores;
  j["summary"] = run.summary;
  j["gpu"] = {{"available", run.gpu_available}, {"status", run.gpu_status}};
  j["dcgm"] = {{"available", run.dcgm_available}, {"status", run.dcgm_status}};
  j["rapl"] = {{"available", run.rapl_available}, {"status", run.rapl_status}};
  j["cgroup"] = run.cgroup.empty() ? nlohmann::json() : nlohmann::json(run.cgroup);
  j["diagnosis"] = diagnosis ? DiagnosisToJson(*diagnosis) : nlohmann::json();
  return j;
}

}  // namespace rightsize

// `rightsize run [--] CMD…`: runs one command as a job and watches it like the agent does.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>

#include "agent/cgroup.h"
#include "agent/dcgm.h"
#include "agent/gpu.h"
#include "agent/monitor.h"
#include "agent/proc.h"
#include "agent/stacks.h"
#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "diagnose/diagnosis.h"

namespace rightsize::cli {
namespace {

std::atomic<int> g_forward_signal{0};
void RecordSignal(int sig) { g_forward_signal = sig; }

// Writes all of `data` to `fd`, retrying short writes; errors are dropped (a closed terminal
// must not stop the job).
void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// A memory cgroup of its own for the job, under ours, when the hierarchy lets us make one
// (root on cgroup v1, or a delegated v2 subtree): exact peak memory and OOM-kill counts.
// Returns the path as /proc/PID/cgroup writes it, or "" when we cannot.
std::string MakeJobCgroup(CgroupFs& cgroups, ProcFs& proc, const std::string& name) {
  auto self = proc.Cgroup(getpid());
  if (!self) return "";
  std::string base = *self == "/" ? "" : *self;
  std::string path = base + "/" + name;
  std::string dir = cgroups.Dir(path, "memory");
  if (mkdir(dir.c_str(), 0755) != 0) return "";
  if (!cgroups.v2()) {
    // cpuacct too, for the CPU time of processes that come and go between samples.
    std::string cpu = cgroups.Dir(path, "cpuacct");
    if (mkdir(cpu.c_str(), 0755) != 0 && errno != EEXIST) cpu.clear();
  }
  return path;
}

void RemoveJobCgroup(CgroupFs& cgroups, const std::string& path) {
  if (path.empty()) return;
  rmdir(cgroups.Dir(path, "memory").c_str());
  if (!cgroups.v2()) rmdir(cgroups.Dir(path, "cpuacct").c_str());
}

}  // namespace

void AddRunCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run a command as a job and watch it like the agent does: peak memory, CPU cores, GPU "
      "memory and utilisation, I/O, stacks; diagnose it if it fails");
  struct Flags {
    double interval_s = 1;
    std::string stacks, log, gpu_library = "libnvidia-ml.so.1", dcgm_library, name, mem;
    bool json = false, series = false, save = false, no_cgroup = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--interval", f->interval_s, "Seconds between samples (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_flag("--json", f->json,
                "Print the job record, the usage summary and, if it failed, the diagnosis as "
                "JSON (schema rightsize.run/v1) instead of the human summary");
  cmd->add_flag("--series", f->series, "With --json: include every metric's time series");
  cmd->add_option("--stacks", f->stacks,
                  "Sample the command's call stacks (perf, 49 Hz) and write them folded "
                  "(\"a;b;c count\") to FILE");
  cmd->add_option("--log", f->log,
                  "Also write the command's output (stdout and stderr) to FILE; it is what a "
                  "failure is diagnosed from");
  cmd->add_option("--name", f->name, "The job's name (default: the program's name)");
  cmd->add_flag("--save", f->save, "Store the job record in the store, for `train` and `report`");
  cmd->add_option("--mem", f->mem,
                  "Limit the command's memory like a scheduler would (e.g. 4G); over it, the "
                  "kernel's OOM killer stops it. Needs a memory cgroup");
  cmd->add_flag("--no-cgroup", f->no_cgroup,
                "Do not put the command in a memory cgroup of its own");
  cmd->add_option("--nvml", f->gpu_library, "The NVML library to load (default libnvidia-ml.so.1)");
  cmd->add_option("--dcgm", f->dcgm_library,
                  "The DCGM library to load for SM, tensor and DRAM activity (default "
                  "libdcgm.so.4, then libdcgm.so.3, then libdcgm.so)");
  // Everything from the first word that is not one of ours is the command, in order.
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->footer("Everything after the first non-option word (or after --) is the command.");
  cmd->callback([&ctx, action, f, cmd] {
    std::vector<std::string> argv = ctx.run_command.empty() ? cmd->remaining() : ctx.run_command;
    *action = [&ctx, f, argv]() -> int {
      if (argv.empty()) return Fail(Status::InvalidArgument("run: give the command to run"));
      ProcFs proc;
      CgroupFs cgroups;
      std::unique_ptr<GpuSource> gpu = OpenNvml(f->gpu_library);
      DcgmOptions dcgm_options;
      dcgm_options.update_interval_s = f->interval_s;
      std::unique_ptr<DcgmSource> dcgm = gpu->available() ? OpenDcgm(f->dcgm_library, dcgm_options)
                                                          : NoDcgmSource("no GPU driver");
      std::string cg_name = fmt::format("rightsize_run_{}", getpid());
      std::string cg_path = f->no_cgroup ? "" : MakeJobCgroup(cgroups, proc, cg_name);
      if (!f->mem.empty()) {
        auto mem = ParseSlurmMemory(f->mem, int64_t{1} << 20);
        if (!mem.ok() || !mem->has_value()) {
          return Fail(
              Status::InvalidArgument("--mem: expected a size like 4G, got '" + f->mem + "'"));
        }
        if (cg_path.empty()) {
          return Fail(Status::InvalidArgument(
              "--mem needs a memory cgroup of its own, and none could be made here"));
        }
        std::string bytes = std::to_string((*mem)->bytes);
        std::string dir = cgroups.Dir(cg_path, "memory");
        bool ok = false;
        for (const char* file : {"memory.max", "memory.limit_in_bytes", "memory.swap.max",
                                 "memory.memsw.limit_in_bytes"}) {
          std::string value = std::string(file) == "memory.swap.max" ? "0" : bytes;
          int fd = open((dir + "/" + file).c_str(), O_WRONLY | O_CLOEXEC);
          if (fd < 0) continue;
          bool wrote = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
          close(fd);
          if (wrote &&
              (std::string(file) == "memory.max" || std::string(file) == "memory.limit_in_bytes")) {
            ok = true;
          }
        }
        if (!ok) {
          RemoveJobCgroup(cgroups, cg_path);
          return Fail(Status::IoError("--mem: cannot set the memory limit in " + dir));
        }
      }

      // Output: relayed to ours and captured for the diagnosis.
      std::string log_path = f->log;
      bool temp_log = log_path.empty();
      if (temp_log) log_path = fmt::format("/tmp/rightsize-run-{}.log", getpid());
      int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log_fd < 0) {
        return Fail(Status::IoError(log_path + ": cannot write: " + std::strerror(errno)));
      }
      int out_pipe[2], err_pipe[2];
      if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
        return Fail(Status::IoError(std::string("pipe: ") + std::strerror(errno)));
      }
      auto start = std::chrono::steady_clock::now();
      int64_t start_unix = std::time(nullptr);
      pid_t child = fork();
      if (child < 0) return Fail(Status::IoError(std::string("fork: ") + std::strerror(errno)));
      if (child == 0) {
        setpgid(0, 0);
        if (!cg_path.empty()) {
          // Join the job's cgroup(s) before exec, so every descendant is in it.
          std::string pid = std::to_string(getpid());
          for (const char* ctl : {"memory", "cpuacct"}) {
            std::string procs = cgroups.Dir(cg_path, ctl) + "/cgroup.procs";
            int fd = open(procs.c_str(), O_WRONLY);
            if (fd >= 0) {
              WriteAll(fd, pid.data(), pid.size());
              close(fd);
            }
            if (cgroups.v2()) break;
          }
        }
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::string msg = fmt::format("rightsize run: {}: {}\n", argv[0], std::strerror(errno));
        WriteAll(2, msg.data(), msg.size());
        _exit(127);
      }
      close(out_pipe[1]);
      close(err_pipe[1]);
      struct sigaction sa {};
      sa.sa_handler = RecordSignal;
      sigaction(SIGINT, &sa, nullptr);
      sigaction(SIGTERM, &sa, nullptr);

      JobMonitor monitor(&proc, cg_path.empty() ? nullptr : &cgroups, gpu.get(), child, cg_path);
      monitor.set_dcgm(dcgm.get());
      std::unique_ptr<StackSampler> sampler;
      std::string stacks_note;
      if (!f->stacks.empty()) {
        StackSamplerOptions so;
        auto s = StackSampler::Create(so);
        if (s.ok()) {
          sampler = std::move(*s);
          sampler->AddProcess(static_cast<int>(child));
        } else {
          stacks_note = s.status().message();
        }
      }
      auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      monitor.Sample(elapsed());
      double next_sample = f->interval_s;
      pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
      int open_pipes = 2;
      int status = 0;
      rusage ru{};
      bool exited = false;
      double exited_at = 0;
      char buf[65536];
      while (!exited || (open_pipes > 0 && elapsed() - exited_at < 2)) {
        if (int sig = g_forward_signal.exchange(0)) kill(-child, sig);
        double wait_s = std::max(0.0, next_sample - elapsed());
        int timeout_ms = exited ? 100 : static_cast<int>(std::min(wait_s, 0.25) * 1000);
        int n = poll(fds, 2, timeout_ms);
        if (n > 0) {
          for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
            ssize_t got = read(fds[i].fd, buf, sizeof(buf));
            if (got > 0) {
              WriteAll(i == 0 ? 1 : 2, buf, static_cast<size_t>(got));
              WriteAll(log_fd, buf, static_cast<size_t>(got));
            } else if (got == 0 || errno != EINTR) {
              close(fds[i].fd);
              fds[i].fd = -1;
              --open_pipes;
            }
          }
        }
        if (!exited) {
          pid_t w = wait4(child, &status, WNOHANG, &ru);
          if (w == child) {
            exited = true;
            exited_at = elapsed();
          } else if (elapsed() >= next_sample) {
            monitor.Sample(elapsed());
            if (sampler) {
              for (int64_t pid : monitor.pids()) sampler->AddProcess(static_cast<int>(pid));
              sampler->Refresh();
              (void)sampler->Poll();
            }
            next_sample += f->interval_s;
          }
        }
      }
      for (auto& p : fds) {
        if (p.fd >= 0) close(p.fd);
      }
      close(log_fd);
      double elapsed_s = exited_at;
      // A last look at the cgroup (peak, OOM kills) now that the job is over.
      monitor.Sample(elapsed_s);

      JobRecord job;
      job.cluster = "local";
      job.job_id = fmt::format("run-{}-{}", start_unix, child);
      job.source = "run";
      job.submit_time = start_unix;
      job.start_time = start_unix;
      job.end_time = start_unix + static_cast<int64_t>(std::llround(elapsed_s));
      job.request.job_name = f->name.empty() ? argv[0].substr(argv[0].rfind('/') + 1) : f->name;
      if (const char* user = getenv("USER")) job.request.user = user;
      double cpu_time = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                        static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
      job.usage = monitor.Usage(elapsed_s, cpu_time, int64_t{ru.ru_maxrss} * 1024);
      // Block I/O of the reaped tree, exact even for processes that lived between two samples
      // (wait4 counts 512-byte blocks).
      job.usage.io_read_bytes =
          std::max(job.usage.io_read_bytes.value_or(0), int64_t{ru.ru_inblock} * 512);
      job.usage.io_write_bytes =
          std::max(job.usage.io_write_bytes.value_or(0), int64_t{ru.ru_oublock} * 512);
      if (WIFEXITED(status)) {
        job.outcome.exit_code = WEXITSTATUS(status);
        job.outcome.state = WEXITSTATUS(status) == 0 ? "COMPLETED" : "FAILED";
      } else if (WIFSIGNALED(status)) {
        job.outcome.signal = WTERMSIG(status);
        job.outcome.exit_code = 128 + WTERMSIG(status);
        job.outcome.state =
            WTERMSIG(status) == SIGKILL && monitor.oom_kills() > 0 ? "OUT_OF_MEMORY" : "FAILED";
      }
      RemoveJobCgroup(cgroups, cg_path);

      if (sampler) {
        (void)sampler->Poll();
        std::ofstream out(f->stacks);
        for (const auto& [stack, count] : sampler->TakeFolded()) {
          out << stack << ' ' << count << '\n';
        }
        if (!out) return Fail(Status::IoError(f->stacks + ": cannot write the stacks"));
      } else if (!f->stacks.empty()) {
        fmt::print(stderr, "rightsize run: no stacks: {}\n", stacks_note);
      }

      std::optional<Diagnosis> diagnosis;
      if (job.outcome.state != "COMPLETED") {
        DiagnoseInput in;
        in.log_paths = {log_path};
        in.job = job;
        Telemetry tel;
        tel.memory_limit_bytes = monitor.memory_limit_bytes();
        tel.oom_kills = monitor.oom_kills();
        for (const auto& p : monitor.memory().Points()) {
          tel.memory.emplace_back(static_cast<double>(p.t_s), p.max);
        }
        tel.gpu_memory_peak_bytes = job.usage.peak_gpu_memory_bytes;
        tel.gpu_memory_total_bytes = monitor.gpu_memory_total_bytes();
        for (const GpuEvent& e : monitor.gpu_events()) tel.xids.emplace_back(e.device_index, e.xid);
        in.telemetry = tel;
        auto d = Diagnose(in);
        if (d.ok()) diagnosis = std::move(*d);
      }
      if (temp_log) unlink(log_path.c_str());

      if (f->save) {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        Status st = (*store)->UpsertJobs({&job, 1});
        if (!st.ok()) return Fail(st);
      }
      double mean_cores = elapsed_s > 0 ? cpu_time / elapsed_s : 0;
      if (f->json) {
        nlohmann::json j;
        j["schema"] = "rightsize.run/v1";
        j["command"] = argv;
        nlohmann::json record;
        to_json(record, job);
        j["job"] = record;
        j["usage"] = record["usage"];
        j["usage"]["mean_cpu_cores"] = mean_cores;
        j["summary"] = monitor.SummaryJson(f->series);
        j["gpu"] = {{"available", gpu->available()}, {"status", gpu->status()}};
        j["dcgm"] = {{"available", dcgm->available()}, {"status", dcgm->status()}};
        j["cgroup"] = cg_path.empty() ? nlohmann::json() : nlohmann::json(cg_path);
        j["diagnosis"] = diagnosis ? DiagnosisToJson(*diagnosis) : nlohmann::json();
        fmt::print("{}\n", JsonText(j, 2));
      } else {
        fmt::print(stderr, "rightsize run: {} in {}, peak memory {}, {:.2f} CPU cores{}\n",
                   job.outcome.state, FormatDuration(elapsed_s),
                   FormatMemory(job.usage.peak_rss_bytes.value_or(0)), mean_cores,
                   job.usage.peak_gpu_memory_bytes
                       ? fmt::format(", peak GPU memory {}",
                                     FormatMemory(*job.usage.peak_gpu_memory_bytes))
                       : "");
        if (diagnosis) fmt::print(stderr, "{}", RenderDiagnosisText(*diagnosis));
      }
      // Exit as the command did, so scripts see its status.
      return job.outcome.exit_code.value_or(1);
    };
  });
}

}  // namespace rightsize::cli

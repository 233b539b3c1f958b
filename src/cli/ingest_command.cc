// `rightsize ingest sacct|swf|clustercockpit|slurm`: load accounting into the store.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "diagnose/diagnosis.h"
#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/sacct.h"
#include "ingest/sinfo.h"
#include "ingest/swf.h"
#include "report/render.h"

extern char** environ;

namespace rightsize::cli {

namespace {

struct CommonFlags {
  std::string cluster;
  bool strict = false;
  bool json = false;
};

void AddCommonFlags(CLI::App* cmd, CommonFlags* f) {
  cmd->add_option("--cluster", f->cluster,
                  "Cluster name stored with each job (default: the trace file's name for SWF; "
                  "the Cluster (sacct) or cluster (ClusterCockpit) column, else 'default')");
  cmd->add_flag("--strict", f->strict, "Stop at the first malformed line (exit 2)");
  cmd->add_flag("--json", f->json, "Print the ingest summary as JSON");
}

nlohmann::json StatsJson(const IngestStats& s, const Status& st) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : s.errors) {
    errors.push_back({{"file", e.file}, {"line", e.line}, {"message", e.message}});
  }
  return {{"file", s.file},
          {"cluster", s.cluster},
          {"clusters", s.clusters},
          {"lines", s.lines},
          {"records", s.records},
          {"stored", s.stored},
          {"skipped", s.skipped},
          {"errors", errors},
          {"notes", s.notes},
          {"seconds", s.seconds},
          {"error", st.ok() ? nlohmann::json(nullptr) : nlohmann::json(st.message())}};
}

// Ingests each file with a fresh parser from `make_parser`; prints per-file summaries.
int IngestFiles(Context& ctx, const std::vector<std::string>& files, const CommonFlags& flags,
                bool allow_empty, const std::function<std::unique_ptr<RecordParser>()>& make_parser,
                const std::function<std::string(const std::string&)>& default_cluster) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  nlohmann::json out = nlohmann::json::array();
  int exit_code = kExitOk;
  int64_t total_stored = 0, total_skipped = 0;
  constexpr int kPrintedErrors = 20;
  for (const auto& file : files) {
    auto parser = make_parser();
    IngestOptions options;
    options.strict = flags.strict;
    options.override_cluster = !flags.cluster.empty();
    options.allow_empty = allow_empty;
    int printed = 0;
    options.on_error = [&](const IngestError& e) {
      if (flags.json) return;
      if (printed++ < kPrintedErrors) {
        fmt::print(stderr, "{}\n", e.ToString());
      } else if (printed == kPrintedErrors + 1) {
        fmt::print(stderr, "{}: more malformed lines; only the first {} are shown\n", e.file,
                   kPrintedErrors);
      }
    };
    ProgressBar bar(fmt::format("ingest {}", file));
    options.progress = [&](int64_t done, int64_t total) { bar.Update(done, total); };
    std::string cluster = flags.cluster.empty() ? default_cluster(file) : flags.cluster;
    IngestStats stats;
    Status st = IngestFile(file, *parser, **store, cluster, options, &stats);
    bar.Done();
    total_stored += stats.stored;
    total_skipped += stats.skipped;
    if (flags.json) {
      out.push_back(StatsJson(stats, st));
    } else {
      // Where the jobs went: records that name their cluster (sacct's Cluster column) keep it.
      std::string where =
          stats.clusters.size() > 1
              ? fmt::format("clusters '{}'", fmt::join(stats.clusters, "', '"))
              : fmt::format("cluster '{}'",
                            stats.clusters.empty() ? stats.cluster : *stats.clusters.begin());
      fmt::print(
          "{}: {} lines, {} jobs stored in {}, {} malformed lines skipped "
          "({:.2f} s)\n",
          stats.file, FormatThousands(static_cast<double>(stats.lines), 0),
          FormatThousands(static_cast<double>(stats.stored), 0), where,
          FormatThousands(static_cast<double>(stats.skipped), 0), stats.seconds);
      for (const auto& note : stats.notes) fmt::print("{}: note: {}\n", stats.file, note);
    }
    if (!st.ok()) {
      if (!flags.json) fmt::print(stderr, "rightsize: {}\n", st.message());
      exit_code = std::max(exit_code, ExitCodeFor(st));
    }
  }
  if (flags.json) {
    fmt::print("{}\n", JsonText(nlohmann::json{{"files", out},
                                               {"stored", total_stored},
                                               {"skipped", total_skipped},
                                               {"store", ctx.StorePath()}},
                                2));
  }
  return exit_code;
}

std::vector<std::string> SplitColumns(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// Runs `argv` with its stdout written to `out_path`; returns its exit status.
StatusOr<int> RunToFile(const std::vector<std::string>& argv, const std::string& out_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Status::IoError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) {
    return Status::IoError(fmt::format("waiting for {}: {}", argv[0], std::strerror(errno)));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// ---- ingest slurm --follow ----

std::atomic<bool> g_stop{false};
void OnStopSignal(int /*sig*/) { g_stop = true; }

int64_t NowS() {
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
}

// sacct reads times in the cluster's local zone.
std::string SacctLocalTime(int64_t t) {
  auto tt = static_cast<time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string TempPath(const char* what) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("rightsize-{}-{}.txt", what, getpid()))
      .string();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Stores the partitions' shape read from sinfo output as `cluster`'s metadata; prints what it
// kept. A partition no longer listed keeps its old keys (a drained partition still ran jobs).
int StorePartitions(Context& ctx, const std::string& text, const std::string& source,
                    const std::string& cluster, bool json) {
  auto parts = ParseSinfo(text, source);
  if (!parts.ok()) return Fail(parts.status());
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  if (Status st = (*store)->PutClusterMeta(cluster, PartitionMeta(*parts)); !st.ok()) {
    return Fail(st);
  }
  if (json) return kExitOk;  // the jobs' document is the output
  for (const PartitionShape& p : *parts) {
    fmt::print("{}: partition {}{}: {} nodes of {} cores, {}{}\n", cluster, p.name,
               p.is_default ? " (default)" : "", p.nodes, p.cpus_per_node,
               FormatMemory(p.memory_per_node),
               p.gpus_per_node > 0 ? fmt::format(", {} GPUs{}", p.gpus_per_node,
                                                 p.gpu_type.empty() ? "" : " " + p.gpu_type)
                                   : std::string());
  }
  return kExitOk;
}

// The cluster's name as SLURM knows it (ClusterName in `scontrol show config`): sacct's
// Cluster column, so the partitions land beside the jobs. "" when scontrol cannot say.
std::string SlurmClusterName(const std::string& scontrol) {
  std::string tmp = TempPath("config");
  auto rc = RunToFile({scontrol, "show", "config"}, tmp);
  std::string text = rc.ok() && *rc == 0 ? ReadWholeFile(tmp) : std::string();
  std::filesystem::remove(tmp);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ClusterName", 0) != 0) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string v = line.substr(eq + 1);
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(" \r") + 1);
    return v;
  }
  return "";
}

// End states whose jobs `--follow` ingests (sacct --state), and those it diagnoses.
constexpr const char* kEndStates = "BF,CA,CD,DL,F,NF,OOM,PR,TO";
bool IsDiagnosedState(const std::string& state) {
  std::string base = state.substr(0, state.find(' '));  // "CANCELLED by 0"
  return base == "FAILED" || base == "OUT_OF_MEMORY" || base == "TIMEOUT" || base == "NODE_FAIL";
}

// What --follow needs beyond the main sacct columns: where the job ran and what the
// job_submit.lua hook wrote in its admin comment.
struct FinishedJob {
  std::string job_id, job_id_raw, state, name, user, work_dir, admin_comment;
};

StatusOr<std::vector<FinishedJob>> FinishedJobs(const std::string& sacct, int64_t from,
                                                int64_t to) {
  std::string tmp = TempPath("sacct-extra");
  std::vector<std::string> argv = {
      sacct,
      "--parsable2",
      "--noheader",
      "--allusers",
      "--allocations",
      "--starttime=" + SacctLocalTime(from),
      "--endtime=" + SacctLocalTime(to),
      std::string("--state=") + kEndStates,
      "--format=JobID,JobIDRaw,State,JobName,User,WorkDir,AdminComment"};
  auto rc = RunToFile(argv, tmp);
  std::string text = rc.ok() ? ReadWholeFile(tmp) : "";
  std::filesystem::remove(tmp);
  if (!rc.ok()) return rc.status();
  if (*rc != 0) return Status::IoError(fmt::format("{} exited with status {}", sacct, *rc));
  std::vector<FinishedJob> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    size_t pos = 0;
    for (int k = 0; k < 6; ++k) {  // the admin comment, last, may hold '|'
      size_t bar = line.find('|', pos);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(pos, bar - pos));
      pos = bar + 1;
    }
    if (f.size() < 6) continue;
    jobs.push_back({f[0], f[1], f[2], f[3], f[4], f[5], line.substr(pos)});
  }
  return jobs;
}

// The value of `key=` in the hook's record ("rightsize:v1 mode=advise … out=PATH"); out= runs
// to the end of the record.
std::string RecordField(const std::string& record, const std::string& key) {
  size_t at = record.find(" " + key + "=");
  if (at == std::string::npos) return "";
  size_t begin = at + key.size() + 2;
  size_t end = key == "out" ? record.find("; ", begin) : record.find(' ', begin);
  return record.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The hook's admin-comment record as a small rightsize.predict/v1 document.
std::optional<nlohmann::json> PredictionFromRecord(const std::string& admin_comment,
                                                   const std::string& cluster) {
  size_t at = admin_comment.find("rightsize:v1");
  if (at == std::string::npos) return std::nullopt;
  std::string record = " " + admin_comment.substr(at);
  nlohmann::json targets = nlohmann::json::object();
  auto target = [&](const char* key, const char* name, const char* unit, double scale) {
    std::string v = RecordField(record, key);
    if (v.empty()) return;
    nlohmann::json t = {{"unit", unit}};
    const char* names[] = {"p50", "suggested_request", "request"};
    std::istringstream in(v);
    std::string item;
    for (int k = 0; k < 3 && std::getline(in, item, ','); ++k) {
      char* end = nullptr;
      double x = std::strtod(item.c_str(), &end);
      t[names[k]] =
          item.empty() || end == item.c_str() ? nlohmann::json(nullptr) : nlohmann::json(x * scale);
    }
    targets[name] = std::move(t);
  };
  target("mem_mb", "peak_memory", "bytes", static_cast<double>(kMiB));
  target("cpus", "cpu_cores", "cores", 1);
  target("time_min", "runtime", "s", 60);
  nlohmann::json changed = nlohmann::json::array();
  std::istringstream in(RecordField(record, "changed"));
  std::string item;
  while (std::getline(in, item, ',')) changed.push_back(item);
  return nlohmann::json{
      {"schema", "rightsize.predict/v1"},    {"source", "job_submit.lua"}, {"cluster", cluster},
      {"mode", RecordField(record, "mode")}, {"changed", changed},         {"targets", targets},
      {"record", record.substr(1)}};
}

// SLURM's output file pattern with %j %A %a %x %u %% filled in.
std::string ResolveOutputPattern(const std::string& pattern, const FinishedJob& j) {
  std::string array_id, task_id;
  if (size_t us = j.job_id.find('_'); us != std::string::npos) {
    array_id = j.job_id.substr(0, us);
    task_id = j.job_id.substr(us + 1);
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    switch (c) {
      case 'j':
        out += j.job_id_raw;
        break;
      case 'A':
        out += array_id.empty() ? j.job_id_raw : array_id;
        break;
      case 'a':
        out += task_id.empty() ? "4294967294" : task_id;
        break;
      case 'x':
        out += j.name;
        break;
      case 'u':
        out += j.user;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  return out;
}

// The job's output file: the hook's out= record, `scontrol show job` while SLURM still knows
// the job, the --log-dir, the default slurm-N.out in its working directory. "" when none exists.
std::string FindJobOutput(const FinishedJob& j, const std::string& scontrol,
                          const std::string& log_dir) {
  std::vector<std::string> candidates;
  if (std::string out = RecordField(" " + j.admin_comment, "out"); !out.empty()) {
    candidates.push_back(ResolveOutputPattern(out, j));
  }
  std::string tmp = TempPath("scontrol");
  auto rc = RunToFile({scontrol, "show", "job", "--oneliner", j.job_id}, tmp);
  std::string shown = ReadWholeFile(tmp);
  std::filesystem::remove(tmp);
  std::smatch m;
  static const std::regex kStdOut(R"((?:^|\s)StdOut=(\S+))");
  if (rc.ok() && *rc == 0 && std::regex_search(shown, m, kStdOut)) candidates.push_back(m[1].str());
  std::string dashed = j.job_id.find('_') != std::string::npos ? j.job_id : j.job_id_raw;
  for (const std::string& dir : {log_dir, j.work_dir}) {
    if (dir.empty()) continue;
    candidates.push_back(fmt::format("{}/slurm-{}.out", dir, j.job_id_raw));
    candidates.push_back(fmt::format("{}/slurm-{}.out", dir, dashed));
  }
  for (const auto& c : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(c, ec)) return c;
  }
  return "";
}

struct FollowOptions {
  std::string sacct, scontrol, log_dir;
  bool diagnose = true, json = false;
};

// After a pass: attach the hook's predictions and diagnose the failed jobs not diagnosed yet.
void AfterPass(Store& store, const FollowOptions& o, int64_t from, int64_t to,
               std::set<std::string>* done) {
  auto jobs = FinishedJobs(o.sacct, from, to);
  if (!jobs.ok()) {
    fmt::print(stderr, "rightsize: {}\n", jobs.status().message());
    return;
  }
  for (const auto& j : *jobs) {
    auto job = store.GetJob("", j.job_id);
    // Not ingested yet (it ended after this pass's sacct ran): the stored record, if any, is
    // the agent's of the running job, with no end state; or stored with an end state slurmdbd
    // has since changed (a job on a failing node, first seen ended otherwise, then NODE_FAIL).
    // The next pass stores sacct's record as it is now; diagnosing the old one would keep a
    // wrong class for good.
    if (!job.ok() || job->source != "sacct" || job->outcome.state != NormalizeState(j.state)) {
      continue;
    }
    if (auto pred = PredictionFromRecord(j.admin_comment, job->cluster)) {
      if (!store.GetPrediction(job->cluster, j.job_id).ok()) {
        Status st = store.PutPrediction(
            {job->cluster, j.job_id, job->submit_time.value_or(0), JsonText(*pred)});
        if (!st.ok()) fmt::print(stderr, "rightsize: {}: {}\n", j.job_id, st.message());
      }
    }
    if (!o.diagnose || !IsDiagnosedState(j.state) || done->count(j.job_id) > 0) continue;
    if (store.GetDiagnosis(job->cluster, j.job_id).ok()) {
      done->insert(j.job_id);
      continue;
    }
    DiagnoseInput input;
    input.job = *job;
    // What the agent saw, when it ran on the job's node: the memory trend, silence, stacks.
    if (auto tel = StoredTelemetry(store, *job); tel.ok()) input.telemetry = std::move(*tel);
    if (std::string log = FindJobOutput(j, o.scontrol, o.log_dir); !log.empty()) {
      input.log_paths.push_back(log);
    }
    // The script, while slurmctld still has it, so the fixes can name its lines.
    std::string script = TempPath(("script-" + j.job_id_raw).c_str());
    auto rc = RunToFile({o.scontrol, "write", "batch_script", j.job_id, script}, script + ".out");
    std::filesystem::remove(script + ".out");
    std::error_code ec;
    if (rc.ok() && *rc == 0 && std::filesystem::is_regular_file(script, ec)) {
      input.script_path = script;
    }
    auto d = Diagnose(input);
    if (!input.script_path.empty()) std::filesystem::remove(script);
    if (!d.ok()) {
      fmt::print(stderr, "rightsize: diagnose {}: {}\n", j.job_id, d.status().message());
      continue;
    }
    nlohmann::json doc = DiagnosisToJson(*d);
    StoredDiagnosis stored{job->cluster,
                           j.job_id,
                           static_cast<int64_t>(std::time(nullptr)),
                           std::string(FailureClassName(d->cls)),
                           d->confidence,
                           JsonText(doc)};
    Status st = store.PutDiagnosis(stored);
    if (!st.ok()) {
      fmt::print(stderr, "rightsize: diagnose {}: {}\n", j.job_id, st.message());
      continue;
    }
    done->insert(j.job_id);
    std::string fix = d->fixes.empty() ? "" : d->fixes.front().text;
    if (o.json) {
      fmt::print("{}\n",
                 JsonText(nlohmann::json{{"diagnosed", j.job_id},
                                         {"state", j.state},
                                         {"class", stored.cls},
                                         {"confidence", d->confidence},
                                         {"log", input.log_paths.empty() ? "" : input.log_paths[0]},
                                         {"fix", fix}}));
    } else {
      fmt::print("job {} {}: {} ({:.0f}%){}\n", j.job_id, j.state, stored.cls, 100 * d->confidence,
                 fix.empty() ? "" : ": " + fix);
    }
  }
}

}  // namespace

void AddIngestCommands(CLI::App& app, Context& ctx, Action* action) {
  auto* ingest = app.add_subcommand("ingest", "Load job accounting into the store");
  ingest->require_subcommand(1);

  // ingest sacct
  {
    auto* cmd = ingest->add_subcommand(
        "sacct",
        "Read `sacct -P` output (with or without a header, any column order); steps are "
        "merged into their jobs. Re-ingesting the same jobs replaces them, never duplicates.");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    auto delimiter = std::make_shared<std::string>();
    auto columns = std::make_shared<std::string>();
    auto print_format = std::make_shared<bool>(false);
    cmd->add_option("files", *files, "sacct output files (.gz works), or - for stdin")
        ->type_name("FILE|-");
    AddCommonFlags(cmd, flags.get());
    cmd->add_option("--delimiter", *delimiter,
                    "Field separator, as sacct's --delimiter (default: '|', or detected)");
    cmd->add_option("--columns", *columns,
                    "Column names of a headerless file, as sacct --format (default: the "
                    "--print-format list)");
    cmd->add_flag("--print-format", *print_format,
                  "Print the sacct --format list rightsize reads best, and exit");
    cmd->callback([&ctx, action, files, flags, delimiter, columns, print_format] {
      *action = [&ctx, files, flags, delimiter, columns, print_format]() -> int {
        if (*print_format) {
          fmt::print("{}\n", kSacctFormat);
          return kExitOk;
        }
        if (files->empty()) {
          fmt::print(stderr, "rightsize: ingest sacct needs a FILE (or - for stdin)\n");
          return kExitUsage;
        }
        SacctOptions opts;
        opts.delimiter = *delimiter;
        opts.columns = SplitColumns(*columns);
        return IngestFiles(
            ctx, *files, *flags, false, [opts] { return std::make_unique<SacctParser>(opts); },
            [](const std::string&) { return std::string("default"); });
      };
    });
  }

  // ingest swf
  {
    auto* cmd = ingest->add_subcommand(
        "swf",
        "Read Standard Workload Format traces (.swf or .swf.gz; 18 fields, -1 = unknown); "
        "header comments are kept as cluster metadata");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("files", *files, "SWF files, or - for stdin")->required()->type_name("FILE");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, files, flags] {
      *action = [&ctx, files, flags]() -> int {
        return IngestFiles(
            ctx, *files, *flags, false, [] { return std::make_unique<SwfParser>(); },
            [](const std::string& f) { return ClusterNameFromPath(f); });
      };
    });
  }

  // ingest clustercockpit
  {
    auto* cmd = ingest->add_subcommand(
        "clustercockpit",
        "Read ClusterCockpit job tables exported as CSV (.csv or .csv.gz; header line, columns by "
        "name): measured CPU load, memory, GPU utilisation and GPU memory per job. Running "
        "jobs are skipped; re-ingesting replaces, never duplicates.");
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("files", *files, "CSV files (.gz works), or - for stdin")
        ->required()
        ->type_name("FILE|-");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, files, flags] {
      *action = [&ctx, files, flags]() -> int {
        return IngestFiles(
            ctx, *files, *flags, false, [] { return std::make_unique<ClusterCockpitParser>(); },
            [](const std::string&) { return std::string("default"); });
      };
    });
  }

  // ingest sinfo
  {
    auto* cmd = ingest->add_subcommand(
        "sinfo",
        fmt::format("Read the cluster's partitions (nodes, cores, memory and GPUs per node, the "
                    "default partition) from saved `sinfo --noheader --format='{}'` output; "
                    "`ingest slurm` reads them itself. predict reads a job against its "
                    "partition's nodes, and a script without -p in the default partition",
                    kSinfoFormat));
    auto file = std::make_shared<std::string>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("file", *file, "sinfo output, or - for stdin")->required()->type_name("FILE|-");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, file, flags] {
      *action = [&ctx, file, flags]() -> int {
        std::string text;
        if (*file == "-") {
          text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        } else {
          std::error_code ec;
          if (!std::filesystem::is_regular_file(*file, ec)) {
            return Fail(Status::NotFound(fmt::format("{}: no such file", *file)));
          }
          text = ReadWholeFile(*file);
        }
        return StorePartitions(ctx, text, *file == "-" ? "<stdin>" : *file,
                               flags->cluster.empty() ? "default" : flags->cluster, flags->json);
      };
    });
  }

  // ingest slurm
  {
    auto* cmd = ingest->add_subcommand(
        "slurm",
        "Run sinfo (the partitions' nodes) and sacct on this cluster for a time window and "
        "ingest their output; with --follow, keep ingesting the jobs that end and diagnose the "
        "failed ones");
    struct SlurmFlags {
      std::string since = "14d", until, sacct = "sacct", scontrol = "scontrol", sinfo = "sinfo",
                  log_dir;
      bool follow = false, no_diagnose = false;
      int interval_s = 60, overlap_s = 600, passes = 0;
    };
    auto s = std::make_shared<SlurmFlags>();
    auto flags = std::make_shared<CommonFlags>();
    cmd->add_option("--since", s->since, "Start of the window: 14d, 12h, or 2024-01-31")
        ->capture_default_str();
    cmd->add_option("--until", s->until, "End of the window (default: now)");
    cmd->add_option("--sacct", s->sacct, "The sacct program to run")->capture_default_str();
    cmd->add_option("--sinfo", s->sinfo,
                    "The sinfo program, run first for the partitions' nodes (a failure is a "
                    "warning; the jobs are still ingested)")
        ->capture_default_str();
    cmd->add_flag("--follow", s->follow,
                  "Keep going: every --interval, ingest the jobs that ended since the last pass "
                  "(the window overlaps the last by --overlap; nothing is stored twice) and "
                  "diagnose each newly ended FAILED, OUT_OF_MEMORY, TIMEOUT and NODE_FAIL job "
                  "(stored with it, as `rightsize diagnose JOBID` does). Stops on SIGINT/SIGTERM");
    cmd->add_option("--interval", s->interval_s, "Seconds between passes (--follow)")
        ->capture_default_str()
        ->check(CLI::Range(1, 86400));
    cmd->add_option("--overlap", s->overlap_s,
                    "Seconds each window reaches back before the previous one ended: slurmdbd "
                    "records job ends late (--follow)")
        ->capture_default_str()
        ->check(CLI::Range(0, 30 * 86400));
    cmd->add_option("--log-dir", s->log_dir,
                    "Where the jobs' slurm-N.out files are, when neither the job_submit.lua "
                    "record nor `scontrol show job` says (--follow)");
    cmd->add_option("--scontrol", s->scontrol,
                    "The scontrol program (the cluster's name; jobs' logs with --follow)")
        ->capture_default_str();
    cmd->add_flag("--no-diagnose", s->no_diagnose, "Do not diagnose failed jobs (--follow)");
    cmd->add_option("--passes", s->passes, "Stop after this many passes (--follow; 0 = never)");
    AddCommonFlags(cmd, flags.get());
    cmd->callback([&ctx, action, s, flags] {
      *action = [&ctx, s, flags]() -> int {
        int64_t now = NowS();
        auto from = ParseTimeSpec(s->since, now);
        if (!from.ok()) return Fail(from.status().WithContext("--since"));
        int64_t to = now;
        if (!s->until.empty()) {
          if (s->follow) return Fail(Status::InvalidArgument("--until: not with --follow"));
          auto t = ParseTimeSpec(s->until, now);
          if (!t.ok()) return Fail(t.status().WithContext("--until"));
          to = *t;
        }
        SlurmIngestOptions o;
        o.sacct = s->sacct;
        o.scontrol = s->scontrol;
        o.sinfo = s->sinfo;
        o.log_dir = s->log_dir;
        o.cluster = flags->cluster;
        o.follow = s->follow;
        o.diagnose = !s->no_diagnose;
        o.json = flags->json;
        o.strict = flags->strict;
        o.interval_s = s->interval_s;
        o.overlap_s = s->overlap_s;
        o.passes = s->passes;
        if (s->follow) {
          std::signal(SIGINT, OnStopSignal);
          std::signal(SIGTERM, OnStopSignal);
        }
        return IngestSlurm(ctx, o, *from, to, g_stop);
      };
    });
  }
}

int IngestSlurm(Context& ctx, const SlurmIngestOptions& o, int64_t from, int64_t to,
                const std::atomic<bool>& stop) {
  CommonFlags flags{o.cluster, o.strict, o.json};
  // The partitions first, once: jobs ingested without them would still land.
  {
    std::string cluster = o.cluster.empty() ? SlurmClusterName(o.scontrol) : o.cluster;
    std::string tmp = TempPath("sinfo");
    auto rc = RunToFile({o.sinfo, "--noheader", std::string("--format=") + kSinfoFormat}, tmp);
    if (!rc.ok() || *rc != 0) {
      fmt::print(
          stderr, "rightsize: warning: {}; the partitions' nodes are not known\n",
          rc.ok() ? fmt::format("{} exited with status {}", o.sinfo, *rc) : rc.status().message());
    } else if (cluster.empty()) {
      fmt::print(stderr,
                 "rightsize: warning: {} show config names no ClusterName; give --cluster to "
                 "keep the partitions' nodes\n",
                 o.scontrol);
    } else if (StorePartitions(ctx, ReadWholeFile(tmp), o.sinfo, cluster, o.json) != kExitOk) {
      fmt::print(stderr, "rightsize: warning: the partitions were not stored\n");
    }
    std::filesystem::remove(tmp);
  }
  // One pass: sacct for [from, to] into a file, ingested like `ingest sacct`.
  auto pass = [&](int64_t win_from, int64_t win_to) -> int {
    std::string tmp = TempPath("sacct");
    std::vector<std::string> argv = {o.sacct, "--parsable2", "--allusers",
                                     "--starttime=" + SacctLocalTime(win_from),
                                     "--endtime=" + SacctLocalTime(win_to)};
    // Following, only ended jobs: a running job is stored once, when it has ended.
    if (o.follow) argv.push_back(std::string("--state=") + kEndStates);
    argv.push_back(std::string("--format=") + kSacctFormat);
    auto rc = RunToFile(argv, tmp);
    if (!rc.ok() || *rc != 0) {
      std::filesystem::remove(tmp);
      return Fail(rc.ok() ? Status::IoError(fmt::format("{} exited with status {}", o.sacct, *rc))
                          : rc.status());
    }
    int code = IngestFiles(
        ctx, {tmp}, flags, true, [] { return std::make_unique<SacctParser>(SacctOptions{}); },
        [](const std::string&) { return std::string("default"); });
    std::filesystem::remove(tmp);
    return code;
  };
  if (!o.follow) return pass(from, to);

  FollowOptions fo{o.sacct, o.scontrol, o.log_dir, o.diagnose, o.json};
  std::set<std::string> diagnosed;
  int64_t win_from = from;
  for (int n = 1; !stop; ++n) {
    int64_t win_to = NowS();
    int code = pass(win_from, win_to);
    // A failing pass (sacct down, slurmdbd busy) is reported and retried next time.
    if (code == kExitOk) {
      // Its own connection, closed after the pass: a read left open on the ingest's
      // connection would keep an old snapshot and make the next pass's write fail with
      // "database is locked" while the server writes.
      auto store = OpenStore(ctx.StorePath());
      if (!store.ok()) return Fail(store.status());
      AfterPass(**store, fo, win_from, win_to, &diagnosed);
    }
    std::fflush(stdout);
    if (o.passes > 0 && n >= o.passes) return code;
    if (code == kExitOk) win_from = std::max(win_from, win_to - o.overlap_s);
    for (int t = 0; t < o.interval_s * 10 && !stop; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return kExitOk;
}

}  // namespace rightsize::cli

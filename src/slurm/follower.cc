#include "slurm/follower.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <utility>

#include "core/json_text.h"
#include "core/units.h"
#include "diagnose/diagnosis.h"
#include "diagnose/job_output.h"
#include "diagnose/stored_telemetry.h"
#include "ingest/sacct.h"
#include "slurm/command.h"

namespace rightsize::slurm {

// What following needs beyond the main sacct columns: where the job ran and what the
// job_submit.lua hook wrote in its admin comment.
struct FinishedJob {
  std::string job_id, job_id_raw, state, name, user, work_dir, admin_comment;
};

namespace {

// End states whose jobs following ingests (sacct --state), and those it diagnoses.
constexpr const char* kEndStates = "BF,CA,CD,DL,F,NF,OOM,PR,TO";
bool IsDiagnosedState(const std::string& state) {
  std::string base = state.substr(0, state.find(' '));  // "CANCELLED by 0"
  return base == "FAILED" || base == "OUT_OF_MEMORY" || base == "TIMEOUT" || base == "NODE_FAIL";
}

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

// The file name is part of the output (the pass's summary names it): keep it.
std::string TempPath(const std::string& what) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("rightsize-{}-{}.txt", what, getpid()))
      .string();
}

// The program's stdout when it ran and exited 0; "" otherwise.
std::string OutputOf(const std::vector<std::string>& argv) {
  auto run = RunCommand(argv);
  return run.ok() && run->exit_status == 0 ? std::move(run->out) : std::string();
}

// The cluster's name as SLURM knows it (ClusterName in `scontrol show config`): sacct's
// Cluster column, so the partitions land beside the jobs. "" when scontrol cannot say.
std::string SlurmClusterName(const std::string& scontrol) {
  std::istringstream in(OutputOf({scontrol, "show", "config"}));
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

constexpr const char* kFinishedFormat =
    "--format=JobID,JobIDRaw,State,JobName,User,WorkDir,AdminComment";

// sacct's lines in kFinishedFormat.
std::vector<FinishedJob> ParseFinishedJobs(const std::string& out) {
  std::vector<FinishedJob> jobs;
  std::istringstream in(out);
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

StatusOr<std::vector<FinishedJob>> FinishedJobs(const std::string& sacct, int64_t from,
                                                int64_t to) {
  std::vector<std::string> argv = {sacct,
                                   "--parsable2",
                                   "--noheader",
                                   "--allusers",
                                   "--allocations",
                                   "--starttime=" + SacctLocalTime(from),
                                   "--endtime=" + SacctLocalTime(to),
                                   std::string("--state=") + kEndStates,
                                   kFinishedFormat};
  RS_ASSIGN_OR_RETURN(CommandResult run, RunCommand(argv));
  if (run.exit_status != 0) {
    return Status::IoError(fmt::format("{} exited with status {}", sacct, run.exit_status));
  }
  return ParseFinishedJobs(run.out);
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

// The job's output file, found by the search every diagnosis of a SLURM job shares
// (diagnose/job_output.h): the hook's out= record, `scontrol show job` while SLURM still knows
// the job, files an earlier diagnosis read, the log folder, slurm-N.out in its working
// directory. "" when none exists.
std::string FindJobOutput(const FinishedJob& j, const std::string& scontrol,
                          const std::string& log_dir, std::vector<std::string> known = {}) {
  JobOutputHints hints;
  hints.job_id = j.job_id;
  hints.job_id_raw = j.job_id_raw;
  hints.name = j.name;
  hints.user = j.user;
  hints.out_pattern = RecordField(" " + j.admin_comment, "out");
  std::string shown =
      scontrol.empty() ? "" : OutputOf({scontrol, "show", "job", "--oneliner", j.job_id});
  std::smatch m;
  static const std::regex kStdOut(R"((?:^|\s)StdOut=(\S+))");
  if (std::regex_search(shown, m, kStdOut)) hints.stdout_path = m[1].str();
  hints.known = std::move(known);
  hints.dirs = {log_dir, j.work_dir};
  return rightsize::FindJobOutput(hints);
}

}  // namespace

Follower::Follower(StoreSource store, std::string store_path, FollowerOptions options,
                   FollowerEvents& events)
    : store_(std::move(store)),
      store_path_(std::move(store_path)),
      options_(std::move(options)),
      events_(events) {}

Status Follower::Run(int64_t from, int64_t to, const std::atomic<bool>& stop) {
  // The partitions first, once: jobs ingested without them would still land.
  ReadPartitions();
  if (!options_.follow) return Pass(from, to);
  int64_t win_from = from;
  for (int n = 1; !stop; ++n) {
    int64_t win_to = NowS();
    Status pass = Pass(win_from, win_to);
    // A failing pass (sacct down, slurmdbd busy) is reported and retried next time.
    if (pass.ok()) {
      auto store = OpenStore(store_path_, options_.store);
      if (!store.ok()) {
        events_.OnError(store.status());
        return store.status();
      }
      AfterPass(**store, win_from, win_to);
    }
    events_.OnPassEnd();
    if (options_.passes > 0 && n >= options_.passes) return pass;
    if (pass.ok()) win_from = std::max(win_from, win_to - options_.overlap_s);
    for (int t = 0; t < options_.interval_s * 10 && !stop; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return Status::Ok();
}

// Stores the partitions' shape read from sinfo as the cluster's metadata. A partition no
// longer listed keeps its old keys (a drained partition still ran jobs).
void Follower::ReadPartitions() {
  const FollowerOptions& o = options_;
  std::string cluster = o.cluster.empty() ? SlurmClusterName(o.scontrol) : o.cluster;
  auto run = RunCommand({o.sinfo, "--noheader", std::string("--format=") + kSinfoFormat});
  if (!run.ok() || run->exit_status != 0) {
    events_.OnWarning(
        fmt::format("{}; the partitions' nodes are not known",
                    run.ok() ? fmt::format("{} exited with status {}", o.sinfo, run->exit_status)
                             : run.status().message()));
    return;
  }
  if (cluster.empty()) {
    events_.OnWarning(fmt::format(
        "{} show config names no ClusterName; give --cluster to keep the partitions' nodes",
        o.scontrol));
    return;
  }
  auto parts = ParseSinfo(run->out, o.sinfo);
  Status st = parts.status();
  if (st.ok()) {
    auto store = store_();
    st = store.ok() ? (*store)->PutClusterMeta(cluster, PartitionMeta(*parts)) : store.status();
  }
  if (!st.ok()) {
    events_.OnError(st);
    events_.OnWarning("the partitions were not stored");
    return;
  }
  events_.OnPartitions(cluster, *parts);
}

// sacct for [from, to] into a file, ingested like `ingest sacct`.
Status Follower::Pass(int64_t from, int64_t to) {
  const FollowerOptions& o = options_;
  std::string tmp = TempPath("sacct");
  std::vector<std::string> argv = {o.sacct, "--parsable2", "--allusers",
                                   "--starttime=" + SacctLocalTime(from),
                                   "--endtime=" + SacctLocalTime(to)};
  // Following, only ended jobs: a running job is stored once, when it has ended.
  if (o.follow) argv.push_back(std::string("--state=") + kEndStates);
  argv.push_back(std::string("--format=") + kSacctFormat);
  auto run = RunCommand(argv, tmp);
  if (!run.ok() || run->exit_status != 0) {
    std::filesystem::remove(tmp);
    Status st =
        run.ok()
            ? Status::IoError(fmt::format("{} exited with status {}", o.sacct, run->exit_status))
            : run.status();
    events_.OnError(st);
    return st;
  }
  auto store = store_();
  if (!store.ok()) {
    std::filesystem::remove(tmp);
    events_.OnError(store.status());
    return store.status();
  }
  SacctParser parser(SacctOptions{});
  IngestOptions options;
  options.strict = o.strict;
  options.override_cluster = !o.cluster.empty();
  options.allow_empty = true;  // a quiet window
  options.on_error = [this](const IngestError& e) { events_.OnMalformedLine(e); };
  options.progress = [this](int64_t done, int64_t total) { events_.OnIngestProgress(done, total); };
  events_.OnIngestStart(tmp);
  IngestStats stats;
  Status st =
      IngestFile(tmp, parser, **store, o.cluster.empty() ? "default" : o.cluster, options, &stats);
  events_.OnIngested(stats, st);
  std::filesystem::remove(tmp);
  return st;
}

// After a pass: attach the hook's predictions and diagnose the failed jobs not diagnosed yet.
void Follower::AfterPass(Store& store, int64_t from, int64_t to) {
  auto jobs = FinishedJobs(options_.sacct, from, to);
  if (!jobs.ok()) {
    events_.OnError(jobs.status());
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
    AttachPrediction(store, j, *job);
    if (!options_.diagnose || !IsDiagnosedState(j.state) || diagnosed_.count(j.job_id) > 0) {
      continue;
    }
    // One stored already (by an earlier run, or by the agent that saw the job end) is kept,
    // unless it could say nothing: accounting and the output file may tell more.
    if (auto stored = store.GetDiagnosis(job->cluster, j.job_id);
        stored.ok() && stored->cls != "unknown") {
      diagnosed_.insert(j.job_id);
      continue;
    }
    DiagnoseJob(store, j, *job);
  }
}

void Follower::AttachPrediction(Store& store, const FinishedJob& j, const JobRecord& job) {
  auto pred = PredictionFromRecord(j.admin_comment, job.cluster);
  if (!pred || store.GetPrediction(job.cluster, j.job_id).ok()) return;
  Status st =
      store.PutPrediction({job.cluster, j.job_id, job.submit_time.value_or(0), JsonText(*pred)});
  if (!st.ok()) events_.OnError(st.WithContext(j.job_id));
}

void Follower::DiagnoseJob(Store& store, const FinishedJob& j, const JobRecord& job) {
  const FollowerOptions& o = options_;
  DiagnoseInput input;
  input.job = job;
  // What the agent saw, when it ran on the job's node: the memory trend, silence, stacks.
  if (auto tel = StoredTelemetry(store, job, o.prices); tel.ok()) input.telemetry = std::move(*tel);
  if (std::string log = FindJobOutput(j, o.scontrol, o.log_dir); !log.empty()) {
    input.log_paths.push_back(log);
  }
  // The script, while slurmctld still has it, so the fixes can name its lines.
  std::string script = TempPath("script-" + j.job_id_raw);
  auto run = RunCommand({o.scontrol, "write", "batch_script", j.job_id, script});
  std::error_code ec;
  if (run.ok() && run->exit_status == 0 && std::filesystem::is_regular_file(script, ec)) {
    input.script_path = script;
  }
  auto d = Diagnose(input);
  if (!input.script_path.empty()) std::filesystem::remove(script);
  if (!d.ok()) {
    events_.OnError(d.status().WithContext("diagnose " + j.job_id));
    return;
  }
  if (Status st = SaveDiagnosis(store, job, *d, static_cast<int64_t>(std::time(nullptr)));
      !st.ok()) {
    events_.OnError(st.WithContext("diagnose " + j.job_id));
    return;
  }
  diagnosed_.insert(j.job_id);
  events_.OnDiagnosed({j.job_id, j.state, std::string(FailureClassName(d->cls)), d->confidence,
                       input.log_paths.empty() ? "" : input.log_paths[0],
                       d->fixes.empty() ? "" : d->fixes.front().text});
}

std::string FindSlurmJobOutput(const std::string& job_id, const OutputSearch& search) {
  FinishedJob j{job_id, job_id, "", "", "", "", ""};
  // sacct's row of the job: its working directory, name, user and the hook's out= record.
  if (!search.sacct.empty()) {
    std::string out = OutputOf({search.sacct, "--parsable2", "--noheader", "--allusers",
                                "--allocations", "--jobs=" + job_id, kFinishedFormat});
    for (FinishedJob& row : ParseFinishedJobs(out)) {
      if (row.job_id == job_id || row.job_id_raw == job_id) {
        j = std::move(row);
        break;
      }
    }
  }
  return FindJobOutput(j, search.scontrol, search.log_dir, search.known);
}

nlohmann::json DiagnosedJobJson(const DiagnosedJob& d) {
  return {{"diagnosed", d.job_id},      {"state", d.state}, {"class", d.cls},
          {"confidence", d.confidence}, {"log", d.log},     {"fix", d.fix}};
}

std::string DiagnosedJobText(const DiagnosedJob& d) {
  return fmt::format("job {} {}: {} ({:.0f}%){}", d.job_id, d.state, d.cls, 100 * d.confidence,
                     d.fix.empty() ? "" : ": " + d.fix);
}

}  // namespace rightsize::slurm

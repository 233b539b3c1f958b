#include "mcp/tools.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string_view>

#include "core/units.h"
#include "diagnose/diagnosis.h"
#include "diagnose/log_scan.h"
#include "diagnose/stored_telemetry.h"
#include "jobscript/job_script.h"
#include "predict/code_estimate.h"
#include "predict/eval.h"
#include "predict/predict.h"
#include "report/job_series.h"
#include "report/live.h"
#include "report/prices.h"
#include "report/render.h"
#include "report/waste.h"

namespace rightsize::mcp {

namespace {

using Json = nlohmann::json;

// ---- schemas ----

Json Str(std::string_view description) {
  return {{"type", "string"}, {"description", description}};
}
// An integer that fits the int the services take.
Json Int(std::string_view description) {
  return {{"type", "integer"},
          {"minimum", -2147483648LL},
          {"maximum", 2147483647LL},
          {"description", description}};
}
Json Bool(std::string_view description) {
  return {{"type", "boolean"}, {"description", description}};
}
Json Strings(std::string_view description) {
  return {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", description}};
}
Json Input(Json properties, Json required = Json::array()) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}
// A versioned document: "schema" is `name`; `fields` are the top-level members every answer
// has, with their JSON types.
Json Output(std::string_view name, const std::vector<std::pair<std::string, Json>>& fields) {
  Json props = {{"schema", {{"type", "string"}, {"const", name}}}};
  Json required = {"schema"};
  for (const auto& [field, type] : fields) {
    props[field] = {{"type", type}};
    required.push_back(field);
  }
  return {{"type", "object"}, {"properties", props}, {"required", required}};
}

// ---- arguments ----

std::string Text(const Json& args, const char* key) { return args.value(key, std::string()); }
std::vector<std::string> Texts(const Json& args, const char* key) {
  return args.value(key, std::vector<std::string>());
}

// A log path the server may read: never "-", which is the protocol's own standard input.
Status CheckLogPath(const std::string& path) {
  if (path == "-") {
    return Status::InvalidArgument(
        "log_paths: \"-\" (standard input) carries the MCP messages here; give the log as "
        "log_text instead");
  }
  return Status::Ok();
}

// ---- tools ----

StatusOr<Json> RunPredict(const Json& args, ToolContext& ctx) {
  PredictRequest request;
  request.script = Text(args, "script");
  if (args.contains("script_text")) {
    request.script_text = Text(args, "script_text");
    if (request.script.empty()) request.script = "job.sh";
  } else if (request.script.empty()) {
    return Status::InvalidArgument("predict: give script (a path) or script_text");
  }
  request.code = Text(args, "code");
  request.sbatch_args = Texts(args, "sbatch_args");
  request.cluster = Text(args, "cluster");
  request.user = Text(args, "user");
  request.account = Text(args, "account");
  request.partition = Text(args, "partition");
  request.prices = Text(args, "prices");
  request.risk = args.value("risk", request.risk);
  request.per_job_risk = args.value("per_job_risk", false);
  request.now = args.value("now", int64_t{0});
  RS_ASSIGN_OR_RETURN(Store * store, ctx.store());
  RS_ASSIGN_OR_RETURN(PredictionOutput out, PredictJob(*store, request));
  return std::move(out.doc);
}

StatusOr<Json> RunAdvise(const Json& args, ToolContext& /*ctx*/) {
  std::string script_path = Text(args, "script");
  std::string code = Text(args, "code");
  std::vector<std::string> sbatch_args = Texts(args, "sbatch_args");
  StatusOr<JobScript> script = Status::NotFound("no script");
  if (args.contains("script_text")) {
    if (code.empty()) {
      return Status::InvalidArgument(
          "advise: with script_text, give code (the folder or .py file the script runs)");
    }
    if (script_path.empty()) script_path = "job.sh";
    script = ParseJobScript(Text(args, "script_text"), sbatch_args);
  } else if (!script_path.empty()) {
    script = ParseJobScriptFile(script_path, sbatch_args);
  } else if (code.ends_with(".py") && std::filesystem::is_regular_file(code)) {
    // One program and no script: the job is `python FILE` in the file's folder.
    std::filesystem::path file(code);
    script_path = "job.sh";
    script = ParseJobScript(fmt::format("#!/bin/bash\npython {}\n", file.filename().string()));
  } else {
    return Status::InvalidArgument(
        "advise: give script (a path) or script_text with code, or code as one .py file");
  }
  if (!script.ok()) return script.status();
  // The analysis reads a folder: a single file's is its folder.
  if (!code.empty() && std::filesystem::is_regular_file(code)) {
    std::string dir = std::filesystem::path(code).parent_path().string();
    code = dir.empty() ? "." : dir;
  }
  RS_ASSIGN_OR_RETURN(CodeAdvice advice,
                      AdviseJobCode(*script, script_path, code, Text(args, "gpu")));
  return AdviseJson(advice, script_path);
}

StatusOr<Json> RunDiagnose(const Json& args, ToolContext& ctx) {
  std::string job_id = Text(args, "job_id");
  std::vector<std::string> log_paths = Texts(args, "log_paths");
  if (job_id.empty() && log_paths.empty() && !args.contains("log_text")) {
    return Status::InvalidArgument(
        "diagnose: give job_id (a job in the store), log_text or "
        "log_paths");
  }
  DiagnoseInput input;
  input.script_path = Text(args, "script");
  input.code_dir = Text(args, "code");
  if (!input.script_path.empty()) {
    // Diagnosing from scans drops a script it cannot read; the caller should hear why.
    auto script = ParseJobScriptFile(input.script_path);
    if (!script.ok()) return script.status().WithContext("script");
  }
  std::vector<LogScan> scans;
  if (args.contains("log_text")) {
    scans.push_back(ScanLogText(Text(args, "log_text"), "log_text"));
  }
  for (const auto& path : log_paths) {
    RS_RETURN_IF_ERROR(CheckLogPath(path));
    RS_ASSIGN_OR_RETURN(LogScan scan, ScanLogFile(path));
    scans.push_back(std::move(scan));
    input.log_paths.push_back(path);
  }
  Store* store = nullptr;
  std::string state = Text(args, "state");
  std::optional<int> exit_code, signal;
  if (args.contains("exit_code")) exit_code = args["exit_code"].get<int>();
  if (args.contains("signal")) signal = args["signal"].get<int>();
  if (!job_id.empty()) {
    RS_ASSIGN_OR_RETURN(store, ctx.store());
    auto prices = PricesFor("");  // the GPUs' memory by model
    RS_RETURN_IF_ERROR(AddStoredJob(*store, Text(args, "cluster"), job_id,
                                    prices.ok() ? &*prices : nullptr, &input));
  } else if (!state.empty() || exit_code || signal) {
    input.job = JobRecord{};
  }
  if (input.job) {
    if (!state.empty()) input.job->outcome.state = state;
    if (exit_code) input.job->outcome.exit_code = exit_code;
    if (signal) input.job->outcome.signal = signal;
  }
  Diagnosis d = DiagnoseScans(std::move(scans), input);
  if (store != nullptr && args.value("save", true)) {
    RS_RETURN_IF_ERROR(SaveDiagnosis(*store, *input.job, d, ctx.now_s()));
  }
  return DiagnosisToJson(d);
}

StatusOr<Json> JobCard(ToolContext& ctx, const std::string& cluster, const std::string& job_id,
                       const std::string& prices_path) {
  RS_ASSIGN_OR_RETURN(PriceTable prices, PricesFor(prices_path));
  RS_ASSIGN_OR_RETURN(Store * store, ctx.store());
  RS_ASSIGN_OR_RETURN(JobView view, ViewJob(*store, cluster, job_id, ctx.now_s()));
  return JobViewJson(view, prices);
}

StatusOr<Json> RunJob(const Json& args, ToolContext& ctx) {
  return JobCard(ctx, Text(args, "cluster"), Text(args, "job_id"), Text(args, "prices"));
}

StatusOr<Json> RunReport(const Json& args, ToolContext& ctx) {
  int64_t now = ctx.now_s();
  ReportOptions opts;
  opts.cluster = Text(args, "cluster");
  opts.by = Text(args, "by");
  opts.top_n = args.value("top", opts.top_n);
  if (std::string since = Text(args, "since"); !since.empty()) {
    auto t = ParseTimeSpec(since, now);
    if (!t.ok()) return t.status().WithContext("since");
    opts.since = *t;
  }
  if (std::string until = Text(args, "until"); !until.empty()) {
    auto t = ParseTimeSpec(until, now);
    if (!t.ok()) return t.status().WithContext("until");
    opts.until = *t;
  }
  RS_ASSIGN_OR_RETURN(PriceTable prices, PricesFor(Text(args, "prices")));
  RS_ASSIGN_OR_RETURN(Store * store, ctx.store());
  RS_ASSIGN_OR_RETURN(WasteReport report, BuildWasteReport(*store, opts, prices));
  AddQueueWhatIf(*store, &report);  // as `rightsize report` does: the same document
  return RenderJson(report);
}

StatusOr<Json> RunEval(const Json& args, ToolContext& ctx) {
  EvalRequest request;
  request.trace = Text(args, "trace");
  request.format = Text(args, "format");
  request.cluster = Text(args, "cluster");
  request.options.retrain_every_s = args.value("retrain_every_s", request.options.retrain_every_s);
  request.options.correct_every_s = args.value("correct_every_s", request.options.correct_every_s);
  request.options.test_fraction = args.value("test_fraction", request.options.test_fraction);
  Store* store = nullptr;  // a trace is replayed without opening the store
  if (request.trace.empty()) {
    RS_ASSIGN_OR_RETURN(store, ctx.store());
  }
  RS_ASSIGN_OR_RETURN(EvalOutput out, EvalHistory(store, std::move(request)));
  return std::move(out.doc);
}

std::vector<Tool> MakeTools() {
  std::vector<Tool> tools;
  Json script_props = {
      {"script", Str("Path of the batch script (#SBATCH lines and the commands it runs)")},
      {"script_text", Str("The batch script itself, instead of a path")},
      {"sbatch_args",
       Strings("sbatch options, which override the script's #SBATCH lines (\"--mem=8G\")")},
  };
  Json predict_props = script_props;
  predict_props.update({
      {"code", Str("Folder of the job's Python code, read for its GPU memory (default: the "
                   "script's folder; a script given as text is read for code only with this)")},
      {"cluster", Str("The cluster (default: the store's only one)")},
      {"user", Str("Whose job it is (default: the script's, else $USER)")},
      {"account", Str("Account (overrides the script's)")},
      {"partition", Str("Partition (overrides the script's)")},
      {"risk",
       {{"type", "number"},
        {"minimum", 0.0001},
        {"maximum", 0.5},
        {"description",
         "Accepted share of jobs whose suggested request is too small (default 0.01)"}}},
      {"per_job_risk", Bool("Bound this job's own chance to outgrow the suggestion instead")},
      {"now",
       {{"type", "integer"},
        {"minimum", 0},
        {"maximum", 100000000000LL},
        {"description", "Predict as of this Unix time (default: now)"}}},
      {"prices", Str("Price table file, for GPU memory sizes (default: built in)")},
  });
  tools.push_back(
      {"predict", "Predict a job's use",
       "What a SLURM job script will really use (p10/p50/p90 of run time, CPU cores, memory, "
       "GPU memory), the risk that its request is too small, and the request to make instead "
       "(the document `rightsize predict --json` prints).",
       Input(predict_props),
       Output("rightsize.predict/v1", {{"cluster", "string"},
                                       {"targets", "object"},
                                       {"notes", "array"},
                                       {"warnings", "array"},
                                       {"similar_jobs", "array"}}),
       RunPredict});

  Json advise_props = script_props;
  advise_props.update({
      {"code", Str("Folder of the job's Python code, or one .py file (alone: the job runs "
                   "`python FILE`)")},
      {"gpu", Str("GPU to fit on: H100-80GB, A100-40GB, A100-80GB, H200-141GB, V100-32GB, "
                  "L40S-48GB, … (default: the script's --gres type, else H100-80GB)")},
  });
  tools.push_back(
      {"advise", "Advise on a job's code",
       "Read a job's Python code: the GPU memory it needs (p10/p50/p90, with the lines that "
       "drive it) and line-level advice (the document `rightsize advise --json` prints).",
       Input(advise_props),
       Output("rightsize.advise/v1", {{"script", "string"},
                                      {"code_dir", "string"},
                                      {"gpu", "object"},
                                      {"code", "object"},
                                      {"advice", "array"}}),
       RunAdvise});

  tools.push_back(
      {"diagnose", "Diagnose a failed job",
       "Why a job failed and how to fix it, from a job in the store (its state, exit code, "
       "limits, peaks and telemetry), its logs, its script and its code (the document "
       "`rightsize diagnose --json` prints). With job_id the diagnosis is kept with the job "
       "unless save is false.",
       Input({{"job_id", Str("A job in the store")},
              {"cluster", Str("The job's cluster (default: any)")},
              {"log_text", Str("A log of the job, as text (slurm-N.out, stderr, dmesg)")},
              {"log_paths", Strings("Paths of the job's log files (.gz read as is)")},
              {"script", Str("Path of the job script: fixes name its #SBATCH lines")},
              {"code", Str("The job's source folder or file: fixes name its lines")},
              {"state", Str("The end state when the job is not in the store (FAILED, TIMEOUT, "
                            "OUT_OF_MEMORY, NODE_FAIL, …)")},
              {"exit_code", Int("The job's exit code (137 = killed by SIGKILL)")},
              {"signal", Int("The signal that ended the job (9, 11, …)")},
              {"save", Bool("Keep the diagnosis with the job in the store (default true)")}}),
       Output("rightsize.diagnosis/v1", {{"class", "string"},
                                         {"confidence", "number"},
                                         {"summary", "string"},
                                         {"why", "string"},
                                         {"fixes", "array"},
                                         {"evidence", "array"},
                                         {"causes", "array"}}),
       RunDiagnose});

  tools.push_back(
      {"job", "A job's efficiency card",
       "One job's efficiency (CPU, memory, GPU, time) with advice for its next request; for a "
       "running job, its use so far from the agents' samples (the document `rightsize job "
       "--json` prints).",
       Input({{"job_id",
               {{"type", "string"},
                {"minLength", 1},
                {"description", "The job id (123, 123_4 for an array task)"}}},
              {"cluster", Str("The job's cluster (default: any)")},
              {"prices", Str("Price table file (default: the built-in one)")}},
             {"job_id"}),
       Output("rightsize.job/v1", {{"job", "object"},
                                   {"cpu", "object"},
                                   {"memory", "object"},
                                   {"time", "object"},
                                   {"cost", "object"},
                                   {"advice", "array"}}),
       RunJob});

  Json by = Str("Group the waste table by this");
  by["enum"] = Json(std::vector<std::string>(kReportGroupKeys.begin(), kReportGroupKeys.end()));
  tools.push_back(
      {"report", "The waste report",
       "How much of what jobs reserved they used, what the rest cost, and what right-sizing "
       "would recover, for the jobs that ended in the window (the document `rightsize report "
       "--json` prints).",
       Input({{"since", Str("Jobs that ended at or after: 14d (ago), 12h, or 2024-01-31 "
                            "(default: all)")},
              {"until", Str("Jobs that ended before (default: no limit)")},
              {"cluster", Str("Only this cluster (default: all)")},
              {"by", by},
              {"top",
               {{"type", "integer"},
                {"minimum", 0},
                {"maximum", 10000},
                {"description", "How many top wasters to list (default 10)"}}},
              {"prices", Str("Price table file (default: the built-in list prices)")}}),
       Output("rightsize.report/v1", {{"window", "object"},
                                      {"jobs", "integer"},
                                      {"cost", "object"},
                                      {"recoverable", "object"},
                                      {"top_wasters", "array"}}),
       RunReport});

  tools.push_back(
      {"eval", "Replay the predictor on history",
       "Chronological replay of an accounting trace or the store's jobs: the model and the "
       "baselines side by side, trained only on the past (the document `rightsize eval --json` "
       "prints). Takes seconds to minutes.",
       Input({{"trace", Str("An accounting file (SWF, sacct -P or ClusterCockpit CSV) replayed "
                            "without storing it (default: the store's jobs)")},
              {"format",
               {{"type", "string"},
                {"enum", {"swf", "sacct", "clustercockpit"}},
                {"description", "Format of trace (default: from the file name)"}}},
              {"cluster", Str("The cluster to replay (default: the only one)")},
              {"retrain_every_s",
               {{"type", "integer"},
                {"minimum", 3600},
                {"maximum", 100000000000LL},
                {"description",
                 "Retrain every so many seconds of trace time "
                 "(default 604800: 7 days)"}}},
              {"correct_every_s",
               {{"type", "integer"},
                {"minimum", 0},
                {"maximum", 100000000000LL},
                {"description",
                 "Move the risk correction between retrains "
                 "every so many seconds (default 3600; 0: only "
                 "at retrains)"}}},
              {"test_fraction",
               {{"type", "number"},
                {"minimum", 0.05},
                {"maximum", 0.95},
                {"description", "Score the latest share of jobs (default 0.5)"}}}}),
       Output("rightsize.eval/v1", {{"input", "string"},
                                    {"jobs", "integer"},
                                    {"targets", "object"},
                                    {"retrains", "integer"}}),
       RunEval});
  return tools;
}

// rightsize://job/{id}[/series][?cluster=NAME]
struct JobUri {
  std::string job_id, cluster;
  bool series = false;
};

constexpr std::string_view kJobUriPrefix = "rightsize://job/";

StatusOr<JobUri> ParseJobUri(std::string_view uri) {
  auto invalid = [&] {
    return Status::InvalidArgument(
        fmt::format("uri: expected rightsize://job/{{id}} or rightsize://job/{{id}}/series (with "
                    "?cluster=NAME to pick the cluster), got {}",
                    Quote(uri)));
  };
  if (!uri.starts_with(kJobUriPrefix)) return invalid();
  std::string_view rest = uri.substr(kJobUriPrefix.size());
  JobUri out;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!query.starts_with("cluster=")) return invalid();
    out.cluster = std::string(query.substr(8));
  }
  if (rest.ends_with("/series")) {
    out.series = true;
    rest.remove_suffix(7);
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos) return invalid();
  out.job_id = std::string(rest);
  return out;
}

std::string JobUriFor(const JobRecord& job, bool series) {
  return fmt::format("{}{}{}?cluster={}", kJobUriPrefix, job.job_id, series ? "/series" : "",
                     job.cluster);
}

}  // namespace

const std::vector<Tool>& Tools() {
  static const std::vector<Tool> kTools = MakeTools();
  return kTools;
}

Json ResourceTemplates() {
  return Json::array(
      {{{"uriTemplate", "rightsize://job/{id}"},
        {"name", "job"},
        {"title", "A job's record and efficiency card"},
        {"description",
         "The job card of a job in the store (rightsize.job/v1, as `rightsize job --json`); "
         "add ?cluster=NAME where two clusters share an id"},
        {"mimeType", "application/json"}},
       {{"uriTemplate", "rightsize://job/{id}/series"},
        {"name", "job-series"},
        {"title", "A job's sampled series"},
        {"description",
         "The job's telemetry series, each point [time, mean, max], with what the job holds "
         "(as GET /api/v1/jobs/{cluster}/{id}/series)"},
        {"mimeType", "application/json"}}});
}

StatusOr<Json> ListJobResources(ToolContext& ctx, const std::string& cursor) {
  RS_ASSIGN_OR_RETURN(Store * store, ctx.store());
  JobPage page;
  page.limit = 50;
  if (!cursor.empty()) page.after = cursor;
  RS_ASSIGN_OR_RETURN(JobList list, store->ListJobs(JobFilter{}, page));
  Json resources = Json::array();
  for (const auto& job : list.jobs) {
    std::string what = fmt::format("{} job {} of {} ({}, {})", job.cluster, job.job_id,
                                   job.request.user, job.request.job_name, job.outcome.state);
    resources.push_back({{"uri", JobUriFor(job, false)},
                         {"name", fmt::format("job/{}/{}", job.cluster, job.job_id)},
                         {"title", what},
                         {"mimeType", "application/json"}});
  }
  Json out = {{"resources", resources}};
  if (list.next) out["nextCursor"] = *list.next;
  return out;
}

StatusOr<Json> ReadResource(ToolContext& ctx, const std::string& uri) {
  RS_ASSIGN_OR_RETURN(JobUri parsed, ParseJobUri(uri));
  Json doc;
  if (parsed.series) {
    RS_ASSIGN_OR_RETURN(Store * store, ctx.store());
    RS_ASSIGN_OR_RETURN(JobRecord job, store->GetJob(parsed.cluster, parsed.job_id));
    RS_ASSIGN_OR_RETURN(PriceTable prices, PricesFor(""));
    RS_ASSIGN_OR_RETURN(doc, JobSeriesJson(*store, job, SeriesWindow{}, prices, ctx.now_s()));
  } else {
    RS_ASSIGN_OR_RETURN(doc, JobCard(ctx, parsed.cluster, parsed.job_id, ""));
  }
  return doc;
}

}  // namespace rightsize::mcp

// `rightsize ingest sacct|swf|clustercockpit|sinfo|slurm|prometheus`: load accounting into the
// store.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/line_reader.h"
#include "ingest/prometheus.h"
#include "ingest/sacct.h"
#include "ingest/sinfo.h"
#include "ingest/swf.h"
#include "jobscript/job_script.h"
#include "jobscript/k8s_workload.h"
#include "predict/code_estimate.h"
#include "report/render.h"
#include "slurm/follower.h"

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

// Prints ingest runs: each malformed line on stderr as it is found (the first kPrintedErrors
// of a file), a summary line per file or, with --json, one document for the run.
class IngestPrinter {
 public:
  // `json_indent` -1: each document on one line (JSON Lines: the follower's passes).
  IngestPrinter(bool json, std::string store_path, int json_indent = 2)
      : json_(json), json_indent_(json_indent), store_path_(std::move(store_path)) {}

  void Start(const std::string& file) {
    printed_ = 0;
    bar_.emplace(fmt::format("ingest {}", file));
  }
  void MalformedLine(const IngestError& e) {
    if (json_) return;
    if (printed_++ < kPrintedErrors) {
      fmt::print(stderr, "{}\n", e.ToString());
    } else if (printed_ == kPrintedErrors + 1) {
      fmt::print(stderr, "{}: more malformed lines; only the first {} are shown\n", e.file,
                 kPrintedErrors);
    }
  }
  void Progress(int64_t done, int64_t total) {
    if (bar_) bar_->Update(done, total);
  }
  void Ingested(const IngestStats& stats, const Status& st) {
    if (bar_) bar_->Done();
    bar_.reset();
    total_stored_ += stats.stored;
    total_new_ = stats.new_jobs >= 0 && total_new_ >= 0 ? total_new_ + stats.new_jobs : -1;
    total_skipped_ += stats.skipped;
    if (json_) {
      files_.push_back(IngestStatsJson(stats, st));
    } else {
      fmt::print("{}", IngestSummaryText(stats));
    }
    if (!st.ok()) {
      if (!json_) fmt::print(stderr, "rightsize: {}\n", st.message());
      exit_code_ = std::max(exit_code_, ExitCodeFor(st));
    }
  }
  // The end of a run: with --json its document. Returns the run's exit code; starts anew.
  int Finish() {
    if (json_) {
      fmt::print("{}\n",
                 JsonText(nlohmann::json{{"files", files_},
                                         {"stored", total_stored_},
                                         {"new_jobs", total_new_ >= 0 ? nlohmann::json(total_new_)
                                                                      : nlohmann::json(nullptr)},
                                         {"skipped", total_skipped_},
                                         {"store", store_path_}},
                          json_indent_));
    }
    int code = exit_code_;
    files_ = nlohmann::json::array();
    total_stored_ = total_skipped_ = total_new_ = 0;
    exit_code_ = kExitOk;
    return code;
  }

 private:
  static constexpr int kPrintedErrors = 20;
  bool json_;
  int json_indent_;
  std::string store_path_;
  std::optional<ProgressBar> bar_;
  int printed_ = 0;
  nlohmann::json files_ = nlohmann::json::array();
  int64_t total_stored_ = 0, total_skipped_ = 0;
  int64_t total_new_ = 0;  // -1 once a file could not tell
  int exit_code_ = kExitOk;
};

// Ingests each file with a fresh parser from `make_parser`; prints per-file summaries.
int IngestFiles(Context& ctx, const std::vector<std::string>& files, const CommonFlags& flags,
                const std::function<std::unique_ptr<RecordParser>()>& make_parser,
                const std::function<std::string(const std::string&)>& default_cluster) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  IngestPrinter printer(flags.json, ctx.StorePath());
  for (const auto& file : files) {
    auto parser = make_parser();
    IngestOptions options;
    options.strict = flags.strict;
    options.override_cluster = !flags.cluster.empty();
    options.on_error = [&](const IngestError& e) { printer.MalformedLine(e); };
    options.progress = [&](int64_t done, int64_t total) { printer.Progress(done, total); };
    printer.Start(file);
    std::string cluster = flags.cluster.empty() ? default_cluster(file) : flags.cluster;
    IngestStats stats;
    Status st = IngestFile(file, *parser, **store, cluster, options, &stats);
    printer.Ingested(stats, st);
  }
  return printer.Finish();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The follower's events as `ingest slurm` prints them: each pass as `ingest sacct` prints a
// file (with --json its document on one line), each diagnosis a line (with --json a JSON
// line), warnings and errors on stderr: with --json, stdout is JSON Lines.
class FollowerPrinter final : public slurm::FollowerEvents {
 public:
  FollowerPrinter(bool json, std::string store_path)
      : json_(json), ingest_(json, std::move(store_path), -1) {}

  void OnPartitions(const std::string& cluster,
                    const std::vector<PartitionShape>& partitions) override {
    // With --json the jobs' document is all.
    if (!json_) fmt::print("{}", PartitionsText(cluster, partitions));
  }
  void OnIngestStart(const std::string& file) override { ingest_.Start(file); }
  void OnMalformedLine(const IngestError& error) override { ingest_.MalformedLine(error); }
  void OnIngestProgress(int64_t done, int64_t total) override { ingest_.Progress(done, total); }
  void OnIngested(const IngestStats& stats, const Status& status) override {
    ingest_.Ingested(stats, status);
    ingest_.Finish();
  }
  void OnDiagnosed(const slurm::DiagnosedJob& d) override {
    fmt::print("{}\n", json_ ? JsonText(DiagnosedJobJson(d)) : DiagnosedJobText(d));
  }
  void OnPassEnd() override { std::fflush(stdout); }
  void OnWarning(const std::string& message) override {
    fmt::print(stderr, "rightsize: warning: {}\n", message);
  }
  void OnError(const Status& status) override { Fail(status); }

 private:
  bool json_;
  IngestPrinter ingest_;
};

// ingest sacct
void AddIngestSacct(CLI::App* ingest, Context& ctx, Action* action) {
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
      opts.columns = SacctColumns(*columns);
      return IngestFiles(
          ctx, *files, *flags, [opts] { return std::make_unique<SacctParser>(opts); },
          [](const std::string&) { return std::string("default"); });
    };
  });
}

// ingest swf
void AddIngestSwf(CLI::App* ingest, Context& ctx, Action* action) {
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
          ctx, *files, *flags, [] { return std::make_unique<SwfParser>(); },
          [](const std::string& f) { return ClusterNameFromPath(f); });
    };
  });
}

// ingest clustercockpit
void AddIngestClusterCockpit(CLI::App* ingest, Context& ctx, Action* action) {
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
          ctx, *files, *flags, [] { return std::make_unique<ClusterCockpitParser>(); },
          [](const std::string&) { return std::string("default"); });
    };
  });
}

// ingest sinfo
void AddIngestSinfo(CLI::App* ingest, Context& ctx, Action* action) {
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
      auto store = ctx.OpenedStore();
      if (!store.ok()) return Fail(store.status());
      std::string cluster = flags->cluster.empty() ? "default" : flags->cluster;
      auto parts = StorePartitions(**store, text, *file == "-" ? "<stdin>" : *file, cluster);
      if (!parts.ok()) return Fail(parts.status());
      if (!flags->json) fmt::print("{}", PartitionsText(cluster, *parts));
      return kExitOk;
    };
  });
}

// ingest slurm
void AddIngestSlurm(CLI::App* ingest, Context& ctx, Action* action) {
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
      auto now = static_cast<int64_t>(std::time(nullptr));
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
        CatchStopSignals();
      }
      return IngestSlurm(ctx, o, *from, to, StopFlag());
    };
  });
}

// A span for --step and --chunk: "60s", "5m", "1h", "1d", or plain seconds.
StatusOr<int64_t> ParseSpan(const std::string& text) {
  std::string_view t = Trim(text);
  int64_t unit = 1;
  if (!t.empty() && std::string_view("smhd").find(t.back()) != std::string_view::npos) {
    unit = t.back() == 's' ? 1 : t.back() == 'm' ? 60 : t.back() == 'h' ? 3600 : 86400;
    t.remove_suffix(1);
  }
  auto n = ParseInt(t);
  if (!n || *n <= 0 || *n > int64_t{366} * 86400 / unit) {
    return Status::InvalidArgument(
        fmt::format("expected a span like 60s, 5m, 1h or 1d, got {}", Quote(text)));
  }
  return *n * unit;
}

// ingest prometheus
void AddIngestPrometheus(CLI::App* ingest, Context& ctx, Action* action) {
  auto* cmd = ingest->add_subcommand(
      "prometheus",
      "Read a Kubernetes cluster's pod history from Prometheus: kube-state-metrics requests, "
      "limits, owners and phases, cAdvisor memory and CPU, dcgm-exporter GPU memory and "
      "utilisation; one job record per container of each pod, as the webhook and the agent key "
      "them. Re-ingesting replaces, never duplicates.");
  struct PromFlags {
    std::string url, since = "14d", until, step = "60s", chunk = "1d", token_file;
    std::vector<std::string> headers;
    double timeout_s = 120;
    std::string max_answer = "64Mi";
    bool allow_warnings = false;
  };
  auto p = std::make_shared<PromFlags>();
  auto flags = std::make_shared<CommonFlags>();
  cmd->add_option("--url", p->url,
                  "Prometheus's address: http(s)://HOST:PORT, with a path prefix if it sits "
                  "behind one (Thanos, Mimir and VictoriaMetrics work too)")
      ->required();
  cmd->add_option("--since", p->since, "Start of the window: 14d, 12h, or 2024-01-31")
      ->capture_default_str();
  cmd->add_option("--until", p->until, "End of the window (default: now)");
  cmd->add_option("--step", p->step,
                  "Time resolution of pod start and end times where kube-state-metrics has no "
                  "timestamp for them (60s, 5m)")
      ->capture_default_str();
  cmd->add_option("--chunk", p->chunk,
                  "Longest span one query point covers; halved by itself when Prometheus "
                  "refuses a query as too heavy")
      ->capture_default_str();
  cmd->add_option("--header", p->headers,
                  "An HTTP header for every request, 'Name: value' (repeatable), e.g. "
                  "'Authorization: Bearer TOKEN' or 'X-Scope-OrgID: tenant'");
  cmd->add_option("--bearer-token-file", p->token_file,
                  "Send 'Authorization: Bearer <the file's content>' (a service account token)");
  cmd->add_option("--timeout", p->timeout_s, "Seconds to wait for each answer")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--max-answer", p->max_answer,
                  "Largest answer read at once (64Mi, 512Ki); a larger one is asked again for "
                  "fewer chunks per request")
      ->capture_default_str();
  cmd->add_flag("--allow-warnings", p->allow_warnings,
                "Keep answers that carry warnings (partial data from Thanos or Mimir) and note "
                "them, instead of failing");
  cmd->add_option("--cluster", flags->cluster,
                  "Cluster name stored with each record (default: "
                  "'default')");
  cmd->add_flag("--json", flags->json, "Print the ingest summary as JSON");
  cmd->callback([&ctx, action, p, flags] {
    *action = [&ctx, p, flags]() -> int {
      auto now = static_cast<int64_t>(std::time(nullptr));
      PrometheusOptions o;
      o.url = p->url;
      auto from = ParseTimeSpec(p->since, now);
      if (!from.ok()) return Fail(from.status().WithContext("--since"));
      o.from_s = *from;
      o.to_s = now;
      if (!p->until.empty()) {
        auto to = ParseTimeSpec(p->until, now);
        if (!to.ok()) return Fail(to.status().WithContext("--until"));
        o.to_s = *to;
      }
      auto step = ParseSpan(p->step);
      if (!step.ok()) return Fail(step.status().WithContext("--step"));
      o.step_s = *step;
      auto chunk = ParseSpan(p->chunk);
      if (!chunk.ok()) return Fail(chunk.status().WithContext("--chunk"));
      o.chunk_s = *chunk;
      for (const auto& h : p->headers) {
        auto header = ParseHeaderFlag(h);
        if (!header.ok()) return Fail(header.status());
        o.headers.push_back(*header);
      }
      if (!p->token_file.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(p->token_file, ec)) {
          return Fail(Status::NotFound(
              fmt::format("--bearer-token-file: {}: no such file", p->token_file)));
        }
        std::string token(Trim(ReadWholeFile(p->token_file)));
        if (token.empty()) {
          return Fail(
              Status::BadInput(fmt::format("--bearer-token-file: {} is empty", p->token_file)));
        }
        o.headers.emplace_back("Authorization", "Bearer " + token);
      }
      o.timeout_s = p->timeout_s;
      auto max_answer = ParseQuantity(p->max_answer);
      if (!max_answer.ok() || *max_answer < 1024) {
        return Fail(Status::InvalidArgument(
            fmt::format("--max-answer: expected a size of at least 1Ki like 64Mi, got {}",
                        Quote(p->max_answer))));
      }
      o.max_answer_bytes = static_cast<int64_t>(*max_answer);
      o.allow_warnings = p->allow_warnings;
      std::optional<ProgressBar> bar;
      if (!flags->json) bar.emplace(fmt::format("ingest {}", o.url));
      o.progress = [&bar](int64_t, int64_t done, int64_t total) {
        if (bar) bar->Update(done, total);
      };
      auto t0 = std::chrono::steady_clock::now();
      auto history = ReadPrometheus(o);
      if (bar) bar->Done();
      bar.reset();
      IngestStats stats;
      Status st;
      if (!history.ok()) {
        st = history.status();
        stats.file = o.url;
      } else {
        auto store = ctx.OpenedStore();
        if (!store.ok()) return Fail(store.status());
        IngestOptions options;
        options.override_cluster = true;
        st = IngestRecords(o.url, std::move(history->records), history->notes, **store,
                           flags->cluster.empty() ? "default" : flags->cluster, options, &stats);
      }
      // The whole read, not only the store's part.
      stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (flags->json) {
        nlohmann::json doc = IngestStatsJson(stats, st);
        if (history.ok()) {
          doc["requests"] = history->requests;
          doc["series"] = history->series;
          doc["pods"] = history->pods;
          doc["running"] = history->running;
        }
        doc["from"] = o.from_s;
        doc["until"] = o.to_s;
        fmt::print("{}\n", JsonText(nlohmann::json{{"files", nlohmann::json::array({doc})},
                                                   {"stored", stats.stored},
                                                   {"skipped", stats.skipped},
                                                   {"store", ctx.StorePath()}},
                                    2));
        return st.ok() ? kExitOk : ExitCodeFor(st);
      }
      if (history.ok()) {
        fmt::print(
            "{}: {} containers of {} pods stored in cluster '{}' ({} series in {} requests, "
            "{:.2f} s)\n",
            o.url, FormatThousands(static_cast<double>(stats.stored), 0),
            FormatThousands(static_cast<double>(history->pods), 0), stats.cluster,
            FormatThousands(static_cast<double>(history->series), 0), history->requests,
            stats.seconds);
        for (const auto& note : stats.notes) fmt::print("{}: note: {}\n", o.url, note);
      }
      return st.ok() ? kExitOk : Fail(st);
    };
  });
}

}  // namespace

// ingest runs: rightsize.run/v1 documents, one a line (what `rightsize run --json` printed, as
// the changing-programs corpus writes them), with the code of each run's job script.
struct RunsFlags {
  std::string code_root;
  bool strict = false;
  bool json = false;
};

namespace {

// What the job script asked for where the run's record says nothing (`rightsize run` knows the
// command, not the request): the limits a scheduler would have been given.
void FillRequestFromScript(const ResourceRequest& script, ResourceRequest& request) {
  if (!request.cpus) request.cpus = script.cpus;
  if (!request.memory_bytes) {
    request.memory_bytes = script.memory_bytes;
    request.memory_per_unit_bytes = script.memory_per_unit_bytes;
    request.memory_scope = script.memory_scope;
  }
  if (!request.gpus) {
    request.gpus = script.gpus;
    request.gpu_type = script.gpu_type;
  }
  if (!request.time_limit_s && !request.time_unlimited) {
    request.time_limit_s = script.time_limit_s;
    request.time_unlimited = script.time_unlimited;
  }
  if (!request.nodes) request.nodes = script.nodes;
  if (request.partition.empty()) request.partition = script.partition;
  if (request.account.empty()) request.account = script.account;
  if (request.qos.empty()) request.qos = script.qos;
  if (request.job_name.empty()) request.job_name = script.job_name;
}

}  // namespace

int IngestRuns(Context& ctx, const std::vector<std::string>& files, const RunsFlags& flags) {
  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  int64_t runs = 0, with_code = 0, malformed = 0, no_code = 0;
  for (const auto& file : files) {
    // Plain or gzip-compressed (detected from the content), or "-" for standard input.
    auto reader = LineReader::Open(file);
    if (!reader.ok()) return Fail(reader.status());
    std::string_view line;
    std::vector<JobRecord> records;
    std::vector<StoredJobCode> codes;
    while (true) {
      StatusOr<bool> more = (*reader)->Next(&line);
      const int64_t number = (*reader)->line_number();
      if (!more.ok() && (*reader)->last_error_was_overlong_line()) {
        // One over-long line is one malformed document; the rest of the file is read.
        ++malformed;
        if (flags.strict) return Fail(more.status());
        if (!flags.json) fmt::print(stderr, "{}\n", more.status().message());
        continue;
      }
      if (!more.ok()) return Fail(more.status());
      if (!*more) break;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      auto bad = [&](const std::string& why) {
        ++malformed;
        Status st = Status::BadInput(fmt::format("{}:{}: {}", file, number, why));
        if (!flags.json && !flags.strict) fmt::print(stderr, "{}\n", st.message());
        return st;
      };
      nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
      // The corpus writes the record as "record"; `rightsize run --json` itself as "job".
      const char* record_key = doc.is_object() && doc.contains("record") ? "record" : "job";
      if (doc.is_discarded() || !doc.is_object() || !doc.contains(record_key)) {
        Status st = bad("not a rightsize.run/v1 document (no \"record\" or \"job\")");
        if (flags.strict) return Fail(st);
        continue;
      }
      auto record = JobRecordFromJson(doc[record_key]);
      if (!record.ok()) {
        Status st = bad(record.status().message());
        if (flags.strict) return Fail(st);
        continue;
      }
      std::string script;
      if (doc.contains("corpus") && doc["corpus"].is_object()) {
        script = doc["corpus"].value("script", "");
      }
      if (script.empty()) script = doc.value("script", "");
      if (!script.empty() && !flags.code_root.empty()) {
        // The code is the code: analysed now as it was at submission.
        std::string path = (std::filesystem::path(flags.code_root) / script).string();
        auto parsed = ParseJobScriptFile(path, {});
        if (parsed.ok()) FillRequestFromScript(parsed->request, record->request);
        StatusOr<StoredJobCode> code =
            parsed.ok() ? ReadJobCode(*parsed, path, "") : StatusOr<StoredJobCode>(parsed.status());
        if (code.ok()) {
          code->cluster = record->cluster;
          code->job_id = record->job_id;
          code->created_at = record->submit_time.value_or(0);
          codes.push_back(std::move(*code));
        } else {
          ++no_code;
          if (!flags.json) {
            fmt::print(stderr, "{}:{}: no code facts for job {}: {}\n", file, number,
                       record->job_id, code.status().message());
          }
        }
      }
      records.push_back(std::move(*record));
    }
    Status st = (*store)->UpsertJobs(records);
    for (const auto& c : codes) {
      if (st.ok()) st = (*store)->PutJobCode(c);
    }
    if (!st.ok()) return Fail(st.WithContext(file));
    runs += static_cast<int64_t>(records.size());
    with_code += static_cast<int64_t>(codes.size());
  }
  if (flags.json) {
    fmt::print("{}\n", nlohmann::json{{"runs", runs},
                                      {"with_code", with_code},
                                      {"without_code", no_code},
                                      {"malformed", malformed},
                                      {"store", ctx.StorePath()}}
                           .dump());
  } else {
    fmt::print("ingested {} runs ({} with their code's facts{}{}) into {}\n", runs, with_code,
               no_code > 0 ? fmt::format(", {} whose code could not be read", no_code) : "",
               malformed > 0 ? fmt::format("; {} malformed lines skipped", malformed) : "",
               ctx.StorePath());
  }
  return 0;
}

void AddIngestRuns(CLI::App* ingest, Context& ctx, Action* action) {
  auto* cmd = ingest->add_subcommand(
      "runs",
      "Read rightsize.run/v1 documents (what `rightsize run --json` prints), one a line, with "
      "the code facts of each run's job script (\"corpus\".script or \"script\", under "
      "--code-root) and, where the record has none, the script's request");
  auto files = std::make_shared<std::vector<std::string>>();
  auto flags = std::make_shared<RunsFlags>();
  cmd->add_option("files", *files, "JSON-lines files (.gz works), or - for stdin")
      ->required()
      ->type_name("FILE");
  cmd->add_option("--code-root", flags->code_root,
                  "The folder the documents' script paths are relative to; without it no script "
                  "is read (no code, no request from it)");
  cmd->add_flag("--strict", flags->strict,
                "Stop at the first malformed line (exit 2), storing nothing of its file");
  cmd->add_flag("--json", flags->json, "Print the ingest summary as JSON");
  cmd->callback([&ctx, action, files, flags] {
    *action = [&ctx, files, flags]() -> int { return IngestRuns(ctx, *files, *flags); };
  });
}

void AddIngestCommands(CLI::App& app, Context& ctx, Action* action) {
  auto* ingest = app.add_subcommand("ingest", "Load job accounting into the store");
  ingest->require_subcommand(1);

  AddIngestSacct(ingest, ctx, action);
  AddIngestSwf(ingest, ctx, action);
  AddIngestClusterCockpit(ingest, ctx, action);
  AddIngestSinfo(ingest, ctx, action);
  AddIngestSlurm(ingest, ctx, action);
  AddIngestPrometheus(ingest, ctx, action);
  AddIngestRuns(ingest, ctx, action);
}

int IngestSlurm(Context& ctx, const SlurmIngestOptions& o, int64_t from, int64_t to,
                const std::atomic<bool>& stop) {
  slurm::FollowerOptions options = o;
  auto prices = PricesFor("");
  if (prices.ok()) options.prices = &*prices;
  options.store = ctx.StoreOpts();  // the diagnoses read the samples where they are
  FollowerPrinter printer(o.json, ctx.StorePath());
  slurm::Follower follower([&ctx] { return ctx.OpenedStore(); }, ctx.StorePath(), options, printer);
  return ExitCodeFor(follower.Run(from, to, stop));
}

}  // namespace rightsize::cli

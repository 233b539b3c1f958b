// Diagnose: why a job failed and what to change, from its logs, its job record, its script and
// its code.
//
// Each signature hit is evidence for a failure class with a strength; a class's score combines
// its evidence (1 − Π(1 − strength)). The job record adds its own (state OUT_OF_MEMORY, signal
// 9, a peak at the memory limit, an elapsed time at the time limit). Classes that a stronger
// root cause commonly produces (NCCL timeouts after one rank's OOM, an MPI abort after an
// oom-kill) are discounted and reported as its consequences; symptoms shared by many causes
// ("Killed", exit 137) count only when nothing else explains them. The top class is the root
// cause; under kMinScore it is `unknown`, and the report shows the most relevant lines
// instead of guessing. Facts come from the signatures' named groups, the job record and the
// code; fixes are concrete changes (`--mem=48G` from the observed peak, `--time` from the
// progress made, the batch-size line to halve, the node to drain).
//
// Failure: a log that cannot be read is an IoError naming it; its content is never an error.
// Pure apart from reading the given files; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "diagnose/log_scan.h"
#include "diagnose/signatures.h"

namespace rightsize {

// What the agent (or `rightsize run`) measured while the job ran.
struct Telemetry {
  std::optional<int64_t> memory_limit_bytes;
  int64_t oom_kills = 0;                          // counted by the job's cgroup
  std::vector<std::pair<double, double>> memory;  // (seconds, bytes), oldest first
  std::optional<int64_t> gpu_memory_peak_bytes, gpu_memory_total_bytes;
  std::vector<std::pair<int, int64_t>> xids;  // (device, Xid) seen by NVML
  // How long before the job's end its node's agent last reported (a node that hung or lost
  // power stops reporting before the job is declared dead); unset when unknown.
  std::optional<double> silent_before_end_s;
  // Where the job spent its time: folded stacks with their sample counts, hottest first.
  std::vector<std::pair<std::string, int64_t>> hottest_stacks;
};

struct DiagnoseInput {
  std::vector<std::string> log_paths;  // "-" = standard input
  std::optional<JobRecord> job;        // from the store, or state/exit code given by hand
  std::string script_path;             // the job script, when known
  std::string code_dir;                // the job's source folder (or one file), when known
  std::optional<Telemetry> telemetry;
  // When the signatures answer `unknown`, let the learned fallback name a class
  // (learned_fallback.h); false gives the signatures' answer alone.
  bool learned_fallback = true;
};

struct Evidence {
  std::string file;
  int64_t line = 0;  // 0 for evidence from the job record
  std::string text;
  std::string signature;  // signature id, or "job_record"
  FailureClass cls = FailureClass::kUnknown;
};

struct Fix {
  std::string kind;  // "sbatch", "code", "env", "node", "rerun", "info"
  std::string text;  // the whole advice, one sentence
  // A concrete change when there is one: file:line, from → to.
  std::string file;
  int line = 0;
  std::string from, to;
};

struct Cause {
  FailureClass cls = FailureClass::kUnknown;
  double confidence = 0;
  double score = 0;  // before the consequences were discounted
  std::string summary;
  std::vector<Evidence> evidence;              // strongest first, at most a few
  std::optional<FailureClass> consequence_of;  // set when a stronger cause explains this one
  int64_t first_line = 0;
};

struct Diagnosis {
  FailureClass cls = FailureClass::kUnknown;
  double confidence = 0;
  std::string summary;  // what happened, one sentence
  std::string why;      // why, from the facts
  nlohmann::json facts = nlohmann::json::object();
  std::vector<Evidence> evidence;
  std::vector<Fix> fixes;
  std::vector<Cause> causes;  // ranked; causes[0] is the root cause unless cls is unknown
  // The lines a person should read: the evidence, the last exception and the end of the log.
  std::vector<Evidence> relevant_lines;
  std::vector<LogScan> logs;  // what was read (hits and tails included)
  // Set when the class comes from the learned fallback, not a signature: its probability and
  // the words that weighed most ({"probability", "threshold", "terms"}).
  std::optional<nlohmann::json> learned;
  std::optional<JobRecord> job;
};

inline constexpr double kMinScore = 0.5;
// An agent silent this long before the job ended is evidence the node failed under it.
inline constexpr double kSilentNodeS = 120;

StatusOr<Diagnosis> Diagnose(const DiagnoseInput& input);
// The same from logs already scanned (tests, the server).
Diagnosis DiagnoseScans(std::vector<LogScan> scans, const DiagnoseInput& input);

// rightsize.diagnosis/v1 (README.md, "Diagnosis").
nlohmann::json DiagnosisToJson(const Diagnosis& d);
// The short human report: what, why, fix, evidence.
std::string RenderDiagnosisText(const Diagnosis& d);

}  // namespace rightsize

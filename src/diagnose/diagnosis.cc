#include "diagnose/diagnosis.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/units.h"
#include "diagnose/code_facts.h"
#include "diagnose/learned_fallback.h"
#include "diagnose/xid_catalog.h"
#include "jobscript/job_script.h"

namespace rightsize {
namespace {

using C = FailureClass;
constexpr int64_t kGiB = int64_t{1} << 30;

// One piece of evidence before scoring.
struct Item {
  C cls;
  SignatureKind kind;
  double strength;
  std::string id;
  Evidence evidence;
  const std::vector<std::pair<std::string, std::string>>* facts = nullptr;
  bool halved = false;  // a warning line, counted half
};

// A Python traceback as it appeared in one log.
struct Traceback {
  std::string file;  // the log
  int64_t start_line = 0, end_line = 0;
  struct Frame {
    std::string file, func;
    int line = 0;
  };
  std::vector<Frame> frames;  // outermost first
  std::string exception, message;
  bool crashing = false;  // faulthandler's "Current thread": the one that crashed
};

bool IsLibraryPath(std::string_view path) {
  static constexpr std::string_view kLibraryMarks[] = {
      "site-packages",  "dist-packages", "/lib/python", "<frozen", "<string>", "/usr/lib/",
      "/opt/conda/lib", "/.pyenv/",      "importlib",   "<stdin>", "/bin/"};
  // Cython sources (h5py/h5f.pyx) are libraries too.
  return path.ends_with(".pyx") || path.ends_with(".pxd") ||
         std::any_of(std::begin(kLibraryMarks), std::end(kLibraryMarks),
                     [&](std::string_view m) { return path.find(m) != std::string_view::npos; });
}

std::string FactOf(const std::vector<std::pair<std::string, std::string>>& facts,
                   std::string_view name) {
  for (const auto& [k, v] : facts) {
    if (k == name) return v;
  }
  return "";
}

// "2.00 GiB", "20.00 MiB", "512 bytes", "1.5G" → bytes.
std::optional<int64_t> ParseSize(std::string_view text) {
  double value = 0;
  std::string unit;
  static const RE2 re(R"re(([0-9]+(?:\.[0-9]*)?)\s?([KMGTP]?)(i?)(B|bytes)?)re");
  std::string number, prefix, binary, suffix;
  if (!RE2::PartialMatch(text, re, &number, &prefix, &binary, &suffix)) return std::nullopt;
  value = std::stod(number);
  static constexpr std::string_view kPrefixes = "KMGTP";
  double scale = 1;
  if (!prefix.empty()) {
    size_t p = kPrefixes.find(prefix[0]);
    // Frameworks print binary units even when they write "MB"; so does --mem.
    scale = std::pow(1024.0, static_cast<double>(p + 1));
  }
  return static_cast<int64_t>(value * scale);
}

// The job-record evidence: what the scheduler saw.
void RecordItems(const JobRecord& job, std::vector<Item>* items) {
  auto add = [&](C cls, SignatureKind kind, double strength, std::string text) {
    Item item{cls, kind, strength, "job_record", {}, nullptr};
    item.evidence = {"job record", 0, std::move(text), "job_record", cls};
    items->push_back(std::move(item));
  };
  const std::string& state = job.outcome.state;
  if (state.starts_with("OUT_OF_ME")) {
    add(C::kHostOom, SignatureKind::kCause, 0.95, "state OUT_OF_MEMORY");
  }
  if (state == "TIMEOUT" || state == "DEADLINE") {
    add(C::kTimeout, SignatureKind::kCause, 0.97, "state " + state);
  }
  if (state == "NODE_FAIL" || state == "BOOT_FAIL") {
    add(C::kNodeFailure, SignatureKind::kCause, 0.95, "state " + state);
  }
  if (state == "PREEMPTED") add(C::kPreemption, SignatureKind::kCause, 0.95, "state PREEMPTED");
  std::optional<int> signal = job.outcome.signal;
  if (!signal && job.outcome.exit_code && *job.outcome.exit_code > 128 &&
      *job.outcome.exit_code < 160) {
    signal = *job.outcome.exit_code - 128;  // the shell's 128+N
  }
  if (signal == 9 && state != "CANCELLED" && !state.starts_with("CANCELLED")) {
    add(C::kHostOom, SignatureKind::kSymptom, 0.45, "killed by signal 9 (SIGKILL)");
  }
  if (signal == 11) add(C::kSegfault, SignatureKind::kCause, 0.85, "killed by signal 11 (SIGSEGV)");
  if (job.outcome.exit_code == 127) {
    add(C::kMissingFile, SignatureKind::kSymptom, 0.5, "exit code 127 (command not found)");
  }
  auto limit = job.AllocatedMemoryBytes();
  if (limit && job.usage.peak_rss_bytes && *limit > 0 &&
      static_cast<double>(*job.usage.peak_rss_bytes) >= 0.95 * static_cast<double>(*limit)) {
    add(C::kHostOom, SignatureKind::kSymptom, 0.5,
        fmt::format("peak memory {} reached the limit {}", HumanBytes(*job.usage.peak_rss_bytes),
                    HumanBytes(*limit)));
  }
  if (job.request.time_limit_s && job.usage.elapsed_s && *job.request.time_limit_s > 0 &&
      *job.usage.elapsed_s >= static_cast<double>(*job.request.time_limit_s) - 1) {
    add(C::kTimeout, SignatureKind::kSymptom, 0.6,
        fmt::format("ran {} of a {} limit", FormatDuration(*job.usage.elapsed_s),
                    FormatDuration(static_cast<double>(*job.request.time_limit_s))));
  }
}

// The agent's evidence: OOM kills its cgroup counted, memory at its limit, GPU memory at the
// card's capacity, Xid events NVML reported.
void TelemetryItems(const Telemetry& t, std::vector<Item>* items) {
  auto add = [&](C cls, SignatureKind kind, double strength, std::string id, std::string text) {
    Item item{cls, kind, strength, id, {}, nullptr};
    item.evidence = {"telemetry", 0, std::move(text), std::move(id), cls};
    items->push_back(std::move(item));
  };
  if (t.oom_kills > 0) {
    add(C::kHostOom, SignatureKind::kCause, 0.97, "cgroup_oom_kill",
        fmt::format("the job's cgroup counted {} OOM kill(s)", t.oom_kills));
  }
  double peak = 0;
  for (const auto& [ts, bytes] : t.memory) peak = std::max(peak, bytes);
  if (t.memory_limit_bytes && peak >= 0.9 * static_cast<double>(*t.memory_limit_bytes)) {
    add(C::kHostOom, SignatureKind::kSymptom, 0.5, "memory_at_limit",
        fmt::format("memory reached {} of its {} limit", HumanBytes(static_cast<int64_t>(peak)),
                    HumanBytes(*t.memory_limit_bytes)));
  }
  if (t.gpu_memory_peak_bytes && t.gpu_memory_total_bytes &&
      static_cast<double>(*t.gpu_memory_peak_bytes) >=
          0.95 * static_cast<double>(*t.gpu_memory_total_bytes)) {
    add(C::kGpuOom, SignatureKind::kSymptom, 0.5, "gpu_memory_at_capacity",
        fmt::format("GPU memory reached {} of {}", HumanBytes(*t.gpu_memory_peak_bytes),
                    HumanBytes(*t.gpu_memory_total_bytes)));
  }
  // Silence is weak alone (an agent restarted, a node rebooted cleanly): a symptom.
  if (t.silent_before_end_s && *t.silent_before_end_s >= kSilentNodeS) {
    add(C::kNodeFailure, SignatureKind::kSymptom, 0.45, "node_stopped_reporting",
        fmt::format("the node's agent stopped reporting {} before the job ended",
                    FormatDuration(*t.silent_before_end_s)));
  }
  for (const auto& [device, xid] : t.xids) {
    const XidInfo* info = FindXid(static_cast<int>(xid));
    bool app = info && info->cause == XidCause::kApplication;
    add(app ? C::kIllegalMemoryAccess : C::kGpuHardware,
        app ? SignatureKind::kSymptom : SignatureKind::kCause,
        app ? ((xid == 13 || xid == 31) ? 0.6 : 0.15) : 0.95, "nvml_xid",
        fmt::format("NVML: Xid {} on GPU {}{}", xid, device,
                    info ? fmt::format(" ({})", info->name) : std::string()));
  }
}

// Turns the scans' hits into scored items and tracebacks.
// The text before `marker` in a line: the rank or node prefix ("1: [rank2]: ") that keeps the
// interleaved tracebacks of several ranks apart.
std::string PrefixBefore(const std::string& text, std::string_view marker) {
  size_t at = marker.empty() ? std::string::npos : text.find(marker);
  if (at == std::string::npos) return "";
  std::string p = text.substr(0, at);
  while (!p.empty() && (p.back() == ' ' || p.back() == '\t')) p.pop_back();
  // Only rank and node labels keep tracebacks apart; anything else (a progress bar the
  // traceback was printed after, "Original") is not a prefix.
  static const RE2 labels(R"re((?:\d+:\s?)?(?:\[[^\]]*\]:?\s*)*)re");
  return RE2::FullMatch(p, labels) ? p : "";
}

// Exceptions that only wrap or report another process's failure.
bool IsWrapperException(std::string_view name) {
  static constexpr std::string_view kWrappers[] = {
      "ChildFailedError", "ProcessRaisedException", "CalledProcessError", "KeyboardInterrupt",
      "SystemExit",       "ProcessExitedException", "DistBackendError"};
  return std::any_of(std::begin(kWrappers), std::end(kWrappers),
                     [&](std::string_view w) { return name.find(w) != std::string_view::npos; });
}

// A line printed as a warning or as information did not end the job: its evidence counts half.
// glog ("W0522 10:14:14"), absl/TensorFlow/XLA ("…16:18:40.113822: W external/x.cc:744]"),
// Python logging and NCCL INFO.
bool IsWarningLine(std::string_view text) {
  static const RE2 re(
      R"re(\b(?:\w*Warning:|WARNING\b|[Ww]arning:|NCCL INFO\b)|\[W |(?:^|[\s:])[IW]\d{4} \d\d:\d\d:\d\d|\d: [IW] [\w/.-]+:\d+\])re");
  return RE2::PartialMatch(text, re);
}

// The number of a numbered CUDA error line: "(2 vs. 0)" / "(0 vs. 39)", "error=2",
// "error (2)", "failure 700", "code=35", "returned 35". -1 when there is none.
int CudaErrorCode(std::string_view text) {
  static const RE2 vs(R"re(\((\d+) vs\. (\d+)\))re");
  static const RE2 other(
      R"re((?:[Ee]rror(?:_t)?(?: (?:DRIVER|RUNTIME|[Dd]river|[Rr]untime))?|[Ff]ailure|error=|code=|returned(?: error)?|[Ee]rror code) ?[:(#]? ?'?(\d+))re");
  int a = 0, b = 0;
  if (RE2::PartialMatch(text, vs, &a, &b)) return a != 0 ? a : b;
  if (RE2::PartialMatch(text, other, &a)) return a;
  return -1;
}

void LogItems(const std::vector<LogScan>& scans, std::vector<Item>* items,
              std::vector<Traceback>* tracebacks) {
  auto sigs = AllSignatures();
  for (const LogScan& scan : scans) {
    // The open traceback per line prefix (index into *tracebacks), and whether it lists the
    // innermost frame first (faulthandler).
    std::map<std::string, std::pair<size_t, bool>> open;
    for (const SignatureHit& hit : scan.hits) {
      const Signature& sig = sigs[static_cast<size_t>(hit.signature)];
      switch (sig.kind) {
        case SignatureKind::kTraceback: {
          bool recent_first = hit.text.find("most recent call first") != std::string::npos;
          bool current = hit.text.find("Current thread") != std::string::npos;
          std::string prefix = PrefixBefore(
              hit.text, recent_first ? (current ? "Current thread" : "Thread 0x") : "Traceback");
          Traceback tb{scan.file, hit.line, hit.line, {}, "", "", current};
          tracebacks->push_back(std::move(tb));
          open[prefix] = {tracebacks->size() - 1, recent_first};
          continue;
        }
        case SignatureKind::kFrame: {
          auto it = open.find(PrefixBefore(hit.text, "File \""));
          if (it == open.end()) continue;
          Traceback& tb = (*tracebacks)[it->second.first];
          if (hit.line - tb.end_line > 12) continue;  // a stray frame long after
          std::string line = FactOf(hit.facts, "line");
          Traceback::Frame frame{FactOf(hit.facts, "file"), FactOf(hit.facts, "func"),
                                 line.empty() ? 0 : std::atoi(line.c_str())};
          if (it->second.second) {
            tb.frames.insert(tb.frames.begin(), frame);
          } else {
            tb.frames.push_back(frame);
          }
          tb.end_line = hit.line;
          continue;
        }
        case SignatureKind::kException: {
          std::string name = FactOf(hit.facts, "exception");
          auto it = open.find(PrefixBefore(hit.text, name));
          if (it == open.end()) continue;
          Traceback& tb = (*tracebacks)[it->second.first];
          if (hit.line - tb.end_line <= 12 && tb.exception.empty() && !it->second.second) {
            tb.exception = name;
            tb.message = FactOf(hit.facts, "message");
            tb.end_line = hit.line;
            open.erase(it);
          }
          continue;
        }
        default:
          break;
      }
      Item item{sig.cls, sig.kind, sig.strength, std::string(sig.id), {}, &hit.facts};
      if (sig.kind == SignatureKind::kCudaError) {
        // The code names the class; a code that says nothing about the cause is no evidence.
        const CudaErrorInfo* info = CudaErrorByCode(CudaErrorCode(hit.text));
        if (!info) continue;
        item.cls = info->cls;
        item.strength = info->strength;
        item.kind = info->symptom ? SignatureKind::kSymptom : SignatureKind::kCause;
      }
      if (sig.kind == SignatureKind::kXid) {
        std::string code = FactOf(hit.facts, "xid");
        const XidInfo* info = code.empty() ? nullptr : FindXid(std::atoi(code.c_str()));
        if (info && info->cause == XidCause::kApplication) {
          // Xid 13/31 come with the job's own bad access; 43/45 follow any killed GPU job.
          bool access = info->code == 13 || info->code == 31;
          item.cls = C::kIllegalMemoryAccess;
          item.strength = access ? 0.6 : 0.15;
          item.kind = SignatureKind::kSymptom;
        } else if (!info || info->cause == XidCause::kUnknown) {
          item.strength = 0.6;
        }
      }
      if (sig.kind != SignatureKind::kSymptom && !sig.decisive_as_warning &&
          IsWarningLine(hit.text)) {
        item.strength *= 0.5;
        item.halved = true;
      }
      item.evidence = {scan.file, hit.line, hit.text, item.id, item.cls};
      items->push_back(std::move(item));
    }
  }
}

struct ClassScore {
  double score = 0;     // from causes (and symptoms when nothing else explains them)
  double adjusted = 0;  // after discounting consequences
  int64_t first_line = INT64_MAX;
  std::optional<C> consequence_of;
  std::vector<const Item*> items;
};

// Whether every piece of evidence for `effect` was printed before the first for `cause`, in the
// same log: a crash printed after the MPI library's own fatal error is the process dying on its
// way out, not what made MPI fail (an Intel MPI init failure that ends "Segmentation fault").
bool AllBefore(const ClassScore& effect, const ClassScore& cause) {
  if (effect.items.empty() || cause.items.empty()) return false;
  for (const Item* e : effect.items) {
    for (const Item* c : cause.items) {
      if (e->evidence.line <= 0 || c->evidence.line <= 0 || e->evidence.file != c->evidence.file ||
          e->evidence.line >= c->evidence.line) {
        return false;
      }
    }
  }
  return true;
}

// The most a class supported by a single symptom signature can score: under kMinScore.
constexpr double kSymptomAloneMax = 0.45;

double Combine(std::map<std::string, double> by_signature) {
  double miss = 1;
  for (const auto& [id, s] : by_signature) miss *= 1 - s;
  return std::min(0.995, 1 - miss);
}

// `lone_symptoms_count`: nothing else in the log explains the end (see NothingElseExplains), so a
// single symptom seen in the log counts at its own strength instead of kSymptomAloneMax.
std::array<ClassScore, kFailureClassCount> Score(const std::vector<Item>& items,
                                                 bool lone_symptoms_count = false) {
  std::array<ClassScore, kFailureClassCount> classes;
  std::array<std::map<std::string, double>, kFailureClassCount> causes, symptoms;
  for (const Item& item : items) {
    auto c = static_cast<size_t>(item.cls);
    auto& by_sig = item.kind == SignatureKind::kSymptom ? symptoms[c] : causes[c];
    double& s = by_sig[item.id];
    s = std::max(s, item.strength);
    classes[c].items.push_back(&item);
    if (item.evidence.line > 0) {
      classes[c].first_line = std::min(classes[c].first_line, item.evidence.line);
    }
  }
  for (size_t c = 0; c < classes.size(); ++c) classes[c].score = Combine(causes[c]);
  // Symptoms count only when no other class has a convincing cause.
  for (size_t c = 0; c < classes.size(); ++c) {
    if (symptoms[c].empty()) continue;
    bool explained = false;
    for (size_t o = 0; o < classes.size(); ++o) {
      if (o != c && classes[o].score >= 0.6) explained = true;
    }
    if (explained) continue;
    auto all = causes[c];
    for (const auto& [id, s] : symptoms[c]) all[id] = std::max(all[id], s);
    classes[c].score = Combine(all);
    // One kind of symptom alone says that the job died, not why (a BAD TERMINATION banner, a
    // bare "Killed"): it stays under kMinScore. Two independent ones (the shell's "Killed" and
    // exit 137) may name the class.
    bool from_log = std::all_of(classes[c].items.begin(), classes[c].items.end(),
                                [](const Item* i) { return i->evidence.line > 0; });
    if (causes[c].empty() && symptoms[c].size() == 1 && !(lone_symptoms_count && from_log)) {
      classes[c].score = std::min(classes[c].score, kSymptomAloneMax);
    }
  }
  for (size_t e = 0; e < classes.size(); ++e) {
    classes[e].adjusted = classes[e].score;
    double strongest = 0;
    for (size_t c = 0; c < classes.size(); ++c) {
      // A weak cause does not explain away a much stronger effect.
      if (c == e || classes[c].score < kMinScore ||
          (classes[c].score < 0.75 && classes[c].score < classes[e].score)) {
        continue;
      }
      if (!Explains(static_cast<C>(c), static_cast<C>(e))) continue;
      if (static_cast<C>(c) == C::kSegfault && static_cast<C>(e) == C::kMpiAbort &&
          AllBefore(classes[e], classes[c])) {
        continue;
      }
      if (classes[c].score > strongest) {
        strongest = classes[c].score;
        classes[e].consequence_of = static_cast<C>(c);
      }
    }
    if (strongest > 0) classes[e].adjusted = classes[e].score * (1 - 0.9 * strongest);
  }
  return classes;
}

// A warning counts half because something else is expected to have ended the job. When nothing
// else does (no class reaches kMinScore and no exception was raised), the warning is the best
// account of the failure there is and counts in full: a lone "UserWarning: CUDA
// initialization: The NVIDIA driver on your system is too old" is the whole cause.
bool NothingElseExplains(const std::array<ClassScore, kFailureClassCount>& classes,
                         const std::vector<Traceback>& tbs) {
  for (const ClassScore& c : classes) {
    if (c.score >= kMinScore) return false;
  }
  return std::none_of(tbs.begin(), tbs.end(),
                      [](const Traceback& tb) { return !tb.exception.empty(); });
}

// Whether any log printed an exception line ("ValueError: bad mesh"), in a traceback or not.
bool AnyExceptionLine(const std::vector<LogScan>& scans) {
  auto sigs = AllSignatures();
  for (const LogScan& scan : scans) {
    for (const SignatureHit& hit : scan.hits) {
      if (sigs[static_cast<size_t>(hit.signature)].kind == SignatureKind::kException) return true;
    }
  }
  return false;
}

bool OnlyWarningsExplain(const std::array<ClassScore, kFailureClassCount>& classes,
                         const std::vector<Item>& items, const std::vector<Traceback>& tbs) {
  if (std::none_of(items.begin(), items.end(), [](const Item& i) { return i.halved; })) {
    return false;
  }
  return NothingElseExplains(classes, tbs);
}

// Collective errors (NCCL timeouts and failures) are what the other ranks see when one rank
// dies of its own exception. When a Python exception that no signature explains was raised
// before them, it is the root cause: they are discounted as its consequence (consequence_of
// unknown), and the exception is returned so the report can show it.
const Traceback* EarlierError(const std::vector<Traceback>& tbs, const std::vector<Item>& items,
                              std::array<ClassScore, kFailureClassCount>* classes) {
  std::set<std::pair<std::string, int64_t>> evidence_lines;
  for (const Item& item : items) evidence_lines.insert({item.evidence.file, item.evidence.line});
  const Traceback* first = nullptr;
  for (const Traceback& tb : tbs) {
    if (tb.exception.empty() || evidence_lines.count({tb.file, tb.end_line}) > 0) continue;
    if (IsWrapperException(tb.exception)) continue;
    if (!first || tb.end_line < first->end_line) first = &tb;
  }
  if (!first) return nullptr;
  bool discounted = false;
  for (C cls : {C::kNcclTimeout, C::kNcclError}) {
    ClassScore& cs = (*classes)[static_cast<size_t>(cls)];
    if (cs.score == 0 || cs.first_line <= first->end_line) continue;
    bool same_file = std::any_of(cs.items.begin(), cs.items.end(),
                                 [&](const Item* i) { return i->evidence.file == first->file; });
    if (!same_file) continue;
    cs.adjusted = std::min(cs.adjusted, cs.score * 0.2);
    cs.consequence_of = C::kUnknown;
    discounted = true;
  }
  return discounted ? first : nullptr;
}

// The traceback that belongs to a cause: the last one whose exception line is one of the
// cause's evidence lines; else, for evidence at `line` of `file`, the one that ends at or
// closely after it, else the nearest one before it.
const Traceback* TracebackFor(const std::vector<Traceback>& tbs,
                              const std::vector<const Item*>& items, const std::string& file,
                              int64_t line) {
  const Traceback* best = nullptr;
  for (const Traceback& tb : tbs) {
    if (tb.frames.empty()) continue;
    for (const Item* item : items) {
      if (item->evidence.file == tb.file && item->evidence.line == tb.end_line) best = &tb;
    }
  }
  if (best) return best;
  const Traceback* after = nullptr;
  for (const Traceback& tb : tbs) {
    if (tb.file != file || tb.frames.empty()) continue;
    if (tb.end_line >= line && tb.start_line <= line + 50) {
      if (tb.crashing) return &tb;
      if (!after) after = &tb;
    }
    if (tb.end_line < line && line - tb.end_line <= 200) best = &tb;
  }
  return after ? after : best;
}

const Traceback::Frame* UserFrame(const Traceback& tb) {
  for (auto it = tb.frames.rbegin(); it != tb.frames.rend(); ++it) {
    if (!IsLibraryPath(it->file)) return &*it;
  }
  return nullptr;
}

// Progress from the end of a log: "370/1000 [", "Epoch 3/10", "step 1200/5000", "45%|".
std::optional<double> ProgressFraction(const std::vector<LogScan>& scans, std::string* shown) {
  static const RE2 counted(
      R"re((?i)(?:^|[\s|\[])(?:epoch|step|iter(?:ation)?|batch)?\s*\[?(\d+)\s*/\s*(\d+)\b)re");
  static const RE2 percent(R"re((?:^|\s)(\d{1,3})%\|)re");
  for (const LogScan& scan : scans) {
    for (auto it = scan.tail.rbegin(); it != scan.tail.rend(); ++it) {
      int done = 0, total = 0;
      if (RE2::PartialMatch(it->second, percent, &done) && done > 0 && done < 100) {
        *shown = it->second;
        return done / 100.0;
      }
      if (RE2::PartialMatch(it->second, counted, &done, &total) && total > 1 && done > 0 &&
          done < total) {
        *shown = it->second;
        return static_cast<double>(done) / total;
      }
    }
  }
  return std::nullopt;
}

struct FixContext {
  const DiagnoseInput& input;
  const std::optional<JobScript>& script;
  const CodeFactsForDiagnosis& code;
  const std::vector<LogScan>& scans;
  nlohmann::json& facts;
  std::vector<Fix>& fixes;
  std::string summary, why;
};

const JobScript::Directive* FindDirective(const std::optional<JobScript>& script,
                                          std::initializer_list<std::string_view> names) {
  if (!script) return nullptr;
  const JobScript::Directive* found = nullptr;
  for (const auto& d : script->directives) {
    for (std::string_view n : names) {
      if (d.name == n) found = &d;  // the last one wins, as in sbatch
    }
  }
  return found;
}

// A fix that changes the literal on a line of the job's code.
void CodeLineFix(FixContext& ctx, const CodeLine& at, const std::string& to_value,
                 const std::string& text) {
  std::string to = at.text;
  size_t pos = to.rfind(at.value);
  if (pos != std::string::npos) to.replace(pos, at.value.size(), to_value);
  ctx.fixes.push_back({"code", text, at.file, at.line, at.text, to});
}

// The framework that ran out of GPU memory, from the lines the log matched and its last lines,
// so that the fix names that framework's own knobs (a Caffe prototxt has no torch.autocast).
enum class GpuFramework { kPyTorch, kCaffe, kLuaTorch, kMxnet, kTensorFlow, kJax };

GpuFramework GpuOomFramework(const std::vector<LogScan>& scans) {
  static const RE2 caffe(
      R"re(syncedmem\.(?:cpp|hpp)|caffe\.cpp|Check failed: error == cudaSuccess)re");
  static const RE2 lua(R"re(cutorch|qlua:|luajit:|/lua/5\.\d/|\.lua:\d+)re");
  static const RE2 mxnet(R"re(MXNetError|libmxnet|pooled_storage_manager|mxnet)re");
  static const RE2 tf(
      R"re(OOM when allocating tensor|bfc_allocator|ResourceExhaustedError|tensorflow)re");
  static const RE2 jax(R"re(XlaRuntimeError|RESOURCE_EXHAUSTED|jaxlib)re");
  auto any = [&](const RE2& re) {
    for (const LogScan& scan : scans) {
      for (const SignatureHit& h : scan.hits) {
        if (RE2::PartialMatch(h.text, re)) return true;
      }
      for (const auto& [line, text] : scan.tail) {
        if (RE2::PartialMatch(text, re)) return true;
      }
    }
    return false;
  };
  if (any(caffe)) return GpuFramework::kCaffe;
  if (any(lua)) return GpuFramework::kLuaTorch;
  if (any(mxnet)) return GpuFramework::kMxnet;
  if (any(tf)) return GpuFramework::kTensorFlow;
  if (any(jax)) return GpuFramework::kJax;
  return GpuFramework::kPyTorch;
}

void GpuOomFixes(FixContext& ctx) {
  auto& f = ctx.facts;
  auto size = [&](const char* key) -> std::optional<int64_t> {
    if (!f.contains(key)) return std::nullopt;
    return ParseSize(f[key].get<std::string>());
  };
  auto tried = size("tried"), capacity = size("capacity");
  auto free = f.contains("free") ? size("free") : size("free_pt1");
  auto frag = size("reserved_unallocated");
  if (ctx.input.job && ctx.input.job->usage.peak_gpu_memory_bytes) {
    f["peak_gpu_memory_bytes"] = *ctx.input.job->usage.peak_gpu_memory_bytes;  // accounting's
  }
  if (tried) f["tried_bytes"] = *tried;
  if (capacity) f["capacity_bytes"] = *capacity;
  if (free) f["free_bytes"] = *free;
  if (frag) f["reserved_unallocated_bytes"] = *frag;
  ctx.summary = "The job ran out of GPU memory";
  if (tried && capacity) {
    ctx.summary += fmt::format(": it tried to allocate {} on a GPU of {}{}", HumanBytes(*tried),
                               HumanBytes(*capacity),
                               free ? fmt::format(" with {} free", HumanBytes(*free)) : "");
  } else if (tried) {
    ctx.summary += fmt::format(": it tried to allocate {}", HumanBytes(*tried));
  }
  ctx.summary += ".";
  bool fragmented =
      (frag && tried && *frag >= *tried) ||
      (frag && capacity && static_cast<double>(*frag) > 0.05 * static_cast<double>(*capacity));
  f["fragmentation"] = fragmented;
  ctx.why =
      "The model's activations, weights, gradients and optimizer state did not fit in the "
      "GPU's memory at this batch size and precision.";
  if (fragmented) {
    ctx.why += fmt::format(
        " {} was reserved by PyTorch but unallocated: the free memory is "
        "fragmented into pieces too small for the request.",
        HumanBytes(*frag));
    ctx.fixes.push_back({"env",
                         "Let PyTorch grow its segments instead of fragmenting: export "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the job script",
                         "", 0, "", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"});
  }
  if (const auto& bs = ctx.code.batch_size) {
    auto v = static_cast<int64_t>(bs->number);
    if (v > 1) {
      CodeLineFix(ctx, *bs, std::to_string(v / 2),
                  fmt::format("Halve the batch size at {}:{} ({} → {}); keep the effective batch "
                              "with gradient accumulation",
                              bs->file, bs->line, v, v / 2));
    }
  }
  GpuFramework framework = GpuOomFramework(ctx.scans);
  auto code_fix = [&](std::string text) {
    ctx.fixes.push_back({"code", std::move(text), "", 0, "", ""});
  };
  switch (framework) {
    case GpuFramework::kCaffe:
      f["framework"] = "caffe";
      if (!ctx.code.batch_size) {
        code_fix(
            "Halve batch_size in the data layer of the net's prototxt (the TRAIN and TEST "
            "phases have their own; `caffe test` uses the TEST one) and keep the effective "
            "batch with iter_size in the solver");
      }
      return;
    case GpuFramework::kLuaTorch:
      f["framework"] = "lua_torch";
      if (!ctx.code.batch_size) {
        code_fix(
            "Halve the batch size the script trains with (the -batchSize option of most Torch7 "
            "scripts), and call collectgarbage() each iteration so freed CUDA tensors are "
            "returned to cutorch");
      }
      return;
    case GpuFramework::kMxnet:
      f["framework"] = "mxnet";
      if (!ctx.code.batch_size) code_fix("Halve the batch size (--batch-size)");
      ctx.fixes.push_back({"env",
                           "Recompute activations instead of storing them: export "
                           "MXNET_BACKWARD_DO_MIRROR=1",
                           "", 0, "", "MXNET_BACKWARD_DO_MIRROR=1"});
      return;
    case GpuFramework::kTensorFlow:
      f["framework"] = "tensorflow";
      if (!ctx.code.batch_size) code_fix("Halve the batch size (the batch_size the model is fed)");
      if (!ctx.code.reduced_precision) {
        code_fix(
            "Train in mixed precision: tf.keras.mixed_precision.set_global_policy("
            "'mixed_float16') (TF 2.4+), enable_mixed_precision_graph_rewrite (TF 1.14-2.3)");
      }
      return;
    case GpuFramework::kJax:
      f["framework"] = "jax";
      if (!ctx.code.batch_size) code_fix("Halve the batch size");
      code_fix("Rematerialise activations with jax.checkpoint (jax.remat) and keep them in bf16");
      return;
    case GpuFramework::kPyTorch:
      break;
  }
  if (!ctx.code.batch_size) {
    code_fix("Halve the batch size (keep the effective batch with gradient accumulation)");
  }
  if (!ctx.code.reduced_precision) {
    ctx.fixes.push_back({"code",
                         "Train in bf16: wrap the forward pass in torch.autocast(\"cuda\", "
                         "dtype=torch.bfloat16) (halves activation memory)",
                         "", 0, "", ""});
  }
  if (!ctx.code.checkpointing) {
    ctx.fixes.push_back({"code",
                         "Enable activation checkpointing (model.gradient_checkpointing_enable() "
                         "or torch.utils.checkpoint) to trade compute for memory",
                         "", 0, "", ""});
  }
  if (tried && capacity && free && *tried > *capacity / 4) {
    ctx.fixes.push_back(
        {"sbatch",
         fmt::format("Or run on a GPU with more than {} of memory", HumanBytes(*capacity)), "", 0,
         "", ""});
  }
}

void HostOomFixes(FixContext& ctx) {
  auto& f = ctx.facts;
  const auto& job = ctx.input.job;
  std::optional<int64_t> limit, used;
  if (f.contains("limit_raw") && f.contains("used_raw")) {
    // SLURM printed KiB up to 20.11 ("Job N exceeded …") and bytes since 21.08 ("StepId=N.batch
    // exceeded …"); a known limit settles it.
    int64_t raw_limit = std::atoll(f["limit_raw"].get<std::string>().c_str());
    int64_t unit = f.contains("step_id") ? 1 : 1024;
    if (auto known = job ? job->AllocatedMemoryBytes() : std::nullopt) {
      unit = std::llabs(raw_limit - *known) < std::llabs(raw_limit * 1024 - *known) ? 1 : 1024;
    }
    limit = raw_limit * unit;
    used = std::atoll(f["used_raw"].get<std::string>().c_str()) * unit;
    f.erase("limit_raw");
    f.erase("used_raw");
    f.erase("step_id");
  }
  // HTCondor's "memory limit of N megabytes", PBS's "mem Nkb exceeded limit Mkb".
  for (const auto& [key, unit] : {std::pair<const char*, int64_t>{"limit_mb", int64_t{1} << 20},
                                  std::pair<const char*, int64_t>{"limit_kb", int64_t{1024}}}) {
    if (!f.contains(key)) continue;
    if (!limit) limit = std::atoll(f[key].get<std::string>().c_str()) * unit;
    f.erase(key);
  }
  if (f.contains("used_kb")) {
    if (!used) used = std::atoll(f["used_kb"].get<std::string>().c_str()) * 1024;
    f.erase("used_kb");
  }
  if (!limit && job) limit = job->AllocatedMemoryBytes();
  if (!limit && ctx.script) limit = ctx.script->request.memory_bytes;
  std::optional<int64_t> peak;
  if (job) peak = job->usage.peak_rss_bytes;
  if (used && (!peak || *used > *peak)) peak = used;
  if (!limit && ctx.input.telemetry) limit = ctx.input.telemetry->memory_limit_bytes;
  if (limit) f["memory_limit_bytes"] = *limit;
  // The agent's memory series: how fast memory grew before the kill, and how soon the limit
  // was coming at that pace.
  std::string trend;
  if (ctx.input.telemetry && ctx.input.telemetry->memory.size() >= 3) {
    const auto& m = ctx.input.telemetry->memory;
    double t_end = m.back().first;
    double n = 0, st = 0, sm = 0, stt = 0, stm = 0;
    for (const auto& [t, bytes] : m) {
      if (t < t_end - 60) continue;
      n += 1;
      st += t;
      sm += bytes;
      stt += t * t;
      stm += t * bytes;
    }
    double den = n * stt - st * st;
    if (n >= 3 && den > 0) {
      double slope = (n * stm - st * sm) / den;
      f["memory_slope_bytes_per_s"] = std::round(slope);
      f["memory_trend_window_s"] = std::round(t_end - std::max(m.front().first, t_end - 60));
      if (slope > 1 << 20) {
        trend = fmt::format(" Memory grew steadily, {}/s over its last {:.0f} s",
                            HumanBytes(static_cast<int64_t>(slope)),
                            f["memory_trend_window_s"].get<double>());
        if (limit && m.back().second < static_cast<double>(*limit)) {
          double to_limit = (static_cast<double>(*limit) - m.back().second) / slope;
          f["seconds_to_limit_at_slope"] = std::round(to_limit);
          trend += fmt::format(", {:.0f} s from the limit at the last sample", to_limit);
        }
        trend += ": a growing working set or a leak, not a single spike.";
      } else {
        trend = " Memory was flat before the kill: one allocation too many, not a slow leak.";
      }
    }
  }
  if (peak) f["peak_memory_bytes"] = *peak;
  ctx.summary = "The job ran out of host memory and was killed";
  if (limit) ctx.summary += fmt::format(" at its limit of {}", HumanBytes(*limit));
  ctx.summary += ".";
  // Accounting samples memory every few seconds: a peak far under the limit missed the spike
  // that was killed, so it says nothing about the need.
  if (peak && limit && static_cast<double>(*peak) < 0.5 * static_cast<double>(*limit)) {
    peak.reset();
  }
  ctx.why = peak && limit ? fmt::format(
                                "Its processes used {} of the {} it was given; the "
                                "kernel's OOM killer stopped them.",
                                HumanBytes(*peak), HumanBytes(*limit))
                          : "Its processes needed more memory than the job was given, and the "
                            "kernel's OOM killer stopped them.";
  ctx.why += trend;
  if (limit || peak) {
    // Killed at the limit: the real need is unknown but above it; ask for half as much again.
    double base = static_cast<double>(std::max(limit.value_or(0), peak.value_or(0)));
    int64_t want = RoundMemoryRequest(base * 1.5);
    f["suggested_memory_bytes"] = want;
    std::string flag = "--mem=" + MemoryFlagValue(want);
    const auto* d = FindDirective(ctx.script, {"mem", "mem-per-cpu", "mem-per-gpu"});
    if (d && d->name != "mem" && ctx.script) {
      // sbatch's own size syntax (a bare number is MiB).
      auto per_unit = ParseSlurmMemory(d->value, int64_t{1} << 20);
      if (per_unit.ok() && per_unit->has_value()) {
        int64_t unit_want = RoundMemoryRequest(static_cast<double>((*per_unit)->bytes) * 1.5);
        flag = "--" + d->name + "=" + MemoryFlagValue(unit_want);
      }
    }
    Fix fix{"sbatch",
            fmt::format("Ask for more memory: {} (1.5 × the {} it reached; measure the real "
                        "peak with `rightsize run` or sacct MaxRSS after a successful run)",
                        flag, HumanBytes(static_cast<int64_t>(base))),
            "",
            0,
            "",
            flag};
    if (d) {
      fix.file = ctx.input.script_path;
      fix.line = d->line;
      fix.from = "#SBATCH --" + d->name + "=" + d->value;
      fix.to = "#SBATCH " + flag;
    }
    ctx.fixes.push_back(fix);
  } else {
    ctx.fixes.push_back(
        {"sbatch", "Ask for more memory (--mem) than the job's peak", "", 0, "", ""});
  }
  if (const auto& w = ctx.code.num_workers) {
    auto v = static_cast<int64_t>(w->number);
    if (v > 2) {
      CodeLineFix(ctx, *w, std::to_string(v / 2),
                  fmt::format("Each data-loader worker holds its own copy of what it loads: "
                              "num_workers at {}:{} {} → {}",
                              w->file, w->line, v, v / 2));
    }
  }
  ctx.fixes.push_back({"code",
                       "Or lower the peak: load data lazily (memory-mapped arrays, streaming "
                       "datasets) instead of whole files",
                       "", 0, "", ""});
}

void TimeoutFixes(FixContext& ctx) {
  auto& f = ctx.facts;
  const auto& job = ctx.input.job;
  std::optional<double> limit, elapsed;
  if (job && job->request.time_limit_s) limit = static_cast<double>(*job->request.time_limit_s);
  if (!limit && ctx.script && ctx.script->request.time_limit_s) {
    limit = static_cast<double>(*ctx.script->request.time_limit_s);
  }
  if (job && job->usage.elapsed_s) elapsed = *job->usage.elapsed_s;
  if (!elapsed) elapsed = limit;
  if (limit) f["time_limit_s"] = *limit;
  if (elapsed) f["elapsed_s"] = *elapsed;
  std::string progress_line;
  auto progress = ProgressFraction(ctx.scans, &progress_line);
  ctx.summary = "The job reached its time limit and was cancelled";
  if (limit) ctx.summary += fmt::format(" after {}", FormatDuration(*limit));
  ctx.summary += ".";
  const auto* d = FindDirective(ctx.script, {"time"});
  std::optional<int64_t> want;
  if (progress) {
    f["progress"] = std::round(*progress * 1000) / 1000;
    f["progress_line"] = progress_line;
    ctx.why =
        fmt::format("It had done {:.0f}% of its work (\"{}\").", *progress * 100, progress_line);
    if (elapsed) {
      double total = *elapsed / *progress;
      f["estimated_total_s"] = std::round(total);
      want = RoundTimeRequest(total * 1.2);
      ctx.why += fmt::format(" At that pace the whole run needs about {}.", FormatDuration(total));
    }
  } else {
    ctx.why =
        "It was still running when the limit came; the log shows no progress counter to "
        "say how far it got.";
    if (limit) want = RoundTimeRequest(*limit * 2);
  }
  if (want) {
    f["suggested_time_limit_s"] = *want;
    std::string flag = "--time=" + TimeFlagValue(static_cast<double>(*want));
    Fix fix{"sbatch",
            progress ? fmt::format("Ask for the time the run needs, with 20% to spare: {}", flag)
                     : fmt::format("Ask for more time ({}), or better, measure the pace: print "
                                   "progress (step/total) in the log",
                                   flag),
            "",
            0,
            "",
            flag};
    if (d) {
      fix.file = ctx.input.script_path;
      fix.line = d->line;
      fix.from = "#SBATCH --time=" + d->value;
      fix.to = "#SBATCH " + flag;
    }
    ctx.fixes.push_back(fix);
  }
  ctx.fixes.push_back({"sbatch",
                       "Checkpoint and resume: ask for a warning before the limit with "
                       "--signal=B:USR1@300, save a checkpoint on it and requeue "
                       "(--requeue), so a time limit costs minutes, not the run",
                       "", 0, "", "--signal=B:USR1@300"});
}

std::string NodeOf(const FixContext& ctx) {
  if (ctx.facts.contains("node")) return ctx.facts["node"].get<std::string>();
  if (ctx.input.job && !ctx.input.job->alloc.node_list.empty()) {
    return ctx.input.job->alloc.node_list;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// The fixes of each failure class, as data.
//
// A template's {key} is a fact's value (or a value derived from the facts, FixVars); a
// bracketed part `[ … ]` is shown only when every key in it has a value. A condition is a
// list of tests joined by '&', each `key` (has a value), `!key` (has none), `key~text` (the
// value contains text) or `key>n` (the value is a number above n). The summary and the why are
// the first entry whose condition holds; every fix whose condition holds is given, in order.
// The three classes whose advice is computed from sizes and times have a function instead.

struct FixEntry {
  const char* kind;  // "sbatch", "code", …; a template
  const char* when;  // condition; "" always
  const char* text;  // template
  // A fix that changes a line of the job's code: the CodeLine (batch_size, num_workers,
  // learning_rate) whose literal becomes the value of the key `<line>_half`.
  const char* line = nullptr;
};

struct ClassFixTable {
  FailureClass cls;
  void (*compute)(FixContext& ctx);  // set for the computed classes; the rest is then empty
  std::vector<FixEntry> summary, why, fixes;
};

const std::vector<ClassFixTable>& FixTables() {
  static const auto* tables = new std::vector<ClassFixTable>{
      {C::kGpuOom, GpuOomFixes, {}, {}, {}},
      {C::kHostOom, HostOomFixes, {}, {}, {}},
      {C::kTimeout, TimeoutFixes, {}, {}, {}},
      {C::kNodeFailure,
       nullptr,
       {{"", "!node", "A node of the job failed."},
        {"", "node", "Node {node} failed under the job."}},
       {{"", "",
         "The node stopped responding to the controller (crash, hang, network or power); the "
         "job's work on it was lost. Nothing in the job has to change."}},
       {{"rerun", "!node", "Resubmit the job (add --requeue so SLURM does it next time)"},
        {"rerun", "node",
         "Resubmit the job, avoiding the node: --exclude={node} (add --requeue so SLURM "
         "resubmits it next time)"},
        {"sbatch", "",
         "Checkpoint periodically so that the resubmitted job resumes from its last checkpoint "
         "instead of the start"},
        {"node", "node",
         "Operators: check the node and drain it until it is fixed: scontrol update "
         "NodeName={node} State=DRAIN Reason=\"node failure under a job\""}}},
      {C::kPreemption,
       nullptr,
       {{"", "", "The job was preempted by a job of higher priority."}},
       {{"", "",
         "It ran in a preemptible partition or QOS (or on spot capacity), and the scheduler "
         "took its resources back."}},
       {{"sbatch", "",
         "Make preemption cheap: checkpoint periodically, save one more when the job gets "
         "SIGTERM (SLURM sends it at preemption and SIGKILL after the partition's GraceTime: "
         "trap TERM in the batch script) and add --requeue so the job resumes from it"},
        {"rerun", "capacity",
         "On {capacity} capacity, resume automatically: a retry policy that restarts from the "
         "last checkpoint (torchrun --max-restarts=3, a Kubernetes Job's backoffLimit, AWS "
         "Batch's retryStrategy), or on-demand capacity for a run that cannot checkpoint"},
        {"sbatch", "",
         "Or run where nothing preempts it: a partition or QOS that no other QOS preempts "
         "(sacctmgr show qos format=name,preempt,preemptmode), on Kubernetes a higher "
         "priorityClassName"}}},
      {C::kNcclTimeout,
       nullptr,
       {{"", "",
         "A collective operation[ ({op})] timed out in NCCL's watchdog[ after {timeout_ms} "
         "ms]."}},
       {{"", "",
         "One or more ranks never joined the collective: a rank that crashed, hung, or fell far "
         "behind (uneven data, slow I/O, a stuck data loader).[ Rank {rank} reported the "
         "timeout.]"}},
       {{"info", "",
         "Find the rank that did not arrive: its first error comes before these timeouts (run "
         "with NCCL_DEBUG=INFO and TORCH_NCCL_DESYNC_DEBUG=1)"},
        {"code", "",
         "Give every rank the same number of batches (drop_last=True, a DistributedSampler) so "
         "none waits for a collective the others skipped"},
        {"code", "",
         "Only if one step legitimately takes longer: raise the timeout, "
         "init_process_group(..., timeout=datetime.timedelta(minutes=30))"}}},
      {C::kNcclError,
       nullptr,
       {{"", "", "NCCL failed[: {nccl_error}]."}},
       {{"", "nccl_error~remote process",
         "A peer rank exited or the network between the nodes failed."},
        {"", "",
         "A communication error between the GPUs or nodes (network, InfiniBand, a crashed "
         "peer, or a library mismatch)."}},
       {{"info", "", "Rerun with NCCL_DEBUG=INFO to see which link and rank failed"},
        {"node", "",
         "If it repeats on the same nodes, have the network checked (ibstat, link errors) and "
         "exclude them with --exclude"},
        {"env", "", "If NCCL picks the wrong interface: set NCCL_SOCKET_IFNAME / NCCL_IB_HCA"}}},
      {C::kGpuHardware,
       nullptr,
       {{"", "known_xid", "The GPU[ at {pci}] failed: Xid {xid} ({xid_name})."},
        {"", "", "A GPU failed[ with Xid {xid}]."}},
       {{"", "known_xid", "{xid_meaning}"},
        {"", "",
         "The GPU or its driver reported a hardware fault; the job itself is not at fault."}},
       {{"{xid_fix_kind}", "known_xid", "{xid_action}"},
        {"node", "drain&!node", "Drain the node and resubmit the job elsewhere"},
        {"node", "drain&node",
         "Drain {node} (scontrol update NodeName={node} State=DRAIN Reason=\"GPU Xid {xid}\") "
         "and resubmit the job with --exclude={node}"}}},
      {C::kIllegalMemoryAccess,
       nullptr,
       {{"", "assert_failed", "A CUDA kernel's device-side assertion failed."},
        {"", "", "A CUDA kernel accessed memory it does not own."}},
       {{"", "",
         "This is a bug in the job's code or input, not a lack of memory: most often an index "
         "out of range (class labels ≥ the number of classes, token ids ≥ the vocabulary size) "
         "or a custom kernel's bad pointer."}},
       {{"rerun", "",
         "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error is reported at the kernel that failed "
         "(CUDA reports it later, asynchronously, otherwise)"},
        {"code", "",
         "Check the labels and indices fed to losses and embeddings (e.g. assert labels.max() < "
         "num_classes), or run the step on the CPU for a clear error"}}},
      {C::kSegfault,
       nullptr,
       {{"", "", "The job crashed with a segmentation fault[ in {object}]."}},
       {{"", "",
         "Native code read or wrote an invalid address: a bug in a compiled extension, "
         "libraries built against different versions, or a stack overflow."}},
       {{"rerun", "",
         "Get the native stack: python -X faulthandler, or ulimit -c unlimited and gdb on the "
         "core file"},
        {"env", "",
         "Check that compiled extensions match the loaded modules and Python (rebuild them "
         "after a module or compiler change)"}}},
      {C::kMpiAbort,
       nullptr,
       {{"", "", "The MPI application aborted[ (rank {mpi_rank})]."}},
       {{"", "",
         "A rank called MPI_Abort or exited abnormally; the reason is that rank's own error "
         "message just before the abort."}},
       {{"info", "",
         "Read the rank's output before the abort (the lines shown below) for the "
         "application's own error"}}},
      {C::kDiskFull,
       nullptr,
       {{"", "", "A file system was full or the quota was exceeded[ writing {path}]."}},
       {{"", "",
         "The job wrote more than the file system or the user's quota allows (checkpoints, "
         "logs, caches)."}},
       {{"info", "inodes",
         "The file system ran out of inodes (files), not bytes: df -i on the path; pack many "
         "small files into archives or shards (tar, WebDataset, HDF5)"},
        {"sbatch", "path~/tmp",
         "Point TMPDIR at a larger file system before the command (export "
         "TMPDIR=$SCRATCH/tmp), or ask for node-local space (#SBATCH --tmp=100G)"},
        {"info", "",
         "Check space and quota: df -h on the path, quota -s, or lfs quota -hu $USER on "
         "Lustre"},
        {"code", "",
         "Write to scratch ($SCRATCH or $TMPDIR), keep fewer checkpoints, and point caches "
         "(HF_HOME, TORCH_HOME, pip) off the home directory"}}},
      {C::kMissingFile,
       nullptr,
       {{"", "command", "The command {command} was not found."},
        {"", "missing_path", "A file the job needs does not exist: {missing_path}."},
        {"", "", "A file the job needs does not exist."}},
       {{"", "",
         "Paths resolve on the compute node and relative ones from the job's working "
         "directory, which may not be where it was submitted from."}},
       {{"sbatch", "command",
         "Load the module or activate the environment that provides {command} in the job "
         "script before it is used"},
        {"sbatch", "!command",
         "Use an absolute path, or set the working directory with --chdir; check the file "
         "system is mounted on the compute nodes"}}},
      {C::kImportError,
       nullptr,
       {{"", "module", "Python could not import {module}."},
        {"", "library", "The shared library {library} was not found."},
        {"", "", "A module or library could not be loaded."}},
       {{"", "",
         "The job ran in an environment without it: another Python, an inactive virtual "
         "environment or conda env, or a module not loaded on the compute node."}},
       {{"sbatch", "library",
         "module load the package that provides {library} (or set LD_LIBRARY_PATH) in the job "
         "script; check with ldd"},
        {"sbatch", "!library",
         "Activate the environment in the job script (source venv/bin/activate, conda "
         "activate, module load) before Python starts"},
        {"env", "!library&module", "Install it there: python -m pip install {module_root}"}}},
      {C::kDriverMismatch,
       nullptr,
       {{"", "",
         "The CUDA runtime the job uses does not match the node's NVIDIA driver[ (driver "
         "supports CUDA {driver_cuda})]."}},
       {{"", "",
         "The framework was built for a newer CUDA (or a different GPU architecture) than the "
         "node's driver and GPU support."}},
       {{"env", "",
         "Install a build for the node's CUDA version (e.g. a PyTorch wheel for an older "
         "CUDA), or use a container with CUDA forward compatibility"},
        {"sbatch", "", "Or run on nodes with a newer driver or a supported GPU (--constraint)"}}},
      {C::kDataloaderKilled,
       nullptr,
       {{"", "", "A data-loader worker died[ ({worker_signal})]."}},
       {{"", "worker_signal~Bus",
         "Workers pass batches through shared memory (/dev/shm), which was too small."},
        {"", "",
         "Workers are separate processes; each holds its own memory, and together they outgrew "
         "the job's memory or shared memory."}},
       {{"code", "num_workers>1",
         "Use fewer workers: num_workers at {num_workers_at} {num_workers} → {num_workers_half}",
         "num_workers"},
        {"code", "!num_workers", "Use fewer data-loader workers (num_workers)"},
        {"sbatch", "",
         "Give the job more memory (--mem), and in containers a larger /dev/shm (--shm-size)"}}},
      {C::kNanDivergence,
       nullptr,
       {{"", "", "Training diverged: the loss became NaN or infinite."}},
       {{"", "",
         "Usually a learning rate too high for the batch, fp16 overflow, or bad values in the "
         "input data."}},
       {{"code", "learning_rate>0",
         "Lower the learning rate at {learning_rate_at} ({learning_rate} → "
         "{learning_rate_half}) or add warm-up",
         "learning_rate"},
        {"code", "!learning_rate", "Lower the learning rate or add warm-up"},
        {"code", "",
         "Clip gradients (torch.nn.utils.clip_grad_norm_(params, 1.0)) and prefer bf16 to "
         "fp16"},
        {"rerun", "",
         "Find the first bad value: torch.autograd.set_detect_anomaly(True), and check inputs "
         "with torch.isfinite"}}},
  };
  return *tables;
}

using FixVars = std::map<std::string, std::string, std::less<>>;

// The values the templates name: the facts that are strings, and what is derived from them.
FixVars MakeFixVars(FixContext& ctx) {
  FixVars v;
  for (const auto& [key, value] : ctx.facts.items()) {
    if (value.is_string()) v[key] = value.get<std::string>();
  }
  auto get = [&](const char* key) {
    auto it = v.find(key);
    return it == v.end() ? std::string() : it->second;
  };
  v["node"] = NodeOf(ctx);
  v["mpi_rank"] = !get("rank").empty() ? get("rank") : get("rank2");
  v["missing_path"] = !get("path").empty() ? get("path") : get("path2");
  v["module_root"] = get("module").substr(0, get("module").find('.'));
  if (std::string found = get("driver_version"); !found.empty()) {
    v["driver_cuda"] = std::to_string(std::atoi(found.c_str()) / 1000) + "." +
                       std::to_string(std::atoi(found.c_str()) % 1000 / 10);
  }
  if (!get("assertion").empty() || ctx.facts.contains("device_assert")) v["assert_failed"] = "1";
  std::string code = get("xid");
  const XidInfo* info = code.empty() ? nullptr : FindXid(std::atoi(code.c_str()));
  if (info) {
    v["known_xid"] = "1";
    v["xid_name"] = std::string(info->name);
    v["xid_meaning"] = std::string(info->meaning);
    v["xid_action"] = std::string(info->action);
    v["xid_fix_kind"] = info->node_action ? "node" : "code";
  }
  if (!info || info->node_action) v["drain"] = "1";
  auto line = [&](const char* key, const std::optional<CodeLine>& at, std::string half) {
    if (!at) return;
    v[key] = at->value;
    v[std::string(key) + "_at"] = fmt::format("{}:{}", at->file, at->line);
    v[std::string(key) + "_half"] = std::move(half);
  };
  if (const auto& w = ctx.code.num_workers) {
    auto n = static_cast<int64_t>(w->number);
    line("num_workers", w, std::to_string(n / 2));
    v["num_workers"] = std::to_string(n);
  }
  if (const auto& lr = ctx.code.learning_rate) {
    line("learning_rate", lr, fmt::format("{:g}", lr->number / 2));
  }
  return v;
}

// Whether every test of `when` holds (see the table's comment).
bool Holds(std::string_view when, const FixVars& v) {
  while (!when.empty()) {
    size_t amp = when.find('&');
    std::string_view test = when.substr(0, amp);
    when = amp == std::string_view::npos ? std::string_view() : when.substr(amp + 1);
    bool negate = test.starts_with('!');
    if (negate) test.remove_prefix(1);
    size_t op = test.find_first_of("~>");
    auto it = v.find(test.substr(0, op));
    std::string value = it == v.end() ? std::string() : it->second;
    bool ok = !value.empty();
    if (op != std::string_view::npos && test[op] == '~') {
      ok = value.find(test.substr(op + 1)) != std::string::npos;
    } else if (op != std::string_view::npos) {
      ok = ok && std::atof(value.c_str()) > std::atof(std::string(test.substr(op + 1)).c_str());
    }
    if (ok == negate) return false;
  }
  return true;
}

// A template with its {keys} filled in and its [parts] kept only when all their keys are set.
std::string Render(std::string_view tmpl, const FixVars& v) {
  std::string out, part;
  bool in_part = false, part_ok = true;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    std::string& to = in_part ? part : out;
    if (tmpl[i] == '[') {
      in_part = true;
      part.clear();
      part_ok = true;
    } else if (tmpl[i] == ']' && in_part) {
      if (part_ok) out += part;
      in_part = false;
    } else if (tmpl[i] == '{') {
      size_t end = tmpl.find('}', i);
      auto it = v.find(tmpl.substr(i + 1, end - i - 1));
      if (it == v.end() || it->second.empty()) {
        part_ok = false;
      } else {
        to += it->second;
      }
      i = end;
    } else {
      to += tmpl[i];
    }
  }
  return out;
}

void ClassFixes(C cls, FixContext& ctx) {
  for (const ClassFixTable& t : FixTables()) {
    if (t.cls != cls) continue;
    if (t.compute != nullptr) return t.compute(ctx);
    FixVars v = MakeFixVars(ctx);
    if (cls == C::kGpuHardware && v.count("known_xid") != 0) {
      ctx.facts["xid_name"] = v["xid_name"];
      ctx.facts["xid_cause"] =
          std::string(XidCauseName(FindXid(std::atoi(v["xid"].c_str()))->cause));
    }
    auto first = [&](const std::vector<FixEntry>& entries) {
      for (const FixEntry& e : entries) {
        if (Holds(e.when, v)) return Render(e.text, v);
      }
      return std::string();
    };
    ctx.summary = first(t.summary);
    ctx.why = first(t.why);
    for (const FixEntry& e : t.fixes) {
      if (!Holds(e.when, v)) continue;
      std::string kind = Render(e.kind, v), text = Render(e.text, v);
      const std::optional<CodeLine>& at = e.line == nullptr ? std::nullopt
                                          : std::string_view(e.line) == "num_workers"
                                              ? ctx.code.num_workers
                                              : ctx.code.learning_rate;
      if (at) {
        CodeLineFix(ctx, *at, v[std::string(e.line) + "_half"], text);
      } else {
        ctx.fixes.push_back({kind, text, "", 0, "", ""});
      }
    }
    return;
  }
}

void AddRelevant(std::vector<Evidence>* out, Evidence e) {
  for (const Evidence& x : *out) {
    if (x.file == e.file && x.line == e.line && x.line > 0) return;
  }
  out->push_back(std::move(e));
}

bool LooksLikeError(std::string_view text) {
  static const RE2 re(
      R"re((?i)\b(?:error|fatal|exception|abort(?:ed)?|failed|failure|killed|panic)\b)re");
  return RE2::PartialMatch(text, re);
}

// The causes, ranked by adjusted score (near-ties go to the one that appeared first), each
// with its strongest evidence, one piece per log line. Returns the classes in rank order.
std::vector<int> RankCauses(const std::array<ClassScore, kFailureClassCount>& classes,
                            Diagnosis& d) {
  std::vector<int> order;
  for (int c = 0; c < kFailureClassCount; ++c) {
    if (classes[static_cast<size_t>(c)].score >= 0.1) order.push_back(c);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& x = classes[static_cast<size_t>(a)];
    const auto& y = classes[static_cast<size_t>(b)];
    if (std::abs(x.adjusted - y.adjusted) > 0.05) return x.adjusted > y.adjusted;
    return x.first_line < y.first_line;
  });

  for (size_t rank = 0; rank < order.size(); ++rank) {
    const ClassScore& cs = classes[static_cast<size_t>(order[rank])];
    Cause cause;
    cause.cls = static_cast<C>(order[rank]);
    cause.score = cs.score;
    double next =
        rank + 1 < order.size() ? classes[static_cast<size_t>(order[rank + 1])].adjusted : 0;
    cause.confidence = rank == 0 ? cs.adjusted * (1 - 0.5 * next) : cs.adjusted;
    cause.confidence = std::round(cause.confidence * 100) / 100;
    cause.consequence_of = cs.consequence_of;
    cause.first_line = cs.first_line == INT64_MAX ? 0 : cs.first_line;
    std::vector<const Item*> by_strength = cs.items;
    std::stable_sort(by_strength.begin(), by_strength.end(),
                     [](const Item* a, const Item* b) { return a->strength > b->strength; });
    std::set<std::string> seen;  // one piece of evidence per log line
    for (const Item* item : by_strength) {
      const Evidence& e = item->evidence;
      std::string key = e.line > 0 ? fmt::format("{}:{}", e.file, e.line) : e.text;
      if (!seen.insert(key).second) continue;
      cause.evidence.push_back(item->evidence);
      if (cause.evidence.size() == 4) break;
    }
    d.causes.push_back(std::move(cause));
  }

  return order;
}

// The root cause's class and confidence, and the facts its signatures captured (strongest
// first). Returns whether a class scored enough to be named.
bool NameRootCause(const std::array<ClassScore, kFailureClassCount>& classes,
                   const std::vector<int>& order, Diagnosis& d) {
  bool known = !d.causes.empty() && classes[static_cast<size_t>(order[0])].adjusted >= kMinScore;
  d.cls = known ? d.causes[0].cls : C::kUnknown;
  if (known) {
    const ClassScore& top = classes[static_cast<size_t>(order[0])];
    d.confidence = d.causes[0].confidence;
    d.evidence = d.causes[0].evidence;
    // Facts: the strongest signature's first, then the others'.
    std::vector<const Item*> by_strength = top.items;
    std::stable_sort(by_strength.begin(), by_strength.end(),
                     [](const Item* a, const Item* b) { return a->strength > b->strength; });
    for (const Item* item : by_strength) {
      if (!item->facts) continue;
      for (const auto& [k, v] : *item->facts) {
        if (!d.facts.contains(k)) d.facts[k] = v;
      }
    }
    if (d.cls == C::kIllegalMemoryAccess) {
      for (const Item* item : top.items) {
        if (item->id == "device_side_assert") d.facts["device_assert"] = true;
      }
    }
  } else {
    double best = d.causes.empty() ? 0 : classes[static_cast<size_t>(order[0])].adjusted;
    d.confidence = std::round((1 - best) * 100) / 100;
  }

  return known;
}

// The Python traceback that goes with the root cause (or, for unknown, the earlier error or the
// last exception of the job's own).
const Traceback* ChooseTraceback(const std::vector<Traceback>& tracebacks, const Traceback* earlier,
                                 const std::array<ClassScore, kFailureClassCount>& classes,
                                 const std::vector<int>& order, bool known, const Diagnosis& d) {
  const Traceback* tb = nullptr;
  if (known && !d.evidence.empty() && d.evidence[0].line > 0) {
    tb = TracebackFor(tracebacks, classes[static_cast<size_t>(order[0])].items, d.evidence[0].file,
                      d.evidence[0].line);
  }
  if (!tb && !known) tb = earlier;
  if (!tb && !known && !tracebacks.empty()) {
    // The last exception of the job's own; a launcher's report of it only if there is none.
    for (auto it = tracebacks.rbegin(); it != tracebacks.rend() && !tb; ++it) {
      if (!it->frames.empty() && !IsWrapperException(it->exception)) tb = &*it;
    }
    for (auto it = tracebacks.rbegin(); it != tracebacks.rend() && !tb; ++it) {
      if (!it->frames.empty()) tb = &*it;
    }
  }
  return tb;
}

// The traceback's exception and the job's own frame, with its line of code when the code
// folder holds the file.
void TracebackFacts(const Traceback* tb, const DiagnoseInput& input, Diagnosis& d) {
  if (tb) {
    if (!tb->exception.empty()) {
      d.facts["exception"] = tb->exception;
      if (!tb->message.empty()) d.facts["exception_message"] = tb->message;
    }
    if (const Traceback::Frame* frame = UserFrame(*tb)) {
      d.facts["user_frame"] = fmt::format("{}:{}", frame->file, frame->line);
      d.facts["user_function"] = frame->func;
      std::string local = FindSourceFile(input.code_dir, frame->file);
      if (!local.empty()) {
        if (auto text = ReadSourceLine(local, frame->line)) d.facts["user_code"] = *text;
      }
    }
  }
}

// What the job record and the agent add: the state, the exit, the hottest stacks.
void JobAndTelemetryFacts(const DiagnoseInput& input, Diagnosis& d) {
  if (input.job) {
    d.facts["state"] = input.job->outcome.state;
    if (input.job->outcome.exit_code) d.facts["exit_code"] = *input.job->outcome.exit_code;
    if (input.job->outcome.signal) d.facts["signal"] = *input.job->outcome.signal;
  }
  if (input.telemetry) {
    const Telemetry& t = *input.telemetry;
    if (t.silent_before_end_s) d.facts["agent_silent_before_end_s"] = *t.silent_before_end_s;
    // Where the job spent its time (a rank stuck in a collective, a loader, a loop): the
    // innermost frames of its hottest stacks, with their share of the samples.
    int64_t total = 0;
    for (const auto& [stack, n] : t.hottest_stacks) total += n;
    nlohmann::json hot = nlohmann::json::array();
    for (const auto& [stack, n] : t.hottest_stacks) {
      if (hot.size() >= 3 || total <= 0) break;
      std::vector<std::string> frames;
      for (size_t at = 0; at <= stack.size();) {
        size_t semi = stack.find(';', at);
        if (semi == std::string::npos) semi = stack.size();
        frames.push_back(stack.substr(at, semi - at));
        at = semi + 1;
      }
      std::string inner;
      for (size_t k = frames.size(); k > 0 && frames.size() - k < 3; --k) {
        inner += (inner.empty() ? "" : " < ") + frames[k - 1];
      }
      hot.push_back(
          {{"frames", inner},
           {"share",
            std::round(1000.0 * static_cast<double>(n) / static_cast<double>(total)) / 1000.0}});
    }
    if (!hot.empty()) d.facts["hottest_stacks"] = hot;
  }
}

// The file under the code folder where the job's own program started: the outermost frame of
// the traceback that is not a library's; "" when none.
std::string EntryOf(const Traceback* tb, const std::string& code_dir) {
  if (tb == nullptr || code_dir.empty()) return "";
  for (const Traceback::Frame& frame : tb->frames) {
    if (!IsLibraryPath(frame.file)) return FindSourceFile(code_dir, frame.file);
  }
  return "";
}

// The summary, the why and the fixes: the root cause's, or for unknown, what to read.
void ExplainAndFix(bool known, const Traceback* tb, const std::vector<LogScan>& scans,
                   const std::optional<JobScript>& script, const DiagnoseInput& input,
                   Diagnosis& d) {
  CodeFactsForDiagnosis code;
  if (known) {
    code = ReadCodeFacts(script, input.script_path, input.code_dir, EntryOf(tb, input.code_dir));
  }
  FixContext ctx{input, script, code, scans, d.facts, d.fixes, "", ""};
  if (known) {
    ClassFixes(d.cls, ctx);
    d.summary = ctx.summary;
    d.why = ctx.why;
    for (size_t i = 1; i < d.causes.size(); ++i) {
      Cause& c = d.causes[i];
      c.summary = !c.consequence_of ? "a weaker explanation"
                  : *c.consequence_of == C::kUnknown
                      ? "a consequence of an earlier error in the job's own code"
                      : fmt::format("a consequence of {}", FailureClassName(*c.consequence_of));
    }
    d.causes[0].summary = d.summary;
  } else {
    d.summary = "No known failure signature explains this job's end.";
    d.why = d.facts.contains("exception")
                ? fmt::format("The job raised {}{}; see the lines below.",
                              d.facts["exception"].get<std::string>(),
                              d.facts.contains("user_frame")
                                  ? " at " + d.facts["user_frame"].get<std::string>()
                                  : std::string())
                : "Read the most relevant lines below; they are the errors the job printed "
                  "last.";
    for (Cause& c : d.causes) {
      c.summary = c.consequence_of == C::kUnknown ? "a consequence of the job's own earlier error"
                                                  : "too weak to name (evidence below)";
    }
  }
  if (d.facts.contains("user_frame") && d.cls != C::kUnknown) {
    std::string where = d.facts["user_frame"].get<std::string>();
    if (d.cls == C::kIllegalMemoryAccess || d.cls == C::kMissingFile || d.cls == C::kGpuOom ||
        d.cls == C::kNanDivergence) {
      d.why += " The job's own code was at " + where + ".";
    }
  }
  if (!known) {
    if (d.facts.contains("user_frame")) {
      d.fixes.push_back({"code",
                         fmt::format("Start at {} in the job's own code",
                                     d.facts["user_frame"].get<std::string>()),
                         "", 0, "", ""});
    }
  }
}

// The lines worth reading: evidence, the traceback's end, then the last error-like lines.
void RelevantLines(bool known, const Traceback* tb, const std::vector<LogScan>& scans,
                   Diagnosis& d) {
  for (const Evidence& e : d.evidence) AddRelevant(&d.relevant_lines, e);
  if (tb) {
    for (const LogScan& scan : scans) {
      if (scan.file != tb->file) continue;
      for (const SignatureHit& h : scan.hits) {
        if (h.line == tb->end_line) {
          AddRelevant(&d.relevant_lines, {scan.file, h.line, h.text, "traceback", C::kUnknown});
        }
      }
    }
  }
  if (!known) {
    for (const auto& c : d.causes) {
      for (const Evidence& e : c.evidence) AddRelevant(&d.relevant_lines, e);
    }
    for (const LogScan& scan : scans) {
      int shown = 0;
      for (auto it = scan.tail.rbegin(); it != scan.tail.rend() && shown < 8; ++it) {
        if (!LooksLikeError(it->second)) continue;
        AddRelevant(&d.relevant_lines, {scan.file, it->first, it->second, "tail", C::kUnknown});
        ++shown;
      }
      if (shown == 0) {
        for (auto it = scan.tail.rbegin(); it != scan.tail.rend() && shown < 5; ++it, ++shown) {
          AddRelevant(&d.relevant_lines, {scan.file, it->first, it->second, "tail", C::kUnknown});
        }
      }
    }
  }
  std::stable_sort(d.relevant_lines.begin(), d.relevant_lines.end(),
                   [](const Evidence& a, const Evidence& b) {
                     return a.file == b.file ? a.line < b.line : false;
                   });
}

bool LearnedClassSetAside(const std::vector<Cause>& causes, FailureClass cls) {
  return std::any_of(causes.begin(), causes.end(), [&](const Cause& c) { return c.cls == cls; });
}

std::string LearnedTermsText(const nlohmann::json& learned) {
  std::string out;
  for (const auto& t : learned["terms"]) {
    out += (out.empty() ? "\"" : ", \"") + t.get<std::string>() + "\"";
  }
  return out;
}

// When no signature names a class: the learned fallback's class, if its probability reaches
// kLearnedThreshold. Its confidence is half its probability (under 0.5, below every signature's
// answer), its evidence the line that weighed most. Returns whether it named one.
bool LearnedRootCause(const std::vector<LogScan>& scans, Diagnosis& d) {
  auto model = LearnedFallback::Embedded();
  if (!model.ok()) return false;
  std::vector<FallbackLine> lines = FallbackLines(scans);
  // A job the scheduler refused at submission never ran: `unknown` by the class boundaries,
  // whatever the words around the refusal suggest.
  if (lines.empty() || std::any_of(lines.begin(), lines.end(), [](const FallbackLine& l) {
        return IsSubmissionRefused(l.text);
      })) {
    return false;
  }
  auto match = (*model)->Classify(lines);
  if (!match.ok() || match->cls == C::kUnknown || match->probability < kLearnedThreshold ||
      !match->cited) {
    return false;
  }
  // A class the rules weighed and found too weak, or set aside as a consequence of the job's own
  // exception (an MPI banner after a ValueError), stays unnamed: that is the rules' answer, not
  // a gap in them. The model names only classes the signatures have no evidence for.
  if (LearnedClassSetAside(d.causes, match->cls)) return false;
  Evidence e{match->cited->file, match->cited->line, match->cited->text, "learned", match->cls};
  Cause cause;
  cause.cls = match->cls;
  cause.score = match->probability;
  cause.confidence = std::round(0.5 * match->probability * 100) / 100;
  cause.evidence = {e};
  cause.first_line = e.line;
  d.causes.insert(d.causes.begin(), cause);
  d.cls = match->cls;
  d.confidence = cause.confidence;
  d.evidence = {e};
  d.learned = nlohmann::json{{"probability", std::round(match->probability * 1000) / 1000},
                             {"threshold", kLearnedThreshold},
                             {"terms", match->terms}};
  return true;
}

Diagnosis DiagnoseParsed(std::vector<LogScan> scans, const DiagnoseInput& input,
                         const std::optional<JobScript>& script) {
  Diagnosis d;
  d.job = input.job;
  std::vector<Item> items;
  std::vector<Traceback> tracebacks;
  LogItems(scans, &items, &tracebacks);
  if (input.job) RecordItems(*input.job, &items);
  if (input.telemetry) TelemetryItems(*input.telemetry, &items);
  auto classes = Score(items);
  if (OnlyWarningsExplain(classes, items, tracebacks)) {
    for (Item& item : items) {
      if (item.halved) item.strength *= 2;
    }
    classes = Score(items);
  }
  // The same for a lone symptom: an MPI launcher's report that a rank exited non-zero, with no
  // exception and nothing else in the log, is the rank's own abort (weakly, 0.55); next to an
  // exception no signature knows it stays capped and the exception is shown.
  if (NothingElseExplains(classes, tracebacks) && !AnyExceptionLine(scans)) {
    classes = Score(items, true);
  }
  const Traceback* earlier = EarlierError(tracebacks, items, &classes);
  std::vector<int> order = RankCauses(classes, d);
  bool known = NameRootCause(classes, order, d);
  bool learned = !known && input.learned_fallback && LearnedRootCause(scans, d);
  const Traceback* tb = ChooseTraceback(tracebacks, earlier, classes, order, known, d);
  TracebackFacts(tb, input, d);
  JobAndTelemetryFacts(input, d);
  ExplainAndFix(known || learned, tb, scans, script, input, d);
  if (learned) {
    d.summary = "Learned match, no signature: " + d.summary;
    d.why = fmt::format(
        "No signature matched; a model trained on the project's failure logs names {} with "
        "probability {:.2f} from the words: {}. {}",
        FailureClassName(d.cls), (*d.learned)["probability"].get<double>(),
        LearnedTermsText(*d.learned), d.why);
    d.causes[0].summary = d.summary;
  }
  RelevantLines(known, tb, scans, d);
  d.logs = std::move(scans);
  return d;
}

}  // namespace

Diagnosis DiagnoseScans(std::vector<LogScan> scans, const DiagnoseInput& input) {
  std::optional<JobScript> script;
  if (!input.script_path.empty()) {
    auto parsed = ParseJobScriptFile(input.script_path);
    if (parsed.ok()) script = std::move(*parsed);
  }
  return DiagnoseParsed(std::move(scans), input, script);
}

StatusOr<Diagnosis> Diagnose(const DiagnoseInput& input) {
  std::vector<LogScan> scans;
  for (const std::string& path : input.log_paths) {
    auto scan = ScanLogFile(path);
    if (!scan.ok()) return scan.status();
    scans.push_back(std::move(*scan));
  }
  std::optional<JobScript> script;
  if (!input.script_path.empty()) {
    auto parsed = ParseJobScriptFile(input.script_path);
    if (!parsed.ok()) return parsed.status().WithContext("--script");
    script = std::move(*parsed);
  }
  return DiagnoseParsed(std::move(scans), input, script);
}

namespace {

nlohmann::json EvidenceJson(const Evidence& e) {
  nlohmann::json j = {
      {"file", e.file}, {"line", e.line}, {"text", e.text}, {"signature", e.signature}};
  if (e.cls != C::kUnknown) j["class"] = FailureClassName(e.cls);
  return j;
}

}  // namespace

nlohmann::json DiagnosisToJson(const Diagnosis& d) {
  nlohmann::json j;
  j["schema"] = "rightsize.diagnosis/v1";
  if (d.job) {
    j["job"] = {
        {"cluster", d.job->cluster}, {"job_id", d.job->job_id}, {"state", d.job->outcome.state}};
    if (d.job->outcome.exit_code) j["job"]["exit_code"] = *d.job->outcome.exit_code;
    if (d.job->outcome.signal) j["job"]["signal"] = *d.job->outcome.signal;
  } else {
    j["job"] = nullptr;
  }
  j["class"] = FailureClassName(d.cls);
  j["confidence"] = d.confidence;
  j["summary"] = d.summary;
  j["why"] = d.why;
  j["facts"] = d.facts;
  j["evidence"] = nlohmann::json::array();
  for (const Evidence& e : d.evidence) j["evidence"].push_back(EvidenceJson(e));
  j["fixes"] = nlohmann::json::array();
  for (const Fix& f : d.fixes) {
    nlohmann::json fj = {{"kind", f.kind}, {"text", f.text}};
    if (!f.to.empty() || !f.file.empty()) {
      fj["change"] = {{"file", f.file}, {"line", f.line}, {"from", f.from}, {"to", f.to}};
    }
    j["fixes"].push_back(fj);
  }
  j["causes"] = nlohmann::json::array();
  for (const Cause& c : d.causes) {
    nlohmann::json cj = {{"class", FailureClassName(c.cls)},
                         {"confidence", c.confidence},
                         {"score", std::round(c.score * 1000) / 1000},
                         {"summary", c.summary}};
    cj["consequence_of"] = c.consequence_of ? nlohmann::json(FailureClassName(*c.consequence_of))
                                            : nlohmann::json(nullptr);
    cj["evidence"] = nlohmann::json::array();
    for (const Evidence& e : c.evidence) cj["evidence"].push_back(EvidenceJson(e));
    j["causes"].push_back(cj);
  }
  // Added in v1 without a version change: null unless the class is a learned match.
  j["learned"] = d.learned ? *d.learned : nlohmann::json(nullptr);
  j["relevant_lines"] = nlohmann::json::array();
  for (const Evidence& e : d.relevant_lines) j["relevant_lines"].push_back(EvidenceJson(e));
  j["logs"] = nlohmann::json::array();
  for (const LogScan& s : d.logs) {
    j["logs"].push_back({{"file", s.file},
                         {"bytes", s.bytes},
                         {"lines", s.lines},
                         {"binary", s.nul_bytes > 0},
                         {"long_lines", s.long_lines}});
  }
  return j;
}

std::string RenderDiagnosisText(const Diagnosis& d) {
  std::string out;
  if (d.job) {
    out += fmt::format("job {}{}: {}", d.job->job_id,
                       d.job->cluster.empty() ? "" : " (" + d.job->cluster + ")",
                       d.job->outcome.state.empty() ? "state unknown" : d.job->outcome.state);
    if (d.job->outcome.exit_code) out += fmt::format(", exit {}", *d.job->outcome.exit_code);
    if (d.job->outcome.signal) out += fmt::format(", signal {}", *d.job->outcome.signal);
    out += "\n";
  }
  out += fmt::format("what:  {} (confidence {:.2f})\n       {}\n", FailureClassName(d.cls),
                     d.confidence, d.summary);
  if (!d.why.empty()) out += fmt::format("why:   {}\n", d.why);
  if (d.facts.contains("user_frame")) {
    out +=
        fmt::format("where: {}{}\n", d.facts["user_frame"].get<std::string>(),
                    d.facts.contains("user_code") ? "  " + d.facts["user_code"].get<std::string>()
                                                  : std::string());
  }
  if (d.facts.contains("hottest_stacks")) {
    const auto& top = d.facts["hottest_stacks"][0];
    out += fmt::format("doing: {} ({:.0f}% of the stack samples)\n",
                       top["frames"].get<std::string>(), 100 * top["share"].get<double>());
  }
  if (!d.fixes.empty()) {
    out += "fix:\n";
    int n = 0;
    for (const Fix& f : d.fixes) {
      out += fmt::format("  {}. {}\n", ++n, f.text);
      if (!f.file.empty() && !f.from.empty()) {
        out += fmt::format("     {}:{}  {}  →  {}\n", f.file, f.line, f.from, f.to);
      }
    }
  }
  const auto& lines = d.cls == C::kUnknown ? d.relevant_lines : d.evidence;
  if (!lines.empty()) {
    out += d.cls == C::kUnknown ? "most relevant lines:\n"
           : d.learned
               ? fmt::format("evidence (learned: tokens {}):\n", LearnedTermsText(*d.learned))
               : "evidence:\n";
    for (const Evidence& e : lines) {
      out += e.line > 0 ? fmt::format("  {}:{}  {}\n", e.file, e.line, e.text)
                        : fmt::format("  {}: {}\n", e.file, e.text);
    }
  }
  if (d.causes.size() > 1 || (d.cls == C::kUnknown && !d.causes.empty())) {
    out += "other causes considered:\n";
    for (size_t i = d.cls == C::kUnknown ? 0 : 1; i < d.causes.size(); ++i) {
      out += fmt::format("  {} {:.2f}  {}\n", FailureClassName(d.causes[i].cls),
                         d.causes[i].confidence, d.causes[i].summary);
    }
  }
  return out;
}

}  // namespace rightsize

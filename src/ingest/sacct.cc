#include "ingest/sacct.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "core/plausible.h"
#include "core/units.h"

namespace rightsize {

const char* const kSacctFormat =
    "JobID,JobIDRaw,Cluster,Partition,Account,User,Group,QOS,JobName,State,ExitCode,Submit,"
    "Start,End,Elapsed,Timelimit,NNodes,NCPUS,ReqCPUS,ReqMem,ReqTRES,AllocTRES,TotalCPU,"
    "MaxRSS,AveRSS,NTasks,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,NodeList,"
    "ConsumedEnergyRaw";

namespace {

enum Col {
  kJobId,
  kJobIdRaw,
  kCluster,
  kPartition,
  kAccount,
  kUser,
  kGroup,
  kQos,
  kJobName,
  kState,
  kExitCode,
  kSubmit,
  kStart,
  kEnd,
  kElapsed,
  kElapsedRaw,
  kTimelimit,
  kTimelimitRaw,
  kNNodes,
  kNCpus,
  kAllocCpus,
  kReqCpus,
  kReqMem,
  kReqTres,
  kAllocTres,
  kReqGres,
  kAllocGres,
  kTotalCpu,
  kUserCpu,
  kSystemCpu,
  kMaxRss,
  kAveRss,
  kNTasks,
  kTresUsageInMax,
  kTresUsageInTot,
  kTresUsageOutTot,
  kNodeList,
  kConsumedEnergyRaw,
  kNumCols
};

// Canonical names, in Col order. Matching is case-insensitive, as sacct's --format is.
// clang-format off
const char* const kColNames[kNumCols] = {
    "JobID",     "JobIDRaw", "Cluster",   "Partition",      "Account",        "User",
    "Group",     "QOS",      "JobName",   "State",          "ExitCode",       "Submit",
    "Start",     "End",      "Elapsed",   "ElapsedRaw",     "Timelimit",      "TimelimitRaw",
    "NNodes",    "NCPUS",    "AllocCPUS", "ReqCPUS",        "ReqMem",         "ReqTRES",
    "AllocTRES", "ReqGRES",  "AllocGRES", "TotalCPU",       "UserCPU",        "SystemCPU",
    "MaxRSS",    "AveRSS",   "NTasks",    "TRESUsageInMax", "TRESUsageInTot", "TRESUsageOutTot",
    "NodeList",  "ConsumedEnergyRaw"};
// clang-format on

int ColumnId(std::string_view name) {
  name = Trim(name);
  for (int i = 0; i < kNumCols; ++i) {
    if (EqualsIgnoreCase(name, kColNames[i])) return i;
  }
  return -1;
}

std::string DetectDelimiter(std::string_view line) {
  // Longest first: "^|^" contains '|'.
  for (const char* d : {"^|^", "|", "\xe2\x98\x83" /* ☃ */, "\t", ";"}) {
    if (line.find(d) != std::string_view::npos) return d;
  }
  return "|";
}

// Reads a field with `parse`; an error names the field.
template <typename T>
Status Field(std::string_view name, StatusOr<T> parsed, T* out) {
  if (!parsed.ok()) return parsed.status().WithContext(fmt::format("field {}", name));
  *out = std::move(parsed).value();
  return Status::Ok();
}

struct ExitCode {
  std::optional<int> code;
  std::optional<int> signal;
};

StatusOr<ExitCode> ParseExitCode(std::string_view text) {
  text = Trim(text);
  ExitCode out;
  if (text.empty()) return out;
  auto colon = text.find(':');
  auto code = ParseInt(text.substr(0, colon));
  if (!code) {
    return Status::BadInput(fmt::format("expected an exit code like 0:0, got {}", Quote(text)));
  }
  out.code = static_cast<int>(*code);
  if (colon != std::string_view::npos) {
    auto sig = ParseInt(text.substr(colon + 1));
    if (!sig) {
      return Status::BadInput(fmt::format("expected an exit code like 0:9, got {}", Quote(text)));
    }
    out.signal = static_cast<int>(*sig);
  }
  return out;
}

}  // namespace

std::string NormalizeState(std::string_view state) {
  state = Trim(state);
  auto space = state.find(' ');
  if (space != std::string_view::npos) state = state.substr(0, space);
  while (!state.empty() && state.back() == '+') state.remove_suffix(1);
  return std::string(state);
}

namespace {

// Old sacct's ReqGRES/AllocGRES: "gpu:2", "gpu:a100:2", "gpu:tesla:2(IDX:0-1)".
void ParseGres(std::string_view text, std::optional<int>* gpus, std::string* type) {
  text = Trim(text);
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (auto paren = item.find('('); paren != std::string_view::npos) item = item.substr(0, paren);
    if (item.rfind("gpu", 0) == 0) {
      auto last = item.rfind(':');
      if (last != std::string_view::npos) {
        if (auto n = ParseInt(item.substr(last + 1))) {
          *gpus = gpus->value_or(0) + static_cast<int>(*n);
          auto first = item.find(':');
          if (first != last) *type = std::string(item.substr(first + 1, last - first - 1));
        }
      }
    }
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
}

template <typename T>
void KeepMax(std::optional<T>& acc, std::optional<T> v) {
  if (v && (!acc || *v > *acc)) acc = v;
}
template <typename T>
void AddTo(std::optional<T>& acc, std::optional<T> v) {
  if (v) acc = acc.value_or(0) + *v;
}

}  // namespace

SacctParser::SacctParser(SacctOptions options) : options_(std::move(options)) {}

Status SacctParser::SetColumns(const std::vector<std::string>& names) {
  column_ids_.clear();
  bool has_id = false;
  for (const auto& n : names) {
    int id = ColumnId(n);
    column_ids_.push_back(id);
    has_id = has_id || id == kJobId || id == kJobIdRaw;
  }
  if (!has_id) {
    return Status::BadInput("the columns have no JobID or JobIDRaw; expected sacct -P output");
  }
  columns_set_ = true;
  return Status::Ok();
}

Status SacctParser::ParseLine(std::string_view line, std::vector<JobRecord>& out) {
  if (Trim(line).empty() || line.front() == '#') {
    ++non_record_lines_;
    return Status::Ok();
  }
  if (!columns_set_) {
    if (options_.delimiter.empty()) options_.delimiter = DetectDelimiter(line);
    auto first = Split(line, options_.delimiter);
    bool is_header = std::any_of(first.begin(), first.end(), [](std::string_view f) {
      int id = ColumnId(f);
      return id == kJobId || id == kJobIdRaw;
    });
    if (is_header) {
      std::vector<std::string> names(first.begin(), first.end());
      RS_RETURN_IF_ERROR(SetColumns(names));
      ++non_record_lines_;
      return Status::Ok();
    }
    std::vector<std::string> names = options_.columns;
    if (names.empty()) {
      std::string_view fmt_sv = kSacctFormat;
      for (auto f : Split(fmt_sv, ",")) names.emplace_back(f);
      builtin_columns_ = true;
    }
    RS_RETURN_IF_ERROR(SetColumns(names));
  }
  Split(line, options_.delimiter, &fields_);
  // `sacct --parsable` (-p, unlike -P) ends every line with the delimiter.
  if (fields_.size() == column_ids_.size() + 1 && fields_.back().empty()) fields_.pop_back();
  if (builtin_columns_ && fields_.size() + 1 == column_ids_.size()) fields_.emplace_back();
  if (fields_.size() != column_ids_.size()) {
    // A header repeated mid-file (concatenated sacct runs) is not an error.
    if (!fields_.empty() && column_ids_[0] >= 0 &&
        EqualsIgnoreCase(fields_[0], kColNames[column_ids_[0]])) {
      ++non_record_lines_;
      return Status::Ok();
    }
    return Status::BadInput(
        fmt::format("expected {} fields separated by {}, got {}{}", column_ids_.size(),
                    Quote(options_.delimiter), fields_.size(),
                    options_.columns.empty() && fields_.size() != column_ids_.size()
                        ? " (wrong --delimiter, or a headerless file that needs --columns?)"
                        : ""));
  }
  if (column_ids_[0] >= 0 && EqualsIgnoreCase(Trim(fields_[0]), kColNames[column_ids_[0]])) {
    ++non_record_lines_;  // a repeated header
    return Status::Ok();
  }
  return ParseRow(fields_, out);
}

SacctParser::OpenJob& SacctParser::Open(const std::string& key, std::vector<JobRecord>& out) {
  auto it = open_.find(key);
  if (it != open_.end()) return it->second;
  if (open_.size() >= kOpenJobs) {
    auto oldest = open_.find(open_order_.front());
    out.push_back(Close(std::move(oldest->second)));
    open_.erase(oldest);
    open_order_.pop_front();
  }
  open_order_.push_back(key);
  return open_[key];
}

namespace {

// What job and step lines both say: how the line ended and what it used.
struct RowUsage {
  ExitCode exit;
  std::optional<double> cpu_s;
  std::optional<int64_t> peak, avg;  // memory, the largest task's times the tasks
  TresSummary max, in, out;          // TRESUsageInMax, TRESUsageInTot, TRESUsageOutTot
  std::optional<double> energy_j;    // ConsumedEnergyRaw
};

// SLURM's NO_VAL64, which some versions print for a step whose energy was never gathered.
constexpr std::string_view kSlurmNoVal64 = "18446744073709551614";

// ConsumedEnergyRaw: joules as an integer. 0 and empty are unknown (no acct_gather_energy
// plugin, or a node whose sensor read nothing), and so is NO_VAL64.
Status ParseConsumedEnergy(std::string_view text, std::optional<double>* out) {
  if (text.empty() || text == kSlurmNoVal64) return Status::Ok();
  std::optional<double> j = ParseDouble(text);
  if (!j) {
    return Status::BadInput(
        fmt::format("field ConsumedEnergyRaw: expected joules as a number, got {}", Quote(text)));
  }
  RS_RETURN_IF_ERROR(CheckPlausible("ConsumedEnergyRaw", Plausible::kEnergyJ, *j, text));
  if (*j > 0) *out = *j;
  return Status::Ok();
}

Status CheckMemory(const char* name, const std::optional<MemoryAmount>& m, std::string_view text) {
  if (!m) return Status::Ok();
  return CheckPlausible(name, Plausible::kMemoryBytes, static_cast<double>(m->bytes), text);
}

// A TRES list's numbers, each named "FIELD item" ("ReqTRES gres/gpu").
Status CheckTres(const char* name, const TresSummary& t, std::string_view text) {
  auto check = [&](const char* item, Plausible kind, const auto& value) -> Status {
    // Every record passes through here several times: the name is built only for a message.
    if (!value || IsPlausible(kind, static_cast<double>(*value))) return Status::Ok();
    return CheckPlausible(fmt::format("{} {}", name, item), kind, static_cast<double>(*value),
                          text);
  };
  RS_RETURN_IF_ERROR(check("cpu", Plausible::kCpus, t.cpus));
  RS_RETURN_IF_ERROR(check("mem", Plausible::kMemoryBytes, t.memory_bytes));
  RS_RETURN_IF_ERROR(check("node", Plausible::kNodes, t.nodes));
  RS_RETURN_IF_ERROR(check("gres/gpu", Plausible::kGpus, t.gpus));
  RS_RETURN_IF_ERROR(check("gres/gpumem", Plausible::kMemoryBytes, t.gpu_memory_bytes));
  RS_RETURN_IF_ERROR(check("gres/gpuutil", Plausible::kPercent, t.gpu_util_pct));
  RS_RETURN_IF_ERROR(check("fs/disk", Plausible::kIoBytes, t.disk_bytes));
  return check("cpu", Plausible::kCpuTime, t.cpu_seconds);
}

Status ParseRowUsage(const std::string_view* v, RowUsage* u) {
  RS_RETURN_IF_ERROR(Field("ExitCode", ParseExitCode(v[kExitCode]), &u->exit));
  RS_RETURN_IF_ERROR(ParseConsumedEnergy(v[kConsumedEnergyRaw], &u->energy_j));
  std::optional<MemoryAmount> max_rss, ave_rss;
  RS_RETURN_IF_ERROR(Field("MaxRSS", ParseSlurmMemory(v[kMaxRss], 1), &max_rss));
  RS_RETURN_IF_ERROR(Field("AveRSS", ParseSlurmMemory(v[kAveRss], 1), &ave_rss));
  std::optional<SlurmDuration> total_cpu, user_cpu, system_cpu;
  RS_RETURN_IF_ERROR(Field("TotalCPU", ParseSlurmDuration(v[kTotalCpu]), &total_cpu));
  RS_RETURN_IF_ERROR(Field("UserCPU", ParseSlurmDuration(v[kUserCpu]), &user_cpu));
  RS_RETURN_IF_ERROR(Field("SystemCPU", ParseSlurmDuration(v[kSystemCpu]), &system_cpu));
  RS_RETURN_IF_ERROR(Field("TRESUsageInMax", SummarizeTres(v[kTresUsageInMax], 1), &u->max));
  RS_RETURN_IF_ERROR(Field("TRESUsageInTot", SummarizeTres(v[kTresUsageInTot], 1), &u->in));
  RS_RETURN_IF_ERROR(Field("TRESUsageOutTot", SummarizeTres(v[kTresUsageOutTot], 1), &u->out));
  std::optional<int64_t> ntasks;
  if (!v[kNTasks].empty()) {
    ntasks = ParseInt(v[kNTasks]);
    if (!ntasks) {
      return Status::BadInput(
          fmt::format("field NTasks: expected a task count, got {}", Quote(v[kNTasks])));
    }
  }
  // Every number within its plausible range (core/plausible.h), named by its column. CPU
  // time sums over cores, so only its efficiency (checked on the job line) bounds it tightly.
  auto check_cpu = [&](const char* name, Col c, const std::optional<SlurmDuration>& d) {
    if (!d || d->kind != SlurmDuration::Kind::kValue) return Status::Ok();
    return CheckPlausible(name, Plausible::kCpuTime, d->seconds, v[c]);
  };
  RS_RETURN_IF_ERROR(check_cpu("TotalCPU", kTotalCpu, total_cpu));
  RS_RETURN_IF_ERROR(check_cpu("UserCPU", kUserCpu, user_cpu));
  RS_RETURN_IF_ERROR(check_cpu("SystemCPU", kSystemCpu, system_cpu));
  RS_RETURN_IF_ERROR(CheckMemory("MaxRSS", max_rss, v[kMaxRss]));
  RS_RETURN_IF_ERROR(CheckMemory("AveRSS", ave_rss, v[kAveRss]));
  if (ntasks && (*ntasks < 0 || static_cast<double>(*ntasks) > kMaxPlausibleCpus)) {
    return Status::BadInput(fmt::format(
        "field NTasks: expected a task count from 0 to 100,000,000, got {}", Quote(v[kNTasks])));
  }
  RS_RETURN_IF_ERROR(CheckTres("TRESUsageInMax", u->max, v[kTresUsageInMax]));
  RS_RETURN_IF_ERROR(CheckTres("TRESUsageInTot", u->in, v[kTresUsageInTot]));
  RS_RETURN_IF_ERROR(CheckTres("TRESUsageOutTot", u->out, v[kTresUsageOutTot]));
  if (total_cpu && total_cpu->kind == SlurmDuration::Kind::kValue) {
    u->cpu_s = total_cpu->seconds;
  } else if (user_cpu || system_cpu) {
    u->cpu_s = (user_cpu ? user_cpu->seconds : 0) + (system_cpu ? system_cpu->seconds : 0);
  }
  // Memory of a step: the largest task's peak times the tasks (an upper bound for the step).
  // Products in double, checked before they become int64: they cannot wrap.
  const double tasks = static_cast<double>(std::max<int64_t>(1, ntasks.value_or(1)));
  auto times_tasks = [&](const char* name, int64_t bytes, std::string_view text,
                         std::optional<int64_t>* out) -> Status {
    double total = static_cast<double>(bytes) * tasks;
    if (!IsPlausible(Plausible::kMemoryBytes, total)) {
      return CheckPlausible(fmt::format("{} x NTasks", name), Plausible::kMemoryBytes, total, text);
    }
    *out = static_cast<int64_t>(total);
    return Status::Ok();
  };
  if (max_rss) RS_RETURN_IF_ERROR(times_tasks("MaxRSS", max_rss->bytes, v[kMaxRss], &u->peak));
  if (!u->peak && u->max.memory_bytes) {
    RS_RETURN_IF_ERROR(
        times_tasks("TRESUsageInMax", *u->max.memory_bytes, v[kTresUsageInMax], &u->peak));
  }
  if (ave_rss) RS_RETURN_IF_ERROR(times_tasks("AveRSS", ave_rss->bytes, v[kAveRss], &u->avg));
  return Status::Ok();
}

// The job line's submit, start and end, run time and time limit.
Status ParseJobTimes(const std::string_view* v, JobRecord& j) {
  auto& r = j.request;
  RS_RETURN_IF_ERROR(Field("Submit", ParseSlurmTimestamp(v[kSubmit]), &j.submit_time));
  RS_RETURN_IF_ERROR(Field("Start", ParseSlurmTimestamp(v[kStart]), &j.start_time));
  RS_RETURN_IF_ERROR(Field("End", ParseSlurmTimestamp(v[kEnd]), &j.end_time));
  for (auto [name, c, t] :
       {std::tuple{"Submit", kSubmit, j.submit_time}, std::tuple{"Start", kStart, j.start_time},
        std::tuple{"End", kEnd, j.end_time}}) {
    if (t) RS_RETURN_IF_ERROR(CheckPlausible(name, Plausible::kUnixTime, *t, v[c]));
  }
  std::optional<SlurmDuration> elapsed, limit;
  RS_RETURN_IF_ERROR(Field("Elapsed", ParseSlurmDuration(v[kElapsed]), &elapsed));
  if (elapsed && elapsed->kind == SlurmDuration::Kind::kValue) {
    RS_RETURN_IF_ERROR(
        CheckPlausible("Elapsed", Plausible::kDuration, elapsed->seconds, v[kElapsed]));
  }
  if (elapsed && elapsed->kind == SlurmDuration::Kind::kValue) j.usage.elapsed_s = elapsed->seconds;
  if (!j.usage.elapsed_s && !v[kElapsedRaw].empty()) {
    auto raw = ParseDouble(v[kElapsedRaw]);
    if (!raw) {
      return Status::BadInput(
          fmt::format("field ElapsedRaw: expected seconds, got {}", Quote(v[kElapsedRaw])));
    }
    RS_RETURN_IF_ERROR(CheckPlausible("ElapsedRaw", Plausible::kDuration, *raw, v[kElapsedRaw]));
    j.usage.elapsed_s = *raw;
  }
  RS_RETURN_IF_ERROR(Field("Timelimit", ParseSlurmDuration(v[kTimelimit]), &limit));
  if (limit) {
    if (limit->kind == SlurmDuration::Kind::kValue) {
      RS_RETURN_IF_ERROR(
          CheckPlausible("Timelimit", Plausible::kTimeLimit, limit->seconds, v[kTimelimit]));
      r.time_limit_s = static_cast<int64_t>(limit->seconds);
    } else if (limit->kind == SlurmDuration::Kind::kUnlimited) {
      r.time_unlimited = true;
    }
  } else if (!v[kTimelimitRaw].empty()) {
    // TimelimitRaw is in minutes.
    if (auto m = ParseInt(v[kTimelimitRaw])) {
      RS_RETURN_IF_ERROR(CheckPlausible("TimelimitRaw", Plausible::kTimeLimit,
                                        static_cast<double>(*m) * 60, v[kTimelimitRaw]));
      r.time_limit_s = *m * 60;
    }
  }
  return Status::Ok();
}

// The job line's cores, nodes, memory and GPUs, asked for and allocated.
Status ParseJobResources(const std::string_view* v, JobRecord& j) {
  auto& r = j.request;
  auto parse_count = [&](Col c, std::optional<int64_t>* out_v) -> Status {
    if (v[c].empty()) return Status::Ok();
    auto n = ParseInt(v[c]);
    if (!n || *n < 0) {
      return Status::BadInput(
          fmt::format("field {}: expected a count, got {}", kColNames[c], Quote(v[c])));
    }
    RS_RETURN_IF_ERROR(CheckPlausible(kColNames[c],
                                      c == kNNodes ? Plausible::kNodes : Plausible::kCpus,
                                      static_cast<double>(*n), v[c]));
    *out_v = *n;
    return Status::Ok();
  };
  std::optional<int64_t> nnodes, ncpus, alloc_cpus, req_cpus;
  RS_RETURN_IF_ERROR(parse_count(kNNodes, &nnodes));
  RS_RETURN_IF_ERROR(parse_count(kNCpus, &ncpus));
  RS_RETURN_IF_ERROR(parse_count(kAllocCpus, &alloc_cpus));
  RS_RETURN_IF_ERROR(parse_count(kReqCpus, &req_cpus));
  TresSummary req_tres, alloc_tres;
  RS_RETURN_IF_ERROR(Field("ReqTRES", SummarizeTres(v[kReqTres], kMiB), &req_tres));
  RS_RETURN_IF_ERROR(Field("AllocTRES", SummarizeTres(v[kAllocTres], kMiB), &alloc_tres));
  std::optional<MemoryAmount> req_mem;
  RS_RETURN_IF_ERROR(Field("ReqMem", ParseSlurmMemory(v[kReqMem], kMiB), &req_mem));
  RS_RETURN_IF_ERROR(CheckTres("ReqTRES", req_tres, v[kReqTres]));
  RS_RETURN_IF_ERROR(CheckTres("AllocTRES", alloc_tres, v[kAllocTres]));
  RS_RETURN_IF_ERROR(CheckMemory("ReqMem", req_mem, v[kReqMem]));

  // Cores: allocation from AllocCPUS/NCPUS/AllocTRES; request from ReqCPUS/ReqTRES.
  if (alloc_cpus) {
    j.alloc.cpus = static_cast<double>(*alloc_cpus);
  } else if (ncpus) {
    j.alloc.cpus = static_cast<double>(*ncpus);
  } else if (alloc_tres.cpus) {
    j.alloc.cpus = alloc_tres.cpus;
  }
  // A job that never started reports 0 allocated CPUs: it holds nothing.
  if (req_cpus) {
    r.cpus = static_cast<double>(*req_cpus);
  } else if (req_tres.cpus) {
    r.cpus = req_tres.cpus;
  } else if (j.alloc.cpus && *j.alloc.cpus > 0) {
    r.cpus = j.alloc.cpus;
  }
  if (nnodes) j.alloc.nodes = static_cast<int>(*nnodes);
  if (req_tres.nodes) r.nodes = req_tres.nodes;
  if (!r.nodes && nnodes) r.nodes = static_cast<int>(*nnodes);

  // Memory: ReqTRES holds the job's total; ReqMem says per CPU/node in old versions.
  if (req_mem) {
    r.memory_per_unit_bytes = req_mem->bytes;
    r.memory_scope = req_mem->scope;
  }
  if (req_tres.memory_bytes) {
    r.memory_bytes = req_tres.memory_bytes;
  } else if (req_mem) {
    double cpus = r.cpus.value_or(j.alloc.cpus.value_or(1));
    double nodes = r.nodes.value_or(1);
    double per_unit = static_cast<double>(req_mem->bytes);
    // In double, checked before it becomes int64: a plausible amount per CPU times a plausible
    // CPU count can still be too much for one job.
    double total = req_mem->scope == MemoryScope::kPerCpu    ? per_unit * cpus
                   : req_mem->scope == MemoryScope::kPerNode ? per_unit * nodes
                                                             : per_unit;  // >= 21.08: the job's
    RS_RETURN_IF_ERROR(
        CheckPlausible("ReqMem x CPUs or nodes", Plausible::kMemoryBytes, total, v[kReqMem]));
    r.memory_bytes = static_cast<int64_t>(total);
  }
  if (alloc_tres.memory_bytes) j.alloc.memory_bytes = alloc_tres.memory_bytes;

  // GPUs.
  if (req_tres.gpus) {
    r.gpus = req_tres.gpus;
    r.gpu_type = req_tres.gpu_type;
  } else if (!v[kReqGres].empty()) {
    ParseGres(v[kReqGres], &r.gpus, &r.gpu_type);
  }
  if (alloc_tres.gpus) {
    j.alloc.gpus = alloc_tres.gpus;
    j.alloc.gpu_type = alloc_tres.gpu_type;
  } else if (!v[kAllocGres].empty()) {
    ParseGres(v[kAllocGres], &j.alloc.gpus, &j.alloc.gpu_type);
  }
  for (auto [name, c, gpus] : {std::tuple{"ReqGRES", kReqGres, r.gpus},
                               std::tuple{"AllocGRES", kAllocGres, j.alloc.gpus}}) {
    if (gpus) RS_RETURN_IF_ERROR(CheckPlausible(name, Plausible::kGpus, *gpus, v[c]));
  }
  return Status::Ok();
}

}  // namespace

Status SacctParser::ParseRow(const std::vector<std::string_view>& f, std::vector<JobRecord>& out) {
  // Gather the fields by column; absent columns read as empty.
  std::string_view v[kNumCols];
  for (size_t i = 0; i < f.size(); ++i) {
    if (column_ids_[i] >= 0) v[column_ids_[i]] = Trim(f[i]);
  }
  std::string_view id_text = !v[kJobId].empty() ? v[kJobId] : v[kJobIdRaw];
  JobIdParts id;
  RS_RETURN_IF_ERROR(Field(!v[kJobId].empty() ? "JobID" : "JobIDRaw", ParseJobId(id_text), &id));
  std::string key = std::string(v[kCluster]) + '\0' + id.job;
  RowUsage u;
  RS_RETURN_IF_ERROR(ParseRowUsage(v, &u));

  if (!id.step.empty()) {
    OpenJob& open = Open(key, out);
    // A step: fold its usage into the job.
    KeepMax(open.steps_peak_rss, u.peak);
    KeepMax(open.steps_avg_rss, u.avg);
    if (u.cpu_s) {
      open.steps_cpu_s += *u.cpu_s;
      open.any_step_cpu = true;
    }
    KeepMax(open.steps_gpu_mem, u.max.gpu_memory_bytes);
    KeepMax(open.steps_gpu_util, u.max.gpu_util_pct);
    AddTo(open.steps_read, u.in.disk_bytes);
    AddTo(open.steps_write, u.out.disk_bytes);
    // Steps run on the same nodes at once (batch, extern, srun), each metered for its nodes:
    // their sum would count a node's energy twice, so the largest stands in for the job.
    KeepMax(open.steps_energy_j, u.energy_j);
    if (id.step == "batch") {
      open.batch_state = NormalizeState(v[kState]);
      open.batch_exit = u.exit.code;
      open.batch_signal = u.exit.signal;
    }
    if (!open.have_job_line) {
      // Orphan steps (sacct run with a step filter): take what they say of the job.
      JobRecord& j = open.job;
      j.job_id = id.job;
      j.cluster = std::string(v[kCluster]);
      j.source = "sacct";
      if (!v[kNodeList].empty()) j.alloc.node_list = std::string(v[kNodeList]);
    }
    return Status::Ok();
  }

  // The job line: parsed aside, so a malformed one leaves nothing behind.
  JobRecord j;
  j.cluster = std::string(v[kCluster]);
  j.job_id = id.job;
  j.source = "sacct";
  auto& r = j.request;
  r.partition = std::string(v[kPartition]);
  r.account = std::string(v[kAccount]);
  r.user = std::string(v[kUser]);
  r.group = std::string(v[kGroup]);
  r.qos = std::string(v[kQos]);
  r.job_name = std::string(v[kJobName]);
  RS_RETURN_IF_ERROR(ParseJobTimes(v, j));
  RS_RETURN_IF_ERROR(ParseJobResources(v, j));
  if (!v[kNodeList].empty() && v[kNodeList] != "None assigned") {
    j.alloc.node_list = std::string(v[kNodeList]);
  }
  // Usage on the job line itself (newer SLURM aggregates TotalCPU here).
  if (u.cpu_s) {
    const auto& cpus = j.alloc.cpus;  // what SLURM enforced, not what was asked
    RS_RETURN_IF_ERROR(CheckCpuEfficiency(v[kTotalCpu].empty() ? "UserCPU + SystemCPU" : "TotalCPU",
                                          *u.cpu_s, cpus ? *cpus : -1,
                                          j.usage.elapsed_s ? *j.usage.elapsed_s : -1));
  }
  j.usage.cpu_time_s = u.cpu_s;
  j.usage.peak_rss_bytes = u.peak;
  j.usage.avg_rss_bytes = u.avg;
  j.usage.node_energy_j = u.energy_j;
  j.outcome.state = NormalizeState(v[kState]);
  j.outcome.exit_code = u.exit.code;
  j.outcome.signal = u.exit.signal;
  OpenJob& open = Open(key, out);
  open.job = std::move(j);
  open.have_job_line = true;
  return Status::Ok();
}

JobRecord SacctParser::Close(OpenJob&& open) {
  JobRecord j = std::move(open.job);
  auto& u = j.usage;
  if (open.any_step_cpu && (!u.cpu_time_s || open.steps_cpu_s > *u.cpu_time_s)) {
    u.cpu_time_s = open.steps_cpu_s;
  }
  KeepMax(u.peak_rss_bytes, open.steps_peak_rss);
  KeepMax(u.avg_rss_bytes, open.steps_avg_rss);
  KeepMax(u.peak_gpu_memory_bytes, open.steps_gpu_mem);
  KeepMax(u.gpu_util_pct, open.steps_gpu_util);
  if (!u.io_read_bytes) u.io_read_bytes = open.steps_read;
  if (!u.io_write_bytes) u.io_write_bytes = open.steps_write;
  if (!u.node_energy_j) u.node_energy_j = open.steps_energy_j;
  if (!open.have_job_line) {
    j.outcome.state = open.batch_state;
    j.outcome.exit_code = open.batch_exit;
    j.outcome.signal = open.batch_signal;
  }
  return j;
}

Status SacctParser::Finish(std::vector<JobRecord>& out) {
  for (const auto& key : open_order_) {
    auto it = open_.find(key);
    if (it != open_.end()) out.push_back(Close(std::move(it->second)));
  }
  open_.clear();
  open_order_.clear();
  return Status::Ok();
}

std::vector<std::string> SacctColumns(std::string_view list) {
  std::vector<std::string> out;
  for (std::string_view item : Split(list, ",")) {
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

}  // namespace rightsize

#include "ingest/clustercockpit.h"

#include <csv.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <optional>

#include "core/plausible.h"
#include "core/units.h"

namespace rightsize {

// Turns lines into CSV records with libcsv. libcsv is a stream parser: a record whose quoted
// field holds a newline simply continues with the next line. Owns the libcsv parser (its
// buffer is malloc'd): not copyable, not movable.
class CsvRecords {
 public:
  CsvRecords() { Init(); }
  ~CsvRecords() { csv_free(&parser_); }
  CsvRecords(const CsvRecords&) = delete;
  CsvRecords& operator=(const CsvRecords&) = delete;

  // Feeds one line (its newline was stripped) and appends the records it completes. A quote
  // that libcsv cannot place is BadInput ("expected …"); call Reset() after it.
  Status Feed(std::string_view line, std::vector<std::vector<std::string>>& records) {
    out_ = &records;
    size_t before = records.size();
    size_t done = csv_parse(&parser_, line.data(), line.size(), OnField, OnRowEnd, this);
    if (done == line.size()) done += csv_parse(&parser_, "\n", 1, OnField, OnRowEnd, this);
    out_ = nullptr;
    if (done != line.size() + 1) {
      return Status::BadInput(
          fmt::format("expected quotes only around a whole field, got {} at character {}",
                      Quote(line.substr(done > 8 ? done - 8 : 0, 20)), done + 1));
    }
    // A newline outside quotes always ends the record, so a line with content that ends none
    // is inside a quoted field that goes on.
    if (records.size() > before) {
      pending_lines_ = 0;
      pending_bytes_ = 0;
    } else if (pending_lines_ > 0 || !Trim(line).empty()) {
      ++pending_lines_;
      pending_bytes_ += line.size() + 1;
    }
    return Status::Ok();
  }

  // At the end of the input: a record still open has a quote that was never closed.
  Status Finish(std::vector<std::vector<std::string>>& records) {
    out_ = &records;
    int rc = csv_fini(&parser_, OnField, OnRowEnd, this);
    out_ = nullptr;
    if (rc != 0) {
      return Status::BadInput(fmt::format(
          "expected a closing quote before the end of the input, got none (the field opened {} "
          "lines before the last one)",
          pending_lines_ > 0 ? pending_lines_ - 1 : 0));
    }
    return Status::Ok();
  }

  void Reset() {
    csv_free(&parser_);
    Init();
    row_.clear();
    pending_lines_ = 0;
    pending_bytes_ = 0;
  }

  // Lines and bytes of a record whose quoted field is still open (0 between records).
  int64_t pending_lines() const { return pending_lines_; }
  size_t pending_bytes() const { return pending_bytes_; }
  // Fields of the open record completed so far: the index of the field being read.
  size_t open_fields() const { return row_.size(); }

 private:
  void Init() {
    parser_ = csv_parser{};
    // Strict: a stray quote is an error rather than text silently glued into a field.
    csv_init(&parser_, CSV_STRICT | CSV_STRICT_FINI);
  }
  static void OnField(void* data, size_t len, void* self_ptr) {
    auto* self = static_cast<CsvRecords*>(self_ptr);
    self->row_.emplace_back(static_cast<const char*>(data), len);
  }
  static void OnRowEnd(int /*terminator*/, void* self_ptr) {
    auto* self = static_cast<CsvRecords*>(self_ptr);
    self->out_->push_back(std::move(self->row_));
    self->row_.clear();
  }

  csv_parser parser_{};
  std::vector<std::string> row_;
  std::vector<std::vector<std::string>>* out_ = nullptr;  // set only while parsing
  int64_t pending_lines_ = 0;
  size_t pending_bytes_ = 0;
};

namespace {

enum Column {
  kCluster,
  kSubcluster,
  kJobId,
  kUser,
  kProject,
  kPartition,
  kJobName,
  kStartTime,
  kDuration,
  kWalltime,
  kJobState,
  kIsRunning,
  kNumNodes,
  kNumHwthreads,
  kNumAcc,
  kShared,
  kCpuLoadAvg,
  kMemUsedAvgPerNode,
  kMemUsedMaxPerNode,
  kAccUtilization,
  kAccMemUsed,
  kNodeList,
  kColumnCount
};

struct ColumnName {
  const char* name;
  Column column;
};

// Header names, exact (compared case-insensitively). Both export variants, plus cc-backend's
// own column names (duration, walltime) for a straight dump of its table.
constexpr auto kColumnNames = std::to_array<ColumnName>({
    {"cluster", kCluster},
    {"subcluster", kSubcluster},
    {"job_id", kJobId},
    {"hpc_user", kUser},
    {"user", kUser},
    {"project", kProject},
    {"partition", kPartition},
    {"job_name", kJobName},
    {"start_time", kStartTime},
    {"duration_s", kDuration},
    {"duration", kDuration},
    {"walltime_limit_s", kWalltime},
    {"walltime", kWalltime},
    {"job_state", kJobState},
    {"is_running", kIsRunning},
    {"num_nodes", kNumNodes},
    {"num_hwthreads", kNumHwthreads},
    {"num_acc", kNumAcc},
    {"shared", kShared},
    {"cpu_load_avg", kCpuLoadAvg},
    {"load_avg", kCpuLoadAvg},
    {"mem_used_avg_gb_node", kMemUsedAvgPerNode},
    {"mem_used_max_gb", kMemUsedMaxPerNode},
    {"acc_utilization_avg_pct", kAccUtilization},
    {"acc_mem_used_avg_sum", kAccMemUsed},
    {"hostnames", kNodeList},
    {"node_list", kNodeList},
});

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The GPU type a subcluster's name stands for, in the names the price table uses. NHR@FAU's
// Alex names its subclusters after the GPU model: a40, a100 (40 GB) and a100m80 (80 GB).
std::string GpuTypeOfSubcluster(std::string_view subcluster) {
  std::string type = Lower(subcluster);
  if (type == "a100m80") return "a100-80gb";
  return type;
}

// 4689 -> "4,689", as the ingest summary writes counts.
std::string WithCommas(int64_t n) {
  std::string digits = fmt::format("{}", n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// SLURM writes node lists with commas; the exports use ';' (cc-backend) or '|' (2020 schema).
std::string NodeList(std::string_view text) {
  std::string out(text);
  std::replace(out.begin(), out.end(), ';', ',');
  std::replace(out.begin(), out.end(), '|', ',');
  return out;
}

}  // namespace

ClusterCockpitParser::ClusterCockpitParser()
    : csv_(std::make_unique<CsvRecords>()), positions_(kColumnCount, -1) {}

ClusterCockpitParser::~ClusterCockpitParser() = default;

Status ClusterCockpitParser::ParseLine(std::string_view line, std::vector<JobRecord>& out) {
  if (csv_->pending_lines() == 0 && Trim(line).empty()) {
    ++non_record_lines_;
    return Status::Ok();
  }
  std::vector<std::vector<std::string>> records;
  Status feed = csv_->Feed(line, records);
  Status first;
  auto field_name = [&](size_t index) {
    if (have_header_ && index < header_names_.size()) return header_names_[index];
    return fmt::format("#{}", index + 1);
  };
  if (!feed.ok()) {
    first = feed.WithContext(fmt::format("field {}", field_name(csv_->open_fields())));
    csv_->Reset();
  } else if (csv_->pending_bytes() > kMaxRecordBytes) {
    first = Status::BadInput(
        fmt::format("field {}: expected a closing quote within 1 MiB, got none (the field "
                    "opened {} lines earlier; the record is skipped)",
                    field_name(csv_->open_fields()), csv_->pending_lines() - 1));
    csv_->Reset();
  }
  for (auto& record : records) {
    Status st = ParseRecord(record, out);
    if (first.ok()) first = st;
  }
  return first;
}

Status ClusterCockpitParser::Finish(std::vector<JobRecord>& out) {
  std::vector<std::vector<std::string>> records;
  size_t field = csv_->open_fields();
  Status st = csv_->Finish(records);
  if (!st.ok()) {
    std::string name = have_header_ && field < header_names_.size() ? header_names_[field]
                                                                    : fmt::format("#{}", field + 1);
    st = st.WithContext(fmt::format("field {}", name));
  }
  for (auto& record : records) {
    Status row = ParseRecord(record, out);
    if (st.ok()) st = row;
  }
  return st;
}

Status ClusterCockpitParser::ParseRecord(const std::vector<std::string>& fields,
                                         std::vector<JobRecord>& out) {
  if (have_header_) return ParseRow(fields, out);
  ++non_record_lines_;
  return SetHeader(fields);
}

Status ClusterCockpitParser::SetHeader(const std::vector<std::string>& names) {
  positions_.assign(kColumnCount, -1);
  header_names_.clear();
  for (size_t i = 0; i < names.size(); ++i) {
    std::string_view name = Trim(names[i]);
    if (i == 0 && name.starts_with("\xEF\xBB\xBF")) name.remove_prefix(3);  // UTF-8 BOM
    header_names_.emplace_back(name);
    std::string lower = Lower(name);
    for (const auto& known : kColumnNames) {
      if (lower == known.name && positions_[known.column] < 0) {
        positions_[known.column] = static_cast<int>(i);
      }
    }
  }
  if (positions_[kJobId] < 0) {
    std::string first = names.empty() ? std::string() : names.front();
    for (size_t i = 1; i < names.size() && i < 4; ++i) first += "," + names[i];
    return Status::BadInput(fmt::format(
        "expected a header naming the columns (job_id, start_time, duration_s, …), got {}",
        Quote(first)));
  }
  have_header_ = true;
  return Status::Ok();
}

std::vector<std::string> ClusterCockpitParser::notes() const {
  std::vector<std::string> out;
  if (running_rows_ > 0) {
    out.push_back(
        fmt::format("{} rows of running jobs skipped (not finished)", WithCommas(running_rows_)));
  }
  if (running_with_duration_ > 0) {
    out.push_back(fmt::format(
        "{} rows flagged is_running = 1 have a duration and were stored as finished jobs",
        WithCommas(running_with_duration_)));
  }
  if (shared_node_rows_ > 0) {
    out.push_back(fmt::format(
        "{} jobs shared their nodes: their node-level CPU load and memory include other jobs, "
        "so CPU time and memory were left unknown for them",
        WithCommas(shared_node_rows_)));
  }
  if (load_not_measured_ > 0) {
    out.push_back(fmt::format("{} jobs have CPU load 0 (not measured): CPU time left unknown",
                              WithCommas(load_not_measured_)));
  }
  if (memory_not_measured_ > 0) {
    out.push_back(fmt::format("{} jobs have memory 0 (not measured): left unknown",
                              WithCommas(memory_not_measured_)));
  }
  return out;
}

namespace {

// One row's fields by known column, with the checks every number goes through.
class RowReader {
 public:
  RowReader(const std::vector<std::string>& fields, const std::vector<std::string>& names,
            const std::vector<int>& positions)
      : fields_(fields), names_(names), positions_(positions) {}

  // The text of a column; empty when the header lacks it. SQL exports write NULL as "NULL" or
  // "\N": both are empty.
  std::string_view Text(Column c) const {
    int pos = positions_[c];
    if (pos < 0) return {};
    std::string_view v = Trim(fields_[static_cast<size_t>(pos)]);
    if (v == "NULL" || v == "\\N") return {};
    return v;
  }
  const std::string& Name(Column c) const { return names_[static_cast<size_t>(positions_[c])]; }
  // A non-negative number; nullopt when empty.
  StatusOr<std::optional<double>> Number(Column c, const char* expected) const {
    std::string_view v = Text(c);
    if (v.empty()) return std::optional<double>();
    auto d = ParseDouble(v);
    if (!d || *d < 0 || !std::isfinite(*d)) {
      return Status::BadInput(
          fmt::format("field {}: expected {}, got {}", Name(c), expected, Quote(v)));
    }
    return d;
  }
  // A whole number from 0 to a million; nullopt when empty.
  StatusOr<std::optional<int>> Count(Column c, const char* expected) const {
    std::string_view v = Text(c);
    if (v.empty()) return std::optional<int>();
    auto d = ParseDouble(v);
    if (!d || *d < 0 || *d > 1e6 || *d != std::floor(*d)) {
      return Status::BadInput(
          fmt::format("field {}: expected {}, got {}", Name(c), expected, Quote(v)));
    }
    return std::optional<int>(static_cast<int>(*d));
  }

 private:
  const std::vector<std::string>& fields_;
  const std::vector<std::string>& names_;
  const std::vector<int>& positions_;
};

// A row's numbers, checked.
struct RowValues {
  std::optional<double> duration_s, walltime_s, load, mem_avg_gb, mem_max_gb, gpu_util, gpu_mem_mib;
  std::optional<int> nodes, hwthreads, gpus;
  std::optional<int64_t> start;
};

Status ReadValues(const RowReader& row, RowValues* v) {
  RS_ASSIGN_OR_RETURN(v->duration_s, row.Number(kDuration, "a number of seconds"));
  RS_ASSIGN_OR_RETURN(v->walltime_s, row.Number(kWalltime, "a number of seconds"));
  RS_ASSIGN_OR_RETURN(v->nodes, row.Count(kNumNodes, "a node count"));
  RS_ASSIGN_OR_RETURN(v->hwthreads, row.Count(kNumHwthreads, "a hardware thread count"));
  RS_ASSIGN_OR_RETURN(v->gpus, row.Count(kNumAcc, "a GPU count"));
  RS_ASSIGN_OR_RETURN(v->load, row.Number(kCpuLoadAvg, "a load average"));
  RS_ASSIGN_OR_RETURN(v->mem_avg_gb, row.Number(kMemUsedAvgPerNode, "a memory size in GB"));
  RS_ASSIGN_OR_RETURN(v->mem_max_gb, row.Number(kMemUsedMaxPerNode, "a memory size in GB"));
  RS_ASSIGN_OR_RETURN(v->gpu_util, row.Number(kAccUtilization, "a percentage from 0 to 100"));
  RS_ASSIGN_OR_RETURN(v->gpu_mem_mib, row.Number(kAccMemUsed, "a GPU memory size"));
  if (v->gpu_util && *v->gpu_util > 100) {
    return Status::BadInput(fmt::format("field {}: expected a percentage from 0 to 100, got {}",
                                        row.Name(kAccUtilization),
                                        Quote(row.Text(kAccUtilization))));
  }
  // Within the plausible ranges (core/plausible.h), so the sums and conversions below cannot
  // overflow: a duration of 1e300 is a malformed row, not a job.
  auto check = [&](Column c, Plausible kind, const std::optional<double>& value, double unit) {
    if (!value) return Status::Ok();
    return CheckPlausible(row.Name(c), kind, *value * unit, row.Text(c));
  };
  RS_RETURN_IF_ERROR(check(kDuration, Plausible::kDuration, v->duration_s, 1));
  RS_RETURN_IF_ERROR(check(kWalltime, Plausible::kTimeLimit, v->walltime_s, 1));
  RS_RETURN_IF_ERROR(check(kCpuLoadAvg, Plausible::kCpus, v->load, 1));
  RS_RETURN_IF_ERROR(check(kMemUsedAvgPerNode, Plausible::kMemoryBytes, v->mem_avg_gb, kGiB));
  RS_RETURN_IF_ERROR(check(kMemUsedMaxPerNode, Plausible::kMemoryBytes, v->mem_max_gb, kGiB));
  RS_RETURN_IF_ERROR(check(kAccMemUsed, Plausible::kMemoryBytes, v->gpu_mem_mib, kMiB));
  if (!row.Text(kStartTime).empty()) {
    auto t = ParseSlurmTimestamp(row.Text(kStartTime));
    if (!t.ok() || (*t && **t < 0)) {
      return Status::BadInput(
          fmt::format("field {}: expected Unix seconds or 2023-02-07T12:00:00, got {}",
                      row.Name(kStartTime), Quote(row.Text(kStartTime))));
    }
    if (*t && **t > kMaxPlausibleUnixTime) {
      return CheckPlausible(row.Name(kStartTime), Plausible::kUnixTime, static_cast<double>(**t),
                            row.Text(kStartTime));
    }
    if (*t && **t > 0) v->start = **t;  // ClusterCockpit writes 0 for "not known"
  }
  return Status::Ok();
}

// What the row says of the job's identity, request, allocation, times and state.
void FillJob(const RowReader& row, const RowValues& v, std::string state, JobRecord& job) {
  job.source = "clustercockpit";
  job.cluster = std::string(row.Text(kCluster));
  job.job_id = std::string(row.Text(kJobId));
  job.request.user = std::string(row.Text(kUser));
  job.request.account = std::string(row.Text(kProject));
  job.request.job_name = std::string(row.Text(kJobName));
  job.request.partition =
      std::string(row.Text(kPartition).empty() ? row.Text(kSubcluster) : row.Text(kPartition));
  // The exports have no submit time (cc-backend stores 0): the start stands in for it, so the
  // queue wait of these jobs reads as zero.
  job.start_time = v.start;
  job.submit_time = v.start;
  if (v.duration_s) {
    job.usage.elapsed_s = *v.duration_s;
    if (v.start) job.end_time = *v.start + std::llround(*v.duration_s);
  }
  if (v.walltime_s && *v.walltime_s > 0) job.request.time_limit_s = std::llround(*v.walltime_s);
  if (v.nodes && *v.nodes >= 1) {
    job.request.nodes = *v.nodes;
    job.alloc.nodes = *v.nodes;
  }
  if (v.hwthreads && *v.hwthreads > 0) job.alloc.cpus = *v.hwthreads;
  if (v.gpus) {
    job.alloc.gpus = *v.gpus;
    job.request.gpus = job.alloc.gpus;
    if (*v.gpus > 0 && !row.Text(kSubcluster).empty()) {
      job.alloc.gpu_type = GpuTypeOfSubcluster(row.Text(kSubcluster));
      job.request.gpu_type = job.alloc.gpu_type;
    }
  }
  job.alloc.node_list = NodeList(row.Text(kNodeList));
  std::transform(state.begin(), state.end(), state.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  job.outcome.state = state;  // cc-backend's words are SLURM's in lower case
}

}  // namespace

// How the columns become a JobRecord. ClusterCockpit's metric footprints are statistics over
// the job's run: `_avg` a time average, `_max` a time maximum; per node for node metrics
// (cpu_load, mem_used: the node's whole /proc/meminfo and load average), per job over its GPUs
// for accelerator metrics.
Status ClusterCockpitParser::ParseRow(const std::vector<std::string>& fields,
                                      std::vector<JobRecord>& out) {
  if (fields.size() != header_names_.size()) {
    return Status::BadInput(fmt::format("expected {} fields as the header names, got {}",
                                        header_names_.size(), fields.size()));
  }
  RowReader row(fields, header_names_, positions_);
  if (row.Text(kJobId).empty()) {
    return Status::BadInput(fmt::format("field {}: expected a job id, got ''", row.Name(kJobId)));
  }
  RowValues v;
  RS_RETURN_IF_ERROR(ReadValues(row, &v));

  // Running jobs have no final usage yet. The 2020 schema's is_running flag is also set on
  // rows that already carry a full duration (the Emmy/Woody export: 2,721 such rows, whose
  // times cannot all be running at any one moment); those are finished jobs and are kept.
  std::string state = Lower(row.Text(kJobState));
  if (state == "running") {
    ++running_rows_;
    return Status::Ok();
  }
  std::string_view is_running = row.Text(kIsRunning);
  if (!is_running.empty() && is_running != "0" && is_running != "1" && is_running != "true" &&
      is_running != "false") {
    return Status::BadInput(
        fmt::format("field {}: expected 0 or 1, got {}", row.Name(kIsRunning), Quote(is_running)));
  }
  if (is_running == "1" || is_running == "true") {
    if (!v.duration_s || *v.duration_s <= 0) {
      ++running_rows_;
      return Status::Ok();
    }
    ++running_with_duration_;
  }
  if (!std::all_of(state.begin(), state.end(),
                   [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
    return Status::BadInput(fmt::format("field {}: expected a job state like completed, got {}",
                                        row.Name(kJobState), Quote(row.Text(kJobState))));
  }
  JobRecord& job = out.emplace_back();
  FillJob(row, v, state, job);
  std::optional<int> node_count;
  if (v.nodes && *v.nodes >= 1) node_count = *v.nodes;

  // Node-level metrics of a job that shared its nodes describe every job on them (two jobs on
  // one Alex node report the same load and memory), so they say nothing about this job.
  std::string_view shared = row.Text(kShared);
  bool whole_nodes = shared.empty() || Lower(shared) == "none";
  if (!whole_nodes && (v.load || v.mem_avg_gb || v.mem_max_gb)) ++shared_node_rows_;
  if (whole_nodes && node_count) {
    // The load average counts busy hardware threads per node (cluster.json: scope node,
    // peak = cores per node); over the run it approximates CPU time, at most the threads'.
    if (v.load && *v.load == 0) ++load_not_measured_;
    if (v.load && *v.load > 0 && v.duration_s) {
      double cpu_s = *v.load * *node_count * *v.duration_s;
      if (job.alloc.cpus) cpu_s = std::min(cpu_s, *job.alloc.cpus * *v.duration_s);
      job.usage.cpu_time_s = cpu_s;
    }
    // mem_used is per node and includes the operating system; 0 means no sample reached
    // the database. GB are read as GiB (the collectors read /proc/meminfo, in KiB).
    auto bytes = [&](double per_node_gb) {
      return static_cast<int64_t>(std::llround(per_node_gb * *node_count * kGiB));
    };
    if (v.mem_max_gb) {
      if (*v.mem_max_gb > 0) {
        job.usage.peak_rss_bytes = bytes(*v.mem_max_gb);
      } else {
        ++memory_not_measured_;
      }
    }
    if (v.mem_avg_gb) {
      if (*v.mem_avg_gb > 0) {
        job.usage.avg_rss_bytes = bytes(*v.mem_avg_gb);
      } else if (!v.mem_max_gb) {
        ++memory_not_measured_;
      }
    }
  }
  // GPU metrics are the job's own GPUs. acc_mem_used_avg_sum is the time-averaged used memory
  // summed over the job's GPUs, in MiB although cluster.json says GB (an 8-GPU a100m80 job
  // reaches 640,864; read as MiB no job of the Alex export exceeds its GPUs' memory, read as
  // decimal MB or as GB many do). An average is all the exports keep: it stands in for the
  // peak, which it can only under-estimate.
  if (!v.gpus || *v.gpus > 0) {
    if (v.gpu_util) job.usage.gpu_util_pct = *v.gpu_util;
    if (v.gpu_mem_mib) {
      job.usage.peak_gpu_memory_bytes = static_cast<int64_t>(std::llround(*v.gpu_mem_mib * kMiB));
    }
  }
  return Status::Ok();
}

}  // namespace rightsize

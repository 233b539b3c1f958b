// ClusterCockpitParser: job tables exported from ClusterCockpit (cc-backend's `job` table and
// the older ClusterCockpit schema) as CSV, with the jobs' measured usage.
//
// CSV as RFC 4180 writes it (quoted fields, commas and newlines inside quotes), tokenised by
// libcsv. The first record is the header; columns are found by name in any order and unknown
// ones are ignored. Both known header variants are read: cc-backend's (hpc_user, job_state,
// num_hwthreads, num_acc, mem_used_avg_GB_node, cpu_load_avg, acc_utilization_avg_pct,
// acc_mem_used_avg_sum, …) and the 2020 schema's (user, is_running, mem_used_max_GB,
// load_avg, …). How each column becomes a JobRecord field is documented next to
// `ClusterCockpitParser::ParseRow` and in README.md; the main rules:
//
//  - The exports have no submit time: submit_time is set to start_time (no queue wait).
//  - Usage metrics are ClusterCockpit job footprints: averages (or maxima) over the job's
//    run, per node or per GPU. Node-level metrics (CPU load, memory) of a job that shared its
//    nodes (`shared` other than "none") describe the whole node, so they are left unknown.
//  - A host metric of 0 (memory, load) means "not measured" and is left unknown; a GPU
//    metric of 0 is a real measurement (an idle GPU).
//  - Rows of running jobs (job_state "running", or is_running 1 with no duration) are skipped
//    and counted in notes(); is_running 1 with a duration is kept as a finished job.
//
// A malformed value is BadInput naming the column ("field duration_s: expected a number of
// seconds, got 'x'"); the row is skipped and the next one is read. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingest/ingest.h"

namespace rightsize {

class CsvRecords;  // libcsv, behind the .cc

class ClusterCockpitParser final : public RecordParser {
 public:
  // A quoted field may span lines (job scripts). A record longer than this (an unclosed
  // quote, most likely) is reported and dropped, and reading starts afresh on the next line:
  // memory stays bounded, as for over-long lines.
  static constexpr size_t kMaxRecordBytes = 1 << 20;

  ClusterCockpitParser();
  ~ClusterCockpitParser() override;
  ClusterCockpitParser(const ClusterCockpitParser&) = delete;
  ClusterCockpitParser& operator=(const ClusterCockpitParser&) = delete;

  Status ParseLine(std::string_view line, std::vector<JobRecord>& out) override;
  Status Finish(std::vector<JobRecord>& out) override;
  int64_t non_record_lines() const override { return non_record_lines_; }
  std::vector<std::string> notes() const override;

  // Rows left out on purpose: jobs still running.
  int64_t running_rows() const { return running_rows_; }

 private:
  Status ParseRecord(const std::vector<std::string>& fields, std::vector<JobRecord>& out);
  Status SetHeader(const std::vector<std::string>& names);
  Status ParseRow(const std::vector<std::string>& fields, std::vector<JobRecord>& out);

  std::unique_ptr<CsvRecords> csv_;
  std::vector<std::string> header_names_;  // as written, for error messages
  std::vector<int> positions_;             // per known column: its field position (or -1)
  bool have_header_ = false;
  int64_t non_record_lines_ = 0;
  int64_t running_rows_ = 0;
  int64_t running_with_duration_ = 0;  // is_running = 1 but with a duration: kept
  int64_t shared_node_rows_ = 0;
  int64_t load_not_measured_ = 0;
  int64_t memory_not_measured_ = 0;
};

}  // namespace rightsize

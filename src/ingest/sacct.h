// SacctParser: `sacct --parsable2` (-P) output of SLURM 2.x to 23.x.
//
// With or without a header line, columns in any order (a headerless file is read with the
// columns given, or with kSacctFormat). The delimiter is '|' unless given; it can be any string
// (`sacct --delimiter`), and with no header it is detected from the first line. Lines starting
// with '#' are comments.
//
// Steps (123.batch, 123.extern, 123.0) are merged into their job: the job's peak memory is the
// largest step peak (MaxRSS × NTasks), its CPU time the job line's TotalCPU or, when larger, the
// sum over steps; GPU memory and utilisation come from the steps' TRESUsageInMax; I/O from
// TRESUsageIn/OutTot; energy from the job line's ConsumedEnergyRaw (joules; 0 or empty is
// unknown, as SLURM writes without an energy plugin), else the largest step's. Steps follow their
// job in sacct's output; up to kOpenJobs jobs are held open for steps that come later. Not
// thread-safe.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingest/ingest.h"

namespace rightsize {

// The columns `rightsize ingest slurm` asks sacct for, and the format a headerless file is
// assumed to have (`rightsize ingest sacct --print-format`).
extern const char* const kSacctFormat;

// A sacct State as the store keeps it: "CANCELLED by 10304007" -> "CANCELLED", "CANCELLED+"
// (truncated display) -> "CANCELLED".
std::string NormalizeState(std::string_view state);

struct SacctOptions {
  std::string delimiter;             // "" = '|' or detected from the first line
  std::vector<std::string> columns;  // for input without a header; empty = kSacctFormat
};

class SacctParser final : public RecordParser {
 public:
  // sacct prints a job's steps right after it; the window only forgives small reorderings.
  static constexpr size_t kOpenJobs = 256;

  explicit SacctParser(SacctOptions options);
  Status ParseLine(std::string_view line, std::vector<JobRecord>& out) override;
  Status Finish(std::vector<JobRecord>& out) override;
  int64_t non_record_lines() const override { return non_record_lines_; }

 private:
  // What the steps of one job add up to while the job is open.
  struct OpenJob {
    JobRecord job;
    bool have_job_line = false;
    double steps_cpu_s = 0;
    bool any_step_cpu = false;
    std::optional<int64_t> steps_peak_rss;
    std::optional<int64_t> steps_avg_rss;
    std::optional<int64_t> steps_gpu_mem;
    std::optional<double> steps_gpu_util;
    std::optional<int64_t> steps_read, steps_write;
    std::optional<double> steps_energy_j;
    std::string batch_state;
    std::optional<int> batch_exit, batch_signal;
  };

  Status SetColumns(const std::vector<std::string>& names);
  Status ParseRow(const std::vector<std::string_view>& fields, std::vector<JobRecord>& out);
  OpenJob& Open(const std::string& key, std::vector<JobRecord>& out);
  static JobRecord Close(OpenJob&& open);

  SacctOptions options_;
  bool columns_set_ = false;
  // Headerless, with kSacctFormat: a line one field short is the format before
  // ConsumedEnergyRaw was added to it, read with the energy unknown.
  bool builtin_columns_ = false;
  std::vector<int> column_ids_;  // per field position: which known column (or -1)
  std::vector<std::string_view> fields_;
  std::unordered_map<std::string, OpenJob> open_;
  std::deque<std::string> open_order_;
  int64_t non_record_lines_ = 0;
};

// The column names of a --columns list as sacct --format writes it ("JobID,State,Elapsed");
// empty items are dropped.
std::vector<std::string> SacctColumns(std::string_view list);

}  // namespace rightsize

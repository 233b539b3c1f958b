// Ingest: turns accounting files into job records in the store.
//
// A RecordParser reads one format line by line (sacct -P output, SWF traces, ClusterCockpit
// CSV); IngestFile drives it over a LineReader and writes records to the Store in batches, one
// transaction per batch (per connection, where a PostgreSQL bulk load splits it), while the next
// batch is being parsed. A malformed line never stops the
// batch: it is reported as "FILE:LINE: field NAME: expected …, got …", skipped and counted,
// unless `strict` is set. Parsers range-check their fields (core/plausible.h); every record is
// checked once more with CheckJobRecord before it is stored, and one that fails is skipped and
// counted the same way ("FILE:LINE: job 12: field usage.cpu_time_s: …"). What was committed stays
// committed if the process is killed mid-way.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "store/store.h"

namespace rightsize {

class RecordParser {
 public:
  virtual ~RecordParser() = default;
  // Consumes one line (without its newline). Appends the records it completes to `out`.
  // BadInput for a malformed line; the message names the field, not the file or line.
  virtual Status ParseLine(std::string_view line, std::vector<JobRecord>& out) = 0;
  // At the end of the input: appends records still held back (sacct merges steps).
  virtual Status Finish(std::vector<JobRecord>& out) = 0;
  // Lines that were understood but hold no job (headers, comments, blank lines).
  virtual int64_t non_record_lines() const = 0;
  // Metadata found in the input (SWF header comments), for the store's cluster_meta.
  virtual std::map<std::string, std::string> metadata() const { return {}; }
  // What the user should know about the input once it is read: rows left out on purpose,
  // values left unknown ("12 rows of running jobs skipped (not finished)").
  virtual std::vector<std::string> notes() const { return {}; }
};

struct IngestError {
  std::string file;
  int64_t line = 0;
  std::string message;  // "field MaxRSS: expected …, got …"
  std::string ToString() const;
};

struct IngestOptions {
  // Store every record under the `cluster` argument, even those that name their own.
  bool override_cluster = false;
  // An input with no job records is fine (sacct over a quiet window), not an error.
  bool allow_empty = false;
  bool strict = false;           // the first malformed line aborts (after what was committed)
  size_t batch_size = 10000;     // records per transaction
  size_t max_kept_errors = 100;  // errors kept for the summary; all are counted
  // Called after each batch and at the end (bytes consumed, total bytes or -1).
  std::function<void(int64_t, int64_t)> progress;
  // Called for each malformed line as it is found (e.g. to print it).
  std::function<void(const IngestError&)> on_error;
};

struct IngestStats {
  std::string file;
  std::string cluster;             // the cluster given for records that name none
  std::set<std::string> clusters;  // the clusters the records went to
  int64_t lines = 0;
  int64_t records = 0;              // job records produced (sacct: jobs after merging steps)
  int64_t stored = 0;               // records written (a job given twice counts twice)
  int64_t new_jobs = -1;            // of those, jobs the store did not hold before; -1 when unknown
  int64_t skipped = 0;              // malformed lines, and records with implausible values
  std::vector<IngestError> errors;  // the first max_kept_errors of them
  std::vector<std::string> notes;   // the parser's notes()
  double seconds = 0;
};

// Reads `path` ("-" for stdin) with `parser` and stores what it finds under `cluster` (records
// that name their own cluster keep it, unless options.override_cluster). Errors: IoError/BadInput
// for a file that cannot be read at all (missing, truncated gzip, binary, empty, no records) — the
// stats of what was stored before are still returned through `stats`.
Status IngestFile(const std::string& path, RecordParser& parser, Store& store,
                  const std::string& cluster, const IngestOptions& options, IngestStats* stats);

// Stores records read some other way than line by line (`ingest prometheus` answers its queries
// first, then stores), through the same batches and writer as IngestFile. `name` stands for the
// file in `stats`; lines = records. Records that name no cluster get `cluster`. Stats as for
// IngestFile; an empty `records` is BadInput unless options.allow_empty.
Status IngestRecords(const std::string& name, std::vector<JobRecord> records,
                     std::vector<std::string> notes, Store& store, const std::string& cluster,
                     const IngestOptions& options, IngestStats* stats);

// What one file's ingest did, as `ingest --json` lists it (file, clusters, lines, records,
// stored, new_jobs, skipped, errors, notes, seconds, error) and as the line `ingest` prints (with a
// line per note).
nlohmann::json IngestStatsJson(const IngestStats& stats, const Status& status);
std::string IngestSummaryText(const IngestStats& stats);

}  // namespace rightsize

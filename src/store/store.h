// Store: where job records and cluster metadata live.
//
// One interface, two backends: SQLite (the embedded default, one file) and PostgreSQL (many
// nodes, several server replicas); per-job samples optionally in a Prometheus-compatible TSDB.
// Callers only see this header and OpenStore(), so a new backend needs no caller changes. Writes
// are atomic per call: UpsertJobs either stores the whole batch or nothing, so a killed process
// never leaves half a batch and never loses what was committed. Re-storing a job (same cluster +
// job id) replaces it; it never duplicates. Usage measured once is not lost: a record that lacks a
// usage field keeps the stored one (when both describe the same run), a peak is the larger of the
// two, and the agent's record of a job the scheduler described (sacct, SWF) only adds usage to the
// scheduler's record.
//
// A Store object is not thread-safe: use one per thread (SQLite WAL lets several processes
// and connections read while one writes).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "core/telemetry.h"

namespace rightsize {

// A grid of time buckets over [from_ms, to_ms] (both ends included): bucket i holds the samples
// whose time is in [from_s + i * step_s, from_s + (i + 1) * step_s), the last one cut at to_ms.
// from_ms is from_s in milliseconds (truncated). step_s > 0.
struct BucketGrid {
  double from_s = 0;
  double step_s = 1;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  // The bucket of a sample at t_ms (in the window). Exact integer arithmetic when from_s and
  // step_s are whole milliseconds (so a sample on an edge starts the bucket on every store and
  // engine), the floating-point division otherwise.
  int64_t BucketOf(int64_t t_ms) const;
  // from_s and step_s are whole milliseconds: the edges are from_ms + i * step_ms.
  bool WholeMs() const;
  int64_t StepMs() const;
};

// One bucket's samples: their mean and their largest value. Buckets without samples are absent.
struct SampleBucket {
  int64_t index = 0;
  double mean = 0;
  double max = 0;
};

// Folds samples, oldest first, into a grid's buckets.
class BucketFolder {
 public:
  BucketFolder(const BucketGrid& grid, std::vector<SampleBucket>* out) : grid_(grid), out_(out) {}
  void Add(const Sample& s);
  void Finish();  // the last bucket

 private:
  BucketGrid grid_;
  std::vector<SampleBucket>* out_;
  int64_t bucket_ = 0, n_ = 0;
  double sum_ = 0, max_ = 0;
};

// Which jobs a scan returns. Unset fields do not filter.
struct JobFilter {
  std::string cluster;
  std::optional<int64_t> ended_since;  // end_time >= this (Unix seconds)
  std::optional<int64_t> ended_until;  // end_time < this
  std::string user;
  std::string account;
  std::string partition;
  std::string job_name;
  // Fill only what sums need (ids, times, request, allocation, usage, state) and leave the
  // descriptive fields unset (source, group, QOS, memory scope, nodes, node list, I/O, exit
  // code, signal): a 300k-job report reads a third fewer columns.
  bool lean = false;
  // Only jobs in this outcome state ("RUNNING", "FAILED", …).
  std::string state;
  // Only jobs whose CPU or memory efficiency (used / allocated) is known and below this.
  std::optional<double> efficiency_below;
  // ScanJobs only: at most this many finished jobs, the newest by end time first (0 = every
  // job, in no particular order).
  int64_t newest = 0;
};

// A page of ListJobs: newest first (jobs without an end time, i.e. running, first), at most
// `limit`, after the job the previous page ended with (its cursor).
struct JobPage {
  int limit = 100;
  std::optional<std::string> after;  // opaque cursor from the previous JobList
};
struct JobList {
  std::vector<JobRecord> jobs;
  std::optional<std::string> next;  // cursor of the next page; nullopt on the last page
};

// A prediction made for a job at submission (rightsize.prediction/v1 JSON), kept with it.
struct StoredPrediction {
  std::string cluster;
  std::string job_id;
  int64_t created_at = 0;
  std::string document;
};

// The code a job ran, as read at submission (or at ingest, from the job's saved script): which
// program, a hash of its code, and what the analysis read (code/report.h's FactsJson, kept as
// JSON so facts added to the analysis are stored without a schema change) with the estimate.
struct StoredJobCode {
  std::string cluster;
  std::string job_id;
  int64_t created_at = 0;  // Unix seconds
  std::string code_hash;   // of the entry program and the local files it read; "" unknown
  std::string program;     // the entry file ("train.py"), relative to the code folder
  std::string facts;       // FactsJson
  std::string estimate;    // the estimate's document ("" when the code gave none)
};

// A trained model set of one cluster (the predictor's serialised form; see model/).
struct StoredModel {
  std::string cluster;
  int64_t version = 0;
  int64_t trained_at = 0;  // Unix seconds
  int64_t jobs = 0;        // jobs it was trained on
  std::string blob;
};

// The diagnosis of a failed job (`rightsize diagnose`), kept with the job.
struct StoredDiagnosis {
  std::string cluster;
  std::string job_id;
  int64_t created_at = 0;  // Unix seconds
  std::string cls;         // "host_oom", …
  double confidence = 0;
  std::string document;  // the rightsize.diagnosis/v1 JSON
};

class Store {
 public:
  virtual ~Store() = default;

  // Inserts or replaces the jobs (merging usage as the header says), in one transaction (during
  // a bulk load, PostgreSQL splits a batch by job over its connections: one transaction each).
  virtual Status UpsertJobs(std::span<const JobRecord> jobs) = 0;

  // Calls `fn` for every matching job, in no particular order (callers that need one sort:
  // an ORDER BY cost a 300k-job report a third of its time). Stops early when `fn` returns
  // false.
  virtual Status ScanJobs(const JobFilter& filter,
                          const std::function<bool(const JobRecord&)>& fn) = 0;

  // The job with this id; with an empty cluster, the most recently ended match in any
  // cluster. NotFound when there is none.
  virtual StatusOr<JobRecord> GetJob(const std::string& cluster, const std::string& job_id) = 0;

  virtual StatusOr<int64_t> CountJobs(const JobFilter& filter) = 0;

  // One page of matching jobs, newest first (see JobPage). InvalidArgument for a bad cursor.
  virtual StatusOr<JobList> ListJobs(const JobFilter& filter, const JobPage& page) = 0;

  // The names of the clusters that have jobs, sorted.
  virtual StatusOr<std::vector<std::string>> Clusters() = 0;

  // Free-form cluster metadata (SWF header lines, node types, …); Put replaces a key.
  virtual Status PutClusterMeta(const std::string& cluster,
                                const std::map<std::string, std::string>& meta) = 0;
  virtual StatusOr<std::map<std::string, std::string>> GetClusterMeta(
      const std::string& cluster) = 0;

  // Whether a finished job or a job's code may have been written since the last call on this
  // object: the contract is store/changes.h's. A backend that cannot tell answers true.
  virtual bool HistoryChangedSinceLastAsked() { return true; }

  // Bulk loading: while on, the secondary indexes (a user's and a program's past, which
  // `predict` reads) are dropped, and turning it off rebuilds them in one sorted pass. Keeping
  // them up to date row by row made a 3M-record ingest 10x slower. If the process dies in
  // between, the next OpenStore rebuilds them. A no-op where a backend has no such indexes.
  virtual Status SetBulkLoad(bool on) {
    (void)on;
    return Status::Ok();
  }

  // Stores a new version of the cluster's model and returns its number (1, 2, …); the last
  // few versions are kept.
  virtual StatusOr<int64_t> PutModel(const std::string& cluster, int64_t trained_at, int64_t jobs,
                                     const std::string& blob) = 0;
  // The newest model of the cluster (version 0) or the given version; NotFound if none.
  virtual StatusOr<StoredModel> GetModel(const std::string& cluster, int64_t version) = 0;
  // The newest model's version, without reading the model; NotFound if none.
  virtual StatusOr<int64_t> LatestModelVersion(const std::string& cluster) = 0;

  // Stores the diagnosis of a job (the job need not be stored yet). It replaces a stored one
  // only if that one's class is "unknown", or if it names a class with at least its confidence:
  // a weaker diagnosis never replaces a stronger one (OK, nothing written).
  virtual Status PutDiagnosis(const StoredDiagnosis& diagnosis) = 0;
  // The job's diagnosis; NotFound if it has none.
  virtual StatusOr<StoredDiagnosis> GetDiagnosis(const std::string& cluster,
                                                 const std::string& job_id) = 0;

  // Stores an agent's telemetry batch in one transaction: job records (a record from another
  // source, e.g. sacct, is never replaced by the agent's), samples and stack counts. Returns
  // false and stores nothing when `seq` is not above the last one stored for `agent` (a
  // replayed or reordered batch).
  virtual StatusOr<bool> WriteTelemetry(const std::string& agent, int64_t seq,
                                        std::span<const JobTelemetry> jobs) = 0;
  // Several agents' batches in ONE transaction (the server's group commit: one commit for
  // every batch that arrived meanwhile, instead of one each). Element i is false when batch i
  // was a replay (it stores nothing); an error stores none of them.
  struct TelemetryWrite {
    std::string agent;
    int64_t seq = 0;
    std::span<const JobTelemetry> jobs;
  };
  virtual StatusOr<std::vector<bool>> WriteTelemetryGroup(
      std::span<const TelemetryWrite> writes) = 0;
  // The last `seq` stored for `agent` (0 when none): what a refused agent resyncs above.
  virtual StatusOr<int64_t> LastTelemetrySeq(const std::string& agent) = 0;
  // Calls `fn` for the job's samples of `metric` with from_ms <= t_ms <= to_ms, oldest first.
  virtual Status ReadSamples(const std::string& cluster, const std::string& job_id,
                             const std::string& metric, int64_t from_ms, int64_t to_ms,
                             const std::function<void(const Sample&)>& fn) = 0;
  // The samples of each of `metrics` in `grid`'s buckets (out[i] for metrics[i], buckets in
  // order): what a chart draws. The default reads each metric with ReadSamples and folds it
  // (BucketFolder); the TSDB store lets the engine aggregate (docs/scale-tsdb.md).
  virtual Status ReadBuckets(const std::string& cluster, const std::string& job_id,
                             const std::vector<std::string>& metrics, const BucketGrid& grid,
                             std::vector<std::vector<SampleBucket>>* out);
  // The metrics the job has samples of, sorted.
  virtual StatusOr<std::vector<std::string>> SampleMetrics(const std::string& cluster,
                                                           const std::string& job_id) = 0;
  // The job's folded stacks with their sample counts (empty when none).
  virtual StatusOr<std::map<std::string, int64_t>> GetStacks(const std::string& cluster,
                                                             const std::string& job_id) = 0;

  // Stores (replacing) the code a job ran; the job need not be stored yet.
  virtual Status PutJobCode(const StoredJobCode& code) = 0;
  // NotFound when none was stored for the job.
  virtual StatusOr<StoredJobCode> GetJobCode(const std::string& cluster,
                                             const std::string& job_id) = 0;
  // Calls `fn` for every job of `cluster` with stored code, in no particular order; stops
  // early when `fn` returns false.
  virtual Status ScanJobCode(const std::string& cluster,
                             const std::function<bool(const StoredJobCode&)>& fn) = 0;

  // Replicas of `rightsize serve` that share one store elect one of them for a role ("train",
  // "follow"): true while this Store object holds the role, false while another does. The role
  // is released when the Store is destroyed or its process dies, so another replica takes it at
  // its next try. PostgreSQL: a session advisory lock; SQLite: an exclusive lock (flock) on a
  // file beside the database (an in-memory store always leads). Calling again while holding
  // the role returns true.
  virtual StatusOr<bool> TryLead(const std::string& role) = 0;

  virtual Status PutPrediction(const StoredPrediction& prediction) = 0;
  // NotFound when none was stored for the job.
  virtual StatusOr<StoredPrediction> GetPrediction(const std::string& cluster,
                                                   const std::string& job_id) = 0;
};

// Where a store keeps what is not in `location`.
struct StoreOptions {
  // Per-job samples (WriteTelemetry's samples, ReadSamples, SampleMetrics) go to a
  // Prometheus-compatible TSDB instead of the store's own tables: sent by Prometheus remote
  // write to `tsdb_write_url` (e.g. http://vm:8428/api/v1/write) and read back with PromQL
  // from `tsdb_query_url` (the base of /api/v1/query, e.g. http://vm:8428). Both empty: the
  // samples stay in the store (the default, no configuration).
  std::string tsdb_write_url;
  std::string tsdb_query_url;
};

// Opens (creating and migrating as needed) the store at `location`: a file path for SQLite,
// a "postgresql://" (or "postgres://") URL for PostgreSQL.
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& location,
                                           const StoreOptions& options = {});

// The default store file: $RIGHTSIZE_DB, else $XDG_DATA_HOME/rightsize/rightsize.db, else
// ~/.local/share/rightsize/rightsize.db. `env` looks up an environment variable (so tests
// need not touch the process environment).
std::string DefaultStorePath(const std::function<std::optional<std::string>(const char*)>& env);

}  // namespace rightsize

// Follower: SLURM's accounting into the store, and the failed jobs diagnosed as they end.
//
// Run reads the partitions' nodes once (`sinfo`, under the cluster's name from `scontrol show
// config` or the one given) and ingests `sacct -P` over [from, to] like `rightsize ingest
// sacct`. Following, it makes a pass every interval over what ended since the last (each
// window reaching back by the overlap, as slurmdbd records ends late; nothing is stored twice)
// and after each pass attaches the job_submit.lua hook's record (the job's admin comment) as
// the job's prediction and diagnoses each newly ended FAILED, OUT_OF_MEMORY, TIMEOUT and
// NODE_FAIL job: its output file (the hook's out= record, `scontrol show job`, the log folder,
// slurm-N.out in its working directory), its script while slurmctld still has it, and what the
// agents stored. A diagnosis is stored with the job, once.
//
// Nothing is printed: what happens is told to FollowerEvents, on the calling thread, as it
// happens. A failing pass (sacct down, slurmdbd busy) is reported and retried at the next one.
// One Follower runs on one thread at a time; `stop` may be set from any thread or a signal
// handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "ingest/ingest.h"
#include "ingest/sinfo.h"
#include "report/prices.h"
#include "store/store.h"

namespace rightsize::slurm {

struct FollowerOptions {
  std::string sacct = "sacct", scontrol = "scontrol", sinfo = "sinfo";  // looked up in PATH
  std::string log_dir;  // where the jobs' slurm-N.out are when nothing else says
  // Stored with every job and with the partitions. Empty: the jobs keep sacct's Cluster column
  // (else "default") and the partitions go to scontrol's ClusterName.
  std::string cluster;
  bool follow = false;   // keep going until `stop` or `passes`, diagnosing the failed jobs
  bool diagnose = true;  // following: diagnose the failed jobs
  bool strict = false;   // a malformed sacct line fails the pass
  int interval_s = 60, overlap_s = 600;
  int passes = 0;  // following: stop after this many passes; 0 = never
  // The GPUs' memory by model, for a diagnosis's GPU memory capacity; nullptr: unknown.
  const PriceTable* prices = nullptr;
  // How the follower's own store connection (the diagnoses') is opened: the samples' TSDB.
  StoreOptions store;
};

// A diagnosis made and stored.
struct DiagnosedJob {
  std::string job_id;
  std::string state;  // as sacct says it ("FAILED", "CANCELLED by 0")
  std::string cls;    // FailureClassName: "host_oom", …
  double confidence = 0;
  std::string log;  // the job's output file read; "" when none was found
  std::string fix;  // the first fix's text; "" when none
};

// A diagnosis as the follower's JSON line says it, and as its text line.
nlohmann::json DiagnosedJobJson(const DiagnosedJob& d);
std::string DiagnosedJobText(const DiagnosedJob& d);

// Where SLURM job `job_id`'s output file is, found as the follower finds it: sacct's row of
// the job (its working directory, the hook's out= record), `scontrol show job` while slurmctld
// knows the job, `known` (files an earlier diagnosis read), the log folder. "" when none is
// found; sacct or scontrol failing (absent, slurmdbd down) only narrows the search.
struct OutputSearch {
  std::string sacct = "sacct", scontrol = "scontrol";  // "" = not asked
  std::string log_dir;
  std::vector<std::string> known;
};
std::string FindSlurmJobOutput(const std::string& job_id, const OutputSearch& search);

// What a Follower tells as it goes. The defaults ignore it.
class FollowerEvents {
 public:
  virtual ~FollowerEvents() = default;
  // The partitions read from sinfo and stored as `cluster`'s metadata.
  virtual void OnPartitions(const std::string& /*cluster*/,
                            const std::vector<PartitionShape>& /*partitions*/) {}
  // A pass ingests sacct's output, saved in `file`: each malformed line as it is found,
  // progress, then what was stored and the ingest's status.
  virtual void OnIngestStart(const std::string& /*file*/) {}
  virtual void OnMalformedLine(const IngestError& /*error*/) {}
  virtual void OnIngestProgress(int64_t /*done_bytes*/, int64_t /*total_bytes*/) {}
  virtual void OnIngested(const IngestStats& /*stats*/, const Status& /*status*/) {}
  virtual void OnDiagnosed(const DiagnosedJob& /*job*/) {}
  // A following pass is over (with its predictions and diagnoses).
  virtual void OnPassEnd() {}
  // Something is missing but the follower goes on ("the partitions were not stored").
  virtual void OnWarning(const std::string& /*message*/) {}
  // A failure: sacct could not run, a job's diagnosis or prediction could not be stored, the
  // store could not be opened again (which ends Run).
  virtual void OnError(const Status& /*status*/) {}
};

struct FinishedJob;  // an ended job as sacct lists it (follower.cc)

// The store the jobs and partitions go to, asked for when there is something to store (so a
// run that stores nothing opens none). An error is reported and fails what needed the store.
using StoreSource = std::function<StatusOr<Store*>()>;

class Follower {
 public:
  // `store` takes the jobs and the partitions. After each following pass the store at
  // `store_path` is opened again for the predictions and diagnoses, and closed: a read left
  // open on one connection would keep an old snapshot and make the next pass's write fail with
  // "database is locked" while another process (the server) writes.
  Follower(StoreSource store, std::string store_path, FollowerOptions options,
           FollowerEvents& events);

  // Returns the last pass's status (reported already through OnIngested or OnError); OK when
  // following stopped at `stop`. `to` is used only when not following (a pass ends "now").
  Status Run(int64_t from, int64_t to, const std::atomic<bool>& stop);

 private:
  void ReadPartitions();
  Status Pass(int64_t from, int64_t to);
  void AfterPass(Store& store, int64_t from, int64_t to);
  void AttachPrediction(Store& store, const FinishedJob& j, const JobRecord& job);
  void DiagnoseJob(Store& store, const FinishedJob& j, const JobRecord& job);

  StoreSource store_;
  std::string store_path_;
  FollowerOptions options_;
  FollowerEvents& events_;
  std::set<std::string> diagnosed_;  // job ids diagnosed (or found diagnosed) in this run
};

}  // namespace rightsize::slurm

// Shipper: sends the agent's telemetry to `rightsize serve` (POST /api/v1/telemetry).
//
// The sampling loop hands each batch to Enqueue() and goes on; a thread of the shipper posts
// them in order, gzip-compressed, with the agent's token. A batch's sequence number is fixed
// when it is made (Unix milliseconds, strictly increasing), so a batch retried after a timeout
// that had in fact arrived is answered 409 and dropped, never stored twice. Any other 409 (the
// server's last seq for this agent is above the batch's: a forged batch, a second agent of the
// same name, a clock set back; or the batch is numbered too far ahead of the server's clock) is
// logged with the server's reason and resynced: the batch and those queued behind it are
// renumbered above the last seq the server names and sent again, so none is lost. When the server
// is down or answers 5xx the batch stays queued and is retried with backoff; the queue holds at
// most `max_queued` batches (the oldest dropped and counted), so a long outage costs bounded
// memory. A 4xx other than 409 (bad token, a batch the server refuses) drops the batch with a
// log line: retrying it would fail the same way. Thread-safe.
//
// With a spool folder, every batch is also a file there (`<seq>.json`, written to a temporary
// name and renamed, so a crash leaves whole files only) until the server has it; a restarted
// agent sends what the last one left, in order, before its own batches. The spool is capped in
// bytes (the oldest batches dropped and counted), so a full disk or a week-long outage cannot
// grow it without bound. A spool that cannot be written (disk full, permissions) is counted and
// the batch stays in memory.
//
// Several servers (replicas of `rightsize serve` on one store, docs/scale-replicas.md): the
// batches go to one at a time; when it cannot be reached or answers 5xx, the same batch goes at
// once to the next one, in turn, and the backoff starts only once every server has failed. The
// queue, the spool and the numbering are the agent's, not a server's: the replicas share the
// store's last seq of each agent, so a batch a killed replica had stored is answered 409 by the
// next one and dropped, and one it had not is stored there, once.
//
// With a TSDB (tsdb_write_url, `agent --tsdb-write-url`), a batch's samples go to it by
// Prometheus remote write (remote_write/remote_write.h, the server's own encoding) and the batch
// posted to the server has none (job records, stacks, diagnoses, seq). The samples are written
// first, retried with the same backoff as the server's batches; the server's batch waits until
// the TSDB has accepted them, and is posted once only after it has (never again to the TSDB:
// samples once). In the spool such a batch is two files, `<seq>.rw` (its remote-write
// requests) written before `<seq>.json`, and the .rw file goes once the TSDB has it. A TSDB
// that refuses samples for good (a 4xx other than 429) drops them with a log line and the
// server's batch goes on; they are not counted as delivered. The server's batch then leaves out
// the running jobs whose record it already has (agent/sent_records.h: each is sent again at
// least once a minute), and a batch left empty is not posted: the server's work no longer grows
// with the batches, only with what changes (new and ended jobs, stacks, diagnoses).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/sent_records.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/telemetry.h"

namespace rightsize {

// The rightsize.telemetry/v1 document of one batch (docs/api.md). `energy_before_j`, when not
// empty, is parallel to `jobs`: each job's cumulative *_energy_j values at the end of its
// previous batch (its entry's "energy_before_j", left out when empty).
nlohmann::json TelemetryBatchJson(
    const std::string& agent, int64_t seq, const std::vector<JobTelemetry>& jobs,
    const std::vector<std::map<std::string, double>>& energy_before_j = {});

struct ShipperOptions {
  std::string url;  // "http://host:8080" or "https://…"
  // Other replicas of the same server (same store), tried in turn after `url` fails.
  std::vector<std::string> more_urls;
  std::string token;  // agent token ("" for an open server)
  std::string agent;  // this agent's name (the node's host name)
  size_t max_queued = 720;
  double timeout_s = 10;
  std::string tsdb_write_url;  // "" = samples go to the server in its batches
  std::string spool_dir;       // "" = memory only
  int64_t max_spool_bytes = int64_t{256} << 20;
};

class Shipper {
 public:
  // InvalidArgument for a bad URL; IoError when the spool folder cannot be made or read.
  static StatusOr<std::unique_ptr<Shipper>> Create(ShipperOptions options);
  ~Shipper();  // stops the thread; batches still queued are dropped (counted)
  Shipper(const Shipper&) = delete;
  Shipper& operator=(const Shipper&) = delete;

  void Enqueue(std::vector<JobTelemetry> jobs, int64_t now_ms);

  struct Stats {
    int64_t sent = 0, failed_attempts = 0, dropped = 0, queued = 0;
    int64_t recovered = 0;     // batches a previous agent left in the spool
    int64_t spool_errors = 0;  // batches that could not be written to the spool
    int64_t resynced = 0;      // 409s answered by renumbering above the server's last seq
    int64_t failovers = 0;     // moves to the next server after one failed
    // Samples in the batches made (Enqueue) and in those the server has taken.
    int64_t samples_made = 0, samples_delivered = 0;
    std::string last_error;
  };
  Stats stats() const;
  // Waits until the queue is empty or `timeout_s` passed (tests; shutdown). True when empty.
  bool Flush(double timeout_s);

 private:
  explicit Shipper(ShipperOptions options);
  void Run();
  struct Batch {
    int64_t seq = 0;
    std::string body;  // JSON
    std::string file;  // its spool file ("" when not spooled)
    int64_t samples = 0;
    // With a TSDB: the remote-write requests of its samples (none once the TSDB has them) and
    // their spool file.
    std::vector<std::string> remote_writes;
    std::string rw_file;
    int64_t rw_bytes = 0;
    // False when the server has every record of the batch already (agent/sent_records.h): its
    // samples go to the TSDB and nothing to the server. A batch from the spool is posted.
    bool post = true;
  };

  // What a 409 answer means for `sent` (the queue's front): stored before (done), renumbered
  // with the queue behind it (send again now), or nothing to do yet (retry later).
  enum class Refusal { kStoredBefore, kRenumbered, kWait };
  Refusal Resync(const Batch& sent, const std::string& answer) REQUIRES(mu_);
  void Renumber(Batch& batch, int64_t seq) REQUIRES(mu_);
  // Loads what a previous agent left in the spool.
  Status LoadSpool() REQUIRES(mu_);
  void Spool(Batch& batch) REQUIRES(mu_);
  void Forget(const Batch& batch) REQUIRES(mu_);
  // Once the TSDB has the batch's samples: their requests and spool file go.
  void ForgetSamples(Batch& batch) REQUIRES(mu_);
  void TrimSpool() REQUIRES(mu_);
  ShipperOptions options_;
  std::string scheme_host_port_;
  mutable Mutex mu_;
  CondVar cv_;
  int64_t spool_bytes_ GUARDED_BY(mu_) = 0;
  std::deque<Batch> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  bool in_flight_ GUARDED_BY(mu_) = false;
  int64_t last_seq_ GUARDED_BY(mu_) = 0;
  // (cluster, job id) -> its *_energy_j values at the end of its last batch: what the next
  // batch says as energy_before_j (the server counts each batch's own rise, whichever replica
  // stores it). Dropped when the job ends; emptied beyond kMaxEnergyJobs (jobs never seen to end).
  static constexpr size_t kMaxEnergyJobs = 100'000;
  std::map<std::pair<std::string, std::string>, std::map<std::string, double>> energy_sent_
      GUARDED_BY(mu_);
  // With a TSDB: the job records the server has (a batch leaves out those that did not change).
  SentRecords sent_records_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace rightsize

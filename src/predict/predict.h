// The prediction service: one submission in (a job script as written, with sbatch's own
// options, the user, the cluster), what it will really use out — p10/p50/p90 per resource, the
// risk that its request is too small, the request to make instead, why, and the most similar
// past jobs — as the rightsize.predict/v1 document and as the text `rightsize predict` prints.
//
// Every door uses it: the command line (`predict`, `submit`), the HTTP API (POST
// /api/v1/predict) and the SLURM submit hook through the server. It reads the store (the
// cluster's model, the user's and the program's finished jobs, the cluster's shape) and, for
// GPU memory, the job's Python code (code/).
//
// Thread-safe when each thread has its own Store connection; with a shared ModelCache the
// predictions of one model set run side by side, their explanations (SHAP values, through a
// DMatrix) one at a time. Failures: a script that cannot be read or parsed (BadInput/NotFound),
// a store error; a cluster or user without history still gets an answer, with notes saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "code/python_env.h"
#include "core/status.h"
#include "jobscript/job_script.h"
#include "model/model_cache.h"
#include "store/store.h"

namespace rightsize {

struct PriceTable;

struct PredictRequest {
  // The script's path; when `script_text` is set, only its name (sbatch's job name without -J).
  std::string script;
  std::optional<std::string> script_text;  // the script itself, when not read from `script`
  std::vector<std::string> sbatch_args;    // sbatch options, which override #SBATCH lines
  // The job's code folder ("" = the script's folder when the script is a file; a script given
  // as text is read for code only when this is set).
  std::string code;
  // The environment the job runs in, where the caller can read it (`predict` run by the job's
  // user at submission): the torch its Python imports. Empty for a server's callers.
  code::JobEnvironment environment;
  std::string cluster;    // "" = the store's only cluster
  std::string user;       // "" = the script's, else $USER
  std::string account;    // overrides the script's
  std::string partition;  // overrides the script's
  std::string prices;     // price table file, for GPU memory sizes ("" = built in)
  // The price table itself, when the caller keeps one (the server's): read instead of
  // `prices`, which parsing on every GPU prediction would cost. Must outlive the call.
  const PriceTable* price_table = nullptr;
  // A submission already parsed, when there is no script to read (a Kubernetes container,
  // jobscript/k8s_workload.h): used instead of `script` and `script_text`, whose name then
  // only labels the answer. Its request must name the user (no $USER fallback) and the job;
  // its code is not read unless `code` is set.
  std::optional<JobScript> submission;
  double risk = 0.01;         // accepted share of jobs whose suggested request is too small
  bool per_job_risk = false;  // the risk bounds this job's own chance instead
  int64_t now = 0;            // predict as of this Unix time (0 = now)
  // Say why for each target (the features that moved it most). Off where only the numbers are
  // read (the admission webhook): it is most of a prediction's CPU time.
  bool explain = true;
  // The whole answer: the text `predict` prints and the document's other fields (the similar
  // jobs, the notes). Off where only the document's "targets" are read (the admission
  // webhook): the similar jobs alone cost a string and a sort over every past job.
  bool text = true;
};

struct PredictionOutput {  // NOLINT(bugprone-exception-escape): json's move may throw
  nlohmann::json doc;      // rightsize.predict/v1
  std::string text;        // what `predict` prints
  std::string warnings;    // the script's warnings, one per line ("SCRIPT:LINE: message")
  // The job's code as read (store/'s job_code, cluster set, job id and time left to the caller,
  // which stores it with the job once it has an id); nullopt when no code was read.
  std::optional<StoredJobCode> code;
};

// Predicts one submission. `models`, when given, keeps the deserialised models between calls
// (the server's); without it the model is read from the store.
StatusOr<PredictionOutput> PredictJob(Store& store, const PredictRequest& request,
                                      ModelCache* models = nullptr);

// What PredictSessions keep between them while the store does not change (the server's, beside
// its ModelCache): each user's and job name's finished jobs and the history built from them,
// so that a review of a workload seen a moment ago reads none of its past. Exact: emptied
// whenever a session's store connection says the store's history may have changed since it
// last asked (store/changes.h: a finished job or a job's code written; the agents' telemetry of
// running jobs does not count), so a job stored before a session starts is seen by it. Entries are
// per second predicted as of; at most a few thousand (then emptied). Thread-safe.
class PredictCache {
 public:
  PredictCache();
  ~PredictCache();
  PredictCache(const PredictCache&) = delete;
  PredictCache& operator=(const PredictCache&) = delete;

  // How many predictions found their past here (the tests check a hit and a miss).
  int64_t hits() const;

  struct Impl;  // predict.cc
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Several predictions that share their reads of the store: the cluster picked, its newest
// model version and model, its shape, the price table, and each user's and each job name's
// finished jobs are read once, by the first prediction that needs them (the admission
// webhook's review: every container of it is of one namespace, which is its user, and one
// cluster). Each answer is the one PredictJob gives on the store as this session first read it;
// so a session must not outlive a write its predictions must see (one per review or batch,
// never kept). Not thread-safe (as its Store); `store` and `models` must outlive it.
class PredictSession {
 public:
  // With `cache`, each prediction's past comes from it when the store has not changed since
  // (checked here, once: the session's own reads stay as they were read).
  PredictSession(Store& store, ModelCache* models, PredictCache* cache = nullptr);
  ~PredictSession();
  PredictSession(const PredictSession&) = delete;
  PredictSession& operator=(const PredictSession&) = delete;

  // As PredictJob.
  StatusOr<PredictionOutput> Predict(const PredictRequest& request);
  // PickCluster (predict/cluster.h) and Store::LatestModelVersion, remembered.
  StatusOr<std::string> Cluster(const std::string& given);
  StatusOr<int64_t> ModelVersion(const std::string& cluster);

  struct Reads;  // what has been read (predict.cc)

 private:
  Store& store_;
  ModelCache* models_;
  std::unique_ptr<Reads> reads_;
};

// A rightsize.predict/v1 document as the short table `submit` prints: per target p10, p50, p90,
// the request and the suggestion, then the notes.
std::string PredictionTable(const nlohmann::json& doc);

}  // namespace rightsize

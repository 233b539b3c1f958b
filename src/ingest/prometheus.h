// ReadPrometheus: a Kubernetes cluster's pod history from the Prometheus HTTP API, as job records.
//
// It asks Prometheus (or anything that serves its /api/v1/query and /api/v1/query_range:
// Thanos, Mimir, VictoriaMetrics) for what sites already collect over [from, to]:
//   kube-state-metrics  kube_pod_container_resource_requests / _limits (and the older
//                       _requests_cpu_cores / _memory_bytes), kube_pod_owner, kube_pod_labels
//                       (JobSet and Kubeflow labels, where exported), kube_pod_info (node),
//                       kube_pod_created, kube_pod_start_time, kube_pod_completion_time,
//                       kube_pod_status_phase, kube_pod_status_qos_class,
//                       kube_pod_container_info (the containers),
//                       kube_pod_container_status_terminated_reason,
//                       _last_terminated_reason, _last_terminated_exitcode, _restarts_total;
//   cAdvisor            container_memory_working_set_bytes (peak),
//   container_cpu_usage_seconds_total
//                       (the counter's last value per container instance: cAdvisor starts it at 0
//                       with the container, so it is the container's CPU time);
//   dcgm-exporter       DCGM_FI_DEV_FB_USED (MiB; peak per GPU, summed over the container's
//                       GPUs) and DCGM_FI_DEV_GPU_UTIL (mean), attributed through the pod,
//                       namespace and container labels (exported_* where Prometheus renamed them).
// One record per container of a pod, keyed as jobscript/k8s_workload.h says (job_id
// "<namespace>/<pod>/<container>", user and account = namespace, job name from OwnerOfPod, qos
// = the pod's QoS class, the request from ContainerRequest over the KSM requests and limits),
// source "prometheus". A pod still Pending or Running at `to` is kept as state RUNNING with no end
// time (usage so far); re-ingesting later completes it. A pod that never started is left out.
//
// Paging: every query is a *_over_time over chunks of at most `chunk_s` that tile the window back
// from `to`, asked as one query_range whose step is the chunk (so a 14-day window is 14 points
// per series, far below Prometheus's 11,000), split into several requests when an answer would
// pass `max_answer_bytes`; a query Prometheus refuses as too heavy (too many samples, its query
// timeout) is asked again for fewer chunks per request, then for shorter chunks. Start and end come
// from kube_pod_start_time and kube_pod_completion_time; where those are missing, from when the pod
// was first seen running or finished, to `step_s` (a subquery asked only for those pods, by name,
// over the chunks each was seen in); a pod deleted while it ran ended when it was last seen (up to
// Prometheus's 5-minute lookback later where its series ended without a staleness marker, as in
// backfilled data).
//
// Every query is answered before anything is returned: an unreachable URL, an HTTP error, a
// server that is not Prometheus, malformed JSON, an answer with status "error", one larger than
// `max_answer_bytes` for a single chunk, a timeout, or (unless allow_warnings) an answer that
// carries warnings (partial data) fails the whole read with a message naming the query. Blocking;
// thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace rightsize {

// What one GET of Prometheus' HTTP API answered.
struct PrometheusAnswer {
  int status = 0;            // HTTP status
  std::string content_type;  // the Content-Type header
  std::string body;
};

// GET `api` ("query" or "query_range") with `params`, in place of HTTP to PrometheusOptions'
// url: the answer, or the error of a request that got none (IoError).
using PrometheusTransport = std::function<StatusOr<PrometheusAnswer>(
    const std::string& api, const std::vector<std::pair<std::string, std::string>>& params)>;

struct PrometheusOptions {
  std::string url;  // http(s)://host:port[/path prefix]
  int64_t from_s = 0;
  int64_t to_s = 0;
  int64_t step_s = 60;                                       // time resolution
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Authorization
  double timeout_s = 120;                                    // per request
  int64_t chunk_s = 86400;                                   // longest span one point covers
  int64_t max_answer_bytes = int64_t{64} << 20;
  bool allow_warnings = false;  // keep answers with warnings (noted), else fail
  // Called after each query: (HTTP requests made, queries done, queries in all).
  std::function<void(int64_t, int64_t, int64_t)> progress;
  // When set, asked instead of HTTP (url is still parsed and named in messages): the fuzz
  // target feeds the reader its answers this way, millions a minute where a loopback server
  // answers forty a second. Everything after the bytes arrive (size cap, status, JSON, paging,
  // assembly) is the same code.
  PrometheusTransport transport;
};

struct PrometheusHistory {
  std::vector<JobRecord> records;
  std::vector<std::string> notes;  // what was left out or unknown, for the summary
  int64_t requests = 0;            // HTTP requests made
  int64_t series = 0;              // result series read over all answers
  int64_t pods = 0;                // pods with records
  int64_t running = 0;             // records of pods still running at `to`
};

StatusOr<PrometheusHistory> ReadPrometheus(const PrometheusOptions& options);

// The price table's name for a GPU model as dcgm-exporter's modelName says it:
// "NVIDIA A100-SXM4-80GB" → "a100-80gb", "NVIDIA H100 80GB HBM3" → "h100", "Tesla V100-SXM2-32GB"
// → "v100-32gb", "NVIDIA L40S" → "l40s"; "" for "".
std::string GpuTypeOfModelName(std::string_view model_name);

// "Name: value" (a --header) as a pair; BadInput when there is no colon or the name is empty.
StatusOr<std::pair<std::string, std::string>> ParseHeaderFlag(std::string_view text);

}  // namespace rightsize

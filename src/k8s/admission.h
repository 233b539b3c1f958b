// The Kubernetes admission webhook's logic: an AdmissionReview (admission.k8s.io/v1) in, the
// AdmissionReview response out — for a Pod, a batch/v1 Job or CronJob (batch/v1beta1 too), a
// Kubeflow PyTorchJob or MPIJob (kubeflow.org) or a JobSet (jobset.x-k8s.io), every container
// of every pod template predicted by the prediction service (predict/) under the key of
// jobscript/k8s_workload.h, then
//   advise:  a JSONPatch that only adds annotations to the workload's metadata
//            ("rightsize.io/<container>" or "rightsize.io/<role>.<container>": p10/p50/p90,
//            risk and suggestion per resource; "rightsize.io/prediction-model") and `warnings`
//            that kubectl prints;
//   enforce: the same, plus the containers' resources.requests/limits for cpu and memory set to
//            the suggestion (never below the floors, only for a key with at least
//            `min_history` finished runs; nvidia.com/gpu only by the torchrun rule, see
//            docs/api.md) and a warning saying what changed.
// Only CREATE is acted on. The workload is allowed unchanged (with an auditAnnotation and, for
// failures, a warning saying why) when it opts out (annotation rightsize.io/skip: "true"), when
// a controller of a kind handled here owns it (its owner was handled at its own admission), for
// any other kind, when the store has no cluster or no model, on any error, and when the
// deadline passes (checked before each container's prediction and at the end: one prediction
// in progress is not interrupted; the webhook's timeoutSeconds with failurePolicy Ignore bounds
// that). Never denies.
//
// Thread-safe when each thread has its own Store (as PredictJob). Failures: only a review that
// cannot be answered at all (not an object, no request.uid) is an error (BadInput).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_cache.h"
#include "store/store.h"

namespace rightsize {

struct PriceTable;
class PredictCache;

enum class AdmissionMode { kAdvise, kEnforce };
std::string_view AdmissionModeName(AdmissionMode mode);  // "advise", "enforce"

struct AdmissionOptions {
  std::string cluster;  // whose model and history; "" = the store's only cluster
  std::chrono::milliseconds deadline{250};  // from `arrived`: later, the answer is "unchanged"
  int min_history = 3;                      // finished runs of a key before enforce patches it
  double floor_cpu_cores = 0.1;             // enforce never sets less
  int64_t floor_memory_bytes = int64_t{256} << 20;
  double risk = 0.01;  // the prediction service's accepted share of too-small requests
  const PriceTable* prices = nullptr;  // for GPU memory sizes (nullptr = the built-in table)
  // The past of workloads reviewed before, kept while the store does not change (the
  // server's; nullptr = every review reads its own).
  PredictCache* cache = nullptr;
  int64_t now_s = 0;  // predict as of this Unix time (0 = now)
  // The monotonic clock the deadline is measured on (tests pass their own; empty = steady
  // clock) and when the review arrived (the epoch of the clock = when Admit is called).
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::chrono::steady_clock::time_point arrived{};
};

// A pod template of a workload: its PodSpec's JSON pointer in the object
// ("/spec/jobTemplate/spec/template/spec") and the role its pods play ("worker" for a
// replica type, a JobSet's replicated job name; "" when none).
struct PodTemplateRef {
  std::string pointer;
  std::string role;
};
// The pod templates of a workload object of a kind handled here; NotFound for another kind,
// BadInput for a handled kind without the template it must have.
StatusOr<std::vector<PodTemplateRef>> FindPodTemplates(const nlohmann::json& object);

// Answers one AdmissionReview (the whole document the apiserver posts).
StatusOr<nlohmann::json> Admit(Store& store, ModelCache* models, const AdmissionOptions& options,
                               AdmissionMode mode, const nlohmann::json& review);

// The response that allows `review` unchanged at once, with `reason` as a warning (when
// `warn`) and as the auditAnnotation "reason" (the server's overload answer). A review without
// request.uid gets an empty uid.
nlohmann::json AllowUnchanged(const nlohmann::json& review, std::string_view reason,
                              bool warn = true);

// RFC 6901: "~" as "~0" and "/" as "~1" ("rightsize.io~1train").
std::string EscapeJsonPointer(std::string_view token);

// Kubernetes quantities as a patch writes them: memory in whole Gi when exact, else Mi rounded
// up ("12Gi", "1280Mi"); cpu in whole cores when exact, else millicores rounded up ("2", "1500m").
std::string MemoryQuantity(int64_t bytes);
std::string CpuQuantity(double cores);

}  // namespace rightsize

// A Kubernetes workload as written: the identity of each container (the analogue of a SLURM
// job's user, job name and script hash) and the request its manifest makes.
//
// Every door that sees Kubernetes uses these, so that a container's history is one key
// whichever way it reached the store: the admission webhook (a Job, CronJob, PyTorchJob, MPIJob,
// JobSet or Pod manifest), the DaemonSet agent (a running pod from the kubelet) and `ingest
// prometheus` (kube-state-metrics series). The key:
//   user      = the namespace
//   job name  = "<owner>/<container>", or "<owner>/<role>/<container>" for a training job's
//               replica type or a JobSet's replicated job ("ddp/worker/pytorch")
//   program   = FNV-1a 64 of image, command and args (a new image tag is a new program)
// where the owner is the name that stays the same from run to run: a CronJob's name for its
// Jobs ("nightly" for Job nightly-29000000), a Deployment's for its ReplicaSets' pods, a Job's
// for its pods, never the generated suffixes.
//
// A record in the store is one container of one pod: job_id "<namespace>/<pod>/<container>".
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/job.h"
#include "core/status.h"

namespace rightsize {

// A Kubernetes resource quantity ("500m", "2", "1.5", "4Gi", "129M", "1e3", "12Ki") as a
// number of base units: cores for cpu, bytes for memory, devices for nvidia.com/gpu. BadInput
// for anything else ("4GB", "", "-1", "1Gx").
StatusOr<double> ParseQuantity(std::string_view text);

// What identifies a container's work across runs.
struct WorkloadKey {
  std::string namespace_name;  // "" is read as "default"
  std::string owner;           // the stable owner name ("nightly", "ddp", "web")
  std::string role;            // replica type / replicated job ("worker"); "" when none
  std::string container;       // the container's name
  std::string image;           // as written ("ghcr.io/lab/train:v2")
  std::string program_hash;    // 16 hex digits over image, command and args

  // request.job_name of the container's records: "<owner>/<container>" or
  // "<owner>/<role>/<container>".
  std::string JobName() const;
  // request.user of the container's records: the namespace.
  std::string User() const { return namespace_name.empty() ? "default" : namespace_name; }
};

// The owner's name without what a controller appends on each run:
//   Job       "nightly-29000000" → "nightly" (a CronJob's Job: 8 or more digits of minutes)
//   ReplicaSet "web-7d4b9c8f6d"  → "web" (the pod-template hash)
//   Pod       "train-x7k2p"      → "train" only when `generated` (made from generateName)
// Other kinds (CronJob, StatefulSet, DaemonSet, PyTorchJob, MPIJob, JobSet) keep their name.
std::string StableOwnerName(std::string_view kind, std::string_view name, bool generated = false);

// What a running pod's metadata says about its owner, as the kubelet and kube-state-metrics
// report it.
struct PodOwnerFacts {
  std::string pod_name;
  std::string generate_name;  // metadata.generateName ("" when not used)
  std::string owner_kind;     // the controller ownerReference's kind ("" for a bare pod)
  std::string owner_name;
  std::map<std::string, std::string> labels;
};
// The stable owner and role of a running pod: a JobSet's or Kubeflow training job's labels
// when present (jobset.sigs.k8s.io/jobset-name + replicatedjob-name,
// training.kubeflow.org/job-name + replica-type), else the controller owner's stable name,
// else the pod's own.
struct OwnerAndRole {
  std::string owner;
  std::string role;
};
OwnerAndRole OwnerOfPod(const PodOwnerFacts& pod);

// FNV-1a 64 of image, command and args (each element separated so that ["a b"] and ["a","b"]
// differ), 16 hex digits.
std::string ProgramHash(std::string_view image, const nlohmann::json& command,
                        const nlohmann::json& args);

// The request a container of a pod spec makes, as a job record holds it: cpus and memory from
// its limits where set (what the kubelet enforces), else its requests; GPUs from
// limits["nvidia.com/gpu"] (Kubernetes requires requests equal limits for extended resources);
// the time limit from the pod's activeDeadlineSeconds. `pod_spec` is the PodSpec object and
// `container` one element of its "containers". BadInput naming the field for a quantity that
// does not parse.
StatusOr<ResourceRequest> ContainerRequest(const nlohmann::json& pod_spec,
                                           const nlohmann::json& container);

}  // namespace rightsize

// Kubelet: what the node's kubelet says about the containers the agent finds in the kubepods
// cgroups — their pod, namespace and name, what their manifest asked for, how they ended, and
// which GPUs each holds.
//
// Two kubelet doors, both local to the node: its pod list (GET /pods on the kubelet's HTTPS port,
// 10250, with the service account's bearer token, or its read-only HTTP port 10255), which
// names each container by its container id and carries the pod spec and the container
// statuses (exit code, reason, OOMKilled); and the PodResources gRPC API v1 on the kubelet's
// unix socket (List), which says which device ids — for NVIDIA's device plugin, GPU UUIDs — each
// container holds. A container is keyed the way every Kubernetes door keys it
// (jobscript/k8s_workload.h): job id "<namespace>/<pod>/<container>", user and account the
// namespace, job name "<owner>/<container>".
//
// Failure: Refresh() returns why a door did not answer (unreachable, 401, a body that is not a
// PodList) and keeps what the last good answer said, so a kubelet restart does not unname the
// node's containers; the pod list and the devices fail independently. Never throws. Not
// thread-safe: one owner (the agent's sampling thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace rightsize {

// How a container ended, from its containerStatuses entry (state or lastState .terminated).
struct ContainerTermination {
  int exit_code = 0;
  std::string reason;  // "Completed", "Error", "OOMKilled", "ContainerCannotRun", …
  std::optional<int> signal;
};

// One container instance on the node (a restarted container is a new instance, with a new id).
struct KubeContainer {
  std::string namespace_name, pod, pod_uid, container;
  std::string qos;           // status.qosClass: "Guaranteed", "Burstable", "BestEffort"
  ResourceRequest request;   // ContainerRequest, with user, account, job name and qos
  std::string program_hash;  // over image, command and args (WorkloadKey::program_hash)
  int restart_count = 0;     // this instance's number: its log is <restart_count>.log
  std::optional<ContainerTermination> terminated;  // set once the kubelet says it ended
  std::vector<std::string> gpu_uuids;              // nvidia.com/gpu devices (PodResources)

  // "<namespace>/<pod>/<container>": the record's job id.
  std::string JobId() const { return namespace_name + "/" + pod + "/" + container; }
  // The record of this instance: JobId() for the first, "<JobId()>#<n>" after the n-th
  // restart, so that each run of a crash-looping container (each OOM kill) is kept.
  std::string RecordId() const {
    return restart_count == 0 ? JobId() : JobId() + "#" + std::to_string(restart_count);
  }
};

// The containers of a PodList (v1) document by bare container id ("containerd://abc…" → "abc…"),
// init containers included; a container not started yet (no id) is left out, and so is a
// request whose quantity does not parse (the container keeps an empty request). BadInput when
// the document is not a PodList ("items" missing or not an array).
StatusOr<std::map<std::string, KubeContainer>> ContainersFromPodList(const nlohmann::json& pods);

struct KubeletOptions {
  std::string url = "https://127.0.0.1:10250";  // or http://127.0.0.1:10255 (read-only port)
  // Read at every refresh (projected service-account tokens rotate); none when it is missing.
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file;        // the kubelet's serving CA; "" = the system's
  bool insecure_tls = false;  // skip verifying the kubelet's certificate
  // PodResources v1; "" = no devices.
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  double timeout_s = 5;
};

class Kubelet {
 public:
  explicit Kubelet(KubeletOptions options);
  ~Kubelet();
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  // Asks both doors again. OK when both answered; otherwise the first failure (IoError,
  // Unauthenticated-as-IoError naming the HTTP status, BadInput for a body that is not a
  // PodList), with what did answer applied.
  Status Refresh();

  // The container with this id (bare, as its cgroup names it); null when the kubelet has not
  // named it (a pod's sandbox, a container younger than the last refresh).
  const KubeContainer* Find(const std::string& container_id) const;
  // Whether a pod list has been read since start.
  bool answered() const { return answered_; }
  int64_t refreshes() const { return refreshes_; }

 private:
  StatusOr<nlohmann::json> FetchPods() const;
  // "<namespace>/<pod>/<container>" → the GPU UUIDs it holds.
  StatusOr<std::map<std::string, std::vector<std::string>>> FetchDevices();

  struct Grpc;  // the PodResources channel and client (keeps gRPC out of this header)
  KubeletOptions options_;
  std::unique_ptr<Grpc> grpc_;
  std::map<std::string, KubeContainer> containers_;
  std::map<std::string, std::vector<std::string>> devices_;
  bool answered_ = false;
  int64_t refreshes_ = 0;
};

}  // namespace rightsize

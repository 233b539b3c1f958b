#include "agent/kubelet.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <utility>

#include "jobscript/k8s_workload.h"
#include "podresources/api.grpc.pb.h"

namespace rightsize {

namespace {

using nlohmann::json;

std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& Field(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// "containerd://0123…" → "0123…" (cri-o writes "cri-o://", Docker "docker://").
std::string BareId(const std::string& id) {
  size_t at = id.find("://");
  return at == std::string::npos ? id : id.substr(at + 3);
}

std::optional<ContainerTermination> Terminated(const json& state) {
  const json& t = Field(state, "terminated");
  if (!t.is_object()) return std::nullopt;
  ContainerTermination out;
  if (const json& code = Field(t, "exitCode"); code.is_number_integer()) {
    out.exit_code = code.get<int>();
  }
  out.reason = Text(t, "reason");
  if (const json& sig = Field(t, "signal"); sig.is_number_integer() && sig.get<int>() > 0) {
    out.signal = sig.get<int>();
  }
  return out;
}

// The pod's controller owner (the ownerReference marked controller, else the first).
PodOwnerFacts OwnerFacts(const json& metadata) {
  PodOwnerFacts facts;
  facts.pod_name = Text(metadata, "name");
  facts.generate_name = Text(metadata, "generateName");
  const json& refs = Field(metadata, "ownerReferences");
  if (refs.is_array()) {
    const json* pick = nullptr;
    for (const json& ref : refs) {
      if (!ref.is_object()) continue;
      if (pick == nullptr) pick = &ref;
      if (const json& c = Field(ref, "controller"); c.is_boolean() && c.get<bool>()) {
        pick = &ref;
        break;
      }
    }
    if (pick != nullptr) {
      facts.owner_kind = Text(*pick, "kind");
      facts.owner_name = Text(*pick, "name");
    }
  }
  const json& labels = Field(metadata, "labels");
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) facts.labels[k] = v.get<std::string>();
    }
  }
  return facts;
}

}  // namespace

StatusOr<std::map<std::string, KubeContainer>> ContainersFromPodList(const json& pods) {
  const json& items = Field(pods, "items");
  if (!items.is_array()) {
    return Status::BadInput("kubelet /pods: expected a PodList with an \"items\" array");
  }
  std::map<std::string, KubeContainer> out;
  for (const json& pod : items) {
    const json& metadata = Field(pod, "metadata");
    const json& spec = Field(pod, "spec");
    const json& status = Field(pod, "status");
    if (!metadata.is_object() || !spec.is_object()) continue;
    const OwnerAndRole owner = OwnerOfPod(OwnerFacts(metadata));
    KubeContainer base;
    base.namespace_name = Text(metadata, "namespace");
    if (base.namespace_name.empty()) base.namespace_name = "default";
    base.pod = Text(metadata, "name");
    base.pod_uid = Text(metadata, "uid");
    base.qos = Text(status, "qosClass");
    // The containers' specs by name, to pair with their statuses.
    std::map<std::string, const json*> specs;
    for (const char* list : {"initContainers", "containers"}) {
      const json& containers = Field(spec, list);
      if (!containers.is_array()) continue;
      for (const json& c : containers) {
        if (c.is_object()) specs[Text(c, "name")] = &c;
      }
    }
    for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
      const json& statuses = Field(status, list);
      if (!statuses.is_array()) continue;
      for (const json& st : statuses) {
        if (!st.is_object()) continue;
        KubeContainer c = base;
        c.container = Text(st, "name");
        auto found = specs.find(c.container);
        if (found != specs.end()) {
          const json& cspec = *found->second;
          WorkloadKey key;
          key.namespace_name = c.namespace_name;
          key.owner = owner.owner;
          key.role = owner.role;
          key.container = c.container;
          key.image = Text(cspec, "image");
          key.program_hash = ProgramHash(key.image, Field(cspec, "command"), Field(cspec, "args"));
          c.program_hash = key.program_hash;
          if (auto request = ContainerRequest(spec, cspec); request.ok()) c.request = *request;
          c.request.user = key.User();
          c.request.account = key.User();
          c.request.job_name = key.JobName();
          c.request.qos = c.qos;
        }
        int restarts = 0;
        if (const json& n = Field(st, "restartCount"); n.is_number_integer()) {
          restarts = std::max(0, n.get<int>());
        }
        if (std::string id = BareId(Text(st, "containerID")); !id.empty()) {
          KubeContainer now = c;
          now.restart_count = restarts;
          now.terminated = Terminated(Field(st, "state"));
          out[id] = std::move(now);
        }
        // The instance before a restart: its id and end are in lastState.
        const json& last = Field(Field(st, "lastState"), "terminated");
        if (std::string id = BareId(Text(last, "containerID")); !id.empty() && !out.count(id)) {
          KubeContainer before = std::move(c);
          before.restart_count = std::max(0, restarts - 1);
          before.terminated = Terminated(Field(st, "lastState"));
          out[id] = std::move(before);
        }
      }
    }
  }
  return out;
}

struct Kubelet::Grpc {
  std::shared_ptr<grpc::Channel> channel;                // shared: gRPC's API hands it out so
  std::unique_ptr<v1::PodResourcesLister::Stub> lister;  // the generated client
};

Kubelet::Kubelet(KubeletOptions options) : options_(std::move(options)) {
  while (!options_.url.empty() && options_.url.back() == '/') options_.url.pop_back();
}

Kubelet::~Kubelet() = default;

StatusOr<json> Kubelet::FetchPods() const {
  httplib::Client client(options_.url);
  if (!client.is_valid()) return Status::InvalidArgument("--kubelet-url: bad URL " + options_.url);
  const auto timeout = std::chrono::duration<double>(options_.timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.enable_server_certificate_verification(!options_.insecure_tls);
  if (!options_.ca_file.empty()) client.set_ca_cert_path(options_.ca_file.c_str());
  httplib::Headers headers;
  if (!options_.token_file.empty()) {
    std::ifstream in(options_.token_file);
    std::string token;
    if (in && std::getline(in, token) && !token.empty()) {
      headers.emplace("Authorization", "Bearer " + token);
    }
  }
  auto res = client.Get("/pods", headers);
  if (!res) {
    return Status::IoError("kubelet " + options_.url + "/pods: " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    return Status::IoError("kubelet " + options_.url + "/pods: HTTP " +
                           std::to_string(res->status) +
                           (res->status == 401 || res->status == 403
                                ? " (the token may not grant nodes/proxy or nodes/pods)"
                                : ""));
  }
  json body = json::parse(res->body, nullptr, false);
  if (body.is_discarded()) {
    return Status::BadInput("kubelet " + options_.url + "/pods: the answer is not JSON");
  }
  return body;
}

StatusOr<std::map<std::string, std::vector<std::string>>> Kubelet::FetchDevices() {
  std::map<std::string, std::vector<std::string>> out;
  if (options_.pod_resources_socket.empty()) return out;
  // The channel exists only while the socket does: a gRPC channel to a missing socket keeps
  // timers and a poller busy retrying between refreshes (about 5% of the agent's CPU on a node
  // without the kubelet's device plugin API), and the kubelet recreates the socket on restart.
  struct stat st_socket {};
  if (stat(options_.pod_resources_socket.c_str(), &st_socket) != 0) {
    grpc_.reset();
    return Status::IoError("kubelet PodResources " + options_.pod_resources_socket + ": " +
                           std::strerror(errno));
  }
  if (!grpc_) {
    grpc_ = std::make_unique<Grpc>();
    grpc_->channel = grpc::CreateChannel("unix://" + options_.pod_resources_socket,
                                         grpc::InsecureChannelCredentials());
    grpc_->lister = v1::PodResourcesLister::NewStub(grpc_->channel);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000)));
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  grpc::Status st = grpc_->lister->List(&context, request, &response);
  if (!st.ok()) {
    return Status::IoError("kubelet PodResources " + options_.pod_resources_socket + ": " +
                           st.error_message());
  }
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      std::vector<std::string>& uuids = out[pod.namespace_() + "/" + pod.name() + "/" + c.name()];
      for (const v1::ContainerDevices& d : c.devices()) {
        if (d.resource_name() != "nvidia.com/gpu") continue;
        uuids.insert(uuids.end(), d.device_ids().begin(), d.device_ids().end());
      }
    }
  }
  return out;
}

Status Kubelet::Refresh() {
  ++refreshes_;
  Status first = Status::Ok();
  auto pods = FetchPods();
  if (pods.ok()) {
    auto containers = ContainersFromPodList(*pods);
    if (containers.ok()) {
      containers_ = std::move(*containers);
      answered_ = true;
    } else {
      first = containers.status();
    }
  } else {
    first = pods.status();
  }
  auto devices = FetchDevices();
  if (devices.ok()) {
    devices_ = std::move(*devices);
  } else if (first.ok()) {
    first = devices.status();
  }
  for (auto& [id, c] : containers_) {
    auto it = devices_.find(c.JobId());
    if (it != devices_.end()) c.gpu_uuids = it->second;
  }
  return first;
}

const KubeContainer* Kubelet::Find(const std::string& container_id) const {
  auto it = containers_.find(container_id);
  return it == containers_.end() ? nullptr : &it->second;
}

}  // namespace rightsize

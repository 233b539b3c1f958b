// libFuzzer target for the Kubernetes admission webhook's decoding (k8s/admission.h): the bytes
// as the body of POST /k8s/admission (parsed as the server does), Admit on a store that has a
// cluster but no model (every review is answered "unchanged" after its workload is read), and
// the workload extraction the predictions start from, as Admit does it for each container of
// each pod template (FindPodTemplates, jobscript/k8s_workload.h: ProgramHash, ContainerRequest,
// StableOwnerName, OwnerOfPod, ParseQuantity). Seeds: corpus/admission/ (the reviews of
// test/k8s fixtures).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_util.h"
#include "jobscript/k8s_workload.h"
#include "k8s/admission.h"
#include "store/store.h"

namespace {

rightsize::Store& TheStore() {
  static rightsize::Store* store = [] {
    auto s = rightsize::OpenStore(":memory:");
    if (!s.ok()) std::abort();
    rightsize::JobRecord job;
    job.cluster = "prod";
    job.job_id = "default/a/b";
    job.source = "kubernetes";
    std::vector<rightsize::JobRecord> jobs{job};
    (void)(*s)->UpsertJobs(jobs);
    return s->release();
  }();
  return *store;
}

const nlohmann::json* ObjectAt(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

void Extract(const nlohmann::json& object) {
  auto templates = rightsize::FindPodTemplates(object);
  if (!templates.ok()) return;
  for (const auto& t : *templates) {
    const nlohmann::json& spec = object.at(nlohmann::json::json_pointer(t.pointer));
    const auto& containers = spec.at("containers");
    for (const auto& container : containers) {
      std::string image = container.is_object() ? container.value("image", "") : "";
      (void)rightsize::ProgramHash(image, container.value("command", nlohmann::json::array()),
                                   container.value("args", nlohmann::json::array()));
      auto request = rightsize::ContainerRequest(spec, container);
      if (request.ok()) {
        rightsize::JobRecord r;
        r.request = *request;
        rightsize::fuzz::UseRecord(r);
      }
    }
  }
  rightsize::PodOwnerFacts pod;
  if (const auto* metadata = ObjectAt(object, "metadata")) {
    pod.pod_name = metadata->value("name", "");
    pod.generate_name = metadata->value("generateName", "");
    if (const auto* labels = ObjectAt(*metadata, "labels")) {
      for (const auto& [k, v] : labels->items()) {
        if (v.is_string()) pod.labels[k] = v.get<std::string>();
      }
    }
  }
  (void)rightsize::OwnerOfPod(pod);
  (void)rightsize::StableOwnerName(object.value("kind", ""), pod.pod_name, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body = rightsize::fuzz::AsText(data, size);
  nlohmann::json review = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    // Short bodies also as a quantity ("500m", "4Gi").
    if (size <= 64) (void)rightsize::ParseQuantity(body);
    return 0;
  }
  for (auto mode : {rightsize::AdmissionMode::kAdvise, rightsize::AdmissionMode::kEnforce}) {
    rightsize::AdmissionOptions options;
    options.deadline = std::chrono::hours(1);
    auto answer = rightsize::Admit(TheStore(), nullptr, options, mode, review);
    if (answer.ok()) (void)answer->dump().size();
  }
  (void)rightsize::AllowUnchanged(review, "fuzz").dump().size();
  // Admit's json errors are caught inside it; the extraction here catches them the same way.
  try {
    if (const auto* request = ObjectAt(review, "request")) {
      if (const auto* object = ObjectAt(*request, "object")) Extract(*object);
    }
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}

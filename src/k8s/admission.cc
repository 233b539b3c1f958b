#include "k8s/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include "core/units.h"
#include "jobscript/job_script.h"
#include "jobscript/k8s_workload.h"
#include "predict/predict.h"

namespace rightsize {

namespace {

constexpr size_t kMaxWarningChars = 120;  // the apiserver truncates long ones (NOTES.md 2)
constexpr const char* kAnnotationPrefix = "rightsize.io/";

// Kinds whose pods or Jobs come from a controller handled here: such an object was right-sized
// when its owner was admitted.
const std::set<std::string, std::less<>> kHandledOwners = {"CronJob", "Job", "PyTorchJob", "MPIJob",
                                                           "JobSet"};

std::string Base64(std::string_view in) {
  static constexpr std::string_view kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kChars[(n >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kChars[(n >> 18) & 63];
    out += kChars[(n >> 12) & 63];
    out += i + 1 < in.size() ? kChars[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string Clip(std::string text) {
  if (text.size() > kMaxWarningChars) {
    text.resize(kMaxWarningChars - 3);
    text += "...";
  }
  return text;
}

std::string StringAt(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const nlohmann::json* ObjectAt(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

std::string Group(const std::string& api_version) {
  size_t slash = api_version.find('/');
  return slash == std::string::npos ? std::string() : api_version.substr(0, slash);
}

nlohmann::json Envelope(const nlohmann::json& review, nlohmann::json response) {
  std::string version = StringAt(review, "apiVersion");
  if (version != "admission.k8s.io/v1beta1") version = "admission.k8s.io/v1";
  return {{"apiVersion", version}, {"kind", "AdmissionReview"}, {"response", std::move(response)}};
}

// A number of the prediction document, nullopt for null or absent.
std::optional<double> Number(const nlohmann::json& target, const char* key) {
  auto it = target.find(key);
  if (it == target.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string ShowBytes(double v) {
  std::string m = FormatMemory(static_cast<int64_t>(std::llround(v)));
  return std::isdigit(static_cast<unsigned char>(m.back())) != 0 ? m : m + "i";
}

// One resource of the annotation: "memory p10=1.1Gi p50=2.3Gi p90=3Gi risk=0.2% suggest=4Gi".
std::string Describe(const nlohmann::json& targets, const char* target, const char* label,
                     const std::function<std::string(double)>& show, bool suggest) {
  auto it = targets.find(target);
  if (it == targets.end()) return {};
  const nlohmann::json& t = *it;
  std::string out = label;
  for (const char* q : {"p10", "p50", "p90"}) {
    if (auto v = Number(t, q)) {
      out += fmt::format(" {}={}", q, show(*v));
    } else if (t.contains(q)) {
      out += fmt::format(" {}=unbounded", q);
    }
  }
  if (suggest) {  // what has a request: the chance it is too small, and what to ask instead
    if (auto r = Number(t, "prob_request_too_small")) {
      out += fmt::format(" risk={:.2g}%", 100 * *r);
    }
    if (auto s = Number(t, "suggested_request")) out += " suggest=" + show(*s);
  }
  return out;
}

std::string DescribeAll(const nlohmann::json& targets) {
  std::vector<std::string> parts;
  auto cores = [](double v) { return fmt::format("{:.2g}", v); };
  auto secs = [](double v) { return FormatDuration(v); };
  auto pct = [](double v) { return fmt::format("{:.0f}%", v); };
  for (std::string part : {Describe(targets, "peak_memory", "memory", ShowBytes, true),
                           Describe(targets, "cpu_cores", "cpu", cores, true),
                           Describe(targets, "gpu_memory", "gpu-memory", ShowBytes, true),
                           Describe(targets, "gpu_util", "gpu-util", pct, false),
                           Describe(targets, "runtime", "runtime", secs, false)}) {
    if (!part.empty()) parts.push_back(std::move(part));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// What one container of one template asks, is predicted to use, and becomes.
struct ContainerWork {  // NOLINT(bugprone-exception-escape): json's move may throw
  std::string pointer;  // the container's JSON pointer
  std::string label;    // "train" or "worker.pytorch"
  WorkloadKey key;
  ResourceRequest request;
  const nlohmann::json* container = nullptr;
  nlohmann::json targets;  // the prediction's targets
  int64_t finished_runs = 0;
};

// The GPU rule of enforce (docs/api.md): torchrun starting fewer workers per node than the
// container's GPUs uses only that many. Reads --nproc_per_node / --nproc-per-node N anywhere
// in command and args (also inside a `sh -c` string); nullopt when it does not apply.
std::optional<int> GpusUsedByTorchrun(const nlohmann::json& container) {
  std::vector<std::string> tokens;
  for (const char* key : {"command", "args"}) {
    auto it = container.find(key);
    if (it == container.end() || !it->is_array()) continue;
    for (const auto& item : *it) {
      if (!item.is_string()) continue;
      std::istringstream words(item.get<std::string>());
      std::string word;
      while (words >> word) tokens.push_back(word);
    }
  }
  bool torchrun = std::any_of(tokens.begin(), tokens.end(), [](const std::string& t) {
    return t == "torchrun" || t.ends_with("/torchrun") || t == "torch.distributed.run";
  });
  if (!torchrun) return std::nullopt;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string value;
    for (std::string_view flag : {"--nproc_per_node", "--nproc-per-node"}) {
      if (tokens[i] == flag && i + 1 < tokens.size()) value = tokens[i + 1];
      if (tokens[i].starts_with(std::string(flag) + "=")) value = tokens[i].substr(flag.size() + 1);
    }
    int n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (!value.empty() && ec == std::errc() && end == value.data() + value.size() && n > 0) {
      return n;
    }
  }
  return std::nullopt;
}

class Admission {
 public:
  Admission(Store& store, ModelCache* models, const AdmissionOptions& options, AdmissionMode mode,
            const nlohmann::json& review)
      : store_(store),
        session_(store, models, options.cache),
        options_(options),
        mode_(mode),
        review_(review) {}

  StatusOr<nlohmann::json> Run();

 private:
  std::chrono::steady_clock::time_point Now() const {
    return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
  }
  bool Late() const { return Now() - arrived_ >= options_.deadline; }
  nlohmann::json Unchanged(std::string_view reason, bool warn) const {
    return AllowUnchanged(review_, reason, warn);
  }
  Status PredictContainer(ContainerWork& c, const std::string& cluster);
  void Advise(const ContainerWork& c, nlohmann::json* annotations);
  void Enforce(const ContainerWork& c, nlohmann::json* patch);

  Store& store_;
  // The review's reads, shared by its containers: the cluster, its model and shape, and the
  // namespace's history (the user of every container's key) are read once per review.
  PredictSession session_;
  const AdmissionOptions& options_;
  AdmissionMode mode_;
  const nlohmann::json& review_;
  std::chrono::steady_clock::time_point arrived_;
  std::string namespace_;
  std::vector<std::string> warnings_;
  std::vector<std::string> changes_;
};

Status Admission::PredictContainer(ContainerWork& c, const std::string& cluster) {
  PredictRequest in;
  in.script = c.key.namespace_name + "/" + c.key.JobName();
  in.cluster = cluster;
  in.risk = options_.risk;
  in.now = options_.now_s;
  in.price_table = options_.prices;
  in.explain = false;  // annotations carry the numbers only
  in.text = false;
  JobScript submission;
  submission.request = c.request;
  submission.request.user = c.key.User();
  submission.request.account = c.key.User();
  submission.request.job_name = c.key.JobName();
  submission.body_hash = c.key.program_hash;
  JobScript::Command command;
  std::vector<std::string> words;
  for (const char* key : {"command", "args"}) {
    auto it = c.container->find(key);
    if (it == c.container->end() || !it->is_array()) continue;
    for (const auto& w : *it) words.push_back(w.is_string() ? w.get<std::string>() : w.dump());
  }
  if (!words.empty()) {
    command.text = fmt::format("{}", fmt::join(words, " "));
    command.program = words[0];
    command.args.assign(words.begin() + 1, words.end());
  }
  command.container_image = c.key.image;
  submission.commands.push_back(std::move(command));
  in.submission = std::move(submission);
  RS_ASSIGN_OR_RETURN(auto out, session_.Predict(in));
  c.targets = std::move(out.doc["targets"]);
  if (mode_ == AdmissionMode::kEnforce) {
    JobFilter filter;
    filter.cluster = cluster;
    filter.user = c.key.User();
    filter.job_name = c.key.JobName();
    filter.newest = std::max(1, options_.min_history);
    RS_RETURN_IF_ERROR(store_.ScanJobs(filter, [&](const JobRecord& j) {
      if (j.end_time) ++c.finished_runs;
      return true;
    }));
  }
  return Status::Ok();
}

void Admission::Advise(const ContainerWork& c, nlohmann::json* annotations) {
  (*annotations)[kAnnotationPrefix + c.label] = DescribeAll(c.targets);
  // A warning where the request and the suggestion differ enough to act on.
  auto memory = c.targets.find("peak_memory");
  if (memory != c.targets.end()) {
    auto p90 = Number(*memory, "p90");
    auto suggested = Number(*memory, "suggested_request");
    const auto& asked = c.request.memory_bytes;
    if (suggested && asked &&
        (*suggested < 0.8 * static_cast<double>(*asked) ||
         *suggested > static_cast<double>(*asked))) {
      warnings_.push_back(
          Clip(fmt::format("rightsize: container {} asks {} memory, p90 use {}: {}suggest {}",
                           c.label, MemoryQuantity(*asked), p90 ? ShowBytes(*p90) : "unbounded",
                           *suggested > static_cast<double>(*asked) ? "too small, " : "",
                           MemoryQuantity(static_cast<int64_t>(*suggested)))));
    } else if (suggested && !asked) {
      warnings_.push_back(Clip(fmt::format(
          "rightsize: container {} sets no memory request, p90 use {}: suggest {}", c.label,
          p90 ? ShowBytes(*p90) : "unbounded", MemoryQuantity(static_cast<int64_t>(*suggested)))));
    }
  }
  auto cpu = c.targets.find("cpu_cores");
  if (cpu != c.targets.end()) {
    auto p90 = Number(*cpu, "p90");
    auto suggested = Number(*cpu, "suggested_request");
    const auto& asked = c.request.cpus;
    if (suggested && asked && *suggested < 0.8 * *asked) {
      warnings_.push_back(
          Clip(fmt::format("rightsize: container {} asks {} cpu, p90 use {}: suggest {}", c.label,
                           CpuQuantity(*asked), p90 ? fmt::format("{:.2g}", *p90) : "unbounded",
                           CpuQuantity(*suggested))));
    }
  }
}

void Admission::Enforce(const ContainerWork& c, nlohmann::json* patch) {
  if (c.finished_runs < options_.min_history) {
    warnings_.push_back(Clip(fmt::format(
        "rightsize: {} has {} finished run{} ({} needed to enforce): advice only", c.label,
        c.finished_runs, c.finished_runs == 1 ? "" : "s", options_.min_history)));
    return;
  }
  nlohmann::json requests = nlohmann::json::object(), limits = nlohmann::json::object();
  std::vector<std::string> said;
  if (auto m = c.targets.find("peak_memory"); m != c.targets.end()) {
    if (auto s = Number(*m, "suggested_request")) {
      auto bytes = std::max(static_cast<int64_t>(std::ceil(*s)), options_.floor_memory_bytes);
      requests["memory"] = limits["memory"] = MemoryQuantity(bytes);
      said.push_back(fmt::format("memory {}", MemoryQuantity(bytes)));
    }
  }
  if (auto t = c.targets.find("cpu_cores"); t != c.targets.end()) {
    if (auto s = Number(*t, "suggested_request")) {
      // The limit is the suggestion, never more than asked (too few cores slow a job, they do
      // not kill it; the suggestion's whole-core rounding must not raise "500m" to "1"); the
      // request is the median use rounded up to 100m, so the scheduler packs by typical use.
      double limit = *s;
      if (c.request.cpus) limit = std::min(limit, *c.request.cpus);
      limit = std::max(limit, options_.floor_cpu_cores);
      double request = limit;
      if (auto p50 = Number(*t, "p50")) request = std::ceil(*p50 * 10 - 1e-9) / 10;
      request = std::clamp(request, options_.floor_cpu_cores, limit);
      requests["cpu"] = CpuQuantity(request);
      limits["cpu"] = CpuQuantity(limit);
      said.push_back(fmt::format("cpu {}/{}", CpuQuantity(request), CpuQuantity(limit)));
    }
  }
  if (auto used = GpusUsedByTorchrun(*c.container);
      used && c.request.gpus && *used < *c.request.gpus) {
    limits["nvidia.com/gpu"] = std::to_string(*used);
    const nlohmann::json* res = ObjectAt(*c.container, "resources");
    if (res != nullptr && ObjectAt(*res, "requests") != nullptr &&
        (*res)["requests"].contains("nvidia.com/gpu")) {
      requests["nvidia.com/gpu"] = std::to_string(*used);
    }
    said.push_back(fmt::format("nvidia.com/gpu {} (torchrun uses {})", *used, *used));
  }
  if (said.empty()) return;
  const nlohmann::json* resources = ObjectAt(*c.container, "resources");
  std::string base = c.pointer + "/resources";
  if (resources == nullptr) {
    nlohmann::json value = nlohmann::json::object();
    if (!requests.empty()) value["requests"] = requests;
    if (!limits.empty()) value["limits"] = limits;
    patch->push_back({{"op", "add"}, {"path", base}, {"value", value}});
  } else {
    for (auto [name, values] :
         {std::pair<const char*, nlohmann::json*>{"requests", &requests}, {"limits", &limits}}) {
      if (values->empty()) continue;
      if (ObjectAt(*resources, name) == nullptr) {
        patch->push_back({{"op", "add"}, {"path", base + "/" + name}, {"value", *values}});
        continue;
      }
      for (const auto& [key, value] : values->items()) {
        patch->push_back({{"op", "add"},
                          {"path", base + "/" + name + "/" + EscapeJsonPointer(key)},
                          {"value", value}});
      }
    }
  }
  changes_.push_back(fmt::format("{}: {}", c.label, fmt::join(said, ", ")));
  warnings_.push_back(
      Clip(fmt::format("rightsize: set {} ({} runs of it)", changes_.back(), c.finished_runs)));
}

StatusOr<nlohmann::json> Admission::Run() {
  arrived_ = options_.arrived == std::chrono::steady_clock::time_point{} ? Now() : options_.arrived;
  if (!review_.is_object()) return Status::BadInput("expected an AdmissionReview JSON object");
  const nlohmann::json* request = ObjectAt(review_, "request");
  if (request == nullptr || StringAt(*request, "uid").empty()) {
    return Status::BadInput("the AdmissionReview has no request.uid");
  }
  std::string operation = StringAt(*request, "operation");
  if (operation != "CREATE") return Unchanged(fmt::format("{} is not acted on", operation), false);
  const nlohmann::json* object = ObjectAt(*request, "object");
  if (object == nullptr) return Unchanged("the request has no object", false);
  const nlohmann::json* metadata = ObjectAt(*object, "metadata");
  nlohmann::json empty = nlohmann::json::object();
  if (metadata == nullptr) metadata = &empty;
  const nlohmann::json* annotations = ObjectAt(*metadata, "annotations");
  if (annotations != nullptr && StringAt(*annotations, "rightsize.io/skip") == "true") {
    return Unchanged("opted out (rightsize.io/skip)", false);
  }
  std::string kind = StringAt(*object, "kind");
  PodOwnerFacts pod;
  pod.pod_name = StringAt(*metadata, "name");
  pod.generate_name = StringAt(*metadata, "generateName");
  if (auto it = metadata->find("ownerReferences"); it != metadata->end() && it->is_array()) {
    for (const auto& ref : *it) {
      if (!ref.is_object() || !ref.value("controller", false)) continue;
      pod.owner_kind = StringAt(ref, "kind");
      pod.owner_name = StringAt(ref, "name");
    }
  }
  if (kHandledOwners.contains(pod.owner_kind)) {
    return Unchanged(
        fmt::format("owned by {} {}, handled at its own admission", pod.owner_kind, pod.owner_name),
        false);
  }
  auto templates = FindPodTemplates(*object);
  if (!templates.ok() && templates.status().code() == Status::Code::kNotFound) {
    return Unchanged(templates.status().message(), false);
  }
  if (!templates.ok()) return Unchanged("rightsize: " + templates.status().message(), true);

  namespace_ = StringAt(*metadata, "namespace");
  if (namespace_.empty()) namespace_ = StringAt(*request, "namespace");
  if (namespace_.empty()) namespace_ = "default";
  std::string owner, role;
  if (kind == "Pod") {
    if (auto labels = ObjectAt(*metadata, "labels")) {
      for (const auto& [k, v] : labels->items()) {
        if (v.is_string()) pod.labels[k] = v.get<std::string>();
      }
    }
    OwnerAndRole o = OwnerOfPod(pod);
    owner = o.owner;
    role = o.role;
    if (owner.empty()) {  // generateName only: the name comes after admission
      owner = pod.generate_name;
      while (!owner.empty() && owner.back() == '-') owner.pop_back();
    }
  } else {
    owner = StableOwnerName(kind, pod.pod_name);
    if (owner.empty()) {
      owner = pod.generate_name;
      while (!owner.empty() && owner.back() == '-') owner.pop_back();
    }
  }
  if (owner.empty()) return Unchanged("rightsize: the workload has no name", true);

  if (Late()) return Unchanged("rightsize: the deadline passed before predicting: unchanged", true);
  auto cluster = session_.Cluster(options_.cluster);
  if (!cluster.ok()) {
    return Unchanged(fmt::format("rightsize: no history to predict from ({}): unchanged",
                                 cluster.status().message()),
                     true);
  }
  auto version = session_.ModelVersion(*cluster);
  if (!version.ok()) {
    return Unchanged(
        version.status().code() == Status::Code::kNotFound
            ? fmt::format("rightsize: no model for cluster {} yet: unchanged", *cluster)
            : fmt::format("rightsize: the store failed ({}): unchanged",
                          version.status().message()),
        true);
  }

  std::vector<ContainerWork> work;
  for (const auto& t : *templates) {
    const nlohmann::json& spec = object->at(nlohmann::json::json_pointer(t.pointer));
    const auto& containers = spec["containers"];
    for (size_t i = 0; i < containers.size(); ++i) {
      const nlohmann::json& container = containers[i];
      ContainerWork c;
      c.pointer = fmt::format("{}/containers/{}", t.pointer, i);
      c.container = &container;
      c.key.namespace_name = namespace_;
      c.key.owner = owner;
      c.key.role = t.role.empty() ? role : t.role;
      c.key.container = StringAt(container, "name");
      c.key.image = StringAt(container, "image");
      c.key.program_hash =
          ProgramHash(c.key.image, container.value("command", nlohmann::json::array()),
                      container.value("args", nlohmann::json::array()));
      c.label = c.key.role.empty() ? c.key.container : c.key.role + "." + c.key.container;
      auto req = ContainerRequest(spec, container);
      if (!req.ok()) {
        return Unchanged(
            fmt::format("rightsize: container {}: {}: unchanged", c.label, req.status().message()),
            true);
      }
      c.request = *req;
      work.push_back(std::move(c));
    }
  }
  for (auto& c : work) {
    if (Late()) return Unchanged("rightsize: prediction slower than the deadline: unchanged", true);
    Status st = PredictContainer(c, *cluster);
    if (!st.ok()) {
      return Unchanged(fmt::format("rightsize: prediction failed ({}): unchanged", st.message()),
                       true);
    }
  }
  nlohmann::json added = nlohmann::json::object();
  nlohmann::json patch = nlohmann::json::array();
  for (const auto& c : work) Advise(c, &added);
  added["rightsize.io/prediction-model"] = fmt::format("cluster={} version={}", *cluster, *version);
  if (mode_ == AdmissionMode::kEnforce) {
    for (const auto& c : work) Enforce(c, &patch);
  }
  if (Late()) return Unchanged("rightsize: prediction slower than the deadline: unchanged", true);

  nlohmann::json annotation_ops = nlohmann::json::array();
  if (ObjectAt(*object, "metadata") == nullptr) {
    annotation_ops.push_back(
        {{"op", "add"}, {"path", "/metadata"}, {"value", {{"annotations", added}}}});
  } else if (annotations == nullptr) {
    annotation_ops.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", added}});
  } else {
    for (const auto& [key, value] : added.items()) {
      annotation_ops.push_back({{"op", "add"},
                                {"path", "/metadata/annotations/" + EscapeJsonPointer(key)},
                                {"value", value}});
    }
  }
  for (auto& op : patch) annotation_ops.push_back(std::move(op));

  nlohmann::json response = {{"uid", StringAt(*request, "uid")},
                             {"allowed", true},
                             {"patchType", "JSONPatch"},
                             {"patch", Base64(annotation_ops.dump())}};
  if (!warnings_.empty()) response["warnings"] = warnings_;
  std::string outcome = changes_.empty() ? "advised" : "enforced";
  response["auditAnnotations"] = {{"outcome", outcome}, {"mode", AdmissionModeName(mode_)}};
  if (!changes_.empty()) {
    response["auditAnnotations"]["changes"] = fmt::format("{}", fmt::join(changes_, "; "));
  }
  return Envelope(review_, std::move(response));
}

// A replica map ("pytorchReplicaSpecs": {"Master": {...}, "Worker": {...}}) as templates.
Status ReplicaTemplates(const nlohmann::json& spec, const char* field,
                        std::vector<PodTemplateRef>* out) {
  const nlohmann::json* replicas = ObjectAt(spec, field);
  if (replicas == nullptr) return Status::BadInput(fmt::format("spec.{}: missing", field));
  for (const auto& [type, replica] : replicas->items()) {
    std::string lower = type;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out->push_back({fmt::format("/spec/{}/{}/template/spec", field, EscapeJsonPointer(type)),
                    std::move(lower)});
  }
  return Status::Ok();
}

}  // namespace

std::string_view AdmissionModeName(AdmissionMode mode) {
  return mode == AdmissionMode::kEnforce ? "enforce" : "advise";
}

std::string EscapeJsonPointer(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string MemoryQuantity(int64_t bytes) {
  if (bytes > 0 && bytes % kGiB == 0) return fmt::format("{}Gi", bytes / kGiB);
  return fmt::format("{}Mi", (std::max<int64_t>(bytes, 0) + kMiB - 1) / kMiB);
}

std::string CpuQuantity(double cores) {
  auto milli = static_cast<int64_t>(std::ceil(std::max(cores, 0.0) * 1000 - 1e-6));
  if (milli % 1000 == 0) return fmt::format("{}", milli / 1000);
  return fmt::format("{}m", milli);
}

StatusOr<std::vector<PodTemplateRef>> FindPodTemplates(const nlohmann::json& object) {
  std::string kind = StringAt(object, "kind");
  std::string group = Group(StringAt(object, "apiVersion"));
  std::vector<PodTemplateRef> out;
  const nlohmann::json* spec = ObjectAt(object, "spec");
  auto need_spec = [&]() -> Status {
    return spec == nullptr ? Status::BadInput(fmt::format("{}: no spec", kind)) : Status::Ok();
  };
  if (group.empty() && kind == "Pod") {
    RS_RETURN_IF_ERROR(need_spec());
    out.push_back({"/spec", ""});
  } else if (group == "batch" && kind == "Job") {
    out.push_back({"/spec/template/spec", ""});
  } else if (group == "batch" && kind == "CronJob") {
    out.push_back({"/spec/jobTemplate/spec/template/spec", ""});
  } else if (group == "kubeflow.org" && kind == "PyTorchJob") {
    RS_RETURN_IF_ERROR(need_spec());
    RS_RETURN_IF_ERROR(ReplicaTemplates(*spec, "pytorchReplicaSpecs", &out));
  } else if (group == "kubeflow.org" && kind == "MPIJob") {
    RS_RETURN_IF_ERROR(need_spec());
    RS_RETURN_IF_ERROR(ReplicaTemplates(*spec, "mpiReplicaSpecs", &out));
  } else if (group == "jobset.x-k8s.io" && kind == "JobSet") {
    RS_RETURN_IF_ERROR(need_spec());
    auto it = spec->find("replicatedJobs");
    if (it == spec->end() || !it->is_array()) {
      return Status::BadInput("JobSet: spec.replicatedJobs: missing");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      std::string name = StringAt((*it)[i], "name");
      if (name.empty()) {
        return Status::BadInput(fmt::format("JobSet: spec.replicatedJobs[{}].name: missing", i));
      }
      out.push_back({fmt::format("/spec/replicatedJobs/{}/template/spec/template/spec", i), name});
    }
  } else {
    return Status::NotFound(
        fmt::format("{} {} is not a workload handled here", StringAt(object, "apiVersion"), kind));
  }
  for (const auto& t : out) {
    nlohmann::json::json_pointer ptr(t.pointer);
    if (!object.contains(ptr) || !object.at(ptr).is_object() ||
        !object.at(ptr).contains("containers") || !object.at(ptr)["containers"].is_array()) {
      return Status::BadInput(fmt::format("{}: {}/containers: missing", kind, t.pointer));
    }
    for (const auto& c : object.at(ptr)["containers"]) {
      if (!c.is_object() || StringAt(c, "name").empty()) {
        return Status::BadInput(
            fmt::format("{}: {}/containers: a container without a name", kind, t.pointer));
      }
    }
  }
  return out;
}

nlohmann::json AllowUnchanged(const nlohmann::json& review, std::string_view reason, bool warn) {
  std::string uid;
  if (const nlohmann::json* request = ObjectAt(review, "request")) uid = StringAt(*request, "uid");
  nlohmann::json response = {
      {"uid", uid},
      {"allowed", true},
      {"auditAnnotations", {{"outcome", "unchanged"}, {"reason", std::string(reason)}}}};
  if (warn) response["warnings"] = {Clip(std::string(reason))};
  return Envelope(review, std::move(response));
}

StatusOr<nlohmann::json> Admit(Store& store, ModelCache* models, const AdmissionOptions& options,
                               AdmissionMode mode, const nlohmann::json& review) {
  try {
    return Admission(store, models, options, mode, review).Run();
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected type deep in an object: never block the cluster for it.
    return AllowUnchanged(review,
                          fmt::format("rightsize: unreadable object ({}): unchanged", e.what()));
  }
}

}  // namespace rightsize

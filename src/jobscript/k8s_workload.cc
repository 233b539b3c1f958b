#include "jobscript/k8s_workload.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace rightsize {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};
// Longest first where one is a prefix of another does not matter: the whole rest must match.
constexpr std::array<Suffix, 16> kSuffixes = {{{"Ki", 1024.0},
                                               {"Mi", 1024.0 * 1024},
                                               {"Gi", 1024.0 * 1024 * 1024},
                                               {"Ti", 1024.0 * 1024 * 1024 * 1024},
                                               {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
                                               {"Ei", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
                                               {"n", 1e-9},
                                               {"u", 1e-6},
                                               {"m", 1e-3},
                                               {"", 1.0},
                                               {"k", 1e3},
                                               {"M", 1e6},
                                               {"G", 1e9},
                                               {"T", 1e12},
                                               {"P", 1e15},
                                               {"E", 1e18}}};

// The pod-template hash and generateName alphabet (k8s.io/apimachinery rand.SafeEncodeString).
bool IsSafeChar(char c) {
  static constexpr std::string_view kSafe = "bcdfghjklmnpqrstvwxz2456789";
  return kSafe.find(c) != std::string_view::npos;
}

// `name` without its last "-<suffix>" when the suffix satisfies `ok`; unchanged otherwise.
template <typename Pred>
std::string StripSuffix(std::string_view name, Pred ok) {
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::string(name);
  std::string_view suffix = name.substr(dash + 1);
  if (!ok(suffix)) return std::string(name);
  return std::string(name.substr(0, dash));
}

std::string Label(const std::map<std::string, std::string>& labels, const std::string& key) {
  auto it = labels.find(key);
  return it == labels.end() ? std::string() : it->second;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The value of resources.<section>[name] as a number; nullopt when absent.
StatusOr<std::optional<double>> ResourceValue(const nlohmann::json& container, const char* section,
                                              const char* name) {
  const auto resources = container.find("resources");
  if (resources == container.end() || !resources->is_object()) return std::optional<double>();
  const auto part = resources->find(section);
  if (part == resources->end() || !part->is_object()) return std::optional<double>();
  const auto value = part->find(name);
  if (value == part->end() || value->is_null()) return std::optional<double>();
  std::string text;
  if (value->is_string()) {
    text = value->get<std::string>();
  } else if (value->is_number()) {
    // YAML turned `nvidia.com/gpu: 1` into a number; the API server would store "1".
    return std::optional<double>(value->get<double>());
  } else {
    return Status::BadInput(
        fmt::format("resources.{}.{}: expected a quantity, got {}", section, name, value->dump()));
  }
  auto parsed = ParseQuantity(text);
  if (!parsed.ok()) {
    return Status::BadInput(
        fmt::format("resources.{}.{}: {}", section, name, parsed.status().message()));
  }
  return std::optional<double>(*parsed);
}

}  // namespace

StatusOr<double> ParseQuantity(std::string_view text) {
  auto bad = [&] {
    return Status::BadInput(
        fmt::format("expected a Kubernetes quantity like 500m, 2, 4Gi or 129M, got '{}'", text));
  };
  size_t i = 0;
  if (i < text.size() && text[i] == '+') ++i;
  size_t digits_start = i;
  bool dot = false;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) != 0 || (text[i] == '.' && !dot))) {
    if (text[i] == '.') dot = true;
    ++i;
  }
  std::string_view number = text.substr(digits_start, i - digits_start);
  if (number.empty() || number == ".") return bad();
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) return bad();
  std::string_view rest = text.substr(i);
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1) {
    int exponent = 0;
    std::string_view digits = rest.substr(1);
    if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
    auto [e_end, e_ec] = std::from_chars(digits.data(), digits.data() + digits.size(), exponent);
    if (e_ec != std::errc() || e_end != digits.data() + digits.size()) return bad();
    double result = value * std::pow(10.0, exponent);
    if (!std::isfinite(result)) return bad();
    return result;
  }
  for (const auto& suffix : kSuffixes) {
    if (rest == suffix.text) return value * suffix.factor;
  }
  return bad();
}

std::string WorkloadKey::JobName() const {
  if (role.empty()) return owner + "/" + container;
  return owner + "/" + role + "/" + container;
}

std::string StableOwnerName(std::string_view kind, std::string_view name, bool generated) {
  if (kind == "Job") {
    // A CronJob names each Job "<cronjob>-<scheduled time in minutes since 1970>".
    return StripSuffix(name, [](std::string_view s) {
      if (s.size() < 8) return false;
      for (char c : s) {
        if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
      }
      return true;
    });
  }
  if (kind == "ReplicaSet") {
    return StripSuffix(name, [](std::string_view s) {
      if (s.size() < 6 || s.size() > 10) return false;
      for (char c : s) {
        if (!IsSafeChar(c)) return false;
      }
      return true;
    });
  }
  if (kind == "Pod" && generated) {
    return StripSuffix(name, [](std::string_view s) {
      if (s.size() != 5) return false;
      for (char c : s) {
        if (!IsSafeChar(c)) return false;
      }
      return true;
    });
  }
  return std::string(name);
}

OwnerAndRole OwnerOfPod(const PodOwnerFacts& pod) {
  std::string jobset = Label(pod.labels, "jobset.sigs.k8s.io/jobset-name");
  if (!jobset.empty()) {
    return {jobset, Label(pod.labels, "jobset.sigs.k8s.io/replicatedjob-name")};
  }
  std::string training = Label(pod.labels, "training.kubeflow.org/job-name");
  if (!training.empty()) {
    return {training, Lower(Label(pod.labels, "training.kubeflow.org/replica-type"))};
  }
  if (!pod.owner_kind.empty() && !pod.owner_name.empty()) {
    return {StableOwnerName(pod.owner_kind, pod.owner_name), ""};
  }
  bool generated = !pod.generate_name.empty() &&
                   pod.pod_name.size() == pod.generate_name.size() + 5 &&
                   pod.pod_name.starts_with(pod.generate_name);
  if (generated) {
    std::string base = pod.generate_name;
    while (!base.empty() && base.back() == '-') base.pop_back();
    return {base.empty() ? pod.pod_name : base, ""};
  }
  return {pod.pod_name, ""};
}

std::string ProgramHash(std::string_view image, const nlohmann::json& command,
                        const nlohmann::json& args) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  auto add = [&](std::string_view text) {
    for (char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;
    }
    hash ^= 0xffU;  // a separator no UTF-8 text contains
    hash *= 0x100000001b3ULL;
  };
  add(image);
  for (const nlohmann::json* list : {&command, &args}) {
    add("\x1e");
    if (!list->is_array()) continue;
    for (const auto& item : *list) add(item.is_string() ? item.get<std::string>() : item.dump());
  }
  return fmt::format("{:016x}", hash);
}

StatusOr<ResourceRequest> ContainerRequest(const nlohmann::json& pod_spec,
                                           const nlohmann::json& container) {
  ResourceRequest request;
  auto pick = [&](const char* name) -> StatusOr<std::optional<double>> {
    RS_ASSIGN_OR_RETURN(auto limit, ResourceValue(container, "limits", name));
    if (limit) return limit;
    return ResourceValue(container, "requests", name);
  };
  RS_ASSIGN_OR_RETURN(auto cpu, pick("cpu"));
  if (cpu) request.cpus = *cpu;
  RS_ASSIGN_OR_RETURN(auto memory, pick("memory"));
  if (memory) {
    request.memory_bytes = static_cast<int64_t>(std::llround(*memory));
    request.memory_per_unit_bytes = request.memory_bytes;
    request.memory_scope = MemoryScope::kPerJob;
  }
  RS_ASSIGN_OR_RETURN(auto gpus, pick("nvidia.com/gpu"));
  if (gpus) request.gpus = static_cast<int>(std::llround(*gpus));
  if (!request.gpus) request.gpus = 0;
  const auto deadline = pod_spec.find("activeDeadlineSeconds");
  if (deadline != pod_spec.end() && deadline->is_number_integer() && deadline->get<int64_t>() > 0) {
    request.time_limit_s = deadline->get<int64_t>();
  }
  return request;
}

}  // namespace rightsize

// Shared by the admission tests: a store with a trained model and the history of the fixture
// workloads' keys, the fixture objects (kubectl's JSON, the Kubeflow and JobSet examples'
// YAML) and AdmissionReviews wrapped as the apiserver sends them.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/job.h"
#include "predict/train.h"
#include "store/store.h"

namespace rightsize::test {

inline const std::string kK8sDir = std::string(RIGHTSIZE_TEST_DATA_DIR) + "/k8s";
constexpr int64_t kT0 = 1700000000;
constexpr int64_t kGi = int64_t{1} << 30;

// One workload key's past: what its containers asked and used.
struct PastKey {
  std::string ns, job_name;
  double cpus;
  int64_t memory_bytes;
  int gpus;
  int runs;
  double used_cores;
  int64_t used_memory_bytes;
};

inline std::vector<PastKey> FixtureKeys() {
  return {
      {"ml", "train/train", 8, 64 * kGi, 0, 12, 2.4, 9 * kGi},
      {"ml", "nightly/nightly", 2, 16 * kGi, 0, 6, 1.5, 3 * kGi},
      {"ml", "infer/infer", 1, 8 * kGi, 0, 2, 0.6, 5 * kGi},  // too few runs to enforce
      {"ml", "pytorch-dist-mnist-nccl/master/pytorch", 4, 16 * kGi, 1, 8, 3.1, 6 * kGi},
      {"ml", "pytorch-dist-mnist-nccl/worker/pytorch", 4, 16 * kGi, 1, 8, 3.2, 6 * kGi},
      {"ml", "tensorflow-mnist/launcher/mpi", 1, 2 * kGi, 0, 6, 0.2, kGi / 2},
      {"ml", "tensorflow-mnist/worker/mpi", 2, 4 * kGi, 0, 6, 1.8, 3 * kGi},
      {"ml", "pytorch/workers/pytorch", 4, 32 * kGi, 0, 10, 3.5, 11 * kGi},
  };
}

// A deterministic spread in [1 - w, 1 + w].
inline double Jitter(uint64_t* state, double w) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  double u = static_cast<double>((*state >> 11) & ((uint64_t{1} << 40) - 1)) /
             static_cast<double>(uint64_t{1} << 40);
  return 1 - w + 2 * w * u;
}

// The fixture keys' runs and 40 other workloads' (so that training has enough jobs), one
// container of one pod each, as the agent records them; returns the time after the last end.
inline int64_t FillHistory(Store& store, const std::string& cluster) {
  std::vector<PastKey> keys = FixtureKeys();
  for (int w = 0; w < 40; ++w) {
    double cpus = 1 + w % 8;
    int64_t mem = (2 + 2 * (w % 7)) * kGi;
    keys.push_back({"team-" + std::string(1, static_cast<char>('a' + w % 5)),
                    "svc" + std::to_string(w) + "/main", cpus, mem, w % 6 == 0 ? 1 : 0, 10,
                    cpus * (0.2 + 0.1 * (w % 5)), mem / (2 + w % 3)});
  }
  uint64_t state = 42;
  std::vector<JobRecord> jobs;
  int64_t t = kT0, last_end = kT0;
  for (int run = 0; run < 12; ++run) {
    for (const auto& k : keys) {
      if (run >= k.runs) continue;
      JobRecord j;
      j.cluster = cluster;
      j.job_id = k.ns + "/" + k.job_name + "-" + std::to_string(run);
      j.source = "kubernetes";
      j.request.user = j.request.account = k.ns;
      j.request.job_name = k.job_name;
      j.request.cpus = k.cpus;
      j.request.memory_bytes = j.request.memory_per_unit_bytes = k.memory_bytes;
      j.request.memory_scope = MemoryScope::kPerJob;
      j.request.gpus = k.gpus;
      j.request.qos = "Burstable";
      t += 97;
      j.submit_time = t;
      j.start_time = t + 5;
      double elapsed = 1800 * Jitter(&state, 0.3);
      j.end_time = *j.start_time + static_cast<int64_t>(elapsed);
      last_end = std::max(last_end, *j.end_time);
      j.usage.elapsed_s = elapsed;
      j.usage.cpu_time_s = k.used_cores * Jitter(&state, 0.2) * elapsed;
      j.usage.peak_rss_bytes =
          static_cast<int64_t>(static_cast<double>(k.used_memory_bytes) * Jitter(&state, 0.15));
      if (k.gpus > 0) {
        j.usage.gpu_util_pct = 60 * Jitter(&state, 0.3);
        j.usage.peak_gpu_memory_bytes =
            static_cast<int64_t>(static_cast<double>(20 * kGi) * Jitter(&state, 0.2));
      }
      j.outcome.state = "COMPLETED";
      j.outcome.exit_code = 0;
      jobs.push_back(std::move(j));
    }
  }
  if (!store.UpsertJobs(jobs).ok()) return 0;
  return last_end;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : node) j[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& item : node) j.push_back(YamlToJson(item));
      return j;
    }
    case YAML::NodeType::Scalar: {
      // As the apiserver's decoder does for a plain YAML scalar: numbers and booleans unquoted.
      std::string s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "false") return s == "true";
      char* end = nullptr;
      long long n = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') return n;
      return s;
    }
    default:
      return nullptr;
  }
}

// A fixture object: fixtures/NAME.json (kubectl) or manifests/NAME.yaml.
inline nlohmann::json LoadObject(const std::string& name) {
  std::ifstream json(kK8sDir + "/fixtures/" + name + ".json");
  if (json) return nlohmann::json::parse(json);
  return YamlToJson(YAML::LoadFile(kK8sDir + "/manifests/" + name + ".yaml"));
}

// What the apiserver's defaulting adds to every pod spec before admission (a subset: the
// fields a patch must leave alone).
inline void AddServerDefaults(nlohmann::json& spec) {
  spec["dnsPolicy"] = spec.value("dnsPolicy", "ClusterFirst");
  spec["schedulerName"] = "default-scheduler";
  spec["securityContext"] = nlohmann::json::object();
  spec["terminationGracePeriodSeconds"] = 30;
  for (auto& c : spec["containers"]) {
    std::string image = c.value("image", "");
    c["imagePullPolicy"] = image.ends_with(":latest") ? "Always" : "IfNotPresent";
    c["terminationMessagePath"] = "/dev/termination-log";
    c["terminationMessagePolicy"] = "File";
  }
}

// The AdmissionReview the apiserver posts for creating `object` (NOTES.md section 2:
// CreateV1AdmissionReview).
inline nlohmann::json Review(const nlohmann::json& object, const std::string& resource,
                             const std::string& uid = "0b6d5e4a-7c1f-4e0b-9a55-3f1c2d9e8a71") {
  std::string api_version = object.at("apiVersion");
  size_t slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  nlohmann::json gvk = {{"group", group}, {"version", version}, {"kind", object.at("kind")}};
  nlohmann::json gvr = {{"group", group}, {"version", version}, {"resource", resource}};
  std::string ns = object["metadata"].value("namespace", "default");
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", gvk},
            {"resource", gvr},
            {"requestKind", gvk},
            {"requestResource", gvr},
            {"name", object["metadata"].value("name", "")},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"userInfo",
             {{"username", "alice@example.org"},
              {"uid", "7f0e1c2d"},
              {"groups", {"system:authenticated", "ml-team"}}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", false},
            {"options", {{"kind", "CreateOptions"}, {"apiVersion", "meta.k8s.io/v1"}}}}}};
}

inline std::string Base64Decode(const std::string& in, bool* ok) {
  static const std::string kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  *ok = in.size() % 4 == 0;
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size() && *ok; ++i) {
    if (in[i] == '=') {
      *ok = i + 2 >= in.size();
      break;
    }
    size_t v = kChars.find(in[i]);
    if (v == std::string::npos) {
      *ok = false;
      break;
    }
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace rightsize::test

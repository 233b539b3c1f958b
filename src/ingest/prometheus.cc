#include "ingest/prometheus.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "core/units.h"
#include "jobscript/k8s_workload.h"

namespace rightsize {

namespace {

using Labels = std::map<std::string, std::string>;
struct Point {
  int64_t t = 0;
  double v = 0;
};
// One series of an answer: its labels and points (non-finite values dropped).
struct Series {
  Labels labels;
  std::vector<Point> points;
};

std::string Label(const Labels& labels, const std::string& name) {
  auto it = labels.find(name);
  return it == labels.end() ? std::string() : it->second;
}

// A label that Prometheus renamed to exported_<name> because the scrape target had its own
// (dcgm-exporter scraped without honor_labels), else <name>.
std::string Exported(const Labels& labels, const std::string& name) {
  std::string exported = Label(labels, "exported_" + name);
  return exported.empty() ? Label(labels, name) : exported;
}

// Where Prometheus lives: "https://host:9090" and a path prefix ("/prometheus" behind a proxy).
struct Endpoint {
  std::string scheme_host_port;
  std::string prefix;
};

StatusOr<Endpoint> ParseUrl(const std::string& url) {
  std::string_view rest = url;
  std::string_view scheme;
  if (rest.starts_with("http://")) {
    scheme = "http://";
  } else if (rest.starts_with("https://")) {
    scheme = "https://";
  } else {
    return Status::InvalidArgument(
        fmt::format("--url: expected http://HOST:PORT or https://HOST:PORT, got {}", Quote(url)));
  }
  rest.remove_prefix(scheme.size());
  size_t slash = rest.find('/');
  std::string_view host = rest.substr(0, slash);
  if (host.empty()) {
    return Status::InvalidArgument(fmt::format("--url: no host in {}", Quote(url)));
  }
  Endpoint e{std::string(scheme) + std::string(host), ""};
  if (slash != std::string_view::npos) {
    e.prefix = std::string(rest.substr(slash));
    while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
  }
  return e;
}

// A query's failure as Prometheus explained it, so the pager can tell "ask for less" apart.
struct Refusal {
  Status status;
  bool too_big = false;    // the answer passed max_answer_bytes
  bool too_heavy = false;  // Prometheus: too many samples, or its query timeout
};

// The HTTP side: one connection (kept alive), headers, size cap, answers parsed into series.
class PrometheusApi {
 public:
  PrometheusApi(const Endpoint& endpoint, const PrometheusOptions& options)
      : options_(options), prefix_(endpoint.prefix), client_(endpoint.scheme_host_port) {
    auto timeout = std::chrono::duration<double>(options.timeout_s);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
    client_.set_connection_timeout(std::min(micros, std::chrono::microseconds(10'000'000)));
    client_.set_read_timeout(micros);
    client_.set_write_timeout(micros);
    client_.set_keep_alive(true);
    for (const auto& [name, value] : options.headers) headers_.emplace(name, value);
  }

  // GET `api` (query or query_range) with `params`; the series of its answer (a vector's one
  // value becomes one point). Fails with a Refusal.
  bool Get(const std::string& api, const httplib::Params& params, const std::string& what,
           std::vector<Series>* out, Refusal* refusal) {
    ++requests_;
    std::string where = options_.url + "/api/v1/" + api;
    StatusOr<PrometheusAnswer> answer =
        options_.transport ? options_.transport(api, {params.begin(), params.end()})
                           : HttpGet(api, params);
    if (!answer.ok()) {
      refusal->status = Status::IoError(
          fmt::format("cannot get {} from {}: {}", what, where, answer.status().message()));
      return false;
    }
    const int status = answer->status;
    const std::string& content_type = answer->content_type;
    const std::string& body = answer->body;
    if (static_cast<int64_t>(body.size()) > options_.max_answer_bytes) {
      refusal->too_big = true;
      refusal->status = Status::BadInput(fmt::format(
          "{}: the answer to {} is larger than {} bytes even for one chunk: raise "
          "--max-answer",
          where, what, FormatThousands(static_cast<double>(options_.max_answer_bytes), 0)));
      return false;
    }
    nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    bool is_api = doc.is_object() && doc.contains("status") && doc["status"].is_string();
    if (!is_api && (status == 401 || status == 403)) {
      refusal->status = Status::BadInput(fmt::format(
          "{} answered HTTP {} ({}): give credentials with --bearer-token-file or --header", where,
          status, Quote(body.substr(0, 120))));
      return false;
    }
    if (!is_api) {
      std::string kind = status == 200 ? "an answer that is not the Prometheus API's JSON"
                                       : fmt::format("HTTP {}", status);
      refusal->status = Status::BadInput(fmt::format(
          "{} answered {} ({}): is --url a Prometheus server? The answer begins {}", where, kind,
          content_type.empty() ? "no content type" : content_type, Quote(body.substr(0, 120))));
      return false;
    }
    if (doc["status"] != "success") {
      std::string type = StringOr(doc, "errorType", "error");
      std::string error = StringOr(doc, "error", "(no message)");
      refusal->too_heavy = type == "timeout" || error.find("too many samples") != std::string::npos;
      refusal->status = Status::BadInput(
          fmt::format("Prometheus refused {} (HTTP {}, {}): {}", what, status, type, error));
      return false;
    }
    if (status != 200) {
      refusal->status = Status::BadInput(
          fmt::format("{} answered HTTP {} with status success to {}", where, status, what));
      return false;
    }
    if (auto w = doc.find("warnings"); w != doc.end() && w->is_array() && !w->empty()) {
      std::string text = w->dump();
      if (!options_.allow_warnings) {
        refusal->status = Status::BadInput(fmt::format(
            "Prometheus answered {} with warnings (the data may be partial; --allow-warnings "
            "keeps it): {}",
            what, text.substr(0, 400)));
        return false;
      }
      warnings_.insert(text.substr(0, 200));
    }
    Status st = ParseData(doc, what, out);
    if (!st.ok()) {
      refusal->status = st;
      return false;
    }
    return true;
  }

  int64_t requests() const { return requests_; }

  const std::set<std::string>& warnings() const { return warnings_; }

 private:
  // The answer over HTTP; the body stops one byte past max_answer_bytes (so Get refuses it
  // without reading the rest). IoError when no answer came.
  StatusOr<PrometheusAnswer> HttpGet(const std::string& api, const httplib::Params& params) {
    PrometheusAnswer answer;
    bool too_big = false;
    auto res = client_.Get(
        prefix_ + "/api/v1/" + api, params, headers_,
        [&](const httplib::Response& r) {
          answer.status = r.status;
          answer.content_type = r.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t n) {
          size_t room = static_cast<size_t>(options_.max_answer_bytes) + 1 - answer.body.size();
          answer.body.append(data, std::min(n, room));
          too_big = n >= room;
          return !too_big;
        });
    if (too_big) return answer;
    if (!res) {
      auto err = res.error();
      std::string why = httplib::to_string(err);
      if (err == httplib::Error::Read) {
        why += fmt::format(" (no complete answer within --timeout {} s?)", options_.timeout_s);
      }
      return Status::IoError(why);
    }
    return answer;
  }

  // The member `key` when it is a string, else `otherwise` (json::value throws for another type).
  static std::string StringOr(const nlohmann::json& j, const char* key, const char* otherwise) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(otherwise);
  }

  static Status Shape(const std::string& what, const std::string& field, const nlohmann::json& v) {
    return Status::BadInput(fmt::format("the answer to {}: expected {}, got {}", what, field,
                                        Quote(v.dump().substr(0, 80))));
  }

  static StatusOr<Point> ParsePoint(const nlohmann::json& p, const std::string& what) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_string()) {
      return Shape(what, "a point [time, \"value\"]", p);
    }
    Point point;
    point.t = static_cast<int64_t>(std::llround(p[0].get<double>()));
    const std::string& text = p[1].get_ref<const std::string&>();
    auto v = ParseDouble(text);
    // Prometheus writes NaN, +Inf, -Inf as such; they carry no measurement.
    point.v = v ? *v : std::nan("");
    return point;
  }

  static Status ParseData(const nlohmann::json& doc, const std::string& what,
                          std::vector<Series>* out) {
    auto data = doc.find("data");
    if (data == doc.end() || !data->is_object()) return Shape(what, "a data object", doc);
    std::string type = StringOr(*data, "resultType", "");
    auto result = data->find("result");
    if (result == data->end()) return Shape(what, "data.result", *data);
    if (type == "scalar") return Status::Ok();
    if ((type != "matrix" && type != "vector") || !result->is_array()) {
      return Shape(what, "a matrix or vector result", *data);
    }
    for (const auto& item : *result) {
      if (!item.is_object() || !item.contains("metric") || !item["metric"].is_object()) {
        return Shape(what, "a series with a metric object", item);
      }
      Series s;
      for (const auto& [k, v] : item["metric"].items()) {
        if (!v.is_string()) return Shape(what, "label values as strings", item["metric"]);
        s.labels[k] = v.get<std::string>();
      }
      auto add = [&](const nlohmann::json& p) -> Status {
        RS_ASSIGN_OR_RETURN(Point point, ParsePoint(p, what));
        if (std::isfinite(point.v)) s.points.push_back(point);
        return Status::Ok();
      };
      if (type == "matrix") {
        auto values = item.find("values");
        if (values == item.end() || !values->is_array()) return Shape(what, "values", item);
        for (const auto& p : *values) RS_RETURN_IF_ERROR(add(p));
      } else {
        auto value = item.find("value");
        if (value == item.end()) return Shape(what, "value", item);
        RS_RETURN_IF_ERROR(add(*value));
      }
      out->push_back(std::move(s));
    }
    return Status::Ok();
  }

  const PrometheusOptions& options_;
  std::string prefix_;
  httplib::Client client_;
  httplib::Headers headers_;
  int64_t requests_ = 0;
  std::set<std::string> warnings_;
};

// ---- What the answers say, per pod and container ----

struct GpuFacts {
  std::optional<double> fb_peak_mib;
  double util_sum = 0;
  double util_count = 0;
  std::string model;
};

struct ContainerFacts {
  bool known_to_ksm = false;  // in kube_pod_container_info or its requests/limits
  std::map<std::string, double> requests, limits;  // "cpu", "memory", "nvidia.com/gpu"
  std::optional<double> peak_memory_bytes;
  std::map<std::string, double> cpu_by_instance;        // cAdvisor's counter per container instance
  std::map<std::string, int64_t> terminated_last_seen;  // reason → its last chunk's end
  std::set<std::string> last_terminated;
  std::optional<Point> last_exit_code;
  double restarts = 0;
  std::map<std::string, GpuFacts> gpus;  // by node and GPU
};

struct PodFacts {
  std::map<std::string, ContainerFacts> containers;
  std::optional<double> created, start, completion;
  std::set<std::string> phases_seen;  // phases it was in at some time
  // The ends of the first and last chunks with its phase series (INT64_MAX: no such series).
  int64_t first_chunk_end = INT64_MAX;
  int64_t last_chunk_end = INT64_MIN;
  // When first and last seen in each phase, to a step; asked only for the pods that lack
  // kube_pod_start_time or (having ended) kube_pod_completion_time.
  std::map<std::string, int64_t> phase_first, phase_last;
  std::string owner_kind, owner_name;
  bool owner_is_controller = false;
  Labels labels;
  std::string node, created_by_kind, created_by_name;
  std::string qos;
  std::string phase_at_end;  // "" when kube-state-metrics no longer lists it at `to`
};

using PodKey = std::pair<std::string, std::string>;  // namespace, pod

std::optional<double> Max(std::optional<double> a, double b) { return a ? std::max(*a, b) : b; }

double MaxOf(const std::vector<Point>& points) {
  double m = -HUGE_VAL;
  for (const auto& p : points) m = std::max(m, p.v);
  return m;
}

// kube_pod_labels names each pod label label_<name with [./-] as _>; the ones OwnerOfPod reads.
const std::pair<const char*, const char*> kOwnerLabels[] = {
    {"label_jobset_sigs_k8s_io_jobset_name", "jobset.sigs.k8s.io/jobset-name"},
    {"label_jobset_sigs_k8s_io_replicatedjob_name", "jobset.sigs.k8s.io/replicatedjob-name"},
    {"label_training_kubeflow_org_job_name", "training.kubeflow.org/job-name"},
    {"label_training_kubeflow_org_replica_type", "training.kubeflow.org/replica-type"},
};

// Folds the answer of a "first/last seen in each phase" query into the pod.
void SeenTimes(bool first, PodFacts& pod, const Series& s) {
  std::string phase = Label(s.labels, "phase");
  for (const auto& p : s.points) {
    auto t = static_cast<int64_t>(std::llround(p.v));
    auto& m = first ? pod.phase_first : pod.phase_last;
    auto it = m.find(phase);
    if (it == m.end()) {
      m[phase] = t;
    } else {
      it->second = first ? std::min(it->second, t) : std::max(it->second, t);
    }
  }
}

// A query over chunks: $C is replaced by the chunk ("86400s"), $S by the step ("60s").
struct Query {
  std::string name;
  std::string promql;
  std::function<void(PodFacts&, ContainerFacts*, const Series&)> apply;
  bool per_container = true;
};

// The longest pod-name alternation in one targeted query (URLs stay well under 8 KiB).
constexpr size_t kRegexChars = 3000;

constexpr const char* kCadvisor = R"({container!="",container!="POD",pod!=""})";

std::string Expand(std::string_view promql, int64_t chunk_s, int64_t step_s) {
  std::string out;
  for (size_t i = 0; i < promql.size(); ++i) {
    if (promql[i] == '$' && i + 1 < promql.size() && promql[i + 1] == 'C') {
      out += fmt::format("{}s", chunk_s);
      ++i;
    } else if (promql[i] == '$' && i + 1 < promql.size() && promql[i + 1] == 'S') {
      out += fmt::format("{}s", step_s);
      ++i;
    } else if (promql[i] == '$' && i + 1 < promql.size() && promql[i + 1] == 'K') {
      out += kCadvisor;
      ++i;
    } else {
      out += promql[i];
    }
  }
  return out;
}

// KSM's resource label ("nvidia_com_gpu") as the pod spec names it ("nvidia.com/gpu").
std::string ResourceName(const std::string& ksm) {
  if (ksm == "nvidia_com_gpu") return "nvidia.com/gpu";
  return ksm;
}

std::vector<Query> Queries() {
  auto request = [](bool limit) {
    return [limit](PodFacts&, ContainerFacts* c, const Series& s) {
      std::string resource = ResourceName(Label(s.labels, "resource"));
      if (resource.empty() || s.points.empty()) return;
      c->known_to_ksm = true;
      auto& m = limit ? c->limits : c->requests;
      m[resource] = std::max(m.count(resource) ? m[resource] : 0.0, MaxOf(s.points));
    };
  };
  auto old_request = [](bool limit, const char* resource) {
    return [limit, resource](PodFacts&, ContainerFacts* c, const Series& s) {
      if (s.points.empty()) return;
      c->known_to_ksm = true;
      auto& m = limit ? c->limits : c->requests;
      if (!m.count(resource)) m[resource] = MaxOf(s.points);  // the newer metric wins
    };
  };
  enum class GpuPart { kFbPeak, kUtilSum, kUtilCount };
  auto gpu = [](GpuPart part) {
    return [part](PodFacts&, ContainerFacts* c, const Series& s) {
      std::string key = Label(s.labels, "Hostname") + "/" + Label(s.labels, "UUID") + "/" +
                        Label(s.labels, "gpu");
      GpuFacts& g = c->gpus[key];
      if (g.model.empty()) g.model = Label(s.labels, "modelName");
      for (const auto& p : s.points) {
        if (part == GpuPart::kFbPeak) g.fb_peak_mib = Max(g.fb_peak_mib, p.v);
        if (part == GpuPart::kUtilSum) g.util_sum += p.v;
        if (part == GpuPart::kUtilCount) g.util_count += p.v;
      }
    };
  };
  std::vector<Query> q;
  // The pods, and the phases each was in. (When first and last seen in each phase is a
  // subquery, asked later only for the pods that need it: over all pods it cost Prometheus 94 s
  // for 5,300 pods over 14 days.)
  q.push_back({"kube_pod_status_phase",
               "max by (namespace,pod,phase) (max_over_time(kube_pod_status_phase[$C]))",
               [](PodFacts& pod, ContainerFacts*, const Series& s) {
                 for (const auto& p : s.points) {
                   pod.first_chunk_end = std::min(pod.first_chunk_end, p.t);
                   pod.last_chunk_end = std::max(pod.last_chunk_end, p.t);
                   if (p.v >= 1) pod.phases_seen.insert(Label(s.labels, "phase"));
                 }
               },
               false});
  auto pod_value = [](std::optional<double> PodFacts::*field) {
    return [field](PodFacts& pod, ContainerFacts*, const Series& s) {
      if (!s.points.empty() && MaxOf(s.points) > 0) pod.*field = Max(pod.*field, MaxOf(s.points));
    };
  };
  q.push_back({"kube_pod_created", "max by (namespace,pod) (max_over_time(kube_pod_created[$C]))",
               pod_value(&PodFacts::created), false});
  q.push_back({"kube_pod_start_time",
               "max by (namespace,pod) (max_over_time(kube_pod_start_time[$C]))",
               pod_value(&PodFacts::start), false});
  q.push_back({"kube_pod_completion_time",
               "max by (namespace,pod) (max_over_time(kube_pod_completion_time[$C]))",
               pod_value(&PodFacts::completion), false});
  q.push_back({"kube_pod_owner",
               "max by (namespace,pod,owner_kind,owner_name,owner_is_controller) "
               "(max_over_time(kube_pod_owner[$C]))",
               [](PodFacts& pod, ContainerFacts*, const Series& s) {
                 std::string kind = Label(s.labels, "owner_kind");
                 std::string name = Label(s.labels, "owner_name");
                 if (kind.empty() || kind == "<none>" || name.empty() || name == "<none>") return;
                 bool controller = Label(s.labels, "owner_is_controller") == "true";
                 if (pod.owner_kind.empty() || (controller && !pod.owner_is_controller)) {
                   pod.owner_kind = kind;
                   pod.owner_name = name;
                   pod.owner_is_controller = controller;
                 }
               },
               false});
  q.push_back({"kube_pod_labels", "max_over_time(kube_pod_labels[$C])",
               [](PodFacts& pod, ContainerFacts*, const Series& s) {
                 for (const auto& [ksm, name] : kOwnerLabels) {
                   std::string v = Label(s.labels, ksm);
                   if (!v.empty()) pod.labels[name] = v;
                 }
               },
               false});
  q.push_back({"kube_pod_info",
               "max by (namespace,pod,node,created_by_kind,created_by_name) "
               "(max_over_time(kube_pod_info[$C]))",
               [](PodFacts& pod, ContainerFacts*, const Series& s) {
                 if (std::string n = Label(s.labels, "node"); !n.empty()) pod.node = n;
                 std::string kind = Label(s.labels, "created_by_kind");
                 if (!kind.empty() && kind != "<none>") {
                   pod.created_by_kind = kind;
                   pod.created_by_name = Label(s.labels, "created_by_name");
                 }
               },
               false});
  q.push_back({"kube_pod_status_qos_class",
               "max by (namespace,pod,qos_class) (max_over_time(kube_pod_status_qos_class[$C]))",
               [](PodFacts& pod, ContainerFacts*, const Series& s) {
                 if (MaxOf(s.points) >= 1) pod.qos = Label(s.labels, "qos_class");
               },
               false});
  q.push_back({"kube_pod_container_info",
               "max by (namespace,pod,container) (max_over_time(kube_pod_container_info[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series&) { c->known_to_ksm = true; }});
  q.push_back({"kube_pod_container_resource_requests",
               "max by (namespace,pod,container,resource) "
               "(max_over_time(kube_pod_container_resource_requests[$C]))",
               request(false)});
  q.push_back({"kube_pod_container_resource_limits",
               "max by (namespace,pod,container,resource) "
               "(max_over_time(kube_pod_container_resource_limits[$C]))",
               request(true)});
  q.push_back({"kube_pod_container_resource_requests_cpu_cores",
               "max by (namespace,pod,container) "
               "(max_over_time(kube_pod_container_resource_requests_cpu_cores[$C]))",
               old_request(false, "cpu")});
  q.push_back({"kube_pod_container_resource_requests_memory_bytes",
               "max by (namespace,pod,container) "
               "(max_over_time(kube_pod_container_resource_requests_memory_bytes[$C]))",
               old_request(false, "memory")});
  q.push_back({"kube_pod_container_resource_limits_cpu_cores",
               "max by (namespace,pod,container) "
               "(max_over_time(kube_pod_container_resource_limits_cpu_cores[$C]))",
               old_request(true, "cpu")});
  q.push_back({"kube_pod_container_resource_limits_memory_bytes",
               "max by (namespace,pod,container) "
               "(max_over_time(kube_pod_container_resource_limits_memory_bytes[$C]))",
               old_request(true, "memory")});
  q.push_back({"kube_pod_container_status_terminated_reason",
               "max by (namespace,pod,container,reason) "
               "(max_over_time(kube_pod_container_status_terminated_reason[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 for (const auto& p : s.points) {
                   if (p.v < 1) continue;
                   auto [it, fresh] =
                       c->terminated_last_seen.emplace(Label(s.labels, "reason"), p.t);
                   if (!fresh) it->second = std::max(it->second, p.t);
                 }
               }});
  q.push_back({"kube_pod_container_status_last_terminated_reason",
               "max by (namespace,pod,container,reason) "
               "(max_over_time(kube_pod_container_status_last_terminated_reason[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 if (MaxOf(s.points) >= 1) c->last_terminated.insert(Label(s.labels, "reason"));
               }});
  q.push_back({"kube_pod_container_status_last_terminated_exitcode",
               "max by (namespace,pod,container) "
               "(last_over_time(kube_pod_container_status_last_terminated_exitcode[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 for (const auto& p : s.points) {
                   if (!c->last_exit_code || p.t > c->last_exit_code->t) c->last_exit_code = p;
                 }
               }});
  q.push_back({"kube_pod_container_status_restarts_total",
               "max by (namespace,pod,container) "
               "(max_over_time(kube_pod_container_status_restarts_total[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 c->restarts = std::max(c->restarts, MaxOf(s.points));
               }});
  q.push_back({"container_memory_working_set_bytes",
               "max by (namespace,pod,container) "
               "(max_over_time(container_memory_working_set_bytes$K[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 c->peak_memory_bytes = Max(c->peak_memory_bytes, MaxOf(s.points));
               }});
  // cAdvisor starts the counter at 0 with each container instance (a restart is a new id).
  q.push_back({"container_cpu_usage_seconds_total",
               "max by (namespace,pod,container,id,name) "
               "(max_over_time(container_cpu_usage_seconds_total$K[$C]))",
               [](PodFacts&, ContainerFacts* c, const Series& s) {
                 std::string key = Label(s.labels, "id") + "|" + Label(s.labels, "name");
                 double& v = c->cpu_by_instance[key];
                 v = std::max(v, MaxOf(s.points));
               }});
  // Per GPU; the GPU utilisation's mean over the window is its sum over its count.
  const std::string dcgm_by =
      "namespace,pod,container,exported_namespace,exported_pod,exported_container,Hostname,"
      "UUID,gpu,modelName";
  q.push_back({"DCGM_FI_DEV_FB_USED",
               "max by (" + dcgm_by + ") (max_over_time(DCGM_FI_DEV_FB_USED[$C]))",
               gpu(GpuPart::kFbPeak)});
  q.push_back({"DCGM_FI_DEV_GPU_UTIL",
               "sum by (" + dcgm_by + ") (sum_over_time(DCGM_FI_DEV_GPU_UTIL[$C]))",
               gpu(GpuPart::kUtilSum)});
  q.push_back({"DCGM_FI_DEV_GPU_UTIL samples",
               "sum by (" + dcgm_by + ") (count_over_time(DCGM_FI_DEV_GPU_UTIL[$C]))",
               gpu(GpuPart::kUtilCount)});
  return q;
}

// Runs one query over the window's chunks; fills `out` with every series of every answer.
class Pager {
 public:
  Pager(PrometheusApi& api, const PrometheusOptions& options) : api_(api), options_(options) {}

  // Over the whole window.
  Status Run(const Query& query, std::vector<Series>* out) {
    return Run(query, options_.from_s, options_.to_s, out);
  }

  // Over (from, to].
  Status Run(const Query& query, int64_t from, int64_t to, std::vector<Series>* out) {
    from_ = from;
    to_ = to;
    const int64_t window = std::max<int64_t>(to_ - from_, options_.step_s);
    int64_t chunk = std::clamp<int64_t>(options_.chunk_s, options_.step_s, window);
    per_request_ = kMaxPoints;
    while (true) {
      out->clear();
      Refusal refusal;
      if (RunWithChunk(query, chunk, out, &refusal)) {
        last_chunk_ = chunk;
        return Status::Ok();
      }
      // A smaller chunk is a lighter query; below a few steps it would not help.
      if (refusal.too_heavy && chunk / 2 >= std::max<int64_t>(options_.step_s * 4, 600)) {
        chunk /= 2;
        continue;
      }
      return refusal.status;
    }
  }

  // The chunk the last Run ended up with.
  int64_t last_chunk() const { return last_chunk_; }

 private:
  bool RunWithChunk(const Query& query, int64_t chunk, std::vector<Series>* out, Refusal* refusal) {
    const int64_t window = to_ - from_;
    const int64_t n = std::max<int64_t>(1, (window + chunk - 1) / chunk);
    std::string promql = Expand(query.promql, chunk, options_.step_s);
    // Chunk i ends at to - (n - 1 - i) * chunk; a request asks for points [i, j].
    int64_t& per_request = per_request_;
    int64_t i = 0;
    while (i < n) {
      int64_t j = std::min(n - 1, i + per_request - 1);
      int64_t start = to_ - (n - 1 - i) * chunk;
      int64_t end = to_ - (n - 1 - j) * chunk;
      httplib::Params params{{"query", promql},
                             {"start", std::to_string(start)},
                             {"end", std::to_string(end)},
                             {"step", std::to_string(chunk)}};
      std::string what =
          fmt::format("{} ({} to {})", query.name, FormatUtc(start - chunk), FormatUtc(end));
      std::vector<Series> answer;
      if (!api_.Get("query_range", params, what, &answer, refusal)) {
        // Fewer chunks per request: a smaller answer, and less work (Prometheus evaluates a
        // subquery over the request's whole span at once).
        if ((refusal->too_big || refusal->too_heavy) && j > i) {
          per_request = std::max<int64_t>(1, (j - i + 1) / 2);
          *refusal = Refusal();
          continue;
        }
        return false;
      }
      for (auto& s : answer) out->push_back(std::move(s));
      i = j + 1;
    }
    return true;
  }

  static std::string FormatUtc(int64_t t) {
    auto time = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&time, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }

  // Prometheus refuses more than 11,000 points per series in one query_range.
  static constexpr int64_t kMaxPoints = 10000;
  PrometheusApi& api_;
  const PrometheusOptions& options_;
  int64_t per_request_ = kMaxPoints;  // chunks per request: fewer after a refusal
  int64_t from_ = 0, to_ = 0;
  int64_t last_chunk_ = 0;
};

// How bad a termination reason is, to choose between two seen in the same chunk.
int ReasonRank(const std::string& reason) {
  if (reason == "Completed") return 0;
  if (reason == "Evicted") return 1;
  if (reason == "DeadlineExceeded") return 2;
  if (reason == "OOMKilled") return 4;
  return 3;
}

std::string StateOf(const PodFacts& pod, const ContainerFacts& c, bool running) {
  if (running) return "RUNNING";
  // The container's last termination decides (of two in one chunk, the worse); an OOM kill
  // before a restart only when there is none (a pod deleted while it ran).
  std::string reason;
  std::pair<int64_t, int> latest{INT64_MIN, -1};
  for (const auto& [r, t] : c.terminated_last_seen) {
    std::pair<int64_t, int> key{t, ReasonRank(r)};
    if (key > latest) {
      latest = key;
      reason = r;
    }
  }
  if (reason == "OOMKilled") return "OUT_OF_MEMORY";
  if (reason == "Completed") return "COMPLETED";
  if (reason == "DeadlineExceeded") return "TIMEOUT";
  if (reason == "Evicted") return "PREEMPTED";
  if (!reason.empty()) return "FAILED";  // Error, ContainerCannotRun, StartError, …
  if (c.last_terminated.count("OOMKilled")) return "OUT_OF_MEMORY";
  // The pod's phase: Succeeded and Failed are final.
  if (pod.phases_seen.count("Failed")) return "FAILED";
  if (pod.phases_seen.count("Succeeded")) return "COMPLETED";
  return "CANCELLED";  // gone while Pending or Running: deleted
}

// A regular expression that matches `name` only, for a Kubernetes name ([a-z0-9.-]); "" for
// any other.
std::string ExactRegex(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      out += c;
    } else if (c == '.' || c == '-' || c == '_') {
      out += std::string("[") + c + "]";
    } else {
      return "";
    }
  }
  return out;
}

std::string FormatQuantity(double v) { return fmt::format("{}", v); }

}  // namespace

std::string GpuTypeOfModelName(std::string_view model_name) {
  std::string lower;
  for (char c : model_name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Tokens of letters and digits; the model is the first with a letter followed by a digit.
  std::vector<std::string> tokens;
  std::string token;
  for (char c : lower + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      token += c;
    } else if (!token.empty()) {
      tokens.push_back(token);
      token.clear();
    }
  }
  std::string model;
  bool gb80 = false, gb32 = false;
  for (const auto& t : tokens) {
    if (t == "80gb") gb80 = true;
    if (t == "32gb") gb32 = true;
    if (!model.empty() || t == "nvidia" || t == "tesla") continue;
    bool letter = std::isalpha(static_cast<unsigned char>(t[0])) != 0;
    bool digit = std::any_of(t.begin(), t.end(),
                             [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (letter && digit && !t.ends_with("gb")) model = t;
  }
  if (model.empty()) {
    for (const auto& t : tokens) {
      if (t != "nvidia" && t != "tesla") model += (model.empty() ? "" : "-") + t;
    }
    return model;
  }
  if (model == "a100" && gb80) return "a100-80gb";
  if (model == "v100" && gb32) return "v100-32gb";
  return model;
}

StatusOr<std::pair<std::string, std::string>> ParseHeaderFlag(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || Trim(text.substr(0, colon)).empty()) {
    return Status::BadInput(fmt::format("--header: expected 'Name: value', got {}", Quote(text)));
  }
  return std::pair<std::string, std::string>(std::string(Trim(text.substr(0, colon))),
                                             std::string(Trim(text.substr(colon + 1))));
}

StatusOr<PrometheusHistory> ReadPrometheus(const PrometheusOptions& options) {
  if (options.to_s <= options.from_s) {
    return Status::InvalidArgument("the window is empty: --since must be before --until");
  }
  if (options.step_s < 1) return Status::InvalidArgument("--step: expected at least 1s");
  RS_ASSIGN_OR_RETURN(Endpoint endpoint, ParseUrl(options.url));
  PrometheusApi api(endpoint, options);
  PrometheusHistory history;

  // Is it Prometheus at all? (A clear error before twenty queries fail alike.)
  std::vector<Series> probe;
  Refusal refusal;
  if (!api.Get("query", {{"query", "vector(1)"}, {"time", std::to_string(options.to_s)}},
               "a first test query", &probe, &refusal)) {
    return refusal.status;
  }

  std::map<PodKey, PodFacts> pods;
  auto queries = Queries();
  Pager pager(api, options);
  std::set<PodKey> cadvisor_only;
  int64_t phase_chunk = 0;  // the chunks of the phases query
  bool any_cadvisor = false;
  bool any_dcgm = false;
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    const Query& query = queries[qi];
    std::vector<Series> answer;
    RS_RETURN_IF_ERROR(pager.Run(query, &answer));
    if (qi == 0) phase_chunk = pager.last_chunk();
    history.series += static_cast<int64_t>(answer.size());
    bool dcgm = query.name.starts_with("DCGM");
    bool cadvisor = query.name.starts_with("container_");
    for (const auto& s : answer) {
      std::string ns = dcgm ? Exported(s.labels, "namespace") : Label(s.labels, "namespace");
      std::string pod = dcgm ? Exported(s.labels, "pod") : Label(s.labels, "pod");
      if (pod.empty()) continue;
      PodKey key{ns, pod};
      ContainerFacts* container = nullptr;
      auto it = pods.find(key);
      if (it == pods.end()) {
        // Pods are learnt from kube-state-metrics' phases (the first queries).
        if (cadvisor || dcgm) {
          cadvisor_only.insert(key);
          continue;
        }
        it = pods.emplace(key, PodFacts()).first;
      }
      if (query.per_container) {
        std::string name = dcgm ? Exported(s.labels, "container") : Label(s.labels, "container");
        if (name.empty()) continue;
        container = &it->second.containers[name];
      }
      any_cadvisor |= cadvisor;
      any_dcgm |= dcgm;
      query.apply(it->second, container, s);
    }
    if (options.progress) {
      options.progress(api.requests(), static_cast<int64_t>(qi + 1),
                       static_cast<int64_t>(queries.size()));
    }
  }

  // Which pods are still there at the end of the window, and in which phase.
  std::vector<Series> at_end;
  if (!api.Get("query",
               {{"query", "max by (namespace,pod,phase) (kube_pod_status_phase == 1)"},
                {"time", std::to_string(options.to_s)}},
               "the pods' phases at the end of the window", &at_end, &refusal)) {
    return refusal.status;
  }
  for (const auto& s : at_end) {
    auto it = pods.find({Label(s.labels, "namespace"), Label(s.labels, "pod")});
    if (it != pods.end()) it->second.phase_at_end = Label(s.labels, "phase");
  }

  // When first and last seen in each phase, for the pods kube-state-metrics gives no start or
  // (having ended) no completion time: a subquery at --step, over the chunks each was seen in,
  // for a batch of pods of one namespace at a time.
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<std::string>> need_times;
  for (const auto& [key, pod] : pods) {
    if (pod.first_chunk_end == INT64_MAX) continue;
    bool running = pod.phase_at_end == "Pending" || pod.phase_at_end == "Running" ||
                   pod.phase_at_end == "Unknown";
    if (pod.start && (running || pod.completion)) continue;
    std::string re = ExactRegex(key.second);
    if (!re.empty() && !ExactRegex(key.first).empty()) {
      need_times[{key.first, pod.first_chunk_end, pod.last_chunk_end}].push_back(re);
    }
  }
  for (const auto& [group, names] : need_times) {
    const auto& [ns, first_end, last_end] = group;
    for (size_t b = 0; b < names.size();) {
      std::string regex;
      size_t e = b;
      while (e < names.size() && (e == b || regex.size() + names[e].size() < kRegexChars)) {
        regex += (regex.empty() ? "" : "|") + names[e++];
      }
      b = e;
      std::string selector =
          fmt::format("kube_pod_status_phase{{namespace=\"{}\",pod=~\"{}\"}}", ns, regex);
      for (bool first : {true, false}) {
        Query query{first ? "first seen in each phase" : "last seen in each phase",
                    fmt::format("{0} by (namespace,pod,phase) ({0}_over_time(timestamp({1} == "
                                "1)[$C:$S]))",
                                first ? "min" : "max", selector),
                    nullptr, false};
        std::vector<Series> answer;
        RS_RETURN_IF_ERROR(pager.Run(query, first_end - phase_chunk, last_end, &answer));
        history.series += static_cast<int64_t>(answer.size());
        for (const auto& series : answer) {
          auto it = pods.find({Label(series.labels, "namespace"), Label(series.labels, "pod")});
          if (it != pods.end()) SeenTimes(first, it->second, series);
        }
      }
    }
  }
  history.requests = api.requests();

  int64_t never_started = 0, not_ksm = 0, restarted = 0, no_request = 0, before_window = 0;
  bool any_gpu_request = false;
  std::set<PodKey> with_records;
  for (auto& [key, pod] : pods) {
    const auto& [ns, pod_name] = key;
    if (pod.first_chunk_end == INT64_MAX) continue;  // no phases: only other metrics
    bool running = pod.phase_at_end == "Pending" || pod.phase_at_end == "Running" ||
                   pod.phase_at_end == "Unknown";
    std::optional<int64_t> start;
    if (pod.start) {
      start = static_cast<int64_t>(std::llround(*pod.start));
    } else {
      for (const char* phase : {"Running", "Succeeded", "Failed"}) {
        auto it = pod.phase_first.find(phase);
        if (it != pod.phase_first.end() && (!start || it->second < *start)) start = it->second;
      }
    }
    if (!start) {
      ++never_started;
      continue;
    }
    std::optional<int64_t> end;
    if (!running) {
      if (pod.completion) {
        end = static_cast<int64_t>(std::llround(*pod.completion));
      } else {
        for (const char* phase : {"Succeeded", "Failed"}) {
          auto it = pod.phase_first.find(phase);
          if (it != pod.phase_first.end() && (!end || it->second < *end)) end = it->second;
        }
        if (!end) {  // deleted while it ran: it ended when it was last seen
          for (const auto& [phase, t] : pod.phase_last) end = std::max(end.value_or(t), t);
        }
        if (!end) end = pod.last_chunk_end;  // (a name no regex can select)
      }
      if (end && *end < options.from_s) {
        ++before_window;
        continue;
      }
    }
    PodOwnerFacts owner_facts;
    owner_facts.pod_name = pod_name;
    owner_facts.owner_kind = pod.owner_kind.empty() ? pod.created_by_kind : pod.owner_kind;
    owner_facts.owner_name = pod.owner_kind.empty() ? pod.created_by_name : pod.owner_name;
    owner_facts.labels = pod.labels;
    OwnerAndRole owner = OwnerOfPod(owner_facts);

    for (auto& [name, c] : pod.containers) {
      if (!c.known_to_ksm) {
        ++not_ksm;  // init containers (cAdvisor lists them; KSM's container metrics do not)
        continue;
      }
      JobRecord r;
      r.job_id = ns + "/" + pod_name + "/" + name;
      r.source = "prometheus";
      if (pod.created) r.submit_time = static_cast<int64_t>(std::llround(*pod.created));
      r.start_time = start;
      r.end_time = end;
      // The request as ContainerRequest reads a pod spec: limits where set, else requests.
      nlohmann::json resources = {{"requests", nlohmann::json::object()},
                                  {"limits", nlohmann::json::object()}};
      for (const auto& [res, v] : c.requests) resources["requests"][res] = FormatQuantity(v);
      for (const auto& [res, v] : c.limits) resources["limits"][res] = FormatQuantity(v);
      nlohmann::json container = {{"name", name}, {"resources", resources}};
      auto request = ContainerRequest(nlohmann::json::object(), container);
      if (request.ok()) {
        r.request = *request;
      } else {
        ++no_request;
      }
      WorkloadKey workload;
      workload.namespace_name = ns;
      workload.owner = owner.owner;
      workload.role = owner.role;
      workload.container = name;
      r.request.user = workload.User();
      r.request.account = workload.User();
      r.request.job_name = workload.JobName();
      r.request.qos = pod.qos;
      r.alloc.node_list = pod.node;
      any_gpu_request |= r.request.gpus.value_or(0) > 0;

      int64_t until = end.value_or(options.to_s);
      if (until >= *start) r.usage.elapsed_s = static_cast<double>(until - *start);
      if (c.peak_memory_bytes) {
        r.usage.peak_rss_bytes = static_cast<int64_t>(std::llround(*c.peak_memory_bytes));
      }
      if (!c.cpu_by_instance.empty()) {
        double cpu = 0;
        for (const auto& [instance, v] : c.cpu_by_instance) cpu += v;
        r.usage.cpu_time_s = cpu;
      }
      if (!c.gpus.empty()) {
        double fb_mib = 0, util = 0;
        int with_fb = 0, with_util = 0;
        std::set<std::string> types;
        for (const auto& [id, g] : c.gpus) {
          if (g.fb_peak_mib) {
            fb_mib += *g.fb_peak_mib;
            ++with_fb;
          }
          if (g.util_count > 0) {
            util += g.util_sum / g.util_count;
            ++with_util;
          }
          if (!g.model.empty()) types.insert(GpuTypeOfModelName(g.model));
        }
        if (with_fb > 0) r.usage.peak_gpu_memory_bytes = static_cast<int64_t>(fb_mib * kMiB);
        if (with_util > 0) r.usage.gpu_util_pct = util / with_util;
        std::string type = types.size() == 1 ? *types.begin() : types.empty() ? "" : "mixed";
        r.request.gpu_type = type;
        r.alloc.gpu_type = type;
        // A GPU handed out some other way than nvidia.com/gpu (DRA, MIG profiles).
        if (r.request.gpus.value_or(0) == 0) r.alloc.gpus = static_cast<int>(c.gpus.size());
      }
      r.outcome.state = StateOf(pod, c, running);
      if (r.outcome.state == "COMPLETED") {
        r.outcome.exit_code = 0;
      } else if (r.outcome.state == "FAILED" && c.last_exit_code) {
        r.outcome.exit_code = static_cast<int>(std::llround(c.last_exit_code->v));
      }
      if (c.restarts > 0) ++restarted;
      if (running) ++history.running;
      with_records.insert(key);
      history.records.push_back(std::move(r));
    }
  }
  history.pods = static_cast<int64_t>(with_records.size());

  auto& notes = history.notes;
  if (pods.empty()) {
    notes.push_back(
        "no kube-state-metrics pod phases (kube_pod_status_phase) in the window: does this "
        "Prometheus scrape kube-state-metrics?");
  }
  if (history.running > 0) {
    notes.push_back(fmt::format(
        "{} containers of pods still running at the end of the window stored as RUNNING (no end "
        "time; the report counts them once a later ingest sees them end)",
        history.running));
  }
  if (never_started > 0) {
    notes.push_back(fmt::format("{} pods never started: left out", never_started));
  }
  if (before_window > 0) {
    notes.push_back(fmt::format("{} pods ended before the window: left out", before_window));
  }
  if (not_ksm > 0) {
    notes.push_back(fmt::format(
        "{} containers seen only by cAdvisor or dcgm-exporter (init containers): left out",
        not_ksm));
  }
  if (!cadvisor_only.empty()) {
    notes.push_back(fmt::format(
        "{} pods in cAdvisor or dcgm-exporter series unknown to kube-state-metrics: left out",
        cadvisor_only.size()));
  }
  if (!pods.empty() && !any_cadvisor) {
    notes.push_back(
        "no cAdvisor series (container_memory_working_set_bytes, "
        "container_cpu_usage_seconds_total) for these pods: memory and CPU use unknown");
  }
  if (any_gpu_request && !any_dcgm) {
    notes.push_back(
        "no dcgm-exporter series with pod labels (DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_GPU_UTIL): "
        "GPU use unknown");
  }
  if (no_request > 0) {
    notes.push_back(fmt::format("{} containers with a request that does not parse: request unknown",
                                no_request));
  }
  if (restarted > 0) notes.push_back(fmt::format("{} containers restarted", restarted));
  for (const auto& w : api.warnings()) notes.push_back("Prometheus warned: " + w);
  return history;
}

}  // namespace rightsize

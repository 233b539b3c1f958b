#include "model/code_change.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace rightsize {

namespace {

// The estimate's terms that are not the job's own tensors (code/memory_model.h).
bool OverheadTerm(const std::string& name) {
  return name == "CUDA context" || name == "allocator overhead";
}

std::optional<double> Number(const nlohmann::json& facts, const char* name) {
  auto it = facts.find(name);
  if (it == facts.end() || !it->is_object()) return std::nullopt;
  auto v = it->find("value");
  if (v == it->end() || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::string Shown(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return v.dump();
}

// The inverse of the standard normal's CDF (Acklam's rational approximation, |error| < 1.2e-9).
double NormalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  p = std::clamp(p, 1e-12, 1 - 1e-12);
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - 0.02425) return -NormalQuantile(1 - p);
  double q = p - 0.5;
  double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

}  // namespace

CodeReading ReadCode(const std::string& facts_json, const std::string& estimate_json,
                     const std::string& program, const std::string& code_hash) {
  CodeReading r;
  r.program = program;
  r.code_hash = code_hash;
  nlohmann::json facts = nlohmann::json::parse(facts_json, nullptr, false);
  if (!facts.is_discarded() && facts.is_object()) {
    if (auto f = facts.find("facts"); f != facts.end() && f->is_object()) r.facts = *f;
    if (r.program.empty() && facts.contains("entry") && facts["entry"].is_string()) {
      r.program = facts["entry"].get<std::string>();
    }
  }
  nlohmann::json est = nlohmann::json::parse(estimate_json, nullptr, false);
  if (!est.is_discarded() && est.is_object() && est.contains("p50") && est["p50"].is_number()) {
    double gpus = est.value("data_parallel_gpus", 1.0);
    r.gpu_bytes = est["p50"].get<double>() * std::max(1.0, gpus);
    double tensors = 0;
    if (auto terms = est.find("terms"); terms != est.end() && terms->is_array()) {
      for (const auto& t : *terms) {
        if (!t.is_object() || !t.contains("bytes") || !t["bytes"].is_number()) continue;
        if (OverheadTerm(t.value("name", ""))) continue;
        tensors += t["bytes"].get<double>();
      }
    }
    if (tensors > 0) r.tensor_bytes = tensors * std::max(1.0, gpus);
  }
  auto params = Number(r.facts, "parameters");
  auto batch = Number(r.facts, "batch_size");
  if (params && batch && *params > 0 && *batch > 0) {
    double per_sample = 1;
    if (auto s = Number(r.facts, "seq_len"); s && *s > 0) {
      per_sample = *s;
    } else if (auto i = Number(r.facts, "image_size"); i && *i > 0) {
      per_sample = (*i / 224) * (*i / 224);
    }
    bool training = true;
    if (auto it = r.facts.find("training");
        it != r.facts.end() && it->contains("value") && (*it)["value"].is_boolean()) {
      training = (*it)["value"].get<bool>();
    }
    // Training is a forward and a backward of twice its cost; full activation checkpointing
    // runs the forward once more in the backward (selective recomputes only the attention's
    // cheap parts and is not counted).
    bool full_checkpointing = false;
    if (auto it = r.facts.find("checkpointing");
        it != r.facts.end() && it->is_object() && it->contains("value")) {
      full_checkpointing = (*it)["value"] == "full";
    }
    double passes = training ? (full_checkpointing ? 4.0 : 3.0) : 1.0;
    double accum = Number(r.facts, "grad_accum").value_or(1);
    double steps = Number(r.facts, "steps").value_or(1);  // a fact the analysis may add
    r.work = *params * *batch * per_sample * passes * std::max(1.0, accum) * std::max(1.0, steps);
  }
  return r;
}

namespace {

// Two readings' facts without what only one of them could have, which is not a difference of
// the job: the torch version, read only where the job's environment could be (code::FindTorch:
// `rightsize submit` or `run`, not the server or the submit hook), and a fact's kernel, which
// readings stored before 2026-12-07 do not have.
std::pair<nlohmann::json, nlohmann::json> Aligned(const nlohmann::json& a,
                                                  const nlohmann::json& b) {
  std::pair<nlohmann::json, nlohmann::json> out{a, b};
  auto& [x, y] = out;
  if (!x.is_object() || !y.is_object()) return out;
  if (x.contains("torch_version") != y.contains("torch_version")) {
    x.erase("torch_version");
    y.erase("torch_version");
  }
  for (auto fact = x.begin(); fact != x.end(); ++fact) {
    auto other = y.find(fact.key());
    if (other == y.end() || !fact->is_object() || !other->is_object()) continue;
    if (fact->contains("kernel") != other->contains("kernel")) {
      fact->erase("kernel");
      other->erase("kernel");
    }
  }
  return out;
}

bool SameFacts(const nlohmann::json& a, const nlohmann::json& b) {
  if (a == b) return true;
  auto [x, y] = Aligned(a, b);
  return x == y;
}

}  // namespace

bool SameCode(const CodeReading& a, const CodeReading& b) {
  return !a.code_hash.empty() && a.code_hash == b.code_hash && SameFacts(a.facts, b.facts);
}

bool CodeChanged(const CodeReading& before, const CodeReading& now) {
  return !SameFacts(before.facts, now.facts) ||
         (!before.code_hash.empty() && !now.code_hash.empty() && before.code_hash != now.code_hash);
}

std::optional<double> SameCodeMean(const std::vector<double>& measured) {
  if (measured.empty()) return std::nullopt;
  double mean = 0;
  for (double v : measured) mean += v / static_cast<double>(measured.size());
  return mean;
}

namespace {

// A fact's value; for a fact with a kernel (fused_attention), the kernel, which says more:
// SDPA → FlashAttention changes what attention keeps where the job's torch has no SDPA.
nlohmann::json FactValue(const nlohmann::json& facts, const std::string& name) {
  auto it = facts.find(name);
  if (it == facts.end() || !it->is_object()) return nlohmann::json();
  if (auto kernel = it->find("kernel"); kernel != it->end()) return *kernel;
  return it->value("value", nlohmann::json());
}

// Calls fn(name, old value, new value, the new fact) for each fact whose value differs between
// the two readings (a null value where a side has none), in order; facts only `before` has last.
// What only one reading could have is not a change (Aligned).
template <typename Fn>
void ForEachChangedFact(const CodeReading& before_reading, const CodeReading& now_reading, Fn fn) {
  auto [before, now] = Aligned(before_reading.facts, now_reading.facts);
  for (const auto& [name, fact] : now.items()) {
    nlohmann::json was = FactValue(before, name), is = FactValue(now, name);
    if (was != is) fn(name, was, is, fact);
  }
  for (const auto& [name, fact] : before.items()) {
    nlohmann::json was = FactValue(before, name);
    if (!now.contains(name) && !was.is_null()) fn(name, was, nlohmann::json(), fact);
  }
}

std::string ShownOrUnknown(const nlohmann::json& v) {
  return v.is_null() ? std::string("unknown") : Shown(v);
}

}  // namespace

std::string ChangeKind(const CodeReading& before, const CodeReading& now) {
  std::string kind;
  ForEachChangedFact(before, now,
                     [&](const std::string& name, const nlohmann::json& was,
                         const nlohmann::json& is, const nlohmann::json&) {
                       if (!kind.empty()) kind += '+';
                       if (is.is_number() && !is.is_boolean()) {
                         kind += name;  // a size: the code's ratio says how much
                       } else {
                         kind += fmt::format("{}: {} → {}", name, ShownOrUnknown(was),
                                             ShownOrUnknown(is));
                       }
                     });
  return kind;
}

std::vector<std::string> ChangedFacts(const CodeReading& before, const CodeReading& now) {
  std::vector<std::string> out;
  ForEachChangedFact(before, now,
                     [&](const std::string& name, const nlohmann::json& was,
                         const nlohmann::json& is, const nlohmann::json& fact) {
                       std::string where =
                           !is.is_null() && fact.contains("where") && fact["where"].is_string()
                               ? " at " + fact["where"].get<std::string>()
                               : "";
                       out.push_back(fmt::format("{} {} → {}{}", name, ShownOrUnknown(was),
                                                 ShownOrUnknown(is), where));
                     });
  return out;
}

std::optional<double> CodeLogRatio(Target t, const CodeReading& before, const CodeReading& now,
                                   std::optional<double> before_measured) {
  switch (t) {
    case Target::kPeakMemory: {
      if (!before.tensor_bytes || !now.tensor_bytes) return std::nullopt;
      if (before_measured && *before_measured > 0) {
        // The interpreter, the libraries and the data stay: only the tensors change.
        double moved = *before_measured + *now.tensor_bytes - *before.tensor_bytes;
        return std::log(std::max(moved, 0.1 * *before_measured) / *before_measured);
      }
      return std::log(*now.tensor_bytes / *before.tensor_bytes);
    }
    case Target::kGpuMemory:
      if (!before.gpu_bytes || !now.gpu_bytes || *before.gpu_bytes <= 0) return std::nullopt;
      return std::log(*now.gpu_bytes / *before.gpu_bytes);
    case Target::kRuntime:
      if (!before.work || !now.work) return std::nullopt;
      return std::log(*now.work / *before.work);
    case Target::kCpuCores:
    case Target::kGpuUtil:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> CodeFigure(Target t, const CodeReading& r) {
  switch (t) {
    case Target::kPeakMemory:
      return r.tensor_bytes;
    case Target::kGpuMemory:
      return r.gpu_bytes;
    case Target::kRuntime:
      return r.work;
    case Target::kCpuCores:
    case Target::kGpuUtil:
      return std::nullopt;
  }
  return std::nullopt;
}

void CodeCalibration::AddChange(Target t, double x, double y, double before, std::string kind) {
  // A change the code does not size (x = 0) is evidence only of its kind.
  if (!std::isfinite(x) || !std::isfinite(y) || (x == 0 && kind.empty()) || !(before > 0) ||
      !std::isfinite(before)) {
    return;
  }
  auto& v = changes[static_cast<int>(t)];
  v.push_back({x, y, before, std::move(kind)});
  if (v.size() > kMaxChanges) v.erase(v.begin());
}

void CodeCalibration::AddEstimate(Target t, double measured, double code_figure) {
  if (!(measured > 0) || !(code_figure > 0)) return;
  estimate_log_ratio[static_cast<int>(t)].push_back(std::log(measured / code_figure));
}

void CodeCalibration::AddRepeat(Target t, double measured, double same_code_mean) {
  if (!(measured > 0) || !(same_code_mean > 0)) return;
  auto& v = repeat_log_error[static_cast<int>(t)];
  v.push_back(std::log(measured / same_code_mean));
  if (v.size() > kMaxRepeats) v.erase(v.begin());
}

std::shared_ptr<const QuantileGrid> CodeCalibration::RepeatErrors(Target t) const {
  const auto& v = repeat_log_error[static_cast<int>(t)];
  if (static_cast<int64_t>(v.size()) < QuantileGrid::CountToBound(0.9)) return nullptr;
  return std::make_shared<const QuantileGrid>(
      QuantileGrid::From(std::vector<float>(v.begin(), v.end())));
}

double ChangeFit::Scaled(double x, double before) const {
  double a = std::min(fixed, 0.9 * before);
  if (a <= 0) return x;
  return std::log((a + (before - a) * std::exp(x)) / before);
}

double ChangeFit::Spread(double x, double before) const {
  // The residuals of the cluster's slope, with the prior's spread counted as one more change.
  double prior = CodeCalibration::kPriorSpread * Scaled(x, before);
  return std::sqrt((rss + prior * prior) / static_cast<double>(changes + 1));
}

ChangeFit CodeCalibration::Fit(Target t, const std::string& kind) const {
  const auto& v = changes[static_cast<int>(t)];
  ChangeFit fit;
  fit.changes = static_cast<int64_t>(v.size());
  if (t == Target::kRuntime) {
    // measured = a + (before − a) × r, so measured / before − r = a (1 − r) / before: least
    // squares in a on relative errors (a long run's noise would drown a short one's fixed
    // part), once the changes add up to a ×2 change's evidence ((1 − r)² summing to 1).
    double szz = 0, szv = 0, evidence = 0;
    for (const Change& c : v) {
      double r = std::exp(c.x);
      double z = (1 - r) / c.before;
      szz += z * z;
      szv += z * (std::exp(c.y) - r);
      evidence += (1 - r) * (1 - r);
    }
    if (evidence >= 1 && szz > 0) fit.fixed = std::max(0.0, szv / szz);
  }
  // The prior-weighted slope of y on the scaled x of all changes; for a `kind` seen before,
  // that kind's own slope, shrunk toward it, and its mean residual as an offset, shrunk toward 0.
  double sxy = 0, sxx = 0, syy = 0, kxy = 0, kxx = 0;
  std::vector<std::pair<double, double>> own;  // the kind's (x', y)
  for (const Change& c : v) {
    double x = fit.Scaled(c.x, c.before);
    sxy += x * c.y;
    sxx += x * x;
    syy += c.y * c.y;
    if (!kind.empty() && c.kind == kind) {
      kxy += x * c.y;
      kxx += x * x;
      own.emplace_back(x, c.y);
    }
  }
  fit.slope = std::clamp((sxy + kPriorWeight) / (sxx + kPriorWeight), 0.0, 1.5);
  fit.rss = std::max(0.0, syy - 2 * fit.slope * sxy + fit.slope * fit.slope * sxx);
  fit.of_kind = static_cast<int64_t>(own.size());
  if (own.empty()) return fit;
  if (sxx > 0) {
    double prior = kKindPriorChanges * sxx / static_cast<double>(fit.changes);
    fit.slope = std::clamp((kxy + prior * fit.slope) / (kxx + prior), 0.0, 1.5);
  }
  double residual = 0;
  for (const auto& [x, y] : own) residual += y - fit.slope * x;
  fit.offset = residual / (static_cast<double>(own.size()) + kKindPriorChanges);
  return fit;
}

std::optional<std::pair<double, double>> CodeCalibration::EstimateCorrection(Target t) const {
  std::vector<double> v = estimate_log_ratio[static_cast<int>(t)];
  if (v.size() < 3) return std::nullopt;
  std::sort(v.begin(), v.end());
  double median = v[v.size() / 2];
  double ss = 0;
  for (double x : v) ss += (x - median) * (x - median);
  return std::make_pair(median, std::sqrt(ss / static_cast<double>(v.size() - 1)));
}

nlohmann::json CodeCalibration::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (Target t : kAllTargets) {
    const auto& c = changes[static_cast<int>(t)];
    const auto& e = estimate_log_ratio[static_cast<int>(t)];
    const auto& r = repeat_log_error[static_cast<int>(t)];
    if (c.empty() && e.empty() && r.empty()) continue;
    nlohmann::json pairs = nlohmann::json::array();
    for (const Change& k : c) pairs.push_back({k.x, k.y, k.before, k.kind});
    out[std::string(NameOf(t))] = {
        {"changes", std::move(pairs)}, {"estimate_log_ratio", e}, {"repeat_log_error", r}};
  }
  return out;
}

CodeCalibration CodeCalibration::FromJson(const nlohmann::json& j) {
  CodeCalibration c;
  if (!j.is_object()) return c;
  for (Target t : kAllTargets) {
    auto it = j.find(std::string(NameOf(t)));
    if (it == j.end() || !it->is_object()) continue;
    // Each change as [x, y, before, kind]; anything else (an older `train`'s sums) is left
    // out, and the next `train` writes them again.
    if (auto ch = it->find("changes"); ch != it->end() && ch->is_array()) {
      for (const auto& k : *ch) {
        if (k.is_array() && k.size() == 4 && k[0].is_number() && k[1].is_number() &&
            k[2].is_number() && k[3].is_string()) {
          c.AddChange(t, k[0].get<double>(), k[1].get<double>(), k[2].get<double>(),
                      k[3].get<std::string>());
        }
      }
    }
    if (auto e = it->find("estimate_log_ratio"); e != it->end() && e->is_array()) {
      for (const auto& v : *e) {
        if (v.is_number()) c.estimate_log_ratio[static_cast<int>(t)].push_back(v.get<double>());
      }
    }
    if (auto r = it->find("repeat_log_error"); r != it->end() && r->is_array()) {
      auto& errors = c.repeat_log_error[static_cast<int>(t)];
      for (const auto& v : *r) {
        if (v.is_number()) errors.push_back(v.get<double>());
      }
      if (errors.size() > kMaxRepeats) {
        errors.erase(errors.begin(), errors.end() - static_cast<std::ptrdiff_t>(kMaxRepeats));
      }
    }
  }
  return c;
}

std::string ProgramKey(const JobRecord& job) {
  return job.request.user + '\x1f' + job.request.job_name;
}

CodeCalibration CalibrateOnJobs(const std::vector<JobRecord>& jobs,
                                const std::unordered_map<std::string, CodeReading>& code) {
  CodeCalibration cal;
  std::vector<const JobRecord*> order;
  for (const auto& j : jobs) {
    if (j.submit_time) order.push_back(&j);
  }
  std::stable_sort(order.begin(), order.end(), [](const JobRecord* a, const JobRecord* b) {
    return *a->submit_time < *b->submit_time;
  });
  std::unordered_map<std::string, std::vector<const JobRecord*>> runs;
  for (const JobRecord* j : order) {
    auto& earlier = runs[ProgramKey(*j)];
    auto it = code.find(j->job_id);
    if (it != code.end() && j->end_time) {
      // The program's runs with code that had ended by j's submission, newest first.
      std::vector<const JobRecord*> ended;
      for (auto k = earlier.rbegin(); k != earlier.rend(); ++k) {
        if ((*k)->end_time && *(*k)->end_time <= *j->submit_time && code.count((*k)->job_id) > 0) {
          ended.push_back(*k);
        }
      }
      const CodeReading* before_code = ended.empty() ? nullptr : &code.at(ended[0]->job_id);
      std::string kind = before_code != nullptr ? ChangeKind(*before_code, it->second) : "";
      for (Target t : kAllTargets) {
        auto y = TargetValue(*j, t);
        if (!y || *y <= 0) continue;
        if (auto f = CodeFigure(t, it->second)) cal.AddEstimate(t, *y, *f);
        if (before_code == nullptr) continue;
        std::vector<double> same;
        for (const JobRecord* k : ended) {
          if (same.size() >= kRepeatRuns) break;
          if (k != ended[0] && !SameCode(code.at(k->job_id), *before_code)) break;
          if (auto v = TargetValue(*k, t); v && *v > 0) same.push_back(*v);
        }
        auto before = SameCodeMean(same);
        if (!before) continue;
        if (SameCode(*before_code, it->second)) {
          cal.AddRepeat(t, *y, *before);
        } else if (auto x = CodeLogRatio(t, *before_code, it->second, before)) {
          cal.AddChange(t, *x, std::log(*y / *before), *before, kind);
        }
      }
    }
    earlier.push_back(j);
  }
  return cal;
}

double WidenLogOffset(double g, double q, double s) {
  if (!std::isfinite(g) || s <= 0 || q == 0.5) return g;
  double z = NormalQuantile(q) * s;
  double more = std::sqrt(g * g + z * z) - std::abs(g);
  return q < 0.5 ? g - more : g + more;
}

}  // namespace rightsize

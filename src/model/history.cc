#include "model/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace rightsize {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// VPA's recommender: the 90th percentile of a histogram whose samples decay with a 24 h
// half-life, plus a 15 % safety margin.
constexpr double kVpaPercentile = 0.9;
constexpr double kVpaMargin = 1.15;
constexpr double kVpaHalfLifeS = 24 * 3600;

constexpr size_t kRecentForMedian = 2048;
constexpr size_t kMedianEvery = 256;

float Log(double v, Target t) { return static_cast<float>(std::log(std::max(v, InfoOf(t).floor))); }

uint64_t Fnv(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h ^= 0xff;  // field separator, so ("ab","c") != ("a","bc")
  h *= 0x100000001b3ULL;
  return h;
}

bool Killed(const JobRecord& job) {
  const std::string& s = job.outcome.state;
  return s == "TIMEOUT" || s == "OUT_OF_MEMORY" || s == "DEADLINE";
}

float Median(std::vector<float> v) {
  if (v.empty()) return kNaN;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

std::string RequestSignature(const JobRecord& job) {
  const ResourceRequest& r = job.request;
  // No GPUs written (sacct without gres/gpu) and zero GPUs (a parsed script) are the same
  // request: told apart, a script never found the history of its own past runs.
  return fmt::format("{}|{}|{}|{}", r.time_limit_s.value_or(-1), r.cpus.value_or(-1),
                     r.memory_bytes.value_or(-1), r.gpus.value_or(0));
}

std::string_view NameOf(Baseline b) {
  switch (b) {
    case Baseline::kRequest:
      return "request";
    case Baseline::kUserMean:
      return "user_mean";
    case Baseline::kLast2:
      return "last2";
    case Baseline::kVpa:
      return "vpa";
  }
  return "?";
}

std::vector<int> FeatureLayout::ColumnsFor(Target t) const {
  std::vector<int> cols;
  for (size_t i = 0; i < common; ++i) cols.push_back(static_cast<int>(i));
  for (size_t i = 0; i < block; ++i) cols.push_back(static_cast<int>(BlockStart(t) + i));
  for (size_t i = TailStart(); i < names.size(); ++i) cols.push_back(static_cast<int>(i));
  return cols;
}

namespace {

// A column's name and, for `predict`'s why, its meaning in words.
struct Column {
  const char* name;
  const char* words;
};

constexpr Column kViews[] = {{"user_name_request", "your jobs of this name and request"},
                             {"user_request", "your jobs with this request"},
                             {"user_name", "your jobs of this name"},
                             {"user", "your jobs"},
                             {"program", "every user's jobs of this program"}};
constexpr Column kRequestColumns[] = {{"log_req_time", "the time limit"},
                                      {"log_req_cpus", "the CPUs asked for"},
                                      {"log_req_mem", "the memory asked for"},
                                      {"req_gpus", "the GPUs asked for"},
                                      {"log_req_nodes", "the nodes asked for"},
                                      {"hour_of_day", "the hour of submission"},
                                      {"day_of_week", "the day of the week"},
                                      {"partition_code", "the partition"},
                                      {"share_of_cluster", "the share of the cluster asked for"},
                                      {"user_last_killed", "whether your last job hit a limit"}};
// Per target: the request and the user's mean, then each view's statistics ("the median of "
// + the view's words).
constexpr Column kTargetColumns[] = {{"log_request", "the request"},
                                     {"request_vs_last", "the request against your previous one"},
                                     {"user_mean", "your jobs' mean"}};
constexpr Column kViewStats[] = {{"last", "the last of "},
                                 {"last2", "the mean of the last two of "},
                                 {"median", "the median of "},
                                 {"max", "the largest of "},
                                 {"used_share", "the share of their request used by "}};
constexpr Column kNodeColumns[] = {{"log_node_cpus", "the partition's cores per node"},
                                   {"log_node_mem", "the partition's memory per node"},
                                   {"node_gpus", "the partition's GPUs per node"},
                                   {"cpus_share_of_node", "the share of a node's cores asked for"},
                                   {"mem_share_of_node", "the share of a node's memory asked for"}};

FeatureLayout MakeLayout() {
  FeatureLayout l;
  auto add = [&l](std::string name, std::string words) {
    l.names.push_back(std::move(name));
    l.words.push_back(std::move(words));
  };
  for (const Column& c : kRequestColumns) add(c.name, c.words);
  for (const Column& v : kViews) {
    add(fmt::format("{}_jobs", v.name), fmt::format("how many of {} ran", v.words));
  }
  for (const Column& v : kViews) {
    add(fmt::format("{}_age", v.name), fmt::format("the time since {} last ran", v.words));
  }
  l.common = l.names.size();
  for (Target t : kAllTargets) {
    size_t before = l.names.size();
    std::string_view tn = NameOf(t);
    for (const Column& c : kTargetColumns) add(fmt::format("{}.{}", tn, c.name), c.words);
    for (const Column& v : kViews) {
      for (const Column& s : kViewStats) {
        add(fmt::format("{}.{}_{}", tn, v.name, s.name), fmt::format("{}{}", s.words, v.words));
      }
    }
    l.block = l.names.size() - before;
  }
  for (const Column& c : kNodeColumns) add(c.name, c.words);
  return l;
}

}  // namespace

const FeatureLayout& Layout() {
  static const FeatureLayout layout = MakeLayout();
  return layout;
}

std::string DescribeFeature(std::string_view name) {
  const FeatureLayout& l = Layout();
  auto it = std::find(l.names.begin(), l.names.end(), name);
  return it == l.names.end() ? std::string(name)
                             : l.words[static_cast<size_t>(it - l.names.begin())];
}

template <typename Fn>
void History::View::ForEachNewest(Fn fn) const {
  size_t n = ring.size();
  for (size_t i = 0; i < n; ++i) {
    // `next` is the oldest once the ring is full; before that the back is the newest.
    size_t idx = (next + n - 1 - i) % n;
    if (!fn(ring[idx])) return;
  }
}

History::History() {
  global_median_.fill(kNaN);
  for (auto& r : recent_) r.reserve(kRecentForMedian);
}

uint64_t History::Key(ViewKind kind, const JobRecord& job) {
  uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(kind);
  switch (kind) {
    case kUserNameRequest:
      return Fnv(Fnv(Fnv(h, job.request.user), job.request.job_name), RequestSignature(job));
    case kUserRequest:
      return Fnv(Fnv(h, job.request.user), RequestSignature(job));
    case kUserName:
      return Fnv(Fnv(h, job.request.user), job.request.job_name);
    case kUser:
      return Fnv(h, job.request.user);
    case kProgram:
      return Fnv(h, job.request.job_name);
    case kNumViews:
      break;
  }
  return h;
}

const History::View* History::Find(ViewKind kind, const JobRecord& job) const {
  if (kind == kProgram && job.request.job_name.empty()) return nullptr;
  auto it = views_[kind].find(Key(kind, job));
  return it == views_[kind].end() ? nullptr : &it->second;
}

void History::AddFinished(const JobRecord& job) {
  Sample s;
  s.end = job.end_time.value_or(0);
  s.killed = Killed(job);
  for (Target t : kAllTargets) {
    int i = static_cast<int>(t);
    auto y = TargetValue(job, t);
    auto r = TargetRequest(job, t);
    s.y[i] = y ? static_cast<float>(*y) : kNaN;
    s.req[i] = r ? static_cast<float>(*r) : kNaN;
    if (!y) continue;
    auto& recent = recent_[i];
    if (recent.size() < kRecentForMedian) {
      recent.push_back(s.y[i]);
    } else {
      recent[recent_next_[i] % kRecentForMedian] = s.y[i];
    }
    if (++recent_next_[i] % kMedianEvery == 1 || recent.size() < kMedianEvery) {
      global_median_[i] = Median(recent);
    }
  }
  for (int k = 0; k < kNumViews; ++k) {
    auto kind = static_cast<ViewKind>(k);
    if (kind == kProgram && job.request.job_name.empty()) continue;
    View& v = views_[k][Key(kind, job)];
    if (v.ring.size() < kRing[k]) {
      v.ring.push_back(s);
    } else {
      v.ring[v.next] = s;
      v.next = (v.next + 1) % kRing[k];
    }
    ++v.n;
    for (int i = 0; i < kNumTargets; ++i) {
      if (std::isnan(s.y[i])) continue;
      ++v.n_target[i];
      v.sum_target[i] += s.y[i];
    }
  }
  ++finished_;
}

void History::Features(const JobRecord& job, int64_t now, const ClusterContext& cluster,
                       float* out) const {
  const FeatureLayout& layout = Layout();
  std::fill(out, out + layout.cols(), kNaN);
  const ResourceRequest& r = job.request;
  size_t c = 0;
  auto put = [&](std::optional<double> v) { out[c++] = v ? static_cast<float>(*v) : kNaN; };
  auto log_of = [](auto v) -> std::optional<double> {
    if (!v || *v <= 0) return std::nullopt;
    return std::log(static_cast<double>(*v));
  };
  put(log_of(r.time_limit_s));
  put(log_of(job.AllocatedCpus()));
  put(log_of(job.AllocatedMemoryBytes()));
  put(static_cast<double>(job.AllocatedGpus().value_or(0)));  // none listed: none
  put(r.nodes ? std::optional<double>(std::log1p(*r.nodes)) : std::nullopt);
  int64_t day_s = ((now % 86400) + 86400) % 86400;
  put(static_cast<double>(day_s) / 3600.0);
  put(static_cast<double>(((now / 86400) + 4) % 7));  // 1970-01-01 was a Thursday
  put(r.partition.empty() ? std::nullopt
                          : std::optional<double>(static_cast<double>(
                                Fnv(0xcbf29ce484222325ULL, r.partition) % 1021)));
  auto cpus = job.AllocatedCpus();
  put(cpus && cluster.total_cpus > 0 ? std::optional<double>(*cpus / cluster.total_cpus)
                                     : std::nullopt);
  const View* views[kNumViews];
  for (int k = 0; k < kNumViews; ++k) views[k] = Find(static_cast<ViewKind>(k), job);
  std::optional<double> last_killed;
  if (views[kUser] != nullptr) {
    views[kUser]->ForEachNewest([&](const Sample& s) {
      last_killed = s.killed ? 1.0 : 0.0;
      return false;
    });
  }
  put(last_killed);
  for (const View* v : views) put(std::log1p(v == nullptr ? 0.0 : static_cast<double>(v->n)));
  for (const View* v : views) {
    std::optional<double> age;
    if (v != nullptr) {
      v->ForEachNewest([&](const Sample& s) {
        age = std::log1p(static_cast<double>(std::max<int64_t>(0, now - s.end)));
        return false;
      });
    }
    put(age);
  }
  // One block per target.
  for (Target t : kAllTargets) {
    int ti = static_cast<int>(t);
    c = layout.BlockStart(t);
    auto req = TargetRequest(job, t);
    put(req ? std::optional<double>(Log(*req, t)) : std::nullopt);
    std::optional<double> vs_last;
    if (views[kUser] != nullptr && req) {
      views[kUser]->ForEachNewest([&](const Sample& s) {
        if (std::isnan(s.req[ti])) return true;
        vs_last = std::log(*req / std::max<double>(s.req[ti], InfoOf(t).floor));
        return false;
      });
    }
    put(vs_last);
    const View* user = views[kUser];
    put(user != nullptr && user->n_target[ti] > 0
            ? std::optional<double>(Log(user->sum_target[ti] / user->n_target[ti], t))
            : std::nullopt);
    for (const View* v : views) {
      size_t start = c;
      c += 5;
      if (v == nullptr || v->n_target[ti] == 0) continue;
      float ys[32];
      float share_sum = 0;
      int n = 0, shares = 0;
      v->ForEachNewest([&](const Sample& s) {
        if (!std::isnan(s.y[ti])) {
          ys[n++] = s.y[ti];
          if (!std::isnan(s.req[ti]) && s.req[ti] > 0) {
            share_sum += s.y[ti] / s.req[ti];
            ++shares;
          }
        }
        return n < 32;
      });
      if (n == 0) continue;
      out[start] = Log(ys[0], t);
      out[start + 1] = n >= 2 ? Log((ys[0] + ys[1]) / 2, t) : out[start];
      std::vector<float> sorted(ys, ys + n);
      std::sort(sorted.begin(), sorted.end());
      out[start + 2] = Log(sorted[sorted.size() / 2], t);
      out[start + 3] = Log(sorted.back(), t);
      if (shares > 0) out[start + 4] = share_sum / static_cast<float>(shares);
    }
  }
  c = layout.TailStart();
  // The nodes it runs on: 4 cores of a 4-core node and 4 of a 128-core node are unlike jobs.
  const NodeShape* node = cluster.NodesOf(r.partition);
  auto positive = [](double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; };
  put(node ? log_of(positive(node->cpus)) : std::nullopt);
  put(node ? log_of(positive(node->memory_bytes)) : std::nullopt);
  put(node ? std::optional<double>(node->gpus) : std::nullopt);
  auto per_node = [&](std::optional<double> total, double capacity) -> std::optional<double> {
    if (!total || capacity <= 0) return std::nullopt;
    return *total / std::max<double>(1, static_cast<double>(r.nodes.value_or(1))) / capacity;
  };
  auto mem = job.AllocatedMemoryBytes();
  put(node ? per_node(cpus, node->cpus) : std::nullopt);
  put(node ? per_node(mem ? std::optional<double>(static_cast<double>(*mem)) : std::nullopt,
                      node->memory_bytes)
           : std::nullopt);
}

float History::Anchor(const JobRecord& job, Target t,
                      const std::array<float, kNumBaselines>& baselines, std::string* from) const {
  int ti = static_cast<int>(t);
  auto say = [from](const char* words) {
    if (from != nullptr) *from = words;
  };
  auto req = TargetRequest(job, t);
  // CPU cores used grow with the cores given: a user's past job of another size says how much
  // of its allocation it kept busy, not how many cores this one will. (On HPC2N, jobs that
  // used all of 24–32 cores were started from a past 8-core job's 8 and predicted at 8.)
  bool scaled = t == Target::kCpuCores && req && *req > 0;
  auto used = [&](float y, float of) {
    return scaled && of > 0 && !std::isnan(of) ? y / of * static_cast<float>(*req) : y;
  };
  for (ViewKind kind : {kUserNameRequest, kUserRequest, kUserName}) {
    const View* v = Find(kind, job);
    if (v == nullptr || v->n_target[ti] == 0) continue;
    say(kind == kUserNameRequest ? "your last job of this name and request"
        : kind == kUserRequest   ? "your last job with this request"
        : scaled                 ? "your last job of this name, scaled to this request"
                                 : "your last job of this name");
    float last = std::numeric_limits<float>::quiet_NaN();
    v->ForEachNewest([&](const Sample& s) {
      if (std::isnan(s.y[ti])) return true;
      last = used(s.y[ti], s.req[ti]);
      return false;
    });
    return req ? std::min(last, static_cast<float>(*req)) : last;
  }
  // Where Baselines() took last-two from; CPU cores from the share of their cores the last
  // two jobs used.
  float ys[2], reqs[2];
  bool two = LastTwo(Find(kUser, job), ti, ys, reqs);
  if (two && scaled) {
    say("the mean of your last two jobs, scaled to this request");
    return std::min((used(ys[0], reqs[0]) + used(ys[1], reqs[1])) / 2, static_cast<float>(*req));
  }
  say(two ? "the mean of your last two jobs" : req ? "the request" : "the cluster's recent median");
  return baselines[static_cast<int>(Baseline::kLast2)];
}

bool History::LastTwo(const View* user, int ti, float* ys, float* reqs) {
  if (user == nullptr || user->n_target[ti] < 2) return false;
  int n = 0;
  user->ForEachNewest([&](const Sample& s) {
    if (!std::isnan(s.y[ti])) {
      if (reqs != nullptr) reqs[n] = s.req[ti];
      ys[n++] = s.y[ti];
    }
    return n < 2;
  });
  return n == 2;
}

std::array<float, kNumBaselines> History::Baselines(const JobRecord& job, int64_t now,
                                                    Target t) const {
  int ti = static_cast<int>(t);
  std::array<float, kNumBaselines> out;
  out.fill(kNaN);
  auto req = TargetRequest(job, t);
  float fallback = req ? static_cast<float>(*req) : global_median_[ti];
  out[static_cast<int>(Baseline::kRequest)] = req ? static_cast<float>(*req) : kNaN;

  const View* user = Find(kUser, job);
  float mean = fallback;
  if (user != nullptr && user->n_target[ti] > 0) {
    mean = static_cast<float>(user->sum_target[ti] / user->n_target[ti]);
  }
  out[static_cast<int>(Baseline::kUserMean)] = mean;

  // Tsafrir et al. (2007): the mean of the user's last two jobs, never above the request;
  // the request itself until there are two.
  float last2 = fallback;
  if (float ys[2]; LastTwo(user, ti, ys)) {
    last2 = (ys[0] + ys[1]) / 2;
    if (req) last2 = std::min(last2, static_cast<float>(*req));
  }
  out[static_cast<int>(Baseline::kLast2)] = last2;

  // VPA: per workload (the user's jobs of this name), else per user.
  const View* v = Find(kUserName, job);
  if (v == nullptr || v->n_target[ti] == 0) v = user;
  float vpa = fallback;
  if (v != nullptr && v->n_target[ti] > 0) {
    std::vector<std::pair<float, double>> weighted;
    double total = 0;
    v->ForEachNewest([&](const Sample& s) {
      if (std::isnan(s.y[ti])) return true;
      double w = std::exp2(static_cast<double>(s.end - now) / kVpaHalfLifeS);
      w = std::max(w, 1e-12);
      weighted.emplace_back(s.y[ti], w);
      total += w;
      return true;
    });
    std::sort(weighted.begin(), weighted.end());
    double acc = 0;
    for (const auto& [y, w] : weighted) {
      acc += w;
      if (acc >= kVpaPercentile * total) {
        vpa = static_cast<float>(y * kVpaMargin);
        break;
      }
    }
  }
  out[static_cast<int>(Baseline::kVpa)] = vpa;
  return out;
}

}  // namespace rightsize

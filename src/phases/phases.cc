#include "phases/phases.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace rightsize {

namespace {

struct MetricSpec {
  const char* name;
  bool running_total;  // segment its rate
  bool bursty;         // a rate or utilisation: its sample-to-sample swings are noise
};

constexpr MetricSpec kMetrics[] = {
    {"cpu_cores", false, true},    {"memory_bytes", false, false},
    {"gpu_util_pct", false, true}, {"gpu_memory_bytes", false, false},
    {"io_read_bytes", true, true}, {"io_write_bytes", true, true}};

// Longest series the quadratic partition runs on; longer ones are averaged down to it.
constexpr size_t kMaxPoints = 3000;

// A metric on the common time grid.
struct Column {
  std::string name;
  std::vector<double> v;  // raw value (rate for running totals) at each grid time
  std::vector<double> z;  // scaled: v / peak / noise
  double peak = 0;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

// The noise of a scaled series, at least 5 % of the peak so that a smooth series does not split
// on every bend. A level's (memory): the median absolute step, as a standard deviation (robust
// to its real changes). A rate's (CPU, I/O, GPU utilisation): the steps' standard deviation, so
// that a program working in bursts, or slowed now and then by its neighbours on the node, is
// one phase, not one per burst.
double Noise(const std::vector<double>& x, bool bursty) {
  std::vector<double> d;
  double sum2 = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    d.push_back(std::abs(x[i] - x[i - 1]));
    sum2 += d.back() * d.back();
  }
  double sigma = Quantile(d, 0.5) / (0.6745 * std::sqrt(2.0));
  if (bursty && !d.empty()) sigma = std::sqrt(sum2 / static_cast<double>(d.size()) / 2);
  return std::max(sigma, 0.05);
}

// Prefix sums for O(1) least-squares line fits over any range of the grid.
struct Prefix {
  std::vector<double> n, x, xx, y, xy, yy;
  Prefix(const std::vector<double>& xs, const std::vector<double>& ys) {
    size_t k = xs.size();
    n.assign(k + 1, 0);
    x = xx = y = xy = yy = n;
    for (size_t i = 0; i < k; ++i) {
      n[i + 1] = n[i] + 1;
      x[i + 1] = x[i] + xs[i];
      xx[i + 1] = xx[i] + xs[i] * xs[i];
      y[i + 1] = y[i] + ys[i];
      xy[i + 1] = xy[i] + xs[i] * ys[i];
      yy[i + 1] = yy[i] + ys[i] * ys[i];
    }
  }
  // Residual sum of squares of the best line through points [a, b).
  double Sse(size_t a, size_t b) const {
    double cn = n[b] - n[a], sx = x[b] - x[a], sxx = xx[b] - xx[a];
    double sy = y[b] - y[a], sxy = xy[b] - xy[a], syy = yy[b] - yy[a];
    double vy = syy - sy * sy / cn;
    double vx = sxx - sx * sx / cn;
    double cxy = sxy - sx * sy / cn;
    double sse = vx > 1e-12 ? vy - cxy * cxy / vx : vy;
    return std::max(sse, 0.0);
  }
};

}  // namespace

std::vector<Phase> DetectPhases(const JobSeries& series, const PhaseOptions& options) {
  // The grid: every time any read metric was sampled at.
  std::set<int64_t> times;
  for (const MetricSpec& m : kMetrics) {
    auto it = series.find(m.name);
    if (it == series.end()) continue;
    for (const SeriesPoint& p : it->second) {
      if (std::isfinite(p.value)) times.insert(p.t_s);
    }
  }
  std::vector<int64_t> grid(times.begin(), times.end());
  if (grid.empty()) return {};
  std::vector<Column> cols;
  for (const MetricSpec& m : kMetrics) {
    auto it = series.find(m.name);
    if (it == series.end() || it->second.empty()) continue;
    Column c{m.name, std::vector<double>(grid.size(), 0), {}};
    size_t k = 0;
    double last = 0, prev_total = 0;
    int64_t prev_t = 0;
    bool have_prev = false;
    const auto& pts = it->second;
    for (size_t g = 0; g < grid.size(); ++g) {
      while (k < pts.size() && pts[k].t_s <= grid[g]) {
        if (!std::isfinite(pts[k].value)) {
          ++k;
          continue;
        }
        if (m.running_total) {
          if (have_prev && pts[k].t_s > prev_t) {
            last =
                std::max(0.0, pts[k].value - prev_total) / static_cast<double>(pts[k].t_s - prev_t);
          }
          prev_total = pts[k].value;
          prev_t = pts[k].t_s;
          have_prev = true;
        } else {
          last = pts[k].value;
        }
        ++k;
      }
      c.v[g] = last;  // a level holds until the next sample
    }
    double peak = *std::max_element(c.v.begin(), c.v.end());
    if (!(peak > 0)) continue;
    c.peak = peak;
    c.z.resize(c.v.size());
    for (size_t g = 0; g < c.v.size(); ++g) c.z[g] = c.v[g] / peak;
    double noise = Noise(c.z, m.bursty);
    for (double& z : c.z) z /= noise;
    cols.push_back(std::move(c));
  }
  int64_t job_end = grid.back() + 1;
  if (cols.empty()) return {Phase{grid.front(), job_end, {}}};

  // Average down long series (a week at 10-second buckets) to bound the partition's cost.
  size_t stride = (grid.size() + kMaxPoints - 1) / kMaxPoints;
  std::vector<double> xs;
  std::vector<size_t> first_index;  // the grid index each partition point starts at
  std::vector<std::vector<double>> ys(cols.size());
  for (size_t g = 0; g < grid.size(); g += stride) {
    size_t e = std::min(grid.size(), g + stride);
    first_index.push_back(g);
    xs.push_back(static_cast<double>(grid[g] - grid.front()));
    for (size_t c = 0; c < cols.size(); ++c) {
      double s = 0;
      for (size_t i = g; i < e; ++i) s += cols[c].z[i];
      ys[c].push_back(s / static_cast<double>(e - g));
    }
  }
  size_t n = xs.size();
  std::vector<Prefix> prefix;
  prefix.reserve(cols.size());
  for (const auto& y : ys) prefix.emplace_back(xs, y);
  double penalty = options.penalty > 0 ? options.penalty
                                       : 4.0 * static_cast<double>(cols.size()) *
                                             std::log(std::max<double>(static_cast<double>(n), 3));
  // The shortest phase in partition points: min_phase_s at the grid's median spacing, >= 3 so
  // that a line fit has something to fit.
  std::vector<double> gaps;
  for (size_t i = 1; i < n; ++i) gaps.push_back(xs[i] - xs[i - 1]);
  double step_s = std::max(Quantile(gaps, 0.5), 1.0);
  size_t min_len = std::max<size_t>(
      3, static_cast<size_t>(std::ceil(static_cast<double>(options.min_phase_s) / step_s)));

  // best[j]: least cost of points [0, j); from[j]: where its last segment starts.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, kInf);
  std::vector<size_t> from(n + 1, 0);
  best[0] = -penalty;
  for (size_t j = 1; j <= n; ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (best[i] == kInf) continue;
      bool whole = i == 0 && j == n;
      if (j - i < min_len && !whole) continue;
      double cost = best[i] + penalty;
      for (const Prefix& p : prefix) cost += p.Sse(i, j);
      if (cost < best[j]) {
        best[j] = cost;
        from[j] = i;
      }
    }
  }
  std::vector<size_t> cuts;  // segment starts, in partition points
  if (best[n] == kInf) {
    cuts.push_back(0);
  } else {
    for (size_t j = n; j > 0; j = from[j]) cuts.push_back(from[j]);
    std::reverse(cuts.begin(), cuts.end());
  }

  // Grid index where each segment starts, plus the end.
  std::vector<size_t> bounds;
  for (size_t c : cuts) bounds.push_back(first_index[c]);
  bounds.push_back(grid.size());
  // A change that moves no metric's mean by kMergeShare of its peak is not worth a job step
  // (a neighbour's load slowing the job for a while, a program growing its memory in steps):
  // merge the most alike neighbours until every pair differs by that much.
  auto mean_share = [&](const Column& c, size_t a, size_t b) {
    double sum = 0;
    for (size_t i = a; i < b; ++i) sum += c.v[i];
    return sum / static_cast<double>(b - a) / c.peak;
  };
  while (bounds.size() > 2) {
    size_t best_k = 0;
    double best_diff = kInf;
    for (size_t k = 1; k + 1 < bounds.size(); ++k) {
      double diff = 0;
      for (const Column& c : cols) {
        diff = std::max(diff, std::abs(mean_share(c, bounds[k - 1], bounds[k]) -
                                       mean_share(c, bounds[k], bounds[k + 1])));
      }
      if (diff < best_diff) {
        best_diff = diff;
        best_k = k;
      }
    }
    if (best_diff >= options.merge_share) break;
    bounds.erase(bounds.begin() + static_cast<std::ptrdiff_t>(best_k));
  }

  std::vector<Phase> phases;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    size_t g0 = bounds[s];
    size_t g1 = bounds[s + 1];
    Phase p;
    p.start_s = grid[g0];
    p.end_s = g1 < grid.size() ? grid[g1] : job_end;
    for (const Column& c : cols) {
      std::vector<double> v(c.v.begin() + static_cast<std::ptrdiff_t>(g0),
                            c.v.begin() + static_cast<std::ptrdiff_t>(g1));
      PhaseUse u;
      double sum = 0;
      for (double x : v) sum += x;
      u.mean = v.empty() ? 0 : sum / static_cast<double>(v.size());
      u.peak = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
      u.p95 = Quantile(v, 0.95);
      p.use[c.name] = u;
    }
    phases.push_back(std::move(p));
  }
  return phases;
}

SplitSuggestion SuggestSplit(const std::vector<Phase>& phases, Reservation reserved) {
  SplitSuggestion out;
  if (phases.empty()) return out;
  auto use = [](const Phase& p, const char* metric) {
    auto it = p.use.find(metric);
    return it == p.use.end() ? PhaseUse{} : it->second;
  };
  auto whole_cores = [](double p95) { return std::max(1.0, std::ceil(p95 - 1e-9)); };
  if (reserved.cores <= 0) {
    // The whole run's 95th percentile is at least the longest-weighted phases'; take the
    // largest phase p95, the single-step request that would not slow any phase down.
    for (const Phase& p : phases) {
      reserved.cores = std::max(reserved.cores, whole_cores(use(p, "cpu_cores").p95));
    }
  }
  if (reserved.memory_bytes <= 0) {
    for (const Phase& p : phases) {
      reserved.memory_bytes = std::max(reserved.memory_bytes, use(p, "memory_bytes").peak);
    }
  }
  out.reserved = reserved;
  for (const Phase& p : phases) {
    double d = static_cast<double>(p.end_s - p.start_s);
    SplitStep s;
    s.start_s = p.start_s;
    s.end_s = p.end_s;
    s.cores = std::min(reserved.cores, whole_cores(use(p, "cpu_cores").p95));
    s.memory_bytes = std::min(reserved.memory_bytes, use(p, "memory_bytes").peak);
    s.idle_core_s = std::max(0.0, reserved.cores - use(p, "cpu_cores").mean) * d;
    s.idle_memory_byte_s = std::max(0.0, reserved.memory_bytes - use(p, "memory_bytes").mean) * d;
    out.reserved_core_s += reserved.cores * d;
    out.reserved_memory_byte_s += reserved.memory_bytes * d;
    out.freed_core_s += (reserved.cores - s.cores) * d;
    out.freed_memory_byte_s += (reserved.memory_bytes - s.memory_bytes) * d;
    out.steps.push_back(s);
  }
  out.extra_starts = static_cast<int64_t>(out.steps.size()) - 1;
  return out;
}

nlohmann::json PhasesJson(const std::vector<Phase>& phases, const SplitSuggestion& split) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < phases.size() && i < split.steps.size(); ++i) {
    nlohmann::json use = nlohmann::json::object();
    for (const auto& [m, u] : phases[i].use) {
      use[m] = {{"mean", u.mean}, {"p95", u.p95}, {"peak", u.peak}};
    }
    const SplitStep& s = split.steps[i];
    out.push_back({{"start_s", phases[i].start_s},
                   {"end_s", phases[i].end_s},
                   {"use", use},
                   {"step_cores", s.cores},
                   {"step_memory_bytes", s.memory_bytes},
                   {"idle_core_s", s.idle_core_s},
                   {"idle_memory_byte_s", s.idle_memory_byte_s}});
  }
  return {{"phases", out},
          {"split",
           {{"reserved_cores", split.reserved.cores},
            {"reserved_memory_bytes", split.reserved.memory_bytes},
            {"reserved_core_s", split.reserved_core_s},
            {"reserved_memory_byte_s", split.reserved_memory_byte_s},
            {"freed_core_s", split.freed_core_s},
            {"freed_memory_byte_s", split.freed_memory_byte_s},
            {"extra_queue_waits", split.extra_starts}}}};
}

}  // namespace rightsize

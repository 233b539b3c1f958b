#include "report/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <vector>

#include "core/units.h"

namespace rightsize {

namespace {

using nlohmann::json;

// Rounds for output so that the JSON is stable and readable (4 decimals).
double Round4(double v) { return std::round(v * 1e4) / 1e4; }
json Num(double v) { return Round4(v); }
json Num(const std::optional<double>& v) { return v ? json(Round4(*v)) : json(nullptr); }
json Time(const std::optional<int64_t>& t) {
  return t ? json(FormatTimestamp(*t) + "Z") : json(nullptr);
}
std::string Date(int64_t t) { return FormatTimestamp(t).substr(0, 10); }

// Display width in code points (UTF-8 continuation bytes do not count).
size_t Width(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string Or(const std::optional<double>& v, const std::function<std::string(double)>& f,
               const char* unknown = "unknown") {
  return v ? f(*v) : std::string(unknown);
}

// A plain-text table: first column left-aligned, the rest right-aligned.
class TextTable {
 public:
  // Columns from `left_from` on are left-aligned too (free text such as notes).
  explicit TextTable(std::vector<std::string> header, size_t left_from = SIZE_MAX)
      : left_from_(left_from) {
    rows_.push_back(std::move(header));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render(const std::string& indent = "  ") const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      if (widths.size() < row.size()) widths.resize(row.size(), 0);
      for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < row.size(); ++i) {
        std::string pad(widths[i] - Width(row[i]), ' ');
        if (i == 0) {
          line += row[i] + pad;
        } else if (i >= left_from_) {
          line += "  " + row[i] + pad;
        } else {
          line += "  " + pad + row[i];
        }
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  size_t left_from_;
  std::vector<std::vector<std::string>> rows_;
};

// "1 job", "3,170 jobs".
std::string Jobs(int64_t n) {
  return FormatThousands(static_cast<double>(n), 0) + (n == 1 ? " job" : " jobs");
}

// Prices keep their significant digits: "$0.033", "$3.1606".
std::string Price(double v) { return fmt::format("${:.5g}", v); }

// Wraps `text` at `width` columns with `indent` before every line.
std::string Wrap(std::string_view text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    if (!line.empty() && Width(line) + 1 + Width(word) > width) {
      out += indent + line + "\n";
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
    pos = end + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string Pct(const std::optional<double>& r) { return Or(r, FormatPercent); }
std::string Amt(const std::optional<double>& v) { return Or(v, FormatAmount); }
std::string Usd(const std::optional<double>& v) { return Or(v, FormatDollars); }

std::string ClusterText(const WasteReport& r) {
  if (r.clusters.empty()) return "no cluster";
  std::string out = r.clusters.size() == 1 ? "cluster " : "clusters ";
  for (size_t i = 0; i < r.clusters.size(); ++i) {
    if (i > 0) out += ", ";
    out += r.clusters[i];
  }
  return out;
}

std::string WindowText(const WasteReport& r) {
  auto from = r.since ? r.since : r.first_end;
  auto to = r.until ? r.until : r.last_end;
  if (!from || !to) return "no jobs with an end time";
  return fmt::format("jobs ending {} to {} ({:.1f} days)", FormatTimestamp(*from),
                     FormatTimestamp(*to), r.window_days);
}

// The plain-language summary: the first thing a reader sees, in every format.
std::vector<std::string> SummarySentences(const WasteReport& r) {
  std::vector<std::string> out;
  if (r.jobs_implausible > 0) {
    out.push_back(fmt::format(
        "{} stored {} implausible values and {} left out of every figure (the first: {}).",
        FormatThousands(static_cast<double>(r.jobs_implausible), 0),
        r.jobs_implausible == 1 ? "job has" : "jobs have", r.jobs_implausible == 1 ? "is" : "are",
        r.first_implausible));
  }
  if (r.daily_sparse) {
    out.push_back(
        "The jobs' end times span more than ten years: the daily figures list only the days "
        "with jobs.");
  }
  if (r.jobs == 0) {
    out.push_back("No jobs ended in this window, so there is nothing to report.");
    return out;
  }
  std::string s = fmt::format("Over {:.1f} days, {} jobs", r.window_days,
                              FormatThousands(static_cast<double>(r.jobs), 0));
  if (r.cpu.allocated) {
    s += fmt::format(" allocated {} core-hours", FormatAmount(*r.cpu.allocated));
    if (r.cpu.efficiency) {
      s += fmt::format(" and used {}", FormatPercent(*r.cpu.efficiency));
      if (r.cpu.jobs_with_usage < r.cpu.jobs_with_allocation) {
        s += fmt::format(" (of the {} whose CPU time is known)", Jobs(r.cpu.jobs_with_usage));
      }
    } else {
      s += " (their CPU use is unknown)";
    }
  } else {
    s += " ran (their CPU allocation is unknown)";
  }
  if (r.history_policy.core_hours && r.upper_bound.core_hours) {
    s += fmt::format(
        "; right-sizing would have freed between {} (history policy) and {} (upper bound) "
        "core-hours",
        FormatAmount(std::max(0.0, *r.history_policy.core_hours)),
        FormatAmount(*r.upper_bound.core_hours));
  }
  out.push_back(s + ".");
  if (r.memory.efficiency) {
    out.push_back(fmt::format("Memory: jobs used {} of the {} GB-hours they held ({} basis).",
                              FormatPercent(*r.memory.efficiency),
                              FormatAmount(*r.memory.allocated_with_usage), r.memory.used_basis));
  }
  if (r.gpu.gpu_jobs > 0) {
    std::string g = fmt::format("GPUs: {} GPU-hours over {} with GPUs", Amt(r.gpu.allocated),
                                Jobs(r.gpu.gpu_jobs));
    g += r.gpu.efficiency ? fmt::format(", {} busy.", FormatPercent(*r.gpu.efficiency))
                          : ", utilisation unknown.";
    out.push_back(g);
  }
  if (r.cost.wasted_dollars) {
    out.push_back(fmt::format("Cost at list prices: {} allocated, {} of it wasted.",
                              FormatDollars(r.cost.allocated_dollars),
                              FormatDollars(*r.cost.wasted_dollars)));
  }
  return out;
}

json ResourceJson(const ResourceWaste& w, const std::string& unit, bool priced) {
  json j = {
      {"allocated_" + unit, Num(w.allocated)},
      {"allocated_" + unit + "_with_usage", Num(w.allocated_with_usage)},
      {"used_" + unit, Num(w.used)},
      {"wasted_" + unit, Num(w.wasted)},
      {"efficiency", Num(w.efficiency)},
      {"jobs_with_allocation", w.jobs_with_allocation},
      {"jobs_with_usage", w.jobs_with_usage},
  };
  if (priced) {
    j["allocated_dollars"] = Num(w.allocated_dollars);
    j["used_dollars"] = Num(w.used_dollars);
    j["wasted_dollars"] = Num(w.wasted_dollars);
  }
  return j;
}

json AmountsJson(const RecoverableAmounts& a, const char* rule) {
  return {{"rule", rule},
          {"core_hours", Num(a.core_hours)},
          {"gb_hours", Num(a.gb_hours)},
          {"gpu_hours", Num(a.gpu_hours)},
          {"dollars", Num(a.dollars)}};
}

json GroupJson(const GroupRow& g) {
  return {{"key", g.key},
          {"jobs", g.jobs},
          {"wasted_core_hours", Num(g.wasted_core_hours)},
          {"wasted_gb_hours", Num(g.wasted_gb_hours)},
          {"wasted_gpu_hours", Num(g.wasted_gpu_hours)},
          {"wasted_dollars", Num(g.wasted_dollars)},
          {"allocated_dollars", Num(g.allocated_dollars)},
          {"cpu_efficiency", Num(g.cpu_efficiency)},
          {"memory_efficiency", Num(g.memory_efficiency)},
          {"gpu_efficiency", Num(g.gpu_efficiency)}};
}

const char* ByTitle(const std::string& by) {
  if (by == "account") return "account";
  if (by == "partition") return "partition";
  if (by == "gpu-type") return "GPU type";
  if (by == "job-name") return "job name";
  return "user";
}

TextTable GroupTable(const WasteReport& r, const std::vector<GroupRow>& rows) {
  TextTable t({ByTitle(r.by), "jobs", "wasted core-h", "wasted GB-h", "wasted GPU-h", "wasted $",
               "CPU eff", "mem eff", "GPU eff"});
  for (const auto& g : rows) {
    t.Add({SafeTerminalText(g.key, 32), FormatThousands(static_cast<double>(g.jobs), 0),
           FormatAmount(g.wasted_core_hours), FormatAmount(g.wasted_gb_hours),
           FormatAmount(g.wasted_gpu_hours), FormatDollars(g.wasted_dollars),
           Or(g.cpu_efficiency, FormatPercent, "-"), Or(g.memory_efficiency, FormatPercent, "-"),
           Or(g.gpu_efficiency, FormatPercent, "-")});
  }
  return t;
}

// ---- SVG charts ----

struct Series {
  std::string name;
  std::string color;
  std::vector<double> values;
};

std::string Legend(const std::vector<Series>& series, double x, double y) {
  std::string out;
  for (const auto& s : series) {
    out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="10" height="10" fill="{}"/>)"
                       R"(<text x="{:.1f}" y="{:.1f}" class="lg">{}</text>)",
                       x, y, s.color, x + 14, y + 9, HtmlEscape(s.name));
    x += 24 + 7.0 * static_cast<double>(Width(s.name));
  }
  return out;
}

double NiceMax(double v) {
  if (v <= 0) return 1;
  double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// Grouped vertical bars, one group per label.
std::string BarChart(const std::string& title, const std::vector<std::string>& labels,
                     const std::vector<Series>& series, const std::string& y_unit) {
  const double w = 720, h = 260, left = 56, right = 12, top = 34, bottom = 40;
  double max = 0;
  for (const auto& s : series) {
    for (double v : s.values) max = std::max(max, v);
  }
  max = NiceMax(max);
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img" aria-label="{}">)",
      w, h, HtmlEscape(title));
  out += Legend(series, left, 8);
  double plot_w = w - left - right, plot_h = h - top - bottom;
  for (int i = 0; i <= 4; ++i) {
    double y = top + plot_h - plot_h * i / 4;
    out +=
        fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="grid"/>)"
                    R"(<text x="{:.1f}" y="{:.1f}" class="ax" text-anchor="end">{}</text>)",
                    left, y, w - right, y, left - 4, y + 4, HtmlEscape(FormatAmount(max * i / 4)));
  }
  out += fmt::format(R"(<text x="4" y="{:.1f}" class="ax">{}</text>)", top - 6, HtmlEscape(y_unit));
  size_t n = labels.size();
  if (n > 0) {
    double group_w = plot_w / static_cast<double>(n);
    double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, series.size()));
    for (size_t i = 0; i < n; ++i) {
      double gx = left + group_w * static_cast<double>(i) + group_w * 0.1;
      for (size_t s = 0; s < series.size(); ++s) {
        double v = i < series[s].values.size() ? series[s].values[i] : 0;
        double bh = plot_h * v / max;
        out +=
            fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}">)"
                        R"(<title>{}: {}</title></rect>)",
                        gx + bar_w * static_cast<double>(s), top + plot_h - bh,
                        std::max(1.0, bar_w - 1), bh, series[s].color,
                        HtmlEscape(series[s].name + " " + labels[i]), HtmlEscape(FormatAmount(v)));
      }
      // Label every bucket when few, else about 10 labels.
      size_t step = std::max<size_t>(1, n / 10);
      if (i % step == 0) {
        out +=
            fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="ax" text-anchor="middle">{}</text>)",
                        gx + group_w * 0.4, h - bottom + 16, HtmlEscape(labels[i]));
      }
    }
  }
  out += "</svg>";
  return out;
}

// Horizontal bars, one per label (the group chart).
std::string HorizontalBars(const std::vector<std::string>& labels,
                           const std::vector<double>& values, const std::string& color) {
  const double w = 720, row_h = 22, left = 200, right = 90;
  double h = 10 + row_h * static_cast<double>(labels.size());
  double max = 0;
  for (double v : values) max = std::max(max, v);
  if (max <= 0) max = 1;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {:.0f}" role="img" aria-label="wasted dollars by group">)",
      w, h);
  for (size_t i = 0; i < labels.size(); ++i) {
    double y = 5 + row_h * static_cast<double>(i);
    double bw = (w - left - right) * values[i] / max;
    std::string label = labels[i];
    if (Width(label) > 28) label = SafeTerminalText(label, 27) + "…";
    out +=
        fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="ax" text-anchor="end">{}</text>)"
                    R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/>)"
                    R"(<text x="{:.1f}" y="{:.1f}" class="ax">{}</text>)",
                    left - 6, y + 14, HtmlEscape(label), left, y + 3, std::max(1.0, bw), row_h - 6,
                    color, left + bw + 6, y + 14, HtmlEscape(FormatDollars(values[i])));
  }
  out += "</svg>";
  return out;
}

// Lines over days.
std::string LineChart(const std::vector<std::string>& labels, const std::vector<Series>& series,
                      const std::string& y_unit) {
  const double w = 720, h = 260, left = 56, right = 12, top = 34, bottom = 40;
  double max = 0;
  for (const auto& s : series) {
    for (double v : s.values) max = std::max(max, v);
  }
  max = NiceMax(max);
  double plot_w = w - left - right, plot_h = h - top - bottom;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img" aria-label="{}">)",
      w, h, HtmlEscape(y_unit + " per day"));
  out += Legend(series, left, 8);
  for (int i = 0; i <= 4; ++i) {
    double y = top + plot_h - plot_h * i / 4;
    out +=
        fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="grid"/>)"
                    R"(<text x="{:.1f}" y="{:.1f}" class="ax" text-anchor="end">{}</text>)",
                    left, y, w - right, y, left - 4, y + 4, HtmlEscape(FormatAmount(max * i / 4)));
  }
  out += fmt::format(R"(<text x="4" y="{:.1f}" class="ax">{}</text>)", top - 6, HtmlEscape(y_unit));
  size_t n = labels.size();
  auto x_of = [&](size_t i) {
    return n <= 1 ? left + plot_w / 2
                  : left + plot_w * static_cast<double>(i) / static_cast<double>(n - 1);
  };
  for (const auto& s : series) {
    std::string points;
    for (size_t i = 0; i < n && i < s.values.size(); ++i) {
      points += fmt::format("{:.1f},{:.1f} ", x_of(i), top + plot_h - plot_h * s.values[i] / max);
    }
    out += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)",
                       s.color, points);
    if (n == 1 && !s.values.empty()) {
      out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"/>)", x_of(0),
                         top + plot_h - plot_h * s.values[0] / max, s.color);
    }
  }
  size_t step = std::max<size_t>(1, n / 8);
  for (size_t i = 0; i < n; i += step) {
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="ax" text-anchor="middle">{}</text>)",
                       x_of(i), h - bottom + 16, HtmlEscape(labels[i]));
  }
  out += "</svg>";
  return out;
}

std::string HtmlTable(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table><thead><tr>";
  for (const auto& h : header) out += "<th>" + HtmlEscape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out += (i == 0 ? "<td>" : "<td class=\"n\">") + HtmlEscape(row[i]) + "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

std::vector<std::vector<std::string>> GroupRows(const std::vector<GroupRow>& groups) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : groups) {
    rows.push_back(
        {g.key, FormatThousands(static_cast<double>(g.jobs), 0), FormatAmount(g.wasted_core_hours),
         FormatAmount(g.wasted_gb_hours), FormatAmount(g.wasted_gpu_hours),
         FormatDollars(g.wasted_dollars), Or(g.cpu_efficiency, FormatPercent, "-"),
         Or(g.memory_efficiency, FormatPercent, "-"), Or(g.gpu_efficiency, FormatPercent, "-")});
  }
  return rows;
}

struct ResourceLine {
  const char* name;
  const ResourceWaste* w;
  std::string note;
};

std::vector<ResourceLine> ResourceLines(const WasteReport& r) {
  return {
      {"CPU (core-hours)", &r.cpu, ""},
      {"Memory (GB-hours)", &r.memory,
       r.memory.used_basis.empty() ? "" : "used = " + r.memory.used_basis + " x elapsed"},
      {"GPU (GPU-hours)", &r.gpu, "used = GPU-hours x utilisation"},
      {"GPU memory (GB-hours)", &r.gpu_memory,
       r.gpu_memory.jobs_capacity_unknown > 0
           ? fmt::format("{} jobs of unknown GPU memory size left out",
                         r.gpu_memory.jobs_capacity_unknown)
           : ""},
  };
}

}  // namespace

std::string FormatAmount(double value) {
  double a = std::fabs(value);
  if (a >= 1e9) return fmt::format("{:.1f}B", value / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
  if (a >= 1e5) return fmt::format("{:.0f}k", value / 1e3);
  if (a >= 100) return FormatThousands(value, 0);
  if (a >= 1) {
    std::string s = FormatThousands(value, 1);
    if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
    return s;
  }
  if (a == 0) return "0";
  return FormatThousands(value, 2);
}

std::string FormatDollars(double value) {
  std::string sign = value < 0 ? "-" : "";
  double a = std::fabs(value);
  if (a >= 1e6) return sign + "$" + fmt::format("{:.2f}M", a / 1e6);
  if (a >= 100) return sign + "$" + FormatThousands(a, 0);
  return sign + "$" + FormatThousands(a, 2);
}

std::string FormatPercent(double ratio) {
  double p = ratio * 100;
  if (p != 0 && std::fabs(p) < 1) return fmt::format("{:.1f}%", p);
  return fmt::format("{:.0f}%", p);
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string SafeTerminalText(std::string_view text, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    bool starts_char = (u & 0xC0) != 0x80;
    if (starts_char && ++chars > max_chars) break;
    out += (u < 0x20 || u == 0x7f) ? '?' : text[i];
  }
  return out;
}

// ---- The headline: recoverable per month and year, wasted vs recoverable, idle GPUs,
// which cluster, and the method in words. Printed first in every format.

const char* const kMethodInWords =
    "How this is counted: every job that ended in the window is priced at list prices for what "
    "it held (CPUs, memory, GPUs) over its run time: that is allocated. Used is what it really "
    "used (CPU time, peak memory, its GPUs times their utilisation); wasted is the difference. "
    "Recoverable is how much less the same jobs would have cost with right-sized requests: 1.2 "
    "times each job's peak memory, and its busy cores and busy GPUs times 1.2 rounded up to "
    "whole units (no GPU for GPUs that sat idle). It is judged with hindsight, so it is an upper "
    "bound; the history policy further down is what a scheduler could have suggested at "
    "submission from each user's earlier jobs. The formulas follow below.";

namespace {

constexpr double kDaysPerYear = 365;
constexpr double kDaysPerMonth = 365.0 / 12;
constexpr size_t kIdleGpuTextRows = 10;

bool AnyUsage(const WasteReport& r) {
  return r.cpu.jobs_with_usage + r.memory.jobs_with_usage + r.gpu.jobs_with_usage > 0;
}

// Scaling a window shorter than a day to a year would multiply noise by hundreds.
bool Scalable(const WasteReport& r) { return r.window_days >= 1; }

// A figure scaled from a short window to a year is an estimate: three significant digits.
double ThreeDigits(double v) {
  if (v == 0) return 0;
  double scale = std::pow(10, std::floor(std::log10(std::fabs(v))) - 2);
  return std::round(v / scale) * scale;
}

// "2h 42m", "45m", "3d 4h".
std::string Hours(double hours) {
  constexpr int64_t kMinutesPerDay = int64_t{24} * 60;
  auto minutes = static_cast<int64_t>(std::llround(hours * 60));
  if (minutes < 60) return fmt::format("{}m", minutes);
  if (minutes < kMinutesPerDay) return fmt::format("{}h {:02}m", minutes / 60, minutes % 60);
  return fmt::format("{}d {}h", minutes / kMinutesPerDay, (minutes / 60) % 24);
}

std::string IdleJobName(const WasteReport& r, const IdleGpuJob& j) {
  return r.clusters.size() > 1 ? j.cluster + "/" + j.job_id : j.job_id;
}

std::vector<std::vector<std::string>> IdleGpuRows(const WasteReport& r, size_t max_rows,
                                                  bool terminal) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : r.idle_gpu.list) {
    if (rows.size() >= max_rows) break;
    std::string gpus = std::to_string(j.gpus);
    if (!j.gpu_type.empty()) gpus += " x " + j.gpu_type;
    std::string name = IdleJobName(r, j), user = j.user.empty() ? "(unknown)" : j.user;
    rows.push_back({terminal ? SafeTerminalText(name, 32) : name,
                    terminal ? SafeTerminalText(user, 24) : user, gpus, Hours(j.hours),
                    // Cut, not rounded, so 9.97% does not read as 10%.
                    fmt::format("{:.1f}%", std::floor(j.util_pct * 10) / 10),
                    FormatDollars(j.gpu_dollars)});
  }
  return rows;
}

const std::vector<std::string> kIdleGpuHeader = {"job",      "user",     "GPUs",
                                                 "run time", "GPU util", "GPU cost"};

std::string IdleGpuText(const WasteReport& r) {
  if (r.idle_gpu.list.empty()) return "";
  std::vector<std::vector<std::string>> rows = {kIdleGpuHeader};
  for (auto& row : IdleGpuRows(r, kIdleGpuTextRows, true)) rows.push_back(std::move(row));
  std::string out = RenderTextTable(rows);
  auto shown = static_cast<int64_t>(rows.size() - 1);
  if (r.idle_gpu.jobs > shown) {
    out += fmt::format("  … and {} more (--json lists the {} costliest)\n",
                       FormatThousands(static_cast<double>(r.idle_gpu.jobs - shown), 0),
                       std::min<int64_t>(r.idle_gpu.jobs, static_cast<int64_t>(kIdleGpuListMax)));
  }
  return out;
}

std::string IdleGpuHtml(const WasteReport& r) {
  if (r.idle_gpu.list.empty()) return "";
  return RenderHtmlTable(kIdleGpuHeader, IdleGpuRows(r, kIdleGpuTextRows, false));
}

json IdleGpuJson(const WasteReport& r) {
  json list = json::array();
  for (const auto& j : r.idle_gpu.list) {
    list.push_back({{"cluster", j.cluster},
                    {"job_id", j.job_id},
                    {"user", j.user},
                    {"account", j.account},
                    {"gpus", j.gpus},
                    {"gpu_type", j.gpu_type},
                    {"hours", Num(j.hours)},
                    {"gpu_util_pct", Num(j.util_pct)},
                    {"gpu_dollars", Num(j.gpu_dollars)},
                    {"total_dollars", Num(j.total_dollars)}});
  }
  return {{"util_below_pct", kIdleGpuUtilPct},
          {"jobs", r.idle_gpu.jobs},
          {"gpu_jobs_with_util", r.idle_gpu.jobs_with_util},
          {"gpu_hours", Num(r.idle_gpu.gpu_hours)},
          {"gpu_dollars", Num(r.idle_gpu.gpu_dollars)},
          {"list", list}};
}

std::string RecoverableSentence(const WasteReport& r) {
  const double rec = r.upper_bound.dollars;
  if (!AnyUsage(r)) {
    return "Recoverable: unknown, since no job recorded what it used (CPU time, memory or GPU "
           "utilisation).";
  }
  if (!Scalable(r)) {
    return fmt::format(
        "Recoverable at list prices: {} in this window with right-sized requests (the window "
        "is under a day, too short to scale to a month or a year).",
        FormatDollars(rec));
  }
  return fmt::format(
      "Recoverable at list prices: about {} a month, {} a year, with right-sized requests: the "
      "{:.1f}-day window's {} scaled to a year (x 365 / {:.1f}) and to a month (x 365 / 12 / "
      "{:.1f}).",
      FormatDollars(ThreeDigits(rec * kDaysPerMonth / r.window_days)),
      FormatDollars(ThreeDigits(rec * kDaysPerYear / r.window_days)), r.window_days,
      FormatDollars(rec), r.window_days, r.window_days);
}

std::string WastedVsRecoverableSentence(const WasteReport& r) {
  if (!r.cost.wasted_dollars) return "";
  std::string s = fmt::format(
      "Of {} allocated, {} was held but not used, and right-sizing recovers {} of it: a request "
      "can only be cut to what the job's peak needs (plus 20% headroom), not to its average use",
      FormatDollars(r.cost.allocated_dollars), FormatDollars(*r.cost.wasted_dollars),
      FormatDollars(r.upper_bound.dollars));
  if (r.gpu.gpu_jobs > 0) {
    s += ", and GPUs come in whole units: a job that keeps one GPU 30% busy still needs that GPU";
  }
  return s + ".";
}

std::string IdleGpuSentence(const WasteReport& r) {
  const IdleGpuSummary& idle = r.idle_gpu;
  if (idle.jobs_with_util == 0) return "";
  std::string of = idle.jobs_with_util == r.gpu.gpu_jobs
                       ? fmt::format("{} GPU jobs", FormatThousands(double(r.gpu.gpu_jobs), 0))
                       : fmt::format("the {} GPU jobs whose utilisation is known",
                                     FormatThousands(double(idle.jobs_with_util), 0));
  if (idle.jobs == 0) return fmt::format("No GPU job sat under 10% GPU utilisation ({}).", of);
  return fmt::format(
      "Idle GPUs: {} of {} sat at 0-10% GPU utilisation, holding {} GPU-hours, {} at list "
      "prices{}",
      FormatThousands(double(idle.jobs), 0), of, FormatAmount(idle.gpu_hours),
      FormatDollars(idle.gpu_dollars),
      idle.list.size() > 1 ? "; the costliest:" : (idle.list.size() == 1 ? ":" : "."));
}

}  // namespace

std::vector<std::string> HeadlineSentences(const WasteReport& r) {
  std::vector<std::string> out;
  if (r.jobs == 0) return out;
  out.push_back(RecoverableSentence(r));
  for (std::string s : {WastedVsRecoverableSentence(r), IdleGpuSentence(r)}) {
    if (!s.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ClusterChoiceSentences(const WasteReport& r) {
  const ClusterChoice& c = r.cluster_choice;
  if (c.chosen.empty()) return {};
  std::string others;
  for (const auto& o : c.others) {
    if (!others.empty()) others += ", ";
    others += fmt::format("{} ({}{})", SafeTerminalText(o.cluster, 40), Jobs(o.jobs),
                          o.last_end ? ", last ended " + Date(*o.last_end) : "");
  }
  return {fmt::format(
      "The store holds {} clusters with jobs in this window; this report covers {} ({}): of "
      "the clusters with current data (their last job ended within 7 days of the newest), the "
      "one with the most jobs. Not included: {}. Pick one with --cluster NAME, or mix them with "
      "--all-clusters.",
      c.others.size() + 1, SafeTerminalText(c.chosen, 40), Jobs(c.chosen_jobs), others)};
}

json ClusterChoiceJson(const WasteReport& r) {
  const ClusterChoice& c = r.cluster_choice;
  if (c.chosen.empty()) return nullptr;
  json others = json::array();
  for (const auto& o : c.others) {
    others.push_back({{"cluster", o.cluster}, {"jobs", o.jobs}, {"last_end", Time(o.last_end)}});
  }
  return {{"chosen", c.chosen},
          {"jobs", c.chosen_jobs},
          {"rule", "the most jobs among the clusters with a job ended within 7 days of the newest"},
          {"others", others}};
}

std::string ReportScopeText(const WasteReport& r) { return ClusterText(r) + ", " + WindowText(r); }

std::string RenderTextTable(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  TextTable t(rows.front());
  for (size_t i = 1; i < rows.size(); ++i) t.Add(rows[i]);
  return t.Render();
}

std::string RenderHtmlTable(const std::vector<std::string>& header,
                            const std::vector<std::vector<std::string>>& rows) {
  return HtmlTable(header, rows);
}

std::string WrapText(std::string_view text, size_t width, const std::string& indent) {
  return Wrap(text, width, indent);
}

namespace {

// The headline section of each format.
std::string HeadlineText(const WasteReport& r) {
  std::string out;
  for (const auto& s : ClusterChoiceSentences(r)) out += Wrap(s, 96, "  ");
  if (r.jobs == 0) return out;
  if (!out.empty()) out += "\n";
  for (const auto& s : HeadlineSentences(r)) out += Wrap(s, 96, "  ");
  out += IdleGpuText(r);
  out += "\n" + Wrap(kMethodInWords, 96, "  ");
  return out;
}

std::string HeadlineHtml(const WasteReport& r) {
  std::string out;
  for (const auto& s : ClusterChoiceSentences(r)) {
    out += "<p class=\"sub\">" + HtmlEscape(s) + "</p>";
  }
  if (r.jobs == 0) return out;
  out += "<div class=\"summary\">";
  for (const auto& s : HeadlineSentences(r)) out += "<p>" + HtmlEscape(s) + "</p>";
  out += IdleGpuHtml(r);
  out += "</div>\n<p class=\"rule\">" + HtmlEscape(kMethodInWords) + "</p>\n";
  return out;
}

json HeadlineJson(const WasteReport& r) {
  bool scaled = AnyUsage(r) && Scalable(r);
  double rec = r.upper_bound.dollars;
  return {{"basis", "upper_bound"},
          {"recoverable_dollars", AnyUsage(r) ? Num(rec) : json(nullptr)},
          {"window_days", Num(r.window_days)},
          {"per_month_dollars", scaled ? Num(rec * kDaysPerMonth / r.window_days) : json(nullptr)},
          {"per_year_dollars", scaled ? Num(rec * kDaysPerYear / r.window_days) : json(nullptr)},
          {"sentences", HeadlineSentences(r)},
          {"method", kMethodInWords}};
}

}  // namespace

json RenderJson(const WasteReport& r) {
  json j;
  j["schema"] = "rightsize.report/v1";
  j["window"] = {{"since", Time(r.since)},
                 {"until", Time(r.until)},
                 {"first_end", Time(r.first_end)},
                 {"last_end", Time(r.last_end)},
                 {"days", Num(r.window_days)}};
  j["clusters"] = r.clusters;
  j["jobs"] = r.jobs;
  j["jobs_with_elapsed"] = r.jobs_with_elapsed;
  j["jobs_implausible"] = r.jobs_implausible;
  j["first_implausible"] = r.jobs_implausible > 0 ? json(r.first_implausible) : json(nullptr);
  j["daily_sparse"] = r.daily_sparse;
  j["summary"] = SummarySentences(r);
  j["headline"] = HeadlineJson(r);
  j["idle_gpu"] = IdleGpuJson(r);
  j["cluster_choice"] = ClusterChoiceJson(r);

  j["cpu"] = ResourceJson(r.cpu, "core_hours", true);
  j["cpu"]["requested_cores_total"] = Num(r.cpu.requested_cores_total);
  j["memory"] = ResourceJson(r.memory, "gb_hours", true);
  j["memory"]["used_basis"] =
      r.memory.used_basis.empty() ? json(nullptr) : json(r.memory.used_basis);
  j["memory"]["jobs_with_peak"] = r.memory.jobs_with_peak;
  j["memory"]["jobs_with_average_only"] = r.memory.jobs_with_average_only;
  j["gpu"] = ResourceJson(r.gpu, "gpu_hours", true);
  j["gpu"]["gpu_jobs"] = r.gpu.gpu_jobs;
  j["gpu_memory"] = ResourceJson(r.gpu_memory, "gb_hours", false);
  j["gpu_memory"]["jobs_capacity_unknown"] = r.gpu_memory.jobs_capacity_unknown;
  j["time"] = {{"requested_hours", Num(r.time.requested_hours)},
               {"elapsed_hours", Num(r.time.elapsed_hours)},
               {"efficiency", Num(r.time.efficiency)},
               {"jobs_with_limit", r.time.jobs_with_limit},
               {"total_elapsed_hours", Num(r.time.total_elapsed_hours)}};

  json history = AmountsJson(r.history_policy, kHistoryPolicyRule);
  history["jobs_with_history"] = r.history_policy.jobs_with_history;
  history["jobs_under_provisioned"] = r.history_policy.jobs_under_provisioned;
  history["under_provisioned_by_resource"] = {{"cpu", r.history_policy.cpu_under_provisioned},
                                              {"memory", r.history_policy.memory_under_provisioned},
                                              {"gpu", r.history_policy.gpu_under_provisioned}};
  history["lost_dollars"] = Num(r.history_policy.lost_dollars);
  history["lost_core_hours"] = Num(r.history_policy.lost_core_hours);
  history["lost_gb_hours"] = Num(r.history_policy.lost_gb_hours);
  history["lost_gpu_hours"] = Num(r.history_policy.lost_gpu_hours);
  history["net_dollars"] = Num(r.history_policy.net_dollars);
  j["recoverable"] = {{"upper_bound", AmountsJson(r.upper_bound, kUpperBoundRule)},
                      {"history_policy", history}};

  j["cost"] = {{"currency", r.cost.currency},
               {"prices_source", r.cost.prices_source},
               {"prices",
                {{"cpu_core_hour", r.cost.cpu_core_hour},
                 {"memory_gb_hour", r.cost.memory_gb_hour},
                 {"default_gpu_hour", r.cost.default_gpu_hour}}},
               {"allocated_dollars", Num(r.cost.allocated_dollars)},
               {"used_dollars", Num(r.cost.used_dollars)},
               {"wasted_dollars", Num(r.cost.wasted_dollars)},
               {"recoverable_upper_bound_dollars", Num(r.upper_bound.dollars)},
               {"recoverable_history_policy_dollars", Num(r.history_policy.dollars)},
               {"gpu_types_at_default_price", r.cost.gpu_types_at_default_price}};

  j["typical"] = json::array();
  for (const auto& t : r.typical) {
    j["typical"].push_back({{"resource", t.resource},
                            {"unit", t.unit},
                            {"jobs", t.jobs},
                            {"median_request", Num(t.median_request)},
                            {"median_used", Num(t.median_used)},
                            {"share_recoverable", Num(t.share_recoverable)}});
  }
  j["by"] = r.by;
  j["top_wasters"] = json::array();
  for (const auto& g : r.top_wasters) j["top_wasters"].push_back(GroupJson(g));
  if (r.by_given) {
    j["groups"] = json::array();
    for (const auto& g : r.groups) j["groups"].push_back(GroupJson(g));
  } else {
    j["groups"] = nullptr;
  }

  json hist = {{"buckets", json::array()}};
  for (int b = 0; b < kHistogramBuckets; ++b) hist["buckets"].push_back(HistogramBucketLabel(b));
  for (const auto& h : r.efficiency_histogram) hist[h.resource] = h.jobs;
  j["efficiency_histogram"] = hist;

  j["daily"] = json::array();
  for (const auto& d : r.daily) {
    j["daily"].push_back({{"date", Date(d.day_start)},
                          {"jobs", d.jobs},
                          {"allocated_core_hours", Num(d.allocated_core_hours)},
                          {"used_core_hours", Num(d.used_core_hours)},
                          {"allocated_gb_hours", Num(d.allocated_gb_hours)},
                          {"used_gb_hours", Num(d.used_gb_hours)},
                          {"allocated_gpu_hours", Num(d.allocated_gpu_hours)},
                          {"used_gpu_hours", Num(d.used_gpu_hours)},
                          {"wasted_dollars", Num(d.wasted_dollars)}});
  }
  j["energy"] = EnergyJson(r.energy);
  if (r.queue.simulated || !r.queue.why_not.empty()) j["queue"] = QueueJson(r.queue);
  return j;
}

std::string RenderText(const WasteReport& r) {
  std::string out = fmt::format("rightsize report: {}, {}\n", ClusterText(r), WindowText(r));
  out += HeadlineText(r) + "\n";
  for (const auto& s : SummarySentences(r)) out += Wrap(s, 96, "  ");
  if (r.jobs == 0) return out;

  out += "\nResources (allocated = what jobs held; used and wasted over jobs with usage)\n";
  TextTable res({"", "allocated", "used", "wasted", "efficiency", "jobs with usage", "note"}, 6);
  for (const auto& line : ResourceLines(r)) {
    res.Add({line.name, Amt(line.w->allocated), Amt(line.w->used), Amt(line.w->wasted),
             Pct(line.w->efficiency),
             fmt::format("{} of {}", FormatThousands(double(line.w->jobs_with_usage), 0),
                         FormatThousands(double(line.w->jobs_with_allocation), 0)),
             line.note});
  }
  res.Add({"Time limit (hours)", Amt(r.time.requested_hours), Amt(r.time.elapsed_hours), "",
           Pct(r.time.efficiency),
           fmt::format("{} with a limit", FormatThousands(double(r.time.jobs_with_limit), 0)),
           "used = elapsed"});
  out += res.Render();

  out += "\nRecoverable capacity\n";
  TextTable rec({"", "core-hours", "GB-hours", "GPU-hours", "dollars"});
  rec.Add({"History policy (realistic)", Amt(r.history_policy.core_hours),
           Amt(r.history_policy.gb_hours), Amt(r.history_policy.gpu_hours),
           FormatDollars(r.history_policy.dollars)});
  rec.Add({"Upper bound (hindsight)", Amt(r.upper_bound.core_hours), Amt(r.upper_bound.gb_hours),
           Amt(r.upper_bound.gpu_hours), FormatDollars(r.upper_bound.dollars)});
  out += rec.Render();
  out += Wrap(
      fmt::format("{} had enough history for a suggestion; {} of them would have "
                  "been under-provisioned (memory {}, CPU {}, GPU {}); the runs killed for "
                  "lack of memory ({}) are already subtracted (no figure goes below 0).",
                  Jobs(r.history_policy.jobs_with_history),
                  FormatThousands(double(r.history_policy.jobs_under_provisioned), 0),
                  r.history_policy.memory_under_provisioned, r.history_policy.cpu_under_provisioned,
                  r.history_policy.gpu_under_provisioned,
                  FormatDollars(r.history_policy.lost_dollars)),
      96, "  ");
  out += Wrap(kHistoryPolicyRule, 96, "  ");
  out += Wrap(kUpperBoundRule, 96, "  ");

  out += "\nTypical request vs real need (per job, jobs with usage)\n";
  TextTable typ({"", "jobs", "median request", "median use", "could be saved"});
  for (const auto& t : r.typical) {
    auto unit = [&](double v) { return FormatAmount(v) + " " + t.unit; };
    typ.Add({t.resource, FormatThousands(double(t.jobs), 0), Or(t.median_request, unit, "-"),
             Or(t.median_used, unit, "-"), Or(t.share_recoverable, FormatPercent, "-")});
  }
  out += typ.Render();

  out += fmt::format("\nTop {} wasters by {} (by wasted dollars)\n", r.top_wasters.size(),
                     ByTitle(r.by));
  out += GroupTable(r, r.top_wasters).Render();
  if (r.by_given) {
    out += fmt::format("\nAll {} groups by {}\n", r.groups.size(), ByTitle(r.by));
    out += GroupTable(r, r.groups).Render();
  }

  out += "\nEfficiency distribution (number of jobs)\n";
  TextTable hist({"efficiency", "CPU", "memory", "GPU"});
  for (int b = 0; b < kHistogramBuckets; ++b) {
    std::vector<std::string> row = {HistogramBucketLabel(b)};
    for (const auto& h : r.efficiency_histogram) {
      row.push_back(FormatThousands(double(h.jobs[static_cast<size_t>(b)]), 0));
    }
    hist.Add(std::move(row));
  }
  out += hist.Render();

  out += "\nEnergy\n";
  for (const auto& s : EnergySentences(r.energy)) out += Wrap(s, 96, "  ");
  if (r.queue.simulated || !r.queue.why_not.empty()) {
    out += "\nWhat the queue would have done\n";
    for (const auto& s : QueueSentences(r.queue)) out += Wrap(s, 96, "  ");
  }

  out += fmt::format(
      "\nPrices ({}): {}/core-hour, {}/GB-hour, GPU-hours by type (default {}/GPU-hour).\n",
      r.cost.currency, Price(r.cost.cpu_core_hour), Price(r.cost.memory_gb_hour),
      Price(r.cost.default_gpu_hour));
  if (!r.cost.prices_source.empty()) out += Wrap(r.cost.prices_source, 96, "  ");
  if (!r.cost.gpu_types_at_default_price.empty()) {
    std::string types;
    for (const auto& t : r.cost.gpu_types_at_default_price) {
      types += (types.empty() ? "" : ", ") + (t.empty() ? "(untyped)" : SafeTerminalText(t, 24));
    }
    out += Wrap("GPU types priced at the default: " + types + ".", 96, "  ");
  }
  return out;
}

std::string RenderHtml(const WasteReport& r) {
  std::string out = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rightsize report</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;
 max-width:980px;margin:2em auto;padding:0 1em;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #dde;
 padding-bottom:.2em}
.sub{color:#5a6475}.summary{background:#f3f6fb;border-left:4px solid #3b6fd8;padding:.6em 1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{padding:.25em .7em;border-bottom:1px solid #e4e7ee;text-align:left}
th{background:#f6f7fa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.rule{color:#5a6475;font-size:.9em}svg{width:100%;height:auto;max-width:720px}
svg .ax{font-size:11px;fill:#5a6475}svg .lg{font-size:12px;fill:#1d2430}
svg .grid{stroke:#e4e7ee;stroke-width:1}
</style></head><body>
)";
  out += "<h1>rightsize report</h1>\n";
  out += "<p class=\"sub\">" + HtmlEscape(ClusterText(r) + ", " + WindowText(r)) + "</p>\n";
  out += HeadlineHtml(r);
  out += "<div class=\"summary\">";
  for (const auto& s : SummarySentences(r)) out += "<p>" + HtmlEscape(s) + "</p>";
  out += "</div>\n";
  if (r.jobs == 0) return out + "</body></html>\n";

  out += "<h2>Resources</h2>\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& line : ResourceLines(r)) {
    rows.push_back({line.name, Amt(line.w->allocated), Amt(line.w->used), Amt(line.w->wasted),
                    Pct(line.w->efficiency),
                    fmt::format("{} of {}", FormatThousands(double(line.w->jobs_with_usage), 0),
                                FormatThousands(double(line.w->jobs_with_allocation), 0)),
                    Usd(line.w->wasted_dollars)});
  }
  rows.push_back(
      {"Time limit (hours)", Amt(r.time.requested_hours), Amt(r.time.elapsed_hours), "",
       Pct(r.time.efficiency),
       fmt::format("{} with a limit", FormatThousands(double(r.time.jobs_with_limit), 0)), ""});
  out += HtmlTable({"", "allocated", "used", "wasted", "efficiency", "jobs with usage", "wasted $"},
                   rows);

  out += "\n<h2>Recoverable capacity</h2>\n";
  out += HtmlTable(
      {"", "core-hours", "GB-hours", "GPU-hours", "dollars"},
      {{"History policy (realistic)", Amt(r.history_policy.core_hours),
        Amt(r.history_policy.gb_hours), Amt(r.history_policy.gpu_hours),
        FormatDollars(r.history_policy.dollars)},
       {"Upper bound (hindsight)", Amt(r.upper_bound.core_hours), Amt(r.upper_bound.gb_hours),
        Amt(r.upper_bound.gpu_hours), FormatDollars(r.upper_bound.dollars)}});
  out += fmt::format(
      "<p class=\"rule\">{} had enough history for a suggestion; {} would have been "
      "under-provisioned; the runs killed for lack of memory ({}) are subtracted.</p>",
      Jobs(r.history_policy.jobs_with_history),
      FormatThousands(double(r.history_policy.jobs_under_provisioned), 0),
      HtmlEscape(FormatDollars(r.history_policy.lost_dollars)));
  out += "<p class=\"rule\">" + HtmlEscape(kHistoryPolicyRule) + "</p>";
  out += "<p class=\"rule\">" + HtmlEscape(kUpperBoundRule) + "</p>\n";

  out += "<h2>Typical request vs real need</h2>\n";
  rows.clear();
  for (const auto& t : r.typical) {
    auto unit = [&](double v) { return FormatAmount(v) + " " + t.unit; };
    rows.push_back({t.resource, FormatThousands(double(t.jobs), 0), Or(t.median_request, unit, "-"),
                    Or(t.median_used, unit, "-"), Or(t.share_recoverable, FormatPercent, "-")});
  }
  out += HtmlTable({"resource", "jobs", "median request", "median use", "could be saved"}, rows);

  out += "\n<h2>Efficiency distribution</h2>\n";
  std::vector<std::string> buckets;
  for (int b = 0; b < kHistogramBuckets; ++b) buckets.push_back(HistogramBucketLabel(b));
  std::vector<Series> hist_series;
  const char* colors[] = {"#3b6fd8", "#e08a2c", "#2ca17a"};
  for (size_t i = 0; i < r.efficiency_histogram.size() && i < 3; ++i) {
    const auto& h = r.efficiency_histogram[i];
    hist_series.push_back({h.resource, colors[i], {h.jobs.begin(), h.jobs.end()}});
  }
  out += BarChart("jobs by efficiency", buckets, hist_series, "jobs");

  if (!r.daily.empty()) {
    out += "\n<h2>Waste over time</h2>\n";
    std::vector<std::string> days;
    Series alloc{"allocated core-hours", "#9db4e8", {}}, used{"used core-hours", "#3b6fd8", {}};
    Series gpu_alloc{"allocated GPU-hours", "#f0b97a", {}},
        gpu_used{"used GPU-hours", "#e08a2c", {}};
    Series wasted{"wasted dollars", "#c0392b", {}};
    for (const auto& d : r.daily) {
      days.push_back(Date(d.day_start).substr(5));
      alloc.values.push_back(d.allocated_core_hours);
      used.values.push_back(d.used_core_hours);
      gpu_alloc.values.push_back(d.allocated_gpu_hours);
      gpu_used.values.push_back(d.used_gpu_hours);
      wasted.values.push_back(d.wasted_dollars);
    }
    out += LineChart(days, {alloc, used}, "core-hours");
    if (r.gpu.gpu_jobs > 0) out += LineChart(days, {gpu_alloc, gpu_used}, "GPU-hours");
    out += BarChart("wasted dollars per day", days, {wasted}, "dollars");
  }

  out += fmt::format("\n<h2>Top wasters by {}</h2>\n", HtmlEscape(ByTitle(r.by)));
  std::vector<std::string> labels;
  std::vector<double> values;
  for (const auto& g : r.top_wasters) {
    labels.push_back(g.key);
    values.push_back(g.wasted_dollars);
  }
  if (!labels.empty()) out += HorizontalBars(labels, values, "#c0392b");
  const std::vector<std::string> group_header = {ByTitle(r.by), "jobs",         "wasted core-h",
                                                 "wasted GB-h", "wasted GPU-h", "wasted $",
                                                 "CPU eff",     "mem eff",      "GPU eff"};
  out += HtmlTable(group_header, GroupRows(r.top_wasters));
  if (r.by_given) {
    out += fmt::format("\n<h2>All groups by {}</h2>\n", HtmlEscape(ByTitle(r.by)));
    out += HtmlTable(group_header, GroupRows(r.groups));
  }

  out += "\n<h2>Energy</h2>\n";
  for (const auto& s : EnergySentences(r.energy)) out += "<p>" + HtmlEscape(s) + "</p>\n";
  if (r.queue.simulated || !r.queue.why_not.empty()) {
    out += "\n<h2>What the queue would have done</h2>\n";
    for (const auto& s : QueueSentences(r.queue)) out += "<p>" + HtmlEscape(s) + "</p>\n";
    out += QueueSvg(r.queue);
    if (r.queue.simulated) out += "<p class=\"rule\">" + HtmlEscape(kQueueRule) + "</p>\n";
  }

  out += "\n<h2>Prices</h2>\n";
  out +=
      fmt::format("<p>{}/core-hour, {}/GB-hour, default {}/GPU-hour ({}).</p>",
                  HtmlEscape(Price(r.cost.cpu_core_hour)), HtmlEscape(Price(r.cost.memory_gb_hour)),
                  HtmlEscape(Price(r.cost.default_gpu_hour)), HtmlEscape(r.cost.currency));
  out += "<p class=\"rule\">" + HtmlEscape(r.cost.prices_source) + "</p>\n";
  out += "</body></html>\n";
  return out;
}

Status WriteRendered(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    fmt::print("{}", text);
    return Status::Ok();
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError(fmt::format("cannot write {}", path));
  return Status::Ok();
}

}  // namespace rightsize

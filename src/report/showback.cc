#include "report/showback.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/units.h"
#include "report/render.h"

namespace rightsize {

namespace {

using nlohmann::json;

int64_t Cents(double dollars) { return std::llround(dollars * 100); }

// "$1,234.56"; cents keep their sign.
std::string CentsText(int64_t cents) {
  std::string sign = cents < 0 ? "-" : "";
  return sign + "$" + FormatThousands(static_cast<double>(std::llabs(cents)) / 100, 2);
}
std::string CentsText(const std::optional<int64_t>& cents) {
  return cents ? CentsText(*cents) : "unknown";
}
// "1234.56" for CSV and JSON-like plain numbers.
std::string PlainCents(int64_t cents) {
  return fmt::format("{}{}.{:02}", cents < 0 ? "-" : "", std::llabs(cents) / 100,
                     std::llabs(cents) % 100);
}
json CentsJson(const std::optional<int64_t>& cents) {
  return cents ? json(static_cast<double>(*cents) / 100) : json(nullptr);
}
double Round2(double v) { return std::round(v * 100) / 100; }

const char* ByName(const std::string& by) { return by == "user" ? "user" : "account"; }

const char* kRoundingNote =
    "Dollars are rounded to whole cents so that every column adds up exactly to its total, and "
    "each total is the report's own figure: each row gets the floor of its exact cents, and the "
    "cents still missing go one each to the rows with the largest remainders. Right-sized = "
    "allocated - recoverable.";

std::string MethodNote(const WasteReport& r) {
  return fmt::format(
      "Allocated: what the jobs held x run time at list prices ({}/core-hour, {}/GB-hour, "
      "GPU-hours by type). Used and wasted: over the jobs whose usage is known. Share: of the "
      "cluster's allocated dollars. Right-sized: what requests of 1.2x each job's peak memory, "
      "ceil(1.2x its mean cores used) CPUs and ceil(1.2x its busy GPUs) GPUs would have cost "
      "(the report's upper bound on recoverable capacity; a job without usage keeps its "
      "request).",
      fmt::format("${:.5g}", r.cost.cpu_core_hour), fmt::format("${:.5g}", r.cost.memory_gb_hour));
}

std::vector<std::string> Header(const ShowbackTable& t) {
  return {ByName(t.by), "jobs", "core-h", "GPU-h",       "allocated",
          "share",      "used", "wasted", "right-sized", "recoverable"};
}

std::vector<std::string> RowCells(const ShowbackRow& row, bool terminal) {
  return {terminal ? SafeTerminalText(row.key, 32) : row.key,
          FormatThousands(static_cast<double>(row.jobs), 0),
          FormatAmount(row.core_hours),
          FormatAmount(row.gpu_hours),
          CentsText(row.allocated_cents),
          fmt::format("{:.1f}%", row.share * 100),
          CentsText(row.used_cents),
          CentsText(row.wasted_cents),
          CentsText(row.right_sized_cents),
          CentsText(row.recoverable_cents)};
}

// RFC 4180 quoting, and a leading formula character defused for spreadsheets.
std::string CsvField(const std::string& text) {
  std::string v = text;
  if (!v.empty() && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@')) v = "'" + v;
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::vector<int64_t> ApportionCents(const std::vector<double>& dollars, int64_t total_cents,
                                    const std::vector<std::string>& keys) {
  std::vector<int64_t> cents(dollars.size(), 0);
  if (dollars.empty()) return cents;
  std::vector<double> remainder(dollars.size(), 0);
  int64_t sum = 0;
  for (size_t i = 0; i < dollars.size(); ++i) {
    double exact = std::max(0.0, dollars[i]) * 100;
    double floor = std::floor(exact);
    cents[i] = static_cast<int64_t>(floor);
    remainder[i] = exact - floor;
    sum += cents[i];
  }
  std::vector<size_t> order(dollars.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (remainder[a] != remainder[b]) return remainder[a] > remainder[b];
    return keys[a] < keys[b];
  });
  // Normally 0 <= missing < rows; the loops also settle any other difference, one cent at a
  // time round the rows, taking only from rows that have cents.
  int64_t missing = total_cents - sum;
  for (size_t k = 0; missing > 0; k = (k + 1) % order.size(), --missing) ++cents[order[k]];
  for (size_t k = order.size(); missing < 0;) {
    k = k == 0 ? order.size() - 1 : k - 1;
    if (cents[order[k]] > 0) {
      --cents[order[k]];
      ++missing;
    } else if (std::all_of(cents.begin(), cents.end(), [](int64_t c) { return c <= 0; })) {
      break;  // a negative total cannot be split over non-negative rows
    }
  }
  return cents;
}

ShowbackTable MakeShowback(const WasteReport& r) {
  ShowbackTable t;
  t.by = r.showback_by;
  t.currency = r.cost.currency;
  const auto& acc = r.showback;
  std::vector<std::string> keys;
  std::vector<double> alloc, used, wasted, recoverable;
  for (const auto& a : acc) {
    keys.push_back(a.key);
    alloc.push_back(a.allocated_dollars);
    used.push_back(a.used_dollars);
    wasted.push_back(a.wasted_dollars);
    recoverable.push_back(a.recoverable_dollars);
  }
  t.total.key = "total";
  t.total.jobs = r.jobs;
  t.total.allocated_cents = Cents(r.cost.allocated_dollars);
  t.total.recoverable_cents = Cents(r.upper_bound.dollars);
  t.total.right_sized_cents = t.total.allocated_cents - t.total.recoverable_cents;
  t.total.share = t.total.allocated_cents > 0 ? 1.0 : 0.0;
  bool usage_known = r.cost.used_dollars.has_value();
  if (usage_known) {
    t.total.used_cents = Cents(*r.cost.used_dollars);
    t.total.wasted_cents = Cents(r.cost.wasted_dollars.value_or(0));
  }
  std::vector<int64_t> alloc_c = ApportionCents(alloc, t.total.allocated_cents, keys);
  std::vector<int64_t> rec_c = ApportionCents(recoverable, t.total.recoverable_cents, keys);
  std::vector<int64_t> used_c, wasted_c;
  if (usage_known) {
    used_c = ApportionCents(used, *t.total.used_cents, keys);
    wasted_c = ApportionCents(wasted, *t.total.wasted_cents, keys);
  }
  for (size_t i = 0; i < acc.size(); ++i) {
    ShowbackRow row;
    row.key = acc[i].key;
    row.jobs = acc[i].jobs;
    row.core_hours = acc[i].core_hours;
    row.gpu_hours = acc[i].gpu_hours;
    row.allocated_cents = alloc_c[i];
    row.recoverable_cents = rec_c[i];
    row.right_sized_cents = alloc_c[i] - rec_c[i];
    if (usage_known) {
      row.used_cents = used_c[i];
      row.wasted_cents = wasted_c[i];
    }
    row.share = t.total.allocated_cents > 0
                    ? static_cast<double>(alloc_c[i]) / static_cast<double>(t.total.allocated_cents)
                    : 0.0;
    t.total.core_hours += row.core_hours;
    t.total.gpu_hours += row.gpu_hours;
    t.rows.push_back(std::move(row));
  }
  std::sort(t.rows.begin(), t.rows.end(), [](const ShowbackRow& a, const ShowbackRow& b) {
    if (a.allocated_cents != b.allocated_cents) return a.allocated_cents > b.allocated_cents;
    return a.key < b.key;
  });
  return t;
}

std::string RenderShowbackText(const WasteReport& r) {
  ShowbackTable t = MakeShowback(r);
  std::string out = fmt::format("rightsize showback by {}: {}\n", ByName(t.by), ReportScopeText(r));
  for (const auto& line : ClusterChoiceSentences(r)) out += WrapText(line, 96, "  ");
  out += "\n";
  std::vector<std::vector<std::string>> rows = {Header(t)};
  for (const auto& row : t.rows) rows.push_back(RowCells(row, true));
  rows.push_back(RowCells(t.total, true));
  out += RenderTextTable(rows);
  out += "\n";
  out += WrapText(fmt::format("Dollars in {}. {}", t.currency, MethodNote(r)), 96, "  ");
  out += WrapText(kRoundingNote, 96, "  ");
  return out;
}

json RenderShowbackJson(const WasteReport& r) {
  ShowbackTable t = MakeShowback(r);
  auto row_json = [](const ShowbackRow& row) {
    return json{{"key", row.key},
                {"jobs", row.jobs},
                {"core_hours", Round2(row.core_hours)},
                {"gpu_hours", Round2(row.gpu_hours)},
                {"allocated_dollars", CentsJson(row.allocated_cents)},
                {"share", std::round(row.share * 1e4) / 1e4},
                {"used_dollars", CentsJson(row.used_cents)},
                {"wasted_dollars", CentsJson(row.wasted_cents)},
                {"right_sized_dollars", CentsJson(row.right_sized_cents)},
                {"recoverable_dollars", CentsJson(row.recoverable_cents)}};
  };
  json j;
  j["schema"] = "rightsize.showback/v1";
  j["by"] = t.by;
  j["scope"] = ReportScopeText(r);
  j["clusters"] = r.clusters;
  j["cluster_choice"] = ClusterChoiceJson(r);
  j["window"] = {{"first_end", r.first_end ? json(FormatTimestamp(*r.first_end) + "Z") : json()},
                 {"last_end", r.last_end ? json(FormatTimestamp(*r.last_end) + "Z") : json()},
                 {"days", std::round(r.window_days * 1e4) / 1e4}};
  j["currency"] = t.currency;
  j["prices"] = {{"cpu_core_hour", r.cost.cpu_core_hour},
                 {"memory_gb_hour", r.cost.memory_gb_hour},
                 {"default_gpu_hour", r.cost.default_gpu_hour}};
  j["method"] = MethodNote(r);
  j["rounding"] = kRoundingNote;
  j["rows"] = json::array();
  for (const auto& row : t.rows) j["rows"].push_back(row_json(row));
  j["total"] = row_json(t.total);
  return j;
}

std::string RenderShowbackCsv(const WasteReport& r) {
  ShowbackTable t = MakeShowback(r);
  std::string out = fmt::format(
      "{},jobs,core_hours,gpu_hours,allocated_{},share_pct,used_{},wasted_{},right_sized_{},"
      "recoverable_{}\r\n",
      ByName(t.by), t.currency, t.currency, t.currency, t.currency, t.currency);
  auto opt = [](const std::optional<int64_t>& c) { return c ? PlainCents(*c) : std::string(); };
  auto line = [&](const ShowbackRow& row) {
    return fmt::format("{},{},{:.2f},{:.2f},{},{:.2f},{},{},{},{}\r\n", CsvField(row.key), row.jobs,
                       row.core_hours, row.gpu_hours, PlainCents(row.allocated_cents),
                       row.share * 100, opt(row.used_cents), opt(row.wasted_cents),
                       PlainCents(row.right_sized_cents), PlainCents(row.recoverable_cents));
  };
  for (const auto& row : t.rows) out += line(row);
  out += line(t.total);
  return out;
}

std::string RenderShowbackHtml(const WasteReport& r) {
  ShowbackTable t = MakeShowback(r);
  std::string out = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rightsize showback</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;
 max-width:1100px;margin:2em auto;padding:0 1em}
h1{font-size:1.5em}.sub,.note{color:#5a6475}.note{font-size:.9em}
table{border-collapse:collapse;font-size:.92em}
th,td{padding:.25em .7em;border-bottom:1px solid #e4e7ee;text-align:left}
th{background:#f6f7fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tbody tr:last-child td{font-weight:600;border-top:2px solid #1d2430}
</style></head><body>
)";
  out += fmt::format("<h1>Showback by {}</h1>\n", ByName(t.by));
  out += "<p class=\"sub\">" + HtmlEscape(ReportScopeText(r)) + "</p>\n";
  for (const auto& line : ClusterChoiceSentences(r)) {
    out += "<p class=\"sub\">" + HtmlEscape(line) + "</p>\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : t.rows) rows.push_back(RowCells(row, false));
  rows.push_back(RowCells(t.total, false));
  out += RenderHtmlTable(Header(t), rows) + "\n";
  out += "<p class=\"note\">" +
         HtmlEscape(fmt::format("Dollars in {}. {}", t.currency, MethodNote(r))) + "</p>\n";
  out += "<p class=\"note\">" + HtmlEscape(kRoundingNote) + "</p>\n";
  out += "</body></html>\n";
  return out;
}

}  // namespace rightsize

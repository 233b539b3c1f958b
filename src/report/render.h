// Renderers for the waste report: aligned plain text for the terminal, JSON with a stable
// schema ("rightsize.report/v1", documented in docs/report-schema.md) for scripts and agents,
// and one self-contained HTML file (inline CSS and SVG charts, no scripts, opens offline).
//
// User-supplied strings (users, accounts, job names) are untrusted: the HTML renderer escapes
// them and the text renderer replaces control characters, so a job name cannot inject markup
// or terminal escape sequences. Pure functions of the report; thread-safe; never fail.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "report/waste.h"

namespace rightsize {

std::string RenderText(const WasteReport& report);
nlohmann::json RenderJson(const WasteReport& report);
std::string RenderHtml(const WasteReport& report);

// Helpers shared with job_card.h.
// A human-sized amount: "1.2M", "340k" above 100,000; else separators, 1 decimal below 100,
// 2 below 1.
std::string FormatAmount(double value);
// "$1,234" / "$12.34".
std::string FormatDollars(double value);
// 0.4 → "40%", 0.004 → "0.4%".
std::string FormatPercent(double ratio);
// Escapes & < > " ' for HTML text and attributes.
std::string HtmlEscape(std::string_view text);
// Replaces control characters (terminal escapes) with '?' and cuts to `max_chars` code points.
std::string SafeTerminalText(std::string_view text, size_t max_chars);

// The report's headline, printed first in every format (JSON: "headline", "idle_gpu",
// "cluster_choice"): the recoverable dollars (upper bound) per month and per year, why wasted
// exceeds recoverable, the idle-GPU jobs, and the method in words. See waste.h for the rules.
std::vector<std::string> HeadlineSentences(const WasteReport& report);
// The sentences saying which cluster the report covers and how to pick another; none when no
// cluster was chosen for the reader.
std::vector<std::string> ClusterChoiceSentences(const WasteReport& report);
nlohmann::json ClusterChoiceJson(const WasteReport& report);  // null when none was chosen
// How the figures are counted, in words (the formulas follow in the report).
extern const char* const kMethodInWords;

// Building blocks shared with showback.h.
// "cluster alex, jobs ending 2023-02-07T13:40:50 to 2023-02-10T10:59:45 (2.9 days)".
std::string ReportScopeText(const WasteReport& report);
// Aligned text table: the first row is the header; the first column left-aligned, the rest
// right-aligned.
std::string RenderTextTable(const std::vector<std::vector<std::string>>& rows);
std::string RenderHtmlTable(const std::vector<std::string>& header,
                            const std::vector<std::vector<std::string>>& rows);
// Wraps `text` at `width` columns with `indent` before every line.
std::string WrapText(std::string_view text, size_t width, const std::string& indent);

// Writes a rendered report to `path`, or to standard output when it is "" or "-". IoError when
// the file cannot be written.
Status WriteRendered(const std::string& path, const std::string& text);

}  // namespace rightsize

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

// Writes a rendered report to `path`, or to standard output when it is "" or "-". IoError when
// the file cannot be written.
Status WriteRendered(const std::string& path, const std::string& text);

}  // namespace rightsize

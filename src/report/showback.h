// Showback: the waste report by account or by user, as the table a centre sends its
// departments. Per row: jobs, allocated core-hours and GPU-hours, and in dollars at the price
// table's rates what the jobs held (allocated), what they used, what they wasted, the share of
// the cluster's allocated dollars they took, what right-sized requests would have cost and
// the difference (recoverable, the report's upper bound: the same right-sizing rule, summed
// per job exactly as the report sums it).
//
// Rounding: every dollar column is in whole cents and adds up exactly to its total row, and
// each total is the report's own figure rounded to the cent. Each row gets the floor of its
// exact cents; the cents still missing from the total go one each to the rows with the largest
// remainders (ties by key): the largest-remainder method, so no row moves by a cent or more.
// Right-sized = allocated - recoverable, in cents, so it adds up too.
//
// The input is a WasteReport built with ReportOptions::showback set; pure functions of it,
// thread-safe, never fail. Keys (accounts, users) are untrusted: the HTML escapes them, the
// text neutralises control characters, and the CSV quotes them and defuses spreadsheet
// formulas (a leading = + - @ gets a ').
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/waste.h"

namespace rightsize {

struct ShowbackRow {
  std::string key;
  int64_t jobs = 0;
  double core_hours = 0, gpu_hours = 0;  // allocated
  int64_t allocated_cents = 0;
  std::optional<int64_t> used_cents, wasted_cents;  // unknown when no job recorded usage
  int64_t right_sized_cents = 0, recoverable_cents = 0;
  double share = 0;  // of the total allocated dollars, 0..1
};

struct ShowbackTable {
  std::string by;  // "account" or "user"
  std::string currency;
  std::vector<ShowbackRow> rows;  // most allocated dollars first, ties by key
  ShowbackRow total;              // key "total"
};

// Largest-remainder rounding: non-negative `dollars` to whole cents that add up to
// `total_cents` (see above). When the exact values do not sum to within a cent per row of the
// total (never for a report's own figures), the difference still goes to the largest
// remainders first, so the sum always equals `total_cents`.
std::vector<int64_t> ApportionCents(const std::vector<double>& dollars, int64_t total_cents,
                                    const std::vector<std::string>& keys);

ShowbackTable MakeShowback(const WasteReport& report);

std::string RenderShowbackText(const WasteReport& report);
nlohmann::json RenderShowbackJson(const WasteReport& report);  // "rightsize.showback/v1"
std::string RenderShowbackCsv(const WasteReport& report);
std::string RenderShowbackHtml(const WasteReport& report);

}  // namespace rightsize

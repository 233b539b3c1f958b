#include "phases/phases.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rightsize {
namespace {

// A job's series from `rightsize run --json --series` output (summary.metrics.NAME.points:
// [t_s, mean, max], t_s from the job's start).
JobSeries ReadRunSeries(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in);
  JobSeries out;
  for (const auto& [name, m] : doc["summary"]["metrics"].items()) {
    if (!m.contains("points")) continue;
    for (const auto& p : m["points"]) {
      out[name].push_back(SeriesPoint{p[0].get<int64_t>(), p[1].get<double>()});
    }
  }
  return out;
}

struct Program {
  std::string name;
  double start_s = 0, end_s = 0;
};

// "NAME START_S END_S" lines, seconds from the job's start.
std::vector<Program> ReadTruth(const std::string& path) {
  std::ifstream in(path);
  std::vector<Program> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    Program p;
    s >> p.name >> p.start_s >> p.end_s;
    out.push_back(p);
  }
  return out;
}

std::vector<SeriesPoint> Steps(const std::vector<std::pair<int64_t, double>>& levels, int64_t end_s,
                               double noise) {
  std::vector<SeriesPoint> out;
  size_t k = 0;
  for (int64_t t = 0; t < end_s; ++t) {
    while (k + 1 < levels.size() && levels[k + 1].first <= t) ++k;
    // Deterministic jitter, as a sampled rate has.
    double jitter = noise * std::sin(static_cast<double>(t) * 1.7);
    out.push_back({t, levels[k].second + jitter});
  }
  return out;
}

TEST(PhasesTest, FindsStepsInCpuAndMemory) {
  JobSeries s;
  s["cpu_cores"] = Steps({{0, 1}, {60, 4}, {150, 1}}, 200, 0.1);
  s["memory_bytes"] = Steps({{0, 1e8}, {60, 8e9}, {150, 5e8}}, 200, 0);
  auto phases = DetectPhases(s);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0].start_s, 0);
  EXPECT_EQ(phases[1].start_s, 60);
  EXPECT_EQ(phases[2].start_s, 150);
  EXPECT_EQ(phases[2].end_s, 200);
  EXPECT_NEAR(phases[1].use.at("cpu_cores").mean, 4, 0.05);
  EXPECT_EQ(phases[1].use.at("memory_bytes").peak, 8e9);
}

TEST(PhasesTest, GrowingMemoryIsOnePhase) {
  JobSeries s;
  for (int64_t t = 0; t < 300; ++t) {
    s["memory_bytes"].push_back({t, 1e6 * static_cast<double>(t)});
    s["cpu_cores"].push_back({t, 1 + 0.1 * std::sin(static_cast<double>(t))});
  }
  EXPECT_EQ(DetectPhases(s).size(), 1u);
}

TEST(PhasesTest, EmptyAndFlatSeries) {
  EXPECT_TRUE(DetectPhases({}).empty());
  JobSeries flat;
  flat["cpu_cores"] = Steps({{0, 0}}, 50, 0);  // never used: one phase, no metric in it
  auto phases = DetectPhases(flat);
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_TRUE(phases[0].use.empty());
}

TEST(PhasesTest, SplitFreesWhatEachPhaseDoesNotUse) {
  JobSeries s;
  s["cpu_cores"] = Steps({{0, 1}, {100, 4}}, 200, 0);
  s["memory_bytes"] = Steps({{0, 1e9}, {100, 4e9}}, 200, 0);
  auto split = SuggestSplit(DetectPhases(s), Reservation{8, 16e9});
  ASSERT_EQ(split.steps.size(), 2u);
  EXPECT_EQ(split.steps[0].cores, 1);
  EXPECT_EQ(split.steps[1].memory_bytes, 4e9);
  EXPECT_DOUBLE_EQ(split.reserved_core_s, 8 * 200);
  EXPECT_DOUBLE_EQ(split.freed_core_s, (8 - 1) * 100 + (8 - 4) * 100);
  EXPECT_DOUBLE_EQ(split.freed_memory_byte_s, 15e9 * 100 + 12e9 * 100);
  EXPECT_EQ(split.extra_starts, 1);
  // Without a reservation: against the single-step right-size (4 cores, 4 GB).
  auto own = SuggestSplit(DetectPhases(s), Reservation{});
  EXPECT_EQ(own.reserved.cores, 4);
  EXPECT_DOUBLE_EQ(own.freed_core_s, 3 * 100);
}

// The real pipeline of test/data/phases (four programs run one after the other under
// `rightsize run`): every program's start is found within 5 % of its duration.
TEST(PhasesTest, FindsEachProgramOfAMeasuredPipeline) {
  std::string dir = std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/phases/";
  JobSeries series = ReadRunSeries(dir + "pipeline-run.json");
  std::vector<Program> truth = ReadTruth(dir + "pipeline-truth.txt");
  ASSERT_EQ(truth.size(), 4u);
  auto phases = DetectPhases(series);
  for (const Phase& p : phases) {
    std::string line = fmt::format("phase {}..{}:", p.start_s, p.end_s);
    for (const auto& [m, u] : p.use) line += fmt::format(" {} {:.3g}/{:.3g}", m, u.mean, u.peak);
    RecordProperty("phase", line);
    std::cout << line << "\n";
  }
  // Every program, and sort's two halves (reading its input, then sorting and writing).
  EXPECT_GE(phases.size(), truth.size());
  EXPECT_LE(phases.size(), truth.size() + 1);
  for (size_t i = 1; i < truth.size(); ++i) {
    double duration =
        std::min(truth[i].end_s - truth[i].start_s, truth[i - 1].end_s - truth[i - 1].start_s);
    double nearest = 1e18;
    for (const Phase& p : phases) {
      nearest = std::min(nearest, std::abs(static_cast<double>(p.start_s) - truth[i].start_s));
    }
    EXPECT_LE(nearest, 0.05 * duration) << truth[i].name << " starts at " << truth[i].start_s;
    std::cout << fmt::format(
        "{} starts at {:.2f} s: nearest phase boundary {:.2f} s off ({:.1f} % "
        "of {:.1f} s)\n",
        truth[i].name, truth[i].start_s, nearest, 100 * nearest / duration, duration);
  }
  SplitSuggestion split = SuggestSplit(phases, Reservation{});
  EXPECT_GT(split.freed_memory_byte_s, 0);
  std::cout << fmt::format(
      "split: reserved {} cores {:.0f} MB; freed {:.0f} core-s of {:.0f}, "
      "{:.0f} MB-s of {:.0f}\n",
      split.reserved.cores, split.reserved.memory_bytes / 1e6, split.freed_core_s,
      split.reserved_core_s, split.freed_memory_byte_s / 1e6, split.reserved_memory_byte_s / 1e6);
}

}  // namespace
}  // namespace rightsize

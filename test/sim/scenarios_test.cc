#include "sim/scenarios.h"

#include <gtest/gtest.h>

namespace rightsize::sim {
namespace {

SimJob Job(std::string id, int64_t submit, int64_t procs, int64_t run, int64_t limit) {
  SimJob j;
  j.id = std::move(id);
  j.submit_s = submit;
  j.procs = procs;
  j.run_s = run;
  j.limit_s = limit;
  j.resubmit_limit_s = limit;
  return j;
}

TEST(ScenariosTest, MachineSizeFromFlagThenHeaderThenStore) {
  MachineSizeInputs in;
  in.metadata = {{"swf.MaxProcs", "128"}, {"swf.MaxNodes", "64"}};
  in.store_cpus = 512;
  EXPECT_EQ(ResolveMachineSize(in)->from, "MaxProcs");
  EXPECT_EQ(ResolveMachineSize(in)->size, 128);
  in.unit = SizeUnit::kNodes;
  EXPECT_EQ(ResolveMachineSize(in)->size, 64);
  in.explicit_size = 16;
  EXPECT_EQ(ResolveMachineSize(in)->from, "--processors");
  in = MachineSizeInputs{};
  in.store_cpus = 512;
  EXPECT_EQ(ResolveMachineSize(in)->from, "store");
  in.unit = SizeUnit::kNodes;  // the store's CPUs are no node count
  auto none = ResolveMachineSize(in);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "the machine size is not known (no MaxNodes header): give --processors N");
}

// A (8 of 10 processors, asks 1000 s, runs 100) blocks B (4) under EASY by its request; rightsize
// suggests 110 s for A, so B's reservation is at 110 and C (2 procs, 50 s) backfills; last2's
// 50 s kills A, which runs again with its request once B is done.
TEST(ScenariosTest, RunsUsersThenEachPredictorsLimits) {
  Workload w;
  w.jobs = {Job("A", 0, 8, 100, 1000), Job("B", 1, 4, 100, 100), Job("C", 2, 2, 50, 50)};
  w.trace_start_s = {0, 100, 2};
  ScenarioOptions o;
  o.machine_procs = 10;
  o.validate = true;
  o.predictions["A"].suggested[0.01] = 110;
  o.predictions["A"].baselines["last2"] = 50;
  auto r = RunScenarios(w, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->scenarios.size(), 3u);
  EXPECT_EQ(r->scenarios[0].name, "users");
  EXPECT_EQ(r->scenarios[1].name, "rightsize@0.01");
  EXPECT_EQ(r->scenarios[2].name, "last2");
  EXPECT_EQ(r->validation->same_start, 3);
  EXPECT_EQ(r->scenarios[1].new_limits, 1);
  EXPECT_EQ(r->scenarios[1].lowered, 1);
  EXPECT_EQ(r->scenarios[1].metrics.killed, 0);
  EXPECT_EQ(r->scenarios[2].metrics.killed, 1);
  EXPECT_GT(r->scenarios[2].metrics.lost_proc_hours, 0);
  EXPECT_EQ(r->scenarios[2].result.jobs[0].start_s, 150);  // again, queued behind B

  o.predictions.clear();
  o.predictions["X"].baselines["last2"] = 5;
  o.predictions_name = "other.jsonl";
  o.input_name = "t.swf";
  auto other = RunScenarios(w, o);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "other.jsonl: none of its 1 jobs is a job of t.swf (predictions of another trace?)");
}

// A (6 of 10 processors, asks 1000 s, runs 100) holds B (8) back. C (4 processors, runs 500,
// asks 1000) cannot backfill by its request; rightsize plans it on its p10 of 100 s, so it
// backfills at once, outlives that plan at 102 (planned to its limit from then on) and, running
// to 502, delays B. rightsize's 1 % limit of 60 s for A kills it at 60: it runs again with its
// request.
TEST(ScenariosTest, PlansOnRightsizesQuantileWithUsersAndRightsizesLimits) {
  Workload w;
  w.jobs = {Job("A", 0, 6, 100, 1000), Job("B", 1, 8, 50, 50), Job("C", 2, 4, 500, 1000)};
  ScenarioOptions o;
  o.policy = Policy::kEasyPlusPlus;
  o.machine_procs = 10;
  o.predictions["C"].quantiles = {{"p10", 100}, {"point", 300}};
  o.predictions["C"].suggested[0.01] = 1000;
  o.predictions["A"].suggested[0.01] = 60;
  o.plan = "p10";
  auto r = RunScenarios(w, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->scenarios.size(), 4u);
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Scenario& s : r->scenarios) rows.emplace_back(s.name, s.plan);
  EXPECT_EQ(rows, (std::vector<std::pair<std::string, std::string>>{{"users", "last2"},
                                                                    {"rightsize@0.01", "last2"},
                                                                    {"users", "p10"},
                                                                    {"rightsize@0.01", "p10"}}));
  auto starts = [&](size_t i) {
    std::vector<int64_t> out;
    for (const JobOutcome& j : r->scenarios[i].result.jobs) out.push_back(j.start_s);
    return out;
  };
  EXPECT_EQ(starts(0), (std::vector<int64_t>{0, 100, 150}));  // EASY++ on last2 (none: limits)
  EXPECT_EQ(starts(2), (std::vector<int64_t>{0, 502, 2}));    // C backfilled on its p10
  EXPECT_EQ(r->scenarios[2].planned, 1);
  EXPECT_EQ(r->scenarios[2].new_limits, 0);
  EXPECT_EQ(r->scenarios[3].planned, 1);
  EXPECT_EQ(r->scenarios[3].new_limits, 2);
  EXPECT_EQ(r->scenarios[3].metrics.killed, 1);
  EXPECT_TRUE(r->scenarios[3].result.jobs[0].killed);
  EXPECT_EQ(r->scenarios[3].result.jobs[0].end_s - r->scenarios[3].result.jobs[0].start_s, 100);

  o.plan.clear();
  o.corrections = {"p90"};
  auto no_plan = RunScenarios(w, o);
  ASSERT_FALSE(no_plan.ok());
  EXPECT_EQ(no_plan.status().message(), "--correct: give --plan too (the quantile to plan with)");
  o.plan = "p10";
  o.corrections.clear();

  o.policy = Policy::kEasy;
  auto easy = RunScenarios(w, o);
  ASSERT_FALSE(easy.ok());
  EXPECT_EQ(easy.status().message(),
            "--plan: planning on rightsize's run times needs --policy easy++ and --predictions");
}

}  // namespace
}  // namespace rightsize::sim

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

}  // namespace
}  // namespace rightsize::sim

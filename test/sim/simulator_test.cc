#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ingest/line_reader.h"
#include "ingest/swf.h"
#include "sim/workload.h"

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

std::vector<int64_t> Starts(const std::vector<SimJob>& jobs, Policy policy, int64_t machine) {
  auto r = Simulate(jobs, SimOptions{policy, machine});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<int64_t> out;
  if (!r.ok()) return out;
  for (const JobOutcome& o : r->jobs) out.push_back(o.start_s);
  return out;
}

// A runs on 6 of 10 processors until 100; B (8 processors) must wait for it. C is short enough
// to finish before B's reservation; D, with a long limit, is not and there are too few extra
// processors at the reservation for it.
std::vector<SimJob> Blocked() {
  return {Job("A", 0, 6, 100, 100), Job("B", 1, 8, 50, 50), Job("C", 2, 4, 10, 20),
          Job("D", 3, 4, 10, 200)};
}

TEST(SimulatorTest, FcfsStartsJobsInSubmitOrder) {
  EXPECT_EQ(Starts(Blocked(), Policy::kFcfs, 10), (std::vector<int64_t>{0, 100, 150, 150}));
}

TEST(SimulatorTest, EasyBackfillsOnlyJobsThatDoNotDelayTheHead) {
  // C backfills at once; D would outlast B's reservation at 100 (by its limit) and waits.
  EXPECT_EQ(Starts(Blocked(), Policy::kEasy, 10), (std::vector<int64_t>{0, 100, 2, 150}));
  // With a limit that ends before the reservation, D backfills when C's processors free up.
  auto jobs = Blocked();
  jobs[3].limit_s = 50;
  EXPECT_EQ(Starts(jobs, Policy::kEasy, 10), (std::vector<int64_t>{0, 100, 2, 12}));
}

TEST(SimulatorTest, EasyBackfillsLongJobsOnTheExtraProcessors) {
  // On 12 processors the reservation leaves 12 - 8 = 4 extra: D may run past it.
  EXPECT_EQ(Starts(Blocked(), Policy::kEasy, 12), (std::vector<int64_t>{0, 100, 2, 12}));
}

TEST(SimulatorTest, EasyPlusPlusBackfillsOnPredictions) {
  auto jobs = Blocked();
  jobs[3].estimate_s = 50;  // predicted to end at 62, before B's reservation
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10), (std::vector<int64_t>{0, 100, 2, 12}));
}

TEST(SimulatorTest, EasyPlusPlusBackfillsTheShortestPredictionFirst) {
  // X frees 4 processors at 20, while B waits for A; C (50 s) and D (10 s) both fit there.
  std::vector<SimJob> jobs = {Job("A", 0, 6, 100, 100), Job("X", 0, 4, 20, 20),
                              Job("B", 1, 8, 50, 50), Job("C", 2, 4, 50, 50),
                              Job("D", 3, 4, 10, 10)};
  // EASY backfills in queue order: C at 20, D when C ends.
  EXPECT_EQ(Starts(jobs, Policy::kEasy, 10), (std::vector<int64_t>{0, 0, 100, 20, 70}));
  // EASY++ backfills the shortest first: D at 20, C when D ends.
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10), (std::vector<int64_t>{0, 0, 100, 30, 20}));
}

TEST(SimulatorTest, EasyPlusPlusCorrectsAnUnderPrediction) {
  // A is predicted to end at 10 but runs to 100: until 10, B's reservation is at 10 and C
  // (ends at 60) cannot backfill; at 10 A's prediction becomes its limit, the reservation
  // moves to 1000 and C backfills.
  std::vector<SimJob> jobs = {Job("A", 0, 6, 100, 1000), Job("B", 1, 8, 50, 50),
                              Job("C", 2, 4, 50, 50)};
  jobs[0].estimate_s = 10;
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10), (std::vector<int64_t>{0, 100, 10}));
}

TEST(SimulatorTest, EasyPlusPlusCorrectsStepByStepThroughGivenCorrections) {
  // A is predicted 10 s, then 60 s, then 200 s (a step past its limit is ignored); it runs 100.
  // C (4 processors, 60 s) fits before B's reservation only once the plan says A ends at 200 or
  // later: at 60, not at 10 as when A's plan goes straight to its 1000 s limit (and, running to
  // 120, it holds B back past A's end).
  std::vector<SimJob> jobs = {Job("A", 0, 6, 100, 1000), Job("B", 1, 8, 50, 50),
                              Job("C", 2, 4, 60, 60)};
  jobs[0].estimate_s = 10;
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10), (std::vector<int64_t>{0, 100, 10}));
  jobs[0].corrections_s = {60, 200, 5000};
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10), (std::vector<int64_t>{0, 120, 60}));
  // EASY plans with limits and never looks at the corrections.
  EXPECT_EQ(Starts(jobs, Policy::kEasy, 10), (std::vector<int64_t>{0, 100, 2}));
  jobs[0].corrections_s = {60, 60};
  auto bad = Simulate(jobs, SimOptions{Policy::kEasyPlusPlus, 10});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "job A: corrections must be > 0 and ascending, got 60 after 60");
}

TEST(SimulatorTest, HeadGuardStopsShortPredictionsFromStarvingTheHead) {
  // W needs the whole machine; A holds half of it until 100 (by its limit too: EASY's
  // reservation for W is 100). S1..S4 are predicted to take 1 s but run 150 s each. Unguarded,
  // each S backfills before W's planned reservation, outlives its prediction and pushes W back:
  // W waits for all four. With the head guard, W's reservation stays EASY's: from 100 on,
  // passes plan with limits, no S backfills past W, and W starts when S1 ends.
  std::vector<SimJob> jobs = {Job("A", 0, 5, 100, 100), Job("W", 1, 10, 10, 10)};
  for (int i = 1; i <= 4; ++i) {
    jobs.push_back(Job("S" + std::to_string(i), 2, 5, 150, 1000));
    jobs.back().estimate_s = 1;
  }
  std::vector<int64_t> unguarded = Starts(jobs, Policy::kEasyPlusPlus, 10);
  EXPECT_EQ(unguarded, (std::vector<int64_t>{0, 400, 2, 100, 152, 250}));
  auto r = Simulate(jobs, SimOptions{Policy::kEasyPlusPlus, 10, /*head_guard=*/true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<int64_t> guarded;
  for (const JobOutcome& o : r->jobs) guarded.push_back(o.start_s);
  EXPECT_EQ(guarded, (std::vector<int64_t>{0, 152, 2, 162, 162, 312}));
  // EASY never backfills an S past W (their limits end after its reservation at 100).
  EXPECT_EQ(Starts(jobs, Policy::kEasy, 10), (std::vector<int64_t>{0, 100, 110, 110, 260, 260}));
}

TEST(SimulatorTest, EasyPlusPlusLearnsLast2FromCompletedJobs) {
  // The user's two completed jobs ran 10 s each: the third is predicted 10 s, not its 500 s
  // limit, and backfills before the 8-processor job's reservation at 100.
  std::vector<SimJob> jobs = {Job("u1", 0, 1, 10, 500), Job("u2", 0, 1, 10, 500),
                              Job("A", 20, 6, 100, 100), Job("B", 21, 8, 50, 50),
                              Job("u3", 22, 4, 10, 500)};
  for (int i : {0, 1, 4}) jobs[i].user = 7;
  EXPECT_EQ(Starts(jobs, Policy::kEasyPlusPlus, 10)[4], 22);
  EXPECT_EQ(Starts(jobs, Policy::kEasy, 10)[4], 170);
}

TEST(SimulatorTest, KilledJobIsResubmittedWithItsRequestAndBothRunsCount) {
  std::vector<SimJob> jobs = {Job("X", 0, 10, 100, 40), Job("Y", 5, 10, 10, 10)};
  jobs[0].resubmit_limit_s = 100;
  auto r = Simulate(jobs, SimOptions{Policy::kEasy, 10});
  ASSERT_TRUE(r.ok());
  // X is killed at 40; Y, waiting since 5, goes first; X runs again from 50 to 150.
  EXPECT_TRUE(r->jobs[0].killed);
  EXPECT_EQ(r->jobs[0].start_s, 50);
  EXPECT_EQ(r->jobs[0].end_s, 150);
  EXPECT_EQ(r->jobs[0].lost_proc_s, 400);
  EXPECT_EQ(r->jobs[1].start_s, 40);
  Metrics m = Summarise(jobs, *r, 10);
  EXPECT_EQ(m.killed, 1);
  EXPECT_DOUBLE_EQ(m.lost_proc_hours, 400.0 / 3600);
  EXPECT_EQ(m.makespan_s, 150);
  EXPECT_DOUBLE_EQ(m.utilisation, 1.0);  // 400 lost + 1000 + 100 useful over 10 x 150
  EXPECT_DOUBLE_EQ(m.mean_wait_s, (50 + 35) / 2.0);
}

TEST(SimulatorTest, MetricsBoundSlowdownAtTenSeconds) {
  std::vector<SimJob> jobs = {Job("short", 0, 1, 5, 5), Job("long", 0, 1, 100, 100)};
  auto r = Simulate(jobs, SimOptions{Policy::kFcfs, 1});
  ASSERT_TRUE(r.ok());
  Metrics m = Summarise(jobs, *r, 1);
  // short: max(1, 5 / 10) = 1; long waits 5: 105 / 100.
  EXPECT_DOUBLE_EQ(m.avebsld, (1 + 1.05) / 2);
  EXPECT_DOUBLE_EQ(m.mean_wait_s, 2.5);
  EXPECT_DOUBLE_EQ(m.p95_wait_s, 5);
  EXPECT_EQ(m.makespan_s, 105);
  EXPECT_DOUBLE_EQ(m.utilisation, 1.0);
}

TEST(SimulatorTest, RejectsJobsTheMachineCannotRun) {
  auto r = Simulate({Job("big", 0, 11, 10, 10)}, SimOptions{Policy::kEasy, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job big asks for 11 processors; the machine has 10");
  r = Simulate({Job("zero", 0, 1, 0, 10)}, SimOptions{Policy::kEasy, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job zero: run time must be > 0, got 0");
  EXPECT_FALSE(Simulate({}, SimOptions{Policy::kEasy, 0}).ok());
  EXPECT_FALSE(ParsePolicy("sjf").ok());
  EXPECT_EQ(*ParsePolicy("easy++"), Policy::kEasyPlusPlus);
}

std::vector<JobRecord> ReadSwf(const std::string& path, int64_t* max_procs) {
  auto reader = LineReader::Open(path);
  EXPECT_TRUE(reader.ok());
  SwfParser parser;
  std::vector<JobRecord> out;
  std::string_view line;
  while (true) {
    auto more = (*reader)->Next(&line);
    if (!more.ok() || !*more) break;
    EXPECT_TRUE(parser.ParseLine(line, out).ok()) << line;
  }
  *max_procs = std::stoll(parser.metadata().at("swf.MaxProcs"));
  return out;
}

// The derived trace's wait times are pyss's EASY simulation: the same jobs on the same machine
// must start when it says.
TEST(SimulatorTest, ReproducesThePredictsimEasySimulation) {
  int64_t machine = 0;
  auto records =
      ReadSwf(std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/sim/SDSC-SP2.easy-sim.first3000.swf.gz",
              &machine);
  ASSERT_EQ(machine, 128);
  Workload w = WorkloadFromRecords(records, SizeUnit::kProcessors, machine);
  ASSERT_EQ(w.jobs.size(), 3000u);
  EXPECT_TRUE(w.notes.empty());
  auto r = Simulate(w.jobs, SimOptions{Policy::kEasy, machine});
  ASSERT_TRUE(r.ok());
  size_t same = 0;
  for (size_t i = 0; i < w.jobs.size(); ++i) same += r->jobs[i].start_s == w.trace_start_s[i];
  EXPECT_GE(static_cast<double>(same) / static_cast<double>(w.jobs.size()), 0.99);
  // FCFS on the same jobs is a different schedule: the comparison can tell them apart.
  auto fcfs = Simulate(w.jobs, SimOptions{Policy::kFcfs, machine});
  ASSERT_TRUE(fcfs.ok());
  size_t fcfs_same = 0;
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    fcfs_same += fcfs->jobs[i].start_s == w.trace_start_s[i];
  }
  EXPECT_LT(static_cast<double>(fcfs_same) / static_cast<double>(w.jobs.size()), 0.9);
}

// Never more processors busy than the machine has, whatever the policy: a sweep over the
// runs' starts and ends (ends first at equal times).
TEST(SimulatorTest, NeverOvercommitsTheMachine) {
  int64_t machine = 0;
  auto records =
      ReadSwf(std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/sim/SDSC-SP2.easy-sim.first3000.swf.gz",
              &machine);
  Workload w = WorkloadFromRecords(records, SizeUnit::kProcessors, machine);
  for (Policy policy : {Policy::kFcfs, Policy::kEasy, Policy::kEasyPlusPlus}) {
    auto r = Simulate(w.jobs, SimOptions{policy, machine});
    ASSERT_TRUE(r.ok());
    std::vector<std::pair<int64_t, int64_t>> deltas;
    for (size_t i = 0; i < w.jobs.size(); ++i) {
      deltas.emplace_back(r->jobs[i].start_s, w.jobs[i].procs);
      deltas.emplace_back(r->jobs[i].end_s, -w.jobs[i].procs);
    }
    std::sort(deltas.begin(), deltas.end());
    int64_t busy = 0, peak = 0;
    for (const auto& [t, d] : deltas) {
      busy += d;
      peak = std::max(peak, busy);
    }
    EXPECT_LE(peak, machine) << PolicyName(policy);
    EXPECT_EQ(busy, 0);
  }
}

TEST(WorkloadTest, CountsWhatItLeavesOutAndCutsOverlongRuns) {
  std::vector<JobRecord> records(4);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].job_id = std::to_string(i + 1);
    records[i].submit_time = 100 - static_cast<int64_t>(i);
    records[i].usage.elapsed_s = 50;
    records[i].request.time_limit_s = 60;
    records[i].request.cpus = 2;
  }
  records[1].request.time_limit_s.reset();
  records[2].usage.elapsed_s = 90;  // past its limit
  records[3].request.cpus = 64;
  Workload w = WorkloadFromRecords(records, SizeUnit::kProcessors, 16);
  ASSERT_EQ(w.jobs.size(), 2u);
  EXPECT_EQ(w.jobs[0].id, "3");  // submitted first
  EXPECT_EQ(w.jobs[0].run_s, 60);
  EXPECT_EQ(w.notes, (std::vector<std::string>{"1 job without a time limit left out",
                                               "1 job larger than the machine left out",
                                               "1 job ran past their limit: cut to it"}));
}

TEST(WorkloadTest, AppliesPredictedLimitsFromEvalJobs) {
  auto dir = std::filesystem::temp_directory_path() / "rightsize_sim_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "jobs.jsonl").string();
  {
    std::ofstream out(path);
    out << R"({"target":"runtime","job_id":"1","suggested":[{"risk":0.01,"request":30.2}],)"
        << R"("baselines":{"last2":12,"user_mean":40}})"
        << "\n"
        << R"({"target":"memory","job_id":"1"})"
        << "\n";
  }
  auto p = ReadPredictions(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<SimJob> jobs = {Job("1", 0, 1, 20, 100), Job("2", 0, 1, 20, 100)};
  auto changed = ApplyLimits(*p, "rightsize", 0.01, jobs);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 1);
  EXPECT_EQ(jobs[0].limit_s, 31);
  EXPECT_EQ(jobs[0].resubmit_limit_s, 100);
  EXPECT_EQ(jobs[1].limit_s, 100);
  ASSERT_TRUE(ApplyLimits(*p, "last2", 0.01, jobs).ok());
  EXPECT_EQ(jobs[0].limit_s, 12);
  auto bad_risk = ApplyLimits(*p, "rightsize", 0.05, jobs);
  ASSERT_FALSE(bad_risk.ok());
  EXPECT_EQ(bad_risk.status().message(),
            "--risk 0.05: the predictions hold suggested requests at 0.01 only");

  {
    std::ofstream out(path);
    out << R"({"target":"runtime","job_id":"1"})"
        << "\n"
        << "not json\n";
  }
  auto broken = ReadPredictions(path);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message(),
            path + ":2: expected a JSON object (a line of `rightsize eval --jobs`)");
  std::filesystem::remove_all(dir);
}

TEST(WorkloadTest, AppliesRightsizesRunTimeQuantilesAsEstimates) {
  auto dir = std::filesystem::temp_directory_path() / "rightsize_sim_estimates_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "jobs.jsonl").string();
  {
    std::ofstream out(path);
    // Job 1 has the model's distribution; job 2 was answered by a fallback (its point is
    // last2's); job 3's p97_5 is unbounded (null).
    out << R"({"target":"runtime","job_id":"1","point":50.5,"p2_5":2,"p10":9.2,"p90":300,)"
        << R"("p97_5":4000,"baselines":{"last2":12}})"
        << "\n"
        << R"({"target":"runtime","job_id":"2","fallback":"last2","point":12,"baselines":{}})"
        << "\n"
        << R"({"target":"runtime","job_id":"3","point":5,"p10":1,"p90":80,"p97_5":null})"
        << "\n";
  }
  auto p = ReadPredictions(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->at("1").quantiles.size(), 5u);
  EXPECT_TRUE(p->at("2").quantiles.empty());
  EXPECT_FALSE(p->at("3").quantiles.contains("p97_5"));
  std::vector<SimJob> jobs = {Job("1", 0, 1, 20, 1000), Job("2", 0, 1, 20, 100),
                              Job("3", 0, 1, 20, 60)};
  auto planned = ApplyEstimates(*p, "p10", {"point", "p90", "p97_5"}, jobs);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ(*planned, 2);
  EXPECT_EQ(jobs[0].estimate_s, 10);                                  // rounded up
  EXPECT_EQ(jobs[0].corrections_s, (std::vector<int64_t>{51, 300}));  // 4000 is past the limit
  EXPECT_EQ(jobs[1].estimate_s, 0);  // the simulation's last2 plans it
  EXPECT_EQ(jobs[2].estimate_s, 1);
  EXPECT_EQ(jobs[2].corrections_s, (std::vector<int64_t>{5}));  // 80 is past its 60 s limit
  ASSERT_TRUE(ApplyEstimates(*p, "p97_5", {}, jobs).ok());
  EXPECT_EQ(jobs[0].estimate_s, 1000);  // capped by the limit
  auto bad = ApplyEstimates(*p, "p50", {}, jobs);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "expected a quantile of rightsize's run time (p2_5, p10, point, p90, p97_5), got "
            "\"p50\"");
  EXPECT_FALSE(ApplyEstimates(*p, "p10", {"p99"}, jobs).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rightsize::sim

// The predictor: features see only the past, the baselines do what their papers say, the
// intervals cover what they claim, and a stored model predicts what the trained one did.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "model/dataset.h"
#include "model/history.h"
#include "model/predictor.h"
#include "model/replay.h"
#include "store/store.h"

namespace rightsize {
namespace {

JobRecord Job(const std::string& id, const std::string& user, int64_t submit, double run,
              int64_t limit, const std::string& name = "app") {
  JobRecord j;
  j.cluster = "c";
  j.job_id = id;
  j.request.user = user;
  j.request.job_name = name;
  j.request.time_limit_s = limit;
  j.request.cpus = 4;
  j.submit_time = submit;
  j.start_time = submit;
  j.end_time = submit + static_cast<int64_t>(run);
  j.usage.elapsed_s = run;
  j.outcome.state = "COMPLETED";
  return j;
}

size_t Column(const std::string& name) {
  const auto& names = Layout().names;
  auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<size_t>(it - names.begin());
}

TEST(HistoryTest, FeaturesSeeOnlyJobsThatEndedBeforeTheSubmit) {
  // u's first job ends at 100; the second is still running at 200 when the third is submitted.
  std::vector<JobRecord> jobs = {Job("1", "u", 0, 100, 3600), Job("2", "u", 50, 4950, 7200),
                                 Job("3", "u", 200, 10, 3600)};
  Dataset d = BuildDataset(jobs, {});
  ASSERT_EQ(d.rows(), 3u);
  const float* third = d.row(2);
  EXPECT_FLOAT_EQ(third[Column("runtime.user_last")], std::log(100.0f));
  // The trees start from the user's last job of the same name and request.
  EXPECT_FLOAT_EQ(d.anchor[static_cast<int>(Target::kRuntime)][2], 100.0f);
  EXPECT_FLOAT_EQ(third[Column("user_jobs")], std::log1p(1.0f));
  // The first job had no past at all.
  EXPECT_TRUE(std::isnan(d.row(0)[Column("runtime.user_last")]));
  EXPECT_FLOAT_EQ(d.row(0)[Column("user_jobs")], 0.0f);
  // The measured value and the request ride along for training and scoring.
  EXPECT_FLOAT_EQ(d.y[static_cast<int>(Target::kRuntime)][2], 10.0f);
  EXPECT_FLOAT_EQ(d.req[static_cast<int>(Target::kRuntime)][2], 3600.0f);
}

// A job is read against its partition's nodes: 4 cores of a 128-core node, 64 GiB of 512.
// Without -p, the default partition's; on a cluster nobody described, nothing.
TEST(HistoryTest, FeaturesReadTheRequestAgainstThePartitionsNodes) {
  ClusterContext cluster;
  cluster.partitions["batch"] = NodeShape{128, 512.0 * (1 << 30), 0, ""};
  cluster.partitions["gpu"] = NodeShape{64, 1024.0 * (1 << 30), 4, "a100"};
  cluster.default_partition = "batch";
  JobRecord j = Job("1", "u", 0, 100, 3600);
  j.request.memory_bytes = int64_t{64} << 30;
  History h;
  std::vector<float> row(Layout().cols());
  h.Features(j, 0, cluster, row.data());
  EXPECT_FLOAT_EQ(row[Column("cpus_share_of_node")], 4.0f / 128);
  EXPECT_FLOAT_EQ(row[Column("mem_share_of_node")], 64.0f / 512);
  EXPECT_FLOAT_EQ(row[Column("log_node_cpus")], std::log(128.0f));
  EXPECT_FLOAT_EQ(row[Column("node_gpus")], 0.0f);
  j.request.partition = "gpu";
  j.request.nodes = 2;  // the request is spread over two nodes
  h.Features(j, 0, cluster, row.data());
  EXPECT_FLOAT_EQ(row[Column("cpus_share_of_node")], 2.0f / 64);
  EXPECT_FLOAT_EQ(row[Column("node_gpus")], 4.0f);
  h.Features(j, 0, ClusterContext{}, row.data());
  EXPECT_TRUE(std::isnan(row[Column("cpus_share_of_node")]));
  EXPECT_TRUE(std::isnan(row[Column("log_node_mem")]));
}

// `predict`'s why names features in words: every feature, including any added later.
TEST(HistoryTest, EveryFeatureHasWords) {
  for (const std::string& name : Layout().names) {
    std::string words = DescribeFeature(name);
    EXPECT_NE(words, name);
    EXPECT_EQ(words.find_first_of("_."), std::string::npos) << name << ": " << words;
  }
  EXPECT_EQ(DescribeFeature("runtime.user_name_used_share"),
            "the share of their request used by your jobs of this name");
  EXPECT_EQ(DescribeFeature("not_a_feature"), "not_a_feature");
}

// `predict` says where the trees started from, and it must be where they did.
TEST(HistoryTest, TheAnchorSaysWhereItCameFrom) {
  History h;
  h.AddFinished(Job("1", "u", 1000, 100, 3600));
  h.AddFinished(Job("2", "u", 2000, 300, 3600));
  std::string from;
  JobRecord again = Job("3", "u", 5000, 0, 3600);
  auto b = h.Baselines(again, 5000, Target::kRuntime);
  EXPECT_FLOAT_EQ(h.Anchor(again, Target::kRuntime, b, &from), 300.0f);
  EXPECT_EQ(from, "your last job of this name and request");
  JobRecord other = Job("4", "u", 5000, 0, 7200, "other");
  b = h.Baselines(other, 5000, Target::kRuntime);
  EXPECT_FLOAT_EQ(h.Anchor(other, Target::kRuntime, b, &from), 200.0f);
  EXPECT_EQ(from, "the mean of your last two jobs");
  JobRecord newcomer = Job("5", "v", 5000, 0, 7200);
  b = h.Baselines(newcomer, 5000, Target::kRuntime);
  EXPECT_FLOAT_EQ(h.Anchor(newcomer, Target::kRuntime, b, &from), 7200.0f);
  EXPECT_EQ(from, "the request");
}

// CPU cores used follow the cores given: a past job of another size lends its share of busy
// cores, not its count.
TEST(HistoryTest, TheCpuAnchorScalesAPastJobToThisRequest) {
  History h;
  auto cores = [](JobRecord j, double cpus, double used) {
    j.request.cpus = cpus;
    j.usage.cpu_time_s = used * *j.usage.elapsed_s;
    return j;
  };
  h.AddFinished(cores(Job("1", "u", 1000, 100, 3600, "solver"), 8, 8));
  std::string from;
  JobRecord wider = cores(Job("2", "u", 5000, 0, 3600, "solver"), 32, 0);
  auto b = h.Baselines(wider, 5000, Target::kCpuCores);
  EXPECT_FLOAT_EQ(h.Anchor(wider, Target::kCpuCores, b, &from), 32.0f);
  EXPECT_EQ(from, "your last job of this name, scaled to this request");
  // Run time does not scale: the same past job lends its own run time.
  EXPECT_FLOAT_EQ(h.Anchor(wider, Target::kRuntime, h.Baselines(wider, 5000, Target::kRuntime)),
                  100.0f);
  // No job of this name: the last two jobs kept 1/4 and 3/4 of their cores busy.
  h.AddFinished(cores(Job("3", "u", 2000, 100, 3600, "a"), 4, 1));
  h.AddFinished(cores(Job("4", "u", 3000, 100, 3600, "b"), 4, 3));
  JobRecord other = cores(Job("5", "u", 5000, 0, 3600, "post"), 16, 0);
  b = h.Baselines(other, 5000, Target::kCpuCores);
  EXPECT_FLOAT_EQ(h.Anchor(other, Target::kCpuCores, b, &from), 8.0f);
  EXPECT_EQ(from, "the mean of your last two jobs, scaled to this request");
}

TEST(HistoryTest, BaselinesFollowTheirDefinitions) {
  History h;
  JobRecord next = Job("9", "u", 10000, 1, 1000);
  auto b = h.Baselines(next, 10000, Target::kRuntime);
  // Tsafrir: the request until the user has two finished jobs.
  EXPECT_FLOAT_EQ(b[static_cast<int>(Baseline::kLast2)], 1000.0f);
  EXPECT_FLOAT_EQ(b[static_cast<int>(Baseline::kRequest)], 1000.0f);
  h.AddFinished(Job("1", "u", 0, 300, 3600));
  h.AddFinished(Job("2", "u", 400, 500, 3600));
  h.AddFinished(Job("3", "u", 1000, 900, 3600));
  b = h.Baselines(next, 10000, Target::kRuntime);
  EXPECT_FLOAT_EQ(b[static_cast<int>(Baseline::kLast2)], 700.0f);          // (500 + 900) / 2
  EXPECT_FLOAT_EQ(b[static_cast<int>(Baseline::kUserMean)], 1700.0f / 3);  // all three
  // Capped at the request.
  JobRecord small = Job("10", "u", 10000, 1, 600);
  EXPECT_FLOAT_EQ(h.Baselines(small, 10000, Target::kRuntime)[static_cast<int>(Baseline::kLast2)],
                  600.0f);
  // VPA: the decayed 90th percentile plus 15 %: the largest of three recent samples here.
  EXPECT_NEAR(b[static_cast<int>(Baseline::kVpa)], 900.0f * 1.15f, 1e-3);
  // Another user's jobs say nothing about this user.
  JobRecord other = Job("11", "v", 10000, 1, 1000);
  EXPECT_FLOAT_EQ(h.Baselines(other, 10000, Target::kRuntime)[static_cast<int>(Baseline::kLast2)],
                  1000.0f);
}

TEST(QuantileGridTest, ConformalQuantileCoversWhatItClaims) {
  std::vector<float> v;
  for (int i = 1; i <= 99; ++i) v.push_back(static_cast<float>(i));
  QuantileGrid g = QuantileGrid::From(v);
  // ceil((99 + 1) * 0.9) = 90: the 90th smallest of 99.
  EXPECT_FLOAT_EQ(g.Quantile(0.9), 90.0f);
  EXPECT_FLOAT_EQ(g.Quantile(0.99), 99.0f);
  // 99 values cannot bound the 99.5th percentile: the bound is infinite, not the largest value.
  EXPECT_TRUE(std::isinf(g.Quantile(0.995)));
  EXPECT_TRUE(std::isinf(g.Quantile(0.001)));
  EXPECT_NEAR(g.ShareAtLeast(90.0f), 10.0 / 99, 1e-9);
  // What predict's note says is needed to bound p90 and p97.5.
  EXPECT_EQ(QuantileGrid::CountToBound(0.9), 9);
  EXPECT_EQ(QuantileGrid::CountToBound(0.975), 39);
  EXPECT_FALSE(std::isinf(QuantileGrid::From(std::vector<float>(9, 1.0f)).Quantile(0.9)));
  EXPECT_TRUE(std::isinf(QuantileGrid::From(std::vector<float>(8, 1.0f)).Quantile(0.9)));
  // No errors at all bound nothing, the median included.
  EXPECT_EQ(QuantileGrid{}.Quantile(0.5), std::numeric_limits<float>::infinity());
  EXPECT_EQ(QuantileGrid{}.Quantile(0.1), -std::numeric_limits<float>::infinity());
  EXPECT_NEAR(g.ShareAbove(90.0f), 9.0 / 99, 1e-9);
}

// Users who each run one kind of job, log-normally around their own typical run time, with
// requests far above it — the pattern real clusters show.
std::vector<JobRecord> SyntheticCluster(int jobs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> typical(std::log(1800), 1.2);
  std::normal_distribution<double> noise(0, 0.35);
  std::vector<double> user_typical(60);
  for (auto& t : user_typical) t = typical(rng);
  std::uniform_int_distribution<int> pick(0, 59);
  std::vector<JobRecord> out;
  int64_t t = 1700000000;
  for (int i = 0; i < jobs; ++i) {
    int u = pick(rng);
    double run = std::clamp(user_typical[u] * std::exp(noise(rng)), 5.0, 86400.0);
    int64_t limit = static_cast<int64_t>(std::ceil(user_typical[u] * 4 / 3600) * 3600);
    out.push_back(Job(std::to_string(i), "user" + std::to_string(u), t,
                      std::min<double>(run, limit), limit, "job" + std::to_string(u % 7)));
    t += 120;
  }
  return out;
}

// A target with too few jobs for a model answers with the baseline that was closest on the
// jobs so far; here each user's run times scatter around a stable typical value, so the mean
// of all their past jobs beats the last two and the far-too-large requests.
TEST(PredictorTest, WithoutAModelTheBaselineClosestSoFarAnswers) {
  auto jobs = SyntheticCluster(400, 3);
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> rows(d.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  std::array<PointErrors, kNumBaselines> errors;
  for (size_t r : rows) {
    for (Baseline b : kAllBaselines) {
      errors[static_cast<int>(b)].Add(d.baseline[0][r][static_cast<int>(b)], d.y[0][r]);
    }
  }
  auto best = BestBaseline(d, Target::kRuntime, rows);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->baseline, Baseline::kUserMean);
  for (Baseline b : {Baseline::kRequest, Baseline::kLast2}) {
    EXPECT_LT(best->errors.mae(), errors[static_cast<int>(b)].mae()) << NameOf(b);
  }
  EXPECT_EQ(FallbackBaseline(d, Target::kRuntime, rows), Baseline::kUserMean);
  // Too few jobs to choose on, or none measured: last-two, as before any evidence.
  std::vector<size_t> few(rows.begin(), rows.begin() + kMinFallbackJobs - 1);
  EXPECT_EQ(FallbackBaseline(d, Target::kRuntime, few), Baseline::kLast2);
  EXPECT_EQ(FallbackBaseline(d, Target::kGpuMemory, rows), Baseline::kLast2);
}

TEST(ReplayTest, LearnsUsersAndCalibratesItsIntervals) {
  EvalOptions options;
  options.retrain_every_s = int64_t{2} * 86400;
  auto r = Replay(SyntheticCluster(6000, 42), {}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& t = (*r)["targets"]["runtime"];
  double mae = t["model"]["mae"].get<double>();
  // Far better than taking the request, and at least as good as the user's last two runs.
  EXPECT_LT(mae, 0.5 * t["baselines"]["request"]["mae"].get<double>());
  EXPECT_LE(mae, t["baselines"]["last2"]["mae"].get<double>());
  EXPECT_GE(t["model"]["aea"].get<double>(), t["baselines"]["last2"]["aea"].get<double>());
  EXPECT_NEAR(t["model"]["coverage80"].get<double>(), 0.80, 0.03);
  EXPECT_NEAR(t["model"]["coverage95"].get<double>(), 0.95, 0.03);
  // A suggestion at 5 % risk frees time and kills about 5 % of jobs, not 20 %.
  const auto& curve = t["saving_curve"];
  ASSERT_EQ(curve.size(), 4u);
  EXPECT_GT(curve[3]["model_saved"].get<double>(), 0.2);
  EXPECT_LT(curve[3]["model_killed"].get<double>(), 0.08);
  // At every risk, the suggestions kill no more jobs than the risk allows (plus sampling noise).
  for (const auto& c : curve) {
    double r = c["risk"].get<double>(), n = c["jobs"].get<double>();
    EXPECT_LE(c["model_killed"].get<double>(), r + 2 * std::sqrt(r * (1 - r) / n)) << c.dump();
  }
  // The whole curve passes through the same points, and a higher risk kills more.
  const auto& whole = t["model_curve"];
  ASSERT_EQ(whole.size(), 12u);
  for (const auto& c : curve) {
    auto same = std::find_if(whole.begin(), whole.end(),
                             [&](const auto& w) { return w["risk"] == c["risk"]; });
    ASSERT_NE(same, whole.end()) << c.dump();
    EXPECT_DOUBLE_EQ((*same)["saved"].get<double>(), c["model_saved"].get<double>());
    EXPECT_DOUBLE_EQ((*same)["killed"].get<double>(), c["model_killed"].get<double>());
  }
  // A higher risk kills more, up to where a kill would free nothing more: there the requests
  // stop short of the risk (at 15 %, they kill under 10 % and free as much as at 5 %).
  EXPECT_LT(whole[0]["killed"].get<double>(), whole[8]["killed"].get<double>());
  EXPECT_LT(whole[11]["killed"].get<double>(), 0.10);
  EXPECT_GE(whole[11]["saved"].get<double>(), whole[8]["saved"].get<double>() - 0.01);
}

// A request at a risk is made the way chosen for the job's history group: a baseline times its
// margin may serve users with many past jobs and not those with few.
TEST(PredictorTest, TheSuggestionFollowsTheJobsHistoryGroup) {
  TargetModel m;
  m.scores = QuantileGrid::From(std::vector<float>(200, 0.0f));  // the point is the quantile
  m.group_scores[1] = m.scores;  // groups 0 and 1 never borrow every group's errors
  m.baseline_log_ratio[static_cast<int>(Baseline::kLast2)] =
      QuantileGrid::From(std::vector<float>(200, std::log(2.0f)));  // last2 x 2
  m.suggest_with.assign(3 * kSuggestRisks.size(), -1);
  for (size_t i = 0; i < kSuggestRisks.size(); ++i) {
    m.suggest_with[2 * kSuggestRisks.size() + i] = static_cast<int>(Baseline::kLast2);
  }
  TargetPrediction p;
  p.model = &m;
  p.log_point = std::log(100.0);
  p.request = 1000;
  p.baselines[static_cast<int>(Baseline::kLast2)] = 150;
  p.group = 1;
  EXPECT_NEAR(p.Suggest(0.05), 100, 1e-3);  // the model's own quantile
  p.group = 2;
  EXPECT_NEAR(p.Suggest(0.05), 300, 1e-3);  // last2 times its margin
  // No user of group 0 to calibrate on: its p90 is unbounded, not the other groups' errors,
  // and the request stands.
  p.group = 0;
  EXPECT_TRUE(std::isinf(p.Quantile(0.9)));
  EXPECT_EQ(p.Suggest(0.05), 1000);
}

// The held-out newest jobs are few for a request's far tail: the requests of users with many
// past jobs are also cut on the errors of the training window's older jobs, each predicted by
// trees trained on the jobs before it. On the next 1,000 jobs the requests at 0.5 %, 1 % and 2 %
// then kill 0.5 %, 1.3 % and 2.4 % and still free more than half the requested time; cut on
// the 800 held-out jobs alone they killed 1.0 %, 1.6 % and 3.4 %. The intervals stay as they
// were.
TEST(PredictorTest, WellKnownUsersRequestsAreCutOnOlderJobsToo) {
  auto jobs = SyntheticCluster(5000, 5);
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> past(4000);
  for (size_t i = 0; i < past.size(); ++i) past[i] = i;
  std::map<size_t, size_t> all_kills;
  std::map<size_t, double> p90;
  for (size_t blocks : {size_t{1}, TrainOptions{}.request_blocks}) {
    TrainOptions o;
    o.request_blocks = blocks;
    auto m = TrainTarget(d, Target::kRuntime, past, o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    if (blocks > 1) EXPECT_GT(m->request_scores.n, 3 * m->group_scores[2].n);
    for (double risk : {0.005, 0.01, 0.02}) {
      size_t killed = 0;
      double freed = 0, asked = 0;
      for (size_t r = past.size(); r < d.rows(); ++r) {
        auto p = PredictTarget(*m, d.row(r), d.baseline[0][r], d.anchor[0][r], d.req[0][r],
                               d.SubmitWeight(r, Target::kRuntime));
        ASSERT_TRUE(p.ok());
        p90[blocks] += p->Quantile(0.9);
        double s = p->Suggest(risk), w = d.Weight(r, Target::kRuntime);
        bool kill = d.y[0][r] > s;
        killed += kill ? 1 : 0;
        freed += kill ? -s * w : (*p->request - s) * w;
        asked += *p->request * w;
      }
      all_kills[blocks] += killed;
      if (blocks == 1) continue;
      EXPECT_LE(static_cast<double>(killed), 1000 * risk * 1.25 + 2) << "risk " << risk;
      EXPECT_GT(freed / asked, 0.5) << "risk " << risk;
    }
  }
  EXPECT_LT(all_kills[TrainOptions{}.request_blocks], all_kills[1]);
  EXPECT_DOUBLE_EQ(p90[TrainOptions{}.request_blocks], p90[1]);
}

// SyntheticCluster whose jobs grow less and less predictable: each run time is scattered by a
// log-normal factor whose spread grows from 0 at the start to `spread` at the end (never beyond
// the job's limit, which does not change).
std::vector<JobRecord> DriftingCluster(int jobs, uint32_t seed, double spread) {
  auto out = SyntheticCluster(jobs, seed);
  std::mt19937 rng(seed + 1);
  std::normal_distribution<double> z(0, 1);
  for (size_t i = 0; i < out.size(); ++i) {
    JobRecord& j = out[i];
    double s = spread * static_cast<double>(i) / static_cast<double>(out.size());
    double run = std::min(j.usage.elapsed_s.value() * std::exp(s * z(rng)),
                          static_cast<double>(*j.request.time_limit_s));
    j.usage.elapsed_s = run;
    j.end_time = *j.submit_time + static_cast<int64_t>(run);
  }
  return out;
}

// Where the jobs outgrow what the model learned, its suggestions kill more than their risk: the
// correction carried to the next model makes the next suggestions at a lower risk; where they
// killed no more than the risk, the risk stays what was asked (never above it).
TEST(PredictorTest, KillsBeyondTheRiskLowerTheRiskTheNextModelUses) {
  for (double growth : {1.0, 4.0}) {
    auto jobs = SyntheticCluster(3000, 11);
    for (size_t i = 2000; i < jobs.size(); ++i) {
      JobRecord& j = jobs[i];
      double run = std::min(j.usage.elapsed_s.value() * growth,
                            static_cast<double>(*j.request.time_limit_s));
      j.usage.elapsed_s = run;
      j.end_time = *j.submit_time + static_cast<int64_t>(run);
    }
    Dataset d = BuildDataset(jobs, {});
    std::vector<size_t> past(2000), since(1000);
    for (size_t i = 0; i < past.size(); ++i) past[i] = i;
    for (size_t i = 0; i < since.size(); ++i) since[i] = 2000 + i;
    auto m = TrainTarget(d, Target::kRuntime, past, {});
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto f = CorrectRisks(*m, d, since);
    size_t five = SuggestRiskIndex(0.05);
    ASSERT_EQ(kSuggestRisks[five], 0.05);
    auto predict = [&] {
      return PredictTarget(*m, d.row(2999), d.baseline[0][2999], d.anchor[0][2999], d.req[0][2999],
                           d.SubmitWeight(2999, Target::kRuntime));
    };
    auto before = predict();
    ASSERT_TRUE(before.ok());
    double suggested = before->Suggest(0.05);
    EXPECT_DOUBLE_EQ(before->EffectiveRisk(0.05), 0.05);
    m->risk_log_factor = f;
    auto after = predict();
    ASSERT_TRUE(after.ok());
    if (growth > 1) {
      // Most of the 1,000 jobs now outgrow a request made for 5 %: the risk used drops to its
      // floor, and the suggestion grows.
      EXPECT_NEAR(after->EffectiveRisk(0.05), 0.05 * kRiskFactorMin, 1e-6);
      EXPECT_GT(after->Suggest(0.05), suggested * 1.2);
    } else {
      // Jobs like the ones it learned from: the risk used stays near what was asked.
      EXPECT_GT(after->EffectiveRisk(0.05), 0.05 * 0.6);
      EXPECT_LE(after->EffectiveRisk(0.05), 0.05 + 1e-9);
    }
  }
}

// A user who allows a higher risk is never told to ask for more, even where the corrections of
// the risks differ (here the 5 % entry's has fallen to its floor, so its own strategy makes the
// request at 0.5 %, safer than the 2 % entry's) and between the risks the model was tuned at.
TEST(PredictorTest, AHigherRiskNeverAsksForMore) {
  auto jobs = SyntheticCluster(3000, 11);
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> past(2500);
  for (size_t i = 0; i < past.size(); ++i) past[i] = i;
  auto m = TrainTarget(d, Target::kRuntime, past, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  m->risk_log_factor[SuggestRiskIndex(0.05)] = static_cast<float>(std::log(kRiskFactorMin));
  std::vector<double> risks;
  for (double r = 0.001; r < 0.3; r *= 1.1) risks.push_back(r);
  int cut_at_five = 0, strictly_more = 0, made_at_five = 0;
  for (size_t r = 2500; r < 3000; ++r) {
    auto p = PredictTarget(*m, d.row(r), d.baseline[0][r], d.anchor[0][r], d.req[0][r],
                           d.SubmitWeight(r, Target::kRuntime));
    ASSERT_TRUE(p.ok());
    for (RiskScope scope : {RiskScope::kCluster, RiskScope::kJob}) {
      double prev = p->Suggest(risks[0], scope);
      for (double risk : risks) {
        double s = p->Suggest(risk, scope);
        ASSERT_LE(s, prev * (1 + 1e-9)) << "row " << r << " at risk " << risk;
        prev = s;
      }
    }
    cut_at_five += p->Suggest(0.05) < *p->request ? 1 : 0;
    strictly_more += p->Suggest(0.02) < p->Suggest(0.05) ? 1 : 0;
    // Where the 5 % entry's request is the larger, the 2 % request is that one, made at the
    // 5 % entry's corrected risk (0.5 %), and predict shows that risk; else at 2 %.
    double used = 0;
    double at_two = p->Suggest(0.02, RiskScope::kCluster, &used);
    if (std::abs(used - 0.05 * kRiskFactorMin) < 1e-9) {
      EXPECT_EQ(at_two, p->Suggest(0.05));
      ++made_at_five;
    } else {
      EXPECT_NEAR(used, 0.02, 1e-9);
    }
  }
  EXPECT_GT(cut_at_five, 100);  // the requests are cut: the check above is not vacuous
  EXPECT_EQ(strictly_more, 0);
  EXPECT_GT(made_at_five, 0);
}

// In a replay of a cluster whose jobs keep growing, the suggestions at a risk kill about that
// share of jobs only with the correction carried from period to period.
// The risk is a share of all jobs. Spent where a cut frees the most (large requests), the
// requests free more resource-time than each job's own (1 - r) quantile does, and kill no more
// jobs than those quantiles.
TEST(PredictorTest, TheKillBudgetGoesWhereACutFreesTheMost) {
  auto jobs = SyntheticCluster(6000, 5);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> pick(0, 3);
  for (auto& j : jobs) j.request.cpus = std::array{1, 4, 16, 64}[pick(rng)];
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> past(4000), next(2000);
  for (size_t i = 0; i < past.size(); ++i) past[i] = i;
  for (size_t i = 0; i < next.size(); ++i) next[i] = 4000 + i;
  auto priced = TrainTarget(d, Target::kRuntime, past, {});
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  ASSERT_EQ(priced->kill_price.size(), kPriceRisks);
  std::vector<TargetPrediction> preds;
  ASSERT_TRUE(PredictTargetRows(*priced, d, next, &preds).ok());
  // A 64-core job carries more of the risk than a 1-core one (the same users, the same runs).
  std::array<double, 2> risk_sum{}, n{};
  for (const TargetPrediction& p : preds) {
    if (p.weight != 1 && p.weight != 64) continue;
    risk_sum[p.weight == 64] += p.ProbTooSmall(p.Suggest(0.02));
    ++n[p.weight == 64];
  }
  EXPECT_GT(risk_sum[1] / n[1], 1.5 * risk_sum[0] / n[0]);
  // Bounded per job, no job is cut at more than the risk (its quantiles' resolution aside).
  for (const TargetPrediction& p : preds) {
    EXPECT_LE(p.ProbTooSmall(p.Suggest(0.02, RiskScope::kJob)), 0.02 + 1.0 / p.Grid().n);
  }
  // (At 5 % the model picks user_mean × its margin for users with many jobs, the same either way.)
  for (double risk : {0.005, 0.01, 0.02}) {
    auto score = [&](const std::vector<TargetPrediction>& preds, double* killed) {
      double freed = 0, asked = 0;
      *killed = 0;
      for (size_t k = 0; k < next.size(); ++k) {
        double req = *preds[k].request, s = preds[k].Suggest(risk), y = d.y[0][next[k]];
        double w = d.Weight(next[k], Target::kRuntime);
        bool kill = y > s && s < req;
        freed += kill ? -s * w : (req - s) * w;
        asked += req * w;
        *killed += kill ? 1.0 / static_cast<double>(next.size()) : 0;
      }
      return freed / asked;
    };
    double killed_priced, killed_uniform;
    double saved_priced = score(preds, &killed_priced);
    std::vector<float> prices = std::move(priced->kill_price);
    priced->kill_price.clear();  // every job at the risk asked for
    double saved_uniform = score(preds, &killed_uniform);
    priced->kill_price = std::move(prices);
    SCOPED_TRACE(::testing::Message()
                 << "risk " << risk << ": priced " << saved_priced << " / " << killed_priced
                 << ", uniform " << saved_uniform << " / " << killed_uniform);
    EXPECT_GT(saved_priced, saved_uniform + 0.005);
    EXPECT_LE(killed_priced, killed_uniform + 2 * std::sqrt(risk * (1 - risk) / 2000));
  }
}

// The share of jobs the replay's requests at a 5 % risk killed, and how many models it trained.
std::pair<double, int> KilledAtFivePercent(const std::vector<JobRecord>& jobs,
                                           const EvalOptions& options) {
  auto r = Replay(jobs, {}, options);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {0, 0};
  const auto& t = (*r)["targets"]["runtime"];
  const auto& c = t["saving_curve"][3];
  EXPECT_EQ(c["risk"].get<double>(), 0.05);
  return {c["model_killed"].get<double>(), t["models_trained"].get<int>()};
}

// Three standard deviations of the 4,000 scored jobs' kill share at a 5 % risk: 1 point.
constexpr double kFivePercentSpread = 0.0103;

TEST(ReplayTest, UnderDriftTheCorrectedRisksKillWhatTheySay) {
  EvalOptions options;
  options.retrain_every_s = 86400;
  auto jobs = DriftingCluster(8000, 5, 1.0);
  options.correct_risks = false;
  double uncorrected = KilledAtFivePercent(jobs, options).first;
  options.correct_risks = true;
  double corrected = KilledAtFivePercent(jobs, options).first;
  // Uncorrected, 7.8 %; corrected (every hour, the default), 5.2 % (5.5 % at retrains only).
  EXPECT_GT(uncorrected, 0.05 + kFivePercentSpread);
  EXPECT_LE(corrected, 0.05 + kFivePercentSpread);
  EXPECT_GT(corrected, 0.05 - kFivePercentSpread);  // nor far below: cuts given up
}

// Retrained every three days (two models for the scored half), the model still moves its
// correction every hour on the jobs that ended since, as an hourly `train` would, and hands it
// on to the next model: between retrains the kills stay at the risk.
TEST(ReplayTest, BetweenRetrainsTheCorrectionMovesEveryHour) {
  EvalOptions options;
  options.retrain_every_s = int64_t{3} * 86400;
  auto jobs = DriftingCluster(8000, 5, 1.0);
  options.correct_every_s = 0;
  auto [at_retrains, models] = KilledAtFivePercent(jobs, options);
  EXPECT_EQ(models, 2);
  options.correct_every_s = 3600;
  double hourly = KilledAtFivePercent(jobs, options).first;
  // Corrected only at the one retrain, 7.5 % killed at a 5 % risk; hourly, 5.4 %.
  EXPECT_GT(at_retrains, 0.05 + kFivePercentSpread);
  EXPECT_LE(hourly, 0.05 + kFivePercentSpread);
  EXPECT_GT(hourly, 0.05 - kFivePercentSpread);  // nor far below
}

TEST(QuantileGridTest, AWeightedGridCountsItsUnitsNotItsValues) {
  // Equal weights: the plain grid.
  std::vector<std::pair<float, double>> equal;
  for (int i = 1; i <= 99; ++i) equal.emplace_back(static_cast<float>(i), 1.0);
  QuantileGrid g = QuantileGrid::FromWeighted(equal, 99);
  EXPECT_FLOAT_EQ(g.Quantile(0.9), 90.0f);
  EXPECT_TRUE(std::isinf(g.Quantile(0.995)));
  // One user's 100 errors of 0 and nine users' one error each (1..9), each user weighing 1:
  // the middle user is the fifth or sixth, not the crowd's 0; ten users cannot bound 95 %.
  std::vector<std::pair<float, double>> users(100, {0.0f, 0.01});
  for (int u = 1; u <= 9; ++u) users.emplace_back(static_cast<float>(u), 1.0);
  QuantileGrid w = QuantileGrid::FromWeighted(users, 10);
  EXPECT_EQ(w.n, 10);
  EXPECT_GT(w.Quantile(0.5), 3.5f);
  EXPECT_LT(w.Quantile(0.5), 5.5f);
  EXPECT_FLOAT_EQ(w.Quantile(0.9), 9.0f);  // ceil(11 · 0.9) = 10: the largest of ten
  EXPECT_TRUE(std::isinf(w.Quantile(0.95)));
  EXPECT_FLOAT_EQ(w.Quantile(0.1), 0.0f);
  EXPECT_GT(w.ShareAtLeast(1.0f), 0.8);  // nine users of ten
  EXPECT_LT(w.ShareAtLeast(1.0f), 0.9);
}

// Users arrive one after another; each submits a burst of `burst` jobs at once, near a typical
// run time of its own that the cluster cannot know yet, then 30 more one by one.
std::vector<JobRecord> NewUsersInBursts(int users, int burst, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> typical(std::log(1800), 1.2);
  std::normal_distribution<double> noise(0, 0.1);
  std::vector<JobRecord> out;
  for (int u = 0; u < users; ++u) {
    double mine = typical(rng);
    int64_t limit = static_cast<int64_t>(std::ceil(mine * 4 / 3600) * 3600);
    int64_t arrive = 1700000000 + int64_t{u} * 6 * 3600;
    for (int k = 0; k < burst + 30; ++k) {
      int64_t submit = k < burst ? arrive : arrive + 2 * limit + int64_t{k - burst} * 600;
      double run = std::min<double>(mine * std::exp(noise(rng)), static_cast<double>(limit));
      out.push_back(
          Job(fmt::format("{}.{}", u, k), "user" + std::to_string(u), submit, run, limit, "job"));
    }
  }
  return out;
}

// A new user's jobs miss together. Counted one by one, the few held-out new users' jobs were
// too few for a grid of their own and borrowed every group's errors, which the users the model
// knows make narrow: new users' 80 % intervals held 68 % of their jobs, the 95 % ones 88 %.
// Counted as one per user, they hold 84 %; the held-out day's ten-odd new users cannot bound
// 95 % (every job covered), and the older days' new users, each predicted by trees that never
// saw them, do: 98.4 % of new users' jobs and 98.6 % of those of users with a few past jobs.
TEST(ReplayTest, ANewUsersIntervalsHoldForNewUsers) {
  EvalOptions options;
  options.retrain_every_s = 86400;
  auto r = Replay(NewUsersInBursts(160, 4, 3), {}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& m = (*r)["targets"]["runtime"]["model"];
  std::map<std::string, nlohmann::json> by;
  for (const auto& g : m["by_history"]) by[g["history"].get<std::string>()] = g;
  ASSERT_TRUE(by.contains("none")) << m.dump();
  EXPECT_GT(by["none"]["n"].get<int64_t>(), 200);
  EXPECT_GE(by["none"]["coverage80"].get<double>(), 0.77) << m.dump();
  EXPECT_GE(by["none"]["coverage95"].get<double>(), 0.93) << m.dump();
  ASSERT_TRUE(by.contains("some")) << m.dump();
  for (const char* g : {"none", "some"}) {
    EXPECT_LT(by[g]["coverage95"].get<double>(), 0.99) << g << ": " << m.dump();
  }
  // The users the model knows keep intervals calibrated job by job, and bounded.
  ASSERT_TRUE(by.contains("much")) << m.dump();
  EXPECT_NEAR(by["much"]["coverage80"].get<double>(), 0.80, 0.03) << m.dump();
  EXPECT_NEAR(by["much"]["coverage95"].get<double>(), 0.95, 0.03) << m.dump();
}

// Users whose jobs scatter around a mean of their own, with no other signal: the user's mean is
// the best guess, and the last job (where the trees start from) a noisy one. The shipped point
// must be no worse than that baseline (within 2 %), and its intervals must still hold. (Here the
// trees alone miss by 5.5 % more than the user's mean; the held-out blend brings the point level
// with it.)
std::vector<JobRecord> UsersAroundTheirMeans(int users, int jobs_per_user, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> log_mean(std::log(600.0), std::log(36000.0));
  std::lognormal_distribution<double> noise(0.0, 0.5);
  std::uniform_int_distribution<int64_t> when(0, int64_t{60} * 86400);
  std::vector<JobRecord> jobs;
  for (int u = 0; u < users; ++u) {
    double mean = std::exp(log_mean(rng));
    for (int k = 0; k < jobs_per_user; ++k) {
      jobs.push_back(Job(fmt::format("{}-{}", u, k), fmt::format("u{}", u), 1'000'000 + when(rng),
                         mean * noise(rng), 172800));
    }
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const JobRecord& a, const JobRecord& b) { return a.submit_time < b.submit_time; });
  return jobs;
}

TEST(ReplayTest, NeverWorseThanAClearlyBetterBaseline) {
  EvalOptions options;
  options.retrain_every_s = int64_t{7} * 86400;
  auto r = Replay(UsersAroundTheirMeans(40, 60, 5), {}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& t = (*r)["targets"]["runtime"];
  double user_mean = t["baselines"]["user_mean"]["mae"].get<double>();
  // The setting is what it says: the user's mean is clearly better than the last two jobs.
  ASSERT_LT(user_mean, 0.9 * t["baselines"]["last2"]["mae"].get<double>()) << t.dump();
  EXPECT_LE(t["model"]["mae"].get<double>(), 1.02 * user_mean) << t["blends"].dump();
  EXPECT_NEAR(t["model"]["coverage80"].get<double>(), 0.80, 0.04) << t["model"].dump();
  EXPECT_NEAR(t["model"]["coverage95"].get<double>(), 0.95, 0.04) << t["model"].dump();
}

// The retrains run on a pool of threads; the document must not depend on how many.
TEST(ReplayTest, TheSameDocumentWhateverTheThreads) {
  EvalOptions options;
  options.retrain_every_s = int64_t{6} * 3600;
  nlohmann::json docs[2];
  int threads[2] = {1, 3};
  for (int k = 0; k < 2; ++k) {
    options.threads = threads[k];
    int last_done = 0, calls = 0;
    options.progress = [&](int done, int total) {
      EXPECT_EQ(done, last_done + 1);  // in order, from the calling thread
      EXPECT_LE(done, total);
      last_done = done;
      ++calls;
    };
    auto r = Replay(SyntheticCluster(3000, 7), {}, options);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(calls, (*r)["retrains"].get<int>());
    docs[k] = std::move(*r);
    docs[k].erase("seconds");
  }
  EXPECT_GT(docs[0]["retrains"].get<int>(), 3);
  EXPECT_EQ(docs[0], docs[1]);
}

TEST(ReplayTest, TooFewJobsIsAClearError) {
  auto r = Replay(SyntheticCluster(50, 1), {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too few"), std::string::npos);
}

// One user's job run `runs` times, each asking for 2 GiB, 2 CPUs and an hour and using about
// 310 MiB, 1.9 cores and 20 s (a few percent of noise), among four times as many jobs of other
// users with other sizes; as sacct stores them (no GPUs listed, the allocation beside the
// request), ending 10 minutes apart before `now`.
constexpr double kRepeatedPeakBytes = 310.0 * 1024 * 1024;
constexpr double kRepeatedRuntimeS = 20;

std::vector<JobRecord> RepeatedJobAmongOthers(int runs, int64_t now) {
  struct Kind {
    std::string user, name;
    double peak_bytes, cores, runtime_s;
    int64_t mem_bytes;
    double cpus;
    int64_t limit_s;
  };
  std::vector<Kind> kinds = {
      {"root", "rs_work", kRepeatedPeakBytes, 1.9, kRepeatedRuntimeS, 2048LL << 20, 2, 3600}};
  for (int k = 0; k < 8; ++k) {
    int64_t mem = (512LL << 20) << (k % 4 + 1);
    kinds.push_back({"user" + std::to_string(k % 4), "other" + std::to_string(k),
                     static_cast<double>(mem) * kRepeatedPeakBytes / (2048.0 * 1024 * 1024),
                     1.0 + k % 2, 30.0 * (k + 1), mem, 1.0 + k % 2 + (k % 3 == 0 ? 1 : 0),
                     60LL * 5 * (k + 2)});
  }
  std::vector<int> order(runs, 0);
  for (int i = 0; i < 4 * runs; ++i) order.push_back(1 + i % 8);
  std::mt19937 rng(7);
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::vector<JobRecord> out;
  for (size_t i = 0; i < order.size(); ++i) {
    const Kind& k = kinds[order[i]];
    JobRecord j;
    j.cluster = "c";
    j.job_id = std::to_string(900000 + i);
    j.request.user = k.user;
    j.request.job_name = k.name;
    j.request.partition = "debug";
    j.request.time_limit_s = k.limit_s;
    j.request.cpus = k.cpus;
    j.request.memory_bytes = k.mem_bytes;
    j.alloc.cpus = k.cpus;
    j.alloc.memory_bytes = k.mem_bytes;
    double run = std::max(1.0, std::round(k.runtime_s * noise(rng)));
    j.end_time = now - static_cast<int64_t>(order.size() - i) * 600;
    j.start_time = *j.end_time - static_cast<int64_t>(run);
    j.submit_time = *j.start_time - 5;
    j.usage.elapsed_s = run;
    j.usage.cpu_time_s = run * std::min(k.cores, k.cpus) * noise(rng);
    j.usage.peak_rss_bytes = static_cast<int64_t>(k.peak_bytes * noise(rng));
    j.outcome.state = "COMPLETED";
    out.push_back(std::move(j));
  }
  return out;
}

// The next submission of the repeated job, as a parsed job script gives it: the request only,
// and zero GPUs written out.
JobRecord NextSubmission(int64_t now) {
  JobRecord j;
  j.cluster = "c";
  j.request.user = "root";
  j.request.job_name = "rs_work";
  j.request.time_limit_s = 3600;
  j.request.cpus = 2;
  j.request.memory_bytes = 2048LL << 20;
  j.request.gpus = 0;
  j.submit_time = now;
  return j;
}

TEST(HistoryTest, AScriptFindsThePastRunsSacctStored) {
  const int64_t now = 1700000000;
  auto past = RepeatedJobAmongOthers(10, now);
  History h;
  for (const auto& j : past) h.AddFinished(j);
  JobRecord next = NextSubmission(now);
  const JobRecord& stored = *std::find_if(
      past.begin(), past.end(), [](const JobRecord& j) { return j.request.user == "root"; });
  // No GPUs listed (sacct) and zero GPUs (a script) are the same request.
  EXPECT_EQ(RequestSignature(next), RequestSignature(stored));
  std::vector<float> row(Layout().cols());
  h.Features(next, now, {}, row.data());
  EXPECT_FLOAT_EQ(row[Column("user_name_request_jobs")], std::log1p(10.0f));
  EXPECT_NEAR(row[Column("peak_memory.user_name_request_median")], std::log(kRepeatedPeakBytes),
              0.05);
  EXPECT_FLOAT_EQ(row[Column("req_gpus")], 0.0f);
}

TEST(PredictorTest, ARepeatedJobIsPredictedNearWhatItUsedAndUnderItsRequest) {
  const int64_t now = 1700000000;
  const int runs = 60;
  auto jobs = RepeatedJobAmongOthers(runs, now);
  // What `predict` reads from the store: the finished jobs, in order of end time.
  History history;
  for (const auto& j : jobs) history.AddFinished(j);
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> rows(d.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  JobRecord next = NextSubmission(now);
  std::vector<float> row(Layout().cols());
  history.Features(next, now, {}, row.data());
  for (auto [t, used] : {std::pair{Target::kPeakMemory, kRepeatedPeakBytes},
                         std::pair{Target::kRuntime, kRepeatedRuntimeS}}) {
    SCOPED_TRACE(std::string(NameOf(t)));
    auto m = TrainTarget(d, t, rows, {});
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto request = TargetRequest(next, t);
    ASSERT_TRUE(request.has_value());
    auto baselines = history.Baselines(next, now, t);
    double weight = SubmitWeight(t, next);
    auto p = PredictTarget(*m, row.data(), baselines, history.Anchor(next, t, baselines), request,
                           weight);
    ASSERT_TRUE(p.ok()) << p.status().message();
    // The user has run it many times: the tight intervals of users with history ("much"), so
    // `predict` does not call them a new user.
    EXPECT_EQ(p->group, 2);
    // Near what every past run used, not the request and not half of it.
    EXPECT_NEAR(p->point, used, 0.1 * used);
    // The 90th percentile covers what a run uses, the suggestion at 5 % risk what nine past
    // runs in ten used, and both are far under the request.
    std::vector<double> past;
    for (const auto& j : jobs) {
      if (j.request.user == "root") past.push_back(*TargetValue(j, t));
    }
    std::sort(past.begin(), past.end());
    ASSERT_EQ(past.size(), static_cast<size_t>(runs));
    EXPECT_GE(p->Quantile(0.9), used);
    double suggested = p->Suggest(0.05);
    EXPECT_GE(suggested, past[past.size() * 9 / 10]);
    EXPECT_LT(suggested, 0.5 * *request);
  }
}

// "Too small" is what stops a job: its time limit, reached by every job stopped there, and for
// CPU cores more than it has, not all of them busy.
TEST(PredictorTest, AJobThatKeepsItsCoresBusyDoesNotNeedMore) {
  const int64_t now = 1700000000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(0.5, 1.0);
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 600; ++i) {
    bool busy = i % 2 == 0;
    JobRecord j = Job(std::to_string(i), busy ? "busy" : "idle", now - int64_t{600 - i} * 3600, 0,
                      3600, busy ? "mpi" : "serial");
    j.request.cpus = 8;
    j.alloc.cpus = 8;
    // The busy user's runs: half end at the limit, stopped there.
    bool stopped = busy && i % 4 == 0;
    double run = stopped ? 3600 : std::round(3000 * noise(rng));
    j.end_time = j.submit_time.value() + static_cast<int64_t>(run);
    j.usage.elapsed_s = run;
    j.usage.cpu_time_s = run * (busy ? 8 : 8 * noise(rng));
    if (stopped) j.outcome.state = "TIMEOUT";
    jobs.push_back(std::move(j));
  }
  History history;
  for (const auto& j : jobs) history.AddFinished(j);
  Dataset d = BuildDataset(jobs, {});
  std::vector<size_t> rows(d.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  JobRecord next = Job("next", "busy", now, 0, 3600, "mpi");
  next.request.cpus = 8;
  std::vector<float> row(Layout().cols());
  history.Features(next, now, {}, row.data());
  auto too_small = [&](Target t) {
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    auto m = TrainTarget(d, t, rows, {});
    if (!m.ok()) {
      ADD_FAILURE() << m.status().message();
      return kNaN;
    }
    auto baselines = history.Baselines(next, now, t);
    auto p = PredictTarget(*m, row.data(), baselines, history.Anchor(next, t, baselines),
                           TargetRequest(next, t), SubmitWeight(t, next));
    if (!p.ok()) {
      ADD_FAILURE() << p.status().message();
      return kNaN;
    }
    return p->ProbTooSmall(*TargetRequest(next, t));
  };
  // Every run of the busy user kept its 8 cores busy, none needed a ninth.
  EXPECT_LT(too_small(Target::kCpuCores), 0.05);
  // Half its runs reached the time limit: that is too small.
  EXPECT_GT(too_small(Target::kRuntime), 0.3);
}

TEST(ModelSetTest, AStoredModelPredictsWhatTheTrainedOneDid) {
  auto jobs = SyntheticCluster(3000, 7);
  History history;
  Dataset d = BuildDataset(jobs, {}, &history);
  std::vector<size_t> rows(d.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  auto m = TrainTarget(d, Target::kRuntime, rows, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  m->risk_log_factor[1] = -0.5f;
  ModelSet set;
  set.cluster = "c";
  set.targets.emplace(Target::kRuntime, std::move(*m));
  set.fallback[Target::kPeakMemory] = Baseline::kUserMean;
  const TargetModel& trained = set.targets.at(Target::kRuntime);
  double weight = d.SubmitWeight(2999, Target::kRuntime);
  auto before =
      PredictTarget(trained, d.row(2999), d.baseline[0][2999], d.anchor[0][2999], 7200.0, weight);
  ASSERT_TRUE(before.ok());

  auto store = OpenStore(":memory:");
  ASSERT_TRUE(store.ok());
  auto v1 = (*store)->PutModel("c", 100, 3000, set.Serialize());
  auto v2 = (*store)->PutModel("c", 200, 3000, set.Serialize());
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_EQ(*v1, 1);
  EXPECT_EQ(*v2, 2);
  auto stored = (*store)->GetModel("c", 0);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->version, 2);
  EXPECT_FALSE((*store)->GetModel("other", 0).ok());
  auto loaded = ModelSet::Deserialize(stored->blob);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto after = PredictTarget(loaded->targets.at(Target::kRuntime), d.row(2999), d.baseline[0][2999],
                             d.anchor[0][2999], 7200.0, weight);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(loaded->fallback, set.fallback);
  EXPECT_DOUBLE_EQ(before->point, after->point);
  EXPECT_DOUBLE_EQ(before->Quantile(0.9), after->Quantile(0.9));
  EXPECT_DOUBLE_EQ(before->Suggest(0.005), after->Suggest(0.005));
  EXPECT_DOUBLE_EQ(before->Suggest(0.02), after->Suggest(0.02));
  EXPECT_EQ(loaded->targets.at(Target::kRuntime).kill_price, trained.kill_price);
  EXPECT_GT(trained.request_scores.n, 0);
  EXPECT_EQ(loaded->targets.at(Target::kRuntime).request_scores.q, trained.request_scores.q);
  EXPECT_EQ(trained.kill_price.size(), kPriceRisks);
  EXPECT_NEAR(after->EffectiveRisk(0.005), 0.005 * std::exp(-0.5), 1e-9);
  EXPECT_LE(after->Quantile(0.1), after->point);
  EXPECT_LE(after->point, after->Quantile(0.9));
  EXPECT_LE(after->point, 7200.0);  // the point never exceeds the request

  // A model stored before the requests had errors of their own cuts them on the intervals'.
  {
    auto blob = nlohmann::json::from_cbor(set.Serialize());
    for (auto& tj : blob.at("targets")) tj.erase("request_scores");
    auto bytes = nlohmann::json::to_cbor(blob);
    auto old = ModelSet::Deserialize(std::string(bytes.begin(), bytes.end()));
    ASSERT_TRUE(old.ok()) << old.status().message();
    auto full = ModelSet::Deserialize(set.Serialize());
    ASSERT_TRUE(full.ok());
    TargetModel& without = full->targets.at(Target::kRuntime);
    without.request_scores = {};
    auto a = PredictTarget(old->targets.at(Target::kRuntime), d.row(2999), d.baseline[0][2999],
                           d.anchor[0][2999], 7200.0, weight);
    auto b =
        PredictTarget(without, d.row(2999), d.baseline[0][2999], d.anchor[0][2999], 7200.0, weight);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(&a->RequestGrid(), &a->Grid());
    EXPECT_DOUBLE_EQ(a->Suggest(0.005), b->Suggest(0.005));
  }

  // Bytes that are not a model are refused with a message, not a crash.
  EXPECT_FALSE(ModelSet::Deserialize("not a model").ok());
}

}  // namespace
}  // namespace rightsize

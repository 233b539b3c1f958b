// The predictor: features see only the past, the baselines do what their papers say, the
// intervals cover what they claim, and a stored model predicts what the trained one did.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(ReplayTest, LearnsUsersAndCalibratesItsIntervals) {
  EvalOptions options;
  options.retrain_every_s = 2 * 86400;
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
}

TEST(ReplayTest, TooFewJobsIsAClearError) {
  auto r = Replay(SyntheticCluster(50, 1), {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too few"), std::string::npos);
}

TEST(ModelSetTest, AStoredModelPredictsWhatTheTrainedOneDid) {
  auto jobs = SyntheticCluster(3000, 7);
  History history;
  Dataset d = BuildDataset(jobs, {}, &history);
  std::vector<size_t> rows(d.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  auto m = TrainTarget(d, Target::kRuntime, rows, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ModelSet set;
  set.cluster = "c";
  set.targets.emplace(Target::kRuntime, std::move(*m));
  const TargetModel& trained = set.targets.at(Target::kRuntime);
  auto before = PredictTarget(trained, d.row(2999), d.baseline[0][2999], d.anchor[0][2999], 7200.0);
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
                             d.anchor[0][2999], 7200.0);
  ASSERT_TRUE(after.ok());
  EXPECT_DOUBLE_EQ(before->point, after->point);
  EXPECT_DOUBLE_EQ(before->Quantile(0.9), after->Quantile(0.9));
  EXPECT_LE(after->Quantile(0.1), after->point);
  EXPECT_LE(after->point, after->Quantile(0.9));
  EXPECT_LE(after->point, 7200.0);  // the point never exceeds the request

  // Bytes that are not a model are refused with a message, not a crash.
  EXPECT_FALSE(ModelSet::Deserialize("not a model").ok());
}

}  // namespace
}  // namespace rightsize

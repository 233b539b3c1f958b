// The change-aware prediction's pieces (model/code_change.h) and the chronological replay with
// each job's code: programs whose batch size changes now and then.
#include "model/code_change.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/replay.h"

namespace rightsize {
namespace {

// FactsJson's shape for a program of `params` parameters at `batch`, its estimate's terms: the
// model states fixed, the activations per sample.
std::string Facts(int64_t batch, double params = 1e7) {
  return nlohmann::json{{"entry", "train.py"},
                        {"facts",
                         {{"batch_size", {{"value", batch}, {"where", "train.py:40"}}},
                          {"parameters", {{"value", params}, {"where", "train.py:12"}}},
                          {"seq_len", {{"value", 128}, {"where", "train.py:41"}}}}}}
      .dump();
}
std::string Estimate(int64_t batch, double params = 1e7) {
  double states = 16 * params, acts = 4e7 * static_cast<double>(batch);
  return nlohmann::json{{"p50", states + acts + 5e8},
                        {"data_parallel_gpus", 1},
                        {"terms",
                         {{{"name", "weights"}, {"bytes", states}},
                          {{"name", "activations"}, {"bytes", acts}},
                          {{"name", "CUDA context"}, {"bytes", 5e8}}}}}
      .dump();
}

TEST(CodeChangeTest, ReadsWhatChangedAndHowMuch) {
  CodeReading a = ReadCode(Facts(16), Estimate(16));
  CodeReading b = ReadCode(Facts(32), Estimate(32));
  EXPECT_EQ(a.program, "train.py");
  ASSERT_TRUE(a.tensor_bytes && b.tensor_bytes);
  EXPECT_DOUBLE_EQ(*b.tensor_bytes - *a.tensor_bytes, 4e7 * 16);  // the context is not a tensor
  auto changed = ChangedFacts(a, b);
  ASSERT_EQ(changed.size(), 1U);
  EXPECT_EQ(changed[0], "batch_size 16 → 32 at train.py:40");
  EXPECT_TRUE(ChangedFacts(a, a).empty());
  // Host memory: the tensors' change is added to what the last run measured.
  auto x = CodeLogRatio(Target::kPeakMemory, a, b, 1e9);
  ASSERT_TRUE(x);
  EXPECT_NEAR(std::exp(*x), (1e9 + 4e7 * 16) / 1e9, 1e-9);
  // Run time: the work per run doubles with the batch.
  EXPECT_NEAR(std::exp(*CodeLogRatio(Target::kRuntime, a, b, 600.0)), 2.0, 1e-9);
  // Full activation checkpointing runs the forward again: 4 passes of work instead of 3.
  nlohmann::json ckpt = nlohmann::json::parse(Facts(16));
  ckpt["facts"]["checkpointing"] = {{"value", "full"}, {"where", "train.py:60"}};
  CodeReading c = ReadCode(ckpt.dump(), Estimate(16));
  EXPECT_NEAR(std::exp(*CodeLogRatio(Target::kRuntime, a, c, 600.0)), 4.0 / 3.0, 1e-9);
  ckpt["facts"]["checkpointing"]["value"] = "selective";
  EXPECT_NEAR(*CodeLogRatio(Target::kRuntime, a, ReadCode(ckpt.dump(), Estimate(16)), 600.0), 0,
              1e-12);
  EXPECT_FALSE(CodeLogRatio(Target::kCpuCores, a, b, 1.0));
  // Malformed JSON: an empty reading, no change.
  CodeReading bad = ReadCode("{not json", "");
  EXPECT_TRUE(bad.Empty());
  EXPECT_FALSE(CodeLogRatio(Target::kRuntime, bad, b, 600.0));
}

TEST(CodeChangeTest, ATorchVersionOnlyOneReadingHasIsNotAChange) {
  // `rightsize submit` reads the job's torch, the server and the submit hook cannot: the same
  // program read both ways is a repeat, not a change whose estimates differ.
  nlohmann::json with = nlohmann::json::parse(Facts(16));
  with["facts"]["torch_version"] = {{"value", "1.13.1"}, {"where", "/venv/torch/version.py:1"}};
  CodeReading plain = ReadCode(Facts(16), Estimate(16), "train.py", "abc");
  CodeReading read = ReadCode(with.dump(), Estimate(16), "train.py", "abc");
  EXPECT_TRUE(SameCode(plain, read));
  EXPECT_TRUE(SameCode(read, plain));
  EXPECT_FALSE(CodeChanged(plain, read));
  EXPECT_TRUE(ChangedFacts(plain, read).empty());
  EXPECT_EQ(ChangeKind(read, plain), "");
  // Read on both sides, a new torch is a change; so is a batch beside a one-sided version.
  nlohmann::json newer = with;
  newer["facts"]["torch_version"]["value"] = "2.4.1";
  CodeReading upgraded = ReadCode(newer.dump(), Estimate(16), "train.py", "abc");
  EXPECT_FALSE(SameCode(read, upgraded));
  EXPECT_TRUE(CodeChanged(read, upgraded));
  EXPECT_EQ(ChangeKind(read, upgraded), "torch_version: 1.13.1 → 2.4.1");
  EXPECT_TRUE(CodeChanged(plain, ReadCode(Facts(32), Estimate(32), "train.py", "abc")));
  nlohmann::json bigger = with;
  bigger["facts"]["batch_size"]["value"] = 32;
  EXPECT_TRUE(CodeChanged(plain, ReadCode(bigger.dump(), Estimate(32), "train.py", "abc")));
  // A reading with no facts at all beside one with a version: different, and no crash.
  EXPECT_TRUE(CodeChanged(ReadCode("{}", ""), read));
}

TEST(CodeChangeTest, AnAttentionKernelChangeIsAChangeAndAnUnreportedOneIsNot) {
  auto with_attention = [](const char* kernel) {
    nlohmann::json j = nlohmann::json::parse(Facts(16));
    j["facts"]["fused_attention"] = {{"value", true}, {"where", "train.py:20"}};
    if (kernel != nullptr) j["facts"]["fused_attention"]["kernel"] = kernel;
    return ReadCode(j.dump(), Estimate(16), "train.py", "abc");
  };
  // Both fused, but FlashAttention keeps no scores where the job's torch has no SDPA.
  CodeReading sdpa = with_attention("sdpa"), flash = with_attention("flash-attention");
  EXPECT_FALSE(SameCode(sdpa, flash));
  EXPECT_EQ(ChangeKind(sdpa, flash), "fused_attention: sdpa → flash-attention");
  // A reading stored before kernels were reported: the same code as today's reading of it.
  CodeReading stored = with_attention(nullptr);
  EXPECT_TRUE(SameCode(stored, sdpa));
  EXPECT_FALSE(CodeChanged(stored, sdpa));
  EXPECT_EQ(ChangeKind(stored, sdpa), "");
}

TEST(CodeChangeTest, CalibrationShrinksTowardWhatPastChangesShowed) {
  CodeCalibration neutral;
  EXPECT_DOUBLE_EQ(neutral.Fit(Target::kRuntime).slope, 1.0);
  EXPECT_GT(neutral.Fit(Target::kRuntime).Spread(std::log(2.0), 600.0), 0.0);
  EXPECT_DOUBLE_EQ(neutral.Fit(Target::kRuntime).fixed, 0.0);
  EXPECT_FALSE(neutral.EstimateCorrection(Target::kRuntime));
  // Past changes moved run time by half (in logs) of what the code said.
  CodeCalibration half;
  for (int k = 0; k < 40; ++k) {
    double x = (k % 2 == 0 ? 1 : -1) * std::log(2.0);
    half.AddChange(Target::kPeakMemory, x, 0.5 * x, 1e9);
  }
  EXPECT_NEAR(half.Fit(Target::kPeakMemory).slope, 0.5, 0.05);
  EXPECT_DOUBLE_EQ(half.Fit(Target::kPeakMemory).fixed, 0.0);
  EXPECT_LT(half.Fit(Target::kPeakMemory).Spread(std::log(2.0), 1e9),
            neutral.Fit(Target::kPeakMemory).Spread(std::log(2.0), 1e9));
  // It survives the cluster meta's JSON.
  CodeCalibration back = CodeCalibration::FromJson(half.ToJson());
  EXPECT_DOUBLE_EQ(back.Fit(Target::kPeakMemory).slope, half.Fit(Target::kPeakMemory).slope);
  EXPECT_EQ(back.Fit(Target::kPeakMemory).changes, 40);
  // An older train's sums are not read as changes (the next train writes them again).
  EXPECT_EQ(CodeCalibration::FromJson(
                nlohmann::json::parse(R"({"runtime":{"changes":4,"sxy":1,"sxx":1,"syy":1}})"))
                .Fit(Target::kRuntime)
                .changes,
            0);
  // A widened quantile moves outward on both sides, and not at all without a spread.
  EXPECT_LT(WidenLogOffset(-0.2, 0.1, 0.3), -0.2);
  EXPECT_GT(WidenLogOffset(0.2, 0.9, 0.3), 0.2);
  EXPECT_DOUBLE_EQ(WidenLogOffset(0.2, 0.9, 0), 0.2);
}

// A bigger batch slowed past runs by a third of what the code said (more samples per step, the
// same steps' overhead), a wider model by all of it: each kind of change gets its own slope, and
// a kind never seen gets the cluster's.
TEST(CodeChangeTest, EachKindOfChangeHasItsOwnSlope) {
  CodeCalibration cal;
  for (int k = 0; k < 20; ++k) {
    double x = (k % 2 == 0 ? 1 : -1) * std::log(2.0);
    cal.AddChange(Target::kPeakMemory, x, x / 3, 1e9, "batch_size");
    cal.AddChange(Target::kPeakMemory, x, x, 1e9, "hidden+parameters");
  }
  EXPECT_NEAR(cal.Fit(Target::kPeakMemory, "batch_size").slope, 1.0 / 3, 0.05);
  EXPECT_NEAR(cal.Fit(Target::kPeakMemory, "hidden+parameters").slope, 1.0, 0.05);
  double all = cal.Fit(Target::kPeakMemory).slope;
  EXPECT_GT(all, 0.5);
  EXPECT_LT(all, 0.8);
  EXPECT_DOUBLE_EQ(cal.Fit(Target::kPeakMemory, "seq_len").slope, all);
  // The kinds survive the cluster meta's JSON.
  CodeCalibration back = CodeCalibration::FromJson(cal.ToJson());
  EXPECT_DOUBLE_EQ(back.Fit(Target::kPeakMemory, "batch_size").slope,
                   cal.Fit(Target::kPeakMemory, "batch_size").slope);
  // What a change is: the numeric facts that differ, in order.
  EXPECT_EQ(ChangeKind(ReadCode(Facts(16), ""), ReadCode(Facts(32), "")), "batch_size");
  EXPECT_EQ(ChangeKind(ReadCode(Facts(16), ""), ReadCode(Facts(32, 2e7), "")),
            "batch_size+parameters");
  EXPECT_EQ(ChangeKind(ReadCode(Facts(16), ""), ReadCode(Facts(16), "")), "");
  // A change the code cannot size: bf16 halved the run time of ten past runs on this cluster.
  const std::string bf16 = "precision: fp32 → bf16";
  for (int k = 0; k < 10; ++k) cal.AddChange(Target::kRuntime, 0, std::log(0.5), 600, bf16);
  EXPECT_NEAR(cal.Fit(Target::kRuntime, bf16).Applied(0, 600), std::log(0.5) * 10 / 12, 1e-9);
  EXPECT_DOUBLE_EQ(cal.Fit(Target::kRuntime, "optimizer: SGD → Adam").Applied(0, 600), 0.0);
  EXPECT_DOUBLE_EQ(cal.Fit(Target::kRuntime).Applied(0, 600), 0.0);
  nlohmann::json fp32 = nlohmann::json::parse(Facts(16)), mixed = fp32;
  fp32["facts"]["precision"] = {{"value", "fp32"}, {"where", "train.py:9"}};
  mixed["facts"]["precision"] = {{"value", "bf16"}, {"where", "train.py:9"}};
  EXPECT_EQ(ChangeKind(ReadCode(fp32.dump(), ""), ReadCode(mixed.dump(), "")), bf16);
}

// Runs that start in a minute whatever they do (the interpreter, the imports, loading), then
// work for a time the batch scales: past batch ×2 and ÷2 changes of runs of 2-30 minutes show
// the minute, and a new change scales only the rest.
TEST(CodeChangeTest, RunTimesFixedPartIsNotScaled) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 0.02);
  std::uniform_real_distribution<double> work(60, 1800);
  CodeCalibration cal;
  for (int k = 0; k < 30; ++k) {
    double r = k % 2 == 0 ? 2.0 : 0.5;
    double w = work(rng);
    double before = 60 + w, after = (60 + w * r) * std::exp(noise(rng));
    cal.AddChange(Target::kRuntime, std::log(r), std::log(after / before), before);
  }
  EXPECT_NEAR(cal.Fit(Target::kRuntime).fixed, 60, 10);
  // A run of 2 minutes (1 of work) with its batch doubled takes 3, not 4.
  double predicted = 120 * std::exp(cal.Fit(Target::kRuntime).Applied(std::log(2.0), 120));
  EXPECT_NEAR(predicted, 180, 180 * 0.05);
  EXPECT_NEAR(120 * std::exp(CodeCalibration().Fit(Target::kRuntime).Applied(std::log(2.0), 120)),
              240, 1e-9);
  // The fixed part is never more than 90 % of the run it moves from.
  EXPECT_GT(cal.Fit(Target::kRuntime).Applied(std::log(2.0), 30), 0.0);
}

// 24 users, each running one program every 8 hours for 40 runs; now and then the batch size is
// doubled or halved, and the job's peak memory and run time follow it (with noise). Replayed
// with each job's code, the runs right after a change are predicted far better than from the
// history alone, and the others exactly as well. With the hash of the code too, an unchanged
// run is a repeat: predicted by its program's last same-code runs, better than by the history,
// with an interval from the past repeats that holds about 80 % of them.
TEST(CodeChangeTest, ReplayWithCodeFollowsTheChanges) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.03);
  std::vector<JobRecord> jobs;
  EvalOptions with_code;
  with_code.threads = 1;
  with_code.retrain_every_s = 3 * 86400;
  EvalOptions with_hash = with_code;
  std::vector<std::string> changed_ids;
  for (int u = 0; u < 24; ++u) {
    int64_t batch = 16;
    double base = (1.0 + 0.1 * u) * 1e9;
    for (int k = 0; k < 40; ++k) {
      if (k > 3 && rng() % 6 == 0) {
        batch = (rng() % 2 == 0 && batch < 256) || batch <= 4 ? batch * 2 : batch / 2;
        changed_ids.push_back(fmt::format("u{}-{}", u, k));
      }
      JobRecord j;
      j.cluster = "c";
      j.job_id = fmt::format("u{}-{}", u, k);
      j.source = "test";
      j.request.user = fmt::format("user{}", u);
      j.request.job_name = "train";
      j.request.cpus = 4;
      j.request.memory_bytes = int64_t{64} << 30;
      j.request.time_limit_s = 86400;
      j.submit_time = 1'700'000'000 + k * 8 * 3600 + u * 60;
      j.start_time = j.submit_time;
      double runtime = 30.0 * static_cast<double>(batch) * std::exp(noise(rng));
      j.end_time = *j.start_time + static_cast<int64_t>(runtime);
      j.usage.elapsed_s = runtime;
      j.usage.cpu_time_s = 3.5 * runtime;
      j.usage.peak_rss_bytes =
          static_cast<int64_t>((base + 4e7 * static_cast<double>(batch)) * std::exp(noise(rng)));
      j.outcome.state = "COMPLETED";
      with_code.code.emplace(j.job_id, ReadCode(Facts(batch), Estimate(batch)));
      with_hash.code.emplace(j.job_id, ReadCode(Facts(batch), Estimate(batch), "train.py",
                                                fmt::format("{:016x}", 0xc0de)));
      jobs.push_back(j);
    }
  }
  ASSERT_GT(changed_ids.size(), 20U);
  auto score = [&](const EvalOptions& options) {
    std::map<std::string, double> err;  // per target: mean |error| after a change
    std::map<std::string, double> rest;
    std::map<std::string, int> n_after, n_rest;
    std::map<std::string, int> repeats, repeats_inside;  // per target: repeats, inside p10–p90
    EvalOptions o = options;
    o.on_scored_job = [&](const nlohmann::ordered_json& j) {
      if (j.contains("fallback")) return;
      std::string t = j["target"];
      double y = j["actual"].get<double>();
      double e = std::abs(j["point"].get<double>() - y);
      bool after = std::find(changed_ids.begin(), changed_ids.end(),
                             j["job_id"].get<std::string>()) != changed_ids.end();
      (after ? err[t] : rest[t]) += e;
      ++(after ? n_after[t] : n_rest[t]);
      if (j.contains("code") && j["code"]["why"] == "repeat") {
        ++repeats[t];
        bool inside = !j["p10"].is_null() && !j["p90"].is_null() && j["p10"].get<double>() <= y &&
                      y <= j["p90"].get<double>();
        repeats_inside[t] += inside ? 1 : 0;
      }
    };
    auto doc = Replay(jobs, ClusterContext{}, o);
    EXPECT_TRUE(doc.ok()) << doc.status().ToString();
    for (auto& [t, v] : err) v /= std::max(1, n_after[t]);
    for (auto& [t, v] : rest) v /= std::max(1, n_rest[t]);
    if (&options == &with_hash) {
      for (const char* t : {"runtime", "peak_memory"}) {
        SCOPED_TRACE(t);
        EXPECT_GT(repeats[t], 300);
        double share = static_cast<double>(repeats_inside[t]) / std::max(1, repeats[t]);
        EXPECT_GT(share, 0.7) << repeats_inside[t] << " of " << repeats[t];
        EXPECT_LT(share, 0.9) << repeats_inside[t] << " of " << repeats[t];
      }
    }
    return std::make_pair(err, rest);
  };
  EvalOptions history_only = with_code;
  history_only.code.clear();
  auto [after_code, rest_code] = score(with_code);
  auto [after_hist, rest_hist] = score(history_only);
  auto [after_hash, rest_hash] = score(with_hash);
  for (const char* t : {"runtime", "peak_memory"}) {
    SCOPED_TRACE(t);
    fmt::print(
        "{}: MAE after a change {:.4g} with the code, {:.4g} from history alone; "
        "unchanged runs {:.4g} and {:.4g}\n",
        t, after_code[t], after_hist[t], rest_code[t], rest_hist[t]);
    ASSERT_GT(after_hist[t], 0);
    // Right after a change: far closer (the acceptance asks for 34 % lower error).
    EXPECT_LT(after_code[t], 0.66 * after_hist[t]) << after_code[t] << " vs " << after_hist[t];
    // Unchanged runs: the same predictions without the hash; with it, repeats, predicted by
    // the same-code runs closer than by the history (the noise is 3 % a run).
    EXPECT_DOUBLE_EQ(rest_code[t], rest_hist[t]);
    fmt::print("{}: with the hash, MAE after a change {:.4g}, unchanged runs {:.4g}\n", t,
               after_hash[t], rest_hash[t]);
    EXPECT_LT(rest_hash[t], 0.9 * rest_hist[t]);
    EXPECT_LT(after_hash[t], 0.66 * after_hist[t]);
  }
}

}  // namespace
}  // namespace rightsize

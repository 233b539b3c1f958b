#include "diagnose/learned_fallback.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "diagnose/diagnosis.h"
#include "diagnose/log_scan.h"
#include "model/booster.h"

namespace rightsize {
namespace {

Diagnosis FromText(const std::string& text, bool learned = true) {
  std::vector<LogScan> scans;
  scans.push_back(ScanLogText(text, "job.log"));
  DiagnoseInput input;
  input.learned_fallback = learned;
  return DiagnoseScans(std::move(scans), input);
}

// A batch system that could not write the job's script to its full spool, told in words no
// signature has (the signatures know "No space left on device", "Disk quota exceeded" and the
// like; the model learned the spool's words from the corpus's Torque logs).
constexpr const char* kSpoolWriteFailed =
    "Epoch 3/40: 100%|##########| 1250/1250 [04:11<00:00,  4.97it/s]\n"
    "Epoch 4/40:  37%|###7      | 462/1250 [01:33<02:39,  4.94it/s]\n"
    "qsub: cannot write the job script file to the spool directory\n";

TEST(LearnedFallback, EmbeddedModelLoads) {
  auto model = LearnedFallback::Embedded();
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto p = (*model)->Probabilities({{"job.log", 1, "hello"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->size(), static_cast<size_t>(kFailureClassCount));
}

TEST(LearnedFallback, NamesAClassTheSignaturesCallUnknownAsALearnedMatch) {
  Diagnosis rules = FromText(kSpoolWriteFailed, false);
  ASSERT_EQ(rules.cls, FailureClass::kUnknown) << "a signature now knows this wording; pick "
                                                  "another for the fallback's test";
  Diagnosis d = FromText(kSpoolWriteFailed);
  EXPECT_EQ(d.cls, FailureClass::kDiskFull);
  ASSERT_TRUE(d.learned.has_value());
  EXPECT_GE((*d.learned)["probability"].get<double>(), kLearnedThreshold);
  EXPECT_FALSE((*d.learned)["terms"].empty());
  // Less sure than any signature's answer, and says it is learned.
  EXPECT_LT(d.confidence, 0.5);
  ASSERT_EQ(d.evidence.size(), 1u);
  EXPECT_EQ(d.evidence[0].signature, "learned");
  EXPECT_EQ(d.evidence[0].line, 3);
  EXPECT_NE(d.summary.find("Learned match"), std::string::npos);
  std::string text = RenderDiagnosisText(d);
  EXPECT_NE(text.find("evidence (learned: tokens"), std::string::npos) << text;
  nlohmann::json j = DiagnosisToJson(d);
  EXPECT_EQ(j["schema"], "rightsize.diagnosis/v1");
  EXPECT_EQ(j["class"], "disk_full");
  EXPECT_EQ(j["evidence"][0]["signature"], "learned");
  EXPECT_TRUE(j["learned"].is_object());
}

TEST(LearnedFallback, ALogWithoutAFailureStaysUnknown) {
  Diagnosis d = FromText(
      "Epoch 1/3 loss=0.6931 acc=0.51\nEpoch 2/3 loss=0.4120 acc=0.83\n"
      "Epoch 3/3 loss=0.3011 acc=0.90\nSaved checkpoint to /scratch/alice/run7/ckpt.pt\n");
  EXPECT_EQ(d.cls, FailureClass::kUnknown);
  EXPECT_FALSE(d.learned.has_value());
  EXPECT_TRUE(DiagnosisToJson(d)["learned"].is_null());
}

// A healthy multi-GPU log that just stops (cut, or still running): NCCL INFO lines, progress
// bars, metrics lines and Python warnings. The model has learned that NCCL's words go with NCCL
// failures and that "11" goes with segfaults; it must not cite such lines as a failure.
TEST(LearnedFallback, AHealthyNcclNoisyLogStaysUnknown) {
  // The mix of bench/make_noisy_log.py: loss lines, tqdm bars, NCCL INFO from several ranks,
  // Python warnings, coloured INFO lines; 1,000 lines each, from 20 seeds.
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto real = [&](double lo, double hi) {
      return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    std::string log;
    for (int step = 1; step <= 1000; ++step) {
      double r = real(0, 1);
      if (r < 0.55) {
        log += fmt::format(
            "[2024-05-01 10:{:02d}:{:02d}] step {} loss={:.4f} lr=3.00e-04 "
            "grad_norm={:.3f} tokens/s={}\n",
            step / 60 % 60, step % 60, step, real(0.5, 3), real(0, 5), uni(90000, 120000));
      } else if (r < 0.75) {
        int d = step % 1000;
        log += fmt::format(
            "Epoch {}: {:3d}%|{:10s}| {}/1000 [00:{:02d}<01:00, 8.1it/s, "
            "loss={:.3f}]\n",
            step / 1000, d / 10, std::string(static_cast<size_t>(d / 100), '#'), d, d / 60,
            real(0.5, 3));
      } else if (r < 0.9) {
        log += fmt::format(
            "gpu{:03d}:{}:{} [{}] NCCL INFO Channel {:02d}/0 : {}[{}] -> {}[{}] via "
            "P2P/IPC/read\n",
            uni(0, 31), uni(1000, 9999), uni(1000, 9999), uni(0, 7), uni(0, 31), uni(0, 7),
            uni(0, 7), uni(0, 7), uni(0, 7));
      } else if (r < 0.97) {
        log +=
            "/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: "
            "UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or "
            "use_reentrant=False explicitly.\n";
      } else {
        log += fmt::format(
            "\x1b[32m2024-05-01 10:00:00\x1b[0m | \x1b[1mINFO\x1b[0m | "
            "trainer:log:{} - eval accuracy {:.4f} perplexity {:.2f}\n",
            step, real(0.5, 0.9), real(5, 20));
      }
    }
    Diagnosis d = FromText(log);
    EXPECT_EQ(d.cls, FailureClass::kUnknown) << "seed " << seed;
    EXPECT_FALSE(d.learned.has_value()) << "seed " << seed;
  }
  EXPECT_TRUE(IsRoutineLine("n1:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read"));
  EXPECT_TRUE(IsRoutineLine(" 45%|####5     | 450/1000 [00:59<01:10, 7.71it/s]"));
  EXPECT_TRUE(IsRoutineLine("step 40 loss=0.113 lr=3.0e-04 grad_norm=1.2"));
  EXPECT_FALSE(IsRoutineLine("qsub: cannot write the job script file to the spool directory"));
  EXPECT_FALSE(IsRoutineLine("Exit_status=-10"));
}

TEST(LearnedFallback, SignatureAnswersAreLeftAlone) {
  Diagnosis d = FromText("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  EXPECT_EQ(d.cls, FailureClass::kGpuOom);
  EXPECT_FALSE(d.learned.has_value());
  EXPECT_GE(d.confidence, 0.9);
}

TEST(LearnedFallback, BadInputNeverCrashes) {
  std::string junk;
  for (int i = 0; i < 5000; ++i) junk += static_cast<char>((i * 7919) % 256);
  Diagnosis d = FromText(junk);
  (void)d;
  EXPECT_FALSE(LearnedFallback::Load("not a model").ok());
  EXPECT_FALSE(LearnedFallback::Load("").ok());
  auto model = LearnedFallback::Embedded();
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE((*model)->Classify({}).ok());
  EXPECT_TRUE((*model)->Classify({{"x", 1, std::string(100000, '/')}}).ok());
}

TEST(LearnedFallback, TermsNormaliseNumbersHexAndPaths) {
  auto terms =
      FallbackTerms("Killed process 123456 at 0x7f3a9c in /home/alice/run/libfoo.so error=2");
  auto has = [&](const std::string& t) {
    return std::find(terms.begin(), terms.end(), t) != terms.end();
  };
  EXPECT_TRUE(has("killed process"));
  EXPECT_TRUE(has("<num>"));
  EXPECT_TRUE(has("<hex>"));
  EXPECT_TRUE(has("libfoo"));
  EXPECT_FALSE(has("alice"));
  EXPECT_TRUE(has("error 2"));
}

TEST(LearnedFallback, TrainingIsDeterministic) {
  SparseRows rows;
  std::vector<int> labels;
  const char* texts[] = {"CUDA out of memory",      "Killed process oom",
                         "DUE TO TIME LIMIT",       "segmentation fault core dumped",
                         "No space left on device", "ModuleNotFoundError No module named x"};
  const FailureClass classes[] = {FailureClass::kGpuOom,   FailureClass::kHostOom,
                                  FailureClass::kTimeout,  FailureClass::kSegfault,
                                  FailureClass::kDiskFull, FailureClass::kImportError};
  for (int rep = 0; rep < 4; ++rep) {
    for (int k = 0; k < 6; ++k) {
      AppendFallbackRow({{"f", 1, texts[k] + std::string(" run ") + std::to_string(rep)}}, &rows);
      labels.push_back(static_cast<int>(classes[k]));
    }
  }
  LearnedTrainParams params;
  params.rounds = 10;
  auto a = TrainLearnedFallback(rows, labels, params);
  auto b = TrainLearnedFallback(rows, labels, params);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto model = LearnedFallback::Load(*a);
  ASSERT_TRUE(model.ok());
  auto m = model->Classify({{"f", 1, "No space left on device"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->cls, FailureClass::kDiskFull);
}

}  // namespace
}  // namespace rightsize

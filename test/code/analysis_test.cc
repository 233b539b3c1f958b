// The facts read from small realistic projects (test/data/code/), with the lines they come from.
#include "code/analysis.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "jobscript/job_script.h"

namespace rightsize::code {
namespace {

std::string Dir(const std::string& name) {
  return std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/code/" + name;
}

CodeFacts Analyze(const std::string& name) {
  auto script = ParseJobScriptFile(Dir(name) + "/train.sh");
  EXPECT_TRUE(script.ok()) << script.status().ToString();
  auto facts = AnalyzeJobCode(*script, Dir(name), "train.sh");
  EXPECT_TRUE(facts.ok()) << facts.status().ToString();
  return facts.ok() ? *facts : CodeFacts{};
}

TEST(AnalysisTest, Gpt2FineTuneReadsYamlConfigAndCommandLine) {
  CodeFacts f = Analyze("gpt2_finetune");
  EXPECT_EQ(f.launcher, "python");
  EXPECT_EQ(f.entry, "train.py");
  // data.py is followed from `from data import TextDataset`; config.yaml from --config.
  EXPECT_EQ(f.files, (std::vector<std::string>{"train.py", "data.py", "config.yaml"}));
  EXPECT_EQ(f.framework.value, "HF Transformers");
  EXPECT_EQ(f.model.value, "gpt2-medium");
  EXPECT_EQ(f.model.where.ToString(), "config.yaml:3");  // the name's own line
  EXPECT_DOUBLE_EQ(*f.parameters.value, 354823168.0);
  EXPECT_EQ(f.layers.value, 24);
  EXPECT_EQ(f.hidden.value, 1024);
  EXPECT_EQ(f.heads.value, 16);
  EXPECT_EQ(f.vocab.value, 50257);
  // --batch_size 16 on the command line beats the argparse default of 8.
  EXPECT_EQ(f.batch_size.value, 16);
  EXPECT_EQ(f.batch_size.where.ToString(), "train.sh:8");
  EXPECT_NE(f.batch_size.how.find("argparse default at train.py:15"), std::string::npos);
  EXPECT_EQ(f.seq_len.value, 1024);
  EXPECT_EQ(f.seq_len.where.ToString(), "config.yaml:5");
  EXPECT_EQ(f.num_workers.value, 32);
  EXPECT_EQ(f.num_workers.where.ToString(), "config.yaml:6");
  EXPECT_EQ(f.precision.value, Precision::kFp32);
  EXPECT_EQ(f.optimizer.value, Optimizer::kAdam);
  EXPECT_EQ(f.optimizer.where.ToString(), "train.py:35");
  EXPECT_EQ(f.parallelism.value, "none");
  EXPECT_EQ(f.DataParallelGpus(), 1);
}

TEST(AnalysisTest, ResNet50FromTorchvision) {
  CodeFacts f = Analyze("resnet50");
  EXPECT_EQ(f.launcher, "srun");
  EXPECT_EQ(f.architecture, Architecture::kCnn);
  EXPECT_EQ(f.model.value, "resnet50");
  EXPECT_EQ(f.model.where.ToString(), "train.py:17");
  EXPECT_DOUBLE_EQ(*f.parameters.value, 25.56e6);
  EXPECT_EQ(f.batch_size.value, 256);  // argparse default of -b/--batch-size
  EXPECT_EQ(f.batch_size.where.ToString(), "train.py:12");
  EXPECT_EQ(f.image_size.value, 224);  // RandomResizedCrop(224)
  EXPECT_EQ(f.image_size.where.ToString(), "train.py:18");
  EXPECT_EQ(f.optimizer.value, Optimizer::kSgdMomentum);
  EXPECT_EQ(f.num_workers.value, 8);
  EXPECT_EQ(f.processes.value, 1);
}

TEST(AnalysisTest, DeepSpeedZero3LlamaReadsDsConfig) {
  CodeFacts f = Analyze("llama_zero3");
  EXPECT_EQ(f.launcher, "deepspeed");
  EXPECT_EQ(f.entry, "finetune.py");
  EXPECT_EQ(f.framework.value, "DeepSpeed");
  EXPECT_EQ(f.model.value, "llama-2-7b");
  EXPECT_EQ(f.model.where.ToString(), "finetune.py:7");  // MODEL = "meta-llama/Llama-2-7b-hf"
  EXPECT_DOUBLE_EQ(*f.parameters.value, 6738415616.0);
  EXPECT_EQ(f.batch_size.value, 4);
  EXPECT_EQ(f.batch_size.where.ToString(), "ds_config.json:2");
  EXPECT_EQ(f.grad_accum.value, 8);
  EXPECT_EQ(f.seq_len.value, 2048);  // --max_seq_length on the command line
  EXPECT_EQ(f.precision.value, Precision::kMixedBf16);
  EXPECT_EQ(f.precision.where.ToString(), "ds_config.json:5");
  EXPECT_EQ(f.zero_stage.value, 3);
  EXPECT_EQ(f.zero_stage.where.ToString(), "ds_config.json:8");
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kFull);
  EXPECT_EQ(f.checkpointing.where.ToString(), "finetune.py:17");
  EXPECT_EQ(f.processes.value, 8);  // deepspeed --num_gpus 8
  EXPECT_EQ(f.DataParallelGpus(), 8);
}

TEST(AnalysisTest, LightningModuleInALocalModule) {
  CodeFacts f = Analyze("lightning");
  EXPECT_EQ(f.framework.value, "Lightning");
  EXPECT_EQ(f.architecture, Architecture::kTransformer);
  // Per layer 4h²+4h + 2hf+f+h + 4h = 3,152,384 (h=512, f=2048), × 6 layers = 18,914,304;
  // nn.Embedding(32000, 512) = 16,384,000; nn.Linear(512, 32000) = 16,416,000.
  EXPECT_DOUBLE_EQ(*f.parameters.value, 51714304.0);
  EXPECT_EQ(f.layers.value, 6);
  EXPECT_EQ(f.layers.where.ToString(), "model.py:11");
  EXPECT_EQ(f.seq_len.value, 512);  // SEQ_LEN = 512
  EXPECT_EQ(f.batch_size.value, 32);
  EXPECT_EQ(f.precision.value, Precision::kMixedBf16);
  EXPECT_EQ(f.precision.where.ToString(), "main.py:13");
  EXPECT_EQ(f.optimizer.where.ToString(), "model.py:22");
  EXPECT_EQ(f.processes.value, 2);
  EXPECT_EQ(f.DataParallelGpus(), 2);
  EXPECT_TRUE(f.undetermined.empty()) << f.undetermined[0].what << ": " << f.undetermined[0].reason;
}

// A project of many modules is parsed ahead on a second thread: the facts are the same on every
// run whichever thread parses a file first, files never imported are not among the files read,
// and an imported module's syntax error is still reported where it is.
TEST(AnalysisTest, ManyModulesParsedAheadGiveTheSameFactsEveryTime) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rightsize-parse-ahead";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "pkg");
  std::ofstream(dir / "train.sh") << "#!/bin/bash\npython train.py\n";
  std::ofstream train(dir / "train.py");
  train << "import torch\nfrom torch import nn\n";
  for (int m = 0; m < 12; ++m) train << "from pkg.layer" << m << " import make" << m << "\n";
  train << "from broken import oops\n"
           "model = nn.Sequential(";
  for (int m = 0; m < 12; ++m) train << "make" << m << "(), ";
  train << "nn.Linear(64, 10))\n"
           "opt = torch.optim.Adam(model.parameters())\n"
           "loader = torch.utils.data.DataLoader(ds, batch_size=16)\n";
  train.close();
  for (int m = 0; m < 12; ++m) {
    std::ofstream(dir / "pkg" / ("layer" + std::to_string(m) + ".py"))
        << "from torch import nn\n\ndef make" << m << "():\n    return nn.Linear(64, 64)\n";
  }
  std::ofstream(dir / "broken.py") << "def oops(:\n    pass\n";
  for (int u = 0; u < 5; ++u) {
    std::ofstream(dir / ("unused" + std::to_string(u) + ".py")) << "x = " << u << "\n";
  }
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  ASSERT_TRUE(script.ok());
  for (int run = 0; run < 20; ++run) {
    auto f = AnalyzeJobCode(*script, dir.string(), "train.sh");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    // 12 × (64·64 + 64) + 64·10 + 10 = 50,570.
    ASSERT_TRUE(f->parameters.value.has_value());
    EXPECT_DOUBLE_EQ(*f->parameters.value, 50570.0) << "run " << run;
    EXPECT_EQ(f->files.size(), 14u) << "run " << run;  // train.py, 12 layers, broken.py
    for (const auto& file : f->files) EXPECT_EQ(file.find("unused"), std::string::npos) << file;
    ASSERT_FALSE(f->parse_errors.empty()) << "run " << run;
    EXPECT_NE(f->parse_errors[0].find("broken.py:1"), std::string::npos) << f->parse_errors[0];
    EXPECT_EQ(f->batch_size.value, 16);
  }
}

TEST(AnalysisTest, SyntaxErrorGivesPartialFacts) {
  CodeFacts f = Analyze("syntax_error");
  ASSERT_FALSE(f.parse_errors.empty());
  EXPECT_NE(f.parse_errors[0].find("train.py:7"), std::string::npos) << f.parse_errors[0];
  // The lines around the broken function still count: 1024·4096+4096 + 4096·10+10.
  EXPECT_DOUBLE_EQ(*f.parameters.value, 4239370.0);
  EXPECT_EQ(f.optimizer.value, Optimizer::kAdam);
  EXPECT_EQ(f.batch_size.value, 64);
}

TEST(AnalysisTest, ModelChosenByGetattrIsUndetermined) {
  CodeFacts f = Analyze("dynamic_model");
  EXPECT_FALSE(f.model.known());
  ASSERT_EQ(f.undetermined.size(), 1u);
  EXPECT_EQ(f.undetermined[0].what, "model");
  EXPECT_EQ(f.undetermined[0].where.ToString(), "train.py:7");
  EXPECT_NE(f.undetermined[0].reason.find("environment"), std::string::npos);
  EXPECT_EQ(f.batch_size.value, 128);
}

TEST(AnalysisTest, NoPythonProgramIsNotFound) {
  auto script = ParseJobScript("#!/bin/bash\n#SBATCH -n 4\nsrun ./a.out\n");
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, Dir("resnet50"), "job.sh");
  EXPECT_EQ(facts.status().code(), Status::Code::kNotFound);
}

TEST(AnalysisTest, ArbitraryBytesNeverCrash) {
  // Garbage in the entry file: a partial parse, not a failure.
  std::string dir = ::testing::TempDir() + "/rs_code_garbage";
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/train.py", std::ios::binary);
    for (int i = 0; i < 5000; ++i) out << static_cast<char>((i * 7919) % 256);
    out << "\nmodel = torchvision.models.resnet18()\n";
  }
  auto script = ParseJobScript("#!/bin/bash\npython train.py\n");
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, dir, "job.sh");
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  EXPECT_FALSE(facts->parse_errors.empty());
}

}  // namespace
}  // namespace rightsize::code

// The torch a job's Python imports, read from a real folder layout (a virtualenv over a base
// Python, a launcher's console script, a shim), and what it changes in the estimate: torch
// before 2.0 keeps the attention scores that scaled_dot_product_attention does not.
#include "code/python_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "code/advice.h"
#include "code/analysis.h"
#include "code/memory_model.h"
#include "code/report.h"
#include "jobscript/job_script.h"

namespace rightsize::code {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// root/base: a Python 3.11 with torch 2.3 in its site-packages and a torchrun console script;
// root/venv: a virtualenv over it with torch 1.13; root/shims/python: a pyenv-style shim;
// root/proj: an nn.TransformerEncoder training program (test/data/code/encoder_env).
class PythonEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("rs_python_env_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    Write(root_ / "base/bin/python3.11", std::string("\x7f"
                                                     "ELF not really",
                                                     15));
    Write(root_ / "base/lib/python3.11/site-packages/torch/version.py",
          "__version__ = '2.3.0+cu121'\ndebug = False\n");
    Write(root_ / "base/bin/torchrun",
          "#!" + (root_ / "base/bin/python3.11").string() + "\nimport sys\n");
    Write(root_ / "venv/pyvenv.cfg",
          "home = " + (root_ / "base/bin").string() + "\ninclude-system-site-packages = false\n");
    fs::create_directories(root_ / "venv/bin");
    fs::create_symlink(root_ / "base/bin/python3.11", root_ / "venv/bin/python");
    Write(root_ / "venv/lib/python3.11/site-packages/torch/version.py",
          "# generated\n__version__ = '1.13.1'\n");
    Write(root_ / "shims/python", "#!/usr/bin/env bash\nexec pyenv exec python \"$@\"\n");
    // What the shim's folder would import were it a Python: the shim must not be read as one.
    Write(root_ / "lib/python3.11/site-packages/torch/version.py", "__version__ = '1.12.0'\n");
    fs::create_directories(root_ / "proj");
    fs::copy_file(std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/code/encoder_env/train.py",
                  root_ / "proj/train.py");
    env_.path = (root_ / "shims").string() + ":" + (root_ / "base/bin").string();
    env_.home = (root_ / "home").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  CodeFacts Analyze(const std::string& body, const JobEnvironment& env) {
    std::string text = "#!/bin/bash\n#SBATCH --gres=gpu:1\n" + body;
    auto script = ParseJobScript(text);
    EXPECT_TRUE(script.ok()) << script.status().ToString();
    auto facts = AnalyzeJobCode(*script, (root_ / "proj").string(), "job.sh", env);
    EXPECT_TRUE(facts.ok()) << facts.status().ToString();
    return facts.ok() ? *facts : CodeFacts{};
  }

  double Activations(const CodeFacts& f) {
    auto e = EstimateGpuMemory(f);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return 0;
    for (const auto& t : e->terms) {
      if (t.name == "activations") return t.bytes;
    }
    return 0;
  }

  fs::path root_;
  JobEnvironment env_;
};

constexpr const char* kRun = "python train.py --batch_size 2 --d_model 256 --steps 3\n";

TEST_F(PythonEnvTest, TorchBefore2KeepsTheAttentionScores) {
  // The virtualenv the script activates holds torch 1.13: nn.TransformerEncoderLayer cannot
  // call scaled_dot_product_attention, and the scores of every layer are saved.
  CodeFacts old = Analyze("source ../venv/bin/activate\n" + std::string(kRun), env_);
  ASSERT_TRUE(old.torch_version.known());
  EXPECT_EQ(*old.torch_version.value, "1.13.1");
  EXPECT_EQ(old.torch_version.where.line, 2);
  EXPECT_NE(old.torch_version.where.file.find("venv/lib/python3.11/site-packages/torch"),
            std::string::npos);
  EXPECT_NE(old.torch_version.how.find("virtualenv activated at line 3"), std::string::npos)
      << old.torch_version.how;
  // The code asks for SDPA; the job's torch does not have it.
  EXPECT_EQ(old.attention.value, Attention::kSdpa);
  std::string why;
  EXPECT_FALSE(AttentionFused(old, &why));
  EXPECT_NE(why.find("torch 1.13.1"), std::string::npos) << why;
  EXPECT_NE(why.find("no scaled_dot_product_attention"), std::string::npos) << why;
  // The estimate's activations say so.
  auto estimate = EstimateGpuMemory(old);
  ASSERT_TRUE(estimate.ok());
  auto acts = std::find_if(estimate->terms.begin(), estimate->terms.end(),
                           [](const MemoryTerm& t) { return t.name == "activations"; });
  ASSERT_NE(acts, estimate->terms.end());
  EXPECT_NE(acts->formula.find(why), std::string::npos) << acts->formula;
  // On a GPU the estimate does not fit, the remedy names the torch the scores come from.
  auto script = ParseJobScript("#!/bin/bash\n#SBATCH --gres=gpu:1\n" + std::string(kRun));
  ASSERT_TRUE(script.ok());
  std::string advice;
  for (const auto& a : Advise(old, *estimate, {"small", 0.5 * estimate->p50_bytes}, *script)) {
    advice += a.message + "\n";
  }
  EXPECT_NE(advice.find("torch 2.0 or later for SDPA (the job imports torch 1.13.1)"),
            std::string::npos)
      << advice;

  // The base Python's torch 2.3, named by the command: SDPA, no s² scores.
  CodeFacts modern = Analyze("python3.11 train.py --batch_size 2 --d_model 256 --steps 3\n", env_);
  ASSERT_TRUE(modern.torch_version.known());
  EXPECT_EQ(*modern.torch_version.value, "2.3.0+cu121");
  EXPECT_TRUE(AttentionFused(modern));

  // s = 1024 and 8 heads: the scores, their softmax and dropout dwarf the rest.
  EXPECT_GT(Activations(old), 4 * Activations(modern));

  // Read where the environment cannot be (the server, the submit hook): the same facts but the
  // torch version, so the two readings are the same code to the change-aware prediction.
  CodeFacts unread = Analyze("source ../venv/bin/activate\n" + std::string(kRun), {});
  EXPECT_FALSE(unread.torch_version.known());
  EXPECT_TRUE(AttentionFused(unread));
  nlohmann::json a = FactsJson(old)["facts"], b = FactsJson(unread)["facts"];
  a.erase("torch_version");
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["fused_attention"]["value"], true);
  EXPECT_EQ(b["fused_attention"]["kernel"], "sdpa");
}

TEST(AttentionFusedTest, EachKernelNeedsItsTorch) {
  auto fused = [](Attention a, const char* torch) {
    CodeFacts f;
    f.attention.value = a;
    if (torch != nullptr) f.torch_version.value.emplace(torch);
    return AttentionFused(f);
  };
  EXPECT_FALSE(fused(Attention::kEager, nullptr));
  EXPECT_FALSE(fused(Attention::kEager, "2.4.0"));
  EXPECT_TRUE(fused(Attention::kSdpa, nullptr));  // the torch unknown: as the code asks
  EXPECT_FALSE(fused(Attention::kSdpa, "1.13.1"));
  EXPECT_TRUE(fused(Attention::kSdpa, "2.0.0"));
  // transformers picks SDPA by default only from torch 2.1.1.
  EXPECT_FALSE(fused(Attention::kSdpaDefault, "2.1.0+cu121"));
  EXPECT_TRUE(fused(Attention::kSdpaDefault, "2.1.1"));
  EXPECT_TRUE(fused(Attention::kFlashAttention, "1.13.1"));
  EXPECT_TRUE(fused(Attention::kSdpa, "nightly"));  // not a version: as the code asks
  EXPECT_FALSE(AttentionFused(CodeFacts{}));        // nothing read: eager, as before
}

TEST_F(PythonEnvTest, ALaunchersConsoleScriptNamesItsPython) {
  // torchrun's shebang names the base Python, under srun too; a `python` among the program's
  // own arguments is not the interpreter.
  for (const char* run : {"torchrun --nproc_per_node 1 train.py --batch_size 2 --tag python\n",
                          "srun torchrun --nproc_per_node 1 train.py --batch_size 2\n"}) {
    CodeFacts f = Analyze(run, env_);
    ASSERT_TRUE(f.torch_version.known()) << run;
    EXPECT_EQ(*f.torch_version.value, "2.3.0+cu121") << run;
    EXPECT_NE(f.torch_version.how.find("base/bin/python3.11"), std::string::npos) << run;
  }
}

TEST_F(PythonEnvTest, TheVirtualenvIsFollowedOnTheSameLineAndFromHome) {
  CodeFacts same_line = Analyze("source ../venv/bin/activate && " + std::string(kRun), env_);
  ASSERT_TRUE(same_line.torch_version.known());
  EXPECT_EQ(*same_line.torch_version.value, "1.13.1");
  JobEnvironment home = env_;
  home.home = root_.string();
  CodeFacts from_home = Analyze("source $HOME/venv/bin/activate\n" + std::string(kRun), home);
  ASSERT_TRUE(from_home.torch_version.known());
  EXPECT_EQ(*from_home.torch_version.value, "1.13.1");
  // A path this reading cannot expand, or a sourced file that is not an activate script: not
  // PATH's Python in its place.
  EXPECT_FALSE(
      Analyze("source $WORK/venv/bin/activate\npython3.11 train.py\n", env_).torch_version.known());
  EXPECT_FALSE(Analyze("source ./env.sh\npython3.11 train.py\n", env_).torch_version.known());
}

TEST_F(PythonEnvTest, FlashAttentionsOwnPackageDoesNotNeedTorch2) {
  Write(root_ / "proj/flash.py",
        "import torch\nfrom flash_attn import flash_attn_func\n\n\ndef attend(q, k, v):\n"
        "    return flash_attn_func(q, k, v)\n\n\nq = torch.randn(1, 8, 4, 64)\n"
        "out = attend(q, q, q)\n");
  CodeFacts f = Analyze("source ../venv/bin/activate\npython flash.py\n", env_);
  ASSERT_TRUE(f.torch_version.known());
  EXPECT_EQ(*f.torch_version.value, "1.13.1");
  EXPECT_EQ(f.attention.value, Attention::kFlashAttention);
  EXPECT_NE(f.attention.how.find("flash_attn"), std::string::npos) << f.attention.how;
  EXPECT_TRUE(AttentionFused(f));
}

TEST(TorchInstallTest, VersionsCompareAsReleases) {
  auto at_least = [](const char* v, int a, int b, int c) { return VersionAtLeast(v, a, b, c); };
  EXPECT_EQ(at_least("1.13.0a0", 2, 0, 0), false);
  EXPECT_EQ(at_least("2.0.1", 2, 0, 0), true);
  EXPECT_EQ(at_least("2.1.0+cu121", 2, 1, 1), false);  // transformers' SDPA default needs 2.1.1
  EXPECT_EQ(at_least("2.1.1", 2, 1, 1), true);
  EXPECT_EQ(at_least("2.4", 2, 1, 1), true);
  EXPECT_EQ(at_least("10.0.0", 2, 0, 0), true);
  EXPECT_EQ(at_least("unknown", 2, 0, 0), std::nullopt);
}

TEST_F(PythonEnvTest, AnEnvironmentNotFollowedLeavesTheVersionUnknown) {
  // `python` on PATH is a shim that picks its Python when it runs.
  CodeFacts shim = Analyze(kRun, env_);
  EXPECT_FALSE(shim.torch_version.known());
  EXPECT_TRUE(AttentionFused(shim));  // as the code reads
  // A module, conda, a PATH of the script's own: the job's Python is not this shell's.
  for (const char* before :
       {"module load pytorch/1.13\n", "conda activate old\n", "export PATH=/opt/x/bin:$PATH\n",
        "#SBATCH --export=NONE\n", "export PYTHONPATH=/opt/lib\n"}) {
    CodeFacts f = Analyze(std::string(before) + "python3.11 train.py --batch_size 2\n", env_);
    EXPECT_FALSE(f.torch_version.known()) << before;
  }
  for (const char* run : {"conda run -n old python3.11 train.py\n",
                          "srun --container-image=nvcr.io/nvidia/pytorch python3.11 train.py\n"}) {
    EXPECT_FALSE(Analyze(run, env_).torch_version.known()) << run;
  }
  // Read nothing where the caller says so (a server reading other users' jobs).
  JobEnvironment none = env_;
  none.python = "none";
  EXPECT_FALSE(Analyze("python3.11 train.py\n", none).torch_version.known());
  EXPECT_FALSE(Analyze("python3.11 train.py\n", JobEnvironment{}).torch_version.known());
}

TEST_F(PythonEnvTest, ABrokenInstallIsNoVersionAndNoCrash) {
  Write(root_ / "venv/lib/python3.11/site-packages/torch/version.py", "git_version = 'x'\n");
  CodeFacts f = Analyze("source ../venv/bin/activate\n" + std::string(kRun), env_);
  EXPECT_FALSE(f.torch_version.known());
  EXPECT_TRUE(AttentionFused(f));
  std::string why;
  auto script = ParseJobScript("#!/bin/bash\nsource ../venv/bin/activate\n" + std::string(kRun));
  ASSERT_TRUE(script.ok());
  EXPECT_FALSE(FindTorch(*script, script->commands.back(), (root_ / "proj").string(), env_, &why));
  EXPECT_NE(why.find("holds no __version__"), std::string::npos) << why;
  // --python naming an interpreter that is not there.
  JobEnvironment named = env_;
  named.python = (root_ / "nowhere/python").string();
  EXPECT_FALSE(FindTorch(*script, script->commands.back(), (root_ / "proj").string(), named, &why));
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
}

}  // namespace
}  // namespace rightsize::code

// The analytical GPU-memory model against figures worked out by hand (the arithmetic is in the
// comments), and the advice it drives.
#include "code/memory_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "code/advice.h"
#include "code/model_zoo.h"
#include "code/report.h"
#include "jobscript/job_script.h"

namespace rightsize::code {
namespace {

std::string Dir(const std::string& name) {
  return std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/code/" + name;
}

struct Analysed {
  JobScript script;
  CodeFacts facts;
  MemoryEstimate estimate;
};

Analysed AnalyseFixture(const std::string& name, const std::string& script_name = "train.sh") {
  Analysed a;
  auto script = ParseJobScriptFile(Dir(name) + "/" + script_name);
  EXPECT_TRUE(script.ok());
  a.script = *script;
  auto facts = AnalyzeJobCode(a.script, Dir(name), script_name);
  EXPECT_TRUE(facts.ok()) << facts.status().ToString();
  a.facts = *facts;
  auto e = EstimateGpuMemory(a.facts);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) a.estimate = *e;
  return a;
}

// A job written into a fresh folder: train.sh runs COMMAND (`python train.py ARGS`, `accelerate
// launch ...`), beside train.py and the extra FILES.
Analysed AnalyseJob(const std::string& name, const std::string& command, const std::string& python,
                    const std::vector<std::pair<std::string, std::string>>& files) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("rightsize-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.sh") << "#!/bin/bash\n#SBATCH --gres=gpu:1\n" << command << "\n";
  std::ofstream(dir / "train.py") << python;
  for (const auto& [file, text] : files) std::ofstream(dir / file) << text;
  Analysed a;
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  EXPECT_TRUE(script.ok());
  if (!script.ok()) return a;
  a.script = *script;
  auto facts = AnalyzeJobCode(a.script, dir.string(), "train.sh");
  EXPECT_TRUE(facts.ok()) << facts.status().ToString();
  if (!facts.ok()) return a;
  a.facts = *facts;
  auto e = EstimateGpuMemory(a.facts);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) a.estimate = *e;
  return a;
}

// `python train.py ARGS`, with config.json beside it when given.
Analysed AnalyseSource(const std::string& name, const std::string& python,
                       const std::string& args = "", const std::string& config = "") {
  std::vector<std::pair<std::string, std::string>> files;
  if (!config.empty()) files.emplace_back("config.json", config);
  return AnalyseJob(name, "python train.py " + args, python, files);
}

double Term(const MemoryEstimate& e, const std::string& name) {
  for (const auto& t : e.terms) {
    if (t.name == name) return t.bytes;
  }
  return -1;
}

constexpr double kCtx = 500.0 * 1024 * 1024;  // 524,288,000

TEST(MemoryModelTest, Gpt2MediumFp32AdamEagerAttention) {
  Analysed a = AnalyseFixture("gpt2_finetune");
  const MemoryEstimate& e = a.estimate;
  // fp32 Adam: 4 + 4 + 8 = 16 B/param × 354,823,168 (counted from the GPT-2 architecture)
  // = 5,677,170,688, on one GPU (no DDP).
  EXPECT_DOUBLE_EQ(Term(e, "weights"), 354823168.0 * 4);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 354823168.0 * 4);
  EXPECT_DOUBLE_EQ(Term(e, "optimizer states"), 354823168.0 * 8);
  // Activations, eager attention: L·s·b·h·(34 + 5·a·s/h) × 2 (fp32)
  //   = 24 · 1024 · 16 · 1024 · (34 + 5·16·1024/1024 = 114) · 2 = 91,804,925,952.
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 91804925952.0);
  // Logits: b·s·V·4·2 = 16 · 1024 · 50257 · 8 = 6,587,285,504.
  EXPECT_DOUBLE_EQ(Term(e, "logits"), 6587285504.0);
  // p50 = context + 1.1 × (5,677,170,688 + 98,392,211,456) = 115,000,608,358.4.
  EXPECT_NEAR(e.p50_bytes, 115000608358.4, 1.0);
  EXPECT_LT(e.p10_bytes, e.p50_bytes);
  EXPECT_GT(e.p90_bytes, e.p50_bytes);
}

TEST(MemoryModelTest, ResNet50Fp32SgdMomentum) {
  Analysed a = AnalyseFixture("resnet50");
  const MemoryEstimate& e = a.estimate;
  // SGD with momentum, fp32: 4 + 4 + 4 = 12 B/param × 25.56M = 306.72 MB.
  EXPECT_DOUBLE_EQ(Term(e, "weights") + Term(e, "gradients") + Term(e, "optimizer states"),
                   25.56e6 * 12);
  // 105 MB per 224² image (fp32) × 256 images = 26.88 GB.
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 105e6 * 256);
  // p50 = context + 1.1 × 27,186,720,000 = 30,429,680,000.
  EXPECT_NEAR(e.p50_bytes, kCtx + 1.1 * (306.72e6 + 26.88e9), 1.0);
}

TEST(MemoryModelTest, LlamaZero3OverEightGpus) {
  Analysed a = AnalyseFixture("llama_zero3");
  const MemoryEstimate& e = a.estimate;
  EXPECT_EQ(e.data_parallel_gpus, 8);
  // Mixed-precision Adam: 2 + 2 + 12 = 16 B/param, all three sharded by ZeRO-3 over 8 GPUs:
  // 16 × 6,738,415,616 / 8 = 13,476,831,232.
  EXPECT_NEAR(Term(e, "weights"), 2 * 6738415616.0 / 8, 1e-3);
  EXPECT_NEAR(Term(e, "gradients"), 2 * 6738415616.0 / 8, 1e-3);
  EXPECT_NEAR(Term(e, "optimizer states"), 12 * 6738415616.0 / 8, 1e-3);
  // Full checkpointing with SDPA: L·2·s·b·h + one layer's 34·s·b·h recomputed
  //   = 32·2·33,554,432 + 34·33,554,432 = 3,288,334,336 (s=2048, b=4, h=4096, bf16).
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 3288334336.0);
  // Logits: 4 · 2048 · 32000 · 8 = 2,097,152,000.
  EXPECT_DOUBLE_EQ(Term(e, "logits"), 2097152000.0);
  // p50 = context + 1.1 × (13,476,831,232 + 5,385,486,336) = 21,272,837,324.8.
  EXPECT_NEAR(e.p50_bytes, 21272837324.8, 1.0);
}

TEST(MemoryModelTest, LightningDdpKeepsGradientBuckets) {
  Analysed a = AnalyseFixture("lightning");
  const MemoryEstimate& e = a.estimate;
  // precision="bf16-mixed" is torch's autocast over fp32 weights: 4 B weights + 2 B bf16 cast
  // copies + 4 B gradients + 8 B Adam = 18 B × 51,714,304 = 930,857,472; DDP buckets, one more
  // copy of the fp32 gradients, 4 B × P = 206,857,216.
  EXPECT_DOUBLE_EQ(Term(e, "weights"), 4 * 51714304.0);
  EXPECT_DOUBLE_EQ(Term(e, "16-bit weight copies"), 2 * 51714304.0);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 4 * 51714304.0);
  EXPECT_DOUBLE_EQ(Term(e, "DDP gradient buckets"), 4 * 51714304.0);
  // SDPA: 6 · (34 + 4) · s·b·h = 6 · 38 · 512·32·512 = 1,912,602,624 (the two LayerNorms' inputs
  // in fp32 under autocast); logits 32·512·32000·(2 + 4 + 4): the head's bf16 output, its fp32
  // cast and the gradient.
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 1912602624.0);
  EXPECT_DOUBLE_EQ(Term(e, "logits"), 5242880000.0);
  EXPECT_NEAR(e.p50_bytes, kCtx + 1.1 * (22 * 51714304.0 + 1912602624.0 + 5242880000.0), 1.0);
}

TEST(MemoryModelTest, UndeterminedModelSaysWhy) {
  auto script = ParseJobScriptFile(Dir("dynamic_model") + "/train.sh");
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, Dir("dynamic_model"), "train.sh");
  ASSERT_TRUE(facts.ok());
  auto e = EstimateGpuMemory(*facts);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("getattr"), std::string::npos) << e.status().message();
}

TEST(AdviceTest, Gpt2OnA100SaysWhatToChangeAndUnusedGpus) {
  Analysed a = AnalyseFixture("gpt2_finetune");
  auto gpu = FindGpu(a.script.request.gpu_type);  // --gres=gpu:a100:4
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->name, "A100-80GB");
  auto advice = Advise(a.facts, a.estimate, *gpu, a.script);
  std::string all;
  for (const auto& x : advice) all += x.kind + ": " + x.message + "\n";
  ASSERT_GE(advice.size(), 3u) << all;
  EXPECT_EQ(advice[0].kind, "out_of_memory");
  EXPECT_EQ(advice[0].where.ToString(), "train.sh:8");
  EXPECT_NE(advice[0].message.find("batch_size=16 needs ≈ 107 GiB"), std::string::npos) << all;
  EXPECT_NE(advice[0].message.find("activation checkpointing (−"), std::string::npos) << all;
  EXPECT_NE(all.find("you request 4 GPUs but the code uses 1"), std::string::npos) << all;
  EXPECT_NE(all.find("num_workers=32 with --cpus-per-task=8"), std::string::npos) << all;
  EXPECT_GT(advice[0].effect_bytes, 0);
}

TEST(AdviceTest, GpuTable) {
  EXPECT_EQ(FindGpu("h100")->name, "H100-80GB");
  EXPECT_EQ(FindGpu("A100-40GB")->name, "A100-40GB");
  EXPECT_EQ(FindGpu("v100-16gb")->name, "V100-16GB");
  EXPECT_FALSE(FindGpu("tpu-v4"));
}

// Precision, optimizer and checkpointing chosen by flags among branches that are all in the
// source: only the branches the command line takes count.
TEST(MemoryModelTest, BranchesOnFlagsFollowTheCommandLine) {
  Analysed fp32 = AnalyseFixture("amp_flags");
  const CodeFacts& f = fp32.facts;
  // amp_dtype = {...}.get("fp32") is None: the autocast branch is dead, GradScaler is disabled.
  EXPECT_EQ(f.precision.value, Precision::kFp32);
  EXPECT_FALSE(f.precision.assumed);
  // --optimizer sgd: the elif branch, not the AdamW of the else that comes last.
  EXPECT_EQ(f.optimizer.value, Optimizer::kSgdMomentum);
  EXPECT_FALSE(f.optimizer.assumed);
  EXPECT_EQ(f.optimizer.where.ToString(), "train.py:54");
  // --grad_ckpt not given: checkpoint() behind `if self.grad_ckpt` does not run.
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kNone);
  EXPECT_EQ(f.hidden.value, 256);
  // The head is nn.Linear(d_model, vocab_size): the logits are counted.
  EXPECT_EQ(f.vocab.value, 8000);
  EXPECT_GT(Term(fp32.estimate, "logits"), 0);

  Analysed bf16 = AnalyseFixture("amp_flags", "train_bf16.sh");
  const CodeFacts& g = bf16.facts;
  EXPECT_EQ(g.precision.value, Precision::kMixedBf16);
  EXPECT_EQ(g.precision.where.ToString(), "train.py:58");
  EXPECT_EQ(g.optimizer.value, Optimizer::kAdam);  // the else branch: --optimizer adamw
  EXPECT_FALSE(g.optimizer.assumed);
  // `self.grad_ckpt and self.training`: the flag is on, self.training cannot be evaluated.
  EXPECT_EQ(g.checkpointing.value, Checkpointing::kFull);
  EXPECT_TRUE(g.checkpointing.assumed);
  EXPECT_NE(g.checkpointing.how.find("self.training"), std::string::npos) << g.checkpointing.how;
  // Half the bytes per activation and 2·s·b·h per layer: well under the fp32 run's.
  EXPECT_LT(Term(bf16.estimate, "activations"), Term(fp32.estimate, "activations") / 4);
}

// An autocast dtype that cannot be evaluated is not read as fp16, and a GradScaler switched
// off says nothing about the precision.
TEST(MemoryModelTest, UnknownAutocastDtypeIsAssumedNotFp16) {
  Analysed a = AnalyseFixture("unknown_dtype");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.precision.value, Precision::kFp32);
  EXPECT_TRUE(f.precision.assumed);
  bool listed = false;
  for (const auto& u : f.undetermined) {
    if (u.what == "precision") {
      listed = true;
      EXPECT_NE(u.reason.find("AMP_DTYPE"), std::string::npos) << u.reason;
      EXPECT_EQ(u.where.ToString(), "train.py:15");
    }
  }
  EXPECT_TRUE(listed);
  // The assumption widens the range.
  EXPECT_FALSE(a.estimate.assumptions.empty());
}

// A text classifier: keyword arguments of the call beat the class's defaults, and a large
// embedding without an output layer over it is no vocabulary of logits.
TEST(MemoryModelTest, TextClassifierReadsCallSiteArgumentsAndNoLogits) {
  Analysed a = AnalyseFixture("text_classifier");
  const CodeFacts& f = a.facts;
  // TextTransformer(d_model=args.d_model, …): 256 (argparse default), not the 512 default.
  EXPECT_EQ(f.hidden.value, 256);
  EXPECT_NE(f.hidden.how.find("passed to TextTransformer()"), std::string::npos) << f.hidden.how;
  EXPECT_EQ(f.heads.value, 4);
  EXPECT_EQ(f.ffn.value, 1024);
  EXPECT_EQ(f.layers.value, 6);
  EXPECT_FALSE(f.vocab.known());
  EXPECT_EQ(Term(a.estimate, "logits"), -1);
  // checkpoint() sits in a function called only when --grad_ckpt is given, and it is not.
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kNone);
  // 34·s·b·h per layer (fused attention) × 2 for fp32: 6 · 34 · 512 · 8 · 256 · 2.
  EXPECT_DOUBLE_EQ(Term(a.estimate, "activations"), 427819008.0);
}

// A layer built in a loop or a comprehension counts once per trip.
TEST(MemoryModelTest, LayersBuiltInALoopCountEachTrip) {
  Analysed a = AnalyseSource("mlp_loop", R"py(
import argparse
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=50)
p.add_argument("--depth", type=int, default=2)
args = p.parse_args()

class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        layers = [nn.Linear(100, cfg.hidden), nn.GELU()]
        for _ in range(cfg.depth - 1):
            layers += [nn.Linear(cfg.hidden, cfg.hidden), nn.GELU()]
        layers.append(nn.Linear(cfg.hidden, 10))
        self.net = nn.Sequential(*layers)
        self.extra = nn.Sequential(*[nn.Linear(cfg.hidden, cfg.hidden) for _ in range(2)])

model = MLP(args)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(range(10), batch_size=32)
)py",
                             "--depth 4");
  // (100·50 + 50) + 3 trips × (50·50 + 50) + (50·10 + 10) + 2 × (50·50 + 50) = 18,310
  // (10,660 when each loop counted once).
  EXPECT_EQ(a.facts.parameters.value, 18310.0);
  EXPECT_EQ(Term(a.estimate, "weights"), 18310.0 * 4);
}

// A loop that builds the model anew each trip (k-fold cross-validation) holds one model at a
// time; a layer bound to a name and then appended is kept every trip.
TEST(MemoryModelTest, AModelRebuiltInALoopIsOneModelButKeptLayersCountEachTrip) {
  Analysed a = AnalyseSource("kfold", R"py(
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(4):
            layer = nn.Linear(64, 64)
            self.layers.append(layer)
        for i in range(3):
            self.head = nn.Linear(64, 10)

for fold in range(5):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(range(10), batch_size=32)
)py");
  // 4 kept × (64·64 + 64) + one head (64·10 + 10), in one model at a time: 17,290
  // (86,450 when each fold's model counted, 30,290 when the head counted three times).
  EXPECT_EQ(a.facts.parameters.value, 17290.0);
}

// nanoGPT: Block(config) for _ in range(config.n_layer) builds n_layer blocks, each with the
// Linear layers of its attention and MLP classes; GPTConfig(**cfg["model"]) takes the config's
// sizes over the dataclass defaults, the sequence length (block_size) included.
TEST(MemoryModelTest, NanoGptConfigFromDictAndBlocksInAList) {
  const std::string source = R"py(
import dataclasses
import json
import argparse
import torch
import torch.nn as nn

@dataclasses.dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768

class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)

class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn = Attention(config)

class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

p = argparse.ArgumentParser()
p.add_argument("--config", default="config.json")
args = p.parse_args()
cfg = json.load(open(args.config))
gptconf = GPTConfig(**cfg["model"])
model = GPT(gptconf)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
loader = torch.utils.data.DataLoader(range(10), batch_size=cfg["train"]["batch_size"])
)py";
  const std::string config = R"json({
  "model": {"block_size": 256, "vocab_size": 1000, "n_layer": 3, "n_head": 4, "n_embd": 64},
  "train": {"batch_size": 8}
})json";
  Analysed a = AnalyseSource("nanogpt_dict", source, "--config config.json", config);
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.layers.value, 3);
  EXPECT_EQ(f.hidden.value, 64);
  EXPECT_EQ(f.heads.value, 4);
  EXPECT_EQ(f.seq_len.value, 256);
  EXPECT_EQ(f.batch_size.value, 8);
  EXPECT_EQ(f.model.where.ToString(), "train.py:37");
  // 12·L·h² + V·h + positions·h (+ biases, LayerNorms): ~0.23M, not GPT-2 small's 124M.
  ASSERT_TRUE(f.parameters.known());
  EXPECT_GT(*f.parameters.value, 0.2e6);
  EXPECT_LT(*f.parameters.value, 0.3e6);
}

// The same classes with GPTConfig() left at its defaults, and no config: the Linear layers of
// every block are summed (3 blocks × (64·192 + 64·64) + 64·1000 = 113,152).
TEST(MemoryModelTest, ClassInstantiatedInAComprehensionCountsItsLayersEachTime) {
  Analysed a = AnalyseSource("blocks_in_list", R"py(
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)

class Block(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.attn = Attention(n_embd)

class Net(nn.Module):
    def __init__(self, n_embd=64, n_layer=3):
        super().__init__()
        self.h = nn.ModuleList([Block(n_embd) for _ in range(n_layer)])
        self.head = nn.Linear(n_embd, 1000, bias=False)

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(range(10), batch_size=4)
)py");
  EXPECT_EQ(a.facts.parameters.value, 3 * (64.0 * 192 + 64 * 64) + 64 * 1000);
}

// Sequence-to-sequence: an encoder and a decoder stack both count, a decoder layer has
// cross-attention, and nn.Transformer is read with its layer counts.
TEST(MemoryModelTest, EncoderDecoderStacksAndNnTransformer) {
  // Encoder layer (h 64, ffn 128): 4h² + 4h + 2hf + f + h + 2·2h = 33,472;
  // decoder layer: + cross-attention 4h² + 4h + a LayerNorm 2h = 50,240.
  const double encoder_layer = 33472, decoder_layer = 50240;
  Analysed stacks = AnalyseSource("seq2seq_stacks", R"py(
import torch
import torch.nn as nn

class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128), 2)
        dec_layer = nn.TransformerDecoderLayer(64, 4, 128)
        self.decoder = nn.TransformerDecoder(dec_layer, num_layers=3)

model = Seq2Seq()
opt = torch.optim.AdamW(model.parameters())
loader = torch.utils.data.DataLoader(range(10), batch_size=4)
SEQ_LEN = 32
)py");
  EXPECT_EQ(stacks.facts.parameters.value, 2 * encoder_layer + 3 * decoder_layer);
  EXPECT_EQ(stacks.facts.layers.value, 5);

  Analysed nn_transformer = AnalyseSource("seq2seq_nn_transformer", R"py(
import torch
import torch.nn as nn

model = nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=3,
                       dim_feedforward=128)
opt = torch.optim.AdamW(model.parameters())
loader = torch.utils.data.DataLoader(range(10), batch_size=4)
SEQ_LEN = 32
)py");
  // The same stacks and the two final LayerNorms (2 × 2h).
  EXPECT_EQ(nn_transformer.facts.parameters.value, 2 * encoder_layer + 3 * decoder_layer + 256);
  EXPECT_EQ(nn_transformer.facts.layers.value, 5);
  EXPECT_EQ(nn_transformer.facts.hidden.value, 64);
  EXPECT_EQ(nn_transformer.facts.heads.value, 4);
}

// A config file's key is read for a fact even where no variable of that name exists.
TEST(MemoryModelTest, ConfigKeyWithoutAVariableOfThatName) {
  Analysed a = AnalyseSource("config_seq_len", R"py(
import json
import argparse
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--config")
args = p.parse_args()
cfg = json.load(open(args.config))
layer = nn.TransformerEncoderLayer(cfg["model"]["d_model"], 4, 128)
model = nn.TransformerEncoder(layer, 2)
data = torch.randint(0, 100, (8, cfg["model"]["seq_len"]))
opt = torch.optim.AdamW(model.parameters())
loader = torch.utils.data.DataLoader(data, batch_size=8)
)py",
                             "--config config.json",
                             R"json({"model": {"d_model": 64, "seq_len": 384}})json");
  EXPECT_EQ(a.facts.seq_len.value, 384);
  EXPECT_EQ(a.facts.seq_len.where.ToString(), "config.json:1");
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, LoraTrainsOnlyTheAdaptersOverFrozen16BitWeights) {
  Analysed a = AnalyseSource("lora", R"(
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, Trainer
from peft import LoraConfig, get_peft_model

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
tok = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-hf")
enc = tok(texts, max_length=512, truncation=True)
config = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                    lora_dropout=0.0)
model = get_peft_model(model, config)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True,
                         gradient_checkpointing=True)
Trainer(model=model, args=args, train_dataset=ds).train()
)");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.lora_rank.value, 16);
  EXPECT_EQ(f.lora_targets.value, "q_proj,k_proj,v_proj,o_proj");
  EXPECT_EQ(f.lora_rank.where.ToString(), "train.py:9");
  // 32 layers × r=16 × (q 4096+4096, k 4096+4096, v 4096+4096, o 4096+4096) = 16,777,216.
  EXPECT_DOUBLE_EQ(*f.trainable_parameters.value, 16777216.0);
  const MemoryEstimate& e = a.estimate;
  // The frozen weights stay bf16: 6,738,415,616 × 2; no gradient or Adam state for them.
  EXPECT_DOUBLE_EQ(Term(e, "weights (frozen)"), 6738415616.0 * 2);
  // The adapters, their gradients and AdamW's two moments in fp32: 4 + 4 + 8 B each.
  EXPECT_DOUBLE_EQ(Term(e, "LoRA adapters"), 16777216.0 * 4);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 16777216.0 * 4);
  EXPECT_DOUBLE_EQ(Term(e, "optimizer states"), 16777216.0 * 8);
  // Full checkpointing with SDPA: (32·2 + 34)·s·b·h = 98 · 512·4·4096 = 822,083,584.
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 822083584.0);
  EXPECT_DOUBLE_EQ(Term(e, "adapter activations"), -1);  // lora_dropout=0: nothing saved
  // Logits 4·512·32000·8 = 524,288,000. p50 = context + 1.1 × (13,745,266,688 states +
  // 1,346,371,584) = 17,125,090,099.2, where full fine-tuning would hold 16 B/param (108 GB).
  EXPECT_NEAR(e.p50_bytes, 17125090099.2, 1.0);
  // The new facts and the quantity reach the JSON.
  nlohmann::json facts = FactsJson(f);
  EXPECT_EQ(facts["facts"]["trainable_parameters"]["value"], 16777216.0);
  EXPECT_EQ(facts["facts"]["lora_targets"]["where"], "train.py:9");
  nlohmann::json estimate = EstimateJson(e);
  EXPECT_EQ(estimate["quantity"], kEstimateQuantity);
  EXPECT_LT(estimate["allocated_p50"].get<double>(), estimate["reserved_p50"].get<double>());
}

TEST(MemoryModelTest, LoraConfigWithoutTargetModulesTakesPeftsDefaultForTheFamily) {
  // No target_modules: PEFT picks the family's default (q_proj and v_proj for Llama). This
  // program crashed the analysis (a null keyword node) before.
  Analysed a = AnalyseSource("lora-default", R"(
import torch
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer
from peft import LoraConfig, TaskType, get_peft_model

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
peft_config = LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=32, lora_dropout=0.1)
model = get_peft_model(model, peft_config)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, bf16=True)
Trainer(model=model, args=args, train_dataset=ds).train()
)");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.lora_rank.value, 8);
  EXPECT_EQ(f.lora_targets.value, "q_proj,v_proj");
  // 32 layers × r=8 × (q 4096+4096, v 4096+4096) = 4,194,304.
  EXPECT_DOUBLE_EQ(f.trainable_parameters.value.value_or(0), 4194304.0);
  EXPECT_GT(a.estimate.p50_bytes, 6738415616.0 * 2);
}

TEST(MemoryModelTest, QloraQuantizesTheLinearWeightsOnlyAndPrepareCastsTheRestToFp32) {
  Analysed a = AnalyseSource("qlora", R"(
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments
from peft import LoraConfig, prepare_model_for_kbit_training
from trl import SFTTrainer

bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                         bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3-8B", quantization_config=bnb)
model = prepare_model_for_kbit_training(model)
peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules="all-linear")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True,
                         optim="paged_adamw_8bit")
trainer = SFTTrainer(model=model, args=args, train_dataset=ds, peft_config=peft_config,
                     max_seq_length=1024)
trainer.train()
)");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.precision.value, Precision::kInt4);
  EXPECT_EQ(f.double_quant.value, true);
  EXPECT_EQ(f.kbit_prepared.value, true);
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kFull);  // prepare_model_for_kbit_training
  EXPECT_EQ(f.optimizer.value, Optimizer::kAdam8bit);
  EXPECT_EQ(f.seq_len.value, 1024);
  EXPECT_EQ(f.lora_targets.value, "all-linear");
  // all-linear, r=8: 32 × 8 × (q 8192 + k 5120 + v 5120 + o 8192 + gate, up, down 18432 each)
  //   = 20,971,520 trainable.
  EXPECT_DOUBLE_EQ(*f.trainable_parameters.value, 20971520.0);
  // The blocks' Linear weights: 32 × 218,103,808 = 6,979,321,856.
  EXPECT_DOUBLE_EQ(*f.quantized_parameters.value, 6979321856.0);
  const MemoryEstimate& e = a.estimate;
  // NF4 with double quantisation: 0.5 + 1/64 + 4/(64·256) B per weight = 3,600,416,768.
  EXPECT_NEAR(Term(e, "quantized weights"), 3600416768.0, 1.0);
  // Embeddings, lm_head and norms (8,030,261,248 − 6,979,321,856 = 1,050,939,392) in fp32.
  EXPECT_DOUBLE_EQ(Term(e, "weights (not quantized)"), 1050939392.0 * 4);
  // One layer's Linear weights dequantised to bf16: 218,103,808 × 2.
  EXPECT_DOUBLE_EQ(Term(e, "dequantization buffer"), 218103808.0 * 2);
  EXPECT_DOUBLE_EQ(Term(e, "LoRA adapters"), 20971520.0 * 4);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 20971520.0 * 4);
  // paged 8-bit AdamW: its states are in unified memory, not GPU memory the job needs.
  EXPECT_EQ(f.paged_optimizer.value, true);
  EXPECT_DOUBLE_EQ(Term(e, "optimizer states"), 0);
  // (32·2 + 34) · 1024·2·4096 = 822,083,584; logits 2·1024·128256·8 = 2,101,346,304.
  EXPECT_DOUBLE_EQ(Term(e, "activations"), 822083584.0);
  EXPECT_DOUBLE_EQ(Term(e, "logits"), 2101346304.0);
  // Dropout 0.05: each adapter keeps its dropped-out input (2 B) and mask (1 B) for the layer
  // recomputed: b·s·(6·4096 + 14336)·3 = 2·1024·38,912·3 = 239,075,328.
  EXPECT_DOUBLE_EQ(Term(e, "adapter activations"), 239075328.0);
}

TEST(MemoryModelTest, GenerationWithoutABatchGetsAnEstimateWithItsKvCache) {
  Analysed a = AnalyseSource("generate", R"(
import torch
from transformers import pipeline

pipe = pipeline("text-generation", model="Qwen/Qwen2.5-7B-Instruct", torch_dtype=torch.bfloat16)
out = pipe(prompts, max_new_tokens=256)
)");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.training.value, false);
  EXPECT_EQ(f.max_new_tokens.value, 256);
  EXPECT_EQ(f.max_new_tokens.where.ToString(), "train.py:6");
  EXPECT_EQ(f.batch_size.value, 1);
  EXPECT_TRUE(f.batch_size.assumed);
  EXPECT_EQ(f.seq_len.value, 512);  // the assumed prompt
  EXPECT_TRUE(f.seq_len.assumed);
  EXPECT_EQ(f.kv_heads.value, 4);
  const MemoryEstimate& e = a.estimate;
  EXPECT_DOUBLE_EQ(Term(e, "weights"), 7615616512.0 * 2);
  // 2 (K and V) · 28 layers · 4 KV heads · 128 · (512 + 256) tokens · 1 · 2 B = 44,040,192:
  // grouped-query attention keeps 7 times less than 28 heads would.
  EXPECT_DOUBLE_EQ(Term(e, "KV cache"), 44040192.0);
  EXPECT_FALSE(e.assumptions.empty());
  EXPECT_GT(e.p90_bytes, e.p50_bytes);
}

TEST(MemoryModelTest, PipelineGivenAModelObjectLeavesTheModelToItsFromPretrained) {
  // pipeline(model=model) passes the object from_pretrained loaded: not a name to look up. The
  // known model is sized from from_pretrained with its torch_dtype.
  Analysed a = AnalyseSource("pipeline-object", R"(
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

model = AutoModelForCausalLM.from_pretrained("bigcode/octocoder", torch_dtype=torch.bfloat16, device_map="auto")
tokenizer = AutoTokenizer.from_pretrained("bigcode/octocoder")
pipe = pipeline("text-generation", model=model, tokenizer=tokenizer)
result = pipe(prompt, max_new_tokens=60)
)");
  EXPECT_DOUBLE_EQ(Term(a.estimate, "weights"), 15517456384.0 * 2);
  EXPECT_EQ(a.facts.kv_heads.value, 1);  // multi-query: one K and one V head per layer

  // An unknown name: the reason given is from_pretrained's, not the pipeline's argument.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rightsize-pipe-unk";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.sh") << "#!/bin/bash\n#SBATCH --gres=gpu:1\npython train.py\n";
  std::ofstream(dir / "train.py")
      << "from transformers import AutoModelForCausalLM, pipeline\n"
         "model = AutoModelForCausalLM.from_pretrained(\"acme/unk-9b\")\n"
         "pipe = pipeline(\"text-generation\", model=model)\n";
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, dir.string(), "train.sh");
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  auto e = EstimateGpuMemory(*facts);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().ToString().find("acme/unk-9b is not in the table"), std::string::npos)
      << e.status().ToString();
}

TEST(MemoryModelTest, MmdetectionConfigNamedOnTheCommandLine) {
  // tools/train.py CONFIG: the config is read as part of the program; the detector from its
  // model dict, the images from the training Resize, the batch from samples_per_gpu.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rightsize-mmdet";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "tools");
  std::ofstream(dir / "train.sh") << "#!/bin/bash\n#SBATCH --gres=gpu:1\n"
                                     "python tools/train.py retina.py --work-dir w\n";
  std::ofstream(dir / "tools" / "train.py")
      << "import argparse\nfrom mmcv import Config\n"
         "parser = argparse.ArgumentParser()\nparser.add_argument('config')\n"
         "cfg = Config.fromfile(parser.parse_args().config)\n";
  std::ofstream(dir / "retina.py")
      << "model = dict(type='RetinaNet', backbone=dict(type='ResNet', depth=50),\n"
         "             neck=dict(type='FPN', out_channels=256))\n"
         "train_pipeline = [dict(type='Resize', img_scale=(1333, 800), keep_ratio=True)]\n"
         "data = dict(samples_per_gpu=4, workers_per_gpu=2)\n"
         "optimizer = dict(type='SGD', lr=0.01, momentum=0.9)\n"
         "fp16 = dict(loss_scale=512.)\n";
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, dir.string(), "train.sh");
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  const CodeFacts& f = *facts;
  EXPECT_EQ(f.model.value, "RetinaNet r50 FPN");
  EXPECT_EQ(f.model.where.ToString(), "retina.py:1");
  EXPECT_EQ(f.batch_size.value, 4);
  EXPECT_EQ(f.image_size.value, 1033);  // √(1333·800)
  EXPECT_EQ(f.precision.value, Precision::kMixedFp16);
  EXPECT_EQ(f.optimizer.value, Optimizer::kSgdMomentum);
  EXPECT_EQ(f.training.value, true);
  auto e = EstimateGpuMemory(f);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto d = DetectorOf("RetinaNet", 50, 1, 64, 80,
                      {.frozen_bn = false, .frozen_stages = 1, .fused_focal_loss = true});
  ASSERT_TRUE(d.ok());
  // Per-image bytes at 224²'s area × (1033/224)² × 4 images × 0.5 (16-bit activations).
  EXPECT_NEAR(Term(*e, "activations"),
              d->activation_bytes_per_image * (1033.0 / 224) * (1033.0 / 224) * 4 * 0.5, 1.0);
}

TEST(MemoryModelTest, TorchvisionDetectorFromScratchTrainsEveryBnAndStage) {
  auto program = [](const std::string& args, int batch) {
    return fmt::format(R"(
import torch
import torchvision
model = torchvision.models.detection.fasterrcnn_resnet50_fpn({}).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
loader = torch.utils.data.DataLoader(dataset, batch_size={}, collate_fn=collate)
for images, targets in loader:
    loss = sum(model(images, targets).values())
    loss.backward()
    optimizer.step()
)",
                       args, batch);
  };
  Analysed pretrained = AnalyseSource("det-pretrained", program("num_classes=91", 2));
  Analysed scratch =
      AnalyseSource("det-scratch", program("weights=None, weights_backbone=None", 2));
  Analysed three = AnalyseSource("det-frozen", program("trainable_backbone_layers=0", 2));
  Analysed one = AnalyseSource("det-one", program("", 1));
  const DetectorTraining frozen{.frozen_bn = true, .frozen_stages = 1};
  // The box head's 512 sampled boxes per image save the same whatever the image's size.
  const double roi = 512.0 * (256 * 49 + 2 * 1024) * 4;
  EXPECT_EQ(FindTorchvisionDetector("fasterrcnn_resnet50_fpn")->roi_bytes_per_image, roi);
  auto per_image = [&](const DetectorTraining& how) {
    const double area = (1033.0 / 224) * (1033.0 / 224);  // 1333×800
    return FindTorchvisionDetector("fasterrcnn_resnet50_fpn", how)->activation_bytes_per_image *
               area +
           roi;
  };
  auto acts = [](const Analysed& a) { return Term(a.estimate, "activations"); };
  EXPECT_NEAR(acts(pretrained), per_image(frozen) * 2, 1.0);
  EXPECT_NEAR(acts(scratch), per_image({.frozen_bn = false, .frozen_stages = -1}) * 2, 1.0);
  EXPECT_GT(acts(scratch), 2 * acts(pretrained));
  // trainable_backbone_layers=0: the body saves nothing, only the FPN and the RPN do.
  EXPECT_NEAR(acts(three), per_image({.frozen_bn = true, .frozen_stages = 4}) * 2, 1.0);
  EXPECT_LT(acts(three), acts(pretrained) / 2);
  EXPECT_NEAR(acts(one), per_image(frozen), 1.0);
  // The step's transients grow with the pixels and the batch, and a detector's only.
  EXPECT_NEAR(Term(pretrained.estimate, "detector step transients"),
              2 * Term(one.estimate, "detector step transients"), 1.0);
  EXPECT_GT(Term(one.estimate, "detector step transients"), 0.4 * 1333 * 800);
  EXPECT_NE(scratch.facts.model.how.find("from scratch"), std::string::npos);
}

TEST(MemoryModelTest, Detectron2ModelZooConfigAndItsBatchOverEveryGpu) {
  auto program = [](const std::string& zoo) {
    return fmt::format(R"(
from detectron2 import model_zoo
from detectron2.config import get_cfg
from detectron2.engine import DefaultTrainer
cfg = get_cfg()
cfg.merge_from_file(model_zoo.get_config_file("{}"))
cfg.SOLVER.IMS_PER_BATCH = 8
trainer = DefaultTrainer(cfg)
trainer.train()
)",
                       zoo);
  };
  Analysed mask = AnalyseJob("d2-mask", "torchrun --nproc_per_node=4 train.py",
                             program("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"), {});
  const CodeFacts& f = mask.facts;
  EXPECT_EQ(f.model.value, "MaskRCNN r50 FPN");
  EXPECT_EQ(f.framework.value, "detectron2");
  EXPECT_EQ(f.batch_size.value, 2);  // 8 images over 4 processes
  EXPECT_EQ(f.batch_size.where.ToString(), "train.py:7");
  EXPECT_EQ(f.optimizer.value, Optimizer::kSgdMomentum);
  EXPECT_EQ(f.training.value, true);
  EXPECT_GT(Term(mask.estimate, "DDP gradient buckets"), 0);
  // FrozenBN and a frozen stem and res2, as torchvision's pretrained detectors; the mask head
  // on 128 positive boxes per image adds its saved maps.
  auto d = DetectorOf("MaskRCNN", 50, 1, 64, 80, {.frozen_bn = true, .frozen_stages = 1});
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->roi_bytes_per_image,
              (512.0 * (256 * 49 + 2 * 1024) + 128.0 * (5 * 256 * 196 + 256 * 784)) * 4, 1.0);
  EXPECT_NEAR(
      Term(mask.estimate, "activations"),
      (d->activation_bytes_per_image * (1033.0 / 224) * (1033.0 / 224) + d->roi_bytes_per_image) *
          2,
      1.0);
  Analysed retina = AnalyseJob("d2-retina", "python train.py",
                               program("COCO-Detection/retinanet_R_101_FPN_3x.yaml"), {});
  EXPECT_EQ(retina.facts.model.value, "RetinaNet r101 FPN");
  EXPECT_EQ(retina.facts.batch_size.value, 8);  // one process
  // detectron2's RetinaNet takes P6 from res5, as MMDetection's does, with FrozenBN (no BN
  // parameters): MMDetection's count less its BNs' weights.
  auto mmdet = DetectorOf("RetinaNet", 50, 1, 64, 80, {.frozen_bn = false});
  auto d2 = DetectorOf("RetinaNet", 50, 1, 64, 80, {.frozen_bn = true});
  auto d2_101 = DetectorOf("RetinaNet", 101, 1, 64, 80, {.frozen_bn = true});
  ASSERT_TRUE(mmdet.ok() && d2.ok() && d2_101.ok());
  EXPECT_DOUBLE_EQ(d2->parameters, mmdet->parameters - 53120);
  EXPECT_EQ(retina.facts.parameters.value, d2_101->parameters);
  // A C4 backbone is not modelled: the model is undetermined, with the reason.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rightsize-d2-c4";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.sh") << "#!/bin/bash\npython train.py\n";
  std::ofstream(dir / "train.py") << program("COCO-Detection/faster_rcnn_R_50_C4_1x.yaml");
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  ASSERT_TRUE(script.ok());
  auto c4 = AnalyzeJobCode(*script, dir.string(), "train.sh");
  ASSERT_TRUE(c4.ok()) << c4.status().ToString();
  EXPECT_FALSE(c4->model.known());
  bool said = false;
  for (const auto& u : c4->undetermined)
    said = said || u.reason.find("not C4") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_FALSE(EstimateGpuMemory(*c4).ok());
}

TEST(MemoryModelTest, TorchtuneRecipeIsReadFromItsYamlConfig) {
  const std::string full = R"(model:
  _component_: torchtune.models.llama3_1.llama3_1_8b
tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  max_seq_len: 2048
batch_size: 2
optimizer:
  _component_: bitsandbytes.optim.PagedAdamW8bit
  lr: 1e-5
optimizer_in_bwd: True
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss
enable_activation_checkpointing: True
dtype: bf16
)";
  Analysed a =
      AnalyseJob("tune-full", "tune run full_finetune_single_device --config tt.yaml batch_size=4",
                 "", {{"tt.yaml", full}});
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.framework.value, "torchtune");
  EXPECT_EQ(f.model.value, "llama-3.1-8b");
  EXPECT_EQ(f.model.where.ToString(), "tt.yaml:2");
  EXPECT_EQ(f.batch_size.value, 4);  // the command line's override wins
  EXPECT_EQ(f.batch_size.where.ToString(), "train.sh:3");
  EXPECT_EQ(f.seq_len.value, 2048);
  EXPECT_EQ(f.precision.value, Precision::kBf16);
  EXPECT_EQ(f.optimizer.value, Optimizer::kAdam8bit);
  EXPECT_EQ(f.paged_optimizer.value, true);
  EXPECT_EQ(f.optimizer_in_backward.value, true);
  EXPECT_EQ(f.loss_chunks.value, 8);
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kFull);
  const double v = 128256, h = 4096, b = 4, s = 2048;
  // One parameter's gradient at a time (the largest, V·h in bf16), no paged states on the GPU,
  // the logits in bf16 with their gradient and one fp32 chunk of eight.
  EXPECT_NEAR(Term(a.estimate, "gradients"), v * h * 2, 1.0);
  EXPECT_EQ(Term(a.estimate, "optimizer states"), 0);
  EXPECT_NEAR(Term(a.estimate, "logits"), b * s * v * (2 * 2 + 8.0 / 8), 1.0);

  // LoRA: torchtune's module names are the Hub's (output_proj is o_proj), so the adapters are
  // those of the same PEFT LoraConfig.
  const std::string lora = R"(model:
  _component_: torchtune.models.llama3_1.lora_llama3_1_8b
  lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']
  apply_lora_to_mlp: False
  lora_rank: 8
tokenizer:
  max_seq_len: 1024
batch_size: 2
dtype: bf16
)";
  Analysed l = AnalyseJob("tune-lora", "tune run lora_finetune_single_device --config tt.yaml", "",
                          {{"tt.yaml", lora}});
  Analysed peft = AnalyseSource("tune-peft", R"(
import torch
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.bfloat16)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"]))
optimizer = torch.optim.AdamW(model.parameters())
batch_size = 2
max_length = 1024
)");
  EXPECT_EQ(l.facts.lora_targets.value, "q_proj,v_proj,o_proj");
  ASSERT_TRUE(l.facts.trainable_parameters.known());
  EXPECT_EQ(l.facts.trainable_parameters.value, peft.facts.trainable_parameters.value);
  EXPECT_EQ(l.facts.seq_len.value, 1024);
  // torchtune's adapters, their gradients and AdamW's states are bf16; PEFT's fp32.
  const double t = *l.facts.trainable_parameters.value;
  EXPECT_NEAR(Term(l.estimate, "LoRA adapters"), t * 2, 1.0);
  EXPECT_NEAR(Term(l.estimate, "optimizer states"), t * 4, 1.0);
  EXPECT_NEAR(Term(peft.estimate, "LoRA adapters"), t * 4, 1.0);
  EXPECT_NEAR(Term(peft.estimate, "optimizer states"), t * 8, 1.0);

  // torchrun's options before the recipe (with their values), a distributed recipe (FSDP over
  // the processes), and a list given whole on the command line replacing the file's.
  Analysed d = AnalyseJob(
      "tune-dist",
      "tune run --nnodes 1 --rdzv_backend c10d --nproc_per_node 4 lora_finetune_distributed "
      "--config tt.yaml model.lora_attn_modules=[q_proj,k_proj]",
      "", {{"tt.yaml", lora}});
  EXPECT_EQ(d.facts.processes.value, 4);
  EXPECT_EQ(d.facts.parallelism.value, "FSDP");
  EXPECT_EQ(d.facts.zero_stage.value, 3);
  EXPECT_EQ(d.facts.lora_targets.value, "q_proj,k_proj");
}

TEST(MemoryModelTest, TorchtuneConfigsThatCannotBeReadSayWhy) {
  auto analyse = [](const std::string& name, const std::string& command,
                    const std::string& yaml) -> Status {
    std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "train.sh") << "#!/bin/bash\n" << command << "\n";
    if (!yaml.empty()) std::ofstream(dir / "tt.yaml") << yaml;
    auto script = ParseJobScriptFile((dir / "train.sh").string());
    if (!script.ok()) return script.status();
    auto facts = AnalyzeJobCode(*script, dir.string(), "train.sh");
    return facts.status();
  };
  // A config shipped with torchtune, not copied into the project.
  Status builtin =
      analyse("tune-builtin",
              "tune run lora_finetune_single_device --config llama3_1/8B_lora_single_device", "");
  EXPECT_FALSE(builtin.ok());
  EXPECT_NE(builtin.message().find("tune cp"), std::string::npos) << builtin.message();
  Status recipe =
      analyse("tune-eval", "tune run eleuther_eval --config tt.yaml", "batch_size: 2\n");
  EXPECT_FALSE(recipe.ok());
  EXPECT_NE(recipe.message().find("not modelled"), std::string::npos) << recipe.message();
  Status broken = analyse("tune-broken", "tune run full_finetune_single_device --config tt.yaml",
                          "model: [unclosed\n");
  EXPECT_FALSE(broken.ok());
}

TEST(MemoryModelTest, MemoryOptimisationsWrittenInTheProgram) {
  auto program = [](const std::string& extra) {
    return R"(
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)
batch_size = 4
max_length = 1024
)" + extra +
           R"(
for x in loader:
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
)";
  };
  Analysed plain =
      AnalyseSource("opt-plain", program("optimizer = torch.optim.AdamW(model.parameters())\n"));
  Analysed in_bwd = AnalyseSource("opt-in-bwd", program(R"(
optimizers = {p: torch.optim.AdamW([p]) for p in model.parameters()}
def step(p):
    optimizers[p].step()
    optimizers[p].zero_grad()
for p in model.parameters():
    p.register_post_accumulate_grad_hook(step)
)"));
  Analysed paged = AnalyseSource("opt-paged", program(R"(
import bitsandbytes as bnb
optimizer = bnb.optim.PagedAdamW8bit(model.parameters())
)"));
  Analysed liger = AnalyseSource("opt-liger", program(R"(
from liger_kernel.transformers import apply_liger_kernel_to_llama
apply_liger_kernel_to_llama()
optimizer = torch.optim.AdamW(model.parameters())
)"));
  Analysed offload = AnalyseSource("opt-offload", program(R"(
optimizer = torch.optim.AdamW(model.parameters())
with torch.autograd.graph.save_on_cpu(pin_memory=True):
    pass
)"));
  const double v = 128256, h = 2048;
  EXPECT_EQ(in_bwd.facts.optimizer_in_backward.value, true);
  EXPECT_NEAR(Term(in_bwd.estimate, "gradients"), v * h * 2, 1.0);
  EXPECT_LT(Term(in_bwd.estimate, "gradients"), Term(plain.estimate, "gradients") / 3);
  EXPECT_EQ(paged.facts.paged_optimizer.value, true);
  EXPECT_EQ(Term(paged.estimate, "optimizer states"), 0);
  EXPECT_GT(Term(plain.estimate, "optimizer states"), 0);
  EXPECT_EQ(liger.facts.loss_chunks.value, 0);
  EXPECT_NEAR(Term(liger.estimate, "logits"), 4.0 * 1024 * h * 8, 1.0);
  EXPECT_EQ(offload.facts.activation_offload.value, true);
  EXPECT_LT(Term(offload.estimate, "activations"), Term(plain.estimate, "activations") / 4);
}

TEST(MemoryModelTest, EncoderDecoderRunsItsDecoderAtTheTargetLength) {
  auto program = [](const std::string& target) {
    return R"(
import torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("bigscience/T0_3B")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batch_size = 8
max_length = 64
)" + target +
           R"(
for x, y in loader:
    loss = model(input_ids=x, labels=y).loss
    loss.backward()
    optimizer.step()
)";
  };
  Analysed short_target = AnalyseSource("t0-target", program("max_target_length = 4"));
  Analysed no_target = AnalyseSource("t0-no-target", program(""));
  EXPECT_EQ(short_target.facts.decoder_layers.value, 24);
  EXPECT_EQ(short_target.facts.target_len.value, 4);
  // 24 encoder layers at s=64, 24 decoder layers at t=4 with cross-attention over 64, fp32 (×2):
  const double b = 8, h = 2048, a = 32, s = 64, t = 4;
  const double enc = s * b * h * (34 + 5 * a * s / h);
  const double dec =
      t * b * h * (34 + 5 * a * t / h) + b * h * (13 * t + 4 * s) + 5 * a * t * s * b;
  EXPECT_DOUBLE_EQ(Term(short_target.estimate, "activations"), 24 * (enc + dec) * 2);
  EXPECT_DOUBLE_EQ(Term(short_target.estimate, "logits"), b * t * 32128 * 4 * 2);
  // Without a target length the decoder is taken at the source length, and that is said.
  EXPECT_GT(Term(no_target.estimate, "activations"),
            3 * Term(short_target.estimate, "activations") / 2);
  EXPECT_FALSE(no_target.estimate.assumptions.empty());
}

TEST(MemoryModelTest, LocalConfigJsonSizesTheModel) {
  // from_pretrained on a local folder: its config.json, read as transformers reads it.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "rightsize-localcfg";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "ckpt");
  std::ofstream(dir / "ckpt" / "config.json") << R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
  "vocab_size": 128256, "tie_word_embeddings": true, "max_position_embeddings": 131072
})";
  std::ofstream(dir / "train.sh") << "#!/bin/bash\npython train.py\n";
  std::ofstream(dir / "train.py") << R"(
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("ckpt")
out = model.generate(ids, max_new_tokens=64)
)";
  auto script = ParseJobScriptFile((dir / "train.sh").string());
  ASSERT_TRUE(script.ok());
  auto facts = AnalyzeJobCode(*script, dir.string(), "train.sh");
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  EXPECT_DOUBLE_EQ(*facts->parameters.value, 1235814400.0);  // Llama-3.2-1B's shape
  EXPECT_EQ(facts->parameters.where.ToString(), "ckpt/config.json:3");
  EXPECT_EQ(facts->kv_heads.value, 8);
  EXPECT_EQ(facts->head_dim.value, 64);
  auto e = EstimateGpuMemory(*facts);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_GT(Term(*e, "KV cache"), 0);
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, FabricWithAnFsdpStrategyShardsOverItsDevicesAnd8BitAdam) {
  Analysed a = AnalyseSource("fabric", R"(
import lightning as L
import bitsandbytes as bnb
from lightning.fabric.strategies import FSDPStrategy
from transformers import AutoModelForCausalLM, AutoTokenizer

strategy = FSDPStrategy(activation_checkpointing_policy={GPTNeoXLayer})
fabric = L.Fabric(accelerator="cuda", devices=4, precision="bf16-mixed", strategy=strategy)
fabric.launch()
model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-1b")
tok = AutoTokenizer.from_pretrained("EleutherAI/pythia-1b")
enc = tok(texts, max_length=512, truncation=True)
optimizer = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
model, optimizer = fabric.setup(model, optimizer)
loader = DataLoader(ds, batch_size=8)
)");
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.parallelism.value, "Lightning FSDP");
  EXPECT_EQ(f.zero_stage.value, 3);
  EXPECT_EQ(f.zero_stage.where.ToString(), "train.py:7");
  EXPECT_EQ(f.precision.value, Precision::kMixedBf16);
  EXPECT_EQ(f.processes.value, 4);
  EXPECT_EQ(f.checkpointing.value, Checkpointing::kFull);
  EXPECT_EQ(f.optimizer.value, Optimizer::kAdam8bit);
  const MemoryEstimate& e = a.estimate;
  EXPECT_EQ(e.data_parallel_gpus, 4);
  // Pythia-1b: 1,011,781,632 params; bf16 mixed with 8-bit AdamW: 2 + 2 + (4 master + 2) B,
  // all three divided over the 4 devices by FULL_SHARD.
  EXPECT_DOUBLE_EQ(Term(e, "weights"), 1011781632.0 * 2 / 4);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 1011781632.0 * 2 / 4);
  EXPECT_DOUBLE_EQ(Term(e, "optimizer states"), 1011781632.0 * 6 / 4);
  EXPECT_DOUBLE_EQ(Term(e, "DDP gradient buckets"), -1);  // sharded: no bucket copy
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, AutocastOverBf16WeightsKeepsNoFp32MasterCopy) {
  // Full fine-tuning of a model loaded in bf16 with the HF Trainer's bf16=True: the parameters,
  // their gradients and AdamW's moments are all bf16 (2 + 2 + 4 B), where fp32-loaded weights
  // under the same flag (torch's autocast) keep fp32 weights, gradients and moments (4 + 4 + 8)
  // and a bf16 copy of each weight (2 B).
  const std::string program = R"(
import torch
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B"{})
enc = tok(texts, max_length=256, truncation=True)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
Trainer(model=model, args=args).train()
)";
  Analysed bf16 = AnalyseSource("bf16_weights",
                                fmt::format(fmt::runtime(program), ", torch_dtype=torch.bfloat16"));
  Analysed fp32 = AnalyseSource("fp32_weights", fmt::format(fmt::runtime(program), ""));
  const double p = 494032768.0;  // Qwen2-0.5B's shape, tied embeddings
  EXPECT_DOUBLE_EQ(*bf16.facts.parameters.value, p);
  EXPECT_EQ(bf16.facts.weight_dtype.value, Precision::kBf16);
  EXPECT_DOUBLE_EQ(Term(bf16.estimate, "weights") + Term(bf16.estimate, "gradients") +
                       Term(bf16.estimate, "optimizer states"),
                   8 * p);
  EXPECT_DOUBLE_EQ(Term(fp32.estimate, "weights") + Term(fp32.estimate, "gradients") +
                       Term(fp32.estimate, "optimizer states"),
                   16 * p);
  EXPECT_DOUBLE_EQ(Term(fp32.estimate, "16-bit weight copies"), 2 * p);
  EXPECT_DOUBLE_EQ(Term(bf16.estimate, "16-bit weight copies"), -1);
  // The activations are 16-bit in both, but over fp32 weights the residual stream and the
  // norms' inputs stay fp32: 2 norms × 2 B more × s·b·h × L = 4 · 256·4·896 · 24 = 88,080,384.
  EXPECT_DOUBLE_EQ(Term(fp32.estimate, "activations") - Term(bf16.estimate, "activations"),
                   88080384.0);
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, HuggingFaceVitTakesItsPatchFromTheConfig) {
  Analysed a = AnalyseSource("hf_vit", R"(
import torch
from transformers import ViTForImageClassification
model = ViTForImageClassification.from_pretrained("google/vit-base-patch32-224-in21k")
loader = torch.utils.data.DataLoader(train_set, batch_size=32)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
)");
  EXPECT_EQ(a.facts.architecture, Architecture::kVit);
  // ViTModel with its pooler: 3·32²·768 + 768 patch projection, [CLS], 50 positions,
  // 12 × 7,087,872, final LayerNorm, pooler = 88,045,824.
  EXPECT_DOUBLE_EQ(*a.facts.parameters.value, 88045824.0);
  EXPECT_EQ(a.facts.image_size.value, 224);
  // s = (224/32)² + 1 = 50 tokens, eager attention, fp32:
  //   12 · 50·32·768 · (34 + 5·12·50/768) · 2 = 1,117,900,800.
  EXPECT_DOUBLE_EQ(Term(a.estimate, "activations"), 1117900800.0);
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, AutocastInferenceHoldsA16BitCopyOfEachWeight) {
  // Inference under torch.autocast: the fp32 weights (4 B) and, cached by autocast for the
  // forward pass, a bf16 copy of each (2 B): 6 B × ResNet-50's parameters. Without
  // autocast only the 4 B.
  const std::string program = R"(
import torch
import torchvision
model = torchvision.models.resnet50().cuda().eval()
images = torch.randn(32, 3, 224, 224, device="cuda")
with torch.no_grad(){}:
    out = model(images)
)";
  Analysed amp = AnalyseSource(
      "autocast_infer",
      fmt::format(fmt::runtime(program), ", torch.autocast(\"cuda\", dtype=torch.bfloat16)"));
  Analysed fp32 = AnalyseSource("fp32_infer", fmt::format(fmt::runtime(program), ""));
  ASSERT_TRUE(amp.facts.parameters.known());
  const double p = *amp.facts.parameters.value;  // the model table's 25.56 M
  EXPECT_NEAR(p, 25557032.0, 0.005 * 25557032.0);
  EXPECT_EQ(amp.facts.precision.value, Precision::kMixedBf16);
  EXPECT_FALSE(amp.facts.training.value.value_or(false));
  EXPECT_DOUBLE_EQ(Term(amp.estimate, "weights"), 4 * p);
  EXPECT_DOUBLE_EQ(Term(amp.estimate, "16-bit weight copies"), 2 * p);
  EXPECT_DOUBLE_EQ(Term(fp32.estimate, "weights"), 4 * p);
  EXPECT_DOUBLE_EQ(Term(fp32.estimate, "16-bit weight copies"), -1);
}

TEST(MemoryModelTest, AutocastTrainingKeepsFp32StatesAndA16BitCopy) {
  // A hand-written training loop under torch.autocast(bf16) with SGD + momentum: fp32 weights,
  // gradients and momentum (4 + 4 + 4 B) and a bf16 copy of each weight (2 B), 14 B/param in all
  // (where a 16-bit model with an fp32 master copy would hold 2 + 2 + 4 + 4 = 12). The model:
  // Linear(1024, 4096) + Linear(4096, 4096) + Linear(4096, 10) = 4,198,400 + 16,781,312 +
  // 40,970 = 21,020,682 parameters.
  Analysed a = AnalyseSource("autocast_sgd", R"(
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                      nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = torch.utils.data.DataLoader(data, batch_size=64)
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    opt.zero_grad()
    loss.backward()
    opt.step()
)");
  const double p = 21020682.0;
  ASSERT_TRUE(a.facts.parameters.known());
  EXPECT_DOUBLE_EQ(*a.facts.parameters.value, p);
  EXPECT_EQ(a.facts.precision.value, Precision::kMixedBf16);
  const MemoryEstimate& e = a.estimate;
  EXPECT_DOUBLE_EQ(Term(e, "weights"), 4 * p);
  EXPECT_DOUBLE_EQ(Term(e, "16-bit weight copies"), 2 * p);
  EXPECT_DOUBLE_EQ(Term(e, "gradients"), 4 * p);
  EXPECT_DOUBLE_EQ(Term(e, "optimizer states"), 4 * p);
}

}  // namespace
}  // namespace rightsize::code

namespace rightsize::code {
namespace {

TEST(MemoryModelTest, HandBuiltMlpActivationsGrowWithTheBatch) {
  // Three nn.Linear layers built in a loop-free Sequential: Σ out_features = 4096 + 4096 + 10 =
  // 8,202 per sample. Training in fp32 saves each layer's output and its GELU's (4 B each) and a
  // 1-byte dropout mask: 64 · 8,202 · 9 = 4,724,352 B. Inference holds one layer's input and
  // output, of the widest layer: 256 · 2 · 4,096 · 4 = 8,388,608 B.
  const std::string model = R"(
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Dropout(0.1), nn.Linear(4096, 4096),
                      nn.GELU(), nn.Dropout(0.1), nn.Linear(4096, 10)).cuda()
)";
  Analysed train = AnalyseSource("mlp_train", model + R"(
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(data, batch_size=64)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    loss.backward()
    opt.step()
)");
  Analysed infer = AnalyseSource("mlp_infer", model + R"(
loader = torch.utils.data.DataLoader(data, batch_size=256)
with torch.no_grad():
    for x, _ in loader:
        out = model(x.cuda())
)");
  EXPECT_EQ(train.facts.architecture, Architecture::kMlp);
  EXPECT_EQ(train.facts.mlp_features.value, 8202.0);
  EXPECT_EQ(train.facts.mlp_widest.value, 4096.0);
  EXPECT_DOUBLE_EQ(Term(train.estimate, "activations"), 4724352.0);
  EXPECT_DOUBLE_EQ(train.estimate.bytes_per_sample, 1.1 * 4724352.0 / 64);
  EXPECT_FALSE(infer.facts.training.value.value_or(true));
  EXPECT_DOUBLE_EQ(Term(infer.estimate, "activations"), 8388608.0);
}

// A job launched with `accelerate launch --config_file FILE train.py`, FILE and any extra files
// written beside train.py.
Analysed AnalyseAccelerate(const std::string& name, const std::string& python,
                           const std::string& config_file,
                           const std::vector<std::pair<std::string, std::string>>& files) {
  return AnalyseJob(name, "accelerate launch --config_file " + config_file + " train.py", python,
                    files);
}

constexpr char kPeftAccelerateLoop[] = R"(
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model

accelerator = Accelerator()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
model = get_peft_model(model, LoraConfig(r=8, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
loader = torch.utils.data.DataLoader(ds, batch_size=8)
model, loader, optimizer = accelerator.prepare(model, loader, optimizer)
for x, y in loader:
    loss = model(input_ids=x[:, :64], labels=y).loss
    accelerator.backward(loss)
    optimizer.step()
)";

std::string AccelerateDeepSpeedYaml(const std::string& param_device) {
  return "compute_environment: LOCAL_MACHINE\n"
         "deepspeed_config:\n"
         "  gradient_accumulation_steps: 1\n"
         "  offload_optimizer_device: cpu\n"
         "  offload_param_device: " +
         param_device +
         "\n"
         "  zero3_init_flag: true\n"
         "  zero_stage: 3\n"
         "distributed_type: DEEPSPEED\n"
         "mixed_precision: 'no'\n"
         "num_machines: 1\n"
         "num_processes: 1\n";
}

TEST(MemoryModelTest, AccelerateConfigFileWithZero3ParamOffloadKeepsOnlyLiveParametersOnTheGpu) {
  Analysed off = AnalyseAccelerate("acc-ds-offload", kPeftAccelerateLoop, "ds_zero3_cpu.yaml",
                                   {{"ds_zero3_cpu.yaml", AccelerateDeepSpeedYaml("cpu")}});
  const CodeFacts& f = off.facts;
  // The launcher's config file is read the way accelerate builds its DeepSpeed config.
  EXPECT_EQ(f.parallelism.value, "DeepSpeed");
  EXPECT_EQ(f.zero_stage.value, 3);
  EXPECT_EQ(f.zero_stage.where.ToString(), "ds_zero3_cpu.yaml:7");
  EXPECT_EQ(f.optimizer_offload.value, true);
  EXPECT_EQ(f.param_offload.value, true);
  EXPECT_EQ(f.param_offload.where.ToString(), "ds_zero3_cpu.yaml:5");
  EXPECT_EQ(f.processes.value, 1);
  EXPECT_EQ(f.precision.value, Precision::kFp32);  // mixed_precision: 'no'
  // DeepSpeed keeps up to stage3_max_live_parameters (1e9 by default) gathered, and fetches the
  // 32000 × 4096 embedding whole: 1,131,072,000 of the 6,738,415,616 fp32 weights on the GPU.
  EXPECT_DOUBLE_EQ(Term(off.estimate, "weights (frozen)"), (1e9 + 32000.0 * 4096) * 4);
  EXPECT_DOUBLE_EQ(Term(off.estimate, "optimizer states"), 0);

  Analysed on = AnalyseAccelerate("acc-ds-nooffload", kPeftAccelerateLoop, "ds_zero3.yaml",
                                  {{"ds_zero3.yaml", AccelerateDeepSpeedYaml("none")}});
  EXPECT_FALSE(on.facts.param_offload.value.value_or(false));
  // Without parameter offload a single GPU holds every weight (ZeRO-3 over one GPU shards
  // nothing).
  EXPECT_DOUBLE_EQ(Term(on.estimate, "weights (frozen)"), 6738415616.0 * 4);
  EXPECT_GT(on.estimate.p50_bytes, off.estimate.p50_bytes + 20e9);
}

TEST(MemoryModelTest, DeepSpeedJsonNamedByAnAccelerateConfigSetsTheLiveParameterLimit) {
  const std::string yaml =
      "compute_environment: LOCAL_MACHINE\n"
      "deepspeed_config:\n"
      "  deepspeed_config_file: ds.json\n"
      "distributed_type: DEEPSPEED\n"
      "num_processes: 2\n";
  const std::string json = R"({
  "train_micro_batch_size_per_gpu": 8,
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "cpu"},
    "offload_optimizer": {"device": "cpu"},
    "stage3_max_live_parameters": 3e8
  }
})";
  Analysed a = AnalyseAccelerate("acc-ds-json", kPeftAccelerateLoop, "acc.yaml",
                                 {{"acc.yaml", yaml}, {"ds.json", json}});
  const CodeFacts& f = a.facts;
  EXPECT_EQ(f.zero_stage.value, 3);
  EXPECT_EQ(f.param_offload.value, true);
  EXPECT_DOUBLE_EQ(*f.max_live_parameters.value, 3e8);
  EXPECT_EQ(f.processes.value, 2);  // the file's num_processes: no --num_processes given
  EXPECT_DOUBLE_EQ(Term(a.estimate, "weights (frozen)"), (3e8 + 32000.0 * 4096) * 4);
}

TEST(MemoryModelTest, AccelerateFsdpConfigShardsAndOffloads) {
  const std::string yaml =
      "distributed_type: FSDP\n"
      "fsdp_config:\n"
      "  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
      "mixed_precision: bf16\n"
      "num_processes: 4\n";
  Analysed a =
      AnalyseAccelerate("acc-fsdp", kPeftAccelerateLoop, "fsdp.yaml", {{"fsdp.yaml", yaml}});
  EXPECT_EQ(a.facts.parallelism.value, "FSDP");
  EXPECT_EQ(a.facts.zero_stage.value, 2);
  EXPECT_EQ(a.facts.precision.value, Precision::kMixedBf16);
  EXPECT_EQ(a.facts.processes.value, 4);
  EXPECT_FALSE(a.facts.param_offload.value.value_or(false));
}

constexpr char kMlpCastProgram[] = R"(
import torch
import torch.nn as nn

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                      nn.Linear(4096, 10))
%MOVE%
model.eval()
with torch.no_grad():
    for step in range(10):
        x = torch.randn(16, 4096, device=device, dtype=torch.bfloat16)
        y = model(x)
)";

Analysed AnalyseCast(const std::string& name, const std::string& move) {
  std::string program = kMlpCastProgram;
  program.replace(program.find("%MOVE%"), 6, move);
  return AnalyseSource(name, program);
}

TEST(MemoryModelTest, ModelCastTo16BitOnTheGpuPeaksWithItsFp32Weights) {
  // 2 × (4096² + 4096) + 4096 × 10 + 10: 33,603,594 params.
  const double params = 2.0 * 4096 * 4096 + 2 * 4096 + 4096 * 10 + 10;
  Analysed after = AnalyseCast("cast-after-move",
                               "model = model.to(device)\n"
                               "model = model.to(torch.bfloat16)");
  EXPECT_EQ(after.facts.precision.value, Precision::kBf16);
  EXPECT_EQ(after.facts.cast_after_move.value, true);
  EXPECT_EQ(after.facts.cast_after_move.where.ToString(), "train.py:9");
  ASSERT_DOUBLE_EQ(*after.facts.parameters.value, params);
  // The fp32 weights and one 16-bit copy of the widest layer (4096²) were on the GPU at once:
  // that, not the bf16 run, is the peak.
  double tensors = 0;
  for (const auto& t : after.estimate.terms) {
    if (t.name != "CUDA context" && t.name != "allocator overhead") tensors += t.bytes;
  }
  EXPECT_DOUBLE_EQ(tensors, params * 4 + 4096.0 * 4096 * 2);
  EXPECT_GT(Term(after.estimate, "fp32 weights before the cast"), 0);

  // Chained on one line, the move first: the same.
  Analysed chain = AnalyseCast("cast-chain", "model = model.cuda().half()");
  EXPECT_EQ(chain.facts.cast_after_move.value, true);

  // Cast first, then moved: the GPU only ever holds the 16-bit weights.
  Analysed before = AnalyseCast("cast-before-move",
                                "model = model.to(torch.bfloat16)\n"
                                "model = model.to(device)");
  EXPECT_FALSE(before.facts.cast_after_move.value.value_or(false));
  EXPECT_EQ(Term(before.estimate, "fp32 weights before the cast"), -1);
  EXPECT_LT(before.estimate.p50_bytes, after.estimate.p50_bytes);
}

TEST(MemoryModelTest, APromptWrittenInTheProgramSetsTheKvCacheLength) {
  Analysed a = AnalyseSource("generate-prompt", R"(
import torch
from transformers import pipeline

system_prompt = """You are a helpful assistant. """
question = "Question: what is two plus two? Answer:"
pipe = pipeline("text-generation", model="Qwen/Qwen2.5-7B-Instruct", torch_dtype=torch.bfloat16)
long_prompt = 100 * system_prompt + question
out = pipe(long_prompt, max_new_tokens=256)
)");
  const CodeFacts& f = a.facts;
  // 100 × 29 + 39 = 2,939 characters at 4 a token: 735 tokens, not the assumed 512.
  EXPECT_EQ(f.seq_len.value, 735);
  EXPECT_FALSE(f.seq_len.assumed);
  EXPECT_EQ(f.seq_len.where.ToString(), "train.py:9");
  // 2 · 28 layers · 4 KV heads · 128 · (735 + 256) tokens · 2 B = 56,827,904.
  EXPECT_DOUBLE_EQ(Term(a.estimate, "KV cache"), 56827904.0);
}

TEST(MemoryModelTest, BetterTransformerDropsTheAttentionScores) {
  const std::string program = R"(
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("bigcode/starcoder", torch_dtype=torch.bfloat16)
%BT%
ids = torch.randint(0, 49152, (1, 4096))
out = model.generate(ids, max_new_tokens=60)
)";
  std::string eager_src = program, bt_src = program;
  eager_src.replace(eager_src.find("%BT%"), 4, "");
  bt_src.replace(bt_src.find("%BT%"), 4, "model.to_bettertransformer()");
  Analysed eager = AnalyseSource("bt-eager", eager_src);
  Analysed bt = AnalyseSource("bt-sdpa", bt_src);
  EXPECT_FALSE(AttentionFused(eager.facts));
  EXPECT_EQ(bt.facts.attention.value, Attention::kSdpa);
  EXPECT_EQ(bt.facts.attention.where.ToString(), "train.py:6");
  // Eager attention keeps one layer's b·a·s² scores live: 5·a·s/h more per position and feature
  // (starcoder: a = 48, h = 6144).
  ASSERT_TRUE(bt.facts.seq_len.known());
  double s = static_cast<double>(*bt.facts.seq_len.value);
  EXPECT_NEAR(Term(bt.estimate, "activations") / Term(eager.estimate, "activations"),
              34.0 / (34.0 + 5.0 * 48 * s / 6144), 1e-9);
}

}  // namespace
}  // namespace rightsize::code

// Code analysis: what a job's Python source says about the resources it will need.
//
// From a parsed job script, AnalyzeJobCode finds the entry program (`python train.py …`,
// `torchrun`, `accelerate launch`, `deepspeed`, `srun python -m pkg.mod`) and its arguments,
// parses it and the local modules it imports with tree-sitter (a real Python parser), reads the
// YAML/JSON config files it names, and resolves argparse defaults against the command line.
// It extracts, each with the file:line that decided it: the framework, the model and its size,
// batch size, sequence length / image size, precision, optimizer, gradient accumulation,
// activation checkpointing, ZeRO stage / FSDP, the processes and GPUs used, data-loader
// workers and torch.compile. What cannot be known without running the code (a model chosen by
// getattr, a value from the environment) is listed in `undetermined` with the reason.
//
// Nothing is executed or imported. Bounded: at most kMaxCodeFiles Python files and
// kMaxConfigFiles config files, each at most kMaxSourceBytes. A file that does not parse
// gives the facts of its well-formed parts and a note in parse_errors; it never fails the
// analysis. Failure: NotFound when the script runs no Python program or its file is not in
// the code folder. Pure functions; thread-safe (each call owns its parsers and trees).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "code/python_env.h"
#include "core/status.h"
#include "jobscript/job_script.h"

namespace rightsize::code {

// A place in the job's files: "train.py:42", "configs/ds.json:7", "job.sbatch:12".
struct SourceLine {
  std::string file;  // relative to the code folder (or the script's name)
  int line = 0;      // 1-based; 0 when the fact was assumed rather than read
  bool empty() const { return file.empty(); }
  std::string ToString() const;
};

// One extracted fact: the value (nullopt when undetermined), the line that decided it and how.
template <typename T>
struct Fact {
  std::optional<T> value;
  SourceLine where;
  std::string how;       // "argparse default, --batch_size 16 on the command line", "assumed: …"
  bool assumed = false;  // a default filled in rather than read: widens the estimate
  int rank = -1;         // which kind of evidence set it; stronger evidence replaces weaker
  bool known() const { return value.has_value(); }
};

enum class Precision {
  kFp32,       // no autocast, no half weights
  kMixedFp16,  // autocast/AMP with float16 (fp32 master weights)
  kMixedBf16,  // autocast/AMP with bfloat16
  kFp16,       // weights and activations in float16 (`.half()`, torch_dtype)
  kBf16,       // weights and activations in bfloat16
  kInt8,       // bitsandbytes 8-bit weights
  kInt4,       // bitsandbytes 4-bit weights
};
enum class Optimizer { kAdam, kAdam8bit, kSgd, kSgdMomentum, kAdafactor };
enum class Checkpointing { kNone, kSelective, kFull };
enum class Architecture { kUnknown, kTransformer, kVit, kCnn, kMlp };
// The attention the model's code asks for. Whether it keeps the s² scores when the job runs
// also depends on the torch the job imports: AttentionFused.
enum class Attention {
  kEager,           // softmax(QKᵀ)V written out: the scores are kept
  kSdpa,            // torch's scaled_dot_product_attention, from torch 2.0
  kSdpaDefault,     // transformers' default of SDPA, which it picks only from torch 2.1.1;
                    // "sdpa-default"
  kFlashAttention,  // FlashAttention's own package, whatever the torch
};

std::string_view NameOf(Precision p);
std::string_view NameOf(Optimizer o);
std::string_view NameOf(Checkpointing c);
std::string_view NameOf(Architecture a);
std::string_view NameOf(Attention a);

struct Undetermined {
  std::string what;    // "model", "batch_size"
  std::string reason;  // "built with getattr(models, os.environ['ARCH'])"
  SourceLine where;
};

struct CodeFacts {
  // The program.
  std::string launcher;                   // "torchrun", "python", "deepspeed", …
  SourceLine command;                     // the script line that runs it
  int command_index = -1;                 // that command's index in JobScript::commands
  std::string entry;                      // "train.py", relative to the code folder
  std::vector<std::string> args;          // the program's own arguments
  std::vector<std::string> files;         // Python and config files read, in order
  std::vector<std::string> parse_errors;  // "models.py:12: syntax error; facts from the rest"

  std::vector<std::string> frameworks;  // every one imported: "PyTorch", "HF Transformers", …
  Fact<std::string> framework;          // the one that drives training

  Architecture architecture = Architecture::kUnknown;
  Fact<std::string> model;  // "gpt2-medium", "resnet50", "nn.TransformerEncoder", "LlamaConfig"
  Fact<int64_t> layers, hidden, heads, vocab, ffn, max_positions;
  // Attention's key/value heads (fewer than `heads` with grouped- or multi-query attention) and
  // the width of one head (Gemma's head_dim differs from hidden / heads): they size the KV cache.
  Fact<int64_t> kv_heads, head_dim;
  Fact<double> parameters;
  // The dtype the weights are loaded in (from_pretrained's torch_dtype, `.half()`), when read;
  // `precision` says how training computes, which can differ (bf16 autocast over fp32 weights).
  Fact<Precision> weight_dtype;
  // The model was moved to the GPU in fp32 and cast to 16-bit only there (`.to(device)` then
  // `.to(torch.bfloat16)` or `.half()`): its fp32 weights were all on the GPU first.
  Fact<bool> cast_after_move;
  // bitsandbytes loading (load_in_4bit / load_in_8bit, precision kInt4 / kInt8): the weights of
  // the transformer blocks' nn.Linear layers, which it quantises; embeddings, the output layer,
  // norms and biases stay 16-bit. Double quantisation shrinks the per-block constants.
  Fact<double> quantized_parameters;
  Fact<bool> double_quant;
  // prepare_model_for_kbit_training(): every weight that is not quantised is cast to fp32.
  Fact<bool> kbit_prepared;
  // PEFT LoRA (LoraConfig, get_peft_model, a trainer's peft_config): the adapters' rank, the
  // modules they target, the parameters that train (r·(in + out) per targeted matrix), the
  // adapter dropout, and the in-features of every targeted matrix summed over the model (each
  // keeps its dropped-out input for backward when the dropout is not zero).
  Fact<int64_t> lora_rank;
  Fact<std::string> lora_targets;  // "q_proj,v_proj", "all-linear"
  Fact<double> trainable_parameters;
  Fact<double> lora_dropout;
  Fact<double> lora_input_features;
  // The adapters' dtype: fp32 under PEFT (autocast_adapter_dtype) unless read otherwise;
  // torchtune keeps them, their gradients and their optimizer states in the model's dtype.
  Fact<Precision> adapter_dtype;
  // Generation (generate, a text-generation pipeline): the tokens added to the prompt; the
  // prompt is seq_len. The KV cache holds prompt + max_new_tokens positions.
  Fact<int64_t> max_new_tokens;
  Fact<int64_t> batch_size;  // per GPU (the micro-batch)
  Fact<int64_t> seq_len;
  // Encoder-decoders (T5, mT5): the decoder's share of `layers`, and the target length the
  // decoder runs at (max_target_length; seq_len when not found).
  Fact<int64_t> decoder_layers, target_len;
  Fact<int64_t> image_size;  // a square's side; a detector's W×H as the side of the same area
  // A detector (torchvision's, an MMDetection config): fp32 bytes saved per image at 224²'s area,
  // its backbone's, FPN's and heads' (model_zoo.h DetectorSpec).
  Fact<double> image_activation_bytes;
  // A two-stage detector's RoI heads: fp32 bytes saved per image on its sampled boxes.
  Fact<double> roi_activation_bytes;
  // A hand-built MLP (nn.Linear layers only): the out_features of its layers summed (each layer
  // as often as it is built) and the widest layer's in or out features: what one sample's
  // activations take in features.
  Fact<double> mlp_features;
  Fact<double> mlp_widest;
  Fact<Precision> precision;
  Fact<bool> training;  // an optimizer, backward() or a trainer: else inference
  Fact<Optimizer> optimizer;
  Fact<int64_t> grad_accum;
  Fact<Checkpointing> checkpointing;
  // What the code asks for, whoever reads it; reported as fused_attention (not eager) with its
  // kernel.
  Fact<Attention> attention;
  // The torch the job's Python imports ("1.13.0a0"), where the job's environment can be read
  // (JobEnvironment): before 2.0 there is no scaled_dot_product_attention. The only fact that
  // depends on who reads the job.
  Fact<std::string> torch_version;
  Fact<int> zero_stage;  // 0 none; 1, 2, 3 (FSDP full shard counts as 3)
  Fact<bool> optimizer_offload;
  // The optimizer steps each parameter as soon as its gradient is whole and frees it
  // (torchtune's optimizer_in_bwd, PyTorch's register_post_accumulate_grad_hook): the gradients
  // are never all held at once.
  Fact<bool> optimizer_in_backward;
  // A bitsandbytes paged optimizer (PagedAdamW, PagedAdamW8bit, …): its states live in CUDA
  // unified memory, which the driver moves to the host when the GPU fills, outside torch's
  // allocator.
  Fact<bool> paged_optimizer;
  // The loss never holds the fp32 logits whole: torchtune's CEWithChunkedOutputLoss upcasts one
  // of loss_chunks chunks at a time (num_output_chunks, 8 by default); 0 is a fused linear
  // cross-entropy (Liger's) that never holds the logits at all.
  Fact<int64_t> loss_chunks;
  // What the forward pass saves for backward is kept in host memory (torchtune's
  // enable_activation_offloading, torch.autograd.graph.save_on_cpu): one layer's is on the GPU.
  Fact<bool> activation_offload;
  // ZeRO-3 / FSDP parameter offload (DeepSpeed offload_param.device, accelerate's
  // offload_param_device, FSDP offload_params): the weights live in CPU memory and only those
  // gathered for the layers being computed are on the GPU, at most DeepSpeed's
  // stage3_max_live_parameters (max_live_parameters; 1e9 by default) besides the one being
  // fetched.
  Fact<bool> param_offload;
  Fact<double> max_live_parameters;
  Fact<std::string> parallelism;  // "DDP", "FSDP", "DeepSpeed", "Accelerate", "Lightning", …
  Fact<int> processes;            // processes the launcher starts, all nodes together
  Fact<int> num_workers;
  Fact<bool> compiled;
  // The learning rate, when a constant: an optimizer's or TrainingArguments' lr, else a variable
  // or argparse option named lr / learning_rate. Never undetermined (no estimate needs it); for
  // the diagnosis of a diverged run. Not in FactsJson.
  Fact<double> learning_rate;
  std::vector<Undetermined> undetermined;

  // GPUs the code spreads work over: the processes when it is written for data parallelism,
  // else 1.
  int DataParallelGpus() const;
};

inline constexpr int kMaxCodeFiles = 200;
inline constexpr int kMaxConfigFiles = 16;

// Whether the torch the job imports (`torch_version`) provides attention `a`: SDPA from torch
// 2.0, transformers' default of it from 2.1.1; eager attention and FlashAttention's own package
// with any. nullopt when the torch is unknown. *needed (if given) is the release `a` needs
// ("2.0"), empty when it needs none.
std::optional<bool> TorchProvides(const CodeFacts& f, Attention a, std::string* needed = nullptr);

// Whether the job's attention keeps no s² scores: the code asks for fused attention (`attention`)
// and the torch the job imports provides it (TorchProvides; with the torch unknown, as the code
// asks). When it is the torch that leaves attention eager, *why (if given) says so.
bool AttentionFused(const CodeFacts& f, std::string* why = nullptr);

// `code_dir` is the folder the job's code is in (the script's folder by default);
// `script_name` is how to name the script in source lines. Where `env` can be read (the caller
// runs as the job's user at submission), the torch the job imports is read from it
// (FindTorch): AttentionFused.
StatusOr<CodeFacts> AnalyzeJobCode(const JobScript& script, const std::string& code_dir,
                                   const std::string& script_name, const JobEnvironment& env = {});

}  // namespace rightsize::code

// The analytical GPU-memory model: from the facts read in a job's code (code/analysis.h) to
// the peak memory one GPU will hold, as a p10/p50/p90 range with a breakdown.
//
//   model states  weights + gradients + optimizer states, in bytes per parameter by precision
//                 and optimizer (fp32 Adam 4 + 4 + 8; autocast over fp32 weights Adam
//                 4 + 2 (16-bit cast copies) + 4 + 8 = 18; DeepSpeed/FSDP mixed precision
//                 2 + 2 + 12 = 16; SGD with momentum 12, plain SGD 8; inference only the
//                 weights, + the 16-bit copies under autocast), divided by
//                 the data-parallel GPUs per ZeRO stage (1: optimizer states, 2: + gradients,
//                 3 or FSDP full shard: + weights) (Rajbhandari et al. 2020);
//   activations   transformers per layer (Korthikanti et al. 2022): s·b·h·(34 + 5·a·s/h)
//                 bytes with 16-bit activations, 34·s·b·h with fused attention (SDPA/Flash) or
//                 selective recomputation, 2·s·b·h with full checkpointing (under autocast
//                 over fp32 weights the LayerNorm inputs are fp32: +2·s·b·h each); logits
//                 b·s·V·4·2 (+ b·s·V·2, the head's 16-bit output, under autocast);
//                 CNNs from a per-model table of bytes per 224² image, scaled by area;
//                 hand-built MLPs b·Σout·(2·bytes + 1) in training, b·2·widest·bytes in
//                 inference;
//   frozen bases  LoRA: the frozen weights in their load dtype, fp32 adapters with their
//                 gradients and optimizer states only; QLoRA: 4-bit (8-bit) Linear weights with
//                 their quantisation constants, the rest 16-bit (fp32 once prepared for k-bit
//                 training), one layer's dequantised weights, the adapters' dropout inputs;
//   generation    the KV cache 2·L·kv_heads·head_dim·(prompt + new tokens)·b·2 B;
//   overheads     the CUDA context (~500 MiB per process) and the caching allocator's
//                 fragmentation (+10% at p50, +25% at p90).
// docs/code-analysis.md derives each term. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "code/analysis.h"
#include "core/status.h"

namespace rightsize::code {

struct MemoryTerm {
  std::string name;               // "weights", "gradients", "optimizer states", "activations", …
  double bytes = 0;               // this term's share of p50, per GPU
  std::string formula;            // "354.8M params × 2 B (fp16 copy) = 0.71 GB"
  std::vector<SourceLine> lines;  // the source lines whose facts drove it
};

// Which quantity the range is: what the driver reports for the process (nvidia-smi, NVML),
// i.e. the caching allocator's reserved memory plus the CUDA context. Published figures differ:
// torch.cuda.max_memory_allocated (the tensors), max_memory_reserved (+ the allocator's cache),
// or nvidia-smi (+ the context); allocated_bytes and reserved_bytes give the first two at p50.
inline constexpr std::string_view kEstimateQuantity =
    "driver-reported: reserved by the caching allocator + CUDA context";

struct MemoryEstimate {
  double p10_bytes = 0, p50_bytes = 0, p90_bytes = 0;  // peak per GPU (kEstimateQuantity)
  double allocated_bytes = 0;            // p50 of the tensors alone (max_memory_allocated)
  double reserved_bytes = 0;             // p50 with the allocator's overhead (max_memory_reserved)
  int data_parallel_gpus = 1;            // the GPUs the model states are divided over
  std::vector<MemoryTerm> terms;         // they sum to p50
  double bytes_per_sample = 0;           // activation bytes one more sample of the batch adds (p50)
  std::vector<std::string> assumptions;  // defaults filled in, which widen the range
};

inline constexpr double kCudaContextBytes = 500.0 * 1024 * 1024;
inline constexpr double kFragmentationP50 = 0.10;
inline constexpr double kFragmentationP90 = 0.25;

// NotFound when the facts lack what the model needs (the parameter count; the shapes and batch
// size for training), naming what is missing and why it is undetermined.
StatusOr<MemoryEstimate> EstimateGpuMemory(const CodeFacts& facts);

// "1.3 GiB": binary, as nvidia-smi and the GPU names (an "80GB" A100 has 80 GiB) count.
std::string FormatGb(double bytes);

}  // namespace rightsize::code

// Line-level advice: what to change in a job's code or request, each with the line to change
// and the size of the effect, from the facts (code/analysis.h), the memory estimate
// (code/memory_model.h), the GPU it will run on and the script's request.
//
// Rules: out of memory (a smaller batch, bf16 autocast, activation checkpointing, ZeRO/FSDP,
// 8-bit Adam, each priced by re-running the memory model); a GPU mostly idle (a larger batch or
// a smaller GPU); GPUs requested but not used by the code; data-loader workers against the
// cores; what could not be determined. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "code/analysis.h"
#include "code/memory_model.h"
#include "jobscript/job_script.h"

namespace rightsize::code {

struct GpuSpec {
  std::string_view name;  // "H100-80GB"
  double memory_bytes;    // what the driver reports as total (nvidia-smi), in bytes
};

// By name or SLURM gres type, case-insensitive: "H100-80GB", "h100", "a100_80gb", "v100s",
// "rtx4090". A bare "a100" or "v100" is the larger model. nullopt when unknown.
std::optional<GpuSpec> FindGpu(std::string_view name);
const std::vector<GpuSpec>& KnownGpus();  // ascending memory
inline constexpr std::string_view kDefaultGpu = "H100-80GB";

struct Advice {
  std::string kind;  // "out_of_memory", "memory_headroom", "unused_gpus", "workers", "undetermined"
  SourceLine where;  // the line to change
  std::string message;  // "train.py:42 batch_size=256 needs ≈ 95 GB on one 80 GB GPU: use 128, …"
  double effect_bytes = 0;  // GPU memory per GPU saved (> 0) by the first remedy
  double effect_gpus = 0;   // GPUs freed
  double effect_cores = 0;  // cores freed (< 0: more cores needed)
};

std::vector<Advice> Advise(const CodeFacts& facts, const MemoryEstimate& estimate,
                           const GpuSpec& gpu, const JobScript& script);

}  // namespace rightsize::code

#include "code/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace rightsize::code {
namespace {

std::string Normalize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

constexpr double kMiB = 1024.0 * 1024.0;

// p50 of the facts changed by `change`; nullopt when the model cannot say.
template <typename F>
std::optional<double> WhatIf(const CodeFacts& facts, F change) {
  CodeFacts copy = facts;
  change(copy);
  auto e = EstimateGpuMemory(copy);
  if (!e.ok()) return std::nullopt;
  return e->p50_bytes;
}

// The largest batch whose p50 fits `limit` bytes, searched over the model itself.
int64_t LargestBatch(const CodeFacts& facts, double limit, int64_t hi) {
  int64_t best = 0;
  for (int64_t b = 1; b <= hi; b *= 2) {
    auto p = WhatIf(facts, [b](CodeFacts& c) { c.batch_size.value = b; });
    if (!p || *p > limit) break;
    best = b;
  }
  return best;
}

std::string Place(const SourceLine& l, const SourceLine& fallback) {
  const SourceLine& use = l.line > 0 ? l : fallback;
  return use.ToString();
}

}  // namespace

const std::vector<GpuSpec>& KnownGpus() {
  static const std::vector<GpuSpec> kGpus = {
      {"T4-16GB", 15360 * kMiB},        {"V100-16GB", 16384 * kMiB},
      {"A10-24GB", 23028 * kMiB},       {"L4-24GB", 23034 * kMiB},
      {"RTX-3090-24GB", 24576 * kMiB},  {"RTX-4090-24GB", 24564 * kMiB},
      {"V100-32GB", 32768 * kMiB},      {"A100-40GB", 40960 * kMiB},
      {"L40S-48GB", 46068 * kMiB},      {"A40-48GB", 46068 * kMiB},
      {"RTX-A6000-48GB", 49140 * kMiB}, {"H100-80GB", 81559 * kMiB},
      {"A100-80GB", 81920 * kMiB},      {"H200-141GB", 143771 * kMiB},
  };
  return kGpus;
}

std::optional<GpuSpec> FindGpu(std::string_view name) {
  std::string want = Normalize(name);
  if (want.empty()) return std::nullopt;
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"a100", "a10080gb"},       {"v100", "v10032gb"},
      {"v100s", "v10032gb"},      {"h100", "h10080gb"},
      {"h200", "h200141gb"},      {"l40s", "l40s48gb"},
      {"a10", "a1024gb"},         {"t4", "t416gb"},
      {"l4", "l424gb"},           {"a40", "a4048gb"},
      {"rtx4090", "rtx409024gb"}, {"rtx3090", "rtx309024gb"},
      {"a6000", "rtxa600048gb"},  {"rtxa6000", "rtxa600048gb"},
      {"a10040g", "a10040gb"},    {"a10080g", "a10080gb"},
      {"h10080g", "h10080gb"},
  };
  for (const auto& [alias, full] : kAliases) {
    if (want == alias) want = full;
  }
  for (const auto& g : KnownGpus()) {
    if (Normalize(g.name) == want) return g;
  }
  return std::nullopt;
}

namespace {

// The batch needs more than the GPU at p50: the remedies that would fit, each with its saving.
Advice OutOfMemoryAdvice(const CodeFacts& facts, const MemoryEstimate& e, const GpuSpec& gpu,
                         const JobScript& script) {
  const double cap = gpu.memory_bytes;
  const SourceLine entry{facts.entry, 0};
  bool training = facts.training.value.value_or(false);
  std::string bs_text = facts.batch_size.known()
                            ? fmt::format("batch_size={}", *facts.batch_size.value)
                            : std::string("the model");
  Advice a;
  a.kind = "out_of_memory";
  a.where = facts.batch_size.known() ? facts.batch_size.where : facts.model.where;
  std::vector<std::string> remedies;
  double first_saving = 0;
  auto remedy = [&](std::optional<double> p50, const std::string& what) {
    if (!p50 || *p50 >= e.p50_bytes * 0.98) return;
    remedies.push_back(fmt::format("{} (−{})", what, FormatGb(e.p50_bytes - *p50)));
    if (first_saving == 0) first_saving = e.p50_bytes - *p50;
  };
  if (facts.batch_size.known() && *facts.batch_size.value > 1) {
    int64_t b = LargestBatch(facts, cap * 0.95, *facts.batch_size.value - 1);
    if (b > 0) {
      int64_t accum = facts.grad_accum.value.value_or(1) * *facts.batch_size.value / b;
      remedy(WhatIf(facts, [b](CodeFacts& c) { c.batch_size.value = b; }),
             fmt::format("use {} with gradient_accumulation_steps={} for the same effective batch",
                         b, accum));
    }
  }
  Precision p = facts.precision.value.value_or(Precision::kFp32);
  if (p == Precision::kFp32) {
    remedy(WhatIf(facts, [](CodeFacts& c) { c.precision.value = Precision::kMixedBf16; }),
           "bf16 autocast");
  }
  if (training &&
      facts.checkpointing.value.value_or(Checkpointing::kNone) != Checkpointing::kFull) {
    remedy(WhatIf(facts, [](CodeFacts& c) { c.checkpointing.value = Checkpointing::kFull; }),
           "activation checkpointing");
  }
  std::string torch_eager;  // why the job's torch leaves the code's fused attention eager
  if (training && facts.architecture == Architecture::kTransformer &&
      !AttentionFused(facts, &torch_eager)) {
    // Eager because the code asks for it, or because the torch the job imports has no SDPA:
    // the remedy names what is missing (with the torch unknown, the code's attention counts
    // as the code asks).
    std::string what, needed;
    if (!torch_eager.empty()) {
      TorchProvides(facts, *facts.attention.value, &needed);
      what = fmt::format("torch {} or later for SDPA (the job imports torch {}), or FlashAttention",
                         needed, *facts.torch_version.value);
    } else if (!TorchProvides(facts, Attention::kSdpa, &needed).value_or(true)) {
      what = fmt::format(
          "SDPA (attn_implementation=\"sdpa\") with torch {} or later (the job imports torch {}), "
          "or FlashAttention",
          needed, *facts.torch_version.value);
    } else {
      what = "SDPA/FlashAttention (attn_implementation=\"sdpa\")";
    }
    remedy(WhatIf(facts,
                  [](CodeFacts& c) {
                    if (c.attention.value.value_or(Attention::kEager) == Attention::kEager) {
                      c.attention.value = Attention::kSdpa;
                    }
                    c.torch_version.value.reset();
                  }),
           what);
  }
  int gpus = std::max(e.data_parallel_gpus, script.request.gpus.value_or(1));
  if (training && gpus > 1 && facts.zero_stage.value.value_or(0) < 3) {
    remedy(WhatIf(facts,
                  [gpus](CodeFacts& c) {
                    c.zero_stage.value = 3;
                    c.parallelism.value = "FSDP";
                    c.processes.value = gpus;
                  }),
           fmt::format("FSDP/ZeRO-3 over the {} GPUs requested", gpus));
  }
  if (training && facts.optimizer.value.value_or(Optimizer::kSgd) == Optimizer::kAdam) {
    remedy(WhatIf(facts, [](CodeFacts& c) { c.optimizer.value = Optimizer::kAdam8bit; }),
           "8-bit Adam (bitsandbytes)");
  }
  a.effect_bytes = first_saving;
  a.message = fmt::format("{} {} needs ≈ {} per GPU on one {} GPU ({}){}{}", Place(a.where, entry),
                          bs_text, FormatGb(e.p50_bytes), FormatGb(cap), gpu.name,
                          remedies.empty() ? "" : ": ", fmt::join(remedies, ", or "));
  return a;
}

// The estimate against one GPU's memory: out of memory at p50, at risk at p90, or half unused.
void MemoryAdvice(const CodeFacts& facts, const MemoryEstimate& e, const GpuSpec& gpu,
                  const JobScript& script, std::vector<Advice>* out) {
  const double cap = gpu.memory_bytes;
  const SourceLine entry{facts.entry, 0};
  bool training = facts.training.value.value_or(false);
  std::string bs_text = facts.batch_size.known()
                            ? fmt::format("batch_size={}", *facts.batch_size.value)
                            : std::string("the model");
  if (e.p50_bytes > cap) {
    out->push_back(OutOfMemoryAdvice(facts, e, gpu, script));
  } else if (e.p90_bytes > cap) {
    Advice a;
    a.kind = "out_of_memory";
    a.where = facts.batch_size.known() ? facts.batch_size.where : facts.model.where;
    a.effect_bytes = e.p90_bytes - cap;
    a.message = fmt::format(
        "{} {} fits the {} of one {} at p50 ({}) but not at p90 ({}): the run may fail with "
        "CUDA out of memory; leave headroom with a smaller batch",
        Place(a.where, entry), bs_text, FormatGb(cap), gpu.name, FormatGb(e.p50_bytes),
        FormatGb(e.p90_bytes));
    out->push_back(std::move(a));
  } else if (e.p90_bytes < 0.5 * cap) {
    Advice a;
    a.kind = "memory_headroom";
    a.where = facts.batch_size.known() ? facts.batch_size.where : facts.model.where;
    a.effect_bytes = cap - e.p90_bytes;
    std::vector<std::string> options;
    if (training && facts.batch_size.known() && e.bytes_per_sample > 0) {
      int64_t b = LargestBatch(facts, cap * 0.8, *facts.batch_size.value * 64);
      if (b > *facts.batch_size.value) {
        options.push_back(fmt::format("raise {} to {} (fewer steps, same GPU)", bs_text, b));
      }
    }
    for (const auto& g : KnownGpus()) {
      if (g.memory_bytes * 0.9 >= e.p90_bytes && g.memory_bytes < cap) {
        options.push_back(fmt::format("ask for a {} instead", g.name));
        break;
      }
    }
    a.message = fmt::format("{} the job uses at most ≈ {} (p90) of the {} of one {}{}{}",
                            Place(a.where, entry), FormatGb(e.p90_bytes), FormatGb(cap), gpu.name,
                            options.empty() ? "" : ": ", fmt::join(options, ", or "));
    out->push_back(std::move(a));
  }
}

// GPUs asked for against GPUs the code uses.
void GpuCountAdvice(const CodeFacts& facts, const JobScript& script, std::vector<Advice>* out) {
  int requested = script.request.gpus.value_or(0);
  int used = facts.DataParallelGpus();
  if (requested > used) {
    Advice a;
    a.kind = "unused_gpus";
    a.where = facts.command;
    a.effect_gpus = requested - used;
    bool parallel_code = facts.parallelism.value.value_or("none") != "none";
    std::string why = parallel_code
                          ? fmt::format("the code is written for {} but {} starts {} process{}",
                                        *facts.parallelism.value, facts.launcher,
                                        facts.processes.value.value_or(1),
                                        facts.processes.value.value_or(1) == 1 ? "" : "es")
                          : std::string("no DDP/FSDP/DeepSpeed/Accelerate found");
    a.message = fmt::format(
        "{} you request {} GPUs but the code uses {} ({}): ask for --gres=gpu:{}, or launch "
        "with torchrun --nproc_per_node={} and wrap the model in DDP",
        a.where.ToString(), requested, used, why, used, requested);
    out->push_back(std::move(a));
  } else if (requested > 0 && facts.processes.value.value_or(1) > requested) {
    Advice a;
    a.kind = "unused_gpus";
    a.where = facts.processes.where.empty() ? facts.command : facts.processes.where;
    a.effect_gpus = requested - facts.processes.value.value_or(1);
    a.message = fmt::format(
        "{} the launcher starts {} processes but the job has {} GPUs: processes will share GPUs "
        "(or fail); ask for --gres=gpu:{}",
        a.where.ToString(), *facts.processes.value, requested, *facts.processes.value);
    out->push_back(std::move(a));
  }
}

// Data-loader workers against the cores.
void WorkerAdvice(const CodeFacts& facts, const JobScript& script, std::vector<Advice>* out) {
  bool training = facts.training.value.value_or(false);
  if (facts.num_workers.known()) {
    int processes_per_node = std::max(
        1, facts.processes.value.value_or(1) / std::max(1, script.request.nodes.value_or(1)));
    int cores = script.cpus_per_task
                    ? *script.cpus_per_task
                    : script.request.cpus.value_or(1) /
                          std::max(1, script.request.nodes.value_or(1)) / processes_per_node;
    cores = std::max(1, cores);
    int workers = *facts.num_workers.value;
    std::string cpus_flag = script.cpus_per_task
                                ? fmt::format("--cpus-per-task={}", *script.cpus_per_task)
                                : fmt::format("{} cores per process", cores);
    if (workers > cores) {
      Advice a;
      a.kind = "workers";
      a.where = facts.num_workers.where;
      a.effect_cores = cores - workers;
      a.message = fmt::format(
          "{} num_workers={} with {}: {} loader processes per training process compete for {} "
          "cores; use num_workers={} or ask for --cpus-per-task={}",
          a.where.ToString(), workers, cpus_flag, workers, cores, std::max(1, cores - 1),
          workers + 1);
      out->push_back(std::move(a));
    } else if (workers == 0 && cores >= 4 && training) {
      Advice a;
      a.kind = "workers";
      a.where = facts.num_workers.where;
      a.message = fmt::format(
          "{} num_workers=0 with {}: data loading runs inside the training loop and the GPU "
          "waits for it; use num_workers={}",
          a.where.ToString(), cpus_flag, std::min(8, cores - 1));
      out->push_back(std::move(a));
    }
  }
}

}  // namespace

std::vector<Advice> Advise(const CodeFacts& facts, const MemoryEstimate& e, const GpuSpec& gpu,
                           const JobScript& script) {
  std::vector<Advice> out;
  MemoryAdvice(facts, e, gpu, script, &out);
  GpuCountAdvice(facts, script, &out);
  WorkerAdvice(facts, script, &out);
  for (const auto& u : facts.undetermined) {
    Advice a;
    a.kind = "undetermined";
    a.where = u.where;
    a.message = fmt::format("{} {} undetermined: {}", u.where.ToString(), u.what, u.reason);
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace rightsize::code

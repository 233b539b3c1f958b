#include "predict/code_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "code/report.h"
#include "core/units.h"

namespace rightsize {

std::string DefaultCodeDir(const std::string& script_path) {
  std::filesystem::path dir = std::filesystem::path(script_path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

namespace {

// The GPU memory document of JobCodeReading for facts already read.
std::optional<nlohmann::json> GpuMemoryOf(const code::CodeFacts& facts) {
  auto e = code::EstimateGpuMemory(facts);
  if (!e.ok()) return std::nullopt;
  // The target is per job: every GPU the code uses holds the per-GPU peak.
  double gpus = e->data_parallel_gpus;
  std::vector<std::string> lines;
  std::string text = fmt::format("GPU memory from the code ({} per GPU × {} GPU{}):\n",
                                 code::FormatGb(e->p50_bytes), gpus, gpus == 1 ? "" : "s");
  for (const auto& t : e->terms) {
    if (t.lines.empty()) continue;
    std::vector<std::string> where;
    for (const auto& l : t.lines) {
      where.push_back(l.ToString());
      if (std::find(lines.begin(), lines.end(), l.ToString()) == lines.end()) {
        lines.push_back(l.ToString());
      }
    }
    text += fmt::format("  {:<18} {:>9}  from {}\n", t.name, code::FormatGb(t.bytes),
                        fmt::join(where, ", "));
  }
  return nlohmann::json{{"p10", e->p10_bytes * gpus},
                        {"p50", e->p50_bytes * gpus},
                        {"p90", e->p90_bytes * gpus},
                        {"per_gpu", code::EstimateJson(*e)},
                        {"gpus", gpus},
                        {"lines", lines},
                        {"text", text}};
}

// The stored form of facts read from `dir` (see ReadJobCode).
StoredJobCode StoredCodeOf(const code::CodeFacts& facts, const std::string& dir) {
  StoredJobCode out;
  out.program = facts.entry;
  out.facts = code::FactsJson(facts).dump();
  if (auto e = code::EstimateGpuMemory(facts); e.ok()) out.estimate = code::EstimateJson(*e).dump();
  // FNV-1a over each file's name and contents, in the order the analysis read them.
  uint64_t h = 14695981039346656037ULL;
  auto add = [&h](const std::string& bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;  // a separator no file name or text ends ambiguously at
    h *= 1099511628211ULL;
  };
  std::vector<std::string> files = facts.files;
  if (std::find(files.begin(), files.end(), facts.entry) == files.end()) {
    files.insert(files.begin(), facts.entry);
  }
  for (const auto& f : files) {
    std::ifstream in(std::filesystem::path(dir) / f, std::ios::binary);
    add(f);
    add(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  out.code_hash = fmt::format("{:016x}", h);
  return out;
}

StatusOr<code::CodeFacts> Analyze(const JobScript& script, const std::string& script_path,
                                  const std::string& dir, const code::JobEnvironment& env) {
  return code::AnalyzeJobCode(script, dir, std::filesystem::path(script_path).filename().string(),
                              env);
}

}  // namespace

StatusOr<StoredJobCode> ReadJobCode(const JobScript& script, const std::string& script_path,
                                    const std::string& code_dir, const code::JobEnvironment& env) {
  std::string dir = code_dir.empty() ? DefaultCodeDir(script_path) : code_dir;
  RS_ASSIGN_OR_RETURN(code::CodeFacts facts, Analyze(script, script_path, dir, env));
  return StoredCodeOf(facts, dir);
}

JobCodeReading ReadCode(const JobScript& script, const std::string& script_path,
                        const std::string& code_dir, const code::JobEnvironment& env) {
  std::string dir = code_dir.empty() ? DefaultCodeDir(script_path) : code_dir;
  JobCodeReading out;
  auto facts = Analyze(script, script_path, dir, env);
  if (!facts.ok()) {
    out.stored = facts.status();
    return out;
  }
  out.gpu_memory = GpuMemoryOf(*facts);
  out.stored = StoredCodeOf(*facts, dir);
  return out;
}

StatusOr<CodeAdvice> AdviseJobCode(const JobScript& script, const std::string& script_path,
                                   const std::string& code_dir, const std::string& gpu,
                                   const code::JobEnvironment& env) {
  CodeAdvice out;
  out.code_dir = code_dir.empty() ? DefaultCodeDir(script_path) : code_dir;
  std::string gpu_name = gpu;
  out.gpu_from = "--gpu";
  if (gpu_name.empty() && !script.request.gpu_type.empty()) {
    gpu_name = script.request.gpu_type;
    out.gpu_from = "the script's --gres";
  }
  if (gpu_name.empty()) {
    gpu_name = std::string(code::kDefaultGpu);
    out.gpu_from = "default";
  }
  auto spec = code::FindGpu(gpu_name);
  if (!spec) {
    if (!gpu.empty()) {
      std::vector<std::string_view> names;
      for (const auto& g : code::KnownGpus()) names.push_back(g.name);
      return Status::InvalidArgument(
          fmt::format("--gpu: unknown GPU {} (known: {})", Quote(gpu), fmt::join(names, ", ")));
    }
    spec = code::FindGpu(code::kDefaultGpu);
    out.gpu_from = fmt::format("default; the script's GPU type {} is not in the table", gpu_name);
  }
  out.gpu = *spec;
  RS_ASSIGN_OR_RETURN(
      out.facts, code::AnalyzeJobCode(script, out.code_dir,
                                      std::filesystem::path(script_path).filename().string(), env));
  out.estimate = code::EstimateGpuMemory(out.facts);
  if (out.estimate.ok()) out.advice = code::Advise(out.facts, *out.estimate, out.gpu, script);
  return out;
}

nlohmann::json AdviseJson(const CodeAdvice& advice, const std::string& script) {
  const auto& estimate = advice.estimate;
  return {{"schema", "rightsize.advise/v1"},
          {"script", script},
          {"code_dir", advice.code_dir},
          {"gpu",
           {{"name", advice.gpu.name},
            {"memory_bytes", advice.gpu.memory_bytes},
            {"from", advice.gpu_from}}},
          {"code", code::FactsJson(advice.facts)},
          {"gpu_memory", estimate.ok() ? code::EstimateJson(*estimate) : nlohmann::json(nullptr)},
          {"gpu_memory_undetermined",
           estimate.ok() ? nlohmann::json(nullptr) : nlohmann::json(estimate.status().message())},
          {"advice", code::AdviceJson(advice.advice)}};
}

}  // namespace rightsize

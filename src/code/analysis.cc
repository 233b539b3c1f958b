#include "code/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "code/analyzer.h"

namespace rightsize::code {

namespace fs = std::filesystem;

std::string SourceLine::ToString() const {
  return line > 0 ? fmt::format("{}:{}", file, line) : file;
}

std::string_view NameOf(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kMixedFp16:
      return "fp16 autocast (mixed)";
    case Precision::kMixedBf16:
      return "bf16 autocast (mixed)";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8 (bitsandbytes)";
    case Precision::kInt4:
      return "4-bit (bitsandbytes)";
  }
  return "?";
}

std::string_view NameOf(Optimizer o) {
  switch (o) {
    case Optimizer::kAdam:
      return "Adam/AdamW";
    case Optimizer::kAdam8bit:
      return "8-bit Adam";
    case Optimizer::kSgd:
      return "SGD";
    case Optimizer::kSgdMomentum:
      return "SGD with momentum";
    case Optimizer::kAdafactor:
      return "Adafactor";
  }
  return "?";
}

std::string_view NameOf(Checkpointing c) {
  switch (c) {
    case Checkpointing::kNone:
      return "none";
    case Checkpointing::kSelective:
      return "selective";
    case Checkpointing::kFull:
      return "full";
  }
  return "?";
}

std::string_view NameOf(Architecture a) {
  switch (a) {
    case Architecture::kUnknown:
      return "unknown";
    case Architecture::kTransformer:
      return "transformer";
    case Architecture::kVit:
      return "vision transformer";
    case Architecture::kCnn:
      return "CNN";
    case Architecture::kMlp:
      return "MLP";
  }
  return "?";
}

std::string_view NameOf(Attention a) {
  switch (a) {
    case Attention::kEager:
      return "eager";
    case Attention::kSdpa:
      return "sdpa";
    case Attention::kSdpaDefault:
      return "sdpa-default";  // transformers' default, from torch 2.1.1
    case Attention::kFlashAttention:
      return "flash-attention";
  }
  return "?";
}

std::optional<bool> TorchProvides(const CodeFacts& f, Attention a, std::string* needed) {
  struct Release {
    int major, minor, patch;
    const char* name;
  };
  std::optional<Release> need;
  if (a == Attention::kSdpa) need = Release{2, 0, 0, "2.0"};
  // transformers picks SDPA by default only from torch 2.1.1 (is_torch_sdpa_available).
  if (a == Attention::kSdpaDefault) need = Release{2, 1, 1, "2.1.1"};
  if (needed != nullptr) *needed = need ? need->name : "";
  if (!f.torch_version.known()) return std::nullopt;
  if (!need) return true;
  return VersionAtLeast(*f.torch_version.value, need->major, need->minor, need->patch);
}

bool AttentionFused(const CodeFacts& f, std::string* why) {
  if (!f.attention.known() || *f.attention.value == Attention::kEager) return false;
  std::string needed;
  if (TorchProvides(f, *f.attention.value, &needed).value_or(true)) return true;
  if (why != nullptr) {
    *why = fmt::format(
        "attention keeps its s² scores: the job imports torch {} ({}), which has no {} (torch "
        "{}), asked for at {} ({})",
        *f.torch_version.value, f.torch_version.where.ToString(),
        *f.attention.value == Attention::kSdpaDefault ? "SDPA default in transformers"
                                                      : "scaled_dot_product_attention",
        needed, f.attention.where.ToString(), f.attention.how);
  }
  return false;
}

int CodeFacts::DataParallelGpus() const {
  if (!parallelism.known() || *parallelism.value == "none") return 1;
  return std::max(1, processes.value.value_or(1));
}

namespace internal {

void Analyzer::Extract() {
  ExtractFrameworks();
  ExtractConfigs();
  for (const auto& c : calls_) {
    std::string condition;
    Reach reach = ReachOf(c, &condition);
    if (reach == Reach::kDead) continue;
    branch_condition_ = reach == Reach::kConditional ? condition : "";
    ExtractCall(c);
  }
  branch_condition_.clear();
  ResolveVocabulary();
  LoadConfigs();  // configs named by calls (deepspeed=…) found during the pass
  ExtractConfigs();
  ResolveAdapters();
  ResolveCastAfterMove();
  ExtractFallbacks();
  for (auto& [what, u] : pending_) facts_.undetermined.push_back(std::move(u));
}

StatusOr<CodeFacts> Analyzer::Run(const JobScript& script) {
  if (const JobScript::Command* tune = TorchtuneCommand(script)) {
    RS_RETURN_IF_ERROR(ReadTorchtune(script, *tune));
    return std::move(facts_);
  }
  RS_RETURN_IF_ERROR(FindEntry(script));
  ApplyCommandLine();
  LoadConfigs();
  Extract();
  return std::move(facts_);
}

}  // namespace internal

namespace {

// The torch the job imports (AttentionFused says what it means for attention).
void ReadTorchVersion(const JobScript& script, const std::string& code_dir,
                      const JobEnvironment& env, CodeFacts* facts) {
  if (facts->command_index < 0 ||
      facts->command_index >= static_cast<int>(script.commands.size())) {
    return;
  }
  const JobScript::Command& cmd = script.commands[static_cast<size_t>(facts->command_index)];
  auto torch = FindTorch(script, cmd, code_dir, env, nullptr);
  if (!torch) return;
  SourceLine where{torch->file, torch->line};
  facts->torch_version = {torch->version, where,
                          fmt::format("imported by {} ({})", torch->interpreter, torch->found_as),
                          false, internal::kRankLauncher};
}

}  // namespace

StatusOr<CodeFacts> AnalyzeJobCode(const JobScript& script, const std::string& code_dir,
                                   const std::string& script_name, const JobEnvironment& env) {
  std::error_code ec;
  if (!fs::is_directory(code_dir, ec)) {
    return Status::NotFound(fmt::format("code folder {} does not exist", code_dir));
  }
  internal::Analyzer analyzer(code_dir, script_name);
  RS_ASSIGN_OR_RETURN(CodeFacts facts, analyzer.Run(script));
  if (env.Readable()) ReadTorchVersion(script, code_dir, env, &facts);
  return facts;
}

}  // namespace rightsize::code

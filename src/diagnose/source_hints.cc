#include "diagnose/source_hints.h"

#include <re2/re2.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace rightsize {
namespace {

namespace fs = std::filesystem;

struct HintPattern {
  SourceHint::Kind kind;
  const char* pattern;  // group 1, when present, is the value
};

// Assignments (`batch_size = 64`), keyword arguments (`batch_size=64`), dict entries
// (`"batch_size": 64`), argparse defaults and command-line flags (`--batch-size 64`).
const HintPattern kHintPatterns[] = {
    {SourceHint::Kind::kBatchSize,
     R"re(\b(?:per_device_train_batch_size|train_batch_size|micro_batch_size|batch_size|batchsize|bs)['"]?\s*[:=]\s*(\d+)\b)re"},
    {SourceHint::Kind::kBatchSize,
     R"re(--(?:per[-_]device[-_]train[-_])?batch[-_]size['"]?.*?default\s*=\s*(\d+))re"},
    {SourceHint::Kind::kBatchSize,
     R"re(--(?:per[-_]device[-_]train[-_])?batch[-_]size[= ](\d+))re"},
    {SourceHint::Kind::kNumWorkers, R"re(\bnum_workers['"]?\s*[:=]\s*(\d+)\b)re"},
    {SourceHint::Kind::kNumWorkers, R"re(--(?:num[-_])?workers['"]?.*?default\s*=\s*(\d+))re"},
    {SourceHint::Kind::kNumWorkers, R"re(--(?:num[-_])?workers[= ](\d+))re"},
    {SourceHint::Kind::kPrecision,
     R"re(\b(?:precision|mixed_precision|dtype|torch_dtype)['"]?\s*[:=]\s*['"]?(?:torch\.)?([\w-]+))re"},
    {SourceHint::Kind::kPrecision,
     R"re(\b(autocast|GradScaler|--bf16|--fp16|bfloat16|float16)\b)re"},
    {SourceHint::Kind::kCheckpointing,
     R"re(\b(gradient_checkpointing(?:_enable)?|torch\.utils\.checkpoint|checkpoint_sequential|activation_checkpointing)\b)re"},
    {SourceHint::Kind::kLearningRate,
     R"re(\b(?:lr|learning_rate)['"]?\s*[:=]\s*([0-9][0-9.]*(?:[eE]-?[0-9]+)?)\b)re"},
};

const std::vector<std::unique_ptr<RE2>>& CompiledHints() {
  static const auto* compiled = [] {
    auto* v = new std::vector<std::unique_ptr<RE2>>();
    for (const auto& p : kHintPatterns) v->push_back(std::make_unique<RE2>(p.pattern));
    return v;
  }();
  return *compiled;
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

bool SkippedDir(const fs::path& p) {
  std::string name = p.filename().string();
  return name.empty() || name[0] == '.' || name == "__pycache__" || name == "site-packages" ||
         name == "node_modules" || name == "venv" || name == "env" || fs::exists(p / "pyvenv.cfg");
}

}  // namespace

std::vector<SourceHint> ScanSourceFile(const std::string& path, const std::string& shown_name) {
  std::vector<SourceHint> hints;
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec || size > kMaxHintFileBytes) return hints;
  std::ifstream in(path);
  if (!in) return hints;
  const auto& res = CompiledHints();
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string_view code = line;
    size_t hash = code.find('#');
    // Comments do not set anything (a "#SBATCH" line is not code either).
    if (hash != std::string_view::npos) code = code.substr(0, hash);
    if (code.find_first_not_of(" \t") == std::string_view::npos) continue;
    for (size_t i = 0; i < res.size(); ++i) {
      std::string value;
      if (!RE2::PartialMatch(code, *res[i], &value)) continue;
      hints.push_back({kHintPatterns[i].kind, shown_name, number, Trim(line), value});
      break;
    }
  }
  return hints;
}

std::vector<SourceHint> ScanSourceDir(const std::string& dir) {
  std::vector<SourceHint> hints;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) return ScanSourceFile(dir, fs::path(dir).filename());
  int files = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (it->is_directory(ec)) {
      if (SkippedDir(p)) it.disable_recursion_pending();
      continue;
    }
    if (p.extension() != ".py" || ++files > kMaxHintFiles) continue;
    auto found = ScanSourceFile(p.string(), fs::relative(p, dir, ec).string());
    hints.insert(hints.end(), found.begin(), found.end());
  }
  return hints;
}

std::optional<std::string> ReadSourceLine(const std::string& path, int line) {
  std::ifstream in(path);
  if (!in || line < 1) return std::nullopt;
  std::string text;
  for (int i = 0; i < line; ++i) {
    if (!std::getline(in, text)) return std::nullopt;
  }
  return Trim(text);
}

std::string FindSourceFile(const std::string& dir, const std::string& traceback_path) {
  if (dir.empty() || traceback_path.empty()) return "";
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {
    return fs::path(dir).filename() == fs::path(traceback_path).filename() ? dir : "";
  }
  // Try the shortest suffix first ("train.py"), then longer ones win when they also exist.
  fs::path want(traceback_path);
  std::vector<std::string> parts;
  for (const auto& part : want) {
    if (part != "/") parts.push_back(part.string());
  }
  std::string best;
  std::string suffix;
  for (size_t k = parts.size(); k-- > 0;) {
    suffix = suffix.empty() ? parts[k] : parts[k] + "/" + suffix;
    fs::path candidate = fs::path(dir) / suffix;
    if (fs::is_regular_file(candidate, ec)) best = candidate.lexically_normal().string();
  }
  return best;
}

}  // namespace rightsize

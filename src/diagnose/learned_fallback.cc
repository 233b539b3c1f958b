#include "diagnose/learned_fallback.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "model/booster.h"

namespace rightsize {
namespace {

// Hashed feature space: 2^15 columns. XGBoost's tree builders visit every column at every
// node, so training time grows with it; 2^18 trained 8x slower for the same CV figure.
constexpr unsigned kFeatureBits = 15;
constexpr size_t kColumns = size_t{1} << kFeatureBits;
constexpr size_t kMaxWordsPerLine = 64;

bool IsWordChar(unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }

bool AllDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A word as the model sees it: numbers longer than three digits, hexadecimal values and ids
// reduced to their shape; short numbers (exit codes, signals, CUDA error codes) kept.
std::string NormaliseWord(std::string_view w) {
  if (AllDigits(w)) return w.size() <= 3 ? std::string(w) : "<num>";
  if (w.size() > 2 && w[0] == '0' && w[1] == 'x') return "<hex>";
  bool hex = w.size() >= 6, digit = false;
  for (unsigned char c : w) {
    if (std::isdigit(c) != 0) {
      digit = true;
    } else if (c < 'a' || c > 'f') {
      hex = false;
    }
  }
  if (hex && digit) return "<hex>";
  std::string out;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(w[i])) != 0) {
      if (out.empty() || out.back() != '0') out += '0';
    } else {
      out += w[i];
    }
  }
  return out;
}

}  // namespace

bool IsRoutineLine(std::string_view text) {
  static const RE2 re(
      R"re(INFO\b|\.py:\d+: \w*Warning: |(?:^|[\s:])I\d{4} \d\d:\d\d:\d\d|\d%\||\d/\d+ \[\d|\d(?:it/s|s/it)\b|(?:\b\w+[=:] ?[-+]?\d[\d.e+-]*[,;|\s]+){2,}|\bFailedScheduling\b|\b\d+/\d+ nodes are available\b)re");
  return RE2::PartialMatch(text, re);
}

bool IsSubmissionRefused(std::string_view text) {
  static const RE2 re(
      R"re((?i)\bBatch job submission failed\b|\bUnable to allocate resources\b|\bJob submit/allocate failed\b|\bqsub: (?:Job rejected|Job exceeds|would exceed|submit error|Unknown queue|Illegal attribute)|\bJob not submitted\b|\bUnable to run job: |\bJob violates accounting/QOS policy\b|\bjob submission (?:failed|rejected|refused)\b)re");
  return RE2::PartialMatch(text, re);
}

std::vector<FallbackLine> FallbackLines(const std::vector<LogScan>& scans) {
  std::vector<FallbackLine> out;
  for (const LogScan& scan : scans) {
    std::map<int64_t, std::string_view> lines;
    for (const SignatureHit& h : scan.hits) lines.emplace(h.line, h.text);
    for (const auto& [n, text] : scan.tail) lines.emplace(n, text);
    for (const auto& [n, text] : lines) out.push_back({scan.file, n, std::string(text)});
  }
  return out;
}

std::vector<std::string> FallbackTerms(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size() && words.size() < kMaxWordsPerLine) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) != 0) ++i;
    size_t end = i;
    while (end < line.size() && std::isspace(static_cast<unsigned char>(line[end])) == 0) ++end;
    std::string_view chunk = line.substr(i, end - i);
    i = end;
    // A path is its base name: the folders are the user's, the file name is the library's.
    size_t slash = chunk.find_last_of('/');
    if (slash != std::string_view::npos && chunk.size() > 1 &&
        std::count(chunk.begin(), chunk.end(), '/') >= 2) {
      words.emplace_back("<path>");
      chunk = chunk.substr(slash + 1);
    }
    std::string lower;
    for (char c : chunk) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t k = 0;
    while (k < lower.size() && words.size() < kMaxWordsPerLine) {
      while (k < lower.size() && !IsWordChar(static_cast<unsigned char>(lower[k]))) ++k;
      size_t e = k;
      while (e < lower.size() && IsWordChar(static_cast<unsigned char>(lower[e]))) ++e;
      if (e > k) words.push_back(NormaliseWord(std::string_view(lower).substr(k, e - k)));
      k = e;
    }
  }
  std::vector<std::string> terms = words;
  for (size_t w = 1; w < words.size(); ++w) terms.push_back(words[w - 1] + " " + words[w]);
  return terms;
}

unsigned FallbackColumn(std::string_view term) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : term) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return static_cast<unsigned>(h & (kColumns - 1));
}

void AppendFallbackRow(const std::vector<FallbackLine>& lines, SparseRows* rows) {
  std::set<unsigned> columns;
  for (const FallbackLine& l : lines) {
    for (const std::string& t : FallbackTerms(l.text)) columns.insert(FallbackColumn(t));
  }
  rows->cols = kColumns;
  for (unsigned c : columns) {
    rows->indices.push_back(c);
    rows->values.push_back(1.0f);
  }
  rows->indptr.push_back(rows->indices.size());
}

LearnedFallback::LearnedFallback() = default;
LearnedFallback::~LearnedFallback() noexcept = default;
LearnedFallback::LearnedFallback(LearnedFallback&&) noexcept = default;
LearnedFallback& LearnedFallback::operator=(LearnedFallback&&) noexcept = default;

StatusOr<LearnedFallback> LearnedFallback::Load(std::string_view model_bytes) {
  if (model_bytes.empty()) return Status::NotFound("the learned fallback has no model");
  RS_ASSIGN_OR_RETURN(Booster b, Booster::Deserialize(model_bytes, 1));
  LearnedFallback f;
  f.booster_ = std::make_unique<Booster>(std::move(b));
  // A model of the wrong shape would misread every class: check it answers kFailureClassCount.
  SparseRows empty;
  empty.cols = kColumns;
  empty.indptr.push_back(0);
  std::vector<float> p;
  RS_RETURN_IF_ERROR(f.booster_->PredictSparse(empty, &p));
  if (p.size() != static_cast<size_t>(kFailureClassCount)) {
    return Status::InvalidArgument(fmt::format(
        "the learned fallback's model has {} classes, not {}", p.size(), kFailureClassCount));
  }
  return f;
}

StatusOr<const LearnedFallback*> LearnedFallback::Embedded() {
  static const StatusOr<LearnedFallback>* const kModel =
      new StatusOr<LearnedFallback>(Load(EmbeddedFallbackModel()));
  if (!kModel->ok()) return kModel->status();
  return &**kModel;
}

StatusOr<std::vector<float>> LearnedFallback::Probabilities(
    const std::vector<FallbackLine>& lines) const {
  SparseRows row;
  AppendFallbackRow(lines, &row);
  std::vector<float> p;
  RS_RETURN_IF_ERROR(booster_->PredictSparse(row, &p));
  return p;
}

StatusOr<LearnedMatch> LearnedFallback::Classify(const std::vector<FallbackLine>& lines,
                                                 bool explain) const {
  SparseRows row;
  AppendFallbackRow(lines, &row);
  std::vector<float> p;
  RS_RETURN_IF_ERROR(booster_->PredictSparse(row, &p));
  LearnedMatch m;
  if (p.size() != static_cast<size_t>(kFailureClassCount)) {
    return Status::Internal("the learned fallback answered the wrong number of classes");
  }
  size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  m.cls = static_cast<FailureClass>(best);
  m.probability = p[best];
  if (!explain || m.cls == FailureClass::kUnknown) return m;

  // SHAP contributions of each column to the chosen class: rows × classes × (cols + 1).
  std::vector<float> contrib;
  RS_RETURN_IF_ERROR(booster_->PredictSparse(row, &contrib, true));
  if (contrib.size() != kFailureClassCount * (kColumns + 1)) return m;
  const float* weight = contrib.data() + best * (kColumns + 1);
  std::unordered_map<unsigned, std::string> term_of;
  double best_line = 0;
  for (const FallbackLine& l : lines) {
    std::set<unsigned> seen;
    double sum = 0;
    for (const std::string& t : FallbackTerms(l.text)) {
      unsigned c = FallbackColumn(t);
      term_of.emplace(c, t);
      if (seen.insert(c).second) sum += weight[c];
    }
    // A learned match rests on a line that reports something: when only progress and INFO
    // lines weigh for the class, the model is reading a healthy log's noise.
    if (sum > best_line && !IsRoutineLine(l.text)) {
      best_line = sum;
      m.cited = l;
    }
  }
  std::vector<std::pair<float, unsigned>> ranked;
  for (const auto& [c, t] : term_of) {
    if (weight[c] > 0) ranked.emplace_back(weight[c], c);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t k = 0; k < ranked.size() && k < 6; ++k) m.terms.push_back(term_of[ranked[k].second]);
  return m;
}

StatusOr<std::string> TrainLearnedFallback(const SparseRows& rows, const std::vector<int>& labels,
                                           const LearnedTrainParams& params) {
  std::vector<float> y(labels.begin(), labels.end());
  BoosterParams p;
  p.rounds = params.rounds;
  p.max_depth = params.max_depth;
  p.eta = params.eta;
  p.min_child_weight = params.min_child_weight;
  p.subsample = 1.0;
  p.colsample_bytree = params.colsample_bytree;
  p.nthread = 1;
  p.seed = 7;
  RS_ASSIGN_OR_RETURN(Booster b, Booster::TrainClassifier(rows, y, kFailureClassCount, p));
  return b.Serialize();
}

}  // namespace rightsize

// diagnose_fallback_train: trains the learned fallback of `rightsize diagnose` on the failure
// corpora, measures it by cross-validation grouped by source repository, and checks a shipped
// model against a retrained one.
//
//   diagnose_fallback_train CORPUS --out share/diagnose_fallback.ubj   # the shipped model
//   diagnose_fallback_train CORPUS --cv                                # the grouped-CV figures
//   diagnose_fallback_train CORPUS --verify share/diagnose_fallback.ubj
//
// CORPUS is test/data/failures. The cases read are SET/CLASS/*.log for the written sets (dev,
// holdout, holdout2, holdout3), real/dev/CLASS/*.log and real/blind/CLASS/*.log, and the four
// blind sets scored once and since developed on, real/blindN/logs/CLASS/*.log for blind2,
// blind3, blind4 and blind5; no other folder under real/ is opened (a later set stays unseen).
// The folder is the label. Real cases are grouped by the owner/repo of their URL
// (cases.real.*.tsv, real/blindN/cases.real.blindN.tsv); in
// the CV a fold never holds a repository it was trained on, and the written sets are always in
// training.
// Exit: 0 done, 1 --verify found a difference, 2 bad arguments or unreadable corpus.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "diagnose/diagnosis.h"
#include "diagnose/learned_fallback.h"
#include "model/booster.h"

namespace fs = std::filesystem;
using rightsize::FailureClass;

namespace {

struct Case {
  std::string path;   // relative to the corpus
  std::string set;    // dev, holdout, …, real-dev, real-blind
  std::string group;  // owner/repo for real cases, "" for written ones
  int label = 0;
  int rules = 0;  // the signatures' answer
  double rules_conf = 0;
  std::set<int> set_aside;  // classes the rules weighed and did not name
  std::vector<float> prob;  // the model's (of the fold that never saw the case, in the CV)
  bool cited = false;       // the model's class has a non-routine line to cite
  std::vector<rightsize::FallbackLine> lines;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// owner/repo from a GitHub URL; the host (and first folder) for another site.
std::string GroupOfUrl(const std::string& url, const std::string& source) {
  std::string u = url;
  size_t scheme = u.find("://");
  if (scheme != std::string::npos) u = u.substr(scheme + 3);
  std::vector<std::string> parts;
  std::stringstream ss(u);
  std::string part;
  while (std::getline(ss, part, '/')) parts.push_back(part);
  if (parts.size() >= 3 && Lower(parts[0]).find("github.com") != std::string::npos) {
    return Lower(parts[1] + "/" + parts[2]);
  }
  if (!parts.empty()) return Lower(parts[0] + (parts.size() > 1 ? "/" + parts[1] : ""));
  return Lower(source);
}

// The developed-on blind sets, each with its own cases tsv in its folder.
constexpr const char* kLaterSets[] = {"blind2", "blind3", "blind4", "blind5"};

std::map<std::string, std::string> RealGroups(const fs::path& corpus) {
  std::map<std::string, std::string> groups;
  std::vector<fs::path> tsvs;
  for (const auto& entry : fs::directory_iterator(corpus)) tsvs.push_back(entry.path());
  for (const char* set : kLaterSets) {
    tsvs.push_back(corpus / "real" / set / (std::string("cases.real.") + set + ".tsv"));
  }
  for (const fs::path& tsv : tsvs) {
    std::string name = tsv.filename().string();
    if (name.rfind("cases.real.", 0) != 0 || !fs::is_regular_file(tsv)) continue;
    std::ifstream in(tsv);
    std::string line;
    std::vector<std::string> header;
    while (std::getline(in, line)) {
      std::vector<std::string> cols;
      std::stringstream ss(line);
      std::string col;
      while (std::getline(ss, col, '\t')) cols.push_back(col);
      if (header.empty()) {
        header = cols;
        continue;
      }
      std::map<std::string, std::string> row;
      for (size_t i = 0; i < cols.size() && i < header.size(); ++i) row[header[i]] = cols[i];
      if (!row["path"].empty()) groups[row["path"]] = GroupOfUrl(row["url"], row["source"]);
    }
  }
  return groups;
}

void AddCases(const fs::path& corpus, const std::string& rel_dir, const std::string& set,
              std::vector<Case>* cases) {
  fs::path dir = corpus / rel_dir;
  std::vector<fs::path> logs;
  for (const auto& cls_dir : fs::directory_iterator(dir)) {
    if (!cls_dir.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(cls_dir.path())) {
      if (f.path().extension() == ".log") logs.push_back(f.path());
    }
  }
  std::sort(logs.begin(), logs.end());
  for (const fs::path& p : logs) {
    auto cls = rightsize::FailureClassFromName(p.parent_path().filename().string());
    if (!cls) continue;
    Case c;
    c.path = fs::relative(p, corpus).string();
    c.set = set;
    c.label = static_cast<int>(*cls);
    cases->push_back(std::move(c));
  }
}

// Scans each case, keeps the lines the fallback reads and what the signatures answer.
bool ReadCases(const fs::path& corpus, std::vector<Case>* cases) {
  for (const auto& entry : fs::directory_iterator(corpus)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name == "real") continue;
    AddCases(corpus, name, name, cases);
  }
  AddCases(corpus, "real/dev", "real-dev", cases);
  AddCases(corpus, "real/blind", "real-blind", cases);
  for (const char* set : kLaterSets) {
    AddCases(corpus, std::string("real/") + set + "/logs", std::string("real-") + set, cases);
  }
  auto groups = RealGroups(corpus);
  for (Case& c : *cases) {
    if (c.set.rfind("real-", 0) == 0) {
      c.group = groups.count(c.path) ? groups[c.path] : c.path;
    }
    // The cases are small: scanned in memory, without ScanLogFile's per-core 4 MiB blocks (the
    // same scanner, the same tail and hits).
    std::ifstream in(corpus / c.path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::cerr << c.path << ": cannot read\n";
      return false;
    }
    std::vector<rightsize::LogScan> scans;
    rightsize::ScanOptions small;
    small.block_bytes = std::max<size_t>(1 << 20, text.size() + 1);
    scans.push_back(rightsize::ScanLogText(text, (corpus / c.path).string(), small));
    c.lines = rightsize::FallbackLines(scans);
    rightsize::DiagnoseInput input;
    input.learned_fallback = false;
    rightsize::Diagnosis d = rightsize::DiagnoseScans(std::move(scans), input);
    c.rules = static_cast<int>(d.cls);
    for (const rightsize::Cause& cause : d.causes) {
      c.set_aside.insert(static_cast<int>(cause.cls));
    }
    c.rules_conf = d.confidence;
  }
  std::sort(cases->begin(), cases->end(),
            [](const Case& a, const Case& b) { return a.path < b.path; });
  return true;
}

rightsize::SparseRows Rows(const std::vector<Case>& cases, const std::vector<size_t>& which) {
  rightsize::SparseRows rows;
  for (size_t i : which) rightsize::AppendFallbackRow(cases[i].lines, &rows);
  return rows;
}

std::vector<int> Labels(const std::vector<Case>& cases, const std::vector<size_t>& which) {
  std::vector<int> y;
  for (size_t i : which) y.push_back(cases[i].label);
  return y;
}

int Fold(const std::string& group, int folds) {
  return static_cast<int>(rightsize::FallbackColumn("fold:" + group) %
                          static_cast<unsigned>(folds));
}

std::string Name(int cls) {
  return std::string(rightsize::FailureClassName(static_cast<FailureClass>(cls)));
}

constexpr int kUnknown = static_cast<int>(FailureClass::kUnknown);

// The model's answer for a case, as `diagnose` computes it: the probabilities and whether the
// top class has a line to cite.
bool Answer(const rightsize::LearnedFallback& fb, Case* c) {
  auto m = fb.Classify(c->lines);
  auto p = fb.Probabilities(c->lines);
  if (!m.ok() || !p.ok()) return false;
  c->prob = *p;
  c->cited = m->cited.has_value();
  return true;
}

// The answer with the fallback: the rules', or for their `unknown` the model's class when its
// probability reaches the threshold and it has a non-routine line to cite.
int Combined(const Case& c, double threshold) {
  const std::vector<float>& p = c.prob;
  if (c.rules != kUnknown || p.empty()) return c.rules;
  int best = static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin());
  return best != kUnknown && p[static_cast<size_t>(best)] >= threshold && c.cited &&
                 !c.set_aside.count(best)
             ? best
             : kUnknown;
}

int CrossValidate(std::vector<Case>& cases, int folds, const rightsize::LearnedTrainParams& params,
                  const std::vector<double>& thresholds) {
  for (int f = 0; f < folds; ++f) {
    std::vector<size_t> train, test;
    for (size_t i = 0; i < cases.size(); ++i) {
      bool real = !cases[i].group.empty();
      (real && Fold(cases[i].group, folds) == f ? test : train).push_back(i);
    }
    auto model = rightsize::TrainLearnedFallback(Rows(cases, train), Labels(cases, train), params);
    if (!model.ok()) {
      std::cerr << model.status().message() << "\n";
      return 2;
    }
    auto fb = rightsize::LearnedFallback::Load(*model);
    if (!fb.ok()) {
      std::cerr << fb.status().message() << "\n";
      return 2;
    }
    for (size_t i : test) {
      if (!Answer(*fb, &cases[i])) return 2;
    }
    std::set<std::string> groups;
    for (size_t i : test) groups.insert(cases[i].group);
    std::fflush(stdout);
    fmt::print("fold {}: {} real cases from {} repositories held out, {} cases trained on\n", f,
               test.size(), groups.size(), train.size());
  }
  // Threshold sweep over the real cases (each scored by the model of the fold that never saw
  // its repository).
  std::vector<std::string> real_sets;
  for (const Case& c : cases) {
    if (!c.group.empty() &&
        std::find(real_sets.begin(), real_sets.end(), c.set) == real_sets.end()) {
      real_sets.push_back(c.set);
    }
  }
  std::string head = "\n| threshold | real top-1 |", rule = "|---|---|";
  for (const std::string& set : real_sets) {
    head += " " + set + " |";
    rule += "---|";
  }
  fmt::print("{} unknowns turned right | turned wrong | labelled-unknown kept |\n{}---|---|---|\n",
             head, rule);
  int rules_right = 0, n = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].group.empty()) continue;
    ++n;
    rules_right += cases[i].rules == cases[i].label;
  }
  fmt::print("| rules only | {}/{} = {:.1f}% |", rules_right, n, 100.0 * rules_right / n);
  for (const std::string& set : real_sets) {
    int ok = 0, all = 0;
    for (const Case& c : cases) {
      if (c.set != set) continue;
      ++all;
      ok += c.rules == c.label;
    }
    fmt::print(" {}/{} |", ok, all);
  }
  fmt::print(" | | |\n");
  for (double t : thresholds) {
    std::map<std::string, std::pair<int, int>> by_set;
    int right = 0, turned_right = 0, turned_wrong = 0, unk_kept = 0, unk_total = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      if (c.group.empty()) continue;
      int a = Combined(c, t);
      right += a == c.label;
      by_set[c.set].first += a == c.label;
      by_set[c.set].second += 1;
      if (c.rules == kUnknown && a != kUnknown) (a == c.label ? turned_right : turned_wrong)++;
      if (c.label == kUnknown) {
        ++unk_total;
        unk_kept += a == kUnknown;
      }
    }
    fmt::print("| {:.2f} | {}/{} = {:.1f}% |", t, right, n, 100.0 * right / n);
    for (const std::string& set : real_sets) {
      fmt::print(" {}/{} |", by_set[set].first, by_set[set].second);
    }
    fmt::print(" {} | {} | {}/{} |\n", turned_right, turned_wrong, unk_kept, unk_total);
  }
  // Per class at the shipped threshold; and the model alone (top-1 of the probabilities),
  // which says how much the words carry without the signatures.
  double t = rightsize::kLearnedThreshold;
  std::map<int, std::array<int, 3>> per;  // rules right, combined right, total
  int alone = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.group.empty()) continue;
    auto& row = per[c.label];
    row[0] += c.rules == c.label;
    row[1] += Combined(c, t) == c.label;
    row[2] += 1;
    int best = static_cast<int>(std::max_element(c.prob.begin(), c.prob.end()) - c.prob.begin());
    alone += best == c.label;
  }
  fmt::print("\nmodel alone (its top class, no signatures): {}/{} = {:.1f}%\n", alone, n,
             100.0 * alone / n);
  fmt::print(
      "\nper class at threshold {:.2f}:\n\n| class | rules | rules + fallback |\n|---|---|---|\n",
      t);
  for (const auto& [cls, row] : per) {
    fmt::print("| {} | {}/{} | {}/{} |\n", Name(cls), row[0], row[2], row[1], row[2]);
  }
  fmt::print("\nthe rules' unknowns at threshold {:.2f} (held-out fold):\n", t);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.group.empty() || c.rules != kUnknown) continue;
    int best = static_cast<int>(std::max_element(c.prob.begin(), c.prob.end()) - c.prob.begin());
    fmt::print("  {} label={} model={} p={:.2f}{}{}\n", c.path, Name(c.label), Name(best),
               c.prob[static_cast<size_t>(best)],
               c.cited || best == kUnknown ? "" : " (nothing to cite)",
               Combined(c, t) == kUnknown ? ""
               : best == c.label          ? "  RIGHT"
                                          : "  WRONG");
  }
  return 0;
}

std::vector<size_t> All(const std::vector<Case>& cases) {
  std::vector<size_t> all(cases.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: diagnose_fallback_train CORPUS [--out MODEL] [--cv] [--folds N] "
                 "[--verify MODEL]\n";
    return args.empty() ? 2 : 0;
  }
  fs::path corpus = args[0];
  std::string out, verify;
  bool cv = false;
  int folds = 5;
  rightsize::LearnedTrainParams params;
  for (size_t i = 1; i < args.size(); ++i) {
    auto next = [&]() -> std::string { return i + 1 < args.size() ? args[++i] : ""; };
    if (args[i] == "--out") {
      out = next();
    } else if (args[i] == "--verify") {
      verify = next();
    } else if (args[i] == "--cv") {
      cv = true;
    } else if (args[i] == "--folds") {
      folds = std::stoi(next());
    } else if (args[i] == "--rounds") {
      params.rounds = std::stoi(next());
    } else if (args[i] == "--depth") {
      params.max_depth = std::stoi(next());
    } else if (args[i] == "--eta") {
      params.eta = std::stod(next());
    } else {
      std::cerr << "diagnose_fallback_train: unknown argument " << args[i] << "\n";
      return 2;
    }
  }
  std::vector<Case> cases;
  if (!fs::is_directory(corpus) || !ReadCases(corpus, &cases)) {
    std::cerr << "diagnose_fallback_train: cannot read the corpus " << corpus << "\n";
    return 2;
  }
  fmt::print("{} cases\n", cases.size());
  std::fflush(stdout);
  if (cv) {
    int rc = CrossValidate(cases, folds, params, {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9});
    if (rc != 0) return rc;
  }
  if (out.empty() && verify.empty()) return 0;
  auto all = All(cases);
  auto model = rightsize::TrainLearnedFallback(Rows(cases, all), Labels(cases, all), params);
  if (!model.ok()) {
    std::cerr << model.status().message() << "\n";
    return 2;
  }
  if (!out.empty()) {
    std::ofstream f(out, std::ios::binary);
    f << *model;
    if (!f) {
      std::cerr << "cannot write " << out << "\n";
      return 2;
    }
    fmt::print("wrote {} ({} bytes)\n", out, model->size());
  }
  if (!verify.empty()) {
    std::ifstream f(verify, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto shipped = rightsize::LearnedFallback::Load(bytes);
    auto fresh = rightsize::LearnedFallback::Load(*model);
    if (!shipped.ok() || !fresh.ok()) {
      std::cerr << "cannot load " << verify << "\n";
      return 1;
    }
    int differ = 0;
    // Per set: the rules alone and the rules with the shipped model (in-sample for the model:
    // the figure that says the corpora do not drop, not a generalisation figure).
    std::map<std::string, std::array<int, 3>> per_set;
    for (Case& c : cases) {
      if (!Answer(*shipped, &c)) return 1;
      auto& row = per_set[c.set];
      row[0] += c.rules == c.label;
      row[1] += Combined(c, rightsize::kLearnedThreshold) == c.label;
      row[2] += 1;
    }
    fmt::print("| set | rules | rules + learned fallback |\n|---|---|---|\n");
    for (const auto& [set, row] : per_set) {
      fmt::print("| {} | {}/{} | {}/{} |\n", set, row[0], row[2], row[1], row[2]);
    }
    for (const Case& c : cases) {
      auto a = shipped->Probabilities(c.lines);
      auto b = fresh->Probabilities(c.lines);
      if (!a.ok() || !b.ok()) return 1;
      for (size_t k = 0; k < a->size(); ++k) {
        if (std::abs((*a)[k] - (*b)[k]) > 1e-5f) {
          ++differ;
          fmt::print("differs: {}\n", c.path);
          break;
        }
      }
    }
    fmt::print("{} of {} cases answered differently by the retrained model\n", differ,
               cases.size());
    return differ == 0 ? 0 : 1;
  }
  return 0;
}

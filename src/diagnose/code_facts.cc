#include "diagnose/code_facts.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "code/analysis.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;

std::string TrimLine(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// The last number literal on `text` (outside a comment) whose value is `number`: "" if none.
std::string LiteralOf(std::string_view text, double number) {
  size_t hash = text.find('#');
  if (hash != std::string_view::npos) text = text.substr(0, hash);
  std::string found;
  for (size_t i = 0; i < text.size();) {
    bool starts = std::isdigit(static_cast<unsigned char>(text[i])) != 0 &&
                  (i == 0 || (std::isalnum(static_cast<unsigned char>(text[i - 1])) == 0 &&
                              text[i - 1] != '_' && text[i - 1] != '.'));
    if (!starts) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[j])) != 0 || text[j] == '.' ||
            text[j] == '_' ||
            ((text[j] == '-' || text[j] == '+') && (text[j - 1] == 'e' || text[j - 1] == 'E')))) {
      ++j;
    }
    std::string token(text.substr(i, j - i));
    std::string digits;
    for (char c : token) {
      if (c != '_') digits += c;
    }
    char* end = nullptr;
    double v = std::strtod(digits.c_str(), &end);
    if (end == digits.c_str() + digits.size() && v == number) found = token;
    i = j;
  }
  return found;
}

// The folder the analysis reads and the program it starts from.
struct Program {
  std::string folder;
  std::optional<JobScript> script;  // the job script, or `python <entry>` made up
  std::string script_name;
};

// The Python file in `folder` that is the program when no script names one.
std::string EntryIn(const std::string& folder, const std::string& entry_hint) {
  std::error_code ec;
  if (!entry_hint.empty()) {
    fs::path rel = fs::relative(entry_hint, folder, ec);
    if (!ec && !rel.empty() && *rel.begin() != "..") return rel.generic_string();
  }
  for (const char* name : {"train.py", "main.py"}) {
    if (fs::is_regular_file(fs::path(folder) / name, ec)) return name;
  }
  std::string only;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".py" || !it->is_regular_file(ec)) continue;
    if (!only.empty()) return "";
    only = it->path().filename().string();
  }
  return only;
}

std::optional<Program> ProgramOf(const std::optional<JobScript>& script,
                                 const std::string& script_path, const std::string& code_dir,
                                 const std::string& entry_hint) {
  std::error_code ec;
  Program p;
  std::string entry;
  if (code_dir.empty()) {
    if (!script) return std::nullopt;
    p.folder = fs::path(script_path).parent_path().string();
    if (p.folder.empty()) p.folder = ".";
  } else if (fs::is_regular_file(code_dir, ec)) {
    p.folder = fs::path(code_dir).parent_path().string();
    if (p.folder.empty()) p.folder = ".";
    entry = fs::path(code_dir).filename().string();
  } else {
    p.folder = code_dir;
  }
  const JobScript::Command* main = script ? script->MainCommand() : nullptr;
  if (script && main != nullptr && entry.empty()) {
    p.script = script;
    p.script_name = script_path;
    return p;
  }
  if (entry.empty()) entry = EntryIn(p.folder, entry_hint);
  if (entry.empty()) return std::nullopt;
  auto made_up = ParseJobScript("#!/bin/bash\npython " + entry + "\n");
  if (!made_up.ok()) return std::nullopt;
  p.script = std::move(*made_up);
  p.script_name = "";
  return p;
}

template <typename T>
std::optional<CodeLine> LineOf(const code::Fact<T>& fact, const Program& p,
                               const std::string& script_path) {
  if (!fact.known() || fact.assumed || fact.where.line <= 0) return std::nullopt;
  bool in_script = !p.script_name.empty() && fact.where.file == p.script_name;
  std::string path = in_script ? script_path : (fs::path(p.folder) / fact.where.file).string();
  auto text = ReadSourceLine(path, fact.where.line);
  if (!text) return std::nullopt;
  CodeLine line{fact.where.file, fact.where.line, *text, "", static_cast<double>(*fact.value)};
  line.value = LiteralOf(*text, line.number);
  if (line.value.empty()) return std::nullopt;
  return line;
}

}  // namespace

CodeFactsForDiagnosis ReadCodeFacts(const std::optional<JobScript>& script,
                                    const std::string& script_path, const std::string& code_dir,
                                    const std::string& entry_hint) {
  CodeFactsForDiagnosis out;
  auto program = ProgramOf(script, script_path, code_dir, entry_hint);
  if (!program) return out;
  auto facts = code::AnalyzeJobCode(*program->script, program->folder, program->script_name);
  if (!facts.ok()) return out;
  out.batch_size = LineOf(facts->batch_size, *program, script_path);
  out.num_workers = LineOf(facts->num_workers, *program, script_path);
  out.learning_rate = LineOf(facts->learning_rate, *program, script_path);
  bool precision_read = facts->precision.known() && !facts->precision.assumed &&
                        *facts->precision.value != code::Precision::kFp32;
  bool precision_undecided = false;
  for (const auto& u : facts->undetermined) precision_undecided |= u.what == "precision";
  out.reduced_precision = precision_read || precision_undecided ||
                          (facts->precision.assumed && facts->precision.value &&
                           *facts->precision.value != code::Precision::kFp32);
  out.checkpointing =
      facts->checkpointing.known() && *facts->checkpointing.value != code::Checkpointing::kNone;
  return out;
}

std::optional<std::string> ReadSourceLine(const std::string& path, int line) {
  std::ifstream in(path);
  if (!in || line < 1) return std::nullopt;
  std::string text;
  for (int i = 0; i < line; ++i) {
    if (!std::getline(in, text)) return std::nullopt;
  }
  return TrimLine(text);
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

#include "slurm/submit_advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "core/units.h"

namespace rightsize::slurm {

namespace {

constexpr size_t kDiffContext = 3;

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The prediction's target `name` ("peak_memory", "runtime", "cpu_cores"); nullptr if none.
const nlohmann::json* Target(const nlohmann::json& doc, const char* name) {
  auto targets = doc.find("targets");
  if (targets == doc.end() || !targets->is_object()) return nullptr;
  auto t = targets->find(name);
  return t == targets->end() || !t->is_object() ? nullptr : &*t;
}

// "p50 145M, p90 193M" for a target, in its unit.
std::string Quantiles(const nlohmann::json& doc, const char* name) {
  const nlohmann::json* t = Target(doc, name);
  if (t == nullptr) return "";
  std::string out;
  for (const char* q : {"p50", "p90"}) {
    auto v = t->find(q);
    if (v == t->end() || !v->is_number()) continue;
    double x = v->get<double>();
    std::string unit = t->value("unit", "");
    std::string text = unit == "bytes" ? FormatMemory(static_cast<int64_t>(x))
                       : unit == "s"   ? FormatDuration(x)
                                       : fmt::format("{:.1f}", x);
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", q, text);
  }
  return out;
}

// Suggested request of target `name` in the prediction, when the model gave one.
std::optional<double> Suggested(const nlohmann::json& doc, const char* name) {
  const nlohmann::json* t = Target(doc, name);
  if (t == nullptr) return std::nullopt;
  auto s = t->find("suggested_request");
  if (s == t->end() || !s->is_number()) return std::nullopt;
  return s->get<double>();
}

bool Differs(double now, double suggested) {
  return now > 0 && std::abs(suggested - now) / now >= kMinChange;
}

}  // namespace

std::string UnifiedDiff(const std::string& name, const std::vector<std::string>& old_lines,
                        const std::vector<std::string>& new_lines, const std::vector<int>& origin,
                        const std::vector<bool>& replaced) {
  // One op per step: ' ' keep, '-' old only, '+' new only.
  struct Op {
    char kind;
    int old_line, new_line;  // 0-based; -1 when not on that side
  };
  std::vector<Op> ops;
  size_t o = 0;
  for (size_t n = 0; n < new_lines.size(); ++n) {
    if (origin[n] < 0) {
      ops.push_back({'+', -1, static_cast<int>(n)});
      continue;
    }
    while (o < static_cast<size_t>(origin[n])) ops.push_back({'-', static_cast<int>(o++), -1});
    if (replaced[o]) {
      ops.push_back({'-', static_cast<int>(o), -1});
      ops.push_back({'+', -1, static_cast<int>(n)});
    } else {
      ops.push_back({' ', static_cast<int>(o), static_cast<int>(n)});
    }
    ++o;
  }
  std::string out = fmt::format("--- {}\n+++ {} (suggested)\n", name, name);
  size_t i = 0;
  while (i < ops.size()) {
    if (ops[i].kind == ' ') {
      ++i;
      continue;
    }
    // A hunk: from kDiffContext lines before this change to kDiffContext after the last change
    // that is at most 2*kDiffContext unchanged lines from the previous one.
    size_t begin = i >= kDiffContext ? i - kDiffContext : 0;
    size_t end = i;
    size_t quiet = 0;
    for (size_t k = i; k < ops.size(); ++k) {
      if (ops[k].kind == ' ') {
        if (++quiet > 2 * kDiffContext) break;
      } else {
        quiet = 0;
        end = k;
      }
    }
    end = std::min(ops.size(), end + 1 + kDiffContext);
    int old_start = -1, new_start = -1, old_n = 0, new_n = 0;
    std::string body;
    for (size_t k = begin; k < end; ++k) {
      const Op& op = ops[k];
      if (op.old_line >= 0) {
        if (old_start < 0) old_start = op.old_line;
        ++old_n;
      }
      if (op.new_line >= 0) {
        if (new_start < 0) new_start = op.new_line;
        ++new_n;
      }
      const std::string& text = op.kind == '-' ? old_lines[op.old_line] : new_lines[op.new_line];
      body += fmt::format("{}{}\n", op.kind, text);
    }
    // An empty side starts at the line before (diff -u's convention).
    if (old_start < 0) old_start = std::max(0, new_start - 1) - 1;
    if (new_start < 0) new_start = std::max(0, old_start - 1) - 1;
    out += fmt::format("@@ -{},{} +{},{} @@\n", old_start + 1, old_n, new_start + 1, new_n);
    out += body;
    i = end;
  }
  return out;
}

namespace {

// --mem's value for a suggested size (core/units.h: whole MiB or GiB, rounded up).
std::string MemoryFlag(double bytes) {
  return MemoryFlagValue(static_cast<int64_t>(std::ceil(bytes)));
}

}  // namespace

std::vector<Change> SuggestChanges(const nlohmann::json& doc, const JobScript& script) {
  std::vector<Change> changes;
  const ResourceRequest& r = script.request;
  auto directive = [&](const std::string& name) -> const JobScript::Directive* {
    const JobScript::Directive* found = nullptr;
    for (const auto& d : script.directives) {
      if (d.name == name) found = &d;  // the last one wins, as in sbatch
    }
    return found;
  };
  auto add = [&](const std::string& option, const std::string& from, const std::string& to,
                 std::string why) {
    Change c{option, from, to, "added", 0, std::move(why)};
    if (const auto* d = directive(option)) {
      c.where = "script";
      c.line = d->line;
      c.from = d->value;
    }
    changes.push_back(std::move(c));
  };
  if (auto mem = Suggested(doc, "peak_memory");
      mem && r.memory_bytes && !script.mem_whole_node &&
      Differs(static_cast<double>(*r.memory_bytes), *mem)) {
    std::string why = fmt::format("predicted peak memory {}; {} asked",
                                  Quantiles(doc, "peak_memory"), FormatMemory(*r.memory_bytes));
    if (script.mem_per_cpu_bytes && r.cpus && *r.cpus > 0) {
      add("mem-per-cpu", FormatMemory(*script.mem_per_cpu_bytes), MemoryFlag(*mem / *r.cpus), why);
    } else if (!script.mem_per_gpu_bytes) {
      int nodes = r.nodes.value_or(1);
      add("mem", script.mem_per_node_bytes ? FormatMemory(*script.mem_per_node_bytes) : "",
          MemoryFlag(*mem / std::max(nodes, 1)), why);
    }
  }
  if (auto t = Suggested(doc, "runtime");
      t && r.time_limit_s && Differs(static_cast<double>(*r.time_limit_s), *t)) {
    add("time", TimeFlagValue(static_cast<double>(*r.time_limit_s)), TimeFlagValue(*t),
        fmt::format("predicted run time {}; {} asked", Quantiles(doc, "runtime"),
                    TimeFlagValue(static_cast<double>(*r.time_limit_s))));
  }
  // CPUs: only the simple layout, one task with --cpus-per-task.
  if (auto c = Suggested(doc, "cpu_cores"); c && r.cpus && script.cpus_per_task &&
                                            script.ntasks.value_or(1) == 1 &&
                                            Differs(*r.cpus, std::ceil(*c))) {
    add("cpus-per-task", std::to_string(*script.cpus_per_task),
        std::to_string(static_cast<int>(std::ceil(*c))),
        fmt::format("predicted CPU use {} cores", Quantiles(doc, "cpu_cores")));
  }
  return changes;
}

std::vector<std::string> ApplyToArgs(std::vector<std::string> args, std::vector<Change>* changes) {
  static const std::map<std::string, std::string> kShort = {{"t", "time"}, {"c", "cpus-per-task"}};
  for (auto& c : *changes) {
    for (size_t i = 0; i < args.size(); ++i) {
      std::string a = args[i];
      std::string name, value;
      bool separate = false;
      if (a.rfind("--", 0) == 0) {
        size_t eq = a.find('=');
        name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        if (eq != std::string::npos) value = a.substr(eq + 1);
        separate = eq == std::string::npos;
      } else if (a.size() >= 2 && a[0] == '-' && kShort.count(a.substr(1, 1))) {
        name = kShort.at(a.substr(1, 1));
        value = a.substr(2);
        separate = value.empty();
      } else {
        continue;
      }
      if (name != c.option) continue;
      if (separate && i + 1 < args.size()) {
        c.from = args[i + 1];
        args[i + 1] = c.to;
      } else {
        c.from = value;
        args[i] = fmt::format("--{}={}", c.option, c.to);
      }
      c.where = "command line";
      c.line = 0;
    }
  }
  return args;
}

std::string ApplyToScript(const std::string& text, std::vector<Change>* changes,
                          const std::string& name, std::string* diff) {
  std::vector<std::string> old_lines = SplitLines(text);
  std::vector<std::string> lines = old_lines;
  std::vector<bool> replaced(old_lines.size() + 1, false);
  int last_directive = 0;  // 1-based line of the last #SBATCH line, 0 = none
  for (size_t i = 0; i < old_lines.size(); ++i) {
    if (old_lines[i].rfind("#SBATCH", 0) == 0) last_directive = static_cast<int>(i) + 1;
  }
  std::vector<std::string> added;
  for (auto& c : *changes) {
    if (c.where == "script") {
      std::string& line = lines[c.line - 1];
      // Replace the value after this option's name on its line; keep the rest of the line.
      static const std::map<std::string, std::string> kShortOf = {{"time", "|-t\\s*"},
                                                                  {"cpus-per-task", "|-c\\s*"}};
      auto short_it = kShortOf.find(c.option);
      std::string value_re =
          std::regex_replace(c.from, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
      std::regex re("(--" + c.option + R"((=|\s+))" +
                    (short_it == kShortOf.end() ? "" : short_it->second) + ")" + value_re);
      std::smatch m;
      if (std::regex_search(line, m, re)) {
        line = m.prefix().str() + "--" + c.option + "=" + c.to + m.suffix().str();
      } else {
        line = fmt::format("#SBATCH --{}={}", c.option, c.to);
      }
      replaced[c.line - 1] = true;
    } else if (c.where == "added") {
      added.push_back(fmt::format("#SBATCH --{}={}", c.option, c.to));
    }
  }
  // Inserted lines go after the last directive, else after the shebang, else first.
  int insert_at = last_directive > 0                                         ? last_directive
                  : (!old_lines.empty() && old_lines[0].rfind("#!", 0) == 0) ? 1
                                                                             : 0;
  std::vector<std::string> new_lines;
  std::vector<int> origin;
  for (int i = 0; i <= static_cast<int>(lines.size()); ++i) {
    if (i == insert_at) {
      for (const auto& a : added) {
        new_lines.push_back(a);
        origin.push_back(-1);
      }
      int k = 0;
      for (auto& c : *changes) {
        if (c.where == "added") c.line = insert_at + ++k;  // 1-based, in the new script
      }
    }
    if (i == static_cast<int>(lines.size())) break;
    new_lines.push_back(lines[i]);
    origin.push_back(i);
  }
  *diff = UnifiedDiff(name, old_lines, new_lines, origin, replaced);
  std::string out;
  for (const auto& l : new_lines) out += l + "\n";
  return out;
}

SubmitAdvice AdviseSubmit(const nlohmann::json& prediction, const JobScript& script,
                          const std::vector<std::string>& sbatch_args,
                          const std::string& script_text, const std::string& script_name) {
  SubmitAdvice advice;
  advice.changes = SuggestChanges(prediction, script);
  advice.args = ApplyToArgs(sbatch_args, &advice.changes);
  advice.script = ApplyToScript(script_text, &advice.changes, script_name, &advice.diff);
  advice.script_changed = advice.script != script_text;
  if (!advice.script_changed) advice.diff.clear();
  return advice;
}

nlohmann::json ChangesJson(const std::vector<Change>& changes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : changes) {
    out.push_back({{"option", "--" + c.option},
                   {"from", c.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.from)},
                   {"to", c.to},
                   {"where", c.where},
                   {"line", c.line == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.line)},
                   {"why", c.why}});
  }
  return out;
}

std::string SubmitAdviceText(const SubmitAdvice& advice,
                             const std::vector<std::string>& sbatch_args, bool applied,
                             const nlohmann::json* prediction) {
  if (advice.changes.empty()) {
    // The lowest risk at which a target's request would be cut (the notes above say why not at
    // this one).
    std::optional<double> at;
    auto targets = prediction != nullptr && prediction->is_object()
                       ? prediction->find("targets")
                       : nlohmann::json::const_iterator();
    if (prediction != nullptr && targets != prediction->end() && targets->is_object()) {
      for (const auto& [name, t] : targets->items()) {
        auto r = t.find("suggested_at_risk");
        if (r != t.end() && r->is_number() && (!at || r->get<double>() < *at)) {
          at = r->get<double>();
        }
      }
    }
    if (!at) return "no changes suggested\n";
    return fmt::format(
        "no changes suggested at this risk; at --risk {:g} some are (the notes above say why)\n",
        *at);
  }
  std::string out = fmt::format("suggested changes{}:\n", applied ? " (applied)" : "");
  for (const auto& c : advice.changes) {
    out +=
        fmt::format("  --{}: {} -> {} ({}{}): {}\n", c.option, c.from.empty() ? "(unset)" : c.from,
                    c.to, c.where, c.line > 0 ? fmt::format(" line {}", c.line) : "", c.why);
  }
  out += advice.diff;
  if (advice.args != sbatch_args) {
    std::string joined;
    for (const auto& a : advice.args) joined += " " + a;
    out += fmt::format("sbatch options:{}\n", joined);
  }
  if (!applied) out += "(add --apply to submit with these changes)\n";
  return out;
}

}  // namespace rightsize::slurm

// `rightsize submit [OPTIONS] SCRIPT [SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]`: predict, show the
// suggested #SBATCH changes as a unified diff of the script, and submit with sbatch (with the
// changes when --apply).
//
// The changes come from the prediction's suggested requests (memory, CPUs, time) that differ
// from the request by at least kMinChange. Each is made where the value is set: an sbatch
// option given here is replaced on the command line, a directive is rewritten on its line, and
// a missing one is added after the last #SBATCH line. With --apply the rewritten script goes to
// sbatch as a temporary copy (named -J after the script, as sbatch would); the original is never
// written. When sbatch gives a job id, the prediction is stored with the job in the store.
#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/json_text.h"
#include "core/units.h"
#include "ingest/job_script.h"
#include "predict/predict.h"

extern char** environ;

namespace rightsize::cli {

namespace {

constexpr double kMinChange = 0.1;  // smaller differences are noise, not advice
constexpr size_t kDiffContext = 3;

struct SubmitFlags {
  std::string cluster, user, account, partition, sbatch = "sbatch";
  double risk = 0.01;
  bool per_job_risk = false;
  bool apply = false, dry_run = false, json = false;
};

// One suggested change of an sbatch option.
struct Change {
  std::string option;  // long name without dashes: "mem", "time", "cpus-per-task"
  std::string from;    // as written ("" when the option was not set)
  std::string to;
  std::string where;  // "script", "command line", "added"
  int line = 0;       // 1-based script line ("added": the new line's number)
  std::string why;
};

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// A unified diff of two versions whose lines only differ by replacements and insertions:
// `origin[i]` is the old line new line i came from, -1 for an inserted line; `replaced[j]` says
// old line j was rewritten.
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

std::string SbatchMemory(double bytes) {
  auto b = static_cast<int64_t>(std::ceil(bytes));
  if (b % kGiB == 0) return fmt::format("{}G", b / kGiB);
  return fmt::format("{}M", (b + kMiB - 1) / kMiB);
}

std::string SbatchTime(double seconds) {
  auto minutes = static_cast<int64_t>(std::ceil(seconds / 60));
  return FormatDuration(static_cast<double>(minutes * 60));
}

// "p50 145M, p90 193M" for a target, in its unit.
std::string Quantiles(const nlohmann::json& doc, const char* name) {
  auto t = doc["targets"].find(name);
  if (t == doc["targets"].end()) return "";
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
  auto t = doc["targets"].find(name);
  if (t == doc["targets"].end()) return std::nullopt;
  auto s = t->find("suggested_request");
  if (s == t->end() || !s->is_number()) return std::nullopt;
  return s->get<double>();
}

bool Differs(double now, double suggested) {
  return now > 0 && std::abs(suggested - now) / now >= kMinChange;
}

// The changes the prediction suggests for this script and these sbatch options.
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
      add("mem-per-cpu", FormatMemory(*script.mem_per_cpu_bytes), SbatchMemory(*mem / *r.cpus),
          why);
    } else if (!script.mem_per_gpu_bytes) {
      int nodes = r.nodes.value_or(1);
      add("mem", script.mem_per_node_bytes ? FormatMemory(*script.mem_per_node_bytes) : "",
          SbatchMemory(*mem / std::max(nodes, 1)), why);
    }
  }
  if (auto t = Suggested(doc, "runtime");
      t && r.time_limit_s && Differs(static_cast<double>(*r.time_limit_s), *t)) {
    add("time", SbatchTime(static_cast<double>(*r.time_limit_s)), SbatchTime(*t),
        fmt::format("predicted run time {}; {} asked", Quantiles(doc, "runtime"),
                    SbatchTime(static_cast<double>(*r.time_limit_s))));
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

// Rewrites the sbatch options given on the command line ("--mem=8G", "--mem 8G", "-t 60") for
// the changes of options found there; marks those changes "command line".
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

// The script with the "script" and "added" changes made; fills the diff bookkeeping.
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

// Runs argv; returns (exit status, stdout). stderr goes to ours (the hook's advice shows).
StatusOr<std::pair<int, std::string>> RunCapture(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return Status::IoError(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::IoError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) {
    return Status::IoError(fmt::format("waiting for {}: {}", argv[0], std::strerror(errno)));
  }
  int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return std::make_pair(code, out);
}

std::string PredictionTable(const nlohmann::json& doc) {
  std::string out = fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "", "p10", "p50",
                                "p90", "request", "suggested");
  for (const auto& item : doc["targets"].items()) {
    const std::string& name = item.key();
    const nlohmann::json& t = item.value();
    bool bytes = t.value("unit", "") == "bytes";
    bool secs = t.value("unit", "") == "s";
    auto cell = [&](const char* key) -> std::string {
      auto it = t.find(key);
      if (it == t.end() || !it->is_number()) return "-";
      double v = it->get<double>();
      if (bytes) return FormatMemory(static_cast<int64_t>(v));
      if (secs) return FormatDuration(v);
      return fmt::format("{:.1f}", v);
    };
    out += fmt::format("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", name, cell("p10"),
                       cell("p50"), cell("p90"), cell("request"), cell("suggested_request"));
  }
  for (const auto& n : doc["notes"]) out += fmt::format("note: {}\n", n.get<std::string>());
  return out;
}

int RunSubmit(Context& ctx, const SubmitFlags& f, std::vector<std::string> rest) {
  // rest: SCRIPT [SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]
  if (rest.empty()) return Fail(Status::InvalidArgument("submit: give the job SCRIPT"));
  std::string script_path = rest.front();
  std::vector<std::string> sbatch_args, script_args;
  bool after_dashes = false;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (!after_dashes && rest[i] == "--") {
      after_dashes = true;
      continue;
    }
    (after_dashes ? script_args : sbatch_args).push_back(rest[i]);
  }
  std::ifstream in(script_path, std::ios::binary);
  if (!in) return Fail(Status::NotFound(fmt::format("{}: cannot read the script", script_path)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto script = ParseJobScript(text, sbatch_args);
  if (!script.ok()) return Fail(script.status().WithContext(script_path));

  auto store = ctx.OpenedStore();
  if (!store.ok()) return Fail(store.status());
  PredictRequest pin;
  pin.script_text = text;
  pin.script = std::filesystem::path(script_path).filename().string();
  pin.sbatch_args = sbatch_args;
  pin.cluster = f.cluster;
  pin.user = f.user;
  if (pin.user.empty()) {  // sbatch submits as this user, whatever $USER says
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr) pin.user = pw->pw_name;
  }
  pin.account = f.account;
  pin.partition = f.partition;
  pin.risk = f.risk;
  pin.per_job_risk = f.per_job_risk;
  pin.now = static_cast<int64_t>(std::time(nullptr));
  auto predicted = PredictJob(**store, pin);
  if (!predicted.ok()) return Fail(predicted.status().WithContext(script_path));
  const nlohmann::json* doc = &predicted->doc;

  std::vector<Change> changes = SuggestChanges(*doc, *script);
  std::vector<std::string> new_args = ApplyToArgs(sbatch_args, &changes);
  std::string diff;
  std::string new_text = ApplyToScript(text, &changes, script_path, &diff);
  bool script_changed = new_text != text;
  if (!script_changed) diff.clear();

  nlohmann::json changes_json = nlohmann::json::array();
  for (const auto& c : changes) {
    changes_json.push_back(
        {{"option", "--" + c.option},
         {"from", c.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.from)},
         {"to", c.to},
         {"where", c.where},
         {"line", c.line == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.line)},
         {"why", c.why}});
  }
  if (!f.json) {
    fmt::print("{}: prediction (cluster {})\n{}", script_path, (*doc)["cluster"].get<std::string>(),
               PredictionTable(*doc));
    if (changes.empty()) {
      fmt::print("no changes suggested\n");
    } else {
      fmt::print("suggested changes{}:\n", f.apply ? " (applied)" : "");
      for (const auto& c : changes) {
        fmt::print("  --{}: {} -> {} ({}{}): {}\n", c.option, c.from.empty() ? "(unset)" : c.from,
                   c.to, c.where, c.line > 0 ? fmt::format(" line {}", c.line) : "", c.why);
      }
      if (!diff.empty()) fmt::print("{}", diff);
      if (new_args != sbatch_args) {
        std::string joined;
        for (const auto& a : new_args) joined += " " + a;
        fmt::print("sbatch options:{}\n", joined);
      }
      if (!f.apply) fmt::print("(add --apply to submit with these changes)\n");
    }
  }
  nlohmann::json out = {{"schema", "rightsize.submit/v1"},
                        {"script", script_path},
                        {"prediction", *doc},
                        {"changes", changes_json},
                        {"diff", diff},
                        {"applied", f.apply && !changes.empty()},
                        {"submitted", false},
                        {"job_id", nullptr}};
  int exit_code = kExitOk;
  if (!f.dry_run) {
    std::vector<std::string> argv = {f.sbatch};
    const auto& args = f.apply ? new_args : sbatch_args;
    argv.insert(argv.end(), args.begin(), args.end());
    std::string tmp;
    if (f.apply && script_changed) {
      // sbatch reads the script when it submits, so a private copy can go right after.
      bool named = script->request.job_name.size() > 0;
      if (!named) argv.push_back("--job-name=" + pin.script);
      char path[] = "/tmp/rightsize-submit-XXXXXX";
      int fd = mkstemp(path);
      if (fd < 0) return Fail(Status::IoError(fmt::format("mkstemp: {}", std::strerror(errno))));
      tmp = path;
      bool ok =
          write(fd, new_text.data(), new_text.size()) == static_cast<ssize_t>(new_text.size());
      close(fd);
      if (!ok) {
        std::filesystem::remove(tmp);
        return Fail(Status::IoError(fmt::format("{}: cannot write", tmp)));
      }
      argv.push_back(tmp);
    } else {
      argv.push_back(script_path);
    }
    argv.insert(argv.end(), script_args.begin(), script_args.end());
    auto run = RunCapture(argv);
    if (!tmp.empty()) std::filesystem::remove(tmp);
    if (!run.ok()) return Fail(run.status());
    auto [code, sbatch_out] = *run;
    out["sbatch"] = {{"exit_code", code}, {"stdout", sbatch_out}};
    std::smatch m;
    static const std::regex kJobId(R"((\d+))");
    if (code == 0 && std::regex_search(sbatch_out, m, kJobId)) {
      out["submitted"] = true;
      out["job_id"] = m[1].str();
      StoredPrediction p{(*doc)["cluster"].get<std::string>(), m[1].str(), pin.now, JsonText(*doc)};
      Status st = (*store)->PutPrediction(p);
      if (!st.ok()) fmt::print(stderr, "rightsize: prediction not stored: {}\n", st.message());
    } else {
      exit_code = kExitBadInput;
      if (!f.json) fmt::print(stderr, "rightsize: {} exited with status {}\n", f.sbatch, code);
    }
    if (!f.json) fmt::print("{}", sbatch_out);
  }
  if (f.json) fmt::print("{}\n", JsonText(out, 2));
  return exit_code;
}

}  // namespace

void AddSubmitCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "submit",
      "Predict a job script's use, show the suggested #SBATCH changes as a diff, and submit it "
      "with sbatch (with the changes when --apply). Usage: rightsize submit [OPTIONS] SCRIPT "
      "[SBATCH_OPTIONS…] [-- SCRIPT_ARGS…]");
  auto f = std::make_shared<SubmitFlags>();
  cmd->add_flag("--apply", f->apply, "Submit with the suggested changes");
  cmd->add_flag("--dry-run", f->dry_run, "Print the prediction and the changes; do not submit");
  cmd->add_flag("--json", f->json, "Print the rightsize.submit/v1 document");
  cmd->add_option("--cluster", f->cluster, "The cluster (default: the store's only one)");
  cmd->add_option("--user", f->user, "Whose job it is (default: the script's, else $USER)");
  cmd->add_option("--account", f->account, "Account, for the prediction");
  cmd->add_option("--partition", f->partition, "Partition, for the prediction");
  cmd->add_option("--risk", f->risk,
                  "Accepted share of jobs whose suggested request is too small, spent where "
                  "a cut frees the most (default 0.01, as in predict)")
      ->check(CLI::Range(0.0001, 0.5));
  cmd->add_flag("--per-job-risk", f->per_job_risk,
                "Bound this job's own chance to outgrow a suggested request by --risk instead");
  cmd->add_option("--sbatch", f->sbatch, "The sbatch program")->capture_default_str();
  // Everything from SCRIPT on is ours to split (sbatch's options are not rightsize's).
  cmd->prefix_command();
  cmd->callback([&ctx, action, f, cmd] {
    std::vector<std::string> rest = cmd->remaining();
    *action = [&ctx, f, rest]() -> int { return RunSubmit(ctx, *f, rest); };
  });
}

}  // namespace rightsize::cli

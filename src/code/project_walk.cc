// Reading: the job script's Python command and launcher options, the project's Python files
// (followed import by import, parsed ahead on a second thread), and what they bind, define
// and call. See analyzer.h for the other seams.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>
#include <thread>

#include "code/analyzer.h"
#include "core/mutex.h"

namespace rightsize::code::internal {

namespace fs = std::filesystem;

std::vector<std::string> ShellWords(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

namespace {

bool IsScope(std::string_view type) {
  return type == "if_statement" || type == "elif_clause" || type == "conditional_expression" ||
         type == "for_statement" || type == "list_comprehension" ||
         type == "generator_expression" || type == "function_definition" ||
         type == "class_definition";
}

}  // namespace

// The project's Python files read and parsed on a second thread while the analysis walks the
// first ones (parsing is half of the time; the analysis itself follows imports one by one).
// The analysis takes a file's tree when it is ready, waits when it is being parsed, and parses
// it itself when the thread has not got to it. Files never imported are parsed for nothing;
// the thread stops when the analysis ends. Bounded: kMaxCodeFiles files.
class ParseAhead {
 public:
  ParseAhead(std::string dir, std::vector<std::string> rels) : dir_(std::move(dir)) {
    for (auto& rel : rels) files_.emplace(std::move(rel), Entry{});
    for (auto& [rel, e] : files_) order_.push_back(&rel);
    thread_ = std::thread([this] { Run(); });
  }
  ~ParseAhead() {
    stop_ = true;
    thread_.join();
  }
  ParseAhead(const ParseAhead&) = delete;
  ParseAhead& operator=(const ParseAhead&) = delete;

  // The file's parse, or nullopt when the caller should read and parse it itself (also when the
  // thread could not read it: the caller then says so).
  std::optional<StatusOr<PythonTree>> Take(const std::string& rel) {
    MutexLock lock(mu_);
    auto it = files_.find(fs::path(rel).lexically_normal().generic_string());
    if (it == files_.end()) return std::nullopt;
    Entry& e = it->second;
    if (e.state == State::kPending) {
      e.state = State::kTaken;
      return std::nullopt;
    }
    while (e.state == State::kParsing) done_.Wait(lock);
    if (e.state != State::kDone || !e.result) return std::nullopt;
    e.state = State::kTaken;
    return std::move(e.result);
  }

  // Text of a file, at most kMaxSourceBytes + 1 bytes (so that an oversized file is told).
  static std::optional<std::string> ReadSource(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text;
    char buf[1 << 16];
    while (text.size() <= kMaxSourceBytes && in.read(buf, sizeof buf).gcount() > 0) {
      text.append(buf, static_cast<size_t>(in.gcount()));
    }
    return text;
  }

 private:
  enum class State { kPending, kParsing, kDone, kTaken };
  struct Entry {
    State state = State::kPending;
    std::optional<StatusOr<PythonTree>> result;
  };
  void Run() {
    for (const std::string* rel : order_) {
      if (stop_) return;
      Entry* e = nullptr;
      {
        MutexLock lock(mu_);
        e = &files_.at(*rel);
        if (e->state != State::kPending) continue;
        e->state = State::kParsing;
      }
      std::optional<StatusOr<PythonTree>> result;
      if (auto text = ReadSource(fs::path(dir_) / *rel)) {
        result.emplace(PythonTree::Parse(std::move(*text)));
      }
      MutexLock lock(mu_);
      e->result = std::move(result);
      e->state = State::kDone;
      done_.NotifyAll();
    }
  }

  std::string dir_;
  Mutex mu_;
  CondVar done_;  // a file's parse is done
  // By normalised relative path; the entries too are read and written under mu_.
  std::map<std::string, Entry> files_ GUARDED_BY(mu_);
  std::vector<const std::string*> order_;  // set by the constructor, then only read
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

namespace {

// The Python files under `dir` worth parsing ahead: at most kMaxCodeFiles, not in hidden,
// cache or environment folders, at most four levels down, among the first 4,000 entries (a job
// folder may hold a dataset of a million files: the look-ahead is an optimisation, never a
// walk over that).
std::vector<std::string> ProjectPythonFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  int budget = 4000;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator() && budget-- > 0; it.increment(ec)) {
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (it->is_directory(ec)) {
      if (name.starts_with(".") || name == "__pycache__" || name == "node_modules" ||
          name == "site-packages" || name == "venv" || name == "env" || it.depth() >= 3) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (p.extension() != ".py" || !it->is_regular_file(ec)) continue;
    out.push_back(fs::relative(p, dir, ec).lexically_normal().generic_string());
    if (static_cast<int>(out.size()) >= kMaxCodeFiles) break;
  }
  return out;
}

}  // namespace

Analyzer::Analyzer(std::string code_dir, std::string script_name)
    : code_dir_(std::move(code_dir)), script_name_(std::move(script_name)) {}

Analyzer::~Analyzer() = default;

// ---------------------------------------------------------------------------------------------
// Reading

Status Analyzer::FindEntry(const JobScript& script) {
  const JobScript::Command* cmd = script.MainCommand();
  if (cmd == nullptr) return Status::NotFound("the script runs no command");
  gpus_requested_ = script.request.gpus.value_or(0);
  env_ = script.env;
  // The main command may be a shell helper; the first command that runs Python is the work.
  const JobScript::Command* python = nullptr;
  for (const auto& c : script.commands) {
    bool runs_python =
        std::find(c.wrappers.begin(), c.wrappers.end(), "python") != c.wrappers.end() ||
        c.program.ends_with(".py") || c.program.starts_with("-m ");
    if (runs_python && (python == nullptr || &c == cmd)) python = &c;
  }
  if (python == nullptr) {
    return Status::NotFound(fmt::format("{}:{}: the job runs {}, not a Python program",
                                        script_name_, cmd->line, cmd->program));
  }
  cmd = python;
  facts_.launcher = cmd->launcher;
  facts_.command = {script_name_, cmd->line};
  facts_.command_index = static_cast<int>(cmd - script.commands.data());
  facts_.args = cmd->args;
  std::string rel;
  if (cmd->program.starts_with("-m ")) {
    std::string module = cmd->program.substr(3);
    auto found = ResolveModule(module, -1);
    if (!found) {
      return Status::NotFound(
          fmt::format("{}:{}: module {} is not in {}", script_name_, cmd->line, module, code_dir_));
    }
    rel = *found;
  } else {
    fs::path p(cmd->program);
    for (const fs::path& candidate : {p, p.filename()}) {
      if (candidate.is_absolute()) {
        if (fs::is_regular_file(candidate)) {
          rel = fs::relative(candidate, code_dir_).string();
          break;
        }
        continue;
      }
      if (fs::is_regular_file(fs::path(code_dir_) / candidate)) {
        rel = candidate.lexically_normal().string();
        break;
      }
    }
    if (rel.empty()) {
      return Status::NotFound(
          fmt::format("{}:{}: {} is not in {}", script_name_, cmd->line, cmd->program, code_dir_));
    }
  }
  facts_.entry = rel;
  ReadLauncherOptions(script, *cmd);
  std::vector<std::string> project = ProjectPythonFiles(code_dir_);
  if (project.size() > 1) {
    try {
      ahead_ = std::make_unique<ParseAhead>(code_dir_, std::move(project));
    } catch (const std::system_error&) {
      // No thread to be had: every file is parsed when it is reached, as without one.
    }
  }
  AddFile(rel);
  return Status::Ok();
}

void Analyzer::ReadLauncherOptions(const JobScript& script, const JobScript::Command& cmd) {
  std::vector<std::string> words = ShellWords(cmd.text);
  SourceLine where = facts_.command;
  auto int_of = [&](const std::string& s) -> std::optional<int> {
    std::string v = s;
    if (v.starts_with("$")) {
      std::string name = v.substr(1);
      if (name.starts_with("{") && name.ends_with("}")) name = name.substr(1, name.size() - 2);
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      v = it->second;
    }
    auto n = ParseNumber(v);
    if (!n || *n < 1) return std::nullopt;
    return static_cast<int>(*n);
  };
  int per_node = 0, nodes = 1;
  bool launched = false;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i];
    if (w == cmd.program || w.ends_with("/" + cmd.program)) break;
    std::string value;
    if (auto eq = w.find('='); eq != std::string::npos && w.starts_with("--")) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
    } else if (i + 1 < words.size()) {
      value = words[i + 1];
    }
    std::replace(w.begin(), w.end(), '-', '_');
    if (w == "__nproc_per_node" || w == "__num_gpus" || w == "__num_processes") {
      launched = true;
      if (auto n = int_of(value)) {
        per_node = *n;
      } else {
        Undecided("processes", fmt::format("{} {} is not a number", words[i], value), where);
      }
    } else if (w == "__nnodes" || w == "__num_nodes" || w == "__num_machines") {
      if (auto n = int_of(value)) nodes = *n;
    } else if (w == "__mixed_precision") {
      std::string v = Lower(value);
      if (v == "bf16") {
        Set(facts_.precision, Precision::kMixedBf16, where,
            "accelerate launch --mixed_precision bf16", kRankLauncher);
      }
      if (v == "fp16") {
        Set(facts_.precision, Precision::kMixedFp16, where,
            "accelerate launch --mixed_precision fp16", kRankLauncher);
      }
    } else if (w == "__use_fsdp") {
      Set(facts_.zero_stage, 3, where, "accelerate launch --use_fsdp", kRankLauncher);
      Set(facts_.parallelism, std::string("FSDP"), where, "accelerate launch --use_fsdp",
          kRankLauncher);
    } else if (w == "__zero_stage") {
      if (auto n = ParseNumber(value)) {
        Set(facts_.zero_stage, static_cast<int>(*n), where, "accelerate launch --zero_stage",
            kRankLauncher);
      }
    } else if (w == "__deepspeed_config_file" ||
               (w == "__config_file" && cmd.launcher == "accelerate")) {
      // A DeepSpeed JSON, or `accelerate launch --config_file ds_zero3.yaml`: the launcher's own
      // settings (distributed_type, deepspeed_config, fsdp_config, num_processes), both read in
      // ExtractConfigs.
      config_refs_.push_back(value);
    }
  }
  const std::string& l = cmd.launcher;
  if (l == "torchrun" || l == "deepspeed" || l == "accelerate" || l == "tune") {
    if (per_node == 0 && (l == "deepspeed" || !launched)) {
      // deepspeed uses every GPU of the node; torchrun, accelerate and tune default to one
      // process.
      per_node = l == "deepspeed"
                     ? std::max(1, gpus_requested_ / std::max(1, script.request.nodes.value_or(1)))
                     : 1;
      facts_.processes.how = "launcher default";
      launcher_default_processes_ = true;
    }
    Set(facts_.processes, per_node * nodes, where,
        fmt::format("{}: {} per node × {} node{}", l, per_node, nodes, nodes == 1 ? "" : "s"),
        kRankLauncher);
  } else if (l == "srun" || l == "mpirun" || l == "mpiexec") {
    int tasks = script.ntasks.value_or(script.ntasks_per_node.value_or(1) *
                                       script.request.nodes.value_or(1));
    Set(facts_.processes, tasks, where,
        fmt::format("{} starts {} task{}", l, tasks, tasks == 1 ? "" : "s"), kRankLauncher);
  } else {
    Set(facts_.processes, 1, where, "one Python process", kRankName);
  }
}

std::optional<std::string> Analyzer::ResolveModule(std::string_view module, int from_file) const {
  std::string path(module);
  size_t leading_dots = 0;
  while (leading_dots < path.size() && path[leading_dots] == '.') ++leading_dots;
  path = path.substr(leading_dots);
  std::replace(path.begin(), path.end(), '.', '/');
  std::vector<fs::path> roots;
  if (from_file >= 0) roots.push_back(fs::path(files_[from_file].name).parent_path());
  roots.emplace_back("");
  for (const auto& root : roots) {
    for (const std::string suffix : {".py", "/__init__.py", "/__main__.py"}) {
      if (path.empty() && suffix == ".py") continue;
      fs::path rel = (root / (path + suffix)).lexically_normal();
      std::error_code ec;
      if (fs::is_regular_file(fs::path(code_dir_) / rel, ec)) return rel.string();
    }
  }
  return std::nullopt;
}

void Analyzer::AddFile(const std::string& rel) {
  if (static_cast<int>(files_.size()) >= kMaxCodeFiles || !seen_files_.insert(rel).second) return;
  auto ready = ahead_ ? ahead_->Take(rel) : std::nullopt;
  if (!ready) {
    // Read at most one byte past the limit, without zero-filling the limit up front.
    auto text = ParseAhead::ReadSource(fs::path(code_dir_) / rel);
    if (!text) {
      facts_.parse_errors.push_back(fmt::format("{}: cannot be read", rel));
      return;
    }
    ready.emplace(PythonTree::Parse(std::move(*text)));
  }
  StatusOr<PythonTree>& tree = *ready;
  if (!tree.ok()) {
    facts_.parse_errors.push_back(fmt::format("{}: {}", rel, tree.status().message()));
    return;
  }
  for (int line : tree->error_lines()) {
    facts_.parse_errors.push_back(
        fmt::format("{}:{}: syntax error; facts come from the rest of the file", rel, line));
  }
  files_.push_back({rel, std::move(*tree)});
  facts_.files.push_back(rel);
  Walk(static_cast<int>(files_.size()) - 1);
}

void Analyzer::Walk(int file) {
  TSTreeCursor cursor = ts_tree_cursor_new(files_[file].tree.Root());
  std::vector<TSNode> ancestors;  // of the cursor's node, outermost first
  bool more = true;
  while (more) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    std::string_view type = TypeOf(n);
    if (type == "import_statement" || type == "import_from_statement") {
      OnImport(file, n);
    } else if (type == "call") {
      OnCall(file, n, ancestors);
    } else if (type == "assignment") {
      TSNode left = Field(n, "left");
      TSNode right = Field(n, "right");
      if (!ts_node_is_null(right) &&
          (TypeOf(left) == "identifier" || TypeOf(left) == "attribute")) {
        Bind(file, files_[file].tree.Text(left), right);
        BindField(file, n);
      }
    } else if (type == "default_parameter" || type == "typed_default_parameter") {
      BindDefault(file, n);
    } else if (type == "string") {
      std::string_view t = files_[file].tree.Text(n);
      if (t.size() > 2) {
        std::string s(t.substr(1, t.size() - 2));
        if (s.ends_with(".yaml") || s.ends_with(".yml") || s.ends_with(".json")) {
          config_refs_.push_back(s);
        }
      }
    }
    if (ts_tree_cursor_goto_first_child(&cursor)) {
      ancestors.push_back(n);
      continue;
    }
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        more = false;
        break;
      }
      ancestors.pop_back();
    }
  }
  ts_tree_cursor_delete(&cursor);
}

void Analyzer::Bind(int file, std::string_view name, TSNode value) {
  bindings_[Collapse(name)].push_back({file, value});
}

void Analyzer::BindField(int file, TSNode assignment) {
  // `class GPTConfig: n_embd: int = 768` (a dataclass): GPTConfig(n_embd=…) may pass a value.
  TSNode stmt = ts_node_parent(assignment);
  TSNode body = ts_node_is_null(stmt) ? stmt : ts_node_parent(stmt);
  TSNode cls = ts_node_is_null(body) ? body : ts_node_parent(body);
  if (ts_node_is_null(cls) || TypeOf(cls) != "class_definition" ||
      TypeOf(Field(assignment, "left")) != "identifier") {
    return;
  }
  auto& list = bindings_[Collapse(Text(file, Field(assignment, "left")))];
  list.back().owner = Text(file, Field(cls, "name"));
  list.back().field = true;
  int index = 0;
  for (uint32_t i = 0; i < NamedCount(body); ++i) {
    TSNode s = Named(body, i);
    if (ts_node_eq(s, stmt)) {
      list.back().position = index;
      break;
    }
    if (TypeOf(s) == "expression_statement" && TypeOf(Named(s, 0)) == "assignment") ++index;
  }
}

void Analyzer::BindDefault(int file, TSNode param) {
  TSNode name = Field(param, "name");
  TSNode value = Field(param, "value");
  if (ts_node_is_null(value) || ts_node_is_null(name)) return;
  Binding b{file, value};
  TSNode params = ts_node_parent(param);
  TSNode fn = ts_node_parent(params);
  if (!ts_node_is_null(fn) && TypeOf(fn) == "function_definition") {
    b.owner = Text(file, Field(fn, "name"));
    // A method's call sites name its class (`Model(d_model=…)`) and do not pass self.
    TSNode up = ts_node_parent(fn);
    if (!ts_node_is_null(up) && TypeOf(up) == "decorated_definition") up = ts_node_parent(up);
    TSNode cls = ts_node_is_null(up) ? up : ts_node_parent(up);
    bool method = !ts_node_is_null(cls) && TypeOf(cls) == "class_definition";
    if (method && b.owner == "__init__") b.owner = Text(file, Field(cls, "name"));
    int index = method ? -1 : 0;
    for (uint32_t i = 0; i < NamedCount(params); ++i) {
      TSNode p = Named(params, i);
      std::string_view t = TypeOf(p);
      if (t == "list_splat_pattern" || t == "dictionary_splat_pattern" ||
          t == "keyword_separator") {
        break;
      }
      if (ts_node_eq(p, param)) {
        b.position = index;
        break;
      }
      ++index;
    }
  }
  bindings_[Collapse(files_[file].tree.Text(name))].push_back(std::move(b));
}

void Analyzer::OnImport(int file, TSNode node) {
  std::vector<std::string> modules;
  TSNode from = Field(node, "module_name");
  if (!ts_node_is_null(from)) {
    std::string module = Text(file, from);
    modules.push_back(module);
    // `from . import models` and `from pkg import sub` may name modules too.
    for (uint32_t i = 0; i < NamedCount(node); ++i) {
      TSNode child = Named(node, i);
      if (ts_node_eq(child, from) || TypeOf(child) != "dotted_name") continue;
      std::string sub = Text(file, child);
      modules.push_back(module.ends_with(".") ? module + sub : module + "." + sub);
    }
  } else {
    for (uint32_t i = 0; i < NamedCount(node); ++i) {
      TSNode child = Named(node, i);
      if (TypeOf(child) == "aliased_import") child = Field(child, "name");
      modules.push_back(Text(file, child));
    }
  }
  for (const auto& m : modules) {
    imports_.emplace_back(m, Where(file, node));
    if (auto local = ResolveModule(m, file)) AddFile(*local);
  }
}

void Analyzer::OnCall(int file, TSNode node, const std::vector<TSNode>& ancestors) {
  TSNode fn = Field(node, "function");
  CallSite c;
  c.callee = Collapse(files_[file].tree.Text(fn));
  c.node = node;
  c.file = file;
  TSNode child = node;
  for (size_t i = ancestors.size(); i-- > 0; child = ancestors[i]) {
    std::string_view type = TypeOf(ancestors[i]);
    if (!IsScope(type)) continue;
    c.scopes.emplace_back(ancestors[i], child);
    if (type == "function_definition" || type == "class_definition") break;
  }
  calls_.push_back(std::move(c));
  CallSite& back = calls_.back();
  back.name = std::string(LastPart(back.callee));
  if (back.name != "add_argument") return;
  ArgparseOption opt;
  opt.file = file;
  opt.line = LineOf(node);
  TSNode args = Field(node, "arguments");
  for (uint32_t i = 0; i < NamedCount(args); ++i) {
    TSNode a = Named(args, i);
    if (TypeOf(a) == "string") {
      std::string_view t = files_[file].tree.Text(a);
      if (t.size() > 2) opt.flags.emplace_back(t.substr(1, t.size() - 2));
    } else if (TypeOf(a) == "keyword_argument") {
      std::string key = Text(file, Field(a, "name"));
      TSNode value = Field(a, "value");
      if (key == "default") {
        opt.default_node = value;
        opt.has_default = true;
      } else if (key == "dest") {
        std::string_view t = files_[file].tree.Text(value);
        if (t.size() > 2) opt.dest = std::string(t.substr(1, t.size() - 2));
      } else if (key == "action") {
        std::string_view t = files_[file].tree.Text(value);
        opt.store_true = t.find("store_true") != std::string_view::npos;
        opt.store_false = t.find("store_false") != std::string_view::npos;
      }
    }
  }
  if (opt.flags.empty()) return;
  if (opt.dest.empty()) {
    std::string best = opt.flags[0];
    for (const auto& f : opt.flags) {
      if (f.starts_with("--")) {
        best = f;
        break;
      }
    }
    while (best.starts_with("-")) best.erase(0, 1);
    std::replace(best.begin(), best.end(), '-', '_');
    opt.dest = best;
  }
  options_.push_back(std::move(opt));
}

void Analyzer::ApplyCommandLine() {
  const auto& args = facts_.args;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!a.starts_with("-") && a.ends_with(".py") && (i == 0 || !args[i - 1].starts_with("-"))) {
      // A Python config named on the command line (MMDetection's tools/train.py CONFIG): read
      // as part of the program.
      std::error_code ec;
      if (fs::is_regular_file(fs::path(code_dir_) / a, ec)) AddFile(fs::path(a).lexically_normal());
      continue;
    }
    if (!a.starts_with("-") || a == "-" || a == "--") continue;
    std::string flag = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const ArgparseOption* opt = nullptr;
    for (const auto& o : options_) {
      if (std::find(o.flags.begin(), o.flags.end(), flag) != o.flags.end()) opt = &o;
    }
    std::string dest;
    if (opt != nullptr) {
      dest = opt->dest;
      if (opt->store_true || opt->store_false) {
        value = opt->store_true ? "true" : "false";
        has_value = true;
      }
    } else {
      // Not declared with argparse (HfArgumentParser dataclasses, click, fire): the flag's name.
      dest = flag;
      while (dest.starts_with("-")) dest.erase(0, 1);
      std::replace(dest.begin(), dest.end(), '-', '_');
    }
    if (!has_value) {
      if (i + 1 < args.size() && !args[i + 1].starts_with("--")) {
        value = args[++i];
      } else {
        value = "true";
      }
    }
    cmdline_[dest] = {flag, value};
    if (value.ends_with(".yaml") || value.ends_with(".yml") || value.ends_with(".json")) {
      config_refs_.insert(config_refs_.begin(), value);
    }
  }
}

void Analyzer::LoadConfigs() {
  for (const auto& ref : config_refs_) {
    if (static_cast<int>(configs_.size()) >= kMaxConfigFiles) break;
    if (ref.find('{') != std::string::npos) continue;  // an f-string
    std::vector<fs::path> candidates = {fs::path(ref)};
    if (!files_.empty()) {
      candidates.push_back(fs::path(files_[0].name).parent_path() / ref);
    }
    for (const auto& c : candidates) {
      fs::path full = c.is_absolute() ? c : fs::path(code_dir_) / c;
      std::error_code ec;
      if (!fs::is_regular_file(full, ec)) continue;
      std::string shown = c.is_absolute() ? c.string() : c.lexically_normal().string();
      if (!loaded_configs_.insert(shown).second) break;
      auto cfg = LoadConfigFile(full.string(), shown);
      if (cfg.ok()) {
        configs_.push_back(std::move(*cfg));
        facts_.files.push_back(shown);
      } else {
        facts_.parse_errors.push_back(cfg.status().message());
      }
      break;
    }
  }
}

}  // namespace rightsize::code::internal

#include "code/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "code/config_file.h"
#include "code/model_zoo.h"
#include "code/python_tree.h"

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

int CodeFacts::DataParallelGpus() const {
  if (!parallelism.known() || *parallelism.value == "none") return 1;
  return std::max(1, processes.value.value_or(1));
}

namespace {

// Evidence ranks: a later, stronger source replaces an earlier, weaker one.
constexpr int kRankName = 0;      // a variable named like the fact (`batch_size = 32`)
constexpr int kRankDefault = 1;   // a library's default (HF Trainer: 8 per device)
constexpr int kRankCall = 2;      // an argument of the call that uses it (DataLoader)
constexpr int kRankConfig = 3;    // a DeepSpeed/launcher config that overrides the code
constexpr int kRankLauncher = 4;  // the launcher's own options

template <typename T>
bool Set(Fact<T>& f, T value, SourceLine where, std::string how, int rank) {
  if (f.known() && f.rank > rank) return false;
  f.value = std::move(value);
  f.where = std::move(where);
  f.how = std::move(how);
  f.rank = rank;
  f.assumed = false;
  return true;
}

template <typename T>
void Assume(Fact<T>& f, T value, std::string how) {
  if (f.known()) return;
  f.value = std::move(value);
  f.how = "assumed: " + std::move(how);
  f.assumed = true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Collapse(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r' && c != '\\') out += c;
  }
  return out;
}

std::string_view LastPart(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

std::optional<double> ParseNumber(std::string_view text) {
  std::string t;
  for (char c : text) {
    if (c != '_') t += c;
  }
  if (t.empty()) return std::nullopt;
  double v = 0;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    int64_t i = 0;
    auto r = std::from_chars(t.data() + 2, t.data() + t.size(), i, 16);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
    return static_cast<double>(i);
  }
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

// A value the analysis could work out, with the line it was written on.
struct Value {
  enum class Kind { kUnknown, kNone, kBool, kNumber, kString, kName };
  Kind kind = Kind::kUnknown;
  double number = 0;
  std::string text;  // strings, and dotted names such as torch.bfloat16
  SourceLine origin;
  std::string how;     // "argparse default", "--lr on the command line", "configs/a.yaml"
  std::string reason;  // why unknown

  bool known() const { return kind != Kind::kUnknown; }
  bool IsNumber() const { return kind == Kind::kNumber; }
  bool Truthy() const {
    return (kind == Kind::kBool || kind == Kind::kNumber) ? number != 0
           : kind == Kind::kString                        ? !text.empty()
                                                          : false;
  }
  static Value Unknown(std::string reason) {
    Value v;
    v.reason = std::move(reason);
    return v;
  }
};

// Python's truth of a value the analysis knows; nullopt when it is unknown.
std::optional<bool> TruthOf(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUnknown:
      return std::nullopt;
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kName:
      return true;  // torch.bfloat16 and other objects
    default:
      return v.Truthy();
  }
}

Value BoolValue(bool b, SourceLine origin) {
  Value v;
  v.kind = Value::Kind::kBool;
  v.number = b ? 1 : 0;
  v.origin = std::move(origin);
  return v;
}

// A scalar from the command line or a config file: a number, a boolean, null or a string.
Value FromText(std::string_view text, SourceLine origin, std::string how) {
  Value v;
  v.origin = std::move(origin);
  v.how = std::move(how);
  std::string lower = Lower(text);
  if (auto n = ParseNumber(text)) {
    v.kind = Value::Kind::kNumber;
    v.number = *n;
  } else if (lower == "true" || lower == "false") {
    v.kind = Value::Kind::kBool;
    v.number = lower == "true" ? 1 : 0;
  } else if (lower == "null" || lower == "none" || lower == "~") {
    v.kind = Value::Kind::kNone;
  } else {
    v.kind = Value::Kind::kString;
    v.text = std::string(text);
  }
  return v;
}

// Splits a command's text into words the way a shell would for plain quoting.
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

struct ArgparseOption {
  std::vector<std::string> flags;  // {"--batch_size", "--bs"}
  std::string dest;
  TSNode default_node{};
  bool has_default = false;
  bool store_true = false, store_false = false;
  int file = 0;
  int line = 0;
};

struct CallSite {
  std::string callee;  // the function as written, spaces removed: "torch.optim.AdamW"
  std::string name;    // its last part: "AdamW"
  TSNode node;
  int file = 0;
  // The enclosing nodes that decide whether and how often the call runs (if/elif, `x if c else
  // y`, loops, comprehensions), innermost first, each with its child on the way down, up to the
  // nearest function or class definition: noted during the walk, because tree-sitter finds a
  // node's parent by descending from the root every time.
  std::vector<std::pair<TSNode, TSNode>> scopes;
};

bool IsScope(std::string_view type) {
  return type == "if_statement" || type == "elif_clause" || type == "conditional_expression" ||
         type == "for_statement" || type == "list_comprehension" ||
         type == "generator_expression" || type == "function_definition" ||
         type == "class_definition";
}

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
    std::unique_lock lock(mu_);
    auto it = files_.find(fs::path(rel).lexically_normal().generic_string());
    if (it == files_.end()) return std::nullopt;
    Entry& e = it->second;
    if (e.state == State::kPending) {
      e.state = State::kTaken;
      return std::nullopt;
    }
    done_.wait(lock, [&] { return e.state != State::kParsing; });
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
        std::lock_guard lock(mu_);
        e = &files_.at(*rel);
        if (e->state != State::kPending) continue;
        e->state = State::kParsing;
      }
      std::optional<StatusOr<PythonTree>> result;
      if (auto text = ReadSource(fs::path(dir_) / *rel)) {
        result.emplace(PythonTree::Parse(std::move(*text)));
      }
      std::lock_guard lock(mu_);
      e->result = std::move(result);
      e->state = State::kDone;
      done_.notify_all();
    }
  }

  std::string dir_;
  std::map<std::string, Entry> files_;  // by normalised relative path
  std::vector<const std::string*> order_;
  std::mutex mu_;
  std::condition_variable done_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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

class Analyzer {
 public:
  Analyzer(std::string code_dir, std::string script_name)
      : code_dir_(std::move(code_dir)), script_name_(std::move(script_name)) {}

  StatusOr<CodeFacts> Run(const JobScript& script);

 private:
  struct File {
    std::string name;  // relative to the code folder
    PythonTree tree;
  };
  std::unique_ptr<ParseAhead> ahead_;  // started once the entry file is known
  struct Binding {
    int file;
    TSNode value;
    // A parameter's default: the function (or, for __init__, the class) whose call sites may
    // pass a value for it, and the parameter's position there (-1 when keyword-only or *args).
    std::string owner;
    int position = -1;
    bool field = false;  // a class attribute: a dataclass field (`n_embd: int = 768`)
  };
  // Whether a call or statement runs, as far as its if/elif/else and `x if c else y`
  // conditions can be evaluated.
  enum class Reach { kRuns, kDead, kConditional };

  // ---- reading ----
  Status FindEntry(const JobScript& script);
  void ReadLauncherOptions(const JobScript& script, const JobScript::Command& cmd);
  std::optional<std::string> ResolveModule(std::string_view module, int from_file) const;
  void AddFile(const std::string& rel);
  void Walk(int file);
  void OnImport(int file, TSNode node);
  void OnCall(int file, TSNode node, const std::vector<TSNode>& ancestors);
  void Bind(int file, std::string_view name, TSNode value);
  void BindDefault(int file, TSNode param);
  void BindField(int file, TSNode assignment);
  void ApplyCommandLine();
  void LoadConfigs();

  // ---- evaluating ----
  Value Eval(int file, TSNode node, int depth) const;
  Value EvalName(int file, std::string_view name, int depth) const;
  Value EvalAttribute(int file, TSNode node, int depth) const;
  Value EvalCall(int file, TSNode node, int depth) const;
  Value EvalComparison(int file, TSNode node, int depth) const;
  Value EvalDictLookup(int file, TSNode dict, const Value& key, TSNode fallback, int depth) const;
  Value PassedArgument(const Binding& b, std::string_view name, int depth) const;
  Value SplatArgument(const CallSite& c, std::string_view name, int depth) const;
  Value FieldValue(std::string_view owner, std::string_view name) const;
  Reach ReachOf(const CallSite& c, std::string* condition, int depth = 0) const;
  Reach FunctionReach(int file, TSNode function, std::string* condition, int depth) const;
  // How many times a call runs while the model is built: the trip counts of the loops and
  // comprehensions around it, times how often its function (for __init__, its class) is called.
  double Multiplicity(const CallSite& c, int depth = 0) const;
  // Whether a call in `loop`'s body leaves one more live object each trip: yes when its value
  // is an argument or element; when it is bound to a name, only if the loop keeps that name
  // (appends it, adds it as a module). `for fold in range(5): model = Net()` holds one model.
  bool KeptEachTrip(const CallSite& c, TSNode loop) const;
  double TripCount(int file, TSNode iterable, int depth) const;
  double CallCount(int file, TSNode function, int depth) const;
  Value ArgValue(const ArgparseOption& opt, int depth) const;
  Value ConfigValueOf(std::string_view dotted) const;
  TSNode Kw(int file, TSNode call, std::string_view name) const;
  TSNode Pos(TSNode call, uint32_t index) const;
  Value KwValue(const CallSite& c, std::string_view name) const;
  SourceLine Where(int file, TSNode node) const { return {files_[file].name, LineOf(node)}; }
  SourceLine Where(const CallSite& c) const { return Where(c.file, c.node); }
  std::string Text(int file, TSNode node) const {
    return std::string(files_[file].tree.Text(node));
  }

  // ---- facts ----
  void Extract();
  void ExtractFrameworks();
  void ExtractCall(const CallSite& c);
  void ExtractModelCall(const CallSite& c);
  void ExtractConfigs();
  void ExtractFallbacks();
  void ResolveVocabulary();
  template <typename T>
  void SetNumber(Fact<T>& f, const Value& v, const SourceLine& use, const std::string& what,
                 int rank);
  void Undecided(const std::string& what, const std::string& reason, SourceLine where);
  void SetTransformer(const TransformerSpec& spec, SourceLine where, const std::string& how,
                      int rank);
  // Set, for a call under a condition the analysis could not evaluate (branch_condition_):
  // the fact is marked assumed and does not replace one read outside any such branch.
  template <typename T>
  void SetInBranch(Fact<T>& f, T value, SourceLine where, const std::string& how, int rank);

  std::string code_dir_, script_name_;
  CodeFacts facts_;
  std::vector<File> files_;
  std::set<std::string> seen_files_;
  std::unordered_map<std::string, std::vector<Binding>> bindings_;
  std::vector<ArgparseOption> options_;
  std::vector<CallSite> calls_;
  std::vector<std::pair<std::string, SourceLine>> imports_;
  std::vector<std::string> config_refs_;  // file names mentioned in strings and arguments
  std::vector<ConfigFile> configs_;
  std::set<std::string> loaded_configs_;
  std::map<std::string, std::pair<std::string, std::string>> cmdline_;  // dest -> (flag, value)
  std::map<std::string, Undetermined> pending_;                         // what -> why unknown
  std::string branch_condition_;  // the undecided condition around the call being read
  // FunctionReach by (file, start byte of the definition): whether its call sites run.
  mutable std::map<std::pair<int, uint32_t>, std::pair<Reach, std::string>> function_reach_;
  std::vector<std::pair<Value, SourceLine>> embedding_rows_;  // nn.Embedding sizes over 1000
  std::vector<double> linear_outputs_;                        // nn.Linear out_features
  bool tied_head_ = false;  // F.linear(x, emb.weight): logits over an embedding's rows
  // nn.TransformerEncoderLayer / nn.TransformerDecoderLayer sizes, and the layers the
  // nn.TransformerEncoder / nn.TransformerDecoder / nn.Transformer stacks built from them hold.
  double encoder_layer_params_ = 0, decoder_layer_params_ = 0, nn_transformer_params_ = 0;
  double encoder_layers_ = 0, decoder_layers_ = 0, stacked_layers_ = 0;
  double linear_params_ = 0, embedding_params_ = 0;
  SourceLine linear_where_, layer_where_;
  int gpus_requested_ = 0;
  std::map<std::string, std::string> env_;
};

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
    } else if (w == "__deepspeed_config_file") {
      config_refs_.push_back(value);
    }
  }
  const std::string& l = cmd.launcher;
  if (l == "torchrun" || l == "deepspeed" || l == "accelerate") {
    if (per_node == 0 && (l == "deepspeed" || !launched)) {
      // deepspeed uses every GPU of the node; torchrun and accelerate default to one process.
      per_node = l == "deepspeed"
                     ? std::max(1, gpus_requested_ / std::max(1, script.request.nodes.value_or(1)))
                     : 1;
      facts_.processes.how = "launcher default";
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

// ---------------------------------------------------------------------------------------------
// Evaluating: constant folding over literals, names, argparse options and config files.

constexpr int kMaxDepth = 12;

Value Analyzer::Eval(int file, TSNode node, int depth) const {
  if (ts_node_is_null(node)) return Value::Unknown("no value");
  if (depth > kMaxDepth) return Value::Unknown("defined through too many names");
  std::string_view type = TypeOf(node);
  std::string_view text = files_[file].tree.Text(node);
  Value v;
  v.origin = Where(file, node);
  if (type == "integer" || type == "float") {
    auto n = ParseNumber(text);
    if (!n) return Value::Unknown(fmt::format("{} is not a plain number", text));
    v.kind = Value::Kind::kNumber;
    v.number = *n;
    return v;
  }
  if (type == "true" || type == "false") {
    v.kind = Value::Kind::kBool;
    v.number = type == "true" ? 1 : 0;
    return v;
  }
  if (type == "none") {
    v.kind = Value::Kind::kNone;
    return v;
  }
  if (type == "string") {
    size_t quote = text.find_first_of("'\"");
    if (quote == std::string_view::npos) return Value::Unknown("not a plain string");
    std::string_view prefix = text.substr(0, quote);
    if (prefix.find_first_of("fF") != std::string_view::npos) {
      return Value::Unknown(fmt::format("{} is an f-string", text));
    }
    std::string_view body = text.substr(quote);
    size_t q = body.starts_with("\"\"\"") || body.starts_with("'''") ? 3 : 1;
    if (text.size() < quote + 2 * q) return Value::Unknown("not a plain string");
    v.kind = Value::Kind::kString;
    v.text = std::string(text.substr(quote + q, text.size() - quote - 2 * q));
    return v;
  }
  if (type == "identifier") return EvalName(file, text, depth);
  if (type == "attribute") return EvalAttribute(file, node, depth);
  if (type == "parenthesized_expression") return Eval(file, Named(node, 0), depth + 1);
  if (type == "unary_operator") {
    Value inner = Eval(file, Field(node, "argument"), depth + 1);
    if (inner.IsNumber() && text.starts_with("-")) inner.number = -inner.number;
    return inner;
  }
  if (type == "binary_operator") {
    Value a = Eval(file, Field(node, "left"), depth + 1);
    Value b = Eval(file, Field(node, "right"), depth + 1);
    if (!a.IsNumber() || !b.IsNumber()) {
      return Value::Unknown(fmt::format("{}: {}", text, !a.known() ? a.reason : b.reason));
    }
    std::string_view op = files_[file].tree.Text(Field(node, "operator"));
    if (op == "+") {
      a.number += b.number;
    } else if (op == "-") {
      a.number -= b.number;
    } else if (op == "*") {
      a.number *= b.number;
    } else if (op == "/" && b.number != 0) {
      a.number /= b.number;
    } else if (op == "//" && b.number != 0) {
      a.number = std::floor(a.number / b.number);
    } else if (op == "**") {
      a.number = std::pow(a.number, b.number);
    } else {
      return Value::Unknown(fmt::format("{}: operator {} not folded", text, op));
    }
    a.how = a.how.empty() ? b.how : a.how;
    return a;
  }
  if (type == "call") return EvalCall(file, node, depth);
  if (type == "subscript" && TypeOf(Field(node, "value")) == "dictionary") {
    Value key = Eval(file, Field(node, "subscript"), depth + 1);
    if (!key.known()) return Value::Unknown(fmt::format("{}: {}", text, key.reason));
    Value found = EvalDictLookup(file, Field(node, "value"), key, TSNode{}, depth);
    return found.kind == Value::Kind::kNone ? Value::Unknown(fmt::format("{}: no such key", text))
                                            : found;
  }
  if (type == "subscript") {
    // cfg["train"]["batch_size"] -> train.batch_size in a config file.
    std::vector<std::string> keys;
    TSNode cur = node;
    while (TypeOf(cur) == "subscript") {
      Value key = Eval(file, Field(cur, "subscript"), depth + 1);
      if (key.kind != Value::Kind::kString) break;
      keys.insert(keys.begin(), key.text);
      cur = Field(cur, "value");
    }
    std::string_view root = files_[file].tree.Text(cur);
    if (root.find("environ") != std::string_view::npos) {
      return Value::Unknown(fmt::format("{} is read from the environment", text));
    }
    if (!keys.empty()) {
      std::string dotted;
      for (const auto& k : keys) dotted += (dotted.empty() ? "" : ".") + k;
      Value c = ConfigValueOf(dotted);
      if (c.known()) return c;
    }
    return Value::Unknown(fmt::format("{} is not a constant", text));
  }
  if (type == "conditional_expression") {
    // `a if cond else b`: named children are a, cond, b.
    auto truth = TruthOf(Eval(file, Named(node, 1), depth + 1));
    if (!truth) return Value::Unknown(fmt::format("{} depends on a condition", text));
    return Eval(file, Named(node, *truth ? 0 : 2), depth + 1);
  }
  if (type == "comparison_operator") return EvalComparison(file, node, depth);
  if (type == "not_operator") {
    auto truth = TruthOf(Eval(file, Field(node, "argument"), depth + 1));
    if (!truth) return Value::Unknown(fmt::format("{} is not a constant", text));
    return BoolValue(!*truth, v.origin);
  }
  if (type == "boolean_operator") {
    // Python's `and`/`or` give one of their operands; a known deciding side is enough.
    Value a = Eval(file, Field(node, "left"), depth + 1);
    std::string_view op = files_[file].tree.Text(Field(node, "operator"));
    auto ta = TruthOf(a);
    if (ta && (op == "and" ? !*ta : *ta)) return a;
    Value b = Eval(file, Field(node, "right"), depth + 1);
    if (ta) return b;
    auto tb = TruthOf(b);
    if (tb && op == "and" && !*tb) return b;
    if (tb && op == "or" && *tb) return b;
    return Value::Unknown(fmt::format("{}: {}", text, a.reason));
  }
  return Value::Unknown(fmt::format("{} is not a constant", text));
}

Value Analyzer::EvalComparison(int file, TSNode node, int depth) const {
  std::string_view text = files_[file].tree.Text(node);
  if (NamedCount(node) != 2) return Value::Unknown(fmt::format("{} is not folded", text));
  TSNode left = Named(node, 0), right = Named(node, 1);
  uint32_t start = ts_node_start_byte(node);
  std::string op = Collapse(text.substr(ts_node_end_byte(left) - start,
                                        ts_node_start_byte(right) - ts_node_end_byte(left)));
  Value a = Eval(file, left, depth + 1);
  if (!a.known()) return Value::Unknown(fmt::format("{}: {}", text, a.reason));
  auto same = [](const Value& x, const Value& y) {
    if (x.kind != y.kind) return false;
    if (x.kind == Value::Kind::kNumber || x.kind == Value::Kind::kBool) return x.number == y.number;
    return x.kind == Value::Kind::kNone || x.text == y.text;
  };
  if (op == "in" || op == "notin") {
    std::string_view rt = TypeOf(right);
    if (rt != "tuple" && rt != "list" && rt != "set") {
      return Value::Unknown(fmt::format("{} is not folded", text));
    }
    bool found = false;
    for (uint32_t i = 0; i < NamedCount(right); ++i) {
      Value e = Eval(file, Named(right, i), depth + 1);
      if (!e.known()) return Value::Unknown(fmt::format("{}: {}", text, e.reason));
      found = found || same(a, e);
    }
    return BoolValue(op == "in" ? found : !found, a.origin);
  }
  Value b = Eval(file, right, depth + 1);
  if (!b.known()) return Value::Unknown(fmt::format("{}: {}", text, b.reason));
  if (op == "==" || op == "is") return BoolValue(same(a, b), a.origin);
  if (op == "!=" || op == "isnot") return BoolValue(!same(a, b), a.origin);
  if (a.IsNumber() && b.IsNumber()) {
    if (op == "<") return BoolValue(a.number < b.number, a.origin);
    if (op == "<=") return BoolValue(a.number <= b.number, a.origin);
    if (op == ">") return BoolValue(a.number > b.number, a.origin);
    if (op == ">=") return BoolValue(a.number >= b.number, a.origin);
  }
  return Value::Unknown(fmt::format("{}: operator {} not folded", text, op));
}

Value Analyzer::EvalDictLookup(int file, TSNode dict, const Value& key, TSNode fallback,
                               int depth) const {
  for (uint32_t i = 0; i < NamedCount(dict); ++i) {
    TSNode pair = Named(dict, i);
    if (TypeOf(pair) != "pair") {
      return Value::Unknown("a dictionary built with ** is not folded");
    }
    Value k = Eval(file, Field(pair, "key"), depth + 1);
    if (!k.known()) return Value::Unknown(k.reason);
    bool match = k.kind == key.kind &&
                 (k.kind == Value::Kind::kString ? k.text == key.text : k.number == key.number);
    if (match) return Eval(file, Field(pair, "value"), depth + 1);
  }
  if (ts_node_is_null(fallback)) {
    Value none;
    none.kind = Value::Kind::kNone;
    none.origin = Where(file, dict);
    return none;
  }
  return Eval(file, fallback, depth + 1);
}

Value Analyzer::EvalName(int file, std::string_view name, int depth) const {
  auto it = bindings_.find(std::string(name));
  if (it != bindings_.end()) {
    // A value passed for a parameter at a call site wins over the parameter's default.
    for (const auto& b : it->second) {
      if (b.owner.empty()) continue;
      Value passed = PassedArgument(b, name, depth);
      if (passed.known()) return passed;
    }
    // The last binding in this file, else in any file (an imported constant).
    const Binding* pick = nullptr;
    for (const auto& b : it->second) {
      if (b.file == file) pick = &b;
    }
    if (pick == nullptr) pick = &it->second.back();
    Value v = Eval(pick->file, pick->value, depth + 1);
    if (v.known() || it->second.size() == 1) return v;
    for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) {
      Value other = Eval(b->file, b->value, depth + 1);
      if (other.known()) return other;
    }
    return v;
  }
  for (const auto& o : options_) {
    if (o.dest == name) return ArgValue(o, depth);
  }
  return Value::Unknown(fmt::format("{} is not assigned a constant", name));
}

Value Analyzer::PassedArgument(const Binding& b, std::string_view name, int depth) const {
  for (const auto& c : calls_) {
    if (c.name != b.owner || depth > kMaxDepth) continue;
    TSNode arg = Kw(c.file, c.node, name);
    if (ts_node_is_null(arg) && b.position >= 0) {
      arg = Pos(c.node, static_cast<uint32_t>(b.position));
    }
    if (ts_node_is_null(arg)) {
      // GPTConfig(**cfg["model"]): the key of that name in that section of a config file.
      Value splat = SplatArgument(c, name, depth);
      if (splat.known()) return splat;
      continue;
    }
    Value v = Eval(c.file, arg, depth + 1);
    if (!v.known()) continue;
    std::string passed = fmt::format("{}={} passed to {}() at {}", name, Text(c.file, arg),
                                     c.callee, Where(c).ToString());
    v.how = v.how.empty() ? passed : fmt::format("{}; {}", v.how, passed);
    if (v.origin.empty()) v.origin = Where(c);
    return v;
  }
  return Value::Unknown(fmt::format("no call of {}() passes {}", b.owner, name));
}

Value Analyzer::SplatArgument(const CallSite& c, std::string_view name, int depth) const {
  TSNode args = Field(c.node, "arguments");
  for (uint32_t i = 0; i < NamedCount(args); ++i) {
    TSNode a = Named(args, i);
    if (TypeOf(a) != "dictionary_splat") continue;
    std::vector<std::string> keys;
    TSNode cur = Named(a, 0);
    while (!ts_node_is_null(cur) && TypeOf(cur) == "subscript") {
      Value key = Eval(c.file, Field(cur, "subscript"), depth + 1);
      if (key.kind != Value::Kind::kString) return Value::Unknown("a computed key");
      keys.insert(keys.begin(), key.text);
      cur = Field(cur, "value");
    }
    if (keys.empty() || Text(c.file, cur).find("environ") != std::string::npos) continue;
    std::string dotted;
    for (const auto& k : keys) dotted += k + ".";
    Value v = ConfigValueOf(dotted + std::string(name));
    if (!v.known()) continue;
    v.how = fmt::format("{}; **{} passed to {}() at {}", v.how, Text(c.file, Named(a, 0)), c.callee,
                        Where(c).ToString());
    return v;
  }
  return Value::Unknown(fmt::format("no ** argument of {}() holds {}", c.callee, name));
}

Value Analyzer::FieldValue(std::string_view owner, std::string_view name) const {
  auto it = bindings_.find(std::string(name));
  if (it == bindings_.end()) return Value::Unknown(fmt::format("{} has no field {}", owner, name));
  for (const auto& b : it->second) {
    if (!b.field || b.owner != owner) continue;
    Value passed = PassedArgument(b, name, 0);
    if (passed.known()) return passed;
    Value v = Eval(b.file, b.value, 1);
    if (v.known() && v.how.empty()) v.how = fmt::format("{}.{} default", owner, name);
    return v;
  }
  return Value::Unknown(fmt::format("{} has no field {}", owner, name));
}

Value Analyzer::EvalAttribute(int file, TSNode node, int depth) const {
  std::string dotted = Collapse(files_[file].tree.Text(node));
  if (dotted.starts_with("torch.") || dotted.starts_with("jnp.") || dotted.starts_with("tf.")) {
    Value v;
    v.kind = Value::Kind::kName;
    v.text = dotted;
    v.origin = Where(file, node);
    return v;
  }
  if (bindings_.count(dotted) != 0) return EvalName(file, dotted, depth);
  std::string_view attr = LastPart(dotted);
  for (const auto& o : options_) {
    if (o.dest == attr) return ArgValue(o, depth);
  }
  if (auto c = cmdline_.find(std::string(attr)); c != cmdline_.end()) {
    return FromText(c->second.second, facts_.command,
                    fmt::format("{} {} on the command line", c->second.first, c->second.second));
  }
  // cfg.train.batch_size / self.hparams.batch_size: try the path below the root in the configs.
  size_t dot = dotted.find('.');
  std::string rest = dotted.substr(dot + 1);
  for (std::string path = rest;;) {
    Value c = ConfigValueOf(path);
    if (c.known()) return c;
    size_t d = path.find('.');
    if (d == std::string::npos) break;
    path = path.substr(d + 1);
  }
  if (auto b = bindings_.find(std::string(attr)); b != bindings_.end()) {
    bool field =
        std::any_of(b->second.begin(), b->second.end(), [](const Binding& x) { return x.field; });
    if (dotted.starts_with("self.") || field) return EvalName(file, attr, depth);
  }
  return Value::Unknown(fmt::format("{} is not a constant", dotted));
}

Value Analyzer::EvalCall(int file, TSNode node, int depth) const {
  std::string callee = Collapse(files_[file].tree.Text(Field(node, "function")));
  std::string_view name = LastPart(callee);
  if (name == "int" || name == "float" || name == "round" || name == "field") {
    TSNode kw = Kw(file, node, "default");
    return Eval(file, ts_node_is_null(kw) ? Pos(node, 0) : kw, depth + 1);
  }
  if (name == "min" || name == "max") {
    Value a = Eval(file, Pos(node, 0), depth + 1);
    Value b = Eval(file, Pos(node, 1), depth + 1);
    if (a.IsNumber() && b.IsNumber()) {
      a.number = name == "min" ? std::min(a.number, b.number) : std::max(a.number, b.number);
      return a;
    }
    return Value::Unknown(fmt::format("{} is not a constant", files_[file].tree.Text(node)));
  }
  if (name == "get" || name == "getenv") {
    if (callee.find("environ") != std::string::npos || name == "getenv") {
      Value d = Eval(file, Pos(node, 1), depth + 1);
      Value key = Eval(file, Pos(node, 0), depth + 1);
      if (key.kind == Value::Kind::kString) {
        if (auto it = env_.find(key.text); it != env_.end()) {
          return FromText(it->second, facts_.command,
                          fmt::format("${} set in the script", key.text));
        }
      }
      if (d.known()) d.how = fmt::format("default of ${}", key.text);
      return d.known() ? d
                       : Value::Unknown(fmt::format("${} is read from the environment", key.text));
    }
    Value key = Eval(file, Pos(node, 0), depth + 1);
    // {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    TSNode fn = Field(node, "function");
    TSNode owner = TypeOf(fn) == "attribute" ? Field(fn, "object") : TSNode{};
    int owner_file = file;
    if (!ts_node_is_null(owner) && TypeOf(owner) == "identifier") {
      auto b = bindings_.find(std::string(files_[file].tree.Text(owner)));
      if (b != bindings_.end() && TypeOf(b->second.back().value) == "dictionary") {
        owner_file = b->second.back().file;
        owner = b->second.back().value;
      }
    }
    if (!ts_node_is_null(owner) && TypeOf(owner) == "dictionary") {
      if (!key.known()) return Value::Unknown(fmt::format("the key of .get(): {}", key.reason));
      if (owner_file != file) return Value::Unknown("a dictionary in another file");
      return EvalDictLookup(file, owner, key, Pos(node, 1), depth);
    }
    if (key.kind == Value::Kind::kString) {
      Value c = ConfigValueOf(key.text);
      if (c.known()) return c;
    }
    return Eval(file, Pos(node, 1), depth + 1);
  }
  if (name == "getattr") {
    return Value::Unknown(fmt::format("{} is looked up at run time", files_[file].tree.Text(node)));
  }
  return Value::Unknown(fmt::format("{} is computed at run time", files_[file].tree.Text(node)));
}

Value Analyzer::ArgValue(const ArgparseOption& opt, int depth) const {
  if (auto it = cmdline_.find(opt.dest); it != cmdline_.end()) {
    return FromText(
        it->second.second, facts_.command,
        fmt::format("{} {} on the command line, over the argparse default at {}:{}",
                    it->second.first, it->second.second, files_[opt.file].name, opt.line));
  }
  // A config file named by the job that holds the option (the `parser.set_defaults(**cfg)`
  // pattern) overrides the argparse default.
  Value c = ConfigValueOf(opt.dest);
  if (c.known()) return c;
  if (opt.store_true || opt.store_false) {
    Value v;
    v.kind = Value::Kind::kBool;
    v.number = opt.store_false ? 1 : 0;
    v.origin = {files_[opt.file].name, opt.line};
    v.how = "argparse flag not given";
    return v;
  }
  if (!opt.has_default) {
    return Value::Unknown(fmt::format("{} has no default and is not on the command line",
                                      opt.flags.empty() ? opt.dest : opt.flags.back()));
  }
  Value v = Eval(opt.file, opt.default_node, depth + 1);
  if (v.known()) v.how = fmt::format("argparse default of {}", opt.flags.back());
  return v;
}

Value Analyzer::ConfigValueOf(std::string_view dotted) const {
  for (const auto& cfg : configs_) {
    if (auto v = cfg.Find(dotted)) {
      return FromText(v->text, {cfg.name, v->line}, cfg.name);
    }
  }
  return Value::Unknown(fmt::format("{} is in no config file read", dotted));
}

TSNode Analyzer::Kw(int file, TSNode call, std::string_view name) const {
  TSNode args = Field(call, "arguments");
  for (uint32_t i = 0; i < NamedCount(args); ++i) {
    TSNode a = Named(args, i);
    if (TypeOf(a) != "keyword_argument") continue;
    if (files_[file].tree.Text(Field(a, "name")) == name) return Field(a, "value");
  }
  return TSNode{};
}

TSNode Analyzer::Pos(TSNode call, uint32_t index) const {
  TSNode args = Field(call, "arguments");
  uint32_t seen = 0;
  for (uint32_t i = 0; i < NamedCount(args); ++i) {
    TSNode a = Named(args, i);
    std::string_view t = TypeOf(a);
    if (t == "keyword_argument" || t == "list_splat" || t == "dictionary_splat") continue;
    if (seen++ == index) return a;
  }
  return TSNode{};
}

Value Analyzer::KwValue(const CallSite& c, std::string_view name) const {
  TSNode n = Kw(c.file, c.node, name);
  if (ts_node_is_null(n)) return Value::Unknown("");  // absent: nothing to report
  return Eval(c.file, n, 0);
}

// ---------------------------------------------------------------------------------------------
// Facts

void Analyzer::Undecided(const std::string& what, const std::string& reason, SourceLine where) {
  pending_[what] = {what, reason, std::move(where)};
}

template <typename T>
void Analyzer::SetNumber(Fact<T>& f, const Value& v, const SourceLine& use, const std::string& what,
                         int rank) {
  if (!v.IsNumber()) {
    if ((!v.known() && !v.reason.empty()) || v.kind == Value::Kind::kNone) {
      if (!f.known() || f.rank < rank) Undecided(what, v.known() ? "None" : v.reason, use);
    }
    return;
  }
  SourceLine where = v.origin.empty() ? use : v.origin;
  std::string how = v.how.empty() ? std::string("written in the call") : v.how;
  if (where.file != use.file || where.line != use.line) {
    how = how.empty() ? fmt::format("used at {}", use.ToString())
                      : fmt::format("{}; used at {}", how, use.ToString());
  }
  if (Set(f, static_cast<T>(v.number), where, how, rank)) pending_.erase(what);
}

template <typename T>
void Analyzer::SetInBranch(Fact<T>& f, T value, SourceLine where, const std::string& how,
                           int rank) {
  if (branch_condition_.empty()) {
    Set(f, std::move(value), std::move(where), how, rank);
    return;
  }
  if (f.known() && !f.assumed && f.rank >= rank) return;
  if (Set(f, std::move(value), std::move(where),
          fmt::format("assumed: {}, under `{}`, which could not be evaluated", how,
                      branch_condition_),
          rank)) {
    f.assumed = true;
  }
}

Analyzer::Reach Analyzer::FunctionReach(int file, TSNode function, std::string* condition,
                                        int depth) const {
  auto key = std::make_pair(file, ts_node_start_byte(function));
  if (auto it = function_reach_.find(key); it != function_reach_.end()) {
    if (condition->empty()) *condition = it->second.second;
    return it->second.first;
  }
  // Unknown while it is being worked out, so that recursion ends.
  function_reach_[key] = {Reach::kRuns, ""};
  std::string name = Text(file, Field(function, "name"));
  bool called = false, runs = false, conditional = false;
  std::string why;
  for (const auto& c : calls_) {
    if (c.name != name || name.starts_with("__")) continue;
    called = true;
    std::string cond;
    Reach r = ReachOf(c, &cond, depth + 1);
    if (r == Reach::kRuns) {
      runs = true;
      break;
    }
    if (r == Reach::kConditional && !conditional) {
      conditional = true;
      why = cond;
    }
  }
  // A function never called by name here (forward, a callback, an entry point) is taken to run.
  Reach reach = !called || runs ? Reach::kRuns : conditional ? Reach::kConditional : Reach::kDead;
  if (reach != Reach::kConditional) why.clear();
  function_reach_[key] = {reach, why};
  if (condition->empty()) *condition = why;
  return reach;
}

Analyzer::Reach Analyzer::ReachOf(const CallSite& c, std::string* condition, int depth) const {
  const int file = c.file;
  Reach reach = Reach::kRuns;
  auto decide = [&](TSNode cond, bool wanted) {
    // `if __name__ == "__main__":` guards the program itself.
    std::optional<bool> truth = Text(file, cond).find("__name__") != std::string::npos
                                    ? std::optional<bool>(true)
                                    : TruthOf(Eval(file, cond, 0));
    if (!truth) {
      if (condition->empty()) *condition = Collapse(Text(file, cond));
      reach = reach == Reach::kDead ? reach : Reach::kConditional;
      return;
    }
    if (*truth != wanted) reach = Reach::kDead;
  };
  for (const auto& [up, child] : c.scopes) {
    if (reach == Reach::kDead) break;
    std::string_view type = TypeOf(up);
    if (type == "if_statement") {
      TSNode cond = Field(up, "condition");
      if (ts_node_eq(child, Field(up, "consequence"))) {
        decide(cond, true);
      } else if (!ts_node_eq(child, cond)) {
        // In an elif or else: every earlier condition was false.
        decide(cond, false);
        for (uint32_t i = 0; i < NamedCount(up) && reach != Reach::kDead; ++i) {
          TSNode clause = Named(up, i);
          if (ts_node_eq(clause, child)) break;
          if (TypeOf(clause) == "elif_clause") decide(Field(clause, "condition"), false);
        }
      }
    } else if (type == "elif_clause" && ts_node_eq(child, Field(up, "consequence"))) {
      decide(Field(up, "condition"), true);
    } else if (type == "conditional_expression" && NamedCount(up) == 3) {
      if (ts_node_eq(child, Named(up, 0))) decide(Named(up, 1), true);
      if (ts_node_eq(child, Named(up, 2))) decide(Named(up, 1), false);
    } else if (type == "function_definition") {
      // A function's body runs where it is called: `f(x) if args.grad_ckpt else g(x)`.
      if (depth < 3) {
        Reach called = FunctionReach(file, up, condition, depth);
        if (called == Reach::kDead) reach = Reach::kDead;
        if (called == Reach::kConditional && reach == Reach::kRuns) reach = called;
      }
      break;
    } else if (type == "class_definition") {
      break;
    }
  }
  return reach;
}

double Analyzer::TripCount(int file, TSNode iterable, int depth) const {
  std::string_view type = TypeOf(iterable);
  if (type == "list" || type == "tuple") return NamedCount(iterable);
  if (type != "call" || Collapse(Text(file, Field(iterable, "function"))) != "range") return 1;
  // range(n), range(a, b), range(a, b, step); a count that cannot be evaluated counts once.
  std::vector<double> bounds;
  for (uint32_t i = 0; i < 3; ++i) {
    TSNode a = Pos(iterable, i);
    if (ts_node_is_null(a)) break;
    Value v = Eval(file, a, depth + 1);
    if (!v.IsNumber()) return 1;
    bounds.push_back(v.number);
  }
  if (bounds.empty()) return 1;
  double from = bounds.size() > 1 ? bounds[0] : 0;
  double to = bounds.size() > 1 ? bounds[1] : bounds[0];
  double step = bounds.size() > 2 ? bounds[2] : 1;
  if (step == 0) return 1;
  return std::max(0.0, std::ceil((to - from) / step));
}

double Analyzer::CallCount(int file, TSNode function, int depth) const {
  std::string name = Text(file, Field(function, "name"));
  TSNode up = ts_node_parent(function);
  if (!ts_node_is_null(up) && TypeOf(up) == "decorated_definition") up = ts_node_parent(up);
  TSNode cls = ts_node_is_null(up) ? up : ts_node_parent(up);
  if (name == "__init__" && !ts_node_is_null(cls) && TypeOf(cls) == "class_definition") {
    name = Text(file, Field(cls, "name"));  // the class is called to build it
  } else if (name.starts_with("__") || name == "forward") {
    return 1;
  }
  // Each call that runs builds its own modules: `Block(cfg) for _ in range(n)` builds n. Of
  // calls under conditions that cannot be evaluated (`Net(a) if x else Net(b)`), one runs.
  double runs = 0, conditional = 0;
  for (const auto& c : calls_) {
    if (c.name != name) continue;
    std::string condition;
    Reach reach = ReachOf(c, &condition);
    if (reach == Reach::kDead) continue;
    double times = Multiplicity(c, depth + 1);
    if (reach == Reach::kRuns) {
      runs += times;
    } else {
      conditional = std::max(conditional, times);
    }
  }
  double total = runs > 0 ? runs : conditional;
  return total > 0 ? total : 1;  // never called by name here: built once (an entry point)
}

bool Analyzer::KeptEachTrip(const CallSite& c, TSNode loop) const {
  TSNode parent = ts_node_parent(c.node);
  if (ts_node_is_null(parent) || TypeOf(parent) != "assignment" ||
      !ts_node_eq(Field(parent, "right"), c.node)) {
    return true;  // an argument, an element: `layers.append(nn.Linear(h, h))`
  }
  // Bound to a name: kept only when the loop also appends it, adds it as a module, ….
  std::string name = Collapse(Text(c.file, Field(parent, "left")));
  TSNode body = Field(loop, "body");
  uint32_t from = ts_node_start_byte(body), to = ts_node_end_byte(body);
  for (const CallSite& k : calls_) {
    if (k.file != c.file || ts_node_start_byte(k.node) < from || ts_node_end_byte(k.node) > to) {
      continue;
    }
    if (k.name != "append" && k.name != "extend" && k.name != "insert" && k.name != "add_module" &&
        k.name != "setattr" && k.name != "register_module") {
      continue;
    }
    TSNode args = Field(k.node, "arguments");
    for (uint32_t i = 0; i < NamedCount(args); ++i) {
      if (Collapse(Text(c.file, Named(args, i))) == name) return true;
    }
  }
  return false;
}

double Analyzer::Multiplicity(const CallSite& c, int depth) const {
  const int file = c.file;
  if (depth > 4) return 1;  // deeper nesting (or recursion) counts once
  double times = 1;
  for (const auto& [up, child] : c.scopes) {
    std::string_view type = TypeOf(up);
    if (type == "for_statement" && ts_node_eq(child, Field(up, "body"))) {
      if (KeptEachTrip(c, up)) times *= TripCount(file, Field(up, "right"), depth);
    } else if ((type == "list_comprehension" || type == "generator_expression") &&
               ts_node_eq(child, Field(up, "body"))) {
      for (uint32_t i = 0; i < NamedCount(up); ++i) {
        TSNode clause = Named(up, i);
        if (TypeOf(clause) == "for_in_clause") {
          times *= TripCount(file, Field(clause, "right"), depth);
        }
      }
    } else if (type == "function_definition") {
      times *= CallCount(file, up, depth);
      break;
    } else if (type == "class_definition") {
      break;
    }
  }
  return times;
}

void Analyzer::SetTransformer(const TransformerSpec& spec, SourceLine where, const std::string& how,
                              int rank) {
  if (!Set(facts_.model, std::string(spec.key), where, how, rank)) return;
  facts_.architecture = Architecture::kTransformer;
  Set(facts_.layers, spec.layers, where, how, rank);
  Set(facts_.hidden, spec.hidden, where, how, rank);
  Set(facts_.heads, spec.heads, where, how, rank);
  Set(facts_.vocab, spec.vocab, where, how, rank);
  Set(facts_.ffn, spec.ffn, where, how, rank);
  Set(facts_.max_positions, spec.max_positions, where, how, rank);
  Set(facts_.parameters, spec.parameters, where, how, rank);
  pending_.erase("model");
  // Hugging Face picks SDPA for these families since transformers 4.36.
  if (spec.family == "llama" || spec.family == "mistral" || spec.family == "qwen2") {
    Set(facts_.fused_attention, true, where,
        fmt::format("transformers uses SDPA attention for {} by default", spec.family),
        kRankDefault);
  }
}

void Analyzer::ExtractFrameworks() {
  static constexpr std::pair<std::string_view, std::string_view> kFrameworks[] = {
      {"deepspeed", "DeepSpeed"},
      {"lightning", "Lightning"},
      {"pytorch_lightning", "Lightning"},
      {"accelerate", "HF Accelerate"},
      {"transformers", "HF Transformers"},
      {"jax", "JAX"},
      {"flax", "JAX"},
      {"tensorflow", "TensorFlow"},
      {"keras", "TensorFlow"},
      {"torch", "PyTorch"},
      {"torchvision", "PyTorch"},
  };
  int best = -1;
  for (const auto& [module, where] : imports_) {
    std::string_view root = std::string_view(module).substr(0, module.find('.'));
    for (int i = 0; i < static_cast<int>(std::size(kFrameworks)); ++i) {
      if (kFrameworks[i].first != root) continue;
      std::string name(kFrameworks[i].second);
      if (std::find(facts_.frameworks.begin(), facts_.frameworks.end(), name) ==
          facts_.frameworks.end()) {
        facts_.frameworks.push_back(name);
      }
      if (best < 0 || i < best) {
        best = i;
        facts_.framework = {};
        Set(facts_.framework, name, where, fmt::format("import {}", module), kRankCall);
      }
    }
  }
  if (!facts_.framework.known()) {
    Undecided("framework", "no deep-learning framework is imported", {facts_.entry, 0});
  }
}

void Analyzer::ExtractModelCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  // Hugging Face configs: GPT2Config(n_layer=…), LlamaConfig(…), AutoConfig.from_pretrained.
  bool config_ctor = name.ends_with("Config") && name != "BitsAndBytesConfig" &&
                     name != "LoraConfig" && name != "GenerationConfig" && name != "AutoConfig" &&
                     name != "PretrainedConfig" && name.find("Quant") == std::string_view::npos;
  if (config_ctor) {
    std::string family = Lower(name.substr(0, name.size() - 6));
    static const std::map<std::string, std::string, std::less<>> kDefaults = {
        {"gpt2", "gpt2"},          {"llama", "llama-2-7b"},     {"bert", "bert-base"},
        {"mistral", "mistral-7b"}, {"roberta", "roberta-base"}, {"opt", "opt-125m"}};
    TransformerSpec spec{};
    auto d = kDefaults.find(family);
    if (d != kDefaults.end()) spec = *FindTransformer(d->second);
    auto pick = [&](std::initializer_list<std::string_view> keys, int64_t* out) {
      for (auto k : keys) {
        Value v = KwValue(c, k);
        // A dataclass defined here (nanoGPT's GPTConfig): the value passed, else its default.
        if (ts_node_is_null(Kw(c.file, c.node, k))) v = FieldValue(name, k);
        if (v.IsNumber()) {
          *out = static_cast<int64_t>(v.number);
          return;
        }
        if (!ts_node_is_null(Kw(c.file, c.node, k))) {
          Undecided("model", fmt::format("{}= of {}: {}", k, name, v.reason), where);
        }
      }
    };
    pick({"n_layer", "num_hidden_layers", "num_layers"}, &spec.layers);
    pick({"n_embd", "hidden_size", "d_model"}, &spec.hidden);
    pick({"n_head", "num_attention_heads"}, &spec.heads);
    pick({"vocab_size"}, &spec.vocab);
    pick({"n_inner", "intermediate_size", "d_ff"}, &spec.ffn);
    pick({"n_positions", "max_position_embeddings", "block_size"}, &spec.max_positions);
    if (d == kDefaults.end() && (spec.layers == 0 || spec.hidden == 0)) {
      Undecided("model",
                fmt::format("{}: an unknown config class without n_layer/hidden_size", name),
                where);
      return;
    }
    if (spec.ffn == 0) spec.ffn = 4 * spec.hidden;
    bool gated = family == "llama" || family == "mistral";
    spec.parameters = TransformerParameters(spec.layers, spec.hidden, spec.ffn, spec.vocab,
                                            gated ? 0 : spec.max_positions, gated, !gated);
    spec.family = d != kDefaults.end() ? spec.family : "transformer";
    std::string label = fmt::format("{}({} layers, hidden {})", name, spec.layers, spec.hidden);
    std::string how = fmt::format("{} constructor", name);
    if (Set(facts_.model, label, where, how, kRankConfig)) {
      spec.key = "";
      SetTransformer(spec, where, how, kRankConfig);
      facts_.model.value = label;
    }
    return;
  }
  if (name == "from_pretrained" || name == "create_model" || name == "get_model") {
    std::string_view owner = c.callee;
    if (owner.find("Tokenizer") != std::string_view::npos ||
        owner.find("Processor") != std::string_view::npos ||
        owner.find("FeatureExtractor") != std::string_view::npos ||
        owner.find("ImageProcessor") != std::string_view::npos) {
      return;
    }
    Value id = Eval(c.file, Pos(c.node, 0), 0);
    if (ts_node_is_null(Pos(c.node, 0))) id = KwValue(c, "pretrained_model_name_or_path");
    if (id.kind != Value::Kind::kString) {
      if (!facts_.model.known()) {
        Undecided("model", fmt::format("the model name is not a constant ({})", id.reason), where);
      }
      return;
    }
    SourceLine origin = id.origin.empty() ? where : id.origin;
    std::string how = fmt::format("{}(\"{}\")", c.callee, id.text);
    if (auto v = FindVisionModel(id.text)) {
      if (Set(facts_.model, id.text, origin, how, kRankCall)) {
        facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
        Set(facts_.parameters, v->parameters, origin, how, kRankCall);
        pending_.erase("model");
      }
    } else if (auto spec = FindTransformer(id.text)) {
      // An explicit config (GPT2Config(…)) describes the model better than its name.
      if (!facts_.model.known() || facts_.model.rank < kRankConfig) {
        SetTransformer(*spec, origin, how, kRankCall);
      }
      if (c.callee.find("Config") == std::string::npos) {
        // Config overrides passed to from_pretrained.
        Value layers = KwValue(c, "n_layer");
        if (layers.IsNumber()) {
          Set(facts_.layers, static_cast<int64_t>(layers.number), where, how, kRankCall);
        }
      }
    } else if (!facts_.model.known()) {
      Undecided("model", fmt::format("{} is not in the table of known model sizes", id.text),
                origin);
    }
    Value dtype = KwValue(c, "torch_dtype");
    if (dtype.kind != Value::Kind::kName) dtype = KwValue(c, "dtype");
    if (dtype.kind == Value::Kind::kName) {
      if (dtype.text.ends_with("bfloat16")) {
        Set(facts_.precision, Precision::kBf16, where, "torch_dtype=torch.bfloat16", kRankDefault);
      }
      if (dtype.text.ends_with("float16") && !dtype.text.ends_with("bfloat16")) {
        Set(facts_.precision, Precision::kFp16, where, "torch_dtype=torch.float16", kRankDefault);
      }
    }
    if (KwValue(c, "load_in_8bit").Truthy()) {
      Set(facts_.precision, Precision::kInt8, where, "load_in_8bit=True", kRankConfig);
    }
    if (KwValue(c, "load_in_4bit").Truthy()) {
      Set(facts_.precision, Precision::kInt4, where, "load_in_4bit=True", kRankConfig);
    }
    Value attn = KwValue(c, "attn_implementation");
    if (attn.kind == Value::Kind::kString) {
      bool fused = attn.text != "eager";
      Set(facts_.fused_attention, fused, where,
          fmt::format("attn_implementation=\"{}\"", attn.text), kRankCall);
    }
    return;
  }
  // torchvision / timm constructors by name.
  if (auto v = FindVisionModel(name)) {
    if (Set(facts_.model, std::string(name), where, fmt::format("{}()", c.callee), kRankCall)) {
      facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
      Set(facts_.parameters, v->parameters, where, fmt::format("{}() size table", name), kRankCall);
      if (v->layers > 0) {
        Set(facts_.layers, v->layers, where, "ViT table", kRankCall);
        Set(facts_.hidden, v->hidden, where, "ViT table", kRankCall);
        Set(facts_.heads, v->heads, where, "ViT table", kRankCall);
        Set(facts_.fused_attention, true, where, "torchvision ViT attention uses SDPA",
            kRankDefault);
      }
      pending_.erase("model");
    }
    return;
  }
  // A model built by name at run time: getattr(models, name)(), models.__dict__[name]().
  TSNode fn = Field(c.node, "function");
  if (TypeOf(fn) == "call" || TypeOf(fn) == "subscript") {
    std::string inner = Collapse(files_[c.file].tree.Text(fn));
    if (inner.starts_with("getattr(") || inner.find("__dict__[") != std::string::npos) {
      TSNode arg = TypeOf(fn) == "call" ? Pos(fn, 1) : Field(fn, "subscript");
      Value chosen = Eval(c.file, arg, 0);
      if (chosen.kind == Value::Kind::kString) {
        if (auto v = FindVisionModel(chosen.text)) {
          std::string how = fmt::format("{} with {} = \"{}\" ({})", inner, Text(c.file, arg),
                                        chosen.text, chosen.how);
          if (Set(facts_.model, chosen.text, chosen.origin, how, kRankCall)) {
            facts_.architecture = v->layers > 0 ? Architecture::kVit : Architecture::kCnn;
            Set(facts_.parameters, v->parameters, chosen.origin, how, kRankCall);
            pending_.erase("model");
          }
          return;
        }
      }
      if (!facts_.model.known()) {
        Undecided("model",
                  fmt::format("built dynamically by {}: {}", inner,
                              chosen.known() ? "a name not in the size tables" : chosen.reason),
                  where);
      }
    }
    return;
  }
  // Hand-built PyTorch models.
  // nn.Transformer*Layer(d_model, nhead, dim_feedforward, …) and nn.Transformer(d_model, nhead,
  // num_encoder_layers, num_decoder_layers, dim_feedforward, …): PyTorch's positions.
  auto arg = [&](std::string_view key, uint32_t position) {
    TSNode kw = Kw(c.file, c.node, key);
    return Eval(c.file, ts_node_is_null(kw) ? Pos(c.node, position) : kw, 0);
  };
  auto given = [&](std::string_view key, uint32_t position) {
    return !ts_node_is_null(Kw(c.file, c.node, key)) || !ts_node_is_null(Pos(c.node, position));
  };
  bool nn_transformer = name == "Transformer" && c.callee.find("nn.") != std::string::npos;
  if (name == "TransformerEncoderLayer" || name == "TransformerDecoderLayer" || nn_transformer) {
    const uint32_t ffn_position = nn_transformer ? 4 : 2;
    Value d_model = arg("d_model", 0);
    Value nhead = arg("nhead", 1);
    Value ffn = arg("dim_feedforward", ffn_position);
    if (nn_transformer && !given("d_model", 0)) {
      d_model = FromText("512", where, "nn.Transformer default d_model=512");
    }
    if (nn_transformer && !given("nhead", 1)) {
      nhead = FromText("8", where, "nn.Transformer default nhead=8");
    }
    SetNumber(facts_.hidden, d_model, where, "model", kRankCall);
    SetNumber(facts_.heads, nhead, where, "model", kRankCall);
    if (ffn.IsNumber()) {
      SetNumber(facts_.ffn, ffn, where, "model", kRankCall);
    } else if (!ffn.known() && !given("dim_feedforward", ffn_position)) {
      Set(facts_.ffn, int64_t{2048}, where, "PyTorch default dim_feedforward=2048", kRankCall);
    }
    if (facts_.hidden.known() && facts_.ffn.known()) {
      auto h = static_cast<double>(*facts_.hidden.value);
      auto f = static_cast<double>(*facts_.ffn.value);
      // Self-attention (4h² + 4h), the two feed-forward layers, two LayerNorms; a decoder layer
      // adds cross-attention and a third LayerNorm.
      double encoder_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
      double decoder_layer = encoder_layer + 4 * h * h + 4 * h + 2 * h;
      double times = Multiplicity(c);
      if (nn_transformer) {
        Value enc = arg("num_encoder_layers", 2);
        Value dec = arg("num_decoder_layers", 3);
        double n_enc = enc.IsNumber() ? enc.number : 6;  // PyTorch's defaults
        double n_dec = dec.IsNumber() ? dec.number : 6;
        if ((!enc.IsNumber() && given("num_encoder_layers", 2)) ||
            (!dec.IsNumber() && given("num_decoder_layers", 3))) {
          Undecided(
              "model",
              fmt::format("nn.Transformer layers: {}", !enc.IsNumber() ? enc.reason : dec.reason),
              where);
        }
        // Both stacks and their final LayerNorms.
        nn_transformer_params_ += times * (n_enc * encoder_layer + n_dec * decoder_layer + 4 * h);
        stacked_layers_ += times * (n_enc + n_dec);
        Set(facts_.layers, static_cast<int64_t>(stacked_layers_), where,
            fmt::format("nn.Transformer: {} encoder + {} decoder layers", n_enc, n_dec), kRankCall);
        Set(facts_.model, std::string("nn.Transformer"), where, fmt::format("{}()", c.callee),
            kRankName);
      } else if (name == "TransformerEncoderLayer") {
        encoder_layer_params_ += times * encoder_layer;
      } else {
        decoder_layer_params_ += times * decoder_layer;
      }
      layer_where_ = where;
    }
    facts_.architecture = Architecture::kTransformer;
    Set(facts_.fused_attention, true, where,
        "nn.MultiheadAttention inside nn.Transformer*Layer calls SDPA", kRankDefault);
    return;
  }
  if (name == "TransformerEncoder" || name == "TransformerDecoder") {
    Value n = arg("num_layers", 1);
    if (!n.IsNumber()) {
      SetNumber(facts_.layers, n, where, "model", kRankCall);
      return;
    }
    // The layer passed is cloned num_layers times; an encoder and a decoder stack add up.
    double layers = n.number * Multiplicity(c);
    (name == "TransformerEncoder" ? encoder_layers_ : decoder_layers_) += layers;
    stacked_layers_ += layers;
    Value total = n;
    total.number = stacked_layers_;
    SetNumber(facts_.layers, total, where, "model", kRankCall);
    Set(facts_.model, std::string("nn.") + std::string(name), where, fmt::format("{}()", c.callee),
        kRankName);
    return;
  }
  if (name == "Embedding" && c.callee.find("nn.") != std::string::npos) {
    Value n = Eval(c.file, Pos(c.node, 0), 0);
    Value d = Eval(c.file, Pos(c.node, 1), 0);
    if (n.IsNumber() && d.IsNumber()) {
      embedding_params_ += Multiplicity(c) * n.number * d.number;
      // A vocabulary only if an output layer computes logits over it (ResolveVocabulary).
      if (n.number > 1000) embedding_rows_.emplace_back(n, where);
    }
    return;
  }
  if (name == "linear" && !ts_node_is_null(Pos(c.node, 1)) &&
      Text(c.file, Pos(c.node, 1)).ends_with(".weight")) {
    tied_head_ = true;  // F.linear(x, self.wte.weight): a head tied to the embedding
    return;
  }
  if (name == "Linear" && c.callee.find("nn.") != std::string::npos) {
    Value a = Eval(c.file, Pos(c.node, 0), 0);
    Value b = Eval(c.file, Pos(c.node, 1), 0);
    if (a.IsNumber() && b.IsNumber()) {
      bool bias = !(KwValue(c, "bias").kind == Value::Kind::kBool && !KwValue(c, "bias").Truthy());
      linear_params_ += Multiplicity(c) * (a.number * b.number + (bias ? b.number : 0));
      linear_outputs_.push_back(b.number);
      if (linear_where_.empty()) linear_where_ = where;
    } else {
      Undecided("parameters", fmt::format("nn.Linear size {}", !a.known() ? a.reason : b.reason),
                where);
    }
  }
}

void Analyzer::ExtractCall(const CallSite& c) {
  std::string_view name = c.name;
  SourceLine where = Where(c);
  ExtractModelCall(c);

  if (name == "DataLoader") {
    TSNode bs = Kw(c.file, c.node, "batch_size");
    if (ts_node_is_null(bs)) bs = Pos(c.node, 1);
    std::string first = Text(c.file, Pos(c.node, 0));
    bool train = Lower(first).find("train") != std::string::npos;
    bool eval = Lower(first).find("val") != std::string::npos ||
                Lower(first).find("test") != std::string::npos;
    if (!eval) {
      if (ts_node_is_null(bs)) {
        Set(facts_.batch_size, int64_t{1}, where, "DataLoader default batch_size=1", kRankDefault);
      } else {
        SetNumber(facts_.batch_size, Eval(c.file, bs, 0), where, "batch_size",
                  train ? kRankCall + 1 : kRankCall);
      }
      Value w = KwValue(c, "num_workers");
      if (w.IsNumber()) {
        SetNumber(facts_.num_workers, w, where, "num_workers", kRankCall);
      } else if (!ts_node_is_null(Kw(c.file, c.node, "num_workers"))) {
        Undecided("num_workers", w.reason, where);
      }
    }
  } else if (name == "TrainingArguments" || name == "SFTConfig" ||
             name == "Seq2SeqTrainingArguments") {
    Set(facts_.training, true, where, fmt::format("{}()", name), kRankCall);
    Value bs = KwValue(c, "per_device_train_batch_size");
    if (ts_node_is_null(Kw(c.file, c.node, "per_device_train_batch_size"))) {
      Set(facts_.batch_size, int64_t{8}, where,
          "TrainingArguments default per_device_train_batch_size=8", kRankDefault);
    } else {
      SetNumber(facts_.batch_size, bs, where, "batch_size", kRankCall + 1);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "gradient_accumulation_steps"), where, "grad_accum",
              kRankCall);
    if (KwValue(c, "bf16").Truthy()) {
      Set(facts_.precision, Precision::kMixedBf16, where, "TrainingArguments(bf16=True)",
          kRankCall);
    }
    if (KwValue(c, "fp16").Truthy()) {
      Set(facts_.precision, Precision::kMixedFp16, where, "TrainingArguments(fp16=True)",
          kRankCall);
    }
    if (KwValue(c, "gradient_checkpointing").Truthy()) {
      Set(facts_.checkpointing, Checkpointing::kFull, where,
          "TrainingArguments(gradient_checkpointing=True)", kRankCall);
    }
    if (KwValue(c, "torch_compile").Truthy()) {
      Set(facts_.compiled, true, where, "TrainingArguments(torch_compile=True)", kRankCall);
    }
    SetNumber(facts_.num_workers, KwValue(c, "dataloader_num_workers"), where, "num_workers",
              kRankCall);
    Value optim = KwValue(c, "optim");
    std::string o = optim.kind == Value::Kind::kString ? Lower(optim.text) : "adamw_torch";
    Optimizer opt = o.find("8bit") != std::string::npos        ? Optimizer::kAdam8bit
                    : o.find("adafactor") != std::string::npos ? Optimizer::kAdafactor
                    : o.find("sgd") != std::string::npos       ? Optimizer::kSgdMomentum
                                                               : Optimizer::kAdam;
    Set(facts_.optimizer, opt, where,
        optim.known() ? fmt::format("TrainingArguments(optim=\"{}\")", o)
                      : "the HF Trainer's default AdamW",
        optim.known() ? kRankCall : kRankDefault);
    Value ds = KwValue(c, "deepspeed");
    if (ds.kind == Value::Kind::kString) config_refs_.push_back(ds.text);
    Value fsdp = KwValue(c, "fsdp");
    if (fsdp.kind == Value::Kind::kString && !fsdp.text.empty()) {
      int stage = fsdp.text.find("shard_grad_op") != std::string::npos ? 2 : 3;
      Set(facts_.zero_stage, stage, where, fmt::format("TrainingArguments(fsdp=\"{}\")", fsdp.text),
          kRankCall);
      Set(facts_.parallelism, std::string("FSDP"), where, "TrainingArguments(fsdp=…)", kRankCall);
    }
    Set(facts_.parallelism, std::string("HF Trainer (DDP)"), where,
        "the HF Trainer runs DDP over the processes it is launched with", kRankDefault);
  } else if (name == "Trainer" && (c.callee.find("pl.") != std::string::npos ||
                                   c.callee.find("L.") != std::string::npos ||
                                   c.callee.find("lightning") != std::string::npos)) {
    Set(facts_.training, true, where, "Lightning Trainer", kRankCall);
    Value precision = KwValue(c, "precision");
    std::string p = precision.kind == Value::Kind::kNumber ? fmt::format("{}", precision.number)
                                                           : Lower(precision.text);
    if (p.starts_with("bf16")) {
      Set(facts_.precision,
          p.find("true") != std::string::npos ? Precision::kBf16 : Precision::kMixedBf16, where,
          fmt::format("Trainer(precision={})", Text(c.file, Kw(c.file, c.node, "precision"))),
          kRankCall);
    } else if (p.starts_with("16")) {
      Set(facts_.precision,
          p.find("true") != std::string::npos ? Precision::kFp16 : Precision::kMixedFp16, where,
          fmt::format("Trainer(precision={})", Text(c.file, Kw(c.file, c.node, "precision"))),
          kRankCall);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "accumulate_grad_batches"), where, "grad_accum",
              kRankCall);
    Value devices = KwValue(c, "devices");
    Value strategy = KwValue(c, "strategy");
    std::string s = Lower(strategy.text);
    if (devices.IsNumber() && devices.number > 1 && facts_.launcher == "python") {
      Set(facts_.processes, static_cast<int>(devices.number), where,
          fmt::format("Trainer(devices={}) spawns one process per device", devices.number),
          kRankLauncher);
    } else if (devices.kind == Value::Kind::kNumber && devices.number == -1) {
      Set(facts_.processes, std::max(1, gpus_requested_), where, "Trainer(devices=-1): every GPU",
          kRankLauncher);
    }
    if (s.find("fsdp") != std::string::npos) {
      Set(facts_.zero_stage, 3, where, fmt::format("Trainer(strategy=\"{}\")", s), kRankCall);
    } else if (s.find("deepspeed_stage_") != std::string::npos) {
      Set(facts_.zero_stage, s[s.find("deepspeed_stage_") + 16] - '0', where,
          fmt::format("Trainer(strategy=\"{}\")", s), kRankCall);
    }
    if ((devices.IsNumber() && (devices.number > 1 || devices.number == -1)) || !s.empty() ||
        (facts_.processes.value.value_or(1) > 1)) {
      Set(facts_.parallelism, s.empty() ? std::string("Lightning (DDP)") : "Lightning " + s, where,
          "Lightning Trainer", kRankCall);
    }
  } else if (name == "Accelerator") {
    Value mp = KwValue(c, "mixed_precision");
    if (mp.text == "bf16") {
      Set(facts_.precision, Precision::kMixedBf16, where, "Accelerator(mixed_precision=\"bf16\")",
          kRankCall);
    }
    if (mp.text == "fp16") {
      Set(facts_.precision, Precision::kMixedFp16, where, "Accelerator(mixed_precision=\"fp16\")",
          kRankCall);
    }
    SetNumber(facts_.grad_accum, KwValue(c, "gradient_accumulation_steps"), where, "grad_accum",
              kRankCall);
    Set(facts_.parallelism, std::string("Accelerate (DDP)"), where,
        "Accelerator() wraps the model for the processes launched", kRankCall);
  } else if (name == "autocast") {
    if (TruthOf(KwValue(c, "enabled")) == false) return;
    TSNode dtype_node = Kw(c.file, c.node, "dtype");
    if (ts_node_is_null(dtype_node)) dtype_node = Pos(c.node, 1);  // autocast("cuda", torch.…)
    Value dtype = Eval(c.file, dtype_node, 0);
    if (!ts_node_is_null(dtype_node) && !dtype.known()) {
      // Not fp16 by default: a wrong guess halves the activations the estimate counts.
      Undecided("precision",
                fmt::format("{}(dtype={}): {}", c.callee, Text(c.file, dtype_node), dtype.reason),
                where);
      return;
    }
    std::string device = KwValue(c, "device_type").text;
    if (device.empty()) device = Eval(c.file, Pos(c.node, 0), 0).text;
    bool bf16 = dtype.kind == Value::Kind::kName
                    ? dtype.text.ends_with("bfloat16")
                    : device == "cpu";  // autocast's default: bf16 on CPU, fp16 on CUDA
    if (dtype.kind == Value::Kind::kName && dtype.text.ends_with("float32")) return;
    SetInBranch(facts_.precision, bf16 ? Precision::kMixedBf16 : Precision::kMixedFp16, where,
                fmt::format("{}({})", c.callee,
                            dtype.kind == Value::Kind::kName ? "dtype=" + dtype.text
                            : bf16                           ? "CPU default bfloat16"
                                                             : "default float16"),
                kRankCall);
  } else if (name == "GradScaler") {
    TSNode enabled_node = Kw(c.file, c.node, "enabled");
    auto enabled = TruthOf(KwValue(c, "enabled"));
    if (enabled == false) return;
    if (!ts_node_is_null(enabled_node) && !enabled) {
      Undecided(
          "precision",
          fmt::format("GradScaler(enabled={}) could not be evaluated", Text(c.file, enabled_node)),
          where);
      return;
    }
    SetInBranch(facts_.precision, Precision::kMixedFp16, where, "GradScaler (fp16 AMP)",
                kRankDefault);
  } else if (name == "half" || name == "bfloat16") {
    Set(facts_.precision, name == "half" ? Precision::kFp16 : Precision::kBf16, where,
        fmt::format(".{}() on the model", name), kRankDefault);
  } else if (name == "to" && c.callee.find('.') != std::string::npos) {
    std::string args = Text(c.file, Field(c.node, "arguments"));
    // `.to(torch.bfloat16 if args.precision == "bf16-pure" else torch.float16)`: the one taken.
    TSNode dtype_node = Kw(c.file, c.node, "dtype");
    Value dtype = Eval(c.file, ts_node_is_null(dtype_node) ? Pos(c.node, 0) : dtype_node, 0);
    if (dtype.kind == Value::Kind::kName) args = dtype.text;
    if (args.find("torch.bfloat16") != std::string::npos) {
      Set(facts_.precision, Precision::kBf16, where, ".to(torch.bfloat16)", kRankDefault);
    }
    if (args.find("torch.float16") != std::string::npos ||
        args.find("torch.half") != std::string::npos) {
      Set(facts_.precision, Precision::kFp16, where, ".to(torch.float16)", kRankDefault);
    }
  } else if (name == "BitsAndBytesConfig") {
    if (KwValue(c, "load_in_4bit").Truthy()) {
      Set(facts_.precision, Precision::kInt4, where, "BitsAndBytesConfig(load_in_4bit=True)",
          kRankConfig);
    }
    if (KwValue(c, "load_in_8bit").Truthy()) {
      Set(facts_.precision, Precision::kInt8, where, "BitsAndBytesConfig(load_in_8bit=True)",
          kRankConfig);
    }
  } else if (name == "Adam" || name == "AdamW" || name == "FusedAdam" ||
             name == "DeepSpeedCPUAdam" || name == "Lamb" || name == "LAMB" || name == "NAdam" ||
             name == "RAdam") {
    SetInBranch(facts_.optimizer, Optimizer::kAdam, where, fmt::format("{}()", c.callee),
                kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name.find("8bit") != std::string_view::npos &&
             name.find("Adam") != std::string_view::npos) {
    SetInBranch(facts_.optimizer, Optimizer::kAdam8bit, where, fmt::format("{}()", c.callee),
                kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "SGD") {
    TSNode m = Kw(c.file, c.node, "momentum");
    if (ts_node_is_null(m)) m = Pos(c.node, 2);
    Value mv = Eval(c.file, m, 0);
    bool momentum = ts_node_is_null(m) ? false : (!mv.IsNumber() || mv.number > 0);
    SetInBranch(facts_.optimizer, momentum ? Optimizer::kSgdMomentum : Optimizer::kSgd, where,
                fmt::format("SGD({})", momentum ? "momentum" : "no momentum"), kRankCall);
    Set(facts_.training, true, where, "SGD()", kRankCall);
  } else if (name == "Adafactor") {
    SetInBranch(facts_.optimizer, Optimizer::kAdafactor, where, "Adafactor()", kRankCall);
    Set(facts_.training, true, where, "Adafactor()", kRankCall);
  } else if (name == "RMSprop" || name == "Adagrad" || name == "Lion") {
    SetInBranch(facts_.optimizer, Optimizer::kSgdMomentum, where,
                fmt::format("{}() keeps one state per parameter", name), kRankCall);
    Set(facts_.training, true, where, fmt::format("{}()", name), kRankCall);
  } else if (name == "backward" || (name == "fit" && c.callee != "fit") ||
             (name == "train" && c.callee.find("trainer") != std::string::npos)) {
    Set(facts_.training, true, where, fmt::format("{}()", c.callee), kRankDefault);
  } else if (name == "gradient_checkpointing_enable" || name == "apply_activation_checkpointing" ||
             name == "checkpoint_sequential" ||
             (name == "checkpoint" && (c.callee.find("utils.checkpoint") != std::string::npos ||
                                       c.callee == "checkpoint"))) {
    SetInBranch(facts_.checkpointing, Checkpointing::kFull, where, fmt::format("{}()", c.callee),
                kRankCall);
  } else if (name == "scaled_dot_product_attention" || name == "flash_attn_func") {
    Set(facts_.fused_attention, true, where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "DistributedDataParallel" || name == "DDP") {
    Set(facts_.parallelism, std::string("DDP"), where, fmt::format("{}()", c.callee), kRankCall);
  } else if (name == "FullyShardedDataParallel" || name == "FSDP" || name == "fully_shard") {
    Set(facts_.parallelism, std::string("FSDP"), where, fmt::format("{}()", c.callee), kRankCall);
    std::string args = Text(c.file, Field(c.node, "arguments"));
    int stage = args.find("SHARD_GRAD_OP") != std::string::npos ? 2
                : args.find("NO_SHARD") != std::string::npos    ? 0
                                                                : 3;
    Set(facts_.zero_stage, stage, where, stage == 3 ? "FSDP full shard" : "FSDP sharding_strategy",
        kRankCall);
    if (args.find("CPUOffload") != std::string::npos) {
      Set(facts_.optimizer_offload, true, where, "FSDP CPUOffload", kRankCall);
    }
  } else if (name == "DataParallel") {
    Set(facts_.parallelism, std::string("DataParallel"), where,
        "nn.DataParallel: one process, every visible GPU", kRankCall);
    Set(facts_.processes, std::max(1, gpus_requested_), where,
        "nn.DataParallel replicates onto every GPU", kRankCall);
  } else if (name == "initialize" && c.callee.find("deepspeed") != std::string::npos) {
    Set(facts_.parallelism, std::string("DeepSpeed"), where, "deepspeed.initialize()", kRankCall);
    Set(facts_.training, true, where, "deepspeed.initialize()", kRankDefault);
    Value cfg = KwValue(c, "config");
    if (cfg.kind != Value::Kind::kString) cfg = KwValue(c, "config_params");
    if (cfg.kind == Value::Kind::kString) config_refs_.push_back(cfg.text);
  } else if (name == "init_process_group") {
    Set(facts_.parallelism, std::string("torch.distributed"), where, "init_process_group()",
        kRankDefault);
  } else if (name == "spawn" && c.callee.find("mp") != std::string::npos) {
    Value n = KwValue(c, "nprocs");
    SetNumber(facts_.processes, n, where, "processes", kRankLauncher);
  } else if (name == "compile" && c.callee.starts_with("torch")) {
    Set(facts_.compiled, true, where, "torch.compile()", kRankCall);
  }
  // Sequence length and image size from the calls that fix them.
  for (std::string_view key :
       {"max_length", "max_seq_length", "block_size", "seq_len", "max_len"}) {
    TSNode n = Kw(c.file, c.node, key);
    if (ts_node_is_null(n) || name == "generate") continue;
    SetNumber(facts_.seq_len, Eval(c.file, n, 0), where, "seq_len", kRankCall);
  }
  if (name == "RandomResizedCrop" || name == "Resize" || name == "CenterCrop" ||
      name == "RandomCrop") {
    TSNode size = Kw(c.file, c.node, "size");
    if (ts_node_is_null(size)) size = Pos(c.node, 0);
    Value v = Eval(c.file, size, 0);
    if (v.IsNumber()) {
      SetNumber(facts_.image_size, v, where, "image_size",
                name == "RandomResizedCrop" || name == "RandomCrop" ? kRankCall + 1 : kRankCall);
    }
  }
}

void Analyzer::ResolveVocabulary() {
  // A text classifier embeds a large vocabulary but never computes b·s·V logits: only an
  // embedding whose rows an nn.Linear (or a tied F.linear) produces is a vocabulary.
  for (const auto& [rows, where] : embedding_rows_) {
    bool head = tied_head_ || std::find(linear_outputs_.begin(), linear_outputs_.end(),
                                        rows.number) != linear_outputs_.end();
    if (!head) continue;
    SetNumber(facts_.vocab, rows, where, "vocab", kRankCall);
    return;
  }
}

void Analyzer::ExtractConfigs() {
  // DeepSpeed's JSON: the launcher-level truth about batch, precision, ZeRO and the optimizer.
  for (const auto& cfg : configs_) {
    auto get = [&](const char* key) -> std::optional<ConfigValue> {
      auto it = cfg.values.find(key);
      if (it == cfg.values.end()) return std::nullopt;
      return it->second;
    };
    bool deepspeed = get("zero_optimization.stage") || get("train_micro_batch_size_per_gpu") ||
                     get("train_batch_size");
    if (!deepspeed) continue;
    auto where = [&](const ConfigValue& v) { return SourceLine{cfg.name, v.line}; };
    if (auto v = get("zero_optimization.stage")) {
      if (auto n = ParseNumber(v->text)) {
        Set(facts_.zero_stage, static_cast<int>(*n), where(*v),
            fmt::format("{}: zero_optimization.stage", cfg.name), kRankConfig);
      }
    }
    if (auto v = get("zero_optimization.offload_optimizer.device"); v && v->text != "none") {
      Set(facts_.optimizer_offload, true, where(*v), "offload_optimizer.device=" + v->text,
          kRankConfig);
    }
    if (auto v = get("train_micro_batch_size_per_gpu")) {
      SetNumber(facts_.batch_size,
                FromText(v->text, where(*v), cfg.name + ": train_micro_batch_size_per_gpu"),
                where(*v), "batch_size", kRankConfig);
    }
    if (auto v = get("gradient_accumulation_steps")) {
      SetNumber(facts_.grad_accum, FromText(v->text, where(*v), cfg.name), where(*v), "grad_accum",
                kRankConfig);
    }
    if (auto v = get("bf16.enabled"); v && Lower(v->text) == "true") {
      Set(facts_.precision, Precision::kMixedBf16, where(*v), cfg.name + ": bf16.enabled",
          kRankConfig);
    }
    if (auto v = get("fp16.enabled"); v && Lower(v->text) == "true") {
      Set(facts_.precision, Precision::kMixedFp16, where(*v), cfg.name + ": fp16.enabled",
          kRankConfig);
    }
    if (auto v = get("optimizer.type")) {
      std::string t = Lower(v->text);
      Optimizer o = t.find("sgd") != std::string::npos ? Optimizer::kSgdMomentum : Optimizer::kAdam;
      Set(facts_.optimizer, o, where(*v), cfg.name + ": optimizer.type " + v->text, kRankConfig);
      Set(facts_.training, true, where(*v), cfg.name + ": optimizer", kRankDefault);
    }
    if (auto v = get("activation_checkpointing.partition_activations")) {
      Set(facts_.checkpointing, Checkpointing::kFull, where(*v),
          cfg.name + ": activation_checkpointing", kRankDefault);
    }
    Set(facts_.parallelism, std::string("DeepSpeed"), SourceLine{cfg.name, 1}, cfg.name,
        kRankDefault);
  }
}

void Analyzer::ExtractFallbacks() {
  auto named = [&](std::initializer_list<std::string_view> names, auto& fact, const char* what) {
    if (fact.known()) return;
    for (auto n : names) {
      for (const auto& o : options_) {
        if (o.dest != n) continue;
        Value v = ArgValue(o, 0);
        SetNumber(fact, v, SourceLine{files_[o.file].name, o.line}, what, kRankName);
        if (fact.known()) return;
      }
      auto it = bindings_.find(std::string(n));
      if (it == bindings_.end()) {
        std::string upper(n);  // module constants: SEQ_LEN = 512
        std::transform(upper.begin(), upper.end(), upper.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
        it = bindings_.find(upper);
      }
      if (it != bindings_.end()) {
        // A dataclass field (GPTConfig.block_size): the value its call passes, else the default.
        const Binding& b = it->second.back();
        Value v = b.field ? FieldValue(b.owner, it->first) : Eval(b.file, b.value, 0);
        SetNumber(fact, v, Where(b.file, b.value), what, kRankName);
        if (fact.known()) return;
      }
      // Also without a variable of that name: a config file's key (`--config cfg.json`).
      Value c = ConfigValueOf(n);
      if (c.known()) SetNumber(fact, c, c.origin, what, kRankName);
      if (fact.known()) return;
    }
  };
  named({"batch_size", "per_device_train_batch_size", "micro_batch_size", "train_batch_size", "bs"},
        facts_.batch_size, "batch_size");
  named({"block_size", "seq_len", "seq_length", "max_seq_length", "max_length", "context_length",
         "max_len", "sequence_length"},
        facts_.seq_len, "seq_len");
  named({"image_size", "img_size", "input_size", "resolution", "crop_size"}, facts_.image_size,
        "image_size");
  named({"gradient_accumulation_steps", "grad_accum", "accumulation_steps", "accum_steps",
         "grad_accum_steps"},
        facts_.grad_accum, "grad_accum");
  named({"num_workers", "workers", "dataloader_num_workers"}, facts_.num_workers, "num_workers");

  // A hand-built model: the layers found, summed.
  if (!facts_.parameters.known()) {
    // A layer outside any stack counts once; one a stack clones counts num_layers times.
    double stacks = encoder_layer_params_ * (encoder_layers_ > 0 ? encoder_layers_ : 1) +
                    decoder_layer_params_ * (decoder_layers_ > 0 ? decoder_layers_ : 1) +
                    nn_transformer_params_;
    double total = linear_params_ + embedding_params_ + stacks;
    if (total > 0) {
      SourceLine where = !layer_where_.empty() ? layer_where_ : linear_where_;
      Set(facts_.parameters, total, where,
          stacks > 0 ? "nn.Transformer layers × num_layers + nn.Linear/nn.Embedding"
                     : "sum of nn.Linear layers",
          kRankName);
      if (facts_.architecture == Architecture::kUnknown) facts_.architecture = Architecture::kMlp;
      if (!facts_.model.known()) {
        Set(facts_.model, std::string(stacks > 0 ? "custom transformer" : "custom MLP"), where,
            "nn layers found in the source", kRankName);
      }
      pending_.erase("model");
      pending_.erase("parameters");
    } else if (!facts_.model.known() && pending_.count("model") == 0) {
      Undecided("model", "no known model constructor, from_pretrained name or nn layer found",
                {facts_.entry, 0});
    }
  }
  if (facts_.architecture == Architecture::kTransformer && !facts_.seq_len.known() &&
      facts_.max_positions.known()) {
    Assume(facts_.seq_len, *facts_.max_positions.value,
           fmt::format("the model's maximum context ({}), as no max_length/block_size was found",
                       *facts_.max_positions.value));
  }
  if ((facts_.architecture == Architecture::kCnn || facts_.architecture == Architecture::kVit) &&
      !facts_.image_size.known()) {
    Assume(facts_.image_size, int64_t{224}, "224×224, the torchvision default");
  }
  if (!facts_.training.known()) {
    if (facts_.optimizer.known()) {
      Set(facts_.training, true, facts_.optimizer.where, "an optimizer", kRankDefault);
    } else {
      Set(facts_.training, false, {facts_.entry, 0},
          "no optimizer, backward() or trainer found: inference", kRankName);
    }
  }
  if (*facts_.training.value && !facts_.optimizer.known()) {
    Assume(facts_.optimizer, Optimizer::kAdam, "AdamW, as the optimizer was not found");
    Undecided("optimizer", "training, but no optimizer constructor was found",
              facts_.training.where);
  }
  if (!facts_.precision.known() && pending_.count("precision") != 0) {
    // The larger of the readings: fp32 keeps every activation at 4 bytes.
    Assume(
        facts_.precision, Precision::kFp32,
        fmt::format("fp32, as the precision could not be read ({})", pending_["precision"].reason));
  } else if (!facts_.precision.known()) {
    Set(facts_.precision, Precision::kFp32, {facts_.entry, 0},
        "no autocast, .half(), torch_dtype or bf16 flag found", kRankName);
  } else {
    pending_.erase("precision");
  }
  if (!facts_.checkpointing.known()) {
    Set(facts_.checkpointing, Checkpointing::kNone, {facts_.entry, 0},
        "no activation checkpointing found", kRankName);
  }
  if (!facts_.zero_stage.known()) {
    Set(facts_.zero_stage, 0, {facts_.entry, 0}, "no ZeRO or FSDP sharding found", kRankName);
  }
  if (!facts_.grad_accum.known()) {
    Assume(facts_.grad_accum, int64_t{1}, "no gradient accumulation found");
  }
  if (!facts_.compiled.known()) {
    Set(facts_.compiled, false, {facts_.entry, 0}, "no torch.compile found", kRankName);
  }
  if (!facts_.parallelism.known()) {
    Set(facts_.parallelism, std::string("none"), {facts_.entry, 0},
        "no DDP, FSDP, DeepSpeed, Accelerate, Lightning or DataParallel found", kRankName);
  }
  if (!facts_.batch_size.known() && facts_.training.value.value_or(false) &&
      pending_.count("batch_size") == 0) {
    Undecided("batch_size", "no DataLoader batch_size or trainer batch size found",
              {facts_.entry, 0});
  }
}

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
  ExtractFallbacks();
  for (auto& [what, u] : pending_) facts_.undetermined.push_back(std::move(u));
}

StatusOr<CodeFacts> Analyzer::Run(const JobScript& script) {
  RS_RETURN_IF_ERROR(FindEntry(script));
  ApplyCommandLine();
  LoadConfigs();
  Extract();
  return std::move(facts_);
}

}  // namespace

StatusOr<CodeFacts> AnalyzeJobCode(const JobScript& script, const std::string& code_dir,
                                   const std::string& script_name) {
  std::error_code ec;
  if (!fs::is_directory(code_dir, ec)) {
    return Status::NotFound(fmt::format("code folder {} does not exist", code_dir));
  }
  Analyzer analyzer(code_dir, script_name);
  return analyzer.Run(script);
}

}  // namespace rightsize::code

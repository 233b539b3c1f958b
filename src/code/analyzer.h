// The code analysis's reader: one Analyzer per AnalyzeJobCode call walks the job's Python
// files with tree-sitter, evaluates the expressions it needs and turns calls into CodeFacts.
//
// Internal to the code component. The class is implemented by seam, one file each:
//   analysis.cc       the public entry point, the order of the passes (Run, Extract);
//   project_walk.cc   reading: the entry program and launcher options from the job script,
//                     the Python files it imports (parsed ahead on a second thread), the
//                     bindings, argparse options, calls and config files they hold;
//   python_eval.cc    evaluating: constant folding over literals, names, argparse options,
//                     the command line and config files (Eval and the argument helpers);
//   reach.cc          control flow: whether a call runs (its if/elif conditions) and how many
//                     times (the loops and call sites around it);
//   extract_model.cc  the model: Hugging Face configs and names, torchvision/timm
//                     constructors, hand-built nn.Transformer/Linear/Embedding layers;
//   extract_call.cc   every other fact a call decides (data loader, trainer, precision,
//                     optimizer, parallelism, shapes), config files, the fallbacks.
// Not thread-safe: one thread uses an Analyzer (the parse-ahead thread it starts only parses).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "code/analysis.h"
#include "code/config_file.h"
#include "code/model_zoo.h"
#include "code/python_tree.h"
#include "code/python_value.h"

namespace rightsize::code::internal {

// Splits a command's text into words the way a shell would for plain quoting.
std::vector<std::string> ShellWords(std::string_view text);

// Evidence ranks: a later, stronger source replaces an earlier, weaker one.
constexpr int kRankName = 0;      // a variable named like the fact (`batch_size = 32`)
constexpr int kRankDefault = 1;   // a library's default (HF Trainer: 8 per device)
constexpr int kRankCall = 2;      // an argument of the call that uses it (DataLoader)
constexpr int kRankConfig = 3;    // a DeepSpeed/launcher config that overrides the code
constexpr int kRankLauncher = 4;  // the launcher's own options

// The prompt assumed for generation when no tokenizer max_length or sequence length is read.
constexpr int64_t kAssumedPromptTokens = 512;
// Characters per token of English text and code under the BPE tokenizers of today's LLMs (the
// usual rule of thumb, about 4): sizes a prompt the program writes out as a string. Not fitted.
constexpr double kCharsPerToken = 4.0;

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

// The project's Python files parsed on a second thread (project_walk.cc).
class ParseAhead;

class Analyzer {
 public:
  // Defined in project_walk.cc, where ParseAhead is complete.
  Analyzer(std::string code_dir, std::string script_name);

  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

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
  // torchtune (torchtune.cc): the `tune run` command, if the script has one, and the facts read
  // from its recipe's YAML config instead of Python code.
  static const JobScript::Command* TorchtuneCommand(const JobScript& script);
  Status ReadTorchtune(const JobScript& script, const JobScript::Command& cmd);
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
  // Every fact a call decides: the model's (extract_model.cc), then the first family whose
  // name matches, then the sequence length and image size it fixes.
  void ExtractCall(const CallSite& c);
  // Which family of calls took a call: none (try the next), one (then the shapes), or one that
  // rules the call out (autocast(enabled=False): no shapes either).
  enum class CallMatch { kNone, kMatched, kDone };
  CallMatch ExtractTrainingLoopCall(const CallSite& c);  // DataLoader, HF/Lightning, Accelerate
  CallMatch ExtractPrecisionCall(const CallSite& c);     // autocast, GradScaler, .half(), bnb
  CallMatch ExtractOptimizerCall(const CallSite& c);     // optimizers, backward, checkpointing
  CallMatch ExtractParallelCall(const CallSite& c);      // DDP, FSDP, DeepSpeed, spawn, compile
  void ExtractShapeCall(const CallSite& c);              // max_length=…, Resize(224)
  void ExtractLearningRate(const CallSite& c);           // Adam(lr=…), learning_rate=…
  void LearningRateFallback();                           // lr = 3e-4, --lr default
  // The model a call builds; each helper returns whether the call was its family's.
  void ExtractModelCall(const CallSite& c);
  bool ExtractHfConfig(const CallSite& c);          // GPT2Config(n_layer=…), LlamaConfig(…)
  bool ExtractPretrained(const CallSite& c);        // from_pretrained("gpt2"), create_model
  bool ExtractVisionModel(const CallSite& c);       // resnet50(), vit_b_16()
  bool ExtractMmdetConfig(const CallSite& c);       // model = dict(type='FasterRCNN', …)
  bool ExtractDetectron2Config(const CallSite& c);  // get_config_file("…/mask_rcnn_R_50_FPN…")
  void SetDetector(const DetectorSpec& d, SourceLine where, const std::string& how);
  bool ExtractDynamicModel(const CallSite& c);      // getattr(models, name)()
  bool ExtractTorchTransformer(const CallSite& c);  // nn.Transformer*, its layers and stacks
  void ExtractTorchLayer(const CallSite& c);        // nn.Embedding, nn.Linear, F.linear
  void ExtractConfigs();
  void ExtractAccelerateConfigs();
  void ExtractModelConfigFiles();                // a Hugging Face config.json read
  CallMatch ExtractPeftCall(const CallSite& c);  // LoraConfig, get_peft_model, kbit prep
  void ExtractFallbacks();
  void ResolveVocabulary();
  // The adapters' trainable parameters and the quantised weights, from the model's spec and
  // the LoRA and bitsandbytes calls read (in either order).
  void ResolveAdapters();
  // Device moves and 16-bit casts of a model, for ResolveCastAfterMove.
  struct MoveSite {
    int file = 0;
    uint32_t end = 0;
    int line = 0;
    std::string receiver, target;
  };
  void NoteMove(const CallSite& c, std::vector<MoveSite>* sites);
  void ResolveCastAfterMove();
  void InferenceFallbacks();  // batch 1 and the prompt length when generation gives none
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
  // The launcher (torchrun, accelerate) was given no process count: an accelerate config
  // file's num_processes may set it.
  bool launcher_default_processes_ = false;
  std::vector<MoveSite> device_moves_, casts_;
  std::map<std::string, std::pair<std::string, std::string>> cmdline_;  // dest -> (flag, value)
  std::map<std::string, Undetermined> pending_;                         // what -> why unknown
  std::string branch_condition_;  // the undecided condition around the call being read
  // FunctionReach by (file, start byte of the definition): whether its call sites run.
  mutable std::map<std::pair<int, uint32_t>, std::pair<Reach, std::string>> function_reach_;
  std::vector<std::pair<Value, SourceLine>> embedding_rows_;  // nn.Embedding sizes over 1000
  std::vector<double> linear_outputs_;                        // nn.Linear out_features
  double linear_output_sum_ = 0, linear_widest_ = 0;          // Σ out_features, widest in/out
  bool tied_head_ = false;  // F.linear(x, emb.weight): logits over an embedding's rows
  // nn.TransformerEncoderLayer / nn.TransformerDecoderLayer sizes, and the layers the
  // nn.TransformerEncoder / nn.TransformerDecoder / nn.Transformer stacks built from them hold.
  double encoder_layer_params_ = 0, decoder_layer_params_ = 0, nn_transformer_params_ = 0;
  double encoder_layers_ = 0, decoder_layers_ = 0, stacked_layers_ = 0;
  double linear_params_ = 0, embedding_params_ = 0;
  SourceLine linear_where_, layer_where_;
  int gpus_requested_ = 0;
  std::optional<TransformerSpec> spec_;  // the transformer the model fact came from
  bool generates_ = false;               // generate() or a text-generation pipeline
  struct LoraCall {
    int64_t rank = 8;                  // LoraConfig's default r
    std::vector<std::string> targets;  // empty: PEFT's default for the family
    std::string target_text;           // as written, for a regex or "all-linear"
    double dropout = 0;
    SourceLine where;
  };
  std::optional<LoraCall> lora_;
  std::map<std::string, std::string> env_;
};

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

}  // namespace rightsize::code::internal

// Evaluating: constant folding over literals, names, argparse options, the command line and
// config files; the keyword and positional argument helpers. See analyzer.h.
#include <algorithm>
#include <cmath>

#include "code/analyzer.h"

namespace rightsize::code::internal {

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
    if (a.kind == Value::Kind::kString || b.kind == Value::Kind::kString) {
      // "a" + "b", 10 * "a", "a" * 10: what a prompt built in the program is.
      std::string_view op = files_[file].tree.Text(Field(node, "operator"));
      constexpr size_t kMaxString = 1 << 20;
      if (op == "+" && a.kind == b.kind && a.text.size() + b.text.size() <= kMaxString) {
        a.text += b.text;
        return a;
      }
      if (op == "*" && (a.IsNumber() || b.IsNumber())) {
        const Value& str = a.IsNumber() ? b : a;
        double times = a.IsNumber() ? a.number : b.number;
        if (str.kind == Value::Kind::kString && times >= 0 &&
            str.text.size() * times <= kMaxString) {
          Value r = str;
          r.text.clear();
          for (int i = 0; i < static_cast<int>(times); ++i) r.text += str.text;
          return r;
        }
      }
      return Value::Unknown(fmt::format("{}: string operation not folded", text));
    }
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

}  // namespace rightsize::code::internal

// Control flow: whether a call runs (the if/elif and conditional expressions around it, and
// whether its function is called) and how many live objects it leaves (loops, comprehensions,
// call sites). See analyzer.h.
#include <algorithm>
#include <cmath>

#include "code/analyzer.h"

namespace rightsize::code::internal {

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

}  // namespace rightsize::code::internal

// Python values: what the code analysis can work out about an expression without running it
// (a number, a boolean, None, a string or a dotted name such as torch.bfloat16), with the
// line it was written on and how it was found; and the scalar helpers the analysis shares
// (lower-casing, parsing Python number literals, reading a command-line or config scalar).
//
// Internal to the code component (src/code/*.cc); the evaluator that produces Values from
// tree-sitter nodes is Analyzer::Eval (python_eval.cc). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "code/analysis.h"

namespace rightsize::code::internal {

std::string Lower(std::string_view s);
// The text without spaces, tabs, newlines or line continuations.
std::string Collapse(std::string_view s);
// "torch.optim.AdamW" → "AdamW".
std::string_view LastPart(std::string_view dotted);
// A Python number literal ("1_000", "0x10", "3e-4"); nullopt when the text is not one.
std::optional<double> ParseNumber(std::string_view text);

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
std::optional<bool> TruthOf(const Value& v);

Value BoolValue(bool b, SourceLine origin);

// A scalar from the command line or a config file: a number, a boolean, null or a string.
Value FromText(std::string_view text, SourceLine origin, std::string how);

}  // namespace rightsize::code::internal

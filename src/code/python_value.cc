#include "code/python_value.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <system_error>

namespace rightsize::code::internal {

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

}  // namespace rightsize::code::internal

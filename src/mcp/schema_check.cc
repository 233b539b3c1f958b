#include "mcp/schema_check.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/units.h"

namespace rightsize::mcp {

namespace {

std::string TypeName(const nlohmann::json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

bool HasType(const nlohmann::json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    // JSON has one number type: 3.0 is an integer to JSON Schema, 3.5 is not. Past 2^53 a
    // double holds no fraction anyway, and no argument here is that large.
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double x = v.get<double>();
    return std::abs(x) < 9007199254740992.0 && x == std::trunc(x);
  }
  return false;
}

Status Check(const nlohmann::json& schema, const nlohmann::json& v, const std::string& where) {
  if (auto t = schema.find("type"); t != schema.end() && t->is_string()) {
    if (!HasType(v, t->get<std::string>())) {
      return Status::InvalidArgument(fmt::format("{}: expected {}, got {}", where,
                                                 t->get<std::string>() == "integer"
                                                     ? std::string("an integer")
                                                     : "a " + t->get<std::string>(),
                                                 TypeName(v)));
    }
  }
  if (auto c = schema.find("const"); c != schema.end() && *c != v) {
    return Status::InvalidArgument(
        fmt::format("{}: expected {}, got {}", where, c->dump(), Quote(v.dump())));
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    bool found = false;
    for (const auto& x : *e) found = found || x == v;
    if (!found) {
      return Status::InvalidArgument(
          fmt::format("{}: expected one of {}, got {}", where, e->dump(), Quote(v.dump())));
    }
  }
  if (v.is_number()) {
    double x = v.get<double>();
    if (auto m = schema.find("minimum"); m != schema.end() && x < m->get<double>()) {
      return Status::InvalidArgument(fmt::format("{}: must be at least {}", where, m->dump()));
    }
    if (auto m = schema.find("maximum"); m != schema.end() && x > m->get<double>()) {
      return Status::InvalidArgument(fmt::format("{}: must be at most {}", where, m->dump()));
    }
  }
  if (v.is_string()) {
    if (auto m = schema.find("minLength");
        m != schema.end() && v.get_ref<const std::string&>().size() < m->get<size_t>()) {
      return Status::InvalidArgument(fmt::format("{}: must not be empty", where));
    }
  }
  if (v.is_array()) {
    if (auto items = schema.find("items"); items != schema.end()) {
      for (size_t i = 0; i < v.size(); ++i) {
        RS_RETURN_IF_ERROR(Check(*items, v[i], fmt::format("{}[{}]", where, i)));
      }
    }
  }
  if (v.is_object()) {
    static const nlohmann::json kNone = nlohmann::json::object();
    auto p = schema.find("properties");
    const nlohmann::json& props = p != schema.end() ? *p : kNone;
    if (auto r = schema.find("required"); r != schema.end()) {
      for (const auto& name : *r) {
        if (!v.contains(name.get<std::string>())) {
          return Status::InvalidArgument(
              fmt::format("{}: missing the required argument {}", where, name.dump()));
        }
      }
    }
    bool closed = schema.value("additionalProperties", true) == false;
    for (const auto& [key, value] : v.items()) {
      auto sub = props.find(key);
      if (sub == props.end()) {
        if (closed) {
          std::vector<std::string> known;
          for (const auto& [k, unused] : props.items()) known.push_back(k);
          return Status::InvalidArgument(fmt::format("{}: unknown argument {} (known: {})", where,
                                                     Quote(key), fmt::join(known, ", ")));
        }
        continue;
      }
      RS_RETURN_IF_ERROR(Check(*sub, value, where + "." + key));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckArguments(const nlohmann::json& schema, const nlohmann::json& value) {
  return Check(schema, value, "arguments");
}

}  // namespace rightsize::mcp

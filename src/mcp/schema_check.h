// Checks a tool call's arguments against the tool's inputSchema, so a caller (often a language
// model) is told which argument is wrong and why before anything runs.
//
// Only the JSON Schema keywords the MCP server's own inputSchemas use are understood: type
// (object, string, integer, number, boolean, array), properties, required,
// additionalProperties: false, items, enum, const, minimum, maximum, minLength. Pure; thread-safe.
// Failure: InvalidArgument naming the argument ("arguments.risk: expected a number, got a
// string").
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace rightsize::mcp {

Status CheckArguments(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace rightsize::mcp

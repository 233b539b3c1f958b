// The MCP server's tools and resources: predict, advise, diagnose, job, report and eval, each
// with its JSON Schemas (input and output), and a job's record and series as resources. Each
// tool calls the service its CLI command calls and answers with the same versioned document
// that command prints with --json (rightsize.predict/v1, rightsize.advise/v1,
// rightsize.diagnosis/v1, rightsize.job/v1, rightsize.report/v1, rightsize.eval/v1).
//
// Not thread-safe (one Store connection, used by one request at a time). Failures are values:
// a tool's Status (bad arguments, a file that cannot be read, no such job) is what the server
// answers as an isError result.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rightsize::mcp {

// What tools read: the store (opened on first use, as the CLI opens it) and the clock.
struct ToolContext {
  std::function<StatusOr<Store*>()> store;
  std::function<int64_t()> now_s;
};

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;   // JSON Schema of the arguments (an object)
  nlohmann::json output_schema;  // JSON Schema of the document answered (an object)
  // Runs the tool on arguments already checked against input_schema.
  std::function<StatusOr<nlohmann::json>(const nlohmann::json& args, ToolContext& ctx)> run;
};

// Every tool, in the order tools/list gives them.
const std::vector<Tool>& Tools();

// The URI templates of the resources (rightsize://job/{id}, rightsize://job/{id}/series), as
// resources/templates/list gives them.
nlohmann::json ResourceTemplates();

// A page of the store's jobs as resources (newest first), for resources/list; `cursor` is the
// previous page's nextCursor ("" = the first page).
StatusOr<nlohmann::json> ListJobResources(ToolContext& ctx, const std::string& cursor);

// The contents of resources/read for `uri`: a job's card (rightsize.job/v1, as `rightsize job
// --json`) or its series (as GET /api/v1/jobs/{cluster}/{id}/series). A "?cluster=NAME" suffix
// picks the cluster. InvalidArgument for a URI that is not one of the templates; NotFound for a
// job the store does not have.
StatusOr<nlohmann::json> ReadResource(ToolContext& ctx, const std::string& uri);

}  // namespace rightsize::mcp

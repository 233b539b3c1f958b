#include "mcp/server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include "core/json_text.h"
#include "core/units.h"
#include "mcp/schema_check.h"

namespace rightsize::mcp {

namespace {

using Json = nlohmann::json;

Json Error(const Json& id, int code, std::string message) {
  return {
      {"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::move(message)}}}};
}

Json Result(const Json& id, Json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// A tool's failure, answered as a result the model reads (not a protocol error).
Json ToolError(const std::string& message) {
  return {{"content", Json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

// params as an object: absent is an empty one; anything but an object is not MCP's.
bool ParamsObject(const Json& request, Json* params) {
  auto it = request.find("params");
  if (it == request.end() || it->is_null()) {
    *params = Json::object();
    return true;
  }
  if (!it->is_object()) return false;
  *params = *it;
  return true;
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(fmt::format("mcp: writing an answer: {}", std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

McpServer::McpServer(ServerOptions options) : options_(std::move(options)) {
  ctx_.store = options_.store;
  ctx_.now_s = options_.now_s;
}

std::string McpServer::TooLarge() const {
  return JsonText(Error(nullptr, kInvalidRequest,
                        fmt::format("message too large: over {} bytes (a line is one message)",
                                    options_.max_message_bytes)));
}

std::optional<std::string> McpServer::HandleLine(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (line.size() > options_.max_message_bytes) return TooLarge();
  Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    return JsonText(Error(nullptr, kParseError, "parse error: the line is not JSON"));
  }
  if (request.is_array()) {
    return JsonText(Error(nullptr, kInvalidRequest,
                          "invalid request: JSON-RPC batches are not part of MCP (since "
                          "2025-06-18); send one message per line"));
  }
  if (!request.is_object()) {
    return JsonText(Error(nullptr, kInvalidRequest, "invalid request: expected a JSON object"));
  }
  auto id_it = request.find("id");
  bool has_id = id_it != request.end();
  Json id = has_id ? *id_it : Json(nullptr);
  if (has_id && !id.is_string() && !id.is_number_integer()) {
    return JsonText(
        Error(nullptr, kInvalidRequest, "invalid request: id must be a string or an integer"));
  }
  if (request.value("jsonrpc", Json()) != "2.0") {
    return JsonText(Error(id, kInvalidRequest, "invalid request: jsonrpc must be \"2.0\""));
  }
  auto method_it = request.find("method");
  if (method_it == request.end()) {
    // A response to a request of ours: this server sends none, so there is nothing to match.
    if (has_id && (request.contains("result") || request.contains("error"))) return std::nullopt;
    return JsonText(Error(id, kInvalidRequest, "invalid request: no method"));
  }
  if (!method_it->is_string()) {
    return JsonText(Error(id, kInvalidRequest, "invalid request: method must be a string"));
  }
  std::string method = method_it->get<std::string>();
  Json params;
  if (!ParamsObject(request, &params)) {
    if (!has_id) return std::nullopt;
    return JsonText(Error(id, kInvalidParams, "invalid params: params must be an object"));
  }
  if (!has_id) {
    // Notifications (initialized, cancelled, …) get no answer; none needs acting on here:
    // requests are answered one at a time, so a cancelled one has already been answered.
    return std::nullopt;
  }
  Json answer;
  try {
    answer = Dispatch(method, params, id);
  } catch (const std::exception& e) {
    // A bug in a tool, not the caller's fault; the server stays up for the next message.
    answer = Error(id, kInternalError, fmt::format("internal error: {}", e.what()));
  }
  return JsonText(answer);
}

Json McpServer::Dispatch(const std::string& method, const Json& params, const Json& id) {
  if (method == "initialize") return Initialize(params, id);
  if (method == "ping") return Result(id, Json::object());
  if (method == "tools/list") return ListTools(id);
  if (method == "tools/call") return CallTool(params, id);
  if (method == "resources/list") return ListResources(params, id);
  if (method == "resources/templates/list") {
    return Result(id, {{"resourceTemplates", ResourceTemplates()}});
  }
  if (method == "resources/read") return ReadResource(params, id);
  return Error(id, kMethodNotFound, fmt::format("method not found: {}", Quote(method)));
}

Json McpServer::Initialize(const Json& params, const Json& id) {
  auto v = params.find("protocolVersion");
  if (v == params.end() || !v->is_string()) {
    return Error(id, kInvalidParams, "invalid params: initialize needs protocolVersion");
  }
  std::string asked = v->get<std::string>();
  protocol_version_ = std::string(kProtocolVersions[0]);
  for (std::string_view known : kProtocolVersions) {
    if (asked == known) protocol_version_ = asked;
  }
  return Result(
      id, {{"protocolVersion", protocol_version_},
           {"capabilities",
            {{"tools", {{"listChanged", false}}},
             {"resources", {{"subscribe", false}, {"listChanged", false}}}}},
           {"serverInfo",
            {{"name", "rightsize"}, {"title", "rightsize"}, {"version", options_.version}}},
           {"instructions",
            "rightsize predicts what a SLURM job will use before it runs (predict, advise), says "
            "why a job failed (diagnose), shows a job's efficiency (job) and the cluster's waste "
            "(report), and replays the predictor on history (eval). Every tool answers with the "
            "versioned JSON document the matching `rightsize` command prints with --json. "
            "Resources: rightsize://job/{id} (a job's card) and rightsize://job/{id}/series."}});
}

Json McpServer::ListTools(const Json& id) {
  Json tools = Json::array();
  for (const Tool& t : Tools()) {
    tools.push_back(
        {{"name", t.name},
         {"title", t.title},
         {"description", t.description},
         {"inputSchema", t.input_schema},
         {"outputSchema", t.output_schema},
         {"annotations", {{"readOnlyHint", t.name != "diagnose"}, {"openWorldHint", false}}}});
  }
  return Result(id, {{"tools", tools}});
}

Json McpServer::CallTool(const Json& params, const Json& id) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return Error(id, kInvalidParams, "invalid params: tools/call needs the tool's name");
  }
  Json args = Json::object();
  if (auto a = params.find("arguments"); a != params.end() && !a->is_null()) {
    if (!a->is_object()) {
      return Error(id, kInvalidParams, "invalid params: arguments must be an object");
    }
    args = *a;
  }
  const auto& tools = Tools();
  auto tool = std::find_if(tools.begin(), tools.end(),
                           [&](const Tool& t) { return t.name == name->get<std::string>(); });
  if (tool == tools.end()) {
    std::vector<std::string> names;
    for (const Tool& t : tools) names.push_back(t.name);
    return Error(id, kInvalidParams,
                 fmt::format("invalid params: unknown tool {} (tools: {})",
                             Quote(name->get<std::string>()), fmt::join(names, ", ")));
  }
  if (Status st = CheckArguments(tool->input_schema, args); !st.ok()) {
    return Result(id, ToolError(fmt::format("{}: {}", tool->name, st.message())));
  }
  auto doc = tool->run(args, ctx_);
  if (!doc.ok()) {
    std::string message = doc.status().message();
    return Result(id, ToolError(message.starts_with(tool->name + ":")
                                    ? message
                                    : fmt::format("{}: {}", tool->name, message)));
  }
  return Result(id, {{"content", Json::array({{{"type", "text"}, {"text", JsonText(*doc, 2)}}})},
                     {"structuredContent", *doc},
                     {"isError", false}});
}

Json McpServer::ListResources(const Json& params, const Json& id) {
  std::string cursor;
  if (auto c = params.find("cursor"); c != params.end() && !c->is_null()) {
    if (!c->is_string()) {
      return Error(id, kInvalidParams, "invalid params: cursor must be a string");
    }
    cursor = c->get<std::string>();
  }
  auto list = ListJobResources(ctx_, cursor);
  if (!list.ok()) {
    bool bad = list.status().code() == Status::Code::kBadInput ||
               list.status().code() == Status::Code::kInvalidArgument;
    return Error(id, bad ? kInvalidParams : kInternalError, list.status().message());
  }
  return Result(id, *list);
}

Json McpServer::ReadResource(const Json& params, const Json& id) {
  auto uri = params.find("uri");
  if (uri == params.end() || !uri->is_string()) {
    return Error(id, kInvalidParams, "invalid params: resources/read needs a uri");
  }
  auto doc = mcp::ReadResource(ctx_, uri->get<std::string>());
  if (!doc.ok()) {
    Json e = Error(id, kInternalError, doc.status().message());
    switch (doc.status().code()) {
      case Status::Code::kNotFound:
        e["error"]["code"] = kResourceNotFound;
        e["error"]["message"] = fmt::format("resource not found: {}", doc.status().message());
        e["error"]["data"] = {{"uri", *uri}};
        break;
      case Status::Code::kInvalidArgument:
      case Status::Code::kBadInput:
        e["error"]["code"] = kInvalidParams;
        break;
      default:
        break;
    }
    return e;
  }
  return Result(id, {{"contents", Json::array({{{"uri", *uri},
                                                {"mimeType", "application/json"},
                                                {"text", JsonText(*doc, 2)}}})}});
}

Status McpServer::Serve(int in_fd, int out_fd) {
  std::string line;
  bool too_large = false;  // the current line is past the limit: dropped as it arrives
  char buf[1 << 16];
  auto answer = [&](const std::optional<std::string>& a) -> Status {
    if (!a) return Status::Ok();
    return WriteAll(out_fd, *a + "\n");
  };
  while (true) {
    ssize_t n = ::read(in_fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(fmt::format("mcp: reading a message: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view part = chunk.substr(0, nl);
      if (!too_large) {
        if (line.size() + part.size() > options_.max_message_bytes + 1) {  // + 1: a '\r'
          too_large = true;
          std::string().swap(line);
        } else {
          line.append(part);
        }
      }
      if (nl == std::string_view::npos) break;
      chunk.remove_prefix(nl + 1);
      if (too_large) {
        RS_RETURN_IF_ERROR(answer(TooLarge()));
        too_large = false;
      } else if (line.find_first_not_of(" \t\r") != std::string::npos) {
        RS_RETURN_IF_ERROR(answer(HandleLine(line)));
      }
      line.clear();
    }
  }
  // A last message without its newline still counts.
  if (too_large) return answer(TooLarge());
  if (line.find_first_not_of(" \t\r") != std::string::npos) return answer(HandleLine(line));
  return Status::Ok();
}

}  // namespace rightsize::mcp

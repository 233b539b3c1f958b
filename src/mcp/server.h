// `rightsize mcp`: a Model Context Protocol server (https://modelcontextprotocol.io) over the
// stdio transport: JSON-RPC 2.0 messages, one per line, requests in on standard input, answers
// out on standard output. Methods: initialize (the protocol version negotiated: the client's
// when this server speaks it, else the newest this one does), notifications/initialized, ping,
// tools/list, tools/call, resources/list, resources/templates/list, resources/read. The tools
// and resources are tools.h's.
//
// Malformed input never ends the server: a line that is not JSON gets -32700 (parse error),
// a message that is not a JSON-RPC request -32600 (invalid request), an unknown method -32601,
// missing or wrong params, an unknown tool or an unknown resource URI -32602 (a job the store
// does not have: -32002, resource not found); a tool whose arguments fail its inputSchema, or
// which fails, answers a result with isError and the reason, as the MCP specification asks
// (2025-11-25, SEP-1303), so a model can correct its call. A line longer than
// max_message_bytes is answered -32600 without being kept in memory.
//
// Not thread-safe: one server per connection, one message at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "mcp/tools.h"
#include "store/store.h"

namespace rightsize::mcp {

// JSON-RPC 2.0's error codes, and MCP's for a resource that is not there.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kResourceNotFound = -32002;

// The protocol versions spoken, newest first.
inline constexpr std::string_view kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                         "2024-11-05"};

// A job script is at most 16 MiB (jobscript/); with JSON's escapes a message carrying one fits.
inline constexpr size_t kMaxMessageBytes = 64 << 20;

struct ServerOptions {
  std::function<StatusOr<Store*>()> store;  // opened on first use
  std::function<int64_t()> now_s;           // Unix seconds
  std::string version;                      // rightsize's, for serverInfo
  size_t max_message_bytes = kMaxMessageBytes;
};

class McpServer {
 public:
  explicit McpServer(ServerOptions options);

  // One message (a line without its newline) in; the answer line out (no newline), or nullopt
  // for a notification or a client's response, which get none.
  std::optional<std::string> HandleLine(std::string_view line);

  // Reads messages from `in_fd` until end of file, writing each answer and a newline to
  // `out_fd`. IoError when a read or write fails (the client went away).
  Status Serve(int in_fd, int out_fd);

  // The answer to a line longer than max_message_bytes.
  std::string TooLarge() const;

  // The version initialize agreed on ("" before initialize).
  const std::string& protocol_version() const { return protocol_version_; }

 private:
  nlohmann::json Dispatch(const std::string& method, const nlohmann::json& params,
                          const nlohmann::json& id);
  nlohmann::json Initialize(const nlohmann::json& params, const nlohmann::json& id);
  nlohmann::json ListTools(const nlohmann::json& id);
  nlohmann::json CallTool(const nlohmann::json& params, const nlohmann::json& id);
  nlohmann::json ReadResource(const nlohmann::json& params, const nlohmann::json& id);
  nlohmann::json ListResources(const nlohmann::json& params, const nlohmann::json& id);

  ServerOptions options_;
  ToolContext ctx_;
  std::string protocol_version_;
};

}  // namespace rightsize::mcp

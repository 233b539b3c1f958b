// `rightsize mcp`: the Model Context Protocol server on standard input and output, for coding
// agents (Claude Code, other MCP clients) that start it as a subprocess.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>

#include "cli/app.h"
#include "cli/terminal.h"
#include "core/fd.h"
#include "mcp/server.h"

namespace rightsize::cli {

void AddMcpCommand(CLI::App& app, Context& ctx, Action* action) {
  auto* cmd = app.add_subcommand(
      "mcp",
      "Serve the Model Context Protocol on standard input and output (JSON-RPC 2.0, one "
      "message a line) for coding agents: the tools predict, advise, diagnose, job, report "
      "and eval answer with the documents the commands print with --json; resources "
      "rightsize://job/{id} and rightsize://job/{id}/series");
  cmd->footer(
      "An MCP client starts it as a subprocess, e.g. for Claude Code:\n"
      "  claude mcp add rightsize -- rightsize --db /path/to/rightsize.db mcp\n"
      "or in a client's JSON configuration:\n"
      "  {\"mcpServers\": {\"rightsize\": {\"command\": \"rightsize\",\n"
      "                                 \"args\": [\"--db\", \"/path/to/rightsize.db\", "
      "\"mcp\"]}}}\n"
      "Standard output carries only protocol messages; logs go to standard error. See "
      "docs/mcp.md.");
  cmd->callback([&ctx, action] {
    *action = [&ctx]() -> int {
      // Protocol messages get standard output to themselves: whatever else would print there
      // (a library's log line) goes to standard error instead.
      std::fflush(stdout);
      UniqueFd out(::dup(STDOUT_FILENO));
      if (!out.valid() || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        return Fail(Status::IoError("mcp: cannot set standard output aside for the protocol"));
      }
      std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a write error, not a kill
      mcp::ServerOptions options;
      options.store = [&ctx] { return ctx.OpenedStore(); };
      options.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };
      options.version = RIGHTSIZE_VERSION;
      mcp::McpServer server(std::move(options));
      Status st = server.Serve(STDIN_FILENO, out.get());
      if (!st.ok()) return Fail(st);
      return kExitOk;
    };
  });
}

}  // namespace rightsize::cli

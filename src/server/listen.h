// Binding an HTTP server to a --listen HOST:PORT flag, one way for every command that serves
// (the agent's /metrics, `rightsize serve`).
#pragma once

#include <httplib.h>

#include <string>

#include "core/status.h"

namespace rightsize {

struct Bound {
  std::string host;  // "0.0.0.0" when the flag gave none
  int port = 0;      // the real port, also when the flag asked for any (0)
};

// Binds `server` to `listen` ("HOST:PORT", ":PORT", "[::1]:PORT"; port 0: any free one).
// InvalidArgument for a malformed flag, IoError when the address cannot be bound.
StatusOr<Bound> BindListen(httplib::Server& server, const std::string& listen);

}  // namespace rightsize

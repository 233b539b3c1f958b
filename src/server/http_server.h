// The HTTP(S) front of `rightsize serve`: an ApiServer mounted on a cpp-httplib server, bound to
// --listen, with the settings that hundreds of agents and browsers need (a worker pool, short
// keep-alive, TCP_NODELAY, SO_REUSEADDR without SO_REUSEPORT, a full listen backlog, a body
// cap). Serve() blocks in the calling thread until Stop() (from any thread) or a failure.
//
// Failures: a certificate and key that do not load, a malformed or busy --listen address
// (InvalidArgument, IoError).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "server/server.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace rightsize {

struct HttpServeOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0: any free one
  std::string tls_cert, tls_key;          // PEM files: HTTPS when both are given
  int threads = 32;                       // worker threads
};

class HttpFront {
 public:
  // Binds `api` (which must outlive the front) to `options.listen`.
  static StatusOr<std::unique_ptr<HttpFront>> Bind(ApiServer& api, const HttpServeOptions& options);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }  // the real port, also when any was asked for
  bool tls() const { return tls_; }

  // Serves until Stop(); false when the server stopped with an error.
  bool Serve();
  void Stop();

 private:
  HttpFront() = default;
  std::unique_ptr<httplib::Server> http_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace rightsize

// The HTTP(S) front of `rightsize serve`: an ApiServer mounted on a cpp-httplib server, bound to
// --listen, with the settings that hundreds of agents and browsers need (TCP_NODELAY,
// SO_REUSEADDR without SO_REUSEPORT, a full listen backlog) and the limits that keep slow, idle
// or greedy peers from starving everyone else:
//
//   - every accepted connection gets a worker thread at once (threads start on demand up to
//     `max_threads` and retire after idling 30 s beyond `threads`), so a connection that sends
//     nothing only holds its own thread, never a shared one that /healthz waits for;
//   - TCP_DEFER_ACCEPT: a socket that connects and sends nothing is not even accepted;
//   - plain HTTP (not TLS): a request's line and headers must arrive within
//     `header_timeout_s` in all and within kMaxHeaderBytes; a body is cut beyond its route's
//     cap (and `body_timeout_s` in all); a peer address with more than `max_per_address`
//     connections open gets a 1-second header deadline on its extra connections, and one with
//     more than `max_per_address` requests in flight (headers read, not yet answered) a 503
//     on the extra requests but /healthz;
//   - a body whose Content-Length is over its route's cap is answered 413 with a JSON error
//     before it is read;
//   - an exception anywhere in a request (a handler, the library's reading or writing, an
//     allocation failure) ends that request or connection only: a 500 with a JSON error where
//     an answer can still be sent, and rightsize_http_internal_errors_total in /metrics.
//
// What cpp-httplib 0.11.4 (Debian's, compiled) cannot do and this front therefore does not: a
// header deadline, header byte cap and per-address cap over TLS (its SSL connection loop is not
// reachable from outside; over TLS only the per-read timeout, the thread per connection and the
// Content-Length check apply), and refusing a connection before its headers are read (it could
// be done in our loop, but whose request it is is unknown until its headers arrive and a
// health check from a busy address must pass: the extra connections get a short deadline).
//
// Serve() blocks in the calling thread until Stop() (from any thread) or a failure.
// Failures: a certificate and key that do not load, a malformed or busy --listen address
// (InvalidArgument, IoError).
#pragma once

#include <cstddef>
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
  int threads = 32;                       // worker threads kept when idle
  int max_threads = 4096;                 // one per open connection, at most; beyond, they queue
  int max_per_address = 128;  // connections, and requests in flight, of one address before limits
  int header_timeout_s = 10;  // a request's line and headers, in all
  int body_timeout_s = 120;   // a request's body, in all
};

// The most a request's line and headers may take (plain HTTP); more is answered 400.
inline constexpr size_t kMaxHeaderBytes = size_t{64} << 10;
// The body cap of every route but telemetry (which has max_batch_bytes of its own, after
// decompression, and kMaxTelemetryBodyBytes as sent).
inline constexpr size_t kMaxRequestBodyBytes = size_t{8} << 20;
inline constexpr size_t kMaxTelemetryBodyBytes = size_t{64} << 20;

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

  class Limits;  // the per-address counts and the connection loop's settings (http_server.cc)

 private:
  HttpFront() = default;
  std::shared_ptr<Limits> limits_;
  std::unique_ptr<httplib::Server> http_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace rightsize

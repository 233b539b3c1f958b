#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include "server/listen.h"

namespace rightsize {

StatusOr<std::unique_ptr<HttpFront>> HttpFront::Bind(ApiServer& api,
                                                     const HttpServeOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  std::unique_ptr<HttpFront> front(new HttpFront());
  if (!options.tls_cert.empty()) {
    auto tls =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!tls->is_valid()) {
      return Status::InvalidArgument(
          fmt::format("cannot use the TLS certificate {} with the key {} (PEM files expected)",
                      options.tls_cert, options.tls_key));
    }
    front->http_ = std::move(tls);
    front->tls_ = true;
  } else {
    front->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *front->http_;
  int threads = options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Agents keep their connections; a short idle timeout frees threads for others.
  http.set_keep_alive_timeout(2);
  // Without it every answer on a kept-alive connection waits ~40 ms for a delayed ACK.
  http.set_tcp_nodelay(true);
  // SO_REUSEADDR only: the library's default SO_REUSEPORT would let a second server on the
  // same port start silently and take half the connections.
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  http.set_socket_options([listening](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    *listening = sock;
  });
  http.set_payload_max_length(size_t{64} << 20);
  api.Mount(http);
  RS_ASSIGN_OR_RETURN(Bound bound, BindListen(http, options.listen));
  // The library listens with a backlog of 5: hundreds of agents connecting at once (each batch
  // is a new connection once the idle one has timed out) overflowed it, and a dropped handshake
  // surfaced as a connection reset. listen() again raises it.
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);
  front->host_ = bound.host;
  front->port_ = bound.port;
  return front;
}

HttpFront::~HttpFront() = default;

bool HttpFront::Serve() { return http_->listen_after_bind(); }

void HttpFront::Stop() { http_->stop(); }

}  // namespace rightsize

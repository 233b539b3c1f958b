#include "server/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <vector>

#include "core/json_text.h"
#include "core/mutex.h"
#include "server/listen.h"

namespace rightsize {

namespace {

using Clock = std::chrono::steady_clock;

// The connection a worker thread is serving, for the pre-routing handler on the same thread
// (the library hands it only the request). Null over TLS, where the library runs the loop.
struct ConnectionState {
  std::string ip;          // the peer's address
  bool over_cap = false;   // its address has more than max_per_address connections open
  bool in_flight = false;  // its request is counted in its address's requests in flight
  bool refused = false;    // answered before its body was read: close instead of keeping it
};
thread_local ConnectionState* current_connection = nullptr;

std::string JsonError(const std::string& message) {
  return JsonText(nlohmann::json{{"error", message}});
}

size_t BodyCapFor(const std::string& path) {
  return path == "/api/v1/telemetry" ? kMaxTelemetryBodyBytes : kMaxRequestBodyBytes;
}

// A worker per connection: started when a connection arrives and none is idle, up to `max`
// (then connections queue for the next free one); idle ones beyond `min` retire. The library's
// ThreadPool has a fixed size, so 32 connections that send nothing held all 32 workers.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  ConnectionPool(int min_threads, int max_threads, std::function<void(const char*)> on_escape)
      : min_(static_cast<size_t>(min_threads)),
        max_(static_cast<size_t>(std::max(min_threads, max_threads))),
        on_escape_(std::move(on_escape)) {}
  ~ConnectionPool() override { shutdown(); }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void enqueue(std::function<void()> fn) override {
    std::vector<std::thread> retired;
    {
      MutexLock lock(mu_);
      retired.swap(retired_);
      jobs_.push_back(std::move(fn));
      if (jobs_.size() > idle_ && threads_.size() < max_) {
        std::thread t([this] { Work(); });
        threads_.emplace(t.get_id(), std::move(t));
      } else {
        cv_.NotifyOne();
      }
    }
    for (auto& t : retired) t.join();
  }

  void shutdown() override {
    {
      MutexLock lock(mu_);
      shutdown_ = true;
    }
    cv_.NotifyAll();
    while (true) {
      std::vector<std::thread> all;
      {
        MutexLock lock(mu_);
        for (auto& [id, t] : threads_) all.push_back(std::move(t));
        threads_.clear();
        for (auto& t : retired_) all.push_back(std::move(t));
        retired_.clear();
      }
      if (all.empty()) break;
      for (auto& t : all) t.join();
    }
  }

 private:
  static constexpr auto kIdleRetire = std::chrono::seconds(30);

  void Work() {
    MutexLock lock(mu_);
    while (true) {
      ++idle_;
      auto retire_at = Clock::now() + kIdleRetire;
      bool retire = false;
      while (jobs_.empty() && !shutdown_ && !retire) {
        if (cv_.WaitUntil(lock, retire_at) || !jobs_.empty()) continue;
        retire = threads_.size() > min_;
        retire_at = Clock::now() + kIdleRetire;  // one of the `min_` kept: wait again
      }
      --idle_;
      if (jobs_.empty()) {
        // Shut down, or idle long enough: hand this thread to whoever joins next.
        auto self = threads_.find(std::this_thread::get_id());
        if (self != threads_.end()) {
          retired_.push_back(std::move(self->second));
          threads_.erase(self);
        }
        return;
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.Unlock();
      // A connection that throws out of the library (its reading or writing, not a handler:
      // those are caught nearer) ends; the worker and the server go on.
      try {
        fn();
      } catch (const std::exception& e) {
        on_escape_(e.what());
      } catch (...) {
        on_escape_("unknown exception");
      }
      fn = nullptr;
      lock.Lock();
    }
  }

  const size_t min_, max_;
  std::function<void(const char*)> on_escape_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  std::map<std::thread::id, std::thread> threads_ GUARDED_BY(mu_);
  std::vector<std::thread> retired_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;
  bool shutdown_ GUARDED_BY(mu_) = false;
};

// A socket read with limits the library's own stream does not have: a deadline and a byte
// budget for the request's head and, once the head is read, for its body.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, std::chrono::seconds read_timeout, std::chrono::seconds write_timeout)
      : fd_(fd), read_timeout_(read_timeout), write_timeout_(write_timeout) {
    Address(true, &remote_ip_, &remote_port_);
    Address(false, &local_ip_, &local_port_);
  }

  // The next request: its head must arrive by `deadline` and within `budget` bytes.
  void Limit(Clock::time_point deadline, size_t budget) {
    deadline_ = deadline;
    budget_ = budget;
    used_ = 0;
  }
  // True when a request's first byte arrived within `timeout` (buffered bytes count).
  bool WaitForRequest(std::chrono::seconds timeout) {
    return off_ < len_ || Poll(POLLIN, Clock::now() + timeout);
  }

  bool is_readable() const override {
    return off_ < len_ || Poll(POLLIN, std::min(deadline_, Clock::now() + read_timeout_));
  }
  bool is_writable() const override { return Poll(POLLOUT, Clock::now() + write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (used_ >= budget_) return -1;
    size = std::min(size, budget_ - used_);
    if (off_ == len_) {
      if (!is_readable()) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buf_, sizeof(buf_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      len_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  // Never blocks beyond the write timeout: a peer that stops reading cannot hold the thread.
  ssize_t write(const char* ptr, size_t size) override {
    while (true) {
      if (!is_writable()) return -1;
      ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }

 private:
  bool Poll(short events, Clock::time_point until) const {
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, events, 0};
      int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (rc < 0 && errno == EINTR) continue;
      return rc > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
    }
  }

  void Address(bool peer, std::string* ip, int* port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((peer ? ::getpeername(fd_, sa, &len) : ::getsockname(fd_, sa, &len)) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      *port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof(text));
      *port = ntohs(in->sin6_port);
    }
    *ip = text;
  }

  int fd_;
  std::chrono::seconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  size_t budget_ = SIZE_MAX, used_ = 0;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
  std::string remote_ip_, local_ip_;
  int remote_port_ = 0, local_port_ = 0;
};

}  // namespace

class HttpFront::Limits {
 public:
  Limits(ApiServer& api, const HttpServeOptions& o) : api_(api), options_(o) {}
  ApiServer& api() { return api_; }
  const HttpServeOptions& options() const { return options_; }

  // Counts an open connection of `ip`; true when that makes more than max_per_address.
  bool Open(const std::string& ip) {
    MutexLock lock(mu_);
    return ++open_[ip] > options_.max_per_address;
  }
  void Close(const std::string& ip) {
    MutexLock lock(mu_);
    if (auto it = open_.find(ip); it != open_.end() && --it->second <= 0) open_.erase(it);
  }
  // Counts a request of `ip` whose head is in; true when that makes more than max_per_address.
  bool BeginRequest(const std::string& ip) {
    MutexLock lock(mu_);
    return ++in_flight_[ip] > options_.max_per_address;
  }
  void EndRequest(const std::string& ip) {
    MutexLock lock(mu_);
    if (auto it = in_flight_.find(ip); it != in_flight_.end() && --it->second <= 0) {
      in_flight_.erase(it);
    }
  }

 private:
  ApiServer& api_;
  const HttpServeOptions options_;
  Mutex mu_;
  std::map<std::string, int> open_ GUARDED_BY(mu_);
  std::map<std::string, int> in_flight_ GUARDED_BY(mu_);
};

namespace {

constexpr std::chrono::seconds kReadTimeout(5), kWriteTimeout(5), kKeepAliveTimeout(2);
constexpr int kKeepAliveMaxRequests = 1000;
// The head deadline of a connection beyond its address's max_per_address: enough for a client
// that sends its request at once (a health check), too little to hold a thread by trickling.
constexpr std::chrono::seconds kOverCapHeaderTimeout(1);

// Plain HTTP with the connection loop of our own (keep-alive, limits, per-address counts).
// The library's process_and_close_socket is a private virtual: overriding it is how 0.11.4
// lets a server read through another Stream; process_request (protected) does the HTTP.
class GuardedServer final : public httplib::Server {
 public:
  explicit GuardedServer(std::shared_ptr<HttpFront::Limits> limits) : limits_(std::move(limits)) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    GuardedStream strm(sock, kReadTimeout, kWriteTimeout);
    std::string ip;
    int port = 0;
    strm.get_remote_ip_and_port(ip, port);
    ConnectionState state;
    state.ip = ip;
    state.over_cap = limits_->Open(ip);
    current_connection = &state;
    const HttpServeOptions& o = limits_->options();
    bool ok = true;
    try {
      for (int n = kKeepAliveMaxRequests; n > 0 && svr_sock_ != INVALID_SOCKET; --n) {
        if (!strm.WaitForRequest(kKeepAliveTimeout)) break;
        auto head =
            state.over_cap ? kOverCapHeaderTimeout : std::chrono::seconds(o.header_timeout_s);
        strm.Limit(Clock::now() + head, kMaxHeaderBytes);
        bool closed = false;
        ok = process_request(strm, n == 1, closed, [&](httplib::Request& req) {
          // The head is in: from here the body's own deadline and cap (the slack covers
          // chunked framing).
          strm.Limit(Clock::now() + std::chrono::seconds(o.body_timeout_s),
                     BodyCapFor(req.path) + (size_t{64} << 10));
        });
        if (state.in_flight) limits_->EndRequest(ip);
        state.in_flight = false;
        if (!ok || closed || state.refused) break;
      }
    } catch (const std::exception& e) {
      limits_->api().CountInternalError(e.what());
      ok = false;
    } catch (...) {
      limits_->api().CountInternalError("unknown exception");
      ok = false;
    }
    current_connection = nullptr;
    if (state.in_flight) limits_->EndRequest(ip);
    limits_->Close(ip);
    ::shutdown(sock, SHUT_WR);
    if (state.refused) {
      // Read what the peer still sends for a moment, so that closing with unread data (a
      // reset) does not destroy the answer before the peer has read it.
      char sink[4096];
      auto until = Clock::now() + std::chrono::seconds(1);
      size_t drained = 0;
      while (drained < (size_t{1} << 20) && Clock::now() < until) {
        pollfd p{sock, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        ssize_t r = ::recv(sock, sink, sizeof(sink), 0);
        if (r <= 0) break;
        drained += static_cast<size_t>(r);
      }
    }
    ::close(sock);
    return ok;
  }

  std::shared_ptr<HttpFront::Limits> limits_;
};

}  // namespace

StatusOr<std::unique_ptr<HttpFront>> HttpFront::Bind(ApiServer& api,
                                                     const HttpServeOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  std::unique_ptr<HttpFront> front(new HttpFront());
  front->limits_ = std::make_shared<Limits>(api, options);
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
    front->http_ = std::make_unique<GuardedServer>(front->limits_);
  }
  httplib::Server& http = *front->http_;
  int threads = options.threads, max_threads = options.max_threads;
  http.new_task_queue = [&api, threads, max_threads] {
    return new ConnectionPool(threads, max_threads,
                              [&api](const char* what) { api.CountInternalError(what); });
  };
  // Agents keep their connections; a short idle timeout frees threads for others.
  http.set_keep_alive_timeout(kKeepAliveTimeout.count());
  http.set_keep_alive_max_count(kKeepAliveMaxRequests);
  http.set_read_timeout(kReadTimeout.count());
  http.set_write_timeout(kWriteTimeout.count());
  // Without it every answer on a kept-alive connection waits ~40 ms for a delayed ACK.
  http.set_tcp_nodelay(true);
  // SO_REUSEADDR only: the library's default SO_REUSEPORT would let a second server on the
  // same port start silently and take half the connections. TCP_DEFER_ACCEPT: a connection
  // that sends nothing for 5 s is never accepted, so idle sockets cost no worker.
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  http.set_socket_options([listening](socket_t sock) {
    int yes = 1, defer_s = 5;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof(defer_s));
    *listening = sock;
  });
  http.set_payload_max_length(kMaxTelemetryBodyBytes);
  // Before the body is read: the per-address limit and the body caps, answered in JSON (the
  // library's own 413 has no body).
  http.set_pre_routing_handler(
      [&api, limits = front->limits_](const httplib::Request& req, httplib::Response& res) {
        ConnectionState* conn = current_connection;
        bool too_many = false;
        if (conn != nullptr) {
          conn->in_flight = true;
          too_many = limits->BeginRequest(conn->ip);
        }
        if (too_many && req.path != "/healthz") {
          conn->refused = true;
          api.CountRefused("per_address");
          res.status = 503;
          res.set_content(JsonError("too many requests from your address at once: retry later"),
                          "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }
        size_t cap = BodyCapFor(req.path);
        if (req.has_header("Content-Length")) {
          std::string length = req.get_header_value("Content-Length");
          bool over = length.size() > 18 || std::any_of(length.begin(), length.end(),
                                                        [](char c) { return c < '0' || c > '9'; });
          if (!over) over = std::stoull(length) > cap;
          if (over) {
            if (conn != nullptr) conn->refused = true;
            api.CountRefused("too_large");
            res.status = 413;
            res.set_content(JsonError(fmt::format("the request body is over {} bytes ({}); send "
                                                  "less",
                                                  cap, length)),
                            "application/json");
            return httplib::Server::HandlerResponse::Handled;
          }
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
  // A handler's exception (the routes catch their own; this is what escapes them, e.g. while
  // the library reads a body): a 500 in JSON for this request only.
  http.set_exception_handler(
      [&api](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        api.CountInternalError(what);
        res.status = 500;
        res.set_content(JsonError("internal error: " + what), "application/json");
      });
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

// A /metrics endpoint of its own (the agent's): Prometheus text from a callback, served on a
// thread of its own from Start() until Stop() or destruction. The callback runs on that thread;
// it must be thread-safe. Failure: an address that cannot be bound (InvalidArgument, IoError).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "server/listen.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace rightsize {

class MetricsEndpoint {
 public:
  explicit MetricsEndpoint(std::function<std::string()> metrics);
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  ~MetricsEndpoint();

  // Binds `listen` ("HOST:PORT") and starts serving; returns where.
  StatusOr<Bound> Start(const std::string& listen);
  void Stop();

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace rightsize

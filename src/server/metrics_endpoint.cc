#include "server/metrics_endpoint.h"

#include <httplib.h>

namespace rightsize {

MetricsEndpoint::MetricsEndpoint(std::function<std::string()> metrics)
    : server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics",
               [metrics = std::move(metrics)](const httplib::Request&, httplib::Response& res) {
                 res.set_content(metrics(), "text/plain; version=0.0.4");
               });
}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

StatusOr<Bound> MetricsEndpoint::Start(const std::string& listen) {
  RS_ASSIGN_OR_RETURN(Bound bound, BindListen(*server_, listen));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return bound;
}

void MetricsEndpoint::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace rightsize

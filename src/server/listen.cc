#include "server/listen.h"

#include "core/units.h"

namespace rightsize {

StatusOr<Bound> BindListen(httplib::Server& server, const std::string& listen) {
  size_t colon = listen.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : ParseInt(listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    return Status::InvalidArgument("--listen: expected HOST:PORT (port 0 to 65535), got " + listen);
  }
  Bound b;
  b.host = listen.substr(0, colon);
  if (b.host.size() >= 2 && b.host.front() == '[' && b.host.back() == ']') {
    b.host = b.host.substr(1, b.host.size() - 2);  // an IPv6 address in brackets
  }
  if (b.host.empty()) b.host = "0.0.0.0";
  b.port =
      *port == 0
          ? server.bind_to_any_port(b.host)
          : (server.bind_to_port(b.host, static_cast<int>(*port)) ? static_cast<int>(*port) : -1);
  if (b.port < 0) return Status::IoError("--listen: cannot listen on " + listen);
  return b;
}

}  // namespace rightsize

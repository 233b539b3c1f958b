#include "remote_write/remote_write.h"

#include <fmt/format.h>
#include <httplib.h>
#include <snappy.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "prompb/remote_write.pb.h"

namespace rightsize {
namespace {

constexpr std::string_view kPrefix = "rightsize_job_";

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string Excerpt(const std::string& body) {
  std::string s = body.substr(0, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(std::string_view what, const std::string& url) {
  std::string_view rest = url;
  std::string_view scheme;
  if (rest.starts_with("http://")) {
    scheme = "http://";
  } else if (rest.starts_with("https://")) {
    scheme = "https://";
  } else {
    return Status::InvalidArgument(
        fmt::format("{}: expected http://HOST:PORT/… or https://HOST:PORT/…, got '{}'", what, url));
  }
  rest.remove_prefix(scheme.size());
  size_t slash = rest.find('/');
  std::string_view host = rest.substr(0, slash);
  if (host.empty()) return Status::InvalidArgument(fmt::format("{}: no host in '{}'", what, url));
  HttpUrl u{std::string(scheme) + std::string(host), ""};
  if (slash != std::string_view::npos) u.path = std::string(rest.substr(slash));
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  return u;
}

std::string TsdbMetricName(std::string_view metric) {
  std::string out(kPrefix);
  for (char c : metric) {
    if (NameChar(c)) {
      out += c;
    } else {
      out += fmt::format(":{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::optional<std::string> MetricOfTsdbName(std::string_view name) {
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (NameChar(name[i])) {
      out += name[i];
      continue;
    }
    if (name[i] != ':' || i + 2 >= name.size()) return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hex(name[i + 1]), lo = hex(name[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

RemoteWriteEncoder::RemoteWriteEncoder() : request_(std::make_unique<prometheus::WriteRequest>()) {}
RemoteWriteEncoder::~RemoteWriteEncoder() = default;

void RemoteWriteEncoder::Add(const JobTelemetry& jt, bool finite_only) {
  for (const auto& [metric, samples] : jt.samples) {
    size_t n = samples.size();
    if (finite_only) {
      n = static_cast<size_t>(std::count_if(
          samples.begin(), samples.end(), [](const Sample& s) { return std::isfinite(s.value); }));
    }
    if (n == 0) continue;
    prometheus::TimeSeries* ts = request_->add_timeseries();
    // Sorted by name: __name__ < cluster < job_id.
    auto* l = ts->add_labels();
    l->set_name("__name__");
    l->set_value(TsdbMetricName(metric));
    l = ts->add_labels();
    l->set_name("cluster");
    l->set_value(jt.job.cluster);
    l = ts->add_labels();
    l->set_name("job_id");
    l->set_value(jt.job.job_id);
    ts->mutable_samples()->Reserve(static_cast<int>(n));
    for (const Sample& s : samples) {
      if (finite_only && !std::isfinite(s.value)) continue;
      auto* p = ts->add_samples();
      p->set_timestamp(s.t_ms);
      p->set_value(s.value);
    }
    pending_ += n;
  }
}

StatusOr<std::string> RemoteWriteEncoder::Take() {
  if (!request_->SerializeToString(&raw_)) {
    return Status::Internal("cannot encode a remote-write request");
  }
  std::string compressed;
  snappy::Compress(raw_.data(), raw_.size(), &compressed);
  request_->Clear();
  pending_ = 0;
  return compressed;
}

StatusOr<std::vector<std::string>> EncodeRemoteWrite(std::span<const JobTelemetry> jobs) {
  std::vector<std::string> bodies;
  RemoteWriteEncoder encoder;
  for (const JobTelemetry& jt : jobs) {
    encoder.Add(jt, /*finite_only=*/true);
    if (encoder.pending() >= kMaxRemoteWriteSamples) {
      RS_ASSIGN_OR_RETURN(std::string body, encoder.Take());
      bodies.push_back(std::move(body));
    }
  }
  if (encoder.pending() > 0) {
    RS_ASSIGN_OR_RETURN(std::string body, encoder.Take());
    bodies.push_back(std::move(body));
  }
  return bodies;
}

StatusOr<std::unique_ptr<RemoteWriteClient>> RemoteWriteClient::Create(const std::string& write_url,
                                                                       double timeout_s) {
  RS_ASSIGN_OR_RETURN(HttpUrl parsed, ParseHttpUrl("the TSDB's remote-write URL", write_url));
  if (parsed.path.empty()) {
    return Status::InvalidArgument(fmt::format(
        "the TSDB's remote-write URL '{}' has no path (e.g. http://vm:8428/api/v1/write)",
        write_url));
  }
  return std::unique_ptr<RemoteWriteClient>(
      new RemoteWriteClient(write_url, std::move(parsed), timeout_s));
}

RemoteWriteClient::RemoteWriteClient(std::string url, HttpUrl parsed, double timeout_s)
    : url_(std::move(url)),
      path_(std::move(parsed.path)),
      client_(std::make_unique<httplib::Client>(parsed.scheme_host_port)) {
  auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(timeout_s));
  client_->set_connection_timeout(
      std::min<std::chrono::microseconds>(timeout, std::chrono::seconds(5)));
  client_->set_read_timeout(timeout);
  client_->set_write_timeout(timeout);
  client_->set_keep_alive(true);
  // Headers and body go in two writes: without it the second waits for a delayed ACK (40 ms a
  // request).
  client_->set_tcp_nodelay(true);
}

RemoteWriteClient::~RemoteWriteClient() = default;

Status RemoteWriteClient::Post(const std::string& body, size_t samples) {
  httplib::Headers headers{{"Content-Encoding", "snappy"},
                           {"X-Prometheus-Remote-Write-Version", "0.1.0"},
                           {"User-Agent", "rightsize"}};
  auto res = client_->Post(path_, headers, body, "application/x-protobuf");
  refused_for_good_ = res && res->status >= 400 && res->status < 500 && res->status != 429;
  if (!res) {
    return Status::IoError(fmt::format("cannot send {} samples to the TSDB at {}: {}", samples,
                                       url_, httplib::to_string(res.error())));
  }
  if (res->status < 200 || res->status >= 300) {
    return Status::IoError(fmt::format("the TSDB at {} refused {} samples: HTTP {}: {}", url_,
                                       samples, res->status, Excerpt(res->body)));
  }
  return Status::Ok();
}

}  // namespace rightsize

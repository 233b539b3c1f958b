// Remote write: jobs' samples as Prometheus remote write 1.0 requests, and their sending.
//
// The one encoding of rightsize's samples for a Prometheus-compatible TSDB, shared by the
// server's TsdbStore and by an agent that writes its samples to the TSDB itself (`agent
// --tsdb-write-url`). A job's metric "memory_bytes" is the series
// rightsize_job_memory_bytes{cluster="…",job_id="…"}; a character that a metric name cannot hold
// is written ":xx" (its byte in hex), so every metric name maps back. A request is a
// snappy-compressed protobuf WriteRequest of at most kMaxRemoteWriteSamples samples.
//
// RemoteWriteEncoder and RemoteWriteClient are not thread-safe (one per thread); the client
// keeps its HTTP connection alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/telemetry.h"

namespace prometheus {
class WriteRequest;
}

namespace httplib {
class Client;
}

namespace rightsize {

// A request's samples at most: VictoriaMetrics refuses bodies over 32 MB by default.
inline constexpr size_t kMaxRemoteWriteSamples = 200000;

// "http://host:port" and the path after it ("" or "/api/v1/write", no trailing slash).
struct HttpUrl {
  std::string scheme_host_port;
  std::string path;
};
// InvalidArgument naming `what` for anything but http://HOST… or https://HOST….
StatusOr<HttpUrl> ParseHttpUrl(std::string_view what, const std::string& url);

// "memory_bytes" -> "rightsize_job_memory_bytes"; bytes outside [A-Za-z0-9_] become ":xx".
std::string TsdbMetricName(std::string_view metric);
// The inverse; nullopt for a name that is not rightsize_job_<escaped metric>.
std::optional<std::string> MetricOfTsdbName(std::string_view name);

class RemoteWriteEncoder {
 public:
  RemoteWriteEncoder();
  ~RemoteWriteEncoder();
  RemoteWriteEncoder(const RemoteWriteEncoder&) = delete;
  RemoteWriteEncoder& operator=(const RemoteWriteEncoder&) = delete;

  // Adds the samples of a job (all of them; with `finite_only` NaN and ±Inf are left out, as
  // the agent's JSON batches leave them out).
  void Add(const JobTelemetry& jt, bool finite_only = false);
  // Samples added since the last Take().
  size_t pending() const { return pending_; }
  // The compressed request body of what was added, and starts over.
  StatusOr<std::string> Take();

 private:
  std::unique_ptr<prometheus::WriteRequest> request_;
  size_t pending_ = 0;
  std::string raw_;
};

// The request bodies for the samples of `jobs` (finite only), each at most
// kMaxRemoteWriteSamples; none when they have no sample.
StatusOr<std::vector<std::string>> EncodeRemoteWrite(std::span<const JobTelemetry> jobs);

class RemoteWriteClient {
 public:
  // InvalidArgument for a URL that is not http(s)://HOST:PORT/PATH (a path is required, e.g.
  // http://vm:8428/api/v1/write). Nothing is contacted until the first Post.
  static StatusOr<std::unique_ptr<RemoteWriteClient>> Create(const std::string& write_url,
                                                             double timeout_s = 30);
  ~RemoteWriteClient();
  RemoteWriteClient(const RemoteWriteClient&) = delete;
  RemoteWriteClient& operator=(const RemoteWriteClient&) = delete;

  // Sends one body holding `samples` samples. IoError when the TSDB cannot be reached or
  // answers anything but 2xx (its status and the start of its answer in the message).
  Status Post(const std::string& body, size_t samples);
  // Whether the last Post failed with a 4xx other than 429: the TSDB refuses these samples for
  // good (remote write's rule: not to be retried).
  bool refused_for_good() const { return refused_for_good_; }
  const std::string& url() const { return url_; }

 private:
  RemoteWriteClient(std::string url, HttpUrl parsed, double timeout_s);
  std::string url_;
  std::string path_;
  std::unique_ptr<httplib::Client> client_;
  bool refused_for_good_ = false;
};

}  // namespace rightsize

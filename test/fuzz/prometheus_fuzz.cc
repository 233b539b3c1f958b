// libFuzzer target for `rightsize ingest prometheus`: ReadPrometheus (ingest/prometheus.h), the
// real reader, answered through its transport (PrometheusOptions::transport) with the fuzzed
// bytes instead of over HTTP: cpp-httplib's client is not under test, and a loopback server
// answered 40 inputs a second. The input is a list of answer bodies separated by form feeds
// ('\f'); the k-th request gets the k-th body (HTTP 200, or 503 for a body that starts with
// "503 " so the refusal paths run too), and any request after the last gets HTTP 500, which ends
// the read. So the first answer is the reachability check (vector(1)), the next ones the
// kube-state-metrics, cAdvisor and DCGM series: the size cap, JSON decoding, paging, the
// assembly of pods and containers into records. Seeds: corpus/prometheus/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "ingest/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = rightsize::fuzz::AsText(data, size);
  std::vector<std::string_view> answers;
  for (size_t pos = 0;;) {
    size_t ff = text.find('\f', pos);
    answers.push_back(text.substr(pos, ff == std::string_view::npos ? ff : ff - pos));
    if (ff == std::string_view::npos) break;
    pos = ff + 1;
  }
  size_t next = 0;
  rightsize::PrometheusOptions o;
  o.url = "http://127.0.0.1:9090";
  o.from_s = 1'700'000'000;
  o.to_s = o.from_s + 2 * 86400;
  o.step_s = 60;
  o.chunk_s = 86400;
  o.timeout_s = 10;
  o.max_answer_bytes = 3072;  // inputs are at most 4 KB: a long answer meets the cap
  o.allow_warnings = size % 2 == 0;
  o.transport = [&](const std::string&, const std::vector<std::pair<std::string, std::string>>&)
      -> rightsize::StatusOr<rightsize::PrometheusAnswer> {
    rightsize::PrometheusAnswer a;
    if (next >= answers.size()) {
      a.status = 500;
      a.content_type = "text/plain";
      a.body = "no more answers";
      return a;
    }
    std::string_view body = answers[next++];
    a.status = body.starts_with("503 ") ? 503 : 200;
    a.content_type = "application/json";
    a.body = std::string(body);
    return a;
  };
  auto history = rightsize::ReadPrometheus(o);
  if (history.ok()) {
    rightsize::fuzz::UseSomeRecords(history->records);
    for (const auto& n : history->notes) (void)n.size();
  } else {
    (void)history.status().message().size();
  }
  return 0;
}

// libFuzzer target for `rightsize ingest prometheus`: ReadPrometheus (ingest/prometheus.h), the
// real reader, against a loopback HTTP server in this process that answers its queries with the
// fuzzed bytes. The input is a list of answer bodies separated by form feeds ('\f'); the k-th
// request gets the k-th body (HTTP 200), and any request after the last gets HTTP 500, which
// ends the read. So the first answer is the reachability check (vector(1)), the next ones the
// kube-state-metrics, cAdvisor and DCGM series: JSON decoding, paging, the assembly of pods and
// containers into records. Seeds: corpus/prometheus/.
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_util.h"
#include "ingest/prometheus.h"

namespace {

struct Loopback {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  std::vector<std::string> answers;
  size_t next = 0;

  Loopback() {
    auto answer = [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu);
      if (next < answers.size()) {
        res.set_content(answers[next++], "application/json");
      } else {
        res.status = 500;
        res.set_content("no more answers", "text/plain");
      }
    };
    server.Get("/api/v1/query", answer);
    server.Get("/api/v1/query_range", answer);
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

Loopback& Server() {
  static auto* loopback = new Loopback();  // lives as long as the process
  return *loopback;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Loopback& lb = Server();
  std::string_view text = rightsize::fuzz::AsText(data, size);
  {
    std::lock_guard<std::mutex> lock(lb.mu);
    lb.answers.clear();
    lb.next = 0;
    size_t pos = 0;
    while (true) {
      size_t ff = text.find('\f', pos);
      lb.answers.emplace_back(text.substr(pos, ff == std::string_view::npos ? ff : ff - pos));
      if (ff == std::string_view::npos) break;
      pos = ff + 1;
    }
  }
  rightsize::PrometheusOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(lb.port);
  o.from_s = 1'700'000'000;
  o.to_s = o.from_s + 2 * 86400;
  o.step_s = 60;
  o.chunk_s = 86400;
  o.timeout_s = 10;
  o.max_answer_bytes = 1 << 20;
  o.allow_warnings = size % 2 == 0;
  auto history = rightsize::ReadPrometheus(o);
  if (history.ok()) {
    for (const auto& r : history->records) rightsize::fuzz::UseRecord(r);
  } else {
    (void)history.status().message().size();
  }
  return 0;
}

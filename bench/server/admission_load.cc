// admission_load: the Kubernetes admission webhook under the apiserver's load (docs/api.md,
// POST /k8s/admit/{advise,enforce}). Two steps:
//   admission_load --make-store DB
//       a store with the admission tests' history (test/k8s/k8s_fixtures.h: 48 workload keys,
//       one container of one pod per record) and a trained model;
//   admission_load --url https://127.0.0.1:PORT --ca CERT [--rate 200] [--seconds 20]
//                  [--mode enforce] [--connections 8]
//       open loop: reviews of the six fixture kinds (Pod, Job, CronJob, PyTorchJob, MPIJob,
//       JobSet) sent at --rate per second over --connections keep-alive HTTPS connections (as
//       the apiserver keeps them), each timed from when it was due (a late send counts).
// Reports p50/p99/max latency, answers by outcome, and transport errors.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../test/k8s/k8s_fixtures.h"
#include "predict/train.h"

namespace {

using Clock = std::chrono::steady_clock;

int MakeStore(const std::string& db) {
  auto store = rightsize::OpenStore(db);
  if (!store.ok()) {
    fmt::print(stderr, "{}\n", store.status().ToString());
    return 1;
  }
  rightsize::test::FillHistory(**store, "prod");
  auto trained = rightsize::TrainCluster(**store, "prod");
  if (!trained.ok()) {
    fmt::print(stderr, "{}\n", trained.status().ToString());
    return 1;
  }
  fmt::print("{}", trained->text);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"--rate", "200"}, {"--seconds", "20"}, {"--mode", "enforce"}, {"--connections", "8"},
      {"--url", ""},     {"--ca", ""},        {"--make-store", ""}};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!flags.contains(argv[i])) {
      fmt::print(stderr, "unknown flag {}\n", argv[i]);
      return 2;
    }
    flags[argv[i]] = argv[i + 1];
  }
  if (!flags["--make-store"].empty()) return MakeStore(flags["--make-store"]);
  double rate = std::stod(flags["--rate"]);
  double seconds = std::stod(flags["--seconds"]);
  int connections = std::stoi(flags["--connections"]);
  std::string path = "/k8s/admit/" + flags["--mode"];
  std::string url = flags["--url"];
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"pod", "pods"},
      {"job", "jobs"},
      {"cronjob", "cronjobs"},
      {"pytorchjob_mnist_nccl", "pytorchjobs"},
      {"mpijob_tensorflow_mnist", "mpijobs"},
      {"jobset_pytorch_resnet", "jobsets"}};
  std::vector<std::string> bodies;
  for (const auto& [name, resource] : kinds) {
    bodies.push_back(rightsize::test::Review(rightsize::test::LoadObject(name), resource).dump());
  }
  auto total = static_cast<int64_t>(rate * seconds);
  auto interval = std::chrono::duration<double>(1.0 / rate);
  Clock::time_point start = Clock::now() + std::chrono::milliseconds(200);
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::map<std::string, int64_t> outcomes;
  int64_t errors = 0;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(url);
      if (!flags["--ca"].empty()) {
        client.set_ca_cert_path(flags["--ca"]);
        client.enable_server_certificate_verification(true);
      }
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // as Go's net/http (the apiserver) sets it
      client.set_connection_timeout(2, 0);
      client.set_read_timeout(2, 0);
      while (true) {
        int64_t k = next++;
        if (k >= total) break;
        auto due = start + std::chrono::duration_cast<Clock::duration>(interval * k);
        std::this_thread::sleep_until(due);
        auto res = client.Post(path, bodies[k % bodies.size()], "application/json");
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        std::lock_guard<std::mutex> lock(mu);
        if (!res || res->status != 200) {
          ++errors;
          continue;
        }
        latencies_ms.push_back(ms);
        auto j = nlohmann::json::parse(res->body, nullptr, false);
        ++outcomes[j.is_object() ? j["response"]["auditAnnotations"].value("outcome", "?")
                                 : "unparsed"];
      }
    });
  }
  for (auto& t : threads) t.join();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto at = [&](double q) {
    if (latencies_ms.empty()) return 0.0;
    return latencies_ms[std::min(
        latencies_ms.size() - 1,
        static_cast<size_t>(q * static_cast<double>(latencies_ms.size())))];
  };
  fmt::print(
      "{} reviews at {}/s for {} s to {} ({} connections): p50 {:.2f} ms, p99 {:.2f} ms, "
      "max {:.2f} ms; errors {}\n",
      total, rate, seconds, path, connections, at(0.5), at(0.99),
      latencies_ms.empty() ? 0.0 : latencies_ms.back(), errors);
  for (const auto& [outcome, n] : outcomes) fmt::print("  {}: {}\n", outcome, n);
  return errors == 0 ? 0 : 1;
}

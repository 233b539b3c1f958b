// The HTTP front against hostile peers, over real sockets on loopback: a handler that runs out
// of memory, bodies and headers over their caps, and hundreds of slow or idle clients. Each
// asserts what a user of the server would notice (an answer, its status and JSON, the server
// still serving), never how fast.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/server.h"

namespace rightsize {
namespace {

std::string TempDb(const char* name) {
  auto p = std::filesystem::temp_directory_path() /
           (std::string("rightsize-http-test-") + name + "-" + std::to_string(getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p.string();
}

// A server on a free loopback port, serving on a thread of its own until destroyed.
class Served {
 public:
  explicit Served(ServerOptions o, HttpServeOptions h = {}) : api_(std::move(o)) {
    EXPECT_TRUE(api_.Init().ok());
    h.listen = "127.0.0.1:0";
    auto front = HttpFront::Bind(api_, h);
    EXPECT_TRUE(front.ok()) << front.status().ToString();
    front_ = std::move(*front);
    thread_ = std::thread([this] { front_->Serve(); });
  }
  ~Served() {
    front_->Stop();
    thread_.join();
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  int port() const { return front_->port(); }

 private:
  ApiServer api_;
  std::unique_ptr<HttpFront> front_;
  std::thread thread_;
};

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

struct Answer {
  int status = 0;  // 0: no answer within the timeout
  std::string body;
};

// Reads an answer until the peer closes or `timeout` passes; parses the status and the body.
Answer Read(int fd, std::chrono::seconds timeout) {
  std::string raw;
  auto until = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  Answer a;
  if (raw.rfind("HTTP/1.1 ", 0) == 0 && raw.size() >= 12) a.status = std::stoi(raw.substr(9, 3));
  if (size_t head = raw.find("\r\n\r\n"); head != std::string::npos) a.body = raw.substr(head + 4);
  return a;
}

// One request on a new connection ("Connection: close"), answered within `timeout` or not.
Answer Ask(int port, const std::string& method, const std::string& path,
           std::chrono::seconds timeout = std::chrono::seconds(5), const std::string& body = "") {
  int fd = Connect(port);
  if (fd < 0) return {};
  std::string req = method + " " + path +
                    " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  Answer a = SendAll(fd, req) ? Read(fd, timeout) : Answer{};
  ::close(fd);
  return a;
}

std::string ErrorOf(const Answer& a) {
  auto j = nlohmann::json::parse(a.body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_string()
             ? j["error"].get<std::string>()
             : "(no JSON error in '" + a.body.substr(0, 200) + "')";
}

double MetricValue(const std::string& metrics, const std::string& line_start) {
  size_t at = metrics.find("\n" + line_start + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + line_start.size() + 2));
}

int64_t ProcStatus(const char* key) {  // VmRSS in kB, Threads
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key) + 1));
  }
  return -1;
}

TEST(HttpFront, AHandlerOutOfMemoryFailsOnlyItsRequest) {
  ServerOptions o;
  o.db = TempDb("oom");
  o.before_handler = [](const std::string& route) {
    if (route == "/api/v1/jobs") throw std::bad_alloc();
    if (route == "/api/v1/overview") throw 42;  // not even a std::exception
  };
  Served s(o);
  Answer a = Ask(s.port(), "GET", "/api/v1/jobs");
  EXPECT_EQ(a.status, 500);
  EXPECT_NE(ErrorOf(a).find("out of memory"), std::string::npos) << a.body;
  Answer b = Ask(s.port(), "GET", "/api/v1/overview");
  EXPECT_EQ(b.status, 500);
  EXPECT_NE(ErrorOf(b).find("internal error"), std::string::npos) << b.body;
  // The server goes on serving, and says what happened.
  EXPECT_EQ(Ask(s.port(), "GET", "/healthz").status, 200);
  Answer m = Ask(s.port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(MetricValue(m.body, "rightsize_http_internal_errors_total"), 2) << m.body;
}

TEST(HttpFront, ABodyOverItsCapGets413InJsonBeforeItIsRead) {
  ServerOptions o;
  o.db = TempDb("cap");
  Served s(o);
  for (const char* path : {"/api/v1/predict", "/k8s/admit/enforce", "/api/v1/telemetry"}) {
    int fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    // 100 MiB announced, a little sent: the answer comes without the rest.
    ASSERT_TRUE(SendAll(fd, std::string("POST ") + path +
                                " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: 104857600\r\n\r\n{\"script\": \""));
    Answer a = Read(fd, std::chrono::seconds(5));
    ::close(fd);
    EXPECT_EQ(a.status, 413) << path;
    EXPECT_NE(ErrorOf(a).find("request body is over"), std::string::npos) << path << ": " << a.body;
  }
  Answer m = Ask(s.port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("rightsize_http_refused_total{reason=\"too_large\"} 3"), std::string::npos)
      << m.body;
  // A body under the cap is read and judged as usual.
  Answer small = Ask(s.port(), "POST", "/api/v1/predict", std::chrono::seconds(5), "not json");
  EXPECT_EQ(small.status, 400);
  EXPECT_EQ(Ask(s.port(), "GET", "/healthz").status, 200);
}

TEST(HttpFront, OneAddressWithTooManyRequestsInFlightGets503ButHealthChecksPass) {
  // Two reports held in their handler until released: two requests in flight from 127.0.0.1.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool release = false;
  ServerOptions o;
  o.db = TempDb("per-address");
  o.before_handler = [&](const std::string& route) {
    if (route != "/api/v1/report") return;
    std::unique_lock<std::mutex> lock(mu);
    ++arrived;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  HttpServeOptions h;
  h.max_per_address = 2;
  Served s(o, h);
  std::vector<std::thread> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([&] { Ask(s.port(), "GET", "/api/v1/report", std::chrono::seconds(60)); });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return arrived == 2; });
  }
  Answer over = Ask(s.port(), "GET", "/api/v1/jobs");
  EXPECT_EQ(over.status, 503);
  EXPECT_NE(ErrorOf(over).find("too many requests from your address"), std::string::npos)
      << over.body;
  EXPECT_EQ(Ask(s.port(), "GET", "/healthz").status, 200);
  {
    std::unique_lock<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& t : held) t.join();
  // Once they are answered, the address is served as before.
  EXPECT_EQ(Ask(s.port(), "GET", "/api/v1/jobs").status, 200);
}

TEST(HttpFront, HeadersWithoutEndAreCutInsteadOfHeldInMemory) {
  ServerOptions o;
  o.db = TempDb("headers");
  Served s(o);
  int64_t rss_before_kb = ProcStatus("VmRSS:");
  int fd = Connect(s.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n"));
  // Up to 200 MB of headers: the server stops reading long before (the send fails or stalls).
  std::string line = "X-Filler: " + std::string(8000, 'a') + "\r\n";
  size_t sent = 0;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  while (sent < (size_t{200} << 20) && SendAll(fd, line)) sent += line.size();
  if (sent >= (size_t{200} << 20)) SendAll(fd, "\r\n");
  Answer a = Read(fd, std::chrono::seconds(5));
  ::close(fd);
  EXPECT_LT(sent, size_t{200} << 20) << "the server read every header";
  EXPECT_NE(a.status, 200);
  // The test process holds the server: its memory did not grow by what was sent.
  EXPECT_LT(ProcStatus("VmRSS:") - rss_before_kb, 50 * 1024);
  EXPECT_EQ(Ask(s.port(), "GET", "/healthz").status, 200);
}

TEST(HttpFront, HealthzAnswersWhileHundredsOfClientsTrickleOrIdle) {
  // 1,000 client sockets and as many server ones in this process.
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = std::max<rlim_t>(nofile.rlim_cur, std::min<rlim_t>(nofile.rlim_max, 8192));
  setrlimit(RLIMIT_NOFILE, &nofile);
  ASSERT_GE(nofile.rlim_cur, 4096u) << "this test needs 4096 open files";
  ServerOptions o;
  o.db = TempDb("slow");
  Served s(o);
  std::vector<int> idle, slow;
  for (int i = 0; i < 500; ++i) {
    int fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  for (int i = 0; i < 500; ++i) {
    int fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    SendAll(fd, "GET /api/v1/jobs HTTP/1.1\r\n");
    slow.push_back(fd);
  }
  // Every slow client sends one more header line every 3 s (reconnecting when cut), for ~12 s;
  // meanwhile /healthz is asked every 2 s, each with 5 s to answer.
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int round = 0; !done; ++round) {
      for (int& fd : slow) {
        if (!SendAll(fd, "X-Slow: " + std::to_string(round) + "\r\n")) {
          ::close(fd);
          fd = Connect(s.port());
          if (fd >= 0) SendAll(fd, "GET /api/v1/jobs HTTP/1.1\r\n");
        }
      }
      for (int i = 0; i < 30 && !done; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  int asked = 0, answered = 0;
  int64_t max_threads = 0, max_rss_kb = 0;
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ++asked;
    Answer a = Ask(s.port(), "GET", "/healthz", std::chrono::seconds(5));
    if (a.status == 200) ++answered;
    max_threads = std::max(max_threads, ProcStatus("Threads:"));
    max_rss_kb = std::max(max_rss_kb, ProcStatus("VmRSS:"));
  }
  done = true;
  trickle.join();
  for (int fd : idle) ::close(fd);
  for (int fd : slow) {
    if (fd >= 0) ::close(fd);
  }
  // Not asserted (no timing in tests): what 500 slow and 500 idle clients cost the process.
  std::cout << "with 500 trickling and 500 idle clients: at most " << max_threads << " threads, "
            << max_rss_kb / 1024 << " MiB resident (server and clients)\n";
  EXPECT_EQ(answered, asked);
}

}  // namespace
}  // namespace rightsize

// The webhook as the apiserver reaches it: `rightsize serve --tls-cert --tls-key` started as a
// process, a real TLS client (cpp-httplib's SSLClient verifying a self-signed certificate made
// with openssl) posting AdmissionReviews; the fail-open paths (no history, a 0 ms deadline,
// overload, the server stopped).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "k8s_fixtures.h"
#include "server/server.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;

// The client's timeout: what the MutatingWebhookConfiguration's timeoutSeconds gives the
// apiserver (deploy/kubernetes uses 2 s); past it, failurePolicy Ignore admits unchanged.
constexpr int kClientTimeoutS = 2;

struct Served {
  pid_t pid = -1;
  int port = 0;
};

class WebhookTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("rightsize-webhook-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    {
      auto store = OpenStore((*dir_ / "store.db").string());
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      test::FillHistory(**store, "prod");
      auto trained = TrainCluster(**store, "prod");
      ASSERT_TRUE(trained.ok()) << trained.status().ToString();
    }
    std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
        "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
        (*dir_ / "key.pem").string() + " -out " + (*dir_ / "cert.pem").string() + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  void TearDown() override {
    for (const auto& s : served_) Stop(s);
  }

  // Starts `rightsize --db DB serve --listen 127.0.0.1:0 --tls-cert --tls-key EXTRA...` and
  // reads the port it prints.
  Served Start(const std::string& db, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {RIGHTSIZE_BINARY,
                                     "--db",
                                     db,
                                     "serve",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--tls-cert",
                                     (*dir_ / "cert.pem").string(),
                                     "--tls-key",
                                     (*dir_ / "key.pem").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    Served s;
    s.pid = ::fork();
    if (s.pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    char line[256] = {};
    if (std::fgets(line, sizeof line, f) != nullptr) {
      std::string text(line);
      auto colon = text.rfind(':');
      if (text.starts_with("listening on ") && colon != std::string::npos) {
        s.port = std::stoi(text.substr(colon + 1));
      }
    }
    std::fclose(f);
    EXPECT_GT(s.port, 0) << "the server did not start: " << line;
    served_.push_back(s);
    return s;
  }
  static void Stop(const Served& s) {
    if (s.pid <= 0) return;
    ::kill(s.pid, SIGTERM);
    int status = 0;
    ::waitpid(s.pid, &status, 0);
  }

  static httplib::Result Post(int port, const std::string& path, const nlohmann::json& review) {
    httplib::SSLClient client("127.0.0.1", port);
    client.set_ca_cert_path((*dir_ / "cert.pem").string());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(kClientTimeoutS, 0);
    client.set_read_timeout(kClientTimeoutS, 0);
    return client.Post(path, review.dump(), "application/json");
  }

  static nlohmann::json JobReview() {
    return test::Review(test::LoadObject("job"), "jobs", "5f8e2a90-11aa-4c1b-8d3e-0c9b7a6f4e21");
  }

  static fs::path* dir_;
  std::vector<Served> served_;
};
fs::path* WebhookTlsTest::dir_ = nullptr;

nlohmann::json Answer(const httplib::Result& res) {
  EXPECT_TRUE(res) << httplib::to_string(res.error());
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << res->body;
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  EXPECT_TRUE(j.is_object()) << res->body;
  EXPECT_EQ(j.value("kind", ""), "AdmissionReview");
  return j.value("response", nlohmann::json::object());
}

TEST_F(WebhookTlsTest, AdvisesAndEnforcesOverVerifiedTls) {
  Served s = Start((*dir_ / "store.db").string());
  nlohmann::json review = JobReview();
  nlohmann::json advise = Answer(Post(s.port, "/k8s/admit/advise", review));
  EXPECT_EQ(advise["uid"], review["request"]["uid"]);
  EXPECT_TRUE(advise["allowed"].get<bool>());
  EXPECT_EQ(advise["patchType"], "JSONPatch");
  EXPECT_EQ(advise["auditAnnotations"]["outcome"], "advised") << advise;
  nlohmann::json enforce = Answer(Post(s.port, "/k8s/admit/enforce", review));
  EXPECT_EQ(enforce["auditAnnotations"]["outcome"], "enforced") << enforce;
  bool ok = false;
  auto patch = nlohmann::json::parse(test::Base64Decode(enforce["patch"], &ok));
  ASSERT_TRUE(ok);
  nlohmann::json patched = test::LoadObject("job").patch(patch);
  EXPECT_EQ(
      patched["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
      patched["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"]);
  // A plain-HTTP client gets no answer from the HTTPS server.
  httplib::Client plain("127.0.0.1", s.port);
  plain.set_connection_timeout(kClientTimeoutS, 0);
  plain.set_read_timeout(kClientTimeoutS, 0);
  auto res = plain.Post("/k8s/admit/advise", review.dump(), "application/json");
  EXPECT_TRUE(!res || res->status != 200);
}

TEST_F(WebhookTlsTest, FailsOpenWithoutHistoryAndPastTheDeadline) {
  Served empty = Start((*dir_ / "empty.db").string());
  nlohmann::json r = Answer(Post(empty.port, "/k8s/admit/enforce", JobReview()));
  EXPECT_TRUE(r["allowed"].get<bool>());
  EXPECT_FALSE(r.contains("patch")) << r;
  EXPECT_NE(r["warnings"].dump().find("no history"), std::string::npos) << r;

  Served hurried = Start((*dir_ / "store.db").string(), {"--admission-deadline-ms", "0"});
  r = Answer(Post(hurried.port, "/k8s/admit/enforce", JobReview()));
  EXPECT_TRUE(r["allowed"].get<bool>());
  EXPECT_FALSE(r.contains("patch")) << r;
  EXPECT_NE(r["warnings"].dump().find("deadline"), std::string::npos) << r;
}

TEST_F(WebhookTlsTest, StoppedServerIsAConnectionErrorWithinTheTimeout) {
  Served s = Start((*dir_ / "store.db").string());
  ASSERT_TRUE(Post(s.port, "/k8s/admit/advise", JobReview()));
  Stop(s);
  served_.clear();
  auto res = Post(s.port, "/k8s/admit/advise", JobReview());
  ASSERT_FALSE(res);  // the apiserver turns this into "allowed" (failurePolicy: Ignore)
  EXPECT_EQ(res.error(), httplib::Error::Connection) << httplib::to_string(res.error());
}

TEST_F(WebhookTlsTest, OverloadAnswersUnchangedWithoutTheStore) {
  ServerOptions o;
  o.db = (*dir_ / "store.db").string();
  o.admission.max_inflight = 0;  // every admission finds the bound reached
  ApiServer api(o);
  ASSERT_TRUE(api.Init().ok());
  ApiServer::Reply reply =
      api.Admission(true, JobReview().dump(), std::chrono::steady_clock::now());
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto r = nlohmann::json::parse(reply.body)["response"];
  EXPECT_TRUE(r["allowed"].get<bool>());
  EXPECT_FALSE(r.contains("patch"));
  EXPECT_EQ(r["auditAnnotations"]["outcome"], "overload");
  EXPECT_NE(
      api.Metrics().find("rightsize_admissions_total{mode=\"enforce\",outcome=\"overload\"} 1"),
      std::string::npos);
  o.admission.max_inflight = 64;
  ApiServer calm(o);
  ASSERT_TRUE(calm.Init().ok());
  reply = calm.Admission(true, JobReview().dump(), std::chrono::steady_clock::now());
  EXPECT_EQ(nlohmann::json::parse(reply.body)["response"]["auditAnnotations"]["outcome"],
            "enforced")
      << reply.body;
  EXPECT_EQ(calm.Admission(false, "not json", std::chrono::steady_clock::now()).status, 400);
}

}  // namespace
}  // namespace rightsize

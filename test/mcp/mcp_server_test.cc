// The MCP server's protocol and tools, driven with real JSON-RPC lines against a real SQLite
// store: what an MCP client sees, malformed messages included.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/fd.h"
#include "mcp/schema_check.h"
#include "mcp/server.h"
#include "mcp/tools.h"

namespace rightsize::mcp {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kT0 = 1764750000;
const std::string kData = std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class McpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rightsize-mcp-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = OpenStore((dir_ / "store.db").string());
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(*store);
    // Job 41 ran 10 minutes on 4 of 8 cores and 2 of 16 GiB and is sampled every minute; job 42
    // was killed out of memory.
    JobRecord a;
    a.cluster = "c1";
    a.job_id = "41";
    a.submit_time = kT0 - 60;
    a.start_time = kT0;
    a.end_time = kT0 + 600;
    a.request.user = "alice";
    a.request.job_name = "train";
    a.request.cpus = 8;
    a.request.memory_bytes = int64_t{16} << 30;
    a.request.time_limit_s = 3600;
    a.usage.elapsed_s = 600;
    a.usage.cpu_time_s = 4.0 * 600;
    a.usage.peak_rss_bytes = int64_t{2} << 30;
    a.outcome.state = "COMPLETED";
    a.outcome.exit_code = 0;
    JobRecord b = a;
    b.job_id = "42";
    b.outcome.state = "OUT_OF_MEMORY";
    b.outcome.exit_code = 137;
    b.usage.peak_rss_bytes = int64_t{16} << 30;
    std::vector<JobRecord> jobs = {a, b};
    ASSERT_TRUE(store_->UpsertJobs(jobs).ok());
    JobTelemetry t;
    t.job = a;
    for (int i = 0; i < 10; ++i) {
      t.samples["cpu_cores"].push_back({(kT0 + 60 * i) * 1000, 3.5 + 0.1 * i});
    }
    std::vector<JobTelemetry> batch = {t};
    ASSERT_TRUE(store_->WriteTelemetry("node1", 1, batch).ok());
    server_ = std::make_unique<McpServer>(Options());
  }
  void TearDown() override { fs::remove_all(dir_); }

  ServerOptions Options() {
    ServerOptions o;
    o.store = [this]() -> StatusOr<Store*> { return store_.get(); };
    o.now_s = [] { return kT0 + 7200; };
    o.version = "test";
    return o;
  }

  // Sends one request; returns the parsed answer.
  Json Ask(const std::string& method, const Json& params, int id = 7) {
    Json request = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
    auto answer = server_->HandleLine(request.dump());
    EXPECT_TRUE(answer.has_value()) << method;
    if (!answer) return Json();
    Json j = Json::parse(*answer);
    EXPECT_EQ(j["jsonrpc"], "2.0");
    EXPECT_EQ(j["id"], id);
    return j;
  }
  Json Raw(const std::string& line) {
    auto answer = server_->HandleLine(line);
    EXPECT_TRUE(answer.has_value()) << line;
    return answer ? Json::parse(*answer) : Json();
  }
  // tools/call; checks that a successful answer's structuredContent fits the tool's
  // outputSchema and that its text block is the same document.
  Json Call(const std::string& tool, const Json& args) {
    Json j = Ask("tools/call", {{"name", tool}, {"arguments", args}});
    const Json& r = j["result"];
    if (!r.value("isError", false)) {
      for (const Tool& t : Tools()) {
        if (t.name != tool) continue;
        Status st = CheckArguments(t.output_schema, r["structuredContent"]);
        EXPECT_TRUE(st.ok()) << tool << ": " << st.message();
      }
      EXPECT_EQ(Json::parse(r["content"][0]["text"].get<std::string>()), r["structuredContent"]);
    }
    return r;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<McpServer> server_;
};

TEST_F(McpServerTest, InitializeNegotiatesTheProtocolVersion) {
  Json j = Ask("initialize", {{"protocolVersion", "2025-06-18"},
                              {"capabilities", Json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  EXPECT_EQ(j["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(j["result"]["serverInfo"]["name"], "rightsize");
  EXPECT_TRUE(j["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(j["result"]["capabilities"].contains("resources"));
  // A version this server does not speak: it answers with its newest; the client decides.
  j = Ask("initialize", {{"protocolVersion", "1999-01-01"}});
  EXPECT_EQ(j["result"]["protocolVersion"], std::string(kProtocolVersions[0]));
  j = Ask("initialize", Json::object());
  EXPECT_EQ(j["error"]["code"], kInvalidParams);
  // The client's notification that it is ready gets no answer.
  EXPECT_FALSE(server_->HandleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  EXPECT_EQ(Ask("ping", Json::object())["result"], Json::object());
}

TEST_F(McpServerTest, MalformedMessagesGetJsonRpcErrors) {
  Json j = Raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
  EXPECT_EQ(j["error"]["code"], kParseError);
  EXPECT_TRUE(j["id"].is_null());
  EXPECT_EQ(Raw("\xff\xfe not utf-8")["error"]["code"], kParseError);
  EXPECT_EQ(Raw("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]")["error"]["code"],
            kInvalidRequest);
  EXPECT_EQ(Raw("42")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(Raw(R"({"id":1,"method":"ping"})")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})")["error"]["code"],
            kInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":1,"method":7})")["error"]["code"], kInvalidRequest);
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":1})")["error"]["code"], kInvalidRequest);
  j = Raw(R"({"jsonrpc":"2.0","id":"x","method":"tools/frobnicate"})");
  EXPECT_EQ(j["error"]["code"], kMethodNotFound);
  EXPECT_EQ(j["id"], "x");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]})")["error"]["code"],
            kInvalidParams);
  // A deeply nested document is refused as any other, without exhausting the stack.
  EXPECT_TRUE(Raw(std::string(100000, '[') + std::string(100000, ']'))["error"].is_object());
  // A response from the client (this server asks nothing) and unknown notifications: no answer.
  EXPECT_FALSE(server_->HandleLine(R"({"jsonrpc":"2.0","id":3,"result":{}})"));
  EXPECT_FALSE(server_->HandleLine(R"({"jsonrpc":"2.0","method":"notifications/whatever"})"));
}

TEST_F(McpServerTest, ListsEveryToolWithItsSchemas) {
  Json tools = Ask("tools/list", Json::object())["result"]["tools"];
  std::vector<std::string> names;
  for (const auto& t : tools) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_EQ(t["outputSchema"]["type"], "object") << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"predict", "advise", "diagnose", "job", "report", "eval"}));
}

TEST_F(McpServerTest, BadToolCallsAreProtocolErrorsOrToolErrors) {
  // Which tool, and the shape of the call: protocol errors.
  EXPECT_EQ(Ask("tools/call", {{"name", "rm"}})["error"]["code"], kInvalidParams);
  EXPECT_EQ(Ask("tools/call", {{"arguments", Json::object()}})["error"]["code"], kInvalidParams);
  EXPECT_EQ(Ask("tools/call", {{"name", "job"}, {"arguments", "41"}})["error"]["code"],
            kInvalidParams);
  // Arguments the tool's inputSchema refuses, and failures: results the model reads.
  Json r = Call("job", Json::object());
  EXPECT_TRUE(r["isError"]);
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("required argument \"job_id\""),
            std::string::npos)
      << r;
  r = Call("job", {{"job_id", 41}});
  EXPECT_TRUE(r["isError"]);
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("job_id: expected a string"),
            std::string::npos)
      << r;
  r = Call("job", {{"job_id", "41"}, {"colour", "red"}});
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("unknown argument"), std::string::npos);
  r = Call("report", {{"by", "planet"}});
  EXPECT_TRUE(r["isError"]);
  r = Call("report", {{"top", 2.5}});
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("top: expected an integer"),
            std::string::npos)
      << r;
  EXPECT_FALSE(Call("report", {{"top", 2.0}})["isError"]);  // JSON's 2.0 is an integer
  r = Call("diagnose", {{"log_text", "Killed"}, {"exit_code", int64_t{1} << 40}});
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("exit_code: must be at most"),
            std::string::npos)
      << r;
  r = Call("job", {{"job_id", "999"}});
  EXPECT_TRUE(r["isError"]);
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("999"), std::string::npos) << r;
  r = Call("diagnose", {{"log_paths", {"-"}}});
  EXPECT_TRUE(r["isError"]);
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("log_text"), std::string::npos);
  r = Call("predict", Json::object());
  EXPECT_TRUE(r["isError"]);
  r = Call("predict", {{"script", (dir_ / "missing.sh").string()}});
  EXPECT_TRUE(r["isError"]);
  r = Call("eval", Json::object());  // two jobs are too few to replay
  EXPECT_TRUE(r["isError"]);
  // And the server still answers.
  EXPECT_EQ(Ask("ping", Json::object())["result"], Json::object());
}

TEST_F(McpServerTest, ToolsAnswerWithTheCommandsDocuments) {
  Json r = Call("job", {{"job_id", "41"}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["schema"], "rightsize.job/v1");
  EXPECT_EQ(r["structuredContent"]["job"]["job_id"], "41");

  r = Call("report", {{"cluster", "c1"}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["schema"], "rightsize.report/v1");
  EXPECT_EQ(r["structuredContent"]["jobs"], 2);

  r = Call("diagnose",
           {{"log_text", ReadFile(kData + "/failures/dev/host_oom/slurm2205_oomkill_batch.log")}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["schema"], "rightsize.diagnosis/v1");
  EXPECT_EQ(r["structuredContent"]["class"], "host_oom");

  // A job in the store: its record is evidence, and the diagnosis is kept with it.
  r = Call("diagnose", {{"job_id", "42"}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["class"], "host_oom");
  EXPECT_EQ(Call("job", {{"job_id", "42"}})["structuredContent"]["diagnosis"]["class"], "host_oom");

  r = Call("predict", {{"script_text",
                        "#!/bin/bash\n#SBATCH --mem=16G\n#SBATCH -c 8\n"
                        "#SBATCH -t 01:00:00\n#SBATCH -J train\npython train.py\n"},
                       {"user", "alice"},
                       {"cluster", "c1"}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["schema"], "rightsize.predict/v1");
  EXPECT_EQ(r["structuredContent"]["cluster"], "c1");

  r = Call("advise", {{"code", kData + "/code/gpt2_finetune/train.py"}});
  ASSERT_FALSE(r["isError"]) << r;
  EXPECT_EQ(r["structuredContent"]["schema"], "rightsize.advise/v1");
  EXPECT_TRUE(r["structuredContent"]["gpu_memory"].is_object()) << r;
}

TEST_F(McpServerTest, JobResources) {
  Json templates = Ask("resources/templates/list", Json::object())["result"]["resourceTemplates"];
  ASSERT_EQ(templates.size(), 2u);
  EXPECT_EQ(templates[0]["uriTemplate"], "rightsize://job/{id}");
  Json list = Ask("resources/list", Json::object())["result"]["resources"];
  ASSERT_EQ(list.size(), 2u);

  Json r = Ask("resources/read", {{"uri", "rightsize://job/41"}})["result"];
  Json card = Json::parse(r["contents"][0]["text"].get<std::string>());
  EXPECT_EQ(card["schema"], "rightsize.job/v1");
  EXPECT_EQ(r["contents"][0]["uri"], "rightsize://job/41");

  r = Ask("resources/read", {{"uri", "rightsize://job/41/series?cluster=c1"}})["result"];
  Json series = Json::parse(r["contents"][0]["text"].get<std::string>());
  ASSERT_EQ(series["series"]["cpu_cores"].size(), 10u) << series;
  EXPECT_DOUBLE_EQ(series["series"]["cpu_cores"][0][1].get<double>(), 3.5);
  EXPECT_EQ(series["limits"]["cpu_cores"], 8);

  // The uri of every listed resource reads.
  for (const auto& res : list) {
    EXPECT_TRUE(Ask("resources/read", {{"uri", res["uri"]}}).contains("result")) << res;
  }
  Json e = Ask("resources/read", {{"uri", "rightsize://job/999"}});
  EXPECT_EQ(e["error"]["code"], kResourceNotFound);
  EXPECT_EQ(Ask("resources/read", {{"uri", "file:///etc/passwd"}})["error"]["code"],
            kInvalidParams);
  EXPECT_EQ(Ask("resources/read", Json::object())["error"]["code"], kInvalidParams);
}

// Serve over real file descriptors: a line past the limit is refused and the next one answered.
TEST_F(McpServerTest, ServeRefusesAHugeLineAndGoesOn) {
  ServerOptions o = Options();
  o.max_message_bytes = 1 << 20;
  McpServer server(std::move(o));
  std::string input = std::string(3 << 20, 'x') + "\n" +
                      R"({"jsonrpc":"2.0","id":1,"method":"ping"})" + "\n\n" +
                      R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\n" +
                      R"({"jsonrpc":"2.0","id":2,"method":"ping"})";  // no final newline
  fs::path in_path = dir_ / "in", out_path = dir_ / "out";
  std::ofstream(in_path, std::ios::binary) << input;
  UniqueFd in(::open(in_path.c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ASSERT_TRUE(in.valid() && out.valid());
  ASSERT_TRUE(server.Serve(in.get(), out.get()).ok());
  std::istringstream lines(ReadFile(out_path.string()));
  std::vector<Json> answers;
  for (std::string line; std::getline(lines, line);) answers.push_back(Json::parse(line));
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0]["error"]["code"], kInvalidRequest);
  EXPECT_NE(answers[0]["error"]["message"].get<std::string>().find("too large"), std::string::npos);
  EXPECT_EQ(answers[1]["id"], 1);
  EXPECT_EQ(answers[2]["id"], 2);
}

}  // namespace
}  // namespace rightsize::mcp

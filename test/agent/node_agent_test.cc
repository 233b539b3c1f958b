#include "agent/node_agent.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace rightsize {
namespace {

AgentShipSettings Settings() {
  AgentShipSettings s;
  s.url = "http://127.0.0.1:1";
  s.agent_name = "cluster one/node:7";
  s.home = "/home/alice";
  return s;
}

TEST(AgentShipperOptionsTest, TokenFromTheFlagThenTheFileThenTheEnvironment) {
  AgentShipSettings s = Settings();
  s.env_token = "from-env";
  EXPECT_EQ(AgentShipperOptions(s)->token, "from-env");

  auto file = std::filesystem::temp_directory_path() / ("token_" + std::to_string(getpid()));
  std::ofstream(file) << "from-file\nsecond line\n";
  s.token_file = file.string();
  EXPECT_EQ(AgentShipperOptions(s)->token, "from-file");
  s.token = "from-flag";
  EXPECT_EQ(AgentShipperOptions(s)->token, "from-flag");
  std::filesystem::remove(file);

  s.token.clear();
  auto missing = AgentShipperOptions(s);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
}

TEST(AgentShipperOptionsTest, DefaultSpoolIsPerUserAndPerAgent) {
  AgentShipSettings s = Settings();
  auto o = AgentShipperOptions(s);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->url, s.url);
  EXPECT_EQ(o->agent, "cluster one/node:7");
  EXPECT_EQ(o->spool_dir, "/home/alice/.local/state/rightsize/spool/cluster_one_node_7");
  s.root = true;
  EXPECT_EQ(AgentShipperOptions(s)->spool_dir, "/var/spool/rightsize/cluster_one_node_7");
  s.root = false;
  s.home.reset();
  EXPECT_EQ(AgentShipperOptions(s)->spool_dir, "/var/spool/rightsize/cluster_one_node_7");
  s.spool = "/given";
  EXPECT_EQ(AgentShipperOptions(s)->spool_dir, "/given");
  s.no_spool = true;
  EXPECT_EQ(AgentShipperOptions(s)->spool_dir, "");
}

TEST(NodeAgentTest, CyclesUntilStoppedOnAnEmptyNode) {
  auto root = std::filesystem::temp_directory_path() / ("node_agent_" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "proc");
  std::filesystem::create_directories(root / "cgroup");
  NodeAgentOptions o;
  o.interval_s = 0.05;
  o.proc_root = (root / "proc").string();
  o.cgroup_root = (root / "cgroup").string();
  o.gpu_library = "libnvidia-ml-absent-for-tests.so";
  o.agent.cluster = "test";
  NodeAgent node(o, nullptr);
  EXPECT_FALSE(node.gpu_available());
  EXPECT_NE(node.gpu_status(), "");
  EXPECT_EQ(node.shipper(), nullptr);

  std::atomic<bool> stop{false};
  int ended_calls = 0;
  NodeAgent::Callbacks callbacks;
  callbacks.ended = [&](const std::vector<JobRecord>&) { ++ended_calls; };
  std::thread runner([&] { node.Run(stop, callbacks); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string metrics = node.Metrics();  // from another thread, while it runs
  stop = true;
  runner.join();
  // 300 ms at 50 ms a cycle: several cycles, whatever the machine's load (at least two).
  const std::string counter = "\nrightsize_agent_cycles_total ";
  size_t at = metrics.find(counter);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stoi(metrics.substr(at + counter.size())), 2) << metrics;
  EXPECT_EQ(ended_calls, 0);  // no jobs, no records
  EXPECT_TRUE(node.FinishShipping(0.1));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace rightsize

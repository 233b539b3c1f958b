#include "jobscript/k8s_workload.h"

#include <gtest/gtest.h>

namespace rightsize {
namespace {

using nlohmann::json;

TEST(ParseQuantity, ReadsEveryFormTheApiServerAccepts) {
  EXPECT_DOUBLE_EQ(*ParseQuantity("500m"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseQuantity("2"), 2.0);
  EXPECT_DOUBLE_EQ(*ParseQuantity("1.5"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseQuantity("4Gi"), 4.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*ParseQuantity("129M"), 129e6);
  EXPECT_DOUBLE_EQ(*ParseQuantity("12Ki"), 12.0 * 1024);
  EXPECT_DOUBLE_EQ(*ParseQuantity("1e3"), 1000.0);
  EXPECT_DOUBLE_EQ(*ParseQuantity("128974848"), 128974848.0);
  EXPECT_DOUBLE_EQ(*ParseQuantity("+1k"), 1000.0);
}

TEST(ParseQuantity, RejectsWhatKubectlWouldReject) {
  for (const char* text : {"", "4GB", "-1", "1Gx", "Gi", ".", "1..2", "1e", "lots"}) {
    auto parsed = ParseQuantity(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("Kubernetes quantity"), std::string::npos);
  }
}

TEST(StableOwnerName, RemovesOnlyGeneratedSuffixes) {
  EXPECT_EQ(StableOwnerName("Job", "nightly-29000000"), "nightly");
  EXPECT_EQ(StableOwnerName("Job", "train-2024"), "train-2024");  // a user's own name
  EXPECT_EQ(StableOwnerName("ReplicaSet", "web-7d4b9c8f6d"), "web");
  EXPECT_EQ(StableOwnerName("ReplicaSet", "web-canary"), "web-canary");  // 'a' is not generated
  EXPECT_EQ(StableOwnerName("Pod", "train-x7k2p", true), "train");
  EXPECT_EQ(StableOwnerName("Pod", "train-x7k2p", false), "train-x7k2p");
  EXPECT_EQ(StableOwnerName("StatefulSet", "db"), "db");
  EXPECT_EQ(StableOwnerName("Job", "29000000"), "29000000");
}

TEST(OwnerOfPod, TwoRunsOfOneWorkloadShareAKey) {
  PodOwnerFacts first{"nightly-29000000-x7k2p", "nightly-29000000-", "Job", "nightly-29000000", {}};
  PodOwnerFacts second{
      "nightly-29001440-b5c9z", "nightly-29001440-", "Job", "nightly-29001440", {}};
  EXPECT_EQ(OwnerOfPod(first).owner, "nightly");
  EXPECT_EQ(OwnerOfPod(second).owner, "nightly");

  PodOwnerFacts ddp{"ddp-worker-3",
                    "",
                    "PyTorchJob",
                    "ddp",
                    {{"training.kubeflow.org/job-name", "ddp"},
                     {"training.kubeflow.org/replica-type", "Worker"}}};
  auto key = OwnerOfPod(ddp);
  EXPECT_EQ(key.owner, "ddp");
  EXPECT_EQ(key.role, "worker");

  PodOwnerFacts jobset{"big-trainer-0-1-abcde",
                       "",
                       "Job",
                       "big-trainer-0",
                       {{"jobset.sigs.k8s.io/jobset-name", "big"},
                        {"jobset.sigs.k8s.io/replicatedjob-name", "trainer"}}};
  EXPECT_EQ(OwnerOfPod(jobset).owner, "big");
  EXPECT_EQ(OwnerOfPod(jobset).role, "trainer");

  PodOwnerFacts bare{"notebook", "", "", "", {}};
  EXPECT_EQ(OwnerOfPod(bare).owner, "notebook");
  PodOwnerFacts generated{"probe-q2w4z", "probe-", "", "", {}};
  EXPECT_EQ(OwnerOfPod(generated).owner, "probe");
}

TEST(WorkloadKey, JobNameAndUserAreTheHistoryKey) {
  WorkloadKey key{"ml", "ddp", "worker", "pytorch", "img:1", "0"};
  EXPECT_EQ(key.JobName(), "ddp/worker/pytorch");
  EXPECT_EQ(key.User(), "ml");
  key.role.clear();
  key.namespace_name.clear();
  EXPECT_EQ(key.JobName(), "ddp/pytorch");
  EXPECT_EQ(key.User(), "default");
}

TEST(ProgramHash, ChangesWithImageCommandOrArgsOnly) {
  json cmd = {"python", "train.py"};
  json args = {"--lr", "0.1"};
  std::string base = ProgramHash("lab/train:v1", cmd, args);
  EXPECT_EQ(base.size(), 16U);
  EXPECT_EQ(base, ProgramHash("lab/train:v1", cmd, args));
  EXPECT_NE(base, ProgramHash("lab/train:v2", cmd, args));
  EXPECT_NE(base, ProgramHash("lab/train:v1", cmd, json{"--lr", "0.2"}));
  EXPECT_NE(ProgramHash("i", json{"a b"}, json()), ProgramHash("i", json{"a", "b"}, json()));
}

TEST(ContainerRequest, LimitsWinAndGpusComeFromTheExtendedResource) {
  json spec = {{"activeDeadlineSeconds", 7200}};
  json container = {{"name", "train"},
                    {"resources",
                     {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}}},
                      {"limits", {{"memory", "12Gi"}, {"nvidia.com/gpu", 2}}}}}};
  auto request = ContainerRequest(spec, container);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_DOUBLE_EQ(*request->cpus, 2.0);
  EXPECT_EQ(*request->memory_bytes, 12LL << 30);
  EXPECT_EQ(*request->gpus, 2);
  EXPECT_EQ(*request->time_limit_s, 7200);

  json none = {{"name", "x"}};
  auto empty = ContainerRequest(json::object(), none);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->cpus);
  EXPECT_FALSE(empty->memory_bytes);
  EXPECT_EQ(*empty->gpus, 0);
}

TEST(ContainerRequest, NamesTheFieldThatDoesNotParse) {
  json container = {{"name", "x"}, {"resources", {{"limits", {{"memory", "8GB"}}}}}};
  auto request = ContainerRequest(json::object(), container);
  ASSERT_FALSE(request.ok());
  EXPECT_NE(request.status().message().find("resources.limits.memory"), std::string::npos);
}

}  // namespace
}  // namespace rightsize

// The admission webhook in process: AdmissionReviews built from real manifests (kubectl's
// Pod, Job and CronJob; Kubeflow's PyTorchJob and MPIJob and JobSet's examples) wrapped as the
// apiserver sends them, answered against a store with a trained model; the patches compared
// with golden files, applied back and re-validated, and the apiserver's own response checks.
#include "k8s/admission.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "jobscript/k8s_workload.h"
#include "k8s_fixtures.h"
#include "predict/predict.h"
#include "predict/train.h"

namespace rightsize {
namespace {

using test::LoadObject;
using test::Review;

struct Fixture {
  std::string name;      // fixtures/NAME.json or manifests/NAME.yaml
  std::string resource;  // the GVR's resource
};
const std::vector<Fixture> kFixtures = {{"pod", "pods"},
                                        {"job", "jobs"},
                                        {"cronjob", "cronjobs"},
                                        {"pytorchjob_mnist_nccl", "pytorchjobs"},
                                        {"mpijob_tensorflow_mnist", "mpijobs"},
                                        {"jobset_pytorch_resnet", "jobsets"}};

class AdmissionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto store = OpenStore(":memory:");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store).release();
    now_ = test::FillHistory(*store_, "prod") + 3600;
    ASSERT_GT(now_, test::kT0);
    auto trained = TrainCluster(*store_, "prod");
    ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  }
  static void TearDownTestSuite() {
    delete store_;
    store_ = nullptr;
  }

  AdmissionOptions Options() const {
    AdmissionOptions o;
    o.now_s = now_;
    o.deadline = std::chrono::hours(1);  // the tests check answers, not speed
    return o;
  }

  // The object as the apiserver hands it to a mutating webhook (defaults applied).
  static nlohmann::json Defaulted(const std::string& name) {
    nlohmann::json object = LoadObject(name);
    auto templates = FindPodTemplates(object);
    EXPECT_TRUE(templates.ok()) << name << ": " << templates.status().ToString();
    if (templates.ok()) {
      for (const auto& t : *templates) {
        test::AddServerDefaults(object[nlohmann::json::json_pointer(t.pointer)]);
      }
    }
    return object;
  }

  static Store* store_;
  static int64_t now_;
};
Store* AdmissionTest::store_ = nullptr;
int64_t AdmissionTest::now_ = 0;

// What the apiserver checks (VerifyAdmissionResponse, NOTES.md section 2) and the patch it
// would apply, decoded; an empty array when there is none.
nlohmann::json CheckedPatch(const nlohmann::json& review, const nlohmann::json& answer) {
  EXPECT_EQ(answer.value("apiVersion", ""), "admission.k8s.io/v1");
  EXPECT_EQ(answer.value("kind", ""), "AdmissionReview");
  const nlohmann::json& r = answer.at("response");
  EXPECT_EQ(r.at("uid"), review["request"]["uid"]);
  EXPECT_TRUE(r.at("allowed").get<bool>());  // never denies
  EXPECT_EQ(r.contains("patch"), r.contains("patchType"));
  if (r.contains("warnings")) {
    for (const auto& w : r["warnings"]) {
      EXPECT_LE(w.get<std::string>().size(), 120U) << w;
      EXPECT_TRUE(w.get<std::string>().starts_with("rightsize: ")) << w;
    }
  }
  if (!r.contains("patch")) return nlohmann::json::array();
  EXPECT_EQ(r["patchType"], "JSONPatch");
  bool ok = false;
  std::string decoded = test::Base64Decode(r["patch"].get<std::string>(), &ok);
  EXPECT_TRUE(ok) << r["patch"];
  auto patch = nlohmann::json::parse(decoded, nullptr, false);
  EXPECT_TRUE(patch.is_array()) << decoded;
  return patch;
}

// The patched object still makes sense: every quantity parses, limits hold the requests,
// enforced values respect the floors, the annotations are strings.
void Validate(const nlohmann::json& object, const AdmissionOptions& o, bool enforced) {
  for (const auto& [k, v] : object["metadata"]["annotations"].items()) {
    EXPECT_TRUE(v.is_string()) << k;
  }
  auto templates = FindPodTemplates(object);
  ASSERT_TRUE(templates.ok());
  for (const auto& t : *templates) {
    for (const auto& c : object[nlohmann::json::json_pointer(t.pointer)]["containers"]) {
      const nlohmann::json res = c.value("resources", nlohmann::json::object());
      std::map<std::string, double> requests, limits;
      for (auto [section, into] : {std::pair{"requests", &requests}, {"limits", &limits}}) {
        if (!res.contains(section)) continue;
        for (const auto& [name, q] : res[section].items()) {
          auto v = q.is_number() ? StatusOr<double>(q.get<double>())
                                 : ParseQuantity(q.get<std::string>());
          ASSERT_TRUE(v.ok()) << name << " " << q;
          (*into)[name] = *v;
        }
      }
      for (const auto& [name, v] : requests) {
        if (limits.contains(name)) EXPECT_GE(limits[name], v) << c["name"] << " " << name;
      }
      if (enforced) {
        for (const auto* m : {&requests, &limits}) {
          if (m->contains("cpu")) EXPECT_GE(m->at("cpu"), o.floor_cpu_cores - 1e-9);
          if (m->contains("memory")) {
            EXPECT_GE(m->at("memory"), static_cast<double>(o.floor_memory_bytes));
          }
        }
      }
    }
  }
}

// Compares with golden/NAME.json; RIGHTSIZE_UPDATE_GOLDEN=1 writes it instead.
void ExpectGolden(const std::string& name, const nlohmann::json& patch) {
  std::string path = test::kK8sDir + "/golden/" + name + ".json";
  if (std::getenv("RIGHTSIZE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << patch.dump(2) << "\n";
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing (RIGHTSIZE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(patch, nlohmann::json::parse(in)) << name << ":\n" << patch.dump(2);
}

TEST_F(AdmissionTest, AdviseOnlyAnnotatesEachKind) {
  for (const auto& f : kFixtures) {
    SCOPED_TRACE(f.name);
    nlohmann::json object = Defaulted(f.name);
    nlohmann::json review = Review(object, f.resource);
    auto answer = Admit(*store_, nullptr, Options(), AdmissionMode::kAdvise, review);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    nlohmann::json patch = CheckedPatch(review, *answer);
    ASSERT_FALSE(patch.empty()) << answer->dump();
    for (const auto& op : patch) {
      EXPECT_EQ(op["op"], "add");
      EXPECT_TRUE(op["path"].get<std::string>().starts_with("/metadata/annotations")) << op;
    }
    ExpectGolden(f.name + "_advise", patch);
    nlohmann::json patched = object.patch(patch);
    Validate(patched, Options(), false);
    const auto& notes = patched["metadata"]["annotations"];
    EXPECT_TRUE(notes.contains("rightsize.io/prediction-model")) << notes;
    // Only the metadata changed.
    nlohmann::json without = patched;
    without["metadata"].erase("annotations");
    nlohmann::json original = object;
    original["metadata"].erase("annotations");
    EXPECT_EQ(without, original);
  }
}

TEST_F(AdmissionTest, AdviseKeysAndTextNameTheContainerAndRole) {
  nlohmann::json object = Defaulted("pytorchjob_mnist_nccl");
  auto answer =
      Admit(*store_, nullptr, Options(), AdmissionMode::kAdvise, Review(object, "pytorchjobs"));
  ASSERT_TRUE(answer.ok());
  nlohmann::json patched = object.patch(CheckedPatch(Review(object, "pytorchjobs"), *answer));
  const auto& notes = patched["metadata"]["annotations"];
  ASSERT_TRUE(notes.contains("rightsize.io/master.pytorch")) << notes;
  ASSERT_TRUE(notes.contains("rightsize.io/worker.pytorch")) << notes;
  std::string text = notes["rightsize.io/worker.pytorch"];
  for (const char* part : {"memory p10=", " p50=", " p90=", "suggest=", "; cpu ", "gpu-memory "}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in " << text;
  }
  EXPECT_EQ(notes["rightsize.io/prediction-model"], "cluster=prod version=1");
  // The Job asks 64Gi and uses about 9Gi: the warning says so.
  auto job =
      Admit(*store_, nullptr, Options(), AdmissionMode::kAdvise, Review(Defaulted("job"), "jobs"));
  ASSERT_TRUE(job.ok());
  const auto& warnings = (*job)["response"]["warnings"];
  ASSERT_FALSE(warnings.empty()) << job->dump();
  std::string w = warnings[0];
  EXPECT_TRUE(w.starts_with("rightsize: container train asks 64Gi memory, p90 use ")) << w;
}

TEST_F(AdmissionTest, EnforcePatchesRequestsAndLimitsAboveFloors) {
  AdmissionOptions o = Options();
  o.floor_memory_bytes = int64_t{1} << 30;  // above the MPI launcher's suggestion
  for (const auto& f : kFixtures) {
    SCOPED_TRACE(f.name);
    nlohmann::json object = Defaulted(f.name);
    nlohmann::json review = Review(object, f.resource);
    auto answer = Admit(*store_, nullptr, o, AdmissionMode::kEnforce, review);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    nlohmann::json patch = CheckedPatch(review, *answer);
    ExpectGolden(f.name + "_enforce", patch);
    nlohmann::json patched = object.patch(patch);
    Validate(patched, o, true);
    bool resources = false;
    for (const auto& op : patch) {
      resources =
          resources || op["path"].get<std::string>().find("/resources") != std::string::npos;
    }
    // The pod's key has 2 finished runs, fewer than the 3 enforce needs: advice only.
    EXPECT_EQ(resources, f.name != "pod") << patch.dump();
    if (f.name == "pod") {
      EXPECT_NE((*answer)["response"]["warnings"].dump().find("2 finished runs (3 needed"),
                std::string::npos)
          << answer->dump();
    }
  }
}

TEST_F(AdmissionTest, EnforceCutsTheJobsGenerousMemory) {
  nlohmann::json object = Defaulted("job");
  auto answer = Admit(*store_, nullptr, Options(), AdmissionMode::kEnforce, Review(object, "jobs"));
  ASSERT_TRUE(answer.ok());
  nlohmann::json patched = object.patch(CheckedPatch(Review(object, "jobs"), *answer));
  const auto& res = patched["spec"]["template"]["spec"]["containers"][0]["resources"];
  auto memory = ParseQuantity(res["limits"]["memory"].get<std::string>());
  ASSERT_TRUE(memory.ok());
  EXPECT_LT(*memory, 32.0 * (1LL << 30)) << res;  // asked 64Gi, uses about 9Gi
  EXPECT_GE(*memory, 9.0 * (1LL << 30)) << res;
  EXPECT_EQ(res["requests"]["memory"], res["limits"]["memory"]);
  auto cpu = ParseQuantity(res["limits"]["cpu"].get<std::string>());
  ASSERT_TRUE(cpu.ok());
  EXPECT_LE(*cpu, 8.0);
  EXPECT_EQ((*answer)["response"]["auditAnnotations"]["outcome"], "enforced");
}

TEST_F(AdmissionTest, TorchrunWithFewerWorkersThanGpusGivesBackTheRest) {
  nlohmann::json object = Defaulted("job");
  auto& c = object["spec"]["template"]["spec"]["containers"][0];
  c["command"] = {"torchrun", "--nproc_per_node=2", "train.py"};
  c["resources"]["limits"]["nvidia.com/gpu"] = "4";
  auto answer = Admit(*store_, nullptr, Options(), AdmissionMode::kEnforce, Review(object, "jobs"));
  ASSERT_TRUE(answer.ok());
  nlohmann::json patched = object.patch(CheckedPatch(Review(object, "jobs"), *answer));
  EXPECT_EQ(
      patched["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
      "2");
}

TEST_F(AdmissionTest, LeavesAloneWhatItMustNotTouch) {
  auto unchanged = [&](const nlohmann::json& review, const std::string& why) {
    auto answer = Admit(*store_, nullptr, Options(), AdmissionMode::kEnforce, review);
    ASSERT_TRUE(answer.ok());
    EXPECT_TRUE(CheckedPatch(review, *answer).empty()) << why << ": " << answer->dump();
    EXPECT_EQ((*answer)["response"]["auditAnnotations"]["outcome"], "unchanged") << why;
  };
  nlohmann::json job = Defaulted("job");
  nlohmann::json update = Review(job, "jobs");
  update["request"]["operation"] = "UPDATE";
  update["request"]["oldObject"] = job;
  unchanged(update, "UPDATE");
  nlohmann::json skipped = job;
  skipped["metadata"]["annotations"] = {{"rightsize.io/skip", "true"}};
  unchanged(Review(skipped, "jobs"), "opted out");
  nlohmann::json owned = Defaulted("pod");
  owned["metadata"]["ownerReferences"] = {{{"apiVersion", "batch/v1"},
                                           {"kind", "Job"},
                                           {"name", "train"},
                                           {"controller", true},
                                           {"uid", "1d2c"}}};
  unchanged(Review(owned, "pods"), "a Job's pod");
  nlohmann::json deployment = {{"apiVersion", "apps/v1"},
                               {"kind", "Deployment"},
                               {"metadata", {{"name", "web"}, {"namespace", "ml"}}},
                               {"spec", nlohmann::json::object()}};
  unchanged(Review(deployment, "deployments"), "another kind");
  nlohmann::json bad = job;
  bad["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "64GB";
  unchanged(Review(bad, "jobs"), "a quantity that does not parse");
}

TEST_F(AdmissionTest, FailsOpenWithoutModelOrStoreOrTime) {
  nlohmann::json review = Review(Defaulted("job"), "jobs");
  auto expect_unchanged = [&](Store& store, const AdmissionOptions& o, const std::string& says) {
    auto answer = Admit(store, nullptr, o, AdmissionMode::kEnforce, review);
    ASSERT_TRUE(answer.ok());
    EXPECT_TRUE(CheckedPatch(review, *answer).empty()) << answer->dump();
    EXPECT_NE((*answer)["response"]["warnings"].dump().find(says), std::string::npos)
        << answer->dump();
  };
  auto empty = OpenStore(":memory:");
  ASSERT_TRUE(empty.ok());
  expect_unchanged(**empty, Options(), "no history to predict from");
  auto untrained = OpenStore(":memory:");
  ASSERT_TRUE(untrained.ok());
  test::FillHistory(**untrained, "prod");
  expect_unchanged(**untrained, Options(), "no model for cluster prod yet");
  AdmissionOptions o = Options();
  o.cluster = "elsewhere";
  expect_unchanged(*store_, o, "no history to predict from");
  o = Options();
  o.deadline = std::chrono::milliseconds(0);
  expect_unchanged(*store_, o, "deadline");
  // A clock that jumps 5 ms at every reading: the 1 ms deadline passes during the predictions.
  o = Options();
  o.deadline = std::chrono::milliseconds(1);
  auto t = std::make_shared<std::chrono::steady_clock::time_point>();
  o.clock = [t] { return *t += std::chrono::milliseconds(5); };
  expect_unchanged(*store_, o, "deadline");
}

// The server keeps the past of workloads reviewed before (PredictCache) while the store's
// history does not change: a finished job stored afterwards, by another connection (another
// process: the agent's server, `rightsize ingest`) or by the server's own, changes the very next
// answer; a running job's progress (the agents' telemetry) keeps the cache.
TEST(AdmissionCacheTest, ANewFinishedJobIsSeenByTheNextReview) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("rightsize-admission-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string db = (dir / "store.db").string();
  auto server = OpenStore(db);
  auto writer = OpenStore(db);
  ASSERT_TRUE(server.ok() && writer.ok());
  int64_t now = test::FillHistory(**server, "prod") + 3600;
  ASSERT_TRUE(TrainCluster(**server, "prod").ok());

  nlohmann::json pod = LoadObject("pod");  // ml/infer: two finished runs
  test::AddServerDefaults(pod["spec"]);
  nlohmann::json review = Review(pod, "pods");
  ModelCache models;
  PredictCache cache;
  AdmissionOptions o;
  o.now_s = now;
  o.deadline = std::chrono::hours(1);
  o.cache = &cache;
  AdmissionOptions uncached = o;
  uncached.cache = nullptr;
  auto admit = [&](const AdmissionOptions& options) {
    auto answer = Admit(**server, &models, options, AdmissionMode::kAdvise, review);
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    return answer.ok() ? (*answer)["response"].value("patch", "") : std::string();
  };
  std::string first = admit(o);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(admit(o), first);
  EXPECT_EQ(cache.hits(), 1);  // the second review read none of its past

  // A run that used far more memory than the two before it (4.4 and 5.6 GiB).
  auto store_run = [&](Store& store, int run, int64_t peak_bytes) {
    JobRecord j;
    j.cluster = "prod";
    j.job_id = "ml/infer/infer-" + std::to_string(run);
    j.source = "kubernetes";
    j.request.user = j.request.account = "ml";
    j.request.job_name = "infer/infer";
    j.request.cpus = 1;
    j.request.memory_bytes = j.request.memory_per_unit_bytes = int64_t{8} << 30;
    j.request.memory_scope = MemoryScope::kPerJob;
    j.request.qos = "Burstable";
    j.submit_time = now - 1900 + run;
    j.start_time = now - 1800 + run;
    j.end_time = now - 60 + run;
    j.usage.elapsed_s = static_cast<double>(*j.end_time - *j.start_time);
    j.usage.cpu_time_s = 0.6 * *j.usage.elapsed_s;
    j.usage.peak_rss_bytes = peak_bytes;
    j.outcome.state = "COMPLETED";
    j.outcome.exit_code = 0;
    ASSERT_TRUE(store.UpsertJobs({&j, 1}).ok());
  };
  // What the agents write all the time, a running job's progress, leaves the past as it was:
  // the cache still answers.
  JobRecord running;
  running.cluster = "prod";
  running.job_id = "ml/infer/infer-running";
  running.source = "kubernetes";
  running.request.user = running.request.account = "ml";
  running.request.job_name = "infer/infer";
  running.submit_time = running.start_time = now - 120;
  running.usage.peak_rss_bytes = int64_t{1} << 30;
  ASSERT_TRUE((*writer)->UpsertJobs({&running, 1}).ok());
  running.usage.peak_rss_bytes = int64_t{2} << 30;
  ASSERT_TRUE((*server)->UpsertJobs({&running, 1}).ok());
  EXPECT_EQ(admit(o), first);
  EXPECT_EQ(cache.hits(), 2) << "a running job's progress emptied the cache";

  store_run(**writer, 2, int64_t{30} << 30);
  std::string second = admit(o);
  EXPECT_NE(second, first) << "the new run was not seen";
  EXPECT_EQ(second, admit(uncached));
  EXPECT_EQ(admit(o), second);
  EXPECT_EQ(cache.hits(), 3);
  // The same finished job stored again as it was (a follower re-reading accounting): no change.
  store_run(**writer, 2, int64_t{30} << 30);
  EXPECT_EQ(admit(o), second);
  EXPECT_EQ(cache.hits(), 4) << "re-storing an unchanged finished job emptied the cache";
  // The server's own connection writes too (its telemetry writer, `POST /api/v1/jobs`).
  store_run(**server, 3, int64_t{60} << 30);
  std::string third = admit(o);
  EXPECT_NE(third, second) << "the new run was not seen";
  EXPECT_EQ(third, admit(uncached));
  server->reset();
  writer->reset();
  std::filesystem::remove_all(dir);
}

TEST(AdmissionReviewTest, RejectsWhatCannotBeAnswered) {
  auto store = OpenStore(":memory:");
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(Admit(**store, nullptr, {}, AdmissionMode::kAdvise, nlohmann::json::array()).ok());
  EXPECT_FALSE(Admit(**store, nullptr, {}, AdmissionMode::kAdvise, {{"request", {{"x", 1}}}}).ok());
}

TEST(AdmissionPieces, PointersAndQuantities) {
  EXPECT_EQ(EscapeJsonPointer("rightsize.io/worker.pytorch"), "rightsize.io~1worker.pytorch");
  EXPECT_EQ(EscapeJsonPointer("a~b/c"), "a~0b~1c");
  EXPECT_EQ(MemoryQuantity(12LL << 30), "12Gi");
  EXPECT_EQ(MemoryQuantity((1LL << 30) + 1), "1025Mi");
  EXPECT_EQ(CpuQuantity(2), "2");
  EXPECT_EQ(CpuQuantity(0.25), "250m");
  EXPECT_EQ(CpuQuantity(1.0001), "1001m");
}

}  // namespace
}  // namespace rightsize

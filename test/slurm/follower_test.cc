// slurm::Follower against small shell scripts standing in for sacct, scontrol and sinfo (they
// print real SLURM 22.05 output: test/data/sacct/slurm22/) and a SQLite store in a temp dir.
#include "slurm/follower.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/units.h"
#include "store/store.h"

namespace rightsize::slurm {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::binary) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

// What the follower told, in order.
struct Recorder final : FollowerEvents {
  void OnPartitions(const std::string& cluster,
                    const std::vector<PartitionShape>& partitions) override {
    partitions_cluster = cluster;
    partition_count = partitions.size();
  }
  void OnIngestStart(const std::string& file) override { ingest_files.push_back(file); }
  void OnIngested(const IngestStats& stats, const Status& status) override {
    ingested.push_back(stats);
    ingest_status.push_back(status);
  }
  void OnDiagnosed(const DiagnosedJob& job) override { diagnosed.push_back(job); }
  void OnPassEnd() override { ++passes; }
  void OnWarning(const std::string& message) override { warnings.push_back(message); }
  void OnError(const Status& status) override { errors.push_back(status.message()); }

  const DiagnosedJob* Diagnosed(const std::string& job_id) const {
    for (const auto& d : diagnosed) {
      if (d.job_id == job_id) return &d;
    }
    return nullptr;
  }

  std::string partitions_cluster;
  size_t partition_count = 0;
  std::vector<std::string> ingest_files;
  std::vector<IngestStats> ingested;
  std::vector<Status> ingest_status;
  std::vector<DiagnosedJob> diagnosed;
  int passes = 0;
  std::vector<std::string> warnings, errors;
};

class FollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rightsize-follower-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "logs");
    fs::create_directories(dir_ / "work");
    fs::create_directories(dir_ / "out");
    store_path_ = (dir_ / "rs.db").string();
    std::string d = dir_.string();

    // sacct: the jobs (mixed.psv, then the real OUT_OF_MEMORY job 11 of oom-cgroup-v1.psv),
    // or, asked for the follower's extra columns, the ended jobs with the hook's records.
    std::string data = std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/sacct/slurm22/";
    std::string oom = ReadFile(data + "oom-cgroup-v1.psv");
    WriteFile(dir_ / "sacct.psv", ReadFile(data + "mixed.psv") + oom.substr(oom.find('\n') + 1));
    WriteFile(dir_ / "finished.txt",
              // The hook's record with out=: the log is found there (%j filled in).
              "11|11|OUT_OF_MEMORY|rs_v1_oom|root|" + d +
                  "/work|rightsize:v1 mode=advise mem_mb=150,256,100 cpus=1,1,1 "
                  "time_min=1,2,5 changed=mem out=" +
                  d + "/out/job-%j.log\n" +
                  // No record: the log is in --log-dir.
                  "4|4|FAILED|rs_overmem|root|/nonexistent|\n"
                  // No record: slurm-3.out in its working directory.
                  "3|3|FAILED|rs_fail|root|" +
                  d +
                  "/work|\n"
                  // Completed: its record becomes its prediction; it is not diagnosed.
                  "2|2|COMPLETED|rs_mem200|root|" +
                  d + "/work|rightsize:v1 mode=enforce mem_mb=210,300,500 changed=mem\n");
    WriteFile(dir_ / "sacct",
              "#!/bin/sh\n"
              "echo \"$*\" >>" +
                  d +
                  "/sacct.args\n"
                  "case \"$*\" in\n"
                  "  *AdminComment*) cat " +
                  d +
                  "/finished.txt ;;\n"
                  "  *) cat " +
                  d +
                  "/sacct.psv ;;\n"
                  "esac\n",
              true);
    WriteFile(dir_ / "scontrol",
              "#!/bin/sh\n"
              "case \"$1 $2\" in\n"
              "  'show config') echo 'ClusterName             = rstest' ;;\n"
              "  *) exit 1 ;;\n"  // the jobs are gone from slurmctld
              "esac\n",
              true);
    WriteFile(dir_ / "sinfo", "#!/bin/sh\necho 'debug*|1|2|23000|(null)'\n", true);

    WriteFile(dir_ / "out/job-11.log",
              "slurmstepd: error: Detected 1 oom_kill event in StepId=11.batch. Some of the "
              "step tasks have been OOM Killed.\n");
    WriteFile(dir_ / "logs/slurm-4.out",
              "slurmstepd: error: Job 4 exceeded memory limit (110000 > 102400), being "
              "killed\n");
    WriteFile(dir_ / "work/slurm-3.out",
              "Traceback (most recent call last):\n"
              "  File \"/home/root/train.py\", line 5, in <module>\n"
              "    with open(path) as f:\n"
              "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  FollowerOptions Options(bool follow) const {
    FollowerOptions o;
    o.sacct = (dir_ / "sacct").string();
    o.scontrol = (dir_ / "scontrol").string();
    o.sinfo = (dir_ / "sinfo").string();
    o.log_dir = (dir_ / "logs").string();
    o.follow = follow;
    o.passes = 1;
    return o;
  }

  // One run of a fresh follower (as one `ingest slurm` command); returns its status.
  Status RunOnce(const FollowerOptions& o, Recorder* events) {
    auto store = OpenStore(store_path_);
    EXPECT_TRUE(store.ok()) << store.status().message();
    std::atomic<bool> stop{false};
    Follower follower([&store]() -> StatusOr<Store*> { return store->get(); }, store_path_, o,
                      *events);
    return follower.Run(1700000000, 1700003600, stop);
  }

  int64_t JobCount() {
    auto store = OpenStore(store_path_);
    auto n = (*store)->CountJobs(JobFilter{});
    return n.ok() ? *n : -1;
  }

  fs::path dir_;
  std::string store_path_;
};

TEST_F(FollowerTest, IngestsTheWindowAndStoresThePartitions) {
  Recorder events;
  Status st = RunOnce(Options(false), &events);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(events.ingested.size(), 1u);
  EXPECT_TRUE(events.ingest_status[0].ok());
  EXPECT_EQ(events.ingested[0].stored, 12);  // 10 jobs of mixed.psv, 11 and 12
  EXPECT_EQ(events.ingested[0].file, events.ingest_files[0]);
  EXPECT_FALSE(fs::exists(events.ingest_files[0])) << "the sacct output is not left behind";
  EXPECT_EQ(JobCount(), 12);
  // Not following: no diagnosis, no pass end, every job (no --state) asked for.
  EXPECT_TRUE(events.diagnosed.empty());
  EXPECT_EQ(events.passes, 0);
  std::string args = ReadFile(dir_ / "sacct.args");
  EXPECT_NE(args.find("--parsable2 --allusers --starttime="), std::string::npos) << args;
  EXPECT_EQ(args.find("--state="), std::string::npos) << args;

  // The partitions went to the cluster scontrol names.
  EXPECT_EQ(events.partitions_cluster, "rstest");
  EXPECT_EQ(events.partition_count, 1u);
  auto store = OpenStore(store_path_);
  auto meta = (*store)->GetClusterMeta("rstest");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->at("default_partition"), "debug");
  EXPECT_EQ(meta->at("partition.debug.cpus_per_node"), "2");
  EXPECT_TRUE(events.warnings.empty());
  EXPECT_TRUE(events.errors.empty());
}

TEST_F(FollowerTest, DiagnosesTheFailedJobsFromTheirOutputFiles) {
  Recorder events;
  Status st = RunOnce(Options(true), &events);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(events.passes, 1);
  EXPECT_NE(ReadFile(dir_ / "sacct.args").find("--state=BF,CA,CD,DL,F,NF,OOM,PR,TO"),
            std::string::npos);
  EXPECT_TRUE(events.errors.empty()) << events.errors[0];
  ASSERT_EQ(events.diagnosed.size(), 3u);

  const DiagnosedJob* oom = events.Diagnosed("11");
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->state, "OUT_OF_MEMORY");
  EXPECT_EQ(oom->cls, "host_oom");
  EXPECT_GT(oom->confidence, 0.5);
  EXPECT_EQ(oom->log, (dir_ / "out/job-11.log").string()) << "found through the hook's out=";
  EXPECT_NE(oom->fix.find("--mem"), std::string::npos) << oom->fix;

  const DiagnosedJob* overmem = events.Diagnosed("4");
  ASSERT_NE(overmem, nullptr);
  EXPECT_EQ(overmem->log, (dir_ / "logs/slurm-4.out").string()) << "found in the log folder";
  const DiagnosedJob* fail = events.Diagnosed("3");
  ASSERT_NE(fail, nullptr);
  EXPECT_EQ(fail->log, (dir_ / "work/slurm-3.out").string()) << "found in the working dir";
  EXPECT_EQ(fail->cls, "missing_file");
  EXPECT_EQ(events.Diagnosed("2"), nullptr) << "a completed job is not diagnosed";

  // Each diagnosis is stored with its job.
  auto store = OpenStore(store_path_);
  auto stored = (*store)->GetDiagnosis("default", "11");
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->cls, "host_oom");
  auto doc = nlohmann::json::parse(stored->document);
  EXPECT_EQ(doc["schema"], "rightsize.diagnosis/v1");
  EXPECT_TRUE((*store)->GetDiagnosis("default", "4").ok());
  EXPECT_FALSE((*store)->GetDiagnosis("default", "2").ok());
}

TEST_F(FollowerTest, StoresTheHooksRecordAsThePrediction) {
  Recorder events;
  ASSERT_TRUE(RunOnce(Options(true), &events).ok());
  auto store = OpenStore(store_path_);
  auto p = (*store)->GetPrediction("default", "11");
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto doc = nlohmann::json::parse(p->document);
  EXPECT_EQ(doc["schema"], "rightsize.predict/v1");
  EXPECT_EQ(doc["source"], "job_submit.lua");
  EXPECT_EQ(doc["cluster"], "default");
  EXPECT_EQ(doc["mode"], "advise");
  EXPECT_EQ(doc["changed"], nlohmann::json::array({"mem"}));
  EXPECT_EQ(doc["targets"]["peak_memory"]["p50"], 150.0 * kMiB);
  EXPECT_EQ(doc["targets"]["peak_memory"]["suggested_request"], 256.0 * kMiB);
  EXPECT_EQ(doc["targets"]["peak_memory"]["request"], 100.0 * kMiB);
  EXPECT_EQ(doc["targets"]["runtime"]["suggested_request"], 120.0);
  EXPECT_EQ(doc["targets"]["cpu_cores"]["unit"], "cores");
  // The record runs to the end, out= included.
  EXPECT_EQ(doc["record"].get<std::string>().rfind("rightsize:v1 mode=advise", 0), 0u);
  EXPECT_NE(doc["record"].get<std::string>().find("out="), std::string::npos);
  // A completed job's record too; a job without one has none.
  auto done = (*store)->GetPrediction("default", "2");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(nlohmann::json::parse(done->document)["mode"], "enforce");
  EXPECT_FALSE((*store)->GetPrediction("default", "3").ok());
}

TEST_F(FollowerTest, ARerunDuplicatesNothing) {
  Recorder first;
  ASSERT_TRUE(RunOnce(Options(true), &first).ok());
  auto store = OpenStore(store_path_);
  auto diag = (*store)->GetDiagnosis("default", "11");
  ASSERT_TRUE(diag.ok());
  store->reset();

  Recorder second;
  ASSERT_TRUE(RunOnce(Options(true), &second).ok());
  EXPECT_EQ(JobCount(), 12);
  EXPECT_TRUE(second.diagnosed.empty()) << "diagnosed again: " << second.diagnosed[0].job_id;
  EXPECT_TRUE(second.errors.empty());
  store = OpenStore(store_path_);
  auto again = (*store)->GetDiagnosis("default", "11");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->created_at, diag->created_at) << "the stored diagnosis is kept";
}

TEST_F(FollowerTest, NoDiagnoseStillAttachesPredictions) {
  FollowerOptions o = Options(true);
  o.diagnose = false;
  Recorder events;
  ASSERT_TRUE(RunOnce(o, &events).ok());
  EXPECT_TRUE(events.diagnosed.empty());
  auto store = OpenStore(store_path_);
  EXPECT_FALSE((*store)->GetDiagnosis("default", "11").ok());
  EXPECT_TRUE((*store)->GetPrediction("default", "11").ok());
}

TEST_F(FollowerTest, AGivenClusterTakesTheJobsAndThePartitions) {
  FollowerOptions o = Options(false);
  o.cluster = "lab";
  Recorder events;
  ASSERT_TRUE(RunOnce(o, &events).ok());
  EXPECT_EQ(events.partitions_cluster, "lab");
  auto store = OpenStore(store_path_);
  EXPECT_TRUE((*store)->GetJob("lab", "11").ok());
  EXPECT_TRUE((*store)->GetClusterMeta("lab")->count("default_partition"));
}

TEST_F(FollowerTest, AFailingSinfoIsAWarningAndAFailingSacctAnError) {
  FollowerOptions o = Options(false);
  o.sinfo = (dir_ / "no-such-sinfo").string();
  o.sacct = "/bin/false";
  Recorder events;
  Status st = RunOnce(o, &events);
  EXPECT_EQ(st.code(), Status::Code::kIoError);
  EXPECT_EQ(st.message(), "/bin/false exited with status 1");
  ASSERT_EQ(events.warnings.size(), 1u);
  EXPECT_NE(events.warnings[0].find("cannot run " + o.sinfo), std::string::npos)
      << events.warnings[0];
  EXPECT_NE(events.warnings[0].find("the partitions' nodes are not known"), std::string::npos);
  ASSERT_EQ(events.errors.size(), 1u) << "reported as it happened";
  EXPECT_EQ(events.errors[0], st.message());
  EXPECT_TRUE(events.ingested.empty());
}

}  // namespace
}  // namespace rightsize::slurm

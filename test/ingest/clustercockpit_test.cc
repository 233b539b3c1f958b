#include "ingest/clustercockpit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/units.h"
#include "store/store.h"
#include "test_util.h"

namespace rightsize {
namespace {

// cc-backend's export (NHR@FAU Alex and Fritz, 2023).
constexpr const char* kAlexFritzHeader =
    "cluster,subcluster,job_id,array_job_id,hpc_user,project,partition,job_name,start_time,"
    "duration_s,walltime_limit_s,job_state,num_nodes,num_hwthreads,num_acc,shared,smt,energy,"
    "cpu_load_avg,mem_used_avg_GB_node,mem_bw_avg,flops_any_avg,acc_utilization_avg_pct,"
    "acc_mem_used_avg_sum,cpu_power_W,mem_power_W,core_power_W,acc_power_W,hostnames,"
    "accelerators\n";

// The 2020 schema's export (RRZE Emmy and Woody).
constexpr const char* kEmmyWoodyHeader =
    "row_id,job_id,user,cluster,num_nodes,start_time,duration_s,node_list,is_running,meta_data,"
    "project,mem_used_max_GB,flops_any_avg_GFs,mem_bw_avg_GBs,load_avg,net_bw_avg,file_bw_avg\n";

TEST(ClusterCockpitParserTest, ReadsTheCcBackendExport) {
  ClusterCockpitParser parser;
  // Rows from data/usage/clustercockpit/fau-alex-fritz-2023-02_jobs.csv.gz.
  auto r = ParseText(
      parser,
      std::string(kAlexFritzHeader) +
          "alex,a100m80,679784,0,b143dc18,b143dc,a100,diffusion_echo,1675796459,13028,86400,"
          "completed,1,128,8,none,0,10.14,24.524,267.681,134.585,10.495,90.606,640863.706,0.95,,"
          "0.31,8.88,a0933,8\n"
          "alex,a40,679694,0,iwi5056h,iwi5,a40,retrain_SNN,1675777167,83,86340,completed,1,16,1,"
          "multi_user,0,0.0,36.87,37.731,28.215,0,1,1286.562,0,,0,0,a0128,1\n"
          "fritz,main,398759,0,k106eb10,k106eb,singlenode,ams_pipeline,1675954289,456,86340,"
          "completed,1,72,0,none,0,0.04,51.549,19.107,39.231,232.513,,,0.04,0,,,f1039,0\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(parser.non_record_lines(), 1);

  const JobRecord& a = r.jobs[0];
  EXPECT_EQ(a.source, "clustercockpit");
  EXPECT_EQ(a.cluster, "alex");
  EXPECT_EQ(a.job_id, "679784");
  EXPECT_EQ(a.request.user, "b143dc18");
  EXPECT_EQ(a.request.account, "b143dc");
  EXPECT_EQ(a.request.partition, "a100");
  EXPECT_EQ(a.request.job_name, "diffusion_echo");
  EXPECT_EQ(*a.start_time, 1675796459);
  EXPECT_EQ(*a.submit_time, 1675796459);  // no submit time in the export
  EXPECT_EQ(*a.end_time, 1675796459 + 13028);
  EXPECT_DOUBLE_EQ(*a.usage.elapsed_s, 13028);
  EXPECT_EQ(*a.request.time_limit_s, 86400);
  EXPECT_EQ(*a.alloc.nodes, 1);
  EXPECT_DOUBLE_EQ(*a.alloc.cpus, 128);
  EXPECT_EQ(*a.alloc.gpus, 8);
  EXPECT_EQ(*a.request.gpus, 8);
  EXPECT_EQ(a.GpuType(), "a100-80gb");  // the price table's name for an 80 GB A100
  EXPECT_EQ(a.outcome.state, "COMPLETED");
  EXPECT_EQ(a.alloc.node_list, "a0933");
  EXPECT_DOUBLE_EQ(*a.usage.gpu_util_pct, 90.606);
  EXPECT_EQ(*a.usage.peak_gpu_memory_bytes, 671994301383);  // 640,863.706 MiB over 8 GPUs
  EXPECT_NEAR(*a.usage.cpu_time_s, 24.524 * 13028, 1e-6);   // load × nodes × duration
  EXPECT_EQ(*a.usage.avg_rss_bytes, 287420285190);          // 267.681 GiB on one node
  EXPECT_FALSE(a.usage.peak_rss_bytes.has_value());

  // A job that shared its node: load and memory are the node's, so unknown for the job; its
  // GPU metrics are its own GPU's.
  const JobRecord& shared = r.jobs[1];
  EXPECT_EQ(shared.GpuType(), "a40");
  EXPECT_FALSE(shared.usage.cpu_time_s.has_value());
  EXPECT_FALSE(shared.usage.avg_rss_bytes.has_value());
  EXPECT_DOUBLE_EQ(*shared.usage.gpu_util_pct, 1);
  EXPECT_EQ(*shared.usage.peak_gpu_memory_bytes, 1349058036);

  const JobRecord& f = r.jobs[2];
  EXPECT_EQ(f.cluster, "fritz");
  EXPECT_EQ(f.request.partition, "singlenode");
  EXPECT_EQ(*f.alloc.gpus, 0);
  EXPECT_EQ(f.GpuType(), "");
  EXPECT_FALSE(f.usage.gpu_util_pct.has_value());
  EXPECT_FALSE(f.usage.peak_gpu_memory_bytes.has_value());
  EXPECT_NEAR(*f.usage.cpu_time_s, 51.549 * 456, 1e-6);
  EXPECT_EQ(*f.usage.avg_rss_bytes, 20515985031);

  ASSERT_EQ(parser.notes().size(), 1u);
  EXPECT_NE(parser.notes()[0].find("1 jobs shared their nodes"), std::string::npos);
}

TEST(ClusterCockpitParserTest, ReadsThe2020SchemaExport) {
  ClusterCockpitParser parser;
  // Rows 1, 1969 and 3378 of data/usage/clustercockpit/fau-emmy-woody-2020_jobs.csv.gz, and a
  // made-up running row without a duration.
  auto r =
      ParseText(parser, std::string(kEmmyWoodyHeader) +
                            "1,1335041,emmyUser5,emmy,32,1596241216,21652,e1018|e1017|e1010,0,,"
                            "project5,2.95,0,0.14,0,0,0\n"
                            "1969,7377817,influxUser14,woody,1,1609465262,34739,w1556,1,,"
                            "influxProject20,4.55,73.21,7.05,4.16,0,0\n"
                            "3378,1406108,influxUser4,emmy,8,1609459477,4601,e0501|e0442,1,,"
                            "influxProject2,0,0,0,0,0,0\n"
                            "4000,1406109,u,emmy,1,1609459477,0,e0001,1,,p,0,0,0,0,0,0\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.jobs.size(), 3u);

  const JobRecord& emmy = r.jobs[0];
  EXPECT_EQ(emmy.cluster, "emmy");
  EXPECT_EQ(emmy.request.user, "emmyUser5");
  EXPECT_EQ(emmy.request.account, "project5");
  EXPECT_EQ(*emmy.alloc.nodes, 32);
  EXPECT_EQ(emmy.alloc.node_list, "e1018,e1017,e1010");
  EXPECT_EQ(*emmy.end_time, 1596241216 + 21652);
  EXPECT_EQ(*emmy.usage.peak_rss_bytes, 101361228186);  // 2.95 GiB per node × 32 nodes
  EXPECT_FALSE(emmy.usage.cpu_time_s.has_value());      // load_avg 0: not measured
  EXPECT_FALSE(emmy.alloc.gpus.has_value());            // the export does not say
  EXPECT_FALSE(emmy.request.time_limit_s.has_value());
  EXPECT_EQ(emmy.outcome.state, "");

  const JobRecord& woody = r.jobs[1];  // is_running = 1 but finished: kept
  EXPECT_EQ(woody.job_id, "7377817");
  EXPECT_NEAR(*woody.usage.cpu_time_s, 4.16 * 34739, 1e-6);
  EXPECT_EQ(*woody.usage.peak_rss_bytes, 4885525299);

  EXPECT_FALSE(r.jobs[2].usage.peak_rss_bytes.has_value());  // 0 = not measured
  EXPECT_EQ(parser.running_rows(), 1);
  auto notes = parser.notes();
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_EQ(notes[0], "1 rows of running jobs skipped (not finished)");
  EXPECT_EQ(notes[1],
            "2 rows flagged is_running = 1 have a duration and were stored as finished "
            "jobs");
  EXPECT_EQ(notes[2], "2 jobs have CPU load 0 (not measured): CPU time left unknown");
  EXPECT_EQ(notes[3], "1 jobs have memory 0 (not measured): left unknown");
}

TEST(ClusterCockpitParserTest, ColumnsInAnyOrderAndQuotedFields) {
  ClusterCockpitParser parser;
  auto r = ParseText(parser,
                     "Job_State,job_name,job_id,unknown_column,start_time,duration_s,cluster\n"
                     "completed,\"train, eval\",1,x,1675777167,60,alex\n"
                     "failed,\"say \"\"hi\"\"\",2,\"a,b,c\",1675777167,60,alex\n"
                     "\n"
                     "timeout,\"two\n"
                     "lines\",3,,2023-02-07T13:39:27,60,fritz\n"
                     "out_of_memory,plain,4,,,,\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.jobs.size(), 4u);
  EXPECT_EQ(r.jobs[0].request.job_name, "train, eval");
  EXPECT_EQ(r.jobs[0].outcome.state, "COMPLETED");
  EXPECT_EQ(r.jobs[1].request.job_name, "say \"hi\"");
  EXPECT_EQ(r.jobs[1].outcome.state, "FAILED");
  EXPECT_EQ(r.jobs[2].request.job_name, "two\nlines");
  EXPECT_EQ(r.jobs[2].cluster, "fritz");
  EXPECT_EQ(*r.jobs[2].start_time, 1675777167);
  EXPECT_EQ(r.jobs[2].outcome.state, "TIMEOUT");
  EXPECT_EQ(r.jobs[3].outcome.state, "OUT_OF_MEMORY");
  EXPECT_FALSE(r.jobs[3].start_time.has_value());  // empty = unknown
  EXPECT_FALSE(r.jobs[3].usage.elapsed_s.has_value());
  EXPECT_EQ(parser.non_record_lines(), 2);  // the header and the blank line
}

TEST(ClusterCockpitParserTest, RunningJobsAreSkippedAndCounted) {
  ClusterCockpitParser parser;
  auto r = ParseText(parser,
                     "job_id,job_state,duration_s\n"
                     "1,completed,60\n"
                     "2,running,0\n"
                     "3,RUNNING,30\n"
                     "4,cancelled,5\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[1].outcome.state, "CANCELLED");
  EXPECT_EQ(FindJob(r.jobs, "2"), nullptr);
  EXPECT_EQ(parser.running_rows(), 2);
  ASSERT_FALSE(parser.notes().empty());
  EXPECT_EQ(parser.notes()[0], "2 rows of running jobs skipped (not finished)");
}

TEST(ClusterCockpitParserTest, BadRowsNameTheFieldAndTheNextRowsAreRead) {
  ClusterCockpitParser parser;
  auto r = ParseText(parser,
                     "job_id,duration_s,num_acc,acc_utilization_avg_pct,job_name\n"
                     "1,60,1,50,a\n"
                     "2,sixty,1,50,b\n"
                     "3,60,1.5,50,c\n"
                     "4,60,1,150,d\n"
                     "5,60,1,50\n"
                     "6,60,1,50,e\"x\n"
                     ",60,1,50,f\n"
                     "7,60,1,50,\"g\"\n");
  ASSERT_EQ(r.errors.size(), 6u);
  EXPECT_EQ(r.errors[0], "3: field duration_s: expected a number of seconds, got 'sixty'");
  EXPECT_EQ(r.errors[1], "4: field num_acc: expected a GPU count, got '1.5'");
  EXPECT_EQ(r.errors[2],
            "5: field acc_utilization_avg_pct: expected a percentage from 0 to 100, got '150'");
  EXPECT_EQ(r.errors[3], "6: expected 5 fields as the header names, got 4");
  EXPECT_NE(r.errors[4].find("7: field job_name: expected quotes only around a whole field"),
            std::string::npos)
      << r.errors[4];
  EXPECT_EQ(r.errors[5], "8: field job_id: expected a job id, got ''");
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].job_id, "1");
  EXPECT_EQ(r.jobs[1].job_id, "7");
}

TEST(ClusterCockpitParserTest, AHeaderWithoutJobIdIsAnError) {
  ClusterCockpitParser parser;
  auto r = ParseText(parser, "JobID|State\n1|COMPLETED\n");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].find("1: expected a header naming the columns (job_id"), std::string::npos)
      << r.errors[0];
  EXPECT_TRUE(r.jobs.empty());
}

TEST(ClusterCockpitParserTest, AnUnclosedQuoteIsReportedAtTheEnd) {
  ClusterCockpitParser parser;
  std::vector<JobRecord> jobs;
  ASSERT_TRUE(parser.ParseLine("job_id,job_name", jobs).ok());
  ASSERT_TRUE(parser.ParseLine("1,ok", jobs).ok());
  ASSERT_TRUE(parser.ParseLine("2,\"never closed", jobs).ok());
  ASSERT_TRUE(parser.ParseLine("3,more", jobs).ok());
  Status st = parser.Finish(jobs);
  EXPECT_EQ(st.message(),
            "field job_name: expected a closing quote before the end of the input, got none (the "
            "field opened 1 lines before the last one)");
  EXPECT_EQ(jobs.size(), 1u);
}

TEST(ClusterCockpitParserTest, ARunawayQuoteIsCutAt1MiB) {
  ClusterCockpitParser parser;
  std::string text = "job_id,job_name\n1,\"never closed\n";
  for (int i = 0; i < 1100; ++i) text += std::string(1000, 'x') + "\n";
  text += "2,ok\n";
  auto r = ParseText(parser, text);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].find("field job_name: expected a closing quote within 1 MiB"),
            std::string::npos)
      << r.errors[0];
  // Reading starts afresh: the lines after the cut are rows of their own (of one field), and
  // the good row after them lands.
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].job_id, "2");
}

// Ingests through IngestFile, as `rightsize ingest clustercockpit` does, into a SQLite store.
class ClusterCockpitIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rightsize-cc-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = OpenStore((dir_ / "rs.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  IngestStats Ingest(const std::string& path) {
    ClusterCockpitParser parser;
    IngestStats stats;
    Status st = IngestFile(path, parser, *store_, "default", IngestOptions(), &stats);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return stats;
  }

  std::map<std::string, std::vector<JobRecord>> JobsByCluster() {
    std::map<std::string, std::vector<JobRecord>> out;
    Status st = store_->ScanJobs({}, [&](const JobRecord& j) {
      out[j.cluster].push_back(j);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  static std::string DataFile(const std::string& name) {
    return std::string(RIGHTSIZE_SOURCE_DIR) + "/data/usage/clustercockpit/" + name;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(ClusterCockpitIngestTest, AMalformedNumberNamesFileLineAndField) {
  std::string path = (dir_ / "jobs.csv").string();
  std::ofstream(path) << "job_id,cluster,duration_s,mem_used_max_GB,num_nodes\n"
                         "1,c,60,1.5,1\n"
                         "2,c,60,lots,1\n"
                         "3,c,60,2,2\n";
  IngestStats stats = Ingest(path);
  EXPECT_EQ(stats.stored, 2);
  EXPECT_EQ(stats.skipped, 1);
  ASSERT_EQ(stats.errors.size(), 1u);
  EXPECT_EQ(stats.errors[0].ToString(),
            path + ":3: field mem_used_max_GB: expected a memory size in GB, got 'lots'");
  auto job = store_->GetJob("c", "3");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(*job->usage.peak_rss_bytes, 4 * kGiB);  // 2 GiB per node × 2 nodes
}

TEST_F(ClusterCockpitIngestTest, StoresTheRealExports) {
  IngestStats emmy = Ingest(DataFile("fau-emmy-woody-2020_jobs.csv.gz"));
  EXPECT_EQ(emmy.lines, 4690);
  EXPECT_EQ(emmy.stored, 4689);
  EXPECT_EQ(emmy.skipped, 0);
  IngestStats alex = Ingest(DataFile("fau-alex-fritz-2023-02_jobs.csv.gz"));
  EXPECT_EQ(alex.stored, 544);
  EXPECT_EQ(alex.skipped, 0);

  auto jobs = JobsByCluster();
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs["emmy"].size(), 2780u);
  EXPECT_EQ(jobs["woody"].size(), 1909u);
  EXPECT_EQ(jobs["alex"].size(), 303u);
  EXPECT_EQ(jobs["fritz"].size(), 241u);

  int peak_memory_known = 0;
  for (const auto& cluster : {"emmy", "woody"}) {
    for (const auto& j : jobs[cluster]) peak_memory_known += j.usage.peak_rss_bytes ? 1 : 0;
  }
  EXPECT_EQ(peak_memory_known, 3377);

  // Every Alex job has GPUs and GPU utilisation; read as MiB, no job's GPU memory exceeds
  // what its GPUs hold (A40 48 GiB, A100 40 GiB, A100 80 GiB).
  const std::map<std::string, int64_t> capacity = {
      {"a40", 48 * kGiB}, {"a100", 40 * kGiB}, {"a100-80gb", 80 * kGiB}};
  int with_util = 0;
  for (const auto& j : jobs["alex"]) {
    ASSERT_GT(*j.AllocatedGpus(), 0) << j.job_id;
    with_util += j.usage.gpu_util_pct ? 1 : 0;
    ASSERT_TRUE(j.usage.peak_gpu_memory_bytes) << j.job_id;
    EXPECT_LE(*j.usage.peak_gpu_memory_bytes, *j.AllocatedGpus() * capacity.at(j.GpuType()))
        << j.job_id;
  }
  EXPECT_EQ(with_util, 303);
  for (const auto& j : jobs["fritz"]) {
    EXPECT_TRUE(j.usage.cpu_time_s && j.usage.avg_rss_bytes) << j.job_id;  // whole nodes
  }

  // Spot values, read by hand with zcat.
  auto a = store_->GetJob("alex", "679784");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->GpuType(), "a100-80gb");
  EXPECT_EQ(*a->usage.peak_gpu_memory_bytes, 671994301383);
  EXPECT_DOUBLE_EQ(*a->usage.gpu_util_pct, 90.606);
  auto e = store_->GetJob("emmy", "1335041");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e->usage.peak_rss_bytes, 101361228186);
  EXPECT_EQ(*e->end_time, 1596241216 + 21652);
  EXPECT_EQ(e->request.user, "emmyUser5");
}

}  // namespace
}  // namespace rightsize

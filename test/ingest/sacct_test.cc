#include "ingest/sacct.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "test_util.h"

namespace rightsize {
namespace {

// Real sacct -P output of SLURM 22.05, recorded on a real cluster (test/data/sacct/slurm22).
TEST(SacctParserTest, ReadsRealSlurm2205OutputAndMergesSteps) {
  SacctParser parser({});
  auto r = ParseFile(parser, DataPath("sacct/slurm22/mixed.psv"));
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  // 8 submissions; the array job is 3 tasks: 10 jobs, no step left as its own job.
  EXPECT_EQ(r.jobs.size(), 10u);
  for (const auto& j : r.jobs) EXPECT_EQ(j.job_id.find('.'), std::string::npos) << j.job_id;

  const JobRecord* mem = FindJob(r.jobs, "2");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->request.job_name, "rs_mem200");
  EXPECT_EQ(*mem->request.memory_bytes, 500 * kMiB);
  // The peak comes from the .batch step (the job line's MaxRSS is empty).
  EXPECT_EQ(*mem->usage.peak_rss_bytes, 214496 * kKiB);
  EXPECT_EQ(mem->outcome.state, "COMPLETED");

  const JobRecord* timeout = FindJob(r.jobs, "1");
  ASSERT_NE(timeout, nullptr);
  EXPECT_EQ(timeout->outcome.state, "TIMEOUT");
  EXPECT_EQ(*timeout->request.time_limit_s, 60);
  EXPECT_DOUBLE_EQ(*timeout->usage.elapsed_s, 60);

  const JobRecord* overmem = FindJob(r.jobs, "4");
  ASSERT_NE(overmem, nullptr);
  EXPECT_EQ(overmem->outcome.state, "FAILED");
  EXPECT_EQ(*overmem->outcome.signal, 9);
  EXPECT_EQ(*overmem->usage.peak_rss_bytes, 419212 * kKiB);

  const JobRecord* fail = FindJob(r.jobs, "3");
  ASSERT_NE(fail, nullptr);
  EXPECT_EQ(*fail->outcome.exit_code, 3);

  const JobRecord* cancel = FindJob(r.jobs, "8");
  ASSERT_NE(cancel, nullptr);
  EXPECT_EQ(cancel->outcome.state, "CANCELLED");  // "CANCELLED by 0"

  const JobRecord* cpu2 = FindJob(r.jobs, "7");
  ASSERT_NE(cpu2, nullptr);
  EXPECT_EQ(*cpu2->AllocatedCpus(), 2);
  EXPECT_NEAR(*cpu2->usage.cpu_time_s, 7.867, 1e-6);

  for (const char* task : {"5_1", "5_2", "5_3"}) EXPECT_NE(FindJob(r.jobs, task), nullptr) << task;
}

TEST(SacctParserTest, HeaderlessSemicolonOutputGivesTheSameJobs) {
  SacctParser with_header({});
  auto a = ParseFile(with_header, DataPath("sacct/slurm22/mixed.psv"));
  SacctOptions opts;
  opts.delimiter = ";";
  opts.columns = {"JobID",       "JobIDRaw",     "JobName",        "User",      "Account",
                  "Partition",   "QOS",          "State",          "ExitCode",  "Submit",
                  "Start",       "End",          "Elapsed",        "Timelimit", "NNodes",
                  "NCPUS",       "ReqCPUS",      "ReqMem",         "ReqTRES",   "AllocTRES",
                  "TotalCPU",    "UserCPU",      "SystemCPU",      "MaxRSS",    "AveRSS",
                  "MaxDiskRead", "MaxDiskWrite", "TRESUsageInMax", "Comment"};
  SacctParser headerless(opts);
  auto b = ParseFile(headerless, DataPath("sacct/slurm22/mixed-noheader-semicolon.txt"));
  EXPECT_TRUE(b.errors.empty()) << b.errors.front();
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].job_id, b.jobs[i].job_id);
    EXPECT_EQ(a.jobs[i].usage.peak_rss_bytes, b.jobs[i].usage.peak_rss_bytes);
    EXPECT_EQ(a.jobs[i].usage.cpu_time_s, b.jobs[i].usage.cpu_time_s);
  }
}

TEST(SacctParserTest, CgroupOutOfMemoryJob) {
  SacctParser parser({});
  auto r = ParseFile(parser, DataPath("sacct/slurm22/oom-cgroup-v1.psv"));
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  bool saw_oom = false;
  for (const auto& j : r.jobs) saw_oom = saw_oom || j.outcome.state == "OUT_OF_MEMORY";
  EXPECT_TRUE(saw_oom);
}

// Princeton (reportseff fixtures): ReqMem with and without Mc/Mn/Gn, arrays, multi-node. The
// file gathers several sacct outputs ("### fixture" blocks, each with its header); reportseff's
// fixtures leave NTasks out of most rows, so such a block is read without that column.
std::vector<JobRecord> ParsePrincetonBlocks() {
  auto reader = LineReader::Open(
      DataPath("sacct/sites/04_slurm-princeton-tiger-della_sacct-P_with-jobstats-AdminComment_"
               "reportseff.txt.gz"));
  EXPECT_TRUE(reader.ok());
  std::vector<std::vector<std::string>> blocks;
  std::string_view line;
  bool in_fixture = false;
  while (*(*reader)->Next(&line)) {
    if (line.rfind("### ", 0) == 0) {
      in_fixture = line.rfind("### fixture", 0) == 0;
      if (in_fixture) blocks.emplace_back();
      continue;
    }
    if (in_fixture && !line.empty() && line[0] != '#') blocks.back().emplace_back(line);
  }
  std::vector<JobRecord> jobs;
  for (auto& block : blocks) {
    if (block.size() < 2) continue;
    auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), '|') + 1; };
    if (fields(block[1]) == fields(block[0]) - 1) block[0].resize(block[0].rfind('|'));
    std::string text;
    for (const auto& l : block) text += l + "\n";
    SacctParser parser({});
    auto r = ParseText(parser, text);
    for (const auto& e : r.errors) ADD_FAILURE() << e;
    jobs.insert(jobs.end(), r.jobs.begin(), r.jobs.end());
  }
  return jobs;
}

TEST(SacctParserTest, ReadsPrincetonOutputWithOldMemorySuffixes) {
  auto jobs = ParsePrincetonBlocks();
  EXPECT_GE(jobs.size(), 9u);
  const JobRecord* array = FindJob(jobs, "39889258_1426");
  ASSERT_NE(array, nullptr);
  EXPECT_EQ(*array->request.memory_bytes, 8 * kGiB);
  // TotalCPU of the job line (03:43:27) is the sum of its steps; .0 has the biggest MaxRSS.
  EXPECT_NEAR(*array->usage.cpu_time_s, 3 * 3600 + 43 * 60 + 27 + 0.081 + 0.001, 0.01);
  EXPECT_EQ(*array->usage.peak_rss_bytes, 3501608 * kKiB);

  const JobRecord* multinode = FindJob(jobs, "6196869");
  ASSERT_NE(multinode, nullptr);
  EXPECT_EQ(multinode->request.memory_scope, MemoryScope::kPerNode);
  EXPECT_EQ(*multinode->request.memory_bytes, 191846 * kMiB * 20);  // 20 nodes
  EXPECT_TRUE(multinode->request.time_unlimited);
  EXPECT_NEAR(*multinode->usage.cpu_time_s, 451 * 86400 + 6 * 3600 + 24, 1);

  // NTasks 8: the step's peak is its largest task's MaxRSS times 8.
  const JobRecord* tasks = FindJob(jobs, "131042");
  ASSERT_NE(tasks, nullptr);
  EXPECT_EQ(*tasks->usage.peak_rss_bytes, 1947276 * kKiB * 8);
}

TEST(SacctParserTest, ParsableOutputWithATrailingDelimiterIsRead) {
  SacctOptions opts;
  opts.delimiter = "^|^";
  opts.columns = {"AdminComment", "AllocCPUS", "Elapsed", "JobID", "JobIDRaw", "MaxRSS",
                  "NNodes",       "NTasks",    "ReqMem",  "State", "TotalCPU", "Timelimit"};
  SacctParser parser(opts);
  // Real `sacct --parsable -n --delimiter=^|^` lines (Princeton, via reportseff).
  auto r = ParseText(parser,
                     "^|^8^|^00:00:12^|^23000381^|^23000381^|^^|^1^|^1^|^4000Mc^|^FAILED^|^"
                     "00:00:00^|^00:00:00^|^\n"
                     "^|^8^|^00:00:12^|^23000381.batch^|^23000381.batch^|^^|^1^|^1^|^4000Mc^|^"
                     "FAILED^|^00:00:00^|^00:00:00^|^\n"
                     "^|^8^|^00:00:12^|^23000381.extern^|^23000381.extern^|^1592K^|^1^|^1^|^"
                     "4000Mc^|^COMPLETED^|^00:00:00^|^00:00:00^|^\n");
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(*r.jobs[0].request.memory_bytes, 8 * 4000 * kMiB);
  EXPECT_EQ(r.jobs[0].outcome.state, "FAILED");
}

// APEL (WLCG grid sites, SLURM 2.x era): steps without job lines, 438.50M-style units.
TEST(SacctParserTest, ReadsSlurm2xRowsWithOrphanSteps) {
  SacctParser parser({});
  auto r =
      ParseFile(parser, DataPath("sacct/sites/05_slurm2.x-2013-and-2018_wlcg-grid-site_sacct-P_"
                                 "apel.txt.gz"));
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  const JobRecord* orphan = FindJob(r.jobs, "278952");
  ASSERT_NE(orphan, nullptr);
  EXPECT_EQ(*orphan->usage.peak_rss_bytes, static_cast<int64_t>(438.5 * kMiB));
  EXPECT_EQ(orphan->outcome.state, "COMPLETED");
  const JobRecord* job = FindJob(r.jobs, "5940815");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(*job->AllocatedCpus(), 8);
  EXPECT_DOUBLE_EQ(*job->usage.elapsed_s, 2 * 86400 + 3600 + 24 * 60 + 56);
}

// Hábrók (SLURM 23, '☃' delimiter, no header line of ours is needed: the file has a '#' one).
TEST(SacctParserTest, ReadsGpuUsageTresFromSlurm23) {
  SacctOptions opts;
  opts.delimiter = "\xe2\x98\x83";
  opts.columns = {"JobID",
                  "JobName",
                  "User",
                  "Partition",
                  "NodeList",
                  "NNodes",
                  "NCPUS",
                  "NTasks",
                  "State",
                  "Submit",
                  "Start",
                  "End",
                  "Timelimit",
                  "Elapsed",
                  "TotalCPU",
                  "CPUTime",
                  "UserCPU",
                  "SystemCPU",
                  "ReqMem",
                  "MaxRSS",
                  "MaxVMSize",
                  "ReqTRES",
                  "AllocTRES",
                  "TRESUsageInMax",
                  "TRESUsageInTot",
                  "TRESUsageOutTot",
                  "MaxDiskRead",
                  "MaxDiskWrite",
                  "MaxRSSNode",
                  "MaxRSSTask",
                  "MaxVMSizeNode",
                  "MaxVMSizeTask",
                  "MaxDiskReadNode",
                  "MaxDiskReadTask",
                  "MaxDiskWriteNode",
                  "MaxDiskWriteTask",
                  "Comment"};
  SacctParser parser(opts);
  auto r = ParseFile(parser, DataPath("sacct/sites/07_slurm23-habrok-groningen_sacct-snowman-"
                                      "delim_100jobs_gpumem-gpuutil.txt.gz"));
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  EXPECT_EQ(r.jobs.size(), 100u);
  const JobRecord* gpu = FindJob(r.jobs, "7965768");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(*gpu->AllocatedGpus(), 1);
  EXPECT_EQ(gpu->GpuType(), "v100");
  EXPECT_EQ(*gpu->usage.peak_gpu_memory_bytes, 20500736 * kKiB);
  EXPECT_DOUBLE_EQ(*gpu->usage.gpu_util_pct, 90);
  EXPECT_EQ(*gpu->usage.peak_rss_bytes, 1294440 * kKiB);
  EXPECT_EQ(*gpu->usage.io_read_bytes, 934556828 + 2332);
  EXPECT_EQ(*gpu->request.memory_bytes, 10 * kGiB);
  EXPECT_EQ(*gpu->AllocatedCpus(), 8);
  EXPECT_EQ(gpu->outcome.state, "CANCELLED");
}

// UB CCR via XDMoD: 4,286 real jobs, lower-case header, old per-CPU flag bit in ReqMem.
TEST(SacctParserTest, ReadsTheXdmodExportCompletely) {
  SacctParser parser({});
  auto r = ParseFile(parser, DataPath("sacct/sites/ub-ccr-phillips_slurm-2016-12-2017-01.psv.gz"));
  for (size_t i = 0; i < r.errors.size() && i < 5; ++i) ADD_FAILURE() << r.errors[i];
  EXPECT_EQ(r.jobs.size(), 4285u);
  const JobRecord* gpu = FindJob(r.jobs, "163485");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->cluster, "phillips");
  EXPECT_EQ(*gpu->AllocatedGpus(), 2);
  EXPECT_EQ(*gpu->request.memory_bytes, 31000 * kMiB);  // from ReqTRES? no: ReqMem 31000Mn
  const JobRecord* flagged = FindJob(r.jobs, "167758");
  ASSERT_NE(flagged, nullptr);
  EXPECT_EQ(flagged->request.memory_scope, MemoryScope::kPerCpu);
  EXPECT_EQ(*flagged->request.memory_bytes, 24000 * kMiB);
  EXPECT_EQ(*flagged->request.time_limit_s, 86400 + 6 * 3600);
}

TEST(SacctParserTest, AMalformedFieldIsReportedWithItsNameAndSkipped) {
  SacctParser parser({});
  auto r = ParseText(parser,
                     "JobID|State|Elapsed|MaxRSS|ReqMem\n"
                     "1|COMPLETED|00:01:00||4G\n"
                     "1.batch|COMPLETED|00:01:00|12X|\n"
                     "2|COMPLETED|soon||4G\n"
                     "3|COMPLETED|00:02:00||4G\n"
                     "4|COMPLETED\n");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_NE(r.errors[0].find("3: field MaxRSS: expected a memory size"), std::string::npos)
      << r.errors[0];
  EXPECT_NE(r.errors[0].find("'12X'"), std::string::npos);
  EXPECT_NE(r.errors[1].find("4: field Elapsed: expected a duration"), std::string::npos)
      << r.errors[1];
  EXPECT_NE(r.errors[2].find("expected 5 fields"), std::string::npos) << r.errors[2];
  // The good jobs still land.
  EXPECT_NE(FindJob(r.jobs, "1"), nullptr);
  EXPECT_NE(FindJob(r.jobs, "3"), nullptr);
  EXPECT_EQ(FindJob(r.jobs, "2"), nullptr);
}

TEST(SacctParserTest, PerCpuMemoryIsMultipliedByCpus) {
  SacctParser parser({});
  auto r = ParseText(parser,
                     "JobID|AllocCPUS|ReqMem|NNodes|State\n"
                     "10|4|2000Mc|1|COMPLETED\n"
                     "11|4|3Gn|2|COMPLETED\n");
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(*FindJob(r.jobs, "10")->request.memory_bytes, 8000 * kMiB);
  EXPECT_EQ(*FindJob(r.jobs, "11")->request.memory_bytes, 6 * kGiB);
}

TEST(SacctParserTest, HetJobComponentsAreSeparateJobs) {
  SacctParser parser({});
  auto r = ParseText(parser,
                     "JobID|State|MaxRSS\n"
                     "20+0|COMPLETED|\n"
                     "20+0.batch|COMPLETED|1G\n"
                     "20+1|COMPLETED|\n"
                     "20+1.0|COMPLETED|2G\n");
  ASSERT_TRUE(r.errors.empty());
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(*FindJob(r.jobs, "20+0")->usage.peak_rss_bytes, kGiB);
  EXPECT_EQ(*FindJob(r.jobs, "20+1")->usage.peak_rss_bytes, 2 * kGiB);
}

TEST(SacctParserTest, HeaderlessInputUsesThePrintFormat) {
  SacctParser parser({});
  // 30 fields in kSacctFormat order.
  // One value per column of kSacctFormat, in its order.
  const char* values[] = {"99",
                          "99",
                          "lab",
                          "debug",
                          "acct",
                          "alice",
                          "users",
                          "normal",
                          "train",
                          "COMPLETED",
                          "0:0",
                          "2024-01-01T00:00:00",
                          "2024-01-01T00:00:05",
                          "2024-01-01T01:00:05",
                          "01:00:00",
                          "02:00:00",
                          "1",
                          "4",
                          "4",
                          "16G",
                          "billing=4,cpu=4,mem=16G,node=1",
                          "billing=4,cpu=4,mem=16G,node=1",
                          "02:00:00",
                          "",
                          "",
                          "",
                          "",
                          "",
                          "",
                          "node1",
                          "7200000"};
  std::string line;
  for (const char* v : values) line += std::string(line.empty() ? "" : "|") + v;
  ASSERT_EQ(std::count(line.begin(), line.end(), '|') + 1,
            std::count(kSacctFormat, kSacctFormat + std::strlen(kSacctFormat), ',') + 1);
  auto r = ParseText(parser, line + "\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].cluster, "lab");
  EXPECT_EQ(r.jobs[0].request.user, "alice");
  EXPECT_DOUBLE_EQ(*r.jobs[0].usage.cpu_time_s, 7200);
  EXPECT_EQ(r.jobs[0].usage.node_energy_j, 7200000.0);  // ConsumedEnergyRaw, the last column
}

// Issue 31: TotalCPU 99999999-00:00:00 gave a CPU efficiency of 6e10 % in the report.
TEST(SacctParserTest, ImplausibleValuesAreBadLinesNamingTheColumn) {
  SacctParser parser({});
  auto r = ParseText(parser,
                     "JobID|State|Elapsed|NCPUS|TotalCPU|End|MaxRSS\n"
                     "1|COMPLETED|01:00:00|4|99999999-00:00:00|2024-01-01T00:00:00|\n"
                     "2|COMPLETED|01:00:00|4|10-00:00:00|2024-01-01T00:00:00|\n"
                     "3|COMPLETED|01:00:00|4|02:00:00|2300-01-01T00:00:00|\n"
                     "4|COMPLETED|01:00:00|4|02:00:00|2024-01-01T00:00:00|100P\n"
                     "5|COMPLETED|01:00:00|99999999999|02:00:00|2024-01-01T00:00:00|\n"
                     "6|COMPLETED|01:00:00|4|02:00:00|2024-01-01T00:00:00|1G\n");
  ASSERT_EQ(r.errors.size(), 5u);
  EXPECT_NE(r.errors[0].find("2: field TotalCPU: expected a CPU efficiency of at most 1,000%"),
            std::string::npos)
      << r.errors[0];
  EXPECT_NE(r.errors[0].find("(6e+10%)"), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[1].find("3: field TotalCPU: expected a CPU efficiency of at most 1,000%"),
            std::string::npos)
      << r.errors[1];
  EXPECT_EQ(r.errors[2],
            "4: field End: expected a time from 1970 to 2200, got '2300-01-01T00:00:00'");
  EXPECT_EQ(r.errors[3], "5: field MaxRSS: expected a memory size from 0 to 64 PiB, got '100P'");
  EXPECT_EQ(r.errors[4],
            "6: field NCPUS: expected a CPU count from 0 to 100,000,000, got '99999999999'");
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].job_id, "6");
}

// ConsumedEnergyRaw (joules) where acct_gather_energy runs: the job line's figure; steps only
// stand in when the job line has none; 0, empty and NO_VAL64 are unknown, never 0 J.
TEST(SacctParserTest, ConsumedEnergyRawIsTheJobsNodeEnergy) {
  SacctOptions opts;
  opts.columns = {"JobID", "State", "Elapsed", "ConsumedEnergyRaw"};
  SacctParser parser(opts);
  auto r = ParseText(parser,
                     "100|COMPLETED|01:00:00|3600000\n"
                     "100.batch|COMPLETED|01:00:00|3500000\n"
                     "101|COMPLETED|00:10:00|0\n"
                     "102|COMPLETED|00:10:00|\n"
                     "102.0|COMPLETED|00:10:00|52000\n"
                     "102.batch|COMPLETED|00:10:00|18446744073709551614\n"
                     "103|COMPLETED|00:10:00|18446744073709551614\n");
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  const JobRecord* metered = FindJob(r.jobs, "100");
  ASSERT_NE(metered, nullptr);
  EXPECT_EQ(metered->usage.node_energy_j, 3600000.0);  // 1 kWh, from the job line
  EXPECT_FALSE(FindJob(r.jobs, "101")->usage.node_energy_j.has_value());
  EXPECT_EQ(FindJob(r.jobs, "102")->usage.node_energy_j, 52000.0);  // its step's
  EXPECT_FALSE(FindJob(r.jobs, "103")->usage.node_energy_j.has_value());
}

TEST(SacctParserTest, ImplausibleConsumedEnergyIsRejectedByName) {
  SacctOptions opts;
  opts.columns = {"JobID", "State", "ConsumedEnergyRaw"};
  SacctParser parser(opts);
  auto r = ParseText(parser, "7|COMPLETED|1e30\n8|COMPLETED|-5\n9|COMPLETED|lots\n");
  ASSERT_EQ(r.errors.size(), 3u);
  for (const auto& e : r.errors) EXPECT_NE(e.find("ConsumedEnergyRaw"), std::string::npos) << e;
  EXPECT_TRUE(r.jobs.empty());
}

// Files written with the built-in format before it asked for ConsumedEnergyRaw (one field
// fewer) are still read, with the energy unknown.
TEST(SacctParserTest, HeaderlessFilesOfTheFormatBeforeEnergyAreStillRead) {
  std::string format = kSacctFormat;
  ASSERT_EQ(format.substr(format.rfind(',') + 1), "ConsumedEnergyRaw");
  const size_t old_fields = static_cast<size_t>(std::count(format.begin(), format.end(), ',')) - 1;
  std::string line = "55";
  for (size_t i = 0; i < old_fields; ++i) line += "|";
  line += "\n";
  SacctParser parser({});
  auto r = ParseText(parser, line);
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_FALSE(r.jobs[0].usage.node_energy_j.has_value());
}

}  // namespace
}  // namespace rightsize

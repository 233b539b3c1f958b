// SentRecords: which job entries an agent that writes its samples to a TSDB still posts to the
// server (agent/sent_records.h).
#include "agent/sent_records.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace rightsize {
namespace {

JobTelemetry Running(const std::string& id) {
  JobTelemetry t;
  t.job.cluster = "c1";
  t.job.job_id = id;
  t.job.source = "agent";
  t.job.outcome.state = "RUNNING";
  t.job.start_time = 1000;
  return t;
}

TEST(SentRecordsTest, AnUnchangedRunningJobIsPostedOncePerRefresh) {
  SentRecords sent;
  const int64_t t0 = 1'700'000'000'000;
  EXPECT_TRUE(sent.Keep(Running("1"), t0)) << "a job new to the agent goes to the server";
  EXPECT_FALSE(sent.Keep(Running("1"), t0 + 5000)) << "the same record, 5 s later: nothing new";
  EXPECT_FALSE(sent.Keep(Running("1"), t0 + SentRecords::kRefreshMs - 1));
  EXPECT_TRUE(sent.Keep(Running("1"), t0 + SentRecords::kRefreshMs))
      << "sent again after the refresh time, for a server that lost it";
  EXPECT_FALSE(sent.Keep(Running("1"), t0 + SentRecords::kRefreshMs + 5000));
  EXPECT_TRUE(sent.Keep(Running("1"), t0)) << "a clock set back: sent again, to be safe";
}

TEST(SentRecordsTest, WhatTheServerDoesNotHaveYetIsPosted) {
  SentRecords sent;
  const int64_t t0 = 1'700'000'000'000;
  ASSERT_TRUE(sent.Keep(Running("1"), t0));
  JobTelemetry changed = Running("1");
  changed.job.request.job_name = "renamed";
  EXPECT_TRUE(sent.Keep(changed, t0 + 1000)) << "a changed record";
  EXPECT_FALSE(sent.Keep(changed, t0 + 2000));
  JobTelemetry stacks = changed;
  stacks.stacks["main;loop"] = 3;
  EXPECT_TRUE(sent.Keep(stacks, t0 + 3000)) << "stacks are stored by the server";
  JobTelemetry samples = changed;
  samples.samples["cpu_cores"].push_back({t0, 1.5});
  EXPECT_TRUE(sent.Keep(samples, t0 + 4000)) << "samples that did not go to a TSDB";
  JobTelemetry ended = changed;
  ended.job.end_time = 2000;
  ended.job.outcome.state = "FAILED";
  ended.diagnosis = ShippedDiagnosis{"oom", 0.9, "{}"};
  EXPECT_TRUE(sent.Keep(ended, t0 + 5000)) << "the ended record, with its diagnosis";
  EXPECT_EQ(sent.size(), 0u) << "an ended job is forgotten";
  EXPECT_TRUE(sent.Keep(Running("2"), t0 + 5000)) << "another job is new";
}

TEST(SentRecordsTest, FilterKeepsTheParallelEntries) {
  SentRecords sent;
  const int64_t t0 = 1'700'000'000'000;
  std::vector<JobTelemetry> first = {Running("1"), Running("2")};
  std::vector<std::map<std::string, double>> energy(2);
  sent.Filter(&first, &energy, t0);
  ASSERT_EQ(first.size(), 2u);
  std::vector<JobTelemetry> batch = {Running("1"), Running("2"), Running("3")};
  batch[1].job.end_time = 2000;
  energy = {{{"gpu_energy_j", 1}}, {{"gpu_energy_j", 2}}, {{"gpu_energy_j", 3}}};
  sent.Filter(&batch, &energy, t0 + 5000);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].job.job_id, "2");
  EXPECT_EQ(batch[1].job.job_id, "3");
  ASSERT_EQ(energy.size(), 2u);
  EXPECT_EQ(energy[0].at("gpu_energy_j"), 2);
  EXPECT_EQ(energy[1].at("gpu_energy_j"), 3);
  std::vector<JobTelemetry> unchanged = {Running("1"), Running("3")};
  sent.Filter<int>(&unchanged, nullptr, t0 + 6000);
  EXPECT_TRUE(unchanged.empty()) << "a batch with nothing new for the server";
}

}  // namespace
}  // namespace rightsize

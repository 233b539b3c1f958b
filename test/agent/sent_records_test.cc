// SentRecords: which job entries an agent that writes its samples to a TSDB still posts to the
// server (agent/sent_records.h).
#include "agent/sent_records.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace rightsize {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

JobTelemetry Running(const std::string& id) {
  JobTelemetry t;
  t.job.cluster = "c1";
  t.job.job_id = id;
  t.job.source = "agent";
  t.job.outcome.state = "RUNNING";
  t.job.start_time = 1000;
  return t;
}

// The job ids of the entries that go to the server in a batch of `batch` made at `now_ms`.
std::vector<std::string> Posted(SentRecords& sent, std::vector<JobTelemetry> batch,
                                int64_t now_ms) {
  sent.Filter<int>(&batch, nullptr, now_ms);
  std::vector<std::string> ids;
  for (const auto& t : batch) ids.push_back(t.job.job_id);
  return ids;
}

using Ids = std::vector<std::string>;

TEST(SentRecordsTest, UnchangedRunningJobsArePostedOncePerRefresh) {
  SentRecords sent;
  EXPECT_EQ(Posted(sent, {Running("1")}, kT0), Ids{"1"}) << "a job new to the agent";
  EXPECT_EQ(Posted(sent, {Running("1")}, kT0 + 5000), Ids{}) << "the same record: nothing new";
  EXPECT_EQ(Posted(sent, {Running("1"), Running("2")}, kT0 + 30'000), Ids{"2"})
      << "a job that started meanwhile goes alone";
  EXPECT_EQ(Posted(sent, {Running("1"), Running("2")}, kT0 + SentRecords::kRefreshMs - 1), Ids{});
  EXPECT_EQ(Posted(sent, {Running("1"), Running("2")}, kT0 + SentRecords::kRefreshMs),
            (Ids{"1", "2"}))
      << "all of them once a minute, in one batch, for a server that lost one";
  EXPECT_EQ(Posted(sent, {Running("1"), Running("2")}, kT0 + SentRecords::kRefreshMs + 5000),
            Ids{});
  EXPECT_EQ(Posted(sent, {Running("1"), Running("2")}, kT0), (Ids{"1", "2"}))
      << "a clock set back: sent again, to be safe";
}

TEST(SentRecordsTest, WhatTheServerDoesNotHaveYetIsPosted) {
  SentRecords sent;
  ASSERT_EQ(Posted(sent, {Running("1")}, kT0), Ids{"1"});
  JobTelemetry changed = Running("1");
  changed.job.request.memory_bytes = int64_t{8} << 30;
  EXPECT_EQ(Posted(sent, {changed}, kT0 + 1000), Ids{"1"}) << "a changed record";
  EXPECT_EQ(Posted(sent, {changed}, kT0 + 2000), Ids{});
  JobTelemetry stacks = changed;
  stacks.stacks["main;loop"] = 3;
  EXPECT_EQ(Posted(sent, {stacks}, kT0 + 3000), Ids{"1"}) << "stacks are stored by the server";
  JobTelemetry samples = changed;
  samples.samples["cpu_cores"].push_back({kT0, 1.5});
  EXPECT_EQ(Posted(sent, {samples}, kT0 + 4000), Ids{"1"}) << "samples not sent to a TSDB";
  JobTelemetry ended = changed;
  ended.job.end_time = 2000;
  ended.job.outcome.state = "FAILED";
  ended.diagnosis = ShippedDiagnosis{"oom", 0.9, "{}"};
  EXPECT_EQ(Posted(sent, {ended}, kT0 + 5000), Ids{"1"}) << "the ended record, its diagnosis";
  EXPECT_EQ(sent.size(), 0u) << "an ended job is forgotten";
}

TEST(SentRecordsTest, FilterKeepsTheParallelEntries) {
  SentRecords sent;
  std::vector<JobTelemetry> first = {Running("1"), Running("2")};
  std::vector<std::map<std::string, double>> energy(2);
  sent.Filter(&first, &energy, kT0);
  ASSERT_EQ(first.size(), 2u);
  std::vector<JobTelemetry> batch = {Running("1"), Running("2"), Running("3")};
  batch[1].job.end_time = 2000;
  energy = {{{"gpu_energy_j", 1}}, {{"gpu_energy_j", 2}}, {{"gpu_energy_j", 3}}};
  sent.Filter(&batch, &energy, kT0 + 5000);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].job.job_id, "2");
  EXPECT_EQ(batch[1].job.job_id, "3");
  ASSERT_EQ(energy.size(), 2u);
  EXPECT_EQ(energy[0].at("gpu_energy_j"), 2);
  EXPECT_EQ(energy[1].at("gpu_energy_j"), 3);
}

}  // namespace
}  // namespace rightsize

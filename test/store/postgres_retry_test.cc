// Two replicas writing to one PostgreSQL store at once (issue 27): each replica's group commit
// holds several agents' batches in one transaction, and behind a round-robin balancer the two
// replicas' groups name the same agents in different orders. PostgreSQL then aborts one of two
// transactions waiting on each other (deadlock_detected, 40P01); the store runs it again, so no
// batch fails and none is stored twice or lost.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <barrier>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "postgres_fixture.h"
#include "store/store.h"

namespace rightsize {
namespace {

constexpr int kAgents = 40;
constexpr int kRounds = 6;
constexpr int kSamplesPerBatch = 5;

JobTelemetry Batch(int replica, int agent, int round) {
  JobTelemetry t;
  t.job.cluster = "c1";
  t.job.job_id = "r" + std::to_string(replica) + "-a" + std::to_string(agent);
  t.job.source = "agent";
  t.job.start_time = 1000;
  t.job.outcome.state = "RUNNING";
  t.job.request.user = "alice";
  t.job.request.gpus = 8;
  t.job.alloc.gpus = round;  // a changed record: the job's row is written each round
  for (int i = 0; i < kSamplesPerBatch; ++i) {
    t.samples["gpu_util_pct"].push_back(
        Sample{int64_t{1'000'000} + (int64_t{round} * kSamplesPerBatch + i) * 1000, 50.0 + i});
  }
  return t;
}

TEST(PostgresConcurrentWriters, GroupsNamingAgentsInOppositeOrdersAllCommit) {
  std::string why;
  auto url = testing::FreshPostgresDatabase(&why);
  if (!url) GTEST_SKIP() << why;
  {
    // PostgreSQL looks for a deadlock after a transaction waited deadlock_timeout (1 s): a tenth
    // of it keeps the test short, with the same deadlocks.
    PGconn* admin = PQconnectdb(url->c_str());
    PGresult* r = PQexec(admin,
                         "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET "
                         "deadlock_timeout = ''100ms''', current_database()); END $$");
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(admin);
    PQclear(r);
    PQfinish(admin);
  }
  std::vector<std::unique_ptr<Store>> stores;
  for (int r = 0; r < 2; ++r) {
    auto s = OpenStore(*url);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    stores.push_back(std::move(*s));
  }
  std::barrier start(2);
  // stored[replica][agent]: the rounds whose batch the store took.
  std::vector<std::vector<int>> stored(2, std::vector<int>(kAgents, 0));
  std::vector<std::string> failures(2);
  auto replica = [&](int r) {
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::vector<JobTelemetry>> jobs(kAgents);
      std::vector<Store::TelemetryWrite> writes;
      for (int k = 0; k < kAgents; ++k) {
        const int agent = r == 0 ? k : kAgents - 1 - k;  // the other replica's order reversed
        jobs[static_cast<size_t>(k)].push_back(Batch(r, agent, round));
        writes.push_back({"agent" + std::to_string(agent), int64_t{round} * 2 + r + 1,
                          jobs[static_cast<size_t>(k)]});
      }
      start.arrive_and_wait();
      auto got = stores[static_cast<size_t>(r)]->WriteTelemetryGroup(writes);
      if (!got.ok()) {
        if (failures[static_cast<size_t>(r)].empty()) {
          failures[static_cast<size_t>(r)] = got.status().ToString();
        }
        continue;
      }
      for (int k = 0; k < kAgents; ++k) {
        const int agent = r == 0 ? k : kAgents - 1 - k;
        if ((*got)[static_cast<size_t>(k)]) ++stored[static_cast<size_t>(r)][agent];
      }
    }
  };
  std::thread a(replica, 0), b(replica, 1);
  a.join();
  b.join();
  EXPECT_EQ(failures[0], "") << "replica A's group commit failed";
  EXPECT_EQ(failures[1], "") << "replica B's group commit failed";

  // Every batch the store took is there once, and only those.
  auto reader = OpenStore(*url);
  ASSERT_TRUE(reader.ok());
  for (int r = 0; r < 2; ++r) {
    for (int agent = 0; agent < kAgents; ++agent) {
      const std::string job = "r" + std::to_string(r) + "-a" + std::to_string(agent);
      std::map<int64_t, int> times;
      ASSERT_TRUE((*reader)
                      ->ReadSamples("c1", job, "gpu_util_pct", 0, INT64_MAX,
                                    [&](const Sample& x) { ++times[x.t_ms]; })
                      .ok());
      int64_t total = 0;
      for (const auto& [t, n] : times) {
        EXPECT_EQ(n, 1) << job << " has the sample at " << t << " " << n << " times";
        total += n;
      }
      EXPECT_EQ(total, int64_t{stored[static_cast<size_t>(r)][agent]} * kSamplesPerBatch) << job;
    }
  }
  // Each agent's last number is that of one of the last round's two batches.
  for (int agent = 0; agent < kAgents; ++agent) {
    auto last = (*reader)->LastTelemetrySeq("agent" + std::to_string(agent));
    ASSERT_TRUE(last.ok());
    EXPECT_GE(*last, int64_t{kRounds - 1} * 2 + 1) << "agent" << agent;
  }
}

// A replica that starts (or is started again) while another writes: opening the store must not
// wait for the other's write transaction (it used to: its schema check ran CREATE INDEX IF NOT
// EXISTS, which locks the jobs table even when the indexes exist, and every write behind it
// waited too).
TEST(PostgresConcurrentWriters, AStoreOpensWhileAnotherConnectionWrites) {
  std::string why;
  auto url = testing::FreshPostgresDatabase(&why);
  if (!url) GTEST_SKIP() << why;
  {
    auto first = OpenStore(*url);  // makes the schema
    ASSERT_TRUE(first.ok()) << first.status().ToString();
  }
  PGconn* writer = PQconnectdb(url->c_str());
  PGresult* r = PQexec(writer, "BEGIN; INSERT INTO jobs (cluster, job_id) VALUES ('c1', 'w1')");
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(writer);
  PQclear(r);
  // The writer's transaction stays open until the store has opened (or 60 s passed: a store
  // that waits on it would wait for ever).
  auto opening = std::async(std::launch::async, [&] { return OpenStore(*url); });
  const bool opened = opening.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(opened) << "opening the store waited for another connection's write transaction";
  PQclear(PQexec(writer, "COMMIT"));
  PQfinish(writer);
  auto second = opening.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*(*second)->CountJobs({}), 1);
}

}  // namespace
}  // namespace rightsize

#include "store/sqlite_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "store/changes.h"

namespace rightsize {

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}
SqliteDb::~SqliteDb() noexcept {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}
SqliteStmt& SqliteStmt::operator=(SqliteStmt&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}
SqliteStmt::~SqliteStmt() noexcept {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

namespace {

// Each migration takes the schema from version i to i + 1. Never edit a released step: add one.
const char* const kMigrations[] = {
    // 0 -> 1: jobs and cluster metadata.
    R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,  -- JobKey(cluster id, job_id): see JobKey() for why
  cluster TEXT NOT NULL,
  job_id TEXT NOT NULL,
  source TEXT,
  submit_time INTEGER, start_time INTEGER, end_time INTEGER,
  user TEXT, grp TEXT, account TEXT, partition TEXT, qos TEXT, job_name TEXT,
  req_cpus REAL, req_mem_bytes INTEGER, req_mem_per_unit_bytes INTEGER, req_mem_scope INTEGER,
  req_gpus INTEGER, req_gpu_type TEXT, time_limit_s INTEGER, time_unlimited INTEGER,
  req_nodes INTEGER,
  alloc_cpus REAL, alloc_mem_bytes INTEGER, alloc_gpus INTEGER, alloc_gpu_type TEXT,
  alloc_nodes INTEGER, node_list TEXT,
  elapsed_s REAL, cpu_time_s REAL, peak_rss_bytes INTEGER, avg_rss_bytes INTEGER,
  gpu_util_pct REAL, peak_gpu_mem_bytes INTEGER, io_read_bytes INTEGER, io_write_bytes INTEGER,
  state TEXT, exit_code INTEGER, signal INTEGER
);
CREATE TABLE clusters (name TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE) WITHOUT ROWID;
CREATE TABLE cluster_meta (
  cluster TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (cluster, key)
) WITHOUT ROWID;
)sql",
    // 1 -> 2: trained models, and the indexes prediction reads a user's or a program's past by.
    R"sql(
CREATE TABLE models (
  cluster TEXT NOT NULL, version INTEGER NOT NULL, trained_at INTEGER NOT NULL,
  jobs INTEGER NOT NULL, blob BLOB NOT NULL,
  PRIMARY KEY (cluster, version)
) WITHOUT ROWID;
CREATE INDEX jobs_by_user ON jobs (cluster, user, end_time);
CREATE INDEX jobs_by_name ON jobs (cluster, job_name, end_time);
)sql",
    // 2 -> 3: the diagnosis of a failed job, kept with it.
    R"sql(
CREATE TABLE diagnoses (
  cluster TEXT NOT NULL, job_id TEXT NOT NULL, created_at INTEGER NOT NULL,
  class TEXT NOT NULL, confidence REAL NOT NULL, document TEXT NOT NULL,
  PRIMARY KEY (cluster, job_id)
) WITHOUT ROWID;
)sql",
    // 3 -> 4: live telemetry from agents (series in chunks, stacks, each agent's last batch),
    // predictions made at submission, and the index the job list pages by.
    R"sql(
CREATE TABLE series_chunks (
  cluster TEXT NOT NULL, job_id TEXT NOT NULL, metric TEXT NOT NULL,
  t_start INTEGER NOT NULL, t_end INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (cluster, job_id, metric, t_start)
) WITHOUT ROWID;
CREATE TABLE stacks (
  cluster TEXT NOT NULL, job_id TEXT NOT NULL, stack TEXT NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (cluster, job_id, stack)
) WITHOUT ROWID;
CREATE TABLE agents (agent TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE predictions (
  cluster TEXT NOT NULL, job_id TEXT NOT NULL, created_at INTEGER NOT NULL, document TEXT NOT NULL,
  PRIMARY KEY (cluster, job_id)
) WITHOUT ROWID;
CREATE INDEX jobs_by_end ON jobs (coalesce(end_time, 9223372036854775807), id);
)sql",
    // 4 -> 5: models in a rowid table. WITHOUT ROWID, the blob (hundreds of KB) was part of the
    // primary key's record, and SQLite copies a whole overflowing record to compare keys: finding
    // a cluster's newest version, once per prediction, copied the model (22 -> 7 us a lookup;
    // 5% of the admission webhook's CPU). Now the key's own index holds (cluster, version) only.
    R"sql(
CREATE TABLE models_v5 (
  cluster TEXT NOT NULL, version INTEGER NOT NULL, trained_at INTEGER NOT NULL,
  jobs INTEGER NOT NULL, blob BLOB NOT NULL,
  PRIMARY KEY (cluster, version)
);
INSERT INTO models_v5 (cluster, version, trained_at, jobs, blob)
  SELECT cluster, version, trained_at, jobs, blob FROM models;
DROP TABLE models;
ALTER TABLE models_v5 RENAME TO models;
)sql",
    // 5 -> 6: the code each job ran, read at submission (the change-aware prediction compares
    // a program's facts with those of its last run).
    R"sql(
CREATE TABLE job_code (
  cluster TEXT NOT NULL, job_id TEXT NOT NULL, created_at INTEGER NOT NULL,
  code_hash TEXT NOT NULL, program TEXT NOT NULL, facts TEXT NOT NULL, estimate TEXT NOT NULL,
  PRIMARY KEY (cluster, job_id)
) WITHOUT ROWID;
)sql",
    // 6 -> 7: the history generation (kHistoryTriggers keep it; created at every open).
    R"sql(
CREATE TABLE history_generation (n INTEGER NOT NULL);
INSERT INTO history_generation VALUES (0);
)sql",
    // 7 -> 8: energy per job, joules (usage.gpu_energy_j, cpu_energy_j, node_energy_j). Not in
    // the history triggers: no prediction reads energy, so its arrival need not drop caches.
    R"sql(
ALTER TABLE jobs ADD COLUMN gpu_energy_j REAL;
ALTER TABLE jobs ADD COLUMN cpu_energy_j REAL;
ALTER TABLE jobs ADD COLUMN node_energy_j REAL;
)sql",
};
// The indexes `predict` reads a user's and a program's past by (created by migration 2;
// dropped during a bulk load and rebuilt after it).
constexpr const char* kSecondaryIndexes =
    "CREATE INDEX IF NOT EXISTS jobs_by_user ON jobs (cluster, user, end_time);"
    "CREATE INDEX IF NOT EXISTS jobs_by_name ON jobs (cluster, job_name, end_time);"
    "CREATE INDEX IF NOT EXISTS jobs_by_end ON jobs (coalesce(end_time, 9223372036854775807), id);";

// The history generation: bumped by every write that changes what a prediction reads of the
// past (a finished job's row, a job's code), and by nothing else (a running job's progress, its
// series, predictions, diagnoses), so that caches of the past (store/changes.h) outlive the
// agents' telemetry. Dropped during a bulk load, which bumps it once at its end.
constexpr const char* kHistoryTriggers = R"sql(
CREATE TRIGGER IF NOT EXISTS jobs_history_insert AFTER INSERT ON jobs
WHEN NEW.end_time IS NOT NULL
BEGIN UPDATE history_generation SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_history_update AFTER UPDATE ON jobs
WHEN (OLD.end_time IS NOT NULL OR NEW.end_time IS NOT NULL) AND (
  OLD.cluster IS NOT NEW.cluster OR OLD.job_id IS NOT NEW.job_id OR OLD.source IS NOT
  NEW.source OR OLD.submit_time IS NOT NEW.submit_time OR OLD.start_time IS NOT NEW.start_time
  OR OLD.end_time IS NOT NEW.end_time OR OLD.user IS NOT NEW.user OR OLD.grp IS NOT NEW.grp OR
  OLD.account IS NOT NEW.account OR OLD.partition IS NOT NEW.partition OR OLD.qos IS NOT
  NEW.qos OR OLD.job_name IS NOT NEW.job_name OR OLD.req_cpus IS NOT NEW.req_cpus OR
  OLD.req_mem_bytes IS NOT NEW.req_mem_bytes OR OLD.req_mem_per_unit_bytes IS NOT
  NEW.req_mem_per_unit_bytes OR OLD.req_mem_scope IS NOT NEW.req_mem_scope OR OLD.req_gpus IS
  NOT NEW.req_gpus OR OLD.req_gpu_type IS NOT NEW.req_gpu_type OR OLD.time_limit_s IS NOT
  NEW.time_limit_s OR OLD.time_unlimited IS NOT NEW.time_unlimited OR OLD.req_nodes IS NOT
  NEW.req_nodes OR OLD.alloc_cpus IS NOT NEW.alloc_cpus OR OLD.alloc_mem_bytes IS NOT
  NEW.alloc_mem_bytes OR OLD.alloc_gpus IS NOT NEW.alloc_gpus OR OLD.alloc_gpu_type IS NOT
  NEW.alloc_gpu_type OR OLD.alloc_nodes IS NOT NEW.alloc_nodes OR OLD.node_list IS NOT
  NEW.node_list OR OLD.elapsed_s IS NOT NEW.elapsed_s OR OLD.cpu_time_s IS NOT NEW.cpu_time_s
  OR OLD.peak_rss_bytes IS NOT NEW.peak_rss_bytes OR OLD.avg_rss_bytes IS NOT NEW.avg_rss_bytes
  OR OLD.gpu_util_pct IS NOT NEW.gpu_util_pct OR OLD.peak_gpu_mem_bytes IS NOT
  NEW.peak_gpu_mem_bytes OR OLD.io_read_bytes IS NOT NEW.io_read_bytes OR OLD.io_write_bytes IS
  NOT NEW.io_write_bytes OR OLD.state IS NOT NEW.state OR OLD.exit_code IS NOT NEW.exit_code OR
  OLD.signal IS NOT NEW.signal)
BEGIN UPDATE history_generation SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_history_delete AFTER DELETE ON jobs
WHEN OLD.end_time IS NOT NULL
BEGIN UPDATE history_generation SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS job_code_history_insert AFTER INSERT ON job_code
BEGIN UPDATE history_generation SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS job_code_history_update AFTER UPDATE ON job_code
BEGIN UPDATE history_generation SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS job_code_history_delete AFTER DELETE ON job_code
BEGIN UPDATE history_generation SET n = n + 1; END;
)sql";
constexpr const char* kDropHistoryTriggers =
    "DROP TRIGGER IF EXISTS jobs_history_insert; DROP TRIGGER IF EXISTS jobs_history_update; "
    "DROP TRIGGER IF EXISTS jobs_history_delete; DROP TRIGGER IF EXISTS job_code_history_insert; "
    "DROP TRIGGER IF EXISTS job_code_history_update; "
    "DROP TRIGGER IF EXISTS job_code_history_delete;";

// The job list's sort key: running jobs (no end time) sort as the newest.
constexpr const char* kListOrderKey = "coalesce(end_time, 9223372036854775807)";

// A chunk holds at most this span of one series, so a read of [from, to] starts its index scan
// at from - kChunkSpanMs instead of at the job's first sample.
constexpr int64_t kChunkSpanMs = 600'000;
constexpr size_t kChunkSamples = 1024;

// Series chunk encoding: per sample, the time as a zigzag varint delta from the previous one
// (1-2 bytes at 1 Hz), then the value as 8 little-endian bytes (an IEEE double).
void EncodeChunk(std::span<const Sample> samples, std::string* out) {
  out->clear();
  int64_t prev = samples.empty() ? 0 : samples.front().t_ms;
  for (const Sample& s : samples) {
    int64_t d = s.t_ms - prev;
    prev = s.t_ms;
    uint64_t z = (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
    while (z >= 0x80) {
      out->push_back(static_cast<char>((z & 0x7f) | 0x80));
      z >>= 7;
    }
    out->push_back(static_cast<char>(z));
    uint64_t bits;
    std::memcpy(&bits, &s.value, sizeof bits);
    for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
}

// False for a chunk that is not what EncodeChunk wrote (a damaged file): its samples are
// skipped rather than misread.
bool DecodeChunk(const unsigned char* p, size_t size, int64_t t_start,
                 const std::function<bool(const Sample&)>& fn) {
  const unsigned char* end = p + size;
  int64_t t = t_start;
  while (p < end) {
    uint64_t z = 0;
    int shift = 0;
    while (true) {
      if (p >= end || shift > 63) return false;
      uint64_t byte = *p++;
      z |= (byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
      shift += 7;
    }
    t += static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
    if (end - p < 8) return false;
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(p[i]) << (8 * i);
    p += 8;
    Sample s{t, 0};
    std::memcpy(&s.value, &bits, sizeof bits);
    if (!fn(s)) return true;
  }
  return true;
}

constexpr int kNumMigrations = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kNumMigrations == kSqliteSchemaVersion);

// The job columns in one place, so the insert and the select cannot drift apart.
constexpr const char* kJobColumns =
    "cluster, job_id, source, submit_time, start_time, end_time, user, grp, account, partition, "
    "qos, job_name, req_cpus, req_mem_bytes, req_mem_per_unit_bytes, req_mem_scope, req_gpus, "
    "req_gpu_type, time_limit_s, time_unlimited, req_nodes, alloc_cpus, alloc_mem_bytes, "
    "alloc_gpus, alloc_gpu_type, alloc_nodes, node_list, elapsed_s, cpu_time_s, peak_rss_bytes, "
    "avg_rss_bytes, gpu_util_pct, peak_gpu_mem_bytes, io_read_bytes, io_write_bytes, state, "
    "exit_code, signal, gpu_energy_j, cpu_energy_j, node_energy_j";
constexpr int kNumJobColumns = 41;
// What re-storing a stored job (ON CONFLICT) writes, column by column. A record replaces the
// stored one, except that usage measured once is not lost to a record that lacks it:
//   - the agent's record of a job the scheduler already described (sacct, SWF, …) keeps the
//     scheduler's description (state, request, user, times) and only adds usage;
//   - between an agent's and a scheduler's record, or two records of the same run (the start
//     agrees within a minute: a re-ingest, a running job's next update), a usage field the
//     new record lacks keeps the stored value, and a peak is the larger of the two. A
//     requeued run or a reused id (another start) replaces the record whole.
std::string MergeAssignments() {
  constexpr const char* kAgentOverScheduler =
      "(excluded.source IS 'agent' AND jobs.source IS NOT 'agent')";
  constexpr const char* kSameRun =
      "((excluded.source IS 'agent') <> (jobs.source IS 'agent') OR jobs.start_time IS NULL OR "
      "excluded.start_time IS NULL OR abs(jobs.start_time - excluded.start_time) <= 60)";
  static const std::set<std::string> kFilled = {"elapsed_s",    "cpu_time_s",    "avg_rss_bytes",
                                                "gpu_util_pct", "io_read_bytes", "io_write_bytes",
                                                "gpu_energy_j", "cpu_energy_j",  "node_energy_j"};
  static const std::set<std::string> kPeaks = {"peak_rss_bytes", "peak_gpu_mem_bytes"};
  std::string out;
  std::string_view cols = kJobColumns;
  while (!cols.empty()) {
    size_t comma = cols.find(',');
    std::string col(cols.substr(0, comma));
    cols = comma == std::string_view::npos ? std::string_view() : cols.substr(comma + 1);
    col.erase(0, col.find_first_not_of(' '));
    if (col == "cluster" || col == "job_id") continue;
    std::string value;
    if (kPeaks.count(col) > 0) {
      value = fmt::format(
          "CASE WHEN {1} THEN coalesce(max(jobs.{0}, excluded.{0}), excluded.{0}, jobs.{0}) "
          "ELSE excluded.{0} END",
          col, kSameRun);
    } else if (kFilled.count(col) > 0) {
      value = fmt::format(
          "CASE WHEN {1} THEN coalesce(jobs.{0}, excluded.{0}) WHEN {2} THEN "
          "coalesce(excluded.{0}, jobs.{0}) ELSE excluded.{0} END",
          col, kAgentOverScheduler, kSameRun);
    } else {
      value = fmt::format("CASE WHEN {1} THEN jobs.{0} ELSE excluded.{0} END", col,
                          kAgentOverScheduler);
    }
    out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", col, value);
  }
  return out;
}

// kJobColumns for a lean scan (JobFilter::lean): the descriptive columns read as NULL.
constexpr const char* kLeanJobColumns =
    "cluster, job_id, NULL, submit_time, start_time, end_time, user, NULL, account, partition, "
    "NULL, job_name, req_cpus, req_mem_bytes, NULL, NULL, req_gpus, "
    "req_gpu_type, time_limit_s, time_unlimited, NULL, alloc_cpus, alloc_mem_bytes, "
    "alloc_gpus, alloc_gpu_type, NULL, NULL, elapsed_s, cpu_time_s, peak_rss_bytes, "
    "avg_rss_bytes, gpu_util_pct, peak_gpu_mem_bytes, NULL, NULL, state, "
    "NULL, NULL, gpu_energy_j, cpu_energy_j, node_energy_j";

// The row id of a job. A unique index on (cluster, job_id) made every insert pay a random
// descent into a second B-tree (ingest ran at ~110k records/s); a key that is the job itself
// leaves one B-tree, appended to in order, since accounting lists jobs in id order.
//   bit 62 = 0: bits 54-61 the cluster's small id (< 256), bits 22-53 the SLURM job number
//               (< 2^32), bits 0-21 the array task + 1 (0 = no task): "123", "123_4".
//   bit 62 = 1: anything else ("123+1", "123_[1-5]", names): a 62-bit hash of cluster and
//               id; distinct jobs whose hashes collide are kept apart by linear probing
//               (UpsertOne, FindJob), and a row's own cluster and job_id decide whether it
//               is the job.
// Persisted: never change this function.
constexpr int64_t kHashedKeyBit = int64_t{1} << 62;

int64_t HashedJobKey(int64_t cluster_id, const std::string& job_id) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ULL;
  };
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(cluster_id >> (8 * i)));
  for (unsigned char c : job_id) mix(c);
  // splitmix64's finaliser spreads FNV's weak low bits.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return kHashedKeyBit | static_cast<int64_t>(h & (kHashedKeyBit - 1));
}

int64_t JobKey(int64_t cluster_id, const std::string& job_id) {
  uint64_t job = 0, task = 0;
  size_t i = 0;
  bool ok = cluster_id >= 0 && cluster_id < 256 && !job_id.empty() && job_id.size() <= 18;
  while (ok && i < job_id.size() && job_id[i] >= '0' && job_id[i] <= '9') {
    job = job * 10 + static_cast<uint64_t>(job_id[i++] - '0');
  }
  ok = ok && i > 0 && job < (uint64_t{1} << 32) && (i == 1 || job_id[0] != '0');
  if (ok && i < job_id.size()) {
    size_t start = ++i;
    ok = job_id[start - 1] == '_';
    while (ok && i < job_id.size() && job_id[i] >= '0' && job_id[i] <= '9') {
      task = task * 10 + static_cast<uint64_t>(job_id[i++] - '0');
    }
    ok = ok && i == job_id.size() && i > start && task + 1 < (uint64_t{1} << 22) &&
         (i == start + 1 || job_id[start] != '0');
    ++task;  // 0 means "no array task"
  }
  if (!ok) return HashedJobKey(cluster_id, job_id);
  return static_cast<int64_t>((static_cast<uint64_t>(cluster_id) << 54) | (job << 22) | task);
}

// Binds a record's fields in kJobColumns order (RowReader reads them back the same way).
// `nulls` remembers which parameters of the statement hold NULL already: most fields of a
// trace are unknown, and skipping the repeated sqlite3_bind_null calls saves ~10% of a store.
class RowBinder {
 public:
  RowBinder(sqlite3_stmt* s, int offset, std::vector<uint8_t>* nulls)
      : s_(s), i_(offset), nulls_(*nulls) {}
  // Empty text is stored as NULL (unknown), except in NOT NULL key columns (`required`).
  void Text(const std::string& v, bool required = false) {
    if (v.empty() && !required) {
      Null();
    } else {
      Set();
      sqlite3_bind_text(s_, i_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    }
  }
  void Int(std::optional<int64_t> v) {
    if (v) {
      Set();
      sqlite3_bind_int64(s_, i_, *v);
    } else {
      Null();
    }
  }
  void Int(std::optional<int> v) { Int(v ? std::optional<int64_t>(*v) : std::nullopt); }
  void Real(std::optional<double> v) {
    if (v) {
      Set();
      sqlite3_bind_double(s_, i_, *v);
    } else {
      Null();
    }
  }

 private:
  void Set() { nulls_[static_cast<size_t>(++i_)] = 0; }
  void Null() {
    auto& n = nulls_[static_cast<size_t>(++i_)];
    if (n == 0) sqlite3_bind_null(s_, i_);
    n = 1;
  }
  sqlite3_stmt* s_;
  int i_;
  std::vector<uint8_t>& nulls_;  // indexed by parameter number
};

// A prepared statement and which of its parameters are bound to NULL (see RowBinder).
struct BindableStmt {
  SqliteStmt stmt;
  std::vector<uint8_t> nulls;
  void Reset(SqliteStmt s) {
    stmt = std::move(s);
    nulls.assign(static_cast<size_t>(sqlite3_bind_parameter_count(stmt.get())) + 1, 1);
  }
};

// Reads each column once through sqlite3_column_value: the sqlite3_column_* accessors each
// take the statement's checks again, and a scan makes 38 of them per row.
class RowReader {
 public:
  explicit RowReader(sqlite3_stmt* s) : s_(s) {}
  void Text(std::string& out) {
    sqlite3_value* v = sqlite3_column_value(s_, i_++);
    const auto* p = sqlite3_value_text(v);
    if (p == nullptr) {
      out.clear();
    } else {
      out.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_value_bytes(v)));
    }
  }
  std::optional<int64_t> Int() {
    sqlite3_value* v = sqlite3_column_value(s_, i_++);
    if (sqlite3_value_type(v) == SQLITE_NULL) return std::nullopt;
    return sqlite3_value_int64(v);
  }
  std::optional<int> SmallInt() {
    auto v = Int();
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
  }
  std::optional<double> Real() {
    sqlite3_value* v = sqlite3_column_value(s_, i_++);
    if (sqlite3_value_type(v) == SQLITE_NULL) return std::nullopt;
    return sqlite3_value_double(v);
  }

 private:
  sqlite3_stmt* s_;
  int i_ = 0;
};

// Binds the job's columns after the first `offset` parameters.
void BindJob(BindableStmt& s, const JobRecord& j, int offset) {
  RowBinder b(s.stmt.get(), offset, &s.nulls);
  b.Text(j.cluster, true);
  b.Text(j.job_id, true);
  b.Text(j.source);
  b.Int(j.submit_time);
  b.Int(j.start_time);
  b.Int(j.end_time);
  const auto& r = j.request;
  b.Text(r.user);
  b.Text(r.group);
  b.Text(r.account);
  b.Text(r.partition);
  b.Text(r.qos);
  b.Text(r.job_name);
  b.Real(r.cpus);
  b.Int(r.memory_bytes);
  b.Int(r.memory_per_unit_bytes);
  b.Int(std::optional<int>(static_cast<int>(r.memory_scope)));
  b.Int(r.gpus);
  b.Text(r.gpu_type);
  b.Int(r.time_limit_s);
  b.Int(std::optional<int>(r.time_unlimited ? 1 : 0));
  b.Int(r.nodes);
  const auto& a = j.alloc;
  b.Real(a.cpus);
  b.Int(a.memory_bytes);
  b.Int(a.gpus);
  b.Text(a.gpu_type);
  b.Int(a.nodes);
  b.Text(a.node_list);
  const auto& u = j.usage;
  b.Real(u.elapsed_s);
  b.Real(u.cpu_time_s);
  b.Int(u.peak_rss_bytes);
  b.Int(u.avg_rss_bytes);
  b.Real(u.gpu_util_pct);
  b.Int(u.peak_gpu_memory_bytes);
  b.Int(u.io_read_bytes);
  b.Int(u.io_write_bytes);
  b.Text(j.outcome.state);
  b.Int(j.outcome.exit_code);
  b.Int(j.outcome.signal);
  b.Real(u.gpu_energy_j);
  b.Real(u.cpu_energy_j);
  b.Real(u.node_energy_j);
}

// Fills `j` in place, so a scan reuses one record's string buffers for every row.
void ReadJob(sqlite3_stmt* s, JobRecord& j) {
  RowReader rd(s);
  rd.Text(j.cluster);
  rd.Text(j.job_id);
  rd.Text(j.source);
  j.submit_time = rd.Int();
  j.start_time = rd.Int();
  j.end_time = rd.Int();
  auto& r = j.request;
  rd.Text(r.user);
  rd.Text(r.group);
  rd.Text(r.account);
  rd.Text(r.partition);
  rd.Text(r.qos);
  rd.Text(r.job_name);
  r.cpus = rd.Real();
  r.memory_bytes = rd.Int();
  r.memory_per_unit_bytes = rd.Int();
  r.memory_scope = static_cast<MemoryScope>(rd.Int().value_or(0));
  r.gpus = rd.SmallInt();
  rd.Text(r.gpu_type);
  r.time_limit_s = rd.Int();
  r.time_unlimited = rd.Int().value_or(0) != 0;
  r.nodes = rd.SmallInt();
  auto& a = j.alloc;
  a.cpus = rd.Real();
  a.memory_bytes = rd.Int();
  a.gpus = rd.SmallInt();
  rd.Text(a.gpu_type);
  a.nodes = rd.SmallInt();
  rd.Text(a.node_list);
  auto& u = j.usage;
  u.elapsed_s = rd.Real();
  u.cpu_time_s = rd.Real();
  u.peak_rss_bytes = rd.Int();
  u.avg_rss_bytes = rd.Int();
  u.gpu_util_pct = rd.Real();
  u.peak_gpu_memory_bytes = rd.Int();
  u.io_read_bytes = rd.Int();
  u.io_write_bytes = rd.Int();
  rd.Text(j.outcome.state);
  j.outcome.exit_code = rd.SmallInt();
  j.outcome.signal = rd.SmallInt();
  u.gpu_energy_j = rd.Real();
  u.cpu_energy_j = rd.Real();
  u.node_energy_j = rd.Real();
}

// A statement from SqliteStore's cache (reset when done, kept) or one of its own (finalised).
class ReusedStmt {
 public:
  explicit ReusedStmt(SqliteStmt owned) : owned_(std::move(owned)), stmt_(owned_.get()) {}
  ReusedStmt(sqlite3_stmt* cached, bool* busy) : stmt_(cached), busy_(busy) { *busy_ = true; }
  ReusedStmt(const ReusedStmt&) = delete;
  ReusedStmt& operator=(const ReusedStmt&) = delete;
  ReusedStmt& operator=(ReusedStmt&&) = delete;
  ReusedStmt(ReusedStmt&& other) noexcept
      : owned_(std::move(other.owned_)), stmt_(other.stmt_), busy_(other.busy_) {
    other.stmt_ = nullptr;
    other.busy_ = nullptr;
  }
  ~ReusedStmt() noexcept {
    if (busy_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
      *busy_ = false;
    }
  }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  SqliteStmt owned_;
  sqlite3_stmt* stmt_ = nullptr;
  bool* busy_ = nullptr;  // the cache entry's flag; nullptr when owned
};

class SqliteStore final : public Store {
 public:
  SqliteStore(SqliteDb db, std::string path) : db_(std::move(db)), path_(std::move(path)) {}
  ~SqliteStore() override {
    for (const auto& [role, fd] : leads_) ::close(fd);  // releases the roles
  }
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status Init() {
    // 16 KiB pages (a new file only; must precede WAL): fewer page splits and headers per
    // row, +25% ingest and +45% store throughput over 4 KiB on docs/benchmarks.md's machine.
    RS_RETURN_IF_ERROR(Exec("PRAGMA page_size=16384"));
    // WAL: readers never block the writer and a crash loses at most the open transaction.
    // synchronous=NORMAL is durable to the last committed batch across process kills (the
    // WAL is fsynced at checkpoints); only an OS crash can lose the very last batches.
    RS_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    RS_RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
    // Checkpoint every 64 MiB of WAL rather than every 4 MiB: fewer fsyncs in a large ingest.
    RS_RETURN_IF_ERROR(Exec("PRAGMA wal_autocheckpoint=4096"));
    // After a checkpoint the WAL file shrinks back to 64 MiB instead of keeping its peak size.
    RS_RETURN_IF_ERROR(Exec("PRAGMA journal_size_limit=67108864"));
    RS_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
    RS_RETURN_IF_ERROR(Exec("PRAGMA cache_size=-65536"));  // 64 MiB
    sqlite3_busy_timeout(db_.get(), 10000);
    RS_RETURN_IF_ERROR(Migrate());
    std::string column_params = "?";  // one SQL parameter per column of kJobColumns
    for (int i = 1; i < kNumJobColumns; ++i) column_params += ",?";
    std::string merge = MergeAssignments();
    // The WHERE makes a hash collision with another job a no-op (0 changes), which UpsertOne
    // answers by probing the next id.
    RS_ASSIGN_OR_RETURN(
        auto upsert,
        Prepare(fmt::format("INSERT INTO jobs (id, {}) VALUES (?, {}) ON CONFLICT (id) DO UPDATE "
                            "SET {} WHERE jobs.cluster = excluded.cluster AND jobs.job_id = "
                            "excluded.job_id",
                            kJobColumns, column_params, merge)));
    upsert_.Reset(std::move(upsert));
    // Direct keys (see JobKey) name one job each, so the conflict needs no check, and several
    // rows per statement save SQLite's per-statement work (about 15% of an ingest).
    std::string row = "(?," + column_params + ")";
    std::string rows = row;
    for (int i = 1; i < kRowsPerInsert; ++i) rows += "," + row;
    RS_ASSIGN_OR_RETURN(auto one, Prepare(fmt::format("INSERT INTO jobs (id, {}) VALUES {} ON "
                                                      "CONFLICT (id) DO UPDATE SET {}",
                                                      kJobColumns, row, merge)));
    replace_one_.Reset(std::move(one));
    RS_ASSIGN_OR_RETURN(auto many, Prepare(fmt::format("INSERT INTO jobs (id, {}) VALUES {} ON "
                                                       "CONFLICT (id) DO UPDATE SET {}",
                                                       kJobColumns, rows, merge)));
    replace_many_.Reset(std::move(many));
    RS_ASSIGN_OR_RETURN(add_cluster_, Prepare("INSERT INTO clusters (name, id) VALUES (?1, ?2)"));
    RS_RETURN_IF_ERROR(LoadClusterIds());
    RS_ASSIGN_OR_RETURN(find_,
                        Prepare(fmt::format("SELECT {} FROM jobs WHERE id = ?1", kJobColumns)));
    return Status::Ok();
  }

  Status UpsertJobs(std::span<const JobRecord> jobs) override {
    if (jobs.empty()) return Status::Ok();
    RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status st = UpsertInTransaction(jobs);
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      (void)LoadClusterIds();  // forget ids assigned in the rolled-back transaction
      return st;
    }
    return Exec("COMMIT");
  }

  Status ScanJobs(const JobFilter& filter,
                  const std::function<bool(const JobRecord&)>& fn) override {
    auto [where, args] = Where(filter);
    // The newest: backwards along an index ending in end_time (jobs_by_user, jobs_by_name),
    // so a user's 50,000 jobs are not all read to find the last few thousand.
    std::string order =
        filter.newest > 0 ? fmt::format(" {} end_time IS NOT NULL ORDER BY end_time DESC LIMIT {}",
                                        where.empty() ? "WHERE" : "AND", filter.newest)
                          : "";
    RS_ASSIGN_OR_RETURN(auto stmt, PrepareCached(fmt::format(
                                       "SELECT {} FROM jobs{}{}",
                                       filter.lean ? kLeanJobColumns : kJobColumns, where, order)));
    BindArgs(stmt.get(), args);
    JobRecord job;
    while (true) {
      int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("scanning jobs");
      ReadJob(stmt.get(), job);
      if (!fn(job)) break;
    }
    return Status::Ok();
  }

  StatusOr<JobRecord> GetJob(const std::string& cluster, const std::string& job_id) override {
    std::vector<std::string> clusters;
    if (cluster.empty()) {
      RS_ASSIGN_OR_RETURN(clusters, Clusters());
    } else {
      clusters.push_back(cluster);
    }
    std::optional<JobRecord> best;
    for (const auto& c : clusters) {
      JobRecord job;
      RS_ASSIGN_OR_RETURN(bool found, FindJob(c, job_id, &job));
      if (found && (!best || job.end_time.value_or(0) > best->end_time.value_or(0))) {
        best = std::move(job);
      }
    }
    if (best) return std::move(*best);
    return Status::NotFound(
        cluster.empty() ? fmt::format("no job {} in {}", job_id, path_)
                        : fmt::format("no job {} of cluster {} in {}", job_id, cluster, path_));
  }

  StatusOr<int64_t> CountJobs(const JobFilter& filter) override {
    auto [where, args] = Where(filter);
    RS_ASSIGN_OR_RETURN(auto stmt, PrepareCached("SELECT count(*) FROM jobs" + where));
    BindArgs(stmt.get(), args);
    if (sqlite3_step(stmt.get()) != SQLITE_ROW) return Error("counting jobs");
    return static_cast<int64_t>(sqlite3_column_int64(stmt.get(), 0));
  }

  StatusOr<std::vector<std::string>> Clusters() override {
    RS_ASSIGN_OR_RETURN(auto stmt, PrepareCached("SELECT name FROM clusters ORDER BY name"));
    std::vector<std::string> out;
    while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
      out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0)));
    }
    return out;
  }

  Status PutClusterMeta(const std::string& cluster,
                        const std::map<std::string, std::string>& meta) override {
    if (meta.empty()) return Status::Ok();
    RS_ASSIGN_OR_RETURN(
        auto stmt,
        Prepare("INSERT OR REPLACE INTO cluster_meta (cluster, key, value) VALUES (?1, ?2, ?3)"));
    RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    for (const auto& [key, value] : meta) {
      sqlite3_reset(stmt.get());
      sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt.get(), 2, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt.get(), 3, value.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(stmt.get()) != SQLITE_DONE) {
        Status st = Error("storing cluster metadata");
        (void)Exec("ROLLBACK");
        return st;
      }
    }
    return Exec("COMMIT");
  }

  StatusOr<std::map<std::string, std::string>> GetClusterMeta(const std::string& cluster) override {
    RS_ASSIGN_OR_RETURN(auto stmt,
                        PrepareCached("SELECT key, value FROM cluster_meta WHERE cluster = ?1"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    std::map<std::string, std::string> out;
    while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
      out[reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0))] =
          reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 1));
    }
    return out;
  }

  Status SetBulkLoad(bool on) override {
    if (on) {
      RS_RETURN_IF_ERROR(Exec(kDropHistoryTriggers));
      return Exec(
          "DROP INDEX IF EXISTS jobs_by_user; DROP INDEX IF EXISTS jobs_by_name; "
          "DROP INDEX IF EXISTS jobs_by_end;");
    }
    RS_RETURN_IF_ERROR(Exec(kSecondaryIndexes));
    RS_RETURN_IF_ERROR(Exec(kHistoryTriggers));
    return Exec("UPDATE history_generation SET n = n + 1");
  }

  StatusOr<JobList> ListJobs(const JobFilter& filter, const JobPage& page) override {
    auto [where, args] = Where(filter);
    std::string cond = where;
    if (page.after) {
      // The cursor is "<sort key>:<row id>" of the previous page's last job.
      int64_t key = 0, id = 0;
      char extra = 0;
      if (std::sscanf(page.after->c_str(), "%" SCNd64 ":%" SCNd64 "%c", &key, &id, &extra) != 2) {
        return Status::InvalidArgument(
            "cursor: expected the next_cursor of a previous page, got '" + *page.after + "'");
      }
      int a = static_cast<int>(args.size()) + 1;
      cond += fmt::format(
          "{} ({k} < CAST(?{} AS INTEGER) OR ({k} = CAST(?{} AS INTEGER) AND id < "
          "CAST(?{} AS INTEGER)))",
          where.empty() ? " WHERE" : " AND", a, a, a + 1, fmt::arg("k", kListOrderKey));
      args.emplace_back(a, std::to_string(key));
      args.emplace_back(a + 1, std::to_string(id));
    }
    int limit = std::clamp(page.limit, 1, 10000);
    RS_ASSIGN_OR_RETURN(
        auto stmt,
        Prepare(fmt::format("SELECT {}, {}, id FROM jobs{} ORDER BY {} DESC, id "
                            "DESC LIMIT {}",
                            kJobColumns, kListOrderKey, cond, kListOrderKey, limit + 1)));
    BindArgs(stmt.get(), args);
    JobList out;
    std::pair<int64_t, int64_t> last{0, 0};  // the last returned row's sort key and id
    while (true) {
      int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("listing jobs");
      if (static_cast<int>(out.jobs.size()) == limit) {  // one more row exists: another page
        out.next = fmt::format("{}:{}", last.first, last.second);
        break;
      }
      ReadJob(stmt.get(), out.jobs.emplace_back());
      last = {sqlite3_column_int64(stmt.get(), kNumJobColumns),
              sqlite3_column_int64(stmt.get(), kNumJobColumns + 1)};
    }
    return out;
  }

  StatusOr<std::vector<bool>> WriteTelemetryGroup(std::span<const TelemetryWrite> writes) override {
    RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    std::vector<bool> stored;
    for (const TelemetryWrite& w : writes) {
      auto st = WriteTelemetryInTransaction(w.agent, w.seq, w.jobs);
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        (void)LoadClusterIds();
        return st.status();
      }
      stored.push_back(*st);
    }
    RS_RETURN_IF_ERROR(Exec("COMMIT"));
    return stored;
  }

  StatusOr<int64_t> LastTelemetrySeq(const std::string& agent) override {
    RS_ASSIGN_OR_RETURN(SqliteStmt stmt, Prepare("SELECT last_seq FROM agents WHERE agent = ?1"));
    sqlite3_bind_text(stmt.get(), 1, agent.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_ROW) return sqlite3_column_int64(stmt.get(), 0);
    if (rc != SQLITE_DONE) return Error("reading the agent's last batch");
    return int64_t{0};
  }

  StatusOr<bool> WriteTelemetry(const std::string& agent, int64_t seq,
                                std::span<const JobTelemetry> jobs) override {
    RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    auto st = WriteTelemetryInTransaction(agent, seq, jobs);
    if (!st.ok() || !*st) {
      (void)Exec("ROLLBACK");
      (void)LoadClusterIds();
      return st;
    }
    RS_RETURN_IF_ERROR(Exec("COMMIT"));
    return true;
  }

  Status ReadSamples(const std::string& cluster, const std::string& job_id,
                     const std::string& metric, int64_t from_ms, int64_t to_ms,
                     const std::function<void(const Sample&)>& fn) override {
    if (!read_chunks_.get()) {
      RS_ASSIGN_OR_RETURN(read_chunks_,
                          Prepare("SELECT t_start, data FROM series_chunks WHERE cluster = ?1 AND "
                                  "job_id = ?2 AND metric = ?3 AND t_start >= ?4 AND t_start <= "
                                  "?5 AND t_end >= ?6 ORDER BY t_start"));
    }
    sqlite3_stmt* s = read_chunks_.get();
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, metric.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, from_ms > INT64_MIN + kChunkSpanMs ? from_ms - kChunkSpanMs : from_ms);
    sqlite3_bind_int64(s, 5, to_ms);
    sqlite3_bind_int64(s, 6, from_ms);
    while (true) {
      int rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("reading samples");
      int64_t t_start = sqlite3_column_int64(s, 0);
      const auto* data = static_cast<const unsigned char*>(sqlite3_column_blob(s, 1));
      size_t n = static_cast<size_t>(sqlite3_column_bytes(s, 1));
      DecodeChunk(data, n, t_start, [&](const Sample& x) {
        if (x.t_ms > to_ms) return false;
        if (x.t_ms >= from_ms) fn(x);
        return true;
      });
    }
    sqlite3_reset(s);
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> SampleMetrics(const std::string& cluster,
                                                   const std::string& job_id) override {
    // One index seek per metric (skip-scan by hand) rather than a walk over every chunk.
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT metric FROM series_chunks WHERE cluster = ?1 "
                                           "AND job_id = ?2 AND metric > ?3 ORDER BY metric "
                                           "LIMIT 1"));
    std::vector<std::string> out;
    std::string last;
    while (true) {
      sqlite3_reset(stmt.get());
      sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt.get(), 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt.get(), 3, last.c_str(), -1, SQLITE_TRANSIENT);
      int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("listing a job's metrics");
      last = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0));
      out.push_back(last);
    }
    return out;
  }

  StatusOr<std::map<std::string, int64_t>> GetStacks(const std::string& cluster,
                                                     const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT stack, count FROM stacks WHERE cluster = ?1 "
                                           "AND job_id = ?2"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    std::map<std::string, int64_t> out;
    while (true) {
      int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("reading stacks");
      out[reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0))] =
          sqlite3_column_int64(stmt.get(), 1);
    }
    return out;
  }

  Status PutJobCode(const StoredJobCode& c) override {
    RS_ASSIGN_OR_RETURN(auto stmt,
                        Prepare("INSERT OR REPLACE INTO job_code (cluster, job_id, created_at, "
                                "code_hash, program, facts, estimate) VALUES (?1, ?2, ?3, ?4, ?5, "
                                "?6, ?7)"));
    sqlite3_bind_text(stmt.get(), 1, c.cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, c.job_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt.get(), 3, c.created_at);
    sqlite3_bind_text(stmt.get(), 4, c.code_hash.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 5, c.program.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 6, c.facts.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 7, c.estimate.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error("storing a job's code");
    return Status::Ok();
  }

  StatusOr<StoredJobCode> GetJobCode(const std::string& cluster,
                                     const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT cluster, job_id, created_at, code_hash, "
                                           "program, facts, estimate FROM job_code WHERE "
                                           "cluster = ?1 AND job_id = ?2"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) {
      return Status::NotFound(fmt::format("no code stored for job {} ({})", job_id, cluster));
    }
    if (rc != SQLITE_ROW) return Error("reading a job's code");
    return JobCodeRow(stmt.get());
  }

  Status ScanJobCode(const std::string& cluster,
                     const std::function<bool(const StoredJobCode&)>& fn) override {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT cluster, job_id, created_at, code_hash, "
                                           "program, facts, estimate FROM job_code WHERE "
                                           "cluster = ?1"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    while (true) {
      int rc = sqlite3_step(stmt.get());
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Error("reading the jobs' code");
      if (!fn(JobCodeRow(stmt.get()))) break;
    }
    return Status::Ok();
  }

  Status PutPrediction(const StoredPrediction& p) override {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("INSERT OR REPLACE INTO predictions (cluster, job_id, "
                                           "created_at, document) VALUES (?1, ?2, ?3, ?4)"));
    sqlite3_bind_text(stmt.get(), 1, p.cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, p.job_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt.get(), 3, p.created_at);
    sqlite3_bind_text(stmt.get(), 4, p.document.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error("storing the prediction");
    return Status::Ok();
  }

  StatusOr<StoredPrediction> GetPrediction(const std::string& cluster,
                                           const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT created_at, document FROM predictions WHERE "
                                           "cluster = ?1 AND job_id = ?2"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) {
      return Status::NotFound(fmt::format("no prediction for job {} ({})", job_id, cluster));
    }
    if (rc != SQLITE_ROW) return Error("reading the prediction");
    StoredPrediction p;
    p.cluster = cluster;
    p.job_id = job_id;
    p.created_at = sqlite3_column_int64(stmt.get(), 0);
    p.document = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 1));
    return p;
  }

  StatusOr<int64_t> PutModel(const std::string& cluster, int64_t trained_at, int64_t jobs,
                             const std::string& blob) override {
    RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    auto done = [&](Status st) -> Status {
      if (!st.ok()) (void)Exec("ROLLBACK");
      return st;
    };
    int64_t version = 1;
    {
      auto next = Prepare("SELECT coalesce(max(version), 0) + 1 FROM models WHERE cluster = ?1");
      if (!next.ok()) return done(next.status());
      sqlite3_bind_text(next->get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(next->get()) != SQLITE_ROW) return done(Error("numbering the model"));
      version = sqlite3_column_int64(next->get(), 0);
    }
    auto ins = Prepare(
        "INSERT INTO models (cluster, version, trained_at, jobs, blob) VALUES (?1, ?2, ?3, ?4, "
        "?5)");
    if (!ins.ok()) return done(ins.status());
    sqlite3_bind_text(ins->get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(ins->get(), 2, version);
    sqlite3_bind_int64(ins->get(), 3, trained_at);
    sqlite3_bind_int64(ins->get(), 4, jobs);
    sqlite3_bind_blob64(ins->get(), 5, blob.data(), blob.size(), SQLITE_TRANSIENT);
    if (sqlite3_step(ins->get()) != SQLITE_DONE) return done(Error("storing the model"));
    // Older versions stay for comparison and rollback, but not forever.
    auto prune = Prepare("DELETE FROM models WHERE cluster = ?1 AND version <= ?2");
    if (!prune.ok()) return done(prune.status());
    sqlite3_bind_text(prune->get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(prune->get(), 2, version - kModelsKept);
    if (sqlite3_step(prune->get()) != SQLITE_DONE) return done(Error("pruning old models"));
    RS_RETURN_IF_ERROR(Exec("COMMIT"));
    return version;
  }

  StatusOr<StoredModel> GetModel(const std::string& cluster, int64_t version) override {
    RS_ASSIGN_OR_RETURN(
        auto stmt, Prepare("SELECT version, trained_at, jobs, blob FROM models WHERE cluster = "
                           "?1 AND (?2 = 0 OR version = ?2) ORDER BY version DESC LIMIT 1"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt.get(), 2, version);
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) {
      return Status::NotFound(
          version == 0
              ? fmt::format("no model for cluster {} in {}: run `rightsize train`", cluster, path_)
              : fmt::format("no model version {} for cluster {} in {}", version, cluster, path_));
    }
    if (rc != SQLITE_ROW) return Error("reading the model");
    StoredModel m;
    m.cluster = cluster;
    m.version = sqlite3_column_int64(stmt.get(), 0);
    m.trained_at = sqlite3_column_int64(stmt.get(), 1);
    m.jobs = sqlite3_column_int64(stmt.get(), 2);
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(stmt.get(), 3));
    m.blob.assign(blob, static_cast<size_t>(sqlite3_column_bytes(stmt.get(), 3)));
    return m;
  }

  // store/changes.h.
  bool HistoryChangedSinceLastAsked() override {
    auto stmt = PrepareCached("SELECT n FROM history_generation");
    if (!stmt.ok() || sqlite3_step(stmt->get()) != SQLITE_ROW) return true;
    int64_t generation = sqlite3_column_int64(stmt->get(), 0);
    bool changed = !asked_ || generation != seen_generation_;
    asked_ = true;
    seen_generation_ = generation;
    return changed;
  }

  StatusOr<int64_t> LatestModelVersion(const std::string& cluster) override {
    RS_ASSIGN_OR_RETURN(auto stmt,
                        PrepareCached("SELECT max(version) FROM models WHERE cluster = ?1"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt.get()) != SQLITE_ROW) return Error("reading the model version");
    if (sqlite3_column_type(stmt.get(), 0) == SQLITE_NULL) {
      return Status::NotFound(
          fmt::format("no model for cluster {} in {}: run `rightsize train`", cluster, path_));
    }
    return sqlite3_column_int64(stmt.get(), 0);
  }

  Status PutDiagnosis(const StoredDiagnosis& d) override {
    // A diagnosis never gives way to a weaker one: `rightsize diagnose` run where the job's
    // output cannot be read must not replace what the follower read in it (issue 28). It is
    // replaced by one at least as confident that names a class, or when it named none.
    RS_ASSIGN_OR_RETURN(
        auto stmt,
        Prepare("INSERT INTO diagnoses (cluster, job_id, created_at, class, confidence, document) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (cluster, job_id) DO UPDATE SET "
                "created_at = excluded.created_at, class = excluded.class, confidence = "
                "excluded.confidence, document = excluded.document WHERE diagnoses.class = "
                "'unknown' OR (excluded.class <> 'unknown' AND excluded.confidence >= "
                "diagnoses.confidence)"));
    sqlite3_bind_text(stmt.get(), 1, d.cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, d.job_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt.get(), 3, d.created_at);
    sqlite3_bind_text(stmt.get(), 4, d.cls.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(stmt.get(), 5, d.confidence);
    sqlite3_bind_text(stmt.get(), 6, d.document.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error("storing the diagnosis");
    return Status::Ok();
  }

  StatusOr<StoredDiagnosis> GetDiagnosis(const std::string& cluster,
                                         const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(auto stmt,
                        Prepare("SELECT created_at, class, confidence, document FROM diagnoses "
                                "WHERE cluster = ?1 AND job_id = ?2"));
    sqlite3_bind_text(stmt.get(), 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.get(), 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) {
      return Status::NotFound(fmt::format("no diagnosis of job {} ({})", job_id, cluster));
    }
    if (rc != SQLITE_ROW) return Error("reading the diagnosis");
    StoredDiagnosis d;
    d.cluster = cluster;
    d.job_id = job_id;
    d.created_at = sqlite3_column_int64(stmt.get(), 0);
    d.cls = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 1));
    d.confidence = sqlite3_column_double(stmt.get(), 2);
    d.document = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 3));
    return d;
  }

 private:
  static constexpr int64_t kModelsKept = 5;

  // A row of SELECT cluster, job_id, created_at, code_hash, program, facts, estimate.
  static StoredJobCode JobCodeRow(sqlite3_stmt* s) {
    auto text = [s](int i) {
      const unsigned char* t = sqlite3_column_text(s, i);
      return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
    };
    StoredJobCode c;
    c.cluster = text(0);
    c.job_id = text(1);
    c.created_at = sqlite3_column_int64(s, 2);
    c.code_hash = text(3);
    c.program = text(4);
    c.facts = text(5);
    c.estimate = text(6);
    return c;
  }

  Status UpsertInTransaction(std::span<const JobRecord> jobs) {
    std::vector<std::pair<int64_t, const JobRecord*>> pending;  // direct keys, for REPLACE
    pending.reserve(kRowsPerInsert);
    auto flush = [&](bool all) -> Status {
      while (pending.size() >= (all ? 1 : static_cast<size_t>(kRowsPerInsert))) {
        bool many = pending.size() >= static_cast<size_t>(kRowsPerInsert);
        BindableStmt& b = many ? replace_many_ : replace_one_;
        sqlite3_stmt* s = b.stmt.get();
        size_t n = many ? kRowsPerInsert : 1;
        sqlite3_reset(s);
        for (size_t r = 0; r < n; ++r) {
          int offset = static_cast<int>(r) * (kNumJobColumns + 1);
          sqlite3_bind_int64(s, offset + 1, pending[r].first);
          BindJob(b, *pending[r].second, offset + 1);
        }
        if (sqlite3_step(s) != SQLITE_DONE) {
          Status st = Error(fmt::format("storing job {}/{}", pending[0].second->cluster,
                                        pending[0].second->job_id));
          sqlite3_reset(s);
          return st;
        }
        pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(n));
      }
      return Status::Ok();
    };
    for (const auto& job : jobs) {
      RS_ASSIGN_OR_RETURN(int64_t cluster_id, ClusterId(job.cluster));
      int64_t key = JobKey(cluster_id, job.job_id);
      if ((key & kHashedKeyBit) != 0) {
        RS_RETURN_IF_ERROR(UpsertOne(job, key));
      } else {
        pending.emplace_back(key, &job);
        RS_RETURN_IF_ERROR(flush(false));
      }
    }
    return flush(true);
  }

  StatusOr<bool> WriteTelemetryInTransaction(const std::string& agent, int64_t seq,
                                             std::span<const JobTelemetry> jobs) {
    if (!last_seq_.get()) {
      RS_ASSIGN_OR_RETURN(last_seq_, Prepare("SELECT last_seq FROM agents WHERE agent = ?1"));
      RS_ASSIGN_OR_RETURN(put_seq_, Prepare("INSERT OR REPLACE INTO agents (agent, last_seq) "
                                            "VALUES (?1, ?2)"));
    }
    {
      sqlite3_stmt* last = last_seq_.get();
      sqlite3_reset(last);
      sqlite3_bind_text(last, 1, agent.c_str(), -1, SQLITE_TRANSIENT);
      int rc = sqlite3_step(last);
      bool replayed = rc == SQLITE_ROW && sqlite3_column_int64(last, 0) >= seq;
      sqlite3_reset(last);
      if (replayed) return false;
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("reading the agent's last batch");
      sqlite3_stmt* put = put_seq_.get();
      sqlite3_reset(put);
      sqlite3_bind_text(put, 1, agent.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(put, 2, seq);
      if (sqlite3_step(put) != SQLITE_DONE) return Error("storing the agent's last batch");
    }
    if (!put_chunk_.get()) {
      RS_ASSIGN_OR_RETURN(put_chunk_,
                          Prepare("INSERT INTO series_chunks (cluster, job_id, metric, t_start, "
                                  "t_end, n, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON "
                                  "CONFLICT (cluster, job_id, metric, t_start) DO NOTHING"));
      RS_ASSIGN_OR_RETURN(get_chunk_,
                          Prepare("SELECT data FROM series_chunks WHERE cluster = ?1 AND job_id = "
                                  "?2 AND metric = ?3 AND t_start = ?4"));
      RS_ASSIGN_OR_RETURN(set_chunk_,
                          Prepare("UPDATE series_chunks SET t_end = ?5, n = ?6, data = ?7 WHERE "
                                  "cluster = ?1 AND job_id = ?2 AND metric = ?3 AND t_start = ?4"));
      RS_ASSIGN_OR_RETURN(add_stack_,
                          Prepare("INSERT INTO stacks (cluster, job_id, stack, count) VALUES (?1, "
                                  "?2, ?3, ?4) ON CONFLICT (cluster, job_id, stack) DO UPDATE SET "
                                  "count = count + excluded.count"));
    }
    std::vector<JobRecord> records;
    std::string blob;
    for (const JobTelemetry& jt : jobs) {
      if (jt.diagnosis) {  // the agent's, of a job that failed on its node
        StoredDiagnosis d{jt.job.cluster,
                          jt.job.job_id,
                          jt.job.end_time.value_or(static_cast<int64_t>(std::time(nullptr))),
                          jt.diagnosis->cls,
                          jt.diagnosis->confidence,
                          jt.diagnosis->document};
        RS_RETURN_IF_ERROR(PutDiagnosis(d));
      }
      JobRecord existing;
      RS_ASSIGN_OR_RETURN(bool found, FindJob(jt.job.cluster, jt.job.job_id, &existing));
      // A running job's record is the same in every batch: rewriting it (and its three
      // indexes) each time was most of the cost of a small batch. A record of another source
      // (sacct's) is written to only once the job has ended: the upsert adds the agent's usage.
      if (!found || (existing.source == jt.job.source && !(existing == jt.job)) ||
          (existing.source != jt.job.source && jt.job.end_time.has_value())) {
        records.push_back(jt.job);
      }
      for (const auto& [metric, samples] : jt.samples) {
        size_t i = 0;
        while (i < samples.size()) {
          size_t j = i + 1;
          while (j < samples.size() && j - i < kChunkSamples &&
                 samples[j].t_ms - samples[i].t_ms < kChunkSpanMs) {
            ++j;
          }
          std::span<const Sample> part(samples.data() + i, j - i);
          RS_RETURN_IF_ERROR(PutChunk(jt.job.cluster, jt.job.job_id, metric, part, &blob));
          i = j;
        }
      }
      for (const auto& [stack, count] : jt.stacks) {
        sqlite3_stmt* s = add_stack_.get();
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, jt.job.cluster.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, jt.job.job_id.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 3, stack.c_str(), static_cast<int>(stack.size()), SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 4, count);
        if (sqlite3_step(s) != SQLITE_DONE) return Error("storing stacks");
      }
    }
    RS_RETURN_IF_ERROR(UpsertInTransaction(records));
    return true;
  }

  StatusOr<bool> TryLead(const std::string& role) override {
    if (path_ == ":memory:" || path_.empty()) return true;
    if (auto it = leads_.find(role); it != leads_.end()) return true;
    std::string name;
    for (char c : role) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::string lock_path = path_ + ".lead-" + name;
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Status::IoError(
          fmt::format("cannot open {} (the {} role's lock): {}", lock_path, role, strerror(errno)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return false;
      return Status::IoError(fmt::format("cannot lock {}: {}", lock_path, strerror(err)));
    }
    leads_.emplace(role, fd);
    return true;
  }

  // Stores one chunk of a series. A chunk stored before under the same start (another batch
  // whose first sample has this time) is merged with it, never replaced: only a sample equal in
  // time and value to a stored one (a batch the agent sent again) is dropped.
  Status PutChunk(const std::string& cluster, const std::string& job_id, const std::string& metric,
                  std::span<const Sample> part, std::string* blob) {
    auto bind_key = [&](sqlite3_stmt* s) {
      sqlite3_reset(s);
      sqlite3_bind_text(s, 1, cluster.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(s, 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(s, 3, metric.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(s, 4, part.front().t_ms);
    };
    auto write = [&](sqlite3_stmt* s, std::span<const Sample> samples) {
      EncodeChunk(samples, blob);
      bind_key(s);
      sqlite3_bind_int64(s, 5, samples.back().t_ms);
      sqlite3_bind_int64(s, 6, static_cast<int64_t>(samples.size()));
      sqlite3_bind_blob(s, 7, blob->data(), static_cast<int>(blob->size()), SQLITE_STATIC);
      return sqlite3_step(s) == SQLITE_DONE;
    };
    if (!write(put_chunk_.get(), part)) return Error("storing samples");
    if (sqlite3_changes(db_.get()) > 0) return Status::Ok();
    std::vector<Sample> merged(part.begin(), part.end());
    sqlite3_stmt* g = get_chunk_.get();
    bind_key(g);
    if (sqlite3_step(g) == SQLITE_ROW) {
      const auto* data = static_cast<const unsigned char*>(sqlite3_column_blob(g, 0));
      DecodeChunk(data, static_cast<size_t>(sqlite3_column_bytes(g, 0)), part.front().t_ms,
                  [&](const Sample& x) {
                    merged.push_back(x);
                    return true;
                  });
    }
    sqlite3_reset(g);
    auto before = [](const Sample& a, const Sample& b) {
      return a.t_ms != b.t_ms ? a.t_ms < b.t_ms : a.value < b.value;
    };
    std::sort(merged.begin(), merged.end(), before);
    merged.erase(std::unique(merged.begin(), merged.end(),
                             [](const Sample& a, const Sample& b) {
                               return a.t_ms == b.t_ms && a.value == b.value;
                             }),
                 merged.end());
    if (!write(set_chunk_.get(), merged)) return Error("storing samples");
    return Status::Ok();
  }

  // Inserts or replaces one job, probing past ids taken by other jobs (hash collisions).
  Status UpsertOne(const JobRecord& job, int64_t id) {
    for (int probe = 0; probe < kMaxProbes; ++probe, id = NextProbe(id)) {
      sqlite3_stmt* s = upsert_.stmt.get();
      sqlite3_reset(s);
      sqlite3_bind_int64(s, 1, id);
      BindJob(upsert_, job, 1);
      if (sqlite3_step(s) != SQLITE_DONE) {
        Status st = Error(fmt::format("storing job {}/{}", job.cluster, job.job_id));
        sqlite3_reset(s);
        return st;
      }
      if (sqlite3_changes(db_.get()) > 0) return Status::Ok();
    }
    return Status::Internal(fmt::format("no free id for job {}/{} after {} probes", job.cluster,
                                        job.job_id, kMaxProbes));
  }

  // Looks the job up by its key, following the same probe sequence as UpsertOne.
  StatusOr<bool> FindJob(const std::string& cluster, const std::string& job_id, JobRecord* out) {
    auto it = cluster_ids_.find(cluster);
    if (it == cluster_ids_.end()) {
      // Another connection (a second server, the agent's) may have added the cluster since.
      RS_RETURN_IF_ERROR(LoadClusterIds());
      it = cluster_ids_.find(cluster);
      if (it == cluster_ids_.end()) return false;
    }
    int64_t id = JobKey(it->second, job_id);
    for (int probe = 0; probe < kMaxProbes; ++probe, id = NextProbe(id)) {
      sqlite3_stmt* s = find_.get();
      sqlite3_reset(s);
      sqlite3_bind_int64(s, 1, id);
      int rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) return false;  // an empty slot ends the probe sequence
      if (rc != SQLITE_ROW) return Error("reading job " + job_id);
      ReadJob(s, *out);
      // A statement left on a row keeps a read transaction open: the next BEGIN IMMEDIATE
      // would fail at once ("database is locked") and the WAL could never be reset.
      sqlite3_reset(s);
      if (out->cluster == cluster && out->job_id == job_id) return true;
      if ((id & kHashedKeyBit) == 0) return false;  // direct keys never collide
    }
    return false;
  }

  static int64_t NextProbe(int64_t id) { return kHashedKeyBit | ((id + 1) & (kHashedKeyBit - 1)); }

  // The small id of a cluster, assigned on first sight (inside the caller's transaction).
  StatusOr<int64_t> ClusterId(const std::string& name) {
    if (last_cluster_ != nullptr && last_cluster_->first == name) return last_cluster_->second;
    auto it = cluster_ids_.find(name);
    if (it == cluster_ids_.end()) {
      // Callers hold the write lock: what the file says now is current, including clusters
      // that other connections added since this one last looked.
      RS_RETURN_IF_ERROR(LoadClusterIds());
      it = cluster_ids_.find(name);
    }
    if (it == cluster_ids_.end()) {
      int64_t id = static_cast<int64_t>(cluster_ids_.size());
      sqlite3_stmt* s = add_cluster_.get();
      sqlite3_reset(s);
      sqlite3_bind_text(s, 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
      sqlite3_bind_int64(s, 2, id);
      if (sqlite3_step(s) != SQLITE_DONE) return Error("storing cluster " + name);
      it = cluster_ids_.emplace(name, id).first;
    }
    last_cluster_ = &*it;
    return it->second;
  }

  Status LoadClusterIds() {
    cluster_ids_.clear();
    last_cluster_ = nullptr;
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT name, id FROM clusters"));
    while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
      cluster_ids_.emplace(reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0)),
                           sqlite3_column_int64(stmt.get(), 1));
    }
    return Status::Ok();
  }

  Status Error(const std::string& what) const {
    return Status::IoError(fmt::format("{}: {}: {}", path_, what, sqlite3_errmsg(db_.get())));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err != nullptr ? err : "unknown error";
      sqlite3_free(err);
      return Status::IoError(fmt::format("{}: {}", path_, msg));
    }
    return Status::Ok();
  }

  // A read statement from the connection's cache: a request that runs the same queries each
  // time (a prediction, an admission) parses none of them again. Reset, its bindings cleared,
  // when `ReusedStmt` goes; a statement still in use (a nested scan) gets a fresh copy.
  StatusOr<ReusedStmt> PrepareCached(const std::string& sql) {
    auto it = cached_.find(sql);
    if (it != cached_.end() && !it->second->busy) {
      return ReusedStmt(it->second->stmt.get(), &it->second->busy);
    }
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare(sql));
    if (it != cached_.end() || cached_.size() >= kMaxCachedStatements) {
      return ReusedStmt(std::move(stmt));
    }
    auto entry = std::make_unique<CachedStmt>();
    entry->stmt = std::move(stmt);
    CachedStmt* raw = entry.get();
    cached_.emplace(sql, std::move(entry));
    return ReusedStmt(raw->stmt.get(), &raw->busy);
  }

  StatusOr<SqliteStmt> Prepare(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_.get(), sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK) {
      return Error("preparing a statement");
    }
    return SqliteStmt(stmt);
  }

  StatusOr<int> UserVersion() {
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("PRAGMA user_version"));
    if (sqlite3_step(stmt.get()) != SQLITE_ROW) return Error("reading the schema version");
    return sqlite3_column_int(stmt.get(), 0);
  }

  Status Migrate() {
    RS_ASSIGN_OR_RETURN(int version, UserVersion());
    if (version > kSqliteSchemaVersion) {
      return Status::InvalidArgument(fmt::format(
          "{} has schema version {}, newer than this rightsize understands ({}); upgrade "
          "rightsize",
          path_, version, kSqliteSchemaVersion));
    }
    for (int v = version; v < kSqliteSchemaVersion; ++v) {
      RS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
      Status st = Exec(kMigrations[v]);
      if (st.ok()) st = Exec(fmt::format("PRAGMA user_version = {}", v + 1).c_str());
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        return st.WithContext(fmt::format("migrating the schema to version {}", v + 1));
      }
      RS_RETURN_IF_ERROR(Exec("COMMIT"));
    }
    // A bulk load that died left the indexes and the history triggers dropped (SetBulkLoad),
    // and the generation not bumped for what it wrote.
    RS_RETURN_IF_ERROR(Exec(kSecondaryIndexes));
    RS_ASSIGN_OR_RETURN(auto stmt, Prepare("SELECT count(*) FROM sqlite_master WHERE type = "
                                           "'trigger' AND name = 'jobs_history_insert'"));
    if (sqlite3_step(stmt.get()) == SQLITE_ROW && sqlite3_column_int(stmt.get(), 0) > 0) {
      return Status::Ok();
    }
    RS_RETURN_IF_ERROR(Exec(kHistoryTriggers));
    return Exec("UPDATE history_generation SET n = n + 1");
  }

  static std::pair<std::string, std::vector<std::pair<int, std::string>>> Where(
      const JobFilter& f) {
    std::vector<std::string> conds;
    std::vector<std::pair<int, std::string>> args;  // (index, text or integer as text)
    auto add_text = [&](const char* col, const std::string& v) {
      if (v.empty()) return;
      int idx = static_cast<int>(args.size()) + 1;
      conds.push_back(fmt::format("{} = ?{}", col, idx));
      args.emplace_back(idx, v);
    };
    add_text("cluster", f.cluster);
    add_text("user", f.user);
    add_text("account", f.account);
    add_text("partition", f.partition);
    add_text("job_name", f.job_name);
    if (f.ended_since) {
      int idx = static_cast<int>(args.size()) + 1;
      conds.push_back(fmt::format("end_time >= CAST(?{} AS INTEGER)", idx));
      args.emplace_back(idx, std::to_string(*f.ended_since));
    }
    if (f.ended_until) {
      int idx = static_cast<int>(args.size()) + 1;
      conds.push_back(fmt::format("end_time < CAST(?{} AS INTEGER)", idx));
      args.emplace_back(idx, std::to_string(*f.ended_until));
    }
    add_text("state", f.state);
    if (f.efficiency_below) {
      int idx = static_cast<int>(args.size()) + 1;
      conds.push_back(fmt::format(
          "(cpu_time_s / (elapsed_s * coalesce(alloc_cpus, req_cpus)) < CAST(?{0} AS REAL) OR "
          "coalesce(peak_rss_bytes, avg_rss_bytes) * 1.0 / coalesce(alloc_mem_bytes, "
          "req_mem_bytes) < CAST(?{0} AS REAL))",
          idx));
      args.emplace_back(idx, fmt::format("{}", *f.efficiency_below));
    }
    std::string where;
    for (size_t i = 0; i < conds.size(); ++i) where += (i == 0 ? " WHERE " : " AND ") + conds[i];
    return {where, args};
  }

  static void BindArgs(sqlite3_stmt* stmt, const std::vector<std::pair<int, std::string>>& args) {
    for (const auto& [idx, v] : args) {
      sqlite3_bind_text(stmt, idx, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
  }

  SqliteDb db_;
  std::string path_;
  // Declared after db_: finalised before the connection closes.
  struct CachedStmt {
    SqliteStmt stmt;
    bool busy = false;
  };
  static constexpr size_t kMaxCachedStatements = 64;
  std::unordered_map<std::string, std::unique_ptr<CachedStmt>> cached_;
  // Ids are never freed (no deletes), so a probe sequence never has holes.
  static constexpr int kMaxProbes = 64;
  static constexpr int kRowsPerInsert = 16;
  BindableStmt upsert_;        // one row, hashed keys: ON CONFLICT checks it is the same job
  BindableStmt replace_one_;   // one row, direct key
  BindableStmt replace_many_;  // kRowsPerInsert rows, direct keys
  SqliteStmt add_cluster_;
  SqliteStmt find_;
  SqliteStmt put_chunk_, get_chunk_, set_chunk_, add_stack_, read_chunks_, last_seq_,
      put_seq_;                       // prepared on first use
  std::map<std::string, int> leads_;  // role -> the locked file (TryLead)
  std::unordered_map<std::string, int64_t> cluster_ids_;
  const std::pair<const std::string, int64_t>* last_cluster_ = nullptr;  // into cluster_ids_
  // What HistoryChangedSinceLastAsked saw last.
  bool asked_ = false;
  int64_t seen_generation_ = 0;
};

}  // namespace

bool HistoryChangedSinceLastAsked(Store& store) { return store.HistoryChangedSinceLastAsked(); }

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return Status::IoError(fmt::format("cannot create the folder {} for the store: {}",
                                         parent.string(), ec.message()));
    }
  }
  sqlite3* raw = nullptr;
  // NOMUTEX: a Store is used by one thread at a time (store.h), so SQLite's per-call mutex
  // would only cost time (it was 17% of a report's scan).
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  SqliteDb db(raw);
  if (rc != SQLITE_OK) {
    return Status::IoError(fmt::format("cannot open the store {}: {}", path,
                                       raw != nullptr ? sqlite3_errmsg(raw) : "out of memory"));
  }
  auto store = std::make_unique<SqliteStore>(std::move(db), path);
  Status st = store->Init();
  if (!st.ok()) {
    if (st.message().find("file is not a database") != std::string::npos) {
      return Status::BadInput(
          fmt::format("{} is not a rightsize store (not an SQLite file)", path));
    }
    return st;
  }
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace rightsize

#include "store/postgres_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace rightsize {
namespace {

// Each migration takes the schema from version i to i + 1. Never edit a released step: add one.
// Version 1 is SQLite's version 8 (the same tables; `user` is user_name, a reserved word here).
// Text compares bytewise (COLLATE "C"), as in SQLite, whatever the database's locale: the same
// sort orders, and keys compared without the locale's strcoll.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  id BIGSERIAL PRIMARY KEY,  -- the job list's tie-break and a scan's page key
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, source TEXT COLLATE "C",
  submit_time BIGINT, start_time BIGINT, end_time BIGINT,
  user_name TEXT COLLATE "C", grp TEXT COLLATE "C", account TEXT COLLATE "C",
  partition TEXT COLLATE "C", qos TEXT COLLATE "C", job_name TEXT COLLATE "C",
  req_cpus DOUBLE PRECISION, req_mem_bytes BIGINT, req_mem_per_unit_bytes BIGINT,
  req_mem_scope BIGINT, req_gpus BIGINT, req_gpu_type TEXT COLLATE "C", time_limit_s BIGINT,
  time_unlimited BIGINT, req_nodes BIGINT,
  alloc_cpus DOUBLE PRECISION, alloc_mem_bytes BIGINT, alloc_gpus BIGINT,
  alloc_gpu_type TEXT COLLATE "C",
  alloc_nodes BIGINT, node_list TEXT COLLATE "C",
  elapsed_s DOUBLE PRECISION, cpu_time_s DOUBLE PRECISION, peak_rss_bytes BIGINT,
  avg_rss_bytes BIGINT, gpu_util_pct DOUBLE PRECISION, peak_gpu_mem_bytes BIGINT,
  io_read_bytes BIGINT, io_write_bytes BIGINT, state TEXT COLLATE "C", exit_code BIGINT,
  signal BIGINT,
  gpu_energy_j DOUBLE PRECISION, cpu_energy_j DOUBLE PRECISION, node_energy_j DOUBLE PRECISION,
  UNIQUE (cluster, job_id)
);
CREATE TABLE clusters (name TEXT COLLATE "C" PRIMARY KEY);
CREATE TABLE cluster_meta (
  cluster TEXT COLLATE "C" NOT NULL, key TEXT COLLATE "C" NOT NULL,
  value TEXT COLLATE "C" NOT NULL, PRIMARY KEY (cluster, key)
);
CREATE TABLE models (
  cluster TEXT COLLATE "C" NOT NULL, version BIGINT NOT NULL, trained_at BIGINT NOT NULL,
  jobs BIGINT NOT NULL, blob BYTEA NOT NULL, PRIMARY KEY (cluster, version)
);
CREATE TABLE diagnoses (
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, created_at BIGINT NOT NULL,
  class TEXT COLLATE "C" NOT NULL, confidence DOUBLE PRECISION NOT NULL,
  document TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (cluster, job_id)
);
CREATE TABLE series_chunks (
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL,
  metric TEXT COLLATE "C" NOT NULL,
  t_start BIGINT NOT NULL, t_end BIGINT NOT NULL, n BIGINT NOT NULL, data BYTEA NOT NULL,
  PRIMARY KEY (cluster, job_id, metric, t_start)
);
CREATE TABLE stacks (
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL,
  stack TEXT COLLATE "C" NOT NULL, count BIGINT NOT NULL,
  PRIMARY KEY (cluster, job_id, stack)
);
CREATE TABLE agents (agent TEXT COLLATE "C" PRIMARY KEY, last_seq BIGINT NOT NULL);
CREATE TABLE predictions (
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, created_at BIGINT NOT NULL,
  document TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (cluster, job_id)
);
CREATE TABLE job_code (
  cluster TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, created_at BIGINT NOT NULL,
  code_hash TEXT COLLATE "C" NOT NULL, program TEXT COLLATE "C" NOT NULL,
  facts TEXT COLLATE "C" NOT NULL, estimate TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (cluster, job_id)
);
CREATE TABLE history_generation (n BIGINT NOT NULL);
INSERT INTO history_generation VALUES (0);
-- The history generation (store/changes.h): statement triggers read the changed rows from
-- transition tables, so a 100,000-row merge bumps it once, not once per row.
CREATE FUNCTION rightsize_history_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE history_generation SET n = n + 1; RETURN NULL; END $$;
CREATE FUNCTION rightsize_jobs_history_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM new_rows WHERE end_time IS NOT NULL) THEN
    UPDATE history_generation SET n = n + 1;
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION rightsize_jobs_history_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows w ON o.id = w.id
             WHERE (o.end_time IS NOT NULL OR w.end_time IS NOT NULL)
               AND ROW(o.*) IS DISTINCT FROM ROW(w.*)) THEN
    UPDATE history_generation SET n = n + 1;
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION rightsize_jobs_history_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM old_rows WHERE end_time IS NOT NULL) THEN
    UPDATE history_generation SET n = n + 1;
  END IF;
  RETURN NULL;
END $$;
)sql",
    // Version 2: the indexes of a user's and a program's past lead with the name, not the
    // cluster every row of a store shares: building them (a bulk load's end) sorts on the names'
    // first bytes instead of comparing whole keys, 20-25% less server CPU. The queries (cluster
    // and name equal, newest first) read them as before. Open makes them again (Migrate).
    R"sql(
DROP INDEX IF EXISTS jobs_by_user;
DROP INDEX IF EXISTS jobs_by_name;
)sql",
};
constexpr int kNumMigrations = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kNumMigrations == kPostgresSchemaVersion);

// The indexes `predict` reads a program's and a user's past by, and the one the job list pages
// by. A bulk load builds the i-th on connection i % 2: the two name-led ones take about as long
// each, the last a fifth of that, so the first and last go together.
constexpr const char* kSecondaryIndexList[] = {
    "CREATE INDEX IF NOT EXISTS jobs_by_name ON jobs (job_name, cluster, end_time)",
    "CREATE INDEX IF NOT EXISTS jobs_by_user ON jobs (user_name, cluster, end_time)",
    ("CREATE INDEX IF NOT EXISTS jobs_by_end ON jobs "
     "((coalesce(end_time, 9223372036854775807)), id)"),
};
const std::string kSecondaryIndexes = fmt::format("{};", fmt::join(kSecondaryIndexList, ";"));
constexpr const char* kDropSecondaryIndexes =
    "DROP INDEX IF EXISTS jobs_by_user; DROP INDEX IF EXISTS jobs_by_name; "
    "DROP INDEX IF EXISTS jobs_by_end;";
// A bulk load into a table of fewer jobs than this builds the secondary indexes once at its end.
constexpr int64_t kDeferIndexesBelow = 100'000;
constexpr const char* kHistoryTriggers = R"sql(
CREATE TRIGGER jobs_history_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION rightsize_jobs_history_insert();
CREATE TRIGGER jobs_history_update AFTER UPDATE ON jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION rightsize_jobs_history_update();
CREATE TRIGGER jobs_history_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION rightsize_jobs_history_delete();
CREATE TRIGGER job_code_history AFTER INSERT OR UPDATE OR DELETE ON job_code
  FOR EACH STATEMENT EXECUTE FUNCTION rightsize_history_bump();
)sql";
constexpr const char* kDropHistoryTriggers =
    "DROP TRIGGER IF EXISTS jobs_history_insert ON jobs; "
    "DROP TRIGGER IF EXISTS jobs_history_update ON jobs; "
    "DROP TRIGGER IF EXISTS jobs_history_delete ON jobs; "
    "DROP TRIGGER IF EXISTS job_code_history ON job_code;";

// The advisory lock key that serialises migrations of replicas opening at once.
constexpr int64_t kMigrationLock = 0x7269676874736d31;  // "rightsm1"

constexpr const char* kListOrderKey = "coalesce(end_time, 9223372036854775807)";

// As in the SQLite store: a chunk holds at most this span and this many samples of a series.
constexpr int64_t kChunkSpanMs = 600'000;
constexpr size_t kChunkSamples = 1024;

// A scan reads this many rows per query (bounded memory; other calls may run in between).
constexpr int kScanPage = 20'000;

// Series chunk encoding (as SqliteStore's): per sample, the time as a zigzag varint delta from
// the previous one, then the value as 8 little-endian bytes.
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

// False for a chunk that is not what EncodeChunk wrote: its samples are skipped, not misread.
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

// The job columns in kJobColumns order, with their types (for COPY's temporary table).
constexpr const char* kJobColumns =
    "cluster, job_id, source, submit_time, start_time, end_time, user_name, grp, account, "
    "partition, qos, job_name, req_cpus, req_mem_bytes, req_mem_per_unit_bytes, req_mem_scope, "
    "req_gpus, req_gpu_type, time_limit_s, time_unlimited, req_nodes, alloc_cpus, "
    "alloc_mem_bytes, alloc_gpus, alloc_gpu_type, alloc_nodes, node_list, elapsed_s, cpu_time_s, "
    "peak_rss_bytes, avg_rss_bytes, gpu_util_pct, peak_gpu_mem_bytes, io_read_bytes, "
    "io_write_bytes, state, exit_code, signal, gpu_energy_j, cpu_energy_j, node_energy_j";
constexpr int kNumJobColumns = 41;
constexpr const char* kLeanJobColumns =
    "cluster, job_id, NULL, submit_time, start_time, end_time, user_name, NULL, account, "
    "partition, NULL, job_name, req_cpus, req_mem_bytes, NULL, NULL, req_gpus, req_gpu_type, "
    "time_limit_s, time_unlimited, NULL, alloc_cpus, alloc_mem_bytes, alloc_gpus, "
    "alloc_gpu_type, NULL, NULL, elapsed_s, cpu_time_s, peak_rss_bytes, avg_rss_bytes, "
    "gpu_util_pct, peak_gpu_mem_bytes, NULL, NULL, state, NULL, NULL, gpu_energy_j, "
    "cpu_energy_j, node_energy_j";

std::vector<std::string> SplitColumns(std::string_view cols) {
  std::vector<std::string> out;
  while (!cols.empty()) {
    size_t comma = cols.find(',');
    std::string col(cols.substr(0, comma));
    cols = comma == std::string_view::npos ? std::string_view() : cols.substr(comma + 1);
    col.erase(0, col.find_first_not_of(' '));
    out.push_back(col);
  }
  return out;
}

// What re-storing a stored job writes, column by column: SqliteStore's MergeAssignments (see
// there and store.h) in PostgreSQL's words (IS NOT DISTINCT FROM for SQLite's IS, GREATEST,
// which skips NULLs, for coalesce(max(a, b), b, a)). Pairs of (column, value); `jobs` is the
// stored row, `excluded` the new one.
std::vector<std::pair<std::string, std::string>> MergeValues() {
  constexpr const char* kIsAgent = "(excluded.source IS NOT DISTINCT FROM 'agent')";
  constexpr const char* kWasAgent = "(jobs.source IS NOT DISTINCT FROM 'agent')";
  std::string agent_over_scheduler = fmt::format("({} AND NOT {})", kIsAgent, kWasAgent);
  std::string same_run = fmt::format(
      "({} <> {} OR jobs.start_time IS NULL OR excluded.start_time IS NULL OR "
      "abs(jobs.start_time - excluded.start_time) <= 60)",
      kIsAgent, kWasAgent);
  static const std::set<std::string> kFilled = {"elapsed_s",    "cpu_time_s",    "avg_rss_bytes",
                                                "gpu_util_pct", "io_read_bytes", "io_write_bytes",
                                                "gpu_energy_j", "cpu_energy_j",  "node_energy_j"};
  static const std::set<std::string> kPeaks = {"peak_rss_bytes", "peak_gpu_mem_bytes"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& col : SplitColumns(kJobColumns)) {
    if (col == "cluster" || col == "job_id") continue;
    std::string value;
    if (kPeaks.count(col) > 0) {
      value =
          fmt::format("CASE WHEN {1} THEN GREATEST(jobs.{0}, excluded.{0}) ELSE excluded.{0} END",
                      col, same_run);
    } else if (kFilled.count(col) > 0) {
      value = fmt::format(
          "CASE WHEN {1} THEN coalesce(jobs.{0}, excluded.{0}) WHEN {2} THEN "
          "coalesce(excluded.{0}, jobs.{0}) ELSE excluded.{0} END",
          col, agent_over_scheduler, same_run);
    } else {
      value = fmt::format("CASE WHEN {1} THEN jobs.{0} ELSE excluded.{0} END", col,
                          agent_over_scheduler);
    }
    out.emplace_back(col, std::move(value));
  }
  return out;
}

// "col = value, …" of MergeValues, for SET.
std::string MergeAssignments() {
  std::string out;
  for (const auto& [col, value] : MergeValues()) {
    out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", col, value);
  }
  return out;
}

// True where merging would change the stored row: a re-ingest of the same records writes
// nothing (no new row version, no index entries, no history bump).
std::string MergeChanges() {
  std::string stored, merged;
  for (const auto& [col, value] : MergeValues()) {
    stored += fmt::format("{}jobs.{}", stored.empty() ? "" : ", ", col);
    merged += fmt::format("{}{}", merged.empty() ? "" : ", ", value);
  }
  return fmt::format("ROW({}) IS DISTINCT FROM ROW({})", stored, merged);
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

// Parameters of one statement, all sent as text except bytea (binary).
class Params {
 public:
  Params& Text(std::string_view v) { return Add(std::string(v), 0); }
  Params& Int(int64_t v) { return Add(std::to_string(v), 0); }
  Params& Real(double v) { return Add(fmt::format("{}", v), 0); }
  Params& Bytes(std::string_view v) { return Add(std::string(v), 1); }
  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() {
    ptrs_.clear();
    for (const auto& v : values_) ptrs_.push_back(v.data());
    return ptrs_.data();
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& Add(std::string v, int format) {
    lengths_.push_back(static_cast<int>(v.size()));
    formats_.push_back(format);
    values_.push_back(std::move(v));
    return *this;
  }
  std::vector<std::string> values_;
  std::vector<const char*> ptrs_;
  std::vector<int> lengths_, formats_;
};

// A value of a text-format result row.
std::string Text(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col) != 0) return {};
  return std::string(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}
std::optional<int64_t> Int(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col) != 0) return std::nullopt;
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}
std::optional<int> SmallInt(const PGresult* r, int row, int col) {
  auto v = Int(r, row, col);
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}
std::optional<double> Real(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col) != 0) return std::nullopt;
  return std::strtod(PQgetvalue(r, row, col), nullptr);
}
std::string Bytea(const PGresult* r, int row, int col) {
  size_t n = 0;
  unsigned char* raw =
      PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col)), &n);
  if (raw == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(raw), n);
  PQfreemem(raw);
  return out;
}

// Fills `j` from columns [first, first + kNumJobColumns) of `row`, in kJobColumns order.
void ReadJob(const PGresult* r, int row, JobRecord& j) {
  int c = 0;
  j.cluster = Text(r, row, c++);
  j.job_id = Text(r, row, c++);
  j.source = Text(r, row, c++);
  j.submit_time = Int(r, row, c++);
  j.start_time = Int(r, row, c++);
  j.end_time = Int(r, row, c++);
  auto& q = j.request;
  q.user = Text(r, row, c++);
  q.group = Text(r, row, c++);
  q.account = Text(r, row, c++);
  q.partition = Text(r, row, c++);
  q.qos = Text(r, row, c++);
  q.job_name = Text(r, row, c++);
  q.cpus = Real(r, row, c++);
  q.memory_bytes = Int(r, row, c++);
  q.memory_per_unit_bytes = Int(r, row, c++);
  q.memory_scope = static_cast<MemoryScope>(Int(r, row, c++).value_or(0));
  q.gpus = SmallInt(r, row, c++);
  q.gpu_type = Text(r, row, c++);
  q.time_limit_s = Int(r, row, c++);
  q.time_unlimited = Int(r, row, c++).value_or(0) != 0;
  q.nodes = SmallInt(r, row, c++);
  auto& a = j.alloc;
  a.cpus = Real(r, row, c++);
  a.memory_bytes = Int(r, row, c++);
  a.gpus = SmallInt(r, row, c++);
  a.gpu_type = Text(r, row, c++);
  a.nodes = SmallInt(r, row, c++);
  a.node_list = Text(r, row, c++);
  auto& u = j.usage;
  u.elapsed_s = Real(r, row, c++);
  u.cpu_time_s = Real(r, row, c++);
  u.peak_rss_bytes = Int(r, row, c++);
  u.avg_rss_bytes = Int(r, row, c++);
  u.gpu_util_pct = Real(r, row, c++);
  u.peak_gpu_memory_bytes = Int(r, row, c++);
  u.io_read_bytes = Int(r, row, c++);
  u.io_write_bytes = Int(r, row, c++);
  j.outcome.state = Text(r, row, c++);
  j.outcome.exit_code = SmallInt(r, row, c++);
  j.outcome.signal = SmallInt(r, row, c++);
  u.gpu_energy_j = Real(r, row, c++);
  u.cpu_energy_j = Real(r, row, c++);
  u.node_energy_j = Real(r, row, c++);
}

// COPY's binary format (PostgreSQL's "COPY", "Binary Format"): a signature, then per row the
// field count and each field as a 32-bit length (-1 for NULL) and the value as the column's
// send function writes it: big-endian int8 and float8, text as its bytes. The server stores
// exactly these values without parsing text (int8in, float8in, the delimiter and escape scan),
// and the client formats no numbers and escapes nothing. NULL stands for an unknown, including
// empty text outside the key columns.
constexpr char kCopyBinaryHeader[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
constexpr size_t kCopyBinaryHeaderSize = sizeof kCopyBinaryHeader - 1;  // 11 + flags + extension
static_assert(kCopyBinaryHeaderSize == 19);
constexpr char kCopyBinaryTrailer[] = "\377\377";  // a field count of -1

// Writes one row at `out`, which has room for it (CopyRowSize).
class CopyRow {
 public:
  CopyRow(char* out, int16_t fields) : p_(out) { Put16(static_cast<uint16_t>(fields)); }
  void Text(const std::string& v, bool required = false) {
    if (v.empty() && !required) return Null();
    Put32(static_cast<uint32_t>(v.size()));
    std::memcpy(p_, v.data(), v.size());
    p_ += v.size();
  }
  void Int(std::optional<int64_t> v) {
    if (!v) return Null();
    Put32(8);
    Put64(static_cast<uint64_t>(*v));
  }
  void Int(std::optional<int> v) { Int(v ? std::optional<int64_t>(*v) : std::nullopt); }
  void Real(std::optional<double> v) {
    if (!v) return Null();
    Put32(8);
    Put64(std::bit_cast<uint64_t>(*v));
  }
  char* end() const { return p_; }

 private:
  void Null() { Put32(0xffffffffU); }
  void Put16(uint16_t v) {
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap16(v);
    std::memcpy(p_, &v, 2);
    p_ += 2;
  }
  void Put32(uint32_t v) {
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    std::memcpy(p_, &v, 4);
    p_ += 4;
  }
  void Put64(uint64_t v) {
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
    std::memcpy(p_, &v, 8);
    p_ += 8;
  }
  char* p_;
};

// The most bytes a row can take in CopyRow (a NULL takes fewer).
class CopyRowSize {
 public:
  void Text(const std::string& v, bool /*required*/ = false) { bytes_ += 4 + v.size(); }
  void Int(const auto& /*v*/) { bytes_ += 12; }
  void Real(const auto& /*v*/) { bytes_ += 12; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 2;
};

// A job's fields, in kJobColumns order, to a CopyRow or a CopyRowSize.
template <typename Row>
void JobFields(const JobRecord& j, Row& b) {
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
  b.Int(std::optional<int64_t>(static_cast<int64_t>(r.memory_scope)));
  b.Int(r.gpus);
  b.Text(r.gpu_type);
  b.Int(r.time_limit_s);
  b.Int(std::optional<int64_t>(r.time_unlimited ? 1 : 0));
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

// Appends a job's row to COPY binary data.
void CopyJob(const JobRecord& j, std::string* out) {
  CopyRowSize size;
  JobFields(j, size);
  const size_t used = out->size();
  out->resize(used + size.bytes());
  CopyRow row(out->data() + used, kNumJobColumns);
  JobFields(j, row);
  out->resize(static_cast<size_t>(row.end() - out->data()));
}

// A job's (cluster, job id), as views of a record's strings: sets of a batch's jobs hold no
// copies (the records outlive them).
using JobKey = std::pair<std::string_view, std::string_view>;
struct JobKeyHash {
  size_t operator()(const JobKey& k) const {
    return std::hash<std::string_view>()(k.second) ^ (std::hash<std::string_view>()(k.first) * 31);
  }
};

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

class PostgresStore final : public Store {
 public:
  // `url` is shown in messages (no password); `conninfo` opens a bulk load's extra connections.
  PostgresStore(Conn conn, std::string url, std::string conninfo)
      : conn_(std::move(conn)), url_(std::move(url)), conninfo_(std::move(conninfo)) {}
  ~PostgresStore() override {
    // The server frees a closed session's locks only once its backend has exited: unlock first,
    // so that another replica's next try takes the roles at once.
    if (!leads_.empty()) PQclear(PQexec(conn_.get(), "SELECT pg_advisory_unlock_all()"));
  }
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  Status Init() {
    RS_RETURN_IF_ERROR(Exec("SET client_min_messages = warning"));
    RS_RETURN_IF_ERROR(Migrate());
    RS_RETURN_IF_ERROR(Session());
    MakeMergeStatements();
    return Status::Ok();
  }

  void MakeMergeStatements() {
    update_sql_ = fmt::format(
        "UPDATE jobs SET {} FROM jobs_in AS excluded WHERE jobs.cluster = excluded.cluster AND "
        "jobs.job_id = excluded.job_id AND {}",
        MergeAssignments(), MergeChanges());
    // What the UPDATE did not find (new jobs of a round that also names stored ones, or one
    // deleted meanwhile): inserted, or merged if another writer has stored it by now.
    merge_sql_ = fmt::format(
        "INSERT INTO jobs ({0}) SELECT {0} FROM jobs_in AS s WHERE NOT EXISTS (SELECT 1 FROM "
        "jobs WHERE jobs.cluster = s.cluster AND jobs.job_id = s.job_id) ON CONFLICT (cluster, "
        "job_id) DO UPDATE SET {1}",
        kJobColumns, MergeAssignments());
  }

  Status UpsertJobs(std::span<const JobRecord> jobs) override {
    if (jobs.empty()) return Status::Ok();
    if (!bulk_writers_.empty() && jobs.size() >= kSplitBatchesFrom) return UpsertSplit(jobs);
    std::vector<const JobRecord*> all;
    all.reserve(jobs.size());
    for (const JobRecord& j : jobs) all.push_back(&j);
    return UpsertPart(all);
  }

  Status ScanJobs(const JobFilter& filter,
                  const std::function<bool(const JobRecord&)>& fn) override {
    Params p;
    std::string where = Where(filter, &p);
    const char* cols = filter.lean ? kLeanJobColumns : kJobColumns;
    JobRecord job;
    if (filter.newest > 0) {
      RS_ASSIGN_OR_RETURN(
          Result r, Query(fmt::format("SELECT {} FROM jobs{} {} end_time IS NOT NULL ORDER BY "
                                      "end_time DESC LIMIT {}",
                                      cols, where, where.empty() ? "WHERE" : "AND", filter.newest),
                          p, "scanning jobs"));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        ReadJob(r.get(), i, job);
        if (!fn(job)) break;
      }
      return Status::Ok();
    }
    // Pages along the primary key: bounded memory, and `fn` may call the store meanwhile.
    int key_param = p.size() + 1;
    std::string sql =
        fmt::format("SELECT {}, id FROM jobs{} {} id > ${}::bigint ORDER BY id LIMIT {}", cols,
                    where, where.empty() ? "WHERE" : "AND", key_param, kScanPage);
    int64_t after = 0;
    while (true) {
      Params page = p;
      page.Int(after);
      RS_ASSIGN_OR_RETURN(Result r, Query(sql, page, "scanning jobs"));
      int n = PQntuples(r.get());
      for (int i = 0; i < n; ++i) {
        ReadJob(r.get(), i, job);
        if (!fn(job)) return Status::Ok();
      }
      if (n < kScanPage) return Status::Ok();
      after = Int(r.get(), n - 1, kNumJobColumns).value_or(0);
    }
  }

  StatusOr<JobRecord> GetJob(const std::string& cluster, const std::string& job_id) override {
    Result r;
    if (cluster.empty()) {
      RS_ASSIGN_OR_RETURN(
          r, Query(fmt::format("SELECT {} FROM jobs WHERE job_id = $1 AND cluster IN (SELECT name "
                               "FROM clusters) ORDER BY coalesce(end_time, 0) DESC, cluster "
                               "COLLATE \"C\" LIMIT 1",
                               kJobColumns),
                   Params().Text(job_id), "reading job " + job_id));
    } else {
      RS_ASSIGN_OR_RETURN(
          r,
          Query(fmt::format("SELECT {} FROM jobs WHERE cluster = $1 AND job_id = $2", kJobColumns),
                Params().Text(cluster).Text(job_id), "reading job " + job_id));
    }
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound(
          cluster.empty() ? fmt::format("no job {} in {}", job_id, url_)
                          : fmt::format("no job {} of cluster {} in {}", job_id, cluster, url_));
    }
    JobRecord job;
    ReadJob(r.get(), 0, job);
    return job;
  }

  StatusOr<int64_t> CountJobs(const JobFilter& filter) override {
    Params p;
    std::string where = Where(filter, &p);
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT count(*) FROM jobs" + where, p, "counting jobs"));
    return Int(r.get(), 0, 0).value_or(0);
  }

  StatusOr<JobList> ListJobs(const JobFilter& filter, const JobPage& page) override {
    Params p;
    std::string cond = Where(filter, &p);
    if (page.after) {
      // The cursor is "<sort key>:<row id>" of the previous page's last job.
      int64_t key = 0, id = 0;
      char extra = 0;
      if (std::sscanf(page.after->c_str(), "%" SCNd64 ":%" SCNd64 "%c", &key, &id, &extra) != 2) {
        return Status::InvalidArgument(
            "cursor: expected the next_cursor of a previous page, got '" + *page.after + "'");
      }
      int a = p.size() + 1;
      cond += fmt::format("{} ({k} < ${a}::bigint OR ({k} = ${a}::bigint AND id < ${b}::bigint))",
                          cond.empty() ? " WHERE" : " AND", fmt::arg("k", kListOrderKey),
                          fmt::arg("a", a), fmt::arg("b", a + 1));
      p.Int(key).Int(id);
    }
    int limit = std::clamp(page.limit, 1, 10000);
    RS_ASSIGN_OR_RETURN(
        Result r, Query(fmt::format("SELECT {0}, {1}, id FROM jobs{2} ORDER BY {1} DESC, id DESC "
                                    "LIMIT {3}",
                                    kJobColumns, kListOrderKey, cond, limit + 1),
                        p, "listing jobs"));
    JobList out;
    int n = PQntuples(r.get());
    for (int i = 0; i < n && i < limit; ++i) ReadJob(r.get(), i, out.jobs.emplace_back());
    if (n > limit) {
      out.next = fmt::format("{}:{}", Int(r.get(), limit - 1, kNumJobColumns).value_or(0),
                             Int(r.get(), limit - 1, kNumJobColumns + 1).value_or(0));
    }
    return out;
  }

  StatusOr<std::vector<std::string>> Clusters() override {
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT name FROM clusters ORDER BY name COLLATE \"C\"",
                                        Params(), "listing clusters"));
    std::vector<std::string> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(Text(r.get(), i, 0));
    return out;
  }

  Status PutClusterMeta(const std::string& cluster,
                        const std::map<std::string, std::string>& meta) override {
    if (meta.empty()) return Status::Ok();
    return InTransaction([&]() -> Status {
      for (const auto& [key, value] : meta) {
        RS_RETURN_IF_ERROR(Query("INSERT INTO cluster_meta (cluster, key, value) VALUES ($1, $2, "
                                 "$3) ON CONFLICT (cluster, key) DO UPDATE SET value = "
                                 "excluded.value",
                                 Params().Text(cluster).Text(key).Text(value),
                                 "storing cluster metadata")
                               .status());
      }
      return Status::Ok();
    });
  }

  StatusOr<std::map<std::string, std::string>> GetClusterMeta(const std::string& cluster) override {
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT key, value FROM cluster_meta WHERE cluster = $1",
                                        Params().Text(cluster), "reading cluster metadata"));
    std::map<std::string, std::string> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out[Text(r.get(), i, 0)] = Text(r.get(), i, 1);
    return out;
  }

  // The history triggers go (the generation is bumped once, at the end). The secondary indexes
  // go only while the table is small (fewer than kDeferIndexesBelow jobs): one sorted rebuild at
  // the end then costs less than keeping them row by row, while rebuilding a large table after
  // each day's ingest would cost more (and other replicas' `predict` keeps them meanwhile).
  // Commits do not wait for the WAL flush meanwhile (synchronous_commit = off): a crash loses at
  // most the last batches, of an ingest that had not reported success; the final transaction
  // commits synchronously, which makes every batch before it durable.
  Status SetBulkLoad(bool on) override {
    if (on) {
      RS_RETURN_IF_ERROR(Exec("SET synchronous_commit = off"));
      RS_RETURN_IF_ERROR(Exec(kDropHistoryTriggers));
      RS_ASSIGN_OR_RETURN(Result r, Query(fmt::format("SELECT count(*) FROM (SELECT 1 FROM jobs "
                                                      "LIMIT {}) AS j",
                                                      kDeferIndexesBelow),
                                          Params(), "counting jobs"));
      indexes_dropped_ = Int(r.get(), 0, 0).value_or(0) < kDeferIndexesBelow;
      if (indexes_dropped_) RS_RETURN_IF_ERROR(Exec(kDropSecondaryIndexes));
      OpenBulkWriters();
      return Status::Ok();
    }
    if (indexes_dropped_ && !bulk_writers_.empty()) BuildSecondaryIndexes();
    indexes_dropped_ = false;
    bulk_writers_.clear();
    RS_RETURN_IF_ERROR(Exec("RESET synchronous_commit"));
    return InTransaction([&]() -> Status {
      RS_RETURN_IF_ERROR(Exec(kSecondaryIndexes));
      RS_RETURN_IF_ERROR(Exec(kDropHistoryTriggers));
      RS_RETURN_IF_ERROR(Exec(kHistoryTriggers));
      return Exec("UPDATE history_generation SET n = n + 1");
    });
  }

  StatusOr<int64_t> PutModel(const std::string& cluster, int64_t trained_at, int64_t jobs,
                             const std::string& blob) override {
    int64_t version = 0;
    RS_RETURN_IF_ERROR(InTransaction([&]() -> Status {
      // Replicas training at once number their models one after the other.
      RS_RETURN_IF_ERROR(Query("SELECT pg_advisory_xact_lock($1::bigint)",
                               Params().Int(static_cast<int64_t>(Fnv1a("model:" + cluster))),
                               "numbering the model")
                             .status());
      RS_ASSIGN_OR_RETURN(
          Result r,
          Query("INSERT INTO models (cluster, version, trained_at, jobs, blob) SELECT "
                "$1, coalesce(max(version), 0) + 1, $2, $3, $4 FROM models WHERE "
                "cluster = $1 RETURNING version",
                Params().Text(cluster).Int(trained_at).Int(jobs).Bytes(blob), "storing the model"));
      version = Int(r.get(), 0, 0).value_or(0);
      // Older versions stay for comparison and rollback, but not forever.
      return Query("DELETE FROM models WHERE cluster = $1 AND version <= $2",
                   Params().Text(cluster).Int(version - kModelsKept), "pruning old models")
          .status();
    }));
    return version;
  }

  StatusOr<StoredModel> GetModel(const std::string& cluster, int64_t version) override {
    RS_ASSIGN_OR_RETURN(
        Result r, Query("SELECT version, trained_at, jobs, blob FROM models WHERE cluster = $1 "
                        "AND ($2::bigint = 0 OR version = $2::bigint) ORDER BY version DESC "
                        "LIMIT 1",
                        Params().Text(cluster).Int(version), "reading the model"));
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound(
          version == 0
              ? fmt::format("no model for cluster {} in {}: run `rightsize train`", cluster, url_)
              : fmt::format("no model version {} for cluster {} in {}", version, cluster, url_));
    }
    StoredModel m;
    m.cluster = cluster;
    m.version = Int(r.get(), 0, 0).value_or(0);
    m.trained_at = Int(r.get(), 0, 1).value_or(0);
    m.jobs = Int(r.get(), 0, 2).value_or(0);
    m.blob = Bytea(r.get(), 0, 3);
    return m;
  }

  StatusOr<int64_t> LatestModelVersion(const std::string& cluster) override {
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT max(version) FROM models WHERE cluster = $1",
                                        Params().Text(cluster), "reading the model version"));
    auto v = Int(r.get(), 0, 0);
    if (!v) {
      return Status::NotFound(
          fmt::format("no model for cluster {} in {}: run `rightsize train`", cluster, url_));
    }
    return *v;
  }

  Status PutDiagnosis(const StoredDiagnosis& d) override {
    // A diagnosis never gives way to a weaker one (as in the SQLite store).
    return Query(
               "INSERT INTO diagnoses (cluster, job_id, created_at, class, confidence, document) "
               "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (cluster, job_id) DO UPDATE SET "
               "created_at = excluded.created_at, class = excluded.class, confidence = "
               "excluded.confidence, document = excluded.document WHERE diagnoses.class = "
               "'unknown' OR (excluded.class <> 'unknown' AND excluded.confidence >= "
               "diagnoses.confidence)",
               Params()
                   .Text(d.cluster)
                   .Text(d.job_id)
                   .Int(d.created_at)
                   .Text(d.cls)
                   .Real(d.confidence)
                   .Text(d.document),
               "storing the diagnosis")
        .status();
  }

  StatusOr<StoredDiagnosis> GetDiagnosis(const std::string& cluster,
                                         const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(Result r,
                        Query("SELECT created_at, class, confidence, document FROM "
                              "diagnoses WHERE cluster = $1 AND job_id = $2",
                              Params().Text(cluster).Text(job_id), "reading the diagnosis"));
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound(fmt::format("no diagnosis of job {} ({})", job_id, cluster));
    }
    StoredDiagnosis d;
    d.cluster = cluster;
    d.job_id = job_id;
    d.created_at = Int(r.get(), 0, 0).value_or(0);
    d.cls = Text(r.get(), 0, 1);
    d.confidence = Real(r.get(), 0, 2).value_or(0);
    d.document = Text(r.get(), 0, 3);
    return d;
  }

  StatusOr<bool> WriteTelemetry(const std::string& agent, int64_t seq,
                                std::span<const JobTelemetry> jobs) override {
    return RetryingAborted<StatusOr<bool>>([&] { return WriteTelemetryOnce(agent, seq, jobs); });
  }

  StatusOr<std::vector<bool>> WriteTelemetryGroup(std::span<const TelemetryWrite> writes) override {
    return RetryingAborted<StatusOr<std::vector<bool>>>(
        [&] { return WriteTelemetryGroupOnce(writes); });
  }

  StatusOr<bool> WriteTelemetryOnce(const std::string& agent, int64_t seq,
                                    std::span<const JobTelemetry> jobs) {
    RS_RETURN_IF_ERROR(Exec("BEGIN"));
    auto st = WriteTelemetryInTransaction(agent, seq, jobs);
    if (!st.ok() || !*st) {
      (void)Exec("ROLLBACK");
      known_clusters_.clear();
      return st;
    }
    RS_RETURN_IF_ERROR(Exec("COMMIT"));
    return true;
  }

  StatusOr<std::vector<bool>> WriteTelemetryGroupOnce(std::span<const TelemetryWrite> writes) {
    RS_RETURN_IF_ERROR(Exec("BEGIN"));
    std::vector<bool> stored;
    for (const TelemetryWrite& w : writes) {
      auto st = WriteTelemetryInTransaction(w.agent, w.seq, w.jobs);
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        known_clusters_.clear();
        return st.status();
      }
      stored.push_back(*st);
    }
    RS_RETURN_IF_ERROR(Exec("COMMIT"));
    return stored;
  }

  StatusOr<int64_t> LastTelemetrySeq(const std::string& agent) override {
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT last_seq FROM agents WHERE agent = $1",
                                        Params().Text(agent), "reading the agent's last batch"));
    if (PQntuples(r.get()) == 0) return int64_t{0};
    return Int(r.get(), 0, 0).value_or(0);
  }

  Status ReadSamples(const std::string& cluster, const std::string& job_id,
                     const std::string& metric, int64_t from_ms, int64_t to_ms,
                     const std::function<void(const Sample&)>& fn) override {
    RS_ASSIGN_OR_RETURN(
        Result r,
        Query("SELECT t_start, data FROM series_chunks WHERE cluster = $1 AND job_id = $2 AND "
              "metric = $3 AND t_start >= $4::bigint AND t_start <= $5::bigint AND t_end >= "
              "$6::bigint ORDER BY t_start",
              Params()
                  .Text(cluster)
                  .Text(job_id)
                  .Text(metric)
                  .Int(from_ms > INT64_MIN + kChunkSpanMs ? from_ms - kChunkSpanMs : from_ms)
                  .Int(to_ms)
                  .Int(from_ms),
              "reading samples"));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      int64_t t_start = Int(r.get(), i, 0).value_or(0);
      std::string data = Bytea(r.get(), i, 1);
      DecodeChunk(reinterpret_cast<const unsigned char*>(data.data()), data.size(), t_start,
                  [&](const Sample& x) {
                    if (x.t_ms > to_ms) return false;
                    if (x.t_ms >= from_ms) fn(x);
                    return true;
                  });
    }
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> SampleMetrics(const std::string& cluster,
                                                   const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(Result r,
                        Query("SELECT DISTINCT metric COLLATE \"C\" AS m FROM "
                              "series_chunks WHERE cluster = $1 AND job_id = $2 ORDER "
                              "BY m",
                              Params().Text(cluster).Text(job_id), "listing a job's metrics"));
    std::vector<std::string> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(Text(r.get(), i, 0));
    return out;
  }

  StatusOr<std::map<std::string, int64_t>> GetStacks(const std::string& cluster,
                                                     const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT stack, count FROM stacks WHERE cluster = $1 AND "
                                        "job_id = $2",
                                        Params().Text(cluster).Text(job_id), "reading stacks"));
    std::map<std::string, int64_t> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out[Text(r.get(), i, 0)] = Int(r.get(), i, 1).value_or(0);
    }
    return out;
  }

  Status PutJobCode(const StoredJobCode& c) override {
    return Query(
               "INSERT INTO job_code (cluster, job_id, created_at, code_hash, program, facts, "
               "estimate) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (cluster, job_id) DO "
               "UPDATE SET created_at = excluded.created_at, code_hash = excluded.code_hash, "
               "program = excluded.program, facts = excluded.facts, estimate = "
               "excluded.estimate",
               Params()
                   .Text(c.cluster)
                   .Text(c.job_id)
                   .Int(c.created_at)
                   .Text(c.code_hash)
                   .Text(c.program)
                   .Text(c.facts)
                   .Text(c.estimate),
               "storing a job's code")
        .status();
  }

  StatusOr<StoredJobCode> GetJobCode(const std::string& cluster,
                                     const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(Result r,
                        Query(fmt::format("SELECT {} FROM job_code WHERE cluster = $1 "
                                          "AND job_id = $2",
                                          kJobCodeColumns),
                              Params().Text(cluster).Text(job_id), "reading a job's code"));
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound(fmt::format("no code stored for job {} ({})", job_id, cluster));
    }
    return JobCodeRow(r.get(), 0);
  }

  Status ScanJobCode(const std::string& cluster,
                     const std::function<bool(const StoredJobCode&)>& fn) override {
    RS_ASSIGN_OR_RETURN(
        Result r, Query(fmt::format("SELECT {} FROM job_code WHERE cluster = $1", kJobCodeColumns),
                        Params().Text(cluster), "reading the jobs' code"));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      if (!fn(JobCodeRow(r.get(), i))) break;
    }
    return Status::Ok();
  }

  StatusOr<bool> TryLead(const std::string& role) override {
    if (leads_.count(role) > 0) return true;
    auto key = static_cast<int64_t>(Fnv1a("rightsize-lead:" + role));
    RS_ASSIGN_OR_RETURN(Result r, Query("SELECT pg_try_advisory_lock($1::bigint)",
                                        Params().Int(key), "taking the " + role + " role"));
    if (Text(r.get(), 0, 0) != "t") return false;
    leads_.insert(role);
    return true;
  }

  Status PutPrediction(const StoredPrediction& p) override {
    return Query(
               "INSERT INTO predictions (cluster, job_id, created_at, document) VALUES ($1, $2, "
               "$3, $4) ON CONFLICT (cluster, job_id) DO UPDATE SET created_at = "
               "excluded.created_at, document = excluded.document",
               Params().Text(p.cluster).Text(p.job_id).Int(p.created_at).Text(p.document),
               "storing the prediction")
        .status();
  }

  StatusOr<StoredPrediction> GetPrediction(const std::string& cluster,
                                           const std::string& job_id) override {
    RS_ASSIGN_OR_RETURN(Result r,
                        Query("SELECT created_at, document FROM predictions WHERE "
                              "cluster = $1 AND job_id = $2",
                              Params().Text(cluster).Text(job_id), "reading the prediction"));
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound(fmt::format("no prediction for job {} ({})", job_id, cluster));
    }
    StoredPrediction p;
    p.cluster = cluster;
    p.job_id = job_id;
    p.created_at = Int(r.get(), 0, 0).value_or(0);
    p.document = Text(r.get(), 0, 1);
    return p;
  }

  // store/changes.h.
  bool HistoryChangedSinceLastAsked() override {
    auto r = Query("SELECT n FROM history_generation", Params(), "reading the history");
    if (!r.ok() || PQntuples(r->get()) == 0) return true;
    int64_t generation = Int(r->get(), 0, 0).value_or(0);
    bool changed = !asked_ || generation != seen_generation_;
    asked_ = true;
    seen_generation_ = generation;
    return changed;
  }

 private:
  static constexpr int64_t kModelsKept = 5;
  static constexpr const char* kJobCodeColumns =
      "cluster, job_id, created_at, code_hash, program, facts, estimate";

  static StoredJobCode JobCodeRow(const PGresult* r, int row) {
    StoredJobCode c;
    c.cluster = Text(r, row, 0);
    c.job_id = Text(r, row, 1);
    c.created_at = Int(r, row, 2).value_or(0);
    c.code_hash = Text(r, row, 3);
    c.program = Text(r, row, 4);
    c.facts = Text(r, row, 5);
    c.estimate = Text(r, row, 6);
    return c;
  }

  // Stores jobs in one transaction, run again when the server aborted it for a deadlock with
  // another writer (RetryingAborted).
  Status UpsertPart(std::span<const JobRecord* const> jobs) {
    return RetryingAborted<Status>([&]() -> Status {
      RS_RETURN_IF_ERROR(Exec("BEGIN"));
      Status st = UpsertInTransaction(jobs);
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        known_clusters_.clear();
        return st;
      }
      return Exec("COMMIT");
    });
  }

  // Stores the batch in rounds of distinct jobs (a statement may touch a row once; a later
  // record of a job is merged after its earlier one, in order).
  Status UpsertInTransaction(std::span<const JobRecord* const> jobs) {
    for (const JobRecord* j : jobs) {
      if (known_clusters_.count(j->cluster) > 0) continue;
      RS_RETURN_IF_ERROR(Query("INSERT INTO clusters (name) VALUES ($1) ON CONFLICT DO NOTHING",
                               Params().Text(j->cluster), "storing cluster " + j->cluster)
                             .status());
      known_clusters_.insert(j->cluster);
    }
    std::unordered_set<JobKey, JobKeyHash> keys;
    keys.reserve(jobs.size());
    std::vector<const JobRecord*> round;
    for (const JobRecord* j : jobs) {
      JobKey key(j->cluster, j->job_id);
      if (!keys.insert(key).second) {
        RS_RETURN_IF_ERROR(UpsertRound(round));
        round.clear();
        keys.clear();
        keys.insert(key);
      }
      round.push_back(j);
    }
    return UpsertRound(round);
  }

  // A bulk load's extra connections (SetBulkLoad): PostgreSQL runs each connection's statements
  // in one backend process, so one connection uses one core of the server however many it has.
  // Where the server refuses a connection (max_connections) the load goes on with fewer.
  void OpenBulkWriters() {
    bulk_writers_.clear();
    for (int i = 1; i < kBulkConnections; ++i) {
      Conn conn(PQconnectdb(conninfo_.c_str()));
      if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) break;
      auto writer = std::make_unique<PostgresStore>(std::move(conn), url_, conninfo_);
      if (!writer->Exec("SET client_min_messages = warning").ok() || !writer->Session().ok() ||
          !writer->Exec("SET synchronous_commit = off").ok()) {
        break;
      }
      writer->MakeMergeStatements();
      writer->known_clusters_ = known_clusters_;
      bulk_writers_.push_back(std::move(writer));
    }
  }

  // The dropped indexes, built at once, one per connection (each CREATE INDEX takes a lock that
  // lets the others run). Best effort: SetBulkLoad's transaction makes what is still missing.
  void BuildSecondaryIndexes() {
    const size_t n = bulk_writers_.size() + 1;
    auto build = [&](PostgresStore& on, size_t first) {
      for (size_t k = first; k < std::size(kSecondaryIndexList); k += n) {
        if (!on.Exec(kSecondaryIndexList[k]).ok()) return;
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back(build, std::ref(*bulk_writers_[i - 1]), i);
    build(*this, 0);
    for (auto& t : threads) t.join();
  }

  // A bulk load's batch, split over this connection and the extra ones, each part in its own
  // transaction on its own thread: every record of a job goes to the same connection, in order,
  // and the next batch starts once every part is committed, so a job's records are stored in the
  // order given, once each. The parts are runs of the batch (the first half to one connection,
  // the second to the other; a job's later records follow its first): a scheduler's job ids
  // ascend through its files, so the two backends insert into distant pages of the (cluster,
  // job_id) index. Split by a hash of the job they inserted neighbouring keys into the same
  // pages, and waited on each other's page locks: 20 % more server CPU for the same rows
  // (docs/scale-postgres.md). Concurrent writers of the same jobs (another ingest,
  // an agent) meet as on one connection: a stored job fails the COPY and is merged, a deadlock
  // is retried. An error in one part leaves the other parts committed, as a batch committed
  // before a failed one stays (run the ingest again: re-ingesting replaces).
  Status UpsertSplit(std::span<const JobRecord> jobs) {
    for (const JobRecord& j : jobs) {
      if (known_clusters_.count(j.cluster) > 0) continue;
      RS_RETURN_IF_ERROR(Query("INSERT INTO clusters (name) VALUES ($1) ON CONFLICT DO NOTHING",
                               Params().Text(j.cluster), "storing cluster " + j.cluster)
                             .status());
      known_clusters_.insert(j.cluster);
      for (auto& w : bulk_writers_) w->known_clusters_.insert(j.cluster);
    }
    const size_t n = bulk_writers_.size() + 1;
    const size_t run = (jobs.size() + n - 1) / n;
    std::vector<std::vector<const JobRecord*>> parts(n);
    for (auto& part : parts) part.reserve(run + run / 8);
    std::unordered_map<JobKey, size_t, JobKeyHash> part_of;  // a job's first record's part
    part_of.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobRecord& j = jobs[i];
      auto it = part_of.try_emplace(JobKey(j.cluster, j.job_id), i / run).first;
      parts[it->second].push_back(&j);
    }
    std::vector<Status> results(n);
    std::vector<std::thread> threads;
    threads.reserve(n - 1);
    for (size_t i = 1; i < n; ++i) {
      threads.emplace_back([&, i] { results[i] = bulk_writers_[i - 1]->UpsertPart(parts[i]); });
    }
    results[0] = UpsertPart(parts[0]);
    for (auto& t : threads) t.join();
    for (const Status& st : results) RS_RETURN_IF_ERROR(st);
    return Status::Ok();
  }

  // Stores jobs of distinct keys. While the jobs written are new ones (a first ingest, the
  // next day's jobs), a round is copied straight into `jobs` under a savepoint: no staging, no
  // ON CONFLICT (whose speculative insertion costs twice a plain insert's server CPU). A round
  // naming a stored job fails that COPY (a unique violation): the savepoint is rolled back, and
  // that round and the next ones go through the staging table, one UPDATE of the stored rows the
  // merge changes (a re-ingest of the same records writes nothing) and one INSERT of the rest,
  // until a round is new jobs only again.
  Status UpsertRound(std::span<const JobRecord* const> round) {
    if (round.empty()) return Status::Ok();
    std::string what = fmt::format("storing job {}/{}", round[0]->cluster, round[0]->job_id);
    // One buffer for every round: its pages are faulted in once, not once a round.
    std::string& data = copy_buffer_;
    data.assign(kCopyBinaryHeader, kCopyBinaryHeaderSize);
    for (const JobRecord* j : round) CopyJob(*j, &data);
    data.append(kCopyBinaryTrailer, 2);
    if (all_new_) {
      RS_RETURN_IF_ERROR(Exec("SAVEPOINT new_jobs"));
      std::string sqlstate;
      Status st = CopyIn(fmt::format("COPY jobs ({}) FROM STDIN (FORMAT binary)", kJobColumns),
                         data, what, &sqlstate);
      if (st.ok()) return Exec("RELEASE SAVEPOINT new_jobs");
      if (sqlstate != "23505") return st;  // not unique_violation: a stored job
      RS_RETURN_IF_ERROR(Exec("ROLLBACK TO SAVEPOINT new_jobs"));
      all_new_ = false;
    }
    RS_RETURN_IF_ERROR(Exec("TRUNCATE jobs_in"));
    RS_RETURN_IF_ERROR(CopyIn(
        fmt::format("COPY jobs_in ({}) FROM STDIN (FORMAT binary)", kJobColumns), data, what));
    RS_RETURN_IF_ERROR(Query(update_sql_, Params(), "merging the jobs").status());
    RS_ASSIGN_OR_RETURN(Result r, Query(merge_sql_, Params(), "merging the jobs"));
    all_new_ =
        std::strtoll(PQcmdTuples(r.get()), nullptr, 10) == static_cast<long long>(round.size());
    return Status::Ok();
  }

  StatusOr<bool> WriteTelemetryInTransaction(const std::string& agent, int64_t seq,
                                             std::span<const JobTelemetry> jobs) {
    // One statement decides and records: a replica holding a newer batch of this agent makes
    // this one wait for its commit, then see it.
    RS_ASSIGN_OR_RETURN(Result r,
                        Query("INSERT INTO agents (agent, last_seq) VALUES ($1, $2) ON CONFLICT "
                              "(agent) DO UPDATE SET last_seq = excluded.last_seq WHERE "
                              "agents.last_seq < excluded.last_seq RETURNING last_seq",
                              Params().Text(agent).Int(seq), "storing the agent's last batch"));
    if (PQntuples(r.get()) == 0) return false;  // a replayed or reordered batch
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
      auto existing = GetJob(jt.job.cluster, jt.job.job_id);
      if (!existing.ok() && existing.status().code() != Status::Code::kNotFound) {
        return existing.status();
      }
      // As in the SQLite store: an unchanged running job's record is not rewritten, and a
      // record of another source (sacct's) is written to only once the job has ended.
      if (!existing.ok() || (existing->source == jt.job.source && !(*existing == jt.job)) ||
          (existing->source != jt.job.source && jt.job.end_time.has_value())) {
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
        RS_RETURN_IF_ERROR(
            Query("INSERT INTO stacks (cluster, job_id, stack, count) VALUES ($1, "
                  "$2, $3, $4) ON CONFLICT (cluster, job_id, stack) DO UPDATE SET "
                  "count = stacks.count + excluded.count",
                  Params().Text(jt.job.cluster).Text(jt.job.job_id).Text(stack).Int(count),
                  "storing stacks")
                .status());
      }
    }
    std::vector<const JobRecord*> written;
    written.reserve(records.size());
    for (const JobRecord& j : records) written.push_back(&j);
    if (!written.empty()) RS_RETURN_IF_ERROR(UpsertInTransaction(written));
    return true;
  }

  // Stores one chunk of a series; a chunk stored before under the same start is merged with it
  // (as in the SQLite store: only a sample equal in time and value to a stored one is dropped).
  Status PutChunk(const std::string& cluster, const std::string& job_id, const std::string& metric,
                  std::span<const Sample> part, std::string* blob) {
    EncodeChunk(part, blob);
    RS_ASSIGN_OR_RETURN(
        Result r,
        Query("INSERT INTO series_chunks (cluster, job_id, metric, t_start, t_end, n, data) VALUES "
              "($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (cluster, job_id, metric, t_start) DO "
              "NOTHING RETURNING 1",
              Params()
                  .Text(cluster)
                  .Text(job_id)
                  .Text(metric)
                  .Int(part.front().t_ms)
                  .Int(part.back().t_ms)
                  .Int(static_cast<int64_t>(part.size()))
                  .Bytes(*blob),
              "storing samples"));
    if (PQntuples(r.get()) > 0) return Status::Ok();
    RS_ASSIGN_OR_RETURN(
        Result old, Query("SELECT data FROM series_chunks WHERE cluster = $1 AND job_id = $2 AND "
                          "metric = $3 AND t_start = $4 FOR UPDATE",
                          Params().Text(cluster).Text(job_id).Text(metric).Int(part.front().t_ms),
                          "storing samples"));
    std::vector<Sample> merged(part.begin(), part.end());
    if (PQntuples(old.get()) > 0) {
      std::string data = Bytea(old.get(), 0, 0);
      DecodeChunk(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
                  part.front().t_ms, [&](const Sample& x) {
                    merged.push_back(x);
                    return true;
                  });
    }
    std::sort(merged.begin(), merged.end(), [](const Sample& a, const Sample& b) {
      return a.t_ms != b.t_ms ? a.t_ms < b.t_ms : a.value < b.value;
    });
    merged.erase(std::unique(merged.begin(), merged.end(),
                             [](const Sample& a, const Sample& b) {
                               return a.t_ms == b.t_ms && a.value == b.value;
                             }),
                 merged.end());
    EncodeChunk(merged, blob);
    return Query(
               "UPDATE series_chunks SET t_end = $5, n = $6, data = $7 WHERE cluster = $1 AND "
               "job_id = $2 AND metric = $3 AND t_start = $4",
               Params()
                   .Text(cluster)
                   .Text(job_id)
                   .Text(metric)
                   .Int(part.front().t_ms)
                   .Int(merged.back().t_ms)
                   .Int(static_cast<int64_t>(merged.size()))
                   .Bytes(*blob),
               "storing samples")
        .status();
  }

  // Builds the WHERE clause of a filter, its values as parameters after those already in `p`.
  static std::string Where(const JobFilter& f, Params* p) {
    std::vector<std::string> conds;
    auto add_text = [&](const char* col, const std::string& v) {
      if (v.empty()) return;
      p->Text(v);
      conds.push_back(fmt::format("{} = ${}", col, p->size()));
    };
    add_text("cluster", f.cluster);
    add_text("user_name", f.user);
    add_text("account", f.account);
    add_text("partition", f.partition);
    add_text("job_name", f.job_name);
    if (f.ended_since) {
      p->Int(*f.ended_since);
      conds.push_back(fmt::format("end_time >= ${}::bigint", p->size()));
    }
    if (f.ended_until) {
      p->Int(*f.ended_until);
      conds.push_back(fmt::format("end_time < ${}::bigint", p->size()));
    }
    add_text("state", f.state);
    if (f.efficiency_below) {
      p->Real(*f.efficiency_below);
      conds.push_back(fmt::format(
          "(cpu_time_s / NULLIF(elapsed_s * coalesce(alloc_cpus, req_cpus), 0) < ${0}::float8 "
          "OR coalesce(peak_rss_bytes, avg_rss_bytes)::float8 / NULLIF(coalesce(alloc_mem_bytes, "
          "req_mem_bytes), 0) < ${0}::float8)",
          p->size()));
    }
    std::string where;
    for (size_t i = 0; i < conds.size(); ++i) where += (i == 0 ? " WHERE " : " AND ") + conds[i];
    return where;
  }

  Status Migrate() {
    return InTransaction([&]() -> Status {
      RS_RETURN_IF_ERROR(Query("SELECT pg_advisory_xact_lock($1::bigint)",
                               Params().Int(kMigrationLock), "locking the schema")
                             .status());
      RS_RETURN_IF_ERROR(
          Exec("CREATE TABLE IF NOT EXISTS rightsize_schema (version INTEGER NOT NULL)"));
      RS_ASSIGN_OR_RETURN(Result r, Query("SELECT max(version) FROM rightsize_schema", Params(),
                                          "reading the schema version"));
      int version = static_cast<int>(Int(r.get(), 0, 0).value_or(0));
      if (version > kPostgresSchemaVersion) {
        return Status::InvalidArgument(fmt::format(
            "{} has schema version {}, newer than this rightsize understands ({}); upgrade "
            "rightsize",
            url_, version, kPostgresSchemaVersion));
      }
      for (int v = version; v < kPostgresSchemaVersion; ++v) {
        Status st = Exec(kMigrations[v]);
        if (!st.ok()) {
          return st.WithContext(fmt::format("migrating the schema to version {}", v + 1));
        }
      }
      if (version < kPostgresSchemaVersion) {
        RS_RETURN_IF_ERROR(Exec("DELETE FROM rightsize_schema"));
        RS_RETURN_IF_ERROR(Query("INSERT INTO rightsize_schema (version) VALUES ($1)",
                                 Params().Int(kPostgresSchemaVersion), "storing the schema version")
                               .status());
      }
      // A bulk load that died left the indexes and the history triggers dropped (SetBulkLoad),
      // and the generation not bumped for what it wrote. CREATE INDEX locks the table even when
      // the index exists (IF NOT EXISTS), waiting for the writes in flight and holding up those
      // behind it: a replica starting on a busy store stalled the others' writes. Only missing
      // indexes are made.
      RS_ASSIGN_OR_RETURN(Result ix, Query("SELECT count(*) FROM pg_indexes WHERE schemaname = "
                                           "current_schema() AND tablename = 'jobs' AND indexname "
                                           "IN ('jobs_by_user', 'jobs_by_name', 'jobs_by_end')",
                                           Params(), "reading the indexes"));
      if (Int(ix.get(), 0, 0).value_or(0) < 3) RS_RETURN_IF_ERROR(Exec(kSecondaryIndexes));
      RS_ASSIGN_OR_RETURN(Result t, Query("SELECT count(*) FROM pg_trigger WHERE tgname = "
                                          "'jobs_history_insert' AND tgrelid = 'jobs'::regclass",
                                          Params(), "reading the triggers"));
      if (Int(t.get(), 0, 0).value_or(0) > 0) return Status::Ok();
      RS_RETURN_IF_ERROR(Exec(kDropHistoryTriggers));
      RS_RETURN_IF_ERROR(Exec(kHistoryTriggers));
      return Exec("UPDATE history_generation SET n = n + 1");
    });
  }

  Status InTransaction(const std::function<Status()>& body) {
    return RetryingAborted<Status>([&] { return InTransactionOnce(body); });
  }

  // PostgreSQL aborts one of two transactions that wait on each other (deadlock_detected, 40P01)
  // or, in a stricter isolation level, that conflict (serialization_failure, 40001): replicas of
  // one store writing the same agents' and jobs' rows in different orders (each replica's group
  // commit holds several agents' batches) meet it under load. The aborted transaction was rolled
  // back whole, so `attempt` (a whole transaction, BEGIN to COMMIT or ROLLBACK) runs again after
  // a random pause, at most kTransactionTries times; any other failure returns at once.
  static constexpr int kTransactionTries = 8;
  template <typename T>
  T RetryingAborted(const std::function<T()>& attempt) {
    for (int tries = 1;; ++tries) {
      last_sqlstate_.clear();
      T result = attempt();
      const bool aborted = last_sqlstate_ == "40P01" || last_sqlstate_ == "40001";
      if (result.ok() || !aborted || tries == kTransactionTries) return result;
      // Long enough for the transaction that went on to finish (run at once, this one would
      // meet it again), doubling: 10-20 ms, 20-40 ms, ... 1.3-2.6 s.
      thread_local std::mt19937 rng{std::random_device{}()};
      const int base_ms = 10 << (tries - 1);
      std::uniform_int_distribution<int> pause_ms(base_ms, 2 * base_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    }
  }

  Status InTransactionOnce(const std::function<Status()>& body) {
    RS_RETURN_IF_ERROR(Exec("BEGIN"));
    Status st = body();
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
    return Exec("COMMIT");
  }

  Status Error(const std::string& what, const PGresult* r = nullptr) const {
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    last_sqlstate_ = state != nullptr ? state : "";
    std::string msg = r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_.get());
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (msg.empty()) msg = PQerrorMessage(conn_.get());
    return Status::IoError(fmt::format("{}: {}: {}", url_, what, msg));
  }

  // A connection the server dropped (a restart, a failover, an idle timeout) is opened again
  // before the next statement, except inside a transaction: what it wrote is gone with it, so
  // the call fails (and the caller's ROLLBACK ends it). The roles it held are freed by the server.
  Status EnsureConnected() {
    if (PQstatus(conn_.get()) == CONNECTION_OK) return Status::Ok();
    if (in_transaction_) return Error("the connection to the database was lost");
    PQreset(conn_.get());
    if (PQstatus(conn_.get()) != CONNECTION_OK) return Error("reconnecting");
    leads_.clear();
    known_clusters_.clear();
    return Session();
  }

  // What every new connection needs: quiet notices, the temporary table COPY fills.
  Status Session() {
    RS_RETURN_IF_ERROR(Exec("SET client_min_messages = warning"));
    return Exec(fmt::format(
        "CREATE TEMP TABLE IF NOT EXISTS jobs_in ON COMMIT DELETE ROWS AS SELECT {} FROM jobs "
        "WITH NO DATA",
        kJobColumns));
  }

  static bool Failed(const PGresult* r) {
    auto status = PQresultStatus(r);
    return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
  }

  // After a failed statement: true when the server had dropped the connection outside a
  // transaction (or at its BEGIN) and it is open again, so the statement can run once more.
  bool Dropped(bool beginning) {
    if (PQstatus(conn_.get()) == CONNECTION_OK || (in_transaction_ && !beginning)) return false;
    bool was = in_transaction_;
    in_transaction_ = false;
    bool ok = EnsureConnected().ok();
    in_transaction_ = was;
    return ok;
  }

  // Runs SQL without parameters (several statements allowed).
  Status Exec(const std::string& sql) {
    if (sql == "BEGIN") {
      RS_RETURN_IF_ERROR(EnsureConnected());
      in_transaction_ = true;
    } else if (sql == "COMMIT" || sql == "ROLLBACK") {
      in_transaction_ = false;
      if (PQstatus(conn_.get()) != CONNECTION_OK) {
        return sql == "ROLLBACK" ? Status::Ok() : Error("the connection to the database was lost");
      }
    } else {
      RS_RETURN_IF_ERROR(EnsureConnected());
    }
    Result r(PQexec(conn_.get(), sql.c_str()));
    if (Failed(r.get()) && Dropped(sql == "BEGIN")) r.reset(PQexec(conn_.get(), sql.c_str()));
    auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return Error("running " + sql.substr(0, sql.find_first_of(" \n")), r.get());
    }
    return Status::Ok();
  }

  StatusOr<Result> Query(const std::string& sql, Params p, const std::string& what) {
    RS_RETURN_IF_ERROR(EnsureConnected());
    const char* const* values = p.values();
    Result r(PQexecParams(conn_.get(), sql.c_str(), p.size(), nullptr, values, p.lengths(),
                          p.formats(), 0));
    if (Failed(r.get()) && Dropped(false)) {
      r.reset(PQexecParams(conn_.get(), sql.c_str(), p.size(), nullptr, values, p.lengths(),
                           p.formats(), 0));
    }
    auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Error(what, r.get());
    return r;
  }

  // COPY … FROM STDIN of `data`; a failure's SQLSTATE goes to `sqlstate` where given.
  Status CopyIn(const std::string& sql, const std::string& data, const std::string& what,
                std::string* sqlstate = nullptr) {
    RS_RETURN_IF_ERROR(EnsureConnected());
    auto state_of = [&](const PGresult* r) {
      const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      if (sqlstate != nullptr && code != nullptr) *sqlstate = code;
    };
    Result start(PQexec(conn_.get(), sql.c_str()));
    if (PQresultStatus(start.get()) != PGRES_COPY_IN) {
      state_of(start.get());
      return Error(what, start.get());
    }
    constexpr size_t kChunk = size_t{512} * 1024;
    bool ok = true;
    for (size_t off = 0; ok && off < data.size(); off += kChunk) {
      size_t n = std::min(kChunk, data.size() - off);
      ok = PQputCopyData(conn_.get(), data.data() + off, static_cast<int>(n)) == 1;
    }
    if (PQputCopyEnd(conn_.get(), ok ? nullptr : "sending failed") != 1) ok = false;
    Status st = Status::Ok();
    while (Result r{PQgetResult(conn_.get())}) {
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK && st.ok()) {
        state_of(r.get());
        st = Error(what, r.get());
      }
    }
    if (!ok && st.ok()) st = Error(what);
    return st;
  }

  // Connections of a bulk load (this one and kBulkConnections - 1 more), and the smallest batch
  // split over them.
  static constexpr int kBulkConnections = 2;
  static constexpr size_t kSplitBatchesFrom = 1000;

  Conn conn_;
  std::string url_;       // without the password
  std::string conninfo_;  // as given, password included: never shown
  std::vector<std::unique_ptr<PostgresStore>> bulk_writers_;  // SetBulkLoad's extra connections
  std::string update_sql_;        // the staged jobs' changes to stored rows
  bool all_new_ = true;           // the last round stored only new jobs (UpsertRound)
  bool indexes_dropped_ = false;  // by SetBulkLoad(true), to build at its end
  std::string merge_sql_;         // the staged jobs the UPDATE did not find
  std::string copy_buffer_;       // UpsertRound's COPY data, kept for the next round
  std::set<std::string> leads_;   // roles held (TryLead)
  std::unordered_set<std::string> known_clusters_;  // in the clusters table
  bool in_transaction_ = false;                     // between BEGIN and COMMIT / ROLLBACK
  mutable std::string last_sqlstate_;  // of the last failed statement (RetryingAborted)
  // What HistoryChangedSinceLastAsked saw last.
  bool asked_ = false;
  int64_t seen_generation_ = 0;
};

}  // namespace

std::string RedactPostgresUrl(const std::string& url) {
  std::string out = url;
  // URI form: scheme://user:password@host…
  size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    size_t start = scheme + 3;
    size_t at = out.find('@', start);
    size_t slash = out.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=… in the query string or a keyword/value string.
  for (size_t pos = out.find("password="); pos != std::string::npos;
       pos = out.find("password=", pos + 1)) {
    size_t start = pos + 9;
    size_t end = out.find_first_of("& ", start);
    if (end == std::string::npos) end = out.size();
    out.replace(start, end - start, "***");
  }
  return out;
}

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url) {
  std::string shown = RedactPostgresUrl(url);
  Conn conn(PQconnectdb(url.c_str()));
  if (conn == nullptr) return Status::IoError("cannot connect to " + shown + ": out of memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn.get());
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return Status::IoError(fmt::format("cannot connect to the store {}: {}", shown, msg));
  }
  auto store = std::make_unique<PostgresStore>(std::move(conn), shown, url);
  RS_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace rightsize

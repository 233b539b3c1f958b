// SqliteStore: the embedded Store backend, one SQLite file in WAL mode.
//
// The schema is versioned with PRAGMA user_version and migrated forward on open; a file written
// by a newer rightsize is refused rather than damaged. Not thread-safe (one per thread).
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rightsize {

// Owns a sqlite3 connection. Copy deleted; move leaves the source empty.
class SqliteDb {
 public:
  SqliteDb() = default;
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  SqliteDb(SqliteDb&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  ~SqliteDb() noexcept;
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// Owns a prepared statement. Copy deleted; move leaves the source empty.
class SqliteStmt {
 public:
  SqliteStmt() = default;
  explicit SqliteStmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  SqliteStmt(SqliteStmt&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  SqliteStmt& operator=(SqliteStmt&& other) noexcept;
  ~SqliteStmt() noexcept;
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// The schema version this build writes.
constexpr int kSqliteSchemaVersion = 8;

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace rightsize

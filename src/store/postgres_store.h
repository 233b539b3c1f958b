// PostgresStore: the Store backend for many nodes and several server replicas, one PostgreSQL
// database reached by a postgresql:// (or postgres://) URL through libpq.
//
// One connection per Store object (not thread-safe, as every Store), and during a bulk load
// (SetBulkLoad) one more: each batch is split by job over the two, one transaction and one thread
// each, a job's records all on one connection in order. The schema is versioned in
// the table rightsize_schema and migrated forward on open, under an advisory lock so that
// replicas opening at once migrate once; a database written by a newer rightsize is refused.
// Statements are parameterised (no SQL is built from user strings). UpsertJobs copies new jobs
// straight into the table with COPY, and merges stored ones (COPY into a temporary table, one
// UPDATE of the changed rows) with the same usage rules as SQLite (store.h); SetBulkLoad defers
// the secondary indexes of a small table and the WAL flush of each batch (see there). TryLead
// holds a session advisory lock per role, released when the connection closes. Errors name the
// URL without its password.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace rightsize {

// The schema version this build writes.
constexpr int kPostgresSchemaVersion = 2;

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url);

// `url` with its password (user:password@, password=…) replaced by "***", for messages.
std::string RedactPostgresUrl(const std::string& url);

}  // namespace rightsize

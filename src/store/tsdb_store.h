// TsdbStore: a Store whose per-job samples live in a Prometheus-compatible TSDB.
//
// A decorator over another Store (SQLite or PostgreSQL): everything but samples (jobs, stacks,
// diagnoses, models, the agents' batch numbers) goes to the inner store unchanged. The samples
// of WriteTelemetry / WriteTelemetryGroup are sent by Prometheus remote write 1.0 (a
// snappy-compressed protobuf WriteRequest) to StoreOptions::tsdb_write_url, and ReadSamples /
// SampleMetrics read them back with PromQL from StoreOptions::tsdb_query_url (/api/v1/query,
// /api/v1/series): VictoriaMetrics, Prometheus (--web.enable-remote-write-receiver), Grafana
// Mimir, Thanos receive + query.
//
// Naming and encoding: remote_write/remote_write.h (shared with `agent --tsdb-write-url`, whose
// batches come without samples: their samples are in the TSDB already). A job's metric
// "memory_bytes" is the series rightsize_job_memory_bytes{cluster="…",job_id="…"}.
//
// A batch is never half stored and never silently lost: known replays (seq not above the inner
// store's LastTelemetrySeq) are skipped, the others' samples are remote-written FIRST, and only
// once the TSDB accepted them are the records, stacks and seq committed to the inner store. A
// TSDB that refuses (any non-2xx) or cannot be reached is an IoError and nothing is committed:
// the server answers 503 and the agent sends the batch again, and a sample the TSDB got twice
// (same time, same value) is read back once. Prometheus rejects samples older than its head
// (about an hour) unless its out_of_order_time_window is set: see docs/scale-tsdb.md.
//
// Not thread-safe (one per thread, as every Store); its HTTP connections are kept alive.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace rightsize {

// Wraps `inner`: samples go to the TSDB named by `options` (both URLs must be set: http:// or
// https://). InvalidArgument for a malformed URL; nothing is contacted until first use.
StatusOr<std::unique_ptr<Store>> OpenTsdbStore(std::unique_ptr<Store> inner,
                                               const StoreOptions& options);

}  // namespace rightsize

// Whether a store's history may have changed: for caches of the past read from it that must
// stay exact (predict/predict.h, PredictCache: a finished job stored now is seen by the next
// prediction).
//
// HistoryChangedSinceLastAsked answers, for one connection, whether a finished job's row or a
// job's code may have been written since the previous call on that same connection, by any
// connection or process: the SQLite store keeps a generation that triggers bump on such writes
// only (a running job's progress, series, predictions and diagnoses leave it), so a cache of
// the past outlives the agents' telemetry. A bulk load (Store::SetBulkLoad) bumps it once, at
// its end: what it writes reaches such caches then. The first call on a connection, a failed
// check and a backend that cannot tell answer true (the caller then reads afresh). Not
// thread-safe, as the Store.
//
// Why this is enough for a cache shared by a pool of connections: a cache that is emptied
// whenever any connection's call says true, and whose entries are checked after such a call on
// the connection about to use them, never returns an entry older than a commit: the first call
// on each connection after the commit says true, and every later call on it comes after that
// one emptied the cache.
#pragma once

#include "store/store.h"

namespace rightsize {

bool HistoryChangedSinceLastAsked(Store& store);

}  // namespace rightsize

// Whether a store may have changed: for caches of what was read from it that must stay exact
// (predict/predict.h, PredictCache: a finished job stored now is seen by the next prediction).
//
// ChangedSinceLastAsked answers, for one connection, whether anything may have been committed
// to the store since the previous call on that same connection: by another connection or
// process (SQLite's PRAGMA data_version) or by this one (sqlite3_total_changes). Any table
// counts, not only jobs. The first call on a connection, a failed check and a backend that
// cannot tell answer true (the caller then reads afresh). Not thread-safe, as the Store.
//
// Why this is enough for a cache shared by a pool of connections: a cache that is emptied
// whenever any connection's call says true, and whose entries are checked after such a call on
// the connection about to use them, never returns an entry older than a commit: the first call
// on each connection after the commit says true, and every later call on it comes after that
// one emptied the cache.
#pragma once

#include "store/store.h"

namespace rightsize {

bool ChangedSinceLastAsked(Store& store);

}  // namespace rightsize

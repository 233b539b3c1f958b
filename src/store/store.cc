#include "store/store.h"

#include "store/postgres_store.h"
#include "store/sqlite_store.h"
#include "store/tsdb_store.h"

namespace rightsize {

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& location,
                                           const StoreOptions& options) {
  std::unique_ptr<Store> store;
  if (location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0) {
    RS_ASSIGN_OR_RETURN(store, OpenPostgresStore(location));
  } else {
    RS_ASSIGN_OR_RETURN(store, OpenSqliteStore(location));
  }
  // Samples in a TSDB: a decorator over whichever backend opened (store/tsdb_store.h).
  if (!options.tsdb_write_url.empty() || !options.tsdb_query_url.empty()) {
    return OpenTsdbStore(std::move(store), options);
  }
  return store;
}

std::string DefaultStorePath(const std::function<std::optional<std::string>(const char*)>& env) {
  if (auto db = env("RIGHTSIZE_DB"); db && !db->empty()) return *db;
  if (auto xdg = env("XDG_DATA_HOME"); xdg && !xdg->empty()) {
    return *xdg + "/rightsize/rightsize.db";
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    return *home + "/.local/share/rightsize/rightsize.db";
  }
  return "rightsize.db";
}

}  // namespace rightsize

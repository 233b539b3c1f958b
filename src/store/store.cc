#include "store/store.h"

#include <algorithm>
#include <cmath>

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

bool BucketGrid::WholeMs() const {
  double step_ms = step_s * 1000;
  return static_cast<double>(from_ms) == from_s * 1000 && step_ms >= 1 &&
         step_ms == std::round(step_ms);
}

int64_t BucketGrid::StepMs() const { return std::llround(step_s * 1000); }

int64_t BucketGrid::BucketOf(int64_t t_ms) const {
  if (WholeMs()) {
    int64_t d = t_ms - from_ms, step = StepMs();
    return d >= 0 ? d / step : -((-d + step - 1) / step);
  }
  return static_cast<int64_t>(std::floor((static_cast<double>(t_ms) / 1000.0 - from_s) / step_s));
}

void BucketFolder::Add(const Sample& s) {
  int64_t b = grid_.BucketOf(s.t_ms);
  if (n_ == 0 || b != bucket_) {
    Finish();
    bucket_ = b;
    n_ = 0;
    sum_ = 0;
    max_ = s.value;
  }
  ++n_;
  sum_ += s.value;
  max_ = std::max(max_, s.value);
}

void BucketFolder::Finish() {
  if (n_ > 0) out_->push_back({bucket_, sum_ / static_cast<double>(n_), max_});
  n_ = 0;
}

Status Store::ReadBuckets(const std::string& cluster, const std::string& job_id,
                          const std::vector<std::string>& metrics, const BucketGrid& grid,
                          std::vector<std::vector<SampleBucket>>* out) {
  out->assign(metrics.size(), {});
  for (size_t i = 0; i < metrics.size(); ++i) {
    BucketFolder fold(grid, &(*out)[i]);
    RS_RETURN_IF_ERROR(ReadSamples(cluster, job_id, metrics[i], grid.from_ms, grid.to_ms,
                                   [&](const Sample& s) { fold.Add(s); }));
    fold.Finish();
  }
  return Status::Ok();
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

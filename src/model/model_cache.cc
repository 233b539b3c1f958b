#include "model/model_cache.h"

namespace rightsize {

StatusOr<ModelCache::Entry> ModelCache::Get(const std::string& cluster, int64_t version,
                                            const std::function<StatusOr<ModelSet>()>& load) {
  {
    MutexLock lock(mu_);
    auto it = by_cluster_.find(cluster);
    if (it != by_cluster_.end() && it->second.set->version == version) return it->second;
  }
  // Loaded without the lock: other clusters' predictions go on meanwhile. Two threads may both
  // load a new version; the second keeps the first's copy, so that every user of a version
  // locks the same mutex.
  auto loaded = load();
  if (!loaded.ok()) return loaded.status();
  Entry e{std::make_shared<const ModelSet>(std::move(*loaded)),
          std::make_shared<std::shared_mutex>()};
  MutexLock lock(mu_);
  ++loads_;
  auto& slot = by_cluster_[cluster];
  if (!slot.set || slot.set->version < e.set->version) slot = e;
  return slot;
}

int64_t ModelCache::loads() const {
  MutexLock lock(mu_);
  return loads_;
}

}  // namespace rightsize

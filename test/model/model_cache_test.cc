#include "model/model_cache.h"

#include <gtest/gtest.h>

namespace rightsize {
namespace {

// The server keeps each cluster's newest model: read once per version, replaced as soon as
// `rightsize train` stores a newer one, and a model that fails to load is not kept.
TEST(ModelCache, ReadsEachVersionOnceAndFollowsRetraining) {
  ModelCache cache;
  int reads = 0;
  auto model = [&](int64_t version) {
    return [&reads, version]() -> StatusOr<ModelSet> {
      ++reads;
      ModelSet s;
      s.cluster = "c";
      s.version = version;
      return s;
    };
  };
  for (int i = 0; i < 3; ++i) {
    auto e = cache.Get("c", 1, model(1));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->set->version, 1);
  }
  EXPECT_EQ(reads, 1);
  auto newer = cache.Get("c", 2, model(2));
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->set->version, 2);
  EXPECT_EQ(reads, 2);
  auto other = cache.Get("d", 1, model(1));  // another cluster has its own
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(reads, 3);
  auto bad = cache.Get(
      "c", 3, []() -> StatusOr<ModelSet> { return Status::InvalidArgument("corrupt model"); });
  EXPECT_FALSE(bad.ok());
  auto still = cache.Get("c", 2, model(2));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(reads, 3);  // the failure did not evict version 2
  EXPECT_EQ(cache.loads(), 3);
}

// Two server threads that miss the cache at once both load the version; they must end up
// with one lock, or a prediction holding the first copy's lock could lose it under its feet
// (the crash the admission load test found at a cold start).
TEST(ModelCache, TwoLoadsOfOneVersionShareOneLock) {
  ModelCache cache;
  auto plain = []() -> StatusOr<ModelSet> {
    ModelSet s;
    s.version = 1;
    return s;
  };
  StatusOr<ModelCache::Entry> inner = Status::Internal("not run");
  // The outer load is still running when the other thread's load finishes and is cached.
  auto outer = cache.Get("c", 1, [&]() -> StatusOr<ModelSet> {
    inner = cache.Get("c", 1, plain);
    return plain();
  });
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(outer->mu.get(), inner->mu.get());
  EXPECT_EQ(outer->set.get(), inner->set.get());
  auto later = cache.Get("c", 1, plain);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->mu.get(), inner->mu.get());
}

}  // namespace
}  // namespace rightsize

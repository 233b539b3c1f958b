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

}  // namespace
}  // namespace rightsize

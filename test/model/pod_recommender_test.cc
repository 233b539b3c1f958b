#include "model/pod_recommender.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/pod_replay.h"

namespace rightsize {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kT0 = 1662858720;  // a timestamp of the Alibaba trace

TEST(ExponentialBucketsTest, MatchesVpaMemoryBuckets) {
  ExponentialBuckets b;  // 10 MB first bucket, ×1.05, up to 1 TB
  // ceil(log(1e12 × 0.05 / 1e7 + 1) / log 1.05) + 1
  EXPECT_EQ(b.NumBuckets(), 176);
  EXPECT_EQ(b.FindBucket(5e6), 0);
  EXPECT_EQ(b.FindBucket(1e7), 1);
  EXPECT_DOUBLE_EQ(b.BucketStart(1), 1e7);
  EXPECT_DOUBLE_EQ(b.BucketStart(2), 1e7 * 2.05);
  EXPECT_EQ(b.FindBucket(2e12), b.NumBuckets() - 1);
  for (double v : {3e7, 1.234e9, 4.5e10}) {
    int k = b.FindBucket(v);
    EXPECT_LE(b.BucketStart(k), v);
    EXPECT_GT(b.BucketStart(k + 1), v);
  }
}

TEST(DecayingHistogramTest, PercentileIsTheEndOfTheBucket) {
  DecayingHistogram h(ExponentialBuckets{}, 24 * 3600);
  EXPECT_TRUE(h.IsEmpty());
  EXPECT_EQ(h.Percentile(0.9), 0);
  h.AddSample(1e9, 1, kT0);
  ExponentialBuckets b;
  EXPECT_DOUBLE_EQ(h.Percentile(0.9), b.BucketStart(b.FindBucket(1e9) + 1));
  EXPECT_GT(h.Percentile(0.9), 1e9);
  EXPECT_LT(h.Percentile(0.9), 1e9 * 1.06);
}

TEST(DecayingHistogramTest, NewerSamplesWeighTwicePerHalfLife) {
  const double half_life = 3600;
  // Equal weights: the median lands in the smaller value's bucket.
  DecayingHistogram flat(ExponentialBuckets{}, half_life);
  flat.AddSample(1e8, 1, kT0);
  flat.AddSample(1e9, 1, kT0);
  EXPECT_LT(flat.Percentile(0.5), 1e9);
  // The larger value one half-life later weighs 2:1, so the median moves to it, and the
  // 30th percentile stays on the older one (1/3 of the weight).
  DecayingHistogram h(ExponentialBuckets{}, half_life);
  h.AddSample(1e8, 1, kT0);
  h.AddSample(1e9, 1, kT0 + half_life);
  EXPECT_GT(h.Percentile(0.5), 1e9);
  EXPECT_LT(h.Percentile(0.3), 1e9);
  EXPECT_NEAR(h.DecayFactor(kT0 + half_life) / h.DecayFactor(kT0), 2.0, 1e-12);
  EXPECT_NEAR(h.DecayFactor(kT0 + 3 * half_life) / h.DecayFactor(kT0), 8.0, 1e-12);
}

TEST(DecayingHistogramTest, RenormalisingForgetsWhatDecayedAway) {
  const double half_life = 3600;
  DecayingHistogram h(ExponentialBuckets{}, half_life);
  h.AddSample(1e9, 1, kT0);
  h.AddSample(1e8, 1, kT0 + 10 * half_life);
  EXPECT_LT(h.Percentile(0.5), 1e9);  // the newer 1e8 weighs 1024 times more
  // 150 half-lives later the reference moves (VPA's maxDecayExponent is 100), the stored
  // weights are rescaled by 2^-150, fall under epsilon and are dropped; nothing overflows.
  h.AddSample(5e9, 1, kT0 + 150 * half_life);
  EXPECT_TRUE(std::isfinite(h.total_weight()));
  ExponentialBuckets b;
  EXPECT_DOUBLE_EQ(h.Percentile(0.01), b.BucketStart(b.FindBucket(5e9) + 1));
}

TEST(VpaMemoryRecommenderTest, OnePeakPerDayTimesMargin) {
  VpaMemoryRecommender vpa;
  EXPECT_FALSE(vpa.Recommend());
  vpa.Add(kT0, 10 * kGiB);
  vpa.Add(kT0 + 60, 20 * kGiB);  // replaces the day's peak
  vpa.Add(kT0 + 120, 5 * kGiB);  // below the peak: nothing changes
  ExponentialBuckets b;
  double end20 = b.BucketStart(b.FindBucket(20 * kGiB) + 1);
  EXPECT_DOUBLE_EQ(*vpa.Recommend(), end20 * 1.15);
  // Nine days of one 1 GiB peak each, then the 20 GiB day decays below the 10 % tail.
  for (int day = 1; day <= 9; ++day) vpa.Add(kT0 + day * 86400 + 1, 1 * kGiB);
  EXPECT_LT(*vpa.Recommend(), 2 * kGiB);
}

TEST(VpaMemoryRecommenderTest, NeverBelowThePodMinimum) {
  VpaMemoryRecommender vpa;
  vpa.Add(kT0, 1e6);
  EXPECT_DOUBLE_EQ(*vpa.Recommend(), 250.0 * 1024 * 1024);
}

TEST(VpaMemoryRecommenderTest, APeakOfZeroIsNotReplacedWithinItsInterval) {
  // As container.go does: `oldMaxMem != 0 && sample.Usage > oldMaxMem`.
  VpaMemoryRecommender vpa;
  vpa.Add(kT0, 0);
  vpa.Add(kT0 + 60, 30 * kGiB);
  EXPECT_DOUBLE_EQ(*vpa.Recommend(), 250.0 * 1024 * 1024);
  vpa.Add(kT0 + 86400 + 60, 30 * kGiB);  // the next interval opens with its own peak
  EXPECT_GT(*vpa.Recommend(), 30 * kGiB * 1.15);
}

TEST(KrrSimpleRecommenderTest, MaxTimesBufferOnceThereAreEnoughPoints) {
  KrrSimpleRecommender krr;
  for (int i = 0; i < 99; ++i) krr.Add(kT0 + 60.0 * i, (i == 50 ? 8 : 4) * kGiB);
  EXPECT_FALSE(krr.Recommend(kT0 + 6000)) << "KRR answers nothing under 100 points";
  krr.Add(kT0 + 60.0 * 99, 4 * kGiB);
  EXPECT_DOUBLE_EQ(*krr.Recommend(kT0 + 6000), 8 * kGiB * 1.15);
  // Past the 14-day window the 8 GiB sample no longer counts (and neither do the others).
  EXPECT_FALSE(krr.Recommend(kT0 + 15 * 86400));
}

TEST(PeakHeadroomRecommenderTest, HeadroomShrinksAsThePeakHolds) {
  PeakHeadroomRecommender rs(PeakHeadroomOptions{.floor = 0.05, .fresh = 0.6});
  rs.Add(kT0, 10 * kGiB);
  EXPECT_DOUBLE_EQ(*rs.Recommend(kT0), 10 * kGiB * 1.65);
  rs.Add(kT0 + 3 * 3600, 10.05 * kGiB);  // a rise under 1 % does not restart the clock
  EXPECT_DOUBLE_EQ(*rs.Recommend(kT0 + 3 * 3600), 10.05 * kGiB * (1.05 + 0.6 / 4));
  rs.Add(kT0 + 4 * 3600, 12 * kGiB);
  EXPECT_DOUBLE_EQ(*rs.Recommend(kT0 + 5 * 3600), 12 * kGiB * (1.05 + 0.6 / 2));
}

TEST(PodSeriesReaderTest, ReadsTheAlibabaColumnsAndNamesBadLines) {
  PodSeriesReader r("pods.csv");
  ASSERT_TRUE(r.AddLine("timestamp_anon,value,container_ip", 1).ok());
  ASSERT_TRUE(r.AddLine("120.0,2048.0,b", 2).ok());
  ASSERT_TRUE(r.AddLine("60.0,1024.0,b", 3).ok());
  ASSERT_TRUE(r.AddLine("60.0,5.0,a", 4).ok());
  Status bad = r.AddLine("x,1,a", 5);
  EXPECT_EQ(bad.code(), Status::Code::kBadInput);
  EXPECT_NE(bad.message().find("pods.csv:5"), std::string::npos) << bad.message();
  EXPECT_FALSE(r.AddLine("60,-1,a", 6).ok());
  EXPECT_FALSE(r.AddLine("60,1", 7).ok());
  auto pods = r.Finish();
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[1].key, "b");
  EXPECT_EQ((*pods)[1].samples.front().bytes, 1024.0);  // sorted by time

  PodSeriesReader no_header("x.csv");
  EXPECT_FALSE(no_header.AddLine("1,2,3", 1).ok());
  PodSeriesReader empty("e.csv");
  ASSERT_TRUE(empty.AddLine("timestamp,value,pod", 1).ok());
  EXPECT_FALSE(empty.Finish().ok());
}

// A flat pod and a pod that doubles in its fourth hour, one sample a minute for six hours.
std::vector<PodSeries> TwoPods() {
  PodSeries flat{"flat", {}}, jump{"jump", {}};
  for (int m = 0; m < 360; ++m) {
    flat.samples.push_back({kT0 + 60.0 * m, 10 * kGiB});
    jump.samples.push_back({kT0 + 60.0 * m, (m >= 200 ? 20 : 10) * kGiB});
  }
  return {flat, jump};
}

TEST(PodReplayTest, ScoresEachHourFromThePastOnly) {
  auto doc = ReplayPods(TwoPods(), PodReplayOptions{});
  const auto& all = doc["all"];
  // Hours 2..5 of each pod are scored (100 past samples are reached after hour 1).
  EXPECT_EQ(all["pod_hours"].get<int>(), 8);
  auto method = [&all](const char* name) {
    for (const auto& m : all["methods"]) {
      if (m["method"] == name) return m;
    }
    return nlohmann::ordered_json();
  };
  // KRR: max so far × 1.15. The jump pod's hour 3 (minutes 180-239) goes from 10 to 20 GiB:
  // the one under-provisioned hour; its baseline is the peak before the hour.
  auto krr = method("krr");
  EXPECT_EQ(krr["under_hours"].get<int>(), 1);
  EXPECT_NEAR(krr["freed_share"].get<double>(), -0.15, 1e-9);
  // Baseline GiB-hours: flat 4 × 10; jump 10, 10 (hours 2, 3), 20, 20.
  EXPECT_NEAR(krr["baseline_gib_hours"].get<double>(), 100, 1e-9);
  EXPECT_NEAR(krr["freed_gib_hours"].get<double>(), -15, 1e-9);
  // rightsize: peak × (1 + 0.6 / (1 + hours held)). Flat, held 2..5 h: 10 × (0.2 + 0.15 +
  // 0.12 + 0.1) = 5.7; jump: 10 × 0.2 + 10 × 0.15 at 2 and 3 h, then 20 × 0.6 / (1 + 2/3) and
  // 20 × 0.6 / (1 + 5/3) after its rise at 3 h 20 min: 2 + 1.5 + 7.2 + 4.5. It too misses
  // the doubling.
  auto rs = method("rightsize");
  EXPECT_EQ(rs["under_hours"].get<int>(), 1);
  EXPECT_NEAR(rs["freed_gib_hours"].get<double>(), -(5.7 + 2 + 1.5 + 7.2 + 4.5), 1e-9);
  // The halves add up to the whole.
  EXPECT_EQ(doc["dev"]["pod_hours"].get<int>() + doc["blind"]["pod_hours"].get<int>(), 8);
  // The curves: KRR at margin 0 is the peak itself, and cuts nothing.
  EXPECT_NEAR(all["curves"]["krr"][0]["freed_share"].get<double>(), 0, 1e-12);
}

TEST(PodReplayTest, SplitIsStableAndRoughlyEven) {
  int dev = 0;
  for (int i = 0; i < 1000; ++i) dev += HalfOf("pod-" + std::to_string(i)) == PodHalf::kDev;
  EXPECT_GT(dev, 450);
  EXPECT_LT(dev, 550);
  EXPECT_EQ(HalfOf("23b8eba99c14e73d454503a55ae96989"), HalfOf("23b8eba99c14e73d454503a55ae96989"));
}

}  // namespace
}  // namespace rightsize

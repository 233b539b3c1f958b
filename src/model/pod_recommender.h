// Pod recommenders: the memory (GPU memory here) a long-running pod should be given, from its
// own past samples only.
//
// Three recommenders, one per pod, each fed the pod's samples in time order and asked for a
// recommendation at a time after the last sample:
//  - VpaMemoryRecommender: Kubernetes VPA's recommender for memory as its source implements it
//    (kubernetes/autoscaler, vertical-pod-autoscaler/pkg/recommender): one peak per 24 h
//    aggregation interval added to a decaying histogram (half-life 24 h, exponential buckets of
//    10 MB growing by 5 %, up to 1 TB), target = the 90th percentile (the end of its bucket)
//    × 1.15, never below the pod minimum of 250 MiB.
//  - KrrSimpleRecommender: robusta-dev/krr's simple strategy for memory: the maximum over the
//    history window (14 days) × 1.15, and no answer under 100 points.
//  - PeakHeadroomRecommender (rightsize): the peak so far plus a headroom that is large just
//    after the peak last rose and shrinks as the peak holds: peak × (1 + floor + fresh / (1 +
//    hours since the peak last rose by more than 1 %)). A pod whose peak has held for a day
//    needs little room; one that set a new peak an hour ago may set another.
// Samples out of time order are ignored (as VPA discards them). Not thread-safe; cheap to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace rightsize {

// VPA's exponential bucketing (util.NewExponentialHistogramOptions): bucket 0 is
// [0, first_bucket_size); bucket n ≥ 1 starts at first_bucket_size × (ratio^n − 1) / (ratio − 1);
// the last bucket starts at or above max_value and has no end. A bucket lighter than epsilon is
// empty.
struct ExponentialBuckets {
  double max_value = 1e12;
  double first_bucket_size = 1e7;
  double ratio = 1.05;
  double epsilon = 1e-4;  // VPA: 0.001 × minSampleWeight (0.1)

  int NumBuckets() const;
  int FindBucket(double value) const;
  double BucketStart(int bucket) const;
};

// VPA's decaying histogram (util.decayingHistogram over util.histogram): a sample's weight is
// multiplied by 2^((t − reference) / half_life); the reference moves forward in whole
// half-lives when the exponent would pass 100, rescaling the stored weights.
class DecayingHistogram {
 public:
  DecayingHistogram(ExponentialBuckets buckets, double half_life_s);

  void AddSample(double value, double weight, double time_s);
  // Removes weight from value's bucket (never below zero, as VPA clamps it).
  void SubtractSample(double value, double weight, double time_s);
  // The end of the bucket in which the cumulative weight reaches p × total (the start of the
  // last bucket if it is that one); 0 when empty.
  double Percentile(double p) const;
  bool IsEmpty() const;
  double total_weight() const { return total_weight_; }
  // The weight a sample at time_s gets now (for tests: 2^((t − reference) / half_life)).
  double DecayFactor(double time_s);

 private:
  void ShiftReference(double new_reference_s);
  void UpdateMinMaxBucket();

  ExponentialBuckets buckets_;
  double half_life_s_;
  double reference_s_ = 0;
  std::vector<double> weight_;
  double total_weight_ = 0;
  int min_bucket_;
  int max_bucket_ = 0;
};

struct VpaOptions {
  double target_percentile = 0.9;
  double safety_margin = 0.15;
  double half_life_s = 24 * 3600;
  double aggregation_interval_s = 24 * 3600;  // one memory peak per interval
  double min_bytes = 250.0 * 1024 * 1024;     // --pod-recommendation-min-memory-mb=250
};

class VpaMemoryRecommender {
 public:
  explicit VpaMemoryRecommender(VpaOptions options = {});
  // container.go addMemorySample: within the current interval only a sample above the
  // interval's peak replaces it (and, as there, not when the peak recorded is 0); a sample past
  // the interval's end opens the next interval with a new peak.
  void Add(double time_s, double bytes);
  // nullopt before the first sample.
  std::optional<double> Recommend() const;
  const DecayingHistogram& histogram() const { return histogram_; }

 private:
  VpaOptions options_;
  DecayingHistogram histogram_;
  double window_end_s_ = 0;
  double last_sample_s_ = 0;
  double peak_ = 0;
  bool any_ = false;
};

struct KrrOptions {
  double buffer = 0.15;           // memory_buffer_percentage 15
  int points_required = 100;      // points_required 100
  double history_s = 14 * 86400;  // history_duration 336 h
};

class KrrSimpleRecommender {
 public:
  explicit KrrSimpleRecommender(KrrOptions options = {});
  void Add(double time_s, double bytes);
  // max over (now − history, now) × (1 + buffer); nullopt with fewer than points_required
  // samples in the window ("not enough data").
  std::optional<double> Recommend(double now_s) const;

 private:
  KrrOptions options_;
  std::vector<std::pair<double, double>> samples_;  // (time, bytes), in time order
};

struct PeakHeadroomOptions {
  // Chosen on the DEV half of the Alibaba GenAI pods (see docs/accuracy.md): the largest
  // saving whose under-provisioned hours stay at or below VPA's and KRR's there.
  double floor = 0.0;
  double fresh = 0.6;
  double rise_fraction = 0.01;  // a rise smaller than this does not restart the clock
};

class PeakHeadroomRecommender {
 public:
  explicit PeakHeadroomRecommender(PeakHeadroomOptions options = {});
  void Add(double time_s, double bytes);
  // nullopt before the first sample.
  std::optional<double> Recommend(double now_s) const;

 private:
  PeakHeadroomOptions options_;
  double peak_ = 0;
  double last_rise_s_ = 0;
  double last_sample_s_ = 0;
  bool any_ = false;
};

}  // namespace rightsize

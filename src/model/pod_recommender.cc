#include "model/pod_recommender.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace rightsize {

namespace {

// VPA renormalises when the decay exponent would pass this (maxDecayExponent).
constexpr double kMaxDecayExponent = 100;

}  // namespace

int ExponentialBuckets::NumBuckets() const {
  return static_cast<int>(std::ceil(std::log(max_value * (ratio - 1) / first_bucket_size + 1) /
                                    std::log(ratio))) +
         1;
}

int ExponentialBuckets::FindBucket(double value) const {
  if (value < first_bucket_size) return 0;
  int bucket =
      static_cast<int>(std::log(value * (ratio - 1) / first_bucket_size + 1) / std::log(ratio));
  return std::min(bucket, NumBuckets() - 1);
}

double ExponentialBuckets::BucketStart(int bucket) const {
  if (bucket <= 0) return 0;
  return first_bucket_size * (std::pow(ratio, bucket) - 1) / (ratio - 1);
}

DecayingHistogram::DecayingHistogram(ExponentialBuckets buckets, double half_life_s)
    : buckets_(buckets),
      half_life_s_(half_life_s),
      weight_(static_cast<size_t>(buckets.NumBuckets()), 0.0),
      min_bucket_(buckets.NumBuckets() - 1) {}

double DecayingHistogram::DecayFactor(double time_s) {
  if (time_s > reference_s_ + half_life_s_ * kMaxDecayExponent) ShiftReference(time_s);
  return std::exp2((time_s - reference_s_) / half_life_s_);
}

void DecayingHistogram::ShiftReference(double new_reference_s) {
  // The reference stays a whole number of half-lives (Go's time.Round(halfLife)).
  new_reference_s = std::floor(new_reference_s / half_life_s_ + 0.5) * half_life_s_;
  double exponent = std::floor((reference_s_ - new_reference_s) / half_life_s_ + 0.5);
  double factor = std::ldexp(1.0, static_cast<int>(exponent));
  for (int b = min_bucket_; b <= max_bucket_; ++b) weight_[static_cast<size_t>(b)] *= factor;
  total_weight_ *= factor;
  UpdateMinMaxBucket();
  reference_s_ = new_reference_s;
}

void DecayingHistogram::UpdateMinMaxBucket() {
  int last = buckets_.NumBuckets() - 1;
  while (weight_[static_cast<size_t>(min_bucket_)] < buckets_.epsilon && min_bucket_ < last) {
    ++min_bucket_;
  }
  while (weight_[static_cast<size_t>(max_bucket_)] < buckets_.epsilon && max_bucket_ > 0) {
    --max_bucket_;
  }
}

void DecayingHistogram::AddSample(double value, double weight, double time_s) {
  weight *= DecayFactor(time_s);
  int bucket = buckets_.FindBucket(value);
  auto& w = weight_[static_cast<size_t>(bucket)];
  w += weight;
  total_weight_ += weight;
  if (bucket < min_bucket_ && w >= buckets_.epsilon) min_bucket_ = bucket;
  if (bucket > max_bucket_ && w >= buckets_.epsilon) max_bucket_ = bucket;
}

void DecayingHistogram::SubtractSample(double value, double weight, double time_s) {
  weight *= DecayFactor(time_s);
  int bucket = buckets_.FindBucket(value);
  auto& w = weight_[static_cast<size_t>(bucket)];
  if (weight > w - buckets_.epsilon) weight = w;
  total_weight_ -= weight;
  w -= weight;
  UpdateMinMaxBucket();
}

bool DecayingHistogram::IsEmpty() const {
  return weight_[static_cast<size_t>(min_bucket_)] < buckets_.epsilon;
}

double DecayingHistogram::Percentile(double p) const {
  if (IsEmpty()) return 0;
  double partial = 0;
  double threshold = p * total_weight_;
  int bucket = min_bucket_;
  for (; bucket < max_bucket_; ++bucket) {
    partial += weight_[static_cast<size_t>(bucket)];
    if (partial >= threshold) break;
  }
  if (bucket < buckets_.NumBuckets() - 1) return buckets_.BucketStart(bucket + 1);
  return buckets_.BucketStart(bucket);
}

VpaMemoryRecommender::VpaMemoryRecommender(VpaOptions options)
    : options_(options), histogram_(ExponentialBuckets{}, options.half_life_s) {}

void VpaMemoryRecommender::Add(double time_s, double bytes) {
  if (bytes < 0 || (any_ && time_s < last_sample_s_)) return;
  last_sample_s_ = time_s;
  if (!any_) window_end_s_ = time_s;
  any_ = true;
  bool add_new_peak = false;
  if (time_s < window_end_s_) {
    if (peak_ != 0 && bytes > peak_) {
      histogram_.SubtractSample(peak_, 1.0, window_end_s_);
      add_new_peak = true;
    }
  } else {
    double interval = options_.aggregation_interval_s;
    double shift = std::floor((time_s - window_end_s_) / interval) * interval + interval;
    window_end_s_ += shift;
    add_new_peak = true;
  }
  if (add_new_peak) {
    histogram_.AddSample(bytes, 1.0, window_end_s_);
    peak_ = bytes;
  }
}

std::optional<double> VpaMemoryRecommender::Recommend() const {
  if (!any_) return std::nullopt;
  double target = histogram_.Percentile(options_.target_percentile) * (1 + options_.safety_margin);
  return std::max(target, options_.min_bytes);
}

KrrSimpleRecommender::KrrSimpleRecommender(KrrOptions options) : options_(options) {}

void KrrSimpleRecommender::Add(double time_s, double bytes) {
  if (bytes < 0 || (!samples_.empty() && time_s < samples_.back().first)) return;
  samples_.emplace_back(time_s, bytes);
}

std::optional<double> KrrSimpleRecommender::Recommend(double now_s) const {
  auto first =
      std::lower_bound(samples_.begin(), samples_.end(), now_s - options_.history_s,
                       [](const std::pair<double, double>& s, double t) { return s.first < t; });
  int points = 0;
  double max_bytes = 0;
  for (auto it = first; it != samples_.end() && it->first <= now_s; ++it) {
    ++points;
    max_bytes = std::max(max_bytes, it->second);
  }
  if (points < options_.points_required) return std::nullopt;
  return max_bytes * (1 + options_.buffer);
}

PeakHeadroomRecommender::PeakHeadroomRecommender(PeakHeadroomOptions options) : options_(options) {}

void PeakHeadroomRecommender::Add(double time_s, double bytes) {
  if (bytes < 0 || (any_ && time_s < last_sample_s_)) return;
  if (!any_) last_rise_s_ = time_s;
  if (bytes > peak_ * (1 + options_.rise_fraction)) last_rise_s_ = time_s;
  peak_ = std::max(peak_, bytes);
  last_sample_s_ = time_s;
  any_ = true;
}

std::optional<double> PeakHeadroomRecommender::Recommend(double now_s) const {
  if (!any_) return std::nullopt;
  double hours_held = std::max(0.0, now_s - last_rise_s_) / 3600;
  return peak_ * (1 + options_.floor + options_.fresh / (1 + hours_held));
}

}  // namespace rightsize

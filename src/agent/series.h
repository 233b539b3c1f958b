// MetricSeries: one metric of one job over time, in bounded memory however long the job runs.
//
// Every sample is kept for the last hour; older ones are folded into 10-second buckets (mean
// and maximum) for the last day, and older still into 1-minute buckets, at most 30 days of
// them. A week-long job sampled every second costs 3,600 + 8,640 + 8,640 points. The peak,
// mean and last value cover the whole run exactly. Plain value type; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace rightsize {

class MetricSeries {
 public:
  struct Point {
    int64_t t_s = 0;  // start of the bucket (the sample's time at full resolution)
    double mean = 0;
    double max = 0;
    int64_t n = 0;
  };

  void Add(int64_t t_s, double value);

  // All points, oldest first: minute buckets, then 10-second buckets, then samples.
  std::vector<Point> Points() const;
  bool empty() const { return count_ == 0; }
  double peak() const { return peak_; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }
  double last() const { return last_; }
  int64_t count() const { return count_; }
  size_t stored_points() const;

  static constexpr int64_t kFullResolutionS = 3600;
  static constexpr int64_t kTenSecondsForS = 86400;
  static constexpr size_t kMaxMinutePoints = size_t{30} * 1440;

 private:
  static void Fold(std::deque<Point>* into, const Point& p, int64_t bucket_s);
  std::deque<Point> samples_, ten_s_, minutes_;
  double peak_ = 0, sum_ = 0, last_ = 0;
  int64_t count_ = 0;
};

}  // namespace rightsize

#include "agent/series.h"

#include <algorithm>

namespace rightsize {

void MetricSeries::Fold(std::deque<Point>* into, const Point& p, int64_t bucket_s) {
  int64_t start = p.t_s - ((p.t_s % bucket_s) + bucket_s) % bucket_s;
  if (into->empty() || into->back().t_s != start) {
    into->push_back({start, p.mean, p.max, p.n});
    return;
  }
  Point& b = into->back();
  double total = b.mean * static_cast<double>(b.n) + p.mean * static_cast<double>(p.n);
  b.n += p.n;
  b.mean = total / static_cast<double>(b.n);
  b.max = std::max(b.max, p.max);
}

void MetricSeries::Add(int64_t t_s, double value) {
  peak_ = count_ == 0 ? value : std::max(peak_, value);
  sum_ += value;
  last_ = value;
  ++count_;
  samples_.push_back({t_s, value, value, 1});
  while (!samples_.empty() && samples_.front().t_s < t_s - kFullResolutionS) {
    Fold(&ten_s_, samples_.front(), 10);
    samples_.pop_front();
  }
  while (!ten_s_.empty() && ten_s_.front().t_s < t_s - kTenSecondsForS) {
    Fold(&minutes_, ten_s_.front(), 60);
    ten_s_.pop_front();
  }
  while (minutes_.size() > kMaxMinutePoints) minutes_.pop_front();
}

std::vector<MetricSeries::Point> MetricSeries::Points() const {
  std::vector<Point> out(minutes_.begin(), minutes_.end());
  out.insert(out.end(), ten_s_.begin(), ten_s_.end());
  out.insert(out.end(), samples_.begin(), samples_.end());
  return out;
}

size_t MetricSeries::stored_points() const {
  return samples_.size() + ten_s_.size() + minutes_.size();
}

}  // namespace rightsize

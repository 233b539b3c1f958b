// Pod replay: how much memory each pod recommender frees on real long-running pods, hour by
// hour, and how often it would have under-provisioned them (`rightsize eval pods`).
//
// At each hour boundary b of the trace's clock (the first sample of the whole file, then every
// step_s), every pod that has at least min_past_samples samples before b and at least one in
// [b, b + step) is given a recommendation by each method from its samples before b only, and
// scored on the samples of [b, b + step):
//  - the pod-hour is *under-provisioned* when any of its samples exceeds the recommendation;
//  - its *baseline* is the pod's peak so far (the most it has held before b: what an operator
//    who sets the request to the largest use seen would give it); *freed* is baseline −
//    recommendation, in GiB-hours (negative when a method keeps headroom above the peak).
// The difference between two methods' freed memory does not depend on the baseline.
// Pods are split by a hash of their key (FNV-1a 64, even = DEV, odd = BLIND): rightsize's
// settings were chosen on DEV; BLIND is reported beside it and was never tuned on.
// Pure functions of their input; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/pod_recommender.h"

namespace rightsize {

struct PodSample {
  double time_s = 0;
  double bytes = 0;
};

struct PodSeries {
  std::string key;
  std::vector<PodSample> samples;  // in time order
};

// Reads a per-pod series table, one sample a line: a header naming a timestamp column (its
// name contains "timestamp"), a "value" column and one key column (any other name), in any
// order, as the Alibaba GenAI trace's pod_gpu_memory_used_bytes_anon.csv writes them. A row
// with a wrong field count or a number that does not parse is BadInput naming the line.
class PodSeriesReader {
 public:
  explicit PodSeriesReader(std::string name) : name_(std::move(name)) {}
  // `line_number` is 1-based and only used in messages; the first line is the header.
  Status AddLine(std::string_view line, int64_t line_number);
  // The pods, by key, each with its samples sorted by time. BadInput when there were none.
  StatusOr<std::vector<PodSeries>> Finish();

 private:
  std::string name_;
  bool have_header_ = false;
  int time_column_ = -1, value_column_ = -1, key_column_ = -1, columns_ = 0;
  std::vector<std::pair<std::string, PodSample>> rows_;
};

enum class PodHalf { kDev, kBlind };
PodHalf HalfOf(std::string_view key);

struct PodReplayOptions {
  double step_s = 3600;
  // KRR answers nothing under 100 points; every method is scored on the same pod-hours, from
  // the first hour at which KRR answers.
  int min_past_samples = 100;
  // The saving curves: VPA's and KRR's safety margin, rightsize's fresh-peak headroom.
  std::vector<double> margins = {0.0, 0.05, 0.10, 0.15, 0.20, 0.30, 0.50};
  std::vector<double> fresh = {0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.6};
  VpaOptions vpa;
  KrrOptions krr;
  PeakHeadroomOptions rightsize;
};

// The rightsize.eval_pods/v1 document (see README.md, `rightsize eval pods`).
nlohmann::ordered_json ReplayPods(const std::vector<PodSeries>& pods,
                                  const PodReplayOptions& options);

}  // namespace rightsize

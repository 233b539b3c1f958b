// History: what a job's past says about it, at submit time.
//
// The features of a job are computed from the jobs that had *finished* before it was
// submitted, never later ones: in a chronological replay the caller adds each job when it
// ends and asks for features when the next one is submitted; at prediction time the caller
// adds what the store holds. Five views of the past are kept, from the most to the least
// specific: the user's jobs with the same name and request, with the same request, with the
// same name, all the user's jobs, and every user's jobs of the same program (job name or
// executable).
//
// The baselines (request, per-user mean, Tsafrir's last two, VPA's decaying percentile) read
// the same history, so they see exactly what the model sees. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.h"
#include "model/target.h"

namespace rightsize {

// The request as one string ("time|cpus|memory|gpus"): jobs that ask for exactly the same are
// usually the same work.
std::string RequestSignature(const JobRecord& job);

// The baselines every evaluation runs beside the model.
enum class Baseline : int { kRequest = 0, kUserMean, kLast2, kVpa };
inline constexpr int kNumBaselines = 4;
inline constexpr std::array<Baseline, kNumBaselines> kAllBaselines = {
    Baseline::kRequest, Baseline::kUserMean, Baseline::kLast2, Baseline::kVpa};
std::string_view NameOf(Baseline b);  // "request", "user_mean", "last2", "vpa"
// Whether `b` is one of `t`'s baselines: VPA's recommender is for memory and CPU, not run time.
inline bool IsBaselineOf(Baseline b, Target t) {
  return b != Baseline::kVpa || t != Target::kRuntime;
}

// The feature vector's layout: common features, then one block per target.
struct FeatureLayout {
  std::vector<std::string> names;  // all columns
  std::vector<std::string> words;  // each column's meaning, for `predict`'s why
  size_t common = 0;               // columns [0, common) are shared by every target
  size_t block = 0;                // each target's block is `block` columns wide
  // Columns [TailStart(), cols()) are shared too, added after the blocks: appended, they leave
  // the trees' column order, and so their tie-breaks, as they were for data without them.
  size_t cols() const { return names.size(); }
  size_t BlockStart(Target t) const { return common + block * static_cast<size_t>(t); }
  size_t TailStart() const { return common + block * kNumTargets; }
  // The columns a model of `t` reads: the common ones, its own block and the tail.
  std::vector<int> ColumnsFor(Target t) const;
};
const FeatureLayout& Layout();
// A feature in words, for `predict`'s why ("the share of its request used by your jobs of this
// name"); the name itself where it is not one of Layout()'s.
std::string DescribeFeature(std::string_view name);

// What a partition's nodes hold (the largest node type where it mixes several).
struct NodeShape {
  double cpus = 0, memory_bytes = 0, gpus = 0;
  std::string gpu_type;
};
// Values a feature vector needs from outside the job: the cluster's size, for the share of the
// cluster a job asks for, and its partitions' nodes.
struct ClusterContext {
  double total_cpus = 0;                        // 0 = unknown
  std::map<std::string, NodeShape> partitions;  // from `sinfo` (rightsize ingest slurm)
  std::string default_partition;
  // The nodes of the job's partition, or of the default partition for a job without one.
  const NodeShape* NodesOf(const std::string& partition) const {
    auto it = partitions.find(partition.empty() ? default_partition : partition);
    return it == partitions.end() ? nullptr : &it->second;
  }
};

class History {
 public:
  History();

  // Records a finished job (its end time must be known). Call in order of end time.
  void AddFinished(const JobRecord& job);

  // Writes Layout().cols() features of `job`, as of time `now` (its submit time), to `out`.
  void Features(const JobRecord& job, int64_t now, const ClusterContext& cluster, float* out) const;

  // Each baseline's prediction of `t` for `job` at `now`, NaN where it has nothing to say.
  std::array<float, kNumBaselines> Baselines(const JobRecord& job, int64_t now, Target t) const;

  // Where the trees start from: the value of `t` in the user's last job of the most specific
  // view that has one (same name and request, same request, same name), else the last-two
  // baseline from `baselines` (this job's Baselines()). Capped at the request; NaN when there
  // is nothing at all.
  // `from`, when given, says in words where it came from ("your last job of this name").
  float Anchor(const JobRecord& job, Target t, const std::array<float, kNumBaselines>& baselines,
               std::string* from = nullptr) const;

  // The median of `t` over recent finished jobs: the baselines' last resort.
  float GlobalMedian(Target t) const { return global_median_[static_cast<int>(t)]; }
  void SetGlobalMedian(Target t, float v) { global_median_[static_cast<int>(t)] = v; }

  int64_t finished() const { return finished_; }

 private:
  struct Sample {
    int64_t end = 0;
    std::array<float, kNumTargets> y;    // NaN = unknown
    std::array<float, kNumTargets> req;  // NaN = unknown
    bool killed = false;                 // ended by its time or memory limit
  };
  // A view's last samples, newest at the back once `ring` is full-cycled through `next`.
  struct View {
    std::vector<Sample> ring;
    size_t next = 0;  // where the next sample goes once the ring is full
    int64_t n = 0;
    std::array<int32_t, kNumTargets> n_target{};
    std::array<double, kNumTargets> sum_target{};
    // The samples newest first (at most the ring's size).
    template <typename Fn>
    void ForEachNewest(Fn fn) const;
  };
  enum ViewKind : int { kUserNameRequest = 0, kUserRequest, kUserName, kUser, kProgram, kNumViews };
  static constexpr size_t kRing[kNumViews] = {8, 8, 8, 24, 8};

  static uint64_t Key(ViewKind kind, const JobRecord& job);
  const View* Find(ViewKind kind, const JobRecord& job) const;
  // The user's two newest values of target `ti` into `ys` (and their requests into `reqs`,
  // when given), newest first; false when fewer.
  // Tsafrir's last-two baseline, and the anchor's words where it falls back to it.
  static bool LastTwo(const View* user, int ti, float* ys, float* reqs = nullptr);

  std::array<std::unordered_map<uint64_t, View>, kNumViews> views_;
  std::array<float, kNumTargets> global_median_;
  std::array<std::vector<float>, kNumTargets> recent_;  // for the global medians
  std::array<size_t, kNumTargets> recent_next_{};
  int64_t finished_ = 0;
};

}  // namespace rightsize

// Booster: a gradient-boosted tree ensemble, through XGBoost's C API.
//
// The only file that talks to XGBoost, so the rest of the model code deals in plain vectors
// and Status. Rows are dense float matrices, row-major; NaN means "unknown" (XGBoost learns
// which way a missing value goes at each split). Not thread-safe: one Booster per thread for
// training. On a trained booster PredictOne may run on several threads at once (XGBoost's
// in-place prediction keeps its scratch space per thread); Predict and Contributions run from
// one thread at a time, with no PredictOne beside them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize {

struct BoosterParams {
  std::string objective = "reg:absoluteerror";  // the median: what MAE rewards
  int rounds = 200;
  int max_depth = 6;
  double eta = 0.08;
  double min_child_weight = 8;
  double subsample = 0.8;
  double colsample_bytree = 0.9;
  double lambda = 1.0;
  double aea_tau = 0.5;  // for "rightsize:aea": the width, in log units, of a near miss
  // One thread: the boosters are small, and OpenMP threads that spin while other processes
  // hold the cores made training 10x slower on a busy 2-core machine.
  int nthread = 1;
  int seed = 7;
};

class Booster {
 public:
  Booster();
  ~Booster() noexcept;
  Booster(Booster&&) noexcept;
  Booster& operator=(Booster&&) noexcept;
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;

  // Fits on `x` (rows × cols, row-major) and `y`. The starting value is the median of y, so
  // few rounds are spent walking there from XGBoost's default of 0.5.
  static StatusOr<Booster> Train(const std::vector<float>& x, size_t cols,
                                 const std::vector<float>& y, const BoosterParams& params);

  // One prediction per row.
  Status Predict(const float* x, size_t rows, size_t cols, std::vector<float>* out) const;
  // The prediction for one row without building a DMatrix (in-place prediction).
  StatusOr<float> PredictOne(const float* x, size_t cols) const;
  // Per-row contributions (SHAP values) of each feature, cols + 1 values per row: the last
  // is the bias.
  Status Contributions(const float* x, size_t rows, size_t cols, std::vector<float>* out) const;

  // XGBoost's own binary format (UBJSON), stable across XGBoost versions.
  StatusOr<std::string> Serialize() const;
  static StatusOr<Booster> Deserialize(std::string_view bytes, int nthread = 1);

  bool trained() const { return handle_ != nullptr; }

 private:
  Status PredictMatrix(int type, const float* x, size_t rows, size_t cols,
                       std::vector<float>* out) const;

  void* handle_ = nullptr;  // BoosterHandle
};

}  // namespace rightsize

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

// A sparse matrix in compressed-row form (CSR): row r's values are values[indptr[r] ..
// indptr[r + 1]) at columns indices[…]; absent cells are missing (not 0).
struct SparseRows {
  std::vector<size_t> indptr = {0};
  std::vector<unsigned> indices;
  std::vector<float> values;
  size_t cols = 0;
  size_t rows() const { return indptr.size() - 1; }
};

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

  // A multi-class classifier ("multi:softprob") over sparse rows, labels 0 .. classes - 1;
  // `params.objective` and base_score are ignored. Deterministic for a given nthread and seed.
  static StatusOr<Booster> TrainClassifier(const SparseRows& x, const std::vector<float>& y,
                                           int classes, const BoosterParams& params);
  // Per row, the probability of each class (rows × classes); with `contributions`, per row
  // and class the SHAP contribution of each column and the bias (rows × classes × (cols + 1)).
  Status PredictSparse(const SparseRows& x, std::vector<float>* out,
                       bool contributions = false) const;

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

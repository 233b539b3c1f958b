#include "model/booster.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

namespace rightsize {
namespace {

Status XgbError(const char* what) {
  return Status::Internal(fmt::format("XGBoost {}: {}", what, XGBGetLastError()));
}

#define RS_XGB(call, what)                    \
  do {                                        \
    if ((call) != 0) return XgbError((what)); \
  } while (false)

// XGBoost prints to stdout by default; its messages belong in our log, and there are none we
// need at verbosity 0. Its global configuration is per thread (the replay trains on several).
void QuietXgboost() {
  thread_local bool quiet = [] { return XGBSetGlobalConfig(R"({"verbosity": 0})") == 0; }();
  (void)quiet;
}

// Owns one DMatrixHandle. Copy deleted; move leaves the source empty.
class DMatrix {
 public:
  DMatrix() = default;
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
  DMatrix(DMatrix&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  DMatrix& operator=(DMatrix&& o) noexcept {
    if (this != &o) {
      Free();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~DMatrix() noexcept { Free(); }

  Status Create(const float* x, size_t rows, size_t cols) {
    RS_XGB(XGDMatrixCreateFromMat(x, rows, cols, NAN, &h_), "matrix");
    return Status::Ok();
  }
  Status Create(const SparseRows& x) {
    RS_XGB(XGDMatrixCreateFromCSREx(x.indptr.data(), x.indices.data(), x.values.data(),
                                    x.indptr.size(), x.values.size(), x.cols, &h_),
           "sparse matrix");
    return Status::Ok();
  }
  DMatrixHandle get() const { return h_; }

 private:
  void Free() noexcept {
    if (h_ != nullptr) XGDMatrixFree(h_);
    h_ = nullptr;
  }
  DMatrixHandle h_ = nullptr;
};

float Median(std::vector<float> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Sets `extra` (what one kind of model needs: its objective, its tree method, …) and then what
// every training takes from BoosterParams: the trees' shape, sampling, regularisation, threads
// and seed.
Status SetParams(BoosterHandle h, const BoosterParams& p,
                 std::initializer_list<std::pair<const char*, std::string>> extra) {
  const std::pair<const char*, std::string> common[] = {
      {"max_depth", fmt::format("{}", p.max_depth)},
      {"eta", fmt::format("{}", p.eta)},
      {"min_child_weight", fmt::format("{}", p.min_child_weight)},
      {"subsample", fmt::format("{}", p.subsample)},
      {"colsample_bytree", fmt::format("{}", p.colsample_bytree)},
      {"lambda", fmt::format("{}", p.lambda)},
      {"nthread", fmt::format("{}", p.nthread)},
      {"seed", fmt::format("{}", p.seed)},
      {"verbosity", "0"},
  };
  for (const auto& [name, value] : extra) {
    RS_XGB(XGBoosterSetParam(h, name, value.c_str()), "parameter");
  }
  for (const auto& [name, value] : common) {
    RS_XGB(XGBoosterSetParam(h, name, value.c_str()), "parameter");
  }
  return Status::Ok();
}

}  // namespace

Booster::Booster() = default;
Booster::~Booster() noexcept {
  if (handle_ != nullptr) XGBoosterFree(handle_);
}
Booster::Booster(Booster&& o) noexcept : handle_(o.handle_) { o.handle_ = nullptr; }
Booster& Booster::operator=(Booster&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) XGBoosterFree(handle_);
    handle_ = o.handle_;
    o.handle_ = nullptr;
  }
  return *this;
}

StatusOr<Booster> Booster::Train(const std::vector<float>& x, size_t cols,
                                 const std::vector<float>& y, const BoosterParams& p) {
  QuietXgboost();
  if (cols == 0 || y.empty() || x.size() != y.size() * cols) {
    return Status::Internal(fmt::format("Booster::Train: {} values for {} rows of {} columns",
                                        x.size(), y.size(), cols));
  }
  DMatrix d;
  RS_RETURN_IF_ERROR(d.Create(x.data(), y.size(), cols));
  RS_XGB(XGDMatrixSetFloatInfo(d.get(), "label", y.data(), y.size()), "labels");
  Booster b;
  DMatrixHandle dmats[] = {d.get()};
  RS_XGB(XGBoosterCreate(dmats, 1, &b.handle_), "create");
  // "rightsize:aea" is ours: 1 - exp(-|f - y| / tau), which rewards predictions within a
  // factor of the truth and ignores the far misses (see docs/model.md). XGBoost runs it
  // through BoostOneIter with our gradients; its own objective only sets up the booster.
  const bool aea = p.objective == "rightsize:aea";
  RS_RETURN_IF_ERROR(SetParams(b.handle_, p,
                               {{"objective", aea ? std::string("reg:squarederror") : p.objective},
                                {"tree_method", "hist"},
                                {"base_score", fmt::format("{}", Median(y))}}));
  if (!aea) {
    for (int i = 0; i < p.rounds; ++i) {
      RS_XGB(XGBoosterUpdateOneIter(b.handle_, i, d.get()), "round");
    }
  } else {
    const size_t n = y.size();
    std::vector<float> grad(n), hess(n);
    const float tau = static_cast<float>(p.aea_tau);
    // A leaf moves by at most eta * tau a round, so a miss smaller than that given the full
    // sign was overshot every round: the trees swung a job repeated with steady use tens of
    // percent off its past runs. Inside this core the gradient is in proportion to the miss,
    // and a leaf of equal near misses steps onto them.
    const float core = static_cast<float>(p.eta) * tau;
    for (int i = 0; i < p.rounds; ++i) {
      const bst_ulong* shape = nullptr;
      bst_ulong dim = 0;
      const float* margin = nullptr;
      RS_XGB(XGBoosterPredictFromDMatrix(b.handle_, d.get(),
                                         R"({"type": 1, "training": true, "iteration_begin": 0,
                                            "iteration_end": 0, "strict_shape": false})",
                                         &shape, &dim, &margin),
             "margin");
      for (size_t k = 0; k < n; ++k) {
        float diff = margin[k] - y[k];
        float w = std::exp(-std::abs(diff) / tau) / tau;
        grad[k] = std::clamp(diff / core, -1.0f, 1.0f) * w;
        hess[k] = std::max(w / tau, 1e-6f);
      }
      RS_XGB(XGBoosterBoostOneIter(b.handle_, d.get(), grad.data(), hess.data(), n), "round");
    }
  }
  // Prediction runs one row at a time: more threads only add OpenMP start-up cost.
  RS_XGB(XGBoosterSetParam(b.handle_, "nthread", "1"), "parameter");
  return b;
}

StatusOr<Booster> Booster::TrainClassifier(const SparseRows& x, const std::vector<float>& y,
                                           int classes, const BoosterParams& p) {
  QuietXgboost();
  if (classes < 2 || y.size() != x.rows() || y.empty() || x.indices.size() != x.values.size() ||
      x.indptr.back() != x.values.size()) {
    return Status::Internal(
        fmt::format("Booster::TrainClassifier: {} labels for {} rows", y.size(), x.rows()));
  }
  DMatrix d;
  RS_RETURN_IF_ERROR(d.Create(x));
  RS_XGB(XGDMatrixSetFloatInfo(d.get(), "label", y.data(), y.size()), "labels");
  Booster b;
  DMatrixHandle dmats[] = {d.get()};
  RS_XGB(XGBoosterCreate(dmats, 1, &b.handle_), "create");
  RS_RETURN_IF_ERROR(SetParams(b.handle_, p,
                               {{"objective", "multi:softprob"},
                                {"num_class", fmt::format("{}", classes)},
                                // cost in proportion to the non-empty cells, not the 2^18 columns
                                {"tree_method", "exact"}}));
  for (int i = 0; i < p.rounds; ++i) {
    RS_XGB(XGBoosterUpdateOneIter(b.handle_, i, d.get()), "round");
  }
  RS_XGB(XGBoosterSetParam(b.handle_, "nthread", "1"), "parameter");
  return b;
}

Status Booster::PredictSparse(const SparseRows& x, std::vector<float>* out,
                              bool contributions) const {
  out->clear();
  if (x.rows() == 0) return Status::Ok();
  DMatrix d;
  RS_RETURN_IF_ERROR(d.Create(x));
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  std::string config = fmt::format(
      R"({{"type": {}, "training": false, "iteration_begin": 0, "iteration_end": 0,
          "strict_shape": true}})",
      contributions ? 2 : 0);
  RS_XGB(XGBoosterPredictFromDMatrix(handle_, d.get(), config.c_str(), &shape, &dim, &result),
         "predict");
  size_t n = 1;
  for (bst_ulong i = 0; i < dim; ++i) n *= shape[i];
  out->assign(result, result + n);
  return Status::Ok();
}

// Predicts `rows` rows through a DMatrix: type 0 = values (one per row), 2 = SHAP
// contributions (cols + 1 per row).
Status Booster::PredictMatrix(int type, const float* x, size_t rows, size_t cols,
                              std::vector<float>* out) const {
  out->clear();
  if (rows == 0) return Status::Ok();
  DMatrix d;
  RS_RETURN_IF_ERROR(d.Create(x, rows, cols));
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  std::string config = fmt::format(
      R"({{"type": {}, "training": false, "iteration_begin": 0, "iteration_end": 0,
          "strict_shape": false}})",
      type);
  RS_XGB(XGBoosterPredictFromDMatrix(handle_, d.get(), config.c_str(), &shape, &dim, &result),
         "predict");
  out->assign(result, result + rows * (type == 2 ? cols + 1 : 1));
  return Status::Ok();
}

Status Booster::Predict(const float* x, size_t rows, size_t cols, std::vector<float>* out) const {
  return PredictMatrix(0, x, rows, cols, out);
}

// One proxy DMatrix per thread, for in-place prediction. Without one, XGBoost makes a proxy for
// every call, and its parameters read the cgroup's CPU quota from /sys (two open() per
// prediction, about a third of a one-row prediction's time).
// Copy deleted; move leaves the source empty.
class ThreadProxy {
 public:
  ThreadProxy() = default;
  ThreadProxy(const ThreadProxy&) = delete;
  ThreadProxy& operator=(const ThreadProxy&) = delete;
  ThreadProxy(ThreadProxy&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ThreadProxy& operator=(ThreadProxy&& o) noexcept {
    if (this != &o) {
      Free();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~ThreadProxy() noexcept { Free(); }

  DMatrixHandle get() {
    if (h_ == nullptr && XGProxyDMatrixCreate(&h_) != 0) h_ = nullptr;
    return h_;
  }

 private:
  void Free() noexcept {
    if (h_ != nullptr) XGDMatrixFree(h_);
    h_ = nullptr;
  }
  DMatrixHandle h_ = nullptr;
};

StatusOr<float> Booster::PredictOne(const float* x, size_t cols) const {
  // The array interface names the row by address: no copy, no DMatrix.
  thread_local ThreadProxy proxy;
  std::string array =
      fmt::format(R"({{"data": [{}, true], "shape": [1, {}], "typestr": "<f4", "version": 3}})",
                  reinterpret_cast<uintptr_t>(x), cols);
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  RS_XGB(XGBoosterPredictFromDense(handle_, array.c_str(),
                                   R"({"type": 0, "training": false, "iteration_begin": 0,
                                      "iteration_end": 0, "strict_shape": false,
                                      "missing": NaN, "cache_id": 0})",
                                   proxy.get(), &shape, &dim, &result),
         "predict");
  return result[0];
}

Status Booster::Contributions(const float* x, size_t rows, size_t cols,
                              std::vector<float>* out) const {
  return PredictMatrix(2, x, rows, cols, out);
}

StatusOr<std::string> Booster::Serialize() const {
  bst_ulong len = 0;
  const char* buf = nullptr;
  RS_XGB(XGBoosterSaveModelToBuffer(handle_, R"({"format": "ubj"})", &len, &buf), "save");
  return std::string(buf, len);
}

StatusOr<Booster> Booster::Deserialize(std::string_view bytes, int nthread) {
  QuietXgboost();
  Booster b;
  RS_XGB(XGBoosterCreate(nullptr, 0, &b.handle_), "create");
  // Loading the trees is a parallel loop over OpenMP's default thread count (every core), not
  // the booster's: it started an OpenMP pool whose idle thread then spun on the other core
  // for the rest of a `predict` (a fifth of its CPU samples). The load gets `nthread` too.
  // OpenMP's own calls are found in the runtime XGBoost brought in, so that this file needs no
  // OpenMP compiler support (the fuzzing build is clang's).
  using GetFn = int (*)();
  using SetFn = void (*)(int);
  static const auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  static const auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  int threads_before = get != nullptr ? get() : 0;
  if (set != nullptr && threads_before > 0) set(nthread);
  int loaded = XGBoosterLoadModelFromBuffer(b.handle_, bytes.data(), bytes.size());
  if (set != nullptr && threads_before > 0) set(threads_before);
  RS_XGB(loaded, "load");
  RS_XGB(XGBoosterSetParam(b.handle_, "nthread", fmt::format("{}", nthread).c_str()), "parameter");
  return b;
}

}  // namespace rightsize

#include "tuner/cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "base/str.h"

namespace kiln::tuner {
namespace {

absl::Status XgbError(const char* what) {
  return absl::InternalError(StrCat("xgboost: ", what, ": ", XGBGetLastError()));
}

// A DMatrix from dense rows, freed on scope exit.
class Matrix {
 public:
  ~Matrix() {
    if (handle_ != nullptr) XGDMatrixFree(handle_);
  }
  absl::Status Create(const std::vector<std::vector<float>>& rows) {
    const size_t cols = rows.empty() ? 0 : rows[0].size();
    flat_.reserve(rows.size() * cols);
    for (const auto& r : rows) flat_.insert(flat_.end(), r.begin(), r.end());
    if (XGDMatrixCreateFromMat(flat_.data(), rows.size(), cols, std::nanf(""), &handle_) != 0) {
      return XgbError("creating a matrix");
    }
    return absl::OkStatus();
  }
  DMatrixHandle get() const { return handle_; }

 private:
  std::vector<float> flat_;
  DMatrixHandle handle_ = nullptr;
};

absl::Status SetParams(BoosterHandle b, const CostModelOptions& o) {
  const std::pair<std::string, std::string> params[] = {
      {"objective", "rank:pairwise"},
      {"max_depth", std::to_string(o.max_depth)},
      {"eta", std::to_string(o.eta)},
      {"subsample", std::to_string(o.subsample)},
      {"min_child_weight", "1"},
      {"gamma", "0.0001"},
      {"lambda", "1"},
      {"tree_method", "hist"},
      {"nthread", std::to_string(std::max(1, o.threads))},
      {"seed", std::to_string(o.seed)},
      {"verbosity", "0"},
  };
  for (const auto& [k, v] : params) {
    if (XGBoosterSetParam(b, k.c_str(), v.c_str()) != 0) return XgbError("setting a parameter");
  }
  return absl::OkStatus();
}

}  // namespace

void TrainingSet::AddGroup(std::vector<std::vector<float>> group_rows,
                           std::vector<float> group_scores, float weight) {
  if (group_rows.empty()) return;
  group_sizes.push_back(static_cast<unsigned>(group_rows.size()));
  group_weights.push_back(weight);
  for (auto& r : group_rows) rows.push_back(std::move(r));
  scores.insert(scores.end(), group_scores.begin(), group_scores.end());
}

CostModel::CostModel(CostModelOptions options) : options_(options) {}
CostModel::~CostModel() { Free(); }
CostModel::CostModel(CostModel&& other) noexcept { *this = std::move(other); }
CostModel& CostModel::operator=(CostModel&& other) noexcept {
  if (this != &other) {
    Free();
    options_ = other.options_;
    booster_ = std::exchange(other.booster_, nullptr);
    num_features_ = other.num_features_;
  }
  return *this;
}

void CostModel::Free() {
  if (booster_ != nullptr) XGBoosterFree(booster_);
  booster_ = nullptr;
}

absl::Status CostModel::Train(const TrainingSet& data) {
  if (data.rows.empty()) return absl::InvalidArgumentError("cost model: no training rows");
  const size_t cols = data.rows[0].size();
  if (cols == 0) return absl::InvalidArgumentError("cost model: rows without features");
  if (data.scores.size() != data.rows.size()) {
    return absl::InvalidArgumentError("cost model: one score per row is needed");
  }
  for (size_t i = 0; i < data.rows.size(); ++i) {
    if (data.rows[i].size() != cols) {
      return absl::InvalidArgumentError(
          StrCat("cost model: row ", i, " has ", data.rows[i].size(), " features, row 0 ", cols));
    }
    bool finite =
        std::isfinite(data.scores[i]) && std::all_of(data.rows[i].begin(), data.rows[i].end(),
                                                     [](float v) { return std::isfinite(v); });
    if (!finite) return absl::InvalidArgumentError(StrCat("cost model: row ", i, " is not finite"));
  }
  uint64_t grouped = std::accumulate(data.group_sizes.begin(), data.group_sizes.end(), uint64_t{0});
  if (grouped != data.rows.size()) {
    return absl::InvalidArgumentError(
        StrCat("cost model: groups cover ", grouped, " of ", data.rows.size(), " rows"));
  }
  if (!data.group_weights.empty() && data.group_weights.size() != data.group_sizes.size()) {
    return absl::InvalidArgumentError("cost model: one weight per group is needed");
  }
  if (!data.base_margin.empty() && (data.base_margin.size() != data.rows.size() ||
                                    !std::all_of(data.base_margin.begin(), data.base_margin.end(),
                                                 [](float v) { return std::isfinite(v); }))) {
    return absl::InvalidArgumentError("cost model: one finite base margin per row is needed");
  }
  Matrix m;
  if (absl::Status st = m.Create(data.rows); !st.ok()) return st;
  if (!data.base_margin.empty() &&
      XGDMatrixSetFloatInfo(m.get(), "base_margin", data.base_margin.data(),
                            data.base_margin.size()) != 0) {
    return XgbError("setting base margins");
  }
  if (XGDMatrixSetFloatInfo(m.get(), "label", data.scores.data(), data.scores.size()) != 0) {
    return XgbError("setting labels");
  }
  if (XGDMatrixSetUIntInfo(m.get(), "group", data.group_sizes.data(), data.group_sizes.size()) !=
      0) {
    return XgbError("setting groups");
  }
  if (!data.group_weights.empty() &&
      XGDMatrixSetFloatInfo(m.get(), "weight", data.group_weights.data(),
                            data.group_weights.size()) != 0) {
    return XgbError("setting weights");
  }
  BoosterHandle b = nullptr;
  DMatrixHandle dm = m.get();
  if (XGBoosterCreate(&dm, 1, &b) != 0) return XgbError("creating a booster");
  CostModel fresh(options_);
  fresh.booster_ = b;
  if (absl::Status st = SetParams(b, options_); !st.ok()) return st;
  for (int i = 0; i < options_.rounds; ++i) {
    if (XGBoosterUpdateOneIter(b, i, dm) != 0) return XgbError("training");
  }
  fresh.num_features_ = static_cast<int64_t>(cols);
  *this = std::move(fresh);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CostModel::Predict(
    const std::vector<std::vector<float>>& rows) const {
  if (booster_ == nullptr) return absl::FailedPreconditionError("cost model: not trained");
  if (rows.empty()) return std::vector<float>{};
  for (const auto& r : rows) {
    if (static_cast<int64_t>(r.size()) != num_features_) {
      return absl::InvalidArgumentError(
          StrCat("cost model: a row of ", r.size(), " features, trained on ", num_features_));
    }
  }
  Matrix m;
  if (absl::Status st = m.Create(rows); !st.ok()) return st;
  bst_ulong n = 0;
  const float* out = nullptr;
  if (XGBoosterPredict(booster_, m.get(), 0, 0, 0, &n, &out) != 0) return XgbError("predicting");
  if (n != rows.size()) return absl::InternalError("xgboost: wrong number of predictions");
  return std::vector<float>(out, out + n);
}

absl::StatusOr<std::string> CostModel::Save() const {
  if (booster_ == nullptr) return absl::FailedPreconditionError("cost model: not trained");
  bst_ulong n = 0;
  const char* bytes = nullptr;
  if (XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &n, &bytes) != 0) {
    return XgbError("saving");
  }
  return std::string(bytes, n);
}

absl::StatusOr<CostModel> CostModel::Load(std::string_view bytes, CostModelOptions options) {
  CostModel model(options);
  BoosterHandle b = nullptr;
  if (XGBoosterCreate(nullptr, 0, &b) != 0) return XgbError("creating a booster");
  model.booster_ = b;
  if (XGBoosterLoadModelFromBuffer(b, bytes.data(), bytes.size()) != 0) {
    return absl::InvalidArgumentError(StrCat("cost model: not a saved model: ", XGBGetLastError()));
  }
  bst_ulong features = 0;
  if (XGBoosterGetNumFeature(b, &features) != 0) return XgbError("reading the feature count");
  model.num_features_ = static_cast<int64_t>(features);
  if (absl::Status st = SetParams(b, options); !st.ok()) return st;
  return model;
}

namespace {

std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = (static_cast<double>(i + j)) / 2.0;
    i = j + 1;
  }
  return rank;
}

}  // namespace

double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  std::vector<double> ra = Ranks(a), rb = Ranks(b);
  double n = static_cast<double>(a.size());
  double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (va == 0 || vb == 0) return 0;
  return cov / std::sqrt(va * vb);
}

}  // namespace kiln::tuner

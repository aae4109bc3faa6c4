#include "tuner/guided_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace kiln::tuner {

namespace {
// Random draws per wanted config before giving up on a batch.
constexpr int kDrawsPerConfig = 64;
}  // namespace

GuidedSearch::GuidedSearch(ConfigSpace space, const SearchContext& context)
    : space_(std::move(space)), rng_(context.seed), cache_(context.workload, context.target) {}

void GuidedSearch::Update(const std::vector<std::pair<compiler::Config, double>>& results) {
  for (const auto& [config, cost] : results) {
    double c = std::isfinite(cost) && cost > 0 ? cost : std::numeric_limits<double>::infinity();
    results_.push_back({config, c});
    if (std::isfinite(c) && (best_s_ == 0 || c < best_s_)) best_s_ = c;
    Take(config);
  }
}

bool GuidedSearch::Fresh(const compiler::Config& config, const ConfigSet& measured) {
  std::string canonical = compiler::CanonicalConfig(config);
  if (proposed_.count(canonical) || measured.count(canonical)) return false;
  const auto& f = cache_.Get(config);
  return f.has_value() && !kernels_.count(f->kernel_hash);
}

void GuidedSearch::Take(const compiler::Config& config) {
  proposed_.insert(compiler::CanonicalConfig(config));
  if (const auto& f = cache_.Get(config); f.has_value()) kernels_.insert(f->kernel_hash);
}

std::vector<compiler::Config> GuidedSearch::RandomFresh(int n, const ConfigSet& measured) {
  std::vector<compiler::Config> out;
  for (int draws = 0; static_cast<int>(out.size()) < n && draws < kDrawsPerConfig * n; ++draws) {
    compiler::Config c = space_.Sample(rng_);
    if (!Fresh(c, measured)) continue;
    Take(c);
    out.push_back(std::move(c));
  }
  return out;
}

compiler::Config GuidedSearch::Mutate(compiler::Config config) {
  std::vector<const compiler::Knob*> open;
  for (const auto& k : space_.knobs()) {
    if (k.choices.size() > 1) open.push_back(&k);
  }
  if (open.empty()) return config;
  const compiler::Knob* k = open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng_)];
  int64_t& v = config[k->name];
  while (true) {
    int64_t next =
        k->choices[std::uniform_int_distribution<size_t>(0, k->choices.size() - 1)(rng_)];
    if (next != v) {
      v = next;
      return config;
    }
  }
}

std::vector<const GuidedSearch::Result*> GuidedSearch::Ranked() const {
  std::vector<const Result*> out;
  for (const Result& r : results_) {
    if (std::isfinite(r.cost_s)) out.push_back(&r);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Result* a, const Result* b) { return a->cost_s < b->cost_s; });
  return out;
}

// --- genetic ---------------------------------------------------------------

GeneticSearch::GeneticSearch(ConfigSpace space, const SearchContext& context,
                             GeneticOptions options)
    : GuidedSearch(std::move(space), context), options_(options) {}

std::vector<compiler::Config> GeneticSearch::Propose(int n, const ConfigSet& measured) {
  std::vector<const Result*> ranked = Ranked();
  if (static_cast<int>(ranked.size()) < std::min(options_.population, 4)) {
    return RandomFresh(n, measured);
  }
  if (static_cast<int>(ranked.size()) > options_.population) ranked.resize(options_.population);
  std::vector<double> fitness;
  for (const Result* r : ranked) fitness.push_back(best_s_ / r->cost_s);
  std::discrete_distribution<size_t> parent(fitness.begin(), fitness.end());
  std::bernoulli_distribution mutate(options_.mutation), coin(0.5);
  std::vector<compiler::Config> out;
  for (int tries = 0; static_cast<int>(out.size()) < n && tries < kDrawsPerConfig * n; ++tries) {
    const compiler::Config& a = ranked[parent(rng_)]->config;
    const compiler::Config& b = ranked[parent(rng_)]->config;
    compiler::Config child;
    for (const auto& k : space_.knobs()) {
      child[k.name] = coin(rng_) ? a.at(k.name) : b.at(k.name);
      if (mutate(rng_)) {
        child[k.name] =
            k.choices[std::uniform_int_distribution<size_t>(0, k.choices.size() - 1)(rng_)];
      }
    }
    if (!Fresh(child, measured)) child = Mutate(child);  // a clone of a parent: nudge it
    if (!Fresh(child, measured)) continue;
    Take(child);
    out.push_back(std::move(child));
  }
  for (auto& c : RandomFresh(n - static_cast<int>(out.size()), measured))
    out.push_back(std::move(c));
  return out;
}

// --- model-guided ------------------------------------------------------------

ModelSearch::ModelSearch(ConfigSpace space, SearchContext context, ModelSearchOptions options)
    : GuidedSearch(std::move(space), context),
      options_(options),
      prior_(std::move(context.prior)),
      model_(options.model) {}

std::optional<std::pair<std::string, size_t>> ModelSearch::SavedModel() const {
  if (!model_.trained()) return std::nullopt;
  auto bytes = model_.Save();
  if (!bytes.ok()) return std::nullopt;
  return std::make_pair(*std::move(bytes), trained_on_);
}

absl::Status ModelSearch::RestoreModel(std::string_view bytes, size_t trained_on) {
  auto model = CostModel::Load(bytes, options_.model);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  // Trained on other results than this search has, or on a prior's margins
  // whose weight is not saved: retrained at first use.
  trained_on_ =
      trained_on == results_.size() && prior_.rows.empty() ? trained_on : static_cast<size_t>(-1);
  return absl::OkStatus();
}

absl::Status ModelSearch::TrainIfNeeded() {
  // A prior the model cannot learn from (inconsistent records) is dropped:
  // the task is then tuned from its own results alone.
  if (!prior_.rows.empty() && !prior_model_.trained() && !prior_model_.Train(prior_).ok()) {
    prior_ = TrainingSet{};
  }
  if (results_.size() == trained_on_ && model_.trained()) return absl::OkStatus();
  if (static_cast<int>(results_.size()) < options_.min_results) return absl::OkStatus();
  TrainingSet data;
  std::vector<std::vector<float>> rows;
  std::vector<float> scores;
  for (const Result& r : results_) {
    const auto& f = cache_.Get(r.config);
    if (!f.has_value()) continue;
    rows.push_back(f->features);
    scores.push_back(std::isfinite(r.cost_s) ? static_cast<float>(best_s_ / r.cost_s) : 0.0f);
  }
  if (rows.empty()) return absl::OkStatus();
  if (prior_model_.trained()) {
    // The prior counts as far as it ranks this task's own results right (its
    // Spearman correlation with them, none if negative): other shapes'
    // optimum can be the wrong answer here, and the task's few results could
    // not outweigh a prior trusted in full.
    auto margin = prior_model_.Predict(rows);
    if (!margin.ok()) return margin.status();
    prior_weight_ = std::clamp(
        SpearmanCorrelation({margin->begin(), margin->end()}, {scores.begin(), scores.end()}), 0.0,
        1.0);
    for (float& m : *margin) m *= static_cast<float>(prior_weight_);
    data.base_margin = *std::move(margin);
  }
  data.AddGroup(std::move(rows), std::move(scores), 1.0f);
  if (absl::Status st = model_.Train(data); !st.ok()) return st;
  trained_on_ = results_.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ModelSearch::Score(
    const std::vector<compiler::Config>& configs) {
  if (!model_.trained() && !prior_model_.trained()) {
    return absl::FailedPreconditionError("xgb search: no model is trained yet");
  }
  std::vector<std::vector<float>> rows;
  std::vector<int> row_of(configs.size(), -1);
  const auto features = cache_.GetMany(configs);
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& f = *features[i];
    if (!f.has_value()) continue;
    row_of[i] = static_cast<int>(rows.size());
    rows.push_back(f->features);
  }
  std::vector<float> sum(rows.size(), 0.0f);
  for (const CostModel* m : {&prior_model_, &model_}) {
    if (!m->trained()) continue;
    auto pred = m->Predict(rows);
    if (!pred.ok()) return pred.status();
    const float w = m == &prior_model_ ? static_cast<float>(prior_weight_) : 1.0f;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += w * (*pred)[i];
  }
  std::vector<float> out(configs.size(), -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < configs.size(); ++i) {
    if (row_of[i] >= 0) out[i] = sum[row_of[i]];
  }
  return out;
}

std::vector<std::pair<float, compiler::Config>> ModelSearch::Anneal(size_t pool,
                                                                    const ConfigSet& measured) {
  // Start from the best measured configs and the best predicted of many
  // random ones (which are candidates themselves).
  std::vector<compiler::Config> points;
  for (const Result* r : Ranked()) {
    if (static_cast<int>(points.size()) >= options_.chains / 2) break;
    points.push_back(r->config);
  }
  std::vector<compiler::Config> samples;
  for (int i = 0; i < options_.samples; ++i) samples.push_back(space_.Sample(rng_));
  auto sample_scores = Score(samples);
  if (!sample_scores.ok()) return {};
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*sample_scores)[a] > (*sample_scores)[b]; });
  for (size_t i : order) {
    if (static_cast<int>(points.size()) >= options_.chains) break;
    points.push_back(samples[i]);
  }
  auto scores = Score(points);
  if (!scores.ok()) return {};
  std::vector<float> current = *scores;

  // The pool: best predicted fresh configs by kernel (one config per kernel).
  std::map<uint64_t, std::pair<float, compiler::Config>> best;
  float floor = -std::numeric_limits<float>::infinity();
  auto offer = [&](float score, const compiler::Config& c) {
    if (!std::isfinite(score) || (best.size() >= pool && score <= floor)) return false;
    if (!Fresh(c, measured)) return false;
    uint64_t h = cache_.Get(c)->kernel_hash;
    auto it = best.find(h);
    if (it != best.end() && it->second.first >= score) return false;
    best[h] = {score, c};
    if (best.size() > pool) {
      auto worst = std::min_element(best.begin(), best.end(), [](const auto& a, const auto& b) {
        return a.second.first < b.second.first;
      });
      best.erase(worst);
    }
    floor = std::min_element(best.begin(), best.end(), [](const auto& a, const auto& b) {
              return a.second.first < b.second.first;
            })->second.first;
    return true;
  };
  for (size_t i = 0; i < points.size(); ++i) offer(current[i], points[i]);
  for (size_t i : order) {
    if (!offer((*sample_scores)[i], samples[i]) && best.size() >= pool) break;
  }

  std::uniform_real_distribution<double> u(0, 1);
  int quiet = 0;
  for (int step = 0; step < options_.max_steps && quiet < options_.patience; ++step) {
    const double temperature = 1.0 - static_cast<double>(step) / options_.max_steps;
    std::vector<compiler::Config> next;
    for (const auto& p : points) next.push_back(Mutate(p));
    auto next_scores = Score(next);
    if (!next_scores.ok()) break;
    bool improved = false;
    for (size_t i = 0; i < points.size(); ++i) {
      float s = (*next_scores)[i];
      if (!std::isfinite(s)) continue;
      improved = offer(s, next[i]) || improved;
      double gain = static_cast<double>(s) - current[i];
      if (gain > 0 || u(rng_) < std::exp(gain / std::max(temperature, 1e-3))) {
        points[i] = std::move(next[i]);
        current[i] = s;
      }
    }
    quiet = improved ? 0 : quiet + 1;
  }
  std::vector<std::pair<float, compiler::Config>> out;
  for (auto& [h, e] : best) out.push_back(std::move(e));
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

std::vector<compiler::Config> ModelSearch::PickDiverse(
    std::vector<std::pair<float, compiler::Config>> pool, int n) {
  // Rank in the pool (1 for the best, towards 0 for the worst) plus the
  // share of knobs whose value the batch does not have yet.
  std::vector<compiler::Config> out;
  std::map<std::string, std::set<int64_t>> covered;
  std::vector<bool> used(pool.size(), false);
  const double size = static_cast<double>(std::max<size_t>(pool.size(), 1));
  const double knobs = static_cast<double>(std::max<size_t>(space_.knobs().size(), 1));
  while (static_cast<int>(out.size()) < n) {
    int pick = -1;
    double best = -1;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (used[i]) continue;
      int fresh = 0;
      for (const auto& [k, v] : pool[i].second) fresh += covered[k].count(v) ? 0 : 1;
      double gain = 1.0 - static_cast<double>(i) / size + options_.diversity * fresh / knobs;
      if (gain > best) {
        best = gain;
        pick = static_cast<int>(i);
      }
    }
    if (pick < 0) break;
    used[pick] = true;
    for (const auto& [k, v] : pool[pick].second) covered[k].insert(v);
    out.push_back(pool[pick].second);
  }
  return out;
}

std::vector<compiler::Config> ModelSearch::Propose(int n, const ConfigSet& measured) {
  if (n <= 0) return {};
  if (!TrainIfNeeded().ok() || (!model_.trained() && !prior_model_.trained())) {
    return RandomFresh(n, measured);
  }
  int explore = static_cast<int>(std::floor(options_.epsilon * n));
  if (explore == 0 && std::bernoulli_distribution(options_.epsilon * n)(rng_)) explore = 1;
  std::vector<compiler::Config> out =
      PickDiverse(Anneal(static_cast<size_t>(std::max(3 * n, 16)), measured), n - explore);
  for (const auto& c : out) Take(c);
  for (auto& c : RandomFresh(n - static_cast<int>(out.size()), measured))
    out.push_back(std::move(c));
  return out;
}

}  // namespace kiln::tuner

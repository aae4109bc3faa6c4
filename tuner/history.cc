#include "tuner/history.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/kernel.h"
#include "tuner/feature_cache.h"

namespace kiln::tuner {
namespace {
// Newest records read when looking for prior groups.
constexpr int kPriorScan = 20000;
}  // namespace

std::optional<std::pair<compiler::Config, double>> ResultOf(const storage::RecordRow& record) {
  auto config = compiler::ParseConfig(record.config);
  if (!config.ok()) return std::nullopt;
  const bool ok = record.error_kind == storage::ErrorKind::kNone && record.mean_cost_s > 0;
  return std::make_pair(*std::move(config),
                        ok ? record.mean_cost_s : std::numeric_limits<double>::infinity());
}

void AddToHistory(const storage::RecordRow& record, TaskHistory& history) {
  if (history.settled.count(record.config)) return;
  auto result = ResultOf(record);
  if (!result) return;
  if (storage::IsTransient(record.error_kind)) {
    if (++history.retry[record.config] < kMaxAttempts) return;
  }
  history.retry.erase(record.config);
  history.settled.insert(record.config);
  if (std::isfinite(result->second) &&
      (history.best_cost_s == 0 || result->second < history.best_cost_s)) {
    history.best_cost_s = result->second;
  }
  history.results.push_back(*std::move(result));
}

absl::StatusOr<ConfigCost> CostOfConfig(storage::TuningDb& db, const std::string& workload_key,
                                        const std::string& target, const std::string& canonical,
                                        const storage::RecordScope& scope) {
  ConfigCost cost;
  if (canonical.empty()) return cost;  // TopK reads "" as any config
  auto records = db.TopK(workload_key, target, kMaxConfigRecords, canonical, scope);
  if (!records.ok()) return records.status();
  const size_t n = records->size();
  if (n == 0) return cost;
  // TopK returns them fastest first.
  cost.records = static_cast<int>(n);
  cost.fastest_s = records->front().mean_cost_s;
  cost.median_s = n % 2 == 1
                      ? (*records)[n / 2].mean_cost_s
                      : ((*records)[n / 2 - 1].mean_cost_s + (*records)[n / 2].mean_cost_s) / 2;
  return cost;
}

namespace {

// The usable configs among the fastest records of `w`, fastest first, each
// once, with what the log says they cost; `confirmed` when a config other
// than the default was timed again (at least two records).
struct Usable {
  compiler::Config config;
  ConfigCost cost;
};
absl::StatusOr<std::vector<Usable>> UsableConfigs(storage::TuningDb& db,
                                                  const compiler::Workload& w,
                                                  const compiler::Target& target,
                                                  const std::string& default_canonical,
                                                  int* skipped, const storage::RecordScope& scope,
                                                  bool* confirmed, int records = kBestCandidates) {
  if (skipped != nullptr) *skipped = 0;
  *confirmed = false;
  const std::string key = w.Key(), spec = target.Spec();
  auto top = db.TopK(key, spec, records, "", scope);
  if (!top.ok()) return top.status();
  // (An unknown op has no knobs, and ValidateConfig refuses its records.)
  const std::vector<compiler::Knob> knobs =
      compiler::KnobsOf(w, target).value_or(std::vector<compiler::Knob>{});
  std::vector<Usable> candidates;
  std::set<std::string> seen;
  for (const storage::RecordRow& r : *top) {
    auto config = compiler::ParseConfig(r.config);
    if (config.ok()) *config = compiler::CompleteLoggedConfig(*config, knobs);
    if (!config.ok() || !compiler::ValidateConfig(w, target, *config, knobs).ok()) {
      if (skipped != nullptr && candidates.empty()) ++*skipped;
      continue;
    }
    // Once per kernel: an older record and a newer one of the same config.
    if (!seen.insert(compiler::CanonicalConfig(*config)).second) continue;
    auto cost = CostOfConfig(db, key, spec, r.config, scope);
    if (!cost.ok()) return cost.status();
    if (r.config != default_canonical && cost->records >= 2) *confirmed = true;
    candidates.push_back({*std::move(config), *cost});
  }
  return candidates;
}

}  // namespace

absl::StatusOr<std::vector<compiler::Config>> TunedConfigs(storage::TuningDb& db,
                                                           const compiler::Workload& w,
                                                           const compiler::Target& target, int k,
                                                           const storage::RecordScope& scope) {
  auto fallback = compiler::DefaultConfig(w, target);
  const std::string default_canonical =
      fallback.ok() ? compiler::CanonicalConfig(*fallback) : std::string();
  bool confirmed = false;
  auto usable = UsableConfigs(db, w, target, default_canonical, nullptr, scope, &confirmed,
                              kAlgorithmRecords);
  if (!usable.ok()) return usable.status();
  std::vector<Usable> others;
  for (Usable& u : *usable) {
    if (compiler::CanonicalConfig(u.config) == default_canonical) continue;
    others.push_back(std::move(u));
  }
  // Confirmed configs first, by their median; then the others by their
  // fastest record.
  auto is_confirmed = [&](const Usable& u) { return confirmed && u.cost.records >= 2; };
  auto cost = [&](const Usable& u) { return is_confirmed(u) ? u.cost.median_s : u.cost.fastest_s; };
  std::stable_sort(others.begin(), others.end(), [&](const Usable& a, const Usable& b) {
    const bool ca = is_confirmed(a), cb = is_confirmed(b);
    if (ca != cb) return ca;
    return cost(a) < cost(b);
  });
  // Then the fastest config of each other algorithm (the values of the
  // knobs that gate others: conv2d's layout) within kAlgorithmSpan of the
  // fastest, right after it: an algorithm that trades multiplies for bytes
  // (Winograd) or packing for reuse ranks differently alone than inside the
  // model, so each gets its chance there.
  std::set<std::string> gates;
  if (auto knobs = compiler::KnobsOf(w, target); knobs.ok()) {
    for (const compiler::Knob& kn : *knobs) {
      if (!kn.gate.empty()) gates.insert(kn.gate);
    }
  }
  auto algorithm = [&](const compiler::Config& c) {
    std::string a;
    for (const std::string& g : gates) {
      auto it = c.find(g);
      a += StrCat(g, "=", it == c.end() ? -1 : it->second, ";");
    }
    return a;
  };
  std::vector<size_t> order;
  std::set<std::string> algorithms;
  for (size_t i = 0; i < others.size(); ++i) {
    if (i > 0 && cost(others[i]) > kAlgorithmSpan * cost(others[0])) continue;
    if (algorithms.insert(algorithm(others[i].config)).second) order.push_back(i);
  }
  for (size_t i = 0; i < others.size(); ++i) {
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  }
  std::vector<compiler::Config> out;
  for (size_t i : order) {
    if (static_cast<int>(out.size()) >= k) break;
    out.push_back(std::move(others[i].config));
  }
  return out;
}

absl::StatusOr<std::optional<compiler::Config>> BestValidConfig(storage::TuningDb& db,
                                                                const compiler::Workload& w,
                                                                const compiler::Target& target,
                                                                int* skipped,
                                                                const storage::RecordScope& scope) {
  const std::string key = w.Key(), spec = target.Spec();
  auto fallback = compiler::DefaultConfig(w, target);
  const std::string default_canonical =
      fallback.ok() ? compiler::CanonicalConfig(*fallback) : std::string();
  bool confirmed = false;
  auto usable = UsableConfigs(db, w, target, default_canonical, skipped, scope, &confirmed);
  if (!usable.ok()) return usable.status();
  using Candidate = Usable;
  const std::vector<Candidate>& candidates = *usable;
  // Unconfirmed: the fastest record. Confirmed: the lowest median of the
  // confirmed configs.
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates) {
    if (!confirmed) {
      best = &c;
      break;
    }
    if (c.cost.records >= 2 && (best == nullptr || c.cost.median_s < best->cost.median_s))
      best = &c;
  }
  if (best == nullptr) return std::optional<compiler::Config>();
  if (!fallback.ok()) return best->config;
  if (*fallback == best->config) return std::optional<compiler::Config>();
  // The template's default unless clearly beaten.
  auto timed = CostOfConfig(db, key, spec, default_canonical, scope);
  if (!timed.ok()) return timed.status();
  if (timed->records == 0) return best->config;
  const double mine = confirmed ? best->cost.median_s : best->cost.fastest_s;
  const double theirs = confirmed ? timed->median_s : timed->fastest_s;
  if (mine < theirs * (1 - kDefaultMargin)) return best->config;
  return std::optional<compiler::Config>();
}

absl::StatusOr<TaskHistory> LoadTaskHistory(storage::TuningDb& db, const std::string& workload_key,
                                            const std::string& target,
                                            const std::string& compiler_version,
                                            const storage::RecordScope& scope) {
  auto records = db.QueryRecords(workload_key, target, 0, 0, scope);
  if (!records.ok()) return records.status();
  TaskHistory history;
  for (auto it = records->rbegin(); it != records->rend(); ++it) {
    if (it->compiler_version == compiler_version) AddToHistory(*it, history);
  }
  return history;
}

absl::StatusOr<TrainingSet> PriorFromLog(storage::TuningDb& db, const compiler::Workload& workload,
                                         const compiler::Target& target,
                                         const std::string& compiler_version, size_t max_rows,
                                         const storage::RecordScope& scope) {
  auto records = db.QueryRecords("", "", kPriorScan, 0, scope);
  if (!records.ok()) return records.status();
  const std::string own_key = workload.Key();
  // (workload key, target) -> records, and each key's workload when it is of
  // the same operator (nullopt otherwise).
  std::map<std::pair<std::string, std::string>, std::vector<const storage::RecordRow*>> groups;
  std::map<std::string, std::optional<compiler::Workload>> workloads;
  size_t rows = 0;
  for (const auto& r : *records) {
    if (rows >= max_rows) break;
    if (r.workload_key == own_key || r.compiler_version != compiler_version) continue;
    auto w = workloads.find(r.workload_key);
    if (w == workloads.end()) {
      std::optional<compiler::Workload> parsed;
      auto row = db.GetWorkload(r.workload_key);
      if (!row.ok()) return row.status();
      if (row->has_value() && (*row)->op == NameOf(workload.op)) {
        if (auto p = compiler::Workload::Parse((*row)->canonical); p.ok()) parsed = *std::move(p);
      }
      w = workloads.emplace(r.workload_key, std::move(parsed)).first;
    }
    if (!w->second.has_value()) continue;
    groups[{r.workload_key, r.target}].push_back(&r);
    ++rows;
  }
  TrainingSet set;
  for (const auto& [key, recs] : groups) {
    auto t = compiler::Target::Parse(key.second);
    if (!t.ok()) continue;
    FeatureCache cache(*workloads[key.first], *t);
    double best = std::numeric_limits<double>::infinity();
    for (const auto* r : recs) {
      if (r->error_kind == storage::ErrorKind::kNone && r->mean_cost_s > 0) {
        best = std::min(best, r->mean_cost_s);
      }
    }
    if (!std::isfinite(best)) continue;
    std::vector<std::vector<float>> features;
    std::vector<float> scores;
    for (const auto* r : recs) {
      auto config = compiler::ParseConfig(r->config);
      if (!config.ok()) continue;
      const auto& f = cache.Get(*config);
      if (!f.has_value()) continue;
      features.push_back(f->features);
      bool ok = r->error_kind == storage::ErrorKind::kNone && r->mean_cost_s > 0;
      scores.push_back(ok ? static_cast<float>(best / r->mean_cost_s) : 0.0f);
    }
    set.AddGroup(std::move(features), std::move(scores),
                 key.second == target.Spec() ? 1.0f : kOtherTargetWeight);
  }
  return set;
}

}  // namespace kiln::tuner

#include "tuner/feature_cache.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "base/cpus.h"
#include "compiler/kernel.h"
#include "tuner/features.h"

namespace kiln::tuner {

FeatureCache::FeatureCache(compiler::Workload workload, compiler::Target target, size_t capacity)
    : workload_(std::move(workload)), target_(std::move(target)), capacity_(capacity) {
  if (auto k = compiler::KnobsOf(workload_, target_); k.ok()) knobs_ = *std::move(k);
}

std::optional<compiler::Config> FeatureCache::Normalized(const compiler::Config& config) const {
  if (!compiler::ValidateConfig(workload_, target_, config).ok()) return std::nullopt;
  return compiler::NormalizeConfig(config, knobs_);
}

namespace {

std::optional<CandidateFeatures> Extract(const compiler::Workload& workload,
                                         const compiler::Target& target,
                                         const compiler::Config& config) {
  uint64_t hash = 0;
  auto f = ExtractFeatures(workload, target, config, &hash);
  if (!f.ok()) return std::nullopt;
  return CandidateFeatures{*std::move(f), hash};
}

// Below this many configs, threads cost more than they save.
constexpr size_t kMinParallel = 16;

}  // namespace

const std::optional<CandidateFeatures>& FeatureCache::Get(const compiler::Config& config) {
  return *GetMany({config}, 1).front();
}

std::vector<const std::optional<CandidateFeatures>*> FeatureCache::GetMany(
    const std::vector<compiler::Config>& configs, unsigned threads) {
  // Each config's key and, for those not cached, its normalized form's key
  // ("" for a config the template rejects).
  std::vector<std::string> keys, normals(configs.size());
  keys.reserve(configs.size());
  for (const auto& c : configs) keys.push_back(compiler::CanonicalConfig(c));
  // Full: start over (before looking up, so every config ends up cached).
  if (entries_.size() + 2 * configs.size() > capacity_) entries_.clear();
  // The normalized configs to extract, once each.
  std::vector<std::pair<std::string, compiler::Config>> todo;
  std::set<std::string_view> queued;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (entries_.count(keys[i])) continue;
    std::optional<compiler::Config> normal = Normalized(configs[i]);
    if (!normal.has_value()) continue;
    normals[i] = compiler::CanonicalConfig(*normal);
    if (!entries_.count(normals[i]) && queued.insert(normals[i]).second) {
      todo.emplace_back(normals[i], *std::move(normal));
    }
  }
  if (threads == 0) threads = static_cast<unsigned>(UsableCpus());
  threads = static_cast<unsigned>(
      std::min<size_t>(threads, (todo.size() + kMinParallel - 1) / kMinParallel));
  std::vector<std::optional<CandidateFeatures>> out(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next++; k < todo.size(); k = next++) {
      out[k] = Extract(workload_, target_, todo[k].second);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t k = 0; k < todo.size(); ++k) entries_.emplace(todo[k].first, std::move(out[k]));
  std::vector<const std::optional<CandidateFeatures>*> result;
  result.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    auto it = entries_.find(keys[i]);
    if (it == entries_.end()) {
      std::optional<CandidateFeatures> f;
      if (!normals[i].empty()) f = entries_.at(normals[i]);
      it = entries_.emplace(keys[i], std::move(f)).first;
    }
    result.push_back(&it->second);
  }
  return result;
}

}  // namespace kiln::tuner

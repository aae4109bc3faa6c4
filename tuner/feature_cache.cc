#include "tuner/feature_cache.h"

#include <utility>

#include "tuner/features.h"

namespace kiln::tuner {

FeatureCache::FeatureCache(compiler::Workload workload, compiler::Target target, size_t capacity)
    : workload_(std::move(workload)), target_(std::move(target)), capacity_(capacity) {}

const std::optional<CandidateFeatures>& FeatureCache::Get(const compiler::Config& config) {
  std::string key = compiler::CanonicalConfig(config);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (entries_.size() >= capacity_) entries_.clear();
  std::optional<CandidateFeatures> entry;
  uint64_t hash = 0;
  if (auto f = ExtractFeatures(workload_, target_, config, &hash); f.ok()) {
    entry = CandidateFeatures{*std::move(f), hash};
  }
  return entries_.emplace(std::move(key), std::move(entry)).first->second;
}

}  // namespace kiln::tuner

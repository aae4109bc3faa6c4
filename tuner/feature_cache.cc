#include "tuner/feature_cache.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "compiler/kernel.h"
#include "tuner/features.h"

namespace kiln::tuner {

FeatureCache::FeatureCache(compiler::Workload workload, compiler::Target target, size_t capacity)
    : workload_(std::move(workload)), target_(std::move(target)), capacity_(capacity) {
  if (auto k = compiler::KnobsOf(workload_, target_); k.ok()) knobs_ = *std::move(k);
}

std::string FeatureCache::Normalized(const compiler::Config& config) const {
  if (!compiler::ValidateConfig(workload_, target_, config).ok()) return "";
  return compiler::CanonicalConfig(compiler::NormalizeConfig(config, knobs_));
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
  std::string key = compiler::CanonicalConfig(config);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (entries_.size() + 2 > capacity_) entries_.clear();
  const std::string normal = Normalized(config);
  if (normal.empty()) return entries_.emplace(std::move(key), std::nullopt).first->second;
  auto n = entries_.find(normal);
  if (n == entries_.end()) {
    auto parsed = compiler::ParseConfig(normal);
    n = entries_.emplace(normal, Extract(workload_, target_, *parsed)).first;
  }
  if (normal == key) return n->second;
  std::optional<CandidateFeatures> copy = n->second;
  return entries_.emplace(std::move(key), std::move(copy)).first->second;
}

std::vector<const std::optional<CandidateFeatures>*> FeatureCache::GetMany(
    const std::vector<compiler::Config>& configs, unsigned threads) {
  std::vector<std::string> keys, normals(configs.size());
  keys.reserve(configs.size());
  for (const auto& c : configs) keys.push_back(compiler::CanonicalConfig(c));
  // Full: start over (before looking up, so every config ends up cached).
  if (entries_.size() + 2 * configs.size() > capacity_) entries_.clear();
  // The normalized configs to extract, once each.
  std::vector<std::string> todo;
  std::set<std::string_view> queued;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (entries_.count(keys[i])) continue;
    normals[i] = Normalized(configs[i]);
    if (!normals[i].empty() && !entries_.count(normals[i]) && queued.insert(normals[i]).second) {
      todo.push_back(normals[i]);
    }
  }
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(
      std::min<size_t>(threads, (todo.size() + kMinParallel - 1) / kMinParallel));
  std::vector<std::optional<CandidateFeatures>> out(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next++; k < todo.size(); k = next++) {
      auto parsed = compiler::ParseConfig(todo[k]);
      if (parsed.ok()) out[k] = Extract(workload_, target_, *parsed);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t k = 0; k < todo.size(); ++k) entries_.emplace(todo[k], std::move(out[k]));
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

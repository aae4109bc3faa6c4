#include "tuner/feature_cache.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "tuner/features.h"

namespace kiln::tuner {

FeatureCache::FeatureCache(compiler::Workload workload, compiler::Target target, size_t capacity)
    : workload_(std::move(workload)), target_(std::move(target)), capacity_(capacity) {}

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
  if (entries_.size() >= capacity_) entries_.clear();
  return entries_.emplace(std::move(key), Extract(workload_, target_, config)).first->second;
}

std::vector<const std::optional<CandidateFeatures>*> FeatureCache::GetMany(
    const std::vector<compiler::Config>& configs, unsigned threads) {
  std::vector<std::string> keys;
  keys.reserve(configs.size());
  std::vector<size_t> todo;  // indices of configs to extract
  std::set<std::string_view> queued;
  for (size_t i = 0; i < configs.size(); ++i) {
    keys.push_back(compiler::CanonicalConfig(configs[i]));
  }
  // Full: start over (before looking up, so every config ends up cached).
  if (entries_.size() + configs.size() > capacity_) entries_.clear();
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!entries_.count(keys[i]) && queued.insert(keys[i]).second) todo.push_back(i);
  }
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(
      std::min<size_t>(threads, (todo.size() + kMinParallel - 1) / kMinParallel));
  std::vector<std::optional<CandidateFeatures>> out(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next++; k < todo.size(); k = next++) {
      out[k] = Extract(workload_, target_, configs[todo[k]]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t k = 0; k < todo.size(); ++k) entries_.emplace(keys[todo[k]], std::move(out[k]));
  std::vector<const std::optional<CandidateFeatures>*> result;
  result.reserve(configs.size());
  for (const std::string& key : keys) result.push_back(&entries_.find(key)->second);
  return result;
}

}  // namespace kiln::tuner

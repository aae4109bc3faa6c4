#pragma once
// Features of one workload's candidates, extracted once per config: the
// model-guided searches score thousands of configs, many of them more than
// once. Configs that differ only in knobs their template does not read
// (compiler::NormalizeConfig: conv2d's NCHWc knobs under layout 0) are
// lowered once. Each entry also carries the structural hash of the
// candidate's lowered loops, so that configs building equal loops count as
// one kernel.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::tuner {

struct CandidateFeatures {
  std::vector<float> features;
  uint64_t kernel_hash = 0;  // structural hash of the lowered loops
};

class FeatureCache {
 public:
  FeatureCache(compiler::Workload workload, compiler::Target target, size_t capacity = 50000);
  // nullopt for a config the template rejects (never to be measured).
  const std::optional<CandidateFeatures>& Get(const compiler::Config& config);
  // Get of every config, the missing ones extracted on up to `threads`
  // threads (0: one per core). The pointers stay valid until the next call.
  std::vector<const std::optional<CandidateFeatures>*> GetMany(
      const std::vector<compiler::Config>& configs, unsigned threads = 0);
  const compiler::Workload& workload() const { return workload_; }
  const compiler::Target& target() const { return target_; }

 private:
  // The config whose features `config` has (its normalized form), or
  // nullopt for a config the template rejects.
  std::optional<compiler::Config> Normalized(const compiler::Config& config) const;

  compiler::Workload workload_;
  compiler::Target target_;
  std::vector<compiler::Knob> knobs_;
  size_t capacity_;
  std::map<std::string, std::optional<CandidateFeatures>> entries_;
};

}  // namespace kiln::tuner

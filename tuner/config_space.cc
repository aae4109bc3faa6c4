#include "tuner/config_space.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "base/check.h"
#include "base/str.h"

namespace kiln::tuner {

ConfigSpace::ConfigSpace(std::vector<compiler::Knob> knobs) : knobs_(std::move(knobs)) {
  std::set<std::string> names;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (const compiler::Knob& knob : knobs_) {
    KILN_CHECK(!knob.choices.empty()) << "knob '" << knob.name << "' has no choices";
    KILN_CHECK(names.insert(knob.name).second) << "knob '" << knob.name << "' declared twice";
    uint64_t n = knob.choices.size();
    if (saturated_ || size_ > kMax / n) {
      size_ = kMax;
      saturated_ = true;
    } else {
      size_ *= n;
    }
  }
}

compiler::Config ConfigSpace::ConfigAt(uint64_t index) const {
  KILN_CHECK(index < size_ || (saturated_ && index == size_))
      << "config index " << index << " out of a space of " << size_;
  compiler::Config config;
  for (const compiler::Knob& knob : knobs_) {
    uint64_t n = knob.choices.size();
    config[knob.name] = knob.choices[index % n];
    index /= n;
  }
  return config;
}

absl::StatusOr<uint64_t> ConfigSpace::IndexOf(const compiler::Config& config) const {
  if (absl::Status s = compiler::CheckConfigAgainstKnobs(config, knobs_); !s.ok()) return s;
  uint64_t index = 0;
  uint64_t stride = 1;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (const compiler::Knob& knob : knobs_) {
    auto it = std::find(knob.choices.begin(), knob.choices.end(), config.at(knob.name));
    uint64_t digit = static_cast<uint64_t>(it - knob.choices.begin());
    if (digit != 0) {
      if (stride == 0 || digit > (kMax - index) / stride) {
        return absl::InvalidArgumentError(StrCat("config '", compiler::CanonicalConfig(config),
                                                 "' lies beyond 2^64 in its space"));
      }
      index += digit * stride;
    }
    uint64_t n = knob.choices.size();
    stride = (stride == 0 || stride > kMax / n) ? 0 : stride * n;  // 0: overflowed
  }
  return index;
}

compiler::Config ConfigSpace::Sample(std::mt19937_64& rng) const {
  compiler::Config config;
  for (const compiler::Knob& knob : knobs_) {
    std::uniform_int_distribution<size_t> pick(0, knob.choices.size() - 1);
    config[knob.name] = knob.choices[pick(rng)];
  }
  return config;
}

}  // namespace kiln::tuner

#pragma once
// The config space of a schedule template: the cartesian product of its
// knobs' choices, indexed in mixed radix (the first knob varies fastest).

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"

namespace kiln::tuner {

class ConfigSpace {
 public:
  // Every knob needs at least one choice and a unique name (a template bug
  // otherwise: checked).
  explicit ConfigSpace(std::vector<compiler::Knob> knobs);

  const std::vector<compiler::Knob>& knobs() const { return knobs_; }
  // Product of the choice counts, saturating at UINT64_MAX. An empty knob
  // list has one (empty) config.
  uint64_t Size() const { return size_; }
  // Whether Size() saturated: indices then reach only the first 2^64-1 configs.
  bool Saturated() const { return saturated_; }

  // Requires index < Size().
  compiler::Config ConfigAt(uint64_t index) const;
  // INVALID_ARGUMENT when the config is not in this space.
  absl::StatusOr<uint64_t> IndexOf(const compiler::Config& config) const;
  // Uniform over the whole space (each knob drawn independently).
  compiler::Config Sample(std::mt19937_64& rng) const;

 private:
  std::vector<compiler::Knob> knobs_;
  uint64_t size_ = 1;
  bool saturated_ = false;
};

}  // namespace kiln::tuner

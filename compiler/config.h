#pragma once
// Knobs declared by a schedule template, and configs: one value per knob.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::compiler {

struct Knob {
  std::string name;
  std::vector<int64_t> choices;  // the legal values, in a fixed order
  // Read by the template only when knob `gate` has one of `gate_values`
  // (conv2d's NCHWc tile knobs under layout=1); no gate: always read.
  std::string gate;
  std::vector<int64_t> gate_values;
  // A knob added to its template with the choice that builds what the
  // template built before first: a record logged without it (an older
  // compiler's) reads that choice (CompleteLoggedConfig) instead of being
  // passed over, so adding a tuning choice keeps users' logs.
  bool first_if_absent = false;
};

// knob name -> value. std::map keeps the canonical (sorted) order.
using Config = std::map<std::string, int64_t>;

// "name=value;name=value" with names sorted; "" for an empty config.
std::string CanonicalConfig(const Config& config);
absl::StatusOr<Config> ParseConfig(std::string_view canonical);

// OK when `config` names every knob exactly once with one of its choices;
// INVALID_ARGUMENT naming the offending knob otherwise.
absl::Status CheckConfigAgainstKnobs(const Config& config, const std::vector<Knob>& knobs);

// A logged config with each first_if_absent knob it lacks at that knob's
// first choice; anything else it lacks or names is left for
// CheckConfigAgainstKnobs to refuse.
Config CompleteLoggedConfig(const Config& config, const std::vector<Knob>& knobs);

// `config` with every knob its template does not read (gated off) at its
// first choice: configs that differ only in unread knobs build one kernel
// and normalize to one config. Knobs `config` lacks are left out.
Config NormalizeConfig(const Config& config, const std::vector<Knob>& knobs);

}  // namespace kiln::compiler

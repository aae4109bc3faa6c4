#include "compiler/config.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/str.h"

namespace kiln::compiler {

std::string CanonicalConfig(const Config& config) {
  return [&] {
    std::string out;
    for (const auto& [k, v] : config) out += StrCat(out.empty() ? "" : ";", k, "=", v);
    return out;
  }();
}

absl::StatusOr<Config> ParseConfig(std::string_view canonical) {
  Config config;
  if (canonical.empty()) return config;
  for (std::string_view item : StrSplit(canonical, ';')) {
    size_t eq = item.find('=');
    int64_t v = 0;
    if (eq == std::string_view::npos || eq == 0 || !ParseInt64(item.substr(eq + 1), &v)) {
      return absl::InvalidArgumentError(StrCat("malformed config item '", item, "'"));
    }
    if (!config.emplace(std::string(item.substr(0, eq)), v).second) {
      return absl::InvalidArgumentError(StrCat("knob '", item.substr(0, eq), "' given twice"));
    }
  }
  return config;
}

absl::Status CheckConfigAgainstKnobs(const Config& config, const std::vector<Knob>& knobs) {
  for (const Knob& knob : knobs) {
    auto it = config.find(knob.name);
    if (it == config.end())
      return absl::InvalidArgumentError(StrCat("config lacks knob '", knob.name, "'"));
    if (std::find(knob.choices.begin(), knob.choices.end(), it->second) == knob.choices.end()) {
      return absl::InvalidArgumentError(
          StrCat("knob '", knob.name, "' has no choice ", it->second));
    }
  }
  if (config.size() != knobs.size()) {
    for (const auto& [name, value] : config) {
      if (std::none_of(knobs.begin(), knobs.end(), [&](const Knob& k) { return k.name == name; })) {
        return absl::InvalidArgumentError(StrCat("unknown knob '", name, "'"));
      }
    }
  }
  return absl::OkStatus();
}

Config CompleteLoggedConfig(const Config& config, const std::vector<Knob>& knobs) {
  Config out = config;
  for (const Knob& k : knobs) {
    if (k.first_if_absent && !k.choices.empty()) out.emplace(k.name, k.choices.front());
  }
  return out;
}

Config NormalizeConfig(const Config& config, const std::vector<Knob>& knobs) {
  Config out = config;
  for (const Knob& k : knobs) {
    if (k.gate.empty() || k.choices.empty() || !out.count(k.name)) continue;
    auto g = config.find(k.gate);
    if (g == config.end()) continue;
    if (std::find(k.gate_values.begin(), k.gate_values.end(), g->second) == k.gate_values.end()) {
      out[k.name] = k.choices.front();
    }
  }
  return out;
}

}  // namespace kiln::compiler

#pragma once
// Command-line flags for every kiln executable (kiln, kiln-tracker,
// kiln-agent, kiln-run). Header-only and dependency-free but for
// absl::Status, so kiln-run stays small.
//
// Value flags take "--name VALUE" or "--name=VALUE" and may repeat (every
// occurrence is kept, Get returns the last); bool flags take no value;
// anything not starting with '-' is positional, as is everything after "--".
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/str.h"

namespace kiln {

struct ParsedFlags {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // "--name" -> every value given
  std::set<std::string> bools;

  bool Has(const std::string& flag) const { return values.count(flag) || bools.count(flag); }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = values.find(flag);
    return it == values.end() ? fallback : it->second.back();
  }
  const std::vector<std::string>& All(const std::string& flag) const {
    static const std::vector<std::string> kNone;
    auto it = values.find(flag);
    return it == values.end() ? kNone : it->second;
  }
};

// INVALID_ARGUMENT naming an unknown flag, a value flag without a value, or a
// bool flag given a value.
inline absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                              const std::set<std::string>& value_flags,
                                              const std::set<std::string>& bool_flags = {}) {
  ParsedFlags out;
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name = a;
    std::string value;
    bool has_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos && a.starts_with("--")) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_value) return absl::InvalidArgumentError(StrCat(name, " takes no value"));
      out.bools.insert(name);
    } else if (value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(StrCat(name, " needs a value"));
        value = args[++i];
      }
      out.values[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(StrCat("unknown flag ", name));
    }
  }
  return out;
}

// "4G", "512M", "100000": a positive number of bytes, with an optional
// binary suffix K, M, G or T; false on anything else or on overflow.
inline bool ParseBytes(std::string text, int64_t* out) {
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
  }
  if (shift > 0) text.pop_back();
  int64_t v = 0;
  if (!ParseInt64(text, &v) || v <= 0 || v > (INT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

}  // namespace kiln

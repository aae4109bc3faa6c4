#pragma once
// A set of configs named by their canonical text (compiler::CanonicalConfig),
// held as 64-bit hashes of it: what a task remembers of every config it
// measured, proposed or found invalid, so that none is proposed twice. A
// hash is 8 bytes where the text and a tree node were ~180 (three such sets
// per task, 100,000s of trials per job); two configs whose texts collide
// (about one chance in 10^8 at a million configs) would make one of them
// look measured, never anything worse.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

namespace kiln::tuner {

class ConfigSet {
 public:
  ConfigSet() = default;
  ConfigSet(std::initializer_list<std::string_view> canonical) {
    for (std::string_view c : canonical) insert(c);
  }
  // From canonical texts (what tests and callers with a std::set hold).
  ConfigSet(const std::set<std::string>& canonical) {  // NOLINT: implicit on purpose
    for (const std::string& c : canonical) insert(c);
  }

  bool contains(std::string_view canonical) const { return hashes_.count(Hash(canonical)) != 0; }
  size_t count(std::string_view canonical) const { return contains(canonical) ? 1 : 0; }
  // True when it was not there.
  bool insert(std::string_view canonical) { return hashes_.insert(Hash(canonical)).second; }
  template <typename It>
  void insert(It first, It last) {
    for (; first != last; ++first) insert(*first);
  }
  size_t size() const { return hashes_.size(); }
  bool empty() const { return hashes_.empty(); }

 private:
  static uint64_t Hash(std::string_view canonical) {
    return std::hash<std::string_view>{}(canonical);
  }
  std::unordered_set<uint64_t> hashes_;
};

}  // namespace kiln::tuner

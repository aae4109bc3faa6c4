#include "tuner/search.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/str.h"
#include "tuner/guided_search.h"

namespace kiln::tuner {

namespace {
// Spaces up to this size are enumerated once rejection sampling struggles, so
// that exhaustion is detected exactly.
constexpr uint64_t kEnumerateLimit = uint64_t{1} << 20;
// Consecutive rejected samples before falling back to enumeration (or, for
// huge spaces, giving up on this batch).
constexpr int kMaxConsecutiveMisses = 256;
}  // namespace

RandomSearch::RandomSearch(ConfigSpace space, uint64_t seed)
    : space_(std::move(space)), rng_(seed) {}

bool RandomSearch::Excluded(const std::string& canonical, const ConfigSet& measured) const {
  return proposed_.count(canonical) != 0 || measured.count(canonical) != 0;
}

std::vector<compiler::Config> RandomSearch::Propose(int n,
                                                    const ConfigSet& already_measured_canonical) {
  std::vector<compiler::Config> out;
  if (n <= 0) return out;
  int misses = 0;
  while (!enumerated_ && static_cast<int>(out.size()) < n && misses < kMaxConsecutiveMisses) {
    compiler::Config config = space_.Sample(rng_);
    std::string canonical = compiler::CanonicalConfig(config);
    if (Excluded(canonical, already_measured_canonical)) {
      ++misses;
      continue;
    }
    misses = 0;
    proposed_.insert(std::move(canonical));
    out.push_back(std::move(config));
  }
  if (static_cast<int>(out.size()) == n || space_.Size() > kEnumerateLimit) return out;

  // Most of the space is used up: draw from what is left, exactly.
  if (!enumerated_) {
    enumerated_ = true;
    for (uint64_t i = 0; i < space_.Size(); ++i) {
      if (!Excluded(compiler::CanonicalConfig(space_.ConfigAt(i)), already_measured_canonical)) {
        left_.push_back(i);
      }
    }
    std::shuffle(left_.begin(), left_.end(), rng_);
  }
  while (static_cast<int>(out.size()) < n && !left_.empty()) {
    compiler::Config config = space_.ConfigAt(left_.back());
    left_.pop_back();
    std::string canonical = compiler::CanonicalConfig(config);
    if (Excluded(canonical, already_measured_canonical)) continue;
    proposed_.insert(std::move(canonical));
    out.push_back(std::move(config));
  }
  return out;
}

GridSearch::GridSearch(ConfigSpace space) : space_(std::move(space)) {}

std::vector<compiler::Config> GridSearch::Propose(int n,
                                                  const ConfigSet& already_measured_canonical) {
  std::vector<compiler::Config> out;
  while (static_cast<int>(out.size()) < n && !done_) {
    compiler::Config config = space_.ConfigAt(next_);
    if (next_ + 1 >= space_.Size()) {
      done_ = true;
    } else {
      ++next_;
    }
    if (already_measured_canonical.count(compiler::CanonicalConfig(config)) == 0) {
      out.push_back(std::move(config));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearch(SearchKind kind, ConfigSpace space,
                                                           SearchContext context) {
  switch (kind) {
    case SearchKind::kRandom:
      return std::unique_ptr<SearchStrategy>(new RandomSearch(std::move(space), context.seed));
    case SearchKind::kGrid:
      return std::unique_ptr<SearchStrategy>(new GridSearch(std::move(space)));
    case SearchKind::kGa:
      return std::unique_ptr<SearchStrategy>(new GeneticSearch(std::move(space), context));
    case SearchKind::kXgb:
      return std::unique_ptr<SearchStrategy>(new ModelSearch(std::move(space), std::move(context)));
  }
  return absl::InvalidArgumentError(StrCat("unknown search strategy ", static_cast<int>(kind),
                                           " (known: ", NamesList<SearchKind>(), ")"));
}

absl::StatusOr<SearchKind> ParseSearch(std::string_view name) {
  if (std::optional<SearchKind> kind = ParseName<SearchKind>(name)) return *kind;
  return absl::InvalidArgumentError(
      StrCat("unknown search strategy '", name, "' (known: ", NamesList<SearchKind>(), ")"));
}

}  // namespace kiln::tuner

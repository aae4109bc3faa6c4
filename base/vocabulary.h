#pragma once
// Closed vocabularies: an enum whose values travel as names (in a database
// column, a JSON line, a status page, a flag). Each enum declares its names
// once, in a specialization of Vocabulary; NameOf and ParseName convert at
// the edges (storage, RPC, flags), and everything between holds the enum.
//
//   template <> struct Vocabulary<Colour> {
//     static constexpr std::array<std::pair<Colour, std::string_view>, 2> kNames = {
//         {{Colour::kRed, "red"}, {Colour::kBlue, "blue"}}};
//   };
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

template <class E>
struct Vocabulary;

// The name of `value`; "unknown" for a value outside the table (a cast from a
// stray number).
template <class E>
constexpr std::string_view NameOf(E value) {
  for (const auto& [v, name] : Vocabulary<E>::kNames) {
    if (v == value) return name;
  }
  return "unknown";
}

// The value named `name` exactly; nullopt for any other text.
template <class E>
constexpr std::optional<E> ParseName(std::string_view name) {
  for (const auto& [v, n] : Vocabulary<E>::kNames) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// Every value, in the table's order.
template <class E>
constexpr auto ValuesOf() {
  constexpr auto& names = Vocabulary<E>::kNames;
  std::array<E, names.size()> out{};
  for (size_t i = 0; i < names.size(); ++i) out[i] = names[i].first;
  return out;
}

// Whether `value` is one of the table's (not a cast from a stray number).
template <class E>
constexpr bool IsKnownValue(E value) {
  return NameOf(value) != "unknown";
}

// The names joined by ", " ("red, blue"): for an error that lists what is
// accepted.
template <class E>
std::string NamesList() {
  std::string out;
  for (const auto& [v, name] : Vocabulary<E>::kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace kiln

#pragma once
// A tiny JSON reader and writer for the log database's JSON-lines export:
// objects, arrays, strings (with escapes, \uXXXX and surrogate pairs), numbers,
// true/false/null. Not a general-purpose library: no comments, no trailing
// commas, nesting limited to 64 levels.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::storage {

enum class JsonKind { kNull, kBool, kNumber, kString, kArray, kObject };

struct JsonValue {
  JsonKind kind = JsonKind::kNull;
  bool boolean = false;
  double number = 0;
  std::string number_text;  // the literal as written, for exact integers
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in input order

  // The member named `key` of an object, or nullptr.
  const JsonValue* Find(std::string_view key) const;
};

// Parses exactly one JSON value (surrounding whitespace allowed).
// INVALID_ARGUMENT with the byte offset of the problem.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// Typed member access for readers of parsed objects: INVALID_ARGUMENT naming
// the key when it is missing or of the wrong type.
absl::StatusOr<std::string> JsonGetString(const JsonValue& object, std::string_view key);
absl::StatusOr<double> JsonGetNumber(const JsonValue& object, std::string_view key);
absl::StatusOr<int64_t> JsonGetInt64(const JsonValue& object, std::string_view key);

// Appends JSON text to a string. The caller is responsible for well-formed
// nesting; commas between members and elements are inserted automatically.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  // Shortest text that parses back to the same double; non-finite -> null.
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool after_key_ = false;
};

// "value" with JSON escapes, quotes included.
std::string JsonQuote(std::string_view value);
// Round-trip text of a double ("%.17g" shortened when possible).
std::string FormatDouble(double value);

}  // namespace kiln::storage

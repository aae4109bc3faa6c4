#include "compiler/frontend/external_data.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "absl/status/status.h"
#include "base/str.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/wire_format_lite.h"

namespace kiln::compiler {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Field numbers of onnx.proto.
constexpr int kModelGraph = 7;                 // ModelProto.graph
constexpr int kGraphInitializer = 5;           // GraphProto.initializer
constexpr int kTensorExternalData = 13;        // TensorProto.external_data
constexpr int kTensorDataLocation = 14;        // TensorProto.data_location
constexpr int kEntryKey = 1, kEntryValue = 2;  // StringStringEntryProto

bool IsDelimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

// Runs `body` inside the length-delimited field that was just tagged.
template <typename Body>
bool Nested(CodedInputStream& in, Body body) {
  uint32_t len = 0;
  if (!in.ReadVarint32(&len)) return false;
  auto limit = in.PushLimit(static_cast<int>(len));
  bool ok = body() && in.ConsumedEntireMessage();
  in.PopLimit(limit);
  return ok;
}

bool ScanEntry(CodedInputStream& in, std::string* key, std::string* value) {
  while (uint32_t tag = in.ReadTag()) {
    int field = WireFormatLite::GetTagFieldNumber(tag);
    if ((field == kEntryKey || field == kEntryValue) && IsDelimited(tag)) {
      if (!WireFormatLite::ReadString(&in, field == kEntryKey ? key : value)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return true;
}

bool ScanTensor(CodedInputStream& in, std::vector<std::string>* out) {
  std::string location;
  bool external = false;
  while (uint32_t tag = in.ReadTag()) {
    int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == kTensorExternalData && IsDelimited(tag)) {
      std::string key, value;
      if (!Nested(in, [&] { return ScanEntry(in, &key, &value); })) return false;
      if (key == "location") location = value;
    } else if (field == kTensorDataLocation &&
               WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v = 0;
      if (!in.ReadVarint64(&v)) return false;
      external = v == 1;  // TensorProto.EXTERNAL
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  if (external && !location.empty()) {
    bool seen = false;
    for (const std::string& l : *out) seen = seen || l == location;
    if (!seen) out->push_back(location);
  }
  return true;
}

bool ScanGraph(CodedInputStream& in, std::vector<std::string>* out) {
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == kGraphInitializer && IsDelimited(tag)) {
      if (!Nested(in, [&] { return ScanTensor(in, out); })) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExternalDataLocations(const std::string& model_path) {
  int fd = ::open(model_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(StrCat("cannot open model file '", model_path, "'"));
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  std::vector<std::string> out;
  bool ok = true;
  {
    CodedInputStream in(&file);
    in.SetTotalBytesLimit(INT_MAX);
    while (uint32_t tag = in.ReadTag()) {
      if (WireFormatLite::GetTagFieldNumber(tag) == kModelGraph && IsDelimited(tag)) {
        ok = Nested(in, [&] { return ScanGraph(in, &out); });
      } else {
        ok = WireFormatLite::SkipField(&in, tag);
      }
      if (!ok) break;
    }
    ok = ok && in.ConsumedEntireMessage();
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        StrCat("not an ONNX model: '", model_path, "' does not parse as a ModelProto"));
  }
  return out;
}

absl::StatusOr<std::string> ResolveExternalData(const std::string& dir,
                                                const std::string& location) {
  namespace fs = std::filesystem;
  auto escapes = [&] {
    return absl::InvalidArgumentError(
        StrCat("external data location '", location, "' leaves the model's folder"));
  };
  if (location.empty()) return absl::InvalidArgumentError("empty external data location");
  fs::path rel(location);
  if (rel.is_absolute()) return escapes();
  for (const fs::path& part : rel) {
    if (part == "..") return escapes();
  }
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(dir.empty() ? "." : dir), ec);
  if (ec) return absl::NotFoundError(StrCat("cannot resolve folder '", dir, "': ", ec.message()));
  fs::path full = fs::weakly_canonical(base / rel, ec);
  if (ec) return absl::NotFoundError(StrCat("cannot resolve external data '", location, "'"));
  // Symbolic links may still lead out of the folder.
  auto b = base.begin(), f = full.begin();
  for (; b != base.end(); ++b, ++f) {
    if (f == full.end() || *f != *b) return escapes();
  }
  return full.string();
}

}  // namespace kiln::compiler

#include "deploy/tensor_io.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "deploy/str.h"

namespace kiln::deploy {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian; big-endian hosts need byte swaps");

constexpr int kOnnxFloat = 1;

const char* OnnxTypeName(int64_t t) {
  static const char* const kNames[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                       "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                       "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                       "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t < static_cast<int64_t>(sizeof(kNames) / sizeof(kNames[0]))) return kNames[t];
  return "unknown";
}

// A protobuf wire-format reader over a byte range.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  bool Fixed32(uint32_t* out) {
    if (data_.size() - pos_ < 4) return false;
    std::memcpy(out, data_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool Bytes(std::string_view* out) {
    uint64_t len = 0;
    if (!Varint(&len) || len > data_.size() - pos_) return false;
    *out = data_.substr(pos_, len);
    pos_ += len;
    return true;
  }
  bool Skip(int wire_type) {
    uint64_t ignored = 0;
    std::string_view ignored_bytes;
    switch (wire_type) {
      case 0:
        return Varint(&ignored);
      case 1:
        if (data_.size() - pos_ < 8) return false;
        pos_ += 8;
        return true;
      case 2:
        return Bytes(&ignored_bytes);
      case 5:
        if (data_.size() - pos_ < 4) return false;
        pos_ += 4;
        return true;
      default:
        return false;  // groups (3, 4) and invalid types
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

absl::Status Malformed(std::string_view why) {
  return absl::InvalidArgumentError(StrCat("malformed TensorProto: ", why));
}

bool ElementCount(const std::vector<int64_t>& shape, int64_t* count) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("scalar") : StrJoin(shape, "x");
}

}  // namespace

absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes) {
  Tensor t;
  WireReader r(bytes);
  int64_t data_type = 0;
  std::string_view raw;
  bool has_raw = false;
  while (!r.done()) {
    uint64_t key = 0;
    if (!r.Varint(&key)) return Malformed("truncated field key");
    const int field = static_cast<int>(key >> 3);
    const int wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 0) {  // dims, unpacked
      uint64_t v = 0;
      if (!r.Varint(&v)) return Malformed("truncated dims");
      t.shape.push_back(static_cast<int64_t>(v));
    } else if (field == 1 && wire == 2) {  // dims, packed
      std::string_view packed;
      if (!r.Bytes(&packed)) return Malformed("truncated packed dims");
      WireReader p(packed);
      while (!p.done()) {
        uint64_t v = 0;
        if (!p.Varint(&v)) return Malformed("bad packed dims");
        t.shape.push_back(static_cast<int64_t>(v));
      }
    } else if (field == 2 && wire == 0) {  // data_type
      uint64_t v = 0;
      if (!r.Varint(&v)) return Malformed("truncated data_type");
      data_type = static_cast<int64_t>(v);
    } else if (field == 4 && wire == 5) {  // float_data, unpacked
      uint32_t bits = 0;
      if (!r.Fixed32(&bits)) return Malformed("truncated float_data");
      t.data.push_back(std::bit_cast<float>(bits));
    } else if (field == 4 && wire == 2) {  // float_data, packed
      std::string_view packed;
      if (!r.Bytes(&packed) || packed.size() % 4 != 0) return Malformed("bad packed float_data");
      size_t old = t.data.size();
      t.data.resize(old + packed.size() / 4);
      std::memcpy(t.data.data() + old, packed.data(), packed.size());
    } else if (field == 8 && wire == 2) {  // name
      std::string_view name;
      if (!r.Bytes(&name)) return Malformed("truncated name");
      t.name = std::string(name);
    } else if (field == 9 && wire == 2) {  // raw_data
      if (!r.Bytes(&raw)) return Malformed("truncated raw_data");
      has_raw = true;
    } else if (field == 14 && wire == 0) {  // data_location
      uint64_t v = 0;
      if (!r.Varint(&v)) return Malformed("truncated data_location");
      if (v == 1) {
        return absl::InvalidArgumentError(
            "TensorProto uses external data, which is not supported; save it with the data inline");
      }
    } else if (field == 0 || !r.Skip(wire)) {
      return Malformed(StrCat("bad field ", field, " (wire type ", wire, ")"));
    }
  }
  if (data_type != kOnnxFloat) {
    return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "' has data_type ", data_type,
                                             " (", OnnxTypeName(data_type),
                                             "); only 1 (FLOAT) is supported"));
  }
  int64_t count = 0;
  if (!ElementCount(t.shape, &count)) {
    return Malformed(StrCat("bad dims ", ShapeText(t.shape)));
  }
  if (has_raw) {
    if (!t.data.empty()) return Malformed("both float_data and raw_data are set");
    if (raw.size() != static_cast<uint64_t>(count) * 4) {
      return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "' of shape ",
                                               ShapeText(t.shape), " needs ", count * 4,
                                               " bytes of raw_data, has ", raw.size()));
    }
    t.data.resize(static_cast<size_t>(count));
    if (count > 0) std::memcpy(t.data.data(), raw.data(), raw.size());
  } else if (t.data.size() != static_cast<uint64_t>(count)) {
    return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "' of shape ",
                                             ShapeText(t.shape), " needs ", count, " values, has ",
                                             t.data.size()));
  }
  return t;
}

std::string SerializeTensorProto(const Tensor& tensor) {
  std::string out;
  for (int64_t d : tensor.shape) {
    PutVarint(&out, (1 << 3) | 0);
    PutVarint(&out, static_cast<uint64_t>(d));
  }
  PutVarint(&out, (2 << 3) | 0);
  PutVarint(&out, kOnnxFloat);
  if (!tensor.name.empty()) {
    PutVarint(&out, (8 << 3) | 2);
    PutVarint(&out, tensor.name.size());
    out += tensor.name;
  }
  PutVarint(&out, (9 << 3) | 2);
  PutVarint(&out, tensor.data.size() * 4);
  size_t old = out.size();
  out.resize(old + tensor.data.size() * 4);
  if (!tensor.data.empty())
    std::memcpy(out.data() + old, tensor.data.data(), tensor.data.size() * 4);
  return out;
}

absl::StatusOr<Tensor> ParseNpy(std::string_view bytes) {
  auto bad = [](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("bad .npy file: ", why));
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6)) {
    return bad("missing the \\x93NUMPY magic");
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + i]);
    header_start = 12;
  } else {
    return bad(StrCat("unsupported format version ", int{major}));
  }
  if (bytes.size() - header_start < header_len) return bad("truncated header");
  std::string_view header = bytes.substr(header_start, header_len);
  std::string_view payload = bytes.substr(header_start + header_len);

  // The header is a Python dict literal:
  //   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }
  auto value_of = [&](std::string_view key) -> std::string_view {
    for (char q : {'\'', '"'}) {
      std::string quoted = StrCat(q, key, q);
      size_t k = header.find(quoted);
      if (k == std::string_view::npos) continue;
      size_t colon = header.find(':', k + quoted.size());
      if (colon == std::string_view::npos) return {};
      size_t v = header.find_first_not_of(" \t", colon + 1);
      return v == std::string_view::npos ? std::string_view() : header.substr(v);
    }
    return {};
  };
  std::string_view descr = value_of("descr");
  if (descr.empty() || (descr[0] != '\'' && descr[0] != '"')) return bad("no 'descr' in header");
  size_t close = descr.find(descr[0], 1);
  if (close == std::string_view::npos) return bad("unterminated 'descr'");
  descr = descr.substr(1, close - 1);
  size_t item = 0;
  if (descr == "<f4" || descr == "f4" || descr == "float32") {
    item = 4;
  } else if (descr == "<f8" || descr == "f8" || descr == "float64") {
    item = 8;
  } else {
    return bad(StrCat("dtype '", descr, "' is not supported (use float32 '<f4' or float64 '<f8')"));
  }
  std::string_view fortran = value_of("fortran_order");
  if (fortran.substr(0, 4) == "True") {
    return bad("fortran_order arrays are not supported; save a C-order array");
  }
  if (fortran.substr(0, 5) != "False") return bad("no 'fortran_order' in header");
  std::string_view shape_text = value_of("shape");
  if (shape_text.empty() || shape_text[0] != '(') return bad("no 'shape' in header");
  size_t end = shape_text.find(')');
  if (end == std::string_view::npos) return bad("unterminated 'shape'");
  Tensor t;
  for (std::string_view piece : StrSplit(shape_text.substr(1, end - 1), ',', true)) {
    size_t b = piece.find_first_not_of(" \t");
    if (b == std::string_view::npos) continue;
    piece = piece.substr(b, piece.find_last_not_of(" \tL") - b + 1);
    int64_t d = 0;
    if (!ParseInt64(piece, &d) || d < 0) return bad(StrCat("bad dimension '", piece, "'"));
    t.shape.push_back(d);
  }
  int64_t count = 0;
  if (!ElementCount(t.shape, &count)) return bad("shape too large");
  if (payload.size() != static_cast<uint64_t>(count) * item) {
    return bad(StrCat("shape ", ShapeText(t.shape), " of ", descr, " needs ", count * item,
                      " data bytes, file has ", payload.size()));
  }
  t.data.resize(static_cast<size_t>(count));
  if (item == 4) {
    if (count > 0) std::memcpy(t.data.data(), payload.data(), payload.size());
  } else {
    for (int64_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, payload.data() + i * 8, 8);
      t.data[i] = static_cast<float>(d);
    }
  }
  return t;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot open '", path, "': ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(StrCat("cannot read '", path, "'"));
  return std::move(ss).str();
}

absl::StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Tensor> t = bytes->substr(0, 6) == std::string_view("\x93NUMPY", 6)
                                 ? ParseNpy(*bytes)
                                 : ParseTensorProto(*bytes);
  if (!t.ok()) return absl::Status(t.status().code(), StrCat(path, ": ", t.status().message()));
  return t;
}

absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& tensor) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  std::string bytes = SerializeTensorProto(tensor);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(StrCat("error writing '", path, "'"));
  return absl::OkStatus();
}

}  // namespace kiln::deploy

#include "deploy/tensor_io.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "base/str.h"
#include "deploy/artifact.h"
#include "deploy/runtime.h"

namespace kiln::deploy {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian; big-endian hosts need byte swaps");

// Every dtype kiln carries, in the order error messages list them.
constexpr DType kAllDTypes[] = {
    DType::kFloat32,        DType::kFloat64,      DType::kFloat16,        DType::kInt8,
    DType::kInt16,          DType::kInt32,        DType::kInt64,          DType::kUInt8,
    DType::kUInt16,         DType::kUInt32,       DType::kUInt64,         DType::kBool,
    DType::kBFloat16,       DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
    DType::kFloat8E5M2FNUZ, DType::kInt4,         DType::kUInt4};

std::string SupportedDTypes() {
  std::vector<std::string> names;
  for (DType t : kAllDTypes) names.push_back(DTypeName(t));
  return StrJoin(names, ", ");
}

const char* OnnxTypeName(int64_t t) {
  static const char* const kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1"};
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
  bool Fixed64(uint64_t* out) {
    if (data_.size() - pos_ < 8) return false;
    std::memcpy(out, data_.data() + pos_, 8);
    pos_ += 8;
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
        return Fixed64(&ignored);
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

// The element count of `shape`, false for a negative dimension or a count
// whose size in bytes (at 8 bytes an element) would not fit an int64.
bool ElementCount(const std::vector<int64_t>& shape, int64_t* count) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 8;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > kMax / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("scalar") : StrJoin(shape, "x");
}

// The TensorProto fields that hold typed values.
enum ValueField { kFloatData, kInt32Data, kInt64Data, kDoubleData, kUInt64Data, kNumValueFields };
constexpr const char* kValueFieldNames[kNumValueFields] = {"float_data", "int32_data", "int64_data",
                                                           "double_data", "uint64_data"};

// The TensorProto field number and the wire type of one unpacked value.
struct ValueFieldInfo {
  int number;
  ValueField field;
  int scalar_wire;
};
constexpr ValueFieldInfo kValueFieldInfo[] = {{4, kFloatData, 5},
                                              {5, kInt32Data, 0},
                                              {7, kInt64Data, 0},
                                              {10, kDoubleData, 1},
                                              {11, kUInt64Data, 0}};

// Where ONNX keeps the values of a dtype when raw_data is not used.
ValueField FieldOf(DType t) {
  switch (t) {
    case DType::kFloat32:
      return kFloatData;
    case DType::kFloat64:
      return kDoubleData;
    case DType::kInt64:
      return kInt64Data;
    case DType::kUInt32:
    case DType::kUInt64:
      return kUInt64Data;
    default:
      return kInt32Data;  // int8/16/32, uint8/16, bool, float16
  }
}

// Reads one occurrence of a repeated numeric field: a single value in its
// wire type, or a packed run (wire type 2). Values are kept as their 64-bit
// wire pattern; each takes at least one byte of input, so the vector is
// bounded by the input's size.
bool ReadValues(WireReader* r, int wire, int scalar_wire, std::vector<uint64_t>* out) {
  auto one = [&](WireReader* from) -> bool {
    uint64_t v = 0;
    if (scalar_wire == 0) return from->Varint(&v) && (out->push_back(v), true);
    if (scalar_wire == 1) return from->Fixed64(&v) && (out->push_back(v), true);
    uint32_t v32 = 0;
    return from->Fixed32(&v32) && (out->push_back(v32), true);
  };
  if (wire == scalar_wire) return one(r);
  if (wire != 2) return false;
  std::string_view packed;
  if (!r->Bytes(&packed)) return false;
  if (scalar_wire == 5 && packed.size() % 4 != 0) return false;
  if (scalar_wire == 1 && packed.size() % 8 != 0) return false;
  WireReader p(packed);
  while (!p.done()) {
    if (!one(&p)) return false;
  }
  return true;
}

// Stores one value of an int32_data entry (its low 32 bits, as protobuf reads
// an int32) as an element of `t`, checking its range.
bool StoreInt32Data(DType t, uint64_t wire, uint8_t* dst, int64_t* bad_value) {
  const int64_t v = static_cast<int32_t>(static_cast<uint32_t>(wire));
  *bad_value = v;
  auto in = [&](int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  switch (t) {
    case DType::kInt8:
      if (!in(-128, 127)) return false;
      *reinterpret_cast<int8_t*>(dst) = static_cast<int8_t>(v);
      return true;
    case DType::kUInt8:
      if (!in(0, 255)) return false;
      *dst = static_cast<uint8_t>(v);
      return true;
    case DType::kBool:
      *dst = v != 0 ? 1 : 0;
      return true;
    case DType::kInt16: {
      if (!in(-32768, 32767)) return false;
      int16_t x = static_cast<int16_t>(v);
      std::memcpy(dst, &x, 2);
      return true;
    }
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: {  // (b)float16: its bit pattern, written unsigned or sign-extended
      if (!in(t == DType::kUInt16 ? 0 : -32768, 65535)) return false;
      uint16_t x = static_cast<uint16_t>(v & 0xffff);
      std::memcpy(dst, &x, 2);
      return true;
    }
    case DType::kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(dst, &x, 4);
      return true;
    }
    case DType::kFloat8E4M3FN:  // float8: its bit pattern; int4: a packed pair
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kInt4:
    case DType::kUInt4:
      if (!in(-128, 255)) return false;
      *dst = static_cast<uint8_t>(v & 0xff);
      return true;
    default:
      return false;
  }
}

void NormalizeBool(std::vector<uint8_t>* bytes) {
  for (uint8_t& b : *bytes) b = b != 0 ? 1 : 0;
}

template <class T>
std::string ShortestText(T v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : StrCat(v);
}

absl::Status CheckConsistent(const Tensor& t) {
  int64_t count = 0;
  if (!ElementCount(t.shape, &count)) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", t.name, "' has bad shape ", ShapeText(t.shape)));
  }
  if (static_cast<uint64_t>(count) * DTypeBytes(t.dtype) != t.bytes.size()) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", t.name, "' of ", DTypeName(t.dtype), " ", ShapeText(t.shape), " needs ",
               count * DTypeBytes(t.dtype), " bytes, has ", t.bytes.size()));
  }
  return absl::OkStatus();
}

absl::Status WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(StrCat("error writing '", path, "'"));
  return absl::OkStatus();
}

// NumPy's type code (without byte order) of a dtype.
const char* NpyCode(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "f4";
    case DType::kFloat64:
      return "f8";
    case DType::kFloat16:
      return "f2";
    case DType::kInt8:
      return "i1";
    case DType::kUInt8:
      return "u1";
    case DType::kBool:
      return "b1";
    case DType::kInt16:
      return "i2";
    case DType::kUInt16:
      return "u2";
    case DType::kInt32:
      return "i4";
    case DType::kUInt32:
      return "u4";
    case DType::kInt64:
      return "i8";
    case DType::kUInt64:
      return "u8";
    default:  // storage-only types: NumPy has none (ml_dtypes saves them as void)
      return "?";
  }
}

}  // namespace

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::ByteSize() const { return NumElements() * DTypeBytes(dtype); }

double ElementAsDouble(const Tensor& t, int64_t i) {
  return ElementToDouble(t.dtype, t.bytes.data(), i);
}

std::string ElementToString(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat32:
      return ShortestText(ReadElement<float>(t.bytes.data(), i));
    case DType::kFloat64:
      return ShortestText(ReadElement<double>(t.bytes.data(), i));
    case DType::kFloat16:
      return ShortestText(HalfToFloat(ReadElement<uint16_t>(t.bytes.data(), i)));
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return ShortestText(static_cast<float>(ElementAsDouble(t, i)));
    case DType::kBool:
      return ReadElement<uint8_t>(t.bytes.data(), i) != 0 ? "true" : "false";
    case DType::kInt64:
      return std::to_string(ReadElement<int64_t>(t.bytes.data(), i));
    case DType::kUInt64:
      return std::to_string(ReadElement<uint64_t>(t.bytes.data(), i));
    default:  // the narrower integers are exact as doubles
      return std::to_string(static_cast<int64_t>(ElementAsDouble(t, i)));
  }
}

std::vector<float> ToFloatVector(const Tensor& t) {
  const int64_t n = static_cast<int64_t>(t.bytes.size()) / DTypeBytes(t.dtype);
  if (t.dtype == DType::kFloat32) return t.values<float>();
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(ElementAsDouble(t, i));
  return out;
}

absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes) {
  Tensor t;
  WireReader r(bytes);
  int64_t data_type = 0;
  std::string_view raw;
  bool has_raw = false;
  std::vector<uint64_t> values[kNumValueFields];
  bool present[kNumValueFields] = {};
  while (!r.done()) {
    uint64_t key = 0;
    if (!r.Varint(&key)) return Malformed("truncated field key");
    const int field = static_cast<int>(key >> 3);
    const int wire = static_cast<int>(key & 7);
    int value_field = -1, scalar_wire = 0;
    for (const ValueFieldInfo& f : kValueFieldInfo) {
      if (f.number == field) {
        value_field = f.field;
        scalar_wire = f.scalar_wire;
      }
    }
    if (value_field >= 0 && (wire == scalar_wire || wire == 2)) {
      if (!ReadValues(&r, wire, scalar_wire, &values[value_field])) {
        return Malformed(StrCat("bad ", kValueFieldNames[value_field]));
      }
      present[value_field] = true;
    } else if (field == 1 && wire == 0) {  // dims, unpacked
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
  std::optional<DType> dtype = DTypeFromOnnx(data_type);
  if (!dtype) {
    return absl::InvalidArgumentError(StrCat(
        "TensorProto '", t.name, "' has data_type ", data_type, " (", OnnxTypeName(data_type),
        "), which kiln does not support (supported: ", SupportedDTypes(), ")"));
  }
  t.dtype = *dtype;
  int64_t count = 0;
  if (!ElementCount(t.shape, &count)) {
    return Malformed(StrCat("bad dims ", ShapeText(t.shape)));
  }
  const ValueField field = FieldOf(t.dtype);
  for (int f = 0; f < kNumValueFields; ++f) {
    if (!present[f] || f == field) continue;
    return absl::InvalidArgumentError(StrCat(
        "TensorProto '", t.name, "' of data_type ", data_type, " (", DTypeName(t.dtype), ") has ",
        kValueFieldNames[f], "; its values belong in ", kValueFieldNames[field], " or raw_data"));
  }
  // int4/uint4 come packed two per byte (raw_data, or one byte per
  // int32_data value) and are unpacked to one per byte.
  const int64_t item = DTypeBytes(t.dtype), stored = PackedBytes(t.dtype, count);
  auto unpack = [&] {
    if (!IsInt4(t.dtype)) return;
    std::vector<uint8_t> packed = std::move(t.bytes);
    t.bytes.resize(static_cast<size_t>(count));
    UnpackInt4(t.dtype, packed.data(), count, t.bytes.data());
  };
  if (has_raw) {
    if (present[field]) {
      return Malformed(StrCat("both ", kValueFieldNames[field], " and raw_data are set"));
    }
    if (raw.size() != static_cast<uint64_t>(stored)) {
      return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "' of ", DTypeName(t.dtype),
                                               " ", ShapeText(t.shape), " needs ", stored,
                                               " bytes of raw_data, has ", raw.size()));
    }
    t.bytes.assign(raw.begin(), raw.end());
    if (t.dtype == DType::kBool) NormalizeBool(&t.bytes);
    unpack();
    return t;
  }
  const std::vector<uint64_t>& v = values[field];
  const int64_t want = IsInt4(t.dtype) ? stored : count;
  if (v.size() != static_cast<uint64_t>(want)) {
    return absl::InvalidArgumentError(
        StrCat("TensorProto '", t.name, "' of ", DTypeName(t.dtype), " ", ShapeText(t.shape),
               " needs ", want, " values, has ", v.size(), " in ", kValueFieldNames[field]));
  }
  // want == v.size() now, so the allocation is bounded by the input's size.
  t.bytes.resize(static_cast<size_t>(want * item));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* dst = t.bytes.data() + i * item;
    if (field == kInt32Data) {
      int64_t bad = 0;
      if (!StoreInt32Data(t.dtype, v[i], dst, &bad)) {
        return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "': int32_data value ",
                                                 bad, " at index ", i, " is out of range for ",
                                                 DTypeName(t.dtype)));
      }
    } else if (t.dtype == DType::kUInt32) {
      if (v[i] > std::numeric_limits<uint32_t>::max()) {
        return absl::InvalidArgumentError(StrCat("TensorProto '", t.name, "': uint64_data value ",
                                                 v[i], " at index ", i,
                                                 " is out of range for uint32"));
      }
      uint32_t x = static_cast<uint32_t>(v[i]);
      std::memcpy(dst, &x, 4);
    } else if (item == 4) {  // float_data: the float's bits
      uint32_t x = static_cast<uint32_t>(v[i]);
      std::memcpy(dst, &x, 4);
    } else {  // int64_data, uint64_data, double_data: the 64-bit pattern
      std::memcpy(dst, &v[i], 8);
    }
  }
  unpack();
  return t;
}

std::string SerializeTensorProto(const Tensor& tensor) {
  std::string out;
  for (int64_t d : tensor.shape) {
    PutVarint(&out, (1 << 3) | 0);
    PutVarint(&out, static_cast<uint64_t>(d));
  }
  PutVarint(&out, (2 << 3) | 0);
  PutVarint(&out, static_cast<uint64_t>(OnnxCode(tensor.dtype)));
  if (!tensor.name.empty()) {
    PutVarint(&out, (8 << 3) | 2);
    PutVarint(&out, tensor.name.size());
    out += tensor.name;
  }
  std::vector<uint8_t> packed;
  const std::vector<uint8_t>* data = &tensor.bytes;
  if (IsInt4(tensor.dtype)) {
    packed.resize(static_cast<size_t>(PackedBytes(tensor.dtype, tensor.NumElements())));
    PackInt4(tensor.bytes.data(), tensor.NumElements(), packed.data());
    data = &packed;
  }
  PutVarint(&out, (9 << 3) | 2);
  PutVarint(&out, data->size());
  out.append(reinterpret_cast<const char*>(data->data()), data->size());
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

  // '<f4', '=f4', '|u1', 'f4'; also the dtype's name ('float32').
  Tensor t;
  std::string_view order, code = descr;
  if (!code.empty() && (code[0] == '<' || code[0] == '=' || code[0] == '|' || code[0] == '>')) {
    order = code.substr(0, 1);
    code.remove_prefix(1);
  }
  std::optional<DType> dtype;
  for (DType d : kAllDTypes) {
    if (code == NpyCode(d)) dtype = d;
  }
  if (!dtype && order.empty()) dtype = ParseDType(code);
  if (!dtype) {
    std::vector<std::string> accepted;
    for (DType d : kAllDTypes) {
      accepted.push_back(StrCat(DTypeBytes(d) == 1 ? "|" : "<", NpyCode(d)));
    }
    return bad(
        StrCat("dtype '", descr, "' is not supported (use one of ", StrJoin(accepted, ", "), ")"));
  }
  if (order == ">" && DTypeBytes(*dtype) > 1) {
    return bad(StrCat("dtype '", descr,
                      "' is big-endian, which is not supported; save a little-endian array"));
  }
  t.dtype = *dtype;
  std::string_view fortran = value_of("fortran_order");
  if (fortran.substr(0, 4) == "True") {
    return bad("fortran_order arrays are not supported; save a C-order array");
  }
  if (fortran.substr(0, 5) != "False") return bad("no 'fortran_order' in header");
  std::string_view shape_text = value_of("shape");
  if (shape_text.empty() || shape_text[0] != '(') return bad("no 'shape' in header");
  size_t end = shape_text.find(')');
  if (end == std::string_view::npos) return bad("unterminated 'shape'");
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
  const int64_t item = DTypeBytes(t.dtype);
  if (payload.size() != static_cast<uint64_t>(count * item)) {
    return bad(StrCat("shape ", ShapeText(t.shape), " of ", descr, " needs ", count * item,
                      " data bytes, file has ", payload.size()));
  }
  t.bytes.assign(payload.begin(), payload.end());
  if (t.dtype == DType::kBool) NormalizeBool(&t.bytes);
  return t;
}

std::string SerializeNpy(const Tensor& tensor) {
  std::string shape = "(";
  for (int64_t d : tensor.shape) shape += StrCat(d, tensor.shape.size() == 1 ? "," : ", ");
  if (tensor.shape.size() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string header =
      StrCat("{'descr': '", DTypeBytes(tensor.dtype) == 1 ? "|" : "<", NpyCode(tensor.dtype),
             "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and a newline so that the data starts 64-byte aligned.
  const bool v2 = header.size() + 1 + 64 > 0xffff;
  const size_t prefix = v2 ? 12 : 10;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  return out;
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
  if (absl::Status s = CheckConsistent(tensor); !s.ok()) return s;
  return WriteBytes(path, SerializeTensorProto(tensor));
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor) {
  if (absl::Status s = CheckConsistent(tensor); !s.ok()) return s;
  if (IsStorageOnly(tensor.dtype)) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", tensor.name, "' is ", DTypeName(tensor.dtype),
               ", which .npy cannot name (NumPy saves it as void); write a .pb TensorProto"));
  }
  return WriteBytes(path, SerializeNpy(tensor));
}

absl::StatusOr<std::vector<Tensor>> ReadInputFiles(const std::vector<TensorInfo>& inputs,
                                                   const std::vector<std::string>& specs) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(StrCat(parts...)); };
  std::map<std::string, std::string> files;
  for (const std::string& spec : specs) {
    std::string name, file;
    const size_t eq = spec.find('=');
    bool named = false;
    if (eq != std::string::npos) {
      name = spec.substr(0, eq);
      named = std::any_of(inputs.begin(), inputs.end(),
                          [&](const TensorInfo& t) { return t.name == name; });
    }
    if (named) {
      file = spec.substr(eq + 1);
    } else if (inputs.size() == 1 &&
               (eq == std::string::npos || ::access(spec.c_str(), F_OK) == 0)) {
      name = inputs[0].name;
      file = spec;
    } else {
      std::vector<std::string> names;
      for (const TensorInfo& t : inputs) names.push_back(t.name);
      return bad("--input '", spec, "': expected NAME=FILE with NAME one of the model's inputs (",
                 StrJoin(names, ", "), ")");
    }
    if (!files.emplace(name, file).second) return bad("input '", name, "' given twice");
  }
  std::vector<Tensor> out;
  for (const TensorInfo& info : inputs) {
    auto it = files.find(info.name);
    if (it == files.end()) {
      return bad("missing input '", info.name, "' (", DTypeName(info.dtype), " ",
                 ShapeToString(info.shape), "): pass --input ", info.name, "=FILE");
    }
    absl::StatusOr<Tensor> t = ReadTensorFile(it->second);
    if (!t.ok()) return bad("input '", info.name, "': ", t.status().message());
    if (t->dtype != info.dtype) {
      if (t->dtype != DType::kFloat64 || info.dtype != DType::kFloat32) {
        return bad("input '", info.name, "': expected ", DTypeName(info.dtype), ", given ",
                   DTypeName(t->dtype), " (from ", it->second, ")");
      }
      *t = MakeTensor(t->name, t->shape, ToFloatVector(*t));
    }
    if (t->shape != info.shape) {
      return bad("input '", info.name, "': expected shape ", ShapeToString(info.shape), ", given ",
                 ShapeToString(t->shape), " (from ", it->second, ")");
    }
    out.push_back(*std::move(t));
  }
  return out;
}

}  // namespace kiln::deploy

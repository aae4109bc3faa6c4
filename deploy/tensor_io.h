#pragma once
// Tensors of every kiln::DType from and to files, without protobuf or NumPy:
// ONNX TensorProto `.pb` (a hand-written wire-format decoder) and NumPy `.npy`.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/check.h"
#include "base/dtype.h"

namespace kiln::deploy {

// Whether T is the C++ type that stores one element of `t`: float, double,
// the <cstdint> integer of its width and signedness, uint8_t for bool (0 or 1)
// and uint16_t for float16 (its IEEE binary16 bit pattern).
template <class T>
constexpr bool StoresDType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return std::is_same_v<T, float>;
    case DType::kFloat64:
      return std::is_same_v<T, double>;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kUInt16:
      return std::is_same_v<T, uint16_t>;  // (b)float16: the bit patterns
    case DType::kBool:
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return std::is_same_v<T, uint8_t>;
    case DType::kInt8:
    case DType::kInt4:
      return std::is_same_v<T, int8_t>;
    case DType::kInt16:
      return std::is_same_v<T, int16_t>;
    case DType::kInt32:
      return std::is_same_v<T, int32_t>;
    case DType::kUInt32:
      return std::is_same_v<T, uint32_t>;
    case DType::kInt64:
      return std::is_same_v<T, int64_t>;
    case DType::kUInt64:
      return std::is_same_v<T, uint64_t>;
  }
  return false;
}

// The dtype a C++ element type stands for by default (uint8_t: uint8,
// uint16_t: uint16; bool and float16 tensors name their dtype explicitly).
template <class T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFloat32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::kFloat64;
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return DType::kInt8;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return DType::kUInt8;
  } else if constexpr (std::is_same_v<T, int16_t>) {
    return DType::kInt16;
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    return DType::kUInt16;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return DType::kInt32;
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return DType::kUInt32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return DType::kInt64;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return DType::kUInt64;
  } else {
    static_assert(sizeof(T) == 0, "no kiln dtype is stored as this type");
  }
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // empty: a scalar
  DType dtype = DType::kFloat32;
  // NumElements() * DTypeBytes(dtype) bytes, row-major, little-endian; bool is
  // one byte per element, 0 or 1; float16 is its 16-bit pattern.
  std::vector<uint8_t> bytes;

  // The product of the dimensions (1 for a scalar).
  int64_t NumElements() const;
  // NumElements() * DTypeBytes(dtype).
  int64_t ByteSize() const;

  // The elements as T, which must store dtype (StoresDType<T>; checked).
  template <class T>
  T* data_as() {
    KILN_CHECK(StoresDType<T>(dtype)) << "tensor '" << name << "' is " << DTypeName(dtype);
    return reinterpret_cast<T*>(bytes.data());
  }
  template <class T>
  const T* data_as() const {
    KILN_CHECK(StoresDType<T>(dtype)) << "tensor '" << name << "' is " << DTypeName(dtype);
    return reinterpret_cast<const T*>(bytes.data());
  }
  // A copy of the elements as T (as data_as<T>).
  template <class T>
  std::vector<T> values() const {
    const T* p = data_as<T>();
    return std::vector<T>(p, p + bytes.size() / sizeof(T));
  }
};

// A tensor holding `values` (whose count must match `shape`; checked) with
// dtype `dtype`, which T must store.
template <class T>
Tensor MakeTensor(std::string name, std::vector<int64_t> shape, const std::vector<T>& values,
                  DType dtype = DTypeOf<T>()) {
  Tensor t{std::move(name), std::move(shape), dtype, {}};
  KILN_CHECK(StoresDType<T>(dtype)) << DTypeName(dtype);
  KILN_CHECK(static_cast<int64_t>(values.size()) == t.NumElements()) << values.size();
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) {
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  }
  return t;
}

// Element i as a double (float16 decoded; 64-bit integers beyond 2^53 round).
// Float16 bits convert with kiln::HalfToFloat / FloatToHalf (base/dtype.h).
double ElementAsDouble(const Tensor& t, int64_t i);
// Element i as text: integers exactly, floats with enough digits to round-trip.
std::string ElementToString(const Tensor& t, int64_t i);
// Every element converted to float32 (any dtype).
std::vector<float> ToFloatVector(const Tensor& t);

// ONNX TensorProto bytes: dims, data_type (every DType), name, and the values
// as raw_data (little-endian) or the typed field ONNX keeps that dtype in:
// float_data (float32), double_data (float64), int64_data (int64),
// uint64_data (uint32, uint64), int32_data (the others; float16 as its bit
// pattern), packed or not. Bool values other than 0 become 1.
// INVALID_ARGUMENT for a dtype kiln does not carry (naming its code), for
// values in a field that dtype does not use, out of its range, or whose count
// does not match the dims.
absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes);
// A TensorProto with dims, data_type, name and raw_data (the tensor's bytes).
std::string SerializeTensorProto(const Tensor& tensor);

// NumPy .npy bytes (format 1.0, 2.0 or 3.0), C order, descr one of '<f2',
// '<f4', '<f8', '|i1', '|u1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8', '|b1'
// (byte order '<', '=' or '|', or none; '>' only for one-byte types).
absl::StatusOr<Tensor> ParseNpy(std::string_view bytes);
// .npy bytes of the tensor (format 1.0, 2.0 for a header over 64 KiB), C
// order, the data 64-byte aligned as NumPy writes it.
std::string SerializeNpy(const Tensor& tensor);

// Reads a file as .npy (by its magic) or else as a TensorProto.
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);
// INVALID_ARGUMENT when the tensor's bytes do not match its shape and dtype.
absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& tensor);
absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor);

absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

}  // namespace kiln::deploy

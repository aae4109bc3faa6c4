#pragma once
// Element types of tensors, shared by the compiler, the artifact manifest and
// the runtime. The enumerator values are ONNX's TensorProto.DataType codes, so
// a `.pb` file's data_type converts with a range check and no table.
// Header-only: the runtime library uses it without linking anything.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,  // one byte per element, 0 or 1
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
};

// The dtype of an ONNX data_type code, or nullopt for one kiln does not carry
// (strings, bfloat16, complex, float8, 4-bit types).
inline std::optional<DType> DTypeFromOnnx(int64_t code) {
  switch (code) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
      return static_cast<DType>(code);
    default:
      return std::nullopt;
  }
}

inline int OnnxCode(DType t) { return static_cast<int>(t); }

inline int DTypeBytes(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
      return 1;
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kFloat16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
    case DType::kUInt64:
      return 8;
  }
  return 0;
}

inline bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16;
}
inline bool IsSignedInt(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
inline bool IsUnsignedInt(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

// "float32", "int64", "bool", ... (the manifest's and NumPy's names).
inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat64:
      return "float64";
    case DType::kUInt32:
      return "uint32";
    case DType::kUInt64:
      return "uint64";
  }
  return "?";
}

inline std::optional<DType> ParseDType(std::string_view name) {
  for (int code : {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}) {
    DType t = static_cast<DType>(code);
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

// Element conversions: element i of a buffer of `dtype` to/from double and
// int64. Conversions to integers saturate (NaN gives 0); bool is 0 or 1.
// float16 <-> float32 (IEEE binary16, round to nearest even).
inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000)
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow to inf
  if (absx < 0x38800000) {                                              // subnormal or zero in half
    float a;
    std::memcpy(&a, &absx, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t h = e << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

template <typename T>
inline T ReadElement(const uint8_t* src, int64_t i) {
  T v;
  std::memcpy(&v, src + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void WriteElement(T v, uint8_t* dst, int64_t i) {
  std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
}

// Saturating double -> integer (NaN -> 0), as a cast of an in-range value.
template <typename T>
inline T ClampTo(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

inline double ElementToDouble(DType t, const uint8_t* src, int64_t i) {
  switch (t) {
    case DType::kFloat32:
      return ReadElement<float>(src, i);
    case DType::kFloat64:
      return ReadElement<double>(src, i);
    case DType::kFloat16:
      return HalfToFloat(ReadElement<uint16_t>(src, i));
    case DType::kInt8:
      return ReadElement<int8_t>(src, i);
    case DType::kUInt8:
      return ReadElement<uint8_t>(src, i);
    case DType::kInt16:
      return ReadElement<int16_t>(src, i);
    case DType::kUInt16:
      return ReadElement<uint16_t>(src, i);
    case DType::kInt32:
      return ReadElement<int32_t>(src, i);
    case DType::kUInt32:
      return ReadElement<uint32_t>(src, i);
    case DType::kInt64:
      return static_cast<double>(ReadElement<int64_t>(src, i));
    case DType::kUInt64:
      return static_cast<double>(ReadElement<uint64_t>(src, i));
    case DType::kBool:
      return ReadElement<uint8_t>(src, i) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

inline int64_t ElementToInt64(DType t, const uint8_t* src, int64_t i) {
  switch (t) {
    case DType::kInt64:
      return ReadElement<int64_t>(src, i);
    case DType::kUInt64:
      return static_cast<int64_t>(ReadElement<uint64_t>(src, i));
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
      return ClampTo<int64_t>(ElementToDouble(t, src, i));
    default:
      return static_cast<int64_t>(ElementToDouble(t, src, i));
  }
}

inline void DoubleToElement(DType t, double v, uint8_t* dst, int64_t i) {
  switch (t) {
    case DType::kFloat32:
      return WriteElement<float>(static_cast<float>(v), dst, i);
    case DType::kFloat64:
      return WriteElement<double>(v, dst, i);
    case DType::kFloat16:
      return WriteElement<uint16_t>(FloatToHalf(static_cast<float>(v)), dst, i);
    case DType::kInt8:
      return WriteElement<int8_t>(ClampTo<int8_t>(v), dst, i);
    case DType::kUInt8:
      return WriteElement<uint8_t>(ClampTo<uint8_t>(v), dst, i);
    case DType::kInt16:
      return WriteElement<int16_t>(ClampTo<int16_t>(v), dst, i);
    case DType::kUInt16:
      return WriteElement<uint16_t>(ClampTo<uint16_t>(v), dst, i);
    case DType::kInt32:
      return WriteElement<int32_t>(ClampTo<int32_t>(v), dst, i);
    case DType::kUInt32:
      return WriteElement<uint32_t>(ClampTo<uint32_t>(v), dst, i);
    case DType::kInt64:
      return WriteElement<int64_t>(ClampTo<int64_t>(v), dst, i);
    case DType::kUInt64:
      return WriteElement<uint64_t>(ClampTo<uint64_t>(v), dst, i);
    case DType::kBool:
      return WriteElement<uint8_t>(v != 0 ? 1 : 0, dst, i);
  }
}

inline void Int64ToElement(DType t, int64_t v, uint8_t* dst, int64_t i) {
  switch (t) {
    case DType::kInt64:
      return WriteElement<int64_t>(v, dst, i);
    case DType::kUInt64:
      return WriteElement<uint64_t>(static_cast<uint64_t>(v), dst, i);
    case DType::kInt32:
      return WriteElement<int32_t>(static_cast<int32_t>(v), dst, i);
    case DType::kUInt32:
      return WriteElement<uint32_t>(static_cast<uint32_t>(v), dst, i);
    case DType::kInt16:
      return WriteElement<int16_t>(static_cast<int16_t>(v), dst, i);
    case DType::kUInt16:
      return WriteElement<uint16_t>(static_cast<uint16_t>(v), dst, i);
    case DType::kInt8:
      return WriteElement<int8_t>(static_cast<int8_t>(v), dst, i);
    case DType::kUInt8:
      return WriteElement<uint8_t>(static_cast<uint8_t>(v), dst, i);
    default:
      return DoubleToElement(t, static_cast<double>(v), dst, i);
  }
}

}  // namespace kiln

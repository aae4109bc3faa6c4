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
  // Storage-only types: tensors of these are stored, moved and cast, and
  // computed on only after a cast (or DequantizeLinear) to a wider type.
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,  // in memory one element per byte (as NumPy's ml_dtypes); packed
  kInt4 = 22,   // two per byte only in ONNX TensorProtos
};

// The dtype of an ONNX data_type code, or nullopt for one kiln does not carry
// (strings, complex, float8e8m0, float4).
inline std::optional<DType> DTypeFromOnnx(int64_t code) {
  switch (code) {
    case 16:
    case 17:
    case 18:
    case 19:
    case 20:
    case 21:
    case 22:
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
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kUInt4:
    case DType::kInt4:
      return 1;
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
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
// bfloat16 and the float8 formats: stored as their bit patterns.
inline bool IsStorageFloat(DType t) {
  return t == DType::kBFloat16 || (t >= DType::kFloat8E4M3FN && t <= DType::kFloat8E5M2FNUZ);
}
inline bool IsInt4(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }
// Types only casts, quantization and data movement take (see kBFloat16).
inline bool IsStorageOnly(DType t) { return IsStorageFloat(t) || IsInt4(t); }

// Bytes n elements take in an ONNX TensorProto: int4/uint4 pack two per
// byte, the first element in the low nibble.
inline int64_t PackedBytes(DType t, int64_t n) {
  return IsInt4(t) ? (n + 1) / 2 : n * DTypeBytes(t);
}
// Packed nibbles to one (sign-extended for int4) element per byte, and back.
inline void UnpackInt4(DType t, const uint8_t* src, int64_t n, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = (src[i / 2] >> (4 * (i % 2))) & 0xf;
    dst[i] = t == DType::kInt4 && (v & 8) ? static_cast<uint8_t>(v | 0xf0) : v;
  }
}
inline void PackInt4(const uint8_t* src, int64_t n, uint8_t* dst) {
  for (int64_t i = 0; i < n; i += 2) {
    dst[i / 2] = static_cast<uint8_t>((src[i] & 0xf) | (i + 1 < n ? (src[i + 1] & 0xf) << 4 : 0));
  }
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
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DType::kUInt4:
      return "uint4";
    case DType::kInt4:
      return "int4";
  }
  return "?";
}

inline std::optional<DType> ParseDType(std::string_view name) {
  for (int code : {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22}) {
    DType t = static_cast<DType>(code);
    if (name == DTypeName(t)) return t;
  }
  return std::nullopt;
}

// Element conversions: element i of a buffer of `dtype` to/from double and
// int64. Conversions to integers saturate (NaN gives 0); bool is 0 or 1.
// float32's bit pattern and back.
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

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
  return BitsToFloat(bits);
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x = FloatToBits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000)
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow to inf
  if (absx < 0x38800000) {                                              // subnormal or zero in half
    return static_cast<uint16_t>(
        sign | static_cast<uint32_t>(std::nearbyint(BitsToFloat(absx) * 16777216.0f)));
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t h = e << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// The 8-bit float formats of ONNX (and their bfloat16 cousin): exponent and
// mantissa widths, bias, whether the format is "fnuz" (no negative zero; 0x80
// is the only NaN) and whether it has infinities (E5M2 only; E4M3FN spends
// S.1111.111 on NaN instead).
struct MiniFloat {
  int exp_bits, mant_bits, bias;
  bool fnuz, has_inf;
  int Emin() const { return 1 - bias; }
  // The largest finite code (without sign) and its value.
  uint32_t MaxCode() const {
    if (fnuz) return 0x7f;
    return has_inf ? ((1u << exp_bits) - 2) << mant_bits | ((1u << mant_bits) - 1) : 0x7e;
  }
  uint32_t NanCode() const { return fnuz ? 0x80 : 0x7f; }
  uint32_t InfCode() const { return ((1u << exp_bits) - 1) << mant_bits; }  // has_inf only
};
inline MiniFloat Float8Format(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return {4, 3, 7, false, false};
    case DType::kFloat8E4M3FNUZ:
      return {4, 3, 8, true, false};
    case DType::kFloat8E5M2:
      return {5, 2, 15, false, true};
    default:  // kFloat8E5M2FNUZ
      return {5, 2, 16, true, false};
  }
}

// bfloat16 <-> float32: the high half; rounding to nearest even, NaN to
// 0x7fc0 (as ONNX's reference does).
inline float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }
inline uint16_t FloatToBFloat16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u = FloatToBits(f);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// float8 code -> float32 (exact). The compiler's generated code computes the
// same with integer and float operations (compiler/ops/elementwise.cc).
inline float Float8ToFloat(DType t, uint8_t b) {
  const MiniFloat f = Float8Format(t);
  const uint32_t mag = b & 0x7fu, e = mag >> f.mant_bits, m = mag & ((1u << f.mant_bits) - 1);
  if (f.fnuz
          ? b == 0x80
          : (!f.has_inf && mag == 0x7f) || (f.has_inf && e == (1u << f.exp_bits) - 1 && m != 0)) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  float v = f.has_inf && mag == f.InfCode() ? std::numeric_limits<float>::infinity()
            : e == 0 ? std::ldexp(static_cast<float>(m), f.Emin() - f.mant_bits)
                     : std::ldexp(1.0f + std::ldexp(static_cast<float>(m), -f.mant_bits),
                                  static_cast<int>(e) - f.bias);
  return (b & 0x80) ? -v : v;
}

// float32 -> float8 code, rounding to nearest even. Out-of-range values and
// infinities saturate to the largest finite value when `saturate`, else
// become infinity (E5M2) or NaN (the others), as ONNX's Cast specifies.
inline uint8_t FloatToFloat8(DType t, float x, bool saturate) {
  const MiniFloat f = Float8Format(t);
  if (std::isnan(x)) return static_cast<uint8_t>(f.NanCode());
  const uint32_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  const float max = Float8ToFloat(t, static_cast<uint8_t>(f.MaxCode()));
  // Round to the format's grid (exact: scaling by a power of two, ties to
  // even); the exponent is that of a, at least the smallest normal one.
  const int e = a == 0 || std::isinf(a) ? f.Emin() : std::max(std::ilogb(a), f.Emin());
  const float q = std::ldexp(1.0f, e - f.mant_bits);
  const float r = std::isinf(a) ? a : std::nearbyint(a / q) * q;
  uint32_t code;
  if (r > max) {
    // Not saturating: infinity (E5M2), NaN of x's sign (E4M3FN), the NaN.
    if (!saturate) {
      return static_cast<uint8_t>(f.fnuz ? f.NanCode()
                                         : sign | (f.has_inf ? f.InfCode() : f.NanCode()));
    }
    code = f.MaxCode();
  } else if (r < std::ldexp(1.0f, f.Emin())) {  // subnormal (or zero)
    code = static_cast<uint32_t>(r / std::ldexp(1.0f, f.Emin() - f.mant_bits));
  } else {
    const int er = std::ilogb(r);
    code = static_cast<uint32_t>(er + f.bias) << f.mant_bits |
           static_cast<uint32_t>(std::ldexp(r / std::ldexp(1.0f, er) - 1.0f, f.mant_bits));
  }
  if (code == 0 && f.fnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(sign | code);
}

// Saturating round-half-even to int4/uint4 (as ONNX's Cast and
// QuantizeLinear); integers clamp.
inline uint8_t ToInt4(DType t, double v) {
  const double lo = t == DType::kInt4 ? -8 : 0, hi = t == DType::kInt4 ? 7 : 15;
  if (std::isnan(v)) return 0;
  const auto r = static_cast<int>(std::nearbyint(std::min(std::max(v, lo), hi)));
  return static_cast<uint8_t>(r);
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
    case DType::kBFloat16:
      return BFloat16ToFloat(ReadElement<uint16_t>(src, i));
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return Float8ToFloat(t, src[i]);
    case DType::kUInt4:
      return src[i];
    case DType::kInt4:
      return static_cast<int8_t>(src[i]);
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
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
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
    case DType::kBFloat16:
      return WriteElement<uint16_t>(FloatToBFloat16(static_cast<float>(v)), dst, i);
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      dst[i] = FloatToFloat8(t, static_cast<float>(v), /*saturate=*/true);
      return;
    case DType::kUInt4:
    case DType::kInt4:
      dst[i] = ToInt4(t, v);
      return;
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

#include "deploy/tensor_io.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_util.h"

namespace kiln::deploy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void Varint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

TEST(TensorProto, RoundTripThroughFile) {
  Tensor t = MakeTensor<float>("logits", {2, 3}, {1.5f, -2.f, 3.25f, 0.f, 1e-7f, -1e9f});
  std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteTensorProtoFile(dir + "/t.pb", t).ok());
  absl::StatusOr<Tensor> back = ReadTensorFile(dir + "/t.pb");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "logits");
  EXPECT_EQ(back->dtype, DType::kFloat32);
  EXPECT_THAT(back->shape, ElementsAre(2, 3));
  EXPECT_EQ(back->values<float>(), t.values<float>());
  testing::RemoveDir(dir);
}

TEST(TensorProto, SerializedBytesAreTheOnnxWireFormat) {
  Tensor t = MakeTensor<float>("x", {2}, {1.0f, 2.0f});
  std::string expected;
  expected += "\x08\x02";   // dims: 2
  expected += "\x10\x01";   // data_type: FLOAT
  expected += "\x42\x01x";  // name: "x"
  expected += "\x4a\x08";   // raw_data: 8 bytes
  float v[2] = {1.0f, 2.0f};
  expected.append(reinterpret_cast<const char*>(v), 8);
  EXPECT_EQ(SerializeTensorProto(t), expected);
}

TEST(TensorProto, PackedFloatDataAndUnpackedDims) {
  std::string pb;
  Varint(&pb, (1 << 3) | 0);  // dims 2 (unpacked)
  Varint(&pb, 2);
  Varint(&pb, (1 << 3) | 0);  // dims 2
  Varint(&pb, 2);
  Varint(&pb, (2 << 3) | 0);  // data_type FLOAT
  Varint(&pb, 1);
  Varint(&pb, (8 << 3) | 2);  // name
  Varint(&pb, 3);
  pb += "abc";
  Varint(&pb, (12 << 3) | 2);  // doc_string: skipped
  Varint(&pb, 2);
  pb += "hi";
  float vals[4] = {1.f, 2.f, 3.f, 4.5f};
  Varint(&pb, (4 << 3) | 2);  // float_data packed
  Varint(&pb, 16);
  pb.append(reinterpret_cast<const char*>(vals), 16);
  absl::StatusOr<Tensor> t = ParseTensorProto(pb);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "abc");
  EXPECT_EQ(t->dtype, DType::kFloat32);
  EXPECT_THAT(t->shape, ElementsAre(2, 2));
  EXPECT_THAT(t->values<float>(), ElementsAre(1.f, 2.f, 3.f, 4.5f));
}

TEST(TensorProto, PackedDimsAndUnpackedFloatData) {
  std::string pb;
  Varint(&pb, (1 << 3) | 2);  // dims packed: [1, 2]
  Varint(&pb, 2);
  Varint(&pb, 1);
  Varint(&pb, 2);
  Varint(&pb, (2 << 3) | 0);
  Varint(&pb, 1);
  for (float f : {7.f, -8.f}) {
    Varint(&pb, (4 << 3) | 5);
    pb.append(reinterpret_cast<const char*>(&f), 4);
  }
  absl::StatusOr<Tensor> t = ParseTensorProto(pb);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->shape, ElementsAre(1, 2));
  EXPECT_THAT(t->values<float>(), ElementsAre(7.f, -8.f));
}

TEST(TensorProto, UnsupportedDataTypesAreRejectedNamingTheCode) {
  auto parse = [](int data_type) {
    std::string pb;
    Varint(&pb, (1 << 3) | 0);
    Varint(&pb, 2);
    if (data_type >= 0) {
      Varint(&pb, (2 << 3) | 0);
      Varint(&pb, static_cast<uint64_t>(data_type));
    }
    Varint(&pb, (8 << 3) | 2);
    Varint(&pb, 3);
    pb += "ids";
    Varint(&pb, (9 << 3) | 2);
    Varint(&pb, 4);
    pb += std::string(4, '\0');
    return ParseTensorProto(pb);
  };
  for (auto [code, text] :
       std::vector<std::pair<int, std::string>>{{8, "data_type 8 (STRING)"},
                                                {14, "data_type 14 (COMPLEX64)"},
                                                {23, "data_type 23 (FLOAT4E2M1)"},
                                                {99, "data_type 99 (unknown)"},
                                                {-1, "data_type 0 (UNDEFINED)"}}) {
    absl::StatusOr<Tensor> t = parse(code);
    ASSERT_FALSE(t.ok()) << code;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr("'ids'"));
    EXPECT_THAT(t.status().message(), HasSubstr(text));
    EXPECT_THAT(t.status().message(), HasSubstr("not support"));
  }
}

TEST(TensorProto, WrongRawDataSizeAndTruncationAreErrors) {
  Tensor t = MakeTensor<float>("x", {3}, {1.f, 2.f, 3.f});
  std::string pb = SerializeTensorProto(t);
  absl::StatusOr<Tensor> cut = ParseTensorProto(pb.substr(0, pb.size() - 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated raw_data"));
  t.shape = {4};
  pb = SerializeTensorProto(t);
  absl::StatusOr<Tensor> wrong = ParseTensorProto(pb);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("needs 16 bytes of raw_data, has 12"));
}

std::string Npy(int major, const std::string& dict, const std::string& payload) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  if (major == 1) {
    out.push_back(static_cast<char>(header.size() & 0xff));
    out.push_back(static_cast<char>(header.size() >> 8));
  } else {
    testing::PutU32(&out, static_cast<uint32_t>(header.size()));
  }
  return out + header + payload;
}

TEST(Npy, ReadsFloat32Version1) {
  float v[6] = {0.f, 1.f, 2.f, 3.f, 4.f, -5.5f};
  std::string bytes = Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }",
                          std::string(reinterpret_cast<const char*>(v), sizeof(v)));
  std::string dir = testing::MakeTempDir();
  testing::WriteFile(dir + "/x.npy", bytes);
  absl::StatusOr<Tensor> t = ReadTensorFile(dir + "/x.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DType::kFloat32);
  EXPECT_THAT(t->shape, ElementsAre(1, 2, 3));
  EXPECT_THAT(t->values<float>(), ElementsAre(0.f, 1.f, 2.f, 3.f, 4.f, -5.5f));
  testing::RemoveDir(dir);
}

TEST(Npy, ReadsFloat64Version2AndScalarsAnd1D) {
  double v[3] = {0.25, -1.0, 3.0};
  absl::StatusOr<Tensor> t =
      ParseNpy(Npy(2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                   std::string(reinterpret_cast<const char*>(v), sizeof(v))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DType::kFloat64);
  EXPECT_THAT(t->shape, ElementsAre(3));
  EXPECT_THAT(t->values<double>(), ElementsAre(0.25, -1.0, 3.0));
  EXPECT_THAT(ToFloatVector(*t), ElementsAre(0.25f, -1.f, 3.f));
  float s = 9.f;
  absl::StatusOr<Tensor> scalar =
      ParseNpy(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                   std::string(reinterpret_cast<const char*>(&s), 4)));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->NumElements(), 1);
  EXPECT_THAT(scalar->values<float>(), ElementsAre(9.f));
}

TEST(Npy, RejectsOtherDtypesFortranOrderAndShortData) {
  for (std::string descr : {"<c8", "<U3", "|O", "<M8", "<f16", "", "<"}) {
    absl::StatusOr<Tensor> other =
        ParseNpy(Npy(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }",
                     std::string(8, '\0')));
    ASSERT_FALSE(other.ok()) << descr;
    EXPECT_THAT(other.status().message(), HasSubstr("dtype '" + descr + "' is not supported"));
    EXPECT_THAT(other.status().message(), HasSubstr("(use one of <f4, <f8, <f2, |i1,"));
  }
  absl::StatusOr<Tensor> big = ParseNpy(
      Npy(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("'>i4' is big-endian"));
  absl::StatusOr<Tensor> fortran = ParseNpy(
      Npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0')));
  ASSERT_FALSE(fortran.ok());
  EXPECT_THAT(fortran.status().message(), HasSubstr("fortran_order"));
  absl::StatusOr<Tensor> shorter = ParseNpy(
      Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", std::string(12, '\0')));
  ASSERT_FALSE(shorter.ok());
  EXPECT_THAT(shorter.status().message(), HasSubstr("needs 16 data bytes, file has 12"));
}

// Every dtype kiln carries, with six sample values of each (the extremes of
// the integers, specials of the floats).
const std::vector<DType> kAllDTypes = {
    DType::kFloat32,        DType::kFloat64,      DType::kFloat16,        DType::kInt8,
    DType::kInt16,          DType::kInt32,        DType::kInt64,          DType::kUInt8,
    DType::kUInt16,         DType::kUInt32,       DType::kUInt64,         DType::kBool,
    DType::kBFloat16,       DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
    DType::kFloat8E5M2FNUZ, DType::kInt4,         DType::kUInt4};

Tensor Sample(DType t) {
  const std::vector<int64_t> shape = {2, 3};
  switch (t) {
    case DType::kFloat32:
      return MakeTensor<float>("f32", shape, {1.5f, -2.f, 3.25e-7f, -0.f, 3.4e38f, -1e9f});
    case DType::kFloat64:
      return MakeTensor<double>("f64", shape, {0.1, -1e300, 5e-324, 2.0, -0.5, 1e15});
    case DType::kFloat16:  // 1, -2, 65504, the smallest subnormal, inf, about 1/3
      return MakeTensor<uint16_t>("f16", shape, {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x3555},
                                  DType::kFloat16);
    case DType::kInt8:
      return MakeTensor<int8_t>("i8", shape, {-128, 127, 0, -1, 5, 100});
    case DType::kInt16:
      return MakeTensor<int16_t>("i16", shape, {-32768, 32767, 0, -1, 300, -300});
    case DType::kInt32:
      return MakeTensor<int32_t>("i32", shape,
                                 {std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(), 0, -1, 70000, -70000});
    case DType::kInt64:
      return MakeTensor<int64_t>("i64", shape,
                                 {std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(), 0, -1, int64_t{1} << 40, 7});
    case DType::kUInt8:
      return MakeTensor<uint8_t>("u8", shape, {0, 255, 1, 128, 7, 200});
    case DType::kUInt16:
      return MakeTensor<uint16_t>("u16", shape, {0, 65535, 1, 32768, 7, 300});
    case DType::kUInt32:
      return MakeTensor<uint32_t>("u32", shape, {0, 4294967295u, 1, 2147483648u, 7, 70000});
    case DType::kUInt64:
      return MakeTensor<uint64_t>(
          "u64", shape,
          {0, std::numeric_limits<uint64_t>::max(), 1, uint64_t{1} << 63, 7, uint64_t{1} << 40});
    case DType::kBool:
      return MakeTensor<uint8_t>("b", shape, {1, 0, 0, 1, 1, 0}, DType::kBool);
    case DType::kBFloat16:  // 1, -2, the largest finite, NaN, inf, the smallest subnormal
      return MakeTensor<uint16_t>("bf16", shape, {0x3f80, 0xc000, 0x7f7f, 0x7fc0, 0x7f80, 0x0001},
                                  DType::kBFloat16);
    case DType::kInt4:  // one sign-extended element per byte in memory
      return MakeTensor<int8_t>("i4", shape, {-8, 7, 0, -1, 5, -3}, DType::kInt4);
    case DType::kUInt4:
      return MakeTensor<uint8_t>("u4", shape, {0, 15, 1, 8, 7, 12}, DType::kUInt4);
    default:  // float8: bit patterns (0x80: -0 or NaN, 0x7f: NaN or the largest)
      return MakeTensor<uint8_t>("f8", shape, {0x00, 0x38, 0x80, 0x7f, 0xfe, 0x01}, t);
  }
}

// The sample's values as ONNX writes them without raw_data: the field number
// and wire type of one value, and each value's wire encoding.
struct TypedField {
  int field;
  int wire;  // 0 varint, 1 fixed64, 5 fixed32
  std::vector<uint64_t> values;
};
TypedField TypedFieldOf(const Tensor& t) {
  TypedField f{5, 0, {}};  // int32_data, varints
  if (t.dtype == DType::kFloat32) f = {4, 5, {}};
  if (t.dtype == DType::kFloat64) f = {10, 1, {}};
  if (t.dtype == DType::kInt64) f = {7, 0, {}};
  if (t.dtype == DType::kUInt32 || t.dtype == DType::kUInt64) f = {11, 0, {}};
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kFloat32:
        f.values.push_back(std::bit_cast<uint32_t>(t.data_as<float>()[i]));
        break;
      case DType::kFloat64:
        f.values.push_back(std::bit_cast<uint64_t>(t.data_as<double>()[i]));
        break;
      case DType::kFloat16:  // the bit pattern
      case DType::kBFloat16:
        f.values.push_back(t.data_as<uint16_t>()[i]);
        break;
      case DType::kFloat8E4M3FN:
      case DType::kFloat8E4M3FNUZ:
      case DType::kFloat8E5M2:
      case DType::kFloat8E5M2FNUZ:
        f.values.push_back(t.bytes[i]);
        break;
      case DType::kInt4:  // int32_data holds the packed bytes, two elements each
      case DType::kUInt4:
        if (i % 2 == 0) f.values.push_back((t.bytes[i] & 0xf) | (t.bytes[i + 1] & 0xf) << 4);
        break;
      case DType::kInt64:
        f.values.push_back(static_cast<uint64_t>(t.data_as<int64_t>()[i]));
        break;
      case DType::kUInt64:
        f.values.push_back(t.data_as<uint64_t>()[i]);
        break;
      default:  // the value; negative ones sign-extended to 64 bits as protobuf writes int32
        f.values.push_back(static_cast<uint64_t>(static_cast<int64_t>(ElementAsDouble(t, i))));
        break;
    }
  }
  return f;
}

void PutValue(std::string* pb, int wire, uint64_t v) {
  if (wire == 0) {
    Varint(pb, v);
  } else {
    pb->append(reinterpret_cast<const char*>(&v), wire == 1 ? 8 : 4);
  }
}

// A TensorProto of `t` with its values in the typed field, packed or not.
std::string TypedProto(const Tensor& t, bool packed) {
  std::string pb;
  for (int64_t d : t.shape) {
    Varint(&pb, (1 << 3) | 0);
    Varint(&pb, static_cast<uint64_t>(d));
  }
  Varint(&pb, (2 << 3) | 0);
  Varint(&pb, static_cast<uint64_t>(OnnxCode(t.dtype)));
  Varint(&pb, (8 << 3) | 2);
  Varint(&pb, t.name.size());
  pb += t.name;
  TypedField f = TypedFieldOf(t);
  if (packed) {
    std::string body;
    for (uint64_t v : f.values) PutValue(&body, f.wire, v);
    Varint(&pb, (static_cast<uint64_t>(f.field) << 3) | 2);
    Varint(&pb, body.size());
    pb += body;
  } else {
    for (uint64_t v : f.values) {
      Varint(&pb, (static_cast<uint64_t>(f.field) << 3) | static_cast<uint64_t>(f.wire));
      PutValue(&pb, f.wire, v);
    }
  }
  return pb;
}

TEST(TensorProto, EveryDTypeRoundTripsThroughRawData) {
  std::string dir = testing::MakeTempDir();
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(DTypeName(d));
    Tensor t = Sample(d);
    ASSERT_EQ(t.ByteSize(), 6 * DTypeBytes(d));
    ASSERT_EQ(t.dtype, d);
    ASSERT_TRUE(WriteTensorProtoFile(dir + "/t.pb", t).ok());
    absl::StatusOr<Tensor> back = ReadTensorFile(dir + "/t.pb");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->name, t.name);
    EXPECT_EQ(back->dtype, d);
    EXPECT_THAT(back->shape, ElementsAre(2, 3));
    EXPECT_EQ(back->bytes, t.bytes);
    // data_type is the ONNX code: field 2, right after the dims.
    std::string pb = SerializeTensorProto(t);
    EXPECT_EQ(pb.substr(4, 2), std::string({'\x10', static_cast<char>(OnnxCode(d))}));
  }
  testing::RemoveDir(dir);
}

TEST(TensorProto, EveryDTypeReadsFromItsTypedFieldPackedAndUnpacked) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(DTypeName(d));
    Tensor t = Sample(d);
    for (bool packed : {true, false}) {
      absl::StatusOr<Tensor> back = ParseTensorProto(TypedProto(t, packed));
      ASSERT_TRUE(back.ok()) << back.status() << (packed ? " packed" : " unpacked");
      EXPECT_EQ(back->dtype, d);
      EXPECT_THAT(back->shape, ElementsAre(2, 3));
      EXPECT_EQ(back->bytes, t.bytes) << (packed ? "packed" : "unpacked");
    }
  }
}

TEST(TensorProto, Int4IsPackedTwoPerByteLowNibbleFirst) {
  Tensor t = MakeTensor<int8_t>("q", {5}, {-8, 7, 1, -1, 3}, DType::kInt4);
  std::string pb = SerializeTensorProto(t);
  // raw_data (field 9): three bytes, the fifth element's high nibble zero.
  EXPECT_NE(pb.find(std::string("\x4a\x03\x78\xf1\x03", 5)), std::string::npos);
  absl::StatusOr<Tensor> back = ParseTensorProto(pb);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bytes, t.bytes);
  // Unpacked sizes are wrong: 5 raw bytes for 5 int4 elements.
  Tensor wide = t;
  wide.dtype = DType::kInt8;
  std::string bad = SerializeTensorProto(wide);
  bad[bad.find('\x10') + 1] = static_cast<char>(OnnxCode(DType::kInt4));
  absl::StatusOr<Tensor> r = ParseTensorProto(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("needs 3 bytes of raw_data, has 5"));
}

TEST(Npy, StorageOnlyTypesAreRefusedNamingTheAlternative) {
  std::string dir = testing::MakeTempDir();
  absl::Status s = WriteNpyFile(dir + "/t.npy", Sample(DType::kFloat8E4M3FN));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("float8_e4m3fn"));
  EXPECT_THAT(s.message(), HasSubstr(".pb"));
  testing::RemoveDir(dir);
}

TEST(TensorProto, TypedValuesInTheWrongFieldOrOutOfRangeAreErrors) {
  // int64 values in float_data.
  Tensor f = Sample(DType::kFloat32);
  std::string pb = TypedProto(f, true);
  pb[5] = static_cast<char>(OnnxCode(DType::kInt64));  // data_type follows the two dims
  absl::StatusOr<Tensor> wrong_field = ParseTensorProto(pb);
  ASSERT_FALSE(wrong_field.ok());
  EXPECT_THAT(wrong_field.status().message(),
              HasSubstr("(int64) has float_data; its values belong in int64_data or raw_data"));

  // int8 from int32_data: 300 does not fit, -5 (a 10-byte varint) does.
  auto int8_proto = [](int64_t value) {
    std::string p;
    Varint(&p, (1 << 3) | 0);
    Varint(&p, 1);
    Varint(&p, (2 << 3) | 0);
    Varint(&p, 3);  // INT8
    Varint(&p, (5 << 3) | 0);
    Varint(&p, static_cast<uint64_t>(value));
    return p;
  };
  absl::StatusOr<Tensor> big = ParseTensorProto(int8_proto(300));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(),
              HasSubstr("int32_data value 300 at index 0 is out of range for int8"));
  absl::StatusOr<Tensor> minus5 = ParseTensorProto(int8_proto(-5));
  ASSERT_TRUE(minus5.ok()) << minus5.status();
  EXPECT_EQ(minus5->data_as<int8_t>()[0], -5);

  // uint32 from uint64_data: 2^32 does not fit.
  Tensor u = MakeTensor<uint32_t>("u", {1}, {0});
  std::string upb = TypedProto(u, false);
  upb.pop_back();  // the varint 0 ...
  Varint(&upb, uint64_t{1} << 32);
  absl::StatusOr<Tensor> u32 = ParseTensorProto(upb);
  ASSERT_FALSE(u32.ok());
  EXPECT_THAT(u32.status().message(),
              HasSubstr("4294967296 at index 0 is out of range for uint32"));

  // Both raw_data and the typed field.
  Tensor i = Sample(DType::kInt32);
  std::string both = TypedProto(i, true);
  Varint(&both, (9 << 3) | 2);
  Varint(&both, 24);
  both += std::string(24, '\0');
  absl::StatusOr<Tensor> two = ParseTensorProto(both);
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr("both int32_data and raw_data are set"));

  // A packed double_data whose length is not a multiple of 8.
  std::string odd;
  Varint(&odd, (2 << 3) | 0);
  Varint(&odd, 11);
  Varint(&odd, (10 << 3) | 2);
  Varint(&odd, 12);
  odd += std::string(12, '\0');
  absl::StatusOr<Tensor> bad_double = ParseTensorProto(odd);
  ASSERT_FALSE(bad_double.ok());
  EXPECT_THAT(bad_double.status().message(), HasSubstr("malformed TensorProto: bad double_data"));
}

TEST(TensorProto, ElementCountsMustMatchTheDimsWithoutTrustingThem) {
  // 4 elements declared, 3 present.
  Tensor t = MakeTensor<int16_t>("s", {3}, {1, 2, 3});
  std::string pb = TypedProto(t, true);
  pb[1] = 4;
  absl::StatusOr<Tensor> short_values = ParseTensorProto(pb);
  ASSERT_FALSE(short_values.ok());
  EXPECT_THAT(short_values.status().message(),
              HasSubstr("TensorProto 's' of int16 4 needs 4 values, has 3 in int32_data"));
  // Dims of 2^40 x 2^19 elements (4 EiB of int64) with two values present:
  // an error, not an allocation.
  std::string huge;
  for (uint64_t d : {uint64_t{1} << 40, uint64_t{1} << 19}) {
    Varint(&huge, (1 << 3) | 0);
    Varint(&huge, d);
  }
  Varint(&huge, (2 << 3) | 0);
  Varint(&huge, 7);
  std::string huge_raw = huge;
  for (int k = 0; k < 2; ++k) {
    Varint(&huge, (7 << 3) | 0);
    Varint(&huge, 5);
  }
  absl::StatusOr<Tensor> h = ParseTensorProto(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("needs 576460752303423488 values, has 2"));
  // The same with raw_data.
  Varint(&huge_raw, (9 << 3) | 2);
  Varint(&huge_raw, 16);
  huge_raw += std::string(16, '\0');
  absl::StatusOr<Tensor> hr = ParseTensorProto(huge_raw);
  ASSERT_FALSE(hr.ok());
  EXPECT_THAT(hr.status().message(),
              HasSubstr("needs 4611686018427387904 bytes of raw_data, has 16"));
  // Dims whose product overflows, and a negative dimension.
  for (uint64_t d : {uint64_t{1} << 62, static_cast<uint64_t>(-3)}) {
    std::string over;
    Varint(&over, (1 << 3) | 0);
    Varint(&over, d);
    Varint(&over, (1 << 3) | 0);
    Varint(&over, 4);
    Varint(&over, (2 << 3) | 0);
    Varint(&over, 1);
    absl::StatusOr<Tensor> o = ParseTensorProto(over);
    ASSERT_FALSE(o.ok());
    EXPECT_THAT(o.status().message(), HasSubstr("malformed TensorProto: bad dims"));
  }
}

TEST(TensorProto, BoolIsOneByteZeroOrOne) {
  std::string pb;
  Varint(&pb, (1 << 3) | 0);
  Varint(&pb, 3);
  Varint(&pb, (2 << 3) | 0);
  Varint(&pb, 9);  // BOOL
  Varint(&pb, (9 << 3) | 2);
  Varint(&pb, 3);
  pb += std::string("\x00\x01\x07", 3);
  absl::StatusOr<Tensor> t = ParseTensorProto(pb);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DType::kBool);
  EXPECT_THAT(t->bytes, ElementsAre(0, 1, 1));
  EXPECT_EQ(ElementToString(*t, 1), "true");
  EXPECT_EQ(ElementToString(*t, 0), "false");
}

TEST(Npy, EveryDTypeRoundTrips) {
  std::string dir = testing::MakeTempDir();
  for (DType d : kAllDTypes) {
    if (IsStorageOnly(d)) continue;  // see StorageOnlyTypesAreRefusedNamingTheAlternative
    SCOPED_TRACE(DTypeName(d));
    Tensor t = Sample(d);
    ASSERT_TRUE(WriteNpyFile(dir + "/t.npy", t).ok());
    std::string bytes = testing::ReadFile(dir + "/t.npy");
    // NumPy's layout: the data starts 64-byte aligned after a v1.0 header.
    EXPECT_EQ(bytes.size() % 64, static_cast<size_t>(t.ByteSize()) % 64);
    absl::StatusOr<Tensor> back = ReadTensorFile(dir + "/t.npy");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, d);
    EXPECT_THAT(back->shape, ElementsAre(2, 3));
    EXPECT_EQ(back->bytes, t.bytes);
  }
  testing::RemoveDir(dir);
}

TEST(Npy, ReadsEveryDescrSpelling) {
  const std::vector<std::pair<std::string, DType>> descrs = {
      {"<f2", DType::kFloat16}, {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64},
      {"|u1", DType::kUInt8},   {"|i1", DType::kInt8},    {"<i2", DType::kInt16},
      {"<u2", DType::kUInt16},  {"<i4", DType::kInt32},   {"<u4", DType::kUInt32},
      {"<i8", DType::kInt64},   {"<u8", DType::kUInt64},  {"|b1", DType::kBool}};
  for (const auto& [descr, d] : descrs) {
    const std::string code = descr.substr(1);
    for (std::string spelling : {descr, "<" + code, "=" + code, "|" + code, code}) {
      SCOPED_TRACE(spelling);
      Tensor want = Sample(d);
      std::string payload(want.bytes.begin(), want.bytes.end());
      absl::StatusOr<Tensor> t = ParseNpy(Npy(
          1, "{'descr': '" + spelling + "', 'fortran_order': False, 'shape': (2, 3), }", payload));
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(t->dtype, d);
      EXPECT_EQ(t->bytes, want.bytes);
    }
  }
  // Big-endian is fine where the byte order does not matter.
  absl::StatusOr<Tensor> u1 =
      ParseNpy(Npy(1, "{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "\x05\x06"));
  ASSERT_TRUE(u1.ok()) << u1.status();
  EXPECT_THAT(u1->values<uint8_t>(), ElementsAre(5, 6));
  // Bool bytes other than 0 become 1.
  absl::StatusOr<Tensor> b = ParseNpy(Npy(
      1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\0\1\2", 3)));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->bytes, ElementsAre(0, 1, 1));
}

TEST(Npy, SerializedHeaderIsNumPys) {
  std::string one = SerializeNpy(MakeTensor<int64_t>("v", {3}, {1, 2, 3}));
  EXPECT_EQ(one.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_THAT(one, HasSubstr("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"));
  EXPECT_EQ(one.size(), 128u + 24u);  // the header padded to 128 bytes
  EXPECT_EQ(one[127], '\n');
  std::string scalar = SerializeNpy(MakeTensor<uint8_t>("s", {}, {1}, DType::kBool));
  EXPECT_THAT(scalar, HasSubstr("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"));
  std::string two = SerializeNpy(MakeTensor<float>("m", {2, 1}, {1.f, 2.f}));
  EXPECT_THAT(two, HasSubstr("'shape': (2, 1), }"));
}

TEST(TensorFile, WritersRejectBytesThatDoNotMatchTheShape) {
  Tensor t = Sample(DType::kInt32);
  t.bytes.pop_back();
  std::string dir = testing::MakeTempDir();
  absl::Status pb = WriteTensorProtoFile(dir + "/t.pb", t);
  EXPECT_EQ(pb.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pb.message(), HasSubstr("tensor 'i32' of int32 2x3 needs 24 bytes, has 23"));
  EXPECT_EQ(WriteNpyFile(dir + "/t.npy", t).code(), absl::StatusCode::kInvalidArgument);
  testing::RemoveDir(dir);
}

// kiln::HalfToFloat / FloatToHalf (base/dtype.h), which the readers and
// the conformance runner use for float16.
TEST(Float16, ConvertsBothWaysRoundingToNearestEven) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(HalfToFloat(0xfc00)) && HalfToFloat(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7e00, 0x7e00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);           // a quarter of the smallest: 0
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);           // 1.5 ulps: ties to even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);    // tie: to even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);    // tie: to even
  EXPECT_EQ(FloatToHalf(2048.0f - std::ldexp(1.0f, -1)), 0x6800);  // carries into exponent
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(TensorValues, ElementAccessAndConversionByDType) {
  Tensor i64 = Sample(DType::kInt64);
  EXPECT_EQ(ElementToString(i64, 0), "-9223372036854775808");
  EXPECT_EQ(ElementToString(Sample(DType::kUInt64), 1), "18446744073709551615");
  EXPECT_EQ(ElementToString(Sample(DType::kInt8), 0), "-128");
  EXPECT_EQ(ElementToString(Sample(DType::kFloat16), 2), "65504");
  EXPECT_EQ(ElementToString(Sample(DType::kFloat32), 0), "1.5");
  EXPECT_EQ(ElementToString(Sample(DType::kFloat64), 0), "0.1");
  EXPECT_EQ(ElementAsDouble(Sample(DType::kUInt32), 1), 4294967295.0);
  EXPECT_EQ(ElementAsDouble(Sample(DType::kInt16), 5), -300.0);
  EXPECT_THAT(
      ToFloatVector(Sample(DType::kFloat16)),
      ElementsAre(1.f, -2.f, 65504.f, std::ldexp(1.0f, -24), INFINITY, HalfToFloat(0x3555)));
  EXPECT_THAT(ToFloatVector(Sample(DType::kBool)), ElementsAre(1.f, 0.f, 0.f, 1.f, 1.f, 0.f));
  EXPECT_EQ(i64.values<int64_t>()[4], int64_t{1} << 40);
  EXPECT_EQ(MakeTensor<float>("s", {}, {2.f}).NumElements(), 1);
  EXPECT_EQ(MakeTensor<double>("z", {0, 4}, {}).ByteSize(), 0);
  EXPECT_TRUE(StoresDType<uint16_t>(DType::kFloat16));
  EXPECT_FALSE(StoresDType<int16_t>(DType::kFloat16));
  EXPECT_TRUE(StoresDType<uint8_t>(DType::kBool));
  EXPECT_EQ(DTypeOf<int32_t>(), DType::kInt32);
}

TEST(TensorValuesDeathTest, TypedAccessChecksTheDType) {
  Tensor t = Sample(DType::kInt64);
  EXPECT_DEATH(t.data_as<double>(), "tensor 'i64' is int64");
}

TEST(TensorFile, MissingFileIsNotFound) {
  absl::StatusOr<Tensor> t = ReadTensorFile("/nonexistent/kiln/x.npy");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::deploy

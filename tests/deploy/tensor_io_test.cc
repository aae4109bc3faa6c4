#include "deploy/tensor_io.h"

#include <cstring>
#include <string>

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
  Tensor t{"logits", {2, 3}, {1.5f, -2.f, 3.25f, 0.f, 1e-7f, -1e9f}};
  std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteTensorProtoFile(dir + "/t.pb", t).ok());
  absl::StatusOr<Tensor> back = ReadTensorFile(dir + "/t.pb");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "logits");
  EXPECT_THAT(back->shape, ElementsAre(2, 3));
  EXPECT_EQ(back->data, t.data);
  testing::RemoveDir(dir);
}

TEST(TensorProto, SerializedBytesAreTheOnnxWireFormat) {
  Tensor t{"x", {2}, {1.0f, 2.0f}};
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
  EXPECT_THAT(t->shape, ElementsAre(2, 2));
  EXPECT_THAT(t->data, ElementsAre(1.f, 2.f, 3.f, 4.5f));
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
  EXPECT_THAT(t->data, ElementsAre(7.f, -8.f));
}

TEST(TensorProto, NonFloatDataTypeIsRejected) {
  std::string pb;
  Varint(&pb, (1 << 3) | 0);
  Varint(&pb, 2);
  Varint(&pb, (2 << 3) | 0);
  Varint(&pb, 7);  // INT64
  Varint(&pb, (8 << 3) | 2);
  Varint(&pb, 3);
  pb += "ids";
  Varint(&pb, (9 << 3) | 2);
  Varint(&pb, 16);
  pb += std::string(16, '\0');
  absl::StatusOr<Tensor> t = ParseTensorProto(pb);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("'ids'"));
  EXPECT_THAT(t.status().message(), HasSubstr("data_type 7 (INT64)"));
  EXPECT_THAT(t.status().message(), HasSubstr("FLOAT"));
}

TEST(TensorProto, WrongRawDataSizeAndTruncationAreErrors) {
  Tensor t{"x", {3}, {1.f, 2.f, 3.f}};
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
  EXPECT_THAT(t->shape, ElementsAre(1, 2, 3));
  EXPECT_THAT(t->data, ElementsAre(0.f, 1.f, 2.f, 3.f, 4.f, -5.5f));
  testing::RemoveDir(dir);
}

TEST(Npy, ReadsFloat64Version2AndScalarsAnd1D) {
  double v[3] = {0.25, -1.0, 3.0};
  absl::StatusOr<Tensor> t =
      ParseNpy(Npy(2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                   std::string(reinterpret_cast<const char*>(v), sizeof(v))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->shape, ElementsAre(3));
  EXPECT_THAT(t->data, ElementsAre(0.25f, -1.f, 3.f));
  float s = 9.f;
  absl::StatusOr<Tensor> scalar =
      ParseNpy(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                   std::string(reinterpret_cast<const char*>(&s), 4)));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_THAT(scalar->data, ElementsAre(9.f));
}

TEST(Npy, RejectsOtherDtypesFortranOrderAndShortData) {
  absl::StatusOr<Tensor> i32 = ParseNpy(
      Npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')));
  ASSERT_FALSE(i32.ok());
  EXPECT_THAT(i32.status().message(), HasSubstr("dtype '<i4' is not supported"));
  absl::StatusOr<Tensor> fortran = ParseNpy(
      Npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0')));
  ASSERT_FALSE(fortran.ok());
  EXPECT_THAT(fortran.status().message(), HasSubstr("fortran_order"));
  absl::StatusOr<Tensor> shorter = ParseNpy(
      Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", std::string(12, '\0')));
  ASSERT_FALSE(shorter.ok());
  EXPECT_THAT(shorter.status().message(), HasSubstr("needs 16 data bytes, file has 12"));
}

TEST(TensorFile, MissingFileIsNotFound) {
  absl::StatusOr<Tensor> t = ReadTensorFile("/nonexistent/kiln/x.npy");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::deploy

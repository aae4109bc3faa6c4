// Runs the built kiln-run binary on a hand-packed artifact.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/str.h"
#include "deploy/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_util.h"

namespace kiln::deploy {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kN = 64;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result RunKilnRun(const std::string& dir, const std::string& args) {
  std::string cmd = std::string(KILN_BINARY_DIR) + "/deploy/kiln-run " + args + " >" + dir +
                    "/stdout.txt 2>" + dir + "/stderr.txt";
  int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = testing::ReadFile(dir + "/stdout.txt");
  r.err = testing::ReadFile(dir + "/stderr.txt");
  return r;
}

std::string NpyFloat32(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header +
         std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
}

class KilnRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    std::string so = testing::CompileModule(dir_, kN);
    ASSERT_FALSE(so.empty()) << "cc failed to build the test module";
    testing::WriteFile(dir_ + "/m.kiln",
                       testing::PackArtifact({{"manifest", testing::Manifest(kN)},
                                              {"module.so", so},
                                              {"weights", testing::Weights(kN)}}));
  }
  void TearDown() override { testing::RemoveDir(dir_); }
  std::string dir_;
};

TEST_F(KilnRun, RunsWritesOutputAndTimes) {
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = 0.25f * i;
  testing::WriteFile(dir_ + "/x.npy", NpyFloat32({2, kN / 2}, x));
  Result r = RunKilnRun(dir_, dir_ + "/m.kiln --input data=" + dir_ + "/x.npy --output-dir " +
                                  dir_ + "/out/nested --repeat 5 --warmup 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  absl::StatusOr<Tensor> y = ReadTensorFile(dir_ + "/out/nested/output_0.pb");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->name, "out");
  EXPECT_EQ(y->dtype, DType::kFloat32);
  EXPECT_EQ(y->shape, (std::vector<int64_t>{2, kN / 2}));
  std::vector<float> got = y->values<float>();
  ASSERT_EQ(got.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_FLOAT_EQ(got[i], x[i] * 2 + 0.5f * i) << i;
  EXPECT_THAT(r.out, HasSubstr("output_0.pb: out float32 2x32\n"));
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  std::string last = out.substr(out.rfind('\n') + 1);
  EXPECT_THAT(last, StartsWith("median_ms="));
  double median = -1;
  EXPECT_TRUE(kiln::ParseDouble(last.substr(10), &median)) << last;
  EXPECT_GE(median, 0.0);
  EXPECT_THAT(r.out, HasSubstr("run 4:"));
}

TEST_F(KilnRun, SingleInputTakesABareFileAndPb) {
  Tensor x = MakeTensor("whatever", {2, kN / 2}, std::vector<float>(kN, 1.f));
  ASSERT_TRUE(WriteTensorProtoFile(dir_ + "/x.pb", x).ok());
  Result r =
      RunKilnRun(dir_, dir_ + "/m.kiln --input " + dir_ + "/x.pb --output-dir=" + dir_ + "/o");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<Tensor> y = ReadTensorFile(dir_ + "/o/output_0.pb");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_FLOAT_EQ(y->data_as<float>()[3], 2.f + 1.5f);
  EXPECT_EQ(r.out.find("median_ms"), std::string::npos);
}

TEST_F(KilnRun, Float64IsConvertedForAFloat32Input) {
  std::vector<double> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = 0.125 * i;
  ASSERT_TRUE(WriteNpyFile(dir_ + "/x.npy", MakeTensor("x", {2, kN / 2}, x)).ok());
  Result r = RunKilnRun(
      dir_, dir_ + "/m.kiln --input data=" + dir_ + "/x.npy --output-dir " + dir_ + "/o");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<Tensor> y = ReadTensorFile(dir_ + "/o/output_0.pb");
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->dtype, DType::kFloat32);
  EXPECT_FLOAT_EQ(y->data_as<float>()[5], 1.25f + 2.5f);
}

// An artifact of the test module computing in `ctype`, whose manifest says `dtype`.
void WriteTypedArtifact(const std::string& dir, const std::string& path, const std::string& ctype,
                        DType dtype, const std::string& weights) {
  std::string so = testing::CompileModule(dir, kN, ctype);
  ASSERT_FALSE(so.empty()) << "cc failed to build the " << ctype << " test module";
  testing::WriteFile(path,
                     testing::PackArtifact({{"manifest", testing::Manifest(kN, "kiln_main", dtype)},
                                            {"module.so", so},
                                            {"weights", weights}}));
}

TEST_F(KilnRun, Int64ModuleReadsAndWritesInt64) {
  WriteTypedArtifact(dir_, dir_ + "/i64.kiln", "int64_t", DType::kInt64,
                     testing::Weights<int64_t>(kN));
  std::vector<int64_t> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = (int64_t{1} << 40) - 7 * i;
  ASSERT_TRUE(WriteNpyFile(dir_ + "/x.npy", MakeTensor("x", {2, kN / 2}, x)).ok());
  Result r = RunKilnRun(
      dir_, dir_ + "/i64.kiln --input data=" + dir_ + "/x.npy --output-dir " + dir_ + "/o");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("out int64 2x32"));
  absl::StatusOr<Tensor> y = ReadTensorFile(dir_ + "/o/output_0.pb");
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->dtype, DType::kInt64);
  EXPECT_EQ(y->shape, (std::vector<int64_t>{2, kN / 2}));
  std::vector<int64_t> got = y->values<int64_t>();
  ASSERT_EQ(got.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(got[i], x[i] * 2 + i) << i;

  // A .pb input of the same dtype works too.
  ASSERT_TRUE(WriteTensorProtoFile(dir_ + "/x.pb", MakeTensor("x", {2, kN / 2}, x)).ok());
  Result pb = RunKilnRun(
      dir_, dir_ + "/i64.kiln --input " + dir_ + "/x.pb --output-dir " + dir_ + "/o2 --repeat 2");
  ASSERT_EQ(pb.exit_code, 0) << pb.err;
  std::string out = pb.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_THAT(out.substr(out.rfind('\n') + 1), StartsWith("median_ms="));
}

TEST_F(KilnRun, UInt8ModuleReadsAndWritesUInt8) {
  WriteTypedArtifact(dir_, dir_ + "/u8.kiln", "uint8_t", DType::kUInt8,
                     testing::Weights<uint8_t>(kN));
  std::vector<uint8_t> x(kN, 100);
  ASSERT_TRUE(WriteNpyFile(dir_ + "/x.npy", MakeTensor("x", {2, kN / 2}, x)).ok());
  Result r = RunKilnRun(
      dir_, dir_ + "/u8.kiln --input data=" + dir_ + "/x.npy --output-dir " + dir_ + "/o");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<Tensor> y = ReadTensorFile(dir_ + "/o/output_0.pb");
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->dtype, DType::kUInt8);
  EXPECT_EQ(y->ByteSize(), kN);
  EXPECT_EQ(y->data_as<uint8_t>()[9], 209);
  EXPECT_EQ(y->data_as<uint8_t>()[60], static_cast<uint8_t>(200 + 60));
}

TEST_F(KilnRun, WrongDTypeExitsTwoNamingBoth) {
  WriteTypedArtifact(dir_, dir_ + "/i64.kiln", "int64_t", DType::kInt64,
                     testing::Weights<int64_t>(kN));
  testing::WriteFile(dir_ + "/f.npy", NpyFloat32({2, kN / 2}, std::vector<float>(kN, 1.f)));
  Result r = RunKilnRun(
      dir_, dir_ + "/i64.kiln --input data=" + dir_ + "/f.npy --output-dir " + dir_ + "/out");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("input 'data': expected int64, given float32"));
  // float64 converts only to float32, not to an integer dtype.
  ASSERT_TRUE(
      WriteNpyFile(dir_ + "/d.npy", MakeTensor("d", {2, kN / 2}, std::vector<double>(kN, 1.0)))
          .ok());
  Result d = RunKilnRun(
      dir_, dir_ + "/i64.kiln --input data=" + dir_ + "/d.npy --output-dir " + dir_ + "/out");
  EXPECT_EQ(d.exit_code, 2) << d.err;
  EXPECT_THAT(d.err, HasSubstr("input 'data': expected int64, given float64"));
  // int32 data for a float32 input is not converted either.
  ASSERT_TRUE(
      WriteNpyFile(dir_ + "/i.npy", MakeTensor("i", {2, kN / 2}, std::vector<int32_t>(kN, 1)))
          .ok());
  Result i = RunKilnRun(
      dir_, dir_ + "/m.kiln --input data=" + dir_ + "/i.npy --output-dir " + dir_ + "/out");
  EXPECT_EQ(i.exit_code, 2) << i.err;
  EXPECT_THAT(i.err, HasSubstr("input 'data': expected float32, given int32"));
}

TEST_F(KilnRun, WrongShapeExitsTwoNamingTheTensor) {
  testing::WriteFile(dir_ + "/bad.npy", NpyFloat32({kN}, std::vector<float>(kN, 0.f)));
  Result r = RunKilnRun(
      dir_, dir_ + "/m.kiln --input data=" + dir_ + "/bad.npy --output-dir " + dir_ + "/out");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("input 'data': expected shape 2x32, given 64"));
}

TEST_F(KilnRun, FailingEntryPointExitsOne) {
  std::string so = testing::ReadFile(dir_ + "/module.so");
  testing::WriteFile(dir_ + "/fail.kiln",
                     testing::PackArtifact({{"manifest", testing::Manifest(kN, "kiln_fail")},
                                            {"module.so", so},
                                            {"weights", testing::Weights(kN)}}));
  testing::WriteFile(dir_ + "/x.npy", NpyFloat32({2, kN / 2}, std::vector<float>(kN, 1.f)));
  Result r = RunKilnRun(
      dir_, dir_ + "/fail.kiln --input data=" + dir_ + "/x.npy --output-dir " + dir_ + "/out");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("entry point 'kiln_fail' returned 5"));
}

TEST_F(KilnRun, BadArgumentsExitTwo) {
  Result missing = RunKilnRun(dir_, dir_ + "/m.kiln --output-dir " + dir_ + "/out");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("missing input 'data' (float32 2x32)"));
  Result unknown = RunKilnRun(dir_, dir_ + "/m.kiln --input nope=x.npy --output-dir " + dir_);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("one of the model's inputs (data)"));
  Result no_artifact = RunKilnRun(dir_, dir_ + "/none.kiln --input x.npy --output-dir " + dir_);
  EXPECT_EQ(no_artifact.exit_code, 2);
  EXPECT_THAT(no_artifact.err, HasSubstr("cannot open artifact"));
  Result help = RunKilnRun(dir_, "--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: kiln-run ARTIFACT"));
  Result repeat = RunKilnRun(dir_, dir_ + "/m.kiln --repeat 0 --output-dir " + dir_);
  EXPECT_EQ(repeat.exit_code, 2);
  EXPECT_THAT(repeat.err, HasSubstr("--repeat takes an integer >= 1"));
}

}  // namespace
}  // namespace kiln::deploy

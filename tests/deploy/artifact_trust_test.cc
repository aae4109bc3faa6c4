// The artifact's digests and signature (docs/artifact-format.md, version 2):
// every part altered is refused with DATA_LOSS before anything is loaded; a
// trust key admits only what its key signed; a manifest that promises other
// buffers than the code takes is refused even with its digests redone.
#include <sys/wait.h>

#include <string>
#include <vector>

#include "deploy/artifact.h"
#include "deploy/kiln_runtime.h"
#include "deploy/runtime.h"
#include "deploy/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_util.h"

namespace kiln::deploy {
namespace {

using ::testing::HasSubstr;

constexpr int kN = 256;

class ArtifactTrust : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    so_ = new std::string(testing::CompileModule(*dir_, kN));
    key_ = testing::NewSigningKey();
    other_key_ = testing::NewSigningKey();
  }
  static void TearDownTestSuite() {
    testing::RemoveDir(*dir_);
    delete dir_;
    delete so_;
    EVP_PKEY_free(key_);
    EVP_PKEY_free(other_key_);
  }
  void SetUp() override {
    ASSERT_FALSE(so_->empty()) << "cc failed to build the test module";
    ASSERT_NE(key_, nullptr);
  }
  static std::string Artifact(const std::string& manifest = testing::Manifest(kN)) {
    return testing::PackArtifact(
        {{"manifest", manifest}, {"module.so", *so_}, {"weights", testing::Weights(kN)}});
  }
  static std::string Signed(EVP_PKEY* key) {
    std::string bytes = Artifact();
    testing::SignArtifact(&bytes, key);
    return bytes;
  }
  // Loads and runs on in[i] = i; the outputs, or the load's status.
  static absl::StatusOr<std::vector<float>> LoadAndRun(const std::string& bytes,
                                                       const std::string& trust_key = "") {
    LoadOptions options;
    options.trust_key = trust_key;
    auto m = Module::LoadBytes(bytes, options);
    if (!m.ok()) return m.status();
    std::vector<float> in(kN), out(kN);
    for (int i = 0; i < kN; ++i) in[i] = static_cast<float>(i);
    if (absl::Status s = (*m)->Run({in.data()}, {out.data()}); !s.ok()) return s;
    return out;
  }
  // Where section `name`'s data starts in a packed artifact.
  static size_t OffsetOf(const std::string& bytes, const std::string& name) {
    auto c = ParseContainer(bytes);
    EXPECT_TRUE(c.ok()) << c.status();
    return static_cast<size_t>(c->sections.at(name).data() - bytes.data());
  }
  static std::string* dir_;
  static std::string* so_;
  static EVP_PKEY* key_;
  static EVP_PKEY* other_key_;
};
std::string* ArtifactTrust::dir_ = nullptr;
std::string* ArtifactTrust::so_ = nullptr;
EVP_PKEY* ArtifactTrust::key_ = nullptr;
EVP_PKEY* ArtifactTrust::other_key_ = nullptr;

TEST_F(ArtifactTrust, IntactArtifactRunsWithoutAKey) {
  auto out = LoadAndRun(Artifact());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < kN; ++i) ASSERT_FLOAT_EQ((*out)[i], 2.f * i + 0.5f * i) << i;
}

// One byte changed in each section, in its first, middle and last byte:
// DATA_LOSS naming the part, and nothing loaded.
TEST_F(ArtifactTrust, AlteredSectionIsDataLoss) {
  const std::string good = Artifact();
  auto c = ParseContainer(good);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const std::string name : {"manifest", "module.so", "weights"}) {
    const size_t begin = OffsetOf(good, name), size = c->sections.at(name).size();
    for (size_t at : {begin, begin + size / 2, begin + size - 1}) {
      std::string bytes = good;
      bytes[at] ^= 0x10;
      auto m = Module::LoadBytes(bytes);
      ASSERT_FALSE(m.ok()) << name << " byte " << at;
      EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << name << ": " << m.status();
      EXPECT_THAT(m.status().message(),
                  HasSubstr(name == "manifest" ? "the manifest's SHA-256"
                                               : "section '" + name + "' has SHA-256"));
    }
  }
  // The header's digest itself.
  std::string bytes = good;
  bytes[20] ^= 1;
  auto m = Module::LoadBytes(bytes);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("its header says"));
}

TEST_F(ArtifactTrust, SectionsOutsideTheManifestOrMissingAreDataLoss) {
  // A section the manifest does not list (added after the digests).
  std::string manifest = testing::Manifest(kN);
  std::string bytes = testing::PackArtifact(
      {{"manifest", manifest}, {"module.so", *so_}, {"weights", testing::Weights(kN)}});
  std::string with_extra = testing::PackArtifact(
      {{"manifest", std::string(ParseContainer(bytes)->sections.at("manifest"))},
       {"module.so", *so_},
       {"weights", testing::Weights(kN)},
       {"extra", "more code"}},
      2, /*digests=*/false);
  // PackArtifact without digests leaves the header's digest zero: set it.
  auto c = ParseContainer(with_extra);
  ASSERT_TRUE(c.ok()) << c.status();
  with_extra.replace(16, 32, testing::Sha256(c->sections.at("manifest")));
  auto m = Module::LoadBytes(with_extra);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("section 'extra' has no digest in the manifest"));
  // A listed section the file lacks.
  std::string listed = manifest + "section device.bin sha256 " + std::string(64, 'a') + "\n";
  auto missing = Module::LoadBytes(Artifact(listed));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(missing.status().message(), HasSubstr("lists section 'device.bin'"));
}

TEST_F(ArtifactTrust, PaddingAndTrailingBytesMustBeZero) {
  const std::string good = Artifact();
  // Between the section table and the manifest: padding.
  const size_t manifest_at = OffsetOf(good, "manifest");
  ASSERT_EQ(good[manifest_at - 1], '\0');
  std::string bytes = good;
  bytes[manifest_at - 1] = 'x';
  auto m = Module::LoadBytes(bytes);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("belong to no section and are not zero"));
  // Bytes after the last section.
  auto extended = Module::LoadBytes(good + "trailing");
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(extended.status().message(), HasSubstr("past the end of its last section"));
  // A section pointed at the header.
  std::string overlapping = good;
  const size_t entry = overlapping.find(std::string("\x07\0\0\0weights", 11));
  ASSERT_NE(entry, std::string::npos);
  overlapping.replace(entry + 11, 8, std::string(8, '\0'));
  auto over = Module::LoadBytes(overlapping);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(over.status().message(), HasSubstr("overlaps the header"));
  // Truncated by one byte.
  auto cut = Module::LoadBytes(good.substr(0, good.size() - 1));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ArtifactTrust, UnsignedHeaderFieldsMustBeZero) {
  for (size_t at : {size_t{48}, size_t{52}, size_t{60}, size_t{100}}) {
    std::string bytes = Artifact();
    bytes[at] ^= 4;
    auto m = Module::LoadBytes(bytes);
    ASSERT_FALSE(m.ok()) << at;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << at << ": " << m.status();
  }
}

// The manifest of a correctly digested artifact may still lie about the
// buffers (its digests redone by whoever edited it): the entry point's I/O
// contract, compiled into the code, refuses it before anything runs.
TEST_F(ArtifactTrust, ManifestThatDisagreesWithTheCodeIsRefused) {
  const std::string half = std::to_string(kN / 2);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"output out float32 2x" + half, "output out float32 1x" + half},  // smaller output
           {"input data float32 2x" + half, "input data float32 1x" + half},  // smaller input
           {"workspace_bytes 256", "workspace_bytes 64"},                     // smaller workspace
           {"output out float32 2x" + half, "output out int8 2x" + half}}) {  // other dtype
    std::string manifest = testing::Manifest(kN);
    manifest.replace(manifest.find(from), from.size(), to);
    auto m = Module::LoadBytes(Artifact(manifest));
    ASSERT_FALSE(m.ok()) << to;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << to;
    EXPECT_THAT(m.status().message(), HasSubstr("the manifest does not match the code")) << to;
    EXPECT_THAT(m.status().message(), HasSubstr(to)) << to;
  }
  // Code that declares no contract at all.
  std::string src = *dir_ + "/nocontract.c", so = *dir_ + "/nocontract.so";
  testing::WriteFile(src, testing::kModuleSource);
  ASSERT_EQ(
      std::system(
          ("cc -shared -fPIC -O2 -DN=" + std::to_string(kN) + " -o " + so + " " + src).c_str()),
      0);
  auto bare = Module::LoadBytes(testing::PackArtifact({{"manifest", testing::Manifest(kN)},
                                                       {"module.so", testing::ReadFile(so)},
                                                       {"weights", testing::Weights(kN)}}));
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bare.status().message(), HasSubstr("does not export 'kiln_main_io'"));
}

TEST_F(ArtifactTrust, SignedArtifactLoadsWithAndWithoutItsKey) {
  const std::string bytes = Signed(key_);
  auto plain = LoadAndRun(bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto trusted = LoadAndRun(bytes, testing::PublicKeyPem(key_));
  ASSERT_TRUE(trusted.ok()) << trusted.status();
  EXPECT_EQ(*plain, *trusted);
  LoadOptions options;
  options.trust_key = testing::PublicKeyPem(key_);
  auto m = Module::LoadBytes(bytes, options);
  ASSERT_TRUE(m.ok());
  EXPECT_THAT((*m)->signer(), ::testing::StartsWith("SHA256:"));
  auto unsigned_module = Module::LoadBytes(Artifact());
  ASSERT_TRUE(unsigned_module.ok());
  EXPECT_EQ((*unsigned_module)->signer(), "");
}

TEST_F(ArtifactTrust, TrustKeyRefusesUnsignedOrOtherKeysArtifacts) {
  const std::string pem = testing::PublicKeyPem(key_);
  auto unsigned_artifact = LoadAndRun(Artifact(), pem);
  ASSERT_FALSE(unsigned_artifact.ok());
  EXPECT_EQ(unsigned_artifact.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(unsigned_artifact.status().message(), HasSubstr("not signed"));
  auto other = LoadAndRun(Signed(other_key_), pem);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(other.status().message(), HasSubstr("not by the trusted key"));
}

TEST_F(ArtifactTrust, BadSignatureIsRefusedWithOrWithoutAKey) {
  std::string bytes = Signed(key_);
  bytes[100] ^= 1;  // in the signature
  for (const std::string& trust : {std::string(), testing::PublicKeyPem(key_)}) {
    auto out = LoadAndRun(bytes, trust);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(out.status().message(), HasSubstr("does not match its manifest digest"));
  }
  // The key named in the header swapped for another: with the trust key,
  // "not by the trusted key"; without, the signature does not verify.
  std::string swapped = Signed(key_);
  std::string other = Signed(other_key_);
  swapped.replace(56, 32, other.substr(56, 32));
  auto without = LoadAndRun(swapped);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), absl::StatusCode::kUnauthenticated);
  // A re-digested manifest under an old signature: the digest chain holds,
  // the signature does not.
  std::string manifest = testing::Manifest(kN) + "note edited\n";
  std::string edited = Artifact(manifest);
  edited.replace(48, 104, Signed(key_).substr(48, 104));
  auto resigned = LoadAndRun(edited, testing::PublicKeyPem(key_));
  ASSERT_FALSE(resigned.ok());
  EXPECT_EQ(resigned.status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(ArtifactTrust, BadTrustKeyIsInvalidArgument) {
  auto out = LoadAndRun(Signed(key_), "not a key");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("not an Ed25519 public key in PEM"));
}

TEST_F(ArtifactTrust, CApiLoadTrusted) {
  const std::string path = *dir_ + "/signed.kiln", other = *dir_ + "/other.kiln";
  testing::WriteFile(path, Signed(key_));
  testing::WriteFile(other, Signed(other_key_));
  const std::string pem = testing::PublicKeyPem(key_);
  char err[512] = "unset";
  kiln_module* m = nullptr;
  ASSERT_EQ(kiln_module_load_trusted(path.c_str(), nullptr, pem.c_str(), &m, err, sizeof(err)), 0)
      << err;
  std::vector<float> in(kN, 1.f), out(kN);
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  ASSERT_EQ(kiln_module_run(m, ins, outs), 0) << kiln_module_last_error(m);
  EXPECT_FLOAT_EQ(out[2], 2.f + 1.f);
  kiln_module_free(m);
  m = nullptr;
  EXPECT_EQ(kiln_module_load_trusted(other.c_str(), nullptr, pem.c_str(), &m, err, sizeof(err)),
            -1);
  EXPECT_EQ(m, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("UNAUTHENTICATED"));
  // No key: any intact artifact.
  ASSERT_EQ(kiln_module_load_trusted(other.c_str(), nullptr, nullptr, &m, err, sizeof(err)), 0)
      << err;
  kiln_module_free(m);
}

int RunKilnRun(const std::string& args, std::string* err) {
  const std::string err_dir = testing::MakeTempDir(), err_file = err_dir + "/err.txt";
  const std::string cmd =
      std::string(KILN_BINARY_DIR) + "/deploy/kiln-run " + args + " >/dev/null 2>" + err_file;
  const int status = std::system(cmd.c_str());
  *err = testing::ReadFile(err_file);
  testing::RemoveDir(err_dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(ArtifactTrust, KilnRunTrustKey) {
  const std::string signed_path = *dir_ + "/run_signed.kiln", other = *dir_ + "/run_other.kiln",
                    unsigned_path = *dir_ + "/run_unsigned.kiln", key = *dir_ + "/trusted.pem",
                    input = *dir_ + "/x.pb", out = *dir_ + "/out";
  testing::WriteFile(signed_path, Signed(key_));
  testing::WriteFile(other, Signed(other_key_));
  testing::WriteFile(unsigned_path, Artifact());
  testing::WriteFile(key, testing::PublicKeyPem(key_));
  ASSERT_TRUE(
      WriteTensorProtoFile(input, MakeTensor("x", {2, kN / 2}, std::vector<float>(kN, 1.f))).ok());
  std::string err;
  const std::string io = " --input data=" + input + " --output-dir " + out;
  EXPECT_EQ(RunKilnRun(signed_path + io + " --trust-key " + key, &err), 0) << err;
  EXPECT_EQ(RunKilnRun(other + io + " --trust-key " + key, &err), 2);
  EXPECT_THAT(err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(err, HasSubstr("not by the trusted key"));
  EXPECT_EQ(RunKilnRun(unsigned_path + io + " --trust-key " + key, &err), 2);
  EXPECT_THAT(err, HasSubstr("not signed"));
  EXPECT_EQ(RunKilnRun(unsigned_path + io, &err), 0) << err;
  EXPECT_EQ(RunKilnRun(signed_path + io + " --trust-key " + *dir_ + "/no-such.pem", &err), 2);
  EXPECT_THAT(err, HasSubstr("cannot read a PEM public key"));
}

}  // namespace
}  // namespace kiln::deploy

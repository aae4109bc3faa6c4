// Artifacts that kiln compiles, signed as the tracker signs them, then
// altered: a mutation campaign over every region of real artifacts
// (header, section table, manifest, code, weights, padding; bit flips,
// truncations, extensions, and manifests edited with their digests redone),
// each run by the real kiln-run in a child process. Every mutation must be
// refused with a clean error (exit 2, a status on stderr) or, for bytes
// nothing covers, give exactly the original output: no signal, no wrong
// answer.
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/artifact_signing.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "deploy/artifact.h"
#include "deploy/runtime.h"
#include "deploy/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::compiler {
namespace {

using ::testing::HasSubstr;

const std::string kSmallCnn = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";
const std::string kKilnRun = std::string(KILN_BINARY_DIR) + "/deploy/kiln-run";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Child {
  bool signaled = false;
  int signal = 0;
  int exit_code = -1;
  std::string err;
};

// Runs kiln-run with `args` (no shell), stderr to `err_path`.
Child RunKilnRun(const std::vector<std::string>& args, const std::string& err_path) {
  std::vector<std::string> argv_s = {kKilnRun};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (devnull < 0 || err < 0) ::_exit(126);
    ::dup2(devnull, 1);
    ::dup2(err, 2);
    ::setenv("KILN_NUM_THREADS", "1", 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  c.signaled = WIFSIGNALED(status);
  c.signal = c.signaled ? WTERMSIG(status) : 0;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  c.err = ReadFile(err_path);
  return c;
}

class ArtifactMutation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kiln-mutation-XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
    auto model = Model::FromOnnxFile(kSmallCnn);
    ASSERT_TRUE(model.ok()) << model.status();
    auto art = CompileModel(*model, Target::Host(), nullptr, {}, nullptr);
    ASSERT_TRUE(art.ok()) << art.status();
    unsigned_ = new std::string(*art);
    auto key = SigningKey::Generate();
    ASSERT_TRUE(key.ok());
    signed_ = new std::string(*art);
    ASSERT_TRUE(SignArtifact(signed_, *key).ok());
    WriteFile(*dir_ + "/trusted.pem", key->PublicKeyPem());
    std::vector<float> x(3 * 32 * 32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.01f);
    ASSERT_TRUE(
        deploy::WriteTensorProtoFile(*dir_ + "/x.pb", deploy::MakeTensor("data", {1, 3, 32, 32}, x))
            .ok());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
    delete unsigned_;
    delete signed_;
  }
  // Writes `bytes` and runs kiln-run on it (with the trust key when
  // `trusted`); the child's fate and its output's bytes.
  static Child Run(std::string_view bytes, bool trusted, std::string* output) {
    const std::string path = *dir_ + "/m.kiln", out_dir = *dir_ + "/out";
    WriteFile(path, bytes);
    std::error_code ec;
    std::filesystem::remove(out_dir + "/output_0.pb", ec);
    std::vector<std::string> args = {path, "--input", "data=" + *dir_ + "/x.pb", "--output-dir",
                                     out_dir};
    if (trusted) {
      args.push_back("--trust-key");
      args.push_back(*dir_ + "/trusted.pem");
    }
    Child c = RunKilnRun(args, *dir_ + "/err.txt");
    *output = ReadFile(out_dir + "/output_0.pb");
    return c;
  }
  static std::string* dir_;
  static std::string* unsigned_;
  static std::string* signed_;
};
std::string* ArtifactMutation::dir_ = nullptr;
std::string* ArtifactMutation::unsigned_ = nullptr;
std::string* ArtifactMutation::signed_ = nullptr;

// [begin, end) of each region of an artifact.
std::map<std::string, std::pair<size_t, size_t>> Regions(const std::string& art) {
  auto c = deploy::ParseContainer(art);
  EXPECT_TRUE(c.ok()) << c.status();
  std::map<std::string, std::pair<size_t, size_t>> r;
  r["header"] = {0, deploy::kArtifactHeaderBytes};
  size_t table_end = deploy::kArtifactHeaderBytes;
  for (const auto& [name, data] : c->sections) table_end += 4 + name.size() + 16;
  r["section table"] = {deploy::kArtifactHeaderBytes, table_end};
  for (const auto& [name, data] : c->sections) {
    const size_t b = static_cast<size_t>(data.data() - art.data());
    r[name] = {b, b + data.size()};
  }
  return r;
}

// Every byte outside the header, the table and the sections.
std::vector<size_t> PaddingBytes(const std::string& art) {
  std::vector<bool> covered(art.size(), false);
  for (const auto& [name, range] : Regions(art)) {
    for (size_t i = range.first; i < range.second; ++i) covered[i] = true;
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < art.size(); ++i) {
    if (!covered[i]) out.push_back(i);
  }
  return out;
}

TEST_F(ArtifactMutation, OriginalsRunAndAgree) {
  std::string a, b;
  Child u = Run(*unsigned_, false, &a);
  ASSERT_EQ(u.exit_code, 0) << u.err;
  Child s = Run(*signed_, true, &b);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  // The signed one without the key, the unsigned one refused with it.
  Child s2 = Run(*signed_, false, &b);
  EXPECT_EQ(s2.exit_code, 0) << s2.err;
  Child u2 = Run(*unsigned_, true, &b);
  EXPECT_EQ(u2.exit_code, 2);
  EXPECT_THAT(u2.err, HasSubstr("UNAUTHENTICATED"));
}

TEST_F(ArtifactMutation, FiveHundredMutationsAreRefusedOrHarmless) {
  const auto start = std::chrono::steady_clock::now();
  std::string reference;
  ASSERT_EQ(Run(*unsigned_, false, &reference).exit_code, 0);
  ASSERT_FALSE(reference.empty());
  std::mt19937_64 rng(20261128);
  auto pick = [&](size_t lo, size_t hi) {  // [lo, hi)
    return std::uniform_int_distribution<size_t>(lo, hi - 1)(rng);
  };
  struct Tally {
    int runs = 0, refused = 0, harmless = 0;
  };
  std::map<std::string, Tally> tally;  // by kind/region
  std::vector<std::string> failures;
  int total = 0;
  auto check = [&](const std::string& what, const std::string& bytes, bool trusted) {
    ++total;
    std::string out;
    Child c = Run(bytes, trusted, &out);
    Tally& t = tally[what.substr(0, what.find(" @"))];
    ++t.runs;
    const std::string label = StrCat(what, trusted ? " (trust key)" : "");
    if (c.signaled) {
      failures.push_back(StrCat(label, ": killed by signal ", c.signal));
    } else if (c.exit_code == 0) {
      if (out == reference) {
        ++t.harmless;
      } else {
        failures.push_back(StrCat(label, ": exit 0 with a different output"));
      }
    } else if (c.exit_code == 2 && c.err.rfind("kiln-run: ", 0) == 0 &&
               (c.err.find("DATA_LOSS") != std::string::npos ||
                c.err.find("INVALID_ARGUMENT") != std::string::npos ||
                c.err.find("UNAUTHENTICATED") != std::string::npos)) {
      ++t.refused;
    } else {
      failures.push_back(StrCat(label, ": exit ", c.exit_code, ", stderr: ", c.err));
    }
  };
  // Alternate between the unsigned artifact run without a key and the
  // signed one run with its key.
  int turn = 0;
  auto next = [&]() -> std::pair<const std::string*, bool> {
    const bool s = (turn++ % 2) == 1;
    return {s ? signed_ : unsigned_, s};
  };
  // Bit flips: 50 in each region (header, section table, manifest,
  // module.so, weights, padding) = 300.
  for (const std::string region :
       {"header", "section table", "manifest", "module.so", "weights", "padding"}) {
    for (int i = 0; i < 50; ++i) {
      auto [art, trusted] = next();
      size_t at;
      if (region == "padding") {
        const std::vector<size_t> pad = PaddingBytes(*art);
        ASSERT_FALSE(pad.empty());
        at = pad[pick(0, pad.size())];
      } else {
        const auto range = Regions(*art).at(region);
        at = pick(range.first, range.second);
      }
      std::string bytes = *art;
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << pick(0, 8)));
      check(StrCat("flip ", region, " @", at), bytes, trusted);
    }
  }
  // Truncations: 20 in each of the five regions with data = 100.
  for (const std::string region : {"header", "section table", "manifest", "module.so", "weights"}) {
    for (int i = 0; i < 20; ++i) {
      auto [art, trusted] = next();
      const auto range = Regions(*art).at(region);
      const size_t at = pick(range.first, range.second);
      check(StrCat("truncate in ", region, " @", at), art->substr(0, at), trusted);
    }
  }
  // Extensions: 40 of random bytes (1 byte to 8 KiB), 20 of zeros shorter
  // than the 64-byte alignment (padding a writer could leave: harmless), 20
  // of zeros of 64 bytes or more = 80.
  for (int i = 0; i < 80; ++i) {
    auto [art, trusted] = next();
    std::string tail;
    if (i < 40) {
      tail.resize(pick(1, 8193));
      for (char& ch : tail) ch = static_cast<char>(pick(0, 256));
      if (tail.find_first_not_of('\0') == std::string::npos) tail[0] = 1;
      check(StrCat("extend with random bytes @", tail.size()), *art + tail, trusted);
    } else {
      tail.assign(i < 60 ? pick(1, 64) : pick(64, 4097), '\0');
      check(StrCat(i < 60 ? "extend with short zeros" : "extend with zeros", " @", tail.size()),
            *art + tail, trusted);
    }
  }
  // Manifests edited and their digest redone (the header's, and the
  // signature left as it was): a smaller output or input, a smaller
  // workspace, another entry, another weights size. Refused by the I/O
  // contract without a key, by the signature with one. 10 x 2 = 20.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"output logits float32 1x10", "output logits float32 1x5"},
      {"output logits float32 1x10", "output logits float32 1x1"},
      {"input data float32 1x3x32x32", "input data float32 1x3x16x16"},
      {"input data float32 1x3x32x32", "input data float32 1x1x1x1"},
      {"workspace_bytes ", "workspace_bytes 1"},
      {"entry kiln_main", "entry k0_conv2d"},
      {"entry kiln_main", "entry kiln_parallel_for"},
      {"weights_bytes ", "weights_bytes 1"},
      {"output logits float32 1x10", "output logits int8 1x10"},
      {"input data float32 1x3x32x32", "input data float64 1x3x32x32"},
  };
  for (const auto& [from, to] : edits) {
    for (bool trusted : {false, true}) {
      const std::string& art = trusted ? *signed_ : *unsigned_;
      auto c = deploy::ParseContainer(art);
      ASSERT_TRUE(c.ok());
      std::string_view manifest = c->sections.at("manifest");
      const size_t at = manifest.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      std::string edited(manifest);
      edited.replace(at, from.size(), to);
      // Same length or not, rebuild: the manifest goes last, in the
      // space after the weights, its table entry pointing there.
      std::string bytes = art;
      const size_t manifest_offset = static_cast<size_t>(manifest.data() - art.data());
      std::fill(bytes.begin() + manifest_offset, bytes.begin() + manifest_offset + manifest.size(),
                '\0');
      bytes.resize((bytes.size() + 63) / 64 * 64, '\0');
      const uint64_t new_offset = bytes.size();
      bytes += edited;
      // The table entry of "manifest": name length 8, then the name.
      const size_t entry = bytes.find(std::string("\x08\0\0\0manifest", 12));
      ASSERT_NE(entry, std::string::npos);
      for (int k = 0; k < 8; ++k) {
        bytes[entry + 12 + k] = static_cast<char>((new_offset >> (8 * k)) & 0xff);
        bytes[entry + 20 + k] = static_cast<char>((edited.size() >> (8 * k)) & 0xff);
      }
      std::string digest(32, '\0');
      unsigned int len = 0;
      EVP_Digest(edited.data(), edited.size(), reinterpret_cast<unsigned char*>(digest.data()),
                 &len, EVP_sha256(), nullptr);
      bytes.replace(16, 32, digest);
      check(StrCat("redigested manifest edit @", to), bytes, trusted);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary;
  int refused = 0, harmless = 0;
  for (const auto& [kind, t] : tally) {
    summary += StrCat("  ", kind, ": ", t.runs, " runs, ", t.refused, " refused, ", t.harmless,
                      " harmless\n");
    refused += t.refused;
    harmless += t.harmless;
  }
  std::printf("%d mutations in %.1f s: %d refused, %d harmless, %zu failures\n%s", total, seconds,
              refused, harmless, failures.size(), summary.c_str());
  EXPECT_EQ(total, 500);
  EXPECT_THAT(failures, ::testing::IsEmpty());
  // Only the short zero extensions may run (nothing else is uncovered).
  EXPECT_EQ(harmless, tally["extend with short zeros"].runs);
}

// The tracker's key on disk: made 0600, read back the same; a key others
// may read, or a file that holds none, is refused.
TEST(SigningKeyFile, MadeOnceOwnerOnlyAndReadBack) {
  char tmpl[] = "/tmp/kiln-key-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/state/key.pem";
  bool created = false;
  auto made = SigningKey::LoadOrCreate(path, &created);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(created);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto again = SigningKey::LoadOrCreate(path, &created);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(created);
  EXPECT_EQ(again->PublicKeyRaw(), made->PublicKeyRaw());
  EXPECT_THAT(made->PublicKeyPem(), ::testing::StartsWith("-----BEGIN PUBLIC KEY-----"));
  EXPECT_THAT(made->Fingerprint(), ::testing::MatchesRegex("SHA256:[0-9a-f]{16}"));
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto readable = SigningKey::Load(path);
  EXPECT_EQ(readable.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(readable.status().message(), HasSubstr("mode 0644"));
  WriteFile(dir + "/not-a-key.pem", "hello");
  ASSERT_EQ(::chmod((dir + "/not-a-key.pem").c_str(), 0600), 0);
  EXPECT_EQ(SigningKey::Load(dir + "/not-a-key.pem").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SigningKey::Load(dir + "/none.pem").status().code(), absl::StatusCode::kNotFound);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// SignArtifact signs only an intact format-2 artifact, as the runtime
// would load it; signing again with another key replaces the signature.
TEST_F(ArtifactMutation, SignArtifactChecksWhatItSigns) {
  auto key = SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  std::string altered = *unsigned_;
  altered[altered.size() - 10] ^= 1;  // in the weights
  absl::Status st = SignArtifact(&altered, *key);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("section 'weights'"));
  std::string v1 = *unsigned_;
  v1[8] = 1;
  EXPECT_EQ(SignArtifact(&v1, *key).code(), absl::StatusCode::kInvalidArgument);
  std::string resigned = *signed_;
  ASSERT_TRUE(SignArtifact(&resigned, *key).ok());
  deploy::LoadOptions trusted;
  trusted.trust_key = key->PublicKeyPem();
  auto m = deploy::Module::LoadBytes(resigned, trusted);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->signer(), key->Fingerprint());
}

// The tracker signs a worker's artifact from its file, a MiB at a time: the
// same bytes as signing it in memory (Ed25519 is deterministic), written in
// pieces; an altered file is refused before anything is written.
TEST_F(ArtifactMutation, SignArtifactFileStreamsTheSameBytes) {
  auto key = SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  const std::string path = *dir_ + "/to-sign.kiln";
  WriteFile(path, *unsigned_);
  std::string streamed;
  int pieces = 0;
  ASSERT_TRUE(SignArtifactFile(path, *key, [&](std::string_view b) {
                ++pieces;
                streamed += b;
                return absl::OkStatus();
              }).ok());
  std::string in_memory = *unsigned_;
  ASSERT_TRUE(SignArtifact(&in_memory, *key).ok());
  EXPECT_EQ(streamed, in_memory);
  EXPECT_GE(pieces, 2);
  EXPECT_EQ(ReadFile(path), *unsigned_);  // left as it was
  std::string altered = *unsigned_;
  altered[altered.size() / 2] ^= 1;
  WriteFile(path, altered);
  std::string none;
  absl::Status st = SignArtifactFile(path, *key, [&](std::string_view b) {
    none += b;
    return absl::OkStatus();
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(SignArtifactFile(*dir_ + "/absent.kiln", *key,
                             [](std::string_view) { return absl::OkStatus(); })
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::compiler

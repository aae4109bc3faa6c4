// Artifacts that kiln compiles, signed as the tracker signs them, then
// altered: a mutation campaign over every region of real artifacts
// (header, section table, manifest, code, weights, padding; bit flips,
// truncations, extensions, and manifests edited with their digests redone),
// each run by the real kiln-run in a child process. Every mutation must be
// refused with a clean error (exit 2, a status on stderr) or, for bytes
// nothing covers, give exactly the original output: no signal, no wrong
// answer.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/sha256.h"
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
  static Child Run(std::string_view bytes, bool trusted, std::string* output,
                   const std::vector<std::string>& extra = {}) {
    const std::string path = *dir_ + "/m.kiln", out_dir = *dir_ + "/out";
    WriteFile(path, bytes);
    std::error_code ec;
    std::filesystem::remove(out_dir + "/output_0.pb", ec);
    std::vector<std::string> args = {path, "--input", "data=" + *dir_ + "/x.pb", "--output-dir",
                                     out_dir};
    args.insert(args.end(), extra.begin(), extra.end());
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

// A campaign's bookkeeping: each mutated artifact is run (by `run`), and its
// fate is sorted: refused cleanly (exit 2, "kiln-run: " and a status on
// stderr), harmless (exit 0, the reference output byte for byte), or a
// failure (a signal, a wrong answer, any other exit).
class Campaign {
 public:
  using RunFn = std::function<Child(const std::string& bytes, bool trusted, std::string* out)>;
  Campaign(RunFn run, std::string reference, uint64_t seed)
      : run_(std::move(run)), reference_(std::move(reference)), rng_(seed) {}

  size_t Pick(size_t lo, size_t hi) {  // [lo, hi)
    return std::uniform_int_distribution<size_t>(lo, hi - 1)(rng_);
  }

  void Check(const std::string& what, const std::string& bytes, bool trusted) {
    ++total_;
    std::string out;
    Child c = run_(bytes, trusted, &out);
    Tally& t = tally_[what.substr(0, what.find(" @"))];
    ++t.runs;
    const std::string label = StrCat(what, trusted ? " (trust key)" : "");
    if (c.signaled) {
      failures_.push_back(StrCat(label, ": killed by signal ", c.signal));
    } else if (c.exit_code == 0) {
      if (out == reference_) {
        ++t.harmless;
      } else {
        failures_.push_back(StrCat(label, ": exit 0 with a different output"));
      }
    } else if (c.exit_code == 2 && c.err.rfind("kiln-run: ", 0) == 0 &&
               (c.err.find("DATA_LOSS") != std::string::npos ||
                c.err.find("INVALID_ARGUMENT") != std::string::npos ||
                c.err.find("UNAUTHENTICATED") != std::string::npos)) {
      ++t.refused;
    } else {
      failures_.push_back(StrCat(label, ": exit ", c.exit_code, ", stderr: ", c.err));
    }
  }

  // Random mutations of `unsigned_art` (run without a key) and `signed_art`
  // (run with its key), in turn: `flips` bit flips in each of `regions`
  // (sections, "header", "section table", "padding"), `truncations` cuts
  // inside each region but padding, and `extensions` tails: half random
  // bytes (1 byte to 8 KiB), a quarter zeros shorter than the 64-byte
  // alignment (padding a writer could leave: harmless), a quarter zeros of
  // 64 bytes or more.
  void RandomMutations(const std::string& unsigned_art, const std::string& signed_art,
                       const std::vector<std::string>& regions, int flips, int truncations,
                       int extensions) {
    int turn = 0;
    auto next = [&]() -> std::pair<const std::string*, bool> {
      const bool s = (turn++ % 2) == 1;
      return {s ? &signed_art : &unsigned_art, s};
    };
    for (const std::string& region : regions) {
      for (int i = 0; i < flips; ++i) {
        auto [art, trusted] = next();
        size_t at;
        if (region == "padding") {
          const std::vector<size_t> pad = PaddingBytes(*art);
          ASSERT_FALSE(pad.empty());
          at = pad[Pick(0, pad.size())];
        } else {
          const auto range = Regions(*art).at(region);
          at = Pick(range.first, range.second);
        }
        std::string bytes = *art;
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << Pick(0, 8)));
        Check(StrCat("flip ", region, " @", at), bytes, trusted);
      }
    }
    for (const std::string& region : regions) {
      if (region == "padding") continue;
      for (int i = 0; i < truncations; ++i) {
        auto [art, trusted] = next();
        const auto range = Regions(*art).at(region);
        const size_t at = Pick(range.first, range.second);
        Check(StrCat("truncate in ", region, " @", at), art->substr(0, at), trusted);
      }
    }
    for (int i = 0; i < extensions; ++i) {
      auto [art, trusted] = next();
      std::string tail;
      if (i < extensions / 2) {
        tail.resize(Pick(1, 8193));
        for (char& ch : tail) ch = static_cast<char>(Pick(0, 256));
        if (tail.find_first_not_of('\0') == std::string::npos) tail[0] = 1;
        Check(StrCat("extend with random bytes @", tail.size()), *art + tail, trusted);
      } else {
        const bool short_tail = i < extensions * 3 / 4;
        tail.assign(short_tail ? Pick(1, 64) : Pick(64, 4097), '\0');
        Check(
            StrCat(short_tail ? "extend with short zeros" : "extend with zeros", " @", tail.size()),
            *art + tail, trusted);
      }
    }
  }

  // Prints the tally; checks that there are `expected_total` mutations, no
  // failure, and that only the short zero extensions ran.
  void Expect(int expected_total, double seconds) {
    std::string summary;
    int refused = 0, harmless = 0;
    for (const auto& [kind, t] : tally_) {
      summary += StrCat("  ", kind, ": ", t.runs, " runs, ", t.refused, " refused, ", t.harmless,
                        " harmless\n");
      refused += t.refused;
      harmless += t.harmless;
    }
    std::printf("%d mutations in %.1f s: %d refused, %d harmless, %zu failures\n%s", total_,
                seconds, refused, harmless, failures_.size(), summary.c_str());
    EXPECT_EQ(total_, expected_total);
    EXPECT_THAT(failures_, ::testing::IsEmpty());
    EXPECT_EQ(harmless, tally_["extend with short zeros"].runs);
  }

 private:
  struct Tally {
    int runs = 0, refused = 0, harmless = 0;
  };
  RunFn run_;
  std::string reference_;
  std::mt19937_64 rng_;
  std::map<std::string, Tally> tally_;  // by kind and region
  std::vector<std::string> failures_;
  int total_ = 0;
};

// `section`'s bytes replaced by `edited` (moved to the end of the file, its
// table entry pointing there, the old place zeroed) and, when it is the
// manifest, the header's digest redone; otherwise the manifest's record of
// it redone too. The signature block is left as it was.
std::string Redigest(const std::string& art, const std::string& section,
                     const std::string& edited) {
  auto move = [](std::string bytes, const std::string& name, const std::string& data) {
    auto c = deploy::ParseContainer(bytes);
    EXPECT_TRUE(c.ok()) << c.status();
    std::string_view old = c->sections.at(name);
    const size_t old_offset = static_cast<size_t>(old.data() - bytes.data()), old_size = old.size();
    std::fill(bytes.begin() + old_offset, bytes.begin() + old_offset + old_size, '\0');
    bytes.resize((bytes.size() + 63) / 64 * 64, '\0');
    const uint64_t offset = bytes.size();
    bytes += data;
    std::string key(4, '\0');
    key[0] = static_cast<char>(name.size());
    key += name;
    const size_t entry = bytes.find(key, deploy::kArtifactHeaderBytes);
    EXPECT_NE(entry, std::string::npos) << name;
    for (int k = 0; k < 8; ++k) {
      bytes[entry + key.size() + k] = static_cast<char>((offset >> (8 * k)) & 0xff);
      bytes[entry + key.size() + 8 + k] = static_cast<char>((data.size() >> (8 * k)) & 0xff);
    }
    return bytes;
  };
  std::string bytes = art;
  std::string manifest;
  if (section == "manifest") {
    manifest = edited;
  } else {
    bytes = move(bytes, section, edited);
    auto c = deploy::ParseContainer(art);
    manifest = std::string(c->sections.at("manifest"));
    const std::string record = StrCat("section ", section, " sha256 ");
    const size_t at = manifest.find(record);
    EXPECT_NE(at, std::string::npos) << section;
    manifest.replace(at + record.size(), 64, Hex(kiln::Sha256(edited)));
  }
  bytes = move(bytes, "manifest", manifest);
  bytes.replace(16, 32, kiln::Sha256(manifest));
  return bytes;
}

// Whether an edited artifact's digests hold: the edit is then caught by
// something else than a digest (the I/O contract, the signature).
void ExpectDigestsHold(const std::string& bytes) {
  auto c = deploy::ParseContainer(bytes);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(deploy::VerifyManifestDigest(*c).ok());
  auto m = deploy::ParseManifest(c->sections.at("manifest"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(deploy::VerifySectionDigests(*c, *m).ok());
}

TEST_F(ArtifactMutation, FiveHundredMutationsAreRefusedOrHarmless) {
  const auto start = std::chrono::steady_clock::now();
  std::string reference;
  ASSERT_EQ(Run(*unsigned_, false, &reference).exit_code, 0);
  ASSERT_FALSE(reference.empty());
  Campaign campaign([](const std::string& b, bool t, std::string* out) { return Run(b, t, out); },
                    reference, 20261128);
  // 6 regions x 50 flips, 5 x 20 truncations, 80 extensions = 480.
  campaign.RandomMutations(
      *unsigned_, *signed_,
      {"header", "section table", "manifest", "module.so", "weights", "padding"}, 50, 20, 80);
  // Manifests edited and their digest redone (the signature left as it
  // was): a smaller output or input, a smaller workspace, another entry,
  // another weights size, another dtype. Refused by the I/O contract
  // without a key, by the signature with one. 10 x 2 = 20.
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
      std::string manifest(c->sections.at("manifest"));
      const size_t at = manifest.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      manifest.replace(at, from.size(), to);
      const std::string edited = Redigest(art, "manifest", manifest);
      ExpectDigestsHold(edited);
      campaign.Check(StrCat("redigested manifest edit @", to), edited, trusted);
    }
  }
  campaign.Expect(500,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The same on the small CNN compiled for OpenCL (its device code and launch
// plan in place of module.so), run on the first OpenCL device (PoCL on a
// CPU); skipped, visibly, without one. A launch plan edited with its digests
// redone is refused by the signature (the runtime checks a plan's offsets
// against its buffers, but cannot check a kernel against its grid): only
// the trust key stops that edit.
TEST_F(ArtifactMutation, OpenClArtifactMutationsAreRefusedOrHarmless) {
  const auto start = std::chrono::steady_clock::now();
  ImportOptions import;
  import.plan_layouts = false;  // NCHW[x]c is a CPU plan
  auto model = Model::FromOnnxFile(kSmallCnn, import);
  ASSERT_TRUE(model.ok()) << model.status();
  auto target = Target::Parse("opencl");
  ASSERT_TRUE(target.ok()) << target.status();
  auto art = CompileModel(*model, *target, nullptr, {}, nullptr);
  ASSERT_TRUE(art.ok()) << art.status();
  auto key = SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  std::string signed_art = *art;
  ASSERT_TRUE(SignArtifact(&signed_art, *key).ok());
  const std::string key_file = *dir_ + "/opencl-trusted.pem";
  WriteFile(key_file, key->PublicKeyPem());
  auto run = [&](const std::string& bytes, bool trusted, std::string* out) {
    return Run(bytes, false, out,
               trusted ? std::vector<std::string>{"--device", "opencl:0", "--trust-key", key_file}
                       : std::vector<std::string>{"--device", "opencl:0"});
  };
  std::string reference;
  Child first = run(*art, false, &reference);
  if (first.exit_code != 0) {
#ifdef KILN_TEST_EXPECT_OPENCL
    FAIL() << "kiln-run on the OpenCL artifact: " << first.err;
#else
    GTEST_SKIP() << "no OpenCL device: " << first.err;
#endif
  }
  Campaign campaign(run, reference, 7);
  // 7 regions x 10 flips, 6 x 3 truncations, 8 extensions = 96.
  campaign.RandomMutations(
      *art, signed_art,
      {"header", "section table", "manifest", "device.cl", "launch", "weights", "padding"}, 10, 3,
      8);
  // A launch plan and a kernel's source edited, digests redone: 2 x 2.
  auto c = deploy::ParseContainer(signed_art);
  ASSERT_TRUE(c.ok());
  std::string launch(c->sections.at("launch")), source(c->sections.at("device.cl"));
  const size_t call = launch.find("call ");
  ASSERT_NE(call, std::string::npos);
  const size_t grid = launch.find(' ', launch.find(' ', call) + 1);  // after the kernel's name
  launch.insert(grid + 1, "4");  // a larger grid: 8 blocks become 48
  const size_t body = source.find('{');
  ASSERT_NE(body, std::string::npos);
  source.insert(body + 1, " return;");
  for (const auto& [section, edited] : std::vector<std::pair<std::string, std::string>>{
           {"launch", launch}, {"device.cl", source}}) {
    const std::string resigned = Redigest(signed_art, section, edited),
                      unsigned_edit = Redigest(*art, section, edited);
    ExpectDigestsHold(resigned);
    ExpectDigestsHold(unsigned_edit);
    campaign.Check(StrCat("redigested ", section, " edit"), resigned, true);
    // The unsigned artifact, with the same edit, through the trust key too.
    campaign.Check(StrCat("redigested ", section, " edit, unsigned"), unsigned_edit, true);
  }
  campaign.Expect(100,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
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

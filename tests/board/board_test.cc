// kiln-board (board/): the wire protocol's frames and messages, the key's
// challenge and answer, and a runner on loopback measuring real kernels:
// one built by kiln's compiler for this host (as an agent builds for its
// board), and C kernels that crash or hang, which cost their measurement
// only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "board/runner.h"
#include "board/session.h"
#include "board/wire.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::board {
namespace {

constexpr char kKey[] = "a board key of 32 bytes, for tests";

MeasureRequest SomeRequest() {
  MeasureRequest r;
  r.symbol = "kiln_kernel";
  r.object = std::string(
                 "\x7f"
                 "ELF",
                 4) +
             std::string(100, 'x');
  r.inputs = {std::string(16, '\1'), std::string(8, '\2')};
  r.output_bytes = 4;
  r.reference = "abcd";
  r.compare = Compare::kFloat32;
  r.tolerance = 1e-3;
  r.number = 2;
  r.repeat = 5;
  r.flush_cache = 1;
  r.stop_above_s = 0.5;
  return r;
}

TEST(BoardWire, FramesRoundTripAndForeignHeadersAreRefused) {
  const std::string frame = EncodeFrame(MessageType::kDescribe, "");
  ASSERT_EQ(frame.size(), kHeaderBytes);
  auto h = ParseHeader(frame, kDefaultMaxMeasurePayload);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, MessageType::kDescribe);
  EXPECT_EQ(h->length, 0u);

  std::string bad = frame;
  bad[0] = 'X';
  EXPECT_NE(ParseHeader(bad, 1000).status().message().find("no KBRD magic"), std::string::npos);
  bad = frame;
  bad[4] = 9;  // version 9
  EXPECT_NE(ParseHeader(bad, 1000).status().message().find("version 9"), std::string::npos);
  bad = frame;
  bad[6] = 99;  // type 99
  EXPECT_NE(ParseHeader(bad, 1000).status().message().find("unknown message type 99"),
            std::string::npos);
  EXPECT_EQ(ParseHeader(frame.substr(0, 5), 1000).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Lengths are bounded before anything is allocated: control messages by
  // 64 KiB, a measurement by the reader's limit.
  std::string huge = EncodeFrame(MessageType::kHello, std::string(kMaxControlPayload + 1, 'x'));
  EXPECT_EQ(ParseHeader(huge, kDefaultMaxMeasurePayload).status().code(),
            absl::StatusCode::kResourceExhausted);
  std::string measure = EncodeFrame(MessageType::kMeasure, std::string(2000, 'x'));
  EXPECT_TRUE(ParseHeader(measure, 4096).ok());
  EXPECT_EQ(ParseHeader(measure, 1000).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BoardWire, MessagesRoundTrip) {
  const MeasureRequest r = SomeRequest();
  auto back = DecodeMeasureRequest(Encode(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->symbol, r.symbol);
  EXPECT_EQ(back->object, r.object);
  EXPECT_EQ(back->inputs, r.inputs);
  EXPECT_EQ(back->reference, r.reference);
  EXPECT_EQ(back->compare, Compare::kFloat32);
  EXPECT_EQ(back->repeat, 5u);
  EXPECT_EQ(back->flush_cache, 1);
  EXPECT_DOUBLE_EQ(back->stop_above_s, 0.5);

  Measured m;
  m.error = MeasureErrorKind::kWrongResult;
  m.message = "element 3";
  m.costs_s = {1e-3, 2e-3};
  auto mb = DecodeMeasured(Encode(m));
  ASSERT_TRUE(mb.ok()) << mb.status();
  EXPECT_EQ(mb->error, MeasureErrorKind::kWrongResult);
  EXPECT_EQ(mb->costs_s, m.costs_s);

  const Hello hello{std::string(kNonceBytes, 'n'), "kiln-board, protocol 1", "rpi4-rack-2"};
  auto hb = DecodeHello(Encode(hello));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->name, "rpi4-rack-2");
  EXPECT_EQ(hb->runner_version, hello.runner_version);
  EXPECT_FALSE(DecodeHello(Encode(Hello{hello.nonce, "v", std::string(257, 'x')})).ok());

  MeasureModelRequest mm;
  mm.artifacts = {"kiln-artifact 2\n", std::string(100, 'a')};
  mm.repeat = 7;
  mm.threads = 2;
  auto mmb = DecodeMeasureModelRequest(Encode(mm));
  ASSERT_TRUE(mmb.ok()) << mmb.status();
  EXPECT_EQ(mmb->artifacts, mm.artifacts);
  EXPECT_EQ(mmb->repeat, 7u);
  EXPECT_EQ(mmb->threads, 2u);
  EXPECT_FALSE(DecodeMeasureModelRequest(Encode(MeasureModelRequest{})).ok()) << "no variant";
  MeasuredModel md;
  md.variants.resize(2);
  md.variants[0].costs_s = {1e-3, 2e-3};
  md.variants[0].kernel_s = {{"conv2d-abc", 5e-4}, {"dense-def", 1e-5}};
  md.variants[1].error = VariantError::kWrongResult;
  md.variants[1].message = "output 'y' differs";
  auto mdb = DecodeMeasuredModel(Encode(md));
  ASSERT_TRUE(mdb.ok()) << mdb.status();
  ASSERT_EQ(mdb->variants.size(), 2u);
  EXPECT_EQ(mdb->variants[0].costs_s, md.variants[0].costs_s);
  EXPECT_EQ(mdb->variants[0].kernel_s, md.variants[0].kernel_s);
  EXPECT_EQ(mdb->variants[1].error, VariantError::kWrongResult);
  EXPECT_EQ(mdb->variants[1].message, md.variants[1].message);

  Description d;
  d.triple = "aarch64-linux-gnu";
  d.cpu = "Cortex-A76";
  d.features = "fp asimd asimddp";
  d.cpuinfo = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n";
  d.cores = 4;
  d.l2_bytes = 512 << 10;
  d.fma_gflops = 64.5;
  auto db = DecodeDescription(Encode(d));
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(db->features, d.features);
  EXPECT_EQ(db->cpuinfo, d.cpuinfo);
  EXPECT_EQ(db->cores, 4u);
  EXPECT_DOUBLE_EQ(db->fma_gflops, 64.5);
}

// Every truncation of a valid message, a byte more, and random corruption
// decode to an error or a message, never past the payload's end (the
// sanitizer build checks the reads) or into an unbounded allocation.
TEST(BoardWire, TruncatedExtendedAndCorruptedPayloadsAreRefused) {
  const std::string good = Encode(SomeRequest());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeMeasureRequest(good.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeMeasureRequest(good + "x").ok());
  std::mt19937 rng(7);
  int decoded = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string bad = good;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
      bad[rng() % bad.size()] = static_cast<char>(rng());
    }
    auto m = DecodeMeasureRequest(bad);
    if (m.ok()) {
      ++decoded;
      EXPECT_EQ(m->reference.size(), m->output_bytes);
      EXPECT_LE(m->inputs.size(), kMaxInputs);
    }
    (void)DecodeMeasured(bad);
    (void)DecodeDescription(bad);
    (void)DecodeHello(bad);
  }
  EXPECT_LT(decoded, 5000);
}

TEST(BoardWire, TheProofsBindTheKeyAndBothChallenges) {
  const std::string a(kNonceBytes, 'a'), b(kNonceBytes, 'b');
  EXPECT_EQ(HostProof(kKey, a, b).size(), kMacBytes);
  EXPECT_NE(HostProof(kKey, a, b), HostProof("another key of some length", a, b));
  EXPECT_NE(HostProof(kKey, a, b), HostProof(kKey, b, a));
  EXPECT_NE(HostProof(kKey, a, b), BoardProof(kKey, a, b));  // not replayable the other way
}

// A runner on a socket pair: the board's end served on a thread.
class BoardSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fd = ListenOn("127.0.0.1:0", &port_);
    ASSERT_TRUE(fd.ok()) << fd.status();
    listen_fd_ = *fd;
    options_.key = kKey;
    options_.description = DescribeThisBoard();
    options_.max_measure_payload = 64 << 20;
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-board-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (server_.joinable()) server_.join();
    close(listen_fd_);
    std::filesystem::remove_all(dir_);
  }
  // Serves the next connection on a thread; its result in served_.
  void ServeOne() {
    server_ = std::thread([this] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      served_ = ServeConnection(fd, options_);
      close(fd);
    });
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  // A C kernel built with the host's cc, as a shared object's bytes.
  std::string CKernel(const std::string& source) {
    const std::string c = (dir_ / "k.c").string(), so = (dir_ / "k.so").string();
    std::ofstream(c) << source;
    const std::string cmd = "cc -shared -fPIC -O1 -o " + so + " " + c;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(so, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  int listen_fd_ = -1;
  int port_ = 0;
  ServeOptions options_;
  std::thread server_;
  absl::Status served_;
  std::filesystem::path dir_;
};

TEST_F(BoardSessionTest, AWrongKeyIsRefusedAndSaysSo) {
  ServeOne();
  auto s = BoardSession::Open(Address(), "not the board's key, but long");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied) << s.status();
  EXPECT_NE(s.status().message().find("does not hold this board's key"), std::string::npos)
      << s.status();
  server_.join();
  EXPECT_EQ(served_.code(), absl::StatusCode::kPermissionDenied) << served_;
}

TEST_F(BoardSessionTest, AHostThatSendsGarbageIsRefused) {
  ServeOne();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port_));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string garbage = "GET / HTTP/1.1\r\nHost: board\r\n\r\n";
  ASSERT_EQ(send(fd, garbage.data(), garbage.size(), 0), static_cast<ssize_t>(garbage.size()));
  server_.join();
  EXPECT_EQ(served_.code(), absl::StatusCode::kInvalidArgument) << served_;
  EXPECT_NE(served_.message().find("no KBRD magic"), std::string::npos) << served_;
  close(fd);
}

// A kernel kiln's compiler built for this host, measured as a board
// measures: loaded from memory, verified against the reference sent with
// it, timed with the farm's policy; then a wrong reference, a missing
// symbol, and an object that is not one.
TEST_F(BoardSessionTest, AKernelBuiltByKilnIsVerifiedAndTimed) {
  ServeOne();
  auto session = BoardSession::Open(Address(), kKey);
  ASSERT_TRUE(session.ok()) << session.status();
  auto d = (*session)->Describe();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->triple, options_.description.triple);
  EXPECT_GE(d->cores, 1u);

  using namespace compiler;
  const Workload w = test_util::EltwiseReluWorkload();
  const Target host = Target::Host();
  auto config = DefaultConfig(w, host);
  ASSERT_TRUE(config.ok()) << config.status();
  auto func = LowerWorkload(w, *config, host, "kiln_kernel", {});
  ASSERT_TRUE(func.ok()) << func.status();
  auto object = codegen::BuildSharedObjectFromFuncs({*func}, EntryPlan{}, host);
  ASSERT_TRUE(object.ok()) << object.status();
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok());
  KernelBuffers b = MakeKernelBuffers(*sig, 3, 0.f);
  std::vector<uint8_t> want(b.output.size());
  ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());

  MeasureRequest r;
  r.symbol = "kiln_kernel";
  r.object = *object;
  for (const auto& in : b.inputs) r.inputs.emplace_back(in.begin(), in.end());
  r.output_bytes = want.size();
  r.reference.assign(want.begin(), want.end());
  r.compare = Compare::kFloat32;
  r.tolerance = 1e-5;
  r.repeat = 3;
  r.min_repeat_ms = 1;
  r.flush_cache = 1;
  auto m = (*session)->Measure(r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kNone) << m->message;
  ASSERT_EQ(m->costs_s.size(), 3u);
  for (double c : m->costs_s) EXPECT_GT(c, 0);

  MeasureRequest wrong = r;
  wrong.reference[3] ^= 0x40;  // element 0 off by a power of two (or 0 made 2)
  m = (*session)->Measure(wrong);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kWrongResult);
  EXPECT_NE(m->message.find("element 0"), std::string::npos) << m->message;
  EXPECT_TRUE(m->costs_s.empty());

  MeasureRequest missing = r;
  missing.symbol = "no_such_kernel";
  m = (*session)->Measure(missing);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kLoad);
  EXPECT_NE(m->message.find("no symbol 'no_such_kernel'"), std::string::npos) << m->message;

  MeasureRequest junk = r;
  junk.object = "not an ELF file";
  m = (*session)->Measure(junk);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kLoad);
  session->reset();
  server_.join();
  EXPECT_TRUE(served_.ok()) << served_;
}

// A kernel that crashes, and one that never returns, cost their
// measurement (typed errors) and nothing else: the same session measures
// again after both.
TEST_F(BoardSessionTest, ACrashingOrHangingKernelCostsItsMeasurementOnly) {
  ServeOne();
  auto session = BoardSession::Open(Address(), kKey);
  ASSERT_TRUE(session.ok()) << session.status();
  MeasureRequest r;
  r.symbol = "k";
  r.output_bytes = 4;
  r.reference = std::string("\0\0\0\0", 4);
  r.min_repeat_ms = 1;
  r.object = CKernel("int k(void* const* a) { *(volatile int*)0 = 1; return 0; }\n");
  auto m = (*session)->Measure(r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kRuntime);
  EXPECT_NE(m->message.find("crashed (signal 11"), std::string::npos) << m->message;

  r.object = CKernel("int k(void* const* a) { for (;;) { __asm__ volatile(\"\"); } return 0; }\n");
  r.timeout_ms = 300;
  m = (*session)->Measure(r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kTimeout);
  EXPECT_NE(m->message.find("no answer within 300 ms"), std::string::npos) << m->message;

  r.object = CKernel("int k(void* const* a) { float* y = (float*)a[0]; *y = 0.f; return 0; }\n");
  r.timeout_ms = 20000;
  m = (*session)->Measure(r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->error, MeasureErrorKind::kNone) << m->message;
  EXPECT_EQ(m->costs_s.size(), 3u);
  session->reset();
}

// A measurement larger than the board allows is refused by its header,
// before the board reads or allocates it, and the board says why.
TEST_F(BoardSessionTest, AnOversizedRequestIsRefusedByItsHeader) {
  options_.max_measure_payload = 4096;
  ServeOne();
  auto session = BoardSession::Open(Address(), kKey);
  ASSERT_TRUE(session.ok()) << session.status();
  MeasureRequest r = SomeRequest();
  r.object = std::string(10000, 'x');
  auto m = (*session)->Measure(r);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("at most 4096"), std::string::npos) << m.status();
  server_.join();
  EXPECT_EQ(served_.code(), absl::StatusCode::kResourceExhausted) << served_;
}

}  // namespace
}  // namespace kiln::board

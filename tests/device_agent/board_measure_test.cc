// A board agent's measurements (device_agent/board_measure.h): candidates
// built here by compiler::BuildRemote, sent to a real kiln-board process
// (this host's build) on loopback, verified and timed there; the board
// killed and started again; and the sandbox's worker doing the same.
#include "device_agent/board_measure.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/bytes.h"
#include "base/sha256.h"
#include "base/subprocess.h"
#include "board/runner.h"
#include "compiler/kernel.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "device_agent/sandbox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/graph_test_util.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::agent {
namespace {

using ::testing::HasSubstr;

constexpr char kKey[] = "the board key of this test, 32 b";

std::string BoardBinary() { return KILN_BINARY_DIR "/board/kiln-board"; }
std::string AgentBinary() { return KILN_BINARY_DIR "/device_agent/kiln-agent"; }

kiln::v1::Config ConfigOf(const compiler::Config& c) {
  kiln::v1::Config p;
  p.set_canonical(compiler::CanonicalConfig(c));
  return p;
}

kiln::v1::TimingPolicy Timing() {
  kiln::v1::TimingPolicy t;
  t.set_repeat(3);
  t.set_min_repeat_ms(1);
  t.set_timeout_ms(20000);
  t.set_flush_cache(true);
  t.set_threads(1);
  return t;
}

// A kiln-board process on a free loopback port.
class BoardMeasureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(BoardBinary().c_str(), X_OK), 0) << BoardBinary() << " is missing";
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-board-agent-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    key_file_ = (dir_ / "board.key").string();
    std::ofstream(key_file_) << kKey << "\n";
    StartBoard(0);
  }
  void TearDown() override {
    StopBoard();
    std::filesystem::remove_all(dir_);
  }
  // Starts kiln-board on `port` (0: any free one, read from what it says).
  void StartBoard(int port) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ChildOptions o;
    o.descriptors = {{fds[1], 2}};
    auto pid = StartChild(
        {BoardBinary(), "--listen", "127.0.0.1:" + std::to_string(port), "--key-file", key_file_},
        o);
    close(fds[1]);
    ASSERT_TRUE(pid.ok()) << pid.status();
    board_pid_ = *pid;
    std::string said;
    char c;
    while (said.find("listening on port ") == std::string::npos || said.back() != '\n') {
      ASSERT_EQ(read(fds[0], &c, 1), 1) << "kiln-board ended: " << said;
      said += c;
    }
    close(fds[0]);
    port_ = std::stoi(said.substr(said.find("listening on port ") + 18));
  }
  void StopBoard() {
    if (board_pid_ > 0) WaitChild(board_pid_, /*kill=*/true);
    board_pid_ = -1;
  }
  BoardLink Link() const { return {"127.0.0.1:" + std::to_string(port_), kKey}; }

  std::filesystem::path dir_;
  std::string key_file_;
  pid_t board_pid_ = -1;
  int port_ = 0;
};

TEST_F(BoardMeasureTest, TheBoardsDescriptionNamesItsTarget) {
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  auto t = TargetOfBoard(*d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->triple, compiler::Target::Host().triple);
  EXPECT_THAT(BoardHardware(Link().address, *d), HasSubstr("board 127.0.0.1:"));
  EXPECT_EQ(DescribeBoard({Link().address, "a key that is not the board's"}).status().code(),
            absl::StatusCode::kPermissionDenied);
}

// A conv whose default takes its weights packed (NCHWc blocks): packed
// here, run there, verified and timed; a config no template takes fails
// as INVALID_CONFIG without reaching the board.
TEST_F(BoardMeasureTest, BuiltHereVerifiedAndTimedOnTheBoard) {
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  const compiler::Target target = *TargetOfBoard(*d);
  compiler::Workload w = compiler::test_util::Conv2dBiasAddReluWorkload();
  w.ints["C"] = {16};
  w.ints["K"] = {32};
  w.epilogue[0].operand_shape = {1, 32, 1, 1};
  auto variants = compiler::VariantConfigs(w, target);
  ASSERT_TRUE(variants.ok()) << variants.status();
  std::vector<kiln::v1::Config> configs;
  for (const compiler::Config& c : *variants) configs.push_back(ConfigOf(c));
  kiln::v1::Config bad;
  bad.set_canonical("no_such_knob=3");
  configs.push_back(bad);
  std::vector<compiler::RemoteBuild> built = BuildForBoard(w.Canonical(), configs, target);
  ASSERT_EQ(built.size(), configs.size());
  bool some_packed = false;
  BoardMeasurer measurer(Link());
  for (size_t i = 0; i + 1 < built.size(); ++i) {
    ASSERT_EQ(built[i].error, compiler::MeasureError::kNone) << built[i].message;
    // (the board verifies it: a packing wrong here fails there)
    some_packed |= !(*compiler::BuildJit(w, (*variants)[i], target))->packed_inputs().empty();
    kiln::v1::MeasureResult r = measurer.Measure(built[i], Timing());
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE)
        << configs[i].canonical() << ": " << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 3);
    for (double c : r.costs_s()) EXPECT_GT(c, 0);
  }
  EXPECT_TRUE(some_packed) << "no variant takes its weights packed: the test tests less";
  EXPECT_EQ(built.back().error, compiler::MeasureError::kInvalidConfig);
  EXPECT_EQ(measurer.Measure(built.back(), Timing()).error_kind(),
            kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG);

  // A model that fits the board's last level: its weights read back there
  // before each run (kFlushToLastLevel), still verified and timed.
  kiln::v1::TimingPolicy in_l3 = Timing();
  in_l3.set_model_bytes(4 << 20);
  EXPECT_EQ(measurer.Measure(built[0], in_l3).error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE);

  // A reference the kernel does not match is the board's finding.
  compiler::RemoteBuild wrong = built[0];
  wrong.kernel.reference[3] ^= 0x40;  // element 0 off by a power of two (or 0 made 2)
  kiln::v1::MeasureResult r = measurer.Measure(wrong, Timing());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT) << r.error_message();
}

// A quantized conv's uint8 output: compared as integers, the rounding ties
// of its epilogue allowed (RoundingTies), as Measure verifies on the host.
TEST_F(BoardMeasureTest, AQuantizedKernelsOutputIsComparedAsIntegers) {
  compiler::testing::OnnxBuilder b;
  compiler::AddQdqConv(b, {0.02f, 0.03f, 0.01f, 0.05f}, 7);
  b.Init("sy", {}, {0.1f});
  b.InitInts("zy", {}, onnx::TensorProto::UINT8, {128});
  b.Node("QuantizeLinear", {"c", "sy", "zy"}, {"y"});
  b.Output("y");
  auto model = compiler::Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status();
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  const compiler::Target target = *TargetOfBoard(*d);
  int quantized = 0;
  for (const compiler::Task& t : model->Tasks()) {
    auto sig = t.workload.Signature();
    ASSERT_TRUE(sig.ok());
    if (sig->output.dtype != DType::kUInt8 && sig->output.dtype != DType::kInt8) continue;
    ++quantized;
    auto c = compiler::DefaultConfig(t.workload, target);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<compiler::RemoteBuild> built =
        BuildForBoard(t.workload.Canonical(), {ConfigOf(*c)}, target);
    ASSERT_EQ(built[0].error, compiler::MeasureError::kNone) << built[0].message;
    EXPECT_EQ(BoardRequest(built[0].kernel, Timing(), {}).compare,
              sig->output.dtype == DType::kUInt8 ? board::Compare::kUint8 : board::Compare::kInt8);
    BoardMeasurer measurer(Link());
    kiln::v1::MeasureResult r = measurer.Measure(built[0], Timing());
    EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    // Two elements off by two are not ties.
    compiler::RemoteBuild off = built[0];
    off.kernel.reference[0] = static_cast<char>(off.kernel.reference[0] + 2);
    EXPECT_EQ(measurer.Measure(off, Timing()).error_kind(),
              kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT);
  }
  EXPECT_GE(quantized, 1) << "no task with an 8-bit output";
}

// The timing a batch asks for reaches the board as its policy says.
TEST(BoardRequest, CarriesTheBatchsTiming) {
  compiler::RemoteKernel k;
  k.symbol = "kiln_candidate";
  k.args = {"in", "w"};
  k.first_is_activation = true;
  k.reference = std::string(8, '\0');
  k.tolerance = 0.5;
  kiln::v1::TimingPolicy t = Timing();
  t.set_threads(3);
  t.set_stop_above_s(0.25);
  const CacheSizes caches{1 << 20, 32 << 20};  // the board's L2 and L3
  board::MeasureRequest r = BoardRequest(k, t, caches);
  EXPECT_EQ(r.compare, board::Compare::kFloat32);
  EXPECT_DOUBLE_EQ(r.tolerance, 0.5);
  EXPECT_EQ(r.output_bytes, 8u);
  EXPECT_EQ(r.repeat, 3u);
  EXPECT_EQ(r.min_repeat_ms, 1u);
  EXPECT_EQ(r.threads, 3u);
  EXPECT_EQ(r.timeout_ms, 20000u);
  EXPECT_DOUBLE_EQ(r.stop_above_s, 0.25);
  // No model size: the weights from memory, the activation as its
  // producer wrote it; with every input a weight, all evicted.
  EXPECT_EQ(r.flush_cache, board::kFlushKeepFirst);
  k.first_is_activation = false;
  EXPECT_EQ(BoardRequest(k, t, caches).flush_cache, board::kFlushAll);
  // The board's caches decide where the weights start (CacheStateFor): a
  // model within its L2 hot, within 3/4 of its L3 from the last level.
  t.set_model_bytes(512 << 10);
  EXPECT_EQ(BoardRequest(k, t, caches).flush_cache, 0);
  t.set_model_bytes(20 << 20);
  EXPECT_EQ(BoardRequest(k, t, caches).flush_cache, board::kFlushAll | board::kFlushToLastLevel);
  t.set_model_bytes(30 << 20);
  EXPECT_EQ(BoardRequest(k, t, caches).flush_cache, board::kFlushAll);
  t.set_flush_cache(false);
  EXPECT_EQ(BoardRequest(k, t, caches).flush_cache, 0);
}

// The board gone: AGENT_LOST (never the candidate's error), and once it is
// back on its port the same measurer measures again.
TEST_F(BoardMeasureTest, ABoardThatVanishesIsLostNotTheCandidate) {
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  const compiler::Target target = *TargetOfBoard(*d);
  const compiler::Workload w = compiler::test_util::EltwiseReluWorkload();
  std::vector<compiler::RemoteBuild> built =
      BuildForBoard(w.Canonical(), {ConfigOf(*compiler::DefaultConfig(w, target))}, target);
  ASSERT_EQ(built[0].error, compiler::MeasureError::kNone) << built[0].message;
  BoardMeasurer measurer(Link());
  ASSERT_EQ(measurer.Measure(built[0], Timing()).error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE);
  const int port = port_;
  StopBoard();
  kiln::v1::MeasureResult r = measurer.Measure(built[0], Timing());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST) << r.error_message();
  r = measurer.Measure(built[0], Timing());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST) << r.error_message();
  EXPECT_THAT(r.error_message(), HasSubstr("does not answer"));
  StartBoard(port);
  r = measurer.Measure(built[0], Timing());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
}

// A job's whole-model check on a board: the variants built here (through
// the agent's own worker), run end to end on the board, interleaved and
// profiled there; a variant no template takes fails alone.
TEST_F(BoardMeasureTest, AModelsVariantsAreTimedEndToEndOnTheBoard) {
  ASSERT_EQ(access(AgentBinary().c_str(), X_OK), 0) << AgentBinary() << " is missing";
  const std::string model_path = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";
  std::ifstream in(model_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sha = Hex(Sha256(bytes));
  const std::string files = (dir_ / "files").string();
  std::filesystem::create_directories(files);
  std::ofstream(files + "/" + sha, std::ios::binary) << bytes;
  auto model = compiler::Model::FromOnnxFile(model_path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  const compiler::Target target = *TargetOfBoard(*d);

  kiln::v1::MeasureBatch batch;
  batch.set_batch_id("m1");
  batch.mutable_model()->set_model_sha256(sha);
  batch.mutable_target()->set_spec(target.Spec());
  *batch.mutable_timing() = Timing();
  batch.mutable_timing()->set_timeout_ms(120000);
  batch.add_candidates()->set_candidate_id("defaults");
  kiln::v1::Candidate* named = batch.add_candidates();
  named->set_candidate_id("named");
  for (const compiler::Task& t : model->Tasks()) {
    kiln::v1::TaskConfig* tc = named->add_task_configs();
    tc->set_workload_key(t.workload.Key());
    *tc->mutable_config() = ConfigOf(*compiler::DefaultConfig(t.workload, target));
  }
  kiln::v1::Candidate* bad = batch.add_candidates();
  bad->set_candidate_id("bad");
  kiln::v1::TaskConfig* tc = bad->add_task_configs();
  tc->set_workload_key(model->Tasks()[0].workload.Key());
  tc->mutable_config()->set_canonical("no_such_knob=3");

  Sandbox sandbox(AgentBinary(), 0, files,
                  {"--board", Link().address, "--board-key-file", key_file_});
  std::vector<kiln::v1::MeasureResult> results = sandbox.MeasureModel(batch);
  ASSERT_EQ(results.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const kiln::v1::MeasureResult& r = results[static_cast<size_t>(i)];
    EXPECT_EQ(r.candidate_id(), batch.candidates(i).candidate_id());
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 3);
    EXPECT_EQ(r.kernel_costs_size(), static_cast<int>(model->Tasks().size()));
    for (const kiln::v1::KernelCost& k : r.kernel_costs()) EXPECT_GT(k.cost_s(), 0);
  }
  EXPECT_NE(results[2].error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE);
  EXPECT_EQ(results[2].costs_s_size(), 0);

  // The board gone: every variant AGENT_LOST (the batch goes back).
  StopBoard();
  results = sandbox.MeasureModel(batch);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].error_kind(), kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST)
      << results[0].error_message();
}

// A board that misbehaves once it is trusted: it holds the key, answers
// describe, and then answers a measurement with `answer` (raw bytes after
// the frame's header ... or nothing at all). Serves connections on a
// thread until `stop`.
class FakeBoard {
 public:
  enum class Answer { kGarbage, kOversized, kSilent, kHangUp };
  explicit FakeBoard(Answer answer) : answer_(answer) {
    auto fd = board::ListenOn("127.0.0.1:0", &port_);
    EXPECT_TRUE(fd.ok()) << fd.status();
    fd_ = *fd;
    thread_ = std::thread([this] {
      while (true) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        Serve(c);
        close(c);
      }
    });
  }
  ~FakeBoard() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  BoardLink Link() const { return {"127.0.0.1:" + std::to_string(port_), kKey}; }
  int measurements() const { return measurements_; }

 private:
  void Serve(int c) {
    const std::string nonce(board::kNonceBytes, 'b');
    if (!board::WriteFrame(c, board::MessageType::kHello,
                           board::Encode(board::Hello{nonce, "fake", "fake"}))
             .ok()) {
      return;
    }
    auto f = board::ReadFrame(c, 0, 5000);
    if (!f.ok()) return;
    auto auth = board::DecodeAuth(f->payload);
    if (!auth.ok()) return;
    (void)board::WriteFrame(
        c, board::MessageType::kAuthOk,
        board::Encode(board::AuthOk{board::BoardProof(kKey, nonce, auth->nonce)}));
    while (true) {
      f = board::ReadFrame(c, 64 << 20, 30000);
      if (!f.ok()) return;
      if (f->type == board::MessageType::kDescribe) {
        (void)board::WriteFrame(c, board::MessageType::kDescription,
                                board::Encode(board::DescribeThisBoard()));
        continue;
      }
      ++measurements_;
      std::string header = board::EncodeFrame(board::MessageType::kMeasured, "");
      switch (answer_) {
        case Answer::kGarbage:
          (void)send(c, "HTTP/1.1 200 OK\r\n\r\n", 19, MSG_NOSIGNAL);
          break;
        case Answer::kOversized:  // a header that promises 1 GiB
          header[8] = 0;
          header[9] = 0;
          header[10] = 0;
          header[11] = 0x40;
          (void)send(c, header.data(), header.size(), MSG_NOSIGNAL);
          break;
        case Answer::kSilent:
          std::this_thread::sleep_for(std::chrono::seconds(12));
          break;
        case Answer::kHangUp:
          return;
      }
    }
  }
  Answer answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> measurements_{0};
  std::thread thread_;
};

// Garbage, a frame over the protocol's bound, silence past the request's
// limit, a hang-up: each costs the board's session (AGENT_LOST: the batch
// goes back to the queue), never a record against the candidate, and the
// next measurement opens a new session.
TEST(BoardMisbehaving, EveryFaultOfTheBoardIsAgentLostNotTheCandidates) {
  const compiler::Workload w = compiler::test_util::EltwiseReluWorkload();
  const compiler::Target host = compiler::Target::Host();
  std::vector<compiler::RemoteBuild> built =
      BuildForBoard(w.Canonical(), {ConfigOf(*compiler::DefaultConfig(w, host))}, host);
  ASSERT_EQ(built[0].error, compiler::MeasureError::kNone) << built[0].message;
  kiln::v1::TimingPolicy timing = Timing();
  timing.set_timeout_ms(500);  // silent past 500 ms and the answer's margin (10 s)
  for (auto [answer, says] : {std::pair{FakeBoard::Answer::kGarbage, "no KBRD magic"},
                              std::pair{FakeBoard::Answer::kOversized, "RESOURCE_EXHAUSTED"},
                              std::pair{FakeBoard::Answer::kSilent, "DEADLINE_EXCEEDED"},
                              std::pair{FakeBoard::Answer::kHangUp, "UNAVAILABLE"}}) {
    FakeBoard fake(answer);
    BoardMeasurer measurer(fake.Link());
    for (int attempt = 1; attempt <= 2; ++attempt) {
      kiln::v1::MeasureResult r = measurer.Measure(built[0], timing);
      EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST) << says;
      EXPECT_THAT(r.error_message(), HasSubstr(says)) << r.error_message();
      EXPECT_EQ(fake.measurements(), attempt) << says << ": a new session each time";
      if (answer == FakeBoard::Answer::kSilent) break;  // 10 s each
    }
  }
}

// The agent's own worker process (kiln-agent --measure-worker ... --board):
// a batch's window built together, each candidate timed on the board.
TEST_F(BoardMeasureTest, TheSandboxsWorkerMeasuresOnTheBoard) {
  ASSERT_EQ(access(AgentBinary().c_str(), X_OK), 0) << AgentBinary() << " is missing";
  auto d = DescribeBoard(Link());
  ASSERT_TRUE(d.ok()) << d.status();
  const compiler::Target target = *TargetOfBoard(*d);
  const compiler::Workload w = compiler::test_util::DenseReluWorkload();
  kiln::v1::MeasureBatch batch;
  batch.set_batch_id("b1");
  batch.mutable_workload()->set_canonical(w.Canonical());
  batch.mutable_workload()->set_key(w.Key());
  batch.mutable_target()->set_spec(target.Spec());
  *batch.mutable_timing() = Timing();
  auto variants = compiler::VariantConfigs(w, target);
  ASSERT_TRUE(variants.ok());
  for (int i = 0; i < 3; ++i) {
    kiln::v1::Candidate* c = batch.add_candidates();
    c->set_candidate_id("c" + std::to_string(i));
    *c->mutable_config() = ConfigOf((*variants)[static_cast<size_t>(i) % variants->size()]);
  }
  Sandbox sandbox(AgentBinary(), 0, (dir_ / "files").string(),
                  {"--board", Link().address, "--board-key-file", key_file_});
  for (int i = 0; i < batch.candidates_size(); ++i) {
    kiln::v1::MeasureResult r = sandbox.Measure(batch, i);
    EXPECT_EQ(r.candidate_id(), batch.candidates(i).candidate_id());
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 3);
  }
  StopBoard();
  EXPECT_EQ(sandbox.Measure(batch, 0).error_kind(), kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST);
}

}  // namespace
}  // namespace kiln::agent

// The sandbox: a real kiln-agent worker process per Sandbox.
#include "device_agent/sandbox.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::agent {
namespace {

using ::testing::HasSubstr;

// The worker binary: the build tree's kiln-agent-faults, whose worker obeys
// the fault tests' variables (tests/faults/agent_faults_main.cc), or
// KILN_AGENT_BINARY.
std::string AgentBinary() {
  const char* env = std::getenv("KILN_AGENT_BINARY");
  return env != nullptr ? env : KILN_BINARY_DIR "/device_agent/kiln-agent-faults";
}

TEST(Frames, RoundTripAndEof) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_TRUE(WriteFrame(fds[1], "hello").ok());
  ASSERT_TRUE(WriteFrame(fds[1], "").ok());
  ASSERT_EQ(write(fds[1], "\x05\x00", 2), 2);  // a header cut short
  close(fds[1]);
  std::string got;
  ASSERT_TRUE(ReadFrame(fds[0], &got).ok());
  EXPECT_EQ(got, "hello");
  ASSERT_TRUE(ReadFrame(fds[0], &got).ok());
  EXPECT_EQ(got, "");
  EXPECT_EQ(ReadFrame(fds[0], &got).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadFrame(fds[0], &got).code(), absl::StatusCode::kNotFound);
  close(fds[0]);
}

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(AgentBinary().c_str(), X_OK), 0)
        << AgentBinary() << " is missing: build it first (scripts/build kiln-agent)";
  }
};

// A batch of `w`'s default config under the candidate ids `ids`.
kiln::v1::MeasureBatch BatchOf(const compiler::Workload& w, const std::vector<std::string>& ids,
                               int timeout_ms) {
  absl::StatusOr<compiler::Config> c = compiler::DefaultConfig(w, compiler::Target::Host());
  EXPECT_TRUE(c.ok()) << c.status();
  kiln::v1::MeasureBatch batch;
  batch.set_batch_id("b1");
  batch.mutable_workload()->set_canonical(w.Canonical());
  batch.mutable_workload()->set_key(w.Key());
  batch.mutable_timing()->set_repeat(2);
  batch.mutable_timing()->set_min_repeat_ms(1);
  batch.mutable_timing()->set_timeout_ms(timeout_ms);
  for (const std::string& id : ids) {
    kiln::v1::Candidate* cand = batch.add_candidates();
    cand->set_candidate_id(id);
    if (c.ok()) cand->mutable_config()->set_canonical(compiler::CanonicalConfig(*c));
  }
  return batch;
}

kiln::v1::MeasureBatch ReluBatch(const std::vector<std::string>& ids, int timeout_ms = 0,
                                 std::vector<int64_t> shape = {1, 4, 8, 8}) {
  compiler::Workload w;
  w.op = compiler::Op::kEltwise;
  w.ints["shape"] = shape;
  w.ints["in_shape"] = shape;
  w.epilogue.push_back({compiler::EpilogueKind::kRelu, {}});
  return BatchOf(w, ids, timeout_ms);
}

TEST_F(Sandbox, CrashingWorkerBecomesRuntimeErrorAndWorkContinues) {
  setenv("KILN_TEST_CRASH_WORKER", "c-crash", 1);
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureBatch batch = ReluBatch({"c-ok1", "c-crash", "c-ok2"});
  kiln::v1::MeasureResult r0 = sandbox.Measure(batch, 0);
  EXPECT_EQ(r0.candidate_id(), "c-ok1");
  EXPECT_EQ(r0.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r0.error_message();
  EXPECT_EQ(r0.costs_s_size(), 2);
  pid_t first = sandbox.worker_pid();
  EXPECT_GT(first, 0);

  kiln::v1::MeasureResult r1 = sandbox.Measure(batch, 1);
  EXPECT_EQ(r1.candidate_id(), "c-crash");
  EXPECT_EQ(r1.error_kind(), kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
  EXPECT_THAT(r1.error_message(), HasSubstr("SIGABRT"));
  EXPECT_EQ(r1.costs_s_size(), 0);

  kiln::v1::MeasureResult r2 = sandbox.Measure(batch, 2);
  EXPECT_EQ(r2.candidate_id(), "c-ok2");
  EXPECT_EQ(r2.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r2.error_message();
  EXPECT_NE(sandbox.worker_pid(), first);  // a fresh worker
  unsetenv("KILN_TEST_CRASH_WORKER");
}

// The released kiln-agent's worker has no fault hooks: the variable that
// crashes kiln-agent-faults' worker changes nothing.
TEST_F(Sandbox, TheReleasedAgentIgnoresTheFaultHooks) {
  const std::string released = KILN_BINARY_DIR "/device_agent/kiln-agent";
  ASSERT_EQ(access(released.c_str(), X_OK), 0) << released << " is missing";
  setenv("KILN_TEST_CRASH_WORKER", "c-crash", 1);
  setenv("KILN_TEST_LIE_COSTS", "nan", 1);
  kiln::agent::Sandbox sandbox(released);
  kiln::v1::MeasureResult r = sandbox.Measure(ReluBatch({"c-crash"}), 0);
  unsetenv("KILN_TEST_CRASH_WORKER");
  unsetenv("KILN_TEST_LIE_COSTS");
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  ASSERT_EQ(r.costs_s_size(), 2);
  EXPECT_GT(r.costs_s(0), 0);  // not NaN
}

// No fault of the fault tests is in the released programs, not even as a
// name they could read (before, their sources read every KILN_TEST_*
// variable and linked a stand-in answering none); the twins carry them.
TEST(ReleasedPrograms, CarryNoFaultHooks) {
  auto mentions_faults = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path << " is missing";
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return bytes.find("KILN_TEST_") != std::string::npos;
  };
  for (const char* released : {"/device_agent/kiln-agent", "/tracker/kiln-tracker"}) {
    EXPECT_FALSE(mentions_faults(KILN_BINARY_DIR + std::string(released))) << released;
  }
  for (const char* twin : {"/device_agent/kiln-agent-faults", "/tracker/kiln-tracker-faults"}) {
    EXPECT_TRUE(mentions_faults(KILN_BINARY_DIR + std::string(twin))) << twin;
  }
}

// A batch's candidates are built a window at a time by one worker, and each
// is still measured on its own.
TEST_F(Sandbox, CandidatesBuiltAheadAreEachMeasured) {
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureBatch batch = ReluBatch({"c0", "c1", "c2", "c3", "c4", "c5"});
  pid_t worker = 0;
  for (int i = 0; i < batch.candidates_size(); ++i) {
    kiln::v1::MeasureResult r = sandbox.Measure(batch, i);
    EXPECT_EQ(r.candidate_id(), batch.candidates(i).candidate_id());
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 2);
    EXPECT_GT(r.build_s(), 0) << "the build time of a kernel built ahead is its own";
    if (i == 0) worker = sandbox.worker_pid();
    EXPECT_EQ(sandbox.worker_pid(), worker);
  }
}

// A worker that crashes while building the candidates after the one it
// measures does not blame that one: it is measured again alone, and the
// crash lands on the candidate that causes it.
TEST_F(Sandbox, ACrashBuildingAheadIsTheCrashingCandidatesOwn) {
  setenv("KILN_TEST_CRASH_BUILD", "c-crash", 1);
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureBatch batch = ReluBatch({"c-ok1", "c-crash", "c-ok2"});
  kiln::v1::MeasureResult r0 = sandbox.Measure(batch, 0);
  EXPECT_EQ(r0.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r0.error_message();
  EXPECT_EQ(r0.costs_s_size(), 2);
  kiln::v1::MeasureResult r1 = sandbox.Measure(batch, 1);
  EXPECT_EQ(r1.candidate_id(), "c-crash");
  EXPECT_EQ(r1.error_kind(), kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
  EXPECT_THAT(r1.error_message(), HasSubstr("SIGABRT"));
  kiln::v1::MeasureResult r2 = sandbox.Measure(batch, 2);
  EXPECT_EQ(r2.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r2.error_message();
  unsetenv("KILN_TEST_CRASH_BUILD");
}

TEST_F(Sandbox, HangingWorkerTimesOut) {
  setenv("KILN_TEST_HANG_WORKER", "c-hang", 1);
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureBatch batch = ReluBatch({"c-hang", "c-ok"}, /*timeout_ms=*/1500);
  kiln::v1::MeasureResult r0 = sandbox.Measure(batch, 0);
  EXPECT_EQ(r0.error_kind(), kiln::v1::MEASURE_ERROR_KIND_TIMEOUT);
  EXPECT_THAT(r0.error_message(), HasSubstr("1500 ms"));
  kiln::v1::MeasureResult r1 = sandbox.Measure(batch, 1);
  EXPECT_EQ(r1.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r1.error_message();
  unsetenv("KILN_TEST_HANG_WORKER");
}

TEST_F(Sandbox, InvalidConfigThroughTheWorker) {
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureBatch batch = ReluBatch({"c-bad"});
  batch.mutable_candidates(0)->mutable_config()->set_canonical("");
  batch.mutable_candidates(0)->mutable_config()->mutable_knobs()->insert({"no_such_knob", 1});
  kiln::v1::MeasureResult r = sandbox.Measure(batch, 0);
  EXPECT_EQ(r.candidate_id(), "c-bad");
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG);
}

// Issue 39, finding 6: under the worker's address-space limit (kiln-agent
// --worker-memory), a candidate whose tensors do not fit is a RUNTIME error
// record naming the limit, not an out-of-memory kill of the board; the
// worker goes on measuring.
TEST_F(Sandbox, AnOversizedTensorIsAnErrorRecordUnderTheMemoryLimit) {
  kiln::agent::Sandbox sandbox(AgentBinary(), int64_t{2} << 30);
  // 2^30 float32 elements in, as many out: 8 GiB.
  kiln::v1::MeasureBatch big = ReluBatch({"c-big"}, 0, {1, 1 << 14, 1 << 8, 1 << 8});
  kiln::v1::MeasureResult r = sandbox.Measure(big, 0);
  EXPECT_EQ(r.candidate_id(), "c-big");
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_RUNTIME) << r.error_message();
  EXPECT_THAT(r.error_message(), HasSubstr("out of memory"));
  EXPECT_THAT(r.error_message(), HasSubstr("2048 MiB (kiln-agent --worker-memory)"));
  const pid_t worker = sandbox.worker_pid();
  EXPECT_GT(worker, 0);
  kiln::v1::MeasureResult ok = sandbox.Measure(ReluBatch({"c-ok"}), 0);
  EXPECT_EQ(ok.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << ok.error_message();
  EXPECT_EQ(sandbox.worker_pid(), worker);  // the same worker: it survived
}

// A large MatMul is verified against the reference inside the farm's
// default per-candidate limit (20 s): on the first GPU run, MatMul 4096^3
// timed out in verification, candidate after candidate, since each timeout
// restarts the worker and its cached reference with it.
TEST_F(Sandbox, ALargeMatMulIsVerifiedWithinTheFarmsTimeLimit) {
  compiler::Workload w;
  w.op = compiler::Op::kDense;
  const int64_t n = 2048;
  w.ints = {{"M", {n}},    {"N", {n}},     {"K", {n}},       {"transA", {0}}, {"transB", {0}},
            {"bias", {0}}, {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}};
  kiln::v1::MeasureBatch batch = BatchOf(w, {"c0"}, 20000);
  batch.mutable_timing()->set_repeat(1);
  kiln::agent::Sandbox sandbox(AgentBinary());
  kiln::v1::MeasureResult r = sandbox.Measure(batch, 0);
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
}

TEST(SandboxNoWorker, MissingWorkerBinaryIsARuntimeError) {
  kiln::agent::Sandbox sandbox("/nonexistent/kiln-agent");
  kiln::v1::MeasureResult r = sandbox.Measure(ReluBatch({"c"}), 0);
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
  EXPECT_THAT(r.error_message(), HasSubstr("127"));
}

}  // namespace
}  // namespace kiln::agent

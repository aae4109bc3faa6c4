// The agent session against a fake tracker on port 0, with a fake measurer.
#include "device_agent/session.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kiln/v1/agent.grpc.pb.h"

namespace kiln::agent {
namespace {

using kiln::v1::AgentMessage;
using kiln::v1::TrackerMessage;

// Welcomes agents, sends one batch per session, records what comes back.
class FakeTracker final : public kiln::v1::AgentSession::Service {
 public:
  bool reject = false;
  bool hang_up_after_welcome = false;

  grpc::Status Session(grpc::ServerContext*,
                       grpc::ServerReaderWriter<TrackerMessage, AgentMessage>* stream) override {
    AgentMessage in;
    if (!stream->Read(&in) || !in.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "expected Hello");
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      hellos.push_back(in.hello());
      cv.notify_all();
    }
    if (reject) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad token");
    TrackerMessage out;
    out.mutable_welcome()->set_session_id("s1");
    out.mutable_welcome()->set_heartbeat_interval_ms(20);
    stream->Write(out);
    if (hang_up_after_welcome) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");

    // A batch the tracker cancels before sending, then a real one.
    TrackerMessage batch;
    kiln::v1::MeasureBatch* b = batch.mutable_measure_batch();
    b->set_batch_id("batch-1");
    b->mutable_workload()->set_key("eltwise-0");
    b->add_candidates()->set_candidate_id("c1");
    b->add_candidates()->set_candidate_id("c2");
    stream->Write(batch);
    while (stream->Read(&in)) {
      std::lock_guard<std::mutex> lock(mu);
      if (in.has_heartbeat()) ++heartbeats;
      if (in.has_batch_result()) results.push_back(in.batch_result());
      cv.notify_all();
    }
    return grpc::Status::OK;
  }

  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), pred);
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<kiln::v1::Hello> hellos;
  std::vector<kiln::v1::BatchResult> results;
  int heartbeats = 0;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&tracker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  AgentOptions Options() {
    AgentOptions o;
    o.tracker = "127.0.0.1:" + std::to_string(port_);
    o.device_key = "test-cpu";
    o.agent_id = "agent-7";
    o.token = "secret";
    o.target_spec = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic";
    o.compiler_version = "0.1.0";
    o.initial_backoff = std::chrono::milliseconds(10);
    return o;
  }

  static kiln::v1::MeasureResult FakeMeasure(const kiln::v1::MeasureBatch&, int index) {
    kiln::v1::MeasureResult r;
    r.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_NONE);
    r.add_costs_s(0.001 * (index + 1));
    return r;
  }

  FakeTracker tracker_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(SessionTest, HelloBatchResultAndHeartbeats) {
  AgentSession session(Options(), FakeMeasure);
  std::thread runner([&] { EXPECT_TRUE(session.Run().ok()); });
  ASSERT_TRUE(
      tracker_.WaitFor([&] { return !tracker_.results.empty() && tracker_.heartbeats >= 2; }));
  session.Stop();
  runner.join();

  std::lock_guard<std::mutex> lock(tracker_.mu);
  ASSERT_GE(tracker_.hellos.size(), 1u);
  const kiln::v1::Hello& h = tracker_.hellos[0];
  EXPECT_EQ(h.agent_id(), "agent-7");
  EXPECT_EQ(h.device_key(), "test-cpu");
  EXPECT_EQ(h.token(), "secret");
  EXPECT_EQ(h.target().spec(), "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic");
  EXPECT_EQ(h.compiler_version(), "0.1.0");

  const kiln::v1::BatchResult& r = tracker_.results[0];
  EXPECT_EQ(r.batch_id(), "batch-1");
  ASSERT_EQ(r.results_size(), 2);
  EXPECT_EQ(r.results(0).candidate_id(), "c1");
  EXPECT_EQ(r.results(1).candidate_id(), "c2");
  EXPECT_EQ(r.results(0).agent_id(), "agent-7");
  EXPECT_DOUBLE_EQ(r.results(1).costs_s(0), 0.002);
  EXPECT_EQ(session.batches_done(), 1);
}

TEST_F(SessionTest, RejectedHelloEndsRun) {
  tracker_.reject = true;
  AgentSession session(Options(), FakeMeasure);
  absl::Status s = session.Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "bad token");
  EXPECT_EQ(session.sessions_welcomed(), 0);
}

TEST_F(SessionTest, ReconnectsAfterTheStreamBreaks) {
  tracker_.hang_up_after_welcome = true;
  AgentSession session(Options(), FakeMeasure);
  std::thread runner([&] { EXPECT_TRUE(session.Run().ok()); });
  ASSERT_TRUE(tracker_.WaitFor([&] { return tracker_.hellos.size() >= 3; }));
  session.Stop();
  runner.join();
  EXPECT_GE(session.sessions_welcomed(), 2);  // the third Hello follows two Welcomes
}

TEST(Session, UnreachableTrackerRetriesUntilStopped) {
  AgentOptions o;
  o.tracker = "127.0.0.1:1";
  o.device_key = "k";
  o.agent_id = "a";
  o.initial_backoff = std::chrono::milliseconds(10);
  AgentSession session(
      o, [](const kiln::v1::MeasureBatch&, int) { return kiln::v1::MeasureResult(); });
  std::thread runner([&] { EXPECT_TRUE(session.Run().ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  session.Stop();
  runner.join();
  EXPECT_EQ(session.sessions_welcomed(), 0);
  // Retried: 10, 20, 40, 80 ms of backoff fit in 300 ms.
  EXPECT_GE(session.sessions_tried(), 3);
}

}  // namespace
}  // namespace kiln::agent

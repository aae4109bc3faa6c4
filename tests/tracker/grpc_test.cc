// The tracker over gRPC on port 0, with an in-process fake agent that speaks
// AgentSession and reports made-up costs.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/str.h"
#include "compiler/artifact_signing.h"
#include "deploy/runtime.h"
#include "kiln/v1/agent.grpc.pb.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "storage/farm_store.h"
#include "tests/tracker/test_models.h"
#include "tracker/server.h"

namespace kiln::tracker {
namespace {

namespace fs = std::filesystem;
namespace pb = ::kiln::v1;
constexpr const char* kTarget = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic";

class FakeAgent {
 public:
  FakeAgent(std::shared_ptr<grpc::Channel> channel, std::string id, std::string key)
      : stub_(pb::AgentSession::NewStub(channel)), id_(std::move(id)), key_(std::move(key)) {}
  ~FakeAgent() { Stop(); }

  // Sends Hello and returns the first reply (Welcome) or the stream's status.
  grpc::Status Connect(const std::string& version = KILN_VERSION, const std::string& token = "") {
    stream_ = stub_->Session(&ctx_);
    pb::AgentMessage hello;
    hello.mutable_hello()->set_agent_id(id_);
    hello.mutable_hello()->set_device_key(key_);
    hello.mutable_hello()->mutable_target()->set_spec(kTarget);
    hello.mutable_hello()->set_hardware("fake board");
    hello.mutable_hello()->set_compiler_version(version);
    hello.mutable_hello()->set_token(token);
    hello.mutable_hello()->set_max_batch(max_batch_);
    stream_->Write(hello);
    pb::TrackerMessage reply;
    if (!stream_->Read(&reply) || !reply.has_welcome()) {
      stopped_ = true;
      return stream_->Finish();
    }
    welcome_ = reply.welcome();
    return grpc::Status::OK;
  }

  // Answers every batch with made-up costs until the stream ends.
  void Serve() {
    thread_ = std::thread([this] {
      pb::TrackerMessage msg;
      while (stream_->Read(&msg)) {
        if (msg.has_file_part()) file_bytes_ += static_cast<int64_t>(msg.file_part().data().size());
        if (!msg.has_measure_batch()) continue;
        const auto& b = msg.measure_batch();
        // A whole model's variants are one batch whatever max_batch says.
        if (b.has_model()) {
          ++model_batches_;
        } else {
          largest_batch_ = std::max(largest_batch_.load(), b.candidates_size());
        }
        pb::AgentMessage out;
        auto* r = out.mutable_batch_result();
        r->set_batch_id(b.batch_id());
        for (const auto& c : b.candidates()) {
          auto* m = r->add_results();
          m->set_candidate_id(c.candidate_id());
          m->set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
          double cost = 1e-3 * static_cast<double>(1 + c.config().canonical().size() % 7);
          m->add_costs_s(cost);
          m->add_costs_s(cost);
          m->set_agent_id(id_);
        }
        batches_++;
        if (!stream_->Write(out)) break;
      }
    });
  }

  void Stop() {
    if (stream_ && !stopped_) {
      stopped_ = true;
      ctx_.TryCancel();
      if (thread_.joinable()) thread_.join();
      stream_->Finish();
    }
  }

  pb::Welcome welcome_;
  std::atomic<int> batches_{0};
  std::atomic<int> largest_batch_{0};
  std::atomic<int> model_batches_{0};
  std::atomic<int64_t> file_bytes_{0};
  int max_batch_ = 0;  // what the Hello says (0: no limit)

 private:
  std::unique_ptr<pb::AgentSession::Stub> stub_;
  std::string id_, key_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::TrackerMessage>> stream_;
  std::thread thread_;
  bool stopped_ = false;
};

class TrackerGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-grpc-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    TrackerOptions opts;
    opts.listen = "127.0.0.1:0";
    opts.db_path = (dir_ / "kiln.db").string();
    opts.artifacts_dir = (dir_ / "artifacts").string();
    opts.token = token_;
    if (heartbeat_ms_ > 0) opts.heartbeat_interval_ms = heartbeat_ms_;
    if (max_model_bytes_ > 0) opts.jobs.max_model_bytes = max_model_bytes_;
    auto key = compiler::SigningKey::Generate();
    ASSERT_TRUE(key.ok()) << key.status();
    signing_key_ = std::make_shared<const compiler::SigningKey>(*std::move(key));
    opts.jobs.signing_key = signing_key_;
    server_ = std::make_unique<TrackerServer>(opts);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    ASSERT_GT(*port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                                   grpc::InsecureChannelCredentials());
    tracker_ = pb::Tracker::NewStub(channel_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // Streams `bytes` in chunks of `chunk` bytes (UploadModel); the last chunk
  // carries `sha` (empty: the right one).
  grpc::Status Upload(const std::string& bytes, size_t chunk, pb::UploadModelResponse* resp,
                      std::string sha = "", int64_t total = -1) {
    grpc::ClientContext ctx;
    auto writer = tracker_->UploadModel(&ctx, resp);
    size_t off = 0;
    do {
      pb::ModelChunk c;
      size_t n = std::min(chunk, bytes.size() - off);
      c.set_data(bytes.substr(off, n));
      c.set_offset(static_cast<int64_t>(off));
      c.set_total_size(total >= 0 ? total : static_cast<int64_t>(bytes.size()));
      off += n;
      if (off == bytes.size()) c.set_sha256(sha.empty() ? kiln::Sha256Hex(bytes) : sha);
      if (!writer->Write(c)) break;
    } while (off < bytes.size());
    writer->WritesDone();
    return writer->Finish();
  }
  std::string UploadOk(const std::string& bytes) {
    pb::UploadModelResponse resp;
    grpc::Status st = Upload(bytes, 1 << 20, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.sha256();
  }
  // Submits the conv+relu model for the fake agents' key (no target: the
  // agent's); the job's id, or "" after a failed expectation.
  pb::SubmitJobResponse SubmitConvRelu(int trials) {
    pb::SubmitJobRequest req;
    req.set_model_sha256(UploadOk(testing::ConvReluModel()));
    req.set_model_name("conv_relu");
    req.set_device_key("fake");
    req.set_trials(trials);
    pb::SubmitJobResponse submitted;
    grpc::ClientContext ctx;
    grpc::Status st = tracker_->SubmitJob(&ctx, req, &submitted);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return submitted;
  }
  // Watches a job to its end (2 minutes at most); its last state, and how
  // many events came.
  // The job's records, through QueryRecords.
  pb::QueryRecordsResponse RecordsOf(const std::string& job_id) {
    grpc::ClientContext ctx;
    pb::QueryRecordsRequest q;
    q.set_job_id(job_id);
    pb::QueryRecordsResponse records;
    grpc::Status st = tracker_->QueryRecords(&ctx, q, &records);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return records;
  }

  pb::Job WatchToEnd(const std::string& job_id, int* events = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    pb::WatchJobRequest w;
    w.set_job_id(job_id);
    auto reader = tracker_->WatchJob(&ctx, w);
    pb::Job last;
    pb::JobEvent ev;
    while (reader->Read(&ev)) {
      last = ev.job();
      if (events != nullptr) ++*events;
    }
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return last;
  }
  size_t StoredFiles() {
    size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "artifacts")) {
      files += e.is_regular_file();
    }
    return files;
  }

  std::string token_;
  int32_t heartbeat_ms_ = 0;     // 0: the tracker's default
  int64_t max_model_bytes_ = 0;  // 0: the tracker's default
  fs::path dir_;
  std::shared_ptr<const compiler::SigningKey> signing_key_;
  std::unique_ptr<TrackerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Tracker::Stub> tracker_;
};

TEST_F(TrackerGrpcTest, UnknownJobIsNotFound) {
  grpc::ClientContext ctx;
  pb::GetJobRequest req;
  req.set_job_id("job-does-not-exist");
  pb::Job job;
  grpc::Status st = tracker_->GetJob(&ctx, req, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "unknown job 'job-does-not-exist'");

  grpc::ClientContext fctx;
  pb::FetchArtifactRequest freq;
  freq.set_job_id("job-does-not-exist");
  auto reader = tracker_->FetchArtifact(&fctx, freq);
  pb::ArtifactChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(TrackerGrpcTest, BadModelIsInvalidArgument) {
  grpc::ClientContext ctx;
  pb::SubmitJobRequest req;
  req.set_model_sha256(UploadOk("not onnx"));
  req.set_device_key("cpu");
  req.set_trials(4);
  req.mutable_target()->set_spec(kTarget);
  pb::SubmitJobResponse resp;
  grpc::Status st = tracker_->SubmitJob(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("ONNX"), std::string::npos) << st.error_message();
  grpc::ClientContext lctx;
  pb::ListJobsResponse jobs;
  ASSERT_TRUE(tracker_->ListJobs(&lctx, {}, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST_F(TrackerGrpcTest, UploadStreamsChunksAndStoresOnce) {
  const std::string bytes = testing::ConvReluModel();
  pb::UploadModelResponse resp;
  grpc::Status st = Upload(bytes, 100, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.sha256(), kiln::Sha256Hex(bytes));
  EXPECT_EQ(resp.size(), static_cast<int64_t>(bytes.size()));
  EXPECT_FALSE(resp.already_stored());
  pb::UploadModelResponse again;
  ASSERT_TRUE(Upload(bytes, 7, &again).ok());
  EXPECT_TRUE(again.already_stored());
  EXPECT_EQ(StoredFiles(), 1u);
  // A wrong checksum: DATA_LOSS, and nothing is kept.
  st = Upload("some other bytes", 5, &resp, kiln::Sha256Hex("not these"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();
  EXPECT_EQ(StoredFiles(), 1u);
  // Submitting a model nobody uploaded.
  grpc::ClientContext ctx;
  pb::SubmitJobRequest req;
  req.set_model_sha256(kiln::Sha256Hex("never uploaded"));
  req.set_device_key("cpu");
  req.set_trials(4);
  req.mutable_target()->set_spec(kTarget);
  pb::SubmitJobResponse submitted;
  st = tracker_->SubmitJob(&ctx, req, &submitted);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

class SmallLimitTrackerTest : public TrackerGrpcTest {
 protected:
  void SetUp() override {
    max_model_bytes_ = 3 << 20;
    TrackerGrpcTest::SetUp();
  }
};

TEST_F(SmallLimitTrackerTest, UploadOverTheOperatorsLimitIsResourceExhausted) {
  const std::string big((4 << 20) + 10, 'x');
  pb::UploadModelResponse resp;
  // Announced up front: refused at once.
  grpc::Status st = Upload(big, 1 << 20, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("at most 3145728 bytes"), std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("--max-model-bytes"), std::string::npos);
  // Not announced: refused when the bytes cross the limit; no partial file.
  st = Upload(big, 1 << 20, &resp, "", 0);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(StoredFiles(), 0u);
  // Under the limit, in chunks larger than any single message needs to be.
  EXPECT_FALSE(UploadOk(std::string(2 << 20, 'y')).empty());
  EXPECT_EQ(StoredFiles(), 1u);
}

TEST_F(TrackerGrpcTest, AMessageOverTheLimitIsResourceExhausted) {
  // One message larger than the tracker takes (16 MiB by default); the CLI
  // streams uploads in chunks, a hostile client need not.
  pb::SubmitJobRequest req;
  req.set_model_name(std::string(17 << 20, 'x'));
  pb::SubmitJobResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = tracker_->SubmitJob(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  // The tracker still serves.
  grpc::ClientContext again;
  pb::ListJobsRequest list;
  pb::ListJobsResponse jobs;
  EXPECT_TRUE(tracker_->ListJobs(&again, list, &jobs).ok());
}

TEST_F(TrackerGrpcTest, SessionMustStartWithHello) {
  auto stub = pb::AgentSession::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = stub->Session(&ctx);
  pb::AgentMessage hb;
  hb.mutable_heartbeat()->set_unix_ms(1);
  stream->Write(hb);
  stream->WritesDone();
  pb::TrackerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("Hello"), std::string::npos);
}

TEST_F(TrackerGrpcTest, CompilerVersionMismatchIsFailedPrecondition) {
  FakeAgent agent(channel_, "old", "cpu");
  grpc::Status st = agent.Connect("0.0.0-old");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("0.0.0-old"), std::string::npos);
}

TEST_F(TrackerGrpcTest, AgentIsListedWhileConnected) {
  FakeAgent agent(channel_, "board-1", "cpu");
  ASSERT_TRUE(agent.Connect().ok());
  EXPECT_GT(agent.welcome_.heartbeat_interval_ms(), 0);
  grpc::ClientContext ctx;
  pb::ListAgentsResponse resp;
  ASSERT_TRUE(tracker_->ListAgents(&ctx, {}, &resp).ok());
  ASSERT_EQ(resp.agents_size(), 1);
  EXPECT_EQ(resp.agents(0).agent_id(), "board-1");
  EXPECT_EQ(resp.agents(0).device_key(), "cpu");
  EXPECT_EQ(resp.agents(0).target().spec(), kTarget);
  EXPECT_EQ(resp.agents(0).hardware(), "fake board");
  EXPECT_TRUE(resp.agents(0).connected());
}

class TrackerTokenTest : public TrackerGrpcTest {
 protected:
  void SetUp() override {
    token_ = "s3cret";
    TrackerGrpcTest::SetUp();
  }
};

TEST_F(TrackerTokenTest, WrongTokenIsUnauthenticated) {
  FakeAgent bad(channel_, "a", "cpu");
  EXPECT_EQ(bad.Connect(KILN_VERSION, "guess").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  FakeAgent good(channel_, "b", "cpu");
  EXPECT_TRUE(good.Connect(KILN_VERSION, "s3cret").ok());
}

class TrackerHeartbeatTest : public TrackerGrpcTest {
 protected:
  void SetUp() override {
    heartbeat_ms_ = 100;
    TrackerGrpcTest::SetUp();
  }
};

// An agent that says Hello and then nothing (a hung board, a half-open
// connection) loses its session after three heartbeat intervals, so its
// leases go back to the queue without waiting for their deadlines.
TEST_F(TrackerHeartbeatTest, SilentAgentLosesItsSession) {
  FakeAgent agent(channel_, "mute", "cpu");
  ASSERT_TRUE(agent.Connect().ok());
  EXPECT_EQ(agent.welcome_.heartbeat_interval_ms(), 100);
  bool connected = true;
  for (int i = 0; i < 100 && connected; ++i) {  // bounded: 10 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc::ClientContext ctx;
    pb::ListAgentsResponse resp;
    ASSERT_TRUE(tracker_->ListAgents(&ctx, {}, &resp).ok());
    ASSERT_EQ(resp.agents_size(), 1);
    connected = resp.agents(0).connected();
  }
  EXPECT_FALSE(connected) << "a silent agent kept its session";
}

// A small job end to end: tuned by the fake agent, compiled, fetched.
TEST_F(TrackerGrpcTest, JobCompletesAndArtifactIsFetched) {
  FakeAgent agent(channel_, "fake-0", "fake");
  ASSERT_TRUE(agent.Connect().ok());
  agent.Serve();

  pb::SubmitJobResponse submitted = SubmitConvRelu(12);
  ASSERT_FALSE(submitted.job_id().empty());
  EXPECT_EQ(submitted.num_tasks(), 1);
  int events = 0;
  pb::Job last = WatchToEnd(submitted.job_id(), &events);
  ASSERT_EQ(last.state(), pb::JOB_STATE_COMPLETED) << last.error();
  EXPECT_GT(events, 2);
  EXPECT_EQ(last.target().spec(), kTarget);
  EXPECT_GT(last.trials_done(), 0);
  EXPECT_LE(last.trials_done(), 12);
  ASSERT_EQ(last.tasks_size(), 1);
  EXPECT_GT(last.tasks(0).best_cost_s(), 0);
  EXPECT_GT(agent.batches_.load(), 0);

  {
    grpc::ClientContext ctx;
    pb::QueryRecordsRequest q;
    pb::QueryRecordsResponse records;
    ASSERT_TRUE(tracker_->QueryRecords(&ctx, q, &records).ok());
    EXPECT_EQ(records.records_size(), last.trials_done());
    for (const auto& r : records.records()) {
      EXPECT_EQ(r.result().agent_id(), "fake-0");
      EXPECT_EQ(r.result().error_kind(), pb::MEASURE_ERROR_KIND_NONE);
      EXPECT_EQ(r.target(), kTarget);
      EXPECT_EQ(r.workload().key(), last.tasks(0).workload().key());
    }
  }

  std::string data, sha;
  int64_t total = -1;
  {
    grpc::ClientContext ctx;
    pb::FetchArtifactRequest f;
    f.set_job_id(submitted.job_id());
    auto reader = tracker_->FetchArtifact(&ctx, f);
    pb::ArtifactChunk chunk;
    while (reader->Read(&chunk)) {
      EXPECT_EQ(chunk.offset(), static_cast<int64_t>(data.size()));
      data += chunk.data();
      total = chunk.total_size();
      if (!chunk.sha256().empty()) sha = chunk.sha256();
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  EXPECT_GT(data.size(), 0u);
  EXPECT_EQ(total, static_cast<int64_t>(data.size()));
  EXPECT_EQ(sha, kiln::Sha256Hex(data));
  EXPECT_EQ(sha, last.artifact_sha256());
  // Signed by the tracker's key: it loads with that key as the trust key,
  // not with another one.
  deploy::LoadOptions trusted;
  trusted.trust_key = signing_key_->PublicKeyPem();
  auto module = deploy::Module::LoadBytes(data, trusted);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->signer(), signing_key_->Fingerprint());
  auto other = compiler::SigningKey::Generate();
  ASSERT_TRUE(other.ok());
  deploy::LoadOptions other_trust;
  other_trust.trust_key = other->PublicKeyPem();
  EXPECT_EQ(deploy::Module::LoadBytes(data, other_trust).status().code(),
            absl::StatusCode::kUnauthenticated);
  agent.Stop();
}

TEST_F(TrackerGrpcTest, AnAgentGetsNoMoreCandidatesAtOnceThanItsMaxBatch) {
  FakeAgent agent(channel_, "small-0", "fake");
  agent.max_batch_ = 3;
  ASSERT_TRUE(agent.Connect().ok());
  agent.Serve();
  pb::SubmitJobResponse submitted = SubmitConvRelu(20);
  ASSERT_FALSE(submitted.job_id().empty());
  pb::Job last = WatchToEnd(submitted.job_id());
  ASSERT_EQ(last.state(), pb::JOB_STATE_COMPLETED) << last.error();
  EXPECT_GT(agent.largest_batch_.load(), 0);
  EXPECT_LE(agent.largest_batch_.load(), 3);
  // The job's end-to-end check: the model's file, once, and its batches.
  EXPECT_GE(agent.model_batches_.load(), 1);
  EXPECT_EQ(agent.file_bytes_.load(), static_cast<int64_t>(testing::ConvReluModel().size()));
  // Every trial of the split batches is recorded once.
  pb::QueryRecordsResponse records = RecordsOf(submitted.job_id());
  EXPECT_EQ(records.records_size(), last.trials_done());
  std::set<std::string> configs;
  for (const auto& r : records.records()) configs.insert(r.config().canonical());
  EXPECT_EQ(configs.size(), static_cast<size_t>(records.records_size()));
  agent.Stop();
}

// A hostile (or broken) agent: 1,500 random messages, seeded, over a real
// session: results for batches it never got, for its own batch with
// candidate ids that do not exist, duplicated, with NaN, negative, zero and
// absurd costs, thousands of costs, unknown error kinds, a second Hello,
// empty messages. The tracker stays up, and an honest agent then completes
// the job with every trial recorded once and no impossible cost stored.
TEST_F(TrackerGrpcTest, RandomHostileAgentMessagesNeverHurtTheTrackerOrTheJob) {
  pb::SubmitJobResponse submitted;
  {
    auto stub = pb::AgentSession::NewStub(channel_);
    grpc::ClientContext ctx;
    auto stream = stub->Session(&ctx);
    pb::AgentMessage hello;
    hello.mutable_hello()->set_agent_id("hostile");
    hello.mutable_hello()->set_device_key("fake");
    hello.mutable_hello()->mutable_target()->set_spec(kTarget);
    hello.mutable_hello()->set_compiler_version(KILN_VERSION);
    ASSERT_TRUE(stream->Write(hello));
    pb::TrackerMessage reply;
    ASSERT_TRUE(stream->Read(&reply) && reply.has_welcome());
    submitted = SubmitConvRelu(24);  // the job takes the hostile agent's target
    ASSERT_FALSE(submitted.job_id().empty());
    std::mutex mu;
    std::vector<pb::MeasureBatch> leased;
    std::thread reader([&] {
      pb::TrackerMessage msg;
      while (stream->Read(&msg)) {
        if (!msg.has_measure_batch()) continue;
        std::lock_guard<std::mutex> lock(mu);
        leased.push_back(msg.measure_batch());
      }
    });
    std::mt19937 rng(20261125);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    const double kCosts[] = {std::nan(""), -1.0, 0.0, 1e30, 1e-3, 2e-3, INFINITY};
    for (int i = 0; i < 1500; ++i) {
      pb::AgentMessage m;
      switch (pick(6)) {
        case 0:
          m.mutable_heartbeat()->set_unix_ms(i);
          break;
        case 1:
          m.mutable_hello()->set_agent_id("someone-else");
          break;
        case 2:
          break;  // nothing set
        default: {
          pb::BatchResult* r = m.mutable_batch_result();
          pb::MeasureBatch batch;
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!leased.empty() && pick(4) != 0)
              batch = leased[pick(static_cast<int>(leased.size()))];
          }
          r->set_batch_id(batch.batch_id().empty() ? StrCat("batch-made-up-", i)
                                                   : batch.batch_id());
          const int n = pick(12);
          for (int c = 0; c < n; ++c) {
            pb::MeasureResult* res = r->add_results();
            const int id = pick(4);
            res->set_candidate_id(id == 0 ? "" : id == 1 ? "x" : StrCat(pick(id == 2 ? 10 : 1000)));
            res->set_error_kind(static_cast<pb::MeasureErrorKind>(pick(12)));
            const int costs = pick(10) == 0 ? 5000 : pick(4);
            for (int k = 0; k < costs; ++k) res->add_costs_s(kCosts[pick(7)]);
          }
        }
      }
      if (!stream->Write(m)) break;
    }
    ctx.TryCancel();
    reader.join();
    stream->Finish();
  }
  // The tracker lives, and an honest agent finishes the job.
  FakeAgent honest(channel_, "honest", "fake");
  ASSERT_TRUE(honest.Connect().ok());
  honest.Serve();
  pb::Job last = WatchToEnd(submitted.job_id());
  ASSERT_EQ(last.state(), pb::JOB_STATE_COMPLETED) << last.error();
  pb::QueryRecordsResponse records = RecordsOf(submitted.job_id());
  EXPECT_EQ(records.records_size(), last.trials_done());
  std::map<std::string, int> final_results;  // config -> records that settle it
  for (const auto& r : records.records()) {
    for (double c : r.result().costs_s()) {
      EXPECT_TRUE(std::isfinite(c) && c > 0 && c < 1e3) << c;
    }
    const auto kind = r.result().error_kind();
    if (kind == pb::MEASURE_ERROR_KIND_NONE || kind == pb::MEASURE_ERROR_KIND_COMPILE ||
        kind == pb::MEASURE_ERROR_KIND_RUNTIME || kind == pb::MEASURE_ERROR_KIND_INVALID_CONFIG) {
      ++final_results[r.config().canonical()];
    }
  }
  for (const auto& [config, n] : final_results) EXPECT_EQ(n, 1) << config;
  honest.Stop();
}

}  // namespace
}  // namespace kiln::tracker

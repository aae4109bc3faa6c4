// Authentication: the Authenticator against a real log database, and a
// tracker that requires tokens, over gRPC on loopback.
#include "tracker/auth.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "base/names.h"
#include "kiln/v1/agent.grpc.pb.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "storage/tuning_db.h"
#include "tests/storage/test_util.h"
#include "tests/tracker/test_models.h"
#include "tests/tracker/test_tokens.h"
#include "tracker/log.h"
#include "tracker/server.h"

namespace kiln::tracker {
namespace {

namespace pb = ::kiln::v1;

using testing::AddToken;

TEST(AuthTest, SecretsAreRandomAndOnlyTheirHashIsStored) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto s = NewTokenSecret();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->size(), 5u + 64u);
    EXPECT_EQ(s->rfind("kiln_", 0), 0u);
    EXPECT_TRUE(seen.insert(*s).second);
  }
  storage::testing::TempDir dir;
  auto db = storage::FarmStore::Open(dir.File("kiln.db"));
  ASSERT_TRUE(db.ok());
  std::string secret = AddToken(**db, "ana", "user");
  auto rows = (*db)->ListTokens();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].hash, TokenHash(secret));
  EXPECT_EQ((*rows)[0].hash.find(secret.substr(5)), std::string::npos);
}

TEST(AuthTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthTest, AuthenticatesTokensAndRefusesTheRest) {
  storage::testing::TempDir dir;
  auto db = storage::FarmStore::Open(dir.File("kiln.db"));
  ASSERT_TRUE(db.ok());
  int64_t id = 0;
  std::string secret = AddToken(**db, "ana", "admin", &id);
  Authenticator required(db->get(), true), optional(db->get(), false);
  auto code = [](const absl::StatusOr<Caller>& c) { return c.status().code(); };
  EXPECT_EQ(code(required.Authenticate("")), absl::StatusCode::kUnauthenticated);
  auto anonymous = optional.Authenticate("");
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(anonymous->user, "");
  for (const Authenticator* a : {&required, &optional}) {
    EXPECT_EQ(code(a->Authenticate(secret)), absl::StatusCode::kUnauthenticated);  // no "Bearer"
    EXPECT_EQ(code(a->Authenticate("Bearer kiln_wrong")), absl::StatusCode::kUnauthenticated);
    auto caller = a->Authenticate("Bearer " + secret);
    ASSERT_TRUE(caller.ok()) << caller.status();
    EXPECT_EQ(caller->user, "ana");
    EXPECT_TRUE(caller->admin());
  }
  ASSERT_TRUE((*db)->RevokeToken(id, 2).ok());
  EXPECT_EQ((*db)->RevokeToken(id, 3).code(), absl::StatusCode::kNotFound);
  auto revoked = optional.Authenticate("Bearer " + secret);
  EXPECT_EQ(revoked.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(revoked.status().message().find("revoked"), std::string::npos);
}

TEST(AuthTest, UnknownRolesAndEmptyUsersAreRefused) {
  storage::testing::TempDir dir;
  auto db = storage::FarmStore::Open(dir.File("kiln.db"));
  ASSERT_TRUE(db.ok());
  storage::TokenRow row;
  row.user = "x";
  row.role = static_cast<storage::Role>(9);  // no role of the enum
  row.hash = TokenHash("t");
  EXPECT_EQ((*db)->AddToken(row).status().code(), absl::StatusCode::kInvalidArgument);
  row.role = storage::Role::kUser;
  row.user = "";
  EXPECT_EQ((*db)->AddToken(row).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AuthTest, ATrackerBeyondLoopbackNeedsAnExplicitChoice) {
  storage::testing::TempDir dir;
  TrackerOptions opts;
  opts.listen = "0.0.0.0:0";
  opts.db_path = dir.File("kiln.db");
  opts.artifacts_dir = dir.File("artifacts");
  {
    TrackerServer server(opts);
    auto port = server.Start();
    EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(port.status().message().find("--require-auth"), std::string::npos);
  }
  for (bool require : {true, false}) {
    opts.require_auth = require;
    opts.allow_anonymous = !require;
    TrackerServer server(opts);
    EXPECT_TRUE(server.Start().ok());
  }
}

// A tracker that requires tokens, with an admin, two users and an agent.
class RequireAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      auto db = storage::FarmStore::Open(dir_.File("kiln.db"));
      ASSERT_TRUE(db.ok());
      admin_ = AddToken(**db, "root", "admin");
      ana_ = AddToken(**db, "ana", "user", &ana_id_);
      bo_ = AddToken(**db, "bo", "user");
      agent_ = AddToken(**db, "board-7", "agent");
      anas_agent_ = AddToken(**db, "anas-board", "agent", nullptr, "ana");
    }
    StartTracker();
  }
  // (Again) a tracker on the test's database; `shared_keys`: --shared-keys.
  void StartTracker(std::set<std::string> shared_keys = {}) {
    server_.reset();
    TrackerOptions opts;
    opts.listen = "127.0.0.1:0";
    opts.db_path = dir_.File("kiln.db");
    opts.artifacts_dir = dir_.File("artifacts");
    opts.require_auth = true;
    opts.shared_keys = std::move(shared_keys);
    server_ = std::make_unique<TrackerServer>(opts);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                                   grpc::InsecureChannelCredentials());
    tracker_ = pb::Tracker::NewStub(channel_);
  }
  void As(grpc::ClientContext& ctx, const std::string& token) {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  }
  grpc::Status ListJobs(const std::string& token, pb::ListJobsResponse* out = nullptr) {
    grpc::ClientContext ctx;
    As(ctx, token);
    pb::ListJobsResponse resp;
    return tracker_->ListJobs(&ctx, {}, out ? out : &resp);
  }
  grpc::Status GetJob(const std::string& token, const std::string& id) {
    grpc::ClientContext ctx;
    As(ctx, token);
    pb::GetJobRequest req;
    req.set_job_id(id);
    pb::Job job;
    return tracker_->GetJob(&ctx, req, &job);
  }
  // A job of `token`'s user (it stays queued: no agent serves its key).
  std::string Submit(const std::string& token) {
    pb::SubmitJobResponse resp;
    grpc::Status st = SubmitNamed(token, "model", &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }
  grpc::Status SubmitNamed(const std::string& token, const std::string& model_name,
                           pb::SubmitJobResponse* resp,
                           const std::string& key = "nobody-serves-this") {
    std::string model = testing::ConvReluModel();
    pb::UploadModelResponse uploaded;
    grpc::Status up = testing::UploadAs(*tracker_, token, model, &uploaded);
    EXPECT_TRUE(up.ok()) << up.error_message();
    grpc::ClientContext ctx;
    As(ctx, token);
    pb::SubmitJobRequest req;
    req.set_model_sha256(uploaded.sha256());
    req.set_device_key(key);
    req.mutable_target()->set_spec("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic");
    req.set_trials(8);
    req.set_model_name(model_name);
    return tracker_->SubmitJob(&ctx, req, resp);
  }

  // The job once it has ended (or as it is after 30 s).
  pb::Job WaitDone(const std::string& token, const std::string& id) {
    pb::Job job;
    for (int i = 0; i < 600; ++i) {
      grpc::ClientContext ctx;
      As(ctx, token);
      pb::GetJobRequest req;
      req.set_job_id(id);
      EXPECT_TRUE(tracker_->GetJob(&ctx, req, &job).ok());
      if (job.state() == pb::JOB_STATE_COMPLETED || job.state() == pb::JOB_STATE_FAILED) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return job;
  }

  storage::testing::TempDir dir_;
  std::string admin_, ana_, bo_, agent_, anas_agent_;
  int64_t ana_id_ = 0;
  std::unique_ptr<TrackerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Tracker::Stub> tracker_;
};

TEST_F(RequireAuthTest, NoWrongOrRevokedTokenIsUnauthenticated) {
  EXPECT_EQ(ListJobs("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListJobs("kiln_0123").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListJobs(ana_).ok());
  {
    auto db = storage::FarmStore::Open(dir_.File("kiln.db"));  // as `tokens revoke` does
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->RevokeToken(ana_id_, 5).ok());
  }
  grpc::Status st = ListJobs(ana_);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("revoked"), std::string::npos) << st.error_message();
}

TEST_F(RequireAuthTest, AnAgentsTokenIsNotAUsers) {
  EXPECT_EQ(ListJobs(agent_).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(RequireAuthTest, UsersSeeTheirOwnJobsOnlyAndAdminsSeeAll) {
  const std::string job = Submit(ana_);
  ASSERT_FALSE(job.empty());
  EXPECT_TRUE(GetJob(ana_, job).ok());
  EXPECT_TRUE(GetJob(admin_, job).ok());
  // Another user's job reads exactly as a job that does not exist.
  grpc::Status other = GetJob(bo_, job);
  grpc::Status unknown = GetJob(bo_, "no-such-job");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(other.error_message(), "unknown job '" + job + "'");
  EXPECT_EQ(unknown.error_message(), "unknown job 'no-such-job'");
  pb::ListJobsResponse list;
  ASSERT_TRUE(ListJobs(bo_, &list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  ASSERT_TRUE(ListJobs(admin_, &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).owner(), "ana");
  {
    grpc::ClientContext ctx;
    As(ctx, bo_);
    pb::QueryRecordsRequest req;
    req.set_job_id(job);
    pb::QueryRecordsResponse resp;
    EXPECT_EQ(tracker_->QueryRecords(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    As(ctx, bo_);
    pb::FetchArtifactRequest req;
    req.set_job_id(job);
    auto reader = tracker_->FetchArtifact(&ctx, req);
    pb::ArtifactChunk chunk;
    while (reader->Read(&chunk)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    As(ctx, bo_);
    pb::CancelJobRequest req;
    req.set_job_id(job);
    pb::Job out;
    EXPECT_EQ(tracker_->CancelJob(&ctx, req, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_TRUE(GetJob(ana_, job).ok());
}

// Opens an agent session with `token`: the first reply's status.
grpc::Status Hello(pb::AgentSession::Stub& stub, const std::string& token, const std::string& id,
                   const std::string& key = "k") {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  auto stream = stub.Session(&ctx);
  pb::AgentMessage hello;
  hello.mutable_hello()->set_agent_id(id);
  hello.mutable_hello()->set_device_key(key);
  hello.mutable_hello()->mutable_target()->set_spec(
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic");
  hello.mutable_hello()->set_compiler_version(KILN_VERSION);
  stream->Write(hello);
  pb::TrackerMessage reply;
  if (stream->Read(&reply) && reply.has_welcome()) {
    ctx.TryCancel();
    stream->Finish();
    return grpc::Status::OK;
  }
  return stream->Finish();
}

TEST_F(RequireAuthTest, AgentsNeedAnAgentTokenAndAreNamedByIt) {
  auto stub = pb::AgentSession::NewStub(channel_);
  EXPECT_EQ(Hello(*stub, "", "x").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Hello(*stub, ana_, "x").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // An admin is a person, not an agent.
  EXPECT_EQ(Hello(*stub, admin_, "x").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Hello(*stub, agent_, "claims-to-be-someone-else").ok());
  grpc::ClientContext ctx;
  As(ctx, admin_);
  pb::ListAgentsResponse agents;
  ASSERT_TRUE(tracker_->ListAgents(&ctx, {}, &agents).ok());
  ASSERT_EQ(agents.agents_size(), 1);
  EXPECT_EQ(agents.agents(0).agent_id(), "board-7");
}

// An agent with `token` on key "k" that answers every batch with `cost_s`
// for every candidate, until Stop.
class ScriptedAgent {
 public:
  ScriptedAgent(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                double cost_s)
      : stub_(pb::AgentSession::NewStub(channel)) {
    ctx_.AddMetadata("authorization", "Bearer " + token);
    stream_ = stub_->Session(&ctx_);
    pb::AgentMessage hello;
    hello.mutable_hello()->set_agent_id("x");
    hello.mutable_hello()->set_device_key("k");
    hello.mutable_hello()->mutable_target()->set_spec(
        "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic");
    hello.mutable_hello()->set_compiler_version(KILN_VERSION);
    stream_->Write(hello);
    pb::TrackerMessage reply;
    welcomed_ = stream_->Read(&reply) && reply.has_welcome();
    thread_ = std::thread([this, cost_s] {
      pb::TrackerMessage msg;
      while (welcomed_ && stream_->Read(&msg)) {
        if (!msg.has_measure_batch()) continue;
        pb::AgentMessage out;
        out.mutable_batch_result()->set_batch_id(msg.measure_batch().batch_id());
        for (const auto& c : msg.measure_batch().candidates()) {
          auto* m = out.mutable_batch_result()->add_results();
          m->set_candidate_id(c.candidate_id());
          m->set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
          m->add_costs_s(cost_s);
          m->add_costs_s(cost_s);
        }
        ++batches_;
        if (!stream_->Write(out)) break;
      }
    });
  }
  ~ScriptedAgent() {
    ctx_.TryCancel();
    thread_.join();
    stream_->Finish();
  }
  bool welcomed_ = false;
  std::atomic<int> batches_{0};

 private:
  std::unique_ptr<pb::AgentSession::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::TrackerMessage>> stream_;
  std::thread thread_;
};

// An agent a user runs (tokens create --owner) measures that user's jobs
// only, and what it reports seeds and compiles into that user's jobs only:
// ana's board claims every config runs in 0.1 us; bo's job, measured by the
// farm's agent, never sees those claims (its tasks' best costs are the farm
// agent's), while ana's job does.
TEST_F(RequireAuthTest, AnAgentAUserRunsMeasuresAndSeedsTheirJobsOnly) {
  ScriptedAgent anas(channel_, anas_agent_, 1e-7);
  ASSERT_TRUE(anas.welcomed_);
  pb::SubmitJobResponse bos_job, anas_job;
  ASSERT_TRUE(SubmitNamed(bo_, "m", &bos_job, "k").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(anas.batches_.load(), 0) << "ana's board measured bo's job";
  ASSERT_TRUE(SubmitNamed(ana_, "m", &anas_job, "k").ok());
  pb::Job ana_done = WaitDone(ana_, anas_job.job_id());
  ASSERT_EQ(ana_done.state(), pb::JOB_STATE_COMPLETED) << ana_done.error();
  EXPECT_GT(anas.batches_.load(), 0);
  ScriptedAgent farm(channel_, agent_, 1e-3);
  ASSERT_TRUE(farm.welcomed_);
  pb::Job bo_done = WaitDone(bo_, bos_job.job_id());
  ASSERT_EQ(bo_done.state(), pb::JOB_STATE_COMPLETED) << bo_done.error();
  ASSERT_GT(ana_done.tasks_size(), 0);
  ASSERT_EQ(bo_done.tasks_size(), ana_done.tasks_size());
  for (int i = 0; i < bo_done.tasks_size(); ++i) {
    EXPECT_DOUBLE_EQ(ana_done.tasks(i).best_cost_s(), 1e-7);
    EXPECT_DOUBLE_EQ(bo_done.tasks(i).best_cost_s(), 1e-3);
  }
  // The log keeps who measured what: ana's board's records are hers.
  auto db = storage::TuningDb::Open(dir_.File("kiln.db"));
  ASSERT_TRUE(db.ok());
  auto rows = (*db)->QueryRecords("", "", 0);
  ASSERT_TRUE(rows.ok());
  int owned = 0;
  for (const auto& r : *rows) {
    EXPECT_EQ(r.owner, r.job_id == anas_job.job_id() ? "ana" : "") << r.job_id;
    owned += r.owner == "ana";
  }
  EXPECT_GT(owned, 0);
}

// On a key the farm shares (--shared-keys), an agent a user runs measures
// anyone's jobs, and its records are everyone's.
TEST_F(RequireAuthTest, OnASharedKeyAUsersAgentServesEveryone) {
  StartTracker({"k"});
  ScriptedAgent anas(channel_, anas_agent_, 1e-3);
  ASSERT_TRUE(anas.welcomed_);
  pb::SubmitJobResponse bos_job;
  ASSERT_TRUE(SubmitNamed(bo_, "m", &bos_job, "k").ok());
  pb::Job done = WaitDone(bo_, bos_job.job_id());
  ASSERT_EQ(done.state(), pb::JOB_STATE_COMPLETED) << done.error();
  auto db = storage::TuningDb::Open(dir_.File("kiln.db"));
  ASSERT_TRUE(db.ok());
  auto rows = (*db)->QueryRecords("", "", 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_FALSE(rows->empty());
  for (const auto& r : *rows) EXPECT_EQ(r.owner, "");
}

// Names are bounded printable text: a huge name or one with a newline or a
// terminal escape is refused before anything stores it, and a Hello's
// claims reach no log line before its token is checked.
TEST_F(RequireAuthTest, NamesAreBoundedPrintableText) {
  pb::SubmitJobResponse resp;
  grpc::Status st = SubmitNamed(ana_, std::string(5 << 20, 'n'), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "model_name is 5242880 bytes; at most 256 are allowed");
  // (Bytes that are not UTF-8 never reach the tracker: protobuf refuses them
  // in a string field.)
  for (const std::string bad : {"a\nINFO forged line", "a\x1b[2Jb", "a\u202eb"}) {
    st = SubmitNamed(ana_, bad, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(st.error_message(), "model_name must be printable UTF-8 (no control characters)");
  }
  EXPECT_TRUE(SubmitNamed(ana_, "résnet-50 (int8) ✓", &resp).ok());
  EXPECT_TRUE(SubmitNamed(ana_, std::string(256, 'n'), &resp).ok());
  pb::ListJobsResponse list;
  ASSERT_TRUE(ListJobs(admin_, &list).ok());
  EXPECT_EQ(list.jobs_size(), 2);

  auto stub = pb::AgentSession::NewStub(channel_);
  st = Hello(*stub, agent_, "x", "key\nwith a newline");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "Hello's device_key must be printable UTF-8 (no control characters)");
  st = Hello(*stub, agent_, "x", std::string(300, 'k'));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RequireAuthTest, AnUnauthenticatedHelloWritesNothingItClaimsToTheLog) {
  std::ostringstream log_text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text);
  auto previous = spdlog::get("tracker");
  spdlog::drop("tracker");
  spdlog::register_logger(std::make_shared<spdlog::logger>("tracker", sink));
  auto stub = pb::AgentSession::NewStub(channel_);
  EXPECT_EQ(Hello(*stub, "kiln_wrong", "a\n[error] forged: tracker compromised").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  spdlog::drop("tracker");
  if (previous) spdlog::register_logger(previous);
  EXPECT_NE(log_text.str().find("agent session from"), std::string::npos) << log_text.str();
  EXPECT_EQ(log_text.str().find("forged"), std::string::npos) << log_text.str();
}

TEST(NamesTest, LogLinesStayOneLine) {
  std::ostringstream text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  sink->set_formatter(std::make_unique<PrintableFormatter>("[%l] %v"));
  spdlog::logger log("t", sink);
  log.warn("SubmitJob rejected: node '{}' is bad", "x\n[error] forged\x1b[31m");
  EXPECT_EQ(text.str(),
            "[warning] SubmitJob rejected: node 'x\\x0a[error] forged\\x1b[31m' is bad\n");
}

TEST(NamesTest, PrintableEscapesControlsAndBrokenUtf8) {
  EXPECT_EQ(Printable("plain ✓ text"), "plain ✓ text");
  EXPECT_EQ(Printable("a\nb\x1b[2J\\"), "a\\x0ab\\x1b[2J\\\\");
  EXPECT_EQ(Printable("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(Printable("\xc2\x85"), "\\u{0085}");            // C1 NEL
  EXPECT_EQ(Printable("\u202e"), "\\u{202e}");              // right-to-left override
  EXPECT_EQ(Printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");  // overlong
  EXPECT_TRUE(IsPrintableUtf8("名前 résumé"));
  EXPECT_FALSE(IsPrintableUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(IsPrintableUtf8(std::string("a\0b", 3)));
  EXPECT_EQ(ShownName(std::string(300, 'x')), std::string(253, 'x') + "...");
  EXPECT_TRUE(CheckName("n", ShownName(std::string(200, '\n'))).ok());
  EXPECT_TRUE(
      CheckName("n", ShownName(std::string(100, 'x') + std::string(100, 'e') + "\xc3\xa9")).ok());
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";  // 400 bytes of é
  EXPECT_TRUE(CheckName("n", ShownName(accents)).ok()) << ShownName(accents);
  EXPECT_EQ(ShownName("a\nb"), "a\\x0ab");
  EXPECT_TRUE(CheckName("n", std::string(256, 'x')).ok());
  EXPECT_EQ(CheckName("n", std::string(257, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::tracker

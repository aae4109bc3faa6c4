// The kiln CLI driven in-process: argument errors, an unreachable tracker,
// and the tracker subcommands against a fake Tracker service on port 0.
#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/str.h"
#include "cli/common.h"
#include "compiler/artifact_signing.h"
#include "deploy/tensor_io.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "onnx/onnx_pb.h"
#include "storage/stores.h"

namespace kiln::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

// A real ONNX model: y = x + w, x [batch, 4] (symbolic), w [4] inline or in
// external data at `location`; `padding` extra inline bytes make it large.
std::string OnnxModel(const std::string& location = "", size_t padding = 0) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("cli");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  if (location.empty()) {
    w->set_raw_data(std::string(16, '\0'));
  } else {
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value(location);
  }
  if (padding > 0) {
    auto* p = g->add_initializer();
    p->set_name("padding");
    p->set_data_type(onnx::TensorProto::UINT8);
    p->add_dims(static_cast<int64_t>(padding));
    p->set_raw_data(std::string(padding, '\x5a'));
  }
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

CliRun Kiln(const std::vector<std::string>& args,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  std::ostringstream out, err;
  CliEnv env{&out, &err, timeout};
  int code = RunCli(args, env);
  return {code, out.str(), err.str()};
}

TEST(Cli, HelpListsSubcommands) {
  for (const char* flag : {"--help", "help"}) {
    CliRun r = Kiln({flag});
    EXPECT_EQ(r.code, 0);
    for (const char* cmd :
         {"tune", "jobs", "job", "cancel", "devices", "records", "fetch", "compile"}) {
      EXPECT_THAT(r.out, HasSubstr(std::string("  ") + cmd + " ")) << cmd;
    }
  }
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  CliRun r = Kiln({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kiln: unknown command 'frobnicate' (see kiln help)\n");
  EXPECT_EQ(Kiln({}).code, 2);
}

TEST(Cli, MissingTrackerIsAUsageError) {
  CliRun r = Kiln({"jobs"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kiln: jobs: missing --tracker\nusage: kiln jobs --tracker ADDR\n");
  r = Kiln({"tune", "m.onnx", "--key", "k", "--trials", "4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing --tracker"));
  r = Kiln({"fetch", "job-1", "--tracker", "h:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing -o PATH"));
}

// KILN_TRACKER (CliEnv::tracker) stands for --tracker where a command calls
// a tracker, never in the local modes.
TEST(Cli, TheEnvironmentNamesTheTracker) {
  std::ostringstream out, err;
  CliEnv env{&out, &err, std::chrono::milliseconds(5000)};
  env.tracker = "farm.example:7070";
  EXPECT_EQ(RunCli({"fetch", "job-1", "-o", "m.kiln"}, env), 1);
  EXPECT_THAT(err.str(), HasSubstr("refusing to fetch native code from farm.example:7070"));
  err.str("");
  // --tracker given wins; tune --local takes none (no "--tracker is for the
  // farm" complaint: the variable is not added).
  EXPECT_EQ(
      RunCli({"tune", "missing.onnx", "--local", "--db", "x.db", "-o", "x.kiln", "--trials", "2"},
             env),
      1);
  EXPECT_THAT(err.str(), Not(HasSubstr("is for the farm")));
}

TEST(Cli, LiveProgressShowsTheBarTheEtaTheBestAndTheTasksBeingTuned) {
  kiln::v1::Job j;
  j.set_state(kiln::v1::JOB_STATE_TUNING);
  j.set_trials(100);
  j.set_trials_done(25);
  for (int i = 0; i < 3; ++i) {
    auto* t = j.add_tasks();
    t->mutable_workload()->set_op(i == 2 ? "dense" : "conv2d");
    t->mutable_workload()->set_key(StrCat("w", i));
    t->set_trials_done(10 - i);
    t->set_best_cost_s(i == 2 ? 0 : 1e-3);
    t->set_occurrences(2);
    t->set_state(i == 0 ? "done" : "tuning");
  }
  std::string text = LiveProgress(j, 30, 20);
  EXPECT_THAT(text, StartsWith("[#####...............] 25/100 trials  30s  ETA 1m30s  best -"));
  EXPECT_THAT(text, HasSubstr("[tuning]\n"));
  EXPECT_THAT(text, Not(HasSubstr("w0")));  // done: no line
  EXPECT_THAT(text, HasSubstr("  task 2/3 conv2d w1: 9 trials, best 1.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("  task 3/3 dense w2: 8 trials, best -\n"));
  j.set_estimated_latency_s(8e-3);  // the tracker's, once every task has a best
  EXPECT_THAT(LiveProgress(j, 30, 20), HasSubstr("best 8.000 ms"));
}

TEST(Cli, FetchOverPlaintextFromAnotherMachineIsRefused) {
  CliRun r = Kiln({"fetch", "job-1", "--tracker", "farm.example:7070", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("refusing to fetch native code from farm.example:7070 over an "
                               "unencrypted connection"));
  EXPECT_THAT(r.err, HasSubstr("--tls-ca"));
  EXPECT_FALSE(std::filesystem::exists("m.kiln.part"));
  // Several trackers: loopback only when every one is.
  r = Kiln({"fetch", "job-1", "--tracker", "127.0.0.1:7070,farm.example:7070", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("refusing to fetch native code"));
}

TEST(Cli, BadTrialsAndUnknownFlag) {
  CliRun r = Kiln({"tune", "m.onnx", "--tracker", "h:1", "--key", "k", "--trials", "many"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--trials must be a positive integer, not 'many'"));
  r = Kiln({"devices", "--tracker", "h:1", "--verbose"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --verbose"));
}

TEST(Cli, DurationsParseAndFormat) {
  EXPECT_EQ(*ParseDuration("30m"), 1800);
  EXPECT_EQ(*ParseDuration("90s"), 90);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400);
  EXPECT_EQ(*ParseDuration("2.5"), 2.5);
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("1d").ok());
  EXPECT_FALSE(ParseDuration("m").ok());
  EXPECT_EQ(FormatDuration(5), "5s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

TEST(Cli, LocalTuningNeedsItsOwnFlags) {
  CliRun r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--local needs --db"));
  r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "--db", "l.db", "-o", "m.kiln",
            "--tracker", "h:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tracker is for the farm: --local measures on this machine"));
  r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "--db", "l.db", "-o", "m.kiln",
            "--strategy", "best"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown search strategy 'best'"));
}

TEST(Cli, MissingModelFile) {
  CliRun r = Kiln({"tune", "/nonexistent/model.onnx", "--tracker", "127.0.0.1:1", "--key", "k",
                   "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: cannot read model file '/nonexistent/model.onnx'\n");
}

TEST(Cli, UnreachableTracker) {
  CliRun r = Kiln({"jobs", "--tracker", "127.0.0.1:1"}, std::chrono::milliseconds(300));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tracker 127.0.0.1:1 does not answer\n");
  EXPECT_EQ(r.out, "");
}

// A tracker with canned answers.
class FakeTracker final : public kiln::v1::Tracker::Service {
 public:
  std::string artifact = "kiln artifact bytes, long enough to be split into chunks";
  std::string artifact_sha = kiln::Sha256Hex(artifact);
  kiln::v1::SubmitJobRequest last_submit;
  std::map<std::string, std::string> uploads;  // sha256 -> bytes
  int chunks = 0;
  int64_t max_upload = int64_t{1} << 30;

  grpc::Status UploadModel(grpc::ServerContext*, grpc::ServerReader<kiln::v1::ModelChunk>* reader,
                           kiln::v1::UploadModelResponse* resp) override {
    std::string bytes, sha;
    kiln::v1::ModelChunk c;
    while (reader->Read(&c)) {
      ++chunks;
      if (c.total_size() > max_upload) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the model is too large");
      }
      if (c.offset() != static_cast<int64_t>(bytes.size()) || c.data().size() > (1u << 20)) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad chunk");
      }
      bytes += c.data();
      sha = c.sha256();
    }
    if (sha != kiln::Sha256Hex(bytes)) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS, "checksum mismatch");
    }
    uploads[sha] = bytes;
    resp->set_sha256(sha);
    resp->set_size(static_cast<int64_t>(bytes.size()));
    return grpc::Status::OK;
  }

  grpc::Status SubmitJob(grpc::ServerContext*, const kiln::v1::SubmitJobRequest* req,
                         kiln::v1::SubmitJobResponse* resp) override {
    last_submit = *req;
    if (!uploads.count(req->model_sha256())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "model was not uploaded");
    }
    if (req->device_key() == "nobody") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no agent with key nobody has connected; pass a target");
    }
    resp->set_job_id(req->device_key() == "failing" ? "job-fail" : "job-42");
    resp->set_num_tasks(2);
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext*, const kiln::v1::WatchJobRequest* req,
                        grpc::ServerWriter<kiln::v1::JobEvent>* writer) override {
    kiln::v1::JobEvent e;
    kiln::v1::Job* job = e.mutable_job();
    job->set_job_id(req->job_id());
    job->set_trials(24);
    job->set_trials_done(12);
    job->set_state(kiln::v1::JOB_STATE_TUNING);
    job->set_tuning_s(65);
    job->set_budget_s(1800);
    kiln::v1::TaskProgress* t1 = job->add_tasks();
    t1->set_trials_done(12);
    t1->set_best_cost_s(0.000123);
    kiln::v1::TaskProgress* t2 = job->add_tasks();
    e.set_message("task 1/2 (dense): 12 trials, best 0.123 ms, 0 errors");
    writer->Write(e);
    job->set_trials_done(24);
    job->set_tuning_s(130);
    t2->set_trials_done(12);
    t2->set_best_cost_s(0.002);
    e.set_message("done");
    if (req->job_id() == "job-fail") {
      job->set_state(kiln::v1::JOB_STATE_FAILED);
      job->set_error("no agent with key 'failing'");
    } else {
      job->set_state(kiln::v1::JOB_STATE_COMPLETED);
    }
    writer->Write(e);
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const kiln::v1::ListJobsRequest*,
                        kiln::v1::ListJobsResponse* resp) override {
    kiln::v1::Job* j = resp->add_jobs();
    j->set_job_id("job-42");
    j->set_model_name("cnn.onnx");
    j->set_device_key("cpu");
    j->set_state(kiln::v1::JOB_STATE_TUNING);
    j->set_trials(64);
    j->set_trials_done(10);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const kiln::v1::GetJobRequest* req,
                      kiln::v1::Job*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job '" + req->job_id() + "'");
  }

  grpc::Status FetchArtifact(grpc::ServerContext*, const kiln::v1::FetchArtifactRequest* req,
                             grpc::ServerWriter<kiln::v1::ArtifactChunk>* writer) override {
    if (req->job_id() == "job-missing") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job 'job-missing'");
    }
    const size_t chunk = 10;
    for (size_t off = 0; off < artifact.size(); off += chunk) {
      kiln::v1::ArtifactChunk c;
      c.set_data(artifact.substr(off, chunk));
      c.set_offset(static_cast<int64_t>(off));
      c.set_total_size(static_cast<int64_t>(artifact.size()));
      if (off + chunk >= artifact.size()) {
        c.set_sha256(req->job_id() == "job-corrupt" ? std::string(64, '0') : artifact_sha);
      }
      writer->Write(c);
    }
    return grpc::Status::OK;
  }
};

class CliWithTracker : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    addr_ = "127.0.0.1:" + std::to_string(port);
    dir_ = std::filesystem::temp_directory_path() / ("kiln-cli-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }
  std::string WriteFile(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  FakeTracker service_;
  std::unique_ptr<grpc::Server> server_;
  std::string addr_;
  std::filesystem::path dir_;
};

TEST_F(CliWithTracker, TunePrintsJobIdFirst) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job-42\n");
  EXPECT_EQ(service_.last_submit.model_sha256(), kiln::Sha256Hex(OnnxModel()));
  EXPECT_EQ(service_.uploads[service_.last_submit.model_sha256()], OnnxModel());
  EXPECT_EQ(service_.last_submit.model_name(), "m.onnx");
  EXPECT_EQ(service_.last_submit.device_key(), "cpu");
  EXPECT_EQ(service_.last_submit.trials(), 24);
  EXPECT_EQ(service_.last_submit.external_data_size(), 0);
  EXPECT_EQ(service_.last_submit.input_shapes_size(), 0);
  EXPECT_EQ(service_.last_submit.strategy(), "");  // the tracker's default
  EXPECT_EQ(service_.last_submit.budget_s(), 0);
}

// By default candidates are timed with the caches as a model of the size of
// its weights (here 17 MiB, inline or as external data) leaves them: the
// request carries flush_cache and the bytes, which the agent weighs against
// its caches; --no-flush-cache times hot, --flush-cache from memory.
TEST_F(CliWithTracker, TuneSendsTheModelsBytesForTheCaches) {
  const size_t big = (size_t{17} << 20);
  std::string model = WriteFile("big.onnx", OnnxModel("", big));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(service_.last_submit.timing().flush_cache());
  EXPECT_GT(service_.last_submit.timing().model_bytes(), static_cast<int64_t>(big));
  EXPECT_THAT(r.err, HasSubstr("with the caches as the model's 17.8 MB of weights leave them"));
  r = Kiln(
      {"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8", "--no-flush-cache"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(service_.last_submit.timing().flush_cache());
  EXPECT_EQ(service_.last_submit.timing().model_bytes(), 0);
  EXPECT_THAT(r.err, Not(HasSubstr("with the caches as")));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8", "--flush-cache"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(service_.last_submit.timing().flush_cache());
  EXPECT_EQ(service_.last_submit.timing().model_bytes(), 0);
  // The weights in a file beside the model count too.
  WriteFile("w.bin", std::string(big, '\0'));
  std::string external = WriteFile("ext.onnx", OnnxModel("w.bin"));
  r = Kiln({"tune", external, "--tracker", addr_, "--key", "cpu", "--trials", "8"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(service_.last_submit.timing().model_bytes(), static_cast<int64_t>(big));
}

TEST_F(CliWithTracker, TuneSendsStrategyBudgetAndEarlyStopping) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24",
                   "--strategy", "ga", "--budget", "1h30m", "--early-stopping", "40"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(service_.last_submit.strategy(), "ga");
  EXPECT_EQ(service_.last_submit.budget_s(), 5400);
  EXPECT_EQ(service_.last_submit.early_stopping(), 40);
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--flush-cache",
            "--no-flush-cache"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("contradict"));
  for (const char* bad : {"soon", "-5m", "10x", "1h30", ""}) {
    r = Kiln(
        {"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--budget", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("--budget: '")) << bad;
  }
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--db", "x.db"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--db is for --local tuning"));
}

TEST_F(CliWithTracker, TuneUploadsLargeModelsInChunks) {
  const std::string bytes = OnnxModel("", (5u << 20) / 2);  // 2.5 MiB
  std::string model = WriteFile("big.onnx", bytes);
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(service_.chunks, 3);
  EXPECT_EQ(service_.last_submit.model_sha256(), kiln::Sha256Hex(bytes));
  EXPECT_EQ(service_.uploads[kiln::Sha256Hex(bytes)], bytes);
}

TEST_F(CliWithTracker, TuneUploadsExternalDataFromTheModelsFolder) {
  std::filesystem::create_directories(dir_ / "ext" / "data");
  const std::string weights(16, '\x01');
  WriteFile("ext/data/w.bin", weights);
  std::string model = WriteFile("ext/m.onnx", OnnxModel("data/w.bin"));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(service_.last_submit.external_data_size(), 1);
  EXPECT_EQ(service_.last_submit.external_data(0).location(), "data/w.bin");
  EXPECT_EQ(service_.last_submit.external_data(0).sha256(), kiln::Sha256Hex(weights));
  EXPECT_EQ(service_.uploads[kiln::Sha256Hex(weights)], weights);
  EXPECT_EQ(service_.uploads.size(), 2u);
}

TEST_F(CliWithTracker, TuneRefusesExternalDataOutsideTheModelsFolder) {
  std::filesystem::create_directories(dir_ / "ext");
  WriteFile("secret.bin", std::string(16, 's'));
  std::string model = WriteFile("ext/m.onnx", OnnxModel("../secret.bin"));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "kiln: tune: external data location '../secret.bin' leaves the model's folder\n");
  EXPECT_TRUE(service_.uploads.empty());
  model = WriteFile("ext/m2.onnx", OnnxModel("missing.bin"));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("uploading external data 'missing.bin': NOT_FOUND: cannot read"));
}

TEST_F(CliWithTracker, TuneSendsInputShapes) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4",
                   "--input-shape", "x=2x4", "--input-shape=mask=1"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(service_.last_submit.input_shapes_size(), 2);
  EXPECT_EQ(service_.last_submit.input_shapes(0).name(), "mask");
  EXPECT_THAT(service_.last_submit.input_shapes(0).dims(), ::testing::ElementsAre(1));
  EXPECT_EQ(service_.last_submit.input_shapes(1).name(), "x");
  EXPECT_THAT(service_.last_submit.input_shapes(1).dims(), ::testing::ElementsAre(2, 4));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4", "--input-shape",
            "x=2by4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--input-shape x: shape '2by4' is not positive integers"));
}

TEST_F(CliWithTracker, TuneReportsAnUploadTheTrackerRefuses) {
  service_.max_upload = 1000;
  std::string model = WriteFile("big.onnx", OnnxModel("", 4000));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: RESOURCE_EXHAUSTED: the model is too large\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(CliWithTracker, TuneWaitPrintsProgressAndSucceeds) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--wait"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "job-42\n"
            "[tuning] 12/24 trials, 1m05s of 30m00s: task 1/2 (dense): 12 trials, best 0.123 "
            "ms, 0 errors\n"
            "[completed] 24/24 trials, 2m10s of 30m00s: done\n");
}

TEST_F(CliWithTracker, TuneWaitFailsOnFailedJob) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r =
      Kiln({"tune", model, "--tracker", addr_, "--key", "failing", "--trials", "24", "--wait"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, StartsWith("job-fail\n"));
  EXPECT_THAT(r.err,
              HasSubstr("kiln: tune: job job-fail ended failed: no agent with key 'failing'"));
}

TEST_F(CliWithTracker, RpcErrorsNameTheCode) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "nobody", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "kiln: tune: FAILED_PRECONDITION: no agent with key nobody has connected; pass a "
            "target\n");
  // Bytes that are not ONNX are refused before anything is uploaded.
  std::string bad = WriteFile("bad.onnx", "not onnx at all");
  r = Kiln({"tune", bad, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: INVALID_ARGUMENT: not an ONNX model: '" + bad +
                       "' does not parse as a ModelProto\n");
  EXPECT_EQ(service_.uploads.size(), 1u);
  r = Kiln({"job", "job-7", "--tracker", addr_});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: job: NOT_FOUND: no job 'job-7'\n");
  r = Kiln({"devices", "--tracker", addr_});  // not implemented by the fake
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, StartsWith("kiln: devices: UNIMPLEMENTED"));
}

TEST_F(CliWithTracker, JobsTable) {
  CliRun r = Kiln({"jobs", "--tracker", addr_});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "ID      MODEL     KEY  STATE   TRIALS\n"
            "job-42  cnn.onnx  cpu  tuning  10/64\n");
}

TEST_F(CliWithTracker, FetchWritesVerifiedArtifact) {
  std::string out = (dir_ / "a.kiln").string();
  CliRun r = Kiln({"fetch", "job-42", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 0) << r.err;
  std::ifstream in(out, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), service_.artifact);
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

TEST_F(CliWithTracker, FetchChecksumMismatchLeavesNoFile) {
  std::string out = (dir_ / "b.kiln").string();
  CliRun r = Kiln({"fetch", "job-corrupt", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("kiln: fetch: checksum mismatch: received sha256 " +
                               service_.artifact_sha + ", expected " + std::string(64, '0')));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

TEST_F(CliWithTracker, FetchUnknownJob) {
  std::string out = (dir_ / "c.kiln").string();
  CliRun r = Kiln({"fetch", "job-missing", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: fetch: NOT_FOUND: no job 'job-missing'\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

// x [3, 40] times constant weights [40, 24] (a Linear layer), whose values
// bfloat16 does not hold exactly.
std::string MatMulModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("linear");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  tt->mutable_shape()->add_dim()->set_dim_value(40);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(40);
  w->add_dims(24);
  for (int i = 0; i < 40 * 24; ++i) w->add_float_data(0.001f * static_cast<float>((i * 37) % 997));
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

// --precision bf16 builds the products in bfloat16 and, given the user's
// inputs, prints the accuracy against the float32 build; without them it
// says to check. fp16, a precision not built, and --accuracy-input without
// a reduced precision are refused.
TEST_F(CliWithTracker, CompileInBf16ReportsItsAccuracy) {
  const std::string model = WriteFile("linear.onnx", MatMulModel());
  const std::string db = (dir_ / "log.db").string();
  const std::string out = (dir_ / "linear.kiln").string();
  std::vector<float> x(3 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 11) - 1.3f;
  const std::string npy = deploy::SerializeNpy(deploy::MakeTensor("x", {3, 40}, x));
  const std::string input = WriteFile("x.npy", npy);
  CliRun r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16",
                   "--accuracy-input", "x=" + input});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("accuracy of bf16 against float32 on the given inputs:"));
  EXPECT_THAT(r.out, HasSubstr("output 'y' 3x24: max abs error "));
  EXPECT_THAT(r.out, HasSubstr("top-1 (argmax of the last axis) agrees in "));
  EXPECT_THAT(r.out, Not(HasSubstr("max abs error 0 ")));  // bfloat16 rounds
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("compare on your inputs with --accuracy-input"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "fp16"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("precision 'fp16' is not supported yet"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--accuracy-input", input});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--accuracy-input compares a --precision bf16 build"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16", "--accuracy-input",
            "z=" + input});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("expected NAME=FILE with NAME one of the model's inputs (x)"));
}

TEST_F(CliWithTracker, CompileSpecializesInputShapesAndReadsExternalData) {
  std::filesystem::create_directories(dir_ / "ext");
  WriteFile("ext/w.bin", std::string(16, '\0'));
  std::string model = WriteFile("ext/m.onnx", OnnxModel("w.bin"));
  std::string db = (dir_ / "log.db").string();
  std::string out = (dir_ / "m.kiln").string();
  CliRun r = Kiln({"compile", model, "--db", db, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "kiln: compile: input 'x' [batch,4]: dimension 0 ('batch') is unknown; give the "
            "input's shape with --input-shape x=DIMS\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x5"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("dimension 1 of input 'x' [batch,4] is 4, not 5"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--input-shape",
            "y=3x4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("input shape y=3x4 names no input of the model"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(out));
  // Signed with a key of one's own: the header names it (scheme 1, then
  // its public key); a key file that is not one is refused.
  bool created = false;
  const std::string key_path = (dir_ / "own-key.pem").string();
  auto key = compiler::SigningKey::LoadOrCreate(key_path, &created);
  ASSERT_TRUE(key.ok()) << key.status();
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--signing-key",
            key_path});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("signed by " + key->Fingerprint()));
  {
    std::ifstream in(out, std::ios::binary);
    std::string art((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(art.size(), 152u);
    EXPECT_EQ(art[48], 1);
    EXPECT_EQ(art.substr(56, 32), key->PublicKeyRaw());
  }
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--signing-key",
            (dir_ / "no-such-key.pem").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no signing key at"));
  // The element limit is the user's setting: [3,4] has 12 elements.
  r = Kiln(
      {"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--max-elements", "8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("more than 8 elements"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--max-elements", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--max-elements must be in 1..4294967296"));
  // External data must stay in the model's folder.
  std::string escaping = WriteFile("ext/m2.onnx", OnnxModel("../log.db"));
  r = Kiln({"compile", escaping, "--db", db, "-o", out, "--input-shape", "x=3x4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("leaves the model's folder"));
}

// kiln records export / import: the records of one site's database into
// another's, the farm named, duplicates merged; a bad file changes nothing.
TEST_F(CliWithTracker, RecordsTravelBetweenDatabases) {
  const std::string a = (dir_ / "site-a.db").string(), b = (dir_ / "site-b.db").string();
  {
    auto db = storage::TuningDb::Open(a);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
    for (int i = 1; i <= 3; ++i) {
      storage::RecordRow r;
      r.workload_key = "wk1";
      r.target = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5";
      r.config = StrCat("t=", i);
      r.costs_s = {1e-3 * i};
      r.mean_cost_s = 1e-3 * i;
      r.compiler_version = "0.7.0";
      r.agent_id = "a0";
      r.job_id = "job-1";
      r.unix_ms = 1700000000000 + i;
      ASSERT_TRUE((*db)->AddRecord(r).ok());
    }
  }
  const std::string file = (dir_ / "a.jsonl").string();
  CliRun r = Kiln({"records", "export", "--db", a, "-o", file, "--farm", "site-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Kiln({"records", "import", file, "--db", b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(": 3 records added"));
  r = Kiln({"records", "import", file, "--db", b});  // again: merged
  EXPECT_THAT(r.out, HasSubstr(": 0 records added"));
  auto db = storage::TuningDb::Open(b);
  ASSERT_TRUE(db.ok());
  auto rows = (*db)->QueryRecords("wk1", "", 0);
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& row : *rows) {
    EXPECT_EQ(row.farm, "site-a");
    EXPECT_EQ(row.compiler_version, "0.7.0");
    EXPECT_EQ(row.target, "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5");
  }
  // To standard output, and errors.
  r = Kiln({"records", "export", "--db", a});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  std::string bad = WriteFile("bad.jsonl", "{\"workload\": 1}\n");
  r = Kiln({"records", "import", bad, "--db", b});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("line 1"));
  EXPECT_EQ((*db)->QueryRecords("", "", 0)->size(), 3u);
  EXPECT_EQ(Kiln({"records", "import", "--db", b}).code, 2);
  EXPECT_EQ(Kiln({"records", "export"}).code, 2);
}

TEST_F(CliWithTracker, TuneLocalMeasuresRecordsAndCompiles) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  std::string db = (dir_ / "local.db").string();
  std::string out = (dir_ / "m.kiln").string();
  CliRun r = Kiln({"tune", model, "--local", "--db", db, "-o", out, "--trials", "6",
                   "--input-shape", "x=3x4", "--strategy", "random"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The model is one element-wise task whose template has 4 configs.
  EXPECT_THAT(r.err, HasSubstr("task 1/1 (eltwise): search space exhausted after 4 trials"));
  EXPECT_THAT(r.err, HasSubstr("tuning finished (every task has stopped): 4 trials"));
  EXPECT_THAT(r.out, HasSubstr("-> " + out));
  EXPECT_TRUE(std::filesystem::exists(out));
  auto log = storage::TuningDb::Open(db);
  ASSERT_TRUE(log.ok()) << log.status();
  auto records = (*log)->QueryRecords("", "", 0);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 4u);
  for (const auto& rec : *records) {
    EXPECT_THAT(rec.job_id, StartsWith("local-"));
    EXPECT_EQ(rec.agent_id, "local");
  }
  // Tuning again measures nothing twice: the log's configs are settled.
  r = Kiln({"tune", model, "--local", "--db", db, "-o", out, "--trials", "4", "--input-shape",
            "x=3x4", "--strategy", "random"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tuning finished (every task has stopped): 0 trials"));
  records = (*log)->QueryRecords("", "", 0);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 4u);

  // The first job's report: a summary table and a plot gnuplot drew.
  const std::string job = records->back().job_id;
  std::string svg = (dir_ / "report.svg").string();
  r = Kiln({"report", job, "--db", db, "-o", svg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job " + job + ": 4 trials"));
  EXPECT_THAT(r.out, HasSubstr("TASK  OP       RUNS  TRIALS  ERRORS  FIRST"));
  EXPECT_THAT(r.out, HasSubstr("end-to-end estimate (sum of runs x cost): first "));
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("<svg"));
  EXPECT_THAT(text, HasSubstr("1 eltwise x1"));  // the task's curve in the legend
  EXPECT_THAT(text, HasSubstr("end-to-end estimate (ms)"));
  r = Kiln({"report", "job-none", "--db", db, "-o", svg});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: no job 'job-none'"));
  r = Kiln({"report", job, "--db", db, "-o", (dir_ / "report.pdf").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("the plot is an .svg or a .png file"));
}

// A model name and an op from the log reach the plot and the terminal as
// data: a name that would be gnuplot commands (a newline, then system(...))
// runs nothing, and the terminal gets printable text.
TEST_F(CliWithTracker, ReportTreatsNamesAsData) {
  const std::string db = (dir_ / "hostile.db").string();
  const std::filesystem::path pwned = dir_ / "pwned";
  const std::string attack =
      "x'\nsystem(\"touch " + pwned.string() + "\")\n`touch " + pwned.string() + "`\x1b[2J";
  {
    auto log = storage::OpenStores(db);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE(log->tuning->UpsertWorkload({"wk1", "conv2d\"\n" + attack, "canonical", 1e9}).ok());
    storage::JobRow job;
    job.id = "job-1";
    job.model_name = attack;
    job.target = "llvm";
    ASSERT_TRUE(log->farm->CreateJob(job).ok());
    ASSERT_TRUE(log->tuning->SetJobTasks("job-1", {{"wk1", 2}}).ok());
    std::vector<storage::RecordRow> rows;
    for (int i = 0; i < 3; ++i) {
      storage::RecordRow r;
      r.workload_key = "wk1";
      r.target = "llvm";
      r.config = "c" + std::to_string(i);
      r.costs_s = {1e-3 / (i + 1)};
      r.mean_cost_s = 1e-3 / (i + 1);
      r.job_id = "job-1";
      r.unix_ms = 1000 + i;
      rows.push_back(r);
    }
    ASSERT_TRUE(log->tuning->AddRecords(rows).ok());
  }
  const std::string svg = (dir_ / "hostile.svg").string();
  CliRun r = Kiln({"report", "job-1", "--db", db, "-o", svg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(pwned));
  EXPECT_THAT(r.out, HasSubstr("job job-1 (x'\\x0asystem("));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b")));
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("job-1 (x'\\x0asystem("), std::string::npos) << "the title, escaped";
  EXPECT_NE(text.find("1 conv2d'\\x0ax'"), std::string::npos) << "the curve's title, escaped";
  EXPECT_NE(text.find("end-to-end estimate (ms)"), std::string::npos);
}

}  // namespace
}  // namespace kiln::cli

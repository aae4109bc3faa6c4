#pragma once
// What the CLI's tests share: the CLI run in-process (Kiln), a real ONNX
// model, and a fake Tracker service on port 0 with its fixture
// (CliWithTracker).

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
#include "cli/cli.h"
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

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

// A real ONNX model: y = x + w, x [batch, 4] (symbolic), w [4] inline or in
// external data at `location`; `padding` extra inline bytes make it large.
inline std::string OnnxModel(const std::string& location = "", size_t padding = 0) {
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

inline CliRun Kiln(const std::vector<std::string>& args,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  std::ostringstream out, err;
  CliEnv env{&out, &err, timeout};
  int code = RunCli(args, env);
  return {code, out.str(), err.str()};
}

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

}  // namespace kiln::cli

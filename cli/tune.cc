// kiln tune MODEL --tracker ADDR --key KEY --trials N [--target SPEC]
//   [--strategy random|grid|ga|xgb]
//           [--input-shape NAME=DIMS]... [--wait]
// Uploads the model (and the external data files it names, from its own
// folder) in chunks, then submits the job naming them by digest.
#include <fstream>
#include <ostream>
#include <sstream>

#include "cli/common.h"
#include "compiler/frontend/external_data.h"
#include "compiler/frontend/onnx_import.h"
#include "deploy/str.h"
#include "storage/log_db.h"

namespace kiln::cli {
namespace {

std::string ProgressLine(const kiln::v1::JobEvent& event) {
  const kiln::v1::Job& job = event.job();
  std::string line =
      StrCat("[", JobStateName(job.state()), "] ", job.trials_done(), "/", job.trials(), " trials");
  // The task being worked on: the first one with budget left.
  int n = job.tasks_size();
  for (int i = 0; i < n; ++i) {
    const kiln::v1::TaskProgress& t = job.tasks(i);
    if (t.trials_done() < t.trials_budget() || i == n - 1) {
      line += StrCat(", task ", i + 1, "/", n, " best ", FormatCost(t.best_cost_s()));
      break;
    }
  }
  if (!event.message().empty()) line += StrCat(" (", event.message(), ")");
  return line;
}

// Streams one file to the tracker (UploadModel); returns its SHA-256.
absl::StatusOr<std::string> Upload(kiln::v1::Tracker::Stub* stub, const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(StrCat("cannot read '", path, "'"));
  const int64_t total = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  constexpr int64_t kChunk = 1 << 20;
  grpc::ClientContext ctx;
  kiln::v1::UploadModelResponse response;
  std::unique_ptr<grpc::ClientWriter<kiln::v1::ModelChunk>> writer =
      stub->UploadModel(&ctx, &response);
  storage::Sha256Hasher hasher;
  int64_t offset = 0;
  bool sent = true;
  do {
    kiln::v1::ModelChunk chunk;
    std::string* data = chunk.mutable_data();
    data->resize(static_cast<size_t>(std::min(kChunk, total - offset)));
    in.read(data->data(), static_cast<std::streamsize>(data->size()));
    if (!in) return absl::DataLossError(StrCat("error reading '", path, "'"));
    hasher.Update(*data);
    chunk.set_offset(offset);
    chunk.set_total_size(total);
    offset += static_cast<int64_t>(data->size());
    if (offset == total) chunk.set_sha256(hasher.HexDigest());
    // A refused write means the tracker ended the call: Finish says why.
    sent = writer->Write(chunk);
  } while (sent && offset < total);
  if (sent) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response.sha256();
}

}  // namespace

int RunTune(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args = ParseFlags(
      argv, {"--tracker", "--key", "--trials", "--target", "--input-shape", "--strategy"},
      {"--wait"});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.size() != 1) return UsageError(self, "expected one MODEL file", env);
  for (const char* required : {"--tracker", "--key", "--trials"}) {
    if (!args->values.count(required)) return UsageError(self, StrCat("missing ", required), env);
  }
  int64_t trials = 0;
  if (!ParseInt64(args->Get("--trials"), &trials) || trials <= 0 || trials > (1 << 30)) {
    return UsageError(
        self, StrCat("--trials must be a positive integer, not '", args->Get("--trials"), "'"),
        env);
  }
  kiln::v1::SubmitJobRequest request;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& shape : args->All("--input-shape")) {
    absl::Status st = compiler::ParseInputShape(shape, &shapes);
    if (!st.ok()) return UsageError(self, std::string(st.message()), env);
  }
  for (const auto& [input, dims] : shapes) {
    kiln::v1::InputShape* s = request.add_input_shapes();
    s->set_name(input);
    for (int64_t d : dims) s->add_dims(d);
  }
  const std::string& path = args->positional[0];
  if (!std::ifstream(path, std::ios::binary)) {
    return Fail(self, StrCat("cannot read model file '", path, "'"), env);
  }
  // External data: the files the model names, from its own folder only.
  auto locations = compiler::ExternalDataLocations(path);
  if (!locations.ok()) {
    return Fail(self,
                StrCat(absl::StatusCodeToString(locations.status().code()), ": ",
                       locations.status().message()),
                env);
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::vector<std::pair<std::string, std::string>> data_files;  // location, path
  for (const std::string& location : *locations) {
    auto file = compiler::ResolveExternalData(dir, location);
    if (!file.ok()) return Fail(self, std::string(file.status().message()), env);
    data_files.emplace_back(location, *file);
  }

  const std::string address = args->Get("--tracker");
  std::unique_ptr<kiln::v1::Tracker::Stub> stub = ConnectTracker(address, env);
  if (!stub) return 1;

  for (const auto& [location, file] : data_files) {
    auto sha = Upload(stub.get(), file);
    if (!sha.ok()) {
      return Fail(self,
                  StrCat("uploading external data '", location,
                         "': ", absl::StatusCodeToString(sha.status().code()), ": ",
                         sha.status().message()),
                  env);
    }
    kiln::v1::ExternalDataFile* f = request.add_external_data();
    f->set_location(location);
    f->set_sha256(*sha);
  }
  auto model_sha = Upload(stub.get(), path);
  if (!model_sha.ok()) {
    return Fail(self,
                StrCat(absl::StatusCodeToString(model_sha.status().code()), ": ",
                       model_sha.status().message()),
                env);
  }
  request.set_model_sha256(*model_sha);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  request.set_model_name(name);
  if (args->values.count("--target")) request.mutable_target()->set_spec(args->Get("--target"));
  request.set_device_key(args->Get("--key"));
  request.set_trials(static_cast<int32_t>(trials));
  if (args->values.count("--strategy")) request.set_strategy(args->Get("--strategy"));
  kiln::v1::SubmitJobResponse response;
  {
    grpc::ClientContext ctx;
    grpc::Status status = stub->SubmitJob(&ctx, request, &response);
    if (!status.ok()) return RpcFail(self, status, env);
  }
  *env.out << response.job_id() << std::endl;
  *env.err << "kiln: submitted " << name << " as " << response.job_id() << " ("
           << response.num_tasks() << " tasks)\n";
  if (!args->bools.count("--wait")) return 0;

  kiln::v1::WatchJobRequest watch;
  watch.set_job_id(response.job_id());
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<kiln::v1::JobEvent>> reader = stub->WatchJob(&ctx, watch);
  kiln::v1::JobEvent event;
  kiln::v1::Job last;
  bool have_last = false;
  while (reader->Read(&event)) {
    *env.out << ProgressLine(event) << std::endl;
    last = event.job();
    have_last = true;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return RpcFail(self, status, env);
  if (!have_last) {
    grpc::ClientContext get_ctx;
    kiln::v1::GetJobRequest get;
    get.set_job_id(response.job_id());
    grpc::Status s = stub->GetJob(&get_ctx, get, &last);
    if (!s.ok()) return RpcFail(self, s, env);
  }
  if (last.state() == kiln::v1::JOB_STATE_COMPLETED) return 0;
  return Fail(self,
              StrCat("job ", response.job_id(), " ended ", JobStateName(last.state()),
                     last.error().empty() ? "" : StrCat(": ", last.error())),
              env);
}

}  // namespace kiln::cli

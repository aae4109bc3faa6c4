// kiln tune MODEL --tracker ADDR --key KEY --trials N [--target SPEC] [--wait]
#include <fstream>
#include <ostream>
#include <sstream>

#include "cli/common.h"
#include "deploy/str.h"

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

}  // namespace

int RunTune(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args =
      ParseFlags(argv, {"--tracker", "--key", "--trials", "--target"}, {"--wait"});
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
  const std::string& path = args->positional[0];
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(self, StrCat("cannot read model file '", path, "'"), env);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Fail(self, StrCat("error reading model file '", path, "'"), env);

  const std::string address = args->Get("--tracker");
  std::unique_ptr<kiln::v1::Tracker::Stub> stub = ConnectTracker(address, env);
  if (!stub) return 1;

  kiln::v1::SubmitJobRequest request;
  request.set_model(bytes.str());
  std::string name =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  request.set_model_name(name);
  if (args->values.count("--target")) request.mutable_target()->set_spec(args->Get("--target"));
  request.set_device_key(args->Get("--key"));
  request.set_trials(static_cast<int32_t>(trials));
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

// kiln jobs / job / cancel / devices / records: thin tracker queries.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <ostream>

#include "base/str.h"
#include "cli/common.h"

namespace kiln::cli {
namespace {

// Parses the common "[POSITIONAL...] --tracker ADDR" shape and connects.
struct Prepared {
  Args args;
  std::unique_ptr<kiln::v1::Tracker::Stub> stub;
  int exit_code = 0;  // non-zero: stop with this code
};

Prepared Prepare(const Command& self, const std::vector<std::string>& argv, size_t positional,
                 const char* positional_name, std::set<std::string> value_flags,
                 const CliEnv& env) {
  Prepared p;
  value_flags.insert("--tracker");
  absl::StatusOr<Args> args = ParseFlags(argv, value_flags, {});
  if (!args.ok()) {
    p.exit_code = UsageError(self, std::string(args.status().message()), env);
    return p;
  }
  if (args->positional.size() != positional) {
    p.exit_code =
        UsageError(self,
                   positional == 0 ? StrCat("unexpected argument '", args->positional[0], "'")
                                   : StrCat("expected ", positional_name),
                   env);
    return p;
  }
  if (!args->values.count("--tracker")) {
    p.exit_code = UsageError(self, "missing --tracker", env);
    return p;
  }
  p.args = *std::move(args);
  p.stub = ConnectTracker(p.args.Get("--tracker"), env);
  if (!p.stub) p.exit_code = 1;
  return p;
}

std::string FormatTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int RunJobs(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  Prepared p = Prepare(self, argv, 0, "", {}, env);
  if (p.exit_code) return p.exit_code;
  grpc::ClientContext ctx;
  kiln::v1::ListJobsResponse response;
  grpc::Status status = p.stub->ListJobs(&ctx, {}, &response);
  if (!status.ok()) return RpcFail(self, status, env);
  std::vector<std::vector<std::string>> rows = {{"ID", "MODEL", "KEY", "STATE", "TRIALS"}};
  for (const kiln::v1::Job& j : response.jobs()) {
    rows.push_back({j.job_id(), Printable(j.model_name()), Printable(j.device_key()),
                    JobStateName(j.state()), StrCat(j.trials_done(), "/", j.trials())});
  }
  PrintTable(*env.out, rows);
  return 0;
}

int RunJob(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  Prepared p = Prepare(self, argv, 1, "one JOB id", {}, env);
  if (p.exit_code) return p.exit_code;
  grpc::ClientContext ctx;
  kiln::v1::GetJobRequest request;
  request.set_job_id(p.args.positional[0]);
  kiln::v1::Job j;
  grpc::Status status = p.stub->GetJob(&ctx, request, &j);
  if (!status.ok()) return RpcFail(self, status, env);
  // The peak the key's agents measured on this target (0: none known).
  double peak = 0;
  {
    grpc::ClientContext agents_ctx;
    kiln::v1::ListAgentsResponse agents;
    if (p.stub->ListAgents(&agents_ctx, {}, &agents).ok()) {
      for (const kiln::v1::Agent& a : agents.agents()) {
        if (a.device_key() == j.device_key() && a.target().spec() == j.target().spec()) {
          peak = std::max(peak, a.peak_gflops());
        }
      }
    }
  }
  std::ostream& out = *env.out;
  out << "job       " << j.job_id() << "\n"
      << "model     " << Printable(j.model_name()) << "\n"
      << "key       " << Printable(j.device_key()) << "\n"
      << "target    " << (j.target().spec().empty() ? "-" : Printable(j.target().spec())) << "\n"
      << "state     " << JobStateName(j.state()) << "\n"
      << "trials    " << j.trials_done() << "/" << j.trials() << "\n"
      << "tuning    " << FormatDuration(j.tuning_s())
      << (j.budget_s() > 0 ? StrCat(" of ", FormatDuration(j.budget_s())) : std::string()) << "\n"
      << "created   " << FormatTime(j.created_unix_ms()) << "\n"
      << "updated   " << FormatTime(j.updated_unix_ms()) << "\n";
  if (!j.error().empty()) out << "error     " << Printable(j.error()) << "\n";
  if (!j.artifact_sha256().empty()) out << "artifact  " << j.artifact_sha256() << "\n";
  if (peak > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f GFLOP/s (FMA peak its agents measured)", peak);
    out << "peak      " << buf << "\n";
  }
  if (j.tasks_size() > 0) {
    out << "\n";
    std::vector<std::vector<std::string>> rows = {
        {"TASK", "WORKLOAD", "OP", "RUNS", "STATE", "TRIALS", "SHARE", "ERRORS", "BEST", "GFLOPS"}};
    if (peak > 0) rows[0].push_back("OF PEAK");
    for (int i = 0; i < j.tasks_size(); ++i) {
      const kiln::v1::TaskProgress& t = j.tasks(i);
      std::string gflops = "-", of_peak = "-";
      if (t.best_cost_s() > 0 && t.workload().flops() > 0) {
        const double g = t.workload().flops() / t.best_cost_s() / 1e9;
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.2f", g);
        gflops = buf;
        std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * g / std::max(peak, 1e-9));
        of_peak = buf;
      }
      std::string share = "-";
      if (j.trials() > 0) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * t.trials_done() / j.trials());
        share = buf;
      }
      rows.push_back({StrCat(i + 1), t.workload().key(), t.workload().op(),
                      StrCat("x", t.occurrences()), t.state().empty() ? "-" : t.state(),
                      StrCat(t.trials_done()), share, StrCat(t.errors()),
                      FormatCost(t.best_cost_s()), gflops});
      if (peak > 0) rows.back().push_back(of_peak);
    }
    PrintTable(out, rows);
  }
  PrintEndToEnd(out, j.end_to_end());
  return 0;
}

int RunCancel(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  Prepared p = Prepare(self, argv, 1, "one JOB id", {}, env);
  if (p.exit_code) return p.exit_code;
  grpc::ClientContext ctx;
  kiln::v1::CancelJobRequest request;
  request.set_job_id(p.args.positional[0]);
  kiln::v1::Job j;
  grpc::Status status = p.stub->CancelJob(&ctx, request, &j);
  if (!status.ok()) return RpcFail(self, status, env);
  *env.out << j.job_id() << " " << JobStateName(j.state()) << "\n";
  return 0;
}

int RunDevices(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  Prepared p = Prepare(self, argv, 0, "", {}, env);
  if (p.exit_code) return p.exit_code;
  grpc::ClientContext ctx;
  kiln::v1::ListAgentsResponse response;
  grpc::Status status = p.stub->ListAgents(&ctx, {}, &response);
  if (!status.ok()) return RpcFail(self, status, env);
  std::vector<std::vector<std::string>> rows = {
      {"AGENT", "KEY", "STATE", "IN_FLIGHT", "RESULTS", "LAST_SEEN", "TARGET", "HARDWARE"}};
  for (const kiln::v1::Agent& a : response.agents()) {
    std::string state = a.connected() ? "connected" : "gone";
    if (a.quarantined_until_unix_ms() > 0) {
      state = StrCat("quarantined until ", FormatTime(a.quarantined_until_unix_ms()), " (",
                     Printable(a.quarantine_reason()), ")");
    }
    rows.push_back({Printable(a.agent_id()), Printable(a.device_key()), state,
                    StrCat(a.in_flight()), StrCat(a.results()), FormatTime(a.last_seen_unix_ms()),
                    Printable(a.target().spec()), Printable(a.hardware())});
  }
  PrintTable(*env.out, rows);
  return 0;
}

int RunRecords(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  if (!argv.empty() && (argv[0] == "export" || argv[0] == "import")) {
    const std::vector<std::string> rest(argv.begin() + 1, argv.end());
    return argv[0] == "export" ? RunRecordsExport(self, rest, env)
                               : RunRecordsImport(self, rest, env);
  }
  Prepared p = Prepare(self, argv, 0, "", {"--workload", "--target", "--limit", "--job"}, env);
  if (p.exit_code) return p.exit_code;
  kiln::v1::QueryRecordsRequest request;
  request.set_job_id(p.args.Get("--job"));
  request.set_workload_key(p.args.Get("--workload"));
  request.set_target(p.args.Get("--target"));
  int64_t limit = 100;
  if (p.args.values.count("--limit") && (!ParseInt64(p.args.Get("--limit"), &limit) || limit < 0)) {
    return UsageError(self, "--limit must be a non-negative integer", env);
  }
  request.set_limit(static_cast<int32_t>(limit));
  grpc::ClientContext ctx;
  kiln::v1::QueryRecordsResponse response;
  grpc::Status status = p.stub->QueryRecords(&ctx, request, &response);
  if (!status.ok()) return RpcFail(self, status, env);
  std::vector<std::vector<std::string>> rows = {{"WORKLOAD", "CONFIG", "RESULT", "MEAN", "AGENT"}};
  for (const kiln::v1::TuningRecord& r : response.records()) {
    std::string result = "ok";
    if (r.result().error_kind() != kiln::v1::MEASURE_ERROR_KIND_NONE) {
      result = kiln::v1::MeasureErrorKind_Name(r.result().error_kind());
      const std::string prefix = "MEASURE_ERROR_KIND_";
      if (result.starts_with(prefix)) result = result.substr(prefix.size());
    }
    rows.push_back({r.workload().key(), r.config().canonical(), result, FormatCost(r.mean_cost_s()),
                    r.result().agent_id()});
  }
  PrintTable(*env.out, rows);
  return 0;
}

}  // namespace kiln::cli

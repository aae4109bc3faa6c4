#pragma once
// Shared pieces of the `kiln` subcommands: argument parsing, connecting to
// the tracker, error reporting.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/flags.h"
#include "cli/cli.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "grpcpp/grpcpp.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "storage/tuning_db.h"

namespace kiln::cli {

// A subcommand's parsed arguments (base/flags.h).
using Args = ParsedFlags;

struct Command {
  std::string name;
  std::string usage;    // after "kiln "
  std::string summary;  // one line for `kiln help`
  int (*run)(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
};

const std::vector<Command>& Commands();

// Prints "kiln: <cmd>: <message>" and the usage line; returns 2.
int UsageError(const Command& cmd, const std::string& message, const CliEnv& env);
// Prints "kiln: <cmd>: <message>"; returns 1.
int Fail(const Command& cmd, const std::string& message, const CliEnv& env);
// Prints "kiln: <cmd>: <STATUS_CODE>: <message>"; returns 1.
int RpcFail(const Command& cmd, const grpc::Status& status, const CliEnv& env);
std::string StatusCodeName(grpc::StatusCode code);

// Connects to the tracker, waiting up to env.connect_timeout. On failure
// prints "kiln: tracker ADDR does not answer" and returns nullptr.
std::unique_ptr<kiln::v1::Tracker::Stub> ConnectTracker(const std::string& address,
                                                        const CliEnv& env);

// "queued", "tuning", ... for a JobState.
std::string JobStateName(kiln::v1::JobState state);
// Seconds as a short human value: "0.123 ms", "1.5 s".
std::string FormatCost(double seconds);

// A job's whole model measured on the board (Job.end_to_end): the untuned
// and tuned latency, what the job returned and why, and the curve of
// latency against trials. Nothing when the job has none.
void PrintEndToEnd(std::ostream& out, const kiln::v1::EndToEnd& e);

// Rows of cells as left-aligned columns.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

// "30m", "90s", "2h", "1h30m" or plain seconds ("45", "2.5") as seconds;
// INVALID_ARGUMENT for anything else or a negative duration.
absl::StatusOr<double> ParseDuration(const std::string& text);
// "2m05s", "1h02m", "12s".
std::string FormatDuration(double seconds);
// `kiln tune --wait`'s live display of a job, one string of lines: an
// overall bar with trials, elapsed time and ETA and the best estimated
// latency so far (the tracker's Job.estimated_latency_s), then one line per
// task being tuned. `width`: of the bar.
std::string LiveProgress(const kiln::v1::Job& job, double elapsed_s, int width = 30);

// For local model commands (compile, tune --local): the import options of
// --input-shape, --max-elements and the model's folder (for external data).
// INVALID_ARGUMENT for a malformed flag.
absl::StatusOr<compiler::ImportOptions> ImportOptionsFromArgs(const Args& args);
// Compiles `model` with the best records of `db` for `target` and writes the
// artifact to `path` (atomically); prints one line. Returns the exit code.
// The reduced-precision artifact `reduced` (--precision `precision`) and
// the same model's float32 build `fp32` run once on `specs` (kiln-run's
// --input NAME=FILE arguments): per output, the largest and mean absolute
// error against float32 and, over the last axis, how often the argmax (top-1)
// agrees; as lines to print.
absl::StatusOr<std::string> CompareWithFloat32(std::string_view reduced, std::string_view fp32,
                                               const std::string& precision,
                                               const std::vector<std::string>& specs);

int CompileToFile(const Command& self, const std::string& model_path, const compiler::Model& model,
                  const compiler::Target& target, storage::TuningDb& db, const std::string& path,
                  bool dump_ir, const CliEnv& env, const std::string& signing_key = "");

// Subcommands (one function each).
int RunTune(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunJobs(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunJob(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunCancel(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunDevices(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunRecords(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
// kiln records export / import (records_io.cc).
int RunRecordsExport(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunRecordsImport(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunFetch(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunCompile(const Command& self, const std::vector<std::string>& args, const CliEnv& env);
int RunReport(const Command& self, const std::vector<std::string>& args, const CliEnv& env);

}  // namespace kiln::cli

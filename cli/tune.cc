// kiln tune MODEL --tracker ADDR --key KEY --trials N [--target SPEC]
//   [--strategy random|grid|ga|xgb] [--budget DURATION] [--early-stopping N]
//   [--candidate-timeout DURATION] [--flush-cache | --no-flush-cache]
//   [--threads N] [--no-end-to-end] [--precision fp32|bf16]
//   [--input-shape NAME=DIMS]... [--wait]
// --threads: the threads the model will run on (the agent times candidates
// and the whole model at that count; default: the board's cores).
// --no-end-to-end: skip the whole-model check after the search (the job
// then returns each task's best record, unconfirmed inside the model).
// --precision bf16: the model's matrix products in bfloat16 (CPU targets;
// `kiln compile --accuracy-input` shows what that costs in accuracy).
// Uploads the model (and the external data files it names, from its own
// folder) in chunks, then submits the job naming them by digest.
//
// kiln tune MODEL --local --db FILE -o PATH --trials N [...the same options]
// tunes on this machine instead (the tuner's loop with a LocalMeasurer,
// records in FILE), then compiles the model with the best records to PATH.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "base/names.h"
#include "base/sha256.h"
#include "base/str.h"
#include "cli/common.h"
#include "compiler/frontend/external_data.h"
#include "compiler/frontend/onnx_import.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"
#include "tuner/measurer.h"
#include "tuner/search.h"
#include "tuner/tuner.h"

namespace kiln::cli {
namespace {

// "[tuning] 120/400 trials, 2m10s of 30m00s: task 3/20 (conv2d): ...".
std::string ProgressLine(const std::string& state, int trials_done, int trials, double tuning_s,
                         double budget_s, const std::string& message) {
  std::string line = StrCat("[", state, "] ", trials_done, "/", trials, " trials");
  if (tuning_s > 0) {
    line += StrCat(", ", FormatDuration(tuning_s));
    if (budget_s > 0) line += StrCat(" of ", FormatDuration(budget_s));
  }
  if (!message.empty()) line += StrCat(": ", message);
  return line;
}

}  // namespace

std::string LiveProgress(const kiln::v1::Job& j, double elapsed_s, int width) {
  const int total = std::max(j.trials(), 1);
  const int done = std::min(j.trials_done(), total);
  const int filled = static_cast<int>(static_cast<int64_t>(width) * done / total);
  std::string out = StrCat("[", std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(width - filled), '.'), "] ", done, "/",
                           j.trials(), " trials  ", FormatDuration(elapsed_s));
  if (done > 0 && done < total) {
    out += StrCat("  ETA ", FormatDuration(elapsed_s / done * (total - done)));
  }
  out += j.estimated_latency_s() > 0 ? StrCat("  best ", FormatCost(j.estimated_latency_s()))
                                     : std::string("  best -");
  out += StrCat("  [", JobStateName(j.state()), "]\n");
  for (int i = 0; i < j.tasks_size(); ++i) {
    const auto& t = j.tasks(i);
    if (ParseName<storage::TaskState>(t.state()) != storage::TaskState::kTuning) continue;
    out += StrCat("  task ", i + 1, "/", j.tasks_size(), " ", t.workload().op(), " ",
                  t.workload().key(), ": ", t.trials_done(), " trials, best ",
                  t.best_cost_s() > 0 ? FormatCost(t.best_cost_s()) : std::string("-"),
                  t.errors() ? StrCat(", ", t.errors(), " errors") : std::string(), "\n");
  }
  return out;
}

namespace {

// The options both modes share: trials, strategy, budget, early stopping.
struct TuneFlags {
  int32_t trials = 0;
  std::string strategy;  // empty: the default
  double budget_s = 0;
  int32_t early_stopping = 0;
  // Time every run with the kernel's buffers out of the caches: 1 yes, 0 no,
  // -1 as the model's size leaves them (SetCaches).
  int flush_cache = -1;
};

// The external data files the model names: {location, path}, each from the
// model's own folder only. An error's message is what the CLI prints.
using DataFiles = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<DataFiles> ExternalDataFiles(const std::string& path) {
  auto locations = compiler::ExternalDataLocations(path);
  if (!locations.ok()) {
    const absl::Status& st = locations.status();
    return absl::Status(st.code(), StrCat(absl::StatusCodeToString(st.code()), ": ", st.message()));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  DataFiles files;
  for (const std::string& location : *locations) {
    auto file = compiler::ResolveExternalData(dir, location);
    if (!file.ok()) return file.status();
    files.emplace_back(location, *file);
  }
  return files;
}

// Bytes of the model file and its external data files.
int64_t ModelBytes(const std::string& path, const DataFiles& files) {
  int64_t total = 0;
  std::error_code ec;
  auto add = [&](const std::string& file) {
    const auto n = std::filesystem::file_size(file, ec);
    if (!ec) total += static_cast<int64_t>(n);
  };
  add(path);
  for (const auto& [location, file] : files) add(file);
  return total;
}

// How candidates' runs find the caches: --flush-cache: the weights from
// memory; --no-flush-cache: hot, as the last run left them; neither: as a
// model of `bytes` (ModelBytes) leaves them on the board that times them
// (MeasurePolicy::model_bytes: in its last-level cache where they fit in 3/4
// of it, else from memory), and says so for a model of a MiB or more. Timed
// hot, a kernel keeps its layer's weights in L2 across repeats, which inside
// the model come from L3 or memory, and the tuner picks configs that lose
// there (the BERT-base layer, 28 MB: 0.90x onnxruntime tuned hot against
// 1.06x flushed on a 32 MB-L3 EPYC).
void SetCaches(const TuneFlags& flags, int64_t bytes, const CliEnv& env, bool* flush_cache,
               int64_t* model_bytes) {
  *flush_cache = flags.flush_cache != 0;
  *model_bytes = flags.flush_cache < 0 ? bytes : 0;
  if (flags.flush_cache >= 0 || bytes < (int64_t{1} << 20)) return;  // tiny: hot on any board
  char mb[32];
  std::snprintf(mb, sizeof(mb), "%.1f", static_cast<double>(bytes) / 1e6);
  *env.err << "kiln: timing candidates with the caches as the model's " << mb
           << " MB of weights leave them: in the board's last-level cache where they fit in 3/4 "
              "of it, else from memory (--flush-cache: from memory, --no-flush-cache: hot)\n";
}

absl::StatusOr<TuneFlags> TuneFlagsOf(const Args& args) {
  TuneFlags f;
  int64_t trials = 0;
  if (!ParseInt64(args.Get("--trials"), &trials) || trials <= 0 || trials > (1 << 30)) {
    return absl::InvalidArgumentError(
        StrCat("--trials must be a positive integer, not '", args.Get("--trials"), "'"));
  }
  f.trials = static_cast<int32_t>(trials);
  f.strategy = args.Get("--strategy");
  const bool flush = args.bools.count("--flush-cache") > 0;
  const bool no_flush = args.bools.count("--no-flush-cache") > 0;
  if (flush && no_flush) {
    return absl::InvalidArgumentError("--flush-cache and --no-flush-cache contradict each other");
  }
  if (flush || no_flush) f.flush_cache = flush ? 1 : 0;
  if (args.values.count("--budget")) {
    auto budget = ParseDuration(args.Get("--budget"));
    if (!budget.ok())
      return absl::InvalidArgumentError(StrCat("--budget: ", budget.status().message()));
    f.budget_s = *budget;
  }
  if (args.values.count("--early-stopping")) {
    int64_t n = 0;
    if (!ParseInt64(args.Get("--early-stopping"), &n) || n < 0 || n > (1 << 30)) {
      return absl::InvalidArgumentError(StrCat("--early-stopping must be a number of trials, not '",
                                               args.Get("--early-stopping"), "'"));
    }
    f.early_stopping = static_cast<int32_t>(n);
  }
  return f;
}

// kiln tune --local: the whole loop in this process.
int RunTuneLocal(const Command& self, const Args& args, const TuneFlags& flags, const CliEnv& env) {
  for (const char* required : {"--db", "-o"}) {
    if (!args.values.count(required)) {
      return UsageError(self, StrCat("--local needs ", required), env);
    }
  }
  for (const char* farm_only : {"--tracker", "--key", "--target", "--candidate-timeout"}) {
    if (args.values.count(farm_only)) {
      return UsageError(
          self, StrCat(farm_only, " is for the farm: --local measures on this machine"), env);
    }
  }
  if (args.bools.count("--wait")) {
    return UsageError(self, "--wait is for the farm: --local always waits", env);
  }
  tuner::SearchKind strategy = tuner::SearchKind::kXgb;
  if (!flags.strategy.empty()) {
    absl::StatusOr<tuner::SearchKind> parsed = tuner::ParseSearch(flags.strategy);
    if (!parsed.ok()) return UsageError(self, std::string(parsed.status().message()), env);
    strategy = *parsed;
  }
  absl::StatusOr<compiler::ImportOptions> import = ImportOptionsFromArgs(args);
  if (!import.ok()) return UsageError(self, std::string(import.status().message()), env);
  const std::string& path = args.positional[0];
  absl::StatusOr<compiler::Model> model = compiler::Model::FromOnnxFile(path, *import);
  if (!model.ok()) return Fail(self, std::string(model.status().message()), env);
  absl::StatusOr<std::unique_ptr<storage::TuningDb>> db = storage::TuningDb::Open(args.Get("--db"));
  if (!db.ok()) return Fail(self, std::string(db.status().message()), env);
  const compiler::Target target = compiler::Target::Host();
  std::vector<tuner::TuningTask> tasks;
  for (const auto& t : model->Tasks()) {
    if (auto knobs = compiler::KnobsOf(t.workload, target); !knobs.ok()) {
      return Fail(self, StrCat("task ", t.workload.Canonical(), ": ", knobs.status().message()),
                  env);
    }
    tasks.push_back({t.workload, std::max(1, t.occurrences)});
  }
  tuner::TunerOptions options;
  options.job_id = StrCat(
      "local-", kiln::Sha256Hex(
                    StrCat(path, "/", std::chrono::system_clock::now().time_since_epoch().count()))
                    .substr(0, 12));
  options.strategy = strategy;
  options.trials = flags.trials;
  options.budget_s = flags.budget_s;
  options.early_stopping = flags.early_stopping;
  compiler::MeasurePolicy policy;        // the farm's defaults
  auto files = ExternalDataFiles(path);  // the import has read them: an error cannot be new
  SetCaches(flags, ModelBytes(path, files.ok() ? *files : DataFiles{}), env, &policy.flush_cache,
            &policy.model_bytes);
  const compiler::CacheSizes& caches = compiler::HostCaches();
  *env.err << "kiln: where the weights start each run on this machine: "
           << compiler::CacheStateName(compiler::CacheStateFor(policy, caches)) << " (L2 "
           << caches.core_bytes / 1024 << " KiB, last level " << caches.last_level_bytes / 1024
           << " KiB)\n";
  tuner::LocalMeasurer measurer(target, policy);
  *env.err << "kiln: tuning " << path << " on this machine (" << target.Spec() << ") as "
           << options.job_id << ": " << tasks.size() << " tasks, " << flags.trials
           << " trials, strategy " << NameOf(options.strategy) << "\n";
  tuner::Tuner tuner(db->get(), &measurer, target, std::move(tasks), options);
  absl::Status st = tuner.Run([&](const tuner::TunerProgress& p) {
    *env.err << ProgressLine("tuning", p.trials_done, flags.trials, p.tuning_s, flags.budget_s,
                             p.message)
             << std::endl;
  });
  if (!st.ok()) {
    return Fail(self,
                StrCat("tuning failed: ", absl::StatusCodeToString(st.code()), ": ", st.message()),
                env);
  }
  return CompileToFile(self, path, *model, target, **db, args.Get("-o"), false, env);
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
  kiln::Sha256Stream hasher;
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
  absl::StatusOr<Args> args =
      ParseFlags(argv,
                 {"--tracker", "--key", "--trials", "--target", "--input-shape", "--strategy",
                  "--budget", "--early-stopping", "--db", "-o", "--max-elements", "--deadline",
                  "--priority", "--candidate-timeout", "--threads", "--precision"},
                 {"--wait", "--local", "--flush-cache", "--no-flush-cache", "--no-end-to-end"});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.size() != 1) return UsageError(self, "expected one MODEL file", env);
  if (!args->values.count("--trials")) return UsageError(self, "missing --trials", env);
  absl::StatusOr<TuneFlags> flags = TuneFlagsOf(*args);
  if (!flags.ok()) return UsageError(self, std::string(flags.status().message()), env);
  if (args->bools.count("--local")) return RunTuneLocal(self, *args, *flags, env);
  for (const char* required : {"--tracker", "--key"}) {
    if (!args->values.count(required)) return UsageError(self, StrCat("missing ", required), env);
  }
  double deadline_s = 0;
  if (args->values.count("--deadline")) {
    auto deadline = ParseDuration(args->Get("--deadline"));
    if (!deadline.ok()) {
      return UsageError(self, StrCat("--deadline: ", deadline.status().message()), env);
    }
    deadline_s = *deadline;
  }
  int64_t priority = 0;
  if (args->values.count("--priority") &&
      (!ParseInt64(args->Get("--priority"), &priority) || priority < -100 || priority > 100)) {
    return UsageError(self, "--priority must be an integer in -100..100", env);
  }
  // How long an agent lets one candidate build, verify and run (the farm's
  // default: 20 s).
  int32_t candidate_timeout_ms = 0;
  if (args->values.count("--candidate-timeout")) {
    auto timeout = ParseDuration(args->Get("--candidate-timeout"));
    if (!timeout.ok() || *timeout < 1 || *timeout > 3600) {
      return UsageError(self, "--candidate-timeout must be a duration from 1s to 1h", env);
    }
    candidate_timeout_ms = static_cast<int32_t>(*timeout * 1000);
  }
  int64_t threads = 0;
  if (args->values.count("--threads") &&
      (!ParseInt64(args->Get("--threads"), &threads) || threads < 1 || threads > 4096)) {
    return UsageError(self, "--threads must be an integer in 1..4096", env);
  }
  for (const char* local_only : {"--db", "-o", "--max-elements"}) {
    if (args->values.count(local_only)) {
      return UsageError(self, StrCat(local_only, " is for --local tuning"), env);
    }
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
  auto data_files = ExternalDataFiles(path);
  if (!data_files.ok()) return Fail(self, std::string(data_files.status().message()), env);

  const std::string address = args->Get("--tracker");
  std::unique_ptr<kiln::v1::Tracker::Stub> stub = ConnectTracker(address, env);
  if (!stub) return 1;

  for (const auto& [location, file] : *data_files) {
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
  const size_t slash = path.find_last_of('/');
  // The file's name, as the tracker takes names: printable, bounded.
  const std::string name = ShownName(slash == std::string::npos ? path : path.substr(slash + 1));
  request.set_model_name(name);
  if (args->values.count("--target")) request.mutable_target()->set_spec(args->Get("--target"));
  request.set_device_key(args->Get("--key"));
  request.set_trials(flags->trials);
  request.set_strategy(flags->strategy);
  request.set_budget_s(flags->budget_s);
  request.set_early_stopping(flags->early_stopping);
  request.set_deadline_s(deadline_s);
  request.set_priority(static_cast<int32_t>(priority));
  {
    bool flush_cache = false;
    int64_t model_bytes = 0;
    SetCaches(*flags, ModelBytes(path, *data_files), env, &flush_cache, &model_bytes);
    request.mutable_timing()->set_flush_cache(flush_cache);
    request.mutable_timing()->set_model_bytes(model_bytes);
  }
  if (candidate_timeout_ms > 0) request.mutable_timing()->set_timeout_ms(candidate_timeout_ms);
  request.mutable_timing()->set_threads(static_cast<int32_t>(threads));
  request.set_skip_end_to_end(args->bools.count("--no-end-to-end") > 0);
  if (args->values.count("--precision")) {
    absl::StatusOr<compiler::Precision> p = compiler::ParsePrecision(args->Get("--precision"));
    if (!p.ok()) return UsageError(self, std::string(p.status().message()), env);
    request.set_precision(compiler::PrecisionName(*p));
  }
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
  const auto start = std::chrono::steady_clock::now();
  size_t drawn_lines = 0;  // of the live display, to redraw over
  while (reader->Read(&event)) {
    const kiln::v1::Job& j = event.job();
    if (env.terminal) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string block = LiveProgress(j, elapsed);
      // Up to the display's first line, clear to the end, draw again.
      if (drawn_lines > 0) *env.out << "\x1b[" << drawn_lines << "F\x1b[J";
      *env.out << block << std::flush;
      drawn_lines = static_cast<size_t>(std::count(block.begin(), block.end(), '\n'));
    } else {
      *env.out << ProgressLine(JobStateName(j.state()), j.trials_done(), j.trials(), j.tuning_s(),
                               j.budget_s(), Printable(event.message()))
               << std::endl;
    }
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

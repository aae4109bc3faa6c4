#pragma once
// The final compile of a job, in a child process: a model that crashes the
// compiler (or makes it run away with time or memory) fails its job and
// nothing else. The child is the tracker's own binary started as
// `kiln-tracker compile-worker --db FILE --artifacts DIR --job ID`: it reads
// the job and its best records from the log database, compiles the stored
// model, puts the module into the artifact store and prints what it stored;
// the tracker records the artifact. The child runs under an address-space
// limit (setrlimit) and is killed at the time limit; it runs at niceness
// kCompileWorkerNice, below the agents' sessions.
//
// The fault tests inject a crashing compiler through RunCompileWorker's
// `faults` (kiln-tracker-faults only: no model at hand crashes today's).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "storage/artifact_store.h"
#include "storage/farm_store.h"
#include "storage/tuning_db.h"
#include "tracker/end_to_end.h"

namespace kiln::tracker {

inline constexpr int kCompileWorkerNice = 10;

struct CompileLimits {
  int64_t timeout_ms = 30 * 60 * 1000;
  int64_t memory_bytes = int64_t{16} << 30;  // address space of the child
  int64_t max_elements = int64_t{1} << 32;   // compiler::ImportOptions::max_elements
};

struct CompiledModule {
  std::string sha256;  // in the artifact store
  int64_t size = 0;
  compiler::CompileReport report;
};

// The model of a job with the best valid config of each workload in `db` for
// `target` among the records of `scope` (the job's user's: a config some
// other user's agent reported never compiles into their module); the default
// config where there is none; the module's bytes. The tasks `choices` names
// (what the job chose inside the model: end_to_end.h) take that config.
absl::StatusOr<std::string> CompileWithBestRecords(storage::TuningDb& db,
                                                   const compiler::Model& model,
                                                   const compiler::Target& target,
                                                   const storage::RecordScope& scope,
                                                   compiler::CompileReport* report,
                                                   const ModelChoices& choices = {});

// The choices a job's row holds (empty when it made none).
absl::StatusOr<ModelChoices> ChoicesOfJob(const storage::JobRow& row);

// Loads a stored model and checks that its bytes still hash to their name.
absl::StatusOr<compiler::Model> LoadStoredModel(const storage::ArtifactStore& store,
                                                const std::string& model_sha256,
                                                const compiler::ImportOptions& options);

// Compiles job `job_id` in a child process running `binary compile-worker`.
// INTERNAL naming the signal (and the tail of the child's log) when it
// crashed, which includes running out of its memory limit; DEADLINE_EXCEEDED
// when it ran past the time limit; or the compiler's own error.
absl::StatusOr<CompiledModule> CompileInSandbox(const std::string& binary,
                                                const std::string& db_path,
                                                const std::string& artifacts_dir,
                                                const std::string& job_id,
                                                const CompileLimits& limits);

// A fault the fault tests inject into the compile worker
// (tests/faults/tracker_faults_main.cc); the released tracker injects none.
class CompileFaults {
 public:
  virtual ~CompileFaults() = default;
  // After the job's model is loaded, before it is compiled.
  virtual void BeforeCompile() const = 0;
};

// `kiln-tracker compile-worker ...`: the child's side, with `faults` (nullptr:
// none). Returns its exit code; prints "module SHA256 SIZE KERNELS TUNED" on
// stdout, or "error CODE MESSAGE" (CODE an absl::StatusCode number).
int RunCompileWorker(const std::string& db_path, const std::string& artifacts_dir,
                     const std::string& job_id, int64_t max_elements,
                     const CompileFaults* faults = nullptr);

}  // namespace kiln::tracker

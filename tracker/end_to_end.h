#pragma once
// A job's whole model measured on the board (tuner/in_model.h decides from
// it): during the search, at a quarter, half and three quarters of the
// job's budget, the module of the best configs so far runs beside the
// defaults' (the end-to-end curve); after it, the tuned options of every
// task are confirmed or reverted by their time inside the model, and the
// job returns the faster module. Each measurement is one whole-model batch
// (dispatcher.h's MeasureWork::model) on an agent of the job's key, at the
// job's threads.
//
// What the job measured and chose is kept in its row (JobRow::
// end_to_end_json), so that the final compile (in its own process) builds
// the chosen configs, and `kiln job` shows the figures after a restart.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "storage/artifact_store.h"
#include "storage/tuning_db.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"
#include "tuner/in_model.h"

namespace kiln::tracker {

struct EndToEndPoint {
  int32_t trials = 0;
  tuner::LatencyStats untuned;
  tuner::LatencyStats tuned;
};

struct EndToEndReport {
  std::vector<EndToEndPoint> curve;
  // The final check ran: what follows holds.
  bool decided = false;
  tuner::LatencyStats untuned;
  tuner::LatencyStats tuned;
  bool returned_tuned = false;
  bool beyond_noise = false;
  int32_t tasks_tuned = 0;
  int32_t tasks_reverted = 0;
  int32_t threads = 0;  // 0: the agent's default
  std::string note;     // what was decided, or why the check did not run
  // Each task's config in the returned module, by workload key ("": the
  // template's default).
  std::map<std::string, std::string> choices;
};

std::string EndToEndToJson(const EndToEndReport& report);
// "" reads as an empty report; DATA_LOSS for text kiln did not write.
absl::StatusOr<EndToEndReport> EndToEndFromJson(const std::string& json);

// The configs a compile uses from a decided report: workload key -> config,
// nullopt for the default (tasks it does not name use the best record).
using ModelChoices = std::map<std::string, std::optional<compiler::Config>>;
absl::StatusOr<ModelChoices> ChoicesOf(const EndToEndReport& report);

// Each task's options for tuner::ChooseInModel: the default, then up to
// `k` tuned configs from the log (tuner::TunedConfigs), of `scope`.
absl::StatusOr<std::vector<tuner::InModelTask>> InModelTasks(storage::TuningDb& db,
                                                             const compiler::Model& model,
                                                             const compiler::Target& target, int k,
                                                             const storage::RecordScope& scope);

// The decision of the final check into the report: its figures, the
// choices the compile builds, the curve's last point (after `trials`).
void RecordDecision(const tuner::InModelResult& result,
                    const std::vector<tuner::InModelTask>& tasks, int32_t trials,
                    EndToEndReport* report);

// A stored model's files (the ONNX file first, then its external data,
// location -> sha256) as a whole-model batch sends them, with the import's
// input shapes and precision. NOT_FOUND for a file the store does not have.
absl::StatusOr<ModelWork> ModelWorkOf(const storage::ArtifactStore& store,
                                      const std::string& model_sha256,
                                      const std::map<std::string, std::string>& external_data,
                                      const compiler::ImportOptions& import);

struct FarmRunnerOptions {
  Dispatcher* dispatcher = nullptr;
  const Clock* clock = nullptr;
  // The job's fields (job id, key, target, user, priority, timing: its
  // threads); each run fills in the model and the variants.
  MeasureWork job;
  ModelWork model;
  int32_t rounds = 15;           // timed rounds (the batch's repeat)
  int32_t min_block_ms = 50;     // a round's block of runs of one variant lasts this long
  int64_t timeout_ms = 600000;   // for the agent to build, check and time every variant
  int64_t max_wait_ms = 900000;  // for a result, queueing included (UNAVAILABLE past it)
  int64_t deadline_unix_ms = 0;  // the job's (DEADLINE_EXCEEDED past it); 0: none
  std::function<bool()> stop;    // CANCELLED when it says so (polled)
  // Whether an agent of the key is connected to this tracker (whole-model
  // batches are not relayed): UNAVAILABLE once none has been for
  // no_agent_ms. Unset: not checked.
  std::function<bool()> agent_here;
  int64_t no_agent_ms = 60000;
};

// Runs variants of `tasks`' model as one whole-model batch on the farm and
// waits for its results. `tasks` must outlive the runner.
tuner::VariantRunner FarmVariantRunner(const std::vector<tuner::InModelTask>* tasks,
                                       FarmRunnerOptions options);

}  // namespace kiln::tracker

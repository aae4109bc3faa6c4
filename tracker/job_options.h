#pragma once
// What a job was submitted with besides its row (timing policy, input shapes,
// external data files), persisted as the job row's options_json so that a
// restarted tracker compiles the same thing.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/target.h"
#include "storage/artifact_store.h"
#include "tracker/dispatcher.h"
#include "tuner/search.h"

namespace kiln::tracker {

struct StoredOptions {
  TimingOptions timing;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::map<std::string, std::string> external_data;  // location -> sha256
  tuner::SearchKind strategy = tuner::SearchKind::kXgb;
  double budget_s = 0;           // wall-clock budget; 0: none
  int32_t early_stopping = 0;    // trials without gain; 0: off
  int64_t deadline_unix_ms = 0;  // the job fails past it; 0: none
  int32_t priority = 0;          // Dispatcher: higher goes first
  bool skip_end_to_end = false;  // no whole-model check (end_to_end.h)
  compiler::Precision precision = compiler::Precision::kFloat32;
};

// `t` with its unset (<= 0) fields taken from `d`.
TimingOptions WithDefaults(const TimingOptions& t, const TimingOptions& d);

std::string OptionsToJson(const StoredOptions& o);

// Reads back what OptionsToJson wrote; missing timing fields keep
// `defaults`. DATA_LOSS for a malformed dimension.
absl::StatusOr<StoredOptions> OptionsFromJson(const std::string& json,
                                              const TimingOptions& defaults);

// The import options of a stored job. External data comes from the uploaded
// files only: the tracker never opens a path an uploaded model names.
// Layouts are planned for CPU targets only (ImportOptions::plan_layouts).
// The constants the import may compute are bounded by the model's stored
// size (FoldedBytesBudget): a tiny model cannot take the tracker's memory.
compiler::ImportOptions ImportOptionsOf(const StoredOptions& o, const storage::ArtifactStore& store,
                                        const std::string& model_sha256, int64_t max_elements,
                                        const compiler::Target& target);

}  // namespace kiln::tracker

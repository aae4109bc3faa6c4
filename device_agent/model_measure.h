#pragma once
// Whole models measured on the board (a MeasureBatch with `model` set): each
// candidate is a variant of the model (a config per task, the defaults
// elsewhere), compiled here for the batch's target, loaded with the deploy
// runtime and run end to end, as the user's application will run it.
//
// - Every variant runs once first, and its outputs are compared with the
//   first variant's (the job sends the defaults first): a variant that
//   computes something else is a WRONG_RESULT.
// - The variants are timed interleaved, in `repeat` rounds (rotating which
//   goes first), each a block of `number` runs (grown until a block lasts
//   min_repeat_ms): a slow spell of a shared machine slows every variant
//   alike. Each round is one cost of the variant (seconds per run).
// - Then each variant runs with the kernel profile on (deploy/profile.h):
//   the time of each task's kernels inside the model's runs, by workload
//   key (MeasureResult.kernel_costs): the data that confirms or reverts a
//   task's tuned config.
// The runs use the threads the worker was started with (KILN_NUM_THREADS:
// the sandbox sets it from the timing policy's `threads`).

#include <string>
#include <vector>

#include "compiler/target.h"
#include "kiln/v1/agent.pb.h"

namespace kiln::agent {

// The results of a whole-model batch, one per candidate in order. `files_dir`
// holds the model's files named by their SHA-256 (FileStore). Never fails as
// a call: a model that cannot be imported makes every result an error.
std::vector<kiln::v1::MeasureResult> MeasureModelVariants(const kiln::v1::MeasureBatch& batch,
                                                          const std::string& files_dir,
                                                          const compiler::Target& target);

}  // namespace kiln::agent

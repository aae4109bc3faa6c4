#pragma once
// Whole models measured on the board (a MeasureBatch with `model` set): each
// candidate is a variant of the model (a config per task, the defaults
// elsewhere), compiled here for the batch's target, loaded with the deploy
// runtime and run end to end, as the user's application will run it.
//
// Verified against each other, timed interleaved and profiled as
// board/variants.h says (board::TimeVariants).
// The runs use the threads the worker was started with (KILN_NUM_THREADS:
// the sandbox sets it from the timing policy's `threads`).

#include <string>
#include <vector>

#include "board/variants.h"
#include "compiler/target.h"
#include "kiln/v1/agent.pb.h"

namespace kiln::agent {

// The variants of a whole-model batch compiled for `target`: one artifact
// per candidate ("" where it failed) and one result each (its error, or
// NONE with its build time), in order.
struct BuiltVariants {
  std::vector<kiln::v1::MeasureResult> results;
  std::vector<std::string> artifacts;
};
BuiltVariants BuildModelVariants(const kiln::v1::MeasureBatch& batch, const std::string& files_dir,
                                 const compiler::Target& target);
// The variants' times (board::TimeVariants, here or on a board) into the
// results of those that built.
void MergeVariantTimes(const std::vector<board::VariantTimes>& times, BuiltVariants* built);

// The results of a whole-model batch, one per candidate in order. `files_dir`
// holds the model's files named by their SHA-256 (FileStore). Never fails as
// a call: a model that cannot be imported makes every result an error.
std::vector<kiln::v1::MeasureResult> MeasureModelVariants(const kiln::v1::MeasureBatch& batch,
                                                          const std::string& files_dir,
                                                          const compiler::Target& target);

}  // namespace kiln::agent

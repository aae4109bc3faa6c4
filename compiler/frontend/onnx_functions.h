#pragma once
// Inlining of model-local ONNX functions (ModelProto.functions) into the
// main graph, before import. INVALID_ARGUMENT for calls that do not fit
// their function, functions defined twice, recursion deeper than 16 levels
// or a graph of more than 2^20 nodes once inlined.

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::compiler {

absl::Status InlineLocalFunctions(onnx::ModelProto& model);

}  // namespace kiln::compiler

#pragma once
// ONNX ModelProto -> graph IR, with shape inference. Float32 only, static
// shapes only. INVALID_ARGUMENT ("not an ONNX model: ...") for other bytes;
// UNIMPLEMENTED naming the operator, dtype or feature that kiln lacks.

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/graph/graph.h"

namespace kiln::compiler {

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnx(std::string_view model_bytes);

}  // namespace kiln::compiler

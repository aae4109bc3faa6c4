#pragma once
// ONNX ModelProto -> graph IR, with shape inference. INVALID_ARGUMENT ("not an
// ONNX model: ...") for other bytes; UNIMPLEMENTED naming the operator, dtype
// or feature that kiln lacks.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/graph/graph.h"
#include "compiler/target.h"

namespace kiln::compiler {

struct ImportOptions {
  // Shapes of graph inputs, by input name: symbolic or missing dimensions
  // take the given value; a given shape must agree with every dimension the
  // model states. INVALID_ARGUMENT naming the input and the dimension when a
  // dimension is unknown and not given, when a given shape contradicts the
  // model, and when a name is not an input of the model.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Tensors kept in external data files (data_location EXTERNAL): the file
  // for each `location`, looked up here first (the tracker's uploaded files;
  // nothing else is ever opened when external_data_dir is empty).
  std::map<std::string, std::string> external_files;
  // When not empty, other locations are resolved relative to this folder
  // (the model's own); absolute locations and locations that leave the
  // folder (.., symbolic links) are rejected.
  std::string external_data_dir;
  // The most elements any one tensor may have: graph inputs, initializers
  // and every value the importer infers. A model above it is refused with
  // INVALID_ARGUMENT naming the input, tensor or node. Capped at 2^32.
  int64_t max_elements = int64_t{1} << 32;
  // The most bytes of constants the import may compute (folded nodes,
  // ConstantOfShape, Range, views of constants; not the model's own
  // initializers and Constant nodes): a model above it is refused with
  // INVALID_ARGUMENT naming the node, before the node's data is allocated.
  // A few bytes of ONNX can ask for gigabytes here; a service importing
  // untrusted models sets it from the model's size.
  int64_t max_folded_bytes = int64_t{4} << 30;
  // Channel-blocked layouts for the CPU's convolutions (PlanLayouts); off
  // for a GPU target (Target::is_gpu), whose templates read NCHW.
  bool plan_layouts = true;
  // The precision of matrix products by constant weights: float32, or
  // bfloat16 products summed in float32 (UseBf16Products; ParsePrecision).
  Precision precision = Precision::kFloat32;
  // With precision bf16: convolutions too (conv2d_bf16.cc, two bfloat16
  // products per lane by vdpbf16ps), where that beats float32. Off where
  // the CPU has AMX-BF16: Intel's vdpbf16ps issues on one port, so its two
  // products per lane only match two float32 FMAs (ResNet-50 0.73x of its
  // float32 build on a Sapphire Rapids); there only the convolutions that
  // AMX tiles compute are bf16 (ops::Bf16ConvAmxPays).
  bool bf16_convs = true;

  // plan_layouts and bf16_convs as `target` wants them.
  void SetTarget(const Target& target) {
    plan_layouts = !target.is_gpu();
    bf16_convs = !target.HasFeature("amx-bf16");
  }
};

// ImportOptions::max_folded_bytes for a model of `model_bytes` (its file and
// external data): 64 MiB, and 16 bytes more for each byte of the model. A
// quantized weight dequantized and transposed at compile time is 8 times
// its int8 bytes, and onnxruntime's static QDQ ResNet-50 (its BatchNorms
// fused by quant_pre_process) folds 10.8 bytes for each byte of its file,
// which 8 refused.
inline constexpr int64_t kFoldedBytesPerModelByte = 16;
inline int64_t FoldedBytesBudget(int64_t model_bytes) {
  return (int64_t{64} << 20) + kFoldedBytesPerModelByte * model_bytes;
}

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnx(std::string_view model_bytes,
                                                  const ImportOptions& options = {});
// Parses the file as it is read, so the model's bytes are not held twice.
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path,
                                                      const ImportOptions& options = {});

// "1x3x224x224" -> {1, 3, 224, 224}: every dimension a positive integer.
absl::StatusOr<std::vector<int64_t>> ParseShape(std::string_view text);
// "NAME=1x3x224x224" (the --input-shape flag); the name may contain '='
// only before the last one.
absl::Status ParseInputShape(std::string_view text,
                             std::map<std::string, std::vector<int64_t>>* shapes);

}  // namespace kiln::compiler

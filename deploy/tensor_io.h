#pragma once
// float32 tensors from and to files, without protobuf or NumPy: ONNX
// TensorProto `.pb` (a hand-written wire-format decoder) and NumPy `.npy`.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::deploy {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // empty: a scalar
  std::vector<float> data;     // row-major
};

// ONNX TensorProto bytes: dims, data_type (must be 1 = FLOAT), name, and the
// values as float_data (packed or not) or raw_data (little-endian).
absl::StatusOr<Tensor> ParseTensorProto(std::string_view bytes);
// A TensorProto with dims, data_type 1, name and raw_data.
std::string SerializeTensorProto(const Tensor& tensor);

// NumPy .npy bytes (format 1.0, 2.0 or 3.0), dtype '<f4' or '<f8' (converted
// to float32), C order.
absl::StatusOr<Tensor> ParseNpy(std::string_view bytes);

// Reads a file as .npy (by its magic) or else as a TensorProto.
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);
absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& tensor);

absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

}  // namespace kiln::deploy

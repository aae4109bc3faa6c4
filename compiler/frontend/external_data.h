#pragma once
// ONNX external data (tensors whose bytes live in files beside the model,
// `onnx.save_model(..., save_as_external_data=True)`): finding which files a
// model names, and resolving a location safely under the model's folder.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::compiler {

// The distinct `location`s of the model's initializers kept in external data,
// in first-use order. Scans the file's wire format without holding it: a model
// with inline weights costs no memory to scan.
absl::StatusOr<std::vector<std::string>> ExternalDataLocations(const std::string& model_path);

// The file `location` names under `dir`. INVALID_ARGUMENT when it is absolute
// or leaves the folder (a ".." part, or a symbolic link pointing out).
absl::StatusOr<std::string> ResolveExternalData(const std::string& dir,
                                                const std::string& location);

}  // namespace kiln::compiler

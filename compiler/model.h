#pragma once
// The compiler's model-level API: import an ONNX model, list its tuning tasks,
// and compile it to an artifact (docs/artifact-format.md).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/kernel.h"

namespace kiln::compiler {

class Graph;  // compiler/graph/graph.h

struct Task {
  Workload workload;
  int occurrences = 1;  // how many fused groups of the model share it
};

class Model {
 public:
  // Parses, checks and shape-infers an ONNX ModelProto, then runs the graph
  // passes (constant folding, fusion). INVALID_ARGUMENT for bytes that are not
  // an ONNX model; UNIMPLEMENTED naming the operator for unsupported ops.
  // `options`: input shapes and where external data lives (onnx_import.h).
  static absl::StatusOr<Model> FromOnnx(std::string_view model_bytes,
                                        const ImportOptions& options = {});
  // Reads the file as it parses it (never holding its bytes whole). External
  // data is found only where `options` says: pass the model's folder as
  // external_data_dir to import a model saved with external data.
  static absl::StatusOr<Model> FromOnnxFile(const std::string& path,
                                            const ImportOptions& options = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // One task per distinct workload, in first-use order.
  const std::vector<Task>& Tasks() const;
  const Graph& graph() const;
  // SHA-256 (hex) of the ONNX bytes (of the .onnx file, external data aside).
  const std::string& source_sha256() const;

 private:
  explicit Model(std::unique_ptr<Graph> graph, std::string sha);
  std::unique_ptr<Graph> graph_;
  std::vector<Task> tasks_;
  std::string source_sha256_;
};

// The config to use for a workload: the best tuned record, or nullopt for the
// template's default.
using ConfigLookup = std::function<std::optional<Config>(const Workload&)>;

struct CompileOptions {
  LowerOptions lower;
};

struct CompileReport {
  int kernels = 0;        // kernels in the module
  int tuned_kernels = 0;  // of which the lookup gave a config
};

// The artifact's bytes: manifest, the code (a shared object for a CPU; the
// device program and its launch plan for a GPU: codegen/module.h) and weights.
absl::StatusOr<std::string> CompileModel(const Model& model, const Target& target,
                                         const ConfigLookup& lookup,
                                         const CompileOptions& options = {},
                                         CompileReport* report = nullptr);

}  // namespace kiln::compiler

#pragma once
// The graph IR: a value table and nodes in topological order. After import
// every compute node already carries a Workload (conv2d/dense/pool2d/pool3d/
// eltwise); views (Reshape, Flatten, Identity, Dropout) only reinterpret a
// buffer. The passes (graph/passes.h) fold constants, fold batch norms and
// fuse epilogues.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "compiler/workload.h"

namespace kiln::compiler {

struct Value {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  // A constant's elements, row-major, DTypeBytes(dtype) bytes each.
  std::optional<std::vector<uint8_t>> bytes;
  bool is_input = false;  // a graph input (not constant)
  int64_t NumElements() const;
  bool IsConstant() const { return bytes.has_value(); }

  // A constant's elements converted to double / int64 (any dtype).
  std::vector<double> ToDoubles() const;
  std::vector<int64_t> ToInt64s() const;
  std::vector<float> ToFloats() const;
  // Sets the constant from values converted to `dtype`.
  void SetFloats(const std::vector<float>& v);    // dtype = float32
  void SetInt64s(const std::vector<int64_t>& v);  // dtype = int64
};

// The precision of a model's matrix products (ImportOptions::precision):
// float32, or bfloat16 products summed in float32 (--precision bf16).
enum class Precision { kFloat32, kBfloat16 };
// "fp32" or "bf16"; INVALID_ARGUMENT saying what is accepted otherwise.
absl::StatusOr<Precision> ParsePrecision(std::string_view name);
const char* PrecisionName(Precision p);

enum class NodeKind {
  kCompute,    // runs `workload`; inputs follow workload.Signature() order
  kView,       // output aliases inputs[0] with another shape
  kBatchNorm,  // inputs: x, scale, bias, mean, var (constants); removed by passes
};

struct Node {
  NodeKind kind = NodeKind::kCompute;
  std::string name;       // the ONNX node's name (or its first output)
  std::string op_type;    // the ONNX op it came from, e.g. "Conv"
  Workload workload;      // kCompute only
  float epsilon = 1e-5f;  // kBatchNorm only
  std::vector<int> inputs;
  int output = -1;
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order
  std::vector<int> inputs;  // graph inputs (non-constant), in ONNX order
  std::vector<int> outputs;

  int AddValue(Value v);
  // -1 when none has that name.
  int FindValue(const std::string& name) const;
  // Nodes reading value `v` (one entry per node, even if it reads it twice).
  std::vector<int> Consumers(int v) const;
  bool IsOutput(int v) const;
  // A readable dump of the graph for tests and --dump-ir.
  std::string ToString() const;
};

}  // namespace kiln::compiler

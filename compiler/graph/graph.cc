#include "compiler/graph/graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/str.h"

namespace kiln::compiler {

int64_t Value::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<double> Value::ToDoubles() const {
  KILN_CHECK(bytes) << "value '" << name << "' is not a constant";
  std::vector<double> out(NumElements());
  for (int64_t i = 0; i < NumElements(); ++i) out[i] = ElementToDouble(dtype, bytes->data(), i);
  return out;
}

std::vector<float> Value::ToFloats() const {
  KILN_CHECK(bytes) << "value '" << name << "' is not a constant";
  std::vector<float> out(NumElements());
  for (int64_t i = 0; i < NumElements(); ++i)
    out[i] = static_cast<float>(ElementToDouble(dtype, bytes->data(), i));
  return out;
}

std::vector<int64_t> Value::ToInt64s() const {
  KILN_CHECK(bytes) << "value '" << name << "' is not a constant";
  std::vector<int64_t> out(NumElements());
  for (int64_t i = 0; i < NumElements(); ++i) out[i] = ElementToInt64(dtype, bytes->data(), i);
  return out;
}

void Value::SetFloats(const std::vector<float>& v) {
  dtype = DType::kFloat32;
  bytes.emplace(v.size() * 4);
  std::memcpy(bytes->data(), v.data(), v.size() * 4);
}

void Value::SetInt64s(const std::vector<int64_t>& v) {
  dtype = DType::kInt64;
  bytes.emplace(v.size() * 8);
  std::memcpy(bytes->data(), v.data(), v.size() * 8);
}

int Graph::AddValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

int Graph::FindValue(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> Graph::Consumers(int v) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& in = nodes[i].inputs;
    if (std::find(in.begin(), in.end(), v) != in.end()) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool Graph::IsOutput(int v) const {
  return std::find(outputs.begin(), outputs.end(), v) != outputs.end();
}

std::string Graph::ToString() const {
  std::string out;
  auto name = [&](int v) {
    const Value& val = values[v];
    return StrCat(val.name, "[", StrJoin(val.shape, "x"),
                  val.dtype == DType::kFloat32 ? "" : StrCat(" ", DTypeName(val.dtype)), "]",
                  val.IsConstant() ? "c" : "");
  };
  for (int v : inputs) out += StrCat("input ", name(v), "\n");
  for (const Node& n : nodes) {
    std::vector<std::string> ins;
    for (int v : n.inputs) ins.push_back(name(v));
    std::string what = n.kind == NodeKind::kCompute ? n.workload.Canonical()
                       : n.kind == NodeKind::kView  ? std::string("view")
                                                    : std::string("batchnorm");
    out += StrCat(name(n.output), " = ", what, "(", StrJoin(ins, ", "), ")  # ", n.op_type, "\n");
  }
  for (int v : outputs) out += StrCat("output ", name(v), "\n");
  return out;
}

absl::StatusOr<Precision> ParsePrecision(std::string_view name) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBfloat16;
  if (name == "fp16") {
    return absl::InvalidArgumentError(
        "precision 'fp16' is not supported yet: kiln would compute float16 products summed in "
        "float32, and the instructions that do (AMX-FP16, AArch64's FMLAL) are not used yet "
        "(AVX512-FP16 sums in float16); use bf16 (bfloat16 products summed in float32) or fp32");
  }
  return absl::InvalidArgumentError(StrCat("unknown precision '", name, "': fp32 or bf16"));
}

const char* PrecisionName(Precision p) { return p == Precision::kBfloat16 ? "bf16" : "fp32"; }

}  // namespace kiln::compiler

#pragma once
// Runs a graph with the reference kernels (tests only): every value in its
// own element type (the 8-bit tensors of a quantized graph as bytes), the
// results converted to float.
#include <cstring>
#include <map>
#include <vector>

#include "base/dtype.h"
#include "compiler/graph/graph.h"
#include "compiler/kernel.h"

namespace kiln::compiler::testing {

inline std::map<int, std::vector<float>> EvaluateGraph(
    const Graph& g, const std::vector<std::vector<float>>& inputs) {
  std::map<int, std::vector<uint8_t>> bytes;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const std::vector<float>& in = inputs.at(i);
    std::vector<uint8_t> b(in.size() * sizeof(float));
    std::memcpy(b.data(), in.data(), b.size());
    bytes[g.inputs[i]] = std::move(b);
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].IsConstant()) bytes[static_cast<int>(v)] = *g.values[v].bytes;
  }
  for (const Node& n : g.nodes) {
    if (n.kind == NodeKind::kView) {
      bytes[n.output] = bytes.at(n.inputs[0]);
      continue;
    }
    std::vector<const void*> ins;
    for (int v : n.inputs) ins.push_back(bytes.at(v).data());
    const Value& o = g.values[n.output];
    std::vector<uint8_t> out(static_cast<size_t>(o.NumElements() * DTypeBytes(o.dtype)) + 8);
    if (!RunReference(n.workload, ins, out.data()).ok()) return {};
    bytes[n.output] = std::move(out);
  }
  std::map<int, std::vector<float>> vals;
  for (const auto& [v, b] : bytes) {
    const Value& x = g.values[v];
    std::vector<float> f(static_cast<size_t>(x.NumElements()));
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      f[static_cast<size_t>(i)] = static_cast<float>(ElementToDouble(x.dtype, b.data(), i));
    }
    vals[v] = std::move(f);
  }
  return vals;
}

}  // namespace kiln::compiler::testing

#pragma once
// Runs a graph with the reference kernels (tests only).
#include <map>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/kernel.h"

namespace kiln::compiler::testing {

inline std::map<int, std::vector<float>> EvaluateGraph(
    const Graph& g, const std::vector<std::vector<float>>& inputs) {
  std::map<int, std::vector<float>> vals;
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i]] = inputs.at(i);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].IsConstant()) vals[static_cast<int>(v)] = g.values[v].ToFloats();
  }
  for (const Node& n : g.nodes) {
    if (n.kind == NodeKind::kView) {
      vals[n.output] = vals.at(n.inputs[0]);
      continue;
    }
    std::vector<const void*> ins;
    for (int v : n.inputs) ins.push_back(vals.at(v).data());
    std::vector<float> out(g.values[n.output].NumElements());
    if (!RunReference(n.workload, ins, out.data()).ok()) return {};
    vals[n.output] = std::move(out);
  }
  return vals;
}

}  // namespace kiln::compiler::testing

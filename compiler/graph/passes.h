#pragma once
// Graph passes, run in this order by RunGraphPasses.

#include "absl/status/status.h"
#include "compiler/graph/graph.h"

namespace kiln::compiler {

// Batch norms after a single-consumer Conv with constant weights fold into the
// conv's weight and bias; others become eltwise mul + add with constants.
absl::Status FoldBatchNorms(Graph& graph);
// Evaluates every node whose inputs are all constants (reference kernels).
absl::Status FoldConstants(Graph& graph);
// Evaluates one node whose inputs are all constants into its output value.
absl::Status FoldNode(Graph& graph, const Node& node);
// Fuses Relu/Add/Mul chains into the epilogue of the preceding anchor.
void FuseEpilogues(Graph& graph);
// TVM's FuseOps for the generic operators: an injective producer (eltwise or
// an injective generic op) whose only consumer is an injective or reduction
// generic op is computed inside the consumer's kernel (Workload::prologue),
// so the group is one task whose key covers the whole group's computation.
void FuseInjective(Graph& graph);
// Drops nodes whose outputs no graph output needs.
void EliminateDeadNodes(Graph& graph);

absl::Status RunGraphPasses(Graph& graph);

// The value whose buffer `v` shares (following views back).
int AliasRoot(const Graph& graph, int v);

}  // namespace kiln::compiler

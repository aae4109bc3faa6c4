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
// Operator fusion (TVM's FuseOps), decided by the ops' patterns
// (compiler/ops/registry.h), in four steps: FuseEpilogues (an eltwise into
// the epilogue of the op that makes its input, any pattern but opaque),
// FuseQuantizedAdds (a quantized residual add into an integer conv's
// epilogue), FoldRequantScales (the fused epilogues' requantization in one
// multiply) and FuseInjective (elementwise, broadcast and injective
// producers into generic consumers up to reductions, as prologues). Each
// step is declared below.
void FuseOps(Graph& graph);
// Fuses eltwise chains (Relu/Add/Mul and every unary and binary function)
// into the epilogue of the op that makes their input.
void FuseEpilogues(Graph& graph);
// The residual add of a quantized network (generic qadd of two 8-bit
// values, a QDQ Add) joins the epilogue of the integer conv that makes one
// of its operands, when that conv has no other consumer and the other
// operand is ready before it: the conv's bytes, clipped instead of cast,
// dequantized, plus the other operand's, then the add's own quantization,
// (v - za) * sa / sb + b - zb, times sb, in float as qadd computes it. One
// pass over the output less per residual block. Runs before
// FoldRequantScales, which folds the last scale into the add's
// quantization.
void FuseQuantizedAdds(Graph& graph);
// Requantization in one multiply: an epilogue that scales by constants and
// then quantizes, y * a (+ b) (relu) / s then round (the Conv of a QDQ graph
// and its QuantizeLinear), scales by a / s (and adds b / s) instead, s a
// positive constant scalar: onnxruntime's fused requantization, and a
// division less per output (vdivps: a third of an int8 1x1 layer's
// epilogue). Rounding may differ from the division's at ties (one step).
void FoldRequantScales(Graph& graph);
// The generic operators' fusion: a producer of a pattern up to injective
// (eltwise, or such a generic op) whose only consumer is a generic op of a
// pattern up to a reduction is computed inside the consumer's kernel
// (Workload::prologue), so the group is one task whose key covers the
// whole group's computation.
void FuseInjective(Graph& graph);
// Drops nodes whose outputs no graph output needs.
void EliminateDeadNodes(Graph& graph);
// Layout planning (TVM's AlterOpLayout, oneDNN's "any" format): the
// activations that convolutions and pools pass to each other are stored in
// channel blocks, NCHW[16]c (kChannelBlock), instead of NCHW. A 4-D float32
// value is blocked when its producer can write blocks (conv2d, ungrouped or
// depthwise, or pool2d, on a multiple of 16 channels, whose epilogue
// operands all have the output's shape) and every consumer can read them (a
// conv2d's or pool2d's data, an ungrouped conv2d with K a multiple of 16 or
// a depthwise conv2d, which writes blocks only from blocks; an epilogue
// operand only of a blocked output); never a graph output. Everywhere else
// the layouts meet inside a kernel: a conv that reads NCHW packs it as it
// always did, one that writes NCHW for an NCHW consumer writes it in its
// epilogue, so no transform runs as a kernel of its own. The nodes'
// in_block / out_block and the values' shapes (now [N, C/16, H, W, 16]) say
// the result; the weights are packed at compile time as before. The int8
// convolutions (ops::Int8Conv) pass their bytes the same way: written in
// blocks (conv_int8_blocked.cc) with their per-channel requantizing
// operands, [1, K, 1, 1], read as [1, K/16, 1, 1, 16] (the same bytes), and
// read from blocks by either int8 conv template (a depthwise one only when
// it writes blocks, conv_int8_depthwise.cc); their generic workloads' in0 /
// shape ints name the blocked shapes.
void PlanLayouts(Graph& graph);

// --precision bf16: every dense (MatMul, Gemm) by a constant float32 B not
// batched, and every ungrouped conv2d by constant weights that writes
// channel blocks (but 3x3 stride-1 layers of 20x20 pixels or more, faster in
// float32 by Winograd, and layers of few products per input value, K * R * S
// < 32), computes its products in bfloat16, summed in float32
// (the workload's bf16=1: ops/dense_bf16.cc, ops/conv2d_bf16.cc; their
// reference rounds both operands). `convs` false (a CPU with AMX-BF16):
// only the convolutions AMX tiles compute (ops::Bf16ConvAmxPays).
void UseBf16Products(Graph& graph, bool convs = true);

// plan_layouts=false leaves every value in its ONNX layout (GPU targets).
absl::Status RunGraphPasses(Graph& graph, bool plan_layouts = true,
                            Precision precision = Precision::kFloat32, bool bf16_convs = true);

// The value whose buffer `v` shares (following views back).
int AliasRoot(const Graph& graph, int v);

}  // namespace kiln::compiler

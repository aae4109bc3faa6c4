#pragma once
// Generic tensor operators: one compute definition each in the tensor IR,
// scheduled by one template (compiler/ops/generic_template.cc) chosen by the op's
// pattern. A workload of a generic op has inputs in0, in1, ... (their
// shapes), the output `shape`, optional `dtypes`, and the attributes below.
//
//   reduce        axes (sorted, of in0), keep (0/1), kind (0 sum, 1 max,
//                 2 min, 3 prod), pre (0 none, 1 abs, 2 square)
//   argreduce     axis, keep, kind (0 argmax, 1 argmin), last (select_last_index)
//   transpose     perm
//   concat        axis; any number of inputs
//   slice         starts, steps (one per dim of in0; the output shape gives
//                 the count)
//   gather        axis; in1 holds indices (negative ones count from the end;
//                 out-of-range ones are clamped, never read out of bounds)
//   gather_elements  axis; in1 indices of the output's shape
//   pad           pads (begins then ends, may be negative), mode (0 constant,
//                 1 reflect, 2 edge, 3 wrap), floats value
//   where         in0 bool condition, in1, in2; all broadcast to `shape`
//   tile          (output shape / input shape gives the repeats)
//   cumsum        axis, exclusive, reverse
//   trilu         upper (0/1), k
//   onehot        axis; in0 indices, in1 values [off, on]; depth = output dim
//   eyelike       k (no inputs but in0, whose shape is the output's)
//   resize        mode (0 nearest, 1 linear, 2 cubic), coord (0 half_pixel,
//                 1 half_pixel_symmetric, 2 pytorch_half_pixel, 3 align_corners,
//                 4 asymmetric, 5 tf_crop_and_resize), nearest (one per axis:
//                 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil),
//                 exclude (exclude_outside, 0/1); floats scale<d> (per axis d;
//                 absent: output / input size), roi_lo<d>, roi_hi<d>
//                 (tf_crop_and_resize; default 0, 1), cubic_a (-0.75),
//                 extrapolation (0), antialias (0/1: linear/cubic filters
//                 widened by 1/scale when downsampling). Taps read clamped
//                 indices; linear/cubic need a float input and accumulate in
//                 float64.
//   gather_nd     batch (batch_dims); in1 indices [..., k]
//   scatter       mode (0 elements, 1 ND), axis, reduction (0 none, 1 add,
//                 2 mul, 3 max, 4 min); in0 data, in1 indices, in2 updates
//   topk          axis, largest (0/1), part (0 values, 1 indices); output's
//                 dim on the axis is k; sorted, ties by lower index
//   matmul        zp (0/1: in2, in3 zero points of A ([1]/[M]) and B
//                 ([1]/[N])); A and B padded to the output's rank; any dtype,
//                 accumulating in the output's
//   conv          strides, dilations, pads (begins), group, transposed, has_bias
//                 (in2 bias [M]), zp (then x and w zero points); N-D, any dtype
//   window        kernel, strides, dilations, pads (begins), kind (0 max, 1 Lp
//                 with floats p, 2 argmax flat index, order 0/1)
//   einsum        t<k> letters of input k's dims, out the output's letters,
//                 extent each letter's size
//   lrn           size; floats alpha, beta, bias
//   quantize      axis, block; in0 x, in1 scale, in2 zero point (optional)
//   dequantize    axis, block; in0 x, in1 scale, in2 zero point (optional)
//
// The compute definitions live in generic.cc (shape and data movement),
// generic_linalg.cc (contractions, windows, quantization) and
// generic_index.cc (gather_nd, scatter, topk), generic_resize.cc (resize).
//
// Epilogues apply to every generic op's output as to any other anchor.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/te/tensor.h"
#include "compiler/workload.h"

namespace kiln::compiler::ops {}  // namespace kiln::compiler::ops

// One importer per ONNX operator: attributes, shape inference and the
// workload (or view) each node becomes.
#include <cstring>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::Spatial(const onnx::NodeProto& node, const Shape& in_hw, const Shape& kernel,
                               const Shape& stride, const Shape& dilation, bool ceil_mode,
                               Shape* pads, Shape* out_hw) {
  std::string auto_pad = AttrString(node, "auto_pad", "NOTSET");
  const size_t n = in_hw.size();
  if (pads->size() != 2 * n)
    return Unimplemented(node, StrCat("pads must have ", 2 * n, " values"));
  if (kernel.size() != n || stride.size() != n || dilation.size() != n) {
    return Unimplemented(node, StrCat("kernel_shape/strides/dilations need ", n, " values"));
  }
  out_hw->assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (stride[i] <= 0 || dilation[i] <= 0 || kernel[i] <= 0) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': bad stride/dilation/kernel"));
    }
    // Bounded so that the arithmetic below cannot overflow.
    if (stride[i] > kMaxElements || kernel[i] > kMaxElements ||
        dilation[i] > kMaxElements / kernel[i]) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': stride/dilation/kernel too large"));
    }
    if ((*pads)[i] < 0 || (*pads)[i + n] < 0 || (*pads)[i] > kMaxElements ||
        (*pads)[i + n] > kMaxElements) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': pads [", StrJoin(*pads, ","), "] out of range"));
    }
    int64_t ext = (kernel[i] - 1) * dilation[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in_hw[i] + stride[i] - 1) / stride[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * stride[i] + ext - in_hw[i]);
      int64_t small = total / 2, big = total - small;
      (*pads)[i] = auto_pad == "SAME_UPPER" ? small : big;
      (*pads)[i + n] = auto_pad == "SAME_UPPER" ? big : small;
      (*out_hw)[i] = out;
      continue;
    }
    if (auto_pad == "VALID") {
      (*pads)[i] = (*pads)[i + n] = 0;
    } else if (auto_pad != "NOTSET" && !auto_pad.empty()) {
      return Unimplemented(node, StrCat("auto_pad '", auto_pad, "' is not supported"));
    }
    int64_t span = in_hw[i] + (*pads)[i] + (*pads)[i + n] - ext;
    if (span < 0) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': kernel larger than input"));
    }
    int64_t out = ceil_mode ? (span + stride[i] - 1) / stride[i] + 1 : span / stride[i] + 1;
    // The last window must start inside the input or its leading padding.
    if (ceil_mode && (out - 1) * stride[i] >= in_hw[i] + (*pads)[i]) --out;
    (*out_hw)[i] = out;
  }
  return absl::OkStatus();
}

absl::Status Importer::ImportConv(const onnx::NodeProto& node) {
  // 3-D and wider, and other float dtypes: the generic N-D conv
  // (onnx_linalg_ops.cc).
  if (auto in = In(node, 0);
      in.ok() && (V(*in).shape.size() >= 5 || V(*in).dtype != DType::kFloat32)) {
    bool handled = false;
    return ImportLinalg(node, &handled);
  }
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  auto wt = InF(node, 1);
  if (!wt.ok()) return wt.status();
  Shape xs = g_->values[*x].shape, ws = g_->values[*wt].shape;
  const bool one_d = xs.size() == 3 && ws.size() == 3;
  if (one_d) {
    xs.insert(xs.begin() + 2, 1);
    ws.insert(ws.begin() + 2, 1);
  }
  if (xs.size() != 4 || ws.size() != 4) {
    return Unimplemented(node, StrCat("only 1-D and 2-D convolution is supported (input rank ",
                                      g_->values[*x].shape.size(), ")"));
  }
  int64_t groups = AttrInt(node, "group", 1);
  if (groups <= 0 || xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] * groups != xs[1]) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "': weight [", StrJoin(ws, ","),
                                             "] does not match input [", StrJoin(xs, ","),
                                             "] with group ", groups));
  }
  Shape kernel = Lifted(node, "kernel_shape", {ws[2], ws[3]}, one_d);
  if (kernel != Shape{ws[2], ws[3]}) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': kernel_shape does not match weight"));
  }
  Shape stride = Lifted(node, "strides", {1, 1}, one_d);
  Shape dilation = Lifted(node, "dilations", {1, 1}, one_d);
  if (stride.size() != 2 || dilation.size() != 2)
    return Unimplemented(node, "bad strides/dilations");
  Shape pads = Lifted(node, "pads", {0, 0, 0, 0}, one_d), ohw;
  if (auto s = Spatial(node, {xs[2], xs[3]}, kernel, stride, dilation, false, &pads, &ohw);
      !s.ok()) {
    return s;
  }
  std::vector<int> inputs = {*x, *wt};
  bool bias = HasIn(node, 2);
  if (bias) {
    auto b = InF(node, 2);
    if (!b.ok()) return b.status();
    if (g_->values[*b].shape != Shape{ws[0]}) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bias must be [K]"));
    }
    inputs.push_back(*b);
  }
  Shape out = {xs[0], ws[0], ohw[0], ohw[1]};
  if (!one_d) {
    auto q =
        QuantizedConv(node, *x, *wt, bias ? inputs[2] : -1, stride, pads, dilation, groups, out);
    if (!q.ok() || *q) return q.status();
  }
  Workload w;
  w.op = Op::kConv2d;
  w.ints = {{"N", {xs[0]}},         {"C", {xs[1]}},       {"H", {xs[2]}},
            {"W", {xs[3]}},         {"K", {ws[0]}},       {"R", {ws[2]}},
            {"S", {ws[3]}},         {"stride", stride},   {"pad", pads},
            {"dilation", dilation}, {"groups", {groups}}, {"bias", {bias ? 1 : 0}},
            {"OH", {ohw[0]}},       {"OW", {ohw[1]}}};
  if (one_d) out.erase(out.begin() + 2);  // same layout as the 2-D kernel's output
  if (auto st = AddCompute(node, std::move(w), inputs, NewValue(node, 0, out)); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status Importer::ImportPool(const onnx::NodeProto& node, bool max, bool global) {
  // MaxPool of other dtypes, with Indices or column-major indices: the
  // generic window op (onnx_linalg_ops.cc).
  if (max && !global) {
    auto in = In(node, 0);
    if (!in.ok()) return in.status();
    const bool indices = node.output_size() > 1 && !node.output(1).empty();
    const DType dt = V(*in).dtype;
    if ((dt == DType::kUInt8 || dt == DType::kInt8) && !indices && V(*in).shape.size() == 4) {
      // 8-bit bytes (onnxruntime's operator form pools them as they are):
      // the float pool of their exact float values, cast back, which fuses
      // into the kernels around it as a QDQ MaxPool does.
      const std::string base = Name(node);
      auto f = Emit(base, "Cast", {node.input(0)}, IntAttr("to", onnx::TensorProto::FLOAT));
      if (!f.ok()) return f.status();
      auto p = Emit(base, "MaxPool", {*f}, [&node](onnx::NodeProto& n) {
        for (const auto& a : node.attribute()) *n.add_attribute() = a;
      });
      if (!p.ok()) return p.status();
      const int to = dt == DType::kUInt8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
      return StatusOf(Emit(base, "Cast", {*p}, IntAttr("to", to), node.output(0)));
    }
    if (dt != DType::kFloat32 || indices) {
      bool handled = false;
      return ImportLinalg(node, &handled);
    }
  }
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  Shape xs = g_->values[*x].shape;
  const bool one_d = xs.size() == 3;
  if (one_d) xs.insert(xs.begin() + 2, 1);
  if (xs.size() != 4 && xs.size() != 5) {
    return Unimplemented(
        node, StrCat("only 1-D, 2-D and 3-D pooling is supported (input rank ", xs.size(), ")"));
  }
  if (node.output_size() > 1 && !node.output(1).empty()) {
    return Unimplemented(node, "the Indices output is not supported");
  }
  if (AttrInt(node, "storage_order", 0) != 0) return Unimplemented(node, "storage_order 1");
  if (xs.size() == 5) return ImportPool3d(node, *x, xs, max, global);
  Shape kernel, stride, dilation, pads, ohw;
  if (global) {
    kernel = {xs[2], xs[3]};
    stride = {1, 1};
    dilation = {1, 1};
    pads = {0, 0, 0, 0};
    ohw = {1, 1};
  } else {
    kernel = Lifted(node, "kernel_shape", {}, one_d);
    stride = Lifted(node, "strides", {1, 1}, one_d);
    dilation = Lifted(node, "dilations", {1, 1}, one_d);
    pads = Lifted(node, "pads", {0, 0, 0, 0}, one_d);
    if (kernel.size() != 2 || stride.size() != 2 || dilation.size() != 2) {
      return Unimplemented(node, "kernel_shape/strides/dilations need 2 values");
    }
    if (auto s = Spatial(node, {xs[2], xs[3]}, kernel, stride, dilation,
                         AttrInt(node, "ceil_mode", 0) != 0, &pads, &ohw);
        !s.ok()) {
      return s;
    }
  }
  Workload w;
  w.op = Op::kPool2d;
  w.ints = {{"N", {xs[0]}},
            {"C", {xs[1]}},
            {"H", {xs[2]}},
            {"W", {xs[3]}},
            {"kernel", kernel},
            {"stride", stride},
            {"pad", pads},
            {"dilation", dilation},
            {"OH", {ohw[0]}},
            {"OW", {ohw[1]}},
            {"kind", {max ? 0 : 1}},
            {"count_include_pad", {max ? 0 : AttrInt(node, "count_include_pad", 0)}}};
  Shape out = {xs[0], xs[1], ohw[0], ohw[1]};
  if (one_d) out.erase(out.begin() + 2);
  if (auto st = AddCompute(node, std::move(w), {*x}, NewValue(node, 0, out)); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status Importer::ImportPool3d(const onnx::NodeProto& node, int x, const Shape& xs, bool max,
                                    bool global) {
  Shape kernel, stride, dilation, pads, out;
  if (global) {
    kernel = {xs[2], xs[3], xs[4]};
    stride = dilation = {1, 1, 1};
    pads = {0, 0, 0, 0, 0, 0};
    out = {1, 1, 1};
  } else {
    kernel = AttrInts(node, "kernel_shape", {});
    stride = AttrInts(node, "strides", {1, 1, 1});
    dilation = AttrInts(node, "dilations", {1, 1, 1});
    pads = AttrInts(node, "pads", {0, 0, 0, 0, 0, 0});
    if (kernel.size() != 3 || stride.size() != 3 || dilation.size() != 3) {
      return Unimplemented(node, "kernel_shape/strides/dilations need 3 values");
    }
    if (auto s = Spatial(node, {xs[2], xs[3], xs[4]}, kernel, stride, dilation,
                         AttrInt(node, "ceil_mode", 0) != 0, &pads, &out);
        !s.ok()) {
      return s;
    }
  }
  Workload w;
  w.op = Op::kPool3d;
  w.ints = {{"N", {xs[0]}},
            {"C", {xs[1]}},
            {"D", {xs[2]}},
            {"H", {xs[3]}},
            {"W", {xs[4]}},
            {"kernel", kernel},
            {"stride", stride},
            {"pad", pads},
            {"dilation", dilation},
            {"OD", {out[0]}},
            {"OH", {out[1]}},
            {"OW", {out[2]}},
            {"kind", {max ? 0 : 1}},
            {"count_include_pad", {max ? 0 : AttrInt(node, "count_include_pad", 0)}}};
  if (auto st = AddCompute(node, std::move(w), {x},
                           NewValue(node, 0, {xs[0], xs[1], out[0], out[1], out[2]}));
      !st.ok())
    return st;
  return absl::OkStatus();
}

absl::Status Importer::ImportGemm(const onnx::NodeProto& node) {
  auto a = InF(node, 0);
  if (!a.ok()) return a.status();
  auto b = InF(node, 1);
  if (!b.ok()) return b.status();
  const Shape as = g_->values[*a].shape, bs = g_->values[*b].shape;
  if (as.size() != 2 || bs.size() != 2) return Unimplemented(node, "A and B must be 2-D");
  int64_t ta = AttrInt(node, "transA", 0) != 0, tb = AttrInt(node, "transB", 0) != 0;
  int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
  int64_t KB = tb ? bs[1] : bs[0], N = tb ? bs[0] : bs[1];
  if (K != KB) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': inner dimensions ", K, " and ", KB, " differ"));
  }
  float alpha = AttrFloat(node, "alpha", 1.0f), beta = AttrFloat(node, "beta", 1.0f);
  // C where it is added (beta != 0), padded to 2-D as pc.
  int c = -1;
  Shape pc;
  if (HasIn(node, 2) && beta != 0.0f) {
    auto in = InF(node, 2);
    if (!in.ok()) return in.status();
    Shape cs = g_->values[*in].shape;
    if (cs.size() > 2) return absl::InvalidArgumentError("Gemm: C has rank > 2");
    pc = PadTo(cs, 2);
    if ((pc[0] != 1 && pc[0] != M) || (pc[1] != 1 && pc[1] != N)) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': C [", StrJoin(cs, ","),
                                               "] does not broadcast to [", M, ",", N, "]"));
    }
    c = *in;
  }
  // Dequantized bytes by dequantized weights: an integer matmul (C one
  // row, added as it is).
  if (!ta && alpha == 1.0f && (c < 0 || (beta == 1.0f && pc[0] == 1))) {
    auto q = QuantizedMatMul(node, *a, *b, c, tb != 0);
    if (!q.ok() || *q) return q.status();
  }
  Workload w;
  w.op = Op::kDense;
  std::vector<int> inputs = {*a, *b};
  const bool bias = c >= 0;
  if (bias) {
    w.ints["bias_shape"] = pc;
    inputs.push_back(c);
  }
  w.ints["M"] = {M};
  w.ints["N"] = {N};
  w.ints["K"] = {K};
  w.ints["transA"] = {ta};
  w.ints["transB"] = {tb};
  w.ints["batch"] = {1};
  w.ints["batch_a"] = {0};
  w.ints["batch_b"] = {0};
  w.ints["bias"] = {bias ? 1 : 0};
  if (alpha != 1.0f) w.floats["alpha"] = alpha;
  if (bias && beta != 1.0f) w.floats["beta"] = beta;
  if (auto st = AddCompute(node, std::move(w), inputs, NewValue(node, 0, {M, N})); !st.ok())
    return st;
  return absl::OkStatus();
}

absl::Status Importer::ImportMatMul(const onnx::NodeProto& node) {
  auto a = InF(node, 0);
  if (!a.ok()) return a.status();
  auto b = InF(node, 1);
  if (!b.ok()) return b.status();
  if (auto q = QuantizedMatMul(node, *a, *b, -1, false); !q.ok() || *q) return q.status();
  Shape as = g_->values[*a].shape, bs = g_->values[*b].shape;
  if (as.empty() || bs.empty()) return Unimplemented(node, "scalar operands");
  bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), KB = bs[bs.size() - 2], N = bs.back();
  if (K != KB) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': inner dimensions ", K, " and ", KB, " differ"));
  }
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  int64_t pa = 1, pb = 1;
  for (int64_t d : abatch) pa *= d;
  for (int64_t d : bbatch) pb *= d;
  if (pa > 1 && pb > 1) {
    size_t r = std::max(abatch.size(), bbatch.size());
    if (PadTo(abatch, r) != PadTo(bbatch, r)) {
      // Batch dims broadcast both ways ([2,1,..] x [1,5,..]): expand each
      // operand to the common batch shape, then one batched dense.
      auto common = Broadcast(abatch, bbatch, StrCat("node '", Name(node), "'"));
      if (!common.ok()) return common.status();
      Shape ta = *common, tb = *common;
      ta.insert(ta.end(), {M, K});
      tb.insert(tb.end(), {K, N});
      if (as != ta) {
        auto e = Expand(node, *a, ta);
        if (!e.ok()) return e.status();
        a = *e;
      }
      if (bs != tb) {
        auto e = Expand(node, *b, tb);
        if (!e.ok()) return e.status();
        b = *e;
      }
      abatch = bbatch = *common;
      pa = pb = Product(*common);
    }
  }
  auto bd = Broadcast(abatch, bbatch, StrCat("node '", Name(node), "'"));
  if (!bd.ok()) return bd.status();
  Shape batch_dims = *bd;
  int64_t batch = std::max(pa, pb);
  Workload w;
  w.op = Op::kDense;
  w.ints = {{"M", {M}},           {"N", {N}},    {"K", {K}},         {"transA", {0}},
            {"transB", {0}},      {"bias", {0}}, {"batch", {batch}}, {"batch_a", {pa > 1}},
            {"batch_b", {pb > 1}}};
  Shape kernel_out = {M, N};
  if (batch > 1) kernel_out.insert(kernel_out.begin(), batch);
  // The ONNX output shape.
  Shape out = batch_dims;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  if (out == kernel_out) {
    if (auto st = AddCompute(node, std::move(w), {*a, *b}, NewValue(node, 0, out)); !st.ok())
      return st;
  } else {
    int tmp = TempValue(StrCat(Name(node), ":dense"), kernel_out);
    if (auto st = AddCompute(node, std::move(w), {*a, *b}, tmp); !st.ok()) return st;
    AddView(node, tmp, NewValue(node, 0, out));
  }
  return absl::OkStatus();
}

absl::Status Importer::ImportReshape(const onnx::NodeProto& node) {
  auto x = In(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = g_->values[*x].shape;
  int64_t total = g_->values[*x].NumElements();
  Shape out;
  if (node.op_type() == "Flatten") {
    int64_t rank = static_cast<int64_t>(xs.size());
    int64_t axis = AttrInt(node, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': axis out of range"));
    }
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= xs[i];
    out = {outer, outer == 0 ? 0 : total / outer};
  } else {
    std::vector<int64_t> target;
    if (opset_ < 5) {
      target = AttrInts(node, "shape", {});
    } else {
      auto t = ConstInts(node, 1);
      if (!t.ok()) return t.status();
      target = *std::move(t);
    }
    bool allowzero = AttrInt(node, "allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
      int64_t d = target[i];
      if (d == 0 && !allowzero) {
        if (i >= xs.size()) return absl::InvalidArgumentError("Reshape: 0 beyond the input rank");
        d = xs[i];
      } else if (d == -1) {
        if (infer >= 0) return absl::InvalidArgumentError("Reshape: more than one -1");
        infer = static_cast<int>(i);
        d = 1;
      } else if (d < -1) {
        return absl::InvalidArgumentError("Reshape: negative dimension");
      }
      if (static_cast<int>(i) != infer && known > 0 && d > kMaxElements / known) {
        return absl::InvalidArgumentError(
            StrCat("Reshape: shape [", StrJoin(target, ","), "] is too large"));
      }
      out.push_back(d);
      if (static_cast<int>(i) != infer) known *= d;
    }
    if (infer >= 0) {
      if (known == 0 || total % known != 0) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': cannot infer -1"));
      }
      out[infer] = total / known;
    }
  }
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  if (n != total) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "': cannot reshape [",
                                             StrJoin(xs, ","), "] to [", StrJoin(out, ","), "]"));
  }
  AddView(node, *x, NewValue(node, 0, out));
  return absl::OkStatus();
}

absl::Status Importer::ImportBatchNorm(const onnx::NodeProto& node) {
  const bool training = opset_ >= 14 && AttrInt(node, "training_mode", 0) != 0;
  if (!training) {
    for (int i = 1; i < node.output_size(); ++i) {
      if (!node.output(i).empty()) {
        return Unimplemented(node, "training outputs outside training mode");
      }
    }
  }
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = g_->values[*x].shape;
  if (xs.size() < 2) return absl::InvalidArgumentError("BatchNormalization: input rank < 2");
  std::vector<int> inputs = {*x};
  bool constant = true;
  for (int i = 1; i <= 4; ++i) {
    auto p = InF(node, i);
    if (!p.ok()) return p.status();
    const Value& pv = g_->values[*p];
    constant = constant && pv.IsConstant();
    if (pv.shape != Shape{xs[1]}) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': parameter ", i, " must be [C]"));
    }
    inputs.push_back(*p);
  }
  if (!constant || training) return BatchNormSteps(node, inputs, training);
  Node n;
  n.kind = NodeKind::kBatchNorm;
  n.name = Name(node);
  n.op_type = node.op_type();
  n.epsilon = AttrFloat(node, "epsilon", 1e-5f);
  n.inputs = inputs;
  n.output = NewValue(node, 0, xs);
  g_->nodes.push_back(std::move(n));
  return absl::OkStatus();
}

// BatchNormalization as elementwise steps: with parameters computed at run
// time, or in training mode (batch statistics; outputs 1 and 2 are the
// updated running mean and variance).
absl::Status Importer::BatchNormSteps(const onnx::NodeProto& node, const std::vector<int>& in,
                                      bool training) {
  const Shape xs = V(in[0]).shape;
  Shape cs(xs.size() - 1, 1);
  cs[0] = xs[1];
  std::vector<int> p(5, in[0]);
  for (int i = 1; i <= 4; ++i) {
    auto r = Reshaped(node, in[i], cs);
    if (!r.ok()) return r.status();
    p[i] = *r;
  }
  const double eps = AttrFloat(node, "epsilon", 1e-5f);
  int mean = p[3], var = p[4];
  if (training) {
    std::vector<int64_t> axes = {0};
    for (size_t d = 2; d < xs.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    const double n = static_cast<double>(V(in[0]).NumElements()) / static_cast<double>(xs[1]);
    auto sum = ReduceOver(node, in[0], axes, true, 0);
    if (!sum.ok()) return sum.status();
    auto m = Unary(node, *sum, ElementFn::kScale, {1.0 / n, 0.0});
    if (!m.ok()) return m.status();
    auto d = BinaryOp(node, in[0], *m, ElementFn::kSub);
    if (!d.ok()) return d.status();
    auto sq = ReduceOver(node, *d, axes, true, 0, 2);
    if (!sq.ok()) return sq.status();
    auto v = Unary(node, *sq, ElementFn::kScale, {1.0 / n, 0.0});
    if (!v.ok()) return v.status();
    mean = *m;
    var = *v;
    // running = input * momentum + batch * (1 - momentum)
    const double mom = AttrFloat(node, "momentum", 0.9f);
    for (int o : {1, 2}) {
      if (o >= node.output_size() || node.output(o).empty()) continue;
      auto batch = Reshaped(node, o == 1 ? mean : var, {xs[1]});
      if (!batch.ok()) return batch.status();
      auto b = Unary(node, *batch, ElementFn::kScale, {1.0 - mom, 0.0});
      auto r = Unary(node, in[o == 1 ? 3 : 4], ElementFn::kScale, {mom, 0.0});
      if (!b.ok() || !r.ok()) return !b.ok() ? b.status() : r.status();
      if (auto s = BinaryOp(node, *r, *b, ElementFn::kAdd, o); !s.ok()) return s.status();
    }
  }
  auto d = BinaryOp(node, in[0], mean, ElementFn::kSub);
  if (!d.ok()) return d.status();
  auto sd = Unary(node, var, ElementFn::kScale, {1.0, eps});
  if (!sd.ok()) return sd.status();
  sd = Unary(node, *sd, ElementFn::kSqrt);
  if (!sd.ok()) return sd.status();
  auto sc = BinaryOp(node, p[1], *d, ElementFn::kMul);
  if (!sc.ok()) return sc.status();
  auto q = BinaryOp(node, *sc, *sd, ElementFn::kDiv);
  if (!q.ok()) return q.status();
  return BinaryOp(node, *q, p[2], ElementFn::kAdd, 0).status();
}

absl::Status Importer::ImportConstant(const onnx::NodeProto& node) {
  if (node.output_size() != 1) return absl::InvalidArgumentError("Constant needs one output");
  const std::string& name = node.output(0);
  if (const auto* a = Attr(node, "value")) return AddInitializer(a->t(), name);
  Value v;
  v.name = name;
  if (const auto* a = Attr(node, "value_float")) {
    v.SetFloats({a->f()});
  } else if (const auto* a = Attr(node, "value_floats")) {
    v.SetFloats(std::vector<float>(a->floats().begin(), a->floats().end()));
    v.shape = {static_cast<int64_t>(a->floats_size())};
  } else if (const auto* a = Attr(node, "value_int")) {
    v.SetInt64s({a->i()});
  } else if (const auto* a = Attr(node, "value_ints")) {
    v.SetInt64s(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
    v.shape = {static_cast<int64_t>(a->ints_size())};
  } else {
    return Unimplemented(node, "only value/value_float(s)/value_int(s) are supported");
  }
  by_name_[name] = g_->AddValue(std::move(v));
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal

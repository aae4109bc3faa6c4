// onnxruntime's quantized operators (domain com.microsoft), what its
// quantization tool writes in the operator form (QuantFormat.QOperator) and
// what its graph optimizer leaves in a saved model, imported as the standard
// nodes of their definition: each input dequantized (DequantizeLinear), the
// float operator, the result quantized (QuantizeLinear). That is the QDQ form
// the rest of the frontend already turns into integer kernels (a QLinearAdd
// of two convolutions' bytes becomes the residual add in a convolution's
// epilogue, a QGemm by constant weights an integer matmul), so both forms of
// one model compile to the same kernels.
//
// - QLinearAdd, QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
//   C_zp), QLinearSigmoid, QLinearLeakyRelu (alpha), QLinearSoftmax (axis;
//   `opset` < 13: over the input coerced to 2-D at axis),
//   QLinearGlobalAveragePool and QLinearAveragePool (channels_last: NHWC),
//   QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input),
//   QLinearWhere (condition, X, x_scale, x_zp, Y, ..., z_scale, z_zp).
// - QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp; alpha,
//   transA, transB): C is the int32 bias in the scale a_scale * b_scale
//   (per column where b_scale is), scaled by alpha as the product is (as
//   onnxruntime computes it); without y_scale the output is float.
// - QuantizeLinear, DequantizeLinear: the ONNX operators.
// - MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zp, b_zp, bias) and
//   DynamicQuantizeMatMul (A float, B, b_scale, b_zp, bias): the
//   MatMulInteger, Cast, Mul, Add chain quantize_dynamic writes (the
//   latter's A quantized by DynamicQuantizeLinear first).
// Other com.microsoft operators (QAttention, QEmbedLayerNormalization, the
// fused float ones) are refused by name.
#include <set>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportMicrosoft(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  const std::string base = Name(node);
  const std::string out = node.output_size() > 0 ? node.output(0) : "";
  // Input i's name, "" when it is absent (or i < 0).
  auto name = [&](int i) { return i >= 0 && HasIn(node, i) ? node.input(i) : std::string(); };
  auto need = [&](std::initializer_list<int> inputs) -> absl::Status {
    for (int i : inputs) {
      if (!HasIn(node, i)) {
        return absl::InvalidArgumentError(
            StrCat("node '", base, "' (com.microsoft.", op, "): input ", i, " is required"));
      }
    }
    return absl::OkStatus();
  };
  // x, scale[, zero point] (an omitted zero point is 0); `axis` for
  // per-channel parameters.
  auto dq = [&](int x, int scale, int zp, int64_t axis = 1) {
    return EmitDequantize(base, node.input(x), node.input(scale), name(zp), axis);
  };
  auto q = [&](const std::string& y, int scale, int zp) {
    return EmitQuantize(base, y, node.input(scale), name(zp), out);
  };
  // The node's attributes but those named in `drop`.
  auto attrs_but = [&](std::set<std::string> drop) -> AttrSetter {
    return [&node, drop = std::move(drop)](onnx::NodeProto& n) {
      for (const auto& a : node.attribute()) {
        if (!drop.count(a.name())) *n.add_attribute() = a;
      }
    };
  };
  auto rank_of = [&](int i) -> absl::StatusOr<size_t> {
    auto v = In(node, i);
    if (!v.ok()) return v.status();
    return V(*v).shape.size();
  };
  // Transposes between NHWC and NCHW for channels_last=1.
  auto perm_to_first = [](size_t rank) {
    std::vector<int64_t> p = {0, static_cast<int64_t>(rank) - 1};
    for (size_t d = 1; d + 1 < rank; ++d) p.push_back(static_cast<int64_t>(d));
    return p;
  };
  auto perm_to_last = [](size_t rank) {
    std::vector<int64_t> p = {0};
    for (size_t d = 2; d < rank; ++d) p.push_back(static_cast<int64_t>(d));
    p.push_back(1);
    return p;
  };

  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    if (auto s = need({0, 1}); !s.ok()) return s;
    std::vector<std::string> ins = {node.input(0), node.input(1)};
    if (HasIn(node, 2)) ins.push_back(node.input(2));
    return StatusOf(Emit(base, op, ins, IntAttr("axis", AttrInt(node, "axis", 1)), out));
  }
  if (op == "QLinearAdd" || op == "QLinearMul") {
    if (auto s = need({0, 1, 3, 4, 6}); !s.ok()) return s;
    auto a = dq(0, 1, 2), b = dq(3, 4, 5);
    if (!a.ok() || !b.ok()) return !a.ok() ? a.status() : b.status();
    auto y = Emit(base, op == "QLinearAdd" ? "Add" : "Mul", {*a, *b});
    if (!y.ok()) return y.status();
    return StatusOf(q(*y, 6, 7));
  }
  if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearSoftmax" ||
      op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool") {
    if (auto s = need({0, 1, 3}); !s.ok()) return s;
    auto rank = rank_of(0);
    if (!rank.ok()) return rank.status();
    auto x = dq(0, 1, 2);
    if (!x.ok()) return x.status();
    absl::StatusOr<std::string> y;
    if (op == "QLinearSigmoid") {
      y = Emit(base, "Sigmoid", {*x});
    } else if (op == "QLinearLeakyRelu") {
      y = Emit(base, "LeakyRelu", {*x}, FloatAttr("alpha", AttrFloat(node, "alpha", 0.01f)));
    } else if (op == "QLinearSoftmax") {
      const int64_t axis = AttrInt(node, "axis", -1);
      if (AttrInt(node, "opset", 13) >= 13) {
        y = Emit(base, "Softmax", {*x}, IntAttr("axis", axis));
      } else {
        // Softmax before opset 13: over the input coerced to 2-D at axis.
        auto shape = Emit(base, "Shape", {*x});
        if (!shape.ok()) return shape.status();
        auto flat = Emit(base, "Flatten", {*x}, IntAttr("axis", axis));
        if (!flat.ok()) return flat.status();
        auto sm = Emit(base, "Softmax", {*flat}, IntAttr("axis", 1));
        if (!sm.ok()) return sm.status();
        y = Emit(base, "Reshape", {*sm, *shape});
      }
    } else if (op == "QLinearGlobalAveragePool" && AttrInt(node, "channels_last", 0) != 0) {
      std::vector<int64_t> axes;
      for (size_t d = 1; d + 1 < *rank; ++d) axes.push_back(static_cast<int64_t>(d));
      auto ax = EmitInt64s(base, axes);
      if (!ax.ok()) return ax.status();
      y = Emit(base, "ReduceMean", {*x, *ax}, IntAttr("keepdims", 1));
    } else {
      const bool last = AttrInt(node, "channels_last", 0) != 0;
      const std::string pool =
          op == "QLinearGlobalAveragePool" ? "GlobalAveragePool" : "AveragePool";
      std::string in = *x;
      if (last) {
        auto t = Emit(base, "Transpose", {in}, IntsAttr("perm", perm_to_first(*rank)));
        if (!t.ok()) return t.status();
        in = *t;
      }
      y = Emit(base, pool, {in}, attrs_but({"channels_last"}));
      if (y.ok() && last) y = Emit(base, "Transpose", {*y}, IntsAttr("perm", perm_to_last(*rank)));
    }
    if (!y.ok()) return y.status();
    return StatusOf(q(*y, 3, 4));
  }
  if (op == "QLinearConcat") {
    if (auto s = need({0}); !s.ok()) return s;
    if (node.input_size() < 5 || (node.input_size() - 2) % 3 != 0) {
      return absl::InvalidArgumentError(
          StrCat("node '", base, "' (com.microsoft.QLinearConcat): ", node.input_size(),
                 " inputs; it takes Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) "
                 "for each input"));
    }
    std::vector<std::string> parts;
    for (int i = 2; i < node.input_size(); i += 3) {
      if (auto s = need({i, i + 1}); !s.ok()) return s;
      auto x = dq(i, i + 1, i + 2);
      if (!x.ok()) return x.status();
      parts.push_back(*x);
    }
    if (!Attr(node, "axis")) return Unimplemented(node, "the required attribute 'axis' is missing");
    auto y = Emit(base, "Concat", parts, IntAttr("axis", AttrInt(node, "axis", 0)));
    if (!y.ok()) return y.status();
    return StatusOf(q(*y, 0, 1));
  }
  if (op == "QLinearWhere") {
    if (auto s = need({0, 1, 2, 4, 5, 7}); !s.ok()) return s;
    auto a = dq(1, 2, 3), b = dq(4, 5, 6);
    if (!a.ok() || !b.ok()) return !a.ok() ? a.status() : b.status();
    auto y = Emit(base, "Where", {node.input(0), *a, *b});
    if (!y.ok()) return y.status();
    return StatusOf(q(*y, 7, 8));
  }
  if (op == "QGemm") {
    if (auto s = need({0, 1, 3, 4}); !s.ok()) return s;
    const int64_t trans_b = AttrInt(node, "transB", 0);
    auto a = dq(0, 1, 2), b = dq(3, 4, 5, trans_b ? 0 : 1);
    if (!a.ok() || !b.ok()) return !a.ok() ? a.status() : b.status();
    std::vector<std::string> ins = {*a, *b};
    if (HasIn(node, 6)) {
      auto scale = Emit(base, "Mul", {node.input(1), node.input(4)});
      if (!scale.ok()) return scale.status();
      auto c = Emit(base, "DequantizeLinear", {node.input(6), *scale}, IntAttr("axis", 0));
      if (!c.ok()) return c.status();
      ins.push_back(*c);
    }
    // onnxruntime scales the bias by alpha too: Gemm's beta = alpha.
    AttrSetter gemm_attrs =
        [keep = attrs_but({"beta"}),
         beta = FloatAttr("beta", AttrFloat(node, "alpha", 1.0f))](onnx::NodeProto& n) {
          keep(n);
          beta(n);
        };
    if (!HasIn(node, 7)) return StatusOf(Emit(base, "Gemm", ins, gemm_attrs, out));
    auto y = Emit(base, "Gemm", ins, gemm_attrs);
    if (!y.ok()) return y.status();
    return StatusOf(q(*y, 7, 8));
  }
  if (op == "MatMulIntegerToFloat" || op == "DynamicQuantizeMatMul") {
    const bool dynamic = op == "DynamicQuantizeMatMul";
    // Inputs: A, B, a_scale, b_scale, a_zp, b_zp, bias; or A, B, b_scale,
    // b_zp, bias.
    const int b_scale = dynamic ? 2 : 3, b_zp = dynamic ? 3 : 5, bias = dynamic ? 4 : 6;
    if (auto s = need({0, 1, b_scale}); !s.ok()) return s;
    if (!dynamic) {
      if (auto s = need({2}); !s.ok()) return s;
    }
    std::string a = node.input(0), a_scale = name(2), a_zp = name(4);
    if (dynamic) {
      // DynamicQuantizeLinear's three outputs: the bytes, their scale and
      // zero point (named after this node's output, unique in the graph).
      a_scale = StrCat(out, "::a_scale");
      a_zp = StrCat(out, "::a_zero_point");
      auto d = Emit(base, "DynamicQuantizeLinear", {a}, [&](onnx::NodeProto& n) {
        n.add_output(a_scale);
        n.add_output(a_zp);
      });
      if (!d.ok()) return d.status();
      a = *d;
    }
    std::vector<std::string> mm = {a, node.input(1), a_zp, name(b_zp)};
    while (!mm.empty() && mm.back().empty()) mm.pop_back();
    auto acc = Emit(base, "MatMulInteger", mm);
    if (!acc.ok()) return acc.status();
    auto f = Emit(base, "Cast", {*acc}, IntAttr("to", onnx::TensorProto::FLOAT));
    if (!f.ok()) return f.status();
    auto scale = Emit(base, "Mul", {a_scale, node.input(b_scale)});
    if (!scale.ok()) return scale.status();
    if (!HasIn(node, bias)) return StatusOf(Emit(base, "Mul", {*f, *scale}, nullptr, out));
    auto y = Emit(base, "Mul", {*f, *scale});
    if (!y.ok()) return y.status();
    return StatusOf(Emit(base, "Add", {*y, node.input(bias)}, nullptr, out));
  }
  return absl::UnimplementedError(
      StrCat("unsupported operator 'com.microsoft.", op, "' (node '", base,
             "'): of onnxruntime's own operators kiln imports the quantized ones "
             "(QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, "
             "QLinearSoftmax, QLinearWhere, QLinearGlobalAveragePool, QLinearAveragePool, QGemm, "
             "QuantizeLinear, DequantizeLinear, MatMulIntegerToFloat, DynamicQuantizeMatMul); "
             "save the model before onnxruntime's graph optimizations fuse others"));
}

}  // namespace kiln::compiler::onnx_internal

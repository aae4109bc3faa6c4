// ONNX operators onto the generic contraction, window and quantization ops
// (compiler/ops/generic_linalg.cc): QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv, ConvTranspose, Conv of 3 and more spatial dims, LpPool, GlobalLpPool, GlobalMaxPool,
// MaxPool on other dtypes or with its Indices output, LRN and Einsum. Integer operators compute in
// integers as ONNX specifies (int32 accumulation), and requantize in float32.
#include <set>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {
namespace {

bool IsQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 ||
         t == DType::kInt32 || (IsStorageOnly(t) && t != DType::kBFloat16);
}

// The input's dims after the batch and channel dims.
Shape SpatialDims(const Shape& s) {
  return Shape(s.begin() + std::min<size_t>(2, s.size()), s.end());
}

// Whether a (de)quantization between float32 and `q` is the plain affine
// map that AffineQuantize / AffineDequantize write as eltwise ops: 8-bit
// integers, a float32 scale, no blocks.
bool ByteAffine(DType q, DType scale, const std::map<std::string, std::vector<int64_t>>& attrs) {
  return (q == DType::kUInt8 || q == DType::kInt8) && scale == DType::kFloat32 &&
         attrs.at("block")[0] == 0;
}

}  // namespace

absl::StatusOr<int> Importer::AlongAxis(const onnx::NodeProto& node, int p, size_t rank,
                                        int64_t axis) {
  if (V(p).NumElements() <= 1 || rank == 0) return p;
  Shape sh(rank - axis, 1);
  sh[0] = V(p).NumElements();
  return Reshaped(node, p, sh);
}

absl::StatusOr<int> Importer::AffineQuantize(const onnx::NodeProto& node, int x, int s, int zp,
                                             DType to, int64_t axis, int out) {
  auto along = [&](int p) { return AlongAxis(node, p, V(x).shape.size(), axis); };
  auto sa = along(s);
  if (!sa.ok()) return sa;
  auto q = BinaryOp(node, x, *sa, ElementFn::kDiv);
  if (q.ok()) q = Unary(node, *q, ElementFn::kRound);
  if (q.ok() && zp >= 0) {
    auto zf = Unary(node, zp, ElementFn::kCast, {double(DType::kFloat32)});
    if (zf.ok()) zf = along(*zf);
    q = zf.ok() ? BinaryOp(node, *q, *zf, ElementFn::kAdd) : zf;
  }
  if (!q.ok()) return q;
  // The cast saturates to the integer type's range.
  q = Unary(node, *q, ElementFn::kCast, {double(to)}, out);
  if (q.ok()) quantized_[*q] = {x, s, zp, to};
  return q;
}

absl::StatusOr<int> Importer::FakeQuantize(const onnx::NodeProto& node, int q, int s, int zp,
                                           int out) {
  auto it = quantized_.find(q);
  if (it == quantized_.end()) return -1;
  const Quantized& f = it->second;
  if (f.s != s || f.zp != zp || V(s).NumElements() != 1) return -1;
  double z = 0;
  if (zp >= 0) {
    auto zs = ConstDoubles(node, 2);
    if (!zs.ok() || zs->size() != 1) return -1;
    z = (*zs)[0];
  }
  const double lo = f.to == DType::kUInt8 ? 0 : -128, hi = f.to == DType::kUInt8 ? 255 : 127;
  auto r = BinaryOp(node, f.x, s, ElementFn::kDiv);
  if (r.ok()) r = Unary(node, *r, ElementFn::kRound);
  if (r.ok()) r = Unary(node, *r, ElementFn::kClip, {lo - z, hi - z});
  if (!r.ok()) return r;
  return BinaryOp(node, *r, s, ElementFn::kMul, out);
}

absl::StatusOr<int> Importer::AffineDequantize(const onnx::NodeProto& node, int x, int s, int zp,
                                               int64_t axis, int out) {
  auto along = [&](int p) { return AlongAxis(node, p, V(x).shape.size(), axis); };
  auto f = Unary(node, x, ElementFn::kCast, {double(DType::kFloat32)});
  if (f.ok() && zp >= 0) {
    auto zf = Unary(node, zp, ElementFn::kCast, {double(DType::kFloat32)});
    if (zf.ok()) zf = along(*zf);
    f = zf.ok() ? BinaryOp(node, *f, *zf, ElementFn::kSub) : zf;
  }
  auto sa = f.ok() ? along(s) : f;
  if (!sa.ok()) return sa;
  return BinaryOp(node, *f, *sa, ElementFn::kMul, out);
}

int Importer::ShiftedInt8(int b, int bzp, size_t axis) {
  const Value &bv = V(b), &zv = V(bzp);
  if (!bv.IsConstant() || !zv.IsConstant() || axis >= bv.shape.size()) return -1;
  const int64_t n = bv.shape[axis], per = zv.NumElements();
  if (per != 1 && per != n) return -1;
  int64_t inner = 1;
  for (size_t d = axis + 1; d < bv.shape.size(); ++d) inner *= bv.shape[d];
  const std::vector<int64_t> b_ints = bv.ToInt64s(), z = zv.ToInt64s();
  std::vector<uint8_t> bytes(b_ints.size());
  for (size_t i = 0; i < b_ints.size(); ++i) {
    const int64_t v = b_ints[i] - z[per == 1 ? 0 : (static_cast<int64_t>(i) / inner) % n];
    if (v < -128 || v > 127) return -1;
    bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
  }
  return ConstValue(bv.name, bv.shape, DType::kInt8, std::move(bytes));
}

absl::StatusOr<bool> Importer::QuantizedConv(const onnx::NodeProto& node, int x, int wt, int bias,
                                             const Shape& stride, const Shape& pads,
                                             const Shape& dilation, int64_t groups,
                                             const Shape& out) {
  auto dx = dequantized_.find(x), dw = dequantized_.find(wt);
  if (!integer_cnn_ || dx == dequantized_.end() || dw == dequantized_.end()) return false;
  auto y = IntegerConv(node, dx->second, dw->second, bias, false, stride, pads, dilation, groups,
                       out, 0);
  if (!y.ok()) return y.status();
  return *y >= 0;
}

absl::StatusOr<int> Importer::IntegerConv(const onnx::NodeProto& node, const Dequantized& qx,
                                          const Dequantized& qw, int bias, bool bias_first,
                                          const Shape& stride, const Shape& pads,
                                          const Shape& dilation, int64_t groups, const Shape& out,
                                          int out_index) {
  const DType xd = V(qx.q).dtype;
  // One group, or one per channel (depthwise: weights [K, 1, R, S], K = C).
  const Shape& ws = V(qw.q).shape;
  const bool depthwise = ws.size() == 4 && ws[1] == 1 && groups == ws[0] &&
                         V(qx.q).shape.size() == 4 && V(qx.q).shape[1] == groups;
  if ((groups != 1 && !depthwise) || dilation != Shape{1, 1} || out.size() != 4 ||
      (xd != DType::kUInt8 && xd != DType::kInt8) || V(qx.q).shape.size() != 4 ||
      !V(qx.s).IsConstant() || V(qx.s).NumElements() != 1 ||
      (qx.zp >= 0 && V(qx.zp).NumElements() != 1) || !V(qw.q).IsConstant() ||
      !V(qw.s).IsConstant() || (V(qw.s).NumElements() != 1 && qw.axis != 0)) {
    return -1;
  }
  const std::string name = Name(node);
  const int w8 = ShiftedInt8(qw.q, qw.zp >= 0 ? qw.zp : Scalar(name, V(qw.q).dtype, 0), 0);
  if (w8 < 0) return -1;
  const int xzp = qx.zp >= 0 ? qx.zp : Scalar(name, xd, 0);
  auto acc = Generic(node, Op::kConv, {qx.q, w8, xzp}, out, DType::kInt32,
                     {{"strides", stride},
                      {"dilations", dilation},
                      {"pads", {pads[0], pads[1]}},
                      {"group", {groups}},
                      {"transposed", {0}},
                      {"zp", {2}}});
  if (!acc.ok()) return acc.status();
  return ScaledAccumulator(node, *acc, qx.s, qw.s, {out[1], 1, 1}, bias, bias_first, out_index);
}

absl::StatusOr<bool> Importer::QuantizedMatMul(const onnx::NodeProto& node, int a, int b, int bias,
                                               bool trans_b) {
  auto da = dequantized_.find(a), db = dequantized_.find(b);
  if (!integer_cnn_ || da == dequantized_.end() || db == dequantized_.end()) return false;
  const Dequantized &qa = da->second, &qb = db->second;
  const DType ad = V(qa.q).dtype;
  const Shape bs = V(qb.q).shape;  // a copy: the values below may move g_->values
  const int64_t n_axis = trans_b ? 0 : 1;
  if ((ad != DType::kUInt8 && ad != DType::kInt8) || V(qa.q).shape.size() < 2 || bs.size() != 2 ||
      !V(qa.s).IsConstant() || V(qa.s).NumElements() != 1 ||
      (qa.zp >= 0 && V(qa.zp).NumElements() != 1) || !V(qb.q).IsConstant() ||
      !V(qb.s).IsConstant() || (V(qb.s).NumElements() != 1 && qb.axis != n_axis)) {
    return false;
  }
  const std::string name = Name(node);
  int w8 = ShiftedInt8(qb.q, qb.zp >= 0 ? qb.zp : Scalar(name, V(qb.q).dtype, 0), n_axis);
  if (w8 < 0) return false;
  const int64_t N = bs[n_axis], K = bs[1 - n_axis];
  if (trans_b) {  // [N, K] -> [K, N]
    const std::vector<int64_t> v = V(w8).ToInt64s();
    std::vector<uint8_t> t(v.size());
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        t[k * N + n] = static_cast<uint8_t>(static_cast<int8_t>(v[n * K + k]));
      }
    }
    w8 = ConstValue(StrCat(name, ":w8t"), {K, N}, DType::kInt8, std::move(t));
  }
  const int azp = qa.zp >= 0 ? qa.zp : Scalar(name, ad, 0);
  auto acc = IntegerMatMul(node, qa.q, w8, azp, Scalar(name, DType::kInt8, 0));
  if (!acc.ok()) return acc.status();
  if (auto y = ScaledAccumulator(node, *acc, qa.s, qb.s, {N}, bias); !y.ok()) return y.status();
  return true;
}

absl::StatusOr<int> Importer::ScaledAccumulator(const onnx::NodeProto& node, int acc, int sx,
                                                int sw, const Shape& shape, int bias,
                                                bool bias_first, int out) {
  const int64_t n = shape[0];
  const float x = V(sx).ToFloats()[0];
  const std::vector<float> w = V(sw).ToFloats();
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[i] = x * w[w.size() == 1 ? 0 : i];
  Value fv;
  fv.name = StrCat(Name(node), ":scale", g_->values.size());
  fv.shape = shape;
  fv.SetFloats(f);
  const int factor = g_->AddValue(std::move(fv));
  auto y = Unary(node, acc, ElementFn::kCast, {double(DType::kFloat32)});
  if (bias < 0) return y.ok() ? BinaryOp(node, *y, factor, ElementFn::kMul, out) : y;
  auto b = y.ok() ? Reshaped(node, bias, shape) : y;
  if (!b.ok()) return b;
  if (bias_first) {
    y = BinaryOp(node, *y, *b, ElementFn::kAdd);
    return y.ok() ? BinaryOp(node, *y, factor, ElementFn::kMul, out) : y;
  }
  y = BinaryOp(node, *y, factor, ElementFn::kMul);
  return y.ok() ? BinaryOp(node, *y, *b, ElementFn::kAdd, out) : y;
}

absl::StatusOr<bool> Importer::QuantizedAdd(const onnx::NodeProto& node, int a, int b) {
  auto da = dequantized_.find(a), db = dequantized_.find(b);
  if (!integer_cnn_ || da == dequantized_.end() || db == dequantized_.end() ||
      V(a).shape != V(b).shape) {
    return false;
  }
  std::vector<int> inputs;
  for (const Dequantized* d : {&da->second, &db->second}) {
    const DType qd = V(d->q).dtype;
    if ((qd != DType::kUInt8 && qd != DType::kInt8) || V(d->s).NumElements() != 1 ||
        (d->zp >= 0 && V(d->zp).NumElements() != 1)) {
      return false;
    }
    inputs.push_back(d->q);
  }
  for (const Dequantized* d : {&da->second, &db->second}) {
    inputs.push_back(d->s);
    inputs.push_back(d->zp >= 0 ? d->zp : Scalar(Name(node), V(d->q).dtype, 0));
  }
  auto y = Generic(node, Op::kQAdd, inputs, V(a).shape, DType::kFloat32, {}, 0);
  if (!y.ok()) return y.status();
  return true;
}

absl::StatusOr<int> Importer::IntegerMatMul(const onnx::NodeProto& node, int a, int b, int azp,
                                            int bzp, int out_index) {
  Shape as = V(a).shape, bs = V(b).shape;
  if (as.empty() || bs.empty()) return Unimplemented(node, "scalar operands");
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  if (as.back() != bs[bs.size() - 2]) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "': inner dims differ"));
  }
  auto batch = Broadcast(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2),
                         StrCat("node '", Name(node), "'"));
  if (!batch.ok()) return batch.status();
  Shape out = *batch;
  out.push_back(as[as.size() - 2]);
  out.push_back(bs.back());
  auto pa = Reshaped(node, a, PadTo(as, out.size()));
  auto pb = Reshaped(node, b, PadTo(bs, out.size()));
  if (!pa.ok() || !pb.ok()) return !pa.ok() ? pa.status() : pb.status();
  Shape final_shape(out.begin(), out.end() - 2);
  if (!a1) final_shape.push_back(out[out.size() - 2]);
  if (!b1) final_shape.push_back(out.back());
  const bool same = final_shape == out;
  // A constant B shifted by its constant zero point into int8 (what integer
  // dot-product instructions multiply; exact while every b - zp fits):
  // then only A's zero point is left (zp=2, compiler/ops/matmul_int8.cc).
  std::vector<int> inputs = {*pa, *pb, azp, bzp};
  int64_t zp_mode = 1;
  if (auto shifted = ShiftedInt8(*pb, bzp, V(*pb).shape.size() - 1); shifted >= 0) {
    inputs = {*pa, shifted, azp};
    zp_mode = 2;
  }
  auto r = Generic(node, Op::kMatMul, inputs, out, DType::kInt32, {{"zp", {zp_mode}}},
                   same ? out_index : -1);
  if (!r.ok() || same) return r;
  return Reshaped(node, *r, final_shape, out_index);
}

absl::Status Importer::ImportLinalg(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  // An optional zero point, else a scalar 0 of `dtype`.
  auto zero_point = [&](int i, DType dtype) -> absl::StatusOr<int> {
    if (HasIn(node, i)) return In(node, i);
    return Scalar(Name(node), dtype, 0);
  };
  // A float32 copy of a (float16/float32) scale.
  auto f32 = [&](int v) -> absl::StatusOr<int> {
    return V(v).dtype == DType::kFloat32
               ? absl::StatusOr<int>(v)
               : Unary(node, v, ElementFn::kCast, {double(DType::kFloat32)});
  };
  // The QLinear ops' requantization factor s1 * s2 / y_scale (inputs i1, i2
  // and 6), in float32; a scale with more than one element is reshaped to
  // `shape1`/`shape2` to broadcast along its axis.
  auto scale_factor = [&](int i1, Shape shape1, int i2, Shape shape2) -> absl::StatusOr<int> {
    std::vector<int> s;
    for (int i : {i1, i2, 6}) {
      auto v = In(node, i);
      if (!v.ok()) return v.status();
      auto c = f32(*v);
      if (!c.ok()) return c.status();
      const Shape& want = i == i1 ? shape1 : shape2;
      if (i != 6 && V(*c).NumElements() > 1 && !want.empty()) {
        c = Reshaped(node, *c, want);
        if (!c.ok()) return c.status();
      }
      s.push_back(*c);
    }
    auto prod = BinaryOp(node, s[0], s[1], ElementFn::kMul);
    if (!prod.ok()) return prod;
    return BinaryOp(node, *prod, s[2], ElementFn::kDiv);
  };
  // saturate(round(acc * factor) + zp) of an int32 accumulator into zp's
  // dtype: the requantization of QLinearMatMul and QLinearConv.
  auto requantize = [&](int acc, int factor, int zp) -> absl::StatusOr<int> {
    auto f = Unary(node, acc, ElementFn::kCast, {double(DType::kFloat32)});
    if (!f.ok()) return f;
    auto d = BinaryOp(node, *f, factor, ElementFn::kMul);
    if (!d.ok()) return d;
    if (!IsQuantType(V(zp).dtype)) return Unimplemented(node, "unsupported output dtype");
    return Generic(node, Op::kQuantize, {*d, Scalar(Name(node), DType::kFloat32, 1), zp},
                   V(*d).shape, V(zp).dtype, {{"axis", {0}}, {"block", {0}}}, 0);
  };
  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    auto x = In(node, 0), s = In(node, 1);
    if (!x.ok() || !s.ok()) return !x.ok() ? x.status() : s.status();
    const Shape xs = V(*x).shape;
    // The axis matters only for per-axis and blocked parameters.
    absl::StatusOr<int64_t> axis = 0;
    if (V(*s).NumElements() > 1) axis = NormAxis(node, AttrInt(node, "axis", 1), xs.size());
    if (!axis.ok()) return axis.status();
    std::vector<int> inputs = {*x, *s};
    if (HasIn(node, 2)) {
      auto z = In(node, 2);
      if (!z.ok()) return z.status();
      inputs.push_back(*z);
    }
    std::map<std::string, std::vector<int64_t>> attrs = {
        {"axis", {*axis}}, {"block", {AttrInt(node, "block_size", 0)}}};
    if (op == "DequantizeLinear") {
      if (!IsQuantType(V(*x).dtype)) {
        return Unimplemented(node, StrCat("dequantizing ", DtypeName(int(V(*x).dtype))));
      }
      if (ByteAffine(V(*x).dtype, V(*s).dtype, attrs)) {
        const int zp = inputs.size() > 2 ? inputs[2] : -1;
        auto y = FakeQuantize(node, *x, *s, zp, 0);
        if (y.ok() && *y < 0) y = AffineDequantize(node, *x, *s, zp, *axis, 0);
        if (y.ok()) dequantized_[*y] = {*x, *s, zp, *axis};
        return StatusOf(y);
      }
      return StatusOf(Generic(node, Op::kDequantize, inputs, xs, V(*s).dtype, attrs, 0));
    }
    DType yt = DType::kUInt8;
    if (inputs.size() > 2) {
      yt = V(inputs[2]).dtype;
    } else if (int64_t od = AttrInt(node, "output_dtype", 0); od != 0) {
      auto d = DTypeFromOnnx(od);
      if (!d) return Unimplemented(node, StrCat("output dtype ", DtypeName(int(od))));
      yt = *d;
    }
    if (!IsQuantType(yt)) return Unimplemented(node, StrCat("quantizing to ", DtypeName(int(yt))));
    if (IsStorageFloat(yt)) attrs["saturate"] = {AttrInt(node, "saturate", 1)};
    if (V(*x).dtype == DType::kFloat32 && ByteAffine(yt, V(*s).dtype, attrs)) {
      return StatusOf(
          AffineQuantize(node, *x, *s, inputs.size() > 2 ? inputs[2] : -1, yt, *axis, 0));
    }
    return StatusOf(Generic(node, Op::kQuantize, inputs, xs, yt, attrs, 0));
  }
  if (op == "DynamicQuantizeLinear") {
    auto x = InF(node, 0);
    if (!x.ok()) return x.status();
    std::vector<int64_t> all(V(*x).shape.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    auto mx = ReduceOver(node, *x, all, false, 1);
    auto mn = ReduceOver(node, *x, all, false, 2);
    if (!mx.ok() || !mn.ok()) return !mx.ok() ? mx.status() : mn.status();
    const int zero = Scalar(Name(node), DType::kFloat32, 0);
    auto mx0 = BinaryOp(node, *mx, zero, ElementFn::kMax);
    auto mn0 = BinaryOp(node, *mn, zero, ElementFn::kMin);
    if (!mx0.ok() || !mn0.ok()) return !mx0.ok() ? mx0.status() : mn0.status();
    auto range = BinaryOp(node, *mx0, *mn0, ElementFn::kSub);
    if (!range.ok()) return range.status();
    // (max == min gives range 0; ONNX then takes 1.)
    auto is0 = BinaryOp(node, *range, zero, ElementFn::kEqual);
    if (!is0.ok()) return is0.status();
    auto safe = Generic(node, Op::kWhere, {*is0, Scalar(Name(node), DType::kFloat32, 1), *range},
                        {}, DType::kFloat32, {});
    if (!safe.ok()) return safe.status();
    auto scale =
        BinaryOp(node, *safe, Scalar(Name(node), DType::kFloat32, 255), ElementFn::kDiv, 1);
    if (!scale.ok()) return scale.status();
    auto q = BinaryOp(node, *mn0, *scale, ElementFn::kDiv);
    if (!q.ok()) return q.status();
    auto zf = Unary(node, *q, ElementFn::kClip, {-255, 0});  // -min/scale in [0, 255], negated
    if (!zf.ok()) return zf.status();
    auto zn = Unary(node, *zf, ElementFn::kNeg);
    if (!zn.ok()) return zn.status();
    auto zr = Unary(node, *zn, ElementFn::kRound);
    if (!zr.ok()) return zr.status();
    auto zp = Unary(node, *zr, ElementFn::kCast, {double(DType::kUInt8)}, 2);
    if (!zp.ok()) return zp.status();
    return StatusOf(AffineQuantize(node, *x, *scale, *zp, DType::kUInt8, 0, 0));
  }
  if (op == "MatMulInteger" || op == "QLinearMatMul") {
    const bool q = op == "QLinearMatMul";
    const int ia = 0, ib = q ? 3 : 1;
    auto a = In(node, ia), b = In(node, ib);
    if (!a.ok() || !b.ok()) return !a.ok() ? a.status() : b.status();
    auto azp = zero_point(2, V(*a).dtype), bzp = zero_point(q ? 5 : 3, V(*b).dtype);
    if (!azp.ok() || !bzp.ok()) return !azp.ok() ? azp.status() : bzp.status();
    auto f32_scale = [&](int i) {
      auto v = In(node, i);
      return v.ok() && V(*v).dtype == DType::kFloat32;
    };
    if (q && !V(*b).IsConstant() && V(*azp).NumElements() == 1 && V(*bzp).NumElements() == 1 &&
        f32_scale(1) && f32_scale(4) && f32_scale(6)) {
      // Two activations (attention's products in onnxruntime's operator
      // form): the float matmul of their integers less the zero points
      // (exact sums while K * 255^2 < 2^24: K up to 258), requantized as
      // ONNX does, round(acc * a_scale * b_scale / y_scale) + y_zero_point.
      // The float dense templates compute it; the integer ones take constant
      // weights only, and the generic integer matmul is 20x slower.
      const std::string base = Name(node);
      auto shifted = [&](int x, int zp) -> absl::StatusOr<std::string> {
        auto f = Emit(base, "Cast", {node.input(x)}, IntAttr("to", onnx::TensorProto::FLOAT));
        if (!f.ok() || !HasIn(node, zp)) return f;
        auto z = Emit(base, "Cast", {node.input(zp)}, IntAttr("to", onnx::TensorProto::FLOAT));
        return z.ok() ? Emit(base, "Sub", {*f, *z}) : z;
      };
      auto fa = shifted(0, 2);
      auto fb = fa.ok() ? shifted(3, 5) : fa;
      auto acc = fb.ok() ? Emit(base, "MatMul", {*fa, *fb}) : fb;
      auto ab = acc.ok() ? Emit(base, "Mul", {node.input(1), node.input(4)}) : acc;
      auto factor = ab.ok() ? Emit(base, "Div", {*ab, node.input(6)}) : ab;
      auto y = factor.ok() ? Emit(base, "Mul", {*acc, *factor}) : factor;
      if (!y.ok()) return y.status();
      Value one;
      one.shape = {};
      one.SetFloats({1.0f});
      const std::string unit = NamedConstant(base, std::move(one));
      return StatusOf(
          EmitQuantize(base, *y, unit, HasIn(node, 7) ? node.input(7) : "", node.output(0)));
    }
    if (!q) return StatusOf(IntegerMatMul(node, *a, *b, *azp, *bzp, 0));
    auto acc = IntegerMatMul(node, *a, *b, *azp, *bzp);
    if (!acc.ok()) return acc.status();
    // a's scale is per row (M): a column.
    auto factor = scale_factor(
        1, {V(*a).shape.size() > 1 ? V(*a).shape[V(*a).shape.size() - 2] : 1, 1}, 4, {});
    if (!factor.ok()) return factor.status();
    auto yzp = In(node, 7);
    if (!yzp.ok()) return yzp.status();
    return StatusOf(requantize(*acc, *factor, *yzp));
  }
  if (op == "ConvInteger" || op == "QLinearConv" || op == "ConvTranspose" || op == "Conv") {
    // Conv here: the N-D float convolutions the conv2d template does not
    // take (3-D and up).
    const bool q = op == "QLinearConv", transposed = op == "ConvTranspose";
    const bool integer = q || op == "ConvInteger";
    const int ix = 0, iw = q ? 3 : 1;
    auto x = In(node, ix), wt = In(node, iw);
    if (!x.ok() || !wt.ok()) return !x.ok() ? x.status() : wt.status();
    const Shape xs = V(*x).shape, ws = V(*wt).shape;
    if (xs.size() < 3 || ws.size() != xs.size()) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': input and weight need rank >= 3 and the same rank"));
    }
    if (!integer && V(*x).dtype != V(*wt).dtype) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': dtypes differ"));
    }
    const size_t n = xs.size() - 2;
    const int64_t group = AttrInt(node, "group", 1);
    Shape kernel = AttrInts(node, "kernel_shape", SpatialDims(ws));
    Shape strides = AttrInts(node, "strides", Shape(n, 1));
    Shape dil = AttrInts(node, "dilations", Shape(n, 1));
    Shape pads = AttrInts(node, "pads", {});
    if (kernel != SpatialDims(ws) || strides.size() != n || dil.size() != n || group < 1) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': kernel_shape/strides/dilations do not fit"));
    }
    Shape out_sp(n);
    std::string auto_pad = AttrString(node, "auto_pad", "NOTSET");
    if (!transposed) {
      if (pads.empty()) pads.assign(2 * n, 0);
      if (auto s = Spatial(node, SpatialDims(xs), kernel, strides, dil, false, &pads, &out_sp);
          !s.ok()) {
        return s;
      }
    } else {
      // ONNX's rule: pads from output_shape (or in * stride under SAME_*)
      // when pads are absent, else the output size from the pads.
      Shape opad = AttrInts(node, "output_padding", Shape(n, 0));
      Shape oshape = AttrInts(node, "output_shape", {});
      if (opad.size() != n || (!oshape.empty() && oshape.size() != n)) {
        return absl::InvalidArgumentError(
            StrCat("node '", Name(node), "': output_padding/output_shape do not fit"));
      }
      const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
      if (pads.empty() && !same) pads.assign(2 * n, 0);
      if (pads.size() != (pads.empty() ? 0 : 2 * n)) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bad pads"));
      }
      for (size_t d = 0; d < n; ++d) {
        const int64_t full = strides[d] * (xs[2 + d] - 1) + opad[d] + (kernel[d] - 1) * dil[d] + 1;
        if (pads.size() == 2 * n) {
          out_sp[d] = oshape.empty() ? full - pads[d] - pads[d + n] : oshape[d];
        } else {
          out_sp[d] = oshape.empty() ? xs[2 + d] * strides[d] : oshape[d];
        }
      }
      if (pads.empty()) {
        pads.assign(2 * n, 0);
        for (size_t d = 0; d < n; ++d) {
          const int64_t full =
              strides[d] * (xs[2 + d] - 1) + opad[d] + (kernel[d] - 1) * dil[d] + 1;
          const int64_t total = full - out_sp[d];
          pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
          pads[d + n] = total - pads[d];
        }
      }
      for (int64_t o : out_sp) {
        if (o < 1 || o > kMaxElements) {
          return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bad output size"));
        }
      }
    }
    const int64_t M = transposed ? ws[1] * group : ws[0];
    Shape out = {xs[0], M};
    out.insert(out.end(), out_sp.begin(), out_sp.end());
    std::map<std::string, std::vector<int64_t>> attrs = {
        {"strides", strides},
        {"dilations", dil},
        {"pads", Shape(pads.begin(), pads.begin() + n)},
        {"group", {group}},
        {"transposed", {transposed ? 1 : 0}}};
    std::vector<int> inputs = {*x, *wt};
    const int ib = q ? 8 : 2;
    if (op != "ConvInteger") {
      if (HasIn(node, ib)) {
        auto b = In(node, ib);
        if (!b.ok()) return b.status();
        inputs.push_back(*b);
        attrs["has_bias"] = {1};
      }
    }
    if (q && !transposed && n == 2 && V(*wt).IsConstant() &&
        (!HasIn(node, ib) || V(inputs[2]).IsConstant())) {
      auto xs_v = In(node, 1), xz_v = In(node, 2), ws_v = In(node, 4), wz_v = In(node, 5),
           ys_v = In(node, 6), yz_v = In(node, 7);
      for (const auto* v : {&xs_v, &xz_v, &ws_v, &wz_v, &ys_v, &yz_v}) {
        if (!v->ok()) return v->status();
      }
      const bool requantizable =
          V(*ys_v).IsConstant() && V(*ys_v).NumElements() == 1 && V(*yz_v).NumElements() == 1 &&
          (V(*yz_v).dtype == DType::kUInt8 || V(*yz_v).dtype == DType::kInt8);
      if (integer_cnn_ && requantizable) {
        // The integer conv templates' form (as a QDQ Conv's): the int32
        // result plus the bias, times x_scale * w_scale, then quantized by
        // y_scale: ONNX's (acc + bias) * (x_scale * w_scale / y_scale) once
        // FoldRequantScales folds the division into the factor.
        int bias = -1;
        if (HasIn(node, ib)) {
          Value b;
          b.name = StrCat(Name(node), ":bias", g_->values.size());
          b.shape = V(inputs[2]).shape;
          b.SetFloats(V(inputs[2]).ToFloats());
          bias = g_->AddValue(std::move(b));
        }
        auto y = IntegerConv(node, {*x, *xs_v, *xz_v, 0}, {*wt, *ws_v, *wz_v, 0}, bias, true,
                             strides, pads, dil, group, out, -1);
        if (!y.ok()) return y.status();
        if (*y >= 0) {
          return StatusOf(AffineQuantize(node, *y, *ys_v, *yz_v, V(*yz_v).dtype, 0, 0));
        }
      }
      // Where the integer templates do not apply (a grouped conv, dilation,
      // a network whose quantized convs compute in float): the QDQ
      // definition, a float Conv of the dequantized values, which the
      // conv2d templates compute (the generic integer conv is 100x slower).
      const std::string base = Name(node);
      auto dq = [&](const std::string& v, const std::string& s, const std::string& z) {
        return EmitDequantize(base, v, s, z, 0);
      };
      auto fx = dq(node.input(0), node.input(1), node.input(2));
      auto fw =
          fx.ok() ? dq(node.input(3), node.input(4), HasIn(node, 5) ? node.input(5) : "") : fx;
      if (!fw.ok()) return fw.status();
      std::vector<std::string> conv_in = {*fx, *fw};
      if (HasIn(node, ib)) {
        auto bs = Emit(base, "Mul", {node.input(1), node.input(4)});
        auto fb = bs.ok() ? dq(node.input(ib), *bs, "") : bs;
        if (!fb.ok()) return fb.status();
        conv_in.push_back(*fb);
      }
      auto y = Emit(base, "Conv", conv_in, [&node](onnx::NodeProto& c) {
        for (const auto& a : node.attribute()) *c.add_attribute() = a;
      });
      if (!y.ok()) return y.status();
      return StatusOf(EmitQuantize(base, *y, node.input(6), HasIn(node, 7) ? node.input(7) : "",
                                   node.output(0)));
    }
    if (integer) {
      auto xzp = zero_point(2, V(*x).dtype), wzp = zero_point(q ? 5 : 3, V(*wt).dtype);
      if (!xzp.ok() || !wzp.ok()) return !xzp.ok() ? xzp.status() : wzp.status();
      // Constant weights shifted by their zero point into int8 (zp=2: the
      // input's zero point only), as IntegerMatMul does.
      const int shifted = transposed ? -1 : ShiftedInt8(*wt, *wzp, 0);
      if (shifted >= 0) inputs[1] = shifted;
      inputs.push_back(*xzp);
      if (shifted < 0) inputs.push_back(*wzp);
      attrs["zp"] = {shifted >= 0 ? 2 : 1};
    }
    if (!integer) return StatusOf(Generic(node, Op::kConv, inputs, out, V(*x).dtype, attrs, 0));
    auto acc = Generic(node, Op::kConv, inputs, out, DType::kInt32, attrs, q ? -1 : 0);
    if (!acc.ok() || !q) return StatusOf(acc);
    // w's scale is per output channel: [M, 1, ...].
    Shape per_m(n + 1, 1);
    per_m[0] = M;
    auto factor = scale_factor(1, {}, 4, per_m);
    if (!factor.ok()) return factor.status();
    auto yzp = In(node, 7);
    if (!yzp.ok()) return yzp.status();
    return StatusOf(requantize(*acc, *factor, *yzp));
  }
  if (op == "LpPool" || op == "GlobalLpPool" || op == "GlobalMaxPool" || op == "MaxPool") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    if (xs.size() < 3) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': input rank < 3"));
    }
    const size_t n = xs.size() - 2;
    if (op == "GlobalMaxPool") {
      std::vector<int64_t> axes;
      for (size_t d = 2; d < xs.size(); ++d) axes.push_back(static_cast<int64_t>(d));
      return StatusOf(ReduceOver(node, *x, axes, true, 1, 0, 0));
    }
    const bool global = op == "GlobalLpPool";
    Shape kernel = global ? SpatialDims(xs) : AttrInts(node, "kernel_shape", {});
    Shape strides = global ? Shape(n, 1) : AttrInts(node, "strides", Shape(n, 1));
    Shape dil = global ? Shape(n, 1) : AttrInts(node, "dilations", Shape(n, 1));
    Shape pads = global ? Shape(2 * n, 0) : AttrInts(node, "pads", Shape(2 * n, 0));
    Shape out_sp;
    if (auto s = Spatial(node, SpatialDims(xs), kernel, strides, dil,
                         !global && AttrInt(node, "ceil_mode", 0) != 0, &pads, &out_sp);
        !s.ok()) {
      return s;
    }
    Shape out = {xs[0], xs[1]};
    out.insert(out.end(), out_sp.begin(), out_sp.end());
    std::map<std::string, std::vector<int64_t>> attrs = {
        {"kernel", kernel},
        {"strides", strides},
        {"dilations", dil},
        {"pads", Shape(pads.begin(), pads.begin() + n)},
        {"kind", {op == "MaxPool" ? 0 : 1}}};
    std::map<std::string, double> floats;
    if (op != "MaxPool") floats["p"] = static_cast<double>(AttrInt(node, "p", 2));
    auto y = Generic(node, Op::kWindow, {*x}, out, V(*x).dtype, attrs, 0, floats);
    if (!y.ok() || op != "MaxPool" || node.output_size() < 2 || node.output(1).empty()) {
      return StatusOf(y);
    }
    attrs["kind"] = {2};
    attrs["order"] = {AttrInt(node, "storage_order", 0)};
    return StatusOf(Generic(node, Op::kWindow, {*x}, out, DType::kInt64, attrs, 1));
  }
  if (op == "LRN") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    return StatusOf(Generic(node, Op::kLrn, {*x}, V(*x).shape, V(*x).dtype,
                            {{"size", {AttrInt(node, "size", 1)}}}, 0,
                            {{"alpha", AttrFloat(node, "alpha", 1e-4f)},
                             {"beta", AttrFloat(node, "beta", 0.75f)},
                             {"bias", AttrFloat(node, "bias", 1.0f)}}));
  }
  if (op == "Einsum") return ImportEinsum(node);
  *handled = false;
  return absl::OkStatus();
}

// Einsum: letters (and the dims an ellipsis stands for) become letter ids;
// the generic einsum op multiplies and sums over the ids not in the output.
absl::Status Importer::ImportEinsum(const onnx::NodeProto& node) {
  std::string eq;
  for (char c : AttrString(node, "equation", "")) {
    if (c != ' ') eq.push_back(c);
  }
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': equation '", eq, "': ", what));
  };
  std::string lhs = eq, rhs;
  const bool explicit_out = eq.find("->") != std::string::npos;
  if (explicit_out) {
    lhs = eq.substr(0, eq.find("->"));
    rhs = eq.substr(eq.find("->") + 2);
  }
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != node.input_size()) return bad("one term per input");
  std::vector<int> inputs;
  std::map<char, int64_t> id;    // letter -> id
  std::vector<int64_t> extent;   // id -> size
  int64_t ell_rank = -1;         // dims under the ellipsis
  std::vector<int64_t> ell_ids;  // their ids
  std::map<std::string, std::vector<int64_t>> attrs;
  std::map<int64_t, int> count;
  auto letter = [&](int64_t l, int64_t size) -> absl::Status {
    if (extent[l] != size) return bad("a letter has two sizes");
    ++count[l];
    return absl::OkStatus();
  };
  for (size_t k = 0; k < terms.size(); ++k) {
    auto x = In(node, static_cast<int>(k));
    if (!x.ok()) return x.status();
    inputs.push_back(*x);
    const Shape& xs = V(*x).shape;
    const std::string& t = terms[k];
    size_t ell = t.find("...");
    int64_t named = static_cast<int64_t>(t.size()) - (ell == std::string::npos ? 0 : 3);
    int64_t er = static_cast<int64_t>(xs.size()) - named;
    if (ell == std::string::npos ? er != 0 : er < 0) return bad("term does not match the rank");
    std::vector<int64_t> ids;
    size_t dim = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "...") == 0) {
        if (ell_rank >= 0 && ell_rank != er) return bad("ellipses of different ranks");
        if (ell_rank < 0) {
          ell_rank = er;
          for (int64_t e = 0; e < er; ++e) {
            ell_ids.push_back(static_cast<int64_t>(extent.size()));
            extent.push_back(xs[dim + e]);
          }
        }
        for (int64_t e = 0; e < er; ++e) {
          if (auto s = letter(ell_ids[e], xs[dim]); !s.ok()) return s;
          ids.push_back(ell_ids[e]);
          ++dim;
        }
        i += 2;
        continue;
      }
      char c = t[i];
      if (!std::isalpha(static_cast<unsigned char>(c))) return bad("letters only");
      if (!id.count(c)) {
        id[c] = static_cast<int64_t>(extent.size());
        extent.push_back(xs[dim]);
      }
      if (auto s = letter(id[c], xs[dim]); !s.ok()) return s;
      ids.push_back(id[c]);
      ++dim;
    }
    attrs[StrCat("t", k)] = ids;
  }
  std::vector<int64_t> out_ids;
  if (explicit_out) {
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        out_ids.insert(out_ids.end(), ell_ids.begin(), ell_ids.end());
        i += 2;
        continue;
      }
      if (!id.count(rhs[i])) return bad("output letter not in any input");
      out_ids.push_back(id[rhs[i]]);
    }
  } else {
    // Implicit: the ellipsis dims, then letters used once, alphabetically.
    out_ids = ell_ids;
    for (const auto& [c, l] : id) {
      if (count[l] == 1) out_ids.push_back(l);
    }
  }
  Shape out;
  for (int64_t l : out_ids) out.push_back(extent[l]);
  attrs["out"] = out_ids;
  attrs["extent"] = extent;
  return Generic(node, Op::kEinsum, inputs, out, V(inputs[0]).dtype, attrs, 0).status();
}

}  // namespace kiln::compiler::onnx_internal

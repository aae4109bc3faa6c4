// Generic operators with reductions over windows and contractions: matmul
// (any dtype, zero points), conv (N-D, groups, dilation, transposed, zero
// points), window pooling (max, Lp, argmax), einsum, LRN, and the
// quantization steps. Their compute definitions only; generic_template.cc schedules
// them. These are the operators the classic float32 templates (dense,
// conv2d, pool) do not cover: integer arithmetic, transposed convolution,
// N-D windows.
#include <cmath>
#include <limits>

#include "compiler/ops/elementwise.h"
#include "compiler/ops/generic_internal.h"

namespace kiln::compiler::ops::generic_internal {
namespace {

using namespace ir;

// The type a contraction accumulates in: the output's compute type.
absl::StatusOr<DataType> AccType(const Workload& w) {
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  return ComputeType(sig->output.dtype);
}

// Index of a per-tensor ([1]) or per-channel ([n]) parameter at channel c.
Expr PerChannel(const te::Tensor& p, Expr c) {
  return p->shape.size() == 1 && p->shape[0] > 1 ? p({c})
                                                 : p(std::vector<Expr>(p->shape.size(), IntImm(0)));
}

}  // namespace

// matmul: in0 A [..., M, K], in1 B [..., K, N], both of the output's rank
// (batch dims 1 broadcast); with zp=1, in2 a_zero_point ([1] or [M]) and in3
// b_zero_point ([1] or [N]) are subtracted first; with zp=2 only A's (B
// already shifted). Accumulates in the output's compute type, in int32 with
// zero points (ONNX's integer matmuls, whatever epilogue follows).
absl::StatusOr<te::Tensor> MatMulOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const int64_t zp = w.IntOr("zp", 0);
  if (zp < 0 || zp > 2 || in.size() != std::vector<size_t>{2, 4, 3}[zp]) {
    return Bad(w, "needs A, B (and two zero points with zp=1, A's with zp=2)");
  }
  const te::Tensor &a = in[0], &b = in[1];
  const Shape& out = w.Ints("shape");
  const size_t r = out.size();
  if (r < 2 || a->shape.size() != r || b->shape.size() != r) return Bad(w, "ranks differ");
  const int64_t M = a->shape[r - 2], K = a->shape[r - 1], N = b->shape[r - 1];
  if (b->shape[r - 2] != K || out[r - 2] != M || out[r - 1] != N) return Bad(w, "shapes differ");
  for (size_t d = 0; d + 2 < r; ++d) {
    for (const auto& t : {a, b}) {
      if (t->shape[d] != 1 && t->shape[d] != out[d]) return Bad(w, "batch dims do not broadcast");
    }
  }
  auto act = AccType(w);
  if (!act.ok()) return act.status();
  const DataType ct = zp ? DataType::Int32() : *act;
  return te::Compute(
      "matmul", out,
      [&](const std::vector<Var>& o) {
        IterRange k = te::ReduceAxis(K, "k");
        std::vector<Expr> ia, ib;
        for (size_t d = 0; d + 2 < r; ++d) {
          ia.push_back(a->shape[d] == 1 ? Expr(IntImm(0)) : Expr(o[d]));
          ib.push_back(b->shape[d] == 1 ? Expr(IntImm(0)) : Expr(o[d]));
        }
        ia.push_back(o[r - 2]);
        ia.push_back(k.var);
        ib.push_back(k.var);
        ib.push_back(o[r - 1]);
        Expr av = To(ct, Promote(a(ia))), bv = To(ct, Promote(b(ib)));
        if (zp) av = av - To(ct, Promote(PerChannel(in[2], o[r - 2])));
        if (zp == 1) bv = bv - To(ct, Promote(PerChannel(in[3], o[r - 1])));
        return Reduce(ReduceKind::kSum, av * bv, {k}, Const(ct, 0));
      },
      ct);
}

// conv: in0 X [N, C, s...], in1 W ([M, C/group, k...], or [C, M/group, k...]
// when transposed), then in2 bias [M] when has_bias, then x_zero_point [1]
// and w_zero_point ([1] or [M]) when zp=1, x_zero_point only when zp=2 (the
// weights shifted already); int32 accumulation with zero points. Attributes strides, dilations,
// pads (the begins, one per spatial dim), group, transposed (0/1).
absl::StatusOr<te::Tensor> ConvOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const bool has_bias = w.IntOr("has_bias", 0) != 0;
  const int64_t zp = w.IntOr("zp", 0);
  const bool transposed = w.IntOr("transposed", 0) != 0;
  if (zp < 0 || zp > 2 || in.size() != 2u + has_bias + std::vector<size_t>{0, 2, 1}[zp]) {
    return Bad(w, "wrong number of inputs");
  }
  // in_block / out_block (the layout pass's NCHW[16]c values, 2-D only): x
  // read, and the result written, in channel blocks.
  const int64_t ib = w.IntOr("in_block", 0), ob = w.IntOr("out_block", 0);
  te::Tensor x = in[0];
  Shape out = w.Ints("shape");
  if (ib > 0 || ob > 0) {
    const Shape& bx = x->shape;
    if (transposed || in[1]->shape.size() != 4 || bx.size() != (ib > 0 ? 5u : 4u) ||
        out.size() != (ob > 0 ? 5u : 4u) || (ib > 0 && bx[4] != ib) || (ob > 0 && out[4] != ob)) {
      return Bad(w, "channel blocks need a 2-D conv with blocked shapes");
    }
    if (ib > 0) {
      x = te::Compute(
          "unblocked", {bx[0], bx[1] * ib, bx[2], bx[3]},
          [&](const std::vector<Var>& i) {
            return in[0](
                {i[0], FloorDiv(i[1], IntImm(ib)), i[2], i[3], FloorMod(i[1], IntImm(ib))});
          },
          in[0].buffer()->dtype);
    }
    if (ob > 0) out = {out[0], out[1] * ob, out[2], out[3]};
  }
  const te::Tensor& wt = in[1];
  const Shape& xs = x->shape;
  const Shape& ws = wt->shape;
  const size_t r = xs.size(), sp = r - 2;
  if (r < 3 || ws.size() != r || out.size() != r) return Bad(w, "ranks differ");
  const Shape& strides = w.Ints("strides");
  const Shape& dil = w.Ints("dilations");
  const Shape& pads = w.Ints("pads");
  const int64_t group = w.IntOr("group", 1);
  if (strides.size() != sp || dil.size() != sp || pads.size() != sp || group < 1) {
    return Bad(w, "strides/dilations/pads need one value per spatial dim");
  }
  for (size_t d = 0; d < sp; ++d) {
    if (strides[d] < 1 || dil[d] < 1) return Bad(w, "strides and dilations must be positive");
  }
  const int64_t C = xs[1], M = out[1];
  if (C % group || M % group || out[0] != xs[0]) return Bad(w, "channels do not fit the groups");
  const int64_t Cg = C / group, Mg = M / group;
  if (transposed ? (ws[0] != C || ws[1] != Mg) : (ws[0] != M || ws[1] != Cg)) {
    return Bad(w, "weight shape does not fit the channels");
  }
  if (has_bias && in[2]->shape != Shape{M}) return Bad(w, "bias must be [M]");
  auto act = AccType(w);
  if (!act.ok()) return act.status();
  const DataType ct = zp ? DataType::Int32() : *act;
  te::Tensor acc = te::Compute(
      "conv", out,
      [&](const std::vector<Var>& o) {
        std::vector<IterRange> red = {te::ReduceAxis(Cg, "rc")};
        for (size_t d = 0; d < sp; ++d) red.push_back(te::ReduceAxis(ws[2 + d], StrCat("rk", d)));
        Expr m = o[1];
        Expr g = FloorDiv(m, IntImm(Mg));
        Expr c = g * IntImm(Cg) + red[0].var;
        std::vector<Expr> xi = {o[0], c}, wi;
        if (transposed) {
          wi = {c, FloorMod(m, IntImm(Mg))};
        } else {
          wi = {m, red[0].var};
        }
        Expr inside;
        for (size_t d = 0; d < sp; ++d) {
          Expr k = red[1 + d].var;
          wi.push_back(k);
          Expr i, ok;
          if (transposed) {
            // o = i * stride - pad + k * dilation
            Expr t = o[2 + d] + IntImm(pads[d]) - k * IntImm(dil[d]);
            Expr q = FloorDiv(t, IntImm(strides[d]));
            ok = (t >= IntImm(0)) && Eq(FloorMod(t, IntImm(strides[d])), IntImm(0)) &&
                 (q < IntImm(xs[2 + d]));
            i = q;
          } else {
            i = o[2 + d] * IntImm(strides[d]) - IntImm(pads[d]) + k * IntImm(dil[d]);
            ok = (i >= IntImm(0)) && (i < IntImm(xs[2 + d]));
          }
          inside = inside.defined() ? (inside && ok) : ok;
          xi.push_back(Clamp(i, 0, xs[2 + d] - 1));
        }
        Expr xv = To(ct, Promote(x(xi))), wv = To(ct, Promote(wt(wi)));
        const size_t z = 2 + has_bias;
        if (zp) xv = xv - To(ct, Promote(PerChannel(in[z], IntImm(0))));
        if (zp == 1) wv = wv - To(ct, Promote(PerChannel(in[z + 1], m)));
        return Reduce(ReduceKind::kSum, Select(inside, xv * wv, Const(ct, 0)), red, Const(ct, 0));
      },
      ct);
  te::Tensor result = acc;
  if (has_bias) {
    result = te::Compute(
        "conv_bias", out,
        [&](const std::vector<Var>& o) { return acc(AsExprs(o)) + To(ct, Promote(in[2]({o[1]}))); },
        ct);
  }
  if (ob == 0) return result;
  return te::Compute(
      "blocked", w.Ints("shape"),
      [&](const std::vector<Var>& o) {
        return result({o[0], o[1] * IntImm(ob) + o[4], o[2], o[3]});
      },
      ct);
}

// window: pooling over the spatial dims of in0 [N, C, s...] with kernel,
// strides, dilations, pads (begins). kind 0 max, 1 Lp (floats p), 2 the
// argmax as a flat index into the input (order 0 row major, 1 column major
// over the spatial dims), padding excluded.
absl::StatusOr<te::Tensor> WindowOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const Shape& out = w.Ints("shape");
  const size_t r = xs.size(), sp = r - 2;
  const Shape& kernel = w.Ints("kernel");
  const Shape& strides = w.Ints("strides");
  const Shape& dil = w.Ints("dilations");
  const Shape& pads = w.Ints("pads");
  const int64_t kind = w.IntOr("kind", 0), order = w.IntOr("order", 0);
  if (r < 3 || out.size() != r || out[0] != xs[0] || out[1] != xs[1]) return Bad(w, "bad shapes");
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != sp) {
    return Bad(w, "kernel/strides/dilations/pads need one value per spatial dim");
  }
  for (size_t d = 0; d < sp; ++d) {
    if (kernel[d] < 1 || strides[d] < 1 || dil[d] < 1) return Bad(w, "bad window");
  }
  if (kind < 0 || kind > 2) return Bad(w, "bad kind");
  DataType xt = Promote(x(std::vector<Expr>(r, IntImm(0)))).dtype();
  if (kind == 1 && !xt.is_float()) return Bad(w, "Lp pooling needs a float input");
  const double p = w.FloatOr("p", 2.0);
  // The window's input index and whether it is inside, per spatial dim.
  auto at = [&](const std::vector<Var>& o, const std::vector<IterRange>& red, Expr* inside) {
    std::vector<Expr> idx = {o[0], o[1]};
    for (size_t d = 0; d < sp; ++d) {
      Expr i = o[2 + d] * IntImm(strides[d]) - IntImm(pads[d]) + red[d].var * IntImm(dil[d]);
      Expr ok = (i >= IntImm(0)) && (i < IntImm(xs[2 + d]));
      *inside = inside->defined() ? (*inside && ok) : ok;
      idx.push_back(Clamp(i, 0, xs[2 + d] - 1));
    }
    return idx;
  };
  auto window = [&](const char* prefix) {
    std::vector<IterRange> red;
    for (size_t d = 0; d < sp; ++d) red.push_back(te::ReduceAxis(kernel[d], StrCat(prefix, d)));
    return red;
  };
  te::Tensor best = te::Compute(
      "wmax", out,
      [&](const std::vector<Var>& o) {
        auto red = window("k");
        Expr inside;
        Expr v = Promote(x(at(o, red, &inside)));
        if (kind == 1) {
          v = *UnaryFn(ElementFn::kPowC, *UnaryFn(ElementFn::kAbs, v, {}), {p});
          return Reduce(ReduceKind::kSum, Select(inside, v, Const(xt, 0)), red, Const(xt, 0));
        }
        return Reduce(ReduceKind::kMax, Select(inside, v, Lowest(xt)), red, Lowest(xt));
      },
      xt);
  if (kind == 0) return best;
  if (kind == 1) {
    return te::Compute(
        "lp", out,
        [&](const std::vector<Var>& o) {
          return *UnaryFn(ElementFn::kPowC, best(AsExprs(o)), {1.0 / p});
        },
        xt);
  }
  if (order == 1 && sp != 2) return Bad(w, "column-major indices need 2 spatial dims");
  return te::Compute(
      "argmax", out,
      [&](const std::vector<Var>& o) {
        auto red = window("j");
        Expr inside;
        std::vector<Expr> idx = at(o, red, &inside);
        Expr hit = inside && Eq(Promote(x(idx)), best(AsExprs(o)));
        // The flat index of the first hit, in the requested order.
        Expr flat = idx[0] * IntImm(xs[1]) + idx[1];
        if (order == 1) {
          flat = (flat * IntImm(xs[3]) + idx[3]) * IntImm(xs[2]) + idx[2];
        } else {
          for (size_t d = 0; d < sp; ++d) flat = flat * IntImm(xs[2 + d]) + idx[2 + d];
        }
        const int64_t none = std::numeric_limits<int64_t>::max();
        return Reduce(ReduceKind::kMin, Select(hit, flat, IntImm(none)), red, IntImm(none));
      },
      DataType::Int64());
}

// einsum: inputs in0..inK; t<k> the letter of each dim of input k, out the
// letters of the output's dims, extent the size of each letter. Letters
// missing from the output are summed over; a letter repeated in one input
// takes its diagonal.
absl::StatusOr<te::Tensor> EinsumOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const Shape& extent = w.Ints("extent");
  const Shape& outl = w.Ints("out");
  const Shape& out = w.Ints("shape");
  const int64_t L = static_cast<int64_t>(extent.size());
  std::vector<Shape> terms;
  for (size_t k = 0; k < in.size(); ++k) {
    terms.push_back(w.Ints(StrCat("t", k)));
    if (terms[k].size() != in[k]->shape.size() && !(terms[k].empty() && in[k]->shape == Shape{1})) {
      return Bad(w, StrCat("term ", k, " does not match its input's rank"));
    }
    for (size_t d = 0; d < terms[k].size(); ++d) {
      int64_t l = terms[k][d];
      if (l < 0 || l >= L || extent[l] != in[k]->shape[d]) return Bad(w, "bad letter");
    }
  }
  std::vector<int> pos(L, -1);
  for (size_t d = 0; d < outl.size(); ++d) {
    if (outl[d] < 0 || outl[d] >= L || pos[outl[d]] >= 0) return Bad(w, "bad output letter");
    pos[outl[d]] = static_cast<int>(d);
  }
  if (!(outl.empty() ? out == Shape{1} : out.size() == outl.size())) return Bad(w, "bad shape");
  for (size_t d = 0; d < outl.size(); ++d) {
    if (out[d] != extent[outl[d]]) return Bad(w, "output shape does not match the letters");
  }
  DataType ct = Promote(in[0](std::vector<Expr>(in[0]->shape.size(), IntImm(0)))).dtype();
  return te::Compute(
      "einsum", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> letter(L);
        std::vector<IterRange> red;
        for (int64_t l = 0; l < L; ++l) {
          if (pos[l] >= 0) {
            letter[l] = o[pos[l]];
          } else {
            red.push_back(te::ReduceAxis(extent[l], StrCat("l", l)));
            letter[l] = red.back().var;
          }
        }
        Expr prod;
        for (size_t k = 0; k < in.size(); ++k) {
          std::vector<Expr> idx;
          for (int64_t l : terms[k]) idx.push_back(letter[l]);
          if (idx.empty()) idx = {IntImm(0)};
          Expr v = To(ct, Promote(in[k](idx)));
          prod = prod.defined() ? prod * v : v;
        }
        if (red.empty()) return prod;
        return Reduce(ReduceKind::kSum, prod, red, Const(ct, 0));
      },
      ct);
}

// LRN across channels of in0 [N, C, ...]: size; floats alpha, beta, bias.
absl::StatusOr<te::Tensor> LrnOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const int64_t size = w.IntOr("size", 1);
  if (xs.size() < 2 || size < 1 || xs != w.Ints("shape")) return Bad(w, "bad shapes or size");
  const double alpha = w.FloatOr("alpha", 1e-4), beta = w.FloatOr("beta", 0.75),
               bias = w.FloatOr("bias", 1.0);
  DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  if (!ct.is_float()) return Bad(w, "needs a float input");
  const int64_t lo = (size - 1) / 2, C = xs[1];
  te::Tensor sq = te::Compute(
      "sqsum", xs,
      [&](const std::vector<Var>& o) {
        IterRange j = te::ReduceAxis(size, "j");
        Expr c = o[1] - IntImm(lo) + j.var;
        std::vector<Expr> idx = AsExprs(o);
        idx[1] = Clamp(c, 0, C - 1);
        Expr v = Promote(x(idx));
        Expr ok = (c >= IntImm(0)) && (c < IntImm(C));
        return Reduce(ReduceKind::kSum, Select(ok, v * v, Const(ct, 0)), {j}, Const(ct, 0));
      },
      ct);
  return te::Compute(
      "lrn", xs,
      [&](const std::vector<Var>& o) {
        Expr d = Const(ct, bias) + Const(ct, alpha / static_cast<double>(size)) * sq(AsExprs(o));
        return Promote(x(AsExprs(o))) / *UnaryFn(ElementFn::kPowC, d, {beta});
      },
      ct);
}

namespace {

// The scale/zero point of a (de)quantization at output index o: [1] is per
// tensor; otherwise per `axis` ([n], block 0) or per block of `block`
// elements along `axis` (the input's rank).
absl::StatusOr<Expr> QuantParam(const Workload& w, const te::Tensor& p, const Shape& xs,
                                const std::vector<Var>& o) {
  const Shape& ps = p->shape;
  int64_t n = 1;
  for (int64_t d : ps) n *= d;
  if (n == 1) return p(std::vector<Expr>(ps.size(), IntImm(0)));
  auto axis = AxisOf(w, "axis", xs.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis, block = w.IntOr("block", 0);
  if (block <= 0) {
    if (ps != Shape{xs[a]}) return Bad(w, "a per-axis parameter must match the axis");
    return p({o[a]});
  }
  if (ps.size() != xs.size()) return Bad(w, "a blocked parameter needs the input's rank");
  std::vector<Expr> idx = AsExprs(o);
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) == a) {
      if ((xs[d] + block - 1) / block != ps[d]) return Bad(w, "blocks do not fit the axis");
      idx[d] = FloorDiv(o[d], IntImm(block));
    } else if (ps[d] != xs[d]) {
      return Bad(w, "a blocked parameter must match the input off the axis");
    }
  }
  return p(idx);
}

}  // namespace

// quantize: in0 x (float), in1 scale, optional in2 zero point (the output's
// dtype); axis, block. y = saturate(round_half_even(x / scale) + zp).
absl::StatusOr<te::Tensor> QuantizeOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType yt = IrType(sig->output.dtype);
  if (!yt.is_integer() || yt.bits > 32) return Bad(w, "quantizes to 8/16/32-bit integers");
  if (xs != w.Ints("shape") || in.size() < 2) return Bad(w, "bad shapes");
  DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  if (!ct.is_float()) return Bad(w, "needs a float input");
  const DType yd = sig->output.dtype;
  // A float8 zero point or quantized value in float32 (integers as they are).
  auto value = [&](DType d, const Expr& e) {
    return IsStorageFloat(d) ? DecodeStorageFloat(d, e) : To(ct, Promote(e));
  };
  absl::Status error;
  te::Tensor y = te::Compute(
      "quantize", xs,
      [&](const std::vector<Var>& o) {
        auto s = QuantParam(w, in[1], xs, o);
        if (!s.ok()) {
          error = s.status();
          return Expr(IntImm(0, yt));
        }
        // float8 takes x / scale as it is; integers round it half to even.
        Expr v = Promote(x(AsExprs(o))) / To(ct, Promote(*s));
        if (!IsStorageFloat(yd)) v = *UnaryFn(ElementFn::kRound, v, {});
        if (in.size() > 2) {
          auto z = QuantParam(w, in[2], xs, o);
          if (!z.ok()) {
            error = z.status();
            return Expr(IntImm(0, yt));
          }
          v = v + To(ct, value(sig->inputs[2].dtype, *z));
        }
        if (IsStorageFloat(yd)) {
          return EncodeStorageFloat(yd, To(DataType::Float32(), v), w.IntOr("saturate", 1) != 0);
        }
        if (IsInt4(yd)) return EncodeInt4(yd, v);
        // Casts to integers saturate (NaN gives 0).
        return Cast(yt, Max(Min(v, To(ct, Highest(yt))), To(ct, Lowest(yt))));
      },
      yt);
  if (!error.ok()) return error;
  return y;
}

// dequantize: in0 x (integer), in1 scale (the output's dtype), optional in2
// zero point; axis, block. y = (float(x) - float(zp)) * scale.
absl::StatusOr<te::Tensor> DequantizeOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  if (xs != w.Ints("shape") || in.size() < 2) return Bad(w, "bad shapes");
  const DataType f32 = DataType::Float32();
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  // Quantized values (and zero points) in float32: float8 decoded.
  auto value = [&](size_t i, const Expr& e) {
    DType d = sig->inputs.at(i).dtype;
    return IsStorageFloat(d) ? DecodeStorageFloat(d, e) : To(f32, Promote(e));
  };
  absl::Status error;
  te::Tensor y = te::Compute(
      "dequantize", xs,
      [&](const std::vector<Var>& o) {
        Expr v = value(0, x(AsExprs(o)));
        if (in.size() > 2) {
          auto z = QuantParam(w, in[2], xs, o);
          if (!z.ok()) {
            error = z.status();
            return Expr(FloatImm(0, f32));
          }
          v = v - value(2, *z);
        }
        auto s = QuantParam(w, in[1], xs, o);
        if (!s.ok()) {
          error = s.status();
          return Expr(FloatImm(0, f32));
        }
        return v * To(f32, Promote(*s));
      },
      f32);
  if (!error.ok()) return error;
  return y;
}

// qadd: in0 a, in1 b (8-bit integers of one shape), then a's scale and
// zero point, b's ([1] or scalars): the sum of their dequantized values in
// float32, (a - za) * sa + (b - zb) * sb (a QDQ graph's residual add, reading
// the bytes its inputs are stored in).
absl::StatusOr<te::Tensor> QAddOp(const Workload& w, const std::vector<te::Tensor>& in) {
  if (in.size() != 6 || in[0]->shape != in[1]->shape || in[0]->shape != w.Ints("shape")) {
    return Bad(w, "needs a, b of the output's shape and their scales and zero points");
  }
  const DataType f32 = DataType::Float32();
  auto one = [&](const te::Tensor& p) {
    return To(f32, Promote(p(std::vector<Expr>(p->shape.size(), IntImm(0)))));
  };
  return te::Compute(
      "qadd", in[0]->shape,
      [&](const std::vector<Var>& o) {
        Expr a = (To(f32, Promote(in[0](AsExprs(o)))) - one(in[3])) * one(in[2]);
        Expr b = (To(f32, Promote(in[1](AsExprs(o)))) - one(in[5])) * one(in[4]);
        return a + b;
      },
      f32);
}

}  // namespace kiln::compiler::ops::generic_internal

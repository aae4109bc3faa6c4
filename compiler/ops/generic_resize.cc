// The generic resize op (Resize/Upsample) and grid_sample (GridSample):
// their compute definitions only; generic_template.cc schedules them.
#include <cmath>

#include "compiler/ops/generic_internal.h"

namespace kiln::compiler::ops::generic_internal {

using namespace ir;

namespace {

// Keys' cubic convolution weights of the taps at floor(x) - 1 .. + 2 for
// the fraction fr = x - floor(x) (float64), coefficient a.
std::vector<Expr> CubicWeights(Expr fr, double a) {
  auto F = [](double v) { return FloatImm(v, DataType::Float64()); };
  Expr p = fr + F(1), q = F(1) - fr, q1 = q + F(1);
  return {((F(a) * p - F(5 * a)) * p + F(8 * a)) * p - F(4 * a),
          ((F(a + 2) * fr - F(a + 3)) * fr) * fr + F(1), ((F(a + 2) * q - F(a + 3)) * q) * q + F(1),
          ((F(a) * q1 - F(5 * a)) * q1 + F(8 * a)) * q1 - F(4 * a)};
}

}  // namespace

// Resize: per output axis d a source coordinate (float64), then nearest,
// linear or cubic taps on clamped indices, summed with their weights.
absl::StatusOr<te::Tensor> ResizeOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const Shape& out = w.Ints("shape");
  const size_t r = xs.size();
  if (out.size() != r) return Bad(w, "output rank differs from the input's");
  const int64_t mode = w.IntOr("mode", 0);
  const int64_t coord = w.IntOr("coord", 0);
  const bool exclude = w.IntOr("exclude", 0) != 0, antialias = w.IntOr("antialias", 0) != 0;
  const double a = w.FloatOr("cubic_a", -0.75);
  const double extrap = w.FloatOr("extrapolation", 0.0);
  if (mode < 0 || mode > 2 || coord < 0 || coord > 5) return Bad(w, "bad mode or coord");
  Shape nearest = w.ints.count("nearest") ? w.Ints("nearest") : Shape(r, 0);
  if (nearest.size() != r) return Bad(w, "nearest needs one value per axis");
  DataType t = x.buffer()->dtype;
  if (mode != 0 && !t.is_float()) return Bad(w, "linear/cubic need a float input");
  struct Axis {
    double scale, lo, hi;
    bool identity;
  };
  std::vector<Axis> axes(r);
  for (size_t d = 0; d < r; ++d) {
    if (out[d] > 0 && xs[d] == 0) return Bad(w, "resize of an empty axis");
    Axis& ax = axes[d];
    ax.scale = w.FloatOr(StrCat("scale", d), xs[d] ? static_cast<double>(out[d]) / xs[d] : 1.0);
    ax.lo = w.FloatOr(StrCat("roi_lo", d), 0.0);
    ax.hi = w.FloatOr(StrCat("roi_hi", d), 1.0);
    if (!(ax.scale > 0)) return Bad(w, "scales must be positive");
    ax.identity =
        ax.scale == 1.0 && out[d] == xs[d] && (coord != 5 || (ax.lo == 0.0 && ax.hi == 1.0));
  }
  const DataType f64 = DataType::Float64();
  auto F = [&](double v) { return FloatImm(v, f64); };
  auto floor = [&](Expr v) { return Call(f64, Intrinsic::kFloor, {v}); };
  return te::Compute(
      "resize", out,
      [&](const std::vector<Var>& o) {
        // Per axis: the taps' unclamped indices and weights (empty weights:
        // one tap of weight 1).
        std::vector<std::vector<Expr>> idx(r), wt(r);
        Expr outside;
        for (size_t d = 0; d < r; ++d) {
          const Axis& ax = axes[d];
          const int64_t n = xs[d];
          if (ax.identity) {
            idx[d] = {o[d]};
            continue;
          }
          const double ow = ax.scale * static_cast<double>(n);
          Expr xo = Cast(f64, o[d]);
          Expr src;
          switch (coord) {
            case 0:  // half_pixel
              src = (xo + F(0.5)) / F(ax.scale) - F(0.5);
              break;
            case 1: {  // half_pixel_symmetric
              double adj = static_cast<double>(out[d]) / ow;
              double offset = static_cast<double>(n) / 2 * (1 - adj);
              src = F(offset) + (xo + F(0.5)) / F(ax.scale) - F(0.5);
              break;
            }
            case 2:  // pytorch_half_pixel
              src = ow == 1 ? F(-0.5) : (xo + F(0.5)) / F(ax.scale) - F(0.5);
              break;
            case 3:  // align_corners
              src = ow == 1 ? F(0) : xo * F(static_cast<double>(n - 1)) / F(ow - 1);
              break;
            case 4:  // asymmetric
              src = xo / F(ax.scale);
              break;
            default: {  // tf_crop_and_resize
              const double len = (ax.hi - ax.lo) * static_cast<double>(n - 1);
              src = ow == 1 ? F(len / 2) : xo * F(len) / F(ow - 1);
              src = src + F(ax.lo * static_cast<double>(n - 1));
              Expr bad = (src < F(0)) || (src > F(static_cast<double>(n - 1)));
              outside = outside.defined() ? (outside || bad) : bad;
              break;
            }
          }
          if (mode == 0) {
            Expr i;
            switch (nearest[d]) {
              case 0:  // round_prefer_floor
                i = Call(f64, Intrinsic::kCeil, {src - F(0.5)});
                break;
              case 1:  // round_prefer_ceil
                i = floor(src + F(0.5));
                break;
              case 2:
                i = floor(src);
                break;
              default:
                i = Call(f64, Intrinsic::kCeil, {src});
                break;
            }
            idx[d] = {Cast(DataType::Int64(), i)};
            continue;
          }
          Expr fl = floor(src);
          Expr fr = src - fl;
          Expr i0 = Cast(DataType::Int64(), fl);
          if (antialias && ax.scale < 1) {
            // The filter stretched by 1 / scale over n taps (ONNX's
            // reference): weights kernel((i - src) * scale), normalized;
            // taps start at floor(src) - n/2 (+1 unless src is whole).
            const double sc = ax.scale;
            const int64_t first = static_cast<int64_t>(std::floor((mode == 1 ? -1 : -2) / sc)) + 1;
            const int64_t n = 2 - 2 * first;
            Expr start = i0 + Select(Eq(fr, F(0)), IntImm(-(n / 2)), IntImm(-(n / 2) + 1));
            Expr sum;
            for (int64_t j = 0; j < n; ++j) {
              Expr i = start + IntImm(j);
              Expr t = Call(f64, Intrinsic::kFabs, {(Cast(f64, i) - src) * F(sc)});
              Expr k;
              if (mode == 1) {
                k = Max(F(1) - t, F(0));
              } else {
                Expr t2 = t * t, t3 = t2 * t;
                k = Select(
                    t <= F(1), F(a + 2) * t3 - F(a + 3) * t2 + F(1),
                    Select(t < F(2), F(a) * t3 - F(5 * a) * t2 + F(8 * a) * t - F(4 * a), F(0)));
              }
              idx[d].push_back(i);
              wt[d].push_back(k);
              sum = sum.defined() ? sum + k : k;
            }
            for (Expr& e : wt[d]) e = e / sum;
          } else if (mode == 1) {
            idx[d] = {i0, i0 + IntImm(1)};
            wt[d] = {F(1) - fr, fr};
          } else {
            wt[d] = CubicWeights(fr, a);
            idx[d] = {i0 - IntImm(1), i0, i0 + IntImm(1), i0 + IntImm(2)};
          }
          if (exclude) {
            Expr sum;
            for (size_t k = 0; k < wt[d].size(); ++k) {
              Expr in_range = (idx[d][k] >= IntImm(0)) && (idx[d][k] < IntImm(n));
              wt[d][k] = Select(in_range, wt[d][k], F(0));
              sum = sum.defined() ? sum + wt[d][k] : wt[d][k];
            }
            for (Expr& e : wt[d]) e = e / sum;
          }
        }
        // The sum over every combination of taps.
        Expr acc;
        std::vector<size_t> k(r, 0);
        for (;;) {
          std::vector<Expr> at;
          Expr weight;
          for (size_t d = 0; d < r; ++d) {
            at.push_back(Clamp(idx[d][k[d]], 0, std::max<int64_t>(xs[d] - 1, 0)));
            if (!wt[d].empty()) weight = weight.defined() ? weight * wt[d][k[d]] : wt[d][k[d]];
          }
          Expr v = x(at);
          if (weight.defined()) {
            v = Cast(f64, v) * weight;
            acc = acc.defined() ? acc + v : v;
          } else {
            acc = v;
          }
          size_t d = 0;
          for (; d < r; ++d) {
            if (++k[d] < idx[d].size()) break;
            k[d] = 0;
          }
          if (d == r) break;
        }
        if (acc.dtype() != t) acc = Cast(t, acc);
        if (outside.defined()) acc = Select(outside, Const(t, extrap), acc);
        return acc;
      },
      t);
}

// GridSample: x [N, C, S_1..S_r] sampled at grid [N, O_1..O_r, r] (its last
// axis the coordinates innermost first, in [-1, 1]), as ONNX's reference
// samples: per spatial axis the denormalized coordinate (align_corners:
// -1 and 1 are the edge pixels' centers; else their outer edges), rounded
// half to even for nearest; one outside [lo, hi] (the pixel centers, or
// the edges) clamped to the pixels (padding border) or reflected into
// [lo, hi] (reflection); then 1 (nearest: the coordinate truncated), 2
// (linear) or 4 (cubic, a = -0.75) taps per axis, each tap outside the
// image 0 (zeros), the edge pixel (border) or its mirror image (reflection;
// ONNX reflects a tap as it does a coordinate, which for the at most 2
// pixels a tap can lie outside is the mirror, on images of 3 pixels or
// more).
// Attributes: mode 0 linear, 1 nearest, 2 cubic; padding 0 zeros, 1
// border, 2 reflection; align 0/1.
absl::StatusOr<te::Tensor> GridSampleOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor &x = in.at(0), &grid = in.at(1);
  const Shape &xs = x->shape, &gs = grid->shape;
  const size_t r = xs.size() - 2;
  if (xs.size() < 3 || gs.size() != r + 2 || gs[0] != xs[0] || gs.back() != int64_t(r)) {
    return Bad(w, "grid must be [N, spatial..., rank] for x [N, C, spatial...]");
  }
  const int64_t mode = w.IntOr("mode", 0), padding = w.IntOr("padding", 0);
  const bool align = w.IntOr("align", 0) != 0;
  if (mode < 0 || mode > 2 || padding < 0 || padding > 2) return Bad(w, "bad mode or padding");
  DataType t = x.buffer()->dtype;
  if (!t.is_float()) return Bad(w, "GridSample needs a float input");
  Shape out = {xs[0], xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  const DataType f64 = DataType::Float64(), i64 = DataType::Int64();
  auto F = [&](double v) { return FloatImm(v, f64); };
  auto floor = [&](Expr v) { return Call(f64, Intrinsic::kFloor, {v}); };
  // v reflected into [lo, hi] by its borders, back and forth (a triangle
  // wave of period 2 (hi - lo): ONNX's fold by the nearer border, as an
  // expression that names v twice, not once per case: the C and CUDA
  // sources print every use).
  auto reflect = [&](Expr v, double lo, double hi) -> Expr {
    const double range = hi - lo;
    if (range <= 0) return F(lo);
    Expr u = v - F(lo);
    Expr m = u - F(2 * range) * floor(u / F(2 * range));
    return F(lo + range) - Call(f64, Intrinsic::kFabs, {m - F(range)});
  };
  return te::Compute(
      "grid_sample", out,
      [&](const std::vector<Var>& o) {
        std::vector<std::vector<Expr>> idx(r), wt(r), ok(r);
        for (size_t d = 0; d < r; ++d) {
          const int64_t n = xs[2 + d];
          const double size = static_cast<double>(n);
          std::vector<Expr> at = {o[0]};
          for (size_t k = 0; k < r; ++k) at.push_back(o[2 + k]);
          at.push_back(IntImm(static_cast<int64_t>(r - 1 - d)));
          Expr g = Cast(f64, grid(at));
          Expr v = align ? (g + F(1)) / F(2) * F(size - 1) : ((g + F(1)) * F(size) - F(1)) / F(2);
          if (mode == 1) v = Call(f64, Intrinsic::kRoundEven, {v});
          const double lo = align ? 0 : -0.5, hi = align ? size - 1 : size - 0.5;
          if (padding == 1) {
            v = Select(v < F(lo) || v > F(hi), Min(Max(v, F(0)), F(size - 1)), v);
          } else if (padding == 2) {
            v = reflect(v, lo, hi);
          }
          std::vector<Expr> taps;
          if (mode == 1) {
            taps = {Cast(i64, v)};
          } else {
            Expr fl = floor(v), fr = v - fl;
            Expr i0 = Cast(i64, fl);
            if (mode == 0) {
              taps = {i0, i0 + IntImm(1)};
              wt[d] = {F(1) - fr, fr};
            } else {
              taps = {i0 - IntImm(1), i0, i0 + IntImm(1), i0 + IntImm(2)};
              wt[d] = CubicWeights(fr, -0.75);
            }
          }
          for (Expr j : taps) {
            if (padding == 0) {
              ok[d].push_back(j >= IntImm(0) && j < IntImm(n));
            } else if (padding == 2) {
              // A tap past the edge (by at most 2, the coordinate being
              // inside) mirrored: about the edge pixel's center
              // (align_corners) or its outer edge.
              const int64_t below = align ? 0 : -1, above = align ? 2 * (n - 1) : 2 * n - 1;
              j = Select(j < IntImm(0), IntImm(below) - j,
                         Select(j > IntImm(n - 1), IntImm(above) - j, j));
            }
            idx[d].push_back(Clamp(j, 0, n - 1));
          }
        }
        // The sum over every combination of taps.
        Expr acc;
        std::vector<size_t> k(r, 0);
        for (;;) {
          std::vector<Expr> at = {o[0], o[1]};
          Expr weight, valid;
          for (size_t d = 0; d < r; ++d) {
            at.push_back(idx[d][k[d]]);
            if (!wt[d].empty()) weight = weight.defined() ? weight * wt[d][k[d]] : wt[d][k[d]];
            if (!ok[d].empty()) valid = valid.defined() ? valid && ok[d][k[d]] : ok[d][k[d]];
          }
          Expr v = Cast(f64, x(at));
          if (weight.defined()) v = v * weight;
          if (valid.defined()) v = Select(valid, v, F(0));
          acc = acc.defined() ? acc + v : v;
          size_t d = 0;
          for (; d < r; ++d) {
            if (++k[d] < idx[d].size()) break;
            k[d] = 0;
          }
          if (d == r) break;
        }
        return Cast(t, acc);
      },
      t);
}

}  // namespace kiln::compiler::ops::generic_internal

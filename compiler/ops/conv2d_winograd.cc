// conv2d by Winograd's minimal filtering F(4x4, 3x3) (layout=4 of the conv2d
// template) or F(2x2, 3x3) (layout=5; Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks"): each 4x4 output tile is A^T [(G g G^T) .
// (B^T d B)] A for its 6x6 input tile d, 36 multiplies per tile and channel
// pair instead of 144 (F(2x2, 3x3): 2x2 tiles of 4x4 inputs, 16 instead of
// 36). For 3x3, stride-1, undilated, ungrouped layers with K a multiple of
// the vector width. Below, for F(4x4, 3x3) (m = 4, alpha = 6):
//
//   U[a][b][ko][c][kv]          = sum_{r,s} G[a][r] G[b][s] weight[ko*kb + kv][c][r][s]
//   T1[n][th][a][c][x]          = sum_i BT[a][i] pdata[n][c][4th+i][x]
//   V[n][th][a][b][c][tw]       = sum_j BT[b][j] T1[n][th][a][c][4tw+j]
//   M[n][th][a][b][ko][tw][kv]  = sum_c U[a][b][ko][c][kv] * V[n][th][a][b][c][tw]
//   Y2[n][th][ko][tw][i][b][kv] = sum_a AT[i][a] M[n][th][a][b][ko][tw][kv]
//   Y[n][th][ko][tw][i*4+j][kv] = sum_b AT[j][b] Y2[n][th][ko][tw][i][b][kv]
//   out[n][k][oh][ow]           = epilogue(Y[n][oh/4][k/kb][ow/4][oh%4*4 + ow%4][k%kb] + bias[k])
//
// U is the kernel's packed weight argument (Built::packs: transformed once,
// at compile time for a model's constants). Schedule: out loops n, th.o
// (blocks of wg_rows rows of tiles), th.i, ko, tw, i, j, kv (a vector
// stored as a scatter along K). V (computed at th.o, vectorized along a row
// of tiles: stride-4 reads of T1, a padded row transformed in contiguous
// vectors, computed per input channel) and M (at th.o: 36 GEMMs of K x C by
// C x tiles, their accumulators a register tile of wg_rows x wg_tw tiles x
// kb channels, one input value broadcast per step as in NCHWc); Y and Y2
// at tw, vectorized along the channel block. `parallel` runs the blocks of
// tile rows in parallel (wg_par=0) or, for images of few blocks, each
// block's stages (wg_par=1: V over input channels, the GEMMs over a, the
// output over channel blocks). The transforms' coefficients are constants
// after unrolling: each transform is a chain of selects over its unrolled
// index of sums of the nonzero terms only.
//
// With in_block (the layout pass's NCHW[16]c input) the input transform runs
// along the channel block instead: T1[n][th][a][cb][x][v] and
// V[n][th][a][b][tw][cb][v], both vectorized along v, the GEMMs reducing over
// (cb, v). With out_block the output is written in channel blocks, wg_kb a
// multiple of the block: one vector store per block and pixel.
#include <algorithm>
#include <set>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"

namespace kiln::compiler::ops {

using namespace ir;

namespace {

using Matrix = std::vector<std::vector<double>>;

// One Winograd algorithm F(m x m, 3x3): output tiles of m x m from input
// tiles of alpha = m + 2, and its three transform matrices.
struct Transform {
  int64_t m, alpha;
  Matrix bt, g, at;
};

// F(4x4, 3x3): 36 multiplies per tile and channel pair instead of 144
// (2.25 a pixel instead of 9); transformed weights 4x the weights.
const Transform& F4() {
  static const Transform t{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  return t;
}

// F(2x2, 3x3): 16 multiplies per tile and channel pair instead of 36 (4 a
// pixel); transformed weights 16/9 the weights. On small images, where the
// layer streams its weights from memory, fewer bytes can beat fewer
// multiplies (a 7x7 image is 16 such tiles, 8x8 computed, against 4 tiles of
// F(4x4, 3x3): 256 multiplies per channel pair against 144, and 441 direct).
const Transform& F2() {
  static const Transform t{2,
                           4,
                           {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                           {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                           {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  return t;
}

const Transform& TransformOf(int64_t layout) { return layout == kWinograd2Layout ? F2() : F4(); }

// sum_{p,q} L[u][p] * R[v][q] * x(p, q) over the nonzero coefficients, for
// the constant rows u of `L` and v of `R` picked by the (unrolled) index
// expressions eu and ev: a chain of selects that folds to the one sum once
// eu and ev are constants.
template <typename X>
Expr Bilinear(const Matrix& L, const Expr& eu, const Matrix& R, const Expr& ev, X x) {
  auto sum = [&](size_t u, size_t v) {
    Expr s;
    for (size_t p = 0; p < L[u].size(); ++p) {
      for (size_t q = 0; q < R[v].size(); ++q) {
        const double c = L[u][p] * R[v][q];
        if (c == 0) continue;
        Expr t = c == 1 ? x(p, q) : x(p, q) * FloatImm(c);
        s = s.defined() ? s + t : t;
      }
    }
    return s.defined() ? s : FloatImm(0.0);
  };
  Expr chain;
  for (size_t u = L.size(); u-- > 0;) {
    Expr inner;
    for (size_t v = R.size(); v-- > 0;) {
      Expr s = sum(u, v);
      inner = inner.defined() ? Select(Eq(ev, IntImm(static_cast<int64_t>(v))), s, inner) : s;
    }
    chain = chain.defined() ? Select(Eq(eu, IntImm(static_cast<int64_t>(u))), inner, chain) : inner;
  }
  return chain;
}

// sum_p L[u][p] * x(p) over the nonzero coefficients of the constant row u
// of `L` that the (unrolled) index expression eu picks, as Bilinear.
template <typename X>
Expr Linear(const Matrix& L, const Expr& eu, X x) {
  static const Matrix kOne = {{1}};
  return Bilinear(L, eu, kOne, IntImm(0), [&](size_t p, size_t) { return x(p); });
}

int64_t Tiles(int64_t extent, const Transform& f) { return (extent + f.m - 1) / f.m; }

// Bytes of the per-row-of-tiles scratch V (input transform, C channels) or
// M (products, K channels).
int64_t RowScratchBytes(const Workload& w, int64_t channels, const Transform& f) {
  return 4 * f.alpha * f.alpha * channels * Tiles(w.Int("OW"), f);
}

int64_t MaxChannels(const Workload& w) { return std::max(w.Int("C"), w.Int("K")); }

bool TileFits(const Target& t, int64_t kb, int64_t tiles) {
  return AccVectors(t, kb, tiles) <= AccBudget(t, kb);
}

}  // namespace

bool WinogradEligible(const Workload& w, const Target& t, int64_t layout) {
  const auto& st = w.Ints("stride");
  const auto& dil = w.Ints("dilation");
  return w.Int("groups") == 1 && w.Int("R") == 3 && w.Int("S") == 3 && st[0] == 1 && st[1] == 1 &&
         dil[0] == 1 && dil[1] == 1 && w.Int("K") % t.NativeVectorLanes() == 0 &&
         RowScratchBytes(w, MaxChannels(w), TransformOf(layout)) <= kMaxScratchBytes;
}

std::vector<Knob> WinogradKnobs(const Workload& w, const Target& t) {
  // wg_par (with parallel=1): 0 runs the blocks of tile rows in parallel,
  // 1 each block's stages (V over input channels, the GEMMs over a, the
  // output over channel blocks), for images of few blocks. The choices are
  // those of either tile size (layout 4 or 5); the check refuses the other's.
  std::vector<Knob> k = {{"wg_kb", {0}}, {"wg_tw", {0}}, {"wg_rows", {0}}, {"wg_par", {0}}};
  std::set<int64_t> tws, rows;
  for (int64_t layout : {kWinograd4Layout, kWinograd2Layout}) {
    if (!WinogradEligible(w, t, layout)) continue;
    const Transform& f = TransformOf(layout);
    const int64_t TW = Tiles(w.Int("OW"), f);
    for (int64_t d = 1; d <= std::min<int64_t>(TW, 16); ++d) {
      if (TW % d == 0 || d == 4 || d == 7 || d == 8) tws.insert(d);
    }
    // Rows of tiles per block (the divisors of TH whose scratch fits): the
    // transformed weights are read once per block.
    const int64_t TH = Tiles(w.Int("OH"), f);
    for (int64_t d = 1; d <= TH; ++d) {
      if (TH % d == 0 && d * RowScratchBytes(w, MaxChannels(w), f) <= kMaxScratchBytes) {
        rows.insert(d);
      }
    }
  }
  if (tws.empty()) return k;
  k[0].choices = ChannelTileChoices(w, t);
  k[1].choices.assign(tws.begin(), tws.end());
  k[2].choices.assign(rows.begin(), rows.end());
  k[3].choices = {0, 1};
  return k;
}

absl::Status WinogradCheck(const Workload& w, const Target& t, const Config& c) {
  const int64_t layout = c.at("layout");
  const Transform& f = TransformOf(layout);
  if (!WinogradEligible(w, t, layout)) {
    return absl::InvalidArgumentError(
        StrCat("conv2d: layout=", layout, " (Winograd F(", f.m, "x", f.m,
               ", 3x3)) needs a 3x3, stride-1, undilated, ungrouped layer with K a multiple of the "
               "vector width and a row of tiles' scratch within 1 MiB"));
  }
  const int64_t kb = c.at("wg_kb"), tiles = c.at("wg_tw") * c.at("wg_rows");
  if (auto s = CheckChannelTile(w, t, kb, "wg_kb"); !s.ok()) return s;
  const int64_t TH = Tiles(w.Int("OH"), f), rows = c.at("wg_rows");
  if (rows < 1 || TH % rows != 0 ||
      rows * RowScratchBytes(w, MaxChannels(w), f) > kMaxScratchBytes) {
    return absl::InvalidArgumentError(StrCat("conv2d Winograd F(", f.m, "x", f.m,
                                             ", 3x3): wg_rows=", rows, " does not divide the ", TH,
                                             " rows of tiles, or their scratch exceeds 1 MiB"));
  }
  if (c.at("wg_tw") > Tiles(w.Int("OW"), f) && c.at("wg_tw") > 1) {
    return absl::InvalidArgumentError(StrCat("conv2d Winograd F(", f.m, "x", f.m,
                                             ", 3x3): wg_tw=", c.at("wg_tw"), " exceeds the ",
                                             Tiles(w.Int("OW"), f), " tiles of a row"));
  }
  if (!TileFits(t, kb, tiles)) {
    return absl::InvalidArgumentError(StrCat(
        "conv2d Winograd: a ", tiles, "-tile x ", kb, "-channel accumulator tile needs ",
        AccVectors(t, kb, tiles), " vector registers; the target has ", t.NumVectorRegisters()));
  }
  if (c.at("parallel") && !c.at("wg_par") && TH / rows < 2) {
    return absl::InvalidArgumentError("conv2d Winograd: parallel=1 with one block of tile rows");
  }
  return absl::OkStatus();
}

Config WinogradDefault(const Workload& w, const Target& t, int64_t layout) {
  Config c;
  auto k = WinogradKnobs(w, t);
  c["wg_kb"] = k[0].choices.front();
  c["wg_tw"] = k[1].choices.front();
  c["wg_rows"] = k[2].choices.front();
  c["wg_par"] = 0;
  if (!WinogradEligible(w, t, layout)) return c;
  const Transform& f = TransformOf(layout);
  // Small images (16 tiles or fewer) as one block of tile rows, so that the
  // transformed weights, several times the weights, are read once per call;
  // larger ones a row of tiles per block. Then the register tile with the
  // most accumulators that fits.
  const int64_t TH = Tiles(w.Int("OH"), f), TW = Tiles(w.Int("OW"), f);
  if (TH * TW <= 16 && TH * RowScratchBytes(w, MaxChannels(w), f) <= kMaxScratchBytes) {
    c["wg_rows"] = TH;
  }
  c["wg_tw"] = 1;
  for (int64_t kb : k[0].choices) {
    for (int64_t tw : k[1].choices) {
      if (tw > TW && tw > 1) continue;
      if (TileFits(t, kb, c["wg_rows"] * tw) &&
          AccVectors(t, kb, c["wg_rows"] * tw) >
              AccVectors(t, c["wg_kb"], c["wg_rows"] * c["wg_tw"]) - (kb > c["wg_kb"])) {
        c["wg_kb"] = kb;
        c["wg_tw"] = tw;
      }
    }
  }
  // In parallel by blocks where there are 8 or more, else by stages
  // (measured at 2 threads: 28x28 1.0x oneDNN by blocks, 1.7x by stages).
  c["wg_par"] = TH / c["wg_rows"] < 8;
  return c;
}

absl::StatusOr<Built> BuildWinograd(const Workload& w, const Target& t, const Config& cfg) {
  const int lanes = t.NativeVectorLanes();
  const int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W"), K = w.Int("K");
  const int64_t OH = w.Int("OH"), OW = w.Int("OW");
  const Transform& f = TransformOf(cfg.at("layout"));
  const int64_t kTile = f.m, kAlpha = f.alpha;
  const int64_t kb = cfg.at("wg_kb"), Ko = K / kb, TH = Tiles(OH, f), TW = Tiles(OW, f);
  const int64_t ib = w.IntOr("in_block", 0);
  te::Tensor data = te::Placeholder("data", BlockedShape({N, C, H, W}, ib));
  te::Tensor weight = te::Placeholder("weight", {K, C, 3, 3});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {K});
  auto eps = EpilogueOperands(w);

  te::Tensor u_of =
      te::Compute("wtrans", {kAlpha, kAlpha, Ko, C, kb}, [&](const std::vector<Var>& i) {
        Expr k = i[2] * IntImm(kb) + i[4];
        return Bilinear(f.g, i[0], f.g, i[1], [&](size_t r, size_t s) {
          return weight(
              {k, i[3], IntImm(static_cast<int64_t>(r)), IntImm(static_cast<int64_t>(s))});
        });
      });
  te::Tensor u = te::Placeholder("weight_winograd", {kAlpha, kAlpha, Ko, C, kb});
  // The input transform in two passes: B^T d along the rows of a row of
  // tiles (contiguous vectors along the padded row), then (B^T d) B along
  // its columns (stride-4 reads of the first pass, vectorized along the
  // row's tiles).
  const int64_t WP = kTile * TW + 2;
  // The zero-padded input at row i*4 + p of tile row th, column x, channel
  // c (NCHW) or block c, lane cv (blocked); clamped indices keep the
  // unselected loads in bounds (also past the last tile's edge).
  auto padded = [&](const Var& n, const Var& th, size_t p, const Var& c, const Var& x,
                    const Var* cv) {
    Expr h = th * IntImm(kTile) + IntImm(static_cast<int64_t>(p));
    return PaddedLoad(w, h, x, [&](const Expr& hc, const Expr& xc) {
      return cv ? data({n, c, hc, xc, *cv}) : data({n, c, hc, xc});
    });
  };
  te::Tensor t1, v, macc;
  if (ib == 0) {
    t1 = te::Compute("T1", {N, TH, kAlpha, C, WP}, [&](const std::vector<Var>& i) {
      return Linear(f.bt, i[2],
                    [&](size_t p) { return padded(i[0], i[1], p, i[3], i[4], nullptr); });
    });
    v = te::Compute("V", {N, TH, kAlpha, kAlpha, C, TW}, [&](const std::vector<Var>& i) {
      return Linear(f.bt, i[3], [&](size_t q) {
        return t1({i[0], i[1], i[2], i[4], i[5] * IntImm(kTile) + IntImm(static_cast<int64_t>(q))});
      });
    });
    IterRange rc = te::ReduceAxis(C, "rc");
    macc = te::Compute("Macc", {N, TH, kAlpha, kAlpha, Ko, TW, kb}, [&](const std::vector<Var>& i) {
      return te::Sum(
          u({i[2], i[3], i[4], rc.var, i[6]}) * v({i[0], i[1], i[2], i[3], rc.var, i[5]}), {rc});
    });
  } else {
    t1 = te::Compute("T1", {N, TH, kAlpha, C / ib, WP, ib}, [&](const std::vector<Var>& i) {
      return Linear(f.bt, i[2], [&](size_t p) { return padded(i[0], i[1], p, i[3], i[4], &i[5]); });
    });
    v = te::Compute("V", {N, TH, kAlpha, kAlpha, TW, C / ib, ib}, [&](const std::vector<Var>& i) {
      return Linear(f.bt, i[3], [&](size_t q) {
        return t1(
            {i[0], i[1], i[2], i[5], i[4] * IntImm(kTile) + IntImm(static_cast<int64_t>(q)), i[6]});
      });
    });
    IterRange rco = te::ReduceAxis(C / ib, "rco"), rci = te::ReduceAxis(ib, "rci");
    macc = te::Compute("Macc", {N, TH, kAlpha, kAlpha, Ko, TW, kb}, [&](const std::vector<Var>& i) {
      return te::Sum(u({i[2], i[3], i[4], rco.var * IntImm(ib) + rci.var, i[6]}) *
                         v({i[0], i[1], i[2], i[3], i[5], rco.var, rci.var}),
                     {rco, rci});
    });
  }
  te::Tensor mstage =
      te::Compute("M", {N, TH, kAlpha, kAlpha, Ko, TW, kb}, [&](const std::vector<Var>& i) {
        return macc({i[0], i[1], i[2], i[3], i[4], i[5], i[6]});
      });
  // The output transform in two passes too: A^T M, then (A^T M) A.
  te::Tensor y2 =
      te::Compute("Y2", {N, TH, Ko, TW, kTile, kAlpha, kb}, [&](const std::vector<Var>& i) {
        return Linear(f.at, i[4], [&](size_t a) {
          return mstage({i[0], i[1], IntImm(static_cast<int64_t>(a)), i[5], i[2], i[3], i[6]});
        });
      });
  te::Tensor y =
      te::Compute("Y", {N, TH, Ko, TW, kTile * kTile, kb}, [&](const std::vector<Var>& i) {
        Expr ti = FloorDiv(i[4], IntImm(kTile)), tj = FloorMod(i[4], IntImm(kTile));
        return Linear(f.at, tj, [&](size_t b) {
          return y2({i[0], i[1], i[2], i[3], ti, IntImm(static_cast<int64_t>(b)), i[5]});
        });
      });
  // Output channel ko*kb + kin at pixel (oh, ow), from Y.
  te::Tensor out = ChannelTiledOutput(
      w, kb, bias, eps,
      [&](const Var& n, const Expr& ko, const Expr& kin, const Var& oh, const Var& ow) {
        return y({n, FloorDiv(oh, IntImm(kTile)), ko, FloorDiv(ow, IntImm(kTile)),
                  FloorMod(oh, IntImm(kTile)) * IntImm(kTile) + FloorMod(ow, IntImm(kTile)), kin});
      });

  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  auto [ko, km, kv] = SplitChannelTiles(s, out, w, kb);
  auto [th, ti] = s.Split(out, s.Axis(out, 2), kTile);
  auto [tw, tj] = s.Split(out, s.Axis(out, 3), kTile);
  auto [tho, thi] = s.Split(out, th, cfg.at("wg_rows"));
  if (km) {
    s.Reorder(out, {s.Axis(out, 0), tho, thi, ko, tw, ti, tj, km, kv});
    s.Unroll(out, km);
  } else {
    s.Reorder(out, {s.Axis(out, 0), tho, thi, ko, tw, ti, tj, kv});
  }
  // NCHW: a vector of Y along K, stored as a scatter along K: as fast as
  // NCHWc's unrolled scalar stores here, and a tenth of the code (LLVM's
  // scheduler took seconds over the 16 x kb unrolled stores). Blocked: a
  // contiguous vector store.
  s.Vectorize(out, kv);
  s.Unroll(out, tj);
  s.Unroll(out, ti);
  const bool par_blocks = cfg.at("parallel") && !cfg.at("wg_par");
  const bool par_stages = cfg.at("parallel") && cfg.at("wg_par");
  if (par_blocks) s.Parallel(out, tho);
  if (par_stages) s.Parallel(out, ko);

  s.ComputeAt(v, out, tho);
  if (ib == 0) {
    // V: wg_rows rows of input tiles, vectorized along a row (stride-4 reads).
    s.Reorder(v,
              {s.Axis(v, 0), s.Axis(v, 1), s.Axis(v, 4), s.Axis(v, 2), s.Axis(v, 3), s.Axis(v, 5)});
    s.Vectorize(v, s.Axis(v, 5));
    s.Unroll(v, s.Axis(v, 3));
    s.Unroll(v, s.Axis(v, 2));
    s.ComputeAt(t1, v, s.Axis(v, 4));
    s.Unroll(t1, s.Axis(t1, 2));
    s.Vectorize(t1, s.Split(t1, s.Axis(t1, 4), lanes).second);
    if (par_stages) s.Parallel(v, s.Axis(v, 4));
  } else {
    // V per channel block: its tiles one after another, vectorized along
    // the block (contiguous reads of T1, the block's rows of the tile row).
    s.Reorder(v, {s.Axis(v, 0), s.Axis(v, 1), s.Axis(v, 5), s.Axis(v, 4), s.Axis(v, 2),
                  s.Axis(v, 3), s.Axis(v, 6)});
    s.Vectorize(v, s.Axis(v, 6));
    s.Unroll(v, s.Axis(v, 3));
    s.Unroll(v, s.Axis(v, 2));
    s.ComputeAt(t1, v, s.Axis(v, 5));
    s.Unroll(t1, s.Axis(t1, 2));
    s.Vectorize(t1, s.Axis(t1, 5));
    if (par_stages) s.Parallel(v, s.Axis(v, 5));
  }

  // M: 36 GEMMs per row of tiles; the accumulators Macc of wg_tw tiles x kb
  // channels at M's tile block, reduction outside the tile.
  s.ComputeAt(mstage, out, tho);
  auto [mto, mti] = s.Split(mstage, s.Axis(mstage, 5), cfg.at("wg_tw"));
  s.Reorder(mstage, {s.Axis(mstage, 0), s.Axis(mstage, 2), s.Axis(mstage, 3), s.Axis(mstage, 4),
                     mto, s.Axis(mstage, 1), mti, s.Axis(mstage, 6)});
  s.Vectorize(mstage, s.Axis(mstage, 6));
  if (par_stages) s.Parallel(mstage, s.Axis(mstage, 2));
  s.ComputeAt(macc, mstage, mto);
  std::vector<te::IterVar> macc_order = {s.Axis(macc, 0), s.Axis(macc, 2), s.Axis(macc, 3),
                                         s.Axis(macc, 4), s.ReduceAxisOf(macc, 0)};
  if (ib > 0) macc_order.push_back(s.ReduceAxisOf(macc, 1));
  for (int a : {1, 5, 6}) macc_order.push_back(s.Axis(macc, a));
  s.Reorder(macc, macc_order);
  s.Unroll(macc, s.Axis(macc, 1));
  s.Unroll(macc, s.Axis(macc, 5));
  s.Vectorize(macc, s.Axis(macc, 6));

  // Y: one output tile of one channel block, vectorized along the block.
  s.ComputeAt(y, out, tw);
  s.Unroll(y, s.Axis(y, 4));
  s.Vectorize(y, s.Axis(y, 5));
  s.ComputeAt(y2, y, s.Axis(y, 3));
  s.Unroll(y2, s.Axis(y2, 4));
  s.Unroll(y2, s.Axis(y2, 5));
  s.Vectorize(y2, s.Axis(y2, 6));

  b.SetArgs({data, u, bias}, eps, out);
  b.packs.push_back({1, weight, u_of});
  return b;
}

}  // namespace kiln::compiler::ops

// dense (Gemm / batched MatMul): out = epilogue(alpha * op(A) op(B) + beta * C).
// Template: output tiled [tile_m x tile_n] (tile_n vectorized); the
// accumulator tile is a local scratch computed at the output tile loop, with
// the k loop (split by tile_k, optionally unrolled) outside the unrolled mi
// and vectorized ni loops: a register-tiled micro-kernel.
// Variant vec_k=L (offered when A is [M,K] and B is [N,K], i.e. both operands
// are contiguous along k, as in a Gemm with transB=1): each output element is
// a dot product computed with an L-lane vector accumulator over k (the
// `partial` stage, k = ko*L + l, l vectorized), then summed horizontally.
#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/dense_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

DenseDims DenseDimsOf(const Workload& w) {
  DenseDims d;
  d.M = w.Int("M");
  d.N = w.Int("N");
  d.K = w.Int("K");
  d.batch = w.IntOr("batch", 1);
  d.ba = w.IntOr("batch_a", 0) != 0;
  d.bb = w.IntOr("batch_b", 0) != 0;
  d.batched = d.ba || d.bb;
  return d;
}

te::Tensor DenseAcc(const Workload& w, const te::Tensor& A, const te::Tensor& B,
                    const te::Tensor& Bp, int64_t tn, const std::vector<int64_t>& out_shape) {
  const DenseDims d = DenseDimsOf(w);
  const bool ta = w.Int("transA") != 0, tb = w.Int("transB") != 0;
  const size_t off = d.batched ? 1 : 0;
  IterRange rk = te::ReduceAxis(d.K, "rk");
  return te::Compute("acc", out_shape, [&](const std::vector<Var>& i) {
    Expr m = i[off], n = i[off + 1];
    std::vector<Expr> ai = ta ? std::vector<Expr>{rk.var, m} : std::vector<Expr>{m, rk.var};
    std::vector<Expr> bi = tb ? std::vector<Expr>{n, rk.var} : std::vector<Expr>{rk.var, n};
    if (d.ba) ai.insert(ai.begin(), i[0]);
    if (d.bb) bi.insert(bi.begin(), i[0]);
    Expr bv = Bp.defined() ? Bp({FloorDiv(n, IntImm(tn)), rk.var, FloorMod(n, IntImm(tn))}) : B(bi);
    return te::Sum(A(ai) * bv, {rk});
  });
}

te::Tensor DenseOut(const Workload& w, const te::Tensor& acc, const te::Tensor& C,
                    const std::vector<te::Tensor>& eps, const std::vector<int64_t>& out_shape) {
  const double alpha = w.FloatOr("alpha", 1.0), beta = w.FloatOr("beta", 1.0);
  return te::Compute(
      "out", out_shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> ii(i.begin(), i.end());
        Expr y = acc(ii);
        if (alpha != 1.0) y = y * FloatImm(alpha);
        if (C.defined()) {
          Expr cv = C(BroadcastIndex(C->shape, i));
          y = y + (beta != 1.0 ? cv * FloatImm(beta) : cv);
        }
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(OutputDType(w)));
}

namespace {
using Dims = DenseDims;
Dims DimsOf(const Workload& w) { return DenseDimsOf(w); }

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  Dims d = DimsOf(w);
  std::vector<Knob> k;
  k.push_back({"tile_m", UpTo({1, 2, 4, 6, 8, 12, 14}, d.M)});
  k.push_back({"tile_n", VectorChoices(d.N, t.NativeVectorLanes())});
  k.push_back({"tile_k", UpTo({1, 4, 8, 16, 32, 64}, d.K)});
  k.push_back({"unroll_k", {0, 1}});
  k.push_back({"parallel", {0}});
  // In parallel over row tiles, or over column panels (n_outer=1): a
  // matrix-vector product (M=1) has only the latter.
  if ((d.batched ? d.batch : 1) * d.M > 1 || d.N > 1) k.back().choices.push_back(1);
  // pack_b=1: B is taken as [ceil(N/tile_n)][K][tile_n] panels
  // (Built::packs: packed once, at compile time for a constant B), so that
  // the micro-kernel streams one contiguous panel instead of tile_n columns
  // of rows N apart. n_outer=1 runs the column panels outside the row tiles
  // so a panel stays in cache across all of them.
  k.push_back({"pack_b", {0}});
  if (!d.bb) k.back().choices.push_back(1);
  k.push_back({"n_outer", {0, 1}});
  k.push_back({"vec_k", {0}});
  if (w.Int("transA") == 0 && w.Int("transB") != 0) {
    int lanes = t.NativeVectorLanes();
    for (int m = 1; m <= 4; m *= 2) {
      if (lanes * m <= d.K) k.back().choices.push_back(static_cast<int64_t>(lanes) * m);
    }
  }
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  Dims d = DimsOf(w);
  if (c.at("unroll_k") && c.at("tile_k") > 16) {
    return absl::InvalidArgumentError(StrCat("dense: unroll_k=1 with tile_k=", c.at("tile_k"),
                                             " would unroll more than 16 k steps"));
  }
  if (c.at("pack_b") && (c.at("vec_k") || c.at("tile_n") == 1)) {
    return absl::InvalidArgumentError("dense: pack_b=1 needs vec_k=0 and tile_n > 1");
  }
  int64_t outer = (d.batched ? d.batch : 1) * ((d.M + c.at("tile_m") - 1) / c.at("tile_m"));
  if (c.at("n_outer")) outer = (d.N + c.at("tile_n") - 1) / c.at("tile_n");
  if (c.at("n_outer") && d.batched) {
    return absl::InvalidArgumentError("dense: n_outer=1 with a batch");
  }
  if (c.at("parallel") && outer < 2) {
    return absl::InvalidArgumentError(
        StrCat("dense: parallel=1 but tile_m=", c.at("tile_m"),
               " leaves a single outer iteration to run in parallel"));
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  Dims d = DimsOf(w);
  Config c;
  // A tile_m x (2 vectors) accumulator tile that fills the vector registers
  // beside the two B vectors and a broadcast: 6 x 16 on AVX2 (16 registers),
  // 14 x 32 on AVX-512 (32). Each B vector loaded feeds tile_m FMAs: with
  // 8 rows, a core with two 512-bit FMA units (Intel) waited on the B panel
  // streaming from L2 (matmul 1024^3: 0.50 of oneDNN at 8 rows, 0.90 at 14
  // with the k steps unrolled).
  c["tile_m"] = Pick(k[0].choices, (t.NumVectorRegisters() - 3) / 2);
  c["tile_n"] = Pick(k[1].choices, 2 * t.NativeVectorLanes());
  c["tile_k"] = Pick(k[2].choices, 8);
  c["unroll_k"] = c["tile_k"] > 1 ? 1 : 0;
  c["parallel"] = 0;
  c["vec_k"] = 0;
  // Packed panels where B's columns are far apart and there are rows enough
  // to amortize packing a B that is not a constant.
  c["pack_b"] = d.M >= 16 && !d.bb && c["tile_n"] > 1 ? 1 : 0;
  // The larger operand streams once: with more columns than rows (BERT's
  // 128 x 768 x 768 and 128 x 3072 x 768), each B panel stays in cache while
  // every row tile of A (the smaller) passes it (0.74 -> 0.96 of oneDNN).
  c["n_outer"] = !d.batched && d.N > d.M ? 1 : 0;
  // A matrix-vector product: the weights stream once, in parallel over
  // column panels.
  const bool gemv = d.M == 1 && !d.batched;
  if (gemv) c["n_outer"] = 1;
  // B as [K,N]: four vectors of columns, four independent multiply-add
  // chains per k (two leave the chain latency exposed: MatMul 1x1000x512
  // 0.65 -> 0.97x oneDNN at one thread).
  if (gemv) c["tile_n"] = Pick(k[1].choices, 4 * t.NativeVectorLanes());
  if (k[7].choices.size() > 1 && (gemv || d.N < 2 * t.NativeVectorLanes())) {
    // Contiguous k (B is [N,K]) and a single row, or too few columns to
    // vectorize n: dot products with two vector accumulators (or one when K
    // is short).
    c["vec_k"] = Pick(k[7].choices, 2 * t.NativeVectorLanes());
    c["tile_n"] = 1;
    c["tile_k"] = 1;
    c["pack_b"] = 0;
  }
  if (k[4].choices.size() > 1 && d.M * d.N * d.K >= (1 << 18)) {
    c["parallel"] = 1;
    if (!Check(w, t, c).ok()) c["parallel"] = 0;
  }
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& c) {
  Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const bool tb = w.Int("transB") != 0;
  te::Tensor A = te::Placeholder("A", sig->inputs[0].shape);
  te::Tensor B = te::Placeholder("B", sig->inputs[1].shape);
  int64_t tm = c.at("tile_m"), tn = c.at("tile_n"), tk = c.at("tile_k");
  te::Tensor Bp;  // packed panels (pack_b)
  te::Tensor Bp_of;
  if (c.at("pack_b")) {
    // [ceil(N/tn)][K][tn] panels, the last padded with zeros.
    auto packed = te::TransformLayoutOf(B, tb ? "NK" : "KN", StrCat("NK", tn, "n"), "bpack");
    if (!packed.ok()) return packed.status();
    Bp_of = *packed;
    Bp = te::Placeholder("B_packed", Bp_of->shape);
  }
  te::Tensor C;
  if (w.Int("bias")) C = te::Placeholder("C", w.Ints("bias_shape"));
  auto eps = EpilogueOperands(w);
  std::vector<int64_t> out_shape = sig->output.shape;
  size_t off = d.batched ? 1 : 0;
  int64_t vk = c.at("vec_k");
  te::Tensor partial;
  te::Tensor acc;
  if (vk > 0) {
    // partial[.., m, n, l] = sum_ko A[m, ko*vk + l] * B[n, ko*vk + l]
    std::vector<int64_t> pshape = out_shape;
    pshape.push_back(vk);
    IterRange rko = te::ReduceAxis((d.K + vk - 1) / vk, "rko");
    partial = te::Compute("partial", pshape, [&](const std::vector<Var>& i) {
      Expr m = i[off], n = i[off + 1];
      Expr kk = rko.var * IntImm(vk) + i[off + 2];
      bool tail = d.K % vk != 0;
      Expr kc = tail ? Min(kk, IntImm(d.K - 1)) : kk;
      std::vector<Expr> ai = {m, kc}, bi = {n, kc};
      if (d.ba) ai.insert(ai.begin(), i[0]);
      if (d.bb) bi.insert(bi.begin(), i[0]);
      Expr prod = A(ai) * B(bi);
      if (tail) prod = Select(kk < IntImm(d.K), prod, FloatImm(0.0));
      return te::Sum(prod, {rko});
    });
    IterRange rl = te::ReduceAxis(vk, "rl");
    acc = te::Compute("acc", out_shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> pi(i.begin(), i.end());
      pi.push_back(rl.var);
      return te::Sum(partial(pi), {rl});
    });
  }
  if (vk == 0) acc = DenseAcc(w, A, B, Bp, tn, out_shape);
  te::Tensor out = DenseOut(w, acc, C, eps, out_shape);
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  // Output: [b,] mo, no, mi, ni (or no, mo, mi, ni).
  te::IterVar om = s.Axis(out, static_cast<int>(off)), on = s.Axis(out, static_cast<int>(off + 1));
  auto [mo, mi] = s.Split(out, om, tm);
  auto [no, ni] = s.Split(out, on, tn);
  const bool n_outer = c.at("n_outer") != 0;
  s.Reorder(out, n_outer ? std::vector<te::IterVar>{no, mo, mi, ni}
                         : std::vector<te::IterVar>{mo, no, mi, ni});
  if (tn > 1) s.Vectorize(out, ni);
  if (c.at("parallel")) {
    // A batch runs in parallel by itself: fused with mo it would hide the
    // row tile from bound inference (every iteration would then compute the
    // accumulators of every row).
    te::IterVar p = n_outer ? no : mo;
    if (d.batched && d.batch > 1) p = s.Axis(out, 0);
    s.Parallel(out, p);
  }
  s.ComputeAt(acc, out, n_outer ? mo : no);
  if (vk > 0) {
    // One dot product per acc element: partial at acc's innermost data axis.
    te::IterVar an = s.Axis(acc, static_cast<int>(off + 1));
    s.ComputeAt(partial, acc, an);
    te::IterVar pl = s.Axis(partial, static_cast<int>(off + 2));
    auto [pko, pki] = s.Split(partial, s.ReduceAxisOf(partial, 0), tk);
    s.Reorder(partial, {pko, pki, pl});
    s.Vectorize(partial, pl);
    if (c.at("unroll_k") && tk > 1) s.Unroll(partial, pki);
    if (tm > 1 && tm <= 8) s.Unroll(acc, s.Axis(acc, static_cast<int>(off)));
    b.SetArgs({A, B, C}, eps, out);
    return b;
  }
  // Accumulator: [b,] ko, ki, m (unrolled), n (vectorized).
  te::IterVar am = s.Axis(acc, static_cast<int>(off)), an = s.Axis(acc, static_cast<int>(off + 1));
  auto [ko, ki] = s.Split(acc, s.ReduceAxisOf(acc, 0), tk);
  s.Reorder(acc, {ko, ki, am, an});
  if (tm > 1 && tm <= 16) s.Unroll(acc, am);
  if (tn > 1) s.Vectorize(acc, an);
  if (c.at("unroll_k") && tk > 1) s.Unroll(acc, ki);
  b.SetArgs({A, Bp.defined() ? Bp : B, C}, eps, out);
  if (Bp.defined()) b.packs.push_back({1, B, Bp_of});
  return b;
}

}  // namespace

const OpTemplate* DenseTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops

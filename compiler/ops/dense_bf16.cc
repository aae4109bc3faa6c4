// dense in bfloat16 (a float32 model compiled with --precision bf16: the
// graph pass MarkBf16 sets the workload's bf16=1 on products by a constant
// B): out = epilogue(alpha * bf16(A) bf16(B) + beta * C), the products of
// bfloat16 values (rounded to nearest even) summed in float32.
//
//   Bp[panel][s][j] = the bf16 pair (B[2s][n], B[2s+1][n]), n = panel*tn + j,
//                     one int32 each: packed once (Built::packs: at compile
//                     time for a constant B), zeros past K and N
//   Ap[.., m][s]    = the pair (A[m][2s], A[m][2s+1]): packed per call, its
//                     own stage, in parallel over rows
//   acc[.., m][n]   = sum_s dot2_bf16(Ap[m][s], Bp[n/tn][s][n%tn])
//
// dot2_bf16 is one lane of vdpbf16ps (AVX512_BF16: two bf16 products summed
// into a float32 accumulator; codegen/llvm_intrinsics.h) where the CPU has
// it, else the halves widened and multiplied in float32. Schedule as the
// float dense template's: an output tile of tile_m rows x tile_n columns
// (vectorized) whose accumulators stay in registers over the pair steps
// (split by tile_k, unrolled), one broadcast of A's pair per row and step.
// With AMX-BF16 (amx=1, K a multiple of 32) the acc box is tensorized into
// tdpbf16ps tile products of Ap's rows and Bp's panel (codegen/llvm_amx.h;
// matmul_int8.cc does the same with bytes).
#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/dense_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

// AMX where the CPU has AMX-BF16 and A's rows of pairs are whole tile
// steps (K a multiple of 32).
constexpr int64_t kMaxVectorRows = 14;
bool AmxOperandsFit(const Workload& w, const Target& t) {
  const int64_t K = DenseDimsOf(w).K;
  return K % 2 == 0 && AmxFits(t, "amx-bf16", K / 2 * 4);
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const DenseDims d = DenseDimsOf(w);
  const int64_t L = t.NativeVectorLanes();
  const int64_t S = (d.K + 1) / 2;
  std::vector<Knob> k;
  k.push_back({"tile_m", UpTo({1, 2, 4, 6, 8, 12, 14}, d.M)});
  // Columns per tile: whole vectors (a last partial panel is zero-padded).
  k.push_back({"tile_n", {L}});
  for (int64_t v = 2; v <= 4 && v * L <= std::max(d.N, L); ++v) k.back().choices.push_back(v * L);
  k.push_back({"tile_k", UpTo({1, 2, 4, 8, 16}, S)});
  k.push_back({"parallel", {0}});
  if ((d.batched ? d.batch : 1) * d.M > 1 || d.N > L) k.back().choices.push_back(1);
  // n_outer=1: column panels outside the row tiles, each panel kept in
  // cache while every row passes it.
  k.push_back({"n_outer", {0}});
  if (!d.batched) k.back().choices.push_back(1);
  AddAmxKnobs(k, d.M, AmxOperandsFit(w, t));
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  const DenseDims d = DenseDimsOf(w);
  if (absl::Status s = CheckAmxTiles(c, kMaxVectorRows, "dense bf16"); !s.ok()) return s;
  const int64_t outer =
      c.at("n_outer") ? (d.N + c.at("tile_n") - 1) / c.at("tile_n")
                      : (d.batched ? d.batch : 1) * ((d.M + c.at("tile_m") - 1) / c.at("tile_m"));
  if (c.at("parallel") && outer < 2) {
    return absl::InvalidArgumentError(
        "dense bf16: parallel=1 leaves a single outer iteration to run in parallel");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const DenseDims d = DenseDimsOf(w);
  auto k = Knobs(w, t);
  Config c;
  // As the float template: tile_m x 2 vectors of accumulators beside the B
  // vectors and a broadcast (14 x 32 with AVX-512's 32 registers).
  c["tile_m"] = Pick(k[0].choices, (t.NumVectorRegisters() - 3) / 2);
  c["tile_n"] = Pick(k[1].choices, 2 * t.NativeVectorLanes());
  c["tile_k"] = Pick(k[2].choices, 4);
  // The larger operand streams once (dense.cc's default).
  c["n_outer"] = !d.batched && d.N > d.M ? 1 : 0;
  c["amx"] = 0;
  if (AmxOperandsFit(w, t) && d.M >= kAmxTile) {
    // Boxes of 32 x 32 (2 x 2 tiles), as the int8 matmul's.
    c["amx"] = 1;
    c["tile_k"] = 1;
    c["tile_m"] = Pick(k[0].choices, 2 * kAmxTile);
    c["tile_n"] = Pick(k[1].choices, 2 * kAmxTile);
  }
  c["parallel"] = 0;
  if (k[3].choices.size() > 1 && d.M * d.N * d.K >= (1 << 18)) {
    c["parallel"] = 1;
    if (!Check(w, t, c).ok()) c["parallel"] = 0;
  }
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  const DenseDims d = DenseDimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType i32 = DataType::Int32();
  const bool ta = w.Int("transA") != 0, tb = w.Int("transB") != 0;
  te::Tensor A = te::Placeholder("A", sig->inputs[0].shape);
  te::Tensor B = te::Placeholder("B", sig->inputs[1].shape);
  const int64_t tm = c.at("tile_m"), tn = c.at("tile_n"), tk = c.at("tile_k");
  const int64_t panels = (d.N + tn - 1) / tn;
  const int64_t S = (d.K + 1) / 2;
  // B's element (k, n) in bf16 bits, 0 outside the matrix.
  auto b_at = [&](Expr k, Expr n) {
    Expr kc = Min(k, IntImm(d.K - 1)), nc = Min(n, IntImm(d.N - 1));
    Expr v = Bf16Bits(tb ? B({nc, kc}) : B({kc, nc}));
    return Select(k < IntImm(d.K) && n < IntImm(d.N), v, IntImm(0, i32));
  };
  te::Tensor Bp_of = te::Compute(
      "bpack", {panels, S, tn},
      [&](const std::vector<Var>& i) {
        Expr n = i[0] * IntImm(tn) + i[2];
        return PackHalves(b_at(i[1] * IntImm(2), n), b_at(i[1] * IntImm(2) + IntImm(1), n));
      },
      i32);
  te::Tensor Bp = te::Placeholder("B_packed", Bp_of->shape, i32);
  // A's pairs, per call.
  const size_t off = d.batched ? 1 : 0;
  std::vector<int64_t> ap_shape = {d.M, S};
  if (d.batched) ap_shape.insert(ap_shape.begin(), d.batch);
  te::Tensor Ap = te::Compute(
      "apack", ap_shape,
      [&](const std::vector<Var>& i) {
        auto a_at = [&](Expr k) {
          Expr kc = d.K % 2 ? Min(k, IntImm(d.K - 1)) : k;
          std::vector<Expr> ai = ta ? std::vector<Expr>{kc, i[off]} : std::vector<Expr>{i[off], kc};
          if (d.ba) ai.insert(ai.begin(), i[0]);
          Expr v = Bf16Bits(A(ai));
          return d.K % 2 ? Select(k < IntImm(d.K), v, IntImm(0, i32)) : v;
        };
        Expr s = i[off + 1];
        return PackHalves(a_at(s * IntImm(2)), a_at(s * IntImm(2) + IntImm(1)));
      },
      i32);
  std::vector<int64_t> out_shape = sig->output.shape;
  IterRange rk = te::ReduceAxis(S, "rk");
  te::Tensor acc = te::Compute("acc", out_shape, [&](const std::vector<Var>& i) {
    Expr m = i[off], n = i[off + 1];
    std::vector<Expr> ai = {m, rk.var};
    if (d.batched) ai.insert(ai.begin(), i[0]);
    Expr bv = Bp({FloorDiv(n, IntImm(tn)), rk.var, FloorMod(n, IntImm(tn))});
    return te::Sum(Call(DataType::Float32(), Intrinsic::kDot2Bf16, {Ap(ai), bv}), {rk});
  });
  te::Tensor C;
  if (w.Int("bias")) C = te::Placeholder("C", w.Ints("bias_shape"));
  auto eps = EpilogueOperands(w);
  te::Tensor out = DenseOut(w, acc, C, eps, out_shape);
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  // A's pairs: rows in parallel, pair steps vectorized.
  {
    te::IterVar am = s.Axis(Ap, static_cast<int>(off));
    if (c.at("parallel")) s.Parallel(Ap, d.batched ? s.Axis(Ap, 0) : am);
    const int64_t L = t.NativeVectorLanes();
    if (S >= L) {
      auto [so, si] = s.Split(Ap, s.Axis(Ap, static_cast<int>(off + 1)), L);
      s.Vectorize(Ap, si);
    }
  }
  // Output: [b,] mo, no, mi, ni (or no, mo, mi, ni).
  te::IterVar om = s.Axis(out, static_cast<int>(off)), on = s.Axis(out, static_cast<int>(off + 1));
  auto [mo, mi] = s.Split(out, om, tm);
  auto [no, ni] = s.Split(out, on, tn);
  const bool n_outer = c.at("n_outer") != 0;
  s.Reorder(out, n_outer ? std::vector<te::IterVar>{no, mo, mi, ni}
                         : std::vector<te::IterVar>{mo, no, mi, ni});
  s.Vectorize(out, ni);
  if (c.at("parallel"))
    s.Parallel(out, d.batched && d.batch > 1 ? s.Axis(out, 0) : n_outer ? no : mo);
  s.ComputeAt(acc, out, n_outer ? mo : no);
  // Accumulator: [b,] ko, ki, m (unrolled), n (vectorized).
  te::IterVar am = s.Axis(acc, static_cast<int>(off)), an = s.Axis(acc, static_cast<int>(off + 1));
  if (c.count("amx") && c.at("amx")) {
    // The box as AMX tile products of A's pairs (rows of S int32) and B's
    // panel (rows of tile_n pairs).
    s.Tensorize(acc, am, "amx_dpbf16ps",
                AmxTileProducts(ir::Intrinsic::kAmxDpbf16ps, Ap, S * 4, Bp, d.M, tm, tn));
    b.SetArgs({A, Bp, C}, eps, out);
    b.packs.push_back({1, B, Bp_of});
    return b;
  }
  auto [ko, ki] = s.Split(acc, s.ReduceAxisOf(acc, 0), tk);
  s.Reorder(acc, {ko, ki, am, an});
  if (tm > 1) s.Unroll(acc, am);
  s.Vectorize(acc, an);
  if (tk > 1) s.Unroll(acc, ki);
  b.SetArgs({A, Bp, C}, eps, out);
  b.packs.push_back({1, B, Bp_of});
  return b;
}

}  // namespace

bool Bf16Dense(const Workload& w) {
  if (w.op != Op::kDense || w.IntOr("bf16", 0) != 1) return false;
  return !DenseDimsOf(w).bb && !w.ints.count("dtypes");
}

const OpTemplate* Bf16DenseTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops

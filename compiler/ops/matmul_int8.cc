// The generic matmul of 8-bit integers with integer dot-product instructions:
// ONNX MatMulInteger and the integer part of QLinearMatMul, as the importer
// writes them when B and its zero point are constants (compiler/frontend/
// onnx_linalg_ops.cc: op "matmul", zp=2, B already shifted by its zero
// point into int8). out[m][n] = sum_k (a[m][k] - az) * b[k][n], exactly, in
// int32:
//
//   a'  = a (uint8), or a + 128 (int8: each byte's top bit flipped), az' alike
//   D   = sum_k4 dot4(a'[m][4k4 .. 4k4+3], b[4k4 .. 4k4+3][n])
//   out = epilogue(D - az' * colsum[n])
//
// dot4 is one lane of vpdpbusd (AVX512-VNNI / AVX-VNNI: 4 unsigned x signed
// byte products summed into an int32 accumulator; codegen/llvm_intrinsics.h)
// where the target has it. Without VNNI the steps are pairs of k instead
// (PairsOfHalves: dot2, one lane of pmaddwd, 2 unsigned x signed products
// of 16-bit halves, exact), B packed in pairs to match: the BERT-base layer
// ran 15.6 -> 5.8 ms at one thread on AVX-512 without VNNI, 38.9 -> 11.1 ms
// as AVX2 code. Where K is a whole number of 16-byte groups A's pairs are
// packed ahead (apack, a group's 4 words a vector at a time) rather than
// taken out of its bytes at each step: its 128 x 768 x 768 MatMulInteger
// 1.9 -> 1.15 ms at one thread on a Zen 3 EPYC (AVX2). B is packed once
// (Built::packs: at compile time for a constant) into panels of tile_n
// columns, [ceil(N/tile_n)][K4 + 1][tile_n] int32: each int32 the 4 bytes of
// one column's 4 consecutive k (the layout vpdpbusd reads, one vector of
// tile_n/16 registers per k4), and row K4 the column sums the zero point's
// correction needs. Schedule as the float dense template: an output tile of
// tile_m rows x tile_n columns (vectorized) whose int32 accumulators stay in
// registers over the k4 loop (split by tile_k, unrolled), one broadcast of
// A's 4 bytes per row and step.
//
// With AMX (amx=1: a CPU with AMX-INT8, uint8 A, K a multiple of 64) the
// same acc box of tile_m x tile_n is tensorized (te::Schedule::Tensorize):
// one amx_dpbusd intrinsic (codegen/llvm_amx.h) sums it in 16x16 tiles from
// A's rows as they are and B's panel, whose rows of tile_n int32 are the
// tile rows tdpbusd reads (4 k of each column); the epilogue reads the box.
// The BERT-base layer's MatMulIntegers run 2.2x faster so than by VNNI.
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

bool Byte(DType d) { return d == DType::kUInt8 || d == DType::kInt8; }

struct Dims {
  int64_t M, N, K, K4;
  size_t rank;
};

Dims DimsOf(const Workload& w) {
  auto sig = w.Signature();
  const auto& a = sig->inputs[0].shape;
  const auto& b = sig->inputs[1].shape;
  const size_t r = a.size();
  return {a[r - 2], b[r - 1], a[r - 1], (a[r - 1] + 3) / 4, r};
}

// AMX where the CPU has AMX-INT8, A is uint8 (its bytes go to the tiles as
// they are), K a whole number of tile steps, and B is packed in words of 4
// bytes (not pairs: a target told it has no VNNI).
constexpr int64_t kMaxVnniRows = 12;
bool AmxOperandsFit(const Workload& w, const Target& t) {
  auto sig = w.Signature();
  return sig.ok() && sig->inputs[0].dtype == DType::kUInt8 && !PairsOfHalves(t) &&
         AmxFits(t, "amx-int8", DimsOf(w).K);
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  const int64_t L = t.NativeVectorLanes();
  std::vector<Knob> k;
  k.push_back({"tile_m", UpTo({1, 2, 4, 6, 8, 12}, d.M)});
  // Columns per tile: whole vectors (a last partial panel is zero-padded).
  k.push_back({"tile_n", {L}});
  for (int64_t v = 2; v <= 4 && v * L <= std::max(d.N, L); ++v) k.back().choices.push_back(v * L);
  k.push_back({"tile_k", UpTo({1, 2, 4, 8, 16}, d.K4)});
  k.push_back({"parallel", {0}});
  if (d.M > 1 || d.N > L) k.back().choices.push_back(1);
  // n_outer=1: column panels outside the row tiles, each panel kept in
  // cache while every row passes it.
  k.push_back({"n_outer", {0, 1}});
  AddAmxKnobs(k, d.M, AmxOperandsFit(w, t));
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  const Dims d = DimsOf(w);
  if (absl::Status s = CheckAmxTiles(c, kMaxVnniRows, "matmul int8"); !s.ok()) return s;
  const int64_t outer = c.at("n_outer") ? (d.N + c.at("tile_n") - 1) / c.at("tile_n")
                                        : (d.M + c.at("tile_m") - 1) / c.at("tile_m");
  if (c.at("parallel") && outer < 2) {
    return absl::InvalidArgumentError(
        "matmul int8: parallel=1 leaves a single outer iteration to run in parallel");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  auto k = Knobs(w, t);
  Config c;
  // 6 rows x 4 vectors: 24 accumulators beside 4 B vectors and a broadcast
  // in 32 registers (AVX-512); half the columns with 16 registers.
  c["tile_n"] = Pick(k[1].choices, (t.NumVectorRegisters() >= 32 ? 4 : 2) * t.NativeVectorLanes());
  c["tile_m"] = Pick(k[0].choices, 6);
  c["tile_k"] = Pick(k[2].choices, 4);
  c["n_outer"] = d.N > d.M ? 1 : 0;
  c["amx"] = 0;
  c["parallel"] = 0;
  if (AmxOperandsFit(w, t) && d.M >= kAmxTile) {
    // Tiles of 32 rows x 32 columns (2 x 2 AMX tiles), column panels
    // outside: the BERT-base layer's MatMulIntegers ran fastest so at one
    // thread (its layer 7.5 -> 3.4 ms against VNNI on a Sapphire Rapids).
    c["amx"] = 1;
    c["tile_k"] = 1;
    c["tile_m"] = Pick(k[0].choices, 32);
    c["tile_n"] = Pick(k[1].choices, 2 * kAmxTile);
    c["n_outer"] = 1;
  }
  if (k[3].choices.size() > 1 && d.M * d.N * d.K >= (1 << 18)) {
    c["parallel"] = 1;
    if (!Check(w, t, c).ok()) c["parallel"] = 0;
  }
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType i32 = DataType::Int32();
  const bool signed_a = sig->inputs[0].dtype == DType::kInt8;
  te::Tensor A = TypedPlaceholder(w, 0, "A");
  te::Tensor B = TypedPlaceholder(w, 1, "B");
  te::Tensor AZ = TypedPlaceholder(w, 2, "a_zero_point");
  auto eps = EpilogueOperands(w);
  const int64_t tm = c.at("tile_m"), tn = c.at("tile_n"), tk = c.at("tile_k");
  const int64_t panels = (d.N + tn - 1) / tn;
  const size_t r = d.rank;
  auto at = [&](const te::Tensor& x, Expr i, Expr j) {
    std::vector<Expr> idx(r - 2, IntImm(0));
    idx.push_back(std::move(i));
    idx.push_back(std::move(j));
    return x(idx);
  };
  // B's element (k, n), 0 outside the matrix (the padded rows and columns).
  auto b_at = [&](Expr k, Expr n) {
    Expr inside = k < IntImm(d.K) && n < IntImm(d.N);
    return Select(inside, Cast(i32, at(B, Min(k, IntImm(d.K - 1)), Min(n, IntImm(d.N - 1)))),
                  IntImm(0, i32));
  };
  // The packed panels, row S (the steps of 4 bytes, or of 2 without VNNI:
  // PairsOfHalves) the column sums.
  const bool pairs = PairsOfHalves(t);
  const int64_t S = pairs ? (d.K + 1) / 2 : d.K4;
  // Pairs of A packed ahead (apack) where K is a whole number of 16-byte
  // groups: step q is pair p of word j of group g (q = 8g + 4p + j), so the
  // pack reads a group's 4 words as one vector; else each step's pair is
  // taken out of A's bytes where the loop reads it (4 scalar operations and
  // a move to the vector unit per row and step).
  const bool grouped = pairs && d.K % 16 == 0;
  // Step q of a group: its word of A (4 bytes) and its pair in that word;
  // the first k of step q.
  auto step_word = [](Expr q) {
    return FloorDiv(q, IntImm(8)) * IntImm(4) + FloorMod(q, IntImm(4));
  };
  auto step_pair = [](Expr q) { return FloorMod(FloorDiv(q, IntImm(4)), IntImm(2)); };
  auto step_k = [&](Expr q) {
    if (!grouped) return q * IntImm(2);
    return step_word(q) * IntImm(4) + step_pair(q) * IntImm(2);
  };
  IterRange sk = te::ReduceAxis(d.K, "sk");
  te::Tensor colsum = te::Compute(
      "colsum", {panels * tn},
      [&](const std::vector<Var>& i) { return te::Sum(b_at(sk.var, i[0]), {sk}); }, i32);
  te::Tensor Bp_of = te::Compute(
      "bpack", {panels, S + 1, tn},
      [&](const std::vector<Var>& i) {
        Expr n = i[0] * IntImm(tn) + i[2];
        Expr step = pairs
                        ? PackHalves(b_at(step_k(i[1]), n), b_at(step_k(i[1]) + IntImm(1), n))
                        : PackBytes4([&](int j) { return b_at(i[1] * IntImm(4) + IntImm(j), n); });
        return Select(i[1] < IntImm(S), step, colsum({n}));
      },
      i32);
  te::Tensor Bp = te::Placeholder("B_packed", Bp_of->shape, i32);
  // A's 4 bytes of step k4 as one int32 (zeros past K), its top bits flipped
  // for int8 (a + 128 as uint8).
  auto a4 = [&](Expr m, Expr k4) {
    Expr v = PackBytes4([&](int j) {
      Expr k = k4 * IntImm(4) + IntImm(j);
      Expr byte = at(A, m, d.K % 4 ? Min(k, IntImm(d.K - 1)) : k);
      return d.K % 4 ? Select(k < IntImm(d.K), byte, Cast(byte.dtype(), IntImm(0))) : byte;
    });
    return signed_a ? FlipBytes(v) : v;
  };
  // Or A's bytes 2q and 2q + 1 as 16-bit halves (unsigned: int8 + 128); past
  // K, B's halves are 0.
  auto a2 = [&](Expr m, Expr q) {
    auto byte = [&](Expr k) {
      Expr v = Cast(i32, at(A, m, Min(k, IntImm(d.K - 1))));
      return signed_a ? v + IntImm(128, i32) : v;
    };
    return PackHalves(byte(q * IntImm(2)), byte(q * IntImm(2) + IntImm(1)));
  };
  // A as words (its bytes, 4 to an int32), and its pairs.
  te::Tensor A32, apack;
  if (grouped) {
    std::vector<int64_t> words = sig->inputs[0].shape;
    words.back() /= 4;
    A32 = te::Placeholder("A", words, i32);
    apack = te::Compute(
        "apack", {d.M, S},
        [&](const std::vector<Var>& i) {
          std::vector<Expr> idx(r - 2, IntImm(0));
          idx.push_back(i[0]);
          idx.push_back(step_word(i[1]));
          Expr word = A32(idx);
          if (signed_a) word = FlipBytes(word);
          return PairOfBytes(word, step_pair(i[1]));
        },
        i32);
  }
  const ir::Intrinsic dot = pairs ? ir::Intrinsic::kDot2 : Dot4Intrinsic(t);
  IterRange rk = te::ReduceAxis(S, "rk");
  te::Tensor acc = te::Compute(
      "acc", {d.M, d.N},
      [&](const std::vector<Var>& i) {
        Expr n = i[1];
        Expr bv = Bp({FloorDiv(n, IntImm(tn)), rk.var, FloorMod(n, IntImm(tn))});
        Expr av = grouped ? apack({i[0], rk.var}) : pairs ? a2(i[0], rk.var) : a4(i[0], rk.var);
        return te::Sum(Call(i32, dot, {av, bv}), {rk});
      },
      i32);
  // az' (the zero point as uint8) times the column sum.
  const Expr az = UnsignedZeroPoint(AZ, signed_a);
  const std::vector<int64_t>& out_shape = sig->output.shape;
  te::Tensor out = te::Compute(
      "out", out_shape,
      [&](const std::vector<Var>& i) {
        Expr m = i[r - 2], n = i[r - 1];
        Expr cs = Bp({FloorDiv(n, IntImm(tn)), IntImm(S), FloorMod(n, IntImm(tn))});
        return ApplyEpilogue(w, acc({m, n}) - az * cs, i, eps);
      },
      IrType(sig->output.dtype));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  auto [mo, mi] = s.Split(out, s.Axis(out, static_cast<int>(r - 2)), tm);
  auto [no, ni] = s.Split(out, s.Axis(out, static_cast<int>(r - 1)), tn);
  const bool n_outer = c.at("n_outer") != 0;
  s.Reorder(out, n_outer ? std::vector<te::IterVar>{no, mo, mi, ni}
                         : std::vector<te::IterVar>{mo, no, mi, ni});
  s.Vectorize(out, ni);
  if (c.at("parallel")) s.Parallel(out, n_outer ? no : mo);
  s.ComputeAt(acc, out, n_outer ? mo : no);
  te::IterVar am = s.Axis(acc, 0), an = s.Axis(acc, 1);
  if (c.count("amx") && c.at("amx")) {
    // The tile x tile box of acc, its whole reduction, as AMX tile products:
    // A's rows as they are (uint8, K a multiple of 64), B's panel (its rows
    // of 16 int32 are tile rows: 4 k of one column each), into acc's scratch.
    s.Tensorize(acc, am, "amx_dpbusd",
                AmxTileProducts(ir::Intrinsic::kAmxDpbusd, A, d.K, Bp, d.M, tm, tn));
    b.SetArgs({A, Bp, AZ}, eps, out);
    b.packs.push_back({1, B, Bp_of});
    return b;
  }
  auto [ko, ki] = s.Split(acc, s.ReduceAxisOf(acc, 0), tk);
  s.Reorder(acc, {ko, ki, am, an});
  if (tm > 1) s.Unroll(acc, am);
  s.Vectorize(acc, an);
  if (tk > 1) s.Unroll(acc, ki);
  if (grouped) {
    // Each group's pairs a vector of its 4 words at a time.
    auto [p, j] = s.Split(apack, s.Split(apack, s.Axis(apack, 1), 8).second, 4);
    s.Unroll(apack, p);
    s.Vectorize(apack, j);
    if (c.at("parallel") && d.M > 1) s.Parallel(apack, s.Axis(apack, 0));
    b.SetArgs({A32, Bp, AZ}, eps, out);
    b.packs.push_back({1, B, Bp_of});
    return b;
  }
  b.SetArgs({A, Bp, AZ}, eps, out);
  b.packs.push_back({1, B, Bp_of});
  return b;
}

}  // namespace

bool Int8MatMul(const Workload& w) {
  if (w.op != Op::kMatMul || w.IntOr("zp", 0) != 2 || !w.prologue.empty()) return false;
  auto sig = w.Signature();
  if (!sig.ok() || sig->inputs.size() < 3) return false;
  const auto& a = sig->inputs[0];
  const auto& b = sig->inputs[1];
  if (!Byte(a.dtype) || b.dtype != DType::kInt8 || a.shape.size() < 2 ||
      b.shape.size() != a.shape.size() || sig->inputs[2].NumElements() != 1) {
    return false;
  }
  for (size_t i = 0; i + 2 < a.shape.size(); ++i) {
    if (a.shape[i] != 1 || b.shape[i] != 1) return false;
  }
  return true;
}

const OpTemplate* Int8MatMulTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops

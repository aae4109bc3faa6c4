#include "compiler/ops/common.h"

#include <algorithm>
#include <string_view>

#include "base/check.h"
#include "base/str.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

std::vector<int64_t> UpTo(std::vector<int64_t> candidates, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t c : candidates) {
    if (c <= std::max<int64_t>(limit, 1) && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  if (out.empty()) out.push_back(1);
  return out;
}

std::vector<int64_t> VectorChoices(int64_t extent, int lanes) {
  std::vector<int64_t> out = {1};
  if (extent > 1 && extent < lanes) out.push_back(extent);
  for (int m = 1; m <= 4; ++m) {
    if (lanes * m <= extent) out.push_back(static_cast<int64_t>(lanes) * m);
  }
  return out;
}

int64_t Pick(const std::vector<int64_t>& choices, int64_t want) {
  int64_t best = choices.front();
  for (int64_t c : choices) {
    if (c <= want && c > best) best = c;
  }
  return best;
}

std::vector<Knob> OutputLoopKnobs(const std::vector<int64_t>& shape, const Target& t,
                                  bool vectorizable) {
  std::vector<Knob> k = {{"vec", {1}}, {"parallel", {0}}};
  if (vectorizable)
    k[0].choices = VectorChoices(shape.empty() ? 1 : shape.back(), t.NativeVectorLanes());
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) outer *= shape[d];
  if (outer > 1) k[1].choices.push_back(1);
  return k;
}

Config OutputLoopDefault(const std::vector<int64_t>& shape, const Target& t, bool vectorizable) {
  auto k = OutputLoopKnobs(shape, t, vectorizable);
  Config c;
  c["vec"] = Pick(k[0].choices, t.NativeVectorLanes());
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  c["parallel"] = (k[1].choices.size() > 1 && total >= 65536) ? 1 : 0;
  return c;
}

std::vector<Knob> GpuThreadKnobs(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {{"threads", UpTo({32, 64, 128, 256, 512}, n)}};
}

GenericConvDims GenericConvDimsOf(const Workload& w) {
  auto sig = w.Signature();
  KILN_CHECK(sig.ok()) << sig.status().ToString();
  const auto& x = sig->inputs[0].shape;
  const auto& wt = sig->inputs[1].shape;
  const auto& o = sig->output.shape;
  const auto& st = w.Ints("strides");
  const auto& pads = w.Ints("pads");
  // x's channels in blocks (in_block): [N, C / b, H, W, b].
  const int64_t C = x.size() == 5 ? x[1] * x[4] : x[1];
  return {x[0], C, x[2], x[3], wt[0], wt[2], wt[3], o[2], o[3], st[0], st[1], pads[0], pads[1]};
}

std::optional<Workload> FlatElementwise(const Workload& w, const std::vector<std::string>& inputs) {
  if (!w.prologue.empty()) return std::nullopt;
  const std::vector<int64_t>& shape = w.Ints("shape");
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  int64_t cols = 0;
  for (int64_t c = 4096; c >= 256; c -= 64) {
    if (total % c == 0 && total / c >= 2) {
      cols = c;
      break;
    }
  }
  if (cols == 0) return std::nullopt;
  const std::vector<int64_t> flat = {total / cols, cols};
  // A shape of the output's, or of one element: now of the flat rank.
  auto refit = [&](std::vector<int64_t>& s) {
    if (s != shape && !OneElement(s)) return false;
    s = s == shape ? flat : std::vector<int64_t>{1, 1};
    return true;
  };
  Workload v = w;
  for (const std::string& key : inputs) {
    if (!v.ints.count(key) || !refit(v.ints[key])) return std::nullopt;
  }
  for (EpilogueOp& e : v.epilogue) {
    if (e.HasOperand() && !refit(e.operand_shape)) return std::nullopt;
  }
  v.ints["shape"] = flat;
  return v;
}

void ParallelOverAxes(te::Schedule& s, const te::Tensor& out, int n) {
  te::IterVar outer = s.Axis(out, 0);
  for (int d = 1; d < n; ++d) outer = s.Fuse(out, outer, s.Axis(out, d));
  s.Parallel(out, outer);
}

Config GpuThreadDefault(const std::vector<int64_t>& shape) {
  return {{"threads", Pick(GpuThreadKnobs(shape)[0].choices, 256)}};
}

absl::StatusOr<Built> GpuPerElement(absl::StatusOr<Built> computes, const Config& c) {
  if (!computes.ok()) return computes.status();
  Built b = *std::move(computes);
  te::Schedule& s = *b.schedule;
  const te::Tensor out = b.args.back();
  const int rank = static_cast<int>(out->shape.size());
  te::IterVar all = s.Axis(out, 0);
  for (int d = 1; d < rank; ++d) all = s.Fuse(out, all, s.Axis(out, d));
  auto [block, thread] = s.Split(out, all, c.at("threads"));
  if (absl::Status st = s.Bind(out, block, ir::ForKind::kBlockX); !st.ok()) return st;
  if (absl::Status st = s.Bind(out, thread, ir::ForKind::kThreadX); !st.ok()) return st;
  for (const te::Stage& st : std::vector<te::Stage>(s.stages())) {
    if (st.tensor.same_as(out)) continue;
    if (st.tensor->reduce_axes.empty()) {
      s.ComputeInline(st.tensor);
    } else {
      s.ComputeAt(st.tensor, out, thread);
    }
  }
  return b;
}

std::vector<Expr> BroadcastIndex(const std::vector<int64_t>& shape,
                                 const std::vector<Var>& out_idx) {
  std::vector<Expr> idx;
  size_t off = out_idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    idx.push_back(shape[d] == 1 ? Expr(IntImm(0)) : Expr(out_idx[off + d]));
  return idx;
}

std::vector<te::Tensor> EpilogueOperands(const Workload& w) {
  auto sig = w.Signature();
  KILN_CHECK(sig.ok()) << sig.status().ToString();
  std::vector<te::Tensor> out;
  size_t first = sig->inputs.size();
  for (const EpilogueOp& e : w.epilogue) first -= e.HasOperand() ? 1 : 0;
  int i = 0;
  for (const EpilogueOp& e : w.epilogue) {
    if (!e.HasOperand()) continue;
    out.push_back(
        te::Placeholder(StrCat("ep", i), e.operand_shape, IrType(sig->inputs[first + i].dtype)));
    ++i;
  }
  return out;
}

te::Tensor TypedPlaceholder(const Workload& w, size_t i, const std::string& name) {
  auto sig = w.Signature();
  KILN_CHECK(sig.ok() && i < sig->inputs.size()) << w.Canonical();
  return te::Placeholder(name, sig->inputs[i].shape, IrType(sig->inputs[i].dtype));
}

DType OutputDType(const Workload& w) {
  auto sig = w.Signature();
  KILN_CHECK(sig.ok()) << sig.status().ToString();
  return sig->output.dtype;
}

Expr ApplyEpilogue(const Workload& w, Expr y, const std::vector<Var>& idx,
                   const std::vector<te::Tensor>& operands, absl::Status* error) {
  size_t next = 0;
  absl::Status status;
  std::vector<Expr> entering;  // the chain's value entering each op (taps read it)
  for (const EpilogueOp& e : w.epilogue) {
    entering.push_back(y);
    if (e.kind == EpilogueKind::kRelu || e.kind == EpilogueKind::kUnary) {
      auto r = e.kind == EpilogueKind::kRelu ? UnaryFn(ElementFn::kRelu, y, {})
                                             : UnaryFn(e.fn, y, e.params);
      if (!r.ok()) {
        status = r.status();
        break;
      }
      y = *r;
      continue;
    }
    Expr v;
    if (e.IsTap()) {
      v = entering[static_cast<size_t>(e.tap)];
    } else {
      const te::Tensor& t = operands[next++];
      v = Promote(t(BroadcastIndex(t->shape, idx)));
      // An integer operand of a float chain (the bytes of a residual add
      // fused into a quantized conv) joins it as a float.
      if (y.dtype().is_float() && !v.dtype().is_float()) v = Cast(y.dtype(), v);
    }
    if (e.kind == EpilogueKind::kBinary) {
      auto r = e.reversed ? BinaryFn(e.fn, v, y) : BinaryFn(e.fn, y, v);
      if (!r.ok()) {
        status = r.status();
        break;
      }
      y = *r;
      continue;
    }
    y = e.kind == EpilogueKind::kAdd ? y + v : y * v;
  }
  DataType out = IrType(OutputDType(w));
  if (!status.ok()) {
    KILN_CHECK(error != nullptr) << w.Canonical() << ": " << status.ToString();
    *error = status;
    return out.is_float() ? FloatImm(0.0, out) : IntImm(0, out);  // never run
  }
  return y.dtype() == out ? y : Cast(out, y);
}

ir::Expr PackBytes4(const std::function<ir::Expr(int)>& byte) {
  using namespace ir;
  const DataType i32 = DataType::Int32();
  Expr v;
  for (int j = 0; j < 4; ++j) {
    Expr b = Call(i32, Intrinsic::kBitAnd, {Cast(i32, byte(j)), IntImm(255, i32)});
    if (j > 0) b = Call(i32, Intrinsic::kShl, {b, IntImm(8 * j, i32)});
    v = j == 0 ? b : Call(i32, Intrinsic::kBitOr, {v, b});
  }
  return v;
}

ir::Expr PackHalves(const ir::Expr& lo, const ir::Expr& hi) {
  using namespace ir;
  const DataType i32 = DataType::Int32();
  return Call(i32, Intrinsic::kBitOr,
              {Call(i32, Intrinsic::kBitAnd, {lo, IntImm(0xffff, i32)}),
               Call(i32, Intrinsic::kShl, {hi, IntImm(16, i32)})});
}

ir::Expr PairOfBytes(const ir::Expr& word, const ir::Expr& p) {
  using namespace ir;
  const DataType i32 = DataType::Int32();
  Expr at = Call(i32, Intrinsic::kShr, {word, Cast(i32, p) * IntImm(16, i32)});
  return PackHalves(Call(i32, Intrinsic::kBitAnd, {at, IntImm(255, i32)}),
                    Call(i32, Intrinsic::kBitAnd,
                         {Call(i32, Intrinsic::kShr, {at, IntImm(8, i32)}), IntImm(255, i32)}));
}

bool PairsOfHalves(const Target& t) { return Dot4Intrinsic(t) != ir::Intrinsic::kDot4Vnni; }

ir::Expr FlipBytes(ir::Expr packed) {
  const ir::DataType i32 = ir::DataType::Int32();
  return ir::Call(i32, Intrinsic::kBitXor,
                  {packed, ir::IntImm(static_cast<int32_t>(0x80808080u), i32)});
}

ir::Expr Bf16Bits(const ir::Expr& x) {
  using namespace ir;
  const DataType i32 = DataType::Int32();
  Expr bits = Call(i32, Intrinsic::kReinterpret, {x});
  Expr odd = Call(i32, Intrinsic::kBitAnd,
                  {Call(i32, Intrinsic::kShr, {bits, IntImm(16, i32)}), IntImm(1, i32)});
  Expr rounded = Call(i32, Intrinsic::kShr, {bits + IntImm(0x7fff, i32) + odd, IntImm(16, i32)});
  return Select(Call(DataType::Bool(), Intrinsic::kIsNan, {x}), IntImm(0x7fc0, i32),
                Call(i32, Intrinsic::kBitAnd, {rounded, IntImm(0xffff, i32)}));
}

ir::Expr UnsignedZeroPoint(const te::Tensor& zero_point, bool signed_input) {
  const ir::DataType i32 = ir::DataType::Int32();
  ir::Expr z =
      ir::Cast(i32, zero_point(std::vector<ir::Expr>(zero_point->shape.size(), ir::IntImm(0))));
  return signed_input ? z + ir::IntImm(128, i32) : z;
}

ir::Intrinsic Dot4Intrinsic(const Target& t) {
  return t.HasFeature("avx512vnni") || t.HasFeature("avxvnni") || t.HasFeature("dotprod") ||
                 t.HasFeature("i8mm")
             ? ir::Intrinsic::kDot4Vnni
             : ir::Intrinsic::kDot4;
}

bool AmxRowsFit(int64_t row_bytes) {
  constexpr int64_t kMaxScratch = int64_t{256} << 10;
  return row_bytes % kAmxRowBytes == 0 && kAmxTile * row_bytes <= kMaxScratch;
}

bool AmxFits(const Target& t, const char* unit, int64_t row_bytes) {
  return AmxRowsFit(row_bytes) && t.HasFeature("amx-tile") && t.HasFeature(unit);
}

int64_t AmxStepWords(int64_t words) {
  constexpr int64_t step = kAmxRowBytes / 4;
  return (words + step - 1) / step * step;
}

void AddAmxKnobs(std::vector<Knob>& knobs, int64_t m, bool fits) {
  knobs.push_back({"amx", {0}});
  if (!fits) return;
  knobs.back().choices.push_back(1);
  for (Knob& k : knobs) {
    if (k.name != "tile_m") continue;
    for (int64_t rows : {16, 32, 64}) {
      if (rows < m + kAmxTile) k.choices.push_back(rows);
    }
  }
}

absl::Status CheckAmxTiles(const Config& c, int64_t vector_rows, const char* what) {
  const bool amx = c.count("amx") && c.at("amx");
  if (amx && (c.at("tile_m") % kAmxTile || c.at("tile_n") % kAmxTile)) {
    return absl::InvalidArgumentError(StrCat(what, ": amx=1 takes tiles of whole 16x16 blocks"));
  }
  // One config for each distinct kernel: the tiles take the whole k.
  if (amx && c.count("tile_k") && c.at("tile_k") != 1) {
    return absl::InvalidArgumentError(StrCat(what, ": tile_k is for amx=0 (amx=1 takes 1)"));
  }
  if (!amx && c.at("tile_m") > vector_rows) {
    return absl::InvalidArgumentError(
        StrCat(what, ": tile_m > ", vector_rows, " is for amx=1 (registers)"));
  }
  return absl::OkStatus();
}

te::TensorizeFn AmxTileProducts(ir::Intrinsic intrinsic, te::Tensor A, int64_t row_bytes,
                                te::Tensor Bp, int64_t m, int64_t tile_m, int64_t tile_n,
                                std::optional<AmxInPlaceTaps> in_place) {
  using namespace ir;
  return [=](const te::TensorizeRegion& box) {
    const size_t n = box.start.size();
    Expr m0 = box.start[n - 2], n0 = box.start[n - 1];
    std::vector<Expr> a_idx(box.start.begin(), box.start.end() - 2);
    a_idx.resize(A->shape.size() - 2, IntImm(0));
    a_idx.push_back(m0);
    a_idx.push_back(IntImm(0));
    const int64_t ldc = *AsConstInt(box.out->shape.back()) * box.out->dtype.bytes();
    const int64_t ldb = tile_n * 4;
    // What the tiles read: tile_m rows of A, one panel of Bp.
    std::vector<int64_t> a_box(A->shape.size() - 2, 1);
    a_box.push_back(in_place ? in_place->reach_rows : tile_m);
    a_box.push_back(row_bytes / A.buffer()->dtype.bytes());
    std::vector<int64_t> b_box = {1, *AsConstInt(Bp->shape[1]), tile_n};
    std::vector<Expr> args = {
        AddressOf(Load(box.out, box.out_index)),
        IntImm(ldc),
        AddressOf(A(a_idx), a_box),
        IntImm(row_bytes),
        AddressOf(Bp({FloorDiv(n0, IntImm(tile_n)), IntImm(0), IntImm(0)}), b_box),
        IntImm(ldb),
        IntImm(kAmxTile * ldb),
        in_place ? IntImm(tile_m) : Min(IntImm(tile_m), IntImm(m) - m0),
        IntImm(tile_n / kAmxTile),
        IntImm(in_place ? in_place->k_steps : row_bytes / kAmxRowBytes)};
    if (in_place) {
      for (int64_t v : {in_place->tap_row_bytes, in_place->taps_per_row, in_place->steps_per_tap}) {
        args.push_back(IntImm(v));
      }
    }
    return Evaluate(Call(DataType::Int32(), intrinsic, args));
  };
}

}  // namespace kiln::compiler::ops

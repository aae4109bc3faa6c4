#include "compiler/graph/passes.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/check.h"
#include "base/str.h"
#include "compiler/kernel.h"
#include "compiler/ops/common.h"
#include "compiler/ops/registry.h"

namespace kiln::compiler {
namespace {

using Shape = std::vector<int64_t>;

int Producer(const Graph& g, int v) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].output == v) return static_cast<int>(i);
  }
  return -1;
}

Shape PadTo(const Shape& s, size_t rank) {
  Shape out(rank - std::min(rank, s.size()), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

int AddConstant(Graph& g, std::string name, Shape shape, const std::vector<float>& data) {
  Value v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.SetFloats(data);
  return g.AddValue(std::move(v));
}

// A node whose output an eltwise consumer may fuse into as its epilogue:
// every compute node but an opaque one (every kiln op's template applies
// an epilogue to its output).
bool IsAnchor(const Node& n) {
  return n.kind == NodeKind::kCompute && ops::PatternOf(n.workload) != ops::OpPattern::kOpaque;
}

}  // namespace

int AliasRoot(const Graph& graph, int v) {
  while (true) {
    int p = Producer(graph, v);
    if (p < 0 || graph.nodes[p].kind != NodeKind::kView) return v;
    v = graph.nodes[p].inputs[0];
  }
}

absl::Status FoldBatchNorms(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.kind != NodeKind::kBatchNorm) continue;
    const int x = bn.inputs[0];
    const Shape xs = g.values[x].shape;
    const int64_t C = xs[1];
    const auto scale = g.values[bn.inputs[1]].ToFloats();
    const auto bias = g.values[bn.inputs[2]].ToFloats();
    const auto mean = g.values[bn.inputs[3]].ToFloats();
    const auto var = g.values[bn.inputs[4]].ToFloats();
    std::vector<float> mul(C), add(C);
    for (int64_t c = 0; c < C; ++c) {
      mul[c] = static_cast<float>(scale[c] / std::sqrt(static_cast<double>(var[c]) + bn.epsilon));
      add[c] = bias[c] - mean[c] * mul[c];
    }
    int p = Producer(g, x);
    bool fold = p >= 0 && !dead[p] && g.nodes[p].kind == NodeKind::kCompute &&
                g.nodes[p].workload.op == Op::kConv2d && g.nodes[p].workload.epilogue.empty() &&
                g.values[g.nodes[p].inputs[1]].IsConstant() &&
                (g.nodes[p].inputs.size() < 3 || g.values[g.nodes[p].inputs[2]].IsConstant()) &&
                g.Consumers(x).size() == 1 && !g.IsOutput(x);
    if (fold) {
      Node& conv = g.nodes[p];
      const Value& wv = g.values[conv.inputs[1]];
      std::vector<float> w = wv.ToFloats();
      const int64_t per = static_cast<int64_t>(w.size()) / C;
      for (int64_t k = 0; k < C; ++k) {
        for (int64_t j = 0; j < per; ++j) w[k * per + j] *= mul[k];
      }
      std::vector<float> b(C, 0.0f);
      if (conv.inputs.size() >= 3) b = g.values[conv.inputs[2]].ToFloats();
      for (int64_t k = 0; k < C; ++k) b[k] = b[k] * mul[k] + add[k];
      Shape wshape = wv.shape;
      int nw = AddConstant(g, StrCat(bn.name, ":folded_weight"), wshape, w);
      int nb = AddConstant(g, StrCat(bn.name, ":folded_bias"), {C}, b);
      Node& conv2 = g.nodes[p];  // AddValue does not move nodes, but be explicit
      conv2.inputs = {conv2.inputs[0], nw, nb};
      conv2.workload.ints["bias"] = {1};
      conv2.output = g.nodes[i].output;
      dead[i] = true;
    } else {
      Shape operand(xs.size(), 1);
      operand[1] = C;
      int m = AddConstant(g, StrCat(bn.name, ":scale"), {C}, mul);
      int a = AddConstant(g, StrCat(bn.name, ":shift"), {C}, add);
      Node& n = g.nodes[i];
      n.kind = NodeKind::kCompute;
      n.workload = Workload{};
      n.workload.op = Op::kEltwise;
      n.workload.ints["shape"] = xs;
      n.workload.ints["in_shape"] = xs;
      n.workload.epilogue = {{EpilogueKind::kMul, operand}, {EpilogueKind::kAdd, operand}};
      n.inputs = {x, m, a};
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  return absl::OkStatus();
}

absl::Status FoldNode(Graph& g, const Node& n) {
  Value& out = g.values[n.output];
  if (n.kind == NodeKind::kView) {
    out.bytes = g.values[n.inputs[0]].bytes;
    out.dtype = g.values[n.inputs[0]].dtype;
    return absl::OkStatus();
  }
  std::vector<const void*> ins;
  for (int v : n.inputs) ins.push_back(g.values[v].bytes->data());
  auto sig = n.workload.Signature();
  if (!sig.ok()) return sig.status();
  std::vector<uint8_t> data(
      static_cast<size_t>(std::max<int64_t>(1, out.NumElements()) * DTypeBytes(out.dtype)));
  if (auto s = RunReference(n.workload, ins, data.data()); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("folding node '", n.name, "': ", s.message()));
  }
  data.resize(static_cast<size_t>(out.NumElements() * DTypeBytes(out.dtype)));
  out.bytes = std::move(data);
  return absl::OkStatus();
}

absl::Status FoldConstants(Graph& g) {
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool all_const = !n.inputs.empty();
    for (int v : n.inputs) all_const = all_const && g.values[v].IsConstant();
    if (!all_const || n.kind == NodeKind::kBatchNorm) {
      kept.push_back(std::move(n));
      continue;
    }
    if (auto s = FoldNode(g, n); !s.ok()) return s;
  }
  g.nodes = std::move(kept);
  return absl::OkStatus();
}

namespace {

// `s` (padded to `full` dims) without its first full - rank dims: nullopt
// unless each of them is 1.
std::optional<Shape> DropLeadingOnes(const Shape& s, size_t full, size_t rank) {
  if (s.size() > full || rank > full) return std::nullopt;
  const Shape p = PadTo(s, full);
  const auto drop = static_cast<std::ptrdiff_t>(full - rank);
  if (std::any_of(p.begin(), p.begin() + drop, [](int64_t d) { return d != 1; })) {
    return std::nullopt;
  }
  return Shape(p.begin() + drop, p.end());
}

// The eltwise `w` on its shape with the leading dims dropped down to `rank`
// (its input's and operands' too): nullopt unless every dropped dim is 1.
std::optional<Workload> DropLeadingOnes(const Workload& w, size_t rank) {
  Workload r = w;
  const size_t full = w.Ints("shape").size();
  for (const char* key : {"shape", "in_shape"}) {
    auto s = DropLeadingOnes(w.Ints(key), full, rank);
    if (!s) return std::nullopt;
    r.ints[key] = *s;
  }
  for (EpilogueOp& e : r.epilogue) {
    if (!e.HasOperand()) continue;
    auto s = DropLeadingOnes(e.operand_shape, full, rank);
    if (!s) return std::nullopt;
    e.operand_shape = *s;
  }
  return r;
}

// Whether `n` is an eltwise whose chain starts from its input as it is (no
// broadcast): a consumer's operand reading that input can tap the chain.
bool TapsItsInput(const Node& n) {
  return n.workload.op == Op::kEltwise && n.workload.prologue.empty() &&
         n.workload.Ints("in_shape") == n.workload.Ints("shape");
}

// One pass of FuseEpilogues; whether it fused anything.
bool FuseEpiloguesOnce(Graph& g) {
  bool fused = false;
  std::vector<bool> dead(g.nodes.size(), false);
  // A view moved to run after the fused node at that index.
  std::vector<std::optional<Node>> view_after(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i] || !IsAnchor(g.nodes[i])) continue;
    const int v = g.nodes[i].output;
    if (g.IsOutput(v)) continue;
    std::vector<int> consumers = g.Consumers(v);
    if (consumers.size() != 1) continue;
    int c = consumers[0];
    auto sig = g.nodes[i].workload.Signature();
    KILN_CHECK(sig.ok()) << sig.status().ToString();
    const Shape out_shape = sig->output.shape;
    // A MatMul's kernel writes [M,N] and a view gives it the ONNX shape
    // [1,M,N]: an eltwise after the view that only adds leading 1s is fused
    // on the kernel's shape, and the view then follows the fused node.
    int view = -1;
    std::optional<Workload> reshaped;
    if (g.nodes[c].kind == NodeKind::kView) {
      const int x = g.nodes[c].output;
      std::vector<int> xc = g.Consumers(x);
      if (g.IsOutput(x) || xc.size() != 1 || g.nodes[xc[0]].kind != NodeKind::kCompute ||
          g.nodes[xc[0]].workload.op != Op::kEltwise || g.nodes[xc[0]].inputs[0] != x) {
        continue;
      }
      reshaped = DropLeadingOnes(g.nodes[xc[0]].workload, out_shape.size());
      if (!reshaped || reshaped->Ints("shape") != out_shape) continue;
      view = c;
      c = xc[0];
    }
    Node& cn = g.nodes[c];
    if (cn.kind != NodeKind::kCompute || cn.workload.op != Op::kEltwise) continue;
    const Workload& ew = reshaped ? *reshaped : cn.workload;
    auto csig = ew.Signature();
    KILN_CHECK(csig.ok()) << csig.status().ToString();
    if (ew.Ints("shape") != out_shape) continue;
    const int fused_in = view >= 0 ? g.nodes[view].output : v;
    std::vector<EpilogueOp> epi = ew.epilogue;
    std::vector<int> operands(cn.inputs.begin() + 1, cn.inputs.end());
    std::vector<DType> operand_dtypes;
    for (size_t k = 1; k < csig->inputs.size(); ++k)
      operand_dtypes.push_back(csig->inputs[k].dtype);
    if (cn.inputs[0] == fused_in) {
      if (ew.Ints("in_shape") != out_shape) continue;
    } else {
      // v is the first epilogue operand: swap it with the main input. A tap
      // of the value entering the eltwise's first op would then read v.
      int reads = 0;
      for (int in : cn.inputs) reads += in == fused_in;
      const bool taps_input =
          std::any_of(epi.begin(), epi.end(), [](const EpilogueOp& e) { return e.tap == 0; });
      if (reads != 1 || taps_input || epi.empty() || !epi[0].HasOperand() || cn.inputs[1] != v ||
          epi[0].operand_shape != out_shape || csig->inputs[0].dtype != csig->inputs[1].dtype) {
        continue;
      }
      epi[0].operand_shape = PadTo(ew.Ints("in_shape"), out_shape.size());
      // fn(in, v) keeps its argument order with v as the running value.
      if (epi[0].kind == EpilogueKind::kBinary) epi[0].reversed = !epi[0].reversed;
      operands[0] = cn.inputs[0];
      operand_dtypes[0] = csig->inputs[0].dtype;
    }
    // The eltwise's ops go after the anchor's: their taps move up by as many.
    const auto base = static_cast<int64_t>(g.nodes[i].workload.epilogue.size());
    for (EpilogueOp& e : epi) e.tap += e.IsTap() ? base : 0;
    // An operand that is a value the fused chain already holds becomes a tap,
    // as in GELU's x * f(x): the anchor's output (the value entering the
    // eltwise's ops), or an eltwise anchor's own input (the value entering
    // its first op). The tap reads the chain's value where the operand read
    // the anchor's stored output: the same for float32.
    const int anchor_in = TapsItsInput(g.nodes[i]) ? g.nodes[i].inputs[0] : -1;
    bool tappable = true;
    std::vector<int> kept;
    std::vector<DType> kept_dtypes;
    size_t k = 0;
    for (EpilogueOp& e : epi) {
      if (!e.HasOperand()) continue;
      const int in = operands[k];
      const DType dtype = operand_dtypes[k++];
      if (in == fused_in || in == anchor_in) {
        tappable = tappable && e.operand_shape == out_shape &&
                   (in == anchor_in || sig->output.dtype == DType::kFloat32);
        e.tap = in == fused_in ? base : 0;
        e.operand_shape.clear();
        continue;
      }
      kept.push_back(in);
      kept_dtypes.push_back(dtype);
    }
    if (!tappable) continue;
    operands = std::move(kept);
    operand_dtypes = std::move(kept_dtypes);
    // The eltwise input takes the anchor's output as it is: same dtype.
    if (sig->output.dtype !=
        (cn.inputs[0] == fused_in ? csig->inputs[0].dtype : csig->inputs[1].dtype)) {
      continue;
    }
    // A generic op computes in its output's dtype (a quantize's integers)
    // unless it has a compute type of its own: only then may an epilogue
    // change that dtype.
    const Workload& aw = g.nodes[i].workload;
    if (csig->output.dtype != sig->output.dtype && ops::IsGeneric(aw.op) &&
        !ops::HasOwnComputeType(aw)) {
      continue;
    }
    Node merged = std::move(g.nodes[i]);
    std::vector<DType> dtypes;
    for (const TensorSpec& t : sig->inputs) dtypes.push_back(t.dtype);
    dtypes.insert(dtypes.end(), operand_dtypes.begin(), operand_dtypes.end());
    dtypes.push_back(csig->output.dtype);
    for (const EpilogueOp& e : epi) merged.workload.epilogue.push_back(e);
    merged.workload.SetDtypes(dtypes);
    for (int o : operands) merged.inputs.push_back(o);
    merged.output = cn.output;
    merged.name = StrCat(merged.name, "+", cn.name);
    if (view >= 0) {
      // The fused node writes the kernel's shape; the view, moved after it,
      // gives the eltwise's output its ONNX shape as before.
      Value y = g.values[cn.output];
      y.name = StrCat(y.name, ":", merged.name);
      y.shape = out_shape;
      merged.output = g.AddValue(std::move(y));
      Node moved = std::move(g.nodes[view]);
      moved.inputs[0] = merged.output;
      moved.output = cn.output;
      view_after[c] = std::move(moved);
      dead[view] = true;
    }
    // The fused group runs where its last member ran: every operand is ready.
    g.nodes[c] = std::move(merged);
    dead[i] = true;
    fused = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
    if (view_after[i]) kept.push_back(*std::move(view_after[i]));
  }
  g.nodes = std::move(kept);
  return fused;
}

}  // namespace

// Passes until nothing fuses: a fused node whose view moved after it is
// seen again in the next pass.
void FuseEpilogues(Graph& g) {
  while (FuseEpiloguesOnce(g)) {
  }
}

namespace {

// A producer FuseInjective computes inside its consumer: an elementwise,
// broadcast or injective op (eltwise, or a generic op of those patterns).
bool FusesIntoConsumer(const Node& n) {
  return n.kind == NodeKind::kCompute && ops::PatternOf(n.workload) <= ops::OpPattern::kInjective;
}

// A consumer that computes its injective producers: a generic op (the
// generic template builds prologues) of any pattern up to a reduction's.
bool TakesProducers(const Node& n) {
  return n.kind == NodeKind::kCompute && ops::IsGeneric(n.workload.op) &&
         ops::PatternOf(n.workload) <= ops::OpPattern::kCommReduce;
}

}  // namespace

void FuseInjective(Graph& g) {
  std::vector<bool> dead(g.nodes.size(), false);
  std::vector<int> producer(g.values.size(), -1), consumers(g.values.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    producer[g.nodes[i].output] = static_cast<int>(i);
    for (int v : g.nodes[i].inputs) ++consumers[static_cast<size_t>(v)];
  }
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    Node& cn = g.nodes[c];
    if (!TakesProducers(cn)) continue;
    auto csig = cn.workload.Signature();
    if (!csig.ok()) continue;
    // The op's own inputs come first; epilogue operands follow.
    size_t n_op = csig->inputs.size();
    for (const EpilogueOp& e : cn.workload.epilogue) n_op -= e.HasOperand() ? 1 : 0;
    if (!cn.workload.prologue.empty() || n_op > cn.inputs.size()) continue;
    std::vector<Prologue> pro;
    std::vector<int> inputs;
    std::vector<DType> dtypes;
    for (size_t i = 0; i < n_op; ++i) {
      const int v = cn.inputs[i];
      const int p = producer[v];
      bool fuse = p >= 0 && !dead[p] && FusesIntoConsumer(g.nodes[p]) && !g.IsOutput(v) &&
                  g.Consumers(v).size() == 1;
      for (size_t k = 0; fuse && k < cn.inputs.size(); ++k) fuse = k == i || cn.inputs[k] != v;
      auto psig = fuse ? g.nodes[p].workload.Signature() : absl::StatusOr<KernelSignature>();
      fuse = fuse && psig.ok() && psig->output.dtype == csig->inputs[i].dtype;
      if (!fuse) {
        inputs.push_back(v);
        dtypes.push_back(csig->inputs[i].dtype);
        continue;
      }
      pro.push_back({static_cast<int64_t>(i), g.nodes[p].workload});
      for (size_t k = 0; k < psig->inputs.size(); ++k) {
        inputs.push_back(g.nodes[p].inputs[k]);
        dtypes.push_back(psig->inputs[k].dtype);
      }
      cn.name = StrCat(g.nodes[p].name, "+", cn.name);
      dead[p] = true;
    }
    if (pro.empty()) continue;
    for (size_t k = n_op; k < cn.inputs.size(); ++k) {
      inputs.push_back(cn.inputs[k]);
      dtypes.push_back(csig->inputs[k].dtype);
    }
    dtypes.push_back(csig->output.dtype);
    cn.workload.prologue = std::move(pro);
    cn.workload.SetDtypes(dtypes);
    cn.inputs = std::move(inputs);
    KILN_CHECK(cn.workload.Signature().ok()) << cn.workload.Canonical();
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

void EliminateDeadNodes(Graph& g) {
  std::vector<bool> needed(g.values.size(), false);
  for (int v : g.outputs) needed[v] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    if (!needed[g.nodes[i].output]) continue;
    keep[i] = true;
    for (int v : g.nodes[i].inputs) needed[v] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

namespace {

// The kernel inputs of a conv2d / pool2d that are its own (data, weight,
// bias), ahead of its epilogue operands.
size_t OpInputs(const Node& n) {
  size_t operands = 0;
  for (const EpilogueOp& e : n.workload.epilogue) operands += e.HasOperand() ? 1 : 0;
  return n.inputs.size() - operands;
}

// The 2-D convolutions of 8-bit integers (ops::Int8Conv, Int8DepthwiseConv)
// in NCHW: their templates read and write channel blocks of bytes.
bool Int8BlockableConv(const Node& n) {
  const Workload& w = n.workload;
  return n.kind == NodeKind::kCompute && w.op == Op::kConv && w.IntOr("in_block", 0) == 0 &&
         w.IntOr("out_block", 0) == 0 && (ops::Int8Conv(w) || ops::Int8DepthwiseConv(w));
}

// A depthwise conv, which writes blocks only from blocks.
bool Depthwise(const Node& n) {
  return IsDepthwiseConv(n.workload) || ops::Int8DepthwiseConv(n.workload);
}

// A pool2d of float32 data whose epilogue quantizes it (QDQ's MaxPool
// between an int8 conv's dequantized output and the next conv's quantized
// input): blocks in, bytes in blocks out.
bool QuantizingPool(const Workload& w) {
  if (w.op != Op::kPool2d || !w.ints.count("dtypes")) return false;
  auto sig = w.Signature();
  return sig.ok() && !sig->inputs.empty() && sig->inputs[0].dtype == DType::kFloat32 &&
         (sig->output.dtype == DType::kUInt8 || sig->output.dtype == DType::kInt8);
}

// A float32 conv2d (ungrouped or depthwise) or pool2d without prologues, a
// quantizing pool2d, or an int8 conv.
bool BlockableOp(const Node& n) {
  if (Int8BlockableConv(n)) return true;
  if (n.kind != NodeKind::kCompute || !n.workload.prologue.empty()) return false;
  const Workload& w = n.workload;
  if (QuantizingPool(w)) return true;
  if (w.ints.count("dtypes")) return false;
  if (w.op == Op::kPool2d) return true;
  return w.op == Op::kConv2d && (w.Int("groups") == 1 || IsDepthwiseConv(w));
}

// An epilogue operand of one value per output channel, [1, K, 1, 1]: its
// blocked shape [1, K / 16, 1, 1, 16] holds the same bytes (the int8
// convolutions' requantizing scales).
bool PerChannelOperand(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  return shape.size() == 4 && out.size() == 4 && shape[0] == 1 && shape[1] == out[1] &&
         shape[2] == 1 && shape[3] == 1;
}

// Whether n can write its output in channel blocks.
bool CanWriteBlocks(const Graph& g, const Node& n) {
  if (!BlockableOp(n)) return false;
  const Value& out = g.values[n.output];
  const bool int8 = Int8BlockableConv(n);
  const DType want = int8 || QuantizingPool(n.workload) ? out.dtype : DType::kFloat32;
  if (out.shape.size() != 4 || out.shape[1] % kChannelBlock != 0 || out.dtype != want ||
      g.IsOutput(n.output)) {
    return false;
  }
  for (const EpilogueOp& e : n.workload.epilogue) {
    if (e.HasOperand() && e.operand_shape != out.shape && !OneElement(e.operand_shape) &&
        !(int8 && PerChannelOperand(e.operand_shape, out.shape)))
      return false;
  }
  return true;
}

}  // namespace

void PlanLayouts(Graph& g) {
  std::vector<char> blocked(g.values.size(), 0);
  for (const Node& n : g.nodes) blocked[n.output] = CanWriteBlocks(g, n);
  // Unblock what a consumer cannot read, until nothing changes (each round
  // only unblocks, so this ends).
  for (bool changed = true; changed;) {
    changed = false;
    auto unblock = [&](int v) {
      changed = changed || blocked[v];
      blocked[v] = 0;
    };
    for (const Node& n : g.nodes) {
      const bool blockable = BlockableOp(n);
      const size_t n_op = blockable ? OpInputs(n) : n.inputs.size();
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int v = n.inputs[k];
        if (!blocked[v]) continue;
        bool ok = false;
        if (blockable && k == 0) {
          const Workload& w = n.workload;
          if (Int8BlockableConv(n)) {
            // A depthwise one when it writes blocks too (its template's
            // vectors run along the block; written as NCHW, 3-4x slower).
            ok = !Depthwise(n) || blocked[n.output];
          } else {
            ok = w.op == Op::kPool2d || (w.Int("groups") == 1 && w.Int("K") % kChannelBlock == 0) ||
                 IsDepthwiseConv(w);
          }
        } else if (blockable && k >= n_op) {
          ok = blocked[n.output];  // an operand of the output's shape
        }
        if (!ok) unblock(v);
      }
      if (!blockable || !blocked[n.output]) continue;
      // A depthwise conv writes blocks only from blocks; epilogue operands
      // are read in the output's layout.
      if (Depthwise(n) && !blocked[n.inputs[0]]) unblock(n.output);
      std::vector<const std::vector<int64_t>*> operand_shapes;
      for (const EpilogueOp& e : n.workload.epilogue) {
        if (e.HasOperand()) operand_shapes.push_back(&e.operand_shape);
      }
      for (size_t k = n_op; k < n.inputs.size(); ++k) {
        const std::vector<int64_t>& shape = *operand_shapes[k - n_op];
        if (!blocked[n.inputs[k]] && !OneElement(shape) &&
            !(Int8BlockableConv(n) && PerChannelOperand(shape, g.values[n.output].shape))) {
          unblock(n.output);
        }
      }
    }
  }
  for (Node& n : g.nodes) {
    if (!BlockableOp(n)) continue;
    Workload& w = n.workload;
    // A generic op's ints name its shapes (in0, shape): blocked too.
    const bool generic = Int8BlockableConv(n);
    if (blocked[n.inputs[0]]) {
      w.ints["in_block"] = {kChannelBlock};
      if (generic) w.ints["in0"] = BlockedShape(w.Ints("in0"), kChannelBlock);
    }
    if (!blocked[n.output]) continue;
    w.ints["out_block"] = {kChannelBlock};
    if (generic) w.ints["shape"] = BlockedShape(w.Ints("shape"), kChannelBlock);
    for (EpilogueOp& e : w.epilogue) {
      if (!e.HasOperand()) continue;
      e.operand_shape = OneElement(e.operand_shape) ? std::vector<int64_t>(5, 1)
                                                    : BlockedShape(e.operand_shape, kChannelBlock);
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (blocked[v]) g.values[v].shape = BlockedShape(g.values[v].shape, kChannelBlock);
  }
}

void FuseQuantizedAdds(Graph& g) {
  std::vector<int> producer(g.values.size(), -1), consumers(g.values.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    producer[g.nodes[i].output] = static_cast<int>(i);
    for (int v : g.nodes[i].inputs) ++consumers[static_cast<size_t>(v)];
  }
  auto scalar = [&](int v) -> std::optional<double> {
    const Value& x = g.values[v];
    if (!x.IsConstant() || x.NumElements() != 1) return std::nullopt;
    return x.ToDoubles()[0];
  };
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (q.kind != NodeKind::kCompute || q.workload.op != Op::kQAdd ||
        !q.workload.prologue.empty() || q.inputs.size() < 6) {
      continue;
    }
    std::optional<double> sa = scalar(q.inputs[2]), za = scalar(q.inputs[3]),
                          sb = scalar(q.inputs[4]), zb = scalar(q.inputs[5]);
    if (!sa || !za || !sb || !zb || !(*sb > 0)) continue;
    for (int side = 0; side < 2; ++side) {
      const int mine = q.inputs[static_cast<size_t>(side)], other = q.inputs[1 - side];
      const int pi = producer[mine];
      if (pi < 0 || dead[static_cast<size_t>(pi)] || g.IsOutput(mine) || mine == other ||
          consumers[static_cast<size_t>(mine)] != 1 || producer[other] >= pi) {
        continue;
      }
      Node& p = g.nodes[static_cast<size_t>(pi)];
      std::vector<EpilogueOp>& ep = p.workload.epilogue;
      const DType byte = g.values[mine].dtype;
      if (p.kind != NodeKind::kCompute || p.workload.op != Op::kConv || ep.empty() ||
          ep.back().kind != EpilogueKind::kUnary || ep.back().fn != ElementFn::kCast ||
          (byte != DType::kUInt8 && byte != DType::kInt8)) {
        continue;
      }
      auto psig = p.workload.Signature();
      auto qsig = q.workload.Signature();
      if (!psig.ok() || !qsig.ok()) continue;
      // dtypes: the conv's inputs, its operands, the new ones, the add's.
      std::vector<DType> dtypes;
      for (const TensorSpec& t : psig->inputs) dtypes.push_back(t.dtype);
      const std::vector<int64_t> shape = g.values[mine].shape, one(shape.size(), 1);
      auto constant = [&](double v) {
        Value c;
        c.name = StrCat(q.name, ":qadd", g.values.size());
        c.shape = one;
        c.SetFloats({static_cast<float>(v)});
        return g.AddValue(std::move(c));
      };
      auto op = [&](EpilogueKind kind, int input, const std::vector<int64_t>& operand_shape) {
        EpilogueOp e;
        e.kind = kind;
        e.operand_shape = operand_shape;
        ep.push_back(e);
        p.inputs.push_back(input);
        dtypes.push_back(g.values[input].dtype);
      };
      const bool u8 = byte == DType::kUInt8;
      ep.back() = EpilogueOp{
          EpilogueKind::kUnary, {}, ElementFn::kClip, {u8 ? 0.0 : -128.0, u8 ? 255.0 : 127.0}};
      const double zm = side == 0 ? *za : *zb, sm = side == 0 ? *sa : *sb;
      const double zo = side == 0 ? *zb : *za, so = side == 0 ? *sb : *sa;
      op(EpilogueKind::kAdd, constant(-zm), one);
      op(EpilogueKind::kMul, constant(sm / so), one);
      op(EpilogueKind::kAdd, other, shape);
      op(EpilogueKind::kAdd, constant(-zo), one);
      op(EpilogueKind::kMul, constant(so), one);
      // The add's epilogue and its operands after it.
      size_t next = 6;
      for (const EpilogueOp& e : q.workload.epilogue) {
        ep.push_back(e);
        if (!e.HasOperand()) continue;
        p.inputs.push_back(q.inputs[next]);
        dtypes.push_back(qsig->inputs[next].dtype);
        ++next;
      }
      dtypes.push_back(qsig->output.dtype);
      p.workload.SetDtypes(dtypes);
      p.output = q.output;
      producer[q.output] = pi;
      KILN_CHECK(p.workload.Signature().ok()) << p.workload.Canonical();
      dead[qi] = true;
      break;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

namespace {

// FoldRequantScales on the first chain of node n it applies to; false when
// none does.
bool FoldOneRequantScale(Graph& g, Node& n) {
  std::vector<EpilogueOp>& ep = n.workload.epilogue;
  // The input index of each epilogue op's operand (-1: none).
  std::vector<int> operand(ep.size(), -1);
  int next = static_cast<int>(OpInputs(n));
  for (size_t i = 0; i < ep.size(); ++i) {
    if (ep[i].HasOperand()) operand[i] = next++;
  }
  auto constant = [&](size_t i) -> const Value* {
    if (operand[i] < 0) return nullptr;
    const Value& v = g.values[n.inputs[static_cast<size_t>(operand[i])]];
    return v.IsConstant() && v.dtype == DType::kFloat32 ? &v : nullptr;
  };
  for (size_t i = 0; i < ep.size(); ++i) {
    if (ep[i].kind != EpilogueKind::kMul || !constant(i)) continue;
    size_t j = i + 1;
    const bool add = j < ep.size() && ep[j].kind == EpilogueKind::kAdd && constant(j);
    if (add) ++j;
    if (j < ep.size() && ep[j].kind == EpilogueKind::kRelu) ++j;
    if (j + 1 >= ep.size() || ep[j].kind != EpilogueKind::kBinary || ep[j].fn != ElementFn::kDiv ||
        ep[j].reversed || !constant(j) || constant(j)->NumElements() != 1 ||
        ep[j + 1].kind != EpilogueKind::kUnary || ep[j + 1].fn != ElementFn::kRound) {
      continue;
    }
    const float s = constant(j)->ToFloats()[0];
    if (!(s > 0) || !std::isfinite(s)) continue;
    // A tap of a value the fold rescales (entering ops i+1 .. j) would read
    // it divided by s.
    if (std::any_of(ep.begin(), ep.end(), [&](const EpilogueOp& e) {
          return e.IsTap() && e.tap > static_cast<int64_t>(i) && e.tap <= static_cast<int64_t>(j);
        })) {
      continue;
    }
    for (size_t k : add ? std::vector<size_t>{i, i + 1} : std::vector<size_t>{i}) {
      Value v = *constant(k);
      std::vector<float> f = v.ToFloats();
      for (float& x : f) x /= s;
      v.SetFloats(f);
      v.name += ":requant";
      n.inputs[static_cast<size_t>(operand[k])] = g.AddValue(std::move(v));
    }
    n.inputs.erase(n.inputs.begin() + operand[j]);
    if (auto d = n.workload.ints.find("dtypes"); d != n.workload.ints.end()) {
      d->second.erase(d->second.begin() + operand[j]);  // one per kernel argument
    }
    ep.erase(ep.begin() + static_cast<ptrdiff_t>(j));
    // The ops after the division move up by one: so do the taps of the
    // values entering them (the same values: the fold keeps them).
    for (EpilogueOp& e : ep) e.tap -= e.tap > static_cast<int64_t>(j) ? 1 : 0;
    KILN_CHECK(n.workload.Signature().ok()) << n.workload.Canonical();
    return true;
  }
  return false;
}

}  // namespace

void FoldRequantScales(Graph& g) {
  for (Node& n : g.nodes) {
    while (n.kind == NodeKind::kCompute && FoldOneRequantScale(g, n)) {
    }
  }
}

void UseBf16Products(Graph& g, bool convs) {
  for (Node& n : g.nodes) {
    Workload& w = n.workload;
    if (n.kind != NodeKind::kCompute || w.ints.count("dtypes") || n.inputs.size() < 2) continue;
    const bool dense = w.op == Op::kDense && w.IntOr("batch_b", 0) == 0;
    // Convolutions that write channel blocks (the ones conv2d_bf16.cc
    // covers); depthwise ones stay float32 (memory-bound: few products),
    // and so do 3x3 stride-1 layers of 20x20 pixels or more, whose float32
    // default is Winograd F(4x4, 3x3): a quarter of the multiplies beats
    // bfloat16's two products per lane (ResNet-50's 56x56 and 28x28 layers
    // 0.33 ms against 0.46 at one thread; at 14x14 bfloat16 wins, 0.45
    // against 0.58).
    const bool winograd = w.op == Op::kConv2d && w.Int("R") == 3 && w.Int("S") == 3 &&
                          w.Ints("stride") == std::vector<int64_t>{1, 1} &&
                          w.Ints("dilation") == std::vector<int64_t>{1, 1} &&
                          w.Int("OH") * w.Int("OW") >= 400;
    // Nor layers of fewer than 32 products per input value (K * R * S): the
    // input's pack into bfloat16 pairs, a pass over it per call, costs more
    // than the products save (MobileNetV2's 112x112 1x1 32 -> 16, 0.083 ms
    // against 0.068).
    // Without vector bf16 convs (a CPU with AMX-BF16): the ones AMX tiles
    // compute (Winograd's layers included).
    const bool blocks =
        w.op == Op::kConv2d && w.Int("groups") == 1 && w.IntOr("out_block", 0) == kChannelBlock;
    const bool conv = blocks && (convs ? !winograd && w.Int("K") * w.Int("R") * w.Int("S") >= 32
                                       : ops::Bf16ConvAmxPays(w));
    const Value& b = g.values[n.inputs[1]];
    if ((dense || conv) && b.IsConstant() && b.dtype == DType::kFloat32) w.ints["bf16"] = {1};
  }
}

void FuseOps(Graph& graph) {
  FuseEpilogues(graph);
  FuseQuantizedAdds(graph);
  FoldRequantScales(graph);
  FuseInjective(graph);
}

absl::Status RunGraphPasses(Graph& graph, bool plan_layouts, Precision precision, bool bf16_convs) {
  if (auto s = FoldBatchNorms(graph); !s.ok()) return s;
  if (auto s = FoldConstants(graph); !s.ok()) return s;
  EliminateDeadNodes(graph);
  FuseOps(graph);
  if (plan_layouts) PlanLayouts(graph);
  if (precision == Precision::kBfloat16) UseBf16Products(graph, bf16_convs);
  return absl::OkStatus();
}

}  // namespace kiln::compiler

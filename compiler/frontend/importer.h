#pragma once
// Internal to compiler/frontend: the ONNX importer's state and helpers,
// shared by onnx_import.cc (model level: initializers, inputs, dispatch) and
// onnx_ops.cc (one importer per operator). Not an API.

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/check.h"
#include "base/str.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/graph.h"
#include "onnx/onnx_pb.h"

// In an expansion: `const std::string lhs` from a StatusOr<std::string>
// (an Emit), or the error returned.
#define KILN_EMIT_OR_RETURN(lhs, expr)          \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  const std::string lhs = *lhs##_or

namespace kiln::compiler::onnx_internal {

using Shape = std::vector<int64_t>;

// The newest default-domain opset kiln knows; models without one get it.
constexpr int64_t kMaxOpset = 22;
// Bounds on what a model may declare (the importer is an attack surface):
// no value has more than kMaxElements elements (ImportOptions may lower it),
// so sizes and shape arithmetic on them never overflow.
// Constants the import computes have the same bound (the memory they take
// is ImportOptions::max_folded_bytes's to limit): a weight made by a node
// (ConstantOfShape of 10^8 elements in two zoo CNNs) is as big as a weight
// the model may carry.
constexpr int64_t kMaxElements = int64_t{1} << 32;
// How to raise the element limit, for errors that hit it.
// The most nodes LSTM/GRU/RNN, If, Loop and Scan may expand into, in all.
constexpr int64_t kMaxExpandedNodes = int64_t{1} << 20;
inline constexpr const char* kElementLimitHint =
    "the most elements a tensor may have: ImportOptions::max_elements, `kiln compile "
    "--max-elements N`, at most 2^32";

inline std::string DtypeName(int dtype) {
  if (auto d = DTypeFromOnnx(dtype)) return DTypeName(*d);
  std::string s = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(dtype));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "float") return "float32";
  if (s == "double") return "float64";
  return s.empty() ? StrCat("dtype#", dtype) : s;
}

// Left-pads `s` with 1s to `rank`.
inline Shape PadTo(const Shape& s, size_t rank) {
  Shape out(rank - std::min(rank, s.size()), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

inline int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Workload shapes are never empty: a scalar is [1].
inline Shape Wl(const Shape& s) { return s.empty() ? Shape{1} : s; }

inline absl::StatusOr<Shape> Broadcast(const Shape& a, const Shape& b, const std::string& what) {
  size_t rank = std::max(a.size(), b.size());
  Shape pa = PadTo(a, rank), pb = PadTo(b, rank), out(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (pa[i] == pb[i] || pb[i] == 1) {
      out[i] = pa[i];
    } else if (pa[i] == 1) {
      out[i] = pb[i];
    } else {
      return absl::InvalidArgumentError(StrCat(what, ": shapes [", StrJoin(a, ","), "] and [",
                                               StrJoin(b, ","), "] do not broadcast"));
    }
  }
  return out;
}

// Tensor data of an initializer or Constant: `n` elements of `dtype`, from
// raw_data or the typed field ONNX keeps that dtype in.
absl::StatusOr<std::vector<uint8_t>> TensorBytes(const onnx::TensorProto& t, DType dtype,
                                                 int64_t n);

// The status of a step whose value the caller does not need (an emitted
// node's output name, a new value's index).
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& r) {
  return r.ok() ? absl::OkStatus() : r.status();
}

class Importer {
 public:
  explicit Importer(const ImportOptions& options) : options_(options) {}
  // Releases each initializer's data from `model` once it is imported, so a
  // large model is not held twice.
  absl::StatusOr<std::unique_ptr<Graph>> Run(onnx::ModelProto& model);

 private:
  absl::Status AddInitializer(const onnx::TensorProto& t, const std::string& name);
  absl::Status AddInput(const onnx::ValueInfoProto& in);
  // The `want` bytes of a tensor kept in an external data file.
  absl::StatusOr<std::vector<uint8_t>> ExternalBytes(const onnx::TensorProto& t,
                                                     const std::string& name, int64_t want);
  absl::Status ImportNode(const onnx::NodeProto& node);
  // ImportNode, then the checks every node gets (onnx_validate.cc): attribute
  // types, the size of every value it made, and the node's name in errors.
  absl::Status ImportChecked(const onnx::NodeProto& node);

  // Input i of the node (any dtype); InF also requires float32.
  absl::StatusOr<int> In(const onnx::NodeProto& node, int i);
  absl::StatusOr<int> InF(const onnx::NodeProto& node, int i);
  bool HasIn(const onnx::NodeProto& node, int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  // Input i's constant contents as integers (shape-like inputs); an
  // UNIMPLEMENTED error when it is not a constant.
  absl::StatusOr<std::vector<int64_t>> ConstInts(const onnx::NodeProto& node, int i);
  absl::StatusOr<std::vector<double>> ConstDoubles(const onnx::NodeProto& node, int i);
  int NewValue(const onnx::NodeProto& node, int i, Shape shape, DType dtype = DType::kFloat32) {
    Value v;
    v.name = i < node.output_size() ? node.output(i) : StrCat(Name(node), ":", i);
    v.shape = std::move(shape);
    v.dtype = dtype;
    int id = g_->AddValue(std::move(v));
    by_name_[g_->values[id].name] = id;
    return id;
  }
  int TempValue(const std::string& name, Shape shape, DType dtype = DType::kFloat32) {
    Value v;
    v.name = StrCat(name, ":t", g_->values.size());
    v.shape = std::move(shape);
    v.dtype = dtype;
    return g_->AddValue(std::move(v));
  }
  const Value& V(int v) const { return g_->values[v]; }
  // A new constant value.
  int ConstValue(const std::string& name, Shape shape, DType dtype, std::vector<uint8_t> bytes) {
    Value v;
    v.name = StrCat(name, ":c", g_->values.size());
    v.shape = std::move(shape);
    v.dtype = dtype;
    v.bytes = std::move(bytes);
    return g_->AddValue(std::move(v));
  }
  int ConstInt64s(const std::string& name, Shape shape, const std::vector<int64_t>& data) {
    Value v;
    v.name = StrCat(name, ":c", g_->values.size());
    v.shape = std::move(shape);
    v.SetInt64s(data);
    return g_->AddValue(std::move(v));
  }
  std::string Name(const onnx::NodeProto& node) const {
    return node.name().empty() ? (node.output_size() ? node.output(0) : node.op_type())
                               : node.name();
  }
  // Adds a compute node (or, when every input is constant, evaluates it at
  // once into `out`, so shape subgraphs fold as they are imported).
  absl::Status AddCompute(const onnx::NodeProto& node, Workload w, std::vector<int> inputs,
                          int out);
  void AddView(const onnx::NodeProto& node, int in, int out);

  // Generic building blocks (onnx_generic_ops.cc). Each returns the new
  // value; `out` >= 0 names it after that node output, else a temporary.
  // A generic op over `inputs` producing `shape` of `dtype`.
  absl::StatusOr<int> Generic(const onnx::NodeProto& node, Op op, std::vector<int> inputs,
                              Shape shape, DType dtype,
                              std::map<std::string, std::vector<int64_t>> attrs, int out = -1,
                              std::map<std::string, double> floats = {});
  absl::StatusOr<int> Unary(const onnx::NodeProto& node, int x, ElementFn fn,
                            std::vector<double> params = {}, int out = -1);
  absl::StatusOr<int> BinaryOp(const onnx::NodeProto& node, int a, int b, ElementFn fn,
                               int out = -1);
  // Broadcast copy of x to `shape` (Expand) or a cast.
  absl::StatusOr<int> Expand(const onnx::NodeProto& node, int x, Shape shape, int out = -1);
  absl::StatusOr<int> ReduceOver(const onnx::NodeProto& node, int x, std::vector<int64_t> axes,
                                 bool keep, int kind, int pre = 0, int out = -1);
  absl::StatusOr<int> Reshaped(const onnx::NodeProto& node, int x, Shape shape, int out = -1);
  absl::StatusOr<int> Transposed(const onnx::NodeProto& node, int x, std::vector<int64_t> perm,
                                 int out = -1);
  // The numerically stable steps shared by softmax, log-softmax and
  // log-sum-exp over `axes` (dims kept): max, x - max, exp of it, its sum.
  struct ExpSum {
    int max, shifted, exp, sum;
  };
  absl::StatusOr<ExpSum> StableExpSum(const onnx::NodeProto& node, int x,
                                      std::vector<int64_t> axes);
  // A scalar constant of `dtype`.
  int Scalar(const std::string& name, DType dtype, double v);
  // onnx_generic_ops.cc, onnx_shape_ops.cc and onnx_norm_ops.cc, tried in
  // that order: *handled false when the op is none of theirs.
  absl::Status ImportGeneric(const onnx::NodeProto& node, bool* handled);
  absl::Status ImportDataMovement(const onnx::NodeProto& node, bool* handled);
  absl::Status ImportNormalization(const onnx::NodeProto& node, bool* handled);
  // onnx_linalg_ops.cc (quantization, integer and transposed convolution,
  // windows, LRN, Einsum) and onnx_index_ops.cc (GatherND, scatters, TopK,
  // Compress, CenterCropPad), tried after those.
  absl::Status ImportLinalg(const onnx::NodeProto& node, bool* handled);
  absl::Status ImportIndexing(const onnx::NodeProto& node, bool* handled);
  absl::Status ImportEinsum(const onnx::NodeProto& node);
  // A constant int8 copy of b - bzp for a constant b and zero point (one, or
  // one per index of b's `axis`), when every element fits in int8; -1
  // otherwise.
  int ShiftedInt8(int b, int bzp, size_t axis);
  // (a - azp) @ (b - bzp) in int32, with MatMul's rank rules.
  absl::StatusOr<int> IntegerMatMul(const onnx::NodeProto& node, int a, int b, int azp, int bzp,
                                    int out = -1);
  // QuantizeLinear / DequantizeLinear between float32 and 8-bit integers
  // (per tensor or along `axis`; zp -1: none) as eltwise ops, which fuse
  // into the epilogue of the op before them: cast(round(x / s) + zp) and
  // (cast(x) - zp) * s.
  absl::StatusOr<int> AffineQuantize(const onnx::NodeProto& node, int x, int s, int zp, DType to,
                                     int64_t axis, int out = -1);
  absl::StatusOr<int> AffineDequantize(const onnx::NodeProto& node, int x, int s, int zp,
                                       int64_t axis, int out = -1);
  // DequantizeLinear(QuantizeLinear(x)) of a per-tensor scale s and constant
  // zero point z in float: clip(round(x / s), lo - z, hi - z) * s, lo and hi
  // the 8-bit range; -1 when the value q is not such a round trip.
  absl::StatusOr<int> FakeQuantize(const onnx::NodeProto& node, int q, int s, int zp, int out);
  // A 2-D Conv (one group, no dilation) of dequantized 8-bit values by
  // dequantized constant weights, as an integer convolution of the 8-bit
  // values (generic conv, zp=2: matmul_int8.cc's sibling conv_int8.cc) whose
  // int32 result is scaled by x's scale times each channel's weight scale
  // (and the bias added) in float: the float convolution of the dequantized
  // values, computed in integers. false when the pattern does not hold.
  absl::StatusOr<bool> QuantizedConv(const onnx::NodeProto& node, int x, int wt, int bias,
                                     const Shape& stride, const Shape& pads, const Shape& dilation,
                                     int64_t groups, const Shape& out);
  struct Dequantized;
  // QuantizedConv's integer convolution of qx's 8-bit values by qw's
  // (QLinearConv's too), its float result (ScaledAccumulator) named after
  // output `out_index` (-1: a temporary); -1 when the pattern does not hold.
  absl::StatusOr<int> IntegerConv(const onnx::NodeProto& node, const Dequantized& qx,
                                  const Dequantized& qw, int bias, bool bias_first,
                                  const Shape& stride, const Shape& pads, const Shape& dilation,
                                  int64_t groups, const Shape& out, int out_index);
  // A MatMul, or a Gemm (A not transposed, alpha 1, beta 1), of a
  // dequantized 8-bit A (per-tensor scale; any rank for MatMul) by
  // dequantized constant 2-D weights (per tensor, or per output column): the
  // integer matmul of the 8-bit values (generic matmul, zp=2:
  // matmul_int8.cc) scaled by A's scale times each column's weight scale,
  // the bias added (-1: none), in float. A classifier's or a statically
  // quantized transformer's weights then stream as bytes, not as the floats
  // they stand for. false when the pattern does not hold.
  absl::StatusOr<bool> QuantizedMatMul(const onnx::NodeProto& node, int a, int b, int bias,
                                       bool trans_b);
  // Their float result, named after output `out` (-1: a temporary):
  // float(acc) times x's scale `sx` times each output channel's weight
  // scale `sw` (one, or one per channel), as `shape` (the channels its first
  // dim), plus `bias` (-1: none) reshaped to it; with `bias_first` the bias
  // (an integer one: QLinearConv's) is added before the scaling.
  absl::StatusOr<int> ScaledAccumulator(const onnx::NodeProto& node, int acc, int sx, int sw,
                                        const Shape& shape, int bias, bool bias_first = false,
                                        int out = 0);
  // Add of two dequantized 8-bit values of one shape (per-tensor scales):
  // the generic qadd of the 8-bit values (a residual add reads bytes, not
  // the floats they stand for); false when the pattern does not hold.
  absl::StatusOr<bool> QuantizedAdd(const onnx::NodeProto& node, int a, int b);
  // A per-axis parameter p of n > 1 elements reshaped to [n, 1, ...], to
  // broadcast along `axis` of a rank-`rank` value; p itself otherwise.
  absl::StatusOr<int> AlongAxis(const onnx::NodeProto& node, int p, size_t rank, int64_t axis);
  // Normalizes a possibly negative axis; INVALID_ARGUMENT when out of range.
  absl::StatusOr<int64_t> NormAxis(const onnx::NodeProto& node, int64_t axis, size_t rank) const;
  absl::Status Unimplemented(const onnx::NodeProto& node, const std::string& what) const {
    return absl::UnimplementedError(
        StrCat("operator '", node.op_type(), "' (node '", Name(node), "'): ", what));
  }

  const onnx::AttributeProto* Attr(const onnx::NodeProto& node, const char* name) const {
    for (const auto& a : node.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  // Attr* read an attribute of the type ONNX gives it; one of another type
  // reads as absent and fails the node (AttrTyped records the error, which
  // ImportChecked returns).
  const onnx::AttributeProto* AttrTyped(const onnx::NodeProto& node, const char* name,
                                        onnx::AttributeProto::AttributeType type) const;
  int64_t AttrInt(const onnx::NodeProto& node, const char* name, int64_t fallback) const {
    const auto* a = AttrTyped(node, name, onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  float AttrFloat(const onnx::NodeProto& node, const char* name, float fallback) const {
    const auto* a = AttrTyped(node, name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> AttrInts(const onnx::NodeProto& node, const char* name,
                                std::vector<int64_t> fallback) const {
    const auto* a = AttrTyped(node, name, onnx::AttributeProto::INTS);
    if (!a) return fallback;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::string AttrString(const onnx::NodeProto& node, const char* name,
                         std::string fallback) const {
    const auto* a = AttrTyped(node, name, onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }

  absl::Status ImportConv(const onnx::NodeProto& node);
  absl::Status ImportPool(const onnx::NodeProto& node, bool max, bool global);
  // Rank-5 (NCDHW) MaxPool/AveragePool/GlobalAveragePool -> pool3d.
  absl::Status ImportPool3d(const onnx::NodeProto& node, int x, const Shape& xs, bool max,
                            bool global);
  absl::Status ImportGemm(const onnx::NodeProto& node);
  // LSTM, GRU and RNN, unrolled over their time steps (onnx_recurrent.cc).
  absl::Status ImportRecurrent(const onnx::NodeProto& node);
  // Window functions and MelWeightMatrix, constants computed at import
  // (onnx_signal_ops.cc); *handled false for other operators.
  absl::Status ImportSignal(const onnx::NodeProto& node, bool* handled);
  absl::Status ImportDft(const onnx::NodeProto& node);
  absl::Status ImportStft(const onnx::NodeProto& node);
  // AffineGrid, ReverseSequence, MaxUnpool, Col2Im, Det and TfIdfVectorizer
  // as the nodes of their definition (onnx_expanded_ops.cc); *handled false
  // for other operators.
  absl::Status ImportExpanded(const onnx::NodeProto& node, bool* handled);
  // TfIdfVectorizer over integer n-grams, as Gathers, Equals and sums
  // (onnx_expanded_ops.cc).
  absl::Status ImportTfIdf(const onnx::NodeProto& node);
  // onnxruntime's quantized operators (domain com.microsoft) as the QDQ
  // nodes of their definition (onnx_contrib_ops.cc); others refused by name.
  absl::Status ImportMicrosoft(const onnx::NodeProto& node);
  // The optimizers of ai.onnx.preview.training (Adagrad, Momentum, Adam) as
  // the elementwise nodes of their definitions (onnx_training_ops.cc).
  absl::Status ImportTraining(const onnx::NodeProto& node);
  // DeformConv (2-D) as GridSample's bilinear samples at the offset taps,
  // masked, times the weights (onnx_deform_conv.cc).
  absl::Status ImportDeformConv(const onnx::NodeProto& node);
  // If, Loop and Scan: their subgraphs inlined, once per iteration
  // (onnx_control_flow.cc).
  absl::Status ImportControlFlow(const onnx::NodeProto& node);
  // Imports `g`'s nodes with its inputs bound to the values named `inputs`,
  // every name it defines prefixed with `prefix` (names from enclosing
  // scopes kept); the names of its outputs.
  absl::StatusOr<std::vector<std::string>> InlineSubgraph(const onnx::GraphProto& g,
                                                          const std::vector<std::string>& inputs,
                                                          const std::string& prefix);
  // The expansions above import ONNX nodes they write, with opset-22
  // semantics: `op` over the named inputs, its output named `out` or a fresh
  // "<base>::<op><k>"; the output's name.
  absl::StatusOr<std::string> Emit(const std::string& base, const std::string& op,
                                   const std::vector<std::string>& inputs,
                                   const std::function<void(onnx::NodeProto&)>& attrs = nullptr,
                                   const std::string& out = "");
  // DequantizeLinear / QuantizeLinear of named values, emitted (zp "":
  // none; the axis of per-channel parameters).
  absl::StatusOr<std::string> EmitDequantize(const std::string& base, const std::string& x,
                                             const std::string& scale, const std::string& zp,
                                             int64_t axis = 1);
  absl::StatusOr<std::string> EmitQuantize(const std::string& base, const std::string& y,
                                           const std::string& scale, const std::string& zp,
                                           const std::string& out);
  // Attribute setters for Emit's `attrs`.
  using AttrSetter = std::function<void(onnx::NodeProto&)>;
  static AttrSetter Attr(const char* name, onnx::AttributeProto::AttributeType type,
                         std::function<void(onnx::AttributeProto&)> set) {
    return [name, type, set = std::move(set)](onnx::NodeProto& n) {
      auto* a = n.add_attribute();
      a->set_name(name);
      a->set_type(type);
      set(*a);
    };
  }
  static AttrSetter IntAttr(const char* name, int64_t v) {
    return Attr(name, onnx::AttributeProto::INT, [v](onnx::AttributeProto& a) { a.set_i(v); });
  }
  static AttrSetter IntsAttr(const char* name, std::vector<int64_t> v) {
    return Attr(name, onnx::AttributeProto::INTS, [v = std::move(v)](onnx::AttributeProto& a) {
      for (int64_t e : v) a.add_ints(e);
    });
  }
  static AttrSetter FloatAttr(const char* name, float v) {
    return Attr(name, onnx::AttributeProto::FLOAT, [v](onnx::AttributeProto& a) { a.set_f(v); });
  }
  // `v` added as a constant named "<base>:c<k>", by which Emit's nodes can
  // read it; its name.
  std::string NamedConstant(const std::string& base, Value v) {
    v.name = StrCat(base, ":c", g_->values.size());
    std::string name = v.name;
    by_name_[name] = g_->AddValue(std::move(v));
    return name;
  }
  // A float32 scalar constant, as NamedConstant names it.
  std::string NamedScalar(const std::string& base, float v) {
    Value c;
    c.SetFloats({v});
    return NamedConstant(base, std::move(c));
  }
  // An int64 Constant (a scalar when `scalar`), as Emit names it.
  absl::StatusOr<std::string> EmitInt64s(const std::string& base, const std::vector<int64_t>& v,
                                         bool scalar = false);
  int emit_serial_ = 0;
  // Nodes the expansions have imported, against kMaxExpandedNodes (nested
  // loops multiply: a few bytes of ONNX must not unroll into millions).
  int64_t expanded_nodes_ = 0;
  // Counts `n` nodes more (before an expansion of known size, so that one
  // too large is refused before any of it is imported).
  absl::Status CountExpandedNode(int64_t n = 1);
  absl::Status ImportMatMul(const onnx::NodeProto& node);
  absl::Status ImportReshape(const onnx::NodeProto& node);
  absl::Status ImportBatchNorm(const onnx::NodeProto& node);
  absl::Status BatchNormSteps(const onnx::NodeProto& node, const std::vector<int>& in,
                              bool training);
  absl::Status ImportConstant(const onnx::NodeProto& node);
  // Resize and Upsample (onnx_resize.cc).
  absl::Status ImportResize(const onnx::NodeProto& node);
  // GridSample (onnx_resize.cc): the generic grid_sample op.
  absl::Status ImportGridSample(const onnx::NodeProto& node);
  // Spatial padding/outputs for conv and pool over in_hw.size() dimensions
  // (pads: begins, then ends). `kernel` is the undilated window size.
  absl::Status Spatial(const onnx::NodeProto& node, const Shape& in_hw, const Shape& kernel,
                       const Shape& stride, const Shape& dilation, bool ceil_mode, Shape* pads,
                       Shape* out_hw);

  // Spatial attributes; a 1-D op (one_d) is lifted to 2-D with H = 1.
  Shape Lifted(const onnx::NodeProto& node, const char* name, Shape fallback, bool one_d) const {
    Shape v = AttrInts(node, name, {});
    if (v.empty()) return fallback;
    if (!one_d) return v;
    if (std::string_view(name) == "pads") return v.size() == 2 ? Shape{0, v[0], 0, v[1]} : v;
    if (v.size() != 1) return v;
    return {1, v[0]};
  }

  const ImportOptions& options_;
  std::unique_ptr<Graph> g_;
  std::unordered_map<std::string, int> by_name_;
  // The 8-bit values AffineQuantize made, by value: what they quantize, so
  // that a DequantizeLinear of one with the same scale and zero point
  // computes the round trip in float (FakeQuantize).
  struct Quantized {
    int x, s, zp;
    DType to;
  };
  std::unordered_map<int, Quantized> quantized_;
  // The float values DequantizeLinear made (8-bit q, scale, zero point or
  // -1, axis), so that a Conv of them can compute in integers
  // (QuantizedConv).
  struct Dequantized {
    int q, s, zp;
    int64_t axis;
  };
  std::unordered_map<int, Dequantized> dequantized_;
  // QuantizedConv and QuantizedAdd may apply (Run decides: not in a network
  // with quantized grouped convolutions, which compute in float).
  bool integer_cnn_ = true;
  int64_t opset_ = 0;
  // The most elements any value may have (options_.max_elements, capped).
  int64_t max_elements_ = options_.max_elements > 0 ? std::min(options_.max_elements, kMaxElements)
                                                    : kMaxElements;
  // The bytes of constants the import has computed so far
  // (ImportOptions::max_folded_bytes), and the check before `bytes` more
  // are allocated.
  int64_t folded_bytes_ = 0;
  // The values counted in folded_bytes_ (by id): a node an expansion
  // imports (Emit) is checked inside its parent's check, and each constant
  // counts once.
  std::vector<char> fold_counted_;
  absl::Status CheckFoldBudget(int64_t bytes) const;
  // INVALID_ARGUMENT for a value of `what` ("ConstantOfShape of shape
  // [...]") past max_elements_, naming the limit and how to raise it.
  absl::Status TooManyElements(const std::string& what) const;
  // The first attribute type error of the node being imported.
  mutable absl::Status attr_error_;
};

}  // namespace kiln::compiler::onnx_internal

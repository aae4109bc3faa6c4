#pragma once
// A workload: one tuning task, i.e. an anchor operator on fixed shapes plus
// its fused elementwise epilogue. Its canonical string is what travels over
// the wire and into the log database; its key is a short stable hash of it.
//
// Ops and their attributes (all shapes NCHW, or NCDHW for pool3d; float32):
//   conv2d  ints N,C,H,W (input), K (out channels), R,S (kernel h,w),
//           stride=[sh,sw], pad=[top,left,bottom,right], dilation=[dh,dw],
//           groups, bias (0/1), OH, OW (output h,w)
//           inputs: data[N,C,H,W], weight[K,C/groups,R,S], bias[K] if bias=1
//           in_block, out_block (optional, 0 when absent): data / output
//           stored in channel blocks, NCHW[b]c = [N, C/b, H, W, b] (graph
//           pass PlanLayouts); an epilogue operand of the whole output's
//           shape is then given in the output's blocked shape
//   dense   ints M,N,K, transA, transB (0/1), batch (>=1; A and B then have a
//           leading batch dim when batch_a / batch_b is 1), batch_a, batch_b,
//           bias (0/1), floats alpha, beta (Gemm; 1.0 when absent)
//           inputs: A[M,K] (or [K,M] if transA; [batch,..] if batch_a),
//                   B[K,N] (or [N,K] if transB; [batch,..] if batch_b),
//                   C (bias, shape `bias_shape`, broadcast to [M,N]) if bias=1
//           output: [M,N] or [batch,M,N] when batch > 1 or batch_a/batch_b
//   pool2d  ints N,C,H,W, kernel=[kh,kw], stride, pad (4), dilation, OH, OW,
//           kind (0 = max, 1 = average), count_include_pad (0/1)
//           inputs: data[N,C,H,W]; in_block, out_block as for conv2d
//   pool3d  ints N,C,D,H,W, kernel=[kd,kh,kw], stride (3),
//           pad=[front,top,left,back,bottom,right] (ONNX order: begins, ends),
//           dilation (3), OD, OH, OW, kind (0 = max, 1 = average),
//           count_include_pad (0/1). Average divides by the number of window
//           elements inside the input, or by kd*kh*kw when count_include_pad
//           (also for ceil-mode windows past the padded input, as the ONNX
//           test data does).
//           inputs: data[N,C,D,H,W]; output [N,C,OD,OH,OW]
//   eltwise ints shape (output shape), in_shape (input shape, broadcastable
//           to `shape` after left-padding with 1s). No anchor computation:
//           output = epilogue(broadcast(input)). With an empty epilogue it is
//           a copy.
//   <generic>  every other op (compiler/op.h) is a generic tensor operator
//           of the operator library (compiler/ops/generic.h): inputs in0,
//           in1, ... (ints, their shapes), output `shape`, and op-specific
//           attributes.
// Element types: `dtypes` (optional) lists the ONNX dtype code of every
// kernel argument in signature order (inputs, epilogue operands, output);
// absent means all float32, so float32 workloads keep their keys.
// Every op then applies `epilogue` elementwise to its output, in order:
//   relu            y = max(y, 0)
//   add:<shape>     y = y + operand (operand broadcast to the output shape)
//   mul:<shape>     y = y * operand
//   u:<fn>[:p,..]   y = fn(y, params)       (compiler/ops/elementwise.h)
//   b:<fn>:<shape>  y = fn(y, operand); br:<fn>:<shape> y = fn(operand, y)
// Each add/mul operand is one more kernel input, after the op's own inputs.
// The kernel's arguments are: op inputs, epilogue operands, then the output.
//
// Canonical form (keys sorted, lists joined by ','):
//   conv2d(C=3;H=32;K=16;...;stride=1,1;alpha=1.5|relu|add:1,16,1,1)
// i.e. op "(" key=value pairs separated by ';' (floats written with %.9g and
// marked by a trailing 'f' in the key list: "alpha=f1.5") ... then each
// epilogue op after '|'. Parse(Canonical()) == *this.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "compiler/element_fn.h"
#include "compiler/op.h"

namespace kiln::compiler {

enum class EpilogueKind { kRelu, kAdd, kMul, kUnary, kBinary };

struct EpilogueOp {
  EpilogueKind kind = EpilogueKind::kRelu;
  std::vector<int64_t> operand_shape;  // add/mul/binary only; same rank as output
  ElementFn fn = ElementFn::kRelu;     // unary/binary: the function
  std::vector<double> params;          // unary: its parameters
  bool reversed = false;               // binary: y = fn(operand, y)
  // add/mul/binary: >= 0 when the operand is not a tensor but the chain's own
  // value as it entered op `tap` of this epilogue (`mul:@0` in text), as in
  // GELU's x * f(x): the op then reads no buffer.
  int64_t tap = -1;
  bool operator==(const EpilogueOp&) const = default;
  bool IsTap() const { return tap >= 0; }
  bool HasOperand() const {
    return !IsTap() && kind != EpilogueKind::kRelu && kind != EpilogueKind::kUnary;
  }
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  int64_t NumElements() const;
  bool operator==(const TensorSpec&) const = default;
};

// The kernel's buffers in argument order: inputs (op inputs, then epilogue
// operands), then the single output.
struct KernelSignature {
  std::vector<TensorSpec> inputs;
  TensorSpec output;
};

struct Prologue;

// The channel block of the NCHW[b]c tensors the layout pass plans (a
// multiple of every target's vector width: 16 floats are one AVX-512
// vector, two AVX2 ones, four NEON ones).
inline constexpr int64_t kChannelBlock = 16;

// The shape of an NCHW tensor stored in channel blocks of b: [N, C/b, H, W,
// b] (C a multiple of b); the shape itself for b = 0.
std::vector<int64_t> BlockedShape(const std::vector<int64_t>& nchw, int64_t b);
// A shape of one element (every dim 1, or none): an epilogue operand that
// reads the same in every layout (a quantization's scale or zero point).
bool OneElement(const std::vector<int64_t>& shape);

// An op's attributes are typed: each is a list of integers (`ints`) or one
// float (`floats`), declared once per op (AttributesOf); a workload that
// carries an attribute its op does not declare, or declares of the other
// kind, is refused where it is checked (Signature), naming the op's own.
enum class AttrKind : uint8_t { kInts, kFloat };
struct AttrSpec {
  std::string_view name;
  AttrKind kind = AttrKind::kInts;
  bool indexed = false;  // one per index: name0, name1, ... (in0, scale2)
};
// The attributes workloads of `op` may carry (every op: `dtypes`, its
// buffers' element types).
const std::vector<AttrSpec>& AttributesOf(Op op);

struct Workload {
  Op op = Op::kEltwise;
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, double> floats;
  std::vector<EpilogueOp> epilogue;
  // Injective producers fused into this op's inputs (see Prologue), sorted
  // by input.
  std::vector<Prologue> prologue;

  bool operator==(const Workload&) const = default;

  // Attribute access; checks (aborts) when a required attribute is missing.
  int64_t Int(std::string_view name) const;
  int64_t IntOr(std::string_view name, int64_t fallback) const;
  const std::vector<int64_t>& Ints(std::string_view name) const;
  double FloatOr(std::string_view name, double fallback) const;

  std::string Canonical() const;
  // "<op>-<16 hex digits of a 64-bit FNV-1a hash of Canonical()>".
  std::string Key() const;
  // Floating-point operations of one run (2 per multiply-add).
  double Flops() const;
  // Buffer shapes; INVALID_ARGUMENT when the attributes are not the op's
  // (AttributesOf) or are inconsistent.
  absl::StatusOr<KernelSignature> Signature() const;
  // Sets `dtypes` from the signature's dtypes (dropped when all float32).
  void SetDtypes(const std::vector<DType>& dtypes);

  static absl::StatusOr<Workload> Parse(std::string_view canonical);
};

// A depthwise conv2d: groups = C = K > 1.
bool IsDepthwiseConv(const Workload& w);

// An injective producer (an eltwise or injective generic workload, itself
// possibly with prologues and an epilogue) computed inside its consumer's
// kernel in place of the consumer's op input `input`: the kernel takes the
// producer's arguments there instead (FuseInjective). Canonical form: an
// entry "|<input:<producer canonical, '%' and '|' escaped as %25 and %7C>"
// after the epilogue, so the key covers the whole group.
struct Prologue {
  int64_t input = 0;
  Workload op;
  bool operator==(const Prologue&) const = default;
};

}  // namespace kiln::compiler

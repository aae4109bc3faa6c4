#pragma once
// The tensor IR: typed, immutable expression and statement nodes behind
// ref-counted handles, with a kind enum and a checked downcast (`as<T>()`).
//
// Identity: a Var or Buffer is the same variable as another only if it is the
// same node (pointer identity); names are for printing. Structural equality and
// hashing (compiler/ir/structural.h) compare everything else by value and
// variables by binding position.
//
// Buffers are read and written with BufferLoad / BufferStore. Before storage
// flattening their indices are multi-dimensional (one per shape dim); after,
// every access has exactly one index into the flat buffer. Vector accesses
// use a Ramp index and a vector dtype.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/check.h"
#include "compiler/ir/intrinsic.h"

namespace kiln::ir {

// ---------------------------------------------------------------------------
// Types

enum class TypeCode : uint8_t { kInt, kFloat, kBool, kHandle, kUInt };

struct DataType {
  TypeCode code = TypeCode::kInt;
  int bits = 64;
  int lanes = 1;

  static DataType Int64() { return {TypeCode::kInt, 64, 1}; }
  static DataType Int32() { return {TypeCode::kInt, 32, 1}; }
  static DataType Float32() { return {TypeCode::kFloat, 32, 1}; }
  static DataType Float64() { return {TypeCode::kFloat, 64, 1}; }
  static DataType UInt(int bits) { return {TypeCode::kUInt, bits, 1}; }
  static DataType Int(int bits) { return {TypeCode::kInt, bits, 1}; }
  static DataType Bool() { return {TypeCode::kBool, 1, 1}; }
  static DataType Handle() { return {TypeCode::kHandle, 64, 1}; }

  DataType WithLanes(int n) const { return {code, bits, n}; }
  DataType Element() const { return {code, bits, 1}; }
  bool is_int() const { return code == TypeCode::kInt; }  // signed
  bool is_uint() const { return code == TypeCode::kUInt; }
  bool is_integer() const { return code == TypeCode::kInt || code == TypeCode::kUInt; }
  bool is_float() const { return code == TypeCode::kFloat; }
  bool is_bool() const { return code == TypeCode::kBool; }
  bool is_vector() const { return lanes > 1; }
  int bytes() const { return (bits + 7) / 8; }
  bool operator==(const DataType&) const = default;
};

std::string ToString(DataType t);  // "float32", "int64x8", "bool"

// ---------------------------------------------------------------------------
// Node base and handles

enum class ExprKind : uint8_t {
  kIntImm,
  kFloatImm,
  kVar,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kFloorDiv,
  kFloorMod,
  kMin,
  kMax,
  kEQ,
  kNE,
  kLT,
  kLE,
  kGT,
  kGE,
  kAnd,
  kOr,
  kNot,
  kSelect,
  kCast,
  kBroadcast,
  kRamp,
  kBufferLoad,
  kCall,
  kReduce,
  kLet,
};

enum class StmtKind : uint8_t {
  kFor,
  kBufferStore,
  kSeq,
  kIfThenElse,
  kAllocate,
  kLetStmt,
  kEvaluate,
};

struct ExprNode {
  ExprNode(ExprKind k, DataType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DataType dtype;
};

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};

// A nullable, ref-counted handle to an immutable node. `as<T>()` returns
// nullptr unless the node's kind is T::kKind; `to<T>()` checks instead.
template <typename NodeT, typename KindT>
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<const NodeT> n) : node_(std::move(n)) {}

  const NodeT* get() const { return node_.get(); }
  const NodeT* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  bool defined() const { return node_ != nullptr; }
  bool same_as(const Handle& o) const { return node_ == o.node_; }
  KindT kind() const { return node_->kind; }

  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  template <typename T>
  const T* to() const {
    const T* p = as<T>();
    KILN_CHECK(p != nullptr) << "IR node has kind " << static_cast<int>(node_->kind)
                             << ", expected " << static_cast<int>(T::kKind);
    return p;
  }
  const std::shared_ptr<const NodeT>& node() const { return node_; }

 private:
  std::shared_ptr<const NodeT> node_;
};

class Expr : public Handle<ExprNode, ExprKind> {
 public:
  using Handle::Handle;
  Expr(int64_t v);  // NOLINT: implicit int64 constant
  Expr(int v);      // NOLINT
  Expr(float v);    // NOLINT: float32 constant
  Expr(double v);   // NOLINT: float32 constant
  DataType dtype() const { return get()->dtype; }
};

class Stmt : public Handle<StmtNode, StmtKind> {
 public:
  using Handle::Handle;
};

// ---------------------------------------------------------------------------
// Variables and buffers

struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode(std::string n, DataType t) : ExprNode(kKind, t), name(std::move(n)) {}
  const std::string name;
};

class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DataType t = DataType::Int64());
  explicit Var(std::shared_ptr<const VarNode> n) : Expr(std::move(n)) {}
  const VarNode* operator->() const { return static_cast<const VarNode*>(get()); }
  const std::string& name() const { return (*this)->name; }
};

// A named, typed, dense row-major array. `data` is its pointer variable
// (handle type) in generated code.
struct BufferNode {
  std::string name;
  DataType dtype;
  std::vector<Expr> shape;
  Var data;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::string name, DataType dtype, std::vector<Expr> shape);
  const BufferNode* operator->() const { return node_.get(); }
  const BufferNode* get() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  bool same_as(const Buffer& o) const { return node_ == o.node_; }
  // Product of the shape; a constant when every dim is.
  Expr NumElements() const;

 private:
  std::shared_ptr<const BufferNode> node_;
};

// ---------------------------------------------------------------------------
// Expressions

struct IntImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode(DataType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  const int64_t value;
};

struct FloatImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode(DataType t, double v) : ExprNode(kKind, t), value(v) {}
  const double value;
};

// Arithmetic, comparison and logical binary nodes share one layout; `kind`
// tells them apart. Div on integers truncates toward zero; FloorDiv/FloorMod
// round toward minus infinity (index arithmetic uses these).
struct BinaryNode : ExprNode {
  BinaryNode(ExprKind k, DataType t, Expr x, Expr y)
      : ExprNode(k, t), a(std::move(x)), b(std::move(y)) {}
  const Expr a, b;
};

#define KILN_IR_BINARY(Name)                                                                     \
  struct Name##Node : BinaryNode {                                                               \
    static constexpr ExprKind kKind = ExprKind::k##Name;                                         \
    Name##Node(DataType t, Expr x, Expr y) : BinaryNode(kKind, t, std::move(x), std::move(y)) {} \
  };
KILN_IR_BINARY(Add)
KILN_IR_BINARY(Sub)
KILN_IR_BINARY(Mul)
KILN_IR_BINARY(Div)
KILN_IR_BINARY(Mod)
KILN_IR_BINARY(FloorDiv)
KILN_IR_BINARY(FloorMod)
KILN_IR_BINARY(Min)
KILN_IR_BINARY(Max)
KILN_IR_BINARY(EQ)
KILN_IR_BINARY(NE)
KILN_IR_BINARY(LT)
KILN_IR_BINARY(LE)
KILN_IR_BINARY(GT)
KILN_IR_BINARY(GE)
KILN_IR_BINARY(And)
KILN_IR_BINARY(Or)
#undef KILN_IR_BINARY

inline bool IsBinary(ExprKind k) { return k >= ExprKind::kAdd && k <= ExprKind::kOr; }

struct NotNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kNot;
  explicit NotNode(Expr x) : ExprNode(kKind, x.dtype()), a(std::move(x)) {}
  const Expr a;
};

struct SelectNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t.dtype()),
        cond(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  const Expr cond, true_value, false_value;
};

struct CastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode(DataType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

// A scalar replicated into `lanes` lanes.
struct BroadcastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBroadcast;
  BroadcastNode(Expr v, int n)
      : ExprNode(kKind, v.dtype().WithLanes(n)), value(std::move(v)), lanes(n) {}
  const Expr value;
  const int lanes;
};

// base, base + stride, ..., base + (lanes - 1) * stride.
struct RampNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kRamp;
  RampNode(Expr b, Expr s, int n)
      : ExprNode(kKind, b.dtype().WithLanes(n)),
        base(std::move(b)),
        stride(std::move(s)),
        lanes(n) {}
  const Expr base, stride;
  const int lanes;
};

struct BufferLoadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBufferLoad;
  BufferLoadNode(DataType t, Buffer b, std::vector<Expr> idx)
      : ExprNode(kKind, t), buffer(std::move(b)), indices(std::move(idx)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
};

// A call of an intrinsic (compiler/ir/intrinsic.h): exp, sqrt, shl, dot4,
// likely, ... (the code generators map each).
struct CallNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode(DataType t, Intrinsic f, std::vector<Expr> a)
      : ExprNode(kKind, t), op(f), args(std::move(a)) {}
  const Intrinsic op;
  const std::vector<Expr> args;
};

enum class ReduceKind : uint8_t { kSum, kMax, kMin, kProd };

// A reduction over `axes` (each a loop variable with a [min, min+extent)
// range) of `source`, starting from `init`. Appears only at the top of a
// compute definition's body; lowering turns it into init + update loops.
struct IterRange {
  Var var;
  Expr min;
  Expr extent;
};

struct ReduceNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kReduce;
  ReduceNode(ReduceKind k, Expr src, std::vector<IterRange> ax, Expr i)
      : ExprNode(kKind, src.dtype()),
        reduce_kind(k),
        source(std::move(src)),
        axes(std::move(ax)),
        init(std::move(i)) {}
  const ReduceKind reduce_kind;
  const Expr source;
  const std::vector<IterRange> axes;
  const Expr init;
};

struct LetNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLet;
  LetNode(Var v, Expr val, Expr b)
      : ExprNode(kKind, b.dtype()), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value, body;
};

// ---------------------------------------------------------------------------
// Statements

enum class ForKind : uint8_t {
  kSerial,
  kParallel,
  kVectorized,
  kUnrolled,
  // Run by a grid of GPU threads (te::Schedule::Bind): the loop variable is
  // the index of the running block (kBlock*) or of the thread in its block
  // (kThread*) along x, y or z. A CPU code generator runs them serially.
  kBlockX,
  kBlockY,
  kBlockZ,
  kThreadX,
  kThreadY,
  kThreadZ,
};
inline bool IsThreadBinding(ForKind k) { return k >= ForKind::kBlockX; }
// "blockIdx.x" ... "threadIdx.z" for a thread binding, "" otherwise.
const char* ThreadTag(ForKind k);

struct ForNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(Var v, Expr mn, Expr ext, ForKind k, Stmt b)
      : StmtNode(kKind),
        loop_var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        for_kind(k),
        body(std::move(b)) {}
  const Var loop_var;
  const Expr min, extent;
  const ForKind for_kind;
  const Stmt body;
};

struct BufferStoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kBufferStore;
  BufferStoreNode(Buffer b, Expr v, std::vector<Expr> idx)
      : StmtNode(kKind), buffer(std::move(b)), value(std::move(v)), indices(std::move(idx)) {}
  const Buffer buffer;
  const Expr value;
  const std::vector<Expr> indices;
};

struct SeqNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), seq(std::move(s)) {}
  const std::vector<Stmt> seq;
};

struct IfThenElseNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIfThenElse;
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  const Expr cond;
  const Stmt then_case;
  const Stmt else_case;  // may be undefined
};

// Scratch memory for `buffer` (constant shape) live within `body`.
// Where a scratch buffer lives: the running thread's own (registers or the
// stack: CPU scratch, a GPU thread's private array), or shared by the
// threads of one GPU block (CUDA __shared__, OpenCL __local), filled
// cooperatively between barriers.
enum class StorageScope { kLocal, kShared };

struct AllocateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(Buffer b, Stmt s, StorageScope sc)
      : StmtNode(kKind), buffer(std::move(b)), body(std::move(s)), scope(sc) {}
  const Buffer buffer;
  const Stmt body;
  const StorageScope scope;
};

struct LetStmtNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kLetStmt;
  LetStmtNode(Var v, Expr val, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value;
  const Stmt body;
};

struct EvaluateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  explicit EvaluateNode(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  const Expr value;
};

// A lowered kernel: its buffer parameters (KernelSignature order) and body.
struct PrimFunc {
  std::string name;
  std::vector<Buffer> params;
  Stmt body;
  // The code generator runs LLVM's SLP vectorizer on this kernel: its
  // template unrolls a register tile into scalar stores that only SLP
  // turns into vector stores (ops::Built::slp_vectorize).
  bool slp_vectorize = false;
  // Runs once per set of weights (a weight pack, ahead of the kernel's
  // calls): compiled for build speed, not run speed (LLVM's optnone: no
  // middle end, no loop strength reduction, fast instruction selection).
  bool run_once = false;
};

// ---------------------------------------------------------------------------
// Constructors. They type-check (KILN_CHECK) and fold nothing: folding is the
// simplifier's job (compiler/lower/simplify.h).

Expr IntImm(int64_t v, DataType t = DataType::Int64());
Expr FloatImm(double v, DataType t = DataType::Float32());
Expr MakeBinary(ExprKind kind, Expr a, Expr b);  // comparisons/logic give bool
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  // Div
Expr operator%(Expr a, Expr b);  // Mod
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr FloorDiv(Expr a, Expr b);
Expr FloorMod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Eq(Expr a, Expr b);
Expr Ne(Expr a, Expr b);
Expr Select(Expr cond, Expr t, Expr f);
Expr Cast(DataType t, Expr v);
Expr Broadcast(Expr v, int lanes);
Expr Ramp(Expr base, Expr stride, int lanes);
Expr Load(Buffer b, std::vector<Expr> indices);  // dtype: buffer's, lanes of a Ramp index
Expr Call(DataType t, Intrinsic op, std::vector<Expr> args);
Expr Reduce(ReduceKind kind, Expr source, std::vector<IterRange> axes, Expr init);
Expr Let(Var v, Expr value, Expr body);

Stmt For(Var v, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt Store(Buffer b, Expr value, std::vector<Expr> indices);
Stmt Seq(std::vector<Stmt> stmts);  // flattens nested Seqs; one element -> itself
Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt Allocate(Buffer b, Stmt body, StorageScope scope = StorageScope::kLocal);
// The barrier of a GPU block's threads (CUDA __syncthreads, OpenCL
// barrier(CLK_LOCAL_MEM_FENCE)): Evaluate of the intrinsic "kiln.barrier".
Stmt Barrier();
bool IsBarrier(const Stmt& s);
Stmt LetStmt(Var v, Expr value, Stmt body);
Stmt Evaluate(Expr v);
// The address of the element a scalar BufferLoad reads (a Handle): the
// intrinsic "kiln.address_of", for intrinsics that take memory (tensorized
// regions: the AMX tile loads). `footprint`: the extent per dimension of
// the box from that element that the intrinsic reads, for bound inference
// (a producer computed at a loop around it holds that box); empty: the
// element alone.
Expr AddressOf(Expr load, const std::vector<int64_t>& footprint = {});

// The value of an IntImm, else nullopt.
std::optional<int64_t> AsConstInt(const Expr& e);

}  // namespace kiln::ir

#include "compiler/ir/ir.h"

#include "base/str.h"

namespace kiln::ir {

namespace {
constexpr std::pair<ForKind, const char*> kThreadTags[] = {
    {ForKind::kBlockX, "blockIdx.x"},   {ForKind::kBlockY, "blockIdx.y"},
    {ForKind::kBlockZ, "blockIdx.z"},   {ForKind::kThreadX, "threadIdx.x"},
    {ForKind::kThreadY, "threadIdx.y"}, {ForKind::kThreadZ, "threadIdx.z"},
};
}  // namespace

const char* ThreadTag(ForKind k) {
  for (const auto& [kind, tag] : kThreadTags) {
    if (kind == k) return tag;
  }
  return "";
}

std::string ToString(DataType t) {
  std::string base;
  switch (t.code) {
    case TypeCode::kInt:
      base = StrCat("int", t.bits);
      break;
    case TypeCode::kUInt:
      base = StrCat("uint", t.bits);
      break;
    case TypeCode::kFloat:
      base = StrCat("float", t.bits);
      break;
    case TypeCode::kBool:
      base = "bool";
      break;
    case TypeCode::kHandle:
      base = "handle";
      break;
  }
  return t.lanes > 1 ? StrCat(base, "x", t.lanes) : base;
}

Expr::Expr(int64_t v) : Expr(IntImm(v)) {}
Expr::Expr(int v) : Expr(IntImm(v)) {}
Expr::Expr(float v) : Expr(FloatImm(v)) {}
Expr::Expr(double v) : Expr(FloatImm(v)) {}

Var::Var(std::string name, DataType t)
    : Expr(std::make_shared<const VarNode>(std::move(name), t)) {}

Buffer::Buffer(std::string name, DataType dtype, std::vector<Expr> shape) {
  auto n = std::make_shared<BufferNode>();
  n->data = Var(name, DataType::Handle());
  n->name = std::move(name);
  n->dtype = dtype;
  n->shape = std::move(shape);
  node_ = std::move(n);
}

Expr Buffer::NumElements() const {
  int64_t n = 1;
  Expr sym;
  for (const Expr& d : node_->shape) {
    if (auto c = AsConstInt(d)) {
      n *= *c;
    } else {
      sym = sym.defined() ? sym * d : d;
    }
  }
  return sym.defined() ? (n == 1 ? sym : IntImm(n) * sym) : IntImm(n);
}

Expr IntImm(int64_t v, DataType t) {
  KILN_CHECK(t.is_integer() || t.is_bool()) << "IntImm of type " << ToString(t);
  return Expr(std::make_shared<const IntImmNode>(t, v));
}

Expr FloatImm(double v, DataType t) {
  KILN_CHECK(t.is_float()) << "FloatImm of type " << ToString(t);
  return Expr(std::make_shared<const FloatImmNode>(t, v));
}

namespace {

template <typename NodeT>
Expr Bin(DataType t, Expr a, Expr b) {
  return Expr(std::make_shared<const NodeT>(t, std::move(a), std::move(b)));
}

}  // namespace

Expr MakeBinary(ExprKind kind, Expr a, Expr b) {
  KILN_CHECK(a.defined() && b.defined()) << "binary op on undefined expression";
  KILN_CHECK(a.dtype() == b.dtype())
      << "binary op on " << ToString(a.dtype()) << " and " << ToString(b.dtype());
  DataType t = a.dtype();
  DataType cmp = DataType::Bool().WithLanes(t.lanes);
  switch (kind) {
    case ExprKind::kAdd:
      return Bin<AddNode>(t, a, b);
    case ExprKind::kSub:
      return Bin<SubNode>(t, a, b);
    case ExprKind::kMul:
      return Bin<MulNode>(t, a, b);
    case ExprKind::kDiv:
      return Bin<DivNode>(t, a, b);
    case ExprKind::kMod:
      return Bin<ModNode>(t, a, b);
    case ExprKind::kFloorDiv:
      return Bin<FloorDivNode>(t, a, b);
    case ExprKind::kFloorMod:
      return Bin<FloorModNode>(t, a, b);
    case ExprKind::kMin:
      return Bin<MinNode>(t, a, b);
    case ExprKind::kMax:
      return Bin<MaxNode>(t, a, b);
    case ExprKind::kEQ:
      return Bin<EQNode>(cmp, a, b);
    case ExprKind::kNE:
      return Bin<NENode>(cmp, a, b);
    case ExprKind::kLT:
      return Bin<LTNode>(cmp, a, b);
    case ExprKind::kLE:
      return Bin<LENode>(cmp, a, b);
    case ExprKind::kGT:
      return Bin<GTNode>(cmp, a, b);
    case ExprKind::kGE:
      return Bin<GENode>(cmp, a, b);
    case ExprKind::kAnd:
      KILN_CHECK(t.is_bool()) << "And of " << ToString(t);
      return Bin<AndNode>(t, a, b);
    case ExprKind::kOr:
      KILN_CHECK(t.is_bool()) << "Or of " << ToString(t);
      return Bin<OrNode>(t, a, b);
    default:
      KILN_CHECK(false) << "not a binary kind " << static_cast<int>(kind);
  }
  return Expr();
}

Expr operator+(Expr a, Expr b) { return MakeBinary(ExprKind::kAdd, a, b); }
Expr operator-(Expr a, Expr b) { return MakeBinary(ExprKind::kSub, a, b); }
Expr operator*(Expr a, Expr b) { return MakeBinary(ExprKind::kMul, a, b); }
Expr operator/(Expr a, Expr b) { return MakeBinary(ExprKind::kDiv, a, b); }
Expr operator%(Expr a, Expr b) { return MakeBinary(ExprKind::kMod, a, b); }
Expr operator<(Expr a, Expr b) { return MakeBinary(ExprKind::kLT, a, b); }
Expr operator<=(Expr a, Expr b) { return MakeBinary(ExprKind::kLE, a, b); }
Expr operator>(Expr a, Expr b) { return MakeBinary(ExprKind::kGT, a, b); }
Expr operator>=(Expr a, Expr b) { return MakeBinary(ExprKind::kGE, a, b); }
Expr operator&&(Expr a, Expr b) { return MakeBinary(ExprKind::kAnd, a, b); }
Expr operator||(Expr a, Expr b) { return MakeBinary(ExprKind::kOr, a, b); }
Expr operator!(Expr a) {
  KILN_CHECK(a.dtype().is_bool()) << "Not of " << ToString(a.dtype());
  return Expr(std::make_shared<const NotNode>(std::move(a)));
}
Expr FloorDiv(Expr a, Expr b) { return MakeBinary(ExprKind::kFloorDiv, a, b); }
Expr FloorMod(Expr a, Expr b) { return MakeBinary(ExprKind::kFloorMod, a, b); }
Expr Min(Expr a, Expr b) { return MakeBinary(ExprKind::kMin, a, b); }
Expr Max(Expr a, Expr b) { return MakeBinary(ExprKind::kMax, a, b); }
Expr Eq(Expr a, Expr b) { return MakeBinary(ExprKind::kEQ, a, b); }
Expr Ne(Expr a, Expr b) { return MakeBinary(ExprKind::kNE, a, b); }

Expr Select(Expr cond, Expr t, Expr f) {
  KILN_CHECK(cond.dtype().is_bool()) << "Select condition of " << ToString(cond.dtype());
  KILN_CHECK(t.dtype() == f.dtype())
      << "Select arms " << ToString(t.dtype()) << " vs " << ToString(f.dtype());
  return Expr(std::make_shared<const SelectNode>(std::move(cond), std::move(t), std::move(f)));
}

Expr Cast(DataType t, Expr v) {
  if (v.dtype() == t) return v;
  return Expr(std::make_shared<const CastNode>(t, std::move(v)));
}

Expr Broadcast(Expr v, int lanes) {
  KILN_CHECK(!v.dtype().is_vector()) << "Broadcast of a vector";
  return Expr(std::make_shared<const BroadcastNode>(std::move(v), lanes));
}

Expr Ramp(Expr base, Expr stride, int lanes) {
  KILN_CHECK(base.dtype() == stride.dtype() && !base.dtype().is_vector()) << "bad Ramp operands";
  return Expr(std::make_shared<const RampNode>(std::move(base), std::move(stride), lanes));
}

Expr Load(Buffer b, std::vector<Expr> indices) {
  int lanes = 1;
  for (const Expr& i : indices) lanes = std::max(lanes, i.dtype().lanes);
  DataType t = b->dtype.WithLanes(lanes);
  return Expr(std::make_shared<const BufferLoadNode>(t, std::move(b), std::move(indices)));
}

Expr Call(DataType t, Intrinsic op, std::vector<Expr> args) {
  return Expr(std::make_shared<const CallNode>(t, op, std::move(args)));
}

Expr Reduce(ReduceKind kind, Expr source, std::vector<IterRange> axes, Expr init) {
  KILN_CHECK(source.dtype() == init.dtype()) << "Reduce init type differs from source";
  return Expr(std::make_shared<const ReduceNode>(kind, std::move(source), std::move(axes),
                                                 std::move(init)));
}

Expr Let(Var v, Expr value, Expr body) {
  return Expr(std::make_shared<const LetNode>(std::move(v), std::move(value), std::move(body)));
}

Stmt For(Var v, Expr min, Expr extent, ForKind kind, Stmt body) {
  return Stmt(std::make_shared<const ForNode>(std::move(v), std::move(min), std::move(extent), kind,
                                              std::move(body)));
}

Stmt Store(Buffer b, Expr value, std::vector<Expr> indices) {
  KILN_CHECK(value.dtype().Element() == b->dtype)
      << "Store of " << ToString(value.dtype()) << " into " << ToString(b->dtype) << " buffer "
      << b->name;
  return Stmt(
      std::make_shared<const BufferStoreNode>(std::move(b), std::move(value), std::move(indices)));
}

Stmt Seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const auto* seq = s.as<SeqNode>()) {
      flat.insert(flat.end(), seq->seq.begin(), seq->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<const SeqNode>(std::move(flat)));
}

Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case) {
  return Stmt(std::make_shared<const IfThenElseNode>(std::move(cond), std::move(then_case),
                                                     std::move(else_case)));
}

Stmt Allocate(Buffer b, Stmt body, StorageScope scope) {
  return Stmt(std::make_shared<const AllocateNode>(std::move(b), std::move(body), scope));
}

Stmt LetStmt(Var v, Expr value, Stmt body) {
  return Stmt(std::make_shared<const LetStmtNode>(std::move(v), std::move(value), std::move(body)));
}

Stmt Evaluate(Expr v) { return Stmt(std::make_shared<const EvaluateNode>(std::move(v))); }

Expr AddressOf(Expr load, const std::vector<int64_t>& footprint) {
  const auto* l = load.as<BufferLoadNode>();
  KILN_CHECK(l != nullptr && load.dtype().lanes == 1) << "address_of takes a scalar load";
  KILN_CHECK(footprint.empty() || footprint.size() == l->indices.size())
      << "address_of: a footprint of " << footprint.size() << " dimensions for a load of "
      << l->indices.size();
  std::vector<Expr> args = {std::move(load)};
  for (int64_t e : footprint) {
    KILN_CHECK(e >= 1) << "address_of: footprint extent " << e;
    args.push_back(IntImm(e));
  }
  return Call(DataType::Handle(), Intrinsic::kAddressOf, std::move(args));
}

Stmt Barrier() { return Evaluate(Call(DataType::Int32(), Intrinsic::kBarrier, {})); }

bool IsBarrier(const Stmt& s) {
  const auto* e = s.as<EvaluateNode>();
  const auto* c = e ? e->value.as<CallNode>() : nullptr;
  return c != nullptr && c->op == Intrinsic::kBarrier;
}

std::optional<int64_t> AsConstInt(const Expr& e) {
  if (const auto* i = e.as<IntImmNode>()) return i->value;
  return std::nullopt;
}

}  // namespace kiln::ir

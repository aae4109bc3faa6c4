#include "compiler/codegen/c_source.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "base/str.h"
#include "compiler/ir/functor.h"

namespace kiln::compiler::codegen {
namespace {

using namespace kiln::ir;  // NOLINT

constexpr const char* kLaneNames = "0123456789abcdef";

class Emitter {
 public:
  Emitter(SourceDialect dialect, const CSourceOptions& options)
      : dialect_(dialect), options_(options) {}

  absl::StatusOr<std::string> Run(const PrimFunc& func) {
    std::ostringstream params;
    const bool offsets = opencl() && options_.offset_params;
    for (size_t i = 0; i < func.params.size(); ++i) {
      const Buffer& b = func.params[i];
      auto type = ScalarType(b->dtype, /*in_memory=*/true);
      if (!type.ok()) return type.status();
      const std::string name = Bind(b->data.get(), b->name);
      if (offsets) {
        params << (i ? ", " : "") << "__global uchar* " << name << "_base, ulong " << name
               << "_off";
        Line(1, StrCat("__global ", *type, "* restrict ", name, " = (__global ", *type, "*)(", name,
                       "_base + ", name, "_off);"));
      } else {
        params << (i ? ", " : "") << Global() << *type << "* " << Restrict() << name;
      }
    }
    // Shared buffers are declared once at the kernel's top (OpenCL allows
    // __local variables nowhere else), however many copies of their
    // Allocate a partitioned loop has.
    struct Shared : StmtVisitor {
      std::vector<const AllocateNode*> found;
      std::set<const ExprNode*> seen;
      void VisitAllocate(const AllocateNode* op) override {
        if (op->scope == StorageScope::kShared && seen.insert(op->buffer->data.get()).second) {
          found.push_back(op);
        }
        StmtVisitor::VisitAllocate(op);
      }
    } shared;
    shared.VisitStmt(func.body);
    for (const AllocateNode* a : shared.found) {
      auto type = ScalarType(a->buffer->dtype, /*in_memory=*/true);
      if (!type.ok()) return type.status();
      auto n = AsConstElements(a->buffer);
      if (!n)
        return absl::UnimplementedError(
            StrCat("C source: shared ", a->buffer->name, " of a non-constant shape"));
      Line(1, StrCat(opencl() ? "__local " : "__shared__ ", *type, " ",
                     Bind(a->buffer->data.get(), a->buffer->name), "[", *n, "];"));
    }
    if (auto dims = LaunchDimsOf(func); dims.ok()) launch_ = *dims;
    Stmt(func.body, 1);
    if (!error_.ok()) return error_;
    std::ostringstream out;
    if (options_.prelude) out << Prelude();
    out << (opencl() ? "__kernel void " : "extern \"C\" __global__ void ") << func.name << "("
        << params.str() << ") {\n"
        << body_.str() << "}\n";
    return out.str();
  }

 private:
  bool opencl() const { return dialect_ == SourceDialect::kOpenCL; }
  const char* Global() const { return opencl() ? "__global " : ""; }
  const char* Restrict() const { return opencl() ? "restrict " : "__restrict__ "; }

  void Fail(std::string what) {
    if (error_.ok()) error_ = absl::UnimplementedError(StrCat("C source: ", what));
  }

  // Floor division and modulo (Python's, the IR's FloorDiv/FloorMod) of
  // scalars, as helpers; vectors inline the same formula.
 public:
  std::string Prelude() const {
    std::string p;
    if (opencl()) p += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    const char* q = opencl() ? "inline" : "__device__ inline";
    for (const char* t : {"long", "int"}) {
      p +=
          StrCat(q, " ", t, " kiln_floordiv_", t, "(", t, " a, ", t, " b) { ", t,
                 " q = a / b, r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q; }\n");
      p += StrCat(q, " ", t, " kiln_floormod_", t, "(", t, " a, ", t, " b) { ", t,
                  " r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n");
    }
    return p;
  }

 private:
  // A unique C identifier for a variable.
  std::string Bind(const ExprNode* var, const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
    std::string name = base;
    for (int n = 1; used_.count(name); ++n) name = StrCat(base, "_", n);
    used_.insert(name);
    names_[var] = name;
    return name;
  }
  std::string NameOf(const ExprNode* var) {
    auto it = names_.find(var);
    if (it == names_.end()) {
      Fail("a variable used outside its scope");
      return "0";
    }
    return it->second;
  }

  // The C type of one element ("float", "long", ...); bool is a byte in
  // memory and an int in registers.
  absl::StatusOr<std::string> ScalarType(DataType t, bool in_memory = false) const {
    switch (t.code) {
      case TypeCode::kFloat:
        if (t.bits == 32) return std::string("float");
        if (t.bits == 64) return std::string("double");
        if (t.bits == 16 && opencl()) return std::string("half");
        break;
      case TypeCode::kInt:
        if (t.bits == 8) return std::string(opencl() ? "char" : "signed char");
        if (t.bits == 16) return std::string("short");
        if (t.bits == 32) return std::string("int");
        if (t.bits == 64) return std::string(opencl() ? "long" : "long long");
        break;
      case TypeCode::kUInt:
        if (t.bits == 8) return std::string(opencl() ? "uchar" : "unsigned char");
        if (t.bits == 16) return std::string(opencl() ? "ushort" : "unsigned short");
        if (t.bits == 32) return std::string(opencl() ? "uint" : "unsigned int");
        if (t.bits == 64) return std::string(opencl() ? "ulong" : "unsigned long long");
        break;
      case TypeCode::kBool:
        return std::string(in_memory ? (opencl() ? "uchar" : "unsigned char") : "int");
      default:
        break;
    }
    return absl::UnimplementedError(StrCat("C source: element type ", ToString(t)));
  }
  // The type of a value (vectors: OpenCL's floatN; a bool vector is the
  // integer vector a comparison gives, int lanes).
  std::string Type(DataType t) {
    auto s = ScalarType(t.Element());
    if (!s.ok()) {
      Fail(std::string(s.status().message()));
      return "int";
    }
    if (t.lanes == 1) return *s;
    if (!opencl()) {
      Fail(StrCat("vector type ", ToString(t), " in CUDA C (vectors are scalarized later)"));
      return *s;
    }
    if (t.lanes != 2 && t.lanes != 3 && t.lanes != 4 && t.lanes != 8 && t.lanes != 16) {
      Fail(StrCat("vector of ", t.lanes, " lanes"));
    }
    return StrCat(*s, t.lanes);
  }
  // The signed integer vector OpenCL's select() wants beside values of `t`.
  std::string MaskType(DataType t) {
    const int bits = t.code == TypeCode::kBool ? 32 : t.bits;
    const char* s = bits == 8 ? "char" : bits == 16 ? "short" : bits == 64 ? "long" : "int";
    return StrCat(s, t.lanes);
  }

  // A buffer's element count when every dimension is a positive constant.
  static std::optional<int64_t> AsConstElements(const Buffer& b) {
    int64_t elements = 1;
    for (const auto& d : b->shape) {
      const auto* imm = d.as<IntImmNode>();
      if (imm == nullptr || imm->value <= 0) return std::nullopt;
      elements *= imm->value;
    }
    return elements;
  }

  std::string Lane(const std::string& vec, int i) { return StrCat("(", vec, ").s", kLaneNames[i]); }

  // ------------------------------------------------------------ expressions

  std::string Expr(const ir::Expr& e) {
    const DataType t = e.dtype();
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        const int64_t v = e.as<IntImmNode>()->value;
        if (t.is_bool()) return v ? "1" : "0";
        if (t.bits == 64) return StrCat("((", Type(t), ")", v, "L)");
        return StrCat("((", Type(t), ")", v, ")");
      }
      case ExprKind::kFloatImm: {
        const double v = e.as<FloatImmNode>()->value;
        if ((std::isnan(v) || std::isinf(v)) && !opencl()) {
          // NVRTC has no math.h macros: the bits of the value.
          const char* sign = std::isinf(v) && v < 0 ? "-" : "";
          if (t.bits == 64) {
            return StrCat("(", sign, "__longlong_as_double(",
                          std::isnan(v) ? "0x7ff8000000000000LL" : "0x7ff0000000000000LL", "))");
          }
          return StrCat("((", Type(t), ")", sign, "__int_as_float(",
                        std::isnan(v) ? "0x7fc00000" : "0x7f800000", "))");
        }
        if (std::isnan(v)) return StrCat("((", Type(t), ")NAN)");
        if (std::isinf(v)) return StrCat("((", Type(t), ")", v < 0 ? "-" : "", "INFINITY)");
        char buf[40];
        std::snprintf(buf, sizeof(buf), "%.17g", v);
        std::string text = buf;
        if (text.find_first_of(".eE") == std::string::npos) text += ".0";
        return t.bits == 32 ? StrCat(text, "f") : StrCat("((", Type(t), ")", text, ")");
      }
      case ExprKind::kVar:
        return NameOf(e.get());
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul:
      case ExprKind::kDiv:
      case ExprKind::kMod:
      case ExprKind::kEQ:
      case ExprKind::kNE:
      case ExprKind::kLT:
      case ExprKind::kLE:
      case ExprKind::kGT:
      case ExprKind::kGE:
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        static const std::map<ExprKind, const char*> kOps = {
            {ExprKind::kAdd, "+"}, {ExprKind::kSub, "-"}, {ExprKind::kMul, "*"},
            {ExprKind::kDiv, "/"}, {ExprKind::kMod, "%"}, {ExprKind::kEQ, "=="},
            {ExprKind::kNE, "!="}, {ExprKind::kLT, "<"},  {ExprKind::kLE, "<="},
            {ExprKind::kGT, ">"},  {ExprKind::kGE, ">="}, {ExprKind::kAnd, "&&"},
            {ExprKind::kOr, "||"}};
        const auto* n = static_cast<const BinaryNode*>(e.get());
        if (e.kind() == ExprKind::kMod && n->a.dtype().is_float()) {
          return StrCat("fmod(", Expr(n->a), ", ", Expr(n->b), ")");
        }
        return StrCat("(", Expr(n->a), " ", kOps.at(e.kind()), " ", Expr(n->b), ")");
      }
      case ExprKind::kMin:
      case ExprKind::kMax: {
        const auto* n = static_cast<const BinaryNode*>(e.get());
        const bool is_min = e.kind() == ExprKind::kMin;
        if (opencl()) {
          const char* f = t.is_float() ? (is_min ? "fmin" : "fmax") : (is_min ? "min" : "max");
          return StrCat(f, "(", Expr(n->a), ", ", Expr(n->b), ")");
        }
        const std::string a = Expr(n->a), b = Expr(n->b);
        return StrCat("((", a, ") ", is_min ? "<" : ">", " (", b, ") ? (", a, ") : (", b, "))");
      }
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod: {
        const auto* n = static_cast<const BinaryNode*>(e.get());
        const bool div = e.kind() == ExprKind::kFloorDiv;
        if (t.is_float()) {
          const std::string a = Expr(n->a), b = Expr(n->b);
          return div ? StrCat("floor((", a, ") / (", b, "))")
                     : StrCat("((", a, ") - floor((", a, ") / (", b, ")) * (", b, "))");
        }
        if (t.lanes == 1 && t.is_int() && (t.bits == 64 || t.bits == 32)) {
          return StrCat("kiln_floor", div ? "div" : "mod", "_", t.bits == 64 ? "long" : "int", "(",
                        Expr(n->a), ", ", Expr(n->b), ")");
        }
        if (t.is_uint()) {
          return StrCat("(", Expr(n->a), div ? " / " : " % ", Expr(n->b), ")");
        }
        Fail(StrCat("floor ", div ? "division" : "modulo", " of ", ToString(t)));
        return "0";
      }
      case ExprKind::kNot:
        return StrCat("(!", Expr(e.as<NotNode>()->a), ")");
      case ExprKind::kSelect: {
        const auto* n = e.as<SelectNode>();
        if (t.lanes == 1) {
          return StrCat("((", Expr(n->cond), ") ? (", Expr(n->true_value), ") : (",
                        Expr(n->false_value), "))");
        }
        return StrCat("select(", Expr(n->false_value), ", ", Expr(n->true_value), ", convert_",
                      MaskType(t), "(", Expr(n->cond), "))");
      }
      case ExprKind::kCast: {
        const auto* n = e.as<CastNode>();
        const DataType from = n->value.dtype();
        if (t.is_bool()) return StrCat("((", Expr(n->value), ") != 0)");
        if (t.lanes == 1) return StrCat("((", Type(t), ")(", Expr(n->value), "))");
        // A bool vector holds -1 for true: a cast gives 1.
        if (from.is_bool()) return StrCat("(-convert_", Type(t), "(", Expr(n->value), "))");
        return StrCat("convert_", Type(t), "(", Expr(n->value), ")");
      }
      case ExprKind::kBroadcast: {
        const auto* n = e.as<BroadcastNode>();
        return StrCat("((", Type(t), ")(", Expr(n->value), "))");
      }
      case ExprKind::kRamp: {
        const auto* n = e.as<RampNode>();
        const std::string base = Expr(n->base), stride = Expr(n->stride);
        std::string out = StrCat("((", Type(t), ")(");
        for (int i = 0; i < n->lanes; ++i) {
          out += StrCat(i ? ", " : "", "(", base, ") + ", i, " * (", stride, ")");
        }
        return out + "))";
      }
      case ExprKind::kBufferLoad:
        return Load(*e.as<BufferLoadNode>());
      case ExprKind::kCall:
        return Call(*e.as<CallNode>());
      case ExprKind::kReduce:
        Fail("a Reduce left after lowering");
        return "0";
      case ExprKind::kLet:
        Fail("a Let expression");
        return "0";
    }
    Fail("an unknown expression");
    return "0";
  }

  // A stride-1 Ramp index: its base, for vloadN/vstoreN.
  static const RampNode* ContiguousRamp(const std::vector<ir::Expr>& indices) {
    if (indices.size() != 1) return nullptr;
    const auto* ramp = indices[0].as<RampNode>();
    if (ramp == nullptr) return nullptr;
    const auto* stride = ramp->stride.as<IntImmNode>();
    return stride != nullptr && stride->value == 1 ? ramp : nullptr;
  }

  std::string Load(const BufferLoadNode& n) {
    if (n.indices.size() != 1) {
      Fail(StrCat("a load of ", n.buffer->name, " with ", n.indices.size(),
                  " indices (flatten first)"));
      return "0";
    }
    const std::string ptr = NameOf(n.buffer->data.get());
    const DataType t = n.dtype;
    const bool byte_bool = n.buffer->dtype.is_bool();
    if (t.lanes == 1) {
      std::string v = StrCat(ptr, "[", Expr(n.indices[0]), "]");
      return byte_bool ? StrCat("(", v, " != 0)") : v;
    }
    if (byte_bool) {
      Fail("a vector load of bools");
      return "0";
    }
    if (const RampNode* ramp = ContiguousRamp(n.indices)) {
      return StrCat("vload", t.lanes, "(0, ", ptr, " + ", Expr(ramp->base), ")");
    }
    // A gather: one element per lane (the index re-evaluated per lane).
    const std::string index = Expr(n.indices[0]);
    std::string out = StrCat("((", Type(t), ")(");
    for (int i = 0; i < t.lanes; ++i) out += StrCat(i ? ", " : "", ptr, "[", Lane(index, i), "]");
    return out + "))";
  }

  std::string Call(const CallNode& n) {
    using I = Intrinsic;
    const I f = n.op;
    const std::string name(kiln::NameOf(f));
    std::vector<std::string> args;
    for (const auto& a : n.args) args.push_back(Expr(a));
    auto call = [&](const std::string& fn) {
      std::string out = fn + "(";
      for (size_t i = 0; i < args.size(); ++i) out += StrCat(i ? ", " : "", args[i]);
      return out + ")";
    };
    if (f == I::kLikely && args.size() == 1) return args[0];
    const DataType t = n.dtype;
    if (f == I::kSigmoid && args.size() == 1) {
      return StrCat("((", Type(t), ")1 / ((", Type(t), ")1 + exp(-(", args[0], "))))");
    }
    if (f == I::kIsNan) return call(name);
    if (f == I::kRoundEven) return call("rint");
    // The C library's functions of the same names.
    static const std::set<I> kMath = {
        I::kExp, I::kLog,  I::kSqrt, I::kFabs,  I::kFloor, I::kCeil, I::kTrunc, I::kSin,
        I::kCos, I::kTan,  I::kAsin, I::kAcos,  I::kAtan,  I::kSinh, I::kCosh,  I::kTanh,
        I::kPow, I::kFmod, I::kErf,  I::kAsinh, I::kAcosh, I::kAtanh};
    if (t.is_float() && kMath.count(f)) {
      // CUDA C: the float versions carry an f (expf); OpenCL's are overloaded.
      return call(!opencl() && t.bits == 32 ? name + "f" : name);
    }
    static const std::map<I, const char*> kBits = {
        {I::kBitAnd, "&"}, {I::kBitOr, "|"}, {I::kBitXor, "^"}, {I::kShl, "<<"}, {I::kShr, ">>"}};
    if (auto it = kBits.find(f); it != kBits.end() && args.size() == 2) {
      return StrCat("(", args[0], " ", it->second, " ", args[1], ")");
    }
    if (f == I::kBitNot && args.size() == 1) return StrCat("(~", args[0], ")");
    Fail(StrCat("intrinsic '", name, "' of ", ToString(t)));
    return "0";
  }

  // ------------------------------------------------------------- statements

  // The running thread's index for a binding, in the dialect's words.
  std::string ThreadIndex(ForKind k) const {
    const std::string tag = ThreadTag(k);  // "blockIdx.x"
    const char axis = tag.back();
    const bool block = tag.rfind("block", 0) == 0;
    if (!opencl()) return tag;
    return StrCat(block ? "get_group_id(" : "get_local_id(", axis - 'x', ")");
  }

  void Line(int depth, const std::string& text) {
    body_ << std::string(2 * static_cast<size_t>(depth), ' ') << text << "\n";
  }

  void Stmt(const ir::Stmt& s, int depth) {
    if (!s.defined() || !error_.ok()) return;
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.as<ForNode>();
        if (IsThreadBinding(n->for_kind)) {
          // One iteration per thread: the loop variable is the thread's
          // index (the launch covers the largest extent bound to it).
          const std::string var = Bind(n->loop_var.get(), n->loop_var->name);
          const std::string type = Type(n->loop_var.dtype());
          const std::string min = Expr(n->min), extent = Expr(n->extent);
          Line(depth, "{");
          Line(depth + 1, StrCat("const ", type, " ", var, " = ", min, " + (", type, ")",
                                 ThreadIndex(n->for_kind), ";"));
          // Unguarded where the launch has exactly this many threads (or
          // blocks) along the index: every thread takes part, so barriers
          // inside stay in uniform control flow.
          const std::string tag = ThreadTag(n->for_kind);
          const int64_t* launched = tag.rfind("block", 0) == 0 ? launch_.grid : launch_.block;
          const auto* imm_min = n->min.as<IntImmNode>();
          const auto* imm_extent = n->extent.as<IntImmNode>();
          if (imm_min && imm_min->value == 0 && imm_extent &&
              imm_extent->value == launched[tag.back() - 'x']) {
            Stmt(n->body, depth + 1);
            Line(depth, "}");
            return;
          }
          Line(depth + 1, StrCat("if (", var, " < (", min, ") + (", extent, ")) {"));
          Stmt(n->body, depth + 2);
          Line(depth + 1, "}");
          Line(depth, "}");
          return;
        }
        const std::string var = Bind(n->loop_var.get(), n->loop_var->name);
        const std::string type = Type(n->loop_var.dtype());
        const std::string min = Expr(n->min), extent = Expr(n->extent);
        Line(depth, StrCat("for (", type, " ", var, " = ", min, "; ", var, " < (", min, ") + (",
                           extent, "); ++", var, ") {"));
        Stmt(n->body, depth + 1);
        Line(depth, "}");
        return;
      }
      case StmtKind::kBufferStore: {
        const auto* n = s.as<BufferStoreNode>();
        Store(*n, depth);
        return;
      }
      case StmtKind::kSeq:
        for (const auto& child : s.as<SeqNode>()->seq) Stmt(child, depth);
        return;
      case StmtKind::kIfThenElse: {
        const auto* n = s.as<IfThenElseNode>();
        Line(depth, StrCat("if (", Expr(n->cond), ") {"));
        Stmt(n->then_case, depth + 1);
        if (n->else_case.defined()) {
          Line(depth, "} else {");
          Stmt(n->else_case, depth + 1);
        }
        Line(depth, "}");
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.as<AllocateNode>();
        if (n->scope == StorageScope::kShared) {  // declared at the top
          Stmt(n->body, depth);
          return;
        }
        auto count = AsConstElements(n->buffer);
        if (!count) {
          Fail(StrCat("scratch ", n->buffer->name, " of a non-constant shape"));
          return;
        }
        const int64_t elements = *count;
        auto type = ScalarType(n->buffer->dtype, /*in_memory=*/true);
        if (!type.ok()) {
          Fail(std::string(type.status().message()));
          return;
        }
        Line(depth, "{");
        const std::string name = Bind(n->buffer->data.get(), n->buffer->name);
        Line(depth + 1, StrCat(*type, " ", name, "[", elements, "];"));
        Stmt(n->body, depth + 1);
        Line(depth, "}");
        return;
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.as<LetStmtNode>();
        Line(depth, "{");
        const std::string value = Expr(n->value);
        const std::string name = Bind(n->var.get(), n->var->name);
        Line(depth + 1, StrCat("const ", Type(n->var.dtype()), " ", name, " = ", value, ";"));
        Stmt(n->body, depth + 1);
        Line(depth, "}");
        return;
      }
      case StmtKind::kEvaluate:
        if (IsBarrier(s)) {
          Line(depth, opencl() ? "barrier(CLK_LOCAL_MEM_FENCE);" : "__syncthreads();");
          return;
        }
        Line(depth, StrCat("(void)(", Expr(s.as<EvaluateNode>()->value), ");"));
        return;
    }
    Fail("an unknown statement");
  }

  void Store(const BufferStoreNode& n, int depth) {
    if (n.indices.size() != 1) {
      Fail(StrCat("a store to ", n.buffer->name, " with ", n.indices.size(), " indices"));
      return;
    }
    const std::string ptr = NameOf(n.buffer->data.get());
    const DataType t = n.value.dtype();
    const std::string value = Expr(n.value);
    if (t.lanes == 1) {
      const std::string v = n.buffer->dtype.is_bool() ? StrCat("(", value, " != 0)") : value;
      Line(depth, StrCat(ptr, "[", Expr(n.indices[0]), "] = ", v, ";"));
      return;
    }
    if (const RampNode* ramp = ContiguousRamp(n.indices)) {
      Line(depth,
           StrCat("vstore", t.lanes, "(", value, ", 0, ", ptr, " + ", Expr(ramp->base), ");"));
      return;
    }
    // A scatter, lane by lane.
    Line(depth, "{");
    Line(depth + 1, StrCat("const ", Type(t), " kiln_v = ", value, ";"));
    Line(depth + 1,
         StrCat("const ", Type(n.indices[0].dtype()), " kiln_i = ", Expr(n.indices[0]), ";"));
    for (int i = 0; i < t.lanes; ++i) {
      Line(depth + 1, StrCat(ptr, "[kiln_i.s", kLaneNames[i], "] = kiln_v.s", kLaneNames[i], ";"));
    }
    Line(depth, "}");
  }

  SourceDialect dialect_;
  CSourceOptions options_;
  LaunchDims launch_;
  absl::Status error_;
  std::ostringstream body_;
  std::map<const ExprNode*, std::string> names_;  // variables (VarNode)
  std::set<std::string> used_;
};

}  // namespace

absl::StatusOr<LaunchDims> LaunchDimsOf(const ir::PrimFunc& func) {
  LaunchDims dims;
  absl::Status status;
  struct V : StmtVisitor {
    LaunchDims* dims;
    absl::Status* status;
    std::set<const ExprNode*> shared;  // counted once, however many copies
    void VisitAllocate(const AllocateNode* op) override {
      if (op->scope == StorageScope::kShared && shared.insert(op->buffer->data.get()).second) {
        int64_t n = op->buffer->dtype.bytes();
        for (const auto& d : op->buffer->shape) {
          const auto* imm = d.as<IntImmNode>();
          n *= imm ? imm->value : 0;
        }
        dims->shared_bytes += n;
      }
      StmtVisitor::VisitAllocate(op);
    }
    void VisitFor(const ForNode* op) override {
      if (IsThreadBinding(op->for_kind)) {
        const auto* extent = op->extent.as<IntImmNode>();
        const std::string tag = ThreadTag(op->for_kind);
        if (extent == nullptr) {
          if (status->ok()) {
            *status = absl::InvalidArgumentError(
                StrCat("loop ", op->loop_var->name, " bound to ", tag, " has no constant extent"));
          }
        } else {
          int64_t* d = tag.rfind("block", 0) == 0 ? dims->grid : dims->block;
          d[tag.back() - 'x'] = std::max(d[tag.back() - 'x'], extent->value);
        }
      }
      StmtVisitor::VisitFor(op);
    }
  } v;
  v.dims = &dims;
  v.status = &status;
  v.VisitStmt(func.body);
  if (!status.ok()) return status;
  return dims;
}

absl::StatusOr<std::string> EmitCSource(const ir::PrimFunc& func, SourceDialect dialect,
                                        const CSourceOptions& options) {
  return Emitter(dialect, options).Run(func);
}

std::string CSourcePrelude(SourceDialect dialect) { return Emitter(dialect, {}).Prelude(); }

}  // namespace kiln::compiler::codegen

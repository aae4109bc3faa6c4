#include "compiler/ir/printer.h"

#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/str.h"

namespace kiln::ir {
namespace {

// Binding strength: lower binds tighter.
int Precedence(ExprKind k) {
  switch (k) {
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kMod:
      return 2;
    case ExprKind::kAdd:
    case ExprKind::kSub:
      return 3;
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return 4;
    case ExprKind::kAnd:
      return 5;
    case ExprKind::kOr:
      return 6;
    default:
      return 0;  // atoms and call-like forms
  }
}

const char* InfixOp(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd:
      return " + ";
    case ExprKind::kSub:
      return " - ";
    case ExprKind::kMul:
      return "*";
    case ExprKind::kDiv:
      return "/";
    case ExprKind::kMod:
      return "%";
    case ExprKind::kEQ:
      return " == ";
    case ExprKind::kNE:
      return " != ";
    case ExprKind::kLT:
      return " < ";
    case ExprKind::kLE:
      return " <= ";
    case ExprKind::kGT:
      return " > ";
    case ExprKind::kGE:
      return " >= ";
    case ExprKind::kAnd:
      return " && ";
    case ExprKind::kOr:
      return " || ";
    default:
      return nullptr;
  }
}

const char* CallLikeOp(ExprKind k) {
  switch (k) {
    case ExprKind::kFloorDiv:
      return "floordiv";
    case ExprKind::kFloorMod:
      return "floormod";
    case ExprKind::kMin:
      return "min";
    case ExprKind::kMax:
      return "max";
    default:
      return nullptr;
  }
}

std::string FloatText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

class Printer {
 public:
  std::string out;

  void PrintExpr(const Expr& e) {
    if (!e.defined()) {
      out += "<undefined>";
      return;
    }
    if (IsBinary(e.kind())) return PrintBinary(static_cast<const BinaryNode*>(e.get()));
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        const auto* n = e.to<IntImmNode>();
        if (n->dtype == DataType::Int64()) {
          out += StrCat(n->value);
        } else if (n->dtype.is_bool()) {
          out += n->value ? "true" : "false";
        } else {
          out += StrCat(ToString(n->dtype), "(", n->value, ")");
        }
        return;
      }
      case ExprKind::kFloatImm: {
        const auto* n = e.to<FloatImmNode>();
        if (n->dtype == DataType::Float32()) {
          out += FloatText(n->value) + "f";
        } else {
          out += StrCat(ToString(n->dtype), "(", FloatText(n->value), ")");
        }
        return;
      }
      case ExprKind::kVar:
        out += VarName(e.to<VarNode>());
        return;
      case ExprKind::kNot:
        out += "!";
        PrintOperand(e.to<NotNode>()->a, 1);
        return;
      case ExprKind::kSelect: {
        const auto* n = e.to<SelectNode>();
        PrintCall("select", {n->cond, n->true_value, n->false_value});
        return;
      }
      case ExprKind::kCast: {
        const auto* n = e.to<CastNode>();
        PrintCall(ToString(n->dtype), {n->value});
        return;
      }
      case ExprKind::kBroadcast: {
        const auto* n = e.to<BroadcastNode>();
        out += "broadcast(";
        PrintExpr(n->value);
        out += StrCat(", ", n->lanes, ")");
        return;
      }
      case ExprKind::kRamp: {
        const auto* n = e.to<RampNode>();
        out += "ramp(";
        PrintExpr(n->base);
        out += ", ";
        PrintExpr(n->stride);
        out += StrCat(", ", n->lanes, ")");
        return;
      }
      case ExprKind::kBufferLoad: {
        const auto* n = e.to<BufferLoadNode>();
        out += BufferName(n->buffer.get());
        PrintIndices(n->indices);
        return;
      }
      case ExprKind::kCall: {
        const auto* n = e.to<CallNode>();
        PrintCall(std::string(NameOf(n->op)), n->args);
        return;
      }
      case ExprKind::kReduce: {
        const auto* n = e.to<ReduceNode>();
        out += n->reduce_kind == ReduceKind::kSum    ? "sum("
               : n->reduce_kind == ReduceKind::kProd ? "prod("
               : n->reduce_kind == ReduceKind::kMax  ? "max("
                                                     : "min(";
        PrintExpr(n->source);
        out += ", axis=[";
        for (size_t i = 0; i < n->axes.size(); ++i) {
          if (i) out += ", ";
          out += VarName(n->axes[i].var.operator->()) + " in [";
          PrintExpr(n->axes[i].min);
          out += ", +";
          PrintExpr(n->axes[i].extent);
          out += ")";
        }
        out += "], init=";
        PrintExpr(n->init);
        out += ")";
        return;
      }
      case ExprKind::kLet: {
        const auto* n = e.to<LetNode>();
        out += "(let " + VarName(n->var.operator->()) + " = ";
        PrintExpr(n->value);
        out += " in ";
        PrintExpr(n->body);
        out += ")";
        return;
      }
      default:
        KILN_CHECK(false) << "unknown expression kind " << static_cast<int>(e.kind());
    }
  }

  void PrintStmt(const Stmt& s, int indent) {
    std::string pad(2 * indent, ' ');
    if (!s.defined()) {
      out += pad + "<undefined>\n";
      return;
    }
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.to<ForNode>();
        out += pad + "for (" + VarName(n->loop_var.operator->()) + ", ";
        PrintExpr(n->min);
        out += ", ";
        PrintExpr(n->extent);
        out += ")";
        switch (n->for_kind) {
          case ForKind::kSerial:
            break;
          case ForKind::kParallel:
            out += " parallel";
            break;
          case ForKind::kVectorized:
            out += " vectorized";
            break;
          case ForKind::kUnrolled:
            out += " unrolled";
            break;
          default:
            out += StrCat(" bind(", ThreadTag(n->for_kind), ")");
            break;
        }
        out += " {\n";
        PrintStmt(n->body, indent + 1);
        out += pad + "}\n";
        return;
      }
      case StmtKind::kBufferStore: {
        const auto* n = s.to<BufferStoreNode>();
        out += pad + BufferName(n->buffer.get());
        PrintIndices(n->indices);
        out += " = ";
        PrintExpr(n->value);
        out += "\n";
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& c : s.to<SeqNode>()->seq) PrintStmt(c, indent);
        return;
      case StmtKind::kIfThenElse: {
        const auto* n = s.to<IfThenElseNode>();
        out += pad + "if (";
        PrintExpr(n->cond);
        out += ") {\n";
        PrintStmt(n->then_case, indent + 1);
        if (n->else_case.defined()) {
          out += pad + "} else {\n";
          PrintStmt(n->else_case, indent + 1);
        }
        out += pad + "}\n";
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.to<AllocateNode>();
        out += pad + "allocate " + BufferName(n->buffer.get()) + ": " + BufferType(n->buffer) +
               (n->scope == StorageScope::kShared ? " shared" : "") + " {\n";
        PrintStmt(n->body, indent + 1);
        out += pad + "}\n";
        return;
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.to<LetStmtNode>();
        out += pad + "let " + VarName(n->var.operator->()) + " = ";
        PrintExpr(n->value);
        out += "\n";
        PrintStmt(n->body, indent);
        return;
      }
      case StmtKind::kEvaluate:
        out += pad + "evaluate(";
        PrintExpr(s.to<EvaluateNode>()->value);
        out += ")\n";
        return;
    }
  }

  void PrintFunc(const PrimFunc& f) {
    out += "func " + f.name + "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (i) out += ", ";
      out += BufferName(f.params[i].get()) + ": " + BufferType(f.params[i]);
    }
    out += ") {\n";
    PrintStmt(f.body, 1);
    out += "}\n";
  }

 private:
  std::string BufferType(const Buffer& b) {
    std::string s = ToString(b->dtype) + "[";
    for (size_t i = 0; i < b->shape.size(); ++i) {
      if (i) s += ", ";
      std::string saved = std::move(out);
      out.clear();
      PrintExpr(b->shape[i]);
      s += out;
      out = std::move(saved);
    }
    return s + "]";
  }

  void PrintBinary(const BinaryNode* n) {
    if (const char* name = CallLikeOp(n->kind)) {
      PrintCall(name, {n->a, n->b});
      return;
    }
    int p = Precedence(n->kind);
    PrintOperand(n->a, p);
    out += InfixOp(n->kind);
    // The right operand needs parentheses at equal precedence: a - (b - c),
    // a/(b*c), and also a + (b + c) (float addition does not associate).
    PrintOperand(n->b, p - 1);
  }

  // Prints `e`, parenthesised when it binds looser than `max_prec` allows.
  void PrintOperand(const Expr& e, int max_prec) {
    int p = e.defined() ? Precedence(e.kind()) : 0;
    if (p > max_prec) {
      out += "(";
      PrintExpr(e);
      out += ")";
    } else {
      PrintExpr(e);
    }
  }

  void PrintCall(const std::string& name, const std::vector<Expr>& args) {
    out += name + "(";
    for (size_t i = 0; i < args.size(); ++i) {
      if (i) out += ", ";
      PrintExpr(args[i]);
    }
    out += ")";
  }

  void PrintIndices(const std::vector<Expr>& idx) {
    out += "[";
    for (size_t i = 0; i < idx.size(); ++i) {
      if (i) out += ", ";
      PrintExpr(idx[i]);
    }
    out += "]";
  }

  std::string Unique(const void* key, const std::string& base) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string name = base.empty() ? "v" : base;
    for (int k = 1; used_.count(name); ++k) name = StrCat(base, "_", k);
    used_.insert(name);
    names_[key] = name;
    return name;
  }
  std::string VarName(const VarNode* v) { return Unique(v, v->name); }
  std::string BufferName(const BufferNode* b) { return Unique(b, b->name); }

  std::unordered_map<const void*, std::string> names_;
  std::unordered_set<std::string> used_;
};

}  // namespace

std::string ToText(const Expr& e) {
  Printer p;
  p.PrintExpr(e);
  return p.out;
}

std::string ToText(const Stmt& s) {
  Printer p;
  p.PrintStmt(s, 0);
  return p.out;
}

std::string ToText(const PrimFunc& f) {
  Printer p;
  p.PrintFunc(f);
  return p.out;
}

std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << ToText(e); }
std::ostream& operator<<(std::ostream& os, const Stmt& s) { return os << ToText(s); }
std::ostream& operator<<(std::ostream& os, const PrimFunc& f) { return os << ToText(f); }

}  // namespace kiln::ir

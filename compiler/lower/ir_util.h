#pragma once
// Small helpers shared by the lowering passes (not a pass): substitution,
// linear forms of integer index expressions and their interval bounds.

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/ir/functor.h"
#include "compiler/ir/ir.h"

namespace kiln::lower {

using ir::Substitute;
using ir::VarMap;  // and ir::Substitute (ir/functor.h)
// Inclusive integer ranges of loop variables.
using RangeMap = std::unordered_map<const ir::VarNode*, std::pair<int64_t, int64_t>>;

// Integer division and remainder rounding toward minus infinity (b != 0).
int64_t FloorDivInt(int64_t a, int64_t b);
int64_t FloorModInt(int64_t a, int64_t b);

// The canonical value of an integer constant of type `t` (its element type):
// `v` wrapped to t.bits in two's complement, sign-extended for signed types,
// zero-extended for unsigned ones (a uint64 keeps its bit pattern in the
// int64), 0 or 1 for bool. Folding and code generation agree on it.
int64_t WrapInt(int64_t v, ir::DataType t);

// sum(coeff_i * term_i) + constant over scalar int64 expressions. Terms are
// compared by node identity (variables) after simplification.
struct LinearForm {
  std::vector<std::pair<ir::Expr, int64_t>> terms;
  int64_t constant = 0;
  void AddTerm(const ir::Expr& t, int64_t coeff);
  int64_t CoeffOf(const ir::VarNode* v) const;
};
LinearForm ToLinear(const ir::Expr& e);
ir::Expr FromLinear(const LinearForm& f, ir::DataType t);

// Inclusive [lo, hi] of an int expression when every variable in it has a
// range in `ranges`; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> ConstBounds(const ir::Expr& e, const RangeMap& ranges);
std::optional<std::pair<int64_t, int64_t>> ConstBounds(const LinearForm& f, const RangeMap& ranges);

// Symbolic inclusive bounds: variables in `ranges` vary over their range,
// every other variable is fixed. Works for linear forms (plus floormod terms);
// nullopt when it cannot tell.
std::optional<std::pair<ir::Expr, ir::Expr>> SymbolicBounds(const ir::Expr& e,
                                                            const RangeMap& ranges);

bool IsNoOp(const ir::Stmt& s);
ir::Stmt NoOp();
// likely(cond): a guard the loop partitioner may split loops on.
ir::Expr Likely(const ir::Expr& cond);
bool IsLikely(const ir::Expr& e);
// Whether `e` uses any variable of `vars`.
bool UsesVar(const ir::Expr& e, const ir::VarNode* v);
bool UsesVar(const ir::Stmt& s, const ir::VarNode* v);

}  // namespace kiln::lower

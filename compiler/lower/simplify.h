#pragma once
// Simplification pass: constant folding, x+0, x*1, x*0, nested constant
// adds (integer expressions are put in a canonical linear form, so
// (a*4 + 3) - a*4 folds to 3), floordiv/floormod by constants with known
// divisibility or ranges, min/max and comparisons that loop ranges decide,
// if/select with constant conditions, loops of extent 0 (removed) and 1
// (the variable substituted).

#include "compiler/ir/ir.h"
#include "compiler/lower/ir_util.h"

namespace kiln::lower {

ir::Expr Simplify(const ir::Expr& e, const RangeMap& ranges = {});
ir::Stmt Simplify(const ir::Stmt& s);

}  // namespace kiln::lower

#pragma once
// Unrolling: a kUnrolled loop with constant extent becomes its body repeated
// with the variable replaced by each value; other kUnrolled loops become
// serial.

#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::Stmt UnrollLoops(const ir::Stmt& s);

}  // namespace kiln::lower

#pragma once
// Structural equality and hashing of the tensor IR.
//
// Nodes compare by kind, dtype and value. Variables are equal when they are
// bound at the same position: For loop vars, Let/LetStmt vars, Reduce axis
// vars, Allocate buffers (and their data vars) and PrimFunc params are
// definitions, and a use matches when both sides refer to corresponding
// definitions. Free variables and buffers (not defined inside the compared
// tree) compare by identity. Names of bound variables and buffers do not
// matter; nor does a PrimFunc's name. Buffers defined on both sides must
// agree in dtype and shape.
//
// StructuralHash is consistent with StructuralEqual (equal => same hash). It
// is deterministic across processes: bound variables hash by binding order,
// free variables by name and dtype.

#include <cstdint>

#include "compiler/ir/ir.h"

namespace kiln::ir {

bool StructuralEqual(const Expr& a, const Expr& b);
bool StructuralEqual(const Stmt& a, const Stmt& b);
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b);

uint64_t StructuralHash(const Expr& e);
uint64_t StructuralHash(const Stmt& s);
uint64_t StructuralHash(const PrimFunc& f);

}  // namespace kiln::ir

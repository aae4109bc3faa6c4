#pragma once
// Storage flattening: every buffer (parameters and Allocates) becomes a 1-D
// buffer of its element count, and every multi-dimensional access a single
// row-major index.

#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::PrimFunc FlattenStorage(const ir::PrimFunc& f);

}  // namespace kiln::lower

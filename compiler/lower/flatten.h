#pragma once
// Storage flattening: every buffer (parameters and Allocates) becomes a 1-D
// buffer of its element count, and every multi-dimensional access a single
// row-major index.

#include "compiler/ir/ir.h"

namespace kiln::lower {

// With simplify false, sizes and indices are left unsimplified (the tuner's
// feature extraction evaluates them; simplifying costs it a third of its time).
ir::PrimFunc FlattenStorage(const ir::PrimFunc& f, bool simplify = true);

}  // namespace kiln::lower

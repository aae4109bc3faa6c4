#pragma once
// Vectorization: an innermost kVectorized loop with constant extent L whose
// body is stores only becomes vector code of L lanes: indices linear in the
// loop variable become Ramp, invariant values stay scalar and are Broadcast
// where they meet vectors. Stores need a unit-stride Ramp index; loads with
// other vector indices (strided, clamped) become gathers. A loop that
// cannot be vectorized becomes a serial loop.

#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::Stmt VectorizeLoops(const ir::Stmt& s);

}  // namespace kiln::lower

#pragma once
// Loop partitioning for tails: a loop whose body holds likely(a < b) guards
// that are linear in its variable (with only inner loop variables besides) is
// split into a main loop, where those guards are known true and removed, and
// a tail loop that keeps them. Remaining likely() markers stay in place (see
// StripLikely).

#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::Stmt PartitionLoops(const ir::Stmt& s);
// Splits a serial loop of constant bounds where the select conditions in its
// body that compare its variable alone with constants (the zero padding of
// a padded-input stage: x - 1 >= 0 && x - 1 < W) change value, so that the
// simplifier removes them, and the clamped indices beside them, from every
// piece: the interior copies rows without selects, and vectorizes.
ir::Stmt PartitionSelects(const ir::Stmt& s);
// Replaces likely(c) by c (after partitioning).
ir::Stmt StripLikely(const ir::Stmt& s);

}  // namespace kiln::lower

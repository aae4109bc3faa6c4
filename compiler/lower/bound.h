#pragma once
// Bound inference (for compute_at): the region of `buffer` read inside
// `scope`, where every loop inside `scope` (constant extents) varies over its
// range and every other variable is fixed. Per dimension: the (symbolic) min
// and the constant extent. An error when a region is not a constant-size box.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/lower/ir_util.h"

namespace kiln::lower {

struct Region {
  std::vector<ir::Expr> min;
  std::vector<int64_t> extent;
};

// `relaxed`: variables outside `scope` that vary too, over the given
// (inclusive) ranges: the thread indices of a GPU block, for a buffer the
// block's threads share.
absl::StatusOr<Region> InferBound(const ir::Buffer& buffer, const ir::Stmt& scope,
                                  const RangeMap& relaxed = {});

}  // namespace kiln::lower

#pragma once
// Loop nest construction: a schedule becomes one statement of For nests with
// BufferStores of the compute bodies (multi-dimensional indices). Inlined
// stages are substituted into their consumers; reductions become an init
// nest placed just outside the outermost reduce loop, plus an update; splits
// whose factor does not divide get a likely(...) guard; stages computed at a
// consumer loop get a scratch Allocate sized by bound inference.

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

absl::StatusOr<ir::Stmt> BuildLoopNest(const te::Schedule& schedule);

}  // namespace kiln::lower

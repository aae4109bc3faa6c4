#pragma once
// The lowering pipeline: schedule -> fully lowered PrimFunc.
//   loop_nest (with bound inference for compute_at) -> flatten -> simplify
//   -> partition (tails) -> vectorize -> unroll -> simplify -> strip likely
// With opts.dump_ir, "// after <pass>" and the IR go to stderr after each.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/lower/options.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

// `args` are the kernel parameters in order (placeholders and outputs).
absl::StatusOr<ir::PrimFunc> Lower(const te::Schedule& schedule,
                                   const std::vector<te::Tensor>& args, const std::string& name,
                                   const compiler::LowerOptions& opts = {});

}  // namespace kiln::lower

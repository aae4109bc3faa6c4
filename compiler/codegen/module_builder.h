#pragma once
// The pieces of BuildSharedObject (compiler/codegen/module.h), usable with
// already-lowered kernels (tests, tools).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/codegen/module.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"

namespace kiln::compiler::codegen {

// An ELF relocatable object (PIC) for `target` with every kernel (exported,
// kernel calling convention) and the entry `plan.name`. INVALID_ARGUMENT when
// the plan names an unknown kernel or passes the wrong number of arguments.
absl::StatusOr<std::string> EmitObjectFile(const std::vector<ir::PrimFunc>& kernels,
                                           const EntryPlan& plan, const Target& target);

// Links an object into a shared object: `cc -shared -nostdlib` for the host,
// `ld.lld -shared` for other triples (UNAVAILABLE with a clear message when no
// suitable linker exists; the linker's stderr when it fails). Undefined
// symbols (kiln_parallel_for, libm) are left for the loader.
absl::StatusOr<std::string> LinkSharedObject(const std::string& object, const Target& target);

// EmitObjectFile + LinkSharedObject.
absl::StatusOr<std::string> BuildSharedObjectFromFuncs(const std::vector<ir::PrimFunc>& kernels,
                                                       const EntryPlan& plan, const Target& target);

}  // namespace kiln::compiler::codegen

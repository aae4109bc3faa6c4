#include "compiler/ops/lower_workload.h"

#include "absl/status/status.h"

namespace kiln::compiler {

absl::StatusOr<ir::PrimFunc> LowerWorkload(const Workload& w, const Config& c, const Target& t,
                                           const std::string& func_name, const LowerOptions& opts) {
  (void)w; (void)c; (void)t; (void)func_name; (void)opts;
  return absl::UnimplementedError("LowerWorkload: not implemented yet");
}

}  // namespace kiln::compiler

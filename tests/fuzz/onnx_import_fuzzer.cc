// libFuzzer target: arbitrary bytes through Model::FromOnnx (the importer and
// the graph passes, what the tracker runs on a submitted model, with the
// tracker's budget for computed constants). Any outcome
// but success, INVALID_ARGUMENT or UNIMPLEMENTED is a finding, as is every
// crash, sanitizer report, leak, timeout or allocation over -malloc_limit_mb.
// Built and run by scripts/fuzz (docs/testing.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "compiler/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::compiler::ImportOptions options;
  options.max_folded_bytes = kiln::compiler::FoldedBytesBudget(static_cast<int64_t>(size));
  absl::StatusOr<kiln::compiler::Model> model = kiln::compiler::Model::FromOnnx(bytes, options);
  if (model.ok()) return 0;
  const absl::StatusCode code = model.status().code();
  if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kUnimplemented) {
    std::fprintf(stderr, "unexpected status: %s\n", model.status().ToString().c_str());
    std::abort();
  }
  return 0;
}

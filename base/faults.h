#pragma once
// Faults injected by the farm's fault tests (tests/e2e/farm_faults_test.py,
// the sandbox tests): a crashing, hanging or lying measurement worker, a
// crashing compile worker, each asked for by a KILN_TEST_* variable.
//
// Only the programs built for those tests read them: kiln-agent-faults and
// kiln-tracker-faults link base/faults_from_env.cc (the variable's value),
// kiln-agent and kiln-tracker link base/no_faults.cc (always nullptr), so no
// released binary can be made to crash, hang or lie by its environment.
#include <string_view>

namespace kiln {

// The setting of fault `name` (a KILN_TEST_* variable), or nullptr.
const char* FaultSetting(const char* name);

// Whether fault `name` is set to `id` (a candidate id).
inline bool FaultMatches(const char* name, std::string_view id) {
  const char* v = FaultSetting(name);
  return v != nullptr && *v != '\0' && id == v;
}

}  // namespace kiln

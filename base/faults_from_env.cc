// FaultSetting for the fault tests' programs (base/faults.h).
#include <cstdlib>

#include "base/faults.h"

namespace kiln {

const char* FaultSetting(const char* name) { return std::getenv(name); }

}  // namespace kiln

// FaultSetting for the released programs (base/faults.h): no faults.
#include "base/faults.h"

namespace kiln {

const char* FaultSetting(const char*) { return nullptr; }

}  // namespace kiln

// Registers the engine check of test_util.h for the whole storage suite.
#include "test_util.h"

namespace {
[[maybe_unused]] ::testing::Environment* const kEngine =
    ::testing::AddGlobalTestEnvironment(new kiln::storage::testing::EngineEnvironment);
}  // namespace

#pragma once
// The thread pool that generated code calls for parallel loops. Exported with
// C linkage from libkiln_runtime.so; see docs/artifact-format.md.
#include <cstdint>

extern "C" {
void kiln_parallel_for(int64_t n, void (*body)(int64_t i, void* ctx), void* ctx);
// Number of worker threads (including the caller); KILN_NUM_THREADS overrides
// the default of the hardware's concurrency.
int kiln_num_threads(void);
}

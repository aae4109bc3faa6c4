#pragma once
// The thread pool that generated code calls for parallel loops. Exported with
// C linkage from libkiln_runtime.so; see docs/artifact-format.md.
#include <cstdint>

extern "C" {
void kiln_parallel_for(int64_t n, void (*body)(int64_t i, void* ctx), void* ctx);
// Number of worker threads (including the caller); KILN_NUM_THREADS overrides
// the default of the hardware's concurrency.
int kiln_num_threads(void);
// Scratch for a generated kernel's local buffer too large for the stack
// (compiler/codegen: above kMaxStackScratchBytes): a per-thread arena of
// reused chunks, 64-byte aligned, freed in the reverse order of allocation.
// Aborts with a message when the memory cannot be had (a kernel's scratch
// is bounded at compile time, te::kMaxScratchBytes per buffer).
void* kiln_workspace_alloc(int64_t bytes);
void kiln_workspace_free(void* ptr);
}

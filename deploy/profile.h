#pragma once
// Where a model's time goes inside its real runs (kiln-run --profile): a
// module's entry point calls kiln_kernel_begin / kiln_kernel_end around each
// kernel call, which cost a load and a branch unless profiling is on. Unlike
// timing each kernel alone (bench/model_profile_bench), this sees the caches
// as the model leaves them: weights fetched from L3 or memory, activations
// written by the kernel before.
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
// `call` is the call's index in the entry's order; `label` names the kernel
// and its workload (a constant string of the module).
void kiln_kernel_begin(int32_t call, const char* label);
void kiln_kernel_end(int32_t call);
}

namespace kiln::deploy {

struct KernelTime {
  int32_t call = 0;
  std::string label;
  int64_t runs = 0;
  double total_ms = 0;
};

// Clears what was recorded and starts recording (any thread's calls).
void StartKernelProfile();
// Stops recording; the calls seen since the start, in call order.
std::vector<KernelTime> StopKernelProfile();

}  // namespace kiln::deploy

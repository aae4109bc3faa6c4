#include <random>

#include "compiler/kernel.h"

namespace kiln::compiler {

KernelBuffers MakeKernelBuffers(const KernelSignature& sig, uint64_t seed, float output_fill) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  KernelBuffers b;
  for (const TensorSpec& spec : sig.inputs) {
    std::vector<float> data(static_cast<size_t>(spec.NumElements()));
    for (float& v : data) v = dist(rng);
    b.inputs.push_back(std::move(data));
  }
  b.output.assign(static_cast<size_t>(sig.output.NumElements()), output_fill);
  for (auto& in : b.inputs) {
    b.input_ptrs.push_back(in.data());
    b.args.push_back(in.data());
  }
  b.args.push_back(b.output.data());
  return b;
}

}  // namespace kiln::compiler

#pragma once
// Shared by the compiler tests: a JIT-built kernel against the naive
// reference implementation on seeded random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compiler/kernel.h"

namespace kiln::compiler::test_util {

inline void ExpectMatchesReference(const Workload& w, const Config& c, const std::string& what,
                                   uint64_t seed = 7) {
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << what << ": " << sig.status();
  auto kernel = BuildJit(w, c, Target::Host());
  ASSERT_TRUE(kernel.ok()) << what << " " << CanonicalConfig(c) << ": " << kernel.status();
  KernelBuffers b = MakeKernelBuffers(*sig, seed, 12345.f);
  std::vector<float> want(b.output.size(), -999.f);
  ASSERT_EQ((*kernel)->Run(b.args.data()), 0);
  ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(b.output[i], want[i], 1e-4f * (1.f + std::fabs(want[i])))
        << what << " config " << CanonicalConfig(c) << " at " << i;
  }
}

}  // namespace kiln::compiler::test_util

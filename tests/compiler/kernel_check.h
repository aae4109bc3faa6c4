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
  ASSERT_TRUE(PackKernelInputs(**kernel, b).ok());
  std::vector<uint8_t> want(b.output.size(), 0);
  ASSERT_EQ((*kernel)->Run(b.args.data()), 0);
  auto ref = RunReference(w, b.input_ptrs, want.data());
  ASSERT_TRUE(ref.ok()) << what << ": " << ref;
  std::string detail;
  EXPECT_TRUE(OutputsMatch(b.output_dtype, b.output.data(), want.data(), b.OutputSize(), 1e-4, 1e-4,
                           &detail))
      << what << " config " << CanonicalConfig(c) << ": " << detail;
}

}  // namespace kiln::compiler::test_util

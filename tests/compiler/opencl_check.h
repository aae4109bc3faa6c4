#pragma once
// Shared by the compiler tests that run kernels on the OpenCL device the ICD
// loader finds (PoCL on a machine without a GPU): building and running one
// kernel, and a GPU template's kernel against the reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/codegen/c_source.h"
#include "compiler/codegen/opencl.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"

namespace kiln::compiler::test_util {

// After RunOpenCl: without a device the test skips, visibly (and fails
// where the build promised PoCL).
#ifdef KILN_TEST_EXPECT_OPENCL
#define SKIP_WITHOUT_OPENCL(failure) \
  if ((failure) == "no device") FAIL() << "no OpenCL device: is pocl-opencl-icd installed?"
#else
#define SKIP_WITHOUT_OPENCL(failure) \
  if ((failure) == "no device") GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd)"
#endif

// Builds `source` on the first OpenCL device and runs its kernel once over
// `dims` on `args` (the last, the output, read back). An empty string when
// it worked, else what failed; "no device" when there is none (or kiln was
// built without OpenCL).
inline std::string RunOpenCl(const std::string& source, const std::vector<void*>& args,
                             const std::vector<size_t>& sizes,
                             const codegen::LaunchDims& dims = {}) {
  auto kernel = codegen::OpenClKernel::Build("", source, "kiln_kernel");
  if (!kernel.ok()) {
    const auto code = kernel.status().code();
    if (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kUnimplemented) {
      return "no device";
    }
    return std::string(kernel.status().message());
  }
  auto seconds = (*kernel)->Run(args, sizes, dims);
  if (!seconds.ok()) return std::string(seconds.status().message());
  return "";
}

// Runs `source` (the workload's kernel) on `args` (b's buffers, the last
// b.output) over `dims` and compares b.output with the reference.
inline void ExpectOpenClRunMatchesReference(const Workload& w, const std::string& source,
                                            const std::vector<void*>& args,
                                            const std::vector<size_t>& sizes,
                                            const codegen::LaunchDims& dims, KernelBuffers& b) {
  const std::string failure = RunOpenCl(source, args, sizes, dims);
  SKIP_WITHOUT_OPENCL(failure);
  ASSERT_EQ(failure, "") << source;
  std::vector<uint8_t> want(b.output.size());
  ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());
  std::string detail;
  EXPECT_TRUE(OutputsMatch(b.output_dtype, b.output.data(), want.data(), b.OutputSize(), 1e-4, 1e-4,
                           &detail))
      << detail << "\n"
      << source;
}

// The workload's kernel for the GPU target `gpu` with config `c`, lowered,
// emitted as OpenCL C and run over the launch its bindings ask for, against
// the reference on seeded random inputs.
inline void ExpectGpuKernelMatchesReference(const Workload& w, const Config& c, const Target& gpu,
                                            uint64_t seed = 11) {
  SCOPED_TRACE(CanonicalConfig(c));
  ASSERT_TRUE(ValidateConfig(w, gpu, c).ok()) << ValidateConfig(w, gpu, c);
  auto func = LowerWorkload(w, c, gpu, "kiln_kernel", {});
  ASSERT_TRUE(func.ok()) << func.status();
  auto dims = codegen::LaunchDimsOf(*func);
  ASSERT_TRUE(dims.ok()) << dims.status();
  auto src = codegen::EmitCSource(*func, codegen::SourceDialect::kOpenCL);
  ASSERT_TRUE(src.ok()) << src.status();
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  KernelBuffers b = MakeKernelBuffers(*sig, seed, 12345.f);
  ExpectOpenClRunMatchesReference(w, *src, b.args, b.ArgBytes(), *dims, b);
}

}  // namespace kiln::compiler::test_util

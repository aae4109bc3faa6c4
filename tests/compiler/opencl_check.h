#pragma once
// Shared by the compiler tests that run kernels on the OpenCL device the ICD
// loader finds (PoCL on a machine without a GPU), through the runtime's
// device code: running one kernel, and a GPU template's kernel against the
// reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/codegen/c_source.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "deploy/device.h"

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

// Runs `func` once on the first OpenCL device through the runtime's device
// code (deploy::LoadOpenClProgram, as kiln-run loads an artifact): emitted
// as OpenCL C with its buffers as base and offset, one launch over the
// dimensions its bindings ask for, on `args` (sizes in bytes; the last, the
// output, read back). An empty string when it worked, else what failed;
// "no device" when there is none (or the runtime was built without OpenCL).
inline std::string RunOpenCl(const ir::PrimFunc& func, const std::vector<void*>& args,
                             const std::vector<size_t>& sizes) {
  auto dims = codegen::LaunchDimsOf(func);
  if (!dims.ok()) return std::string(dims.status().message());
  codegen::CSourceOptions options;
  options.offset_params = true;
  auto source = codegen::EmitCSource(func, codegen::SourceDialect::kOpenCL, options);
  if (!source.ok()) return std::string(source.status().message());
  deploy::Manifest manifest;
  manifest.target = "opencl";
  deploy::Launch launch;
  launch.kernel = func.name;
  for (int d = 0; d < 3; ++d) {
    launch.grid[d] = dims->grid[d];
    launch.block[d] = dims->block[d];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool output = i + 1 == sizes.size();
    launch.args.push_back({output ? 'o' : 'i', output ? 0 : static_cast<int>(i), 0});
    deploy::TensorInfo t;
    t.dtype = DType::kUInt8;
    t.shape = {static_cast<int64_t>(sizes[i])};
    (output ? manifest.outputs : manifest.inputs).push_back(t);
  }
  auto program = deploy::LoadOpenClProgram(*source, {launch}, manifest, "", "");
  if (!program.ok()) {
    const auto code = program.status().code();
    if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kUnimplemented) {
      return "no device";
    }
    return std::string(program.status().message());
  }
  std::vector<const void*> inputs(args.begin(), args.end() - 1);
  if (absl::Status s = (*program)->Run(inputs, {args.back()}); !s.ok()) {
    return std::string(s.message());
  }
  return "";
}

// Runs `func` (the workload's kernel) on `args` (b's buffers, the last
// b.output) and compares b.output with the reference.
inline void ExpectOpenClRunMatchesReference(const Workload& w, const ir::PrimFunc& func,
                                            const std::vector<void*>& args,
                                            const std::vector<size_t>& sizes, KernelBuffers& b) {
  const std::string failure = RunOpenCl(func, args, sizes);
  SKIP_WITHOUT_OPENCL(failure);
  ASSERT_EQ(failure, "") << *codegen::EmitCSource(func, codegen::SourceDialect::kOpenCL);
  std::vector<uint8_t> want(b.output.size());
  ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());
  std::string detail;
  EXPECT_TRUE(OutputsMatch(b.output_dtype, b.output.data(), want.data(), b.OutputSize(), 1e-4, 1e-4,
                           &detail))
      << detail << "\n"
      << *codegen::EmitCSource(func, codegen::SourceDialect::kOpenCL);
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
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  KernelBuffers b = MakeKernelBuffers(*sig, seed, 12345.f);
  ExpectOpenClRunMatchesReference(w, *func, b.args, b.ArgBytes(), b);
}

}  // namespace kiln::compiler::test_util

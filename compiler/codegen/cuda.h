#pragma once
// NVIDIA GPUs: kernels emitted as CUDA C (c_source.h) compiled by NVRTC for
// a compute capability. NVRTC is opened at run time (dlopen of libnvrtc),
// so one binary serves machines with and without the CUDA toolkit: without
// it compiling is UNAVAILABLE, saying which library is missing. The modules
// run, and candidates are timed, on the runtime's device code
// (deploy/device.h: LoadCudaProgram).

#include <string>

#include "absl/status/statusor.h"

namespace kiln::compiler::codegen {

// NVRTC's version ("12.8"), or UNAVAILABLE when it cannot be loaded.
absl::StatusOr<std::string> NvrtcVersion();

// What NVRTC made of one source: PTX for the architecture's virtual
// compute_XY, and the cubin (machine code) for sm_XY when `cubin`.
struct CudaBinary {
  std::string ptx;
  std::string cubin;
  std::string log;  // NVRTC's messages (warnings), if any
};
// Compiles `source` for `arch` ("sm_90"; "" for sm_80). INVALID_ARGUMENT
// with NVRTC's log when it does not compile.
absl::StatusOr<CudaBinary> CompileCuda(const std::string& source, const std::string& arch,
                                       bool cubin);

}  // namespace kiln::compiler::codegen

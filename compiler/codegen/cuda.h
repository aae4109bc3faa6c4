#pragma once
// NVIDIA GPUs: kernels emitted as CUDA C (c_source.h) compiled by NVRTC for
// a compute capability, loaded, run and timed through the CUDA driver API.
// Both libraries are opened at run time (dlopen of libnvrtc and
// libcuda.so.1), so one binary serves machines with and without a GPU or
// the CUDA toolkit: without them the device list is empty and compiling or
// running is UNAVAILABLE, saying which library is missing.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/codegen/c_source.h"

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

struct CudaDevice {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int clock_khz = 0;
  long long global_mem_bytes = 0;
  int max_threads_per_block = 0;
  int shared_mem_per_block = 0;
  std::string Arch() const;  // "sm_90"
};

// Every CUDA device (index: `kiln-agent --device cuda:N`); empty without a
// driver or a GPU.
std::vector<CudaDevice> ListCudaDevices();
// "CUDA: <name> (sm_90, 132 SMs, 80 GiB)[, ...]" or "".
std::string DescribeCudaDevices(const std::vector<CudaDevice>& devices);

// One kernel built for one CUDA device.
class CudaKernel {
 public:
  // Compiles `source` for the device named `device_id` (spaces as '_'; "":
  // the first) and takes its kernel `name`.
  static absl::StatusOr<std::unique_ptr<CudaKernel>> Build(const std::string& device_id,
                                                           const std::string& source,
                                                           const std::string& name);
  virtual ~CudaKernel() = default;
  // As OpenClKernel::Run: arguments copied to the device (not again for the
  // same host buffers), the launch over `dims`, the last argument copied
  // back; the kernel's time in seconds from CUDA events.
  virtual absl::StatusOr<double> Run(const std::vector<void*>& args,
                                     const std::vector<size_t>& sizes, const LaunchDims& dims) = 0;
  virtual const CudaDevice& device() const = 0;
};

}  // namespace kiln::compiler::codegen

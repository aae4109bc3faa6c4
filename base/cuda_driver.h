#pragma once
// The CUDA driver API, opened at run time (dlopen of libcuda.so.1) so that
// no kiln binary links against it: the agent measures on NVIDIA GPUs and the
// runtime runs CUDA artifacts where a driver is installed, and both work
// unchanged where none is. Only the entry points kiln uses, declared here
// with the driver's stable ABI (cuda.h's _v2 names where it has them), so
// the build needs no CUDA toolkit.

#include <dlfcn.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace kiln::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

inline constexpr CUresult kSuccess = 0;
// CUdevice_attribute values (cuda.h).
inline constexpr int kMaxThreadsPerBlock = 1;
inline constexpr int kMaxBlockDimX = 2;  // Y and Z follow
inline constexpr int kMaxSharedMemoryPerBlock = 8;
inline constexpr int kClockRate = 13;
inline constexpr int kMultiprocessorCount = 16;
inline constexpr int kComputeCapabilityMajor = 75;
inline constexpr int kComputeCapabilityMinor = 76;
// CUfunction_attribute values.
inline constexpr int kFuncMaxThreadsPerBlock = 0;
inline constexpr int kFuncSharedSizeBytes = 1;
inline constexpr unsigned kStreamNonBlocking = 1;        // CU_STREAM_NON_BLOCKING
inline constexpr int kStreamCaptureModeThreadLocal = 1;  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

#define KILN_CUDA_FUNCTIONS(X)                                                               \
  X(cuInit, (unsigned))                                                                      \
  X(cuGetErrorString, (CUresult, const char**))                                              \
  X(cuDeviceGetCount, (int*))                                                                \
  X(cuDeviceGet, (CUdevice*, int))                                                           \
  X(cuDeviceGetName, (char*, int, CUdevice))                                                 \
  X(cuDeviceGetAttribute, (int*, int, CUdevice))                                             \
  X(cuDeviceTotalMem_v2, (size_t*, CUdevice))                                                \
  X(cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))                                        \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                \
  X(cuCtxSetCurrent, (CUcontext))                                                            \
  X(cuCtxSynchronize, ())                                                                    \
  X(cuModuleLoadData, (CUmodule*, const void*))                                              \
  X(cuModuleUnload, (CUmodule))                                                              \
  X(cuModuleGetFunction, (CUfunction*, CUmodule, const char*))                               \
  X(cuFuncGetAttribute, (int*, int, CUfunction))                                             \
  X(cuMemAlloc_v2, (CUdeviceptr*, size_t))                                                   \
  X(cuMemFree_v2, (CUdeviceptr))                                                             \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void*, size_t))                                     \
  X(cuMemcpyDtoH_v2, (void*, CUdeviceptr, size_t))                                           \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void*, size_t, CUstream))                      \
  X(cuMemcpyDtoHAsync_v2, (void*, CUdeviceptr, size_t, CUstream))                            \
  X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                     unsigned, CUstream, void**, void**))                                    \
  X(cuEventCreate, (CUevent*, unsigned))                                                     \
  X(cuEventRecord, (CUevent, CUstream))                                                      \
  X(cuEventSynchronize, (CUevent))                                                           \
  X(cuEventElapsedTime, (float*, CUevent, CUevent))                                          \
  X(cuEventDestroy_v2, (CUevent))                                                            \
  X(cuStreamSynchronize, (CUstream))                                                         \
  X(cuStreamCreate, (CUstream*, unsigned))                                                   \
  X(cuStreamDestroy_v2, (CUstream))

// Stream capture into CUDA graphs (drivers of CUDA 11.4 on): optional, the
// runtime launches kernel by kernel without them.
#define KILN_CUDA_GRAPH_FUNCTIONS(X)                                          \
  X(cuStreamBeginCapture_v2, (CUstream, int))                                 \
  X(cuStreamEndCapture, (CUstream, CUgraph*))                                 \
  X(cuGraphInstantiateWithFlags, (CUgraphExec*, CUgraph, unsigned long long)) \
  X(cuGraphLaunch, (CUgraphExec, CUstream))                                   \
  X(cuGraphDestroy, (CUgraph))                                                \
  X(cuGraphExecDestroy, (CUgraphExec))

struct DriverApi {
#define KILN_CUDA_MEMBER(name, args) CUresult(*name) args = nullptr;
  KILN_CUDA_FUNCTIONS(KILN_CUDA_MEMBER)
  KILN_CUDA_GRAPH_FUNCTIONS(KILN_CUDA_MEMBER)
#undef KILN_CUDA_MEMBER
  bool has_graphs = false;  // every KILN_CUDA_GRAPH_FUNCTIONS entry resolved

  // "<what> failed: <the driver's message> (CUDA error N)".
  std::string Error(CUresult r, const std::string& what) const {
    const char* msg = nullptr;
    if (cuGetErrorString == nullptr || cuGetErrorString(r, &msg) != kSuccess) msg = nullptr;
    return what + " failed: " + (msg ? msg : "unknown error") + " (CUDA error " +
           std::to_string(r) + ")";
  }
};

// The driver, initialized (cuInit), or null with *error saying why not (no
// libcuda.so.1: no NVIDIA driver; cuInit failing: no usable GPU). Loaded
// once per process.
inline const DriverApi* LoadDriver(std::string* error) {
  static DriverApi api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      failure = "no CUDA driver: libcuda.so.1 cannot be loaded";
      return;
    }
#define KILN_CUDA_RESOLVE(name, args)                             \
  api.name = reinterpret_cast<CUresult(*) args>(dlsym(h, #name)); \
  if (api.name == nullptr && failure.empty()) {                   \
    failure = std::string("the CUDA driver lacks ") + #name;      \
  }
    KILN_CUDA_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
    if (!failure.empty()) return;
    api.has_graphs = true;
#define KILN_CUDA_RESOLVE_OPTIONAL(name, args)                    \
  api.name = reinterpret_cast<CUresult(*) args>(dlsym(h, #name)); \
  api.has_graphs = api.has_graphs && api.name != nullptr;
    KILN_CUDA_GRAPH_FUNCTIONS(KILN_CUDA_RESOLVE_OPTIONAL)
#undef KILN_CUDA_RESOLVE_OPTIONAL
    if (CUresult r = api.cuInit(0); r != kSuccess) failure = api.Error(r, "cuInit");
  });
  if (!failure.empty()) {
    if (error != nullptr) *error = failure;
    return nullptr;
  }
  return &api;
}

}  // namespace kiln::cuda

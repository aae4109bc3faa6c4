#pragma once
// GPU modules in the runtime: an artifact compiled for a GPU target carries
// its kernels as device source (section `device.cl`) and a launch plan
// (section `launch`) in place of a shared object (CUDA: `device.ptx` and
// `device.cubin`, compiled by NVRTC when the model was compiled); see
// docs/artifact-format.md. The device's driver is loaded at run time
// (OpenCL: the ICD loader, libOpenCL.so.1; CUDA: libcuda.so.1), so
// libkiln_runtime links no GPU
// library and runs CPU artifacts on machines without one.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/runtime.h"

namespace kiln::deploy {

// One kernel launch of a launch plan: blocks (work-groups) and threads per
// block (work-items per group) along x, y, z, and the kernel's buffers.
struct LaunchArg {
  char kind = 's';  // 'i' input, 'o' output, 'w' weights, 's' workspace
  int index = 0;    // inputs and outputs
  int64_t offset = 0;
};
struct Launch {
  std::string kernel;
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  std::vector<LaunchArg> args;
};

// Parses the `launch` section against the manifest: INVALID_ARGUMENT naming
// the line for a malformed record, an argument that names a missing input
// or output, an offset past its buffer, or a launch of no threads.
absl::StatusOr<std::vector<Launch>> ParseLaunchPlan(std::string_view text, const Manifest& manifest,
                                                    int64_t weights_bytes);

// A GPU module loaded on one device: weights uploaded once, workspace and
// input/output buffers allocated once.
class DeviceProgram {
 public:
  virtual ~DeviceProgram() = default;
  // Copies the inputs to the device, runs every launch in order, copies the
  // outputs back (blocking). Buffers as Module::Run takes them.
  virtual absl::Status Run(const std::vector<const void*>& inputs,
                           const std::vector<void*>& outputs) = 0;
  // Runs every launch in order `runs` times more on the device's buffers as
  // the last Run left them (nothing copied) and returns their time in
  // seconds by the device's clock (OpenCL profiling events, CUDA events):
  // how the agent times a GPU candidate, built as a one-kernel module by
  // the artifact's own code path, on the runtime's device code.
  virtual absl::StatusOr<double> TimeLaunches(int runs) = 0;
  // "OpenCL: <platform>/<device>".
  virtual std::string Describe() const = 0;
};

// A GPU device as the runtime finds it (`kiln-agent --list-devices`, the
// agent's hardware description).
struct GpuDevice {
  std::string platform;  // OpenCL's platform ("" for CUDA)
  std::string name;
  std::string type;       // OpenCL: "cpu", "gpu", "accelerator", "other"; CUDA: "gpu"
  std::string version;    // OpenCL: "OpenCL 3.0 PoCL ..."; CUDA: ""
  std::string arch;       // CUDA: "sm_90"; OpenCL: ""
  int compute_units = 0;  // CUDA: multiprocessors
  int clock_mhz = 0;
  long long global_mem_bytes = 0;
  long long local_mem_bytes = 0;  // per block (CUDA: shared memory)
  int64_t max_threads_per_block = 0;
  int64_t max_block_dims[3] = {0, 0, 0};  // OpenCL's per-axis work-item limits (0: none)
};

// Every OpenCL platform's devices, in order (index: `opencl:N`); empty
// without a driver or a device.
std::vector<GpuDevice> ListOpenClDevices();
// Every CUDA device (index: `cuda:N`); empty without a driver or a GPU.
std::vector<GpuDevice> ListCudaDevices();
// "OpenCL: <platform>/<name> (<type>, N CUs)[, ...]", or "" for none.
std::string DescribeOpenClDevices(const std::vector<GpuDevice>& devices);
// "CUDA: <name> (sm_90, 132 SMs, 80 GiB)[, ...]", or "" for none.
std::string DescribeCudaDevices(const std::vector<GpuDevice>& devices);
// The CUDA (`cuda`) or OpenCL device whose DeviceId is `id`, as the
// `cuda:N` or `opencl:N` that loading a program takes; NOT_FOUND naming the
// devices there are.
absl::StatusOr<std::string> FindGpuDevice(bool cuda, const std::string& id);

// Whether `device` can run `launch` of a kernel that allows `kernel_threads`
// threads per block (its registers' limit on the device; 0: the device's)
// and declares `shared_bytes` of shared (local) memory: at least one block
// and thread per axis, threads within the per-axis and per-block limits,
// shared memory within the device's. INVALID_ARGUMENT naming the limit
// otherwise: a program with such a launch does not load.
absl::Status CheckLaunch(const Launch& launch, const GpuDevice& device, int64_t kernel_threads = 0,
                         int64_t shared_bytes = 0);

// Which of `ids` (device names as DeviceId writes them, in the order
// `kind`:N numbers them) a GPU artifact runs on: `device` "KIND:N", or ""
// for the one its target names (`-device=NAME`), else the first.
// INVALID_ARGUMENT for a device of another kind, NOT_FOUND (listing them)
// for a missing one.
absl::StatusOr<size_t> ChooseDevice(const std::string& device, const std::string& kind,
                                    const std::vector<std::string>& ids, const Manifest& manifest);
// The value of ` -KEY=` in a target spec ("" when absent).
std::string TargetOption(const std::string& spec, const std::string& key);

// Builds `source` on an OpenCL device: `device` "opencl:N" (N: the index
// among every platform's devices, as `kiln-agent --list-devices` numbers
// them), or "" for the device the target names (`-device=NAME`), else the
// first. UNAVAILABLE when no OpenCL driver can be loaded or no device
// exists, NOT_FOUND for a missing device, INVALID_ARGUMENT with the
// driver's build log when the source does not build.
absl::StatusOr<std::unique_ptr<DeviceProgram>> LoadOpenClProgram(std::string_view source,
                                                                 std::vector<Launch> launches,
                                                                 const Manifest& manifest,
                                                                 std::string_view weights,
                                                                 const std::string& device);

// Loads a CUDA module on a device: `device` "cuda:N" or "" (the device the
// target names, else the first); the cubin when the device's architecture
// is the one it was compiled for, else the PTX (compiled by the driver).
// The driver (libcuda.so.1) is opened at run time: UNAVAILABLE without it.
absl::StatusOr<std::unique_ptr<DeviceProgram>> LoadCudaProgram(
    std::string_view ptx, std::string_view cubin, std::vector<Launch> launches,
    const Manifest& manifest, std::string_view weights, const std::string& device);

}  // namespace kiln::deploy

#pragma once
// OpenCL devices through the ICD loader (on a machine without a GPU: PoCL),
// and kernels emitted as OpenCL C (c_source.h) built by the device's driver,
// run and timed there. The agent reports the devices in its hardware
// description and `kiln-agent --list-devices`.
//
// Built without OpenCL (no ICD loader at build time), the device list is
// empty and OpenClKernel::Build is UNIMPLEMENTED.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/codegen/c_source.h"

namespace kiln::compiler::codegen {

struct OpenClDevice {
  std::string platform;
  std::string name;
  std::string type;  // "cpu", "gpu", "accelerator", "other"
  int compute_units = 0;
  long long global_mem_bytes = 0;
  long long local_mem_bytes = 0;    // per work-group (CUDA: shared memory)
  int64_t max_work_group_size = 0;  // work-items in one group
  int64_t max_work_item_sizes[3] = {0, 0, 0};
  int max_clock_mhz = 0;
  std::string version;  // "OpenCL 3.0 PoCL ..."
};

// Every platform's devices, in order (index: `kiln-agent --device opencl:N`).
std::vector<OpenClDevice> ListOpenClDevices();

// A device's name as a target spec writes it: spaces as '_'.
std::string OpenClDeviceId(const OpenClDevice& device);

// "OpenCL: <platform>/<name> (<type>, N CUs)[, ...]" or "" when there is none.
std::string DescribeOpenClDevices(const std::vector<OpenClDevice>& devices);

// Whether `device` can run a launch: threads per block within its work-group
// size and per-axis limits, shared memory within its local memory.
// INVALID_ARGUMENT naming the limit otherwise.
absl::Status CheckLaunch(const LaunchDims& dims, const OpenClDevice& device);

// One kernel built for one device.
class OpenClKernel {
 public:
  // Builds `source` on the device named `device_id` (OpenClDeviceId; "":
  // the first) and takes its kernel `name`. NOT_FOUND naming the devices
  // there are when none has that name; INVALID_ARGUMENT with the driver's
  // build log when the source does not build.
  static absl::StatusOr<std::unique_ptr<OpenClKernel>> Build(const std::string& device_id,
                                                             const std::string& source,
                                                             const std::string& name);
  virtual ~OpenClKernel() = default;

  // Copies every argument to the device (`sizes[i]` bytes; not again when
  // the same buffers come back, as in a measurement's repeats), runs the
  // kernel over `dims` (checked with CheckLaunch) and copies the last
  // argument, the output, back. Returns the kernel's run time in seconds
  // (the device's profiling clock).
  virtual absl::StatusOr<double> Run(const std::vector<void*>& args,
                                     const std::vector<size_t>& sizes, const LaunchDims& dims) = 0;
  virtual const OpenClDevice& device() const = 0;
};

}  // namespace kiln::compiler::codegen

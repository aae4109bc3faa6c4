#include "compiler/codegen/opencl.h"

#include <algorithm>
#include <utility>

#include "base/str.h"

#ifdef KILN_HAS_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

namespace kiln::compiler::codegen {

#ifdef KILN_HAS_OPENCL
namespace {

// A string property of a platform or a device (clGetPlatformInfo,
// clGetDeviceInfo); "" when the driver has none.
template <typename Get, typename Object, typename Info>
std::string InfoString(Get get, Object object, Info what) {
  size_t size = 0;
  if (get(object, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  get(object, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

absl::Status ClError(cl_int code, const std::string& what) {
  return absl::InternalError(StrCat(what, " failed (OpenCL error ", code, ")"));
}

class ClKernel final : public OpenClKernel {
 public:
  ~ClKernel() override {
    ReleaseBuffers();
    if (kernel_) clReleaseKernel(kernel_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }

  absl::Status Init(cl_device_id device, const OpenClDevice& info, const std::string& source,
                    const std::string& name) {
    device_ = device;
    info_ = info;
    cl_int err = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateContext");
    queue_ = clCreateCommandQueue(context_, device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateCommandQueue");
    const char* text = source.c_str();
    program_ = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateProgramWithSource");
    if (clBuildProgram(program_, 1, &device, "", nullptr, nullptr) != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(program_, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(program_, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
      return absl::InvalidArgumentError(
          StrCat("OpenCL build of '", name, "' on ", info.name, " failed: ", log));
    }
    kernel_ = clCreateKernel(program_, name.c_str(), &err);
    if (err != CL_SUCCESS) return ClError(err, StrCat("clCreateKernel(", name, ")"));
    return absl::OkStatus();
  }

  absl::StatusOr<double> Run(const std::vector<void*>& args, const std::vector<size_t>& sizes,
                             const LaunchDims& dims) override {
    if (args.empty() || args.size() != sizes.size()) {
      return absl::InvalidArgumentError("OpenCL run: one size per argument, and an output");
    }
    if (absl::Status st = CheckLaunch(dims, info_); !st.ok()) return st;
    // The same host buffers as the last run (a measurement's repeats): their
    // device copies are reused, not copied again.
    if (args != hosts_ || sizes != sizes_) {
      ReleaseBuffers();
      for (size_t i = 0; i < args.size(); ++i) {
        cl_int err = CL_SUCCESS;
        buffers_.push_back(clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                          std::max<size_t>(sizes[i], 1), args[i], &err));
        if (err != CL_SUCCESS) {
          ReleaseBuffers();
          return ClError(err, StrCat("clCreateBuffer(", sizes[i], " bytes)"));
        }
        err = clSetKernelArg(kernel_, static_cast<cl_uint>(i), sizeof(cl_mem), &buffers_.back());
        if (err != CL_SUCCESS) {
          ReleaseBuffers();
          return ClError(err, StrCat("clSetKernelArg(", i, ")"));
        }
      }
      hosts_ = args;
      sizes_ = sizes;
    }
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      local[d] = static_cast<size_t>(dims.block[d]);
      global[d] = static_cast<size_t>(dims.grid[d] * dims.block[d]);
    }
    cl_event done = nullptr;
    cl_int err =
        clEnqueueNDRangeKernel(queue_, kernel_, 3, nullptr, global, local, 0, nullptr, &done);
    if (err != CL_SUCCESS) return ClError(err, "clEnqueueNDRangeKernel");
    err = clEnqueueReadBuffer(queue_, buffers_.back(), CL_TRUE, 0, sizes.back(), args.back(), 0,
                              nullptr, nullptr);
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr);
    clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
    clReleaseEvent(done);
    if (err != CL_SUCCESS) return ClError(err, "clEnqueueReadBuffer");
    return static_cast<double>(end - start) * 1e-9;
  }

  const OpenClDevice& device() const override { return info_; }

 private:
  void ReleaseBuffers() {
    for (cl_mem m : buffers_) clReleaseMemObject(m);
    buffers_.clear();
    hosts_.clear();
    sizes_.clear();
  }
  std::vector<cl_mem> buffers_;  // device copies of hosts_
  std::vector<void*> hosts_;
  std::vector<size_t> sizes_;
  cl_device_id device_ = nullptr;
  OpenClDevice info_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
};

}  // namespace

namespace {
// Every platform's devices, in order, with their handles.
std::vector<std::pair<OpenClDevice, cl_device_id>> Enumerate() {
  std::vector<std::pair<OpenClDevice, cl_device_id>> out;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr);
    for (cl_device_id d : devices) {
      OpenClDevice dev;
      dev.platform = InfoString(clGetPlatformInfo, p, CL_PLATFORM_NAME);
      dev.name = InfoString(clGetDeviceInfo, d, CL_DEVICE_NAME);
      cl_device_type type = 0;
      clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof(type), &type, nullptr);
      dev.type = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
                 : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                       : "other";
      cl_uint cus = 0;
      clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cus), &cus, nullptr);
      dev.compute_units = static_cast<int>(cus);
      cl_ulong mem = 0;
      clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, nullptr);
      dev.global_mem_bytes = static_cast<long long>(mem);
      cl_ulong local = 0;
      clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local), &local, nullptr);
      dev.local_mem_bytes = static_cast<long long>(local);
      size_t group = 0;
      clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(group), &group, nullptr);
      dev.max_work_group_size = static_cast<int64_t>(group);
      size_t items[3] = {0, 0, 0};
      clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(items), items, nullptr);
      for (int k = 0; k < 3; ++k) dev.max_work_item_sizes[k] = static_cast<int64_t>(items[k]);
      cl_uint mhz = 0;
      clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof(mhz), &mhz, nullptr);
      dev.max_clock_mhz = static_cast<int>(mhz);
      dev.version = InfoString(clGetDeviceInfo, d, CL_DEVICE_VERSION);
      out.emplace_back(std::move(dev), d);
    }
  }
  return out;
}
}  // namespace

std::vector<OpenClDevice> ListOpenClDevices() {
  std::vector<OpenClDevice> out;
  for (auto& [info, handle] : Enumerate()) out.push_back(std::move(info));
  return out;
}

absl::StatusOr<std::unique_ptr<OpenClKernel>> OpenClKernel::Build(const std::string& device_id,
                                                                  const std::string& source,
                                                                  const std::string& name) {
  std::string known;
  for (const auto& [info, handle] : Enumerate()) {
    if (device_id.empty() || OpenClDeviceId(info) == device_id) {
      auto kernel = std::make_unique<ClKernel>();
      if (absl::Status st = kernel->Init(handle, info, source, name); !st.ok()) return st;
      return std::unique_ptr<OpenClKernel>(std::move(kernel));
    }
    known += StrCat(known.empty() ? "" : ", ", OpenClDeviceId(info));
  }
  return absl::NotFoundError(StrCat("no OpenCL device '", device_id, "' on this machine (",
                                    known.empty() ? "none; is an ICD such as pocl-opencl-icd "
                                                    "installed?"
                                                  : known,
                                    ")"));
}
#else
std::vector<OpenClDevice> ListOpenClDevices() { return {}; }

absl::StatusOr<std::unique_ptr<OpenClKernel>> OpenClKernel::Build(const std::string&,
                                                                  const std::string&,
                                                                  const std::string&) {
  return absl::UnimplementedError("kiln was built without OpenCL (no ICD loader at build time)");
}
#endif

std::string OpenClDeviceId(const OpenClDevice& device) { return DeviceId(device.name); }

absl::Status CheckLaunch(const LaunchDims& dims, const OpenClDevice& device) {
  int64_t threads = 1;
  for (int k = 0; k < 3; ++k) {
    if (dims.grid[k] < 1 || dims.block[k] < 1) {
      return absl::InvalidArgumentError(
          "a launch needs at least one block and one thread per axis");
    }
    threads *= dims.block[k];
    if (device.max_work_item_sizes[k] > 0 && dims.block[k] > device.max_work_item_sizes[k]) {
      return absl::InvalidArgumentError(
          StrCat("threads per block along ", "xyz"[k], ": ", dims.block[k], " > the device's ",
                 device.max_work_item_sizes[k], " (", device.name, ")"));
    }
  }
  if (device.max_work_group_size > 0 && threads > device.max_work_group_size) {
    return absl::InvalidArgumentError(StrCat(threads, " threads per block > the device's ",
                                             device.max_work_group_size, " (", device.name, ")"));
  }
  if (device.local_mem_bytes > 0 && dims.shared_bytes > device.local_mem_bytes) {
    return absl::InvalidArgumentError(StrCat(dims.shared_bytes,
                                             " bytes of shared (local) memory per block > the "
                                             "device's ",
                                             device.local_mem_bytes, " (", device.name, ")"));
  }
  return absl::OkStatus();
}

std::string DescribeOpenClDevices(const std::vector<OpenClDevice>& devices) {
  if (devices.empty()) return "";
  std::string out = "OpenCL: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    const OpenClDevice& d = devices[i];
    out += StrCat(i ? ", " : "", d.platform, "/", d.name, " (", d.type, ", ", d.compute_units,
                  " CUs)");
  }
  return out;
}

}  // namespace kiln::compiler::codegen

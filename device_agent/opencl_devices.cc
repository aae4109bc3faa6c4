#include "device_agent/opencl_devices.h"

#include "base/str.h"

#ifdef KILN_HAS_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

namespace kiln::agent {

#ifdef KILN_HAS_OPENCL
namespace {

std::string PlatformInfo(cl_platform_id p, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  clGetPlatformInfo(p, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceName(cl_device_id d) {
  size_t size = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_NAME, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  clGetDeviceInfo(d, CL_DEVICE_NAME, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

std::vector<OpenClDevice> ListOpenClDevices() {
  std::vector<OpenClDevice> out;
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
      dev.platform = PlatformInfo(p, CL_PLATFORM_NAME);
      dev.name = DeviceName(d);
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
      out.push_back(std::move(dev));
    }
  }
  return out;
}
#else
std::vector<OpenClDevice> ListOpenClDevices() { return {}; }
#endif

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

}  // namespace kiln::agent

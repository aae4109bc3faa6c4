#include "compiler/codegen/cuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "base/cuda_driver.h"
#include "base/str.h"

namespace kiln::compiler::codegen {
namespace {

// NVRTC's C API (nvrtc.h), resolved at run time.
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

#define KILN_NVRTC_FUNCTIONS(X)                                                             \
  X(nvrtcVersion, nvrtcResult, (int*, int*))                                                \
  X(nvrtcGetErrorString, const char*, (nvrtcResult))                                        \
  X(nvrtcCreateProgram, nvrtcResult,                                                        \
    (nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*)) \
  X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char* const*))              \
  X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t*))                           \
  X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char*))                                 \
  X(nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram, size_t*))                                  \
  X(nvrtcGetPTX, nvrtcResult, (nvrtcProgram, char*))                                        \
  X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t*))                                \
  X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char*))                                      \
  X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram*))

struct Nvrtc {
#define KILN_NVRTC_MEMBER(name, ret, args) ret(*name) args = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
};

// NVRTC from KILN_NVRTC (a path), the loader's search path, or the CUDA
// toolkit's usual place; null with *error when none loads.
const Nvrtc* LoadNvrtc(std::string* error) {
  static Nvrtc api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* env = std::getenv("KILN_NVRTC"); env && *env) names.push_back(env);
    for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}) {
      names.push_back(n);
      names.push_back(StrCat("/usr/local/cuda/lib64/", n));
    }
    void* h = nullptr;
    for (const std::string& n : names) {
      h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      failure =
          "no NVRTC: libnvrtc.so cannot be loaded (install the CUDA toolkit, or set KILN_NVRTC "
          "to its path)";
      return;
    }
#define KILN_NVRTC_RESOLVE(name, ret, args)                  \
  api.name = reinterpret_cast<ret(*) args>(dlsym(h, #name)); \
  if (api.name == nullptr && failure.empty()) {              \
    failure = StrCat("NVRTC lacks ", #name);                 \
  }
    KILN_NVRTC_FUNCTIONS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
  });
  if (!failure.empty()) {
    *error = failure;
    return nullptr;
  }
  return &api;
}

// One NVRTC compilation for --gpu-arch=`arch` (compute_XY: PTX; sm_XY:
// cubin). Fills `out` (ptx or cubin) and appends to `log`.
absl::Status CompileOnce(const Nvrtc& nv, const std::string& source, const std::string& arch,
                         std::string* out, std::string* log) {
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = nv.nvrtcCreateProgram(&prog, source.c_str(), "kiln.cu", 0, nullptr, nullptr);
      r != 0) {
    return absl::InternalError(StrCat("nvrtcCreateProgram: ", nv.nvrtcGetErrorString(r)));
  }
  const std::string arch_opt = StrCat("--gpu-architecture=", arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--fmad=true"};
  const nvrtcResult rc = nv.nvrtcCompileProgram(prog, 3, opts);
  size_t log_size = 0;
  nv.nvrtcGetProgramLogSize(prog, &log_size);
  std::string text(log_size, '\0');
  if (log_size > 0) nv.nvrtcGetProgramLog(prog, text.data());
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
  if (!text.empty()) *log += text + "\n";
  absl::Status status;
  if (rc != 0) {
    status = absl::InvalidArgumentError(
        StrCat("NVRTC (", arch, "): ", nv.nvrtcGetErrorString(rc), "\n", text));
  } else {
    const bool cubin = arch.rfind("sm_", 0) == 0;
    size_t size = 0;
    nvrtcResult r = cubin ? nv.nvrtcGetCUBINSize(prog, &size) : nv.nvrtcGetPTXSize(prog, &size);
    out->assign(size, '\0');
    if (r == 0) r = cubin ? nv.nvrtcGetCUBIN(prog, out->data()) : nv.nvrtcGetPTX(prog, out->data());
    if (r != 0) status = absl::InternalError(StrCat("NVRTC output: ", nv.nvrtcGetErrorString(r)));
    if (!cubin) {
      while (!out->empty() && out->back() == '\0') out->pop_back();
    }
  }
  nv.nvrtcDestroyProgram(&prog);
  return status;
}

}  // namespace

absl::StatusOr<std::string> NvrtcVersion() {
  std::string error;
  const Nvrtc* nv = LoadNvrtc(&error);
  if (nv == nullptr) return absl::UnavailableError(error);
  int major = 0, minor = 0;
  nv->nvrtcVersion(&major, &minor);
  return StrCat(major, ".", minor);
}

absl::StatusOr<CudaBinary> CompileCuda(const std::string& source, const std::string& arch,
                                       bool cubin) {
  std::string error;
  const Nvrtc* nv = LoadNvrtc(&error);
  if (nv == nullptr) return absl::UnavailableError(error);
  const std::string sm = arch.empty() ? "sm_80" : arch;
  CudaBinary b;
  if (absl::Status s = CompileOnce(*nv, source, "compute_" + sm.substr(3), &b.ptx, &b.log);
      !s.ok()) {
    return s;
  }
  if (cubin) {
    if (absl::Status s = CompileOnce(*nv, source, sm, &b.cubin, &b.log); !s.ok()) return s;
  }
  return b;
}

std::string CudaDevice::Arch() const { return StrCat("sm_", major, minor); }

std::vector<CudaDevice> ListCudaDevices() {
  std::vector<CudaDevice> out;
  const cuda::DriverApi* cu = cuda::LoadDriver(nullptr);
  if (cu == nullptr) return out;
  int n = 0;
  if (cu->cuDeviceGetCount(&n) != cuda::kSuccess) return out;
  for (int i = 0; i < n; ++i) {
    cuda::CUdevice d = 0;
    if (cu->cuDeviceGet(&d, i) != cuda::kSuccess) continue;
    CudaDevice dev;
    dev.ordinal = i;
    char name[256] = {};
    cu->cuDeviceGetName(name, sizeof(name) - 1, d);
    dev.name = name;
    cu->cuDeviceGetAttribute(&dev.major, cuda::kComputeCapabilityMajor, d);
    cu->cuDeviceGetAttribute(&dev.minor, cuda::kComputeCapabilityMinor, d);
    cu->cuDeviceGetAttribute(&dev.multiprocessors, cuda::kMultiprocessorCount, d);
    cu->cuDeviceGetAttribute(&dev.clock_khz, cuda::kClockRate, d);
    cu->cuDeviceGetAttribute(&dev.max_threads_per_block, cuda::kMaxThreadsPerBlock, d);
    cu->cuDeviceGetAttribute(&dev.shared_mem_per_block, cuda::kMaxSharedMemoryPerBlock, d);
    size_t mem = 0;
    cu->cuDeviceTotalMem_v2(&mem, d);
    dev.global_mem_bytes = static_cast<long long>(mem);
    out.push_back(std::move(dev));
  }
  return out;
}

std::string DescribeCudaDevices(const std::vector<CudaDevice>& devices) {
  if (devices.empty()) return "";
  std::string s = "CUDA: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    const CudaDevice& d = devices[i];
    s += StrCat(i ? ", " : "", d.name, " (", d.Arch(), ", ", d.multiprocessors, " SMs, ",
                d.global_mem_bytes >> 30, " GiB)");
  }
  return s;
}

namespace {

class DriverKernel final : public CudaKernel {
 public:
  DriverKernel(const cuda::DriverApi& cu, CudaDevice device)
      : cu_(cu), device_(std::move(device)) {}
  ~DriverKernel() override {
    if (ctx_ == nullptr) return;
    cu_.cuCtxSetCurrent(ctx_);
    for (auto& b : buffers_) cu_.cuMemFree_v2(b.device);
    if (start_) cu_.cuEventDestroy_v2(start_);
    if (stop_) cu_.cuEventDestroy_v2(stop_);
    if (module_) cu_.cuModuleUnload(module_);
    cu_.cuDevicePrimaryCtxRelease_v2(dev_);
  }

  absl::Status Init(const std::string& source, const std::string& name) {
    auto bin = CompileCuda(source, device_.Arch(), /*cubin=*/true);
    if (!bin.ok()) return bin.status();
    cuda::CUresult r = cu_.cuDeviceGet(&dev_, device_.ordinal);
    if (r == cuda::kSuccess) r = cu_.cuDevicePrimaryCtxRetain(&ctx_, dev_);
    if (r != cuda::kSuccess) return absl::UnavailableError(cu_.Error(r, "opening the device"));
    cu_.cuCtxSetCurrent(ctx_);
    r = cu_.cuModuleLoadData(&module_, bin->cubin.data());
    if (r != cuda::kSuccess) return absl::InternalError(cu_.Error(r, "cuModuleLoadData"));
    r = cu_.cuModuleGetFunction(&function_, module_, name.c_str());
    if (r != cuda::kSuccess) {
      return absl::InvalidArgumentError(cu_.Error(r, StrCat("finding kernel '", name, "'")));
    }
    if ((r = cu_.cuEventCreate(&start_, 0)) != cuda::kSuccess ||
        (r = cu_.cuEventCreate(&stop_, 0)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "cuEventCreate"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> Run(const std::vector<void*>& args, const std::vector<size_t>& sizes,
                             const LaunchDims& dims) override {
    cu_.cuCtxSetCurrent(ctx_);
    if (int64_t threads = dims.block[0] * dims.block[1] * dims.block[2];
        threads > device_.max_threads_per_block) {
      return absl::InvalidArgumentError(
          StrCat(threads, " threads per block > the device's ", device_.max_threads_per_block));
    }
    if (dims.shared_bytes > device_.shared_mem_per_block) {
      return absl::InvalidArgumentError(StrCat(dims.shared_bytes,
                                               " bytes of shared memory per block > the device's ",
                                               device_.shared_mem_per_block));
    }
    // Device copies, reused while the same host buffers come back.
    const bool same = buffers_.size() == args.size() &&
                      std::equal(args.begin(), args.end(), buffers_.begin(),
                                 [&](void* a, const Buffer& b) { return a == b.host; }) &&
                      std::equal(sizes.begin(), sizes.end(), buffers_.begin(),
                                 [](size_t s, const Buffer& b) { return s == b.bytes; });
    if (!same) {
      for (auto& b : buffers_) cu_.cuMemFree_v2(b.device);
      buffers_.clear();
      for (size_t i = 0; i < args.size(); ++i) {
        Buffer b{args[i], sizes[i], 0};
        if (cuda::CUresult r = cu_.cuMemAlloc_v2(&b.device, std::max<size_t>(sizes[i], 4));
            r != cuda::kSuccess) {
          return absl::ResourceExhaustedError(
              cu_.Error(r, StrCat("allocating ", sizes[i], " bytes")));
        }
        buffers_.push_back(b);
        if (cuda::CUresult r = cu_.cuMemcpyHtoD_v2(b.device, args[i], sizes[i]);
            r != cuda::kSuccess) {
          return absl::InternalError(cu_.Error(r, "copying an argument to the device"));
        }
      }
    }
    std::vector<void*> params;
    for (auto& b : buffers_) params.push_back(&b.device);
    cu_.cuEventRecord(start_, nullptr);
    cuda::CUresult r = cu_.cuLaunchKernel(
        function_, static_cast<unsigned>(dims.grid[0]), static_cast<unsigned>(dims.grid[1]),
        static_cast<unsigned>(dims.grid[2]), static_cast<unsigned>(dims.block[0]),
        static_cast<unsigned>(dims.block[1]), static_cast<unsigned>(dims.block[2]), 0, nullptr,
        params.data(), nullptr);
    if (r != cuda::kSuccess) return absl::InternalError(cu_.Error(r, "cuLaunchKernel"));
    cu_.cuEventRecord(stop_, nullptr);
    if ((r = cu_.cuEventSynchronize(stop_)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "running the kernel"));
    }
    float ms = 0;
    cu_.cuEventElapsedTime(&ms, start_, stop_);
    const Buffer& out = buffers_.back();
    if ((r = cu_.cuMemcpyDtoH_v2(out.host, out.device, out.bytes)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "copying the output back"));
    }
    return ms / 1000.0;
  }

  const CudaDevice& device() const override { return device_; }

 private:
  struct Buffer {
    void* host;
    size_t bytes;
    cuda::CUdeviceptr device;
  };
  const cuda::DriverApi& cu_;
  CudaDevice device_;
  cuda::CUdevice dev_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUmodule module_ = nullptr;
  cuda::CUfunction function_ = nullptr;
  cuda::CUevent start_ = nullptr, stop_ = nullptr;
  std::vector<Buffer> buffers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::Build(const std::string& device_id,
                                                              const std::string& source,
                                                              const std::string& name) {
  std::string error;
  const cuda::DriverApi* cu = cuda::LoadDriver(&error);
  if (cu == nullptr) return absl::UnavailableError(error);
  std::vector<CudaDevice> devices = ListCudaDevices();
  if (devices.empty()) return absl::NotFoundError("no CUDA device on this machine");
  const CudaDevice* chosen = &devices[0];
  if (!device_id.empty()) {
    chosen = nullptr;
    std::string names;
    for (const CudaDevice& d : devices) {
      if (DeviceId(d.name) == device_id) chosen = &d;
      names += StrCat(names.empty() ? "" : ", ", DeviceId(d.name));
    }
    if (chosen == nullptr) {
      return absl::NotFoundError(
          StrCat("no CUDA device '", device_id, "' on this machine (there are: ", names, ")"));
    }
  }
  auto k = std::make_unique<DriverKernel>(*cu, *chosen);
  if (absl::Status s = k->Init(source, name); !s.ok()) return s;
  return k;
}

}  // namespace kiln::compiler::codegen

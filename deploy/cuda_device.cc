// CUDA modules (device.h) through the driver API opened at run time
// (base/cuda_driver.h): no link-time dependency on CUDA. The launch plan's
// kernels are captured into a CUDA graph on the first run and the graph is
// replayed after (one launch per run instead of one per kernel: at batch 1
// the launches are much of a model's time); where the driver has no graphs,
// capture fails, or KILN_CUDA_GRAPH=0, kernels are launched one by one.
#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/cuda_driver.h"
#include "base/str.h"
#include "deploy/device.h"

namespace kiln::deploy {
namespace {

class CudaProgram final : public DeviceProgram {
 public:
  CudaProgram(const cuda::DriverApi& cu, int ordinal, GpuDevice device)
      : cu_(cu), ordinal_(ordinal), device_(std::move(device)), name_(device_.name) {}
  ~CudaProgram() override {
    if (ctx_ == nullptr) return;
    cu_.cuCtxSetCurrent(ctx_);
    if (start_) cu_.cuEventDestroy_v2(start_);
    if (stop_) cu_.cuEventDestroy_v2(stop_);
    if (exec_) cu_.cuGraphExecDestroy(exec_);
    if (graph_) cu_.cuGraphDestroy(graph_);
    if (stream_) cu_.cuStreamDestroy_v2(stream_);
    for (cuda::CUdeviceptr p : allocations_) cu_.cuMemFree_v2(p);
    if (module_) cu_.cuModuleUnload(module_);
    cu_.cuDevicePrimaryCtxRelease_v2(dev_);
  }

  absl::Status Init(std::string_view image, std::vector<Launch> launches, const Manifest& manifest,
                    std::string_view weights) {
    cuda::CUresult r = cu_.cuDeviceGet(&dev_, ordinal_);
    if (r == cuda::kSuccess) r = cu_.cuDevicePrimaryCtxRetain(&ctx_, dev_);
    if (r != cuda::kSuccess) return absl::UnavailableError(cu_.Error(r, "opening " + name_));
    cu_.cuCtxSetCurrent(ctx_);
    if ((r = cu_.cuStreamCreate(&stream_, cuda::kStreamNonBlocking)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "cuStreamCreate"));
    }
    const char* env = std::getenv("KILN_CUDA_GRAPH");
    use_graph_ = cu_.has_graphs && !(env && std::string(env) == "0");
    // cuModuleLoadData reads PTX as a NUL-terminated string.
    std::string bytes(image);
    bytes.push_back('\0');
    if ((r = cu_.cuModuleLoadData(&module_, bytes.data())) != cuda::kSuccess) {
      return absl::InvalidArgumentError(cu_.Error(r, "loading the device code on " + name_));
    }
    launches_ = std::move(launches);
    for (const Launch& l : launches_) {
      cuda::CUfunction f = nullptr;
      if ((r = cu_.cuModuleGetFunction(&f, module_, l.kernel.c_str())) != cuda::kSuccess) {
        return absl::InvalidArgumentError(StrCat("the device code has no kernel '", l.kernel, "'"));
      }
      functions_.push_back(f);
      int threads = 0, shared = 0;
      cu_.cuFuncGetAttribute(&threads, cuda::kFuncMaxThreadsPerBlock, f);
      cu_.cuFuncGetAttribute(&shared, cuda::kFuncSharedSizeBytes, f);
      if (absl::Status s = CheckLaunch(l, device_, threads, shared); !s.ok()) return s;
    }
    auto alloc = [&](size_t bytes, cuda::CUdeviceptr* out) -> absl::Status {
      if (cuda::CUresult e = cu_.cuMemAlloc_v2(out, std::max<size_t>(bytes, 256));
          e != cuda::kSuccess) {
        return absl::ResourceExhaustedError(
            cu_.Error(e, StrCat("allocating ", bytes, " bytes on ", name_)));
      }
      allocations_.push_back(*out);
      return absl::OkStatus();
    };
    if (auto s = alloc(weights.size(), &weights_); !s.ok()) return s;
    if (!weights.empty() &&
        (r = cu_.cuMemcpyHtoD_v2(weights_, weights.data(), weights.size())) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "uploading the weights"));
    }
    if (auto s = alloc(static_cast<size_t>(manifest.workspace_bytes), &workspace_); !s.ok()) {
      return s;
    }
    for (const TensorInfo& t : manifest.inputs) {
      input_bytes_.push_back(static_cast<size_t>(t.ByteSize()));
      if (auto s = alloc(input_bytes_.back(), &inputs_.emplace_back()); !s.ok()) return s;
    }
    for (const TensorInfo& t : manifest.outputs) {
      output_bytes_.push_back(static_cast<size_t>(t.ByteSize()));
      if (auto s = alloc(output_bytes_.back(), &outputs_.emplace_back()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Run(const std::vector<const void*>& inputs,
                   const std::vector<void*>& outputs) override {
    cu_.cuCtxSetCurrent(ctx_);
    cuda::CUresult r = cuda::kSuccess;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (input_bytes_[i] == 0) continue;
      if ((r = cu_.cuMemcpyHtoDAsync_v2(inputs_[i], inputs[i], input_bytes_[i], stream_)) !=
          cuda::kSuccess) {
        return absl::InternalError(cu_.Error(r, "copying an input to the device"));
      }
    }
    if (use_graph_ && exec_ == nullptr) Capture();
    if (exec_ != nullptr) {
      if ((r = cu_.cuGraphLaunch(exec_, stream_)) != cuda::kSuccess) {
        return absl::InternalError(cu_.Error(r, "launching the model's graph"));
      }
    } else if (absl::Status s = LaunchAll(); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (output_bytes_[i] == 0) continue;
      if ((r = cu_.cuMemcpyDtoHAsync_v2(outputs[i], outputs_[i], output_bytes_[i], stream_)) !=
          cuda::kSuccess) {
        return absl::InternalError(cu_.Error(r, "copying an output from the device"));
      }
    }
    if ((r = cu_.cuStreamSynchronize(stream_)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "running the model on " + name_));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> TimeLaunches(int runs) override {
    if (runs < 1) return 0.0;
    cu_.cuCtxSetCurrent(ctx_);
    cuda::CUresult r = cuda::kSuccess;
    if (start_ == nullptr && ((r = cu_.cuEventCreate(&start_, 0)) != cuda::kSuccess ||
                              (r = cu_.cuEventCreate(&stop_, 0)) != cuda::kSuccess)) {
      return absl::InternalError(cu_.Error(r, "cuEventCreate"));
    }
    cu_.cuEventRecord(start_, stream_);
    for (int i = 0; i < runs; ++i) {
      if (exec_ != nullptr) {
        if ((r = cu_.cuGraphLaunch(exec_, stream_)) != cuda::kSuccess) {
          return absl::InternalError(cu_.Error(r, "launching the model's graph"));
        }
      } else if (absl::Status s = LaunchAll(); !s.ok()) {
        return s;
      }
    }
    cu_.cuEventRecord(stop_, stream_);
    if ((r = cu_.cuEventSynchronize(stop_)) != cuda::kSuccess) {
      return absl::InternalError(cu_.Error(r, "running the launches on " + name_));
    }
    float ms = 0;
    cu_.cuEventElapsedTime(&ms, start_, stop_);
    return ms / 1000.0;
  }

  std::string Describe() const override { return "CUDA: " + name_; }

 private:
  // Records every launch of the plan into a graph (not run while captured);
  // on any failure the graph is given up and kernels are launched one by one.
  void Capture() {
    use_graph_ = false;  // tried once
    if (cu_.cuStreamBeginCapture_v2(stream_, cuda::kStreamCaptureModeThreadLocal) !=
        cuda::kSuccess) {
      return;
    }
    const absl::Status launched = LaunchAll();
    cuda::CUgraph graph = nullptr;
    const bool ended = cu_.cuStreamEndCapture(stream_, &graph) == cuda::kSuccess;
    if (!launched.ok() || !ended || graph == nullptr) {
      if (graph) cu_.cuGraphDestroy(graph);
      return;
    }
    if (cu_.cuGraphInstantiateWithFlags(&exec_, graph, 0) != cuda::kSuccess) {
      exec_ = nullptr;
      cu_.cuGraphDestroy(graph);
      return;
    }
    graph_ = graph;
  }

  absl::Status LaunchAll() {
    cuda::CUresult r = cuda::kSuccess;
    std::vector<cuda::CUdeviceptr> values;
    std::vector<void*> params;
    for (size_t c = 0; c < launches_.size(); ++c) {
      const Launch& l = launches_[c];
      values.clear();
      for (const LaunchArg& a : l.args) {
        const cuda::CUdeviceptr base = a.kind == 'i'   ? inputs_[a.index]
                                       : a.kind == 'o' ? outputs_[a.index]
                                       : a.kind == 'w' ? weights_
                                                       : workspace_;
        values.push_back(base + static_cast<cuda::CUdeviceptr>(a.offset));
      }
      params.clear();
      for (cuda::CUdeviceptr& v : values) params.push_back(&v);
      r = cu_.cuLaunchKernel(functions_[c], static_cast<unsigned>(l.grid[0]),
                             static_cast<unsigned>(l.grid[1]), static_cast<unsigned>(l.grid[2]),
                             static_cast<unsigned>(l.block[0]), static_cast<unsigned>(l.block[1]),
                             static_cast<unsigned>(l.block[2]), 0, stream_, params.data(), nullptr);
      if (r != cuda::kSuccess) return absl::InternalError(cu_.Error(r, "launching " + l.kernel));
    }
    return absl::OkStatus();
  }

  const cuda::DriverApi& cu_;
  int ordinal_;
  GpuDevice device_;
  std::string name_;
  cuda::CUdevice dev_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUmodule module_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  cuda::CUevent start_ = nullptr, stop_ = nullptr;  // TimeLaunches
  bool use_graph_ = false;
  cuda::CUgraph graph_ = nullptr;
  cuda::CUgraphExec exec_ = nullptr;
  std::vector<Launch> launches_;
  std::vector<cuda::CUfunction> functions_;
  std::vector<cuda::CUdeviceptr> allocations_;
  cuda::CUdeviceptr weights_ = 0, workspace_ = 0;
  std::vector<cuda::CUdeviceptr> inputs_, outputs_;
  std::vector<size_t> input_bytes_, output_bytes_;
};

// The devices with their properties, in the driver's order.
std::vector<GpuDevice> CudaDevices(const cuda::DriverApi& cu) {
  std::vector<GpuDevice> out;
  int count = 0;
  if (cu.cuDeviceGetCount(&count) != cuda::kSuccess) return out;
  for (int i = 0; i < count; ++i) {
    cuda::CUdevice d = 0;
    if (cu.cuDeviceGet(&d, i) != cuda::kSuccess) continue;
    auto attribute = [&](int what) {
      int v = 0;
      cu.cuDeviceGetAttribute(&v, what, d);
      return v;
    };
    GpuDevice g;
    char name[256] = {};
    cu.cuDeviceGetName(name, sizeof(name) - 1, d);
    g.name = name;
    g.type = "gpu";
    g.arch = StrCat("sm_", attribute(cuda::kComputeCapabilityMajor),
                    attribute(cuda::kComputeCapabilityMinor));
    g.compute_units = attribute(cuda::kMultiprocessorCount);
    g.clock_mhz = attribute(cuda::kClockRate) / 1000;
    g.local_mem_bytes = attribute(cuda::kMaxSharedMemoryPerBlock);
    g.max_threads_per_block = attribute(cuda::kMaxThreadsPerBlock);
    for (int k = 0; k < 3; ++k) g.max_block_dims[k] = attribute(cuda::kMaxBlockDimX + k);
    size_t mem = 0;
    cu.cuDeviceTotalMem_v2(&mem, d);
    g.global_mem_bytes = static_cast<long long>(mem);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::vector<GpuDevice> ListCudaDevices() {
  const cuda::DriverApi* cu = cuda::LoadDriver(nullptr);
  return cu == nullptr ? std::vector<GpuDevice>{} : CudaDevices(*cu);
}

absl::StatusOr<std::unique_ptr<DeviceProgram>> LoadCudaProgram(
    std::string_view ptx, std::string_view cubin, std::vector<Launch> launches,
    const Manifest& manifest, std::string_view weights, const std::string& device) {
  std::string error;
  const cuda::DriverApi* cu = cuda::LoadDriver(&error);
  if (cu == nullptr) return absl::UnavailableError(error);
  std::vector<GpuDevice> devices = CudaDevices(*cu);
  if (devices.empty()) return absl::UnavailableError("no CUDA device on this machine");
  std::vector<std::string> ids;
  for (const GpuDevice& d : devices) ids.push_back(DeviceId(d.name));
  auto index = ChooseDevice(device, "cuda", ids, manifest);
  if (!index.ok()) return index.status();
  const int chosen = static_cast<int>(*index);
  const bool native =
      !cubin.empty() && TargetOption(manifest.target, "arch") == devices[*index].arch;
  auto program = std::make_unique<CudaProgram>(*cu, chosen, devices[*index]);
  if (absl::Status s = program->Init(native ? cubin : ptx, std::move(launches), manifest, weights);
      !s.ok()) {
    return s;
  }
  return program;
}

}  // namespace kiln::deploy

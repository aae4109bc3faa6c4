// GPU modules on OpenCL devices, through the ICD loader opened at run time
// (dlopen "libOpenCL.so.1"): no link-time dependency on OpenCL. The launch
// plan parser is here too (device.h).
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <utility>

#include "base/str.h"
#include "deploy/device.h"

#if __has_include(<CL/cl.h>)
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#define KILN_DEPLOY_OPENCL 1
#endif

namespace kiln::deploy {

std::string TargetOption(const std::string& spec, const std::string& key) {
  const size_t at = spec.find(" -" + key + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 3;
  return spec.substr(from, spec.find(' ', from) - from);
}

absl::StatusOr<size_t> ChooseDevice(const std::string& device, const std::string& kind,
                                    const std::vector<std::string>& ids, const Manifest& manifest) {
  if (device.empty()) {
    const std::string want = TargetOption(manifest.target, "device");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!want.empty() && ids[i] == want) return i;
    }
    return size_t{0};
  }
  const std::string prefix = kind + ":";
  int64_t n = -1;
  if (device.rfind(prefix, 0) != 0 ||
      !ParseInt64(std::string_view(device).substr(prefix.size()), &n) || n < 0) {
    return absl::InvalidArgumentError(StrCat("device '", device, "' is not ", kind,
                                             ":N (this artifact is for a ", kind, " target)"));
  }
  if (n >= static_cast<int64_t>(ids.size())) {
    std::string names;
    for (size_t i = 0; i < ids.size(); ++i) {
      names += StrCat(i ? ", " : "", kind, ":", i, " ", ids[i]);
    }
    return absl::NotFoundError(StrCat("no device ", device, " here; there are: ", names));
  }
  return static_cast<size_t>(n);
}

absl::StatusOr<std::vector<Launch>> ParseLaunchPlan(std::string_view text, const Manifest& manifest,
                                                    int64_t weights_bytes) {
  std::vector<Launch> out;
  int line_no = 0;
  for (std::string_view line : StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          StrCat("launch plan line ", line_no, ": ", why, " ('", line.substr(0, 80), "')"));
    };
    std::vector<std::string_view> f = StrSplit(line, ' ');
    if (line_no == 1) {
      if (line != "kiln-launch 1") return bad("expected the header 'kiln-launch 1'");
      continue;
    }
    if (f[0] != "call") continue;  // unknown records: ignored (forward compatibility)
    if (f.size() < 8) return bad("a call needs a kernel, 3 grid and 3 block sizes");
    Launch l;
    l.kernel = std::string(f[1]);
    int64_t threads = 1;
    for (int d = 0; d < 3; ++d) {
      if (!ParseInt64(f[2 + d], &l.grid[d]) || !ParseInt64(f[5 + d], &l.block[d]) ||
          l.grid[d] < 1 || l.block[d] < 1 || l.grid[d] > (int64_t{1} << 31) || l.block[d] > 4096) {
        return bad("a grid or block size out of range");
      }
      threads *= l.block[d];
    }
    if (threads > 4096) return bad("more than 4096 threads per block");
    for (size_t a = 8; a < f.size(); ++a) {
      std::string_view arg = f[a];
      const size_t plus = arg.find('+');
      if (arg.empty() || plus == std::string_view::npos) return bad("an argument is not KIND+OFF");
      LaunchArg la;
      la.kind = arg[0];
      if (!ParseInt64(arg.substr(plus + 1), &la.offset) || la.offset < 0) {
        return bad("an argument's offset is not a number");
      }
      int64_t limit = 0;
      if (la.kind == 'i' || la.kind == 'o') {
        const auto& list = la.kind == 'i' ? manifest.inputs : manifest.outputs;
        int64_t index = -1;
        if (!ParseInt64(arg.substr(1, plus - 1), &index) || index < 0 ||
            index >= static_cast<int64_t>(list.size())) {
          return bad("an argument names a missing input or output");
        }
        la.index = static_cast<int>(index);
        limit = list[la.index].ByteSize();
      } else if (la.kind == 'w' && plus == 1) {
        limit = weights_bytes;
      } else if (la.kind == 's' && plus == 1) {
        limit = manifest.workspace_bytes;
      } else {
        return bad("an argument of unknown kind");
      }
      if (la.offset > limit) return bad("an argument's offset is past its buffer");
      l.args.push_back(la);
    }
    out.push_back(std::move(l));
  }
  if (line_no == 0 || out.empty()) return absl::InvalidArgumentError("empty launch plan");
  return out;
}

absl::Status CheckLaunch(const Launch& launch, const GpuDevice& device, int64_t kernel_threads,
                         int64_t shared_bytes) {
  int64_t threads = 1;
  for (int k = 0; k < 3; ++k) {
    if (launch.grid[k] < 1 || launch.block[k] < 1) {
      return absl::InvalidArgumentError(StrCat(
          "kernel ", launch.kernel, ": a launch needs at least one block and one thread per axis"));
    }
    threads *= launch.block[k];
    if (device.max_block_dims[k] > 0 && launch.block[k] > device.max_block_dims[k]) {
      return absl::InvalidArgumentError(StrCat(
          "kernel ", launch.kernel, ": threads per block along ", "xyz"[k], ": ", launch.block[k],
          " > the device's ", device.max_block_dims[k], " (", device.name, ")"));
    }
  }
  const int64_t limit = kernel_threads > 0 && (device.max_threads_per_block <= 0 ||
                                               kernel_threads < device.max_threads_per_block)
                            ? kernel_threads
                            : device.max_threads_per_block;
  if (limit > 0 && threads > limit) {
    return absl::InvalidArgumentError(StrCat(
        "kernel ", launch.kernel, ": ", threads, " threads per block > the ",
        limit == kernel_threads ? "kernel's" : "device's", " ", limit, " (", device.name, ")"));
  }
  if (device.local_mem_bytes > 0 && shared_bytes > device.local_mem_bytes) {
    return absl::InvalidArgumentError(StrCat("kernel ", launch.kernel, ": ", shared_bytes,
                                             " bytes of shared (local) memory per block > the "
                                             "device's ",
                                             device.local_mem_bytes, " (", device.name, ")"));
  }
  return absl::OkStatus();
}

std::string DescribeOpenClDevices(const std::vector<GpuDevice>& devices) {
  if (devices.empty()) return "";
  std::string out = "OpenCL: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    const GpuDevice& d = devices[i];
    out += StrCat(i ? ", " : "", d.platform, "/", d.name, " (", d.type, ", ", d.compute_units,
                  " CUs)");
  }
  return out;
}

std::string DescribeCudaDevices(const std::vector<GpuDevice>& devices) {
  if (devices.empty()) return "";
  std::string out = "CUDA: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    const GpuDevice& d = devices[i];
    out += StrCat(i ? ", " : "", d.name, " (", d.arch, ", ", d.compute_units, " SMs, ",
                  d.global_mem_bytes >> 30, " GiB)");
  }
  return out;
}

absl::StatusOr<std::string> FindGpuDevice(bool cuda, const std::string& id) {
  const std::vector<GpuDevice> devices = cuda ? ListCudaDevices() : ListOpenClDevices();
  std::string names;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (DeviceId(devices[i].name) == id) return StrCat(cuda ? "cuda:" : "opencl:", i);
    names += StrCat(i ? ", " : "", DeviceId(devices[i].name));
  }
  return absl::NotFoundError(StrCat("no ", cuda ? "CUDA" : "OpenCL", " device '", id,
                                    "' on this machine (",
                                    names.empty() ? "none" : "there are: " + names, ")"));
}

#ifdef KILN_DEPLOY_OPENCL
namespace {

// The OpenCL entry points kiln uses, resolved from the ICD loader.
struct ClApi {
  void* handle = nullptr;
#define KILN_CL_FUNCTIONS(X)                                                                     \
  X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id*, cl_uint*))                              \
  X(clGetPlatformInfo, cl_int, (cl_platform_id, cl_platform_info, size_t, void*, size_t*))       \
  X(clGetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*))  \
  X(clGetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void*, size_t*))             \
  X(clCreateContext, cl_context,                                                                 \
    (const cl_context_properties*, cl_uint, const cl_device_id*,                                 \
     void (*)(const char*, const void*, size_t, void*), void*, cl_int*))                         \
  X(clCreateCommandQueue, cl_command_queue,                                                      \
    (cl_context, cl_device_id, cl_command_queue_properties, cl_int*))                            \
  X(clCreateProgramWithSource, cl_program,                                                       \
    (cl_context, cl_uint, const char**, const size_t*, cl_int*))                                 \
  X(clBuildProgram, cl_int,                                                                      \
    (cl_program, cl_uint, const cl_device_id*, const char*, void (*)(cl_program, void*), void*)) \
  X(clGetProgramBuildInfo, cl_int,                                                               \
    (cl_program, cl_device_id, cl_program_build_info, size_t, void*, size_t*))                   \
  X(clCreateKernel, cl_kernel, (cl_program, const char*, cl_int*))                               \
  X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void*))                           \
  X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void*, cl_int*))                  \
  X(clEnqueueWriteBuffer, cl_int,                                                                \
    (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void*, cl_uint, const cl_event*,   \
     cl_event*))                                                                                 \
  X(clEnqueueReadBuffer, cl_int,                                                                 \
    (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void*, cl_uint, const cl_event*,         \
     cl_event*))                                                                                 \
  X(clEnqueueNDRangeKernel, cl_int,                                                              \
    (cl_command_queue, cl_kernel, cl_uint, const size_t*, const size_t*, const size_t*, cl_uint, \
     const cl_event*, cl_event*))                                                                \
  X(clFinish, cl_int, (cl_command_queue))                                                        \
  X(clGetKernelWorkGroupInfo, cl_int,                                                            \
    (cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void*, size_t*))                \
  X(clGetEventProfilingInfo, cl_int, (cl_event, cl_profiling_info, size_t, void*, size_t*))      \
  X(clReleaseEvent, cl_int, (cl_event))                                                          \
  X(clReleaseMemObject, cl_int, (cl_mem))                                                        \
  X(clReleaseKernel, cl_int, (cl_kernel))                                                        \
  X(clReleaseProgram, cl_int, (cl_program))                                                      \
  X(clReleaseCommandQueue, cl_int, (cl_command_queue))                                           \
  X(clReleaseContext, cl_int, (cl_context))
#define KILN_CL_MEMBER(name, ret, args) ret(*name) args = nullptr;
  KILN_CL_FUNCTIONS(KILN_CL_MEMBER)
#undef KILN_CL_MEMBER
};

// The loaded API, or why there is none (loaded once per process).
const ClApi* LoadClApi(std::string* error) {
  static ClApi api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"}) {
      api.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (api.handle != nullptr) break;
    }
    if (api.handle == nullptr) {
      failure = "no OpenCL driver: libOpenCL.so.1 (the ICD loader) cannot be loaded";
      return;
    }
#define KILN_CL_RESOLVE(name, ret, args)                              \
  api.name = reinterpret_cast<ret(*) args>(dlsym(api.handle, #name)); \
  if (api.name == nullptr && failure.empty()) {                       \
    failure = StrCat("the OpenCL ICD loader lacks ", #name);          \
  }
    KILN_CL_FUNCTIONS(KILN_CL_RESOLVE)
#undef KILN_CL_RESOLVE
  });
  if (!failure.empty()) {
    *error = failure;
    return nullptr;
  }
  return &api;
}

absl::Status ClError(cl_int code, std::string_view what) {
  return absl::InternalError(StrCat(what, " failed (OpenCL error ", code, ")"));
}

struct ClDevice {
  cl_device_id id;
  GpuDevice info;
};

// A string property of a platform or a device (the API's clGetPlatformInfo
// or clGetDeviceInfo); "" when the driver has none.
template <typename Get, typename Object, typename Info>
std::string InfoString(Get get, Object object, Info what) {
  size_t size = 0;
  if (get(object, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  get(object, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// A device's property of type T (clGetDeviceInfo); 0 when the driver has none.
template <typename T>
T DeviceValue(const ClApi& cl, cl_device_id d, cl_device_info what) {
  T value{};
  if (cl.clGetDeviceInfo(d, what, sizeof(value), &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

std::vector<ClDevice> ClDevices(const ClApi& cl) {
  std::vector<ClDevice> out;
  cl_uint n = 0;
  if (cl.clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) return out;
  std::vector<cl_platform_id> platforms(n);
  cl.clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    const std::string pname = InfoString(cl.clGetPlatformInfo, p, CL_PLATFORM_NAME);
    cl_uint nd = 0;
    if (cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) {
      continue;
    }
    std::vector<cl_device_id> ids(nd);
    cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
    for (cl_device_id d : ids) {
      GpuDevice g;
      g.platform = pname;
      g.name = InfoString(cl.clGetDeviceInfo, d, CL_DEVICE_NAME);
      const auto type = DeviceValue<cl_device_type>(cl, d, CL_DEVICE_TYPE);
      g.type = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
               : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
               : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                     : "other";
      g.version = InfoString(cl.clGetDeviceInfo, d, CL_DEVICE_VERSION);
      g.compute_units = static_cast<int>(DeviceValue<cl_uint>(cl, d, CL_DEVICE_MAX_COMPUTE_UNITS));
      g.clock_mhz = static_cast<int>(DeviceValue<cl_uint>(cl, d, CL_DEVICE_MAX_CLOCK_FREQUENCY));
      g.global_mem_bytes =
          static_cast<long long>(DeviceValue<cl_ulong>(cl, d, CL_DEVICE_GLOBAL_MEM_SIZE));
      g.local_mem_bytes =
          static_cast<long long>(DeviceValue<cl_ulong>(cl, d, CL_DEVICE_LOCAL_MEM_SIZE));
      g.max_threads_per_block =
          static_cast<int64_t>(DeviceValue<size_t>(cl, d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
      size_t items[3] = {0, 0, 0};
      cl.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(items), items, nullptr);
      for (int k = 0; k < 3; ++k) g.max_block_dims[k] = static_cast<int64_t>(items[k]);
      out.push_back({d, std::move(g)});
    }
  }
  return out;
}

class ClProgram final : public DeviceProgram {
 public:
  ClProgram(const ClApi& cl, ClDevice device) : cl_(cl), device_(std::move(device)) {}
  ~ClProgram() override {
    for (cl_kernel k : kernels_) cl_.clReleaseKernel(k);
    for (cl_mem m : buffers_) cl_.clReleaseMemObject(m);
    if (program_) cl_.clReleaseProgram(program_);
    if (queue_) cl_.clReleaseCommandQueue(queue_);
    if (context_) cl_.clReleaseContext(context_);
  }

  absl::Status Init(std::string_view source, std::vector<Launch> launches, const Manifest& manifest,
                    std::string_view weights) {
    cl_int err = CL_SUCCESS;
    context_ = cl_.clCreateContext(nullptr, 1, &device_.id, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateContext");
    // Profiling on: TimeLaunches reads the device's clock from events.
    queue_ = cl_.clCreateCommandQueue(context_, device_.id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateCommandQueue");
    const char* text = source.data();
    const size_t length = source.size();
    program_ = cl_.clCreateProgramWithSource(context_, 1, &text, &length, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateProgramWithSource");
    if (cl_.clBuildProgram(program_, 1, &device_.id, "", nullptr, nullptr) != CL_SUCCESS) {
      size_t size = 0;
      cl_.clGetProgramBuildInfo(program_, device_.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      std::string log(size, '\0');
      cl_.clGetProgramBuildInfo(program_, device_.id, CL_PROGRAM_BUILD_LOG, size, log.data(),
                                nullptr);
      return absl::InvalidArgumentError(
          StrCat("the device program does not build on ", Describe(), ": ", log));
    }
    launches_ = std::move(launches);
    for (const Launch& l : launches_) {
      cl_kernel k = cl_.clCreateKernel(program_, l.kernel.c_str(), &err);
      if (err != CL_SUCCESS) {
        return absl::InvalidArgumentError(
            StrCat("the device program has no kernel '", l.kernel, "'"));
      }
      kernels_.push_back(k);
      // The kernel's own limit (its registers and local memory on this
      // device) within the device's.
      size_t limit = 0;
      cl_ulong local = 0;
      cl_.clGetKernelWorkGroupInfo(k, device_.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof(limit), &limit,
                                   nullptr);
      cl_.clGetKernelWorkGroupInfo(k, device_.id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(local), &local,
                                   nullptr);
      if (absl::Status s = CheckLaunch(l, device_.info, static_cast<int64_t>(limit),
                                       static_cast<int64_t>(local));
          !s.ok()) {
        return s;
      }
    }
    // Buffers: weights (uploaded now), workspace, then inputs and outputs.
    auto make = [&](size_t bytes, cl_mem* out) -> absl::Status {
      *out = cl_.clCreateBuffer(context_, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 64), nullptr,
                                &err);
      if (err != CL_SUCCESS) {
        return absl::ResourceExhaustedError(StrCat("cannot allocate ", bytes, " bytes on ",
                                                   Describe(), " (OpenCL error ", err, ")"));
      }
      buffers_.push_back(*out);
      return absl::OkStatus();
    };
    if (auto s = make(weights.size(), &weights_); !s.ok()) return s;
    if (!weights.empty()) {
      err = cl_.clEnqueueWriteBuffer(queue_, weights_, CL_TRUE, 0, weights.size(), weights.data(),
                                     0, nullptr, nullptr);
      if (err != CL_SUCCESS) return ClError(err, "uploading the weights");
    }
    if (auto s = make(static_cast<size_t>(manifest.workspace_bytes), &workspace_); !s.ok()) {
      return s;
    }
    for (const TensorInfo& t : manifest.inputs) {
      input_bytes_.push_back(static_cast<size_t>(t.ByteSize()));
      if (auto s = make(input_bytes_.back(), &inputs_.emplace_back()); !s.ok()) return s;
    }
    for (const TensorInfo& t : manifest.outputs) {
      output_bytes_.push_back(static_cast<size_t>(t.ByteSize()));
      if (auto s = make(output_bytes_.back(), &outputs_.emplace_back()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Run(const std::vector<const void*>& inputs,
                   const std::vector<void*>& outputs) override {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (input_bytes_[i] == 0) continue;
      cl_int err = cl_.clEnqueueWriteBuffer(queue_, inputs_[i], CL_FALSE, 0, input_bytes_[i],
                                            inputs[i], 0, nullptr, nullptr);
      if (err != CL_SUCCESS) return ClError(err, "copying an input to the device");
    }
    if (absl::Status s = EnqueueLaunches(nullptr); !s.ok()) return s;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (output_bytes_[i] == 0) continue;
      cl_int err = cl_.clEnqueueReadBuffer(queue_, outputs_[i], CL_FALSE, 0, output_bytes_[i],
                                           outputs[i], 0, nullptr, nullptr);
      if (err != CL_SUCCESS) return ClError(err, "copying an output from the device");
    }
    cl_int err = cl_.clFinish(queue_);
    if (err != CL_SUCCESS) return ClError(err, "running the model on the device");
    return absl::OkStatus();
  }

  absl::StatusOr<double> TimeLaunches(int runs) override {
    if (runs < 1 || launches_.empty()) return 0.0;
    // The first run's launches and the last's carry events: the time from
    // the first's start to the last's end.
    std::vector<cl_event> head, tail;
    absl::Status launched = absl::OkStatus();
    for (int r = 0; r < runs && launched.ok(); ++r) {
      launched = EnqueueLaunches(r == 0 ? &head : r == runs - 1 ? &tail : nullptr);
    }
    const cl_int err = cl_.clFinish(queue_);
    const std::vector<cl_event>& end_run = runs == 1 ? head : tail;
    cl_ulong start = 0, end = 0;
    if (launched.ok() && err == CL_SUCCESS && !head.empty() && !end_run.empty()) {
      cl_.clGetEventProfilingInfo(head.front(), CL_PROFILING_COMMAND_START, sizeof(start), &start,
                                  nullptr);
      cl_.clGetEventProfilingInfo(end_run.back(), CL_PROFILING_COMMAND_END, sizeof(end), &end,
                                  nullptr);
    }
    for (cl_event e : head) cl_.clReleaseEvent(e);
    for (cl_event e : tail) cl_.clReleaseEvent(e);
    if (!launched.ok()) return launched;
    if (err != CL_SUCCESS) return ClError(err, "running the launches on the device");
    return end > start ? static_cast<double>(end - start) * 1e-9 : 0.0;
  }

  std::string Describe() const override {
    return StrCat("OpenCL: ", device_.info.platform, "/", device_.info.name);
  }

 private:
  // Enqueues every launch of the plan, with an event each into `events`
  // when it is not null.
  absl::Status EnqueueLaunches(std::vector<cl_event>* events) {
    for (size_t c = 0; c < launches_.size(); ++c) {
      const Launch& l = launches_[c];
      cl_kernel k = kernels_[c];
      for (size_t a = 0; a < l.args.size(); ++a) {
        const LaunchArg& arg = l.args[a];
        cl_mem m = arg.kind == 'i'   ? inputs_[arg.index]
                   : arg.kind == 'o' ? outputs_[arg.index]
                   : arg.kind == 'w' ? weights_
                                     : workspace_;
        const cl_ulong off = static_cast<cl_ulong>(arg.offset);
        if (cl_.clSetKernelArg(k, static_cast<cl_uint>(2 * a), sizeof(cl_mem), &m) != CL_SUCCESS ||
            cl_.clSetKernelArg(k, static_cast<cl_uint>(2 * a + 1), sizeof(off), &off) !=
                CL_SUCCESS) {
          return absl::InvalidArgumentError(
              StrCat("kernel ", l.kernel, " does not take argument ", a));
        }
      }
      size_t global[3], local[3];
      for (int d = 0; d < 3; ++d) {
        local[d] = static_cast<size_t>(l.block[d]);
        global[d] = static_cast<size_t>(l.grid[d] * l.block[d]);
      }
      cl_event event = nullptr;
      cl_int err = cl_.clEnqueueNDRangeKernel(queue_, k, 3, nullptr, global, local, 0, nullptr,
                                              events != nullptr ? &event : nullptr);
      if (err != CL_SUCCESS) {
        return ClError(
            err, StrCat("launching ", l.kernel, " (", l.grid[0], "x", l.grid[1], "x", l.grid[2],
                        " blocks of ", l.block[0], "x", l.block[1], "x", l.block[2], ")"));
      }
      if (event != nullptr) events->push_back(event);
    }
    return absl::OkStatus();
  }

  const ClApi& cl_;
  ClDevice device_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::vector<Launch> launches_;
  std::vector<cl_kernel> kernels_;
  std::vector<cl_mem> buffers_;  // every buffer below, released at the end
  cl_mem weights_ = nullptr, workspace_ = nullptr;
  std::vector<cl_mem> inputs_, outputs_;
  std::vector<size_t> input_bytes_, output_bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceProgram>> LoadOpenClProgram(std::string_view source,
                                                                 std::vector<Launch> launches,
                                                                 const Manifest& manifest,
                                                                 std::string_view weights,
                                                                 const std::string& device) {
  std::string error;
  const ClApi* cl = LoadClApi(&error);
  if (cl == nullptr) return absl::UnavailableError(error);
  std::vector<ClDevice> devices = ClDevices(*cl);
  if (devices.empty()) return absl::UnavailableError("no OpenCL device on this machine");
  std::vector<std::string> ids;
  for (const ClDevice& d : devices) ids.push_back(DeviceId(d.info.name));
  auto chosen = ChooseDevice(device, "opencl", ids, manifest);
  if (!chosen.ok()) return chosen.status();
  auto program = std::make_unique<ClProgram>(*cl, devices[*chosen]);
  if (absl::Status s = program->Init(source, std::move(launches), manifest, weights); !s.ok()) {
    return s;
  }
  return program;
}

std::vector<GpuDevice> ListOpenClDevices() {
  std::string error;
  const ClApi* cl = LoadClApi(&error);
  std::vector<GpuDevice> out;
  if (cl == nullptr) return out;
  for (ClDevice& d : ClDevices(*cl)) out.push_back(std::move(d.info));
  return out;
}

#else  // no OpenCL headers at build time

std::vector<GpuDevice> ListOpenClDevices() { return {}; }

absl::StatusOr<std::unique_ptr<DeviceProgram>> LoadOpenClProgram(std::string_view,
                                                                 std::vector<Launch>,
                                                                 const Manifest&, std::string_view,
                                                                 const std::string&) {
  return absl::UnimplementedError("this runtime was built without OpenCL headers");
}

#endif

}  // namespace kiln::deploy

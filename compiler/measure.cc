#include "compiler/measure.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "base/cache_lines.h"
#include "base/cpus.h"
#include "base/str.h"
#include "base/timing.h"
#include "compiler/codegen/module.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "deploy/device.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Leaves the caches as the model leaves them for the kernel: its weights
// and output evicted from every cache level, as TVM's enable_cpu_cache_flush
// does with a kernel's arguments (in a model, a kernel's weights come from
// the last-level cache or memory, not from the L1/L2 a kernel timed over and
// over keeps them in), and its first input, which the producer has just
// written, rewritten in place (in the caches, modified, as the producer
// leaves it; flushed too, a conv's input came from memory and timings
// favoured configs that stream it, which in the model sits in L2). A first
// input the kernel takes packed is a weight, and is evicted. Elsewhere than
// x86-64 and AArch64, writes a 64 MiB buffer instead of evicting. With
// kLastLevel, the weights are then read back and pushed out of the core's
// own cache by reading twice its size of other lines: an L3 that is a victim
// cache (AMD's, Intel's since Skylake-SP) takes them as they leave the L2.
void SetModelCaches(KernelBuffers& b, CacheState state, const CacheSizes& caches) {
  const bool first_is_activation =
      !b.inputs.empty() && !b.args.empty() && b.args[0] == b.inputs[0].data();
  // The kernel's weights: every input but an activation first, and the packed.
  std::vector<CacheBuffer> weights;
  for (size_t i = first_is_activation ? 1 : 0; i < b.inputs.size(); ++i) {
    weights.push_back({b.inputs[i].data(), b.inputs[i].size()});
  }
  for (auto& pk : b.packed) weights.push_back({pk.data(), pk.size()});
  static std::vector<uint8_t>* sweep =
      new std::vector<uint8_t>(static_cast<size_t>(2 * std::max<int64_t>(caches.core_bytes, 1)));
  LeaveCachesAsTheModel(
      weights, {b.output.data(), b.output.size()},
      first_is_activation ? CacheBuffer{b.inputs[0].data(), b.inputs[0].size()} : CacheBuffer{},
      state == CacheState::kLastLevel ? CacheBuffer{sweep->data(), sweep->size()} : CacheBuffer{});
}

// The reference output of the last workload verified: the candidates of a
// batch share their workload and inputs, and the reference implementation is
// naive (seconds for a large MatMul), so it runs once per workload, not once
// per candidate.
class ReferenceCache {
 public:
  absl::Status Get(const Workload& workload, const std::string& canonical, uint64_t seed,
                   const std::vector<const void*>& inputs, std::vector<uint8_t>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (canonical != canonical_ || seed != seed_) {
      canonical_.clear();
      output_.assign(out->size(), 0);
      if (absl::Status s = RunReference(workload, inputs, output_.data()); !s.ok()) return s;
      canonical_ = canonical;
      seed_ = seed;
    }
    *out = output_;
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::string canonical_;
  uint64_t seed_ = 0;
  std::vector<uint8_t> output_;
};

// Floats are verified within an absolute tolerance scaled by the largest
// reference value.
double FloatTolerance(DType dtype, const uint8_t* reference, int64_t n) {
  double max_ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = std::fabs(ElementToDouble(dtype, reference, i));
    if (std::isfinite(v)) max_ref = std::max(max_ref, v);
  }
  return 1e-3 * std::max(1.0, max_ref);
}

// fn(0) .. fn(n - 1) on up to `threads` threads (0: one per core).
void OnThreads(size_t n, int threads, const std::function<void(size_t)>& fn) {
  if (threads <= 0) threads = UsableCpus();
  threads = std::min<int>(threads, static_cast<int>(n));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

Measurement Error(MeasureError kind, std::string message, double build_s = 0) {
  Measurement m;
  m.error = kind;
  m.message = std::move(message);
  m.build_s = build_s;
  return m;
}

// A built candidate: RunTimed(n) runs it n times and returns their time in
// seconds (the CPU's: wall clock; an OpenCL device's: its profiling clock,
// transfers excluded). The first run's output is in buffers.output.
using TimedRuns = std::function<absl::StatusOr<double>(int number)>;

// A GPU candidate on the runtime's own device code: built as a one-kernel
// device module by the artifact's code path (BuildDeviceModule: OpenCL C
// with its buffers as base and offset, or CUDA C compiled by NVRTC for the
// target's architecture), whose one call takes the kernel's inputs and its
// output, loaded by deploy's LoadOpenClProgram / LoadCudaProgram as
// kiln-run loads an artifact (the device the target names), and timed by
// the device's clock (DeviceProgram::TimeLaunches: OpenCL profiling, CUDA
// events). A launch beyond the device's or the kernel's limits fails to
// load, as a build error.
absl::StatusOr<TimedRuns> BuildGpu(const Workload& workload, const Config& config,
                                   const Target& target, KernelBuffers& buffers) {
  auto func = LowerWorkload(workload, config, target, "kiln_kernel", {});
  if (!func.ok()) return func.status();
  EntryPlan plan;
  KernelCall call;
  call.kernel = "kiln_kernel";
  deploy::Manifest manifest;
  manifest.target = target.Spec();
  const std::vector<size_t> bytes = buffers.ArgBytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    const bool output = i + 1 == bytes.size();
    BufferRef ref;
    ref.kind = output ? BufferRef::Kind::kOutput : BufferRef::Kind::kInput;
    ref.index = output ? 0 : static_cast<int>(i);
    call.args.push_back(ref);
    deploy::TensorInfo t;
    t.dtype = DType::kUInt8;
    t.shape = {static_cast<int64_t>(bytes[i])};
    (output ? manifest.outputs : manifest.inputs).push_back(std::move(t));
  }
  plan.calls.push_back(std::move(call));
  auto module = BuildDeviceModule({*func}, plan, target);
  if (!module.ok()) return module.status();
  auto launches = deploy::ParseLaunchPlan(module->launches, manifest, 0);
  if (!launches.ok()) return launches.status();
  // The device the target names (an agent's names its own), else the first.
  const bool cuda = target.kind == TargetKind::kCuda;
  std::string device;
  if (!target.device.empty()) {
    auto found = deploy::FindGpuDevice(cuda, target.device);
    if (!found.ok()) return found.status();
    device = *std::move(found);
  }
  auto program =
      cuda ? deploy::LoadCudaProgram(module->ptx, module->cubin, *std::move(launches), manifest, "",
                                     device)
           : deploy::LoadOpenClProgram(module->source, *std::move(launches), manifest, "", device);
  if (!program.ok()) return program.status();
  std::shared_ptr<deploy::DeviceProgram> p = *std::move(program);
  std::vector<const void*> inputs(buffers.args.begin(), buffers.args.end() - 1);
  void* output = buffers.args.back();
  // The first call copies the inputs in and the output back (what
  // verification reads); every call's runs are then timed on the device.
  auto copied = std::make_shared<bool>(false);
  return TimedRuns([p, inputs, output, copied](int number) -> absl::StatusOr<double> {
    if (!*copied) {
      if (absl::Status s = p->Run(inputs, {output}); !s.ok()) return s;
      *copied = true;
    }
    return p->TimeLaunches(number);
  });
}

}  // namespace

const char* CacheStateName(CacheState state) {
  switch (state) {
    case CacheState::kHot:
      return "hot";
    case CacheState::kLastLevel:
      return "last-level cache";
    case CacheState::kMemory:
      return "memory";
  }
  return "memory";
}

CacheState CacheStateFor(const MeasurePolicy& policy, const CacheSizes& caches) {
  if (!policy.flush_cache) return CacheState::kHot;
  if (policy.model_bytes <= 0 || caches.core_bytes <= 0 || caches.last_level_bytes <= 0) {
    return CacheState::kMemory;
  }
  if (policy.model_bytes <= caches.core_bytes) return CacheState::kHot;
  if (policy.model_bytes <= caches.last_level_bytes / 4 * 3) return CacheState::kLastLevel;
  return CacheState::kMemory;
}

Prebuilt::Prebuilt() = default;
Prebuilt::~Prebuilt() = default;
Prebuilt::Prebuilt(Prebuilt&&) noexcept = default;
Prebuilt& Prebuilt::operator=(Prebuilt&&) noexcept = default;

std::vector<Prebuilt> PrebuildJit(const Workload& workload, const std::vector<Config>& configs,
                                  const Target& target, int threads) {
  std::vector<Prebuilt> built(configs.size());
  OnThreads(configs.size(), threads, [&](size_t i) {
    Prebuilt& b = built[i];
    Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<JitKernel>> kernel = BuildJit(workload, configs[i], target);
    b.build_s = Seconds(Clock::now() - start);
    if (kernel.ok()) {
      b.kernel = *std::move(kernel);
    } else {
      b.status = kernel.status();
    }
  });
  return built;
}

namespace {

// The seeded inputs and the reference output of the last workload built for
// a board: a batch's candidates share them, and a board agent builds its
// candidates one at a time. INVALID_ARGUMENT for a bad workload.
struct RemoteInputs {
  KernelBuffers buffers;
  std::vector<uint8_t> reference;
  double tolerance = 0;
};
absl::StatusOr<std::shared_ptr<const RemoteInputs>> RemoteInputsOf(const Workload& workload,
                                                                   uint64_t seed) {
  static std::mutex mu;
  static std::string* key = new std::string;
  static std::shared_ptr<const RemoteInputs>* last = new std::shared_ptr<const RemoteInputs>;
  const std::string want = StrCat(workload.Canonical(), "#", seed);
  std::lock_guard<std::mutex> lock(mu);
  if (*key == want && *last != nullptr) return *last;
  absl::StatusOr<KernelSignature> sig = workload.Signature();
  if (!sig.ok()) {
    return absl::InvalidArgumentError(StrCat("bad workload: ", sig.status().message()));
  }
  auto in = std::make_shared<RemoteInputs>();
  in->buffers = MakeKernelBuffers(*sig, seed);
  in->reference.assign(in->buffers.output.size(), 0);
  if (absl::Status s = RunReference(workload, in->buffers.input_ptrs, in->reference.data());
      !s.ok()) {
    return absl::InternalError(StrCat("reference implementation failed: ", s.message()));
  }
  in->tolerance =
      FloatTolerance(in->buffers.output_dtype, in->reference.data(), in->buffers.OutputSize());
  *key = want;
  *last = std::move(in);
  return *last;
}

}  // namespace

std::vector<RemoteBuild> BuildRemote(const Workload& workload, const std::vector<Config>& configs,
                                     const Target& target, uint64_t seed, int threads) {
  std::vector<RemoteBuild> built(configs.size());
  auto fail_all = [&](MeasureError kind, std::string message) {
    for (RemoteBuild& b : built) {
      b.error = kind;
      b.message = message;
    }
    return built;
  };
  absl::StatusOr<std::shared_ptr<const RemoteInputs>> shared = RemoteInputsOf(workload, seed);
  if (!shared.ok()) {
    return fail_all(
        absl::IsInvalidArgument(shared.status()) ? MeasureError::kCompile : MeasureError::kRuntime,
        std::string(shared.status().message()));
  }
  const KernelBuffers& buffers = (*shared)->buffers;
  const std::vector<uint8_t>& reference = (*shared)->reference;
  const double tolerance = (*shared)->tolerance;
  const int64_t out_n = buffers.OutputSize();
  OnThreads(configs.size(), threads, [&](size_t i) {
    RemoteBuild& b = built[i];
    const Clock::time_point start = Clock::now();
    auto fail = [&](MeasureError kind, const absl::Status& why) {
      b.error = kind;
      b.message = std::string(why.message());
      b.build_s = Seconds(Clock::now() - start);
    };
    if (absl::Status s = ValidateConfig(workload, target, configs[i]); !s.ok()) {
      return fail(MeasureError::kInvalidConfig, s);
    }
    RemoteKernel& k = b.kernel;
    k.symbol = "kiln_candidate";
    std::vector<PackedInput> packed;
    absl::StatusOr<std::vector<ir::PrimFunc>> funcs =
        LowerKernel(workload, configs[i], target, k.symbol, {}, &packed);
    if (!funcs.ok()) return fail(MeasureError::kCompile, funcs.status());
    // The kernel alone: its packs run here, for this host.
    absl::StatusOr<std::string> object =
        codegen::BuildSharedObjectFromFuncs({funcs->front()}, EntryPlan{}, target);
    if (!object.ok()) return fail(MeasureError::kCompile, object.status());
    k.object = *std::move(object);
    for (size_t in = 0; in < buffers.inputs.size(); ++in) {
      const std::vector<uint8_t>& data = buffers.inputs[in];
      const bool is_packed = std::any_of(packed.begin(), packed.end(), [&](const PackedInput& p) {
        return p.input == static_cast<int>(in);
      });
      if (!is_packed) {
        k.args.emplace_back(data.begin(), data.end());
        continue;
      }
      absl::StatusOr<std::vector<uint8_t>> p =
          PackConstant(workload, configs[i], target, static_cast<int>(in), data);
      if (!p.ok()) return fail(MeasureError::kCompile, p.status());
      k.args.emplace_back(p->begin(), p->end());
    }
    k.first_is_activation =
        !k.args.empty() && std::none_of(packed.begin(), packed.end(),
                                        [](const PackedInput& p) { return p.input == 0; });
    k.reference.assign(reference.begin(), reference.end());
    k.output_dtype = buffers.output_dtype;
    k.tolerance = tolerance;
    k.off_by_one = RoundingTies(workload, out_n);
    b.build_s = Seconds(Clock::now() - start);
  });
  return built;
}

Measurement Measure(const Workload& workload, const Config& config, const MeasurePolicy& policy,
                    const Target& target, uint64_t seed, Prebuilt* prebuilt) {
  if (absl::Status s = ValidateConfig(workload, target, config); !s.ok()) {
    return Error(MeasureError::kInvalidConfig, std::string(s.message()));
  }
  absl::StatusOr<KernelSignature> sig = workload.Signature();
  if (!sig.ok()) {
    return Error(MeasureError::kCompile, StrCat("bad workload: ", sig.status().message()));
  }

  // Inputs: seeded uniform values in [-1, 1]; the output starts as NaN so
  // that an element the kernel never writes cannot pass verification.
  KernelBuffers buffers = MakeKernelBuffers(*sig, seed, std::nanf(""));
  Clock::time_point build_start = Clock::now();
  // A prebuilt kernel's build ran earlier: its time counts, the wait does not.
  // An empty one (a default Prebuilt) is built here.
  if (prebuilt != nullptr && prebuilt->kernel == nullptr && prebuilt->status.ok()) {
    prebuilt = nullptr;
  }
  const double prebuilt_s = prebuilt != nullptr ? prebuilt->build_s : 0;
  TimedRuns time_runs;
  std::unique_ptr<JitKernel> jit;
  if (target.is_gpu()) {
    absl::StatusOr<TimedRuns> built = BuildGpu(workload, config, target, buffers);
    if (!built.ok()) {
      return Error(MeasureError::kCompile, std::string(built.status().message()),
                   Seconds(Clock::now() - build_start));
    }
    time_runs = *std::move(built);
  } else {
    absl::StatusOr<std::unique_ptr<JitKernel>> kernel = absl::UnknownError("not built");
    if (prebuilt == nullptr) {
      kernel = BuildJit(workload, config, target);
    } else if (prebuilt->kernel != nullptr) {
      kernel = std::move(prebuilt->kernel);
    } else {
      kernel = prebuilt->status;
    }
    if (!kernel.ok()) {
      return Error(MeasureError::kCompile, std::string(kernel.status().message()),
                   prebuilt_s + Seconds(Clock::now() - build_start));
    }
    jit = *std::move(kernel);
    if (absl::Status s = PackKernelInputs(*jit, buffers); !s.ok()) {
      return Error(MeasureError::kRuntime, std::string(s.message()),
                   Seconds(Clock::now() - build_start));
    }
    // With flush_cache, every run starts with the caches as the model
    // leaves them (SetModelCaches), and only the runs are timed.
    const CacheState state = CacheStateFor(policy, HostCaches());
    const bool set_caches = state != CacheState::kHot;
    time_runs = [&](int number) {
      return TimeRuns(
          number, set_caches, [&] { SetModelCaches(buffers, state, HostCaches()); },
          [&] { return jit->Run(buffers.args.data()); });
    };
  }
  const double build_s = prebuilt_s + Seconds(Clock::now() - build_start);
  auto fail = [&](MeasureError kind, std::string message) {
    return Error(kind, std::move(message), build_s);
  };
  const int64_t out_n = buffers.OutputSize();
  std::vector<uint8_t> reference(buffers.output.size(), 0);

  if (absl::StatusOr<double> first = time_runs(1); !first.ok()) {
    return fail(MeasureError::kRuntime, std::string(first.status().message()));
  }
  static ReferenceCache* references = new ReferenceCache;
  if (absl::Status s =
          references->Get(workload, workload.Canonical(), seed, buffers.input_ptrs, &reference);
      !s.ok()) {
    return fail(MeasureError::kRuntime, StrCat("reference implementation failed: ", s.message()));
  }
  // Integers and bools: exact, but for the rare rounding ties of a
  // quantizing epilogue (RoundingTies).
  const double tol = FloatTolerance(buffers.output_dtype, reference.data(), out_n);
  std::string detail;
  if (!OutputsMatch(buffers.output_dtype, buffers.output.data(), reference.data(), out_n, 0.0, tol,
                    &detail, RoundingTies(workload, out_n))) {
    return fail(MeasureError::kWrongResult, StrCat(detail, " (tolerance ", tol, ")"));
  }

  TimingLoop loop;
  loop.number = policy.number;
  loop.repeat = policy.repeat;
  loop.min_repeat_ms = policy.min_repeat_ms;
  loop.cooldown_ms = policy.cooldown_ms;
  loop.stop_above_s = policy.stop_above_s;
  absl::StatusOr<TimedCosts> timed = RunTimingLoop(loop, time_runs);
  if (!timed.ok()) return fail(MeasureError::kRuntime, std::string(timed.status().message()));
  Measurement result;
  result.build_s = build_s;
  result.costs_s = std::move(timed->costs_s);
  result.cut_short = timed->cut_short;
  return result;
}

}  // namespace kiln::compiler

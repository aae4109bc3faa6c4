#pragma once
// The operator library's face to the rest of kiln: for any Workload, its
// schedule template's knobs, a default config, lowering to a kernel function,
// JIT-building it for measurement, and a naive reference implementation for
// verifying outputs.
//
// Kernel calling convention (JIT and artifact alike):
//   extern "C" int32_t <name>(void* const* args)
// args[i] points to the buffer of KernelSignature argument i (inputs in order,
// then the output), of that argument's dtype. Returns 0 on success.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/lower/options.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::compiler {

namespace codegen {
struct BuildTimes;
}  // namespace codegen

// The knobs of the workload's schedule template. INVALID_ARGUMENT for an
// unknown op.
absl::StatusOr<std::vector<Knob>> KnobsOf(const Workload& workload, const Target& target);
// A config that is always valid and reasonably fast (used when the log
// database has no record for a workload).
absl::StatusOr<Config> DefaultConfig(const Workload& workload, const Target& target);
// One good config per algorithm the workload's template offers (conv2d:
// per layout), the default first; the default alone for a template with
// one algorithm. The tuner measures them before it searches.
absl::StatusOr<std::vector<Config>> VariantConfigs(const Workload& workload, const Target& target);
// INVALID_ARGUMENT (with the reason) for a config the template rejects.
absl::Status ValidateConfig(const Workload& workload, const Target& target, const Config& config);
// The same, with the template's knobs computed once by the caller (KnobsOf
// builds them anew on every call: the tuner validates every proposal).
absl::Status ValidateConfig(const Workload& workload, const Target& target, const Config& config,
                            const std::vector<Knob>& knobs);

// An input the config's kernel takes in a layout of its own rather than the
// workload's (conv2d NCHWc's weights as [K/kb][C/cb][R][S][cb][kb] blocks):
// transformed once ahead of the calls, at compile time for a model's
// constants, instead of in every call.
struct PackedInput {
  int input = 0;               // KernelSignature input index
  std::vector<int64_t> shape;  // of the packed layout
  DType dtype = DType::kFloat32;
  int64_t Bytes() const;
};

// A kernel compiled in-process (ORC JIT), ready to run.
class JitKernel {
 public:
  virtual ~JitKernel() = default;
  virtual int32_t Run(void* const* args) const = 0;
  // Inputs Run takes packed, and their transforms: Pack(k, ...) writes
  // packed_inputs()[k] packed from `src`, the input in the workload's layout.
  virtual const std::vector<PackedInput>& packed_inputs() const = 0;
  virtual int32_t Pack(size_t k, const void* src, void* dst) const = 0;
};

// Lowers (workload, config) for `target` and JIT-compiles it. `times`, if
// given, receives where the build's time went (codegen::BuildTimes).
absl::StatusOr<std::unique_ptr<JitKernel>> BuildJit(const Workload& workload, const Config& config,
                                                    const Target& target,
                                                    const LowerOptions& options = {},
                                                    codegen::BuildTimes* times = nullptr);

// Packs `data`, input `input` of the workload in its declared layout, as the
// kernel of (workload, config) for `target` takes it (PackedInput). Any
// target: the transform is JIT-compiled for this host. How a model's
// constants are packed at compile time.
absl::StatusOr<std::vector<uint8_t>> PackConstant(const Workload& workload, const Config& config,
                                                  const Target& target, int input,
                                                  std::span<const uint8_t> data);

// The buffers of one kernel call, for verification and timing: inputs filled
// with seeded values (floats uniform in [-1, 1], signed integers in [-4, 4],
// unsigned in [0, 8], bools 0/1), the output filled with `output_fill`
// converted to its dtype, and the pointer arrays JitKernel::Run (`args`:
// inputs, then the output) and RunReference (`input_ptrs`) take. Movable, not
// copyable: the pointers point into the vectors.
struct KernelBuffers {
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<std::vector<uint8_t>> packed;  // PackKernelInputs
  std::vector<uint8_t> output;
  std::vector<DType> input_dtypes;
  DType output_dtype = DType::kFloat32;
  std::vector<const void*> input_ptrs;
  std::vector<void*> args;

  int64_t OutputSize() const;
  double OutputAt(int64_t i) const;  // element i converted to double
  // Bytes of each of `args` while none is packed: the inputs, then the
  // output (what a GPU kernel's arguments are copied from).
  std::vector<size_t> ArgBytes() const;

  KernelBuffers() = default;
  KernelBuffers(KernelBuffers&&) = default;
  KernelBuffers& operator=(KernelBuffers&&) = default;
  KernelBuffers(const KernelBuffers&) = delete;
  KernelBuffers& operator=(const KernelBuffers&) = delete;
};
KernelBuffers MakeKernelBuffers(const KernelSignature& sig, uint64_t seed,
                                float output_fill = 0.0f);

// Points b.args at packed copies (b.packed) of the inputs `kernel` takes
// packed, and the others at b.inputs (so that buffers can be reused across
// kernels); b.input_ptrs keep the workload's layout for RunReference.
absl::Status PackKernelInputs(const JitKernel& kernel, KernelBuffers& b);

// Straightforward loops over the same semantics, for verification and
// constant folding. `inputs` and `output` follow Workload::Signature(), each
// a dense buffer of its dtype. Generic operators are evaluated by
// interpreting their compute definition (compiler/ops/interpret.h).
absl::Status RunReference(const Workload& workload, std::span<const void* const> inputs,
                          void* output);

// Compares a kernel's output with a reference output of the same dtype:
// floats within atol + rtol * |want| (NaN matches NaN, inf matches the same
// inf), integers and bools exactly, except that up to `off_by_one` integer
// elements may differ by one. On a mismatch, the worst element's index and
// both values in `detail`.
bool OutputsMatch(DType dtype, const void* got, const void* want, int64_t n, double rtol,
                  double atol, std::string* detail, int64_t off_by_one = 0);
// The integer elements of `w`'s output that may round differently from the
// reference's: an integer output whose epilogue rounds a float (a
// quantization: round, then cast) may fall on the other side of a tie where
// the kernel's float arithmetic contracts a multiply and an add into one FMA
// and the reference does not, on at most one element in 10,000 (and 1); 0
// for every other workload (exact).
int64_t RoundingTies(const Workload& w, int64_t n);

}  // namespace kiln::compiler

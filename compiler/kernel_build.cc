// BuildJit: lower a workload with its config, then JIT-compile it.
#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/jit.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"

namespace kiln::compiler {
namespace {

class OrcJitKernel : public JitKernel {
 public:
  OrcJitKernel(std::unique_ptr<codegen::JitModule> module, codegen::KernelFn fn,
               std::vector<PackedInput> packed, std::vector<codegen::KernelFn> packs)
      : module_(std::move(module)), fn_(fn), packed_(std::move(packed)), packs_(std::move(packs)) {}
  int32_t Run(void* const* args) const override { return fn_(args); }
  const std::vector<PackedInput>& packed_inputs() const override { return packed_; }
  int32_t Pack(size_t k, const void* src, void* dst) const override {
    void* args[2] = {const_cast<void*>(src), dst};
    return packs_.at(k)(args);
  }

 private:
  std::unique_ptr<codegen::JitModule> module_;  // owns the code fn_ points into
  codegen::KernelFn fn_;
  std::vector<PackedInput> packed_;
  std::vector<codegen::KernelFn> packs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<JitKernel>> BuildJit(const Workload& workload, const Config& config,
                                                    const Target& target,
                                                    const LowerOptions& options,
                                                    codegen::BuildTimes* times) {
  const std::string name = "kiln_kernel";
  std::vector<PackedInput> packed;
  const auto start = std::chrono::steady_clock::now();
  auto funcs = LowerKernel(workload, config, target, name, options, &packed);
  if (!funcs.ok()) return funcs.status();
  if (times != nullptr) {
    times->lower = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  auto module = codegen::JitCompile(*std::move(funcs), target, times);
  if (!module.ok()) return module.status();
  auto fn = (*module)->Lookup(name);
  if (!fn.ok()) return fn.status();
  std::vector<codegen::KernelFn> packs;
  for (const PackedInput& p : packed) {
    auto f = (*module)->Lookup(PackFunctionName(p.input));
    if (!f.ok()) return f.status();
    packs.push_back(*f);
  }
  return std::unique_ptr<JitKernel>(
      new OrcJitKernel(std::move(*module), *fn, std::move(packed), std::move(packs)));
}

absl::StatusOr<std::vector<uint8_t>> PackConstant(const Workload& workload, const Config& config,
                                                  const Target& target, int input,
                                                  std::span<const uint8_t> data) {
  auto sig = workload.Signature();
  if (!sig.ok()) return sig.status();
  auto packed = PackedInputsOf(workload, config, target);
  if (!packed.ok()) return packed.status();
  auto p = std::find_if(packed->begin(), packed->end(),
                        [&](const PackedInput& q) { return q.input == input; });
  if (p == packed->end() || static_cast<size_t>(input) >= sig->inputs.size()) {
    return absl::NotFoundError(StrCat(workload.op, ": input ", input, " is not packed"));
  }
  const TensorSpec& spec = sig->inputs[input];
  if (static_cast<int64_t>(data.size()) != spec.NumElements() * DTypeBytes(spec.dtype)) {
    return absl::InvalidArgumentError(StrCat("packing input ", input, ": ", data.size(),
                                             " bytes for a tensor of ", spec.NumElements(), " ",
                                             DTypeName(spec.dtype), " elements"));
  }
  const std::string name = "kiln_pack";
  auto func = LowerPack(workload, config, target, input, name, {});
  if (!func.ok()) return func.status();
  auto module = codegen::JitCompile({*func}, Target::Host());
  if (!module.ok()) return module.status();
  auto fn = (*module)->Lookup(name);
  if (!fn.ok()) return fn.status();
  std::vector<uint8_t> out(static_cast<size_t>(p->Bytes()));
  void* args[2] = {const_cast<uint8_t*>(data.data()), out.data()};
  if (int32_t rc = (*fn)(args); rc != 0) {
    return absl::InternalError(StrCat("packing input ", input, " returned ", rc));
  }
  return out;
}

}  // namespace kiln::compiler

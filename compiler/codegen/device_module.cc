// BuildDeviceModule: a model's kernels as one OpenCL C program and the launch
// plan the runtime replays (docs/artifact-format.md, "GPU modules").
#include <unordered_map>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/c_source.h"
#include "compiler/codegen/cuda.h"
#include "compiler/codegen/module.h"

namespace kiln::compiler {

namespace {

std::string ArgText(const BufferRef& ref) {
  switch (ref.kind) {
    case BufferRef::Kind::kInput:
      return StrCat("i", ref.index, "+", ref.byte_offset);
    case BufferRef::Kind::kOutput:
      return StrCat("o", ref.index, "+", ref.byte_offset);
    case BufferRef::Kind::kWeight:
      return StrCat("w+", ref.byte_offset);
    case BufferRef::Kind::kWorkspace:
      break;
  }
  return StrCat("s+", ref.byte_offset);
}

}  // namespace

absl::Status CheckEntryCall(size_t index, const KernelCall& call,
                            const std::unordered_map<std::string, size_t>& arity) {
  auto it = arity.find(call.kernel);
  if (it == arity.end()) {
    return absl::InvalidArgumentError(
        StrCat("entry call ", index, " names unknown kernel '", call.kernel, "'"));
  }
  if (it->second != call.args.size()) {
    return absl::InvalidArgumentError(StrCat("entry call ", index, " passes ", call.args.size(),
                                             " arguments to ", call.kernel, ", which takes ",
                                             it->second));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceModule> BuildDeviceModule(const std::vector<ir::PrimFunc>& kernels,
                                               const EntryPlan& plan, const Target& target) {
  if (!target.is_gpu()) {
    return absl::InvalidArgumentError(
        StrCat("a device module is for GPU targets, not '", target.Spec(), "'"));
  }
  const bool cuda = target.kind == TargetKind::kCuda;
  const auto dialect = cuda ? codegen::SourceDialect::kCuda : codegen::SourceDialect::kOpenCL;
  DeviceModule m;
  m.source = codegen::CSourcePrelude(dialect);
  std::unordered_map<std::string, size_t> arity;
  std::unordered_map<std::string, codegen::LaunchDims> launch;
  codegen::CSourceOptions emit;
  emit.prelude = false;
  emit.offset_params = !cuda;
  for (const ir::PrimFunc& func : kernels) {
    auto dims = codegen::LaunchDimsOf(func);
    if (!dims.ok()) return dims.status();
    auto src = codegen::EmitCSource(func, dialect, emit);
    if (!src.ok()) {
      return absl::Status(src.status().code(),
                          StrCat("kernel ", func.name, ": ", src.status().message()));
    }
    m.source += "\n" + *src;
    arity[func.name] = func.params.size();
    launch[func.name] = *dims;
  }
  m.launches = "kiln-launch 1\n";
  for (size_t c = 0; c < plan.calls.size(); ++c) {
    const KernelCall& call = plan.calls[c];
    if (absl::Status s = CheckEntryCall(c, call, arity); !s.ok()) return s;
    const codegen::LaunchDims& d = launch.at(call.kernel);
    m.launches += StrCat("call ", call.kernel, " ", d.grid[0], " ", d.grid[1], " ", d.grid[2], " ",
                         d.block[0], " ", d.block[1], " ", d.block[2]);
    for (const BufferRef& ref : call.args) m.launches += " " + ArgText(ref);
    m.launches += "\n";
  }
  if (cuda) {
    auto bin = codegen::CompileCuda(m.source, target.arch, /*cubin=*/!target.arch.empty());
    if (!bin.ok()) return bin.status();
    m.ptx = std::move(bin->ptx);
    m.cubin = std::move(bin->cubin);
  }
  return m;
}

}  // namespace kiln::compiler

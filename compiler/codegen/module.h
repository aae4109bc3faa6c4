#pragma once
// Building a deployable shared object: every kernel of a model plus the
// model's entry point, as one ELF shared object for the target.
//
// Entry point (see docs/artifact-format.md):
//   extern "C" int32_t kiln_main(void* const* inputs, void* const* outputs,
//                                const uint8_t* weights, uint8_t* workspace)
// It calls the kernels in plan order; each kernel argument is one BufferRef.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::compiler {

struct BufferRef {
  enum class Kind { kInput, kOutput, kWeight, kWorkspace };
  Kind kind = Kind::kWorkspace;
  int index = 0;            // kInput / kOutput: which entry argument
  int64_t byte_offset = 0;  // into that buffer, the weights or the workspace
};

struct KernelDef {
  std::string name;  // symbol, unique within the module
  Workload workload;
  Config config;
  // >= 0: not the workload's kernel but the layout transform of this input
  // of it (PackedInput), with arguments (input, packed buffer).
  int pack_input = -1;
};

struct KernelCall {
  std::string kernel;           // a KernelDef name
  std::vector<BufferRef> args;  // KernelSignature order
  // What kiln-run --profile names the call by (default: the kernel's name).
  std::string label;
};

struct EntryPlan {
  std::string name = "kiln_main";
  std::vector<KernelCall> calls;
  // When not empty: exported as the NUL-terminated constant `<name>_io`, the
  // buffers the entry point takes as the manifest says them (its
  // workspace_bytes, weights_bytes, input and output records), which the
  // runtime compares with the artifact's manifest.
  std::string io;
};

// Whether entry call number `index` names a kernel of `arity` (kernel name
// -> parameter count) and passes it as many buffers: INVALID_ARGUMENT
// saying which otherwise.
absl::Status CheckEntryCall(size_t index, const KernelCall& call,
                            const std::unordered_map<std::string, size_t>& arity);

// A GPU target's module (docs/artifact-format.md, "GPU modules"): every
// kernel in one program, and the launch plan the runtime replays in place of
// an entry point: one `call NAME GX GY GZ BX BY BZ ARG...` line per call,
// ARG one of iN+OFF (input N), oN+OFF (output N), w+OFF (weights), s+OFF
// (workspace). OpenCL: the program is OpenCL C (buffers passed as base and
// byte offset), built by the device's driver when loaded. CUDA: CUDA C
// compiled here by NVRTC to PTX for the target's architecture (sm_80 when
// it names none) and, when it names one, a cubin for it.
struct DeviceModule {
  std::string source;
  std::string ptx, cubin;  // CUDA
  std::string launches;
};
// `kernels`: the module's kernels lowered (the compiler's ModuleWriter
// lowers each KernelDef).
absl::StatusOr<DeviceModule> BuildDeviceModule(const std::vector<ir::PrimFunc>& kernels,
                                               const EntryPlan& plan, const Target& target);

}  // namespace kiln::compiler

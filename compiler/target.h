#pragma once
// A code generation target. The canonical spec string is
//   "llvm -mtriple=<triple> -mcpu=<cpu> [-mattr=<+a,+b>]"   (CPUs)
//   "opencl [-device=<name>]"                                (OpenCL devices)
//   "cuda [-arch=sm_XY] [-device=<name>]"                    (NVIDIA GPUs)
// and is what the log database keys records by. A device name has no
// spaces (the agent writes them as '_').

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::compiler {

enum class TargetKind { kLlvmCpu, kOpenCL, kCuda };

struct Target {
  TargetKind kind = TargetKind::kLlvmCpu;
  std::string triple;  // e.g. x86_64-pc-linux-gnu
  std::string cpu;     // e.g. skylake-avx512, "generic"
  std::string attrs;   // LLVM feature string, "" for the cpu's defaults
  std::string device;  // OpenCL, CUDA: the device's name ("": any)
  std::string arch;    // CUDA: the compute capability, "sm_90" ("": PTX for sm_80)

  // Kernels for it are threads of a grid (GPU templates, C source), not
  // LLVM code for a CPU.
  bool is_gpu() const { return kind == TargetKind::kOpenCL || kind == TargetKind::kCuda; }

  std::string Spec() const;
  bool operator==(const Target&) const = default;

  static absl::StatusOr<Target> Parse(std::string_view spec);
  // The machine this process runs on, as LLVM detects it.
  static Target Host();
  // Another machine's CPU, from what its Linux says of it: a board's
  // (kiln-board's description). `triple` "aarch64-linux-gnu" or
  // "x86_64-linux-gnu"; `cpuinfo` its first processor's block of
  // /proc/cpuinfo. AArch64: the CPU LLVM names from the implementer and part
  // (llvm::sys::detail::getHostCPUNameForARM), and, where LLVM knows it only
  // as "generic", the extensions its Features line lists (+dotprod, +i8mm,
  // +bf16). x86-64: the x86-64 level its flags reach (v2, v3, v4), the
  // level's vector features spelled out, and the extensions kiln's
  // templates use beyond it (+avx512vnni, +avx512bf16, +avxvnni, +amx-*). INVALID_ARGUMENT for
  // another architecture.
  static absl::StatusOr<Target> FromCpuInfo(std::string_view triple, std::string_view cpuinfo);
  // Whether the target's CPU has LLVM feature `f` ("avx512vnni", "dotprod"):
  // -mattr's explicit +f / -f; else, for the host's own CPU (IsHostCpu),
  // whether the host has it (a VM may hide some of its CPU model's features:
  // AMX); else the CPU's features as LLVM's tables know them (x86 and
  // AArch64). Code generation takes its features by the same rule.
  bool HasFeature(std::string_view f) const;
  // The CPU and architecture of the machine this process runs on: code for
  // it starts from the features the host has (then -mattr's).
  bool IsHostCpu() const;
  // Vector width in float32 lanes this target prefers (16 for AVX-512, ...).
  int NativeVectorLanes() const;
  // Architectural vector registers: 32 with AVX-512 or on AArch64, else 16.
  int NumVectorRegisters() const;
};

// A one-line description of the host hardware: CPU model, cores, features.
std::string DescribeHostHardware();

}  // namespace kiln::compiler

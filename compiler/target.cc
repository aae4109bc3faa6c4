#include "compiler/target.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/cpus.h"
#include "base/str.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/AArch64TargetParser.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

namespace kiln::compiler {
namespace {
bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}
bool StartsWith(std::string_view s, std::string_view p) { return s.starts_with(p); }
bool Contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}
}  // namespace

std::string Target::Spec() const {
  if (kind == TargetKind::kOpenCL)
    return device.empty() ? "opencl" : StrCat("opencl -device=", device);
  if (kind == TargetKind::kCuda) {
    std::string s = "cuda";
    if (!arch.empty()) s += StrCat(" -arch=", arch);
    if (!device.empty()) s += StrCat(" -device=", device);
    return s;
  }
  std::string s = StrCat("llvm -mtriple=", triple, " -mcpu=", cpu);
  if (!attrs.empty()) s += StrCat(" -mattr=", attrs);
  return s;
}

absl::StatusOr<Target> Target::Parse(std::string_view spec) {
  std::vector<std::string_view> parts = StrSplit(spec, ' ', true);
  if (!parts.empty() && (parts[0] == "opencl" || parts[0] == "cuda")) {
    Target t;
    t.kind = parts[0] == "opencl" ? TargetKind::kOpenCL : TargetKind::kCuda;
    for (size_t i = 1; i < parts.size(); ++i) {
      std::string_view p = parts[i];
      if (ConsumePrefix(&p, "-device=")) {
        t.device = std::string(p);
      } else if (t.kind == TargetKind::kCuda && ConsumePrefix(&p, "-arch=")) {
        // sm_XY: compute capability X.Y (sm_80, sm_90, sm_90a, ...).
        if (p.size() < 5 || !StartsWith(p, "sm_") ||
            !std::isdigit(static_cast<unsigned char>(p[3])) ||
            !std::isdigit(static_cast<unsigned char>(p[4]))) {
          return absl::InvalidArgumentError(StrCat("bad CUDA architecture '", p, "' (want sm_XY)"));
        }
        t.arch = std::string(p);
      } else {
        return absl::InvalidArgumentError(
            StrCat("unknown ", parts[0], " target option '", parts[i], "'"));
      }
    }
    return t;
  }
  if (parts.empty() || parts[0] != "llvm") {
    return absl::InvalidArgumentError(
        StrCat("unsupported target '", spec,
               "': expected 'llvm -mtriple=... -mcpu=...', 'opencl' or 'cuda -arch=sm_XY'"));
  }
  Target t;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (ConsumePrefix(&p, "-mtriple=")) {
      t.triple = std::string(p);
    } else if (ConsumePrefix(&p, "-mcpu=")) {
      t.cpu = std::string(p);
    } else if (ConsumePrefix(&p, "-mattr=")) {
      t.attrs = std::string(p);
    } else {
      return absl::InvalidArgumentError(StrCat("unknown target option '", p, "'"));
    }
  }
  if (t.triple.empty()) t.triple = llvm::sys::getDefaultTargetTriple();
  if (t.cpu.empty()) t.cpu = "generic";
  return t;
}

Target Target::Host() {
  Target t;
  t.triple = llvm::sys::getDefaultTargetTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  return t;
}

bool Target::IsHostCpu() const {
  // Asked for every candidate a template builds (HasFeature): the host's
  // name and architecture are detected once.
  static const std::string host_cpu = llvm::sys::getHostCPUName().str();
  static const llvm::Triple::ArchType host_arch =
      llvm::Triple(llvm::sys::getProcessTriple()).getArch();
  return !is_gpu() && cpu == host_cpu && llvm::Triple(triple).getArch() == host_arch;
}

bool Target::HasFeature(std::string_view f) const {
  if (is_gpu()) return false;
  if (Contains(attrs, StrCat("-", f))) return false;
  if (Contains(attrs, StrCat("+", f))) return true;
  if (IsHostCpu()) {
    static const auto* host = new llvm::StringMap<bool>(llvm::sys::getHostCPUFeatures());
    return host->lookup(f);
  }
  const bool x86 = StartsWith(triple, "x86_64") || StartsWith(triple, "i686");
  if (!x86 && !StartsWith(triple, "aarch64")) return false;
  // Asked for every candidate a template builds: LLVM's CPU table is read
  // once per cpu.
  static std::mutex mu;
  static auto* known = new std::map<std::string, std::vector<std::string>>();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, added] =
      known->emplace(StrCat(x86 ? "x86:" : "aarch64:", cpu), std::vector<std::string>());
  if (added) {
    if (x86) {
      llvm::SmallVector<llvm::StringRef, 64> features;
      llvm::X86::getFeaturesForCPU(cpu, features, /*NeedPlus=*/false);
      for (llvm::StringRef x : features) it->second.push_back(x.str());
    } else if (std::optional<llvm::AArch64::CpuInfo> info = llvm::AArch64::parseCpu(cpu)) {
      // The CPU's extensions and its architecture's ("+dotprod", "+i8mm").
      llvm::AArch64::ExtensionBitset ext = info->getImpliedExtensions();
      ext |= info->Arch.DefaultExts;
      std::vector<llvm::StringRef> features;
      llvm::AArch64::getExtensionFeatures(ext, features);
      for (llvm::StringRef x : features) it->second.push_back(x.drop_front().str());
    }
  }
  return std::find(it->second.begin(), it->second.end(), f) != it->second.end();
}

int Target::NativeVectorLanes() const {
  if (is_gpu()) return 1;  // a thread's values are scalars
  if (!StartsWith(triple, "x86_64") && !StartsWith(triple, "i686")) return 4;
  return HasFeature("avx512f") ? 16 : HasFeature("avx") ? 8 : 4;
}

int Target::NumVectorRegisters() const {
  return StartsWith(triple, "aarch64") || NativeVectorLanes() == 16 ? 32 : 16;
}

std::string DescribeHostHardware() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> simd;
  for (const char* f : {"avx512f", "avx2", "fma", "neon"}) {
    if (features.lookup(f)) simd.push_back(f);
  }
  return StrCat(llvm::sys::getHostCPUName().str(), ", ", UsableCpus(), " threads, ",
                simd.empty() ? "no simd" : StrJoin(simd, "+"));
}

}  // namespace kiln::compiler

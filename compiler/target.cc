#include "compiler/target.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/cpuinfo.h"
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

namespace {

// The words of /proc/cpuinfo's first line `key : ...` (flags, Features).
std::vector<std::string> CpuInfoWords(std::string_view cpuinfo, std::string_view key) {
  std::vector<std::string> words;
  for (std::string_view w : StrSplit(CpuInfoValue(cpuinfo, key), ' ')) {
    if (!w.empty()) words.emplace_back(w);
  }
  return words;
}

}  // namespace

absl::StatusOr<Target> Target::FromCpuInfo(std::string_view triple, std::string_view cpuinfo) {
  Target t;
  std::vector<std::string> attrs;
  if (StartsWith(triple, "aarch64")) {
    t.triple = "aarch64-linux-gnu";
    t.cpu = llvm::sys::detail::getHostCPUNameForARM(llvm::StringRef(cpuinfo.data(), cpuinfo.size()))
                .str();
    if (t.cpu.empty() || t.cpu == "generic") {
      t.cpu = "generic";
      const std::vector<std::string> f = CpuInfoWords(cpuinfo, "Features");
      auto has = [&](const char* w) { return std::find(f.begin(), f.end(), w) != f.end(); };
      if (has("asimddp")) attrs.push_back("+dotprod");
      if (has("i8mm")) attrs.push_back("+i8mm");
      if (has("bf16")) attrs.push_back("+bf16");
    }
  } else if (StartsWith(triple, "x86_64")) {
    t.triple = "x86_64-pc-linux-gnu";
    const std::vector<std::string> f = CpuInfoWords(cpuinfo, "flags");
    auto has = [&](std::initializer_list<const char*> all) {
      return std::all_of(all.begin(), all.end(), [&](const char* w) {
        return std::find(f.begin(), f.end(), w) != f.end();
      });
    };
    const bool v2 = has({"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"});
    const bool v3 = v2 && has({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave"});
    const bool v4 = v3 && has({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"});
    t.cpu = v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
    // The level's vector features spelled out: LLVM's table of these
    // pseudo-CPUs (X86::getFeaturesForCPU) leaves the implied ones out, and
    // HasFeature reads -mattr first.
    if (v3) attrs.insert(attrs.end(), {"+avx", "+avx2", "+fma"});
    if (v4) {
      attrs.insert(attrs.end(), {"+avx512f", "+avx512bw", "+avx512cd", "+avx512dq", "+avx512vl"});
    }
    for (const auto& [flag, attr] :
         std::vector<std::pair<const char*, const char*>>{{"avx512_vnni", "+avx512vnni"},
                                                          {"avx512_bf16", "+avx512bf16"},
                                                          {"avx512_fp16", "+avx512fp16"},
                                                          {"avx_vnni", "+avxvnni"},
                                                          {"amx_tile", "+amx-tile"},
                                                          {"amx_int8", "+amx-int8"},
                                                          {"amx_bf16", "+amx-bf16"}}) {
      if (has({flag})) attrs.push_back(attr);
    }
  } else {
    return absl::InvalidArgumentError(
        StrCat("a board of triple '", triple, "': kiln builds for aarch64 and x86_64"));
  }
  t.attrs = StrJoin(attrs, ",");
  return t;
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

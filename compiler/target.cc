#include "compiler/target.h"

#include <thread>

#include "absl/status/status.h"
#include "deploy/str.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

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
  std::string s = StrCat("llvm -mtriple=", triple, " -mcpu=", cpu);
  if (!attrs.empty()) s += StrCat(" -mattr=", attrs);
  return s;
}

absl::StatusOr<Target> Target::Parse(std::string_view spec) {
  std::vector<std::string_view> parts = StrSplit(spec, ' ', true);
  if (parts.empty() || parts[0] != "llvm") {
    return absl::InvalidArgumentError(
        StrCat("unsupported target '", spec, "': expected 'llvm -mtriple=... -mcpu=...'"));
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

int Target::NativeVectorLanes() const {
  if (Contains(attrs, "-avx512f")) return 8;
  if (Contains(cpu, "avx512") || StartsWith(cpu, "skylake-avx512") ||
      StartsWith(cpu, "cascadelake") || StartsWith(cpu, "icelake") ||
      StartsWith(cpu, "sapphirerapids") || StartsWith(cpu, "znver4") ||
      StartsWith(cpu, "cooperlake") || StartsWith(cpu, "tigerlake")) {
    return 16;
  }
  if (StartsWith(triple, "aarch64")) return 4;
  if (cpu == "generic" || cpu.empty()) return 4;
  return 8;  // AVX2-class x86
}

std::string DescribeHostHardware() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> simd;
  for (const char* f : {"avx512f", "avx2", "fma", "neon"}) {
    if (features.lookup(f)) simd.push_back(f);
  }
  return StrCat(llvm::sys::getHostCPUName().str(), ", ", std::thread::hardware_concurrency(),
                " threads, ", simd.empty() ? "no simd" : StrJoin(simd, "+"));
}

}  // namespace kiln::compiler

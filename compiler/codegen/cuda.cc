#include "compiler/codegen/cuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "base/str.h"

namespace kiln::compiler::codegen {
namespace {

// NVRTC's C API (nvrtc.h), resolved at run time.
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

#define KILN_NVRTC_FUNCTIONS(X)                                                             \
  X(nvrtcVersion, nvrtcResult, (int*, int*))                                                \
  X(nvrtcGetErrorString, const char*, (nvrtcResult))                                        \
  X(nvrtcCreateProgram, nvrtcResult,                                                        \
    (nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*)) \
  X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char* const*))              \
  X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t*))                           \
  X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char*))                                 \
  X(nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram, size_t*))                                  \
  X(nvrtcGetPTX, nvrtcResult, (nvrtcProgram, char*))                                        \
  X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t*))                                \
  X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char*))                                      \
  X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram*))

struct Nvrtc {
#define KILN_NVRTC_MEMBER(name, ret, args) ret(*name) args = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
};

// NVRTC from KILN_NVRTC (a path), the loader's search path, or the CUDA
// toolkit's usual place; null with *error when none loads.
const Nvrtc* LoadNvrtc(std::string* error) {
  static Nvrtc api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* env = std::getenv("KILN_NVRTC"); env && *env) names.push_back(env);
    for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}) {
      names.push_back(n);
      names.push_back(StrCat("/usr/local/cuda/lib64/", n));
    }
    void* h = nullptr;
    for (const std::string& n : names) {
      h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      failure =
          "no NVRTC: libnvrtc.so cannot be loaded (install the CUDA toolkit, or set KILN_NVRTC "
          "to its path)";
      return;
    }
#define KILN_NVRTC_RESOLVE(name, ret, args)                  \
  api.name = reinterpret_cast<ret(*) args>(dlsym(h, #name)); \
  if (api.name == nullptr && failure.empty()) {              \
    failure = StrCat("NVRTC lacks ", #name);                 \
  }
    KILN_NVRTC_FUNCTIONS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
  });
  if (!failure.empty()) {
    *error = failure;
    return nullptr;
  }
  return &api;
}

// One NVRTC compilation for --gpu-arch=`arch` (compute_XY: PTX; sm_XY:
// cubin). Fills `out` (ptx or cubin) and appends to `log`.
absl::Status CompileOnce(const Nvrtc& nv, const std::string& source, const std::string& arch,
                         std::string* out, std::string* log) {
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = nv.nvrtcCreateProgram(&prog, source.c_str(), "kiln.cu", 0, nullptr, nullptr);
      r != 0) {
    return absl::InternalError(StrCat("nvrtcCreateProgram: ", nv.nvrtcGetErrorString(r)));
  }
  const std::string arch_opt = StrCat("--gpu-architecture=", arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--fmad=true"};
  const nvrtcResult rc = nv.nvrtcCompileProgram(prog, 3, opts);
  size_t log_size = 0;
  nv.nvrtcGetProgramLogSize(prog, &log_size);
  std::string text(log_size, '\0');
  if (log_size > 0) nv.nvrtcGetProgramLog(prog, text.data());
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
  if (!text.empty()) *log += text + "\n";
  absl::Status status;
  if (rc != 0) {
    status = absl::InvalidArgumentError(
        StrCat("NVRTC (", arch, "): ", nv.nvrtcGetErrorString(rc), "\n", text));
  } else {
    const bool cubin = arch.rfind("sm_", 0) == 0;
    size_t size = 0;
    nvrtcResult r = cubin ? nv.nvrtcGetCUBINSize(prog, &size) : nv.nvrtcGetPTXSize(prog, &size);
    out->assign(size, '\0');
    if (r == 0) r = cubin ? nv.nvrtcGetCUBIN(prog, out->data()) : nv.nvrtcGetPTX(prog, out->data());
    if (r != 0) status = absl::InternalError(StrCat("NVRTC output: ", nv.nvrtcGetErrorString(r)));
    if (!cubin) {
      while (!out->empty() && out->back() == '\0') out->pop_back();
    }
  }
  nv.nvrtcDestroyProgram(&prog);
  return status;
}

}  // namespace

absl::StatusOr<std::string> NvrtcVersion() {
  std::string error;
  const Nvrtc* nv = LoadNvrtc(&error);
  if (nv == nullptr) return absl::UnavailableError(error);
  int major = 0, minor = 0;
  nv->nvrtcVersion(&major, &minor);
  return StrCat(major, ".", minor);
}

absl::StatusOr<CudaBinary> CompileCuda(const std::string& source, const std::string& arch,
                                       bool cubin) {
  std::string error;
  const Nvrtc* nv = LoadNvrtc(&error);
  if (nv == nullptr) return absl::UnavailableError(error);
  const std::string sm = arch.empty() ? "sm_80" : arch;
  CudaBinary b;
  if (absl::Status s = CompileOnce(*nv, source, "compute_" + sm.substr(3), &b.ptx, &b.log);
      !s.ok()) {
    return s;
  }
  if (cubin) {
    if (absl::Status s = CompileOnce(*nv, source, sm, &b.cubin, &b.log); !s.ok()) return s;
  }
  return b;
}

}  // namespace kiln::compiler::codegen

// The artifact container, its manifest, and Module: load the shared object
// from memory (memfd, or a temporary file where memfd is not available) and
// run its entry point.
#include "deploy/artifact.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "base/check.h"
#include "base/str.h"
#include "deploy/device.h"
#include "deploy/memory.h"
#include "deploy/parallel.h"

namespace kiln::deploy {
namespace {

constexpr uint32_t kMaxSections = 1024;
constexpr size_t kAlign = 64;

uint32_t ReadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t ReadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// "float32, uint8, ...": every name ParseDType knows.
std::string DTypeNames() {
  std::vector<std::string> names;
  for (int code = 0; code < 32; ++code) {
    if (std::optional<DType> t = DTypeFromOnnx(code)) names.push_back(DTypeName(*t));
  }
  return StrJoin(names, ", ");
}

// Also bounds the element count so that the byte size (at most 8 bytes an
// element) fits an int64.
bool ParseShape(std::string_view text, std::vector<int64_t>* shape) {
  shape->clear();
  if (text == "scalar") return true;
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t elements = 1;
  for (std::string_view piece : StrSplit(text, 'x')) {
    int64_t d = 0;
    if (!ParseInt64(piece, &d) || d < 0) return false;
    if (d != 0 && elements > kMaxElements / d) return false;
    elements *= d;
    shape->push_back(d);
  }
  return !shape->empty();
}

// The weights and the workspace, zeroed (huge pages from 2 MiB on).
uint8_t* AllocAligned(size_t bytes) {
  size_t rounded = 0;
  void* p = AllocLarge(bytes, kAlign, &rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0, rounded);
  return static_cast<uint8_t*>(p);
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// Modules resolve kiln_parallel_for from the global scope. Where this library
// was itself loaded RTLD_LOCAL (ctypes, a plug-in host), promote it to
// RTLD_GLOBAL once so that its symbols are visible to the modules it loads.
void MakeRuntimeSymbolsGlobal() {
  static const bool done [[maybe_unused]] = [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&kiln_parallel_for), &info) != 0 &&
        info.dli_fname != nullptr) {
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);  // kept open
    }
    return true;
  }();
}

// The machine's physical memory: no buffer of an artifact can be larger.
uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// RESOURCE_EXHAUSTED when a buffer the manifest asks for cannot fit in this
// machine's memory (a damaged or hostile manifest must not make the runtime
// try: it would die of bad_alloc or of the OOM killer).
absl::Status CheckBufferSizes(const Manifest& m) {
  const uint64_t mem = PhysicalMemoryBytes();
  auto check = [&](const std::string& what, uint64_t bytes) -> absl::Status {
    if (bytes <= mem) return absl::OkStatus();
    return absl::ResourceExhaustedError(StrCat("the artifact's ", what, " needs ", bytes,
                                               " bytes, more than this machine's memory (", mem,
                                               " bytes)"));
  };
  if (absl::Status s = check("workspace", static_cast<uint64_t>(m.workspace_bytes)); !s.ok()) {
    return s;
  }
  uint64_t total = 0;
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const TensorInfo& t : *list) {
      const uint64_t bytes = static_cast<uint64_t>(t.ByteSize());  // bounded by ParseShape
      if (absl::Status s =
              check(StrCat(list == &m.inputs ? "input '" : "output '", t.name, "'"), bytes);
          !s.ok()) {
        return s;
      }
      total += bytes;  // each at most INT64_MAX / 8 * 8: a few of them cannot wrap
    }
  }
  return check("inputs and outputs together", total);
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::ByteSize() const { return NumElements() * DTypeBytes(dtype); }

std::string ShapeToString(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  return StrJoin(shape, "x");
}

absl::StatusOr<Container> ParseContainer(std::string_view bytes) {
  const uint64_t file_size = bytes.size();
  if (file_size < 8 || std::memcmp(bytes.data(), kArtifactMagic, 8) != 0) {
    return absl::InvalidArgumentError("not a kiln artifact: bad magic (expected \"KILNART1\")");
  }
  if (file_size < 16) {
    return absl::DataLossError(
        StrCat("truncated artifact: header needs 16 bytes, file has ", file_size));
  }
  const uint32_t version = ReadU32(bytes.data() + 8);
  if (version != kArtifactVersion) {
    return absl::InvalidArgumentError(StrCat("unsupported artifact format version ", version,
                                             " (this runtime reads version ", kArtifactVersion,
                                             ")"));
  }
  const uint32_t count = ReadU32(bytes.data() + 12);
  if (count > kMaxSections) {
    return absl::DataLossError(StrCat("corrupt artifact: section count ", count));
  }
  Container c;
  uint64_t pos = 16;
  for (uint32_t s = 0; s < count; ++s) {
    if (file_size - pos < 4) {
      return absl::DataLossError(StrCat("truncated artifact: section header ", s, " of ", count,
                                        " runs past the end of the file"));
    }
    const uint32_t len = ReadU32(bytes.data() + pos);
    pos += 4;
    if (file_size - pos < uint64_t{len} + 16) {
      return absl::DataLossError(StrCat("truncated artifact: section header ", s, " of ", count,
                                        " runs past the end of the file"));
    }
    std::string name(bytes.data() + pos, len);
    pos += len;
    const uint64_t offset = ReadU64(bytes.data() + pos);
    const uint64_t size = ReadU64(bytes.data() + pos + 8);
    pos += 16;
    if (offset > file_size || size > file_size - offset) {
      return absl::DataLossError(StrCat("truncated artifact: section '", name, "' (offset ", offset,
                                        ", size ", size, ") runs past the end of the file (",
                                        file_size, " bytes)"));
    }
    if (offset % kAlign != 0) {
      return absl::DataLossError(StrCat("corrupt artifact: section '", name, "' offset ", offset,
                                        " is not a multiple of 64"));
    }
    if (!c.sections.emplace(name, bytes.substr(offset, size)).second) {
      return absl::InvalidArgumentError(StrCat("corrupt artifact: duplicate section '", name, "'"));
    }
  }
  // The code: a shared object (CPU), or device source and its launch plan
  // (GPU).
  const bool device = c.sections.count("device.cl") > 0 || c.sections.count("device.ptx") > 0;
  for (const char* required : {"manifest", device ? "launch" : "module.so", "weights"}) {
    if (c.sections.find(required) == c.sections.end()) {
      return absl::InvalidArgumentError(
          StrCat("invalid artifact: missing section '", required, "'"));
    }
  }
  return c;
}

absl::StatusOr<Manifest> ParseManifest(std::string_view text) {
  Manifest m;
  bool saw_header = false;
  int line_no = 0;
  for (std::string_view line : StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          StrCat("manifest line ", line_no, " (\"", line, "\"): ", why));
    };
    size_t sp = line.find(' ');
    std::string_view key = line.substr(0, sp);
    std::string_view value =
        sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (!saw_header) {
      int64_t v = 0;
      if (key != "kiln-artifact" || !ParseInt64(value, &v)) {
        return bad("expected the first record to be \"kiln-artifact <version>\"");
      }
      if (v != kArtifactVersion) {
        return bad(StrCat("unsupported manifest version ", v, " (this runtime reads ",
                          kArtifactVersion, ")"));
      }
      m.format_version = static_cast<int>(v);
      saw_header = true;
      continue;
    }
    auto int_value = [&](int64_t* out) -> absl::Status {
      if (!ParseInt64(value, out) || *out < 0) return bad("expected a non-negative integer");
      return absl::OkStatus();
    };
    int64_t iv = 0;
    if (key == "target") {
      m.target = std::string(value);
    } else if (key == "compiler_version") {
      m.compiler_version = std::string(value);
    } else if (key == "model_sha256") {
      m.model_sha256 = std::string(value);
    } else if (key == "entry") {
      if (value.empty() || value.find(' ') != std::string_view::npos) {
        return bad("expected one symbol name");
      }
      m.entry = std::string(value);
    } else if (key == "workspace_bytes") {
      if (absl::Status s = int_value(&m.workspace_bytes); !s.ok()) return s;
    } else if (key == "weights_bytes") {
      if (absl::Status s = int_value(&m.weights_bytes); !s.ok()) return s;
    } else if (key == "kernels" || key == "tuned_kernels") {
      if (absl::Status s = int_value(&iv); !s.ok()) return s;
      if (iv > std::numeric_limits<int>::max()) return bad("count too large");
      (key == "kernels" ? m.kernels : m.tuned_kernels) = static_cast<int>(iv);
    } else if (key == "input" || key == "output") {
      std::vector<std::string_view> f = StrSplit(value, ' ');
      if (f.size() != 3 || f[0].empty()) return bad("expected \"<name> <dtype> <shape>\"");
      TensorInfo info;
      info.name = std::string(f[0]);
      std::optional<DType> dtype = ParseDType(f[1]);
      if (!dtype) {
        return bad(StrCat("unknown dtype '", f[1], "' (expected one of ", DTypeNames(), ")"));
      }
      info.dtype = *dtype;
      if (!ParseShape(f[2], &info.shape)) {
        return bad(StrCat("bad shape '", f[2], "' (expected e.g. 1x3x32x32 or scalar)"));
      }
      (key == "input" ? m.inputs : m.outputs).push_back(std::move(info));
    }
    // Unknown keys are ignored (forward compatibility within version 1).
  }
  if (!saw_header) return absl::InvalidArgumentError("manifest is empty");
  if (m.entry.empty()) return absl::InvalidArgumentError("manifest has no 'entry' record");
  if (m.outputs.empty()) return absl::InvalidArgumentError("manifest has no 'output' record");
  return m;
}

void Module::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

Module::~Module() {
  if (dl_handle_ != nullptr) dlclose(dl_handle_);
  // A memfd-backed module keeps its descriptor open while loaded.
  constexpr std::string_view kFdPrefix = "/proc/self/fd/";
  int64_t fd = -1;
  if (std::string_view(so_path_).substr(0, kFdPrefix.size()) == kFdPrefix &&
      ParseInt64(std::string_view(so_path_).substr(kFdPrefix.size()), &fd)) {
    ::close(static_cast<int>(fd));
  }
}

absl::StatusOr<std::unique_ptr<Module>> Module::LoadFile(const std::string& path,
                                                         const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(StrCat("cannot open artifact '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(StrCat("cannot read artifact '", path, "'"));
  std::string bytes = std::move(ss).str();
  absl::StatusOr<std::unique_ptr<Module>> m = LoadBytes(bytes, options);
  if (!m.ok()) {
    return absl::Status(m.status().code(), StrCat(path, ": ", m.status().message()));
  }
  return m;
}

absl::StatusOr<std::unique_ptr<Module>> Module::LoadBytes(std::string_view bytes,
                                                          const LoadOptions& options) {
  absl::StatusOr<Container> c = ParseContainer(bytes);
  if (!c.ok()) return c.status();
  absl::StatusOr<Manifest> manifest = ParseManifest(c->sections.at("manifest"));
  if (!manifest.ok()) return manifest.status();
  std::string_view weights = c->sections.at("weights");
  if (absl::Status s = CheckBufferSizes(*manifest); !s.ok()) return s;
  if (static_cast<uint64_t>(manifest->weights_bytes) > weights.size()) {
    return absl::DataLossError(StrCat("manifest says weights_bytes ", manifest->weights_bytes,
                                      " but the weights section has ", weights.size(), " bytes"));
  }
  const auto cl = c->sections.find("device.cl"), ptx = c->sections.find("device.ptx");
  if (cl != c->sections.end() || ptx != c->sections.end()) {
    auto launches =
        ParseLaunchPlan(c->sections.at("launch"), *manifest, static_cast<int64_t>(weights.size()));
    if (!launches.ok()) return launches.status();
    const auto cubin = c->sections.find("device.cubin");
    auto program =
        cl != c->sections.end()
            ? LoadOpenClProgram(cl->second, *std::move(launches), *manifest, weights,
                                options.device)
            : LoadCudaProgram(ptx->second,
                              cubin != c->sections.end() ? cubin->second : std::string_view(),
                              *std::move(launches), *manifest, weights, options.device);
    if (!program.ok()) return program.status();
    std::unique_ptr<Module> m(new Module());
    m->manifest_ = *std::move(manifest);
    m->device_ = *std::move(program);
    return m;
  }
  if (!options.device.empty() && options.device != "cpu") {
    return absl::InvalidArgumentError(StrCat("this artifact is compiled for '", manifest->target,
                                             "' and runs on the CPU, not on ", options.device));
  }
  std::string_view so = c->sections.at("module.so");

  MakeRuntimeSymbolsGlobal();
  std::unique_ptr<Module> m(new Module());
  m->manifest_ = *std::move(manifest);

  // Write the shared object where dlopen can find it: an anonymous memfd
  // (nothing on disk; kept open while loaded, since glibc matches loaded
  // objects by path name), else a temporary file unlinked after dlopen.
  std::string dl_error;
  std::string path;
  int fd = static_cast<int>(::memfd_create("kiln-module.so", MFD_CLOEXEC));
  if (fd >= 0) {
    path = StrCat("/proc/self/fd/", fd);
    if (WriteAll(fd, so)) {
      m->dl_handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (m->dl_handle_ == nullptr) dl_error = dlerror();
    } else {
      dl_error = StrCat("cannot write the module: ", std::strerror(errno));
    }
    if (m->dl_handle_ == nullptr) ::close(fd);
  }
  if (m->dl_handle_ == nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    path = StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/kiln-module-XXXXXX.so");
    fd = ::mkstemps(path.data(), 3);
    if (fd < 0) {
      return absl::InternalError(
          StrCat("cannot create a file for the module: ", std::strerror(errno)));
    }
    bool written = WriteAll(fd, so);
    int err = errno;
    ::close(fd);
    if (!written) {
      ::unlink(path.c_str());
      return absl::InternalError(StrCat("cannot write the module: ", std::strerror(err)));
    }
    m->dl_handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m->dl_handle_ == nullptr) dl_error = dlerror();
    ::unlink(path.c_str());
    path.clear();  // nothing to close later
  }
  if (m->dl_handle_ == nullptr) {
    return absl::InvalidArgumentError(StrCat("cannot load the module.so section: ", dl_error));
  }
  m->so_path_ = path;
  dlerror();
  void* sym = dlsym(m->dl_handle_, m->manifest_.entry.c_str());
  if (sym == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("module.so does not export the entry point '", m->manifest_.entry, "'"));
  }
  m->entry_ = reinterpret_cast<EntryFn>(sym);

  m->weights_.reset(AllocAligned(weights.size()));
  m->workspace_.reset(AllocAligned(static_cast<size_t>(m->manifest_.workspace_bytes)));
  if (m->weights_ == nullptr || m->workspace_ == nullptr) {
    return absl::ResourceExhaustedError(
        StrCat("cannot allocate ", weights.size(), " bytes of weights and ",
               m->manifest_.workspace_bytes, " bytes of workspace"));
  }
  if (!weights.empty()) std::memcpy(m->weights_.get(), weights.data(), weights.size());
  return m;
}

absl::Status Module::Run(const std::vector<const void*>& inputs,
                         const std::vector<void*>& outputs) {
  if (inputs.size() != manifest_.inputs.size() || outputs.size() != manifest_.outputs.size()) {
    return absl::InvalidArgumentError(StrCat(
        "the model takes ", manifest_.inputs.size(), " inputs and ", manifest_.outputs.size(),
        " outputs; given ", inputs.size(), " and ", outputs.size()));
  }
  // A buffer may be null only where its tensor has no elements.
  std::vector<void*> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr && manifest_.inputs[i].ByteSize() > 0) {
      return absl::InvalidArgumentError(
          StrCat("input '", manifest_.inputs[i].name, "' is a null buffer"));
    }
    in[i] = const_cast<void*>(inputs[i]);  // the entry point does not write inputs
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr && manifest_.outputs[i].ByteSize() > 0) {
      return absl::InvalidArgumentError(
          StrCat("output '", manifest_.outputs[i].name, "' is a null buffer"));
    }
  }
  if (device_) return device_->Run(inputs, outputs);
  int32_t rc = entry_(in.data(), outputs.data(), weights_.get(), workspace_.get());
  if (rc != 0) {
    return absl::InternalError(StrCat("entry point '", manifest_.entry, "' returned ", rc));
  }
  return absl::OkStatus();
}

absl::Status Module::RunChecked(const std::vector<InputBuffer>& inputs,
                                const std::vector<OutputBuffer>& outputs) {
  if (inputs.size() != manifest_.inputs.size() || outputs.size() != manifest_.outputs.size()) {
    return absl::InvalidArgumentError(StrCat(
        "the model takes ", manifest_.inputs.size(), " inputs and ", manifest_.outputs.size(),
        " outputs; given ", inputs.size(), " and ", outputs.size()));
  }
  // "input 'x': expected int64 2x3, given float32 2x3"; with the element
  // counts where they differ.
  auto check = [](const char* kind, const TensorInfo& info, DType dtype,
                  int64_t given) -> absl::Status {
    const int64_t want = info.NumElements();
    if (dtype == info.dtype && given == want) return absl::OkStatus();
    std::string shape = ShapeToString(info.shape);
    return absl::InvalidArgumentError(
        given == want
            ? StrCat(kind, " '", info.name, "': expected ", DTypeName(info.dtype), " ", shape,
                     ", given ", DTypeName(dtype), " ", shape)
            : StrCat(kind, " '", info.name, "': expected ", DTypeName(info.dtype), " ", shape, " (",
                     want, " elements), given ", DTypeName(dtype), " with ", given, " elements"));
  };
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputBuffer& b = inputs[i];
    if (absl::Status s = check("input", manifest_.inputs[i], b.dtype, b.elements); !s.ok()) {
      return s;
    }
    in.push_back(b.data);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputBuffer& b = outputs[i];
    if (absl::Status s = check("output", manifest_.outputs[i], b.dtype, b.elements); !s.ok()) {
      return s;
    }
    out.push_back(b.data);
  }
  return Run(in, out);
}

}  // namespace kiln::deploy

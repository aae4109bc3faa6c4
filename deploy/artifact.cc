// The artifact container, its manifest, and Module: load the shared object
// from memory (memfd, or a temporary file where memfd is not available) and
// run its entry point.
#include "deploy/artifact.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "base/bytes.h"
#include "base/check.h"
#include "base/sha256.h"
#include "base/str.h"
#include "deploy/device.h"
#include "deploy/memory.h"
#include "deploy/parallel.h"

namespace kiln::deploy {
namespace {

constexpr uint32_t kMaxSections = 1024;
constexpr size_t kAlign = 64;

bool IsHex64(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
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

// The architecture this runtime was built for, as a target triple begins.
#if defined(__x86_64__)
constexpr std::string_view kRuntimeArch = "x86_64";
#elif defined(__aarch64__)
constexpr std::string_view kRuntimeArch = "aarch64";
#else
constexpr std::string_view kRuntimeArch = "";
#endif

// A CPU artifact's code runs only on the architecture its target's triple
// names (-mtriple=ARCH-...; none: the compiling host's, taken as ours).
absl::Status CheckArchitecture(const std::string& target) {
  const size_t at = target.find("-mtriple=");
  if (at == std::string::npos || kRuntimeArch.empty()) return absl::OkStatus();
  const std::string_view triple = std::string_view(target).substr(at + 9);
  const std::string_view arch = triple.substr(0, triple.find_first_of("- "));
  if (arch == kRuntimeArch || (arch == "arm64" && kRuntimeArch == "aarch64")) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      StrCat("this artifact is compiled for ", arch, " (target '", target, "'); this runtime runs ",
             kRuntimeArch, " code: run it with a kiln-run built for ", arch,
             " (scripts/build makes build/aarch64 for AArch64 boards)"));
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
  if (version == 1) {
    return absl::InvalidArgumentError(
        "artifact format version 1 carries no digests and no signature, and this runtime "
        "(format version 2) does not load it: recompile the model with this kiln (kiln compile "
        "from the log, or submit the job again to an upgraded tracker)");
  }
  if (version != kArtifactVersion) {
    return absl::InvalidArgumentError(StrCat("unsupported artifact format version ", version,
                                             " (this runtime reads version ", kArtifactVersion,
                                             ")"));
  }
  if (file_size < kArtifactHeaderBytes) {
    return absl::DataLossError(StrCat("truncated artifact: header needs ", kArtifactHeaderBytes,
                                      " bytes, file has ", file_size));
  }
  const uint32_t count = ReadU32(bytes.data() + 12);
  if (count > kMaxSections) {
    return absl::DataLossError(StrCat("corrupt artifact: section count ", count));
  }
  Container c;
  c.manifest_sha256 = std::string(bytes.substr(16, 32));
  const uint32_t scheme = ReadU32(bytes.data() + 48);
  const uint32_t reserved = ReadU32(bytes.data() + 52);
  std::string_view key = bytes.substr(56, 32), signature = bytes.substr(88, 64);
  const auto all_zero = [](std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char ch) { return ch == 0; });
  };
  if (reserved != 0) {
    return absl::DataLossError(StrCat("corrupt artifact: reserved header field is ", reserved));
  }
  if (scheme == static_cast<uint32_t>(SignatureScheme::kNone)) {
    if (!all_zero(key) || !all_zero(signature)) {
      return absl::DataLossError("corrupt artifact: unsigned, but its signature block is not zero");
    }
  } else if (scheme == static_cast<uint32_t>(SignatureScheme::kEd25519)) {
    c.scheme = SignatureScheme::kEd25519;
    c.signer_key = std::string(key);
    c.signature = std::string(signature);
  } else {
    return absl::DataLossError(StrCat("corrupt artifact: unknown signature scheme ", scheme));
  }
  // Every byte of the file: the header, a section, or zero padding.
  std::vector<std::pair<uint64_t, uint64_t>> covered;  // [begin, end)
  uint64_t pos = kArtifactHeaderBytes;
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
      return absl::DataLossError(StrCat("corrupt artifact: duplicate section '", name, "'"));
    }
    covered.emplace_back(offset, offset + size);
  }
  for (const auto& [b, e] : covered) {
    if (b < pos && e > b) {
      return absl::DataLossError(
          StrCat("corrupt artifact: a section at offset ", b, " overlaps the header"));
    }
  }
  covered.emplace_back(0, pos);  // the header and the section table
  std::sort(covered.begin(), covered.end());
  uint64_t end = 0;
  for (const auto& [b, e] : covered) {
    if (b > end && !all_zero(bytes.substr(end, b - end))) {
      return absl::DataLossError(StrCat("corrupt artifact: bytes ", end, "..", b,
                                        " belong to no section and are not zero"));
    }
    end = std::max(end, e);
  }
  if (end < file_size && (file_size - end >= kAlign || !all_zero(bytes.substr(end)))) {
    return absl::DataLossError(
        StrCat("corrupt artifact: ", file_size - end, " bytes past the end of its last section"));
  }
  // The code: a shared object (CPU), or device source and its launch plan
  // (GPU).
  const bool device = c.sections.count("device.cl") > 0 || c.sections.count("device.ptx") > 0;
  for (const char* required : {"manifest", device ? "launch" : "module.so", "weights"}) {
    if (c.sections.find(required) == c.sections.end()) {
      return absl::DataLossError(StrCat("invalid artifact: missing section '", required, "'"));
    }
  }
  return c;
}

absl::Status VerifyManifestDigest(const Container& c) {
  const std::string digest = Sha256(c.sections.at("manifest"));
  if (digest != c.manifest_sha256) {
    return absl::DataLossError(StrCat("altered or damaged artifact: the manifest's SHA-256 is ",
                                      Hex(digest), ", its header says ", Hex(c.manifest_sha256)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseTrustKey(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::ResourceExhaustedError("cannot read the trust key");
  EVP_PKEY* pkey = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (pkey == nullptr || EVP_PKEY_id(pkey) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(pkey);
    return absl::InvalidArgumentError(
        "the trust key is not an Ed25519 public key in PEM (\"-----BEGIN PUBLIC KEY-----\"; "
        "kiln-tracker keys prints the tracker's)");
  }
  std::string raw(32, '\0');
  size_t len = raw.size();
  const int ok =
      EVP_PKEY_get_raw_public_key(pkey, reinterpret_cast<unsigned char*>(raw.data()), &len);
  EVP_PKEY_free(pkey);
  if (ok != 1 || len != 32) return absl::InvalidArgumentError("cannot read the trust key");
  return raw;
}

absl::Status VerifySignature(const Container& c, std::string_view trust_key) {
  std::string trusted;
  if (!trust_key.empty()) {
    absl::StatusOr<std::string> raw = ParseTrustKey(trust_key);
    if (!raw.ok()) return raw.status();
    trusted = *std::move(raw);
  }
  if (c.scheme == SignatureScheme::kNone) {
    if (trusted.empty()) return absl::OkStatus();
    return absl::UnauthenticatedError(StrCat("the artifact is not signed, and a trust key (",
                                             KeyFingerprint(trusted), ") requires a signature"));
  }
  if (!trusted.empty() && c.signer_key != trusted) {
    return absl::UnauthenticatedError(StrCat("the artifact is signed by key ",
                                             KeyFingerprint(c.signer_key),
                                             ", not by the trusted key ", KeyFingerprint(trusted)));
  }
  EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(c.signer_key.data()),
      c.signer_key.size());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const std::string message = StrCat(std::string_view(kSignaturePrefix, 8), c.manifest_sha256);
  const bool good =
      pkey != nullptr && ctx != nullptr &&
      EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(c.signature.data()),
                       c.signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  ERR_clear_error();
  if (!good) {
    return absl::UnauthenticatedError(StrCat("altered artifact: its signature by key ",
                                             KeyFingerprint(c.signer_key),
                                             " does not match its manifest digest"));
  }
  return absl::OkStatus();
}

absl::Status VerifySectionDigests(const Container& c, const Manifest& m) {
  for (const auto& [name, data] : c.sections) {
    if (name == "manifest") continue;
    auto it = m.section_sha256.find(name);
    if (it == m.section_sha256.end()) {
      return absl::DataLossError(
          StrCat("altered artifact: section '", name, "' has no digest in the manifest"));
    }
    const std::string digest = Hex(Sha256(data));
    if (digest != it->second) {
      return absl::DataLossError(StrCat("altered or damaged artifact: section '", name,
                                        "' has SHA-256 ", digest, ", its manifest says ",
                                        it->second));
    }
  }
  for (const auto& [name, hex] : m.section_sha256) {
    if (c.sections.count(name) == 0) {
      return absl::DataLossError(
          StrCat("altered artifact: the manifest lists section '", name, "', the file has none"));
    }
  }
  return absl::OkStatus();
}

std::string IoContract(const Manifest& m) {
  std::string out =
      StrCat("workspace_bytes ", m.workspace_bytes, "\nweights_bytes ", m.weights_bytes, "\n");
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const TensorInfo& t : *list) {
      out += StrCat(list == &m.inputs ? "input " : "output ", t.name, " ", DTypeName(t.dtype), " ",
                    ShapeToString(t.shape), "\n");
    }
  }
  return out;
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
    } else if (key == "section") {
      std::vector<std::string_view> f = StrSplit(value, ' ');
      if (f.size() != 3 || f[0].empty() || f[1] != "sha256" || !IsHex64(f[2])) {
        return bad("expected \"<section> sha256 <64 lowercase hex digits>\"");
      }
      if (f[0] == "manifest") return bad("the manifest's digest is in the header");
      if (!m.section_sha256.emplace(std::string(f[0]), std::string(f[2])).second) {
        return bad(StrCat("section '", f[0], "' listed twice"));
      }
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
    // Unknown keys are ignored (forward compatibility within a version).
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
  // Nothing of the file is parsed beyond its container before the manifest's
  // digest and the signature over it are checked, nor mapped or loaded
  // before every section's digest is.
  absl::StatusOr<Container> c = ParseContainer(bytes);
  if (!c.ok()) return c.status();
  if (absl::Status s = VerifyManifestDigest(*c); !s.ok()) return s;
  if (absl::Status s = VerifySignature(*c, options.trust_key); !s.ok()) return s;
  absl::StatusOr<Manifest> manifest = ParseManifest(c->sections.at("manifest"));
  if (!manifest.ok()) return manifest.status();
  if (absl::Status s = VerifySectionDigests(*c, *manifest); !s.ok()) return s;
  const std::string signer =
      c->scheme == SignatureScheme::kNone ? std::string() : KeyFingerprint(c->signer_key);
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
    m->signer_ = signer;
    m->device_ = *std::move(program);
    return m;
  }
  if (!options.device.empty() && options.device != "cpu") {
    return absl::InvalidArgumentError(StrCat("this artifact is compiled for '", manifest->target,
                                             "' and runs on the CPU, not on ", options.device));
  }
  if (absl::Status s = CheckArchitecture(manifest->target); !s.ok()) return s;
  std::string_view so = c->sections.at("module.so");

  MakeRuntimeSymbolsGlobal();
  std::unique_ptr<Module> m(new Module());
  m->manifest_ = *std::move(manifest);
  m->signer_ = signer;

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
  // The buffers the code was compiled for: the manifest must promise no
  // smaller ones (nor other shapes or dtypes) than the entry point uses.
  const std::string io_symbol = StrCat(m->manifest_.entry, "_io");
  const char* io = static_cast<const char*>(dlsym(m->dl_handle_, io_symbol.c_str()));
  if (io == nullptr) {
    return absl::DataLossError(
        StrCat("module.so does not export '", io_symbol, "', the buffers its entry point takes"));
  }
  const std::string want = IoContract(m->manifest_);
  if (std::strncmp(io, want.c_str(), want.size() + 1) != 0) {
    return absl::DataLossError(
        StrCat("the manifest does not match the code: its entry point takes\n",
               std::string(io, strnlen(io, 4096)), "the manifest says\n", want));
  }

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

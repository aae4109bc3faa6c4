#pragma once
// Helpers for the deploy tests: temporary directories, packing an artifact
// container by hand (docs/artifact-format.md), compiling a tiny C module.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "base/dtype.h"

namespace kiln::deploy::testing {

inline std::string MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base ? base : "/tmp") + "/kiln-deploy-XXXXXX";
  char* d = mkdtemp(tmpl.data());
  return d == nullptr ? std::string() : std::string(d);
}

inline void RemoveDir(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline std::string Sha256(std::string_view bytes) {
  std::string md(32, '\0');
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(md.data()), &len,
             EVP_sha256(), nullptr);
  return md;
}

// Packs sections into a container (format version 2 unless `version` says
// otherwise), data at 64-byte-aligned offsets. With `digests`, the manifest
// (the section named so) gets a `section NAME sha256 HEX` record for every
// other section, and the header its SHA-256: what the compiler writes.
inline std::string PackArtifact(std::vector<std::pair<std::string, std::string>> sections,
                                uint32_t version = 2, bool digests = true) {
  if (digests) {
    for (auto& [name, data] : sections) {
      if (name != "manifest") continue;
      for (const auto& [other, bytes] : sections) {
        if (other != "manifest")
          data += "section " + other + " sha256 " + Hex(Sha256(bytes)) + "\n";
      }
    }
  }
  std::string header = "KILNART1";
  PutU32(&header, version);
  PutU32(&header, static_cast<uint32_t>(sections.size()));
  header.resize(152, '\0');
  for (const auto& [name, data] : sections) {
    if (name == "manifest" && digests) header.replace(16, 32, Sha256(data));
  }
  size_t header_size = header.size();
  for (const auto& [name, data] : sections) header_size += 4 + name.size() + 16;
  uint64_t offset = (header_size + 63) / 64 * 64;
  std::string body;
  for (const auto& [name, data] : sections) {
    PutU32(&header, static_cast<uint32_t>(name.size()));
    header += name;
    PutU64(&header, offset);
    PutU64(&header, data.size());
    std::string padded = data;
    padded.resize((data.size() + 63) / 64 * 64, '\0');
    body += padded;
    offset += padded.size();
  }
  header.resize((header.size() + 63) / 64 * 64, '\0');
  return header + body;
}

// A fresh Ed25519 key (free with EVP_PKEY_free).
inline EVP_PKEY* NewSigningKey() {
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  if (ctx != nullptr && EVP_PKEY_keygen_init(ctx) == 1) EVP_PKEY_keygen(ctx, &key);
  EVP_PKEY_CTX_free(ctx);
  return key;
}

// The key's public half as PEM: what a trust key is.
inline std::string PublicKeyPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, key);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

// Signs a packed artifact in place as the tracker does: scheme 1, the
// signer's raw public key, Ed25519 over "KILNSIG2" and the manifest digest.
inline void SignArtifact(std::string* bytes, EVP_PKEY* key) {
  const std::string message = "KILNSIG2" + bytes->substr(16, 32);
  unsigned char sig[64];
  size_t sig_len = sizeof(sig);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key);
  EVP_DigestSign(ctx, sig, &sig_len, reinterpret_cast<const unsigned char*>(message.data()),
                 message.size());
  EVP_MD_CTX_free(ctx);
  unsigned char raw[32];
  size_t raw_len = sizeof(raw);
  EVP_PKEY_get_raw_public_key(key, raw, &raw_len);
  (*bytes)[48] = 1;
  bytes->replace(56, 32, reinterpret_cast<const char*>(raw), 32);
  bytes->replace(88, 64, reinterpret_cast<const char*>(sig), 64);
}

// out[i] = in[i] * 2 + weights[i] over N elements of type T (float unless
// -DT=...), with kiln_parallel_for.
inline constexpr char kModuleSource[] = R"(
#include <stdint.h>
#ifndef T
#define T float
#endif
void kiln_parallel_for(int64_t n, void (*body)(int64_t i, void* ctx), void* ctx);
struct ctx { const T* in; T* out; const T* w; };
static void body(int64_t i, void* p) {
  struct ctx* c = (struct ctx*)p;
  c->out[i] = (T)(c->in[i] * 2 + c->w[i]);
}
int32_t kiln_main(void* const* inputs, void* const* outputs, const uint8_t* weights,
                  uint8_t* workspace) {
  if (((uintptr_t)weights % 64) != 0 || ((uintptr_t)workspace % 64) != 0) return 7;
  workspace[0] = 1;
  struct ctx c = { (const T*)inputs[0], (T*)outputs[0], (const T*)weights };
  kiln_parallel_for(N, body, &c);
  return 0;
}
int32_t kiln_fail(void* const* inputs, void* const* outputs, const uint8_t* weights,
                  uint8_t* workspace) {
  return 5;
}
)";

// What the test module's entry points declare they take (their `_io`
// constant; deploy::IoContract of Manifest(n, ..., dtype)).
inline std::string IoContract(int n, DType dtype) {
  const std::string shape = " 2x" + std::to_string(n / 2) + "\n";
  return "workspace_bytes 256\nweights_bytes " + std::to_string(n * DTypeBytes(dtype)) +
         "\ninput data " + DTypeName(dtype) + shape + "output out " + DTypeName(dtype) + shape;
}

inline DType DTypeOfCType(const std::string& ctype) {
  if (ctype == "int64_t") return DType::kInt64;
  if (ctype == "int32_t") return DType::kInt32;
  if (ctype == "uint8_t") return DType::kUInt8;
  if (ctype == "double") return DType::kFloat64;
  return DType::kFloat32;
}

// Compiles kModuleSource for n elements of C type `ctype` into dir/module.so
// (dir/module_<ctype>.so for another type than float), with the I/O contract
// of Manifest(n, ..., its dtype) for both entry points; returns its bytes
// ("" on failure).
inline std::string CompileModule(const std::string& dir, int n,
                                 const std::string& ctype = "float") {
  std::string src = dir + "/module_" + ctype + "_" + std::to_string(n) + ".c";
  std::string so = dir + (ctype == "float" ? "/module.so" : "/module_" + ctype + ".so");
  std::string io;
  for (char ch : IoContract(n, DTypeOfCType(ctype))) {
    if (ch == '\n') {
      io += "\\n";
    } else {
      io += ch;
    }
  }
  WriteFile(src, std::string(kModuleSource) + "const char kiln_main_io[] = \"" + io +
                     "\";\nconst char kiln_fail_io[] = \"" + io + "\";\n");
  std::string cmd =
      "cc -shared -fPIC -O2 -DN=" + std::to_string(n) + " -DT=" + ctype + " -o " + so + " " + src;
  if (std::system(cmd.c_str()) != 0) return "";
  return ReadFile(so);
}

// The manifest of the test module: input "data" and output "out", both
// `dtype` of shape 2x(n/2).
inline std::string Manifest(int n, const std::string& entry = "kiln_main",
                            DType dtype = DType::kFloat32) {
  const std::string type = DTypeName(dtype);
  return "kiln-artifact 2\n"
         "target llvm -mtriple=x86_64-pc-linux-gnu\n"
         "compiler_version 0.1.0\n"
         "model_sha256 abc123\n"
         "entry " +
         entry +
         "\n"
         "workspace_bytes 256\n"
         "weights_bytes " +
         std::to_string(n * DTypeBytes(dtype)) +
         "\n"
         "kernels 1\n"
         "tuned_kernels 0\n"
         "future_key ignored value\n"
         "input data " +
         type + " 2x" + std::to_string(n / 2) +
         "\n"
         "output out " +
         type + " 2x" + std::to_string(n / 2) + "\n";
}

// The weights of the test module: 0.5 * i as T (i for an integer T).
template <class T = float>
inline std::string Weights(int n) {
  std::vector<T> w(n);
  for (int i = 0; i < n; ++i) w[i] = std::is_floating_point_v<T> ? T(0.5 * i) : T(i);
  return std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(T));
}

}  // namespace kiln::deploy::testing

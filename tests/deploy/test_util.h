#pragma once
// Helpers for the deploy tests: temporary directories, packing an artifact
// container by hand (docs/artifact-format.md), compiling a tiny C module.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "deploy/dtype.h"

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

// Packs sections into a container, data at 64-byte-aligned offsets.
inline std::string PackArtifact(const std::vector<std::pair<std::string, std::string>>& sections,
                                uint32_t version = 1) {
  std::string header = "KILNART1";
  PutU32(&header, version);
  PutU32(&header, static_cast<uint32_t>(sections.size()));
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

// Compiles kModuleSource for n elements of C type `ctype` into dir/module.so
// (dir/module_<ctype>.so for another type than float); returns its bytes ("" on
// failure).
inline std::string CompileModule(const std::string& dir, int n,
                                 const std::string& ctype = "float") {
  std::string src = dir + "/module.c";
  std::string so = dir + (ctype == "float" ? "/module.so" : "/module_" + ctype + ".so");
  WriteFile(src, kModuleSource);
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
  return "kiln-artifact 1\n"
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

#pragma once
// Shared by the compiler tests: a JIT-built kernel against the naive
// reference implementation on seeded random inputs.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "compiler/codegen/jit.h"
#include "compiler/ir/ir.h"
#include "compiler/kernel.h"
#include "compiler/target.h"

namespace kiln::compiler::test_util {

// `s` as a workload; a test failure naming it when it does not parse.
inline Workload ParseWorkload(const std::string& s) {
  auto w = Workload::Parse(s);
  EXPECT_TRUE(w.ok()) << s << ": " << w.status();
  return w.ok() ? *std::move(w) : Workload{};
}

// `f` compiled for the host by the JIT (kept alive by *keep): its entry.
inline codegen::KernelFn Jit(const ir::PrimFunc& f, std::unique_ptr<codegen::JitModule>* keep) {
  auto m = codegen::JitCompile({f}, Target::Host());
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  auto fn = (*m)->Lookup(f.name);
  EXPECT_TRUE(fn.ok()) << fn.status();
  *keep = std::move(*m);
  return fn.ok() ? *fn : nullptr;
}

// A module's shared object (codegen::BuildSharedObjectFromFuncs) written to
// a temporary file and loaded; closed on destruction. `handle` is null (and
// the test failed) when it did not load.
struct LoadedModule {
  using Entry = int32_t (*)(void* const*, void* const*, const uint8_t*, uint8_t*);
  LoadedModule(const std::string& so, const std::string& name) {
    const std::string path = ::testing::TempDir() + "/" + name + ".so";
    {
      std::ofstream out(path, std::ios::binary);
      out.write(so.data(), static_cast<std::streamsize>(so.size()));
    }
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (handle != nullptr) entry = reinterpret_cast<Entry>(dlsym(handle, "kiln_main"));
    EXPECT_NE(entry, nullptr);
  }
  ~LoadedModule() {
    if (handle != nullptr) dlclose(handle);
  }
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  void* handle = nullptr;
  Entry entry = nullptr;
};

// Workloads the code generator tests share.
inline Workload EltwiseReluWorkload() {
  Workload w;
  w.op = Op::kEltwise;
  w.ints = {{"shape", {2, 3, 5, 7}}, {"in_shape", {2, 3, 5, 7}}};
  w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
  return w;
}

inline Workload DenseReluWorkload() {
  Workload w;
  w.op = Op::kDense;
  w.ints = {{"M", {13}},    {"N", {24}},      {"K", {37}},      {"transA", {0}}, {"transB", {1}},
            {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
  return w;
}

inline Workload Conv2dBiasAddReluWorkload() {
  Workload w;
  w.op = Op::kConv2d;
  w.ints = {{"N", {1}},           {"C", {3}},         {"H", {9}},
            {"W", {10}},          {"K", {8}},         {"R", {3}},
            {"S", {3}},           {"stride", {1, 1}}, {"pad", {1, 1, 1, 1}},
            {"dilation", {1, 1}}, {"groups", {1}},    {"bias", {1}},
            {"OH", {9}},          {"OW", {10}}};
  w.epilogue = {EpilogueOp{EpilogueKind::kAdd, {1, 8, 1, 1}}, EpilogueOp{EpilogueKind::kRelu, {}}};
  return w;
}

// `target`: the host's CPU, perhaps with features taken away (-mattr).
inline void ExpectMatchesReference(const Workload& w, const Config& c, const std::string& what,
                                   uint64_t seed = 7, const Target& target = Target::Host()) {
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << what << ": " << sig.status();
  auto kernel = BuildJit(w, c, target);
  ASSERT_TRUE(kernel.ok()) << what << " " << CanonicalConfig(c) << ": " << kernel.status();
  KernelBuffers b = MakeKernelBuffers(*sig, seed, 12345.f);
  ASSERT_TRUE(PackKernelInputs(**kernel, b).ok());
  std::vector<uint8_t> want(b.output.size(), 0);
  ASSERT_EQ((*kernel)->Run(b.args.data()), 0);
  auto ref = RunReference(w, b.input_ptrs, want.data());
  ASSERT_TRUE(ref.ok()) << what << ": " << ref;
  std::string detail;
  EXPECT_TRUE(OutputsMatch(b.output_dtype, b.output.data(), want.data(), b.OutputSize(), 1e-4, 1e-4,
                           &detail))
      << what << " config " << CanonicalConfig(c) << ": " << detail;
}

// Checks up to `want` random valid configs (of `attempts` drawn) of w
// against the reference; returns how many were valid.
inline int CheckRandomConfigs(const Workload& w, const Target& host, std::mt19937& rng,
                              int attempts, int want, const std::string& what) {
  auto knobs = *KnobsOf(w, host);
  int tried = 0;
  for (int attempt = 0; attempt < attempts && tried < want; ++attempt) {
    Config c;
    for (const Knob& k : knobs) c[k.name] = k.choices[rng() % k.choices.size()];
    if (!ValidateConfig(w, host, c).ok()) continue;
    ++tried;
    ExpectMatchesReference(w, c, what);
  }
  return tried;
}

}  // namespace kiln::compiler::test_util

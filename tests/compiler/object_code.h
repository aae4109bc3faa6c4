#pragma once
// Shared by the compiler tests: which instructions a kernel compiled for a
// target holds (its object code disassembled by llvm-objdump-19), on any
// host.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"

namespace kiln::compiler::test_util {

inline bool OnPath(const std::string& tool) {
  return std::system(StrCat("command -v ", tool, " >/dev/null 2>&1").c_str()) == 0;
}

// How many lines of the kernel's disassembly name each of `names` as their
// instruction, for workload `w` in config `c` compiled for `target`.
inline std::map<std::string, int> Mnemonics(const Workload& w, const Config& c,
                                            const Target& target,
                                            const std::vector<std::string>& names) {
  namespace fs = std::filesystem;
  std::map<std::string, int> count;
  absl::StatusOr<ir::PrimFunc> f = LowerWorkload(w, c, target, "k", {});
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return count;
  auto obj = codegen::EmitObjectFile({*f}, EntryPlan{}, target);
  EXPECT_TRUE(obj.ok()) << obj.status();
  if (!obj.ok()) return count;
  const fs::path dir =
      fs::path(::testing::TempDir()) / StrCat("kiln-objdump-", getpid(), "-", target.cpu);
  fs::create_directories(dir);
  std::ofstream(dir / "k.o", std::ios::binary).write(obj->data(), obj->size());
  const bool arm = target.triple.rfind("aarch64", 0) == 0;
  const std::string cmd = StrCat("llvm-objdump-19 -d ", arm ? "--mattr=+dotprod,+i8mm,+bf16 " : "",
                                 (dir / "k.o").string(), " > ", (dir / "k.s").string());
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "k.s");
  for (std::string line; std::getline(in, line);) {
    for (const std::string& name : names) {
      count[name] += line.find(StrCat("\t", name, "\t")) != std::string::npos ||
                     line.find(StrCat("\t", name)) == line.size() - name.size() - 1;
    }
  }
  fs::remove_all(dir);
  return count;
}

// The same for the workload `s` (text) in its default config.
inline std::map<std::string, int> Mnemonics(const std::string& s, const Target& target,
                                            const std::vector<std::string>& names) {
  absl::StatusOr<Workload> w = Workload::Parse(s);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return {};
  absl::StatusOr<Config> c = DefaultConfig(*w, target);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  return Mnemonics(*w, *c, target, names);
}

}  // namespace kiln::compiler::test_util

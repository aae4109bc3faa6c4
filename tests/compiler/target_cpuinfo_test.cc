// Target::FromCpuInfo: another machine's CPU (a board's) named as LLVM
// names it, from what its /proc/cpuinfo says.
#include <gtest/gtest.h>

#include "base/str.h"
#include "compiler/target.h"

namespace kiln::compiler {
namespace {

std::string ArmCpuInfo(const char* part, const char* features) {
  return StrCat("processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: ", features,
                "\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: ",
                part, "\nCPU revision\t: 3\n");
}

TEST(TargetFromCpuInfo, ArmBoardsByTheirPart) {
  // A Raspberry Pi 4 (Cortex-A72), a Pi 5 (Cortex-A76), a Graviton 3 (Neoverse V1).
  auto pi4 = Target::FromCpuInfo("aarch64-linux-gnu", ArmCpuInfo("0xd08", "fp asimd crc32"));
  ASSERT_TRUE(pi4.ok()) << pi4.status();
  EXPECT_EQ(pi4->Spec(), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  EXPECT_FALSE(pi4->HasFeature("dotprod"));
  auto pi5 = Target::FromCpuInfo("aarch64-linux-gnu", ArmCpuInfo("0xd0b", "fp asimd asimddp"));
  ASSERT_TRUE(pi5.ok());
  EXPECT_EQ(pi5->cpu, "cortex-a76");
  EXPECT_TRUE(pi5->HasFeature("dotprod"));
  auto g3 = Target::FromCpuInfo("aarch64-linux-gnu", ArmCpuInfo("0xd40", "fp asimd i8mm bf16"));
  ASSERT_TRUE(g3.ok());
  EXPECT_EQ(g3->cpu, "neoverse-v1");
  EXPECT_TRUE(g3->HasFeature("i8mm"));
  EXPECT_EQ(g3->NumVectorRegisters(), 32);
}

TEST(TargetFromCpuInfo, AnUnknownArmCoreKeepsTheExtensionsItLists) {
  auto t = Target::FromCpuInfo("aarch64-linux-gnu", ArmCpuInfo("0xfff", "fp asimd asimddp i8mm"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->Spec(), "llvm -mtriple=aarch64-linux-gnu -mcpu=generic -mattr=+dotprod,+i8mm");
  EXPECT_TRUE(t->HasFeature("dotprod"));
}

TEST(TargetFromCpuInfo, X86ByItsLevelAndExtensions) {
  const std::string v3 =
      "flags\t\t: fpu sse2 cx16 lahf_lm popcnt sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma "
      "movbe xsave\n";
  auto avx2 = Target::FromCpuInfo("x86_64-linux-gnu", "processor\t: 0\n" + v3);
  ASSERT_TRUE(avx2.ok()) << avx2.status();
  EXPECT_EQ(avx2->Spec(),
            "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64-v3 -mattr=+avx,+avx2,+fma");
  EXPECT_EQ(avx2->NativeVectorLanes(), 8);
  EXPECT_FALSE(avx2->HasFeature("avx512f"));
  std::string v4 = v3;
  v4.pop_back();
  v4 += " avx512f avx512bw avx512cd avx512dq avx512vl avx512_vnni avx512_bf16\n";
  auto avx512 = Target::FromCpuInfo("x86_64-linux-gnu", v4);
  ASSERT_TRUE(avx512.ok());
  EXPECT_EQ(avx512->cpu, "x86-64-v4");
  EXPECT_NE(avx512->attrs.find("+avx512vl,+avx512vnni,+avx512bf16"), std::string::npos)
      << avx512->attrs;
  EXPECT_EQ(avx512->NativeVectorLanes(), 16);
  EXPECT_TRUE(avx512->HasFeature("avx512vnni"));
}

TEST(TargetFromCpuInfo, OtherArchitecturesAreRefused) {
  EXPECT_EQ(Target::FromCpuInfo("riscv64-linux-gnu", "isa\t: rv64imafdc\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::compiler

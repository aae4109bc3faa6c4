#pragma once
// kiln's intrinsic calls (ir::Intrinsic: exp, shl, erf, ...) as LLVM IR:
// which exist for a type and with how many arguments, and the instructions
// of one call whose arguments the caller has checked.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::compiler::codegen {

// The number of arguments of intrinsic `name` returning an integer or bool
// (the integer table) or a float (the float table) of type `t`; nullopt when
// the table of t's kind has no such intrinsic, or t is neither.
std::optional<size_t> IntrinsicArity(ir::Intrinsic name, ir::DataType t);

// Emits intrinsic `name` of type `t` at b's insertion point in `module`.
// IntrinsicArity(name, t) must be args.size(), and every argument must be of
// the call's LLVM type (scalars splatted to t's lanes).
llvm::Value* EmitIntrinsic(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name,
                           ir::DataType t, const std::vector<llvm::Value*>& args);

// dot4(a, b) / dot4_vnni(a, b) on int32 lanes plus `acc`: each lane's four
// bytes of a (unsigned) times those of b (signed), summed, added to acc (no
// saturation). dot4_vnni is one vpdpbusd per 512, 256 or 128 bits of a lane
// count that is a multiple of 4 (the template asks for it only where the
// CPU has AVX512-VNNI or AVX-VNNI), on AArch64 one usdot per 128 bits with
// i8mm, or with dotprod alone two sdots (a's bytes flipped to signed, then
// 128 times b's sum added back); otherwise, and for dot4, widening
// multiplies in pairs of 16-bit products summed in 32 bits (x86's exact
// pmaddwd; pmaddubsw would saturate), then the two pairs of each lane. The
// code generator emits acc + dot4(...) as one call. dot2(a, b): each lane's
// two signed 16-bit halves of a times those of b, summed (x86's pmaddwd).
// The module flag NewModule sets on x86: the widest vectors, in bits, that
// the CPU multiplies 16-bit lanes in (512 with AVX512BW, 256 with AVX2).
inline constexpr const char* kX86IntVectorBitsFlag = "kiln.x86-int-vector-bits";
// The module flag NewModule sets on AArch64: the CPU's byte dot products,
// 2 with i8mm (usdot), 1 with dotprod alone (sdot, udot), 0 without.
inline constexpr const char* kAarch64DotFlag = "kiln.aarch64-dot";

llvm::Value* EmitDot4(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name,
                      ir::DataType t, llvm::Value* acc, llvm::Value* a, llvm::Value* v);

// dot2_bf16(a, b) on float32 lanes plus `acc`: a and b int32 lanes, each
// two bfloat16 (low half first); acc + a.lo * b.lo + a.hi * b.hi. One
// vdpbf16ps per 512, 256 or 128 bits where NewModule's flag says the CPU
// has AVX512_BF16 (products exact, sums rounded to nearest even, denormals
// flushed), one bfdot per 128 bits on AArch64 with BF16; else the halves
// widened to float32 (shifts) and fused multiply-adds. The code generator
// emits acc + dot2_bf16(...) as one call. The module flags: 1 where the x86
// CPU has AVX512_BF16 (and AVX512VL), where the AArch64 CPU has BF16.
inline constexpr const char* kX86Bf16DotFlag = "kiln.x86-bf16-dot";
inline constexpr const char* kAarch64Bf16DotFlag = "kiln.aarch64-bf16-dot";
llvm::Value* EmitDotBf16(llvm::IRBuilderBase& b, llvm::Module* module, ir::DataType t,
                         llvm::Value* acc, llvm::Value* a, llvm::Value* v);

}  // namespace kiln::compiler::codegen

#pragma once
// The AMX tile loops of a tensorized matrix product (Intel AMX-INT8 and
// AMX-BF16: Sapphire Rapids and later), emitted for the intrinsics
//
//   amx_dpbusd(C, ldc, A, lda, B, ldb, b_step, rows, n_tiles, k_steps)
//   amx_dpbf16ps(C, ldc, A, lda, B, ldb, b_step, rows, n_tiles, k_steps)
//
// (Evaluate statements; C, A, B addresses: ir::AddressOf; the strides in
// bytes). They compute C[m][16j + n] = sum over s < k_steps of the tile
// product of A's rows m (64 bytes from column byte 64s: 64 uint8, or 32
// bfloat16) and B's tile j of step s (16 rows of 64 bytes at B + s * b_step +
// 64j, rows ldb apart: for each output column, 4 int8 / 2 bfloat16 of
// consecutive k), for m < rows, 16j + n < 16 * n_tiles: int32 sums of
// uint8 x int8 (tdpbusd), float32 sums of bfloat16 pairs (tdpbf16ps), from
// zero. Rows go 16 at a time; the last ones (rows % 16) are copied into 16
// rows of stack scratch (16 * 64 * k_steps bytes), and C is written in whole
// tiles of 16 rows, so its buffer must have room for rows rounded up to 16
// (the rows past `rows` hold garbage). Rows go in pairs of row tiles where
// they can: 2 x 2 accumulators, two A tiles and one B tile at a time (each
// B tile loaded serves both), B's tiles two at a time; a single row tile
// holds n_tiles accumulators (n_tiles <= 6: 8 tile registers). Every
// tile shape is a constant, so LLVM configures the tiles once (ldtilecfg)
// and releases them.
//
// In place (three more arguments, constants: tap_row_bytes, taps_per_row,
// steps_per_tap): A is a convolution's padded input, one pixel a row, read
// without an im2col. Step s is tap t = s / steps_per_tap's, whose (r, c) =
// (t / taps_per_row, t % taps_per_row) shifts the rows by r rows of the
// image (tap_row_bytes) and c pixels (lda), plus its part of the pixel's
// channels (s % steps_per_tap) * 64: A's row m of step s is the 64 bytes at
// A + m lda + r tap_row_bytes + c lda + 64 (s % steps_per_tap). rows must
// then be a constant multiple of 16 (every row is read in place; no tail).
//
// Linux gives a process the tiles' state only when it asks
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)): the code asks once
// per module (a flag in the module), before its first tile instruction, so
// that any host that loads the kernel (kiln-run, an agent's worker, the
// compiler's JIT) may run it.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/ir/intrinsic.h"

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::compiler::codegen {

// Whether `f` is one of the AMX intrinsics above.
bool IsAmxIntrinsic(ir::Intrinsic f);

// The loops of intrinsic `f` at b's insertion point, which is left after
// them. `args` as above (integers of any width; n_tiles and k_steps
// constant). INVALID_ARGUMENT for a malformed call.
absl::Status EmitAmxTiles(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic f,
                          const std::vector<llvm::Value*>& args);

}  // namespace kiln::compiler::codegen

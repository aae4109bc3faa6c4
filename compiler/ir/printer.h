#pragma once
// Readable, TVMScript-like text of the tensor IR, for tests, --dump-ir and
// error messages. Not parsed back.
//
//   func add(A: float32[16], B: float32[16], C: float32[16]) {
//     for (i, 0, 16) parallel {
//       C[i*16 + j] = A[ramp(i*8, 1, 8)] + broadcast(1f, 8)
//     }
//   }
//
// Integer constants of type int64 print bare ("16"), float32 constants with
// an "f" suffix ("1.5f"); other types as a cast ("int32(3)"). Binary
// operators print with minimal parentheses (`*`, `/`, `%` without spaces);
// FloorDiv/FloorMod/Min/Max as calls. Two different variables with the same
// name print as "x", "x_1", ... Every statement line ends with '\n' and is
// indented by two spaces per level.

#include <ostream>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::ir {

std::string ToText(const Expr& e);
std::string ToText(const Stmt& s);
std::string ToText(const PrimFunc& f);

std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);
std::ostream& operator<<(std::ostream& os, const PrimFunc& f);

}  // namespace kiln::ir

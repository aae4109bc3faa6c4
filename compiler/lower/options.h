#pragma once
// How a schedule is lowered (lower/lower.h); part of the operator library's
// face (compiler/kernel.h), which passes it through.

namespace kiln::compiler {

struct LowerOptions {
  bool dump_ir = false;  // print the IR after every lowering pass to stderr
  // Stop after storage flattening, before any simplification: loops keep
  // their annotations (vectorized, unrolled, parallel) instead of being
  // turned into vector expressions and copies, tails are not partitioned,
  // and extents may be unfolded constant expressions. What the tuner's
  // feature extraction reads (it evaluates them; simplifying is a third of
  // lowering's time); not for code generation.
  bool loops_only = false;
  // False: loops the schedule vectorized stay loops (for the C source
  // emitter, whose devices get their parallelism from threads, and whose
  // vector types have 2, 3, 4, 8 or 16 lanes only).
  bool vectorize = true;
};

}  // namespace kiln::compiler

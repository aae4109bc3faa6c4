#pragma once
// What a board runner does with a request: say what the board is, load,
// verify and time one built kernel with the farm's timing policy, or a
// model's variants end to end
// (base/timing.h). A kernel runs in a child process of its own, so that one
// that crashes, hangs past its time limit or scribbles over memory costs
// that measurement only (an error in the answer), never the runner.
#include "board/wire.h"

namespace kiln::board {

// This board: the runner's own triple, /proc/cpuinfo's CPU and features,
// the CPUs it may use, sysfs's caches, the FMA peak over every core
// (measured once, in a child process).
Description DescribeThisBoard();

// Loads `request.object` (a shared object for this board's triple), runs
// `request.symbol` on the inputs, compares the output with the reference,
// and times it. Never fails as a call: errors are typed in the answer.
Measured RunMeasurement(const MeasureRequest& request);

// Loads each of `request.artifacts` (kiln artifacts for this board) with
// the deploy runtime and times them against each other end to end
// (board/variants.h), in one child process within `request.timeout_ms`.
MeasuredModel RunModelMeasurement(const MeasureModelRequest& request);

}  // namespace kiln::board

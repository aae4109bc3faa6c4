#pragma once
// kiln-tracker's command line (tracker_cli.cc): the tracker, its tokens and
// keys subcommands, and the compile worker it starts for each job.

namespace kiln::tracker {

class CompileFaults;  // compile_sandbox.h

// Runs kiln-tracker with `argv`; its compile workers inject `faults`
// (nullptr for the released program). Returns the exit code.
int TrackerMain(int argc, char** argv, const CompileFaults* faults);

}  // namespace kiln::tracker

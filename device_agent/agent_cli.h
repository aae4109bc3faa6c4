#pragma once
// kiln-agent's command line (agent_cli.cc): the agent, its measurement
// worker (--measure-worker) and --list-devices.

namespace kiln::agent {

class WorkerFaults;  // worker_faults.h

// Runs kiln-agent with `argv`; its measurement workers inject `faults`
// (nullptr for the released program). Returns the exit code.
int AgentMain(int argc, char** argv, const WorkerFaults* faults);

}  // namespace kiln::agent

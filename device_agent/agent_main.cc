// kiln-agent (device_agent/agent_cli.h).
#include "device_agent/agent_cli.h"

int main(int argc, char** argv) { return kiln::agent::AgentMain(argc, argv, nullptr); }

#pragma once
// The OpenCL devices this board offers, through the ICD loader (on a CPU-only
// machine: PoCL). Reported in the agent's hardware description and by
// `kiln-agent --list-devices`; the OpenCL code generator builds on it later.

#include <string>
#include <vector>

namespace kiln::agent {

struct OpenClDevice {
  std::string platform;
  std::string name;
  std::string type;  // "cpu", "gpu", "accelerator", "other"
  int compute_units = 0;
  long long global_mem_bytes = 0;
};

// Empty when kiln was built without OpenCL or no platform is installed.
std::vector<OpenClDevice> ListOpenClDevices();

// "OpenCL: <platform>/<name> (<type>, N CUs)[, ...]" or "" when there is none.
std::string DescribeOpenClDevices(const std::vector<OpenClDevice>& devices);

}  // namespace kiln::agent

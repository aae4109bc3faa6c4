#pragma once
// Faults a measurement worker can be made to show, for the farm's fault
// tests (tests/e2e/farm_faults_test.py, the sandbox tests): a crash or a
// hang on a candidate, a crash while building one, wrong results, lying
// costs. The released kiln-agent injects none (RunMeasureWorker's `faults`
// is nullptr, and no fault's behaviour is in its sources); the fault tests'
// twin, kiln-agent-faults (tests/faults/agent_faults_main.cc), injects the
// ones its environment asks for.
#include <string>

#include "kiln/v1/agent.pb.h"

namespace kiln::agent {

class WorkerFaults {
 public:
  virtual ~WorkerFaults() = default;
  // Before candidate `id` is measured (built or not).
  virtual void BeforeMeasure(const std::string& id) const = 0;
  // Before candidate `id` is built (also ahead, for another's request).
  virtual void BeforeBuild(const std::string& id) const = 0;
  // The result of a candidate, before it is sent.
  virtual void AfterMeasure(kiln::v1::MeasureResult& result) const = 0;
};

}  // namespace kiln::agent

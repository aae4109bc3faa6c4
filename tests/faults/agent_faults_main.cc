// kiln-agent-faults: kiln-agent whose measurement workers show the faults
// the farm's fault tests ask for by environment variable
// (device_agent/worker_faults.h; started by tests/e2e/farm.py when a test
// sets one, and by the sandbox tests):
//   KILN_TEST_CRASH_WORKER=<candidate id>  abort when measuring it
//   KILN_TEST_HANG_WORKER=<candidate id>   sleep forever when measuring it
//   KILN_TEST_CRASH_BUILD=<candidate id>   abort when building it (also
//                                          ahead, for another's request)
//   KILN_TEST_WRONG_RESULTS=<anything>     every verified candidate's output
//                                          differs from the reference
//   KILN_TEST_LIE_COSTS=<number>           every measured cost becomes it
//                                          (e.g. nan, -1)
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "device_agent/agent_cli.h"
#include "device_agent/measure.h"
#include "device_agent/worker_faults.h"

namespace {

bool Names(const char* variable, const std::string& id) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' && id == v;
}

class FaultsFromEnv : public kiln::agent::WorkerFaults {
 public:
  void BeforeMeasure(const std::string& id) const override {
    if (Names("KILN_TEST_CRASH_WORKER", id)) std::abort();
    if (Names("KILN_TEST_HANG_WORKER", id)) {
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    }
  }
  void BeforeBuild(const std::string& id) const override {
    if (Names("KILN_TEST_CRASH_BUILD", id)) std::abort();
  }
  void AfterMeasure(kiln::v1::MeasureResult& result) const override {
    if (std::getenv("KILN_TEST_WRONG_RESULTS") != nullptr &&
        result.error_kind() == kiln::v1::MEASURE_ERROR_KIND_NONE) {
      result =
          kiln::agent::ErrorResult(kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT,
                                   "output differs from the reference (KILN_TEST_WRONG_RESULTS)");
    }
    if (const char* lie = std::getenv("KILN_TEST_LIE_COSTS"); lie != nullptr && *lie != '\0') {
      for (int i = 0; i < result.costs_s_size(); ++i) {
        result.set_costs_s(i, std::strtod(lie, nullptr));
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  static const FaultsFromEnv faults;
  return kiln::agent::AgentMain(argc, argv, &faults);
}

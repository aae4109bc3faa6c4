// kiln-tracker-faults: kiln-tracker whose compile workers show the fault the
// farm's fault tests ask for by environment variable (CompileFaults,
// tracker/compile_sandbox.h; started by tests/e2e/farm.py when a test sets
// one):
//   KILN_TEST_CRASH_COMPILE=1  abort after loading the job's model, before
//                              compiling it
#include <cstdlib>
#include <cstring>

#include "tracker/compile_sandbox.h"
#include "tracker/tracker_cli.h"

namespace {

class FaultsFromEnv : public kiln::tracker::CompileFaults {
 public:
  void BeforeCompile() const override {
    const char* crash = std::getenv("KILN_TEST_CRASH_COMPILE");
    if (crash != nullptr && std::strcmp(crash, "1") == 0) std::abort();
  }
};

}  // namespace

int main(int argc, char** argv) {
  static const FaultsFromEnv faults;
  return kiln::tracker::TrackerMain(argc, argv, &faults);
}

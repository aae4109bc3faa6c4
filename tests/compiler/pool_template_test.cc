// The one pool template (compiler/ops/pool.cc) serves pool2d and pool3d: its
// knobs and default configs are pinned to what the separate 2-D and 3-D
// templates produced before they were merged (tests/compiler/
// pool_template_pinned.inc: workload, then "knobs -> default" for an AVX2 and
// an AVX-512 target), so that stored tuning records stay valid. Never
// regenerate the knobs from the current code. The defaults change only
// deliberately (strided windows vectorized since the twenty-fourth session).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/ops/lower_workload.h"

namespace kiln::compiler {
namespace {

Target WithCpu(const char* cpu) {
  Target t;
  t.triple = "x86_64-pc-linux-gnu";
  t.cpu = cpu;
  return t;
}

// "knob=c0,c1;... -> default config".
std::string Describe(const std::string& canonical, const Target& t) {
  auto w = Workload::Parse(canonical);
  if (!w.ok()) return "parse error";
  auto knobs = KnobsOf(*w, t);
  auto def = DefaultConfig(*w, t);
  if (!knobs.ok() || !def.ok()) return "no knobs";
  std::vector<std::string> ks;
  for (const Knob& k : *knobs) ks.push_back(StrCat(k.name, "=", StrJoin(k.choices, ",")));
  return StrCat(StrJoin(ks, ";"), " -> ", CanonicalConfig(*def));
}

struct Pinned {
  const char* workload;
  const char* haswell;
  const char* skylake_avx512;
};

const std::vector<Pinned>& PinnedCases() {
  static const std::vector<Pinned> cases = {
#include "tests/compiler/pool_template_pinned.inc"
  };
  return cases;
}

TEST(PoolTemplate, KnobsAndDefaultsPinned) {
  for (const Pinned& p : PinnedCases()) {
    EXPECT_EQ(Describe(p.workload, WithCpu("haswell")), p.haswell) << p.workload;
    EXPECT_EQ(Describe(p.workload, WithCpu("skylake-avx512")), p.skylake_avx512) << p.workload;
  }
}

}  // namespace
}  // namespace kiln::compiler

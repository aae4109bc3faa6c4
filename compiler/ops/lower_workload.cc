#include "compiler/ops/lower_workload.h"

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"
#include "compiler/ops/registry.h"

namespace kiln::compiler {

absl::StatusOr<std::vector<Knob>> KnobsOf(const Workload& workload, const Target& target) {
  auto t = ops::TemplateFor(workload, target);
  if (!t.ok()) return t.status();
  return (*t)->knobs(workload, target);
}

absl::StatusOr<Config> DefaultConfig(const Workload& workload, const Target& target) {
  auto t = ops::TemplateFor(workload, target);
  if (!t.ok()) return t.status();
  return (*t)->default_config(workload, target);
}

absl::StatusOr<std::vector<Config>> VariantConfigs(const Workload& workload, const Target& target) {
  auto t = ops::TemplateFor(workload, target);
  if (!t.ok()) return t.status();
  if ((*t)->variants) return (*t)->variants(workload, target);
  return std::vector<Config>{(*t)->default_config(workload, target)};
}

namespace {

// Config c of template `tmpl` (w's) against its knobs, then the template's
// own check.
absl::Status CheckWith(const ops::OpTemplate& tmpl, const Workload& w, const Target& t,
                       const Config& c, const std::vector<Knob>& knobs) {
  if (auto s = CheckConfigAgainstKnobs(c, knobs); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(w.op, ": ", s.message()));
  }
  return tmpl.check(w, t, c);
}

}  // namespace

absl::Status ValidateConfig(const Workload& workload, const Target& target, const Config& config) {
  auto t = ops::TemplateFor(workload, target);
  if (!t.ok()) return t.status();
  return CheckWith(**t, workload, target, config, (*t)->knobs(workload, target));
}

absl::Status ValidateConfig(const Workload& workload, const Target& target, const Config& config,
                            const std::vector<Knob>& knobs) {
  auto t = ops::TemplateFor(workload, target);
  if (!t.ok()) return t.status();
  return CheckWith(**t, workload, target, config, knobs);
}

namespace ops {
absl::StatusOr<Built> BuildTemplate(const Workload& w, const Target& t, const Config& c) {
  auto tmpl = ops::TemplateFor(w, t);
  if (!tmpl.ok()) return tmpl.status();
  if (auto s = CheckWith(**tmpl, w, t, c, (*tmpl)->knobs(w, t)); !s.ok()) return s;
  return (*tmpl)->build(w, t, c);
}
}  // namespace ops

namespace {

// The kernel, its packed inputs and their packs, each from one built template
// (building it validates the config and creates the schedule: LowerKernel
// builds it once for all three).
absl::StatusOr<ir::PrimFunc> LowerBuiltKernel(const ops::Built& built, const Target& t,
                                              const std::string& func_name,
                                              const LowerOptions& opts) {
  LowerOptions options = opts;
  if (t.is_gpu()) options.vectorize = false;  // threads, not SIMD lanes
  auto func = lower::Lower(*built.schedule, built.args, func_name, options);
  if (func.ok()) func->slp_vectorize = built.slp_vectorize;
  return func;
}

std::vector<PackedInput> PackedInputsOfBuilt(const ops::Built& built) {
  std::vector<PackedInput> out;
  for (const ops::Built::Pack& p : built.packs) {
    out.push_back({p.input, p.packed->shape, ops::FromIrType(p.packed.buffer()->dtype)});
  }
  return out;
}

absl::StatusOr<ir::PrimFunc> LowerBuiltPack(const ops::Built& built, const Workload& w, int input,
                                            const std::string& func_name,
                                            const LowerOptions& opts) {
  for (const ops::Built::Pack& p : built.packs) {
    if (p.input != input) continue;
    te::Schedule s({p.packed});
    auto func = lower::Lower(s, {p.source, p.packed}, func_name, opts);
    if (func.ok()) func->run_once = true;
    return func;
  }
  return absl::NotFoundError(StrCat(w.op, ": input ", input, " is not packed"));
}

}  // namespace

absl::StatusOr<ir::PrimFunc> LowerWorkload(const Workload& w, const Config& c, const Target& t,
                                           const std::string& func_name, const LowerOptions& opts) {
  auto built = ops::BuildTemplate(w, t, c);
  if (!built.ok()) return built.status();
  return LowerBuiltKernel(*built, t, func_name, opts);
}

absl::StatusOr<std::vector<PackedInput>> PackedInputsOf(const Workload& w, const Config& c,
                                                        const Target& t) {
  auto built = ops::BuildTemplate(w, t, c);
  if (!built.ok()) return built.status();
  return PackedInputsOfBuilt(*built);
}

absl::StatusOr<ir::PrimFunc> LowerPack(const Workload& w, const Config& c, const Target& t,
                                       int input, const std::string& func_name,
                                       const LowerOptions& opts) {
  auto built = ops::BuildTemplate(w, t, c);
  if (!built.ok()) return built.status();
  return LowerBuiltPack(*built, w, input, func_name, opts);
}

std::string PackFunctionName(int input) { return StrCat("kiln_pack", input); }

absl::StatusOr<std::vector<ir::PrimFunc>> LowerKernel(const Workload& workload,
                                                      const Config& config, const Target& target,
                                                      const std::string& kernel_name,
                                                      const LowerOptions& options,
                                                      std::vector<PackedInput>* packed) {
  auto built = ops::BuildTemplate(workload, target, config);
  if (!built.ok()) return built.status();
  absl::StatusOr<ir::PrimFunc> func = LowerBuiltKernel(*built, target, kernel_name, options);
  if (!func.ok()) return func.status();
  std::vector<PackedInput> inputs = PackedInputsOfBuilt(*built);
  std::vector<ir::PrimFunc> funcs = {*std::move(func)};
  for (const PackedInput& p : inputs) {
    auto f = LowerBuiltPack(*built, workload, p.input, PackFunctionName(p.input), options);
    if (!f.ok()) return f.status();
    funcs.push_back(*std::move(f));
  }
  if (packed != nullptr) *packed = std::move(inputs);
  return funcs;
}

}  // namespace kiln::compiler

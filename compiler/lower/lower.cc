#include "compiler/lower/lower.h"

#include <iostream>

#include "compiler/ir/printer.h"
#include "compiler/lower/flatten.h"
#include "compiler/lower/loop_nest.h"
#include "compiler/lower/partition.h"
#include "compiler/lower/simplify.h"
#include "compiler/lower/unroll.h"
#include "compiler/lower/vectorize.h"

namespace kiln::lower {
using namespace ir;

absl::StatusOr<PrimFunc> Lower(const te::Schedule& schedule, const std::vector<te::Tensor>& args,
                               const std::string& name, const compiler::LowerOptions& opts) {
  auto dump = [&](const char* pass, const PrimFunc& f) {
    if (opts.dump_ir) std::cerr << "// after " << pass << "\n" << ToText(f) << "\n";
  };
  auto nest = BuildLoopNest(schedule);
  if (!nest.ok()) return nest.status();
  PrimFunc f;
  f.name = name;
  for (const te::Tensor& t : args) f.params.push_back(t.buffer());
  f.body = *nest;
  dump("loop_nest", f);
  f = FlattenStorage(f, /*simplify=*/!opts.loops_only);
  dump("flatten", f);
  if (opts.loops_only) return f;
  f.body = Simplify(f.body);
  dump("simplify", f);
  f.body = PartitionLoops(f.body);
  dump("partition", f);
  f.body = PartitionSelects(f.body);
  dump("partition_selects", f);
  if (opts.vectorize) {
    f.body = VectorizeLoops(f.body);
    dump("vectorize", f);
  }
  f.body = UnrollLoops(f.body);
  dump("unroll", f);
  f.body = StripLikely(Simplify(f.body));
  dump("simplify_final", f);
  return f;
}

}  // namespace kiln::lower

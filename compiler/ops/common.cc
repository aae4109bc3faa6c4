#include "compiler/ops/common.h"

#include <algorithm>

#include "deploy/str.h"

namespace kiln::compiler::ops {
using namespace ir;

std::vector<int64_t> UpTo(std::vector<int64_t> candidates, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t c : candidates) {
    if (c <= std::max<int64_t>(limit, 1) && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  if (out.empty()) out.push_back(1);
  return out;
}

std::vector<int64_t> VectorChoices(int64_t extent, int lanes) {
  std::vector<int64_t> out = {1};
  if (extent > 1 && extent < lanes) out.push_back(extent);
  for (int m = 1; m <= 4; ++m) {
    if (lanes * m <= extent) out.push_back(static_cast<int64_t>(lanes) * m);
  }
  return out;
}

int64_t Pick(const std::vector<int64_t>& choices, int64_t want) {
  int64_t best = choices.front();
  for (int64_t c : choices) {
    if (c <= want && c > best) best = c;
  }
  return best;
}

std::vector<Expr> BroadcastIndex(const std::vector<int64_t>& shape,
                                 const std::vector<Var>& out_idx) {
  std::vector<Expr> idx;
  size_t off = out_idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    idx.push_back(shape[d] == 1 ? Expr(IntImm(0)) : Expr(out_idx[off + d]));
  return idx;
}

std::vector<te::Tensor> EpilogueOperands(const Workload& w) {
  std::vector<te::Tensor> out;
  int i = 0;
  for (const EpilogueOp& e : w.epilogue) {
    if (e.kind == EpilogueKind::kRelu) continue;
    out.push_back(te::Placeholder(StrCat("ep", i++), e.operand_shape));
  }
  return out;
}

Expr ApplyEpilogue(const Workload& w, Expr y, const std::vector<Var>& idx,
                   const std::vector<te::Tensor>& operands) {
  size_t next = 0;
  for (const EpilogueOp& e : w.epilogue) {
    if (e.kind == EpilogueKind::kRelu) {
      y = Max(y, FloatImm(0.0));
      continue;
    }
    const te::Tensor& t = operands[next++];
    Expr v = t(BroadcastIndex(t->shape, idx));
    y = e.kind == EpilogueKind::kAdd ? y + v : y * v;
  }
  return y;
}

}  // namespace kiln::compiler::ops

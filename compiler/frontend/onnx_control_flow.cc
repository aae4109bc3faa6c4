// Control flow: If, Loop and Scan, their subgraphs inlined into the graph
// at import (InlineSubgraph: once per branch or iteration, every name the
// subgraph defines prefixed, names from enclosing scopes kept).
//
// - If: a condition known at compile time (a shape test, as in function
//   bodies such as AffineGrid's) inlines the branch it picks; one known only
//   at run time computes both branches and selects with Where, when their
//   outputs agree in shape and dtype (both are pure: only time is spent).
// - Loop: unrolled, iteration by iteration, while the trip count (known at
//   compile time) and the condition allow; the condition must fold to a
//   constant after each iteration (a loop whose exit depends on run-time
//   values is refused). Scan outputs are stacked along a new first axis.
// - Scan (opset 9 and later; opset 8's batch form with batch 1 and no
//   sequence_lens): unrolled over the scan axis of its scan inputs, forward
//   or reverse per input and output, the state carried from step to step.
// At most kMaxIterations iterations per node, and kMaxExpandedNodes nodes
// in all (a loop nested in a loop multiplies).
#include <algorithm>
#include <map>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {
namespace {

constexpr int64_t kMaxIterations = 4096;

// Renames, in `g` and the graphs nested in it, every node input found in
// `names` (values of the enclosing scope that the inlining renamed).
void RenameReferences(onnx::GraphProto* g, const std::map<std::string, std::string>& names) {
  for (auto& n : *g->mutable_node()) {
    for (auto& in : *n.mutable_input()) {
      if (auto it = names.find(in); it != names.end()) in = it->second;
    }
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) RenameReferences(a.mutable_g(), names);
      for (auto& sub : *a.mutable_graphs()) RenameReferences(&sub, names);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> Importer::InlineSubgraph(
    const onnx::GraphProto& g, const std::vector<std::string>& inputs, const std::string& prefix) {
  if (static_cast<size_t>(g.input_size()) != inputs.size()) {
    return absl::InvalidArgumentError(StrCat("subgraph '", g.name(), "' takes ", g.input_size(),
                                             " inputs, given ", inputs.size()));
  }
  if (auto s = CountExpandedNode(g.node_size()); !s.ok()) return s;
  std::map<std::string, std::string> names;
  for (int i = 0; i < g.input_size(); ++i) names[g.input(i).name()] = inputs[i];
  for (const auto& t : g.initializer()) {
    const std::string name = prefix + t.name();
    if (auto s = AddInitializer(t, name); !s.ok()) return s;
    names[t.name()] = name;
  }
  for (const auto& original : g.node()) {
    onnx::NodeProto n = original;
    n.set_name(prefix + Name(original));
    for (auto& in : *n.mutable_input()) {
      if (auto it = names.find(in); it != names.end()) in = it->second;
    }
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) RenameReferences(a.mutable_g(), names);
      for (auto& sub : *a.mutable_graphs()) RenameReferences(&sub, names);
    }
    for (auto& out : *n.mutable_output()) {
      if (out.empty()) continue;
      names[out] = prefix + out;
      out = prefix + out;
    }
    if (auto s = ImportChecked(n); !s.ok()) return s;
  }
  std::vector<std::string> outs;
  for (const auto& o : g.output()) {
    auto it = names.find(o.name());
    outs.push_back(it == names.end() ? o.name() : it->second);
    if (!by_name_.count(outs.back())) {
      return absl::InvalidArgumentError(
          StrCat("subgraph '", g.name(), "': output '", o.name(), "' is never computed"));
    }
  }
  return outs;
}

absl::Status Importer::ImportControlFlow(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  const std::string base = Name(node);
  auto graph_attr = [&](const char* name) -> const onnx::GraphProto* {
    const auto* a = AttrTyped(node, name, onnx::AttributeProto::GRAPH);
    return a ? &a->g() : nullptr;
  };
  // The node's k-th output, from the value named `v`.
  auto bind_output = [&](int k, const std::string& v) -> absl::Status {
    if (k >= node.output_size() || node.output(k).empty()) return absl::OkStatus();
    auto r = Emit(base, "Identity", {v}, nullptr, node.output(k));
    return StatusOf(r);
  };
  // Per-iteration values stacked along a new `axis` ([n] + shape).
  auto stack = [&](const std::vector<std::string>& parts, int64_t axis,
                   const std::string& out) -> absl::Status {
    std::vector<std::string> lifted;
    auto ax = EmitInt64s(base, {axis});
    if (!ax.ok()) return ax.status();
    for (const std::string& p : parts) {
      auto u = Emit(base, "Unsqueeze", {p, *ax});
      if (!u.ok()) return u.status();
      lifted.push_back(*u);
    }
    auto r = Emit(base, "Concat", lifted, IntAttr("axis", axis), out);
    return StatusOf(r);
  };

  if (op == "If") {
    const onnx::GraphProto *then_g = graph_attr("then_branch"), *else_g = graph_attr("else_branch");
    if (!then_g || !else_g) return absl::InvalidArgumentError("If needs both branches");
    auto cond = In(node, 0);
    if (!cond.ok()) return cond.status();
    if (V(*cond).NumElements() != 1) {
      return absl::InvalidArgumentError("If's condition must have one element");
    }
    if (V(*cond).IsConstant()) {
      const bool pick = V(*cond).ToDoubles()[0] != 0;
      auto outs =
          InlineSubgraph(pick ? *then_g : *else_g, {}, StrCat(base, pick ? "::then/" : "::else/"));
      if (!outs.ok()) return outs.status();
      for (size_t k = 0; k < outs->size(); ++k) {
        if (auto s = bind_output(static_cast<int>(k), (*outs)[k]); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    auto then_outs = InlineSubgraph(*then_g, {}, base + "::then/");
    if (!then_outs.ok()) return then_outs.status();
    auto else_outs = InlineSubgraph(*else_g, {}, base + "::else/");
    if (!else_outs.ok()) return else_outs.status();
    if (then_outs->size() != else_outs->size()) {
      return absl::InvalidArgumentError("If's branches have different numbers of outputs");
    }
    // The condition as a scalar, so that Where keeps the branches' shape.
    auto scalar = EmitInt64s(base, {});
    if (!scalar.ok()) return scalar.status();
    auto c = Emit(base, "Reshape", {node.input(0), *scalar});
    if (!c.ok()) return c.status();
    for (size_t k = 0; k < then_outs->size(); ++k) {
      const Value &a = V(by_name_.at((*then_outs)[k])), &b = V(by_name_.at((*else_outs)[k]));
      if (a.shape != b.shape || a.dtype != b.dtype) {
        return Unimplemented(
            node, StrCat("a condition known only at run time, and output ", k,
                         " of the branches differs in shape or dtype ([", StrJoin(a.shape, ","),
                         "] against [", StrJoin(b.shape, ","), "])"));
      }
      if (k >= static_cast<size_t>(node.output_size()) || node.output(k).empty()) continue;
      auto w = Emit(base, "Where", {*c, (*then_outs)[k], (*else_outs)[k]}, nullptr, node.output(k));
      if (!w.ok()) return w.status();
    }
    return absl::OkStatus();
  }

  if (op == "Loop") {
    const onnx::GraphProto* body = graph_attr("body");
    if (!body) return absl::InvalidArgumentError("Loop needs a body");
    const int carried = node.input_size() - 2;
    if (carried < 0 || body->input_size() != carried + 2 || body->output_size() < carried + 1) {
      return absl::InvalidArgumentError(
          StrCat("Loop's body must take the iteration, the condition and the ",
                 std::max(carried, 0), " carried values, and return the condition and them"));
    }
    const int scans = body->output_size() - 1 - carried;
    int64_t trip = kMaxIterations + 1;
    if (HasIn(node, 0)) {
      auto m = ConstInts(node, 0);
      if (!m.ok()) return m.status();
      trip = m->empty() ? 0 : (*m)[0];
    }
    if (trip <= kMaxIterations && trip > 0 &&
        body->node_size() > (kMaxExpandedNodes - expanded_nodes_) / trip) {
      return CountExpandedNode(trip * body->node_size());
    }
    bool go = true;
    std::string cond;
    if (HasIn(node, 1)) {
      auto c = ConstInts(node, 1);
      if (!c.ok()) return c.status();
      go = !c->empty() && (*c)[0] != 0;
      cond = node.input(1);
    }
    std::vector<std::string> state(node.input().begin() + 2, node.input().end());
    std::vector<std::vector<std::string>> scanned(static_cast<size_t>(scans));
    int64_t i = 0;
    for (; i < trip && go; ++i) {
      if (i >= kMaxIterations) {
        return Unimplemented(
            node, StrCat("more than ", kMaxIterations, " iterations: kiln unrolls loops, up to ",
                         kMaxIterations));
      }
      auto iter = EmitInt64s(base, {i}, true);
      if (!iter.ok()) return iter.status();
      if (cond.empty()) {
        auto t = Emit(base, "Constant", {}, [](onnx::NodeProto& n) {
          auto* a = n.add_attribute();
          a->set_name("value");
          a->set_type(onnx::AttributeProto::TENSOR);
          a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
          a->mutable_t()->add_int32_data(1);
        });
        if (!t.ok()) return t.status();
        cond = *t;
      }
      std::vector<std::string> ins = {*iter, cond};
      ins.insert(ins.end(), state.begin(), state.end());
      auto outs = InlineSubgraph(*body, ins, StrCat(base, "::", i, "/"));
      if (!outs.ok()) return outs.status();
      cond = (*outs)[0];
      const Value& c = V(by_name_.at(cond));
      if (!c.IsConstant() || c.NumElements() != 1) {
        return Unimplemented(node, "a loop condition known only at run time");
      }
      go = c.ToDoubles()[0] != 0;
      state.assign(outs->begin() + 1, outs->begin() + 1 + carried);
      for (int k = 0; k < scans; ++k) scanned[k].push_back((*outs)[1 + carried + k]);
    }
    for (int k = 0; k < carried; ++k) {
      if (auto s = bind_output(k, state[k]); !s.ok()) return s;
    }
    for (int k = 0; k < scans; ++k) {
      if (carried + k >= node.output_size() || node.output(carried + k).empty()) continue;
      if (scanned[k].empty()) {
        return Unimplemented(node, "a loop of no iterations with scan outputs (their shape)");
      }
      if (auto s = stack(scanned[k], 0, node.output(carried + k)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Scan.
  const onnx::GraphProto* body = graph_attr("body");
  if (!body) return absl::InvalidArgumentError("Scan needs a body");
  const int64_t n_scan = AttrInt(node, "num_scan_inputs", 0);
  const bool v8 = opset_ < 9;
  const int first = v8 ? 1 : 0;  // opset 8: sequence_lens first
  if (v8 && HasIn(node, 0)) return Unimplemented(node, "opset-8 Scan with sequence_lens");
  const int64_t n_in = node.input_size() - first, n_state = n_in - n_scan;
  if (n_scan <= 0 || n_state < 0 || body->input_size() != n_in || body->output_size() < n_state) {
    return absl::InvalidArgumentError(StrCat("Scan: ", n_in, " inputs with num_scan_inputs ",
                                             n_scan, " do not fit a body of ", body->input_size(),
                                             " inputs"));
  }
  const int64_t n_out = body->output_size() - n_state;
  auto axes = AttrInts(node, "scan_input_axes", std::vector<int64_t>(n_scan, 0));
  auto dirs =
      AttrInts(node, v8 ? "directions" : "scan_input_directions", std::vector<int64_t>(n_scan, 0));
  auto out_axes = AttrInts(node, "scan_output_axes", std::vector<int64_t>(n_out, 0));
  auto out_dirs = AttrInts(node, "scan_output_directions", std::vector<int64_t>(n_out, 0));
  if (static_cast<int64_t>(axes.size()) != n_scan || static_cast<int64_t>(dirs.size()) != n_scan ||
      static_cast<int64_t>(out_axes.size()) != n_out ||
      static_cast<int64_t>(out_dirs.size()) != n_out) {
    return absl::InvalidArgumentError("Scan: an axes or directions list of the wrong length");
  }
  // Opset 8 has a batch axis first: batch 1 only, dropped and restored.
  std::vector<std::string> state, seqs;
  for (int64_t k = 0; k < n_in; ++k) {
    std::string v = node.input(static_cast<int>(first + k));
    auto id = by_name_.find(v);
    if (id == by_name_.end()) return absl::InvalidArgumentError(StrCat("no value '", v, "'"));
    if (v8) {
      if (V(id->second).shape.empty() || V(id->second).shape[0] != 1) {
        return Unimplemented(node, "opset-8 Scan with a batch other than 1");
      }
      auto zero = EmitInt64s(base, {0}, true);
      if (!zero.ok()) return zero.status();
      auto g = Emit(base, "Gather", {v, *zero});
      if (!g.ok()) return g.status();
      v = *g;
    }
    (k < n_state ? state : seqs).push_back(v);
  }
  int64_t T = -1;
  for (int64_t k = 0; k < n_scan; ++k) {
    const Shape& s = V(by_name_.at(seqs[k])).shape;
    auto ax = NormAxis(node, axes[k], s.size());
    if (!ax.ok()) return ax.status();
    axes[k] = *ax;
    if (T >= 0 && s[*ax] != T)
      return absl::InvalidArgumentError("Scan inputs of different lengths");
    T = s[*ax];
  }
  if (T > kMaxIterations) {
    return Unimplemented(node, StrCat(T, " iterations: kiln unrolls Scan, up to ", kMaxIterations));
  }
  if (T <= 0) return Unimplemented(node, "an empty scan");
  if (body->node_size() > (kMaxExpandedNodes - expanded_nodes_) / T) {
    return CountExpandedNode(T * body->node_size());
  }
  std::vector<std::vector<std::string>> scanned(static_cast<size_t>(n_out));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<std::string> ins = state;
    for (int64_t k = 0; k < n_scan; ++k) {
      auto idx = EmitInt64s(base, {dirs[k] ? T - 1 - t : t}, true);
      if (!idx.ok()) return idx.status();
      auto g = Emit(base, "Gather", {seqs[k], *idx}, IntAttr("axis", axes[k]));
      if (!g.ok()) return g.status();
      ins.push_back(*g);
    }
    auto outs = InlineSubgraph(*body, ins, StrCat(base, "::", t, "/"));
    if (!outs.ok()) return outs.status();
    state.assign(outs->begin(), outs->begin() + n_state);
    for (int64_t k = 0; k < n_out; ++k) scanned[k].push_back((*outs)[n_state + k]);
  }
  auto restore_batch = [&](const std::string& v, const std::string& out) -> absl::Status {
    auto zero = EmitInt64s(base, {0});
    if (!zero.ok()) return zero.status();
    auto r = Emit(base, "Unsqueeze", {v, *zero}, nullptr, out);
    return StatusOf(r);
  };
  for (int64_t k = 0; k < n_state; ++k) {
    if (k >= node.output_size() || node.output(k).empty()) continue;
    if (auto s = v8 ? restore_batch(state[k], node.output(k)) : bind_output(k, state[k]); !s.ok()) {
      return s;
    }
  }
  for (int64_t k = 0; k < n_out; ++k) {
    const int o = static_cast<int>(n_state + k);
    if (o >= node.output_size() || node.output(o).empty()) continue;
    auto parts = scanned[k];
    if (out_dirs[k]) std::reverse(parts.begin(), parts.end());
    const int64_t rank = static_cast<int64_t>(V(by_name_.at(parts[0])).shape.size()) + 1;
    auto ax = NormAxis(node, out_axes[k], rank);
    if (!ax.ok()) return ax.status();
    if (!v8) {
      if (auto s = stack(parts, *ax, node.output(o)); !s.ok()) return s;
      continue;
    }
    const std::string tmp = StrCat(base, "::stacked", k);
    if (auto s = stack(parts, *ax, tmp); !s.ok()) return s;
    if (auto s = restore_batch(tmp, node.output(o)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal

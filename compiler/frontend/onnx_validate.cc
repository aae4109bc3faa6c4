#include "compiler/frontend/onnx_validate.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

using AttrT = onnx::AttributeProto;

std::string NodeLabel(const onnx::NodeProto& node) {
  if (!node.name().empty()) return node.name();
  if (node.output_size() > 0 && !node.output(0).empty()) return node.output(0);
  return node.op_type();
}

namespace {

std::string Where(const onnx::NodeProto& node) {
  return StrCat("node '", NodeLabel(node), "' (", node.op_type(), ")");
}

// The kinds of content an attribute holds.
std::vector<AttrT::AttributeType> Contents(const AttrT& a) {
  std::vector<AttrT::AttributeType> kinds;
  if (a.has_f()) kinds.push_back(AttrT::FLOAT);
  if (a.has_i()) kinds.push_back(AttrT::INT);
  if (a.has_s()) kinds.push_back(AttrT::STRING);
  if (a.has_t()) kinds.push_back(AttrT::TENSOR);
  if (a.has_g()) kinds.push_back(AttrT::GRAPH);
  if (a.has_sparse_tensor()) kinds.push_back(AttrT::SPARSE_TENSOR);
  if (a.has_tp()) kinds.push_back(AttrT::TYPE_PROTO);
  if (a.floats_size()) kinds.push_back(AttrT::FLOATS);
  if (a.ints_size()) kinds.push_back(AttrT::INTS);
  if (a.strings_size()) kinds.push_back(AttrT::STRINGS);
  if (a.tensors_size()) kinds.push_back(AttrT::TENSORS);
  if (a.graphs_size()) kinds.push_back(AttrT::GRAPHS);
  if (a.sparse_tensors_size()) kinds.push_back(AttrT::SPARSE_TENSORS);
  if (a.type_protos_size()) kinds.push_back(AttrT::TYPE_PROTOS);
  return kinds;
}

}  // namespace

std::string AttrTypeName(AttrT::AttributeType t) {
  const std::string& s = AttrT::AttributeType_Name(t);
  return s.empty() ? StrCat("type#", static_cast<int>(t)) : s;
}

AttrT::AttributeType AttrType(const AttrT& a) {
  if (a.type() != AttrT::UNDEFINED) return a.type();
  auto kinds = Contents(a);
  return kinds.size() == 1 ? kinds[0] : AttrT::UNDEFINED;
}

absl::Status CheckAttributes(const onnx::NodeProto& node) {
  std::unordered_set<std::string> seen;
  for (const auto& a : node.attribute()) {
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(StrCat(Where(node), ": attribute '", a.name(), "' ", why));
    };
    if (a.name().empty())
      return absl::InvalidArgumentError(StrCat(Where(node), " has an attribute without a name"));
    if (!seen.insert(a.name()).second) return bad("is given twice");
    if (!a.ref_attr_name().empty()) continue;  // a function body's reference
    auto kinds = Contents(a);
    if (a.type() == AttrT::UNDEFINED) {
      if (kinds.size() != 1) {
        std::vector<std::string> names;
        for (auto k : kinds) names.push_back(AttrTypeName(k));
        return bad(kinds.empty() ? std::string("has no type and no value")
                                 : StrCat("has no type and holds ", StrJoin(names, " and ")));
      }
      continue;
    }
    if (!AttrT::AttributeType_IsValid(a.type())) {
      return bad(StrCat("has an unknown type ", static_cast<int>(a.type())));
    }
    for (auto k : kinds) {
      if (k != a.type()) {
        return bad(StrCat("is declared ", AttrTypeName(a.type()), " but holds ", AttrTypeName(k)));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckOpset(const onnx::ModelProto& model, int64_t max_opset) {
  std::optional<int64_t> opset;
  for (const auto& op : model.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    if (opset) {
      return absl::InvalidArgumentError(
          StrCat("the model declares the default domain's opset twice (", *opset, " and ",
                 op.version(), ")"));
    }
    if (op.version() < 1 || op.version() > max_opset) {
      return absl::InvalidArgumentError(StrCat("opset ", op.version(),
                                               " of the default domain is not an ONNX opset (1..",
                                               max_opset, ")"));
    }
    opset = op.version();
  }
  if (opset) return *opset;
  // Only a model whose nodes use the default domain needs its opset.
  bool uses_default = false;
  for (const auto& node : model.graph().node()) {
    uses_default = uses_default || node.domain().empty() || node.domain() == "ai.onnx";
  }
  if (uses_default && model.ir_version() >= 3) {
    return absl::InvalidArgumentError(
        "the model declares no opset of the default domain (opset_import has no entry for "
        "domain '' or 'ai.onnx')");
  }
  return max_opset;
}

absl::StatusOr<std::vector<int>> CheckGraph(const onnx::GraphProto& graph, int64_t max_elements) {
  // What defines each value: -1 an initializer or graph input, else the node.
  std::unordered_map<std::string, int> producer;
  std::unordered_set<std::string> inputs;
  for (const auto& t : graph.initializer()) {
    if (t.name().empty()) return absl::InvalidArgumentError("an initializer has no name");
    if (!producer.emplace(t.name(), -1).second) {
      return absl::InvalidArgumentError(StrCat("initializer '", t.name(), "' is defined twice"));
    }
  }
  for (const auto& in : graph.input()) {
    if (in.name().empty()) return absl::InvalidArgumentError("a graph input has no name");
    if (!inputs.insert(in.name()).second) {
      return absl::InvalidArgumentError(StrCat("graph input '", in.name(), "' is declared twice"));
    }
    producer.emplace(in.name(), -1);  // may also be an initializer (a default)
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    // Stated dimensions (symbolic ones are the importer's business).
    std::vector<int64_t> dims;
    const auto& shape = in.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d) {
      if (!shape.dim(d).has_dim_value()) continue;
      const int64_t v = shape.dim(d).dim_value();
      if (v < 0) {
        return absl::InvalidArgumentError(
            StrCat("input '", in.name(), "' has a negative dimension ", d, " (", v, ")"));
      }
      dims.push_back(v);
    }
    if (!CheckedElements(dims, max_elements)) {
      return absl::InvalidArgumentError(StrCat("input '", in.name(), "' is too large: [",
                                               StrJoin(dims, ","), "] has more than ", max_elements,
                                               " elements (", kElementLimitHint, ")"));
    }
  }
  const int n = graph.node_size();
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.node(i);
    for (const auto& out : node.output()) {
      if (out.empty()) continue;  // an optional output left out
      auto [it, fresh] = producer.emplace(out, i);
      if (fresh) continue;
      if (it->second < 0) {
        return absl::InvalidArgumentError(
            StrCat(Where(node), " writes '", out, "', which is already ",
                   inputs.count(out) ? "a graph input" : "an initializer"));
      }
      return absl::InvalidArgumentError(
          StrCat(Where(node), " writes '", out, "', which is already written by ",
                 it->second == i ? std::string("the same node") : Where(graph.node(it->second))));
    }
  }
  // Edges between nodes; every input must be defined somewhere.
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.node(i);
    if (auto s = CheckAttributes(node); !s.ok()) return s;
    for (const auto& in : node.input()) {
      if (in.empty()) continue;  // an optional input left out
      auto it = producer.find(in);
      if (it == producer.end()) {
        return absl::InvalidArgumentError(StrCat(Where(node), " reads '", in,
                                                 "', which no node, graph input or initializer "
                                                 "defines"));
      }
      if (it->second >= 0) {
        users[it->second].push_back(i);
        ++pending[i];
      }
    }
  }
  // Kahn's algorithm, lowest index first: a sorted graph keeps its order.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  // A cycle: walk back from an unsorted node along unsorted producers until
  // a node repeats.
  int start = 0;
  while (pending[start] == 0) ++start;
  std::vector<int> path;
  std::unordered_map<int, size_t> pos;
  int cur = start;
  while (!pos.count(cur)) {
    pos[cur] = path.size();
    path.push_back(cur);
    int next = -1;
    for (const auto& in : graph.node(cur).input()) {
      auto it = in.empty() ? producer.end() : producer.find(in);
      if (it != producer.end() && it->second >= 0 && pending[it->second] > 0) {
        next = it->second;
        break;
      }
    }
    if (next < 0) break;  // cannot happen: an unsorted node has an unsorted producer
    cur = next;
  }
  std::vector<std::string> names;
  for (size_t k = pos.count(cur) ? pos[cur] : 0; k < path.size(); ++k) {
    names.push_back(StrCat("'", NodeLabel(graph.node(path[k])), "'"));
  }
  std::reverse(names.begin(), names.end());
  names.push_back(names.front());
  return absl::InvalidArgumentError(StrCat("the graph has a cycle: node ", StrJoin(names, " -> ")));
}

std::optional<int64_t> CheckedElements(const std::vector<int64_t>& shape, int64_t limit) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
  }
  if (zero) return 0;
  for (int64_t d : shape) {
    if (n > limit / d) return std::nullopt;
    n *= d;
  }
  return n;
}

const onnx::AttributeProto* Importer::AttrTyped(const onnx::NodeProto& node, const char* name,
                                                AttrT::AttributeType type) const {
  const auto* a = Attr(node, name);
  if (a == nullptr) return nullptr;
  const AttrT::AttributeType have = AttrType(*a);
  if (have == type) return a;
  // An empty list written without a type reads as an empty list.
  if (have == AttrT::UNDEFINED && (type == AttrT::INTS || type == AttrT::FLOATS)) return a;
  if (attr_error_.ok()) {
    attr_error_ =
        absl::InvalidArgumentError(StrCat(Where(node), ": attribute '", name, "' is ",
                                          AttrTypeName(have), ", expected ", AttrTypeName(type)));
  }
  return nullptr;
}

// Operators whose data input ONNX requires to have rank >= 1 (their axis
// indexes its shape), and whether every input is data (Concat).
static const std::unordered_map<std::string, bool>& RankOneOps() {
  static const auto* ops = new std::unordered_map<std::string, bool>{
      {"Concat", true},          {"Split", false}, {"Slice", false},         {"Gather", false},
      {"GatherElements", false}, {"TopK", false},  {"CenterCropPad", false},
  };
  return *ops;
}

absl::Status Importer::CheckFoldBudget(int64_t bytes) const {
  if (bytes <= options_.max_folded_bytes - folded_bytes_) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("the constants computed at compile time would come to ", folded_bytes_ + bytes,
             " bytes, more than the ", options_.max_folded_bytes,
             " this import allows (ImportOptions::max_folded_bytes: `kiln compile` allows 4 GiB, "
             "the tracker 64 MiB and ",
             kFoldedBytesPerModelByte, " bytes for each byte of the uploaded model)"));
}

absl::Status Importer::TooManyElements(const std::string& what) const {
  return absl::InvalidArgumentError(
      StrCat(what, " would have more than ", max_elements_, " elements (", kElementLimitHint, ")"));
}

absl::Status Importer::ImportChecked(const onnx::NodeProto& node) {
  const size_t first = g_->values.size();
  attr_error_ = absl::OkStatus();
  absl::Status s = absl::OkStatus();
  if (auto it = RankOneOps().find(node.op_type()); it != RankOneOps().end()) {
    const int n = it->second ? node.input_size() : std::min(node.input_size(), 1);
    for (int i = 0; i < n && s.ok(); ++i) {
      auto v = by_name_.find(node.input(i));
      if (v != by_name_.end() && V(v->second).shape.empty()) {
        s = absl::InvalidArgumentError(StrCat("input '", node.input(i), "' is a scalar; ",
                                              node.op_type(), " needs rank >= 1"));
      }
    }
  }
  if (s.ok()) s = ImportNode(node);
  // A mistyped attribute read as its default may have failed the node on
  // another account: the attribute is the cause.
  if (!attr_error_.ok()) s = std::exchange(attr_error_, absl::OkStatus());
  for (size_t v = first; s.ok() && v < g_->values.size(); ++v) {
    const Value& val = g_->values[v];
    if (!CheckedElements(val.shape, max_elements_)) {
      s = absl::InvalidArgumentError(StrCat("value '", val.name, "' would have shape [",
                                            StrJoin(val.shape, ","),
                                            "]: a negative dimension or more than ", max_elements_,
                                            " elements (", kElementLimitHint, ")"));
    }
    // Computed constants count against the model's budget (a Constant
    // node's data is the model's own).
    if (fold_counted_.size() <= v) fold_counted_.resize(g_->values.size(), 0);
    if (s.ok() && val.IsConstant() && node.op_type() != "Constant" && !fold_counted_[v]) {
      s = CheckFoldBudget(static_cast<int64_t>(val.bytes->size()));
      folded_bytes_ += static_cast<int64_t>(val.bytes->size());
      fold_counted_[v] = 1;
    }
  }
  if (s.ok()) return s;
  // Every error names the node.
  const std::string label = StrCat("'", Name(node), "'");
  if (s.message().find(label) != std::string_view::npos) return s;
  return absl::Status(s.code(), StrCat("node ", label, " (", node.op_type(), "): ", s.message()));
}

}  // namespace kiln::compiler::onnx_internal

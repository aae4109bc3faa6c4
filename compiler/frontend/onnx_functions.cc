// Model-local functions (ModelProto.functions, as the dynamo/onnxscript
// exporters write them) inlined into the graph before import: each call
// becomes the function's body with its values renamed apart, formal inputs
// and outputs bound to the call's, and attribute references resolved.
#include "compiler/frontend/onnx_functions.h"

#include <map>
#include <utility>

#include "base/str.h"

namespace kiln::compiler {
namespace {

// Bounds on expansion: nested calls and the graph's size after inlining.
constexpr int kMaxDepth = 16;
constexpr int kMaxNodes = 1 << 20;

using FunctionMap = std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*>;

absl::Status Expand(const onnx::NodeProto& call, const FunctionMap& fns, int depth, int* serial,
                    google::protobuf::RepeatedPtrField<onnx::NodeProto>* out);

// Appends `node` to `out`, expanding it when it calls a local function.
absl::Status Emit(const onnx::NodeProto& node, const FunctionMap& fns, int depth, int* serial,
                  google::protobuf::RepeatedPtrField<onnx::NodeProto>* out) {
  if (fns.count({node.domain(), node.op_type()})) return Expand(node, fns, depth, serial, out);
  if (out->size() >= kMaxNodes) {
    return absl::InvalidArgumentError(
        StrCat("the graph has more than ", kMaxNodes, " nodes once its functions are inlined"));
  }
  *out->Add() = node;
  return absl::OkStatus();
}

absl::Status Expand(const onnx::NodeProto& call, const FunctionMap& fns, int depth, int* serial,
                    google::protobuf::RepeatedPtrField<onnx::NodeProto>* out) {
  const onnx::FunctionProto& f = *fns.at({call.domain(), call.op_type()});
  const std::string who = StrCat("node '", call.name().empty() ? call.op_type() : call.name(),
                                 "' (function ", f.domain(), ".", f.name(), ")");
  if (depth >= kMaxDepth) {
    return absl::InvalidArgumentError(
        StrCat(who, ": functions nest deeper than ", kMaxDepth, " (recursive?)"));
  }
  if (call.input_size() > f.input_size() || call.output_size() > f.output_size()) {
    return absl::InvalidArgumentError(StrCat(who, ": ", call.input_size(), " inputs and ",
                                             call.output_size(), " outputs for a function of ",
                                             f.input_size(), " and ", f.output_size()));
  }
  // Formal names bound to the call's; everything else renamed apart.
  std::map<std::string, std::string> rename;
  for (int i = 0; i < f.input_size(); ++i) {
    rename[f.input(i)] = i < call.input_size() ? call.input(i) : "";
  }
  for (int i = 0; i < f.output_size(); ++i) {
    rename[f.output(i)] = i < call.output_size() ? call.output(i) : "";
  }
  const std::string prefix =
      StrCat(call.name().empty() ? call.op_type() : call.name(), "/", (*serial)++, "/");
  auto bound = [&](const std::string& name) {
    if (name.empty()) return name;
    auto it = rename.find(name);
    return it != rename.end() ? it->second : prefix + name;
  };
  // Attribute values of the call (the onnx 1.12 protos carry no function
  // attribute defaults: an unset reference leaves the operator's default).
  std::map<std::string, const onnx::AttributeProto*> attrs;
  for (const auto& a : call.attribute()) attrs[a.name()] = &a;
  for (const onnx::NodeProto& body : f.node()) {
    onnx::NodeProto n = body;
    n.set_name(prefix + body.name());
    for (int i = 0; i < n.input_size(); ++i) n.set_input(i, bound(n.input(i)));
    for (int i = 0; i < n.output_size(); ++i) {
      if (n.output(i).empty()) continue;
      n.set_output(i, bound(n.output(i)));
      if (n.output(i).empty()) n.set_output(i, prefix + body.output(i) + "/unused");
    }
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> resolved;
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.ref_attr_name().empty()) {
        *resolved.Add() = a;
        continue;
      }
      auto it = attrs.find(a.ref_attr_name());
      if (it == attrs.end()) continue;  // an optional attribute left unset
      onnx::AttributeProto v = *it->second;
      v.set_name(a.name());
      *resolved.Add() = std::move(v);
    }
    *n.mutable_attribute() = std::move(resolved);
    if (auto s = Emit(n, fns, depth + 1, serial, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InlineLocalFunctions(onnx::ModelProto& model) {
  if (model.functions_size() == 0) return absl::OkStatus();
  FunctionMap fns;
  for (const onnx::FunctionProto& f : model.functions()) {
    if (!fns.emplace(std::make_pair(f.domain(), f.name()), &f).second) {
      return absl::InvalidArgumentError(
          StrCat("the model defines function ", f.domain(), ".", f.name(), " twice"));
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  int serial = 0;
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (auto s = Emit(n, fns, 0, &serial, &nodes); !s.ok()) return s;
  }
  *model.mutable_graph()->mutable_node() = std::move(nodes);
  model.clear_functions();
  return absl::OkStatus();
}

}  // namespace kiln::compiler

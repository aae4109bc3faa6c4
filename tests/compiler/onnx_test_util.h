#pragma once
// Builds small ONNX models in tests, with onnx_proto only (no Python).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "deploy/runtime.h"
#include "onnx/onnx_pb.h"

namespace kiln::compiler::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }
  void Input(const std::string& name, const std::vector<int64_t>& shape,
             int dtype = onnx::TensorProto::FLOAT) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    auto* s = tt->mutable_shape();
    for (int64_t d : shape) s->add_dim()->set_dim_value(d);
  }
  void DynamicInput(const std::string& name) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
  }
  void Output(const std::string& name) {
    auto* out = model_.mutable_graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  void Init(const std::string& name, const std::vector<int64_t>& shape,
            const std::vector<float>& data) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float v : data) t->add_float_data(v);
  }
  void InitInt64(const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& data) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t v : data) t->add_int64_data(v);
  }
  // An integer initializer of ONNX element type `type` (int8, uint8, int32:
  // stored in int32_data).
  void InitInts(const std::string& name, const std::vector<int64_t>& shape, int type,
                const std::vector<int32_t>& data) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : shape) t->add_dims(d);
    for (int32_t v : data) t->add_int32_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs.at(0) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void Float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void String(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  std::string Bytes() const { return model_.SerializeAsString(); }
  onnx::ModelProto& model() { return model_; }

 private:
  onnx::ModelProto model_;
};

// Compiles `m` for the host with every template's default config and loads
// the artifact.
inline absl::StatusOr<std::unique_ptr<deploy::Module>> CompileAndLoad(const Model& m) {
  CompileReport report;
  auto art = CompileModel(m, Target::Host(), nullptr, {}, &report);
  if (!art.ok()) return art.status();
  return deploy::Module::LoadBytes(*art);
}

// The shape of value `name` of `g` (empty, and a test failure, if absent).
inline std::vector<int64_t> ShapeOf(const Graph& g, const std::string& name) {
  int v = g.FindValue(name);
  EXPECT_GE(v, 0) << name;
  return v < 0 ? std::vector<int64_t>{} : g.values[v].shape;
}

}  // namespace kiln::compiler::testing

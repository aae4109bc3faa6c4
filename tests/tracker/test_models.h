#pragma once
// Small ONNX models built in code for the tracker tests.
#include <string>

#include "onnx/onnx_pb.h"

namespace kiln::tracker::testing {

inline void AddTensorInfo(onnx::ValueInfoProto* v, const std::string& name,
                          std::initializer_list<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

inline void AddInitializer(onnx::GraphProto* g, const std::string& name,
                           std::initializer_list<int64_t> dims) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t->add_float_data(0.01f * static_cast<float>((i * 7) % 13 - 6));
}

// data[1,3,8,8] -> Conv(4 filters 3x3, pad 1, bias) -> Relu -> y[1,4,8,8]
inline std::string ConvReluModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("conv_relu");
  AddTensorInfo(g->add_input(), "data", {1, 3, 8, 8});
  AddTensorInfo(g->add_output(), "y", {1, 4, 8, 8});
  AddInitializer(g, "w", {4, 3, 3, 3});
  AddInitializer(g, "b", {4});
  onnx::NodeProto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->add_input("data");
  conv->add_input("w");
  conv->add_input("b");
  conv->add_output("c");
  onnx::AttributeProto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("c");
  relu->add_output("y");
  return m.SerializeAsString();
}

// x[16,64] -> MatMul by constant w[64,32] -> y[16,32] (a Linear layer).
inline std::string LinearModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("linear");
  AddTensorInfo(g->add_input(), "x", {16, 64});
  AddTensorInfo(g->add_output(), "y", {16, 32});
  AddInitializer(g, "w", {64, 32});
  onnx::NodeProto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("w");
  mm->add_output("y");
  return m.SerializeAsString();
}

// ConvReluModel with a symbolic batch dimension ("N") and its weights `w`
// kept in external data file "weights/w.bin" (whose bytes go to *data).
inline std::string SymbolicExternalModel(std::string* data) {
  onnx::ModelProto m;
  ::onnx::ModelProto conv;
  conv.ParseFromString(ConvReluModel());
  m = conv;
  onnx::GraphProto* g = m.mutable_graph();
  auto* batch =
      g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
  batch->clear_dim_value();
  batch->set_dim_param("N");
  onnx::TensorProto* w = g->mutable_initializer(0);
  data->clear();
  for (float v : w->float_data()) data->append(reinterpret_cast<const char*>(&v), sizeof v);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights/w.bin");
  return m.SerializeAsString();
}

// x[1,4] -> Unique -> y: an operator kiln does not support.
inline std::string UnsupportedOpModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("sm");
  AddTensorInfo(g->add_input(), "x", {1, 4});
  AddTensorInfo(g->add_output(), "y", {1, 4});
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Unique");
  n->set_name("the_unique");
  n->add_input("x");
  n->add_output("y");
  return m.SerializeAsString();
}

// The security review's tiny model: x[8192,8192] + (two ConstantOfShape
// nodes of 2^26 float64 ones, added), a few hundred bytes of ONNX whose
// constants folded would take 1.5 GB.
inline std::string FoldBombModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("fold_bomb");
  AddTensorInfo(g->add_input(), "x", {8192, 8192});
  AddTensorInfo(g->add_output(), "y", {8192, 8192});
  onnx::TensorProto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(8192);
  shape->add_int64_data(8192);
  for (const char* name : {"c1", "c2"}) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("ConstantOfShape");
    n->add_input("shape");
    n->add_output(name);
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::DOUBLE);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_double_data(1.0);
  }
  onnx::NodeProto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("c1");
  add->add_input("c2");
  add->add_output("c");
  onnx::NodeProto* cast = g->add_node();
  cast->set_op_type("Cast");
  cast->add_input("c");
  cast->add_output("cf");
  onnx::AttributeProto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  onnx::NodeProto* out = g->add_node();
  out->set_op_type("Add");
  out->add_input("x");
  out->add_input("cf");
  out->add_output("y");
  return m.SerializeAsString();
}

}  // namespace kiln::tracker::testing

#include "compiler/frontend/onnx_import.h"

#include <cstring>

#include "compiler/frontend/importer.h"

namespace kiln::compiler {
namespace onnx_internal {

absl::StatusOr<std::vector<float>> FloatData(const onnx::TensorProto& t, int64_t n) {
  std::vector<float> out;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * 4) {
      return absl::InvalidArgumentError(StrCat("tensor '", t.name(), "' has ", t.raw_data().size(),
                                               " raw bytes, expected ", n * 4));
    }
    out.resize(n);
    std::memcpy(out.data(), t.raw_data().data(), n * 4);
  } else {
    if (t.float_data_size() != n) {
      return absl::InvalidArgumentError(
          StrCat("tensor '", t.name(), "' has ", t.float_data_size(), " values, expected ", n));
    }
    out.assign(t.float_data().begin(), t.float_data().end());
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> Int64Data(const onnx::TensorProto& t, int64_t n) {
  std::vector<int64_t> out;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * 8) {
      return absl::InvalidArgumentError(StrCat("tensor '", t.name(), "' has bad raw data size"));
    }
    out.resize(n);
    std::memcpy(out.data(), t.raw_data().data(), n * 8);
  } else {
    if (t.int64_data_size() != n) {
      return absl::InvalidArgumentError(StrCat("tensor '", t.name(), "' has bad int64 data size"));
    }
    out.assign(t.int64_data().begin(), t.int64_data().end());
  }
  return out;
}

absl::Status Importer::AddInitializer(const onnx::TensorProto& t, const std::string& name) {
  Value v;
  v.name = name;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return absl::InvalidArgumentError(StrCat("tensor '", name, "' has a negative dim"));
    v.shape.push_back(d);
    n *= d;
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(StrCat("tensor '", name, "' uses external data"));
  }
  int bad = 0;
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    auto data = FloatData(t, n);
    if (!data.ok()) return data.status();
    v.data = *std::move(data);
  } else if (t.data_type() == onnx::TensorProto::INT64) {
    auto data = Int64Data(t, n);
    if (!data.ok()) return data.status();
    v.int_data = *std::move(data);
  } else {
    bad = t.data_type();
  }
  int id = g_->AddValue(std::move(v));
  by_name_[name] = id;
  if (bad) bad_dtype_[id] = bad;
  return absl::OkStatus();
}

absl::StatusOr<int> Importer::In(const onnx::NodeProto& node, int i, bool need_float) {
  if (!HasIn(node, i)) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "' (", node.op_type(), ") lacks input ", i));
  }
  auto it = by_name_.find(node.input(i));
  if (it == by_name_.end()) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "' reads undefined value '", node.input(i), "'"));
  }
  int v = it->second;
  if (need_float) {
    if (auto b = bad_dtype_.find(v); b != bad_dtype_.end()) {
      return absl::UnimplementedError(StrCat("unsupported dtype ", DtypeName(b->second), " of '",
                                             node.input(i), "' (only float32)"));
    }
    if (g_->values[v].int_data) {
      return absl::UnimplementedError(
          StrCat("unsupported dtype int64 of '", node.input(i), "' (only float32)"));
    }
  }
  return v;
}

absl::StatusOr<std::unique_ptr<Graph>> Importer::Run(const onnx::ModelProto& model) {
  g_ = std::make_unique<Graph>();
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ != 0 && opset_ < 7) {
    return absl::UnimplementedError(StrCat("opset ", opset_, " is not supported (7..22)"));
  }
  const onnx::GraphProto& graph = model.graph();
  for (const auto& t : graph.initializer()) {
    if (auto s = AddInitializer(t, t.name()); !s.ok()) return s;
  }
  for (const auto& in : graph.input()) {
    if (by_name_.count(in.name())) continue;  // an initializer: a constant
    if (!in.type().has_tensor_type()) {
      return absl::UnimplementedError(StrCat("input '", in.name(), "' is not a tensor"));
    }
    const auto& tt = in.type().tensor_type();
    if (tt.elem_type() != onnx::TensorProto::FLOAT) {
      return absl::UnimplementedError(StrCat("unsupported dtype ", DtypeName(tt.elem_type()),
                                             " of input '", in.name(), "' (only float32)"));
    }
    if (!tt.has_shape()) {
      return absl::UnimplementedError(StrCat("input '", in.name(), "' has an unknown shape"));
    }
    Value v;
    v.name = in.name();
    v.is_input = true;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0) {
        return absl::UnimplementedError(StrCat("input '", in.name(), "' has a dynamic dimension (",
                                               d.has_dim_param() ? d.dim_param() : std::string("?"),
                                               ")"));
      }
      v.shape.push_back(d.dim_value());
    }
    int id = g_->AddValue(std::move(v));
    by_name_[in.name()] = id;
    g_->inputs.push_back(id);
  }
  for (const auto& node : graph.node()) {
    if (auto s = ImportNode(node); !s.ok()) return s;
  }
  for (const auto& out : graph.output()) {
    auto it = by_name_.find(out.name());
    if (it == by_name_.end()) {
      return absl::InvalidArgumentError(
          StrCat("graph output '", out.name(), "' is never computed"));
    }
    if (out.type().has_tensor_type() && out.type().tensor_type().elem_type() != 0 &&
        out.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT) {
      return absl::UnimplementedError(StrCat("unsupported dtype ",
                                             DtypeName(out.type().tensor_type().elem_type()),
                                             " of output '", out.name(), "' (only float32)"));
    }
    if (bad_dtype_.count(it->second) || g_->values[it->second].int_data) {
      return absl::UnimplementedError(StrCat("output '", out.name(), "' is not float32"));
    }
    g_->outputs.push_back(it->second);
  }
  if (g_->outputs.empty()) return absl::InvalidArgumentError("the model has no outputs");
  return std::move(g_);
}

absl::Status Importer::ImportNode(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::UnimplementedError(
        StrCat("unsupported operator '", node.domain(), ".", op, "' (node '", Name(node), "')"));
  }
  if (op == "Conv") return ImportConv(node);
  if (op == "MaxPool") return ImportPool(node, true, false);
  if (op == "AveragePool") return ImportPool(node, false, false);
  if (op == "GlobalAveragePool") return ImportPool(node, false, true);
  if (op == "Gemm") return ImportGemm(node);
  if (op == "MatMul") return ImportMatMul(node);
  if (op == "Add") return ImportBinary(node, EpilogueKind::kAdd);
  if (op == "Mul") return ImportBinary(node, EpilogueKind::kMul);
  if (op == "Reshape" || op == "Flatten") return ImportReshape(node);
  if (op == "BatchNormalization") return ImportBatchNorm(node);
  if (op == "Constant") return ImportConstant(node);
  if (op == "Relu") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    Shape s = g_->values[*x].shape;
    Workload w;
    w.op = "eltwise";
    w.ints["shape"] = Wl(s);
    w.ints["in_shape"] = Wl(s);
    w.epilogue.push_back({EpilogueKind::kRelu, {}});
    AddCompute(node, std::move(w), {*x}, NewValue(node, 0, s));
    return absl::OkStatus();
  }
  if (op == "Identity" || op == "Dropout") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    if (op == "Dropout") {
      if (node.output_size() > 1 && !node.output(1).empty()) {
        return Unimplemented(node, "the mask output is not supported");
      }
      if (HasIn(node, 2)) {
        auto t = In(node, 2, false);
        if (!t.ok()) return t.status();
        const Value& tv = g_->values[*t];
        if (!tv.int_data && !tv.data && !bad_dtype_.count(*t)) {
          return Unimplemented(node, "a non-constant training_mode is not supported");
        }
      }
    }
    AddView(node, *x, NewValue(node, 0, g_->values[*x].shape));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      StrCat("unsupported operator '", op, "' (node '", Name(node), "')"));
}

}  // namespace onnx_internal

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnx(std::string_view model_bytes) {
  onnx::ModelProto model;
  if (model_bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("not an ONNX model: larger than 2 GiB");
  }
  if (!model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size()))) {
    return absl::InvalidArgumentError("not an ONNX model: the bytes do not parse as a ModelProto");
  }
  if (model.ir_version() <= 0 || !model.has_graph()) {
    return absl::InvalidArgumentError("not an ONNX model: no ir_version or no graph");
  }
  onnx_internal::Importer importer;
  return importer.Run(model);
}

}  // namespace kiln::compiler

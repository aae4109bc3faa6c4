#include "compiler/frontend/onnx_import.h"

#include <cstring>

#include "compiler/frontend/importer.h"
#include "compiler/graph/passes.h"

namespace kiln::compiler {
namespace onnx_internal {

absl::StatusOr<std::vector<uint8_t>> TensorBytes(const onnx::TensorProto& t, DType dtype,
                                                 int64_t n) {
  const int64_t width = DTypeBytes(dtype);
  std::vector<uint8_t> out;
  auto bad = [&](size_t have) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", t.name(), "' has ", have, " values for ", n, " elements"));
  };
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n * width)) {
      return absl::InvalidArgumentError(StrCat("tensor '", t.name(), "' has ", t.raw_data().size(),
                                               " raw bytes, expected ", n * width));
    }
    out.assign(t.raw_data().begin(), t.raw_data().end());
    return out;
  }
  // Typed fields: counts are checked before anything is allocated from n.
  auto fill = [&](const auto& field, auto convert) -> absl::Status {
    if (static_cast<int64_t>(field.size()) != n) return bad(field.size());
    out.resize(static_cast<size_t>(n * width));
    for (int64_t i = 0; i < n; ++i) convert(field.Get(static_cast<int>(i)), i);
    return absl::OkStatus();
  };
  absl::Status s;
  switch (dtype) {
    case DType::kFloat32:
      s = fill(t.float_data(), [&](float v, int64_t i) { WriteElement<float>(v, out.data(), i); });
      break;
    case DType::kFloat64:
      s = fill(t.double_data(),
               [&](double v, int64_t i) { WriteElement<double>(v, out.data(), i); });
      break;
    case DType::kInt64:
      s = fill(t.int64_data(),
               [&](int64_t v, int64_t i) { WriteElement<int64_t>(v, out.data(), i); });
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      s = fill(t.uint64_data(), [&](uint64_t v, int64_t i) {
        Int64ToElement(dtype, static_cast<int64_t>(v), out.data(), i);
      });
      break;
    case DType::kFloat16:
      s = fill(t.int32_data(), [&](int32_t v, int64_t i) {
        WriteElement<uint16_t>(static_cast<uint16_t>(v), out.data(), i);
      });
      break;
    default:  // int8/16/32, uint8/16, bool: int32_data
      s = fill(t.int32_data(),
               [&](int32_t v, int64_t i) { Int64ToElement(dtype, v, out.data(), i); });
      break;
  }
  if (!s.ok()) return s;
  return out;
}

absl::Status Importer::AddInitializer(const onnx::TensorProto& t, const std::string& name) {
  Value v;
  v.name = name;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return absl::InvalidArgumentError(StrCat("tensor '", name, "' has a negative dim"));
    if (d > 0 && n > kMaxElements / d) {
      return absl::InvalidArgumentError(StrCat("tensor '", name, "' is too large"));
    }
    v.shape.push_back(d);
    n *= d;
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(StrCat("tensor '", name, "' uses external data"));
  }
  auto dtype = DTypeFromOnnx(t.data_type());
  if (!dtype) {
    return absl::UnimplementedError(
        StrCat("unsupported dtype ", DtypeName(t.data_type()), " of tensor '", name, "'"));
  }
  v.dtype = *dtype;
  auto data = TensorBytes(t, *dtype, n);
  if (!data.ok()) return data.status();
  v.bytes = *std::move(data);
  by_name_[name] = g_->AddValue(std::move(v));
  return absl::OkStatus();
}

absl::StatusOr<int> Importer::In(const onnx::NodeProto& node, int i) {
  if (!HasIn(node, i)) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "' (", node.op_type(), ") lacks input ", i));
  }
  auto it = by_name_.find(node.input(i));
  if (it == by_name_.end()) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "' reads undefined value '", node.input(i), "'"));
  }
  return it->second;
}

absl::StatusOr<int> Importer::InF(const onnx::NodeProto& node, int i) {
  auto v = In(node, i);
  if (!v.ok()) return v;
  if (V(*v).dtype != DType::kFloat32) {
    return Unimplemented(
        node, StrCat("unsupported dtype ", DTypeName(V(*v).dtype), " of '", node.input(i), "' (",
                     node.op_type(), " runs on float32 only)"));
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> Importer::ConstInts(const onnx::NodeProto& node, int i) {
  auto v = In(node, i);
  if (!v.ok()) return v.status();
  if (!V(*v).IsConstant()) {
    return Unimplemented(
        node, StrCat("input ", i, " ('", node.input(i), "') must be known at compile time"));
  }
  return V(*v).ToInt64s();
}

absl::StatusOr<std::vector<double>> Importer::ConstDoubles(const onnx::NodeProto& node, int i) {
  auto v = In(node, i);
  if (!v.ok()) return v.status();
  if (!V(*v).IsConstant()) {
    return Unimplemented(
        node, StrCat("input ", i, " ('", node.input(i), "') must be known at compile time"));
  }
  return V(*v).ToDoubles();
}

absl::Status Importer::AddCompute(const onnx::NodeProto& node, Workload w, std::vector<int> inputs,
                                  int out) {
  Node n;
  n.kind = NodeKind::kCompute;
  n.name = Name(node);
  n.op_type = node.op_type();
  n.workload = std::move(w);
  n.inputs = std::move(inputs);
  n.output = out;
  if (auto sig = n.workload.Signature(); !sig.ok()) {
    return absl::InvalidArgumentError(StrCat("node '", n.name, "': ", sig.status().message()));
  }
  bool all_const = true;
  for (int v : n.inputs) all_const = all_const && V(v).IsConstant();
  if (all_const) {
    if (V(out).NumElements() > kMaxFoldElements) {
      return Unimplemented(node, "folding a constant of more than 2^26 elements");
    }
    return FoldNode(*g_, n);
  }
  g_->nodes.push_back(std::move(n));
  return absl::OkStatus();
}

void Importer::AddView(const onnx::NodeProto& node, int in, int out) {
  g_->values[out].dtype = V(in).dtype;
  if (V(in).IsConstant()) {
    g_->values[out].bytes = V(in).bytes;
    return;
  }
  Node n;
  n.kind = NodeKind::kView;
  n.name = Name(node);
  n.op_type = node.op_type();
  n.inputs = {in};
  n.output = out;
  g_->nodes.push_back(std::move(n));
}

absl::StatusOr<std::unique_ptr<Graph>> Importer::Run(const onnx::ModelProto& model) {
  g_ = std::make_unique<Graph>();
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ < 0 || opset_ > kMaxOpset) {
    return absl::InvalidArgumentError(StrCat(
        "opset ", opset_, " of the default domain is not an ONNX opset (1..", kMaxOpset, ")"));
  }
  if (opset_ == 0) opset_ = kMaxOpset;
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
    auto dtype = DTypeFromOnnx(tt.elem_type());
    if (!dtype) {
      return absl::UnimplementedError(
          StrCat("unsupported dtype ", DtypeName(tt.elem_type()), " of input '", in.name(), "'"));
    }
    if (!tt.has_shape()) {
      return absl::UnimplementedError(StrCat("input '", in.name(), "' has an unknown shape"));
    }
    Value v;
    v.name = in.name();
    v.is_input = true;
    v.dtype = *dtype;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) {
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
    if (!out.type().has_tensor_type()) {
      return absl::UnimplementedError(StrCat("output '", out.name(), "' is not a tensor"));
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
  if (op == "Reshape" || op == "Flatten") return ImportReshape(node);
  if (op == "BatchNormalization") return ImportBatchNorm(node);
  if (op == "Constant") return ImportConstant(node);
  if (op == "Resize" || op == "Upsample") return ImportResize(node);
  if (op == "Identity" || op == "Dropout") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    if (op == "Dropout") {
      if (node.output_size() > 1 && !node.output(1).empty()) {
        return Unimplemented(node, "the mask output is not supported");
      }
      if (HasIn(node, 2)) {
        auto t = ConstInts(node, 2);
        if (!t.ok()) return t.status();
        if (!t->empty() && (*t)[0] != 0) return Unimplemented(node, "training_mode=1");
      }
    }
    AddView(node, *x, NewValue(node, 0, g_->values[*x].shape));
    return absl::OkStatus();
  }
  bool handled = false;
  if (auto s = ImportGeneric(node, &handled); !s.ok() || handled) return s;
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

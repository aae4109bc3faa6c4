#include "compiler/frontend/onnx_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_set>

#include "compiler/frontend/external_data.h"
#include "compiler/frontend/importer.h"
#include "compiler/frontend/onnx_functions.h"
#include "compiler/frontend/onnx_validate.h"
#include "compiler/graph/passes.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"

namespace kiln::compiler {
namespace onnx_internal {

namespace {

std::vector<uint8_t> UnpackedInt4(DType dtype, const std::vector<uint8_t>& packed, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  UnpackInt4(dtype, packed.data(), n, out.data());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> TensorBytes(const onnx::TensorProto& t, DType dtype,
                                                 int64_t n) {
  const int64_t width = DTypeBytes(dtype);
  std::vector<uint8_t> out;
  auto bad = [&](size_t have) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", t.name(), "' has ", have, " values for ", n, " elements"));
  };
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(PackedBytes(dtype, n))) {
      return absl::InvalidArgumentError(StrCat("tensor '", t.name(), "' has ", t.raw_data().size(),
                                               " raw bytes, expected ", PackedBytes(dtype, n)));
    }
    out.assign(t.raw_data().begin(), t.raw_data().end());
    return IsInt4(dtype) ? UnpackedInt4(dtype, out, n) : out;
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
    case DType::kBFloat16:
      s = fill(t.int32_data(), [&](int32_t v, int64_t i) {
        WriteElement<uint16_t>(static_cast<uint16_t>(v), out.data(), i);
      });
      break;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      s = fill(t.int32_data(), [&](int32_t v, int64_t i) { out[i] = static_cast<uint8_t>(v); });
      break;
    case DType::kInt4:
    case DType::kUInt4: {  // int32_data holds the packed bytes
      if (static_cast<int64_t>(t.int32_data().size()) != PackedBytes(dtype, n)) {
        return bad(t.int32_data().size());
      }
      std::vector<uint8_t> packed(t.int32_data().begin(), t.int32_data().end());
      return UnpackedInt4(dtype, packed, n);
    }
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
    if (d > 0 && n > max_elements_ / d)
      return TooManyElements(StrCat("tensor '", name, "' is too large: it"));
    v.shape.push_back(d);
    n *= d;
  }
  auto dtype = DTypeFromOnnx(t.data_type());
  if (t.data_type() == onnx::TensorProto::UNDEFINED) {
    // Not a type ONNX lacks support for: a malformed model.
    return absl::InvalidArgumentError(StrCat("tensor '", name, "' has no data type (UNDEFINED)"));
  }
  if (!dtype) {
    return absl::UnimplementedError(
        StrCat("unsupported dtype ", DtypeName(t.data_type()), " of tensor '", name, "'"));
  }
  v.dtype = *dtype;
  auto data = t.data_location() == onnx::TensorProto::EXTERNAL
                  ? ExternalBytes(t, name, PackedBytes(*dtype, n))
                  : TensorBytes(t, *dtype, n);
  if (!data.ok()) return data.status();
  if (IsInt4(*dtype) && t.data_location() == onnx::TensorProto::EXTERNAL) {
    *data = UnpackedInt4(*dtype, *data, n);
  }
  v.bytes = *std::move(data);
  by_name_[name] = g_->AddValue(std::move(v));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> Importer::ExternalBytes(const onnx::TensorProto& t,
                                                             const std::string& name,
                                                             int64_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    int64_t* field = kv.key() == "offset" ? &offset : kv.key() == "length" ? &length : nullptr;
    if (kv.key() == "location") {
      location = kv.value();
    } else if (field && (!ParseInt64(kv.value(), field) || *field < 0)) {
      return absl::InvalidArgumentError(StrCat("tensor '", name, "': external data ", kv.key(),
                                               " '", kv.value(), "' is not a size"));
    }
  }
  if (location.empty()) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", name, "' uses external data without a location"));
  }
  if (length < 0) length = want;
  if (length != want) {
    return absl::InvalidArgumentError(
        StrCat("tensor '", name, "' has ", length, " bytes of external data, expected ", want));
  }
  std::string path;
  if (auto it = options_.external_files.find(location); it != options_.external_files.end()) {
    path = it->second;
  } else if (!options_.external_data_dir.empty()) {
    auto resolved = ResolveExternalData(options_.external_data_dir, location);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          StrCat("tensor '", name, "': ", resolved.status().message()));
    }
    path = *resolved;
  } else {
    return absl::InvalidArgumentError(StrCat("tensor '", name,
                                             "' keeps its data in external file '", location,
                                             "', which was not provided"));
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(StrCat("tensor '", name, "': cannot open external data '", location,
                                      "': ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        StrCat("tensor '", name, "': external data '", location, "' is not a regular file"));
  }
  if (offset > st.st_size || length > st.st_size - offset) {
    ::close(fd);
    return absl::InvalidArgumentError(StrCat("tensor '", name, "': external data '", location,
                                             "' is ", st.st_size, " bytes, shorter than offset ",
                                             offset, " + length ", length));
  }
  std::vector<uint8_t> out(static_cast<size_t>(length));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t r = ::pread(fd, out.data() + done, out.size() - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      return absl::DataLossError(
          StrCat("tensor '", name, "': reading external data '", location, "' failed"));
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

absl::Status Importer::AddInput(const onnx::ValueInfoProto& in) {
  const std::string& name = in.name();
  if (!in.type().has_tensor_type()) {
    return absl::UnimplementedError(StrCat("input '", name, "' is not a tensor"));
  }
  const auto& tt = in.type().tensor_type();
  auto dtype = DTypeFromOnnx(tt.elem_type());
  if (tt.elem_type() == onnx::TensorProto::UNDEFINED) {
    return absl::InvalidArgumentError(StrCat("input '", name, "' has no data type (UNDEFINED)"));
  }
  if (!dtype) {
    return absl::UnimplementedError(
        StrCat("unsupported dtype ", DtypeName(tt.elem_type()), " of input '", name, "'"));
  }
  auto given_it = options_.input_shapes.find(name);
  const Shape* given = given_it == options_.input_shapes.end() ? nullptr : &given_it->second;
  // The model's shape as text: [batch,3,224,224].
  auto stated = [&] {
    std::vector<std::string> dims;
    for (const auto& d : tt.shape().dim()) {
      dims.push_back(d.has_dim_value()   ? StrCat(d.dim_value())
                     : d.has_dim_param() ? d.dim_param()
                                         : "?");
    }
    return StrCat("[", StrJoin(dims, ","), "]");
  };
  Value v;
  v.name = name;
  v.is_input = true;
  v.dtype = *dtype;
  if (!tt.has_shape()) {
    if (!given) {
      return absl::InvalidArgumentError(
          StrCat("input '", name, "' has an unknown shape; give it with --input-shape ", name,
                 "=DIMS (e.g. 1x3x224x224)"));
    }
    v.shape = *given;
  } else {
    const int rank = tt.shape().dim_size();
    if (given && static_cast<int>(given->size()) != rank) {
      return absl::InvalidArgumentError(StrCat("input shape ", name, "=", StrJoin(*given, "x"),
                                               " has rank ", given->size(), ", but input '", name,
                                               "' is ", stated(), " (rank ", rank, ")"));
    }
    for (int i = 0; i < rank; ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() < 0) {
        return absl::InvalidArgumentError(
            StrCat("input '", name, "' has a negative dimension ", i, " (", d.dim_value(), ")"));
      }
      if (d.has_dim_value()) {
        if (given && (*given)[i] != d.dim_value()) {
          return absl::InvalidArgumentError(StrCat("input shape ", name, "=", StrJoin(*given, "x"),
                                                   " contradicts the model: ", "dimension ", i,
                                                   " of input '", name, "' ", stated(), " is ",
                                                   d.dim_value(), ", not ", (*given)[i]));
        }
        v.shape.push_back(d.dim_value());
      } else if (given) {
        v.shape.push_back((*given)[i]);
      } else {
        return absl::InvalidArgumentError(
            StrCat("input '", name, "' ", stated(), ": dimension ", i,
                   d.has_dim_param() ? StrCat(" ('", d.dim_param(), "')") : std::string(),
                   " is unknown; give the input's shape with --input-shape ", name, "=DIMS"));
      }
    }
  }
  int64_t n = 1;
  for (int64_t d : v.shape) {
    if (d < 0 || (d > 0 && n > kMaxElements / d)) {
      return absl::InvalidArgumentError(StrCat("input '", name, "' is too large"));
    }
    n *= d;
  }
  int id = g_->AddValue(std::move(v));
  by_name_[name] = id;
  g_->inputs.push_back(id);
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
    if (!CheckedElements(V(out).shape, max_elements_)) {
      return TooManyElements(
          StrCat("the constant it computes, [", StrJoin(V(out).shape, ","), "],"));
    }
    if (auto s = CheckFoldBudget(V(out).NumElements() * DTypeBytes(V(out).dtype)); !s.ok()) {
      return s;
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

absl::StatusOr<std::unique_ptr<Graph>> Importer::Run(onnx::ModelProto& model) {
  g_ = std::make_unique<Graph>();
  auto opset = CheckOpset(model, kMaxOpset);
  if (!opset.ok()) return opset.status();
  opset_ = *opset;
  // Calls of model-local functions become their bodies.
  if (auto s = InlineLocalFunctions(model); !s.ok()) return s;
  // Duplicate definitions, undefined inputs, cycles, attribute types.
  auto order = CheckGraph(model.graph(), max_elements_);
  if (!order.ok()) return order.status();
  const onnx::GraphProto& graph = model.graph();
  // Graph inputs (and the shapes given for them) first, so that a missing
  // or contradicting shape is reported before any weight is read.
  std::set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name())) continue;  // an initializer: a constant
    if (auto s = AddInput(in); !s.ok()) return s;
  }
  for (const auto& [name, shape] : options_.input_shapes) {
    bool is_input = false;
    for (int id : g_->inputs) is_input = is_input || g_->values[id].name == name;
    if (is_input) continue;
    std::vector<std::string> inputs;
    for (int id : g_->inputs) inputs.push_back(StrCat("'", g_->values[id].name, "'"));
    return absl::InvalidArgumentError(
        StrCat("input shape ", name, "=", StrJoin(shape, "x"), " names no input of the model",
               initializers.count(name) ? " (it is an initializer)" : "", "; its inputs are ",
               inputs.empty() ? std::string("none") : StrJoin(inputs, ", ")));
  }
  for (int i = 0; i < graph.initializer_size(); ++i) {
    onnx::TensorProto* t = model.mutable_graph()->mutable_initializer(i);
    if (auto s = AddInitializer(*t, t->name()); !s.ok()) return s;
    // Imported: the proto's copy of the data is no longer needed.
    std::string().swap(*t->mutable_raw_data());
  }
  // Integer convolutions (and adds of their bytes) where no quantized
  // grouped Conv other than a depthwise one sits among them: those compute
  // in float, and a network that alternates the two (MobileNetV2 before its
  // depthwise layers were integer) ran 2x slower mixed than all in float,
  // each side converting the other's layout.
  std::unordered_map<std::string, std::string> dequantized;  // output -> quantized input
  for (const auto& node : graph.node()) {
    if (node.op_type() == "DequantizeLinear" && node.output_size() > 0 && node.input_size() > 0) {
      dequantized[node.output(0)] = node.input(0);
    }
  }
  std::unordered_map<std::string, const onnx::TensorProto*> weights;
  for (const auto& t : graph.initializer()) weights[t.name()] = &t;
  for (const auto& node : graph.node()) {
    const int64_t groups = AttrInt(node, "group", 1);
    // A QLinearConv (the operator form) counts as a quantized Conv.
    const bool qlinear = node.op_type() == "QLinearConv" && node.input_size() > 3;
    if ((node.op_type() != "Conv" && !qlinear) || groups == 1 || node.input_size() < 2 ||
        (!qlinear && !dequantized.count(node.input(0)))) {
      continue;
    }
    auto dw = qlinear ? dequantized.end() : dequantized.find(node.input(1));
    auto t = qlinear                   ? weights.find(node.input(3))
             : dw == dequantized.end() ? weights.end()
                                       : weights.find(dw->second);
    const bool depthwise = t != weights.end() && t->second->dims_size() == 4 &&
                           t->second->dims(0) == groups && t->second->dims(1) == 1;
    if (!depthwise) integer_cnn_ = false;
  }
  for (int i : *order) {
    if (auto s = ImportChecked(graph.node(i)); !s.ok()) return s;
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
  if (node.domain() == "com.microsoft") return ImportMicrosoft(node);
  if (node.domain() == "ai.onnx.preview.training") return ImportTraining(node);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::UnimplementedError(
        StrCat("unsupported operator '", node.domain(), ".", op, "' (node '", Name(node), "')"));
  }
  // Storage-only dtypes (bfloat16, float8, int4) reach only the operators
  // that convert or move values without computing on them.
  static const std::set<std::string> kStorageOps = {
      "Cast",      "CastLike",  "QuantizeLinear", "DequantizeLinear",
      "Identity",  "Reshape",   "Flatten",        "Squeeze",
      "Unsqueeze", "Transpose", "Concat",         "Split",
      "Slice",     "Gather",    "Expand",         "Tile",
      "Shape",     "Size"};
  if (!kStorageOps.count(op)) {
    for (const std::string& in : node.input()) {
      auto it = by_name_.find(in);
      if (in.empty() || it == by_name_.end() || !IsStorageOnly(V(it->second).dtype)) continue;
      return Unimplemented(node, StrCat("input '", in, "' is ", DTypeName(V(it->second).dtype),
                                        ", which kiln computes on only after a Cast or "
                                        "DequantizeLinear to a wider type"));
    }
  }
  if (op == "Conv") return ImportConv(node);
  if (op == "MaxPool") return ImportPool(node, true, false);
  if (op == "AveragePool") return ImportPool(node, false, false);
  if (op == "GlobalAveragePool") return ImportPool(node, false, true);
  if (op == "Gemm") return ImportGemm(node);
  if (op == "LSTM" || op == "GRU" || op == "RNN") return ImportRecurrent(node);
  if (op == "If" || op == "Loop" || op == "Scan") return ImportControlFlow(node);
  if (op == "MatMul") return ImportMatMul(node);
  if (op == "Reshape" || op == "Flatten") return ImportReshape(node);
  if (op == "BatchNormalization") return ImportBatchNorm(node);
  if (op == "Constant") return ImportConstant(node);
  if (op == "Resize" || op == "Upsample") return ImportResize(node);
  if (op == "GridSample") return ImportGridSample(node);
  if (op == "DeformConv") return ImportDeformConv(node);
  // kiln's values are tensors: an optional one is present (a tensor) or
  // absent (no input); an optional graph input is refused where it is
  // declared. So OptionalHasElement folds, and OptionalGetElement is the
  // identity of its tensor.
  if (op == "OptionalHasElement") {
    auto has = Expand(node, Scalar(Name(node), DType::kBool, HasIn(node, 0) ? 1 : 0), {}, 0);
    return has.ok() ? absl::OkStatus() : has.status();
  }
  if (op == "Identity" || op == "Dropout" || op == "OptionalGetElement") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    if (op == "Dropout") {
      // Inference, or training with ratio 0: the identity, and a mask of
      // all ones (bool since opset 10, the input's dtype before).
      if (HasIn(node, 2)) {
        auto t = ConstInts(node, 2);
        if (!t.ok()) return t.status();
        double ratio = 0.5;
        if (HasIn(node, 1)) {
          auto r = ConstDoubles(node, 1);
          if (!r.ok()) return r.status();
          if (!r->empty()) ratio = (*r)[0];
        }
        if (!t->empty() && (*t)[0] != 0 && ratio != 0) {
          return Unimplemented(node, "training_mode=1 with a nonzero ratio (random)");
        }
      }
      if (node.output_size() > 1 && !node.output(1).empty()) {
        const Shape xs = V(*x).shape;
        DType mt = opset_ >= 10 ? DType::kBool : V(*x).dtype;
        auto mask = Expand(node, Scalar(Name(node), mt, 1), xs, 1);
        if (!mask.ok()) return mask.status();
      }
    }
    AddView(node, *x, NewValue(node, 0, g_->values[*x].shape));
    return absl::OkStatus();
  }
  bool handled = false;
  if (auto s = ImportSignal(node, &handled); !s.ok() || handled) return s;
  if (auto s = ImportExpanded(node, &handled); !s.ok() || handled) return s;
  if (auto s = ImportGeneric(node, &handled); !s.ok() || handled) return s;
  return absl::UnimplementedError(
      StrCat("unsupported operator '", op, "' (node '", Name(node), "')"));
}

}  // namespace onnx_internal

namespace {

absl::StatusOr<std::unique_ptr<Graph>> ImportParsed(onnx::ModelProto& model,
                                                    const ImportOptions& options) {
  if (model.ir_version() <= 0 || !model.has_graph()) {
    return absl::InvalidArgumentError("not an ONNX model: no ir_version or no graph");
  }
  onnx_internal::Importer importer(options);
  return importer.Run(model);
}

constexpr const char* kTooLarge =
    "not an ONNX model: larger than 2 GiB (larger models keep their weights in external data "
    "files)";

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnx(std::string_view model_bytes,
                                                  const ImportOptions& options) {
  onnx::ModelProto model;
  if (model_bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(kTooLarge);
  }
  if (!model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size()))) {
    return absl::InvalidArgumentError("not an ONNX model: the bytes do not parse as a ModelProto");
  }
  return ImportParsed(model, options);
}

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path,
                                                      const ImportOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(StrCat("cannot open model file '", path, "'"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(StrCat("'", path, "' is not a regular file"));
  }
  if (st.st_size > INT32_MAX) {
    ::close(fd);
    return absl::InvalidArgumentError(kTooLarge);
  }
  onnx::ModelProto model;
  bool parsed;
  {
    google::protobuf::io::FileInputStream stream(fd);
    stream.SetCloseOnDelete(true);
    parsed = model.ParseFromZeroCopyStream(&stream);
  }
  if (!parsed) {
    return absl::InvalidArgumentError("not an ONNX model: the bytes do not parse as a ModelProto");
  }
  return ImportParsed(model, options);
}

absl::StatusOr<std::vector<int64_t>> ParseShape(std::string_view text) {
  std::vector<int64_t> dims;
  for (std::string_view d : StrSplit(text, 'x', /*skip_empty=*/false)) {
    int64_t v = 0;
    if (!ParseInt64(d, &v) || v <= 0) {
      return absl::InvalidArgumentError(
          StrCat("shape '", text, "' is not positive integers joined by 'x' (e.g. 1x3x224x224)"));
    }
    dims.push_back(v);
  }
  return dims;
}

absl::Status ParseInputShape(std::string_view text,
                             std::map<std::string, std::vector<int64_t>>* shapes) {
  size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        StrCat("--input-shape '", text, "' is not NAME=DIMS (e.g. data=1x3x224x224)"));
  }
  std::string name(text.substr(0, eq));
  auto dims = ParseShape(text.substr(eq + 1));
  if (!dims.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--input-shape ", name, ": ", dims.status().message()));
  }
  if (shapes->count(name)) {
    return absl::InvalidArgumentError(StrCat("--input-shape ", name, " is given twice"));
  }
  (*shapes)[name] = *std::move(dims);
  return absl::OkStatus();
}

}  // namespace kiln::compiler

// kiln-conformance DATA_DIR [--filter SUBSTR[,SUBSTR...]] [--ops LIST] [--json FILE]
//
// Runs ONNX backend node tests (DATA_DIR/<test>/model.onnx and
// test_data_set_*/{input,output}_*.pb) through Model::FromOnnx, CompileModel
// (default configs, host target) and deploy::Module, feeding inputs in their
// dtypes and comparing every output by its dtype: floats (float16 converted to
// float) with rtol 1e-3 / atol 1e-5, integers and bool exactly. A test counts
// for the claimed operators when all its nodes' ops are claimed (kiln's list,
// or --ops, which also restricts the run to such tests). Exit: 0, 1 when a
// claimed test FAILS, 2 on bad usage, 77 when DATA_DIR does not exist.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "deploy/runtime.h"
#include "deploy/tensor_io.h"
#include "onnx/onnx_pb.h"

namespace fs = std::filesystem;
using kiln::StrCat;

namespace {

enum class Outcome { kPass, kFail, kUnsupported, kDisputed };

// Tests whose stored expected output contradicts the operator's spec, ONNX's
// own current reference implementation and ONNX Runtime. kiln follows the
// spec; a mismatch on these is reported DISPUTED (not a pass) with the reason.
constexpr const char* kBFloat16Truncates =
    "1.17 data truncates float32 to bfloat16; onnx.reference (1.23, through ml_dtypes), "
    "PyTorch and onnxruntime round to nearest even";
const std::map<std::string, std::string> kDisputedData = {
    {"test_qlinearmatmul_2D_int8_float16", "int8 data wraps instead of saturating, onnx/onnx#6169"},
    {"test_qlinearmatmul_2D_int8_float32", "int8 data wraps instead of saturating, onnx/onnx#6169"},
    {"test_qlinearmatmul_3D_int8_float16", "int8 data wraps instead of saturating, onnx/onnx#6169"},
    {"test_qlinearmatmul_3D_int8_float32", "int8 data wraps instead of saturating, onnx/onnx#6169"},
    {"test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
     "1.17 data divides ceil-mode windows past the padded input by the whole window; "
     "onnx.reference, onnxruntime and PyTorch count the taps inside the padded input"},
    {"test_cast_FLOAT_to_BFLOAT16", kBFloat16Truncates},
    {"test_castlike_FLOAT_to_BFLOAT16", kBFloat16Truncates},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", kBFloat16Truncates},
    {"test_adam_multiple",
     "its outputs were computed with epsilon = 1e-2, which its node does not set (onnx's "
     "adam.py, export_adam_multiple): the model means the default, 1e-6"},
};

struct Result {
  std::string name;
  Outcome outcome = Outcome::kFail;
  std::string detail;
  bool claimed = false;
};

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "PASS";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kUnsupported:
      return "UNSUPPORTED";
    case Outcome::kDisputed:
      return "DISPUTED";
  }
  return "?";
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> OpsOf(const std::string& model_bytes) {
  std::set<std::string> ops;
  onnx::ModelProto m;
  if (!m.ParseFromString(model_bytes)) return ops;
  for (const auto& n : m.graph().node()) ops.insert(n.op_type());
  return ops;
}

std::vector<fs::path> Sorted(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  // input_10 after input_9: order by the number after the prefix when present.
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) {
      std::string s = p.stem().string().substr(prefix.size());
      int64_t v = 0;
      return kiln::ParseInt64(s, &v) ? v : int64_t{1} << 40;
    };
    return num(a) != num(b) ? num(a) < num(b) : a < b;
  });
  return out;
}

bool IsUnimpl(const absl::Status& s) { return s.code() == absl::StatusCode::kUnimplemented; }

// kiln compiles for static shapes. Like TVM's ONNX harness (shape dict +
// freeze_params), the runner specializes the model on the first data set:
// integer graph inputs (e.g. Reshape's `shape`) and the inputs named in
// `freeze` (ones the importer reported it must know at compile time, such as
// Resize's float scales) become constants, and dynamic dims of the remaining
// inputs take the data set's sizes. Returns the
// rewritten model bytes and the indices of the inputs that were frozen (not
// fed at run time); `note` says what was specialized. Inputs frozen must be
// equal in every data set, otherwise the test is reported unsupported.
struct Specialized {
  std::string bytes;
  std::set<size_t> frozen;
  std::string note;
};

absl::StatusOr<Specialized> Specialize(const fs::path& dir, const std::string& bytes,
                                       const std::set<std::string>& freeze) {
  Specialized out{bytes, {}, ""};
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return out;  // the importer reports it
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<int> fed;  // graph input positions that test data feeds, in order
  for (int i = 0; i < m.graph().input_size(); ++i) {
    if (!inits.count(m.graph().input(i).name())) fed.push_back(i);
  }
  std::vector<fs::path> sets = Sorted(dir, "test_data_set_");
  if (sets.empty()) return out;
  std::vector<fs::path> first = Sorted(sets[0], "input_");
  bool changed = false;
  for (size_t k = 0; k < fed.size() && k < first.size(); ++k) {
    auto* vi = m.mutable_graph()->mutable_input(fed[k]);
    if (!vi->type().has_tensor_type()) continue;
    onnx::TensorProto t;
    if (!t.ParseFromString(ReadFile(first[k]))) continue;
    int elem = vi->type().tensor_type().elem_type();
    if (elem == onnx::TensorProto::INT64 || elem == onnx::TensorProto::INT32 ||
        freeze.count(vi->name())) {
      for (size_t si = 1; si < sets.size(); ++si) {
        auto other = Sorted(sets[si], "input_");
        if (k >= other.size() || ReadFile(other[k]) != ReadFile(first[k])) {
          return absl::UnimplementedError(StrCat(
              "input '", vi->name(), "', needed at compile time, differs between data sets"));
        }
      }
      t.set_name(vi->name());
      *m.mutable_graph()->add_initializer() = t;
      out.frozen.insert(k);
      out.note += StrCat(out.note.empty() ? "" : ", ", "frozen ", vi->name());
      changed = true;
      continue;
    }
    auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() != t.dims_size()) continue;
    for (int d = 0; d < shape->dim_size(); ++d) {
      if (!shape->dim(d).has_dim_value()) {
        shape->mutable_dim(d)->set_dim_value(t.dims(d));
        if (out.note.find(vi->name() + " shape") == std::string::npos) {
          out.note += StrCat(out.note.empty() ? "" : ", ", vi->name(), " shape");
        }
        changed = true;
      }
    }
  }
  if (changed) m.SerializeToString(&out.bytes);
  return out;
}

// An output buffer of `info`'s dtype and shape, filled with NaN (floats) or
// 0xA5 bytes (integers, bool) so that elements the module does not write show.
kiln::deploy::Tensor Unwritten(const kiln::deploy::TensorInfo& info) {
  kiln::deploy::Tensor t{info.name, info.shape, info.dtype, {}};
  t.bytes.assign(static_cast<size_t>(info.ByteSize()), 0xA5);
  const int64_t n = info.NumElements();
  if (info.dtype == kiln::DType::kFloat32) {
    std::fill_n(t.data_as<float>(), n, std::nanf(""));
  } else if (info.dtype == kiln::DType::kFloat64) {
    std::fill_n(t.data_as<double>(), n, std::nan(""));
  } else if (info.dtype == kiln::DType::kFloat16) {
    std::fill_n(t.data_as<uint16_t>(), n, uint16_t{0x7e00});
  }
  return t;
}

// Compares the module's output `got` with the test's `want`: floats (float16
// converted to float) within rtol 1e-3 / atol 1e-5, NaN equal to NaN;
// integers and bool exactly. Returns "" when they match, else what differs
// (the worst element for floats, the first for integers).
std::string Compare(const kiln::deploy::Tensor& got, const kiln::deploy::Tensor& want) {
  if (got.dtype != want.dtype) {
    return StrCat("'", got.name, "' is ", kiln::DTypeName(got.dtype), ", expected ",
                  kiln::DTypeName(want.dtype));
  }
  const int64_t n = got.NumElements();
  if (n != want.NumElements()) {
    return StrCat("'", got.name, "' has ", n, " elements, expected ", want.NumElements());
  }
  int64_t bad_at = -1;
  if (kiln::IsFloat(got.dtype)) {
    double worst = 0;
    for (int64_t j = 0; j < n; ++j) {
      double a = kiln::deploy::ElementAsDouble(got, j), b = kiln::deploy::ElementAsDouble(want, j);
      if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
      double err = std::fabs(a - b) - (1e-5 + 1e-3 * std::fabs(b));
      if (std::isnan(err) || err > worst) {
        worst = std::isnan(err) ? INFINITY : err;
        bad_at = j;
      }
    }
  } else {
    const int64_t item = kiln::DTypeBytes(got.dtype);
    for (int64_t j = 0; j < n && bad_at < 0; ++j) {
      if (std::memcmp(got.bytes.data() + j * item, want.bytes.data() + j * item, item) != 0) {
        bad_at = j;
      }
    }
  }
  if (bad_at < 0) return "";
  return StrCat(got.name, "[", bad_at, "] = ", kiln::deploy::ElementToString(got, bad_at),
                ", expected ", kiln::deploy::ElementToString(want, bad_at));
}

Result RunTest(const fs::path& dir, const kiln::compiler::Target& target) {
  Result r;
  r.name = dir.filename().string();
  // Specializes, imports, and when the importer names a graph input it must
  // know at compile time, freezes that input too and tries again.
  const std::string original = ReadFile(dir / "model.onnx");
  std::set<std::string> freeze;
  absl::StatusOr<Specialized> spec;
  absl::StatusOr<kiln::compiler::Model> model = absl::UnknownError("not imported");
  for (;;) {
    spec = Specialize(dir, original, freeze);
    if (!spec.ok()) {
      r.outcome = Outcome::kUnsupported;
      r.detail = StrCat("unsupported: ", spec.status().message());
      return r;
    }
    model = kiln::compiler::Model::FromOnnx(spec->bytes);
    if (model.ok() || !IsUnimpl(model.status())) break;
    std::string msg(model.status().message());
    size_t end = msg.find("') must be known at compile time");
    size_t begin = end == std::string::npos ? end : msg.rfind("('", end);
    if (begin == std::string::npos) break;
    std::string name = msg.substr(begin + 2, end - begin - 2);
    if (!freeze.insert(name).second) break;
  }
  if (!model.ok()) {
    r.outcome = IsUnimpl(model.status()) ? Outcome::kUnsupported : Outcome::kFail;
    r.detail = StrCat(r.outcome == Outcome::kUnsupported ? "unsupported: " : "import: ",
                      model.status().message());
    return r;
  }
  auto artifact = kiln::compiler::CompileModel(*model, target, nullptr);
  if (!artifact.ok()) {
    r.outcome = IsUnimpl(artifact.status()) ? Outcome::kUnsupported : Outcome::kFail;
    r.detail = StrCat(r.outcome == Outcome::kUnsupported ? "unsupported: " : "compile: ",
                      artifact.status().message());
    return r;
  }
  auto module = kiln::deploy::Module::LoadBytes(*artifact);
  if (!module.ok()) {
    r.detail = StrCat("load: ", module.status().message());
    return r;
  }
  const auto& manifest = (*module)->manifest();
  int sets = 0;
  for (const fs::path& set : Sorted(dir, "test_data_set_")) {
    ++sets;
    std::vector<kiln::deploy::Tensor> inputs, expected;
    std::vector<fs::path> input_files = Sorted(set, "input_");
    for (size_t k = 0; k < input_files.size(); ++k) {
      if (spec->frozen.count(k)) continue;
      const fs::path& p = input_files[k];
      auto t = kiln::deploy::ReadTensorFile(p.string());
      if (!t.ok()) {
        r.outcome = Outcome::kUnsupported;
        r.detail = StrCat("unsupported: input ", p.filename().string(), ": ", t.status().message());
        return r;
      }
      inputs.push_back(*std::move(t));
    }
    for (const fs::path& p : Sorted(set, "output_")) {
      auto t = kiln::deploy::ReadTensorFile(p.string());
      if (!t.ok()) {
        r.outcome = Outcome::kUnsupported;
        r.detail =
            StrCat("unsupported: output ", p.filename().string(), ": ", t.status().message());
        return r;
      }
      expected.push_back(*std::move(t));
    }
    if (inputs.size() != manifest.inputs.size() || expected.size() != manifest.outputs.size()) {
      r.detail = StrCat(set.filename().string(), ": ", inputs.size(), " inputs / ", expected.size(),
                        " outputs given, the module has ", manifest.inputs.size(), " / ",
                        manifest.outputs.size());
      return r;
    }
    // ONNX 1.17's data stores bfloat16 tensors as their uint16 bit patterns.
    auto retype = [](kiln::deploy::Tensor& t, const kiln::deploy::TensorInfo& info) {
      if (t.dtype == kiln::DType::kUInt16 && info.dtype == kiln::DType::kBFloat16) {
        t.dtype = kiln::DType::kBFloat16;
      }
    };
    for (size_t i = 0; i < inputs.size(); ++i) retype(inputs[i], manifest.inputs[i]);
    for (size_t i = 0; i < expected.size(); ++i) retype(expected[i], manifest.outputs[i]);
    std::vector<kiln::deploy::InputBuffer> in_bufs;
    for (const auto& t : inputs) in_bufs.push_back({t.bytes.data(), t.dtype, t.NumElements()});
    std::vector<kiln::deploy::Tensor> outs;
    for (const auto& o : manifest.outputs) outs.push_back(Unwritten(o));
    std::vector<kiln::deploy::OutputBuffer> out_bufs;
    for (auto& o : outs) out_bufs.push_back({o.bytes.data(), o.dtype, o.NumElements()});
    if (auto s = (*module)->RunChecked(in_bufs, out_bufs); !s.ok()) {
      r.detail = StrCat(set.filename().string(), ": run: ", s.message());
      return r;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (std::string why = Compare(outs[i], expected[i]); !why.empty()) {
        r.detail = StrCat(set.filename().string(), ": output ", why);
        return r;
      }
    }
  }
  if (sets == 0) {
    r.detail = "no test_data_set_*";
    return r;
  }
  r.outcome = Outcome::kPass;
  if (!spec->note.empty()) r.detail = StrCat("specialized: ", spec->note);
  return r;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir, json_path;
  std::vector<std::string> filters;
  // The operators kiln imports (compiler/frontend); keep in step with
  // docs/user-guide.md.
  std::set<std::string> claimed = {
      "Abs",
      "Acos",
      "Acosh",
      "Adagrad",
      "Adam",
      "Add",
      "AffineGrid",
      "And",
      "ArgMax",
      "ArgMin",
      "Asin",
      "Asinh",
      "Atan",
      "Atanh",
      "AveragePool",
      "BatchNormalization",
      "BitShift",
      "BitwiseAnd",
      "BitwiseNot",
      "BitwiseOr",
      "BitwiseXor",
      "BlackmanWindow",
      "Cast",
      "CastLike",
      "Ceil",
      "Celu",
      "CenterCropPad",
      "Clip",
      "Col2Im",
      "Compress",
      "Concat",
      "Constant",
      "ConstantOfShape",
      "Conv",
      "ConvInteger",
      "ConvTranspose",
      "Cos",
      "Cosh",
      "CumSum",
      "DFT",
      "DeformConv",
      "DepthToSpace",
      "DequantizeLinear",
      "Det",
      "Div",
      "Dropout",
      "DynamicQuantizeLinear",
      "Einsum",
      "Elu",
      "Equal",
      "Erf",
      "Exp",
      "Expand",
      "EyeLike",
      "Flatten",
      "Floor",
      "Gather",
      "GatherElements",
      "GatherND",
      "Gelu",
      "GRU",
      "Gemm",
      "GlobalAveragePool",
      "GlobalLpPool",
      "GlobalMaxPool",
      "Greater",
      "GreaterOrEqual",
      "GridSample",
      "GroupNormalization",
      "HammingWindow",
      "HannWindow",
      "HardSigmoid",
      "HardSwish",
      "Hardmax",
      "Identity",
      "If",
      "InstanceNormalization",
      "IsInf",
      "IsNaN",
      "LRN",
      "LSTM",
      "LayerNormalization",
      "LeakyRelu",
      "Less",
      "LessOrEqual",
      "Log",
      "LogSoftmax",
      "Loop",
      "LpNormalization",
      "LpPool",
      "MatMul",
      "MatMulInteger",
      "Max",
      "MaxPool",
      "MaxUnpool",
      "Mean",
      "MeanVarianceNormalization",
      "MelWeightMatrix",
      "Min",
      "Mish",
      "Mod",
      "Momentum",
      "Mul",
      "Neg",
      "NegativeLogLikelihoodLoss",
      "Not",
      "OneHot",
      "OptionalGetElement",
      "OptionalHasElement",
      "Or",
      "PRelu",
      "Pad",
      "Pow",
      "QLinearConv",
      "QLinearMatMul",
      "QuantizeLinear",
      "RNN",
      "Range",
      "Reciprocal",
      "ReduceL1",
      "ReduceL2",
      "ReduceLogSum",
      "ReduceLogSumExp",
      "ReduceMax",
      "ReduceMean",
      "ReduceMin",
      "ReduceProd",
      "ReduceSum",
      "ReduceSumSquare",
      "Relu",
      "Reshape",
      "ReverseSequence",
      "Resize",
      "Round",
      "Scan",
      "Scatter",
      "ScatterElements",
      "ScatterND",
      "Selu",
      "Shape",
      "Shrink",
      "Sigmoid",
      "Sign",
      "Sin",
      "Sinh",
      "Size",
      "Slice",
      "Softmax",
      "SoftmaxCrossEntropyLoss",
      "Softplus",
      "Softsign",
      "SpaceToDepth",
      "Split",
      "Sqrt",
      "STFT",
      "Squeeze",
      "Sub",
      "Sum",
      "Swish",
      "Tan",
      "Tanh",
      "TfIdfVectorizer",
      "ThresholdedRelu",
      "Tile",
      "TopK",
      "Transpose",
      "Trilu",
      "Unsqueeze",
      "Upsample",
      "Where",
      "Xor",
  };
  bool restrict_ops = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--filter") {
      const std::string list = value();
      for (auto f : kiln::StrSplit(list, ',', true)) filters.emplace_back(f);
    } else if (a == "--ops") {
      claimed.clear();
      restrict_ops = true;
      const std::string list = value();
      for (auto f : kiln::StrSplit(list, ',', true)) claimed.emplace(f);
    } else if (a == "--json") {
      json_path = value();
    } else if (a.rfind("--", 0) == 0 || !data_dir.empty()) {
      std::fprintf(
          stderr,
          "usage: kiln-conformance DATA_DIR [--filter SUBSTR] [--ops LIST] [--json FILE]\n");
      return 2;
    } else {
      data_dir = a;
    }
  }
  if (data_dir.empty()) {
    std::fprintf(stderr,
                 "usage: kiln-conformance DATA_DIR [--filter SUBSTR] [--ops LIST] [--json FILE]\n");
    return 2;
  }
  if (!fs::is_directory(data_dir)) {
    std::fprintf(stderr, "kiln-conformance: %s does not exist; skipping\n", data_dir.c_str());
    return 77;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(data_dir)) {
    if (!fs::exists(e.path() / "model.onnx")) continue;
    std::string name = e.path().filename().string();
    bool match = filters.empty();
    for (const auto& f : filters) match = match || name.find(f) != std::string::npos;
    if (match) tests.push_back(e.path());
  }
  std::sort(tests.begin(), tests.end());
  kiln::compiler::Target target = kiln::compiler::Target::Host();
  std::vector<Result> results;
  for (const fs::path& t : tests) {
    std::set<std::string> ops = OpsOf(ReadFile(t / "model.onnx"));
    bool is_claimed =
        !ops.empty() && std::all_of(ops.begin(), ops.end(),
                                    [&](const std::string& o) { return claimed.count(o) > 0; });
    if (restrict_ops && !is_claimed) continue;
    Result r = RunTest(t, target);
    r.claimed = is_claimed;
    if (auto d = kDisputedData.find(r.name); d != kDisputedData.end() &&
                                             r.outcome == Outcome::kFail &&
                                             r.detail.find(": output ") != std::string::npos) {
      r.outcome = Outcome::kDisputed;
      r.detail = StrCat(r.detail, " (test data disputed: ", d->second, ")");
    }
    std::printf("%s %s%s%s\n", OutcomeName(r.outcome), r.name.c_str(), r.detail.empty() ? "" : " ",
                r.detail.c_str());
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  auto count = [&](bool only_claimed, Outcome o) {
    return std::count_if(results.begin(), results.end(), [&](const Result& r) {
      return (!only_claimed || r.claimed) && r.outcome == o;
    });
  };
  auto line = [&](const char* what, bool only_claimed) {
    long pass = count(only_claimed, Outcome::kPass), fail = count(only_claimed, Outcome::kFail),
         unsup = count(only_claimed, Outcome::kUnsupported),
         disputed = count(only_claimed, Outcome::kDisputed);
    long total = pass + fail + unsup + disputed;
    std::printf(
        "%s: %ld tests, %ld passed, %ld failed, %ld unsupported, %ld disputed, pass rate %.1f%%\n",
        what, total, pass, fail, unsup, disputed, total ? 100.0 * pass / total : 0.0);
  };
  line("overall", false);
  line("claimed operators", true);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"tests\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << "  {\"name\": \"" << JsonEscape(r.name) << "\", \"result\": \""
          << OutcomeName(r.outcome) << "\", \"claimed\": " << (r.claimed ? "true" : "false")
          << ", \"detail\": \"" << JsonEscape(r.detail) << "\"}"
          << (i + 1 < results.size() ? "," : "") << "\n";
    }
    out << "], \"passed\": " << count(false, Outcome::kPass)
        << ", \"failed\": " << count(false, Outcome::kFail)
        << ", \"unsupported\": " << count(false, Outcome::kUnsupported)
        << ", \"disputed\": " << count(false, Outcome::kDisputed)
        << ", \"claimed_failed\": " << count(true, Outcome::kFail) << "}\n";
  }
  return count(true, Outcome::kFail) > 0 ? 1 : 0;
}

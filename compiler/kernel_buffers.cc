#include <cmath>
#include <random>

#include "base/str.h"
#include "compiler/kernel.h"

namespace kiln::compiler {
namespace {

std::vector<uint8_t> RandomData(DType dtype, int64_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> data(static_cast<size_t>(n * DTypeBytes(dtype)));
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int64_t> sint(-4, 4), uint(0, 8), bit(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    if (IsFloat(dtype)) {
      DoubleToElement(dtype, real(rng), data.data(), i);
    } else if (dtype == DType::kBool) {
      Int64ToElement(dtype, bit(rng), data.data(), i);
    } else {
      Int64ToElement(dtype, IsSignedInt(dtype) ? sint(rng) : uint(rng), data.data(), i);
    }
  }
  return data;
}

}  // namespace

int64_t KernelBuffers::OutputSize() const {
  return static_cast<int64_t>(output.size()) / DTypeBytes(output_dtype);
}

double KernelBuffers::OutputAt(int64_t i) const {
  return ElementToDouble(output_dtype, output.data(), i);
}

std::vector<size_t> KernelBuffers::ArgBytes() const {
  std::vector<size_t> sizes;
  for (const auto& in : inputs) sizes.push_back(in.size());
  sizes.push_back(output.size());
  return sizes;
}

KernelBuffers MakeKernelBuffers(const KernelSignature& sig, uint64_t seed, float output_fill) {
  std::mt19937_64 rng(seed);
  KernelBuffers b;
  for (const TensorSpec& spec : sig.inputs) {
    b.inputs.push_back(RandomData(spec.dtype, spec.NumElements(), rng));
    b.input_dtypes.push_back(spec.dtype);
  }
  b.output_dtype = sig.output.dtype;
  const int64_t n = sig.output.NumElements();
  b.output.resize(static_cast<size_t>(n * DTypeBytes(b.output_dtype)));
  for (int64_t i = 0; i < n; ++i) DoubleToElement(b.output_dtype, output_fill, b.output.data(), i);
  for (auto& in : b.inputs) {
    b.input_ptrs.push_back(in.data());
    b.args.push_back(in.data());
  }
  b.args.push_back(b.output.data());
  return b;
}

int64_t PackedInput::Bytes() const {
  int64_t n = DTypeBytes(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status PackKernelInputs(const JitKernel& kernel, KernelBuffers& b) {
  const auto& packs = kernel.packed_inputs();
  for (size_t i = 0; i < b.inputs.size(); ++i) b.args[i] = b.inputs[i].data();
  b.packed.assign(packs.size(), {});
  for (size_t k = 0; k < packs.size(); ++k) {
    const int i = packs[k].input;
    if (i < 0 || static_cast<size_t>(i) >= b.inputs.size()) {
      return absl::InvalidArgumentError(StrCat("packed input ", i, " out of range"));
    }
    b.packed[k].resize(static_cast<size_t>(packs[k].Bytes()));
    if (int32_t rc = kernel.Pack(k, b.inputs[i].data(), b.packed[k].data()); rc != 0) {
      return absl::InternalError(StrCat("packing input ", i, " returned ", rc));
    }
    b.args[i] = b.packed[k].data();
  }
  return absl::OkStatus();
}

int64_t RoundingTies(const Workload& w, int64_t n) {
  auto sig = w.Signature();
  if (!sig.ok() || IsFloat(sig->output.dtype)) return 0;
  for (const EpilogueOp& e : w.epilogue) {
    if (e.kind == EpilogueKind::kUnary && e.fn == ElementFn::kRound)
      return std::max<int64_t>(1, n / 10000);
  }
  return 0;
}

bool OutputsMatch(DType dtype, const void* got, const void* want, int64_t n, double rtol,
                  double atol, std::string* detail, int64_t off_by_one) {
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  int64_t worst = -1, ones = 0;
  double worst_excess = 0;
  for (int64_t i = 0; i < n; ++i) {
    double a = ElementToDouble(dtype, g, i), b = ElementToDouble(dtype, w, i);
    double excess = 0;
    if (!IsFloat(dtype)) {
      const int64_t d = ElementToInt64(dtype, g, i) - ElementToInt64(dtype, w, i);
      if (d != 0) excess = (d == 1 || d == -1) && ++ones <= off_by_one ? 0 : 1;
    } else if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) excess = INFINITY;
    } else if (std::isinf(a) || std::isinf(b)) {
      if (a != b) excess = INFINITY;
    } else {
      excess = std::fabs(a - b) - (atol + rtol * std::fabs(b));
    }
    if (excess > 0 && (worst < 0 || excess > worst_excess)) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (worst < 0) return true;
  if (detail) {
    *detail = StrCat("output[", worst, "] = ", ElementToDouble(dtype, g, worst), ", expected ",
                     ElementToDouble(dtype, w, worst));
    if (off_by_one > 0) {
      *detail += StrCat(" (", ones, " elements off by one, ", off_by_one, " allowed)");
    }
  }
  return false;
}

}  // namespace kiln::compiler

// RunReference: plain loops over the semantics of compiler/workload.h, used to
// verify generated kernels and to fold constants at compile time.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/kernel.h"
#include "compiler/ops/common.h"
#include "compiler/ops/interpret.h"
#include "compiler/ops/registry.h"
#include "deploy/parallel.h"

namespace kiln::compiler {
namespace {

using Shape = std::vector<int64_t>;

// For every element of `out` (row-major), the flat index into a tensor of
// shape `from` broadcast to it (from left-padded with 1s).
std::vector<int64_t> BroadcastIndices(const Shape& from, const Shape& out) {
  size_t rank = out.size();
  Shape f(rank - std::min(rank, from.size()), 1);
  f.insert(f.end(), from.begin(), from.end());
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    stride[i] = f[i] == 1 ? 0 : s;
    s *= f[i];
  }
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> idx(n);
  std::vector<int64_t> coord(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += coord[d] * stride[d];
    idx[i] = off;
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < out[d]) break;
      coord[d] = 0;
    }
  }
  return idx;
}

// NCHW[b]c <-> NCHW (compiler/workload.h BlockedShape) of an N x C x HW tensor.
std::vector<float> Unblock(const float* src, int64_t N, int64_t C, int64_t HW, int64_t b) {
  std::vector<float> out(static_cast<size_t>(N * C * HW));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t p = 0; p < HW; ++p) {
        out[(n * C + c) * HW + p] = src[((n * (C / b) + c / b) * HW + p) * b + c % b];
      }
    }
  }
  return out;
}
void Block(const float* src, int64_t N, int64_t C, int64_t HW, int64_t b, float* out) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t p = 0; p < HW; ++p) {
        out[((n * (C / b) + c / b) * HW + p) * b + c % b] = src[(n * C + c) * HW + p];
      }
    }
  }
}

// Runs `run` (an NCHW conv2d or pool2d over inputs `in`, writing `out`) on
// the workload's blocked data and output (in_block / out_block).
template <typename Run>
void WithBlocks(const Workload& w, std::span<const float* const> in, float* out,
                const char* out_channels, Run run) {
  const int64_t ib = w.IntOr("in_block", 0), ob = w.IntOr("out_block", 0);
  const int64_t N = w.Int("N"), C = w.Int("C"), K = w.Int(out_channels);
  std::vector<float> data;
  std::vector<const float*> ins(in.begin(), in.end());
  if (ib > 0) {
    data = Unblock(in[0], N, C, w.Int("H") * w.Int("W"), ib);
    ins[0] = data.data();
  }
  if (ob <= 0) return run(std::span<const float* const>(ins), out);
  const int64_t OHW = w.Int("OH") * w.Int("OW");
  std::vector<float> tmp(static_cast<size_t>(N * K * OHW));
  run(std::span<const float* const>(ins), tmp.data());
  Block(tmp.data(), N, K, OHW, ob, out);
}

void Conv2d(const Workload& w, std::span<const float* const> in, float* out) {
  const int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W"), K = w.Int("K"),
                R = w.Int("R"), S = w.Int("S"), G = w.Int("groups"), OH = w.Int("OH"),
                OW = w.Int("OW");
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  const auto& dil = w.Ints("dilation");
  const float* x = in[0];
  const float* wt = in[1];
  const float* bias = w.Int("bias") ? in[2] : nullptr;
  const int64_t Cg = C / G, Kg = K / G;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? bias[k] : 0.0;
          for (int64_t c = 0; c < Cg; ++c) {
            for (int64_t r = 0; r < R; ++r) {
              int64_t ih = oh * st[0] - pad[0] + r * dil[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t s = 0; s < S; ++s) {
                int64_t iw = ow * st[1] - pad[1] + s * dil[1];
                if (iw < 0 || iw >= W) continue;
                acc += static_cast<double>(x[((n * C + g * Cg + c) * H + ih) * W + iw]) *
                       wt[((k * Cg + c) * R + r) * S + s];
              }
            }
          }
          out[((n * K + k) * OH + oh) * OW + ow] = static_cast<float>(acc);
        }
      }
    }
  }
}

// Rows of the output in parallel (a 4096^3 MatMul is verified in seconds,
// inside the farm's per-candidate time limit); each element is the same
// float64 sum over k in order, whichever loop order reads the operands.
// x rounded to the nearest bfloat16 (ties to even), as ops::Bf16Bits.
float RoundToBf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

void Dense(const Workload& w, const KernelSignature& sig, std::span<const float* const> in,
           float* out) {
  const int64_t M = w.Int("M"), N = w.Int("N"), K = w.Int("K");
  const bool ta = w.Int("transA") != 0, tb = w.Int("transB") != 0;
  const bool ba = w.IntOr("batch_a", 0) != 0, bb = w.IntOr("batch_b", 0) != 0;
  const int64_t batch = (ba || bb) ? w.IntOr("batch", 1) : 1;
  const double alpha = w.FloatOr("alpha", 1.0), beta = w.FloatOr("beta", 1.0);
  const float* A = in[0];
  const float* B = in[1];
  std::vector<int64_t> cidx;
  if (w.Int("bias")) cidx = BroadcastIndices(w.Ints("bias_shape"), sig.output.shape);
  auto rows = [&](int64_t lo, int64_t hi) {
    std::vector<double> acc(static_cast<size_t>(N));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / M, m = r % M;
      const float* a = A + (ba ? b * M * K : 0);
      const float* bm = B + (bb ? b * K * N : 0);
      auto a_at = [&](int64_t k) { return static_cast<double>(ta ? a[k * M + m] : a[m * K + k]); };
      if (tb) {  // B's rows are along k: one dot product per element
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += a_at(k) * bm[n * K + k];
          acc[n] = s;
        }
      } else {  // B's rows are along n: a row of sums, B read row by row
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t k = 0; k < K; ++k) {
          const double av = a_at(k);
          const float* brow = bm + k * N;
          for (int64_t n = 0; n < N; ++n) acc[n] += av * brow[n];
        }
      }
      for (int64_t n = 0; n < N; ++n) {
        const int64_t o = r * N + n;
        double y = alpha * acc[n];
        if (!cidx.empty()) y += beta * in[2][cidx[o]];
        out[o] = static_cast<float>(y);
      }
    }
  };
  // On the runtime's thread pool, in as many chunks as the work pays for.
  struct Chunks {
    decltype(rows)* body;
    int64_t total, n;
  } chunks{&rows, batch * M, 0};
  if (chunks.total == 0) return;
  chunks.n = std::clamp<int64_t>(chunks.total * N * K / (int64_t{1} << 24), 1,
                                 std::min<int64_t>(kiln_num_threads(), chunks.total));
  kiln_parallel_for(
      chunks.n,
      [](int64_t i, void* ctx) {
        auto* c = static_cast<Chunks*>(ctx);
        (*c->body)(c->total * i / c->n, c->total * (i + 1) / c->n);
      },
      &chunks);
}

// ONNX 2-D and 3-D pooling (pool2d runs as pool3d with a depth of 1: kernel,
// stride and dilation 1, no depth padding). Max and exclusive average see
// only the elements inside the input; an inclusive average (count_include_pad)
// divides by the window's taps inside the padded input: the whole window,
// except for ceil-mode windows that run past the end padding (ONNX's
// reference, onnxruntime and PyTorch; ONNX 1.17's test data for
// averagepool_3d_*_ceil_mode_is_True still divides by the whole window).
void Pool(const Workload& w, std::span<const float* const> in, float* out) {
  const bool is3d = w.op == Op::kPool3d;
  const size_t rank = is3d ? 3 : 2;
  const size_t skip = 3 - rank;  // leading unit dimensions
  // Spatial attributes as depth, height, width.
  std::array<int64_t, 3> ext = {1, w.Int("H"), w.Int("W")}, oext = {1, w.Int("OH"), w.Int("OW")};
  if (is3d) {
    ext[0] = w.Int("D");
    oext[0] = w.Int("OD");
  }
  std::array<int64_t, 3> kr = {1, 1, 1}, st = {1, 1, 1}, dil = {1, 1, 1}, pad = {0, 0, 0},
                         pad_end = {0, 0, 0};
  const auto& wk = w.Ints("kernel");
  const auto& ws = w.Ints("stride");
  const auto& wd = w.Ints("dilation");
  const auto& wp = w.Ints("pad");
  for (size_t i = 0; i < rank; ++i) {
    kr[skip + i] = wk[i];
    st[skip + i] = ws[i];
    dil[skip + i] = wd[i];
    pad[skip + i] = wp[i];
    pad_end[skip + i] = wp[rank + i];
  }
  // Taps of the window starting at o in a padded extent of `padded`.
  auto taps = [](int64_t o, int64_t st, int64_t k, int64_t dil, int64_t padded) {
    int64_t n = 0;
    for (int64_t r = 0; r < k; ++r) n += o * st + r * dil < padded;
    return n;
  };
  const int64_t N = w.Int("N"), C = w.Int("C"), D = ext[0], H = ext[1], W = ext[2], OD = oext[0],
                OH = oext[1], OW = oext[2];
  const bool is_max = w.Int("kind") == 0;
  const bool include_pad = w.IntOr("count_include_pad", 0) != 0;
  const float* x = in[0];
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t od = 0; od < OD; ++od) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t count = 0;
          for (int64_t a = 0; a < kr[0]; ++a) {
            int64_t id = od * st[0] - pad[0] + a * dil[0];
            if (id < 0 || id >= D) continue;
            for (int64_t b = 0; b < kr[1]; ++b) {
              int64_t ih = oh * st[1] - pad[1] + b * dil[1];
              if (ih < 0 || ih >= H) continue;
              for (int64_t c = 0; c < kr[2]; ++c) {
                int64_t iw = ow * st[2] - pad[2] + c * dil[2];
                if (iw < 0 || iw >= W) continue;
                float v = x[((nc * D + id) * H + ih) * W + iw];
                acc = is_max ? std::max<double>(acc, v) : acc + v;
                ++count;
              }
            }
          }
          if (include_pad) {
            count = taps(od, st[0], kr[0], dil[0], D + pad[0] + pad_end[0]) *
                    taps(oh, st[1], kr[1], dil[1], H + pad[1] + pad_end[1]) *
                    taps(ow, st[2], kr[2], dil[2], W + pad[2] + pad_end[2]);
          }
          float y;
          if (is_max) {
            y = static_cast<float>(acc);
          } else {
            y = count ? static_cast<float>(acc / static_cast<double>(count)) : 0.0f;
          }
          out[((nc * OD + od) * OH + oh) * OW + ow] = y;
        }
      }
    }
  }
}

// w's epilogue interpreted as an eltwise workload over its anchor's output
// (`anchor` of `anchor_dtype`, the op's first `n_op` inputs consumed), the
// epilogue's operands the op's inputs after them.
absl::Status InterpretWorkload(const Workload& w, std::span<const void* const> inputs,
                               void* output);

absl::Status InterpretEpilogue(const Workload& w, const KernelSignature& sig, DType anchor_dtype,
                               const void* anchor, size_t n_op, std::span<const void* const> inputs,
                               void* output) {
  Workload e;
  e.op = Op::kEltwise;
  e.ints["shape"] = sig.output.shape;
  e.ints["in_shape"] = sig.output.shape;
  e.epilogue = w.epilogue;
  std::vector<DType> dtypes = {anchor_dtype};
  for (size_t i = n_op; i < sig.inputs.size(); ++i) dtypes.push_back(sig.inputs[i].dtype);
  dtypes.push_back(sig.output.dtype);
  e.SetDtypes(dtypes);
  std::vector<const void*> ins = {anchor};
  ins.insert(ins.end(), inputs.begin() + static_cast<ptrdiff_t>(n_op), inputs.end());
  return InterpretWorkload(e, ins, output);
}

// Element i of an 8-bit buffer as an integer: int8 signed, uint8 not.
int32_t ByteAt(const void* p, DType t, int64_t i) {
  const auto* b = static_cast<const uint8_t*>(p);
  return t == DType::kInt8 ? static_cast<int8_t>(b[i]) : static_cast<int32_t>(b[i]);
}

absl::Status InterpretWorkload(const Workload& w, std::span<const void* const> inputs,
                               void* output) {
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  if (w.op == Op::kConv2d || w.op == Op::kDense || w.op == Op::kPool2d || w.op == Op::kPool3d) {
    // The float32 anchor by the loops below, then its epilogue interpreted as
    // an eltwise workload over the anchor's output.
    Workload anchor = w;
    anchor.epilogue.clear();
    anchor.ints.erase("dtypes");
    auto asig = anchor.Signature();
    if (!asig.ok()) return asig.status();
    const size_t n_op = asig->inputs.size();
    std::vector<float> tmp(static_cast<size_t>(asig->output.NumElements()));
    if (auto s = RunReference(anchor, inputs.subspan(0, n_op), tmp.data()); !s.ok()) return s;
    return InterpretEpilogue(w, *sig, DType::kFloat32, tmp.data(), n_op, inputs, output);
  }
  // The int8 convolutions (ops::Int8Conv, Int8DepthwiseConv): their integer
  // sums by the loops below (the generic compute interpreted took 38 s for
  // ResNet-50's 7x7 stem, and an agent checks every candidate against it),
  // then the epilogue interpreted over them, as conv2d's.
  if (ops::Int8Conv(w) || ops::Int8DepthwiseConv(w)) {
    const ops::GenericConvDims d = ops::GenericConvDimsOf(w);
    const int64_t group = w.IntOr("group", 1), Cg = d.C / group, Kg = d.K / group;
    const int64_t ib = w.IntOr("in_block", 0), ob = w.IntOr("out_block", 0);
    auto byte = [&](size_t input, int64_t i) {
      return ByteAt(inputs[input], sig->inputs[input].dtype, i);
    };
    const int32_t xz = byte(2, 0);
    std::vector<int32_t> acc(static_cast<size_t>(sig->output.NumElements()));
    for (int64_t n = 0; n < d.N; ++n) {
      for (int64_t k = 0; k < d.K; ++k) {
        const int64_t g = k / Kg;
        for (int64_t oh = 0; oh < d.OH; ++oh) {
          for (int64_t ow = 0; ow < d.OW; ++ow) {
            int32_t sum = 0;
            for (int64_t cg = 0; cg < Cg; ++cg) {
              const int64_t c = g * Cg + cg;
              for (int64_t r = 0; r < d.R; ++r) {
                const int64_t ih = oh * d.sh - d.ph + r;
                if (ih < 0 || ih >= d.H) continue;
                for (int64_t q = 0; q < d.S; ++q) {
                  const int64_t iw = ow * d.sw - d.pw + q;
                  if (iw < 0 || iw >= d.W) continue;
                  const int64_t xi =
                      ib > 0 ? (((n * (d.C / ib) + c / ib) * d.H + ih) * d.W + iw) * ib + c % ib
                             : ((n * d.C + c) * d.H + ih) * d.W + iw;
                  sum += (byte(0, xi) - xz) * byte(1, ((k * Cg + cg) * d.R + r) * d.S + q);
                }
              }
            }
            const int64_t oi =
                ob > 0 ? (((n * (d.K / ob) + k / ob) * d.OH + oh) * d.OW + ow) * ob + k % ob
                       : ((n * d.K + k) * d.OH + oh) * d.OW + ow;
            acc[static_cast<size_t>(oi)] = sum;
          }
        }
      }
    }
    return InterpretEpilogue(w, *sig, DType::kInt32, acc.data(), 3, inputs, output);
  }
  // The int8 matmul (ops::Int8MatMul: A [1.., M, K] of bytes less its zero
  // point, B [1.., K, N] int8) the same way: the generic compute
  // interpreted took about 30 s for a BERT-base 128 x 768 x 3072 product,
  // checked once per candidate, so that an agent's batch of 8 outlived its
  // lease and was requeued again and again.
  if (ops::Int8MatMul(w)) {
    const auto& a = sig->inputs[0].shape;
    const int64_t M = a[a.size() - 2], K = a.back(), N = sig->inputs[1].shape.back();
    const auto* B = static_cast<const int8_t*>(inputs[1]);
    const DType a_type = sig->inputs[0].dtype;
    const int32_t az = ByteAt(inputs[2], sig->inputs[2].dtype, 0);
    std::vector<int32_t> acc(static_cast<size_t>(M * N), 0);
    for (int64_t m = 0; m < M; ++m) {
      int32_t* row = acc.data() + m * N;
      for (int64_t k = 0; k < K; ++k) {
        const int32_t x = ByteAt(inputs[0], a_type, m * K + k) - az;
        if (x == 0) continue;
        const int8_t* b = B + k * N;
        for (int64_t n = 0; n < N; ++n) row[n] += x * b[n];
      }
    }
    return InterpretEpilogue(w, *sig, DType::kInt32, acc.data(), 3, inputs, output);
  }
  // The op's computes, interpreted: its definition. A generic op's by the
  // generic template whatever template schedules it (the int8 matmul's and
  // conv's own pack bytes and multiply them in groups of four).
  if (ops::IsGeneric(w.op)) {
    const ops::OpTemplate* generic = ops::GenericTemplate();
    auto built = generic->build(w, Target::Host(), generic->default_config(w, Target::Host()));
    if (!built.ok()) return built.status();
    return ops::Interpret(built->args, inputs, output);
  }
  auto cfg = DefaultConfig(w, Target::Host());
  if (!cfg.ok()) return cfg.status();
  auto built = ops::BuildTemplate(w, Target::Host(), *cfg);
  if (!built.ok()) return built.status();
  return ops::Interpret(built->args, inputs, output);
}

}  // namespace

absl::Status RunReference(const Workload& workload, std::span<const void* const> raw_inputs,
                          void* raw_output) {
  auto sig = workload.Signature();
  if (!sig.ok()) return sig.status();
  if (raw_inputs.size() != sig->inputs.size()) {
    return absl::InvalidArgumentError(StrCat("RunReference: ", workload.op, " takes ",
                                             sig->inputs.size(), " inputs, got ",
                                             raw_inputs.size()));
  }
  // The hand-written loops below cover the float32 anchors with their classic
  // epilogues; everything else is the template's compute, interpreted.
  bool classic = workload.op == Op::kConv2d || workload.op == Op::kDense ||
                 workload.op == Op::kPool2d || workload.op == Op::kPool3d;
  for (const EpilogueOp& e : workload.epilogue) {
    classic = classic && !e.IsTap() &&
              (e.kind == EpilogueKind::kRelu || e.kind == EpilogueKind::kAdd ||
               e.kind == EpilogueKind::kMul);
  }
  classic = classic && !workload.ints.count("dtypes");
  if (!classic) return InterpretWorkload(workload, raw_inputs, raw_output);
  std::vector<const float*> in_ptrs;
  for (const void* p : raw_inputs) in_ptrs.push_back(static_cast<const float*>(p));
  std::span<const float* const> inputs(in_ptrs);
  float* output = static_cast<float*>(raw_output);
  size_t op_inputs = sig->inputs.size();
  for (const EpilogueOp& e : workload.epilogue) {
    if (e.kind != EpilogueKind::kRelu) --op_inputs;
  }
  const int64_t n = sig->output.NumElements();
  // bfloat16 products: the loops below on A and B (data and weight) rounded.
  std::vector<std::vector<float>> rounded;
  if (workload.IntOr("bf16", 0) != 0) {
    for (size_t k = 0; k < 2; ++k) {
      const int64_t count = sig->inputs[k].NumElements();
      rounded.emplace_back(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) rounded[k][i] = RoundToBf16(inputs[k][i]);
      in_ptrs[k] = rounded[k].data();  // `inputs` views in_ptrs
    }
  }
  if (workload.op == Op::kConv2d) {
    WithBlocks(workload, inputs, output, "K",
               [&](std::span<const float* const> in, float* out) { Conv2d(workload, in, out); });
  } else if (workload.op == Op::kDense) {
    Dense(workload, *sig, inputs, output);
  } else if (workload.op == Op::kPool2d) {
    WithBlocks(workload, inputs, output, "C",
               [&](std::span<const float* const> in, float* out) { Pool(workload, in, out); });
  } else if (workload.op == Op::kPool3d) {
    Pool(workload, inputs, output);
  } else {
    return absl::InvalidArgumentError(StrCat("RunReference: unknown op '", workload.op, "'"));
  }
  size_t operand = op_inputs;
  for (const EpilogueOp& e : workload.epilogue) {
    if (e.kind == EpilogueKind::kRelu) {
      for (int64_t i = 0; i < n; ++i) output[i] = std::max(output[i], 0.0f);
      continue;
    }
    std::vector<int64_t> idx = BroadcastIndices(e.operand_shape, sig->output.shape);
    const float* v = inputs[operand++];
    if (e.kind == EpilogueKind::kAdd) {
      for (int64_t i = 0; i < n; ++i) output[i] += v[idx[i]];
    } else {
      for (int64_t i = 0; i < n; ++i) output[i] *= v[idx[i]];
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler

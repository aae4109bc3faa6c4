#pragma once
// What the graph tests share: deterministic data, and ONNX builders of a
// padded 3x3 Conv and of a QDQ Conv.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/memory_plan.h"
#include "compiler/graph/passes.h"
#include "compiler/model.h"
#include "deploy/runtime.h"
#include "tests/compiler/graph_eval.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {

inline std::vector<float> Ramp(int n, float scale, float offset) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) + offset;
  return v;
}

inline void AddConv(testing::OnnxBuilder& b, const std::string& in, const std::string& out,
                    const std::string& w) {
  auto* c = b.Node("Conv", {in, w, w + "_b"}, {out});
  testing::OnnxBuilder::Ints(c, "pads", {1, 1, 1, 1});
}

// x [1, 4, 6, 6] quantized and dequantized (xd), then a QDQ Conv of it by
// int8 weights [K, 4, 3, 3] with per-channel scales `ws` (c, float).
inline void AddQdqConv(testing::OnnxBuilder& b, const std::vector<float>& ws, int64_t mult) {
  const auto K = static_cast<int64_t>(ws.size());
  b.Input("x", {1, 4, 6, 6});
  b.Init("sx", {}, {0.05f});
  b.InitInts("zx", {}, onnx::TensorProto::UINT8, {128});
  std::vector<int32_t> w(static_cast<size_t>(K) * 4 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int32_t>((i * mult) % 255) - 127;
  b.InitInts("w", {K, 4, 3, 3}, onnx::TensorProto::INT8, w);
  b.Init("ws", {K}, ws);
  b.InitInts("wz", {K}, onnx::TensorProto::INT8, std::vector<int32_t>(w.size() / 36, 0));
  b.Init("wd_b", {K}, Ramp(static_cast<int>(K), 0.9f, 0.1f));
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"q"});
  b.Node("DequantizeLinear", {"q", "sx", "zx"}, {"xd"});
  testing::OnnxBuilder::Int(b.Node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}), "axis", 0);
  AddConv(b, "xd", "c", "wd");
}

// The first output of `fused` on `x` is that of `unfused` within one output
// step (`step`) everywhere, and off by it on at most `most` elements.
inline void ExpectWithinOneStep(const Graph& unfused, const Graph& fused,
                                const std::vector<float>& x, float step, int most) {
  auto want = testing::EvaluateGraph(unfused, {x}).at(unfused.outputs[0]);
  auto have = testing::EvaluateGraph(fused, {x}).at(fused.outputs[0]);
  ASSERT_EQ(want.size(), have.size());
  int steps = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(want[i], have[i], step * 1.001f) << i;
    steps += std::fabs(want[i] - have[i]) > 1e-6 ? 1 : 0;
  }
  EXPECT_LE(steps, most);
}

}  // namespace kiln::compiler

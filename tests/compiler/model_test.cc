#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/graph/graph.h"
#include "compiler/model.h"
#include "tests/compiler/graph_eval.h"

namespace kiln::compiler {
namespace {

const std::string kSmallCnn = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";

std::vector<float> SmallCnnInput() {
  std::vector<float> x(3 * 32 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.01f);
  return x;
}

// onnxruntime 1.31's output for SmallCnnInput() (see models/README.md).
const float kOrtLogits[10] = {4.428879f,  1.966671f,  2.773747f, 3.308437f,  -4.055731f,
                              -0.023411f, 0.887098f,  1.553743f, -0.773245f, 1.392855f};

TEST(Model, SmallCnnTasks) {
  auto m = Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->source_sha256(), "bb3ef0f1ad5e79d8170c678ab285525cddaa00f3f07ec70dfa8011e931bc3188");
  const auto& tasks = m->Tasks();
  ASSERT_EQ(tasks.size(), 6u);
  std::vector<std::string> ops;
  for (const Task& t : tasks) ops.push_back(t.workload.op);
  EXPECT_THAT(ops, ::testing::ElementsAre("conv2d", "pool2d", "conv2d", "pool2d", "conv2d", "dense"));
  EXPECT_EQ(tasks[0].workload.Canonical(),
            "conv2d(C=3;H=32;K=16;N=1;OH=32;OW=32;R=3;S=3;W=32;bias=1;dilation=1,1;groups=1;"
            "pad=1,1,1,1;stride=1,1)|relu");
  EXPECT_EQ(tasks[4].workload.Canonical(),
            "conv2d(C=32;H=8;K=32;N=1;OH=8;OW=8;R=3;S=3;W=8;bias=1;dilation=1,1;groups=1;"
            "pad=1,1,1,1;stride=1,1)|add:1,32,8,8|relu");
  EXPECT_EQ(tasks[5].workload.Canonical(),
            "dense(K=2048;M=1;N=10;batch=1;batch_a=0;batch_b=0;bias=1;bias_shape=1,10;transA=0;"
            "transB=1)");
  for (const Task& t : tasks) EXPECT_EQ(t.occurrences, 1);
}

TEST(Model, SmallCnnMatchesOnnxRuntimeWithReferenceKernels) {
  auto m = Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  auto vals = testing::EvaluateGraph(g, {SmallCnnInput()});
  ASSERT_FALSE(vals.empty());
  const auto& y = vals.at(g.outputs[0]);
  ASSERT_EQ(y.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(y[i], kOrtLogits[i], 1e-4) << i;
}

TEST(Model, MissingFileIsNotFound) {
  auto m = Model::FromOnnxFile("/nonexistent/model.onnx");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::compiler

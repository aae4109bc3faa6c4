// Local buffers above kMaxStackScratchBytes come from the runtime's
// per-thread workspace, never the stack; smaller ones stay allocas.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "compiler/codegen/jit.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/target.h"
#include "deploy/parallel.h"

namespace kiln::compiler {
namespace {
using namespace kiln::ir;  // NOLINT

// Out[i][j] = 2 * In[i][j] + i through a scratch row of `cols` floats,
// allocated inside a (parallel or serial) loop over rows.
PrimFunc ScratchRows(int64_t rows, int64_t cols, ForKind kind) {
  Buffer in("In", DataType::Float32(), {IntImm(rows * cols)});
  Buffer out("Out", DataType::Float32(), {IntImm(rows * cols)});
  Buffer tmp("row", DataType::Float32(), {IntImm(cols)});
  Var i("i"), j("j"), j2("j2");
  Stmt body =
      Allocate(tmp, Seq({For(j, 0, cols, ForKind::kSerial,
                             Store(tmp, Load(in, {i * IntImm(cols) + j}) * FloatImm(2.0), {j})),
                         For(j2, 0, cols, ForKind::kSerial,
                             Store(out, Load(tmp, {j2}) + Cast(DataType::Float32(), i),
                                   {i * IntImm(cols) + j2}))}));
  return PrimFunc{"scratch_rows", {in, out}, For(i, 0, rows, kind, body)};
}

void RunAndCheck(const PrimFunc& f, int64_t rows, int64_t cols) {
  auto m = codegen::JitCompile({f}, Target::Host());
  ASSERT_TRUE(m.ok()) << m.status();
  auto fn = (*m)->Lookup(f.name);
  ASSERT_TRUE(fn.ok()) << fn.status();
  std::vector<float> iv(rows * cols), ov(rows * cols, -1.0f);
  for (int64_t k = 0; k < rows * cols; ++k) iv[k] = static_cast<float>(k % 17);
  void* args[] = {iv.data(), ov.data()};
  ASSERT_EQ((*fn)(args), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_FLOAT_EQ(ov[r * cols + c], 2.0f * iv[r * cols + c] + static_cast<float>(r));
    }
  }
}

TEST(CodegenWorkspace, LargeScratchComesFromTheRuntimeWorkspace) {
  ASSERT_GE(kiln_num_threads(), 1);  // keeps libkiln_runtime.so loaded for the JIT
  const int64_t cols = 3 * codegen::kMaxStackScratchBytes / 4;  // 3x the stack limit in floats
  for (ForKind kind : {ForKind::kSerial, ForKind::kParallel}) {
    PrimFunc f = ScratchRows(9, cols, kind);
    auto text = codegen::EmitLlvmIrText({f}, Target::Host(), false);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_NE(text->find("@kiln_workspace_alloc(i64 " + std::to_string(4 * cols) + ")"),
              std::string::npos)
        << *text;
    EXPECT_NE(text->find("call void @kiln_workspace_free"), std::string::npos);
    EXPECT_EQ(text->find("alloca [" + std::to_string(cols) + " x float]"), std::string::npos);
    RunAndCheck(f, 9, cols);
  }
}

TEST(CodegenWorkspace, SmallScratchStaysOnTheStack) {
  PrimFunc f = ScratchRows(5, 64, ForKind::kSerial);
  auto text = codegen::EmitLlvmIrText({f}, Target::Host(), false);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("alloca [64 x float]"), std::string::npos) << *text;
  EXPECT_EQ(text->find("kiln_workspace_alloc"), std::string::npos);
  RunAndCheck(f, 5, 64);
}

}  // namespace
}  // namespace kiln::compiler

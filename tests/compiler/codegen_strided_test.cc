// Code generation of strided vector loads: Out[ramp(i*L, 1, L)] =
// In[ramp(off + i*L*s, s, L)] for strides 2..4 becomes a masked wide load and
// a shuffle, never a gather, and never reads past the last lane it needs.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/jit.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"

namespace kiln::compiler {
namespace {

using namespace kiln::ir;  // NOLINT

// `tiles` vectors of `lanes` lanes of stride `stride`, the first at `off`.
PrimFunc StridedCopy(int64_t stride, int lanes, int64_t tiles, int64_t off, int64_t in_size) {
  Buffer in("In", DataType::Float32(), {IntImm(in_size)});
  Buffer out("Out", DataType::Float32(), {IntImm(tiles * lanes)});
  Var i("i");
  Expr src = Ramp(IntImm(off) + i * IntImm(lanes * stride), IntImm(stride), lanes);
  Stmt body = For(i, 0, tiles, ForKind::kSerial,
                  Store(out, Load(in, {src}), {Ramp(i * IntImm(lanes), IntImm(1), lanes)}));
  return PrimFunc{"strided", {in, out}, body};
}

// A float array whose last element is the last word of a page followed by an
// inaccessible page: a load of one element more faults.
class GuardedFloats {
 public:
  explicit GuardedFloats(int64_t n) : page_(sysconf(_SC_PAGESIZE)) {
    bytes_ = ((n * 4 + page_ - 1) / page_ + 1) * page_;
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(static_cast<char*>(base_) + bytes_ - page_, page_, PROT_NONE), 0);
    data_ = reinterpret_cast<float*>(static_cast<char*>(base_) + bytes_ - page_ - n * 4);
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  float* data() { return data_; }

 private:
  int64_t page_, bytes_;
  void* base_;
  float* data_;
};

TEST(CodegenStrided, LoadsEveryStrideThElementUpToTheBufferEnd) {
  for (int64_t stride : {2, 3, 4}) {
    for (int lanes : {4, 8, 16}) {
      SCOPED_TRACE("stride " + std::to_string(stride) + " lanes " + std::to_string(lanes));
      const int64_t tiles = 3, off = 1;
      // The last lane read is the buffer's last element.
      const int64_t n = off + (tiles - 1) * lanes * stride + (lanes - 1) * stride + 1;
      PrimFunc f = StridedCopy(stride, lanes, tiles, off, n);
      auto text = codegen::EmitLlvmIrText({f}, Target::Host(), /*optimize=*/false);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(text->find("masked.gather"), std::string::npos) << *text;
      EXPECT_NE(text->find("masked.load"), std::string::npos) << *text;

      auto m = codegen::JitCompile({f}, Target::Host());
      ASSERT_TRUE(m.ok()) << m.status();
      auto fn = (*m)->Lookup("strided");
      ASSERT_TRUE(fn.ok()) << fn.status();
      GuardedFloats in(n);
      for (int64_t k = 0; k < n; ++k) in.data()[k] = static_cast<float>(k) * 0.5f - 3.0f;
      std::vector<float> out(tiles * lanes, -1.0f);
      void* args[] = {in.data(), out.data()};
      ASSERT_EQ((*fn)(args), 0);
      for (int64_t k = 0; k < tiles * lanes; ++k) {
        EXPECT_EQ(out[k], in.data()[off + k * stride]) << k;
      }
    }
  }
}

// A stride the wide load does not cover (here 5) stays a gather.
TEST(CodegenStrided, LargerStridesStayGathers) {
  auto text = codegen::EmitLlvmIrText({StridedCopy(5, 8, 1, 0, 40)}, Target::Host(), false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("masked.gather"), std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler

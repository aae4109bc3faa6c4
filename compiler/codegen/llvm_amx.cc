#include "compiler/codegen/llvm_amx.h"

#include <algorithm>
#include <functional>

#include "base/str.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"

namespace kiln::compiler::codegen {

namespace {

constexpr int kTileRows = 16;
constexpr int kTileBytes = 64;  // bytes per tile row
constexpr int kMaxTiles = 6;    // accumulators; with one A and as many B tiles

// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), once per module.
void RequestTileData(llvm::IRBuilderBase& b, llvm::Module* m) {
  llvm::LLVMContext& ctx = m->getContext();
  llvm::GlobalVariable* ready = m->getGlobalVariable("kiln.amx_ready", /*AllowInternal=*/true);
  if (ready == nullptr) {
    ready = new llvm::GlobalVariable(*m, b.getInt8Ty(), false, llvm::GlobalValue::InternalLinkage,
                                     b.getInt8(0), "kiln.amx_ready");
  }
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  auto* ask = llvm::BasicBlock::Create(ctx, "amx.ask", fn);
  auto* go = llvm::BasicBlock::Create(ctx, "amx.go", fn);
  llvm::LoadInst* flag = b.CreateLoad(b.getInt8Ty(), ready);
  flag->setAtomic(llvm::AtomicOrdering::Monotonic);
  flag->setAlignment(llvm::Align(1));
  b.CreateCondBr(b.CreateICmpEQ(flag, b.getInt8(0)), ask, go);
  b.SetInsertPoint(ask);
  llvm::Type* i64 = b.getInt64Ty();
  auto* ty = llvm::FunctionType::get(i64, {i64, i64, i64}, false);
  auto* syscall = llvm::InlineAsm::get(
      ty, "syscall", "={ax},{ax},{di},{si},~{rcx},~{r11},~{memory},~{dirflag},~{fpsr},~{flags}",
      /*hasSideEffects=*/true);
  constexpr int64_t kArchPrctl = 158, kReqXcompPerm = 0x1023, kXtileData = 18;
  b.CreateCall(syscall,
               {b.getInt64(kArchPrctl), b.getInt64(kReqXcompPerm), b.getInt64(kXtileData)});
  llvm::StoreInst* set = b.CreateStore(b.getInt8(1), ready);
  set->setAtomic(llvm::AtomicOrdering::Monotonic);
  set->setAlignment(llvm::Align(1));
  b.CreateBr(go);
  b.SetInsertPoint(go);
}

}  // namespace

bool IsAmxIntrinsic(ir::Intrinsic f) {
  return f == ir::Intrinsic::kAmxDpbusd || f == ir::Intrinsic::kAmxDpbf16ps;
}

absl::Status EmitAmxTiles(llvm::IRBuilderBase& b, llvm::Module* m, ir::Intrinsic f,
                          const std::vector<llvm::Value*>& args) {
  if (!IsAmxIntrinsic(f) || (args.size() != 10 && args.size() != 13)) {
    return absl::InvalidArgumentError(
        StrCat(f,
               " takes 10 arguments (C, ldc, A, lda, B, ldb, b_step, rows, n_tiles, "
               "k_steps) or 13 (and tap_row_bytes, taps_per_row, steps_per_tap), got ",
               args.size()));
  }
  auto* nt_c = llvm::dyn_cast<llvm::ConstantInt>(args[8]);
  auto* ks_c = llvm::dyn_cast<llvm::ConstantInt>(args[9]);
  if (nt_c == nullptr || ks_c == nullptr || nt_c->getSExtValue() < 1 ||
      nt_c->getSExtValue() > kMaxTiles || ks_c->getSExtValue() < 1) {
    return absl::InvalidArgumentError(
        StrCat(f, ": n_tiles (1..", kMaxTiles, ") and k_steps (>= 1) must be constants"));
  }
  for (int i : {0, 2, 4}) {
    if (!args[i]->getType()->isPointerTy()) {
      return absl::InvalidArgumentError(StrCat(f, ": argument ", i, " is not an address"));
    }
  }
  const int nt = static_cast<int>(nt_c->getSExtValue());
  const int64_t ks = ks_c->getSExtValue();
  // In place: the taps' constants, and whole row tiles.
  const bool in_place = args.size() == 13;
  int64_t tap_row = 0, taps_per_row = 1, steps_per_tap = ks;
  if (in_place) {
    int64_t* fields[] = {&tap_row, &taps_per_row, &steps_per_tap};
    for (int i = 0; i < 3; ++i) {
      auto* v = llvm::dyn_cast<llvm::ConstantInt>(args[10 + i]);
      if (v == nullptr || v->getSExtValue() < (i == 0 ? 0 : 1)) {
        return absl::InvalidArgumentError(
            StrCat(f, ": tap_row_bytes, taps_per_row and steps_per_tap must be constants"));
      }
      *fields[i] = v->getSExtValue();
    }
    auto* rows_c = llvm::dyn_cast<llvm::ConstantInt>(args[7]);
    if (rows_c == nullptr || rows_c->getSExtValue() % kTileRows != 0) {
      return absl::InvalidArgumentError(
          StrCat(f, ": in place, rows must be a constant multiple of ", kTileRows));
    }
  }
  llvm::LLVMContext& ctx = m->getContext();
  llvm::Type* i8 = b.getInt8Ty();
  llvm::Type* i64 = b.getInt64Ty();
  auto wide = [&](llvm::Value* v) { return b.CreateSExtOrTrunc(v, i64); };
  llvm::Value *c = args[0], *ldc = wide(args[1]), *a = args[2], *lda = wide(args[3]);
  llvm::Value *bp = args[4], *ldb = wide(args[5]), *bstep = wide(args[6]), *rows = wide(args[7]);

  RequestTileData(b, m);
  // Where step `su` starts in A's rows: 64 su, or in place its tap's shift
  // and its part of the pixel.
  auto a_offset = [&](llvm::Value* su) -> llvm::Value* {
    if (!in_place) return b.CreateMul(su, b.getInt64(kTileBytes));
    llvm::Value* tap = b.CreateUDiv(su, b.getInt64(steps_per_tap));
    llvm::Value* part = b.CreateURem(su, b.getInt64(steps_per_tap));
    llvm::Value* r = b.CreateUDiv(tap, b.getInt64(taps_per_row));
    llvm::Value* col = b.CreateURem(tap, b.getInt64(taps_per_row));
    return b.CreateAdd(b.CreateAdd(b.CreateMul(r, b.getInt64(tap_row)), b.CreateMul(col, lda)),
                       b.CreateMul(part, b.getInt64(kTileBytes)));
  };
  // One tile row: 16 rows of A from a_row (lda apart) times every B tile,
  // summed over k into C's 16 rows at c_row. Every tile shape is a constant
  // (16 rows of 64 bytes): LLVM's tile configuration cannot follow a shape
  // computed after an earlier tile instruction of the function.
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::Value* rows16 = b.getInt16(kTileRows);
  llvm::Value* cols = b.getInt16(kTileBytes);
  const llvm::Intrinsic::ID dp = f == ir::Intrinsic::kAmxDpbusd
                                     ? llvm::Intrinsic::x86_tdpbusd_internal
                                     : llvm::Intrinsic::x86_tdpbf16ps_internal;
  // One block: row groups g < a_rows.size() of 16 rows (A's from a_rows[g],
  // a_ld apart) times B's tiles j0 .. j0 + jn - 1, summed over k into C's
  // rows at c_rows[g]. Live tiles: the accumulators, one A tile a group and
  // one B tile, so groups * jn + groups + 1 <= 8; each B tile loaded serves
  // every group (2 groups x 2 tiles: 4 loads for 4 products, where one group
  // takes 3 for 2).
  auto block = [&](const std::vector<llvm::Value*>& a_rows, llvm::Value* a_ld,
                   const std::vector<llvm::Value*>& c_rows, int j0, int jn) {
    const int groups = static_cast<int>(a_rows.size());
    // AMX tile registers are not renamed: a load into a tile waits for the
    // products still reading it. Where tiles are to spare, two k steps a
    // turn, all their loads first into distinct tiles, so that one step's
    // loads run under the other's products (an odd first step alone).
    const int unroll = groups * jn + 2 * (groups + jn) <= 8 && ks >= 2 ? 2 : 1;
    // `n` k steps from step `s` added to `acc`: the new accumulators.
    auto steps = [&](std::vector<llvm::Value*> acc, llvm::Value* s, int n) {
      std::vector<std::vector<llvm::Value*>> ta(n), tb(n);
      for (int u = 0; u < n; ++u) {
        llvm::Value* su = b.CreateAdd(s, b.getInt64(u));
        llvm::Value* a_col = a_offset(su);
        for (int g = 0; g < groups; ++g) {
          ta[u].push_back(
              b.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                {rows16, cols, b.CreateGEP(i8, a_rows[g], a_col), a_ld}));
        }
        llvm::Value* b_at = b.CreateGEP(i8, bp, b.CreateMul(su, bstep));
        for (int j = 0; j < jn; ++j) {
          tb[u].push_back(b.CreateIntrinsic(
              llvm::Intrinsic::x86_tileloadd64_internal, {},
              {rows16, cols, b.CreateGEP(i8, b_at, b.getInt64((j0 + j) * kTileBytes)), ldb}));
        }
      }
      for (int u = 0; u < n; ++u) {
        for (int j = 0; j < jn; ++j) {
          for (int g = 0; g < groups; ++g) {
            const int t = g * jn + j;
            acc[t] = b.CreateIntrinsic(dp, {}, {rows16, cols, cols, acc[t], ta[u][g], tb[u][j]});
          }
        }
      }
      return acc;
    };
    std::vector<llvm::Value*> first;
    for (int t = 0; t < groups * jn; ++t) {
      first.push_back(
          b.CreateIntrinsic(llvm::Intrinsic::x86_tilezero_internal, {}, {rows16, cols}));
    }
    const int64_t peeled = ks % unroll;
    if (peeled) first = steps(first, b.getInt64(0), 1);
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* kb = llvm::BasicBlock::Create(ctx, "amx.k", fn);
    auto* kend = llvm::BasicBlock::Create(ctx, "amx.k_end", fn);
    b.CreateBr(kb);
    b.SetInsertPoint(kb);
    llvm::PHINode* s = b.CreatePHI(i64, 2, "amx.s");
    s->addIncoming(b.getInt64(peeled), pre);
    std::vector<llvm::Value*> acc;
    for (int t = 0; t < groups * jn; ++t) {
      llvm::PHINode* phi = b.CreatePHI(first[t]->getType(), 2);
      phi->addIncoming(first[t], pre);
      acc.push_back(phi);
    }
    std::vector<llvm::Value*> next = steps(acc, s, unroll);
    for (int t = 0; t < groups * jn; ++t)
      llvm::cast<llvm::PHINode>(acc[t])->addIncoming(next[t], kb);
    llvm::Value* s1 = b.CreateAdd(s, b.getInt64(unroll));
    s->addIncoming(s1, kb);
    b.CreateCondBr(b.CreateICmpEQ(s1, b.getInt64(ks)), kend, kb);
    b.SetInsertPoint(kend);
    for (int g = 0; g < groups; ++g) {
      for (int j = 0; j < jn; ++j) {
        b.CreateIntrinsic(
            llvm::Intrinsic::x86_tilestored64_internal, {},
            {rows16, cols, b.CreateGEP(i8, c_rows[g], b.getInt64((j0 + j) * kTileBytes)), ldc,
             next[g * jn + j]});
      }
    }
  };
  // 16 rows from a_row times every B tile.
  auto tile_row = [&](llvm::Value* a_row, llvm::Value* a_ld, llvm::Value* c_row) {
    block({a_row}, a_ld, {c_row}, 0, nt);
  };
  // A counted loop i < n around body(i), at b's insertion point.
  auto counted = [&](llvm::Value* n, const char* label,
                     const std::function<void(llvm::Value*)>& body) {
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx, StrCat(label, ".body"), fn);
    auto* exit = llvm::BasicBlock::Create(ctx, StrCat(label, ".end"), fn);
    b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), head, exit);
    b.SetInsertPoint(head);
    llvm::PHINode* i = b.CreatePHI(i64, 2, label);
    i->addIncoming(b.getInt64(0), pre);
    body(i);
    llvm::Value* i1 = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(i1, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(i1, n), head, exit);
    b.SetInsertPoint(exit);
  };
  // Rows 32 at a time (two groups, B tiles two at a time), then 16, then
  // the tail.
  llvm::Value* pairs = b.CreateSDiv(rows, b.getInt64(2 * kTileRows));
  counted(pairs, "amx.pair", [&](llvm::Value* t) {
    std::vector<llvm::Value*> a_rows, c_rows;
    for (int g = 0; g < 2; ++g) {
      llvm::Value* r0 = b.CreateMul(b.CreateAdd(b.CreateMul(t, b.getInt64(2)), b.getInt64(g)),
                                    b.getInt64(kTileRows));
      a_rows.push_back(b.CreateGEP(i8, a, b.CreateMul(r0, lda)));
      c_rows.push_back(b.CreateGEP(i8, c, b.CreateMul(r0, ldc)));
    }
    for (int j0 = 0; j0 < nt; j0 += 2) block(a_rows, lda, c_rows, j0, std::min(2, nt - j0));
  });
  llvm::Value* full = b.CreateSDiv(rows, b.getInt64(kTileRows));
  llvm::Value* tail = b.CreateSRem(rows, b.getInt64(kTileRows));
  counted(b.CreateSub(full, b.CreateMul(pairs, b.getInt64(2))), "amx.row", [&](llvm::Value* t) {
    llvm::Value* r0 =
        b.CreateMul(b.CreateAdd(b.CreateMul(pairs, b.getInt64(2)), t), b.getInt64(kTileRows));
    tile_row(b.CreateGEP(i8, a, b.CreateMul(r0, lda)), lda,
             b.CreateGEP(i8, c, b.CreateMul(r0, ldc)));
  });
  if (in_place) return absl::OkStatus();  // rows: whole tiles
  // The last rows (fewer than 16): A's copied into 16 rows of scratch (the
  // rest never read back), C written as 16 rows (its buffer has room).
  auto* has_tail = llvm::BasicBlock::Create(ctx, "amx.tail", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "amx.done", fn);
  b.CreateCondBr(b.CreateICmpSGT(tail, b.getInt64(0)), has_tail, done);
  b.SetInsertPoint(has_tail);
  const int64_t row_bytes = ks * kTileBytes;
  llvm::Value* scratch;
  {
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::AllocaInst* alloca =
        entry.CreateAlloca(llvm::ArrayType::get(i8, kTileRows * row_bytes), nullptr, "amx.a_tail");
    alloca->setAlignment(llvm::Align(kTileBytes));
    scratch = alloca;
  }
  llvm::Value* r0 = b.CreateMul(full, b.getInt64(kTileRows));
  llvm::Value* a_tail = b.CreateGEP(i8, a, b.CreateMul(r0, lda));
  counted(tail, "amx.copy", [&](llvm::Value* i) {
    b.CreateMemCpy(b.CreateGEP(i8, scratch, b.CreateMul(i, b.getInt64(row_bytes))), llvm::Align(1),
                   b.CreateGEP(i8, a_tail, b.CreateMul(i, lda)), llvm::Align(1), row_bytes);
  });
  tile_row(scratch, b.getInt64(row_bytes), b.CreateGEP(i8, c, b.CreateMul(r0, ldc)));
  b.CreateBr(done);
  b.SetInsertPoint(done);
  return absl::OkStatus();
}

}  // namespace kiln::compiler::codegen

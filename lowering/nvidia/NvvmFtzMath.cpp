//===- NvvmFtzMath.cpp - approximate exp and log as one MUFU op each ------===//
//
// kda-nvvm-ftz-math (lowering/Passes.td): the approximate exponential and
// logarithm that 16-bit kernels ask for (math ops marked `afn` by
// useApproximateMath, lowered by convert-gpu-to-nvvm to libdevice's
// __nv_fast_expf and __nv_fast_logf) become the flush-to-zero forms of the
// hardware's ex2 and lg2: x * log2(e) then ex2.approx.ftz.f32, and
// lg2.approx.ftz.f32 then * ln(2).
//
// Why: libdevice's fast forms keep denormals (MLIR does not set
// libdevice's FTZ reflection), and on sm_80 / sm_90 ptxas wraps each
// ex2.approx.f32 in a range check and two rescaling multiplies (FSETP, FMUL,
// MUFU.EX2, FMUL: five instructions on the critical path where two do), and
// each lg2.approx.f32 likewise. The intra-chunk kernel takes tens of millions
// of them per call (its decays and gate activations; Nsight Compute,
// bench/RESULTS.md, nineteenth session).
//
// What it changes: an exponential below 2^-126 (exp(x) for x < -87.3) is 0
// instead of a denormal, and a denormal input to the logarithm reads as 0
// (log gives -inf). Both are within the `afn` contract the kernels already
// chose: their decays that small are products with nothing left to carry,
// and the logarithm's arguments are 1 + e^x (softplus) and norms. fp32
// kernels keep libdevice's accurate forms (they never reach this pass with
// fast forms to rewrite).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDANVVMFTZMATH
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {
struct NvvmFtzMathPass : kda::impl::KdaNvvmFtzMathBase<NvvmFtzMathPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<LLVM::CallOp> calls;
    getOperation().walk([&](LLVM::CallOp call) {
      std::optional<StringRef> callee = call.getCallee();
      if (callee &&
          (*callee == "__nv_fast_expf" || *callee == "__nv_fast_logf") &&
          call.getNumOperands() == 1 && call.getResult().getType().isF32())
        calls.push_back(call);
    });
    for (LLVM::CallOp call : calls) {
      OpBuilder b(call);
      Location loc = call.getLoc();
      Type f32 = b.getF32Type();
      auto constant = [&](double v) -> Value {
        return LLVM::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(v));
      };
      auto intrinsic = [&](StringRef name, Value x) -> Value {
        return LLVM::CallIntrinsicOp::create(b, loc, f32,
                                             b.getStringAttr(name),
                                             ValueRange{x})
            .getResult(0);
      };
      Value x = call.getOperand(0), r;
      if (*call.getCallee() == "__nv_fast_expf")
        r = intrinsic("llvm.nvvm.ex2.approx.ftz.f",
                      LLVM::FMulOp::create(b, loc, x, constant(M_LOG2E)));
      else
        r = LLVM::FMulOp::create(
            b, loc, intrinsic("llvm.nvvm.lg2.approx.ftz.f", x), constant(M_LN2));
      call.getResult().replaceAllUsesWith(r);
      call.erase();
    }
    // Their declarations, now called by nobody, go too (no libdevice fast
    // form is left to link).
    for (StringRef name : {"__nv_fast_expf", "__nv_fast_logf"})
      if (auto decl = SymbolTable::lookupNearestSymbolFrom<LLVM::LLVMFuncOp>(
              getOperation(), StringAttr::get(&getContext(), name));
          decl && decl.isExternal() &&
          SymbolTable::symbolKnownUseEmpty(decl, getOperation()))
        decl.erase();
  }
};
} // namespace

// RUN: kda-opt %s --pass-pipeline="builtin.module(gpu.module(kda-nvvm-ftz-math))" | FileCheck %s

// kda-nvvm-ftz-math on its own input (a kernel as convert-gpu-to-nvvm leaves
// it): libdevice's fast exponential and logarithm become the hardware's
// flush-to-zero ex2 and lg2 with the base change folded in; the accurate
// forms (fp32 kernels) and everything else stay; the fast forms'
// declarations, called by nobody now, go.
// CHECK-NOT: llvm.func @__nv_fast_expf
// CHECK-NOT: llvm.func @__nv_fast_logf
// CHECK: llvm.func @__nv_expf
// CHECK: llvm.func @__nv_fast_exp(
// CHECK-LABEL: llvm.func @k
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[LOG2E:.*]] = llvm.mlir.constant(1.44269502 : f32) : f32
// CHECK: %[[Y:.*]] = llvm.fmul %[[X]], %[[LOG2E]] : f32
// CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[Y]]) : (f32) -> f32
// CHECK: %[[L:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%[[X]]) : (f32) -> f32
// CHECK: %[[LN2:.*]] = llvm.mlir.constant(0.693147182 : f32) : f32
// CHECK: %[[LOG:.*]] = llvm.fmul %[[L]], %[[LN2]] : f32
// CHECK: %[[ACC:.*]] = llvm.call @__nv_expf(%[[X]]) : (f32) -> f32
// CHECK: %[[D:.*]] = llvm.call @__nv_fast_exp(%[[X]]) : (f32) -> f32
// CHECK-NOT: @__nv_fast_expf(
// CHECK-NOT: @__nv_fast_logf(
// CHECK: llvm.return
gpu.module @m {
  llvm.func @__nv_fast_expf(f32) -> f32
  llvm.func @__nv_fast_logf(f32) -> f32
  llvm.func @__nv_expf(f32) -> f32
  llvm.func @__nv_fast_exp(f32) -> f32
  llvm.func @k(%x: f32) -> f32 {
    %e = llvm.call @__nv_fast_expf(%x) : (f32) -> f32
    %l = llvm.call @__nv_fast_logf(%x) : (f32) -> f32
    %a = llvm.call @__nv_expf(%x) : (f32) -> f32
    %d = llvm.call @__nv_fast_exp(%x) : (f32) -> f32
    %s = llvm.fadd %e, %l : f32
    %t = llvm.fadd %s, %a : f32
    %u = llvm.fadd %t, %d : f32
    llvm.return %u : f32
  }
}

// RUN: kda-opt %S/Inputs/before-bind-destinations.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-bind-destinations))" | FileCheck %s
// RUN: kda-opt %S/Inputs/before-bind-destinations.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-bind-destinations))" | FileCheck %s --check-prefix=PERUSE

// kda-gpu-bind-destinations alone, on the IR it gets in the NVIDIA pipeline
// (Inputs/before-bind-destinations.mlir: test/gpu-codegen/Inputs/single_head.mlir
// on sm_80 after kda-gpu-split-schedule; `kda-opt ... --kda-lower-to-nvvm=
// "chip=sm_80 format=none" --mlir-print-ir-before=kda-gpu-bind-destinations
// --mlir-print-ir-module-scope --mlir-disable-threading`). Each kernel's
// grid wrote fresh tensors that the function returned; now it writes the
// function's result arguments (the destinations the caller passes), so that
// bufferization writes the caller's buffers in place. Functions without
// kda.abi (the schedule that calls the kernels) are left alone.

// CHECK-LABEL: func.func @f(
// CHECK: call @kda_gated_delta_kernel(
// CHECK-LABEL: func.func private @kda_gated_delta_kernel(
// CHECK: call @kda_gated_delta_kernel_intra(
// CHECK: call @kda_gated_delta_kernel_state(

// The intra-chunk kernel's five workspaces are arguments 3 to 7.
// CHECK-LABEL: func.func private @kda_gated_delta_kernel_intra(
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, %{{.*}}, 1) shared_outs(%{{.*}} = %arg3, %{{.*}} = %arg4, %{{.*}} = %arg5, %{{.*}} = %arg6, %{{.*}} = %arg7)
// The state kernel's output o is argument 8.
// CHECK-LABEL: func.func private @kda_gated_delta_kernel_state(
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 1, 4) shared_outs(%{{.*}} = %arg8)

// CSE had merged every empty tile of one shape into one value (one buffer
// live for the whole program, or a copy per writer): the intra-chunk kernel
// had one empty 16 x 16 tile, it has one per use.
// PERUSE-LABEL: func.func private @kda_gated_delta_kernel_intra(
// PERUSE-COUNT-7: tensor.empty() : tensor<16x16xf32>
// PERUSE-LABEL: func.func private @kda_gated_delta_kernel_state(

// RUN: kda-opt %S/Inputs/before-outline-elementwise.mlir --kda-gpu-outline-elementwise | FileCheck %s

// kda-gpu-outline-elementwise alone, on the IR it gets in the NVIDIA pipeline
// (Inputs/before-outline-elementwise.mlir: test/gpu-codegen/Inputs/hybrid.mlir
// after kda-outline-kernels; `kda-opt ... --kda-lower-to-nvvm="chip=sm_90a
// format=none" --mlir-print-ir-before=kda-gpu-outline-elementwise`). The
// gated hybrid's mix, a linalg.generic between two kernel calls, becomes a
// kernel of its own: a destination-style function (the caller's empty tensor
// is its last argument), its dimensions described in kda.abi (B, T: the
// op's dynamic sizes, named as the gated delta kernel whose result it walks
// names them), its body one program per leading (batch, token)
// index, so that every GPU launch is a grid of programs like the kda ops'.
// CHECK-LABEL: func.func @gated_hybrid
// CHECK: call @kda_gated_delta_kernel
// CHECK: call @kda_window_attention_kernel
// CHECK: %[[E:.*]] = tensor.empty
// CHECK-NOT: linalg.generic
// CHECK: %[[R:.*]] = call @kda_elementwise_kernel(%{{.*}}, %{{.*}}, %arg5, %[[E]])
// CHECK-NEXT: return %[[R]]
// CHECK: func.func private @kda_elementwise_kernel(%{{.*}}: tensor<?x?x4x64xbf16>, %{{.*}}: tensor<?x?x4x64xbf16>, %{{.*}}: tensor<?x?x4xbf16>, %[[OUT:.*]]: tensor<?x?x4x64xbf16>) -> tensor<?x?x4x64xbf16>
// CHECK-SAME: kda.abi = [{dims = ["B", "T", 4, 64], name = "in0"}, {dims = ["B", "T", 4, 64], name = "in1"}, {dims = ["B", "T", 4], name = "in2"}, {dims = ["B", "T", 4, 64], name = "out"}], kda.kernel
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (%{{.*}}, %{{.*}}) shared_outs(%{{.*}} = %[[OUT]])
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x1x4x64xbf16>, tensor<1x1x4x64xbf16>, tensor<1x1x4xbf16>)
// CHECK: math.exp
// CHECK: scf.forall.in_parallel

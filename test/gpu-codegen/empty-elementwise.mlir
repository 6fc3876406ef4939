// Elementwise work over an empty tensor (a static size of 0: a gate, a hybrid
// mix) writes no element: kda-gpu-outline-elementwise makes no kernel of it
// (tiling it crashed inside scf::tileUsingSCF, on both vendors' pipelines),
// and the kda ops around it still compile.
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --implicit-check-not=kda_elementwise_kernel
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --implicit-check-not=kda_elementwise_kernel
// RUN: rm -rf %t && kda-compile %s -o %t --chip=gfx942 | FileCheck %s --check-prefix=BUNDLE
// RUN: FileCheck %s --check-prefix=MANIFEST --implicit-check-not=kda_elementwise_kernel < %t/manifest.json

// CHECK: kda.entries = [{launches = [{{.*}}"kda_gated_delta_kernel_intra"
// CHECK: gpu.module @kda_gated_delta_kernel_intra_module
// CHECK: gpu.module @kda_gated_delta_kernel_state_module

// BUNDLE: kda-compile: wrote {{.*}} (2 kernels, gfx942)
// MANIFEST: "name": "kda_gated_delta_kernel_intra"

func.func @gate_empty(%c: tensor<4x0xf32>) -> tensor<4x0xf32> {
  %0 = kda.gate softplus channel %c : tensor<4x0xf32> -> tensor<4x0xf32>
  return %0 : tensor<4x0xf32>
}

func.func @hybrid_empty(%a: tensor<1x0x2x8xf32>, %b: tensor<1x0x2x8xf32>, %z: tensor<1x0x2xf32>) -> tensor<1x0x2x8xf32> {
  %0 = kda.hybrid gated %a, %b gate(%z : tensor<1x0x2xf32>) : tensor<1x0x2x8xf32>, tensor<1x0x2x8xf32> -> tensor<1x0x2x8xf32>
  return %0 : tensor<1x0x2x8xf32>
}

func.func @mixed(%q: tensor<2x64x2x16xf32>, %v: tensor<2x64x2x16xf32>, %c: tensor<2x64x0x16xf32>) -> (tensor<2x64x2x16xf32>, tensor<2x64x0x16xf32>) {
  %o = kda.gated_delta additive %q, %q, %v : tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32> -> tensor<2x64x2x16xf32>
  %g = kda.gate softplus channel %c : tensor<2x64x0x16xf32> -> tensor<2x64x0x16xf32>
  return %o, %g : tensor<2x64x2x16xf32>, tensor<2x64x0x16xf32>
}

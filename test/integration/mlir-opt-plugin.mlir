// UNSUPPORTED: asan
// (asan: the sanitized plugin cannot load into the uninstrumented mlir-opt)
// Debian's stock mlir-opt (it links libMLIR.so) loads KdaPlugin.so: the kda
// dialect as a dialect plugin, kda's passes and pipelines as a pass plugin.

// RUN: mlir-opt %s --load-dialect-plugin=%kda_libs/KdaPlugin.so | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: mlir-opt %s --load-dialect-plugin=%kda_libs/KdaPlugin.so --load-pass-plugin=%kda_libs/KdaPlugin.so \
// RUN:   --pass-pipeline='builtin.module(func.func(kda-tile-chunks))' | FileCheck %s --check-prefix=TILED
// RUN: mlir-opt %s --load-dialect-plugin=%kda_libs/KdaPlugin.so --load-pass-plugin=%kda_libs/KdaPlugin.so \
// RUN:   --pass-pipeline='builtin.module(kda-lower-to-cpu{parallel=false})' | FileCheck %s --check-prefix=CPU
// Without the plugin the dialect is unknown.
// RUN: not mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NOPLUGIN

// ROUNDTRIP-LABEL: func.func @f
// ROUNDTRIP: kda.gated_delta delta %{{.*}}, %{{.*}}, %{{.*}} gate(%{{.*}} : tensor<1x64x2x16xf32>) {tile = #kda.tile<chunk = 32>}
// ROUNDTRIP-SAME: -> tensor<1x64x2x8xf32>

// TILED-LABEL: func.func @f
// TILED: scf.forall (%{{.*}}, %{{.*}}) in (1, 2)
// TILED: scf.for
// TILED: scf.forall.in_parallel
// TILED-NOT: kda.gated_delta

// CPU: llvm.func @f(
// CPU-NOT: kda.gated_delta
// CPU-NOT: linalg.
// CPU-NOT: scf.

// NOPLUGIN: Dialect `kda' not found

func.func @f(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>, %v: tensor<1x64x2x8xf32>, %g: tensor<1x64x2x16xf32>) -> tensor<1x64x2x8xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x16xf32>) {tile = #kda.tile<chunk = 32, sub_chunk = 16>} : tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x8xf32> -> tensor<1x64x2x8xf32>
  return %o : tensor<1x64x2x8xf32>
}

// Elementwise work (a mix of three branches) as a kernel of its own: one
// program per row of the leading dimensions, a dynamic trailing dimension
// (heads) one index a program, a static [12, 128] row one tile (the pass's
// own default). With kda-gpu-outline-elementwise's tile-elements = 1024 a
// program takes 8 heads of V = 128 (dynamic heads: a grid of ceil(HV / 8),
// the last block partial; 12 static heads: 2 programs a row): a grid loop of
// step c from 0 launches ceil(extent / c) programs. A module of elementwise
// work alone (no kda op) compiles: kda-gpu-select-strategy created its
// kda.strategy without the kda dialect loaded and crashed.
// The GPU pipelines' default is 4096 elements a program (32 heads of 128;
// the static rows of 1536 elements stay one tile); 0 takes one row.
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none elementwise-tile-elements=0" | FileCheck %s --check-prefix=ONE
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none elementwise-tile-elements=0" | FileCheck %s --check-prefix=ONE
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=DEFAULT
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=DEFAULT
// RUN: kda-opt %s --kda-gpu-outline-elementwise=tile-elements=1024 | kda-opt --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s
// RUN: kda-opt %s --kda-gpu-outline-elementwise=tile-elements=1024 | kda-opt --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s
// RUN: rm -rf %t && kda-compile %s -o %t --chip=sm_90a | FileCheck %s --check-prefix=BUNDLE

// ONE-DAG: grid = ["D0", "D1", "D2"], module = "kda_elementwise_kernel_module"
// ONE-DAG: grid = [3, 1, 1], module = "kda_elementwise_kernel_0_module"
// ONE-DAG: grid = [2, 3, 1], module = "kda_elementwise_kernel_1_module"
// DEFAULT-DAG: grid = ["D0", "D1", {ceil_div = 32 : i64, symbol = "D2"}], module = "kda_elementwise_kernel_module"
// DEFAULT-DAG: grid = [3, 1, 1], module = "kda_elementwise_kernel_0_module"
// DEFAULT-DAG: grid = [2, 3, 1], module = "kda_elementwise_kernel_1_module"
// CHECK-DAG: grid = ["D0", "D1", {ceil_div = 8 : i64, symbol = "D2"}], module = "kda_elementwise_kernel_module"
// CHECK-DAG: grid = [3, 1, 1], module = "kda_elementwise_kernel_0_module"
// CHECK-DAG: grid = [2, 3, 2], module = "kda_elementwise_kernel_1_module"

// BUNDLE: kda-compile: wrote {{.*}} (3 kernels, sm_90a)

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @dynamic_heads(%a: tensor<?x?x?x128xbf16>, %b: tensor<?x?x?x128xbf16>, %e: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) outs(%e : tensor<?x?x?x128xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %r = arith.addf %x, %y : bf16
    linalg.yield %r : bf16
  } -> tensor<?x?x?x128xbf16>
  return %s : tensor<?x?x?x128xbf16>
}

func.func @small_rows(%a: tensor<3x4x64xf32>, %e: tensor<3x4x64xf32>) -> tensor<3x4x64xf32> {
  %s = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a : tensor<3x4x64xf32>) outs(%e : tensor<3x4x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.mulf %x, %x : f32
    linalg.yield %r : f32
  } -> tensor<3x4x64xf32>
  return %s : tensor<3x4x64xf32>
}

// 12 static heads of 128: one tile a row, or (tile-elements = 1024) blocks of
// 8 heads, 2 programs a row.
func.func @many_static_heads(%a: tensor<2x3x12x128xf32>, %e: tensor<2x3x12x128xf32>) -> tensor<2x3x12x128xf32> {
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a : tensor<2x3x12x128xf32>) outs(%e : tensor<2x3x12x128xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<2x3x12x128xf32>
  return %s : tensor<2x3x12x128xf32>
}

// RUN: kda-opt %s --pass-pipeline="builtin.module(func.func(kda-gpu-fuse-tiles))" | FileCheck %s

// kda-gpu-fuse-tiles alone. On a GPU every tile primitive is a phase of the
// block fenced by barriers, and every intermediate tile a shared-memory
// buffer: a chain of elementwise maps (here a gate's exp, then a scale and a
// mask) becomes one primitive. A matmul keeps its plain multiply-accumulate
// body (it runs on the matrix units): its elementwise producer stays apart.

#id = affine_map<(i, j) -> (i, j)>
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>

// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK: arith.select
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @chain(%g: tensor<16x16xf32>, %s: tensor<16x16xf32>, %m: tensor<16x16xi1>) -> tensor<16x16xf32> {
  %e = tensor.empty() : tensor<16x16xf32>
  %zero = arith.constant 0.0 : f32
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<16x16xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %s : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.mulf %x, %y : f32
    linalg.yield %z : f32
  } -> tensor<16x16xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled, %m : tensor<16x16xf32>, tensor<16x16xi1>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %keep: i1, %o: f32):
    %z = arith.select %keep, %x, %zero : f32
    linalg.yield %z : f32
  } -> tensor<16x16xf32>
  return %masked : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @matmul_consumer
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-NOT: math.exp
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @matmul_consumer(%g: tensor<16x16xf32>, %k: tensor<16x16xf32>, %acc: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %e = tensor.empty() : tensor<16x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<16x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp, %k : tensor<16x16xf32>, tensor<16x16xf32>) outs(%acc : tensor<16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.mulf %x, %y : f32
    %w = arith.addf %o, %z : f32
    linalg.yield %w : f32
  } -> tensor<16x16xf32>
  return %p : tensor<16x16xf32>
}

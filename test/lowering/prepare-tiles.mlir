// RUN: kda-opt %s --pass-pipeline="builtin.module(func.func(kda-gpu-prepare-tiles))" | FileCheck %s

// kda-gpu-prepare-tiles alone, on bufferized tile primitives: every primitive
// becomes a loop nest of one shape (an scf.parallel over its output elements
// with any reduction sequential inside: what kda-gpu-map-kernels spreads over
// threads). memref.copy becomes linalg.copy; a generic whose reduction
// dimension comes first (as A^T B is written: k, i, j) gets its parallel
// dimensions first; one already in that order is left alone.

#kij_a = affine_map<(k, i, j) -> (k, i)>
#kij_b = affine_map<(k, i, j) -> (k, j)>
#kij_c = affine_map<(k, i, j) -> (i, j)>
#ijk_a = affine_map<(i, j, k) -> (i, k)>
#ijk_b = affine_map<(i, j, k) -> (k, j)>
#ijk_c = affine_map<(i, j, k) -> (i, j)>

// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[D:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @tiles
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%arg0 : memref<16x64xf32>) outs(%arg3 : memref<16x64xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%arg0, %arg1 : memref<16x64xf32>, memref<16x16xf32>) outs(%arg2 : memref<64x16xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[D]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%arg3, %arg2 : memref<16x64xf32>, memref<64x16xf32>)
func.func @tiles(%k: memref<16x64xf32>, %u: memref<16x16xf32>, %h: memref<64x16xf32>,
                 %kc: memref<16x64xf32>, %o: memref<16x16xf32>) {
  memref.copy %k, %kc : memref<16x64xf32> to memref<16x64xf32>
  // h += K^T U, written with the contracted row index first.
  linalg.generic {indexing_maps = [#kij_a, #kij_b, #kij_c], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%k, %u : memref<16x64xf32>, memref<16x16xf32>) outs(%h : memref<64x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  // o += K h, already in order.
  linalg.generic {indexing_maps = [#ijk_a, #ijk_b, #ijk_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%kc, %h : memref<16x64xf32>, memref<64x16xf32>) outs(%o : memref<16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

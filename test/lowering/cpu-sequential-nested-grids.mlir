// RUN: kda-opt %s --pass-pipeline="builtin.module(func.func(kda-cpu-sequential-nested-grids))" | FileCheck %s

// kda-cpu-sequential-nested-grids alone. On the CPU the programs of the
// outermost grid run in parallel (OpenMP); a grid nested inside a program
// (TileBuilder's triangular solve writes its columns as one) runs in order
// within it, as an scf.for. The outer grid stays a grid.

// CHECK-LABEL: func.func @programs
// CHECK: scf.forall (%[[P:.*]]) in (4)
// CHECK-NOT: scf.forall
// CHECK: scf.for %[[J:.*]] = %c0 to %c16 step %c1
// CHECK: memref.store %{{.*}}, %arg0[%[[P]], %[[J]]]
func.func @programs(%out: memref<4x16xf32>) {
  scf.forall (%p) in (4) {
    scf.forall (%j) in (16) {
      %x = arith.index_cast %j : index to i64
      %f = arith.sitofp %x : i64 to f32
      memref.store %f, %out[%p, %j] : memref<4x16xf32>
    }
  }
  return
}

// A single grid is the program grid: left alone.
// CHECK-LABEL: func.func @one_grid
// CHECK: scf.forall (%{{.*}}) in (4)
// CHECK-NOT: scf.for
func.func @one_grid(%out: memref<4xf32>) {
  scf.forall (%p) in (4) {
    %c = arith.constant 1.0 : f32
    memref.store %c, %out[%p] : memref<4xf32>
  }
  return
}

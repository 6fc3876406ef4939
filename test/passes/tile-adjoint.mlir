// The adjoints of the tile primitives (passes/TileAdjoint.h), and the
// backward of the gated delta rule's chunk step derived from the one
// algorithm (emitGatedDeltaChunk, recorded by a TapeTileBuilder): the pass
// adds small programs, their gradient functions and checks; executed, each
// check prints 1 per input whose every element's gradient of sum(seed * out)
// agrees with a central finite difference of the forward (f32, h = 1e-2,
// relative error <= 2e-3; the rules land near 1e-5), 0 where one does not.
// RUN: kda-opt %s --kda-test-tile-adjoint | FileCheck %s
// RUN: kda-opt %s --kda-test-tile-adjoint | mlir-opt --one-shot-bufferize="bufferize-function-boundaries allow-return-allocs-from-loops" \
// RUN:   --scf-forall-to-for --convert-linalg-to-loops --expand-strided-metadata --lower-affine \
// RUN:   --convert-scf-to-cf --convert-vector-to-llvm --convert-math-to-llvm --convert-arith-to-llvm \
// RUN:   --finalize-memref-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils \
// RUN: | FileCheck %s --check-prefix=EXEC
// RUN: not kda-opt %s --kda-test-tile-adjoint=only=row_max 2>&1 | FileCheck %s --check-prefix=ERR

// Every primitive with a rule: products (matmul with each transpose flag,
// matmulAdd, vecmat, transpose), maps (a masked body with per-row and
// per-column operands, rowSum, prefixSumRows), the triangular inverse,
// decayed pairs (the same tile on both sides too), and the structural ones.
// CHECK-LABEL: func.func @products_grad(%{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<5x3xf32>, %{{.*}}: tensor<4x5xf32>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4x5xf32>, %{{.*}}: tensor<3x5xf32>, %{{.*}}: tensor<5xf32>, %{{.*}}: tensor<4x5xf32>) -> (tensor<4x3xf32>, tensor<5x3xf32>, tensor<4x5xf32>, tensor<4xf32>)
// CHECK-LABEL: func.func @pairs_grad(
// CHECK-LABEL: func.func @structural_grad(
// The chunk step: q, k, v, the raw gate, beta logits, dt_bias, the state and
// A_log in; o and the next state's seeds; a gradient for each input.
// CHECK-LABEL: func.func @chunk_lower_bound_grad(%{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<1xf32>, %{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<4x3xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x3xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<1xf32>)
// CHECK-LABEL: func.func @chunk_softplus_grad(
// CHECK-LABEL: func.func @sequence_grad(%{{.*}}: tensor<24x4xf32>
// CHECK-LABEL: func.func @sequence_loop_grad(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (tensor<4x3xf32>, tensor<3x4x3xf32>)
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (tensor<4x3xf32>, tensor<24x4xf32>, tensor<24x4xf32>, tensor<24x3xf32>, tensor<24x4xf32>, tensor<24xf32>, tensor<4xf32>, tensor<1xf32>)
// CHECK-LABEL: func.func @dense_gva_grad(%{{.*}}: tensor<2x12x1x4xf32>, %{{.*}}: tensor<2x12x1x4xf32>, %{{.*}}: tensor<2x12x2x3xf32>, %{{.*}}: tensor<2x12x2x4xf32>, %{{.*}}: tensor<2x12x2xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x2x4x3xf32>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<2x12x2x3xf32>, %{{.*}}: tensor<2x2x4x3xf32>) -> (tensor<2x12x1x4xf32>, tensor<2x12x1x4xf32>, tensor<2x12x2x3xf32>, tensor<2x12x2x4xf32>, tensor<2x12x2xf32>, tensor<2x4xf32>, tensor<2x2x4x3xf32>, tensor<2xf32>)
// CHECK-LABEL: func.func @main()

// 4 + 3 + 1 + 3 + 2 inputs of the primitive programs, 8 + 8 of the chunk
// step (lower-bound gate with l2 norm and a padding row; softplus gate), 8 of
// a sequence of 20 tokens in three chunks chained through the state (its
// adjoint: the reverse state pass, chunk by chunk). The eighth is A_log, a
// scalar the gate's map bodies capture: its gradient sums theirs.
// sequence_loop: the same sequence's gradient by emitSequenceBackward
// (GatedDeltaBackward.h: a forward loop keeping the state before each chunk,
// then a reverse loop recomputing each chunk under a tape), 8 more.
// dense_gva: a dense call of 2 sequences x 2 value heads sharing one q / k
// head, by emitDenseBackward, 8 more.
// EXEC-COUNT-53: {{^}}1{{$}}
// EXEC-NOT: {{^}}0{{$}}

// ERR: error: kda-test-tile-adjoint: row_max: rowMax has no adjoint rule
module {}

// Initial, final and chunk-boundary states (both layouts, fp32 and bf16), and
// variable-length batches with uneven sequences, including length 1.
// RUN: kda-run %s --function=no_initial_state --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=initial_state --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=initial_state_v_major --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=bf16_state --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=boundary_states --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=boundary_states --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=boundary_states_v_major --chunk=64 --check | FileCheck %s
// An interval that chunks do not end on is refused (it used to come back as
// zero states for the boundaries inside chunks):
// RUN: not kda-run %s --function=boundary_states --chunk=64 --check 2>&1 | FileCheck %s --check-prefix=INTERVAL
// INTERVAL: error: kda-tile-chunks: boundary_interval 32 is not a multiple of the chunk 64
// RUN: kda-run %s --function=varlen --chunk=16 --seqlens=37,1,64,26 --check | FileCheck %s
// RUN: kda-run %s --function=varlen --chunk=64 --seqlens=1,1,1,125 --check | FileCheck %s
// RUN: kda-run %s --function=varlen_boundary --chunk=32 --seqlens=37,27,64 --check | FileCheck %s
// A sequence needing more boundary states than the result holds (108 tokens:
// 4 at interval 32, NT = 2) is refused before anything runs: its states were
// dropped in silence, and --check failed on the oracle's shape.
// RUN: not kda-run %s --function=varlen_boundary --chunk=32 --seqlens=10,10,108 --check 2>&1 | FileCheck %s --check-prefix=NT
// RUN: not kda-run %s --function=varlen_boundary --chunk=32 --seqlens=10,10,108 2>&1 | FileCheck %s --check-prefix=NT
// NT: kda-run: error: result 'boundary_states' of the kda.gated_delta op: dimension 1 (boundary states per sequence) is 2, but sequence 2 of cu_seqlens (argument 6) has 108 tokens, 4 boundary states at interval 32
// V split over programs (v_block, as GPU kernels run it): every state layout
// and boundary state still matches the oracle.
// RUN: kda-run %s --function=boundary_states_v_major_v_block --check | FileCheck %s
// RUN: kda-run %s --function=varlen_boundary_v_block --seqlens=37,27,64 --check | FileCheck %s
// RUN: kda-run %s --function=varlen_boundary_pool --chunk=32 --seqlens=37,27,64 --check | FileCheck %s
// RUN: kda-run %s --function=varlen_boundary_pool --chunk=16 --schedule=chunk-parallel --seqlens=70,1,57 --check | FileCheck %s
// RUN: kda-run %s --function=boundary_pool_v_major --chunk=16 --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @no_initial_state(%q: tensor<2x70x2x32xf32>, %k: tensor<2x70x2x32xf32>, %v: tensor<2x70x2x32xf32>, %g: tensor<2x70x2x32xf32>, %b: tensor<2x70x2xf32>) -> (tensor<2x70x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x70x2x32xf32>) beta(%b : tensor<2x70x2xf32>) : tensor<2x70x2x32xf32>, tensor<2x70x2x32xf32>, tensor<2x70x2x32xf32> -> tensor<2x70x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x70x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @initial_state(%q: tensor<2x70x2x32xf32>, %k: tensor<2x70x2x32xf32>, %v: tensor<2x70x2x32xf32>, %g: tensor<2x70x2x32xf32>, %b: tensor<2x70x2xf32>, %s0: tensor<2x2x32x32xf32>) -> (tensor<2x70x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x70x2x32xf32>) beta(%b : tensor<2x70x2xf32>) initial_state(%s0 : tensor<2x2x32x32xf32>) : tensor<2x70x2x32xf32>, tensor<2x70x2x32xf32>, tensor<2x70x2x32xf32> -> tensor<2x70x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x70x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @initial_state_v_major(%q: tensor<2x70x2x32xf32>, %k: tensor<2x70x2x32xf32>, %v: tensor<2x70x2x16xf32>, %g: tensor<2x70x2x32xf32>, %b: tensor<2x70x2xf32>, %s0: tensor<2x2x16x32xf32>) -> (tensor<2x70x2x16xf32>, tensor<2x2x16x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x70x2x32xf32>) beta(%b : tensor<2x70x2xf32>) initial_state(%s0 : tensor<2x2x16x32xf32>) {state_layout = #kda<layout v_major>} : tensor<2x70x2x32xf32>, tensor<2x70x2x32xf32>, tensor<2x70x2x16xf32> -> tensor<2x70x2x16xf32> final_state tensor<2x2x16x32xf32>
  return %o, %s : tensor<2x70x2x16xf32>, tensor<2x2x16x32xf32>
}

func.func @bf16_state(%q: tensor<1x70x2x32xf32>, %k: tensor<1x70x2x32xf32>, %v: tensor<1x70x2x32xf32>, %g: tensor<1x70x2x32xf32>, %b: tensor<1x70x2xf32>, %s0: tensor<1x2x32x32xbf16>) -> (tensor<1x70x2x32xf32>, tensor<1x2x32x32xbf16>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x2x32xf32>) beta(%b : tensor<1x70x2xf32>) initial_state(%s0 : tensor<1x2x32x32xbf16>) : tensor<1x70x2x32xf32>, tensor<1x70x2x32xf32>, tensor<1x70x2x32xf32> -> tensor<1x70x2x32xf32> final_state tensor<1x2x32x32xbf16>
  return %o, %s : tensor<1x70x2x32xf32>, tensor<1x2x32x32xbf16>
}

func.func @boundary_states(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2x32xf32>, %b: tensor<2x100x2xf32>, %s0: tensor<2x2x32x32xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>, tensor<2x4x2x32x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x100x2x32xf32>) beta(%b : tensor<2x100x2xf32>) initial_state(%s0 : tensor<2x2x32x32xf32>) {boundary_interval = 32 : i64} : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32> boundary_states tensor<2x4x2x32x32xf32>
  return %o, %s, %bs : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>, tensor<2x4x2x32x32xf32>
}

func.func @boundary_states_v_major(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x16xf32>, %g: tensor<1x100x2xf32>, %b: tensor<1x100x2xf32>, %s0: tensor<1x2x16x32xf32>) -> (tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x100x2xf32>) beta(%b : tensor<1x100x2xf32>) initial_state(%s0 : tensor<1x2x16x32xf32>) {state_layout = #kda<layout v_major>, boundary_interval = 64 : i64} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x16xf32> -> tensor<1x100x2x16xf32> final_state tensor<1x2x16x32xf32> boundary_states tensor<1x2x2x16x32xf32>
  return %o, %s, %bs : tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>
}

func.func @varlen(%q: tensor<1x128x2x32xf32>, %k: tensor<1x128x2x32xf32>, %v: tensor<1x128x2x32xf32>, %g: tensor<1x128x2x32xf32>, %b: tensor<1x128x2xf32>, %s0: tensor<4x2x32x32xf32>, %cu: tensor<5xi32>) -> (tensor<1x128x2x32xf32>, tensor<4x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x128x2x32xf32>) beta(%b : tensor<1x128x2xf32>) initial_state(%s0 : tensor<4x2x32x32xf32>) cu_seqlens(%cu : tensor<5xi32>) : tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32> -> tensor<1x128x2x32xf32> final_state tensor<4x2x32x32xf32>
  return %o, %s : tensor<1x128x2x32xf32>, tensor<4x2x32x32xf32>
}

func.func @varlen_boundary(%q: tensor<1x128x2x32xf32>, %k: tensor<1x128x2x32xf32>, %v: tensor<1x128x2x32xf32>, %g: tensor<1x128x2x32xf32>, %b: tensor<1x128x2xf32>, %s0: tensor<3x2x32x32xf32>, %cu: tensor<4xi32>) -> (tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x128x2x32xf32>) beta(%b : tensor<1x128x2xf32>) initial_state(%s0 : tensor<3x2x32x32xf32>) cu_seqlens(%cu : tensor<4xi32>) {boundary_interval = 32 : i64} : tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32> -> tensor<1x128x2x32xf32> final_state tensor<3x2x32x32xf32> boundary_states tensor<3x2x2x32x32xf32>
  return %o, %s, %bs : tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>
}

func.func @boundary_states_v_major_v_block(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x16xf32>, %g: tensor<1x100x2xf32>, %b: tensor<1x100x2xf32>, %s0: tensor<1x2x16x32xf32>) -> (tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x100x2xf32>) beta(%b : tensor<1x100x2xf32>) initial_state(%s0 : tensor<1x2x16x32xf32>) {state_layout = #kda<layout v_major>, boundary_interval = 64 : i64, tile = #kda.tile<chunk = 32, v_block = 8>} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x16xf32> -> tensor<1x100x2x16xf32> final_state tensor<1x2x16x32xf32> boundary_states tensor<1x2x2x16x32xf32>
  return %o, %s, %bs : tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>
}

func.func @varlen_boundary_v_block(%q: tensor<1x128x2x32xf32>, %k: tensor<1x128x2x32xf32>, %v: tensor<1x128x2x32xf32>, %g: tensor<1x128x2x32xf32>, %b: tensor<1x128x2xf32>, %s0: tensor<3x2x32x32xf32>, %cu: tensor<4xi32>) -> (tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x128x2x32xf32>) beta(%b : tensor<1x128x2xf32>) initial_state(%s0 : tensor<3x2x32x32xf32>) cu_seqlens(%cu : tensor<4xi32>) {boundary_interval = 32 : i64, tile = #kda.tile<chunk = 16, v_block = 16>} : tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32> -> tensor<1x128x2x32xf32> final_state tensor<3x2x32x32xf32> boundary_states tensor<3x2x2x32x32xf32>
  return %o, %s, %bs : tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>
}

// Boundary states into pool slots (a prefix cache's block table, [N, NB]):
// boundary j of sequence n goes to slot table[n, j] (negative: not kept);
// the CPU leaves the other slots zero. Varlen with entries past a
// sequence's end (NB = 3 > its boundaries) and a V-major batch.
func.func @varlen_boundary_pool(%q: tensor<1x128x2x32xf32>, %k: tensor<1x128x2x32xf32>, %v: tensor<1x128x2x32xf32>, %g: tensor<1x128x2x32xf32>, %b: tensor<1x128x2xf32>, %s0: tensor<3x2x32x32xf32>, %cu: tensor<4xi32>, %t: tensor<3x3xi32>) -> (tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<12x2x32x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x128x2x32xf32>) beta(%b : tensor<1x128x2xf32>) initial_state(%s0 : tensor<3x2x32x32xf32>) cu_seqlens(%cu : tensor<4xi32>) boundary_indices(%t : tensor<3x3xi32>) {boundary_interval = 32 : i64} : tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32> -> tensor<1x128x2x32xf32> final_state tensor<3x2x32x32xf32> boundary_states tensor<12x2x32x32xf32>
  return %o, %s, %bs : tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<12x2x32x32xf32>
}

func.func @boundary_pool_v_major(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2x32xf32>, %b: tensor<2x100x2xf32>, %t: tensor<2x4xi64>) -> (tensor<2x100x2x32xf32>, tensor<9x2x32x32xf32>) {
  %o, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x100x2x32xf32>) beta(%b : tensor<2x100x2xf32>) boundary_indices(%t : tensor<2x4xi64>) {boundary_interval = 16 : i64, state_layout = #kda<layout v_major>} : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> boundary_states tensor<9x2x32x32xf32>
  return %o, %bs : tensor<2x100x2x32xf32>, tensor<9x2x32x32xf32>
}

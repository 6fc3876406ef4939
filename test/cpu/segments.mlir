// Sequence-parallel segments (kda-tile-chunks' `segments`, #kda.tile
// segments; kda-run --segments): every sequence splits into P runs of whole
// chunks. A summary grid gives each segment its K x K transition and its
// offset (the chunk steps from the identity with U taken as zero, and from
// zeros); a combine grid scans them in order from the initial state into
// every segment's start state and the final state; the state grid then runs
// the segments side by side. Against the float64 oracle with SPEC's bars, on
// the functions of family.mlir, states.mlir, dims.mlir and stability.mlir:
// initial states (K- and V-major), varlen (sequences shorter
// than P chunks leave empty segments: transition I, offset 0), GVA, K != V
// (K not a multiple of the V block: the transition's last block is partial),
// bf16 inputs, the prologue, softplus and lower-bounded gates over 4096
// tokens, sub-chunk steps and wide steps, P from 2 to 64; a hybrid with a
// window and a multi-scale op (their gated delta parts in segments).
// (Dropping A_s S from the combine's S = A_s S + B_s fails the final states
// and every segment after the first where an initial state is given.)
// RUN: kda-run %S/family.mlir --function=kda --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gated_deltanet --chunk=16 --schedule=chunk-parallel --segments=4 --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gla --chunk=16 --schedule=chunk-parallel --segments=2 --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=linear_attention --chunk=32 --schedule=chunk-parallel --segments=2 --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=initial_state --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=initial_state_v_major --chunk=16 --schedule=chunk-parallel --segments=5 --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=16 --seqlens=37,1,64,26 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_gva --chunk=16 --schedule=chunk-parallel --segments=2 --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_k60_v100 --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_k100_v60 --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_bf16 --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_prologue --chunk=16 --schedule=chunk-parallel --segments=2 --check | FileCheck %s
// RUN: kda-run %S/stability.mlir --function=softplus_gates --chunk=64 --schedule=chunk-parallel --state-step=sub-chunk --segments=16 --check | FileCheck %s
// RUN: kda-run %S/stability.mlir --function=lower_bound_gates --chunk=64 --schedule=chunk-parallel --state-step=wide --segments=64 --check | FileCheck %s
// RUN: kda-run %S/hybrid.mlir --function=sum_linear_window --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: kda-run %S/hybrid.mlir --function=multi_scale_decays --chunk=16 --schedule=chunk-parallel --segments=3 --check | FileCheck %s
// RUN: not kda-run %S/family.mlir --function=kda --segments=2 2>&1 | FileCheck %s --check-prefix=SEQ
// RUN: not kda-run %S/states.mlir --function=boundary_states --chunk=16 --schedule=chunk-parallel --segments=2 2>&1 | FileCheck %s --check-prefix=BOUNDARY
// RUN: not kda-run %S/family.mlir --function=kda --schedule=chunk-parallel --segments=0 2>&1 | FileCheck %s --check-prefix=ZERO
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL
// SEQ: --segments=2 needs --schedule=chunk-parallel
// BOUNDARY: segments = 2 with boundary states are not implemented
// ZERO: --segments must be 1 to 64, found 0

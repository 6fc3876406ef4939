// What one step of the chunk-parallel state pass takes (kda-run
// --state-step, kda-tile-chunks' sub-chunk-steps and wide-steps), against
// the float64 oracle with SPEC's bars, on the functions of family.mlir,
// states.mlir, dims.mlir, stability.mlir and resume.mlir:
//  - sub-chunk: a chunk of several 16-token sub-chunks as that many steps
//    (the form of the GPU lane kernels);
//  - wide: the chunk's sub-chunks coupled in one step
//    (GatedDeltaKernel.h, emitWideStateStep): chunk / 16 times fewer
//    sequential steps. Sequences that end inside a wide chunk (varlen 37, 1,
//    26, 125 tokens) take empty sub-chunks with a decay of 1; boundary
//    states every 32 tokens at chunks of 32; GVA; K != V; bf16 inputs;
//    softplus and lower-bounded gates over 4096 tokens; a resumed sequence.
//    (Carrying sub-chunk j's writes to sub-chunk i from sub-chunk j's own
//    decay instead of j + 1's fails the oracle by 0.3.)
// RUN: kda-run %S/family.mlir --function=kda --chunk=64 --schedule=chunk-parallel --state-step=sub-chunk --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=64 --seqlens=37,1,64,26 --schedule=chunk-parallel --state-step=sub-chunk --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=kda --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gated_deltanet --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gla --chunk=32 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=linear_attention --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=64 --seqlens=37,1,64,26 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=64 --seqlens=1,1,1,125 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=initial_state_v_major --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=boundary_states --chunk=32 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_gva --chunk=32 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_k60_v100 --chunk=32 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_bf16 --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_softplus --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/stability.mlir --function=lower_bound_gates --chunk=64 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: kda-run %S/resume.mlir --function=resume --chunk=32 --schedule=chunk-parallel --state-step=wide --check | FileCheck %s
// RUN: not kda-run %S/family.mlir --function=kda --state-step=wide 2>&1 | FileCheck %s --check-prefix=SEQ
// RUN: not kda-run %S/family.mlir --function=kda --schedule=chunk-parallel --state-step=diagonal 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL
// SEQ: --state-step=wide needs --schedule=chunk-parallel
// BAD: --state-step must be 'chunk', 'sub-chunk' or 'wide', found 'diagonal'

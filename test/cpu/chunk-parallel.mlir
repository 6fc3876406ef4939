// The chunk-parallel schedule (kda-tile-chunks schedule=chunk-parallel, what
// GPU bundles run): every chunk's state-independent part on its own grid,
// then the state pass. Same functions as family.mlir / states.mlir /
// dims.mlir, same oracle and bars.
// RUN: kda-run %S/family.mlir --function=linear_attention --chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=mamba2 --chunk=32 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gla --chunk=64 --sub-chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=deltanet --chunk=64 --sub-chunk=32 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=gated_deltanet --chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=kda --chunk=64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/family.mlir --function=kda --chunk=1 --sub-chunk=1 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=initial_state_v_major --chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=boundary_states_v_major --chunk=64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=16 --seqlens=37,1,64,26 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen --chunk=64 --seqlens=1,1,1,125 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/states.mlir --function=varlen_boundary_v_block --seqlens=37,27,64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_k60_v100 --chunk=32 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_gva --chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_bf16 --chunk=64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=kda_softplus --chunk=64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/dims.mlir --function=gdn_softplus_head --chunk=16 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/stability.mlir --function=lower_bound_gates --chunk=64 --schedule=chunk-parallel --check | FileCheck %s
// RUN: kda-run %S/resume.mlir --function=resume --chunk=32 --schedule=chunk-parallel --check | FileCheck %s
// RUN: not kda-run %S/family.mlir --function=kda --schedule=diagonal 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL
// BAD: schedule must be 'sequential' or 'chunk-parallel', found 'diagonal'

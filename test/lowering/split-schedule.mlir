// RUN: kda-opt %S/Inputs/before-split-schedule.mlir --kda-gpu-split-schedule | FileCheck %s

// kda-gpu-split-schedule alone, on the IR it gets in the NVIDIA pipeline
// (Inputs/before-split-schedule.mlir: test/gpu-codegen/Inputs/single_head.mlir,
// one head of K = V = 64 on sm_80, after kda-tile-chunks' chunk-parallel
// schedule; `kda-opt ... --kda-lower-to-nvvm="chip=sm_80 format=none"
// --mlir-print-ir-before=kda-gpu-split-schedule`). The kernel function holds
// two program grids that hand each other tensors: the intra-chunk grid
// (sequence, chunk, head) writes five workspaces, the state grid (sequence,
// head, V block) reads them. A GPU launch is one grid, so each becomes a
// kernel of its own, named after its phase and described in kda.abi (inputs,
// the workspaces it reads, then what it writes), with the description its
// register pass reads (kda.intra_pass / kda.state_pass); the original
// function calls them in order on fresh workspaces; and the module records
// the schedule as a bundle entry (parameters, workspaces with their shapes in
// the op's dimension symbols, each launch's arguments by name).

// CHECK: module attributes {kda.entries = [{launches = [{args = ["q", "k", "v", "ws0", "ws1", "ws2", "ws3", "ws4"], kernel = "kda_gated_delta_kernel_intra"}, {args = ["q", "k", "v", "ws0", "ws2", "ws3", "ws4", "ws1", "o"], kernel = "kda_gated_delta_kernel_state"}], name = "kda_gated_delta_kernel"
// CHECK-SAME: workspaces = [{dtype = "bf16", name = "ws0", shape = [1, "T", 1, 64]}, {dtype = "f32", name = "ws1", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "ws2", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "ws3", shape = [1, "T", 1, 64]}, {dtype = "f32", name = "ws4", shape = [1, "T", 1, 16]}]

// The schedule: no grid left, two calls on fresh workspaces.
// CHECK-LABEL: func.func private @kda_gated_delta_kernel(
// CHECK-NOT: scf.forall
// CHECK: %[[I:.*]]:5 = call @kda_gated_delta_kernel_intra(%arg0, %arg1, %arg2,
// CHECK-NOT: scf.forall
// CHECK: %[[S:.*]] = call @kda_gated_delta_kernel_state(%arg0, %arg1, %arg2, %[[I]]#0, %[[I]]#2, %[[I]]#3, %[[I]]#4, %[[I]]#1, %arg3)
// CHECK-NEXT: return %[[S]]

// CHECK-LABEL: func.func private @kda_gated_delta_kernel_intra(
// CHECK-SAME: kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "ws0"}, {dims = [1, "T", 1, 64], name = "ws1"}, {dims = [1, "T", 1, 64], name = "ws2"}, {dims = [1, "T", 1, 64], name = "ws3"}, {dims = [1, "T", 1, 16], name = "ws4"}]
// CHECK-SAME: kda.intra_pass = #kda.intra_pass<chunk = 16,{{.*}}workspaces = ["w", "u", "q", "k", "p"],{{.*}}>>, kda.kernel
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, %{{.*}}, 1)
// CHECK: return

// CHECK-LABEL: func.func private @kda_gated_delta_kernel_state(
// CHECK-SAME: name = "ws1"}, {dims = [1, "T", 1, 64], name = "o"}], kda.kernel, kda.state_pass = #kda.state_pass<chunk = 16,{{.*}}v_block = 16,
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 1, 4)
// CHECK: return

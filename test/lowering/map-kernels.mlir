// RUN: kda-opt %S/Inputs/before-map-kernels.mlir --kda-gpu-map-kernels | FileCheck %s

// kda-gpu-map-kernels alone, on the IR it gets in the NVIDIA pipeline
// (Inputs/before-map-kernels.mlir: the window attention of tile-matmuls.mlir,
// one head of K = V = 64, bf16, window 64, on sm_80, after its matmuls went
// to mma.sync and its primitives became scf.parallel nests; `kda-opt win.mlir
// --kda-lower-to-nvvm="chip=sm_80 format=none"
// --mlir-print-ir-before=kda-gpu-map-kernels --mlir-print-ir-module-scope
// --mlir-disable-threading`). The kernel function becomes a gpu.func in a
// gpu.module of its own taking raw pointers and the dynamic size T; its
// program grid becomes the launch grid (blocks), each primitive's
// scf.parallel a loop of the block's 128 threads over its elements with a
// barrier after it, and every tile a view into one dynamic shared-memory
// arena (20672 bytes). The module records the launch: grid, block, shared
// memory, parameters by name (with the alignment the runtime checks) and
// the strategy kda-gpu-select-strategy chose. No host function is left.

// CHECK: module attributes {gpu.container_module, kda.launches = [{block = [128, 1, 1], dynamic_shared_memory = 20672 : i64, grid = [1, 1, 1], module = "kda_window_attention_kernel_module", name = "kda_window_attention_kernel"
// CHECK-SAME: params = [{alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "q", shape = [1, "T", 1, 64]}, {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "k", shape = [1, "T", 1, 64]}, {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "v", shape = [1, "T", 1, 64]}, {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "o", shape = [1, "T", 1, 64]}, {kind = "dim", name = "T"}]
// CHECK-SAME: strategy = #kda.strategy<kernel = "window", kind = "tiles"
// CHECK-NOT: func.func
// CHECK: gpu.module @kda_window_attention_kernel_module {
// CHECK-NEXT: gpu.func @kda_window_attention_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64) kernel
// CHECK-NOT: memref.alloc
// CHECK: %[[ARENA:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[TID:.*]] = gpu.thread_id  x
// CHECK-NOT: memref.alloc
// CHECK: gpu.block_id  x
// CHECK-NOT: scf.parallel
// CHECK: memref.view %[[ARENA]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[TID]] to %{{.*}} step %c128
// CHECK-NOT: memref.alloc
// CHECK-NOT: scf.parallel
// CHECK-NOT: func.func

// Past 256 threads a lane's 255 registers no longer fit a block's 64K: the
// kernel states the registers a lane may use (65536 / threads, a multiple of
// 8), so that ptxas fits the block instead of every launch failing
// (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). At 128 threads nothing is stated.
// RUN: kda-opt %S/Inputs/before-map-kernels.mlir --kda-gpu-map-kernels="threads=512" | FileCheck %s --check-prefix=WIDE
// WIDE: gpu.func @kda_window_attention_kernel({{.*}}) kernel attributes {nvvm.maxnreg = 128 : i32}
// RUN: kda-opt %S/Inputs/before-map-kernels.mlir --kda-gpu-map-kernels | FileCheck %s --check-prefix=NARROW
// NARROW: gpu.func @kda_window_attention_kernel({{.*}}: i64) kernel {
// A kernel's own budget (kda.max_registers, a lane kernel's) is held to what
// fits the block: 200 at 512 threads would be 102,400 registers.
// RUN: sed 's/attributes {kda.abi/attributes {kda.max_registers = 200 : i32, kda.abi/' %S/Inputs/before-map-kernels.mlir | kda-opt --kda-gpu-map-kernels="threads=512" | FileCheck %s --check-prefix=OWNWIDE
// OWNWIDE: gpu.func @kda_window_attention_kernel({{.*}}) kernel attributes {nvvm.maxnreg = 128 : i32}
// RUN: sed 's/attributes {kda.abi/attributes {kda.max_registers = 200 : i32, kda.abi/' %S/Inputs/before-map-kernels.mlir | kda-opt --kda-gpu-map-kernels | FileCheck %s --check-prefix=OWNNARROW
// OWNNARROW: gpu.func @kda_window_attention_kernel({{.*}}) kernel attributes {nvvm.maxnreg = 200 : i32}

// RUN: kda-opt %S/Inputs/before-tile-matmuls.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-tile-matmuls))" | FileCheck %s
// RUN: kda-opt %S/Inputs/before-tile-matmuls.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-tile-matmuls{instructions=mfma threads=256}))" | FileCheck %s --check-prefix=MFMA
// RUN: kda-opt %S/Inputs/before-tile-matmuls.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-tile-matmuls{instructions=wmma}))" | FileCheck %s --check-prefix=WMMA

// kda-gpu-tile-matmuls alone, on the IR it gets in the NVIDIA pipeline
// (Inputs/before-tile-matmuls.mlir: a window attention over one head of
// K = V = 64, bf16, window 64, on sm_80, bufferized: its tiles in shared
// memory; `kda-opt win.mlir --kda-lower-to-nvvm="chip=sm_80 format=none"
// --mlir-print-ir-before=kda-gpu-tile-matmuls --mlir-print-ir-module-scope
// --mlir-disable-threading`). Its two tile matmuls, S = Q K^T ([16, 64] x
// [64, 16]^T) and O += P V ([16, 16] x [16, 64]), run on the matrix units:
// the warps (thread / 32) take the output's 16 x 8 tiles in turn (2 of S, 8
// of O, four warps), each accumulates over the contracted dimension in k
// steps of 8, with its fragments read straight from the shared-memory tiles
// (rows g and g + 8, columns t and t + 4), and stores its accumulator. A
// bf16 kernel takes one tf32 product (fp32 kernels three). The softmax's
// row reductions ([16, 16] -> [16]) are not matmuls: they stay generics.

// CHECK-LABEL: func.func private @kda_window_attention_kernel
// CHECK: %[[TID:.*]] = gpu.thread_id  x
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// CHECK: scf.for %{{.*}} = %[[WARP]] to %c2 step %c4
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<2x2xf32>)
// CHECK: memref.load %{{.*}} : memref<16x64xf32>
// CHECK: nvgpu.mma.sync(%{{.*}}, %{{.*}}, %{{.*}}) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK-NOT: nvgpu.mma.sync
// CHECK: memref.store %{{.*}} : memref<16x16xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8 step %c4
// CHECK: nvgpu.mma.sync
// CHECK-NOT: nvgpu.mma.sync
// CHECK: memref.store %{{.*}} : memref<16x64xf32>
// CHECK: return

// AMD CDNA (wave64, 256 threads: four waves): v_mfma_f32_16x16x4f32 on fp32
// operands. RDNA3: WMMA on bf16 operands (a 16-bit kernel).
// MFMA: arith.divui %{{.*}}, %c64
// MFMA: amdgpu.mfma 16x16x4
// MFMA: amdgpu.mfma 16x16x4
// MFMA-NOT: amdgpu.mfma
// WMMA: amdgpu.wmma 16x16x16 {{.*}} : vector<16xbf16>, vector<16xbf16>, vector<8xf32>
// WMMA: amdgpu.wmma 16x16x16
// WMMA-NOT: amdgpu.wmma

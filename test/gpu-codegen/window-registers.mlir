// RUN: kda-opt %s --kda-gpu-window-registers --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kda-opt %s --kda-gpu-window-registers --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=COUNT
// RUN: kda-opt %s --kda-gpu-window-registers --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=AMD

// kda-gpu-window-registers on its own input: a bufferized window kernel
// that kda-gpu-select-strategy gave lanes. Its program grid (sequence,
// head) becomes the lane kernel's (query block, head, sequence): 4 warps
// per 64 queries, K and V blocks of 64 keys copied by cp.async into two
// stages of shared memory (rows padded by 8 elements; one block in flight
// while the other is multiplied, one barrier per block), products on
// mma.sync m16n8k16 with bf16 operands (the strategy's instruction
// mma_sync, or none given), K through ldmatrix and V through
// ldmatrix.trans, the softmax in base 2 with exp2 as ex2.approx.ftz. Two
// forms of the key step: the interior (no mask) and the edge.

// CHECK-LABEL: func.func @kda_window_attention_kernel
// CHECK-SAME: kda.block_threads = 128 : i64, kda.explicit_threads
// CHECK: %[[T:.*]] = memref.dim %arg0, %c1
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %[[T]], %c64
// CHECK: %[[HO:.*]] = memref.dim %arg3, %c2
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%[[BLOCKS]], %[[HO]], %[[B]])
// CHECK: gpu.thread_id x
// CHECK: memref.alloc() : memref<2x64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.alloc() : memref<2x64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.collapse_shape %arg1 {{\[\[}}0, 1, 2, 3]]
// CHECK: memref.collapse_shape %arg2 {{\[\[}}0, 1, 2, 3]]
// CHECK: nvgpu.device_async_copy {{.*}}, 8, {{.*}} {bypassL1}
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.if
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// CHECK-SAME: multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK-SAME: shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: } else {
// CHECK-NOT: gpu.barrier
// CHECK: vector.store
// Per branch, 64 products for Q K^T (8 k steps x 8 key tiles) and 64 for
// P V (4 x 16), 32 + 32 ldmatrix x4.
// COUNT-LABEL: func.func @kda_window_attention_kernel
// COUNT-COUNT-256: nvvm.mma.sync
// COUNT-NOT: nvvm.mma.sync
// COUNT-LABEL: func.func @varlen_per_position
func.func @kda_window_attention_kernel(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>, %o: memref<?x?x?x128xbf16>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 128], name = "q"}, {dims = ["B", "T", "HK", 128], name = "k"}, {dims = ["B", "T", "HV", 128], name = "v"}, {dims = ["B", "T", "HO", 128], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes">, kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 128, window = 512, scale = 0.088388347648318433 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x128xbf16>
  %h = memref.dim %o, %c2 : memref<?x?x?x128xbf16>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// Varlen with per-position windows: N + 1 sequences launched (the extra one
// skipped), each program's first key block the least of its rows' (a walk
// over their window_sizes), every key block masked.
// CHECK-LABEL: func.func @varlen_per_position
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %[[SEQ:[a-z0-9_]+]]) in (%{{.*}}, %{{.*}}, %[[N:[a-z0-9_]+]])
// CHECK: arith.cmpi ult, %[[SEQ]], %[[N]]
// CHECK: memref.load %arg4
// CHECK: memref.load %arg5
// CHECK: scf.for {{.*}} iter_args
// CHECK: memref.load %arg5
// CHECK: arith.minui
// CHECK: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
func.func @varlen_per_position(%q: memref<1x?x?x64xf16>, %k: memref<1x?x?x64xf16>, %v: memref<1x?x?x64xf16>, %o: memref<1x?x?x64xf16>, %cu: memref<?xi64>, %sizes: memref<?xi64>) attributes {kda.abi = [{dims = [1, "T", "HQ", 64], name = "q"}, {dims = [1, "T", "HK", 64], name = "k"}, {dims = [1, "T", "HV", 64], name = "v"}, {dims = [1, "T", "HO", 64], name = "o"}, {dims = ["N+1"], name = "cu_seqlens"}, {dims = ["T"], name = "window_sizes"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes">, kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 0, scale = 0.125 : f64, varlen = true>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n1 = memref.dim %cu, %c0 : memref<?xi64>
  %n = arith.subi %n1, %c1 : index
  %h = memref.dim %o, %c2 : memref<1x?x?x64xf16>
  scf.forall (%s, %head) in (%n, %h) {
  }
  return
}

// -----

// The strategy's instruction wgmma (sm_90a, K and V multiples of 64): K and
// V blocks in one flat buffer, 1024 bytes over so that the blocks start at
// a multiple of 1024 (the 128-byte swizzle is a function of the address),
// made visible to the async proxy before the barrier; Q K^T as eight
// m64n64k16 (K-major B: trans-b 0) and P V as four m64n128k16 (N-major:
// trans-b 1), A from registers, each product fenced, committed and waited
// for. Per branch 12 wgmma; no mma.sync, no ldmatrix.
// CHECK-LABEL: func.func @wgmma
// CHECK: memref.alloc() : memref<33280xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: arith.andi {{.*}} : i32
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 0;"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 1;"
// COUNT-LABEL: func.func @wgmma
// COUNT-COUNT-24: llvm.inline_asm has_side_effects "wgmma.mma_async
// COUNT-NOT: nvvm.mma.sync
// COUNT-NOT: nvgpu.ldmatrix
// COUNT: return
func.func @wgmma(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>, %o: memref<?x?x?x128xbf16>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 128], name = "q"}, {dims = ["B", "T", "HK", 128], name = "k"}, {dims = ["B", "T", "HV", 128], name = "v"}, {dims = ["B", "T", "HO", 128], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma">, kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 128, window = 512, scale = 0.088388347648318433 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x128xbf16>
  %h = memref.dim %o, %c2 : memref<?x?x?x128xbf16>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// Heads of 256 on wgmma: Q too is copied into the swizzle (before the
// stages: 64 x 256 + 2 x 64 x (256 + 256) elements, plus the alignment pad)
// and read by a descriptor: Q K^T takes both operands from shared memory,
// P V (m64n256k16) A from registers. Rows of 256 are copied as two halves
// of 128 per thread.
// CHECK-LABEL: func.func @wgmma_d256
// CHECK: memref.alloc() : memref<82432xbf16, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}}, $32, $33, 1, 1, 1, 0, 0;"
// CHECK: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}}, {$128,$129,$130,$131}, $132, 1, 1, 1, 1;"
func.func @wgmma_d256(%q: memref<?x?x?x256xbf16>, %k: memref<?x?x?x256xbf16>, %v: memref<?x?x?x256xbf16>, %o: memref<?x?x?x256xbf16>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 256], name = "q"}, {dims = ["B", "T", "HK", 256], name = "k"}, {dims = ["B", "T", "HV", 256], name = "v"}, {dims = ["B", "T", "HO", 256], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma">, kda.window_pass = #kda.window_pass<key_dim = 256, value_dim = 256, window = 512, scale = 0.0625 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x256xbf16>
  %h = memref.dim %o, %c2 : memref<?x?x?x256xbf16>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// AMD's units (the strategy's instruction mfma / wmma): each wave its own
// 16 queries, every product transposed (S^T = K Q^T, then O^T += V^T P^T:
// P^T, S^T's accumulator, is MFMA's B operand where it is), K and V blocks
// by plain copies, V stored transposed (the fragments read consecutive
// keys as one vector), no cp.async, ldmatrix or NVVM, exp2 left to the
// chip. MFMA at K = V = 128: 4 waves of 64 (256 threads), one stage (two
// would exceed 64 KB of LDS) and so two barriers a block; Q in registers
// as the B operand; 32 + 32 products of 16 x 16 x 16 (the key block's 4
// tiles x 8 k steps, then 8 V tiles x 4 key steps).
// AMD-LABEL: func.func @mfma
// AMD-SAME: kda.block_threads = 256 : i64
// AMD: memref.alloc() : memref<1x64x136xbf16, #gpu.address_space<workgroup>>
// AMD: memref.alloc() : memref<1x128x72xbf16, #gpu.address_space<workgroup>>
// AMD: scf.for
// AMD: gpu.barrier
// AMD: memref.store {{.*}} : memref<1x128x72xbf16, #gpu.address_space<workgroup>>
// AMD: gpu.barrier
// AMD: vector.load {{.*}} {alignment = 8 : i64} : memref<1x64x136xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// AMD-COUNT-64: amdgpu.mfma 16x16x16
// AMD-NOT: amdgpu.mfma
// AMD-NOT: nvgpu.
// AMD-NOT: nvvm.
// AMD-LABEL: func.func @wmma
func.func @mfma(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>, %o: memref<?x?x?x128xbf16>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 128], name = "q"}, {dims = ["B", "T", "HK", 128], name = "k"}, {dims = ["B", "T", "HV", 128], name = "v"}, {dims = ["B", "T", "HO", 128], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "mfma">, kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 128, window = 512, scale = 0.088388347648318433 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x128xbf16>
  %h = memref.dim %o, %c2 : memref<?x?x?x128xbf16>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// WMMA (gfx1100) at K = V = 64, fp16: 4 waves of 32, two stages, each
// wave's Q in LDS (WMMA's operands hold every element twice: in registers
// for the whole block it spilled), one barrier a block, 16 + 16 products.
// AMD-SAME: kda.block_threads = 128 : i64
// AMD: memref.alloc() : memref<2x64x72xf16, #gpu.address_space<workgroup>>
// AMD: memref.alloc() : memref<2x64x72xf16, #gpu.address_space<workgroup>>
// AMD: memref.alloc() : memref<4x16x72xf16, #gpu.address_space<workgroup>>
// AMD: scf.for
// AMD: gpu.barrier
// AMD-NOT: gpu.barrier
// AMD-COUNT-32: amdgpu.wmma 16x16x16
// AMD-NOT: amdgpu.wmma
// AMD-NOT: gpu.barrier
// AMD-LABEL: func.func @tiles
func.func @wmma(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 64], name = "q"}, {dims = ["B", "T", "HK", 64], name = "k"}, {dims = ["B", "T", "HV", 64], name = "v"}, {dims = ["B", "T", "HO", 64], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wmma">, kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 100, scale = 0.125 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x64xf16>
  %h = memref.dim %o, %c2 : memref<?x?x?x64xf16>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// The tile strategy (fp32 here) leaves the kernel alone.
// CHECK-LABEL: func.func @tiles
// CHECK-NOT: kda.explicit_threads
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in
// CHECK-NOT: nvvm.mma.sync
func.func @tiles(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>) attributes {kda.abi = [{dims = ["B", "T", "HQ", 64], name = "q"}, {dims = ["B", "T", "HK", 64], name = "k"}, {dims = ["B", "T", "HV", 64], name = "v"}, {dims = ["B", "T", "HO", 64], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "q, k and v are not all bf16 or all fp16">, kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 7, scale = 0.125 : f64, varlen = false>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %o, %c0 : memref<?x?x?x64xf32>
  %h = memref.dim %o, %c2 : memref<?x?x?x64xf32>
  scf.forall (%n, %head) in (%b, %h) {
  }
  return
}

// -----

// Lanes without the arguments the description names: an error, not a
// kernel that reads nothing.
// expected-error @+1 {{kda-gpu-window-registers: the window kernel lacks an argument its description names}}
func.func @missing_cu(%q: memref<1x?x?x64xbf16>, %k: memref<1x?x?x64xbf16>, %v: memref<1x?x?x64xbf16>, %o: memref<1x?x?x64xbf16>) attributes {kda.abi = [{dims = [1, "T", "HQ", 64], name = "q"}, {dims = [1, "T", "HK", 64], name = "k"}, {dims = [1, "T", "HV", 64], name = "v"}, {dims = [1, "T", "HO", 64], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes">, kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 16, scale = 0.125 : f64, varlen = true>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %h = memref.dim %o, %c2 : memref<1x?x?x64xbf16>
  %one = arith.constant 1 : index
  scf.forall (%n, %head) in (%one, %h) {
  }
  return
}

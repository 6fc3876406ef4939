// RUN: kda-opt %s --kda-gpu-select-strategy="remarks=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: kda-opt %s --kda-gpu-select-strategy | FileCheck %s
// RUN: kda-opt %s --kda-gpu-select-strategy="nvidia=false warp-size=64 instructions=mfma" | FileCheck %s --check-prefix=AMD
// RUN: kda-opt %s --kda-gpu-select-strategy="nvidia=false warp-size=32 instructions=wmma shared-memory=65536" | FileCheck %s --check-prefix=WMMA
// RUN: kda-opt %s --kda-gpu-select-strategy="intra-registers=false decode-registers=false window-registers=false" | FileCheck %s --check-prefix=OFF
// RUN: kda-opt %s --kda-gpu-select-strategy 2>&1 >/dev/null | FileCheck %s --allow-empty --check-prefix=QUIET
// RUN: kda-opt %s --kda-gpu-select-strategy="wgmma=true" | FileCheck %s --check-prefix=HOPPER
// RUN: kda-opt %s --kda-gpu-select-strategy="threads=256" | FileCheck %s --check-prefix=WARPS8

// kda-gpu-select-strategy decides, for every kernel function (kda.kernel),
// whether it is written per lane or as shared-memory tiles, from the target
// and the kernel's description, and records it (kda.strategy). Kernels of a
// kda op that get tiles are named in a remark (with remarks=true, as
// kda-compile asks), with the reason and the fix; elementwise kernels are
// tile programs by design and get no remark. The kernels' bodies do not
// matter here: only their descriptions.

// The intra-chunk grid at chunk 16 (one sub-chunk): lanes, whatever the gate.
// CHECK-LABEL: func.func @intra16
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", instruction = "mma_sync", program = "derived">
// AMD-LABEL: func.func @intra16
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", instruction = "mfma", program = "derived">
// WMMA-LABEL: func.func @intra16
// WMMA-SAME: kind = "lanes", instruction = "wmma"
// OFF-LABEL: func.func @intra16
// OFF-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "tiles", reason = "switched off (intra-registers=false)">
func.func @intra16() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.088388347648318433 : f64>>} {
  return
}

// Chunk 64 in one program (tiled without sub-chunk-steps, as kda-opt may):
// the register program is one sub-chunk of 16.
// REMARK: select-strategy.mlir:[[@LINE+3]]:1: remark: kda-gpu-select-strategy: the intra kernel 'intra64' takes the shared-memory tile lowering, several times slower than lanes: chunk 64 with sub-chunk 16: the register program is one sub-chunk of 16 (chunks of 32 and 64 with sub_chunk=16 reach it as sub-chunk steps, kda-tile-chunks' sub-chunk-steps); fix: tile with sub-chunks of 16 and sub-chunk-steps (kda-compile: --sub-chunk=16, the default), or accept the tile lowering
// CHECK-LABEL: func.func @intra64
// CHECK-SAME: kind = "tiles", reason = "chunk 64 with sub-chunk 16
func.func @intra64() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 64, tile_chunk = 64, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.088388347648318433 : f64>>} {
  return
}

// K = V = 80 do not split over 4 warps: the fix is padding, not sub-chunks.
// REMARK: select-strategy.mlir:[[@LINE+3]]:1: remark: kda-gpu-select-strategy: the intra kernel 'intra_k80' takes the shared-memory tile lowering, several times slower than lanes: K = 80 and V = 80 do not split over 4 warps (K a multiple of 32 and V of 32 at 4 warps: whole mma.sync steps per warp, an even number of key columns per lane); fix: pad K to a multiple of 32 and V to a multiple of 32 with zero columns, or use fewer threads per block (q, k and gate columns of zeros leave the output unchanged; slice the padded value columns off), or accept the tile lowering
// CHECK-LABEL: func.func @intra_k80
// CHECK-SAME: kind = "tiles", reason = "K = 80 and V = 80 do not split over 4 warps
func.func @intra_k80() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 80, value_dim = 80, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.11180339887498948 : f64>>} {
  return
}

// K = 64: lanes at 4 warps; at 8 warps (256 threads, the gradient's
// modules) a product contracted over K would give each warp 8 columns, less
// than one m16n8k16 step: the lane program failed there, so it is refused.
// CHECK-LABEL: func.func @intra_k64
// CHECK-SAME: kind = "lanes"
// WARPS8-LABEL: func.func @intra16
// WARPS8-SAME: kind = "lanes"
// WARPS8-LABEL: func.func @intra_k64
// WARPS8-SAME: kind = "tiles", reason = "K = 64 and V = 64 do not split over 8 warps (K a multiple of 128 and V of 64 at 8 warps
func.func @intra_k64() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 64, value_dim = 64, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.125 : f64>>} {
  return
}

// The op's chunk 64 tiled as sub-chunk steps of 16 (tile_chunk): lanes, and
// the strategy records the step the kernel takes.
// CHECK-LABEL: func.func @intra64steps
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", step = 16, tile_chunk = 64, instruction = "mma_sync", program = "derived">
func.func @intra64steps() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 64, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.088388347648318433 : f64>>} {
  return
}

// The state grid: V blocks of 16 take lanes, V blocks of 8 do not. The one
// program is emitStateStep on lane tiles (derived), with the strategy's
// chunks in flight.
// CHECK-LABEL: func.func @state16
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "state", kind = "lanes", instruction = "mma_sync", program = "derived", stages = 2>
// On AMD the same program on the chip's matrix unit (MFMA here).
// AMD-LABEL: func.func @state16
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "state", kind = "lanes", instruction = "mfma", program = "derived", stages = 2>
func.func @state16() attributes {kda.kernel, kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 16, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, 4, 8]>} {
  return
}
// REMARK: remark: kda-gpu-select-strategy: the state kernel 'state8' takes the shared-memory tile lowering, several times slower than lanes: V block 8, K 128, chunk 16: V blocks, K and chunks multiples of 16, chunks up to 64; fix: compile with a V block of 16 or 32 (--v-block) and a chunk of 16, 32 or 64 (--chunk)
// CHECK-LABEL: func.func @state8
// CHECK-SAME: kind = "tiles"
func.func @state8() attributes {kda.kernel, kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 8, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, 4, 16]>} {
  return
}

// A gradient's reverse scan (kda.reverse_pass, the state grid it transposes):
// the state program run backwards, on lanes where the state grid would be;
// tiles on AMD and for V blocks the state program does not take, with the
// reason.
// CHECK-LABEL: func.func @reverse16
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "reverse", kind = "lanes", instruction = "mma_sync", program = "derived", stages = 2>
// AMD-LABEL: func.func @reverse16
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "reverse", kind = "tiles", reason = "AMD targets have no lane kernel for the gradient's reverse scan yet
// OFF-LABEL: func.func @reverse16
// OFF-SAME: kind = "lanes"
func.func @reverse16() attributes {kda.kernel, kda.reverse_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 16, v_major = true, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 8]>} {
  return
}
// REMARK: remark: kda-gpu-select-strategy: the reverse kernel 'reverse8' takes the shared-memory tile lowering, several times slower than lanes: V block 8, K 128, chunk 16: V blocks, K and chunks multiples of 16, chunks up to 64; fix: compile the gradient with a V block of 16 or 32 and a chunk of 16, 32 or 64
// CHECK-LABEL: func.func @reverse8
// CHECK-SAME: kernel = "reverse", kind = "tiles"
func.func @reverse8() attributes {kda.kernel, kda.reverse_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 8, v_major = true, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 16]>} {
  return
}

// Decode steps: lanes on any vendor where K and V split over a warp.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "decode", kind = "lanes", program = "derived">
// AMD-LABEL: func.func @decode
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "decode", kind = "lanes", program = "derived">
// OFF-LABEL: func.func @decode
// OFF-SAME: reason = "switched off (decode-registers=false)"
func.func @decode() attributes {kda.kernel, kda.decode_pass = #kda.decode_pass<key_dim = 128, value_dim = 128, v_major = false, multi_token = false, prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.088388347648318433 : f64>>} {
  return
}
// REMARK: remark: kda-gpu-select-strategy: the decode kernel 'decode_k20' takes the shared-memory tile lowering, several times slower than lanes: K = 20, V = 128 (K-major) do not split over a warp of 32 lanes with 4 value columns per lane; fix: K and V multiples of 32 take the register decode kernel
func.func @decode_k20() attributes {kda.kernel, kda.decode_pass = #kda.decode_pass<key_dim = 20, value_dim = 128, v_major = false, multi_token = false, prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.2 : f64>>} {
  return
}

// Window attention: lanes for bf16 / fp16 q, k, v with K and V multiples of
// 16 up to 128 (mma.sync); fp32 (its 1e-4 bar), wider heads and AMD keep
// tiles, named in a remark.
// CHECK-LABEL: func.func @window_bf16
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "mma_sync", program = "derived">
// HOPPER-LABEL: func.func @window_bf16
// HOPPER-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma", program = "derived">
// AMD-LABEL: func.func @window_bf16
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "mfma", program = "derived">
// WMMA-LABEL: func.func @window_bf16
// WMMA-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wmma", program = "derived">
// OFF-LABEL: func.func @window_bf16
// OFF-SAME: reason = "switched off (window-registers=false)"
func.func @window_bf16(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) attributes {kda.kernel, kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 128, window = 512, scale = 0.088388347648318433 : f64, varlen = false>} {
  return
}
// On a chip with wgmma, window kernels whose K or V is not a multiple of 64
// (the swizzled shared tiles' blocks) keep mma.sync.
// HOPPER-LABEL: func.func @window_k32
// HOPPER-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "mma_sync", program = "derived">
func.func @window_k32(%q: tensor<?x?x?x32xbf16>, %k: tensor<?x?x?x32xbf16>, %v: tensor<?x?x?x32xbf16>) attributes {kda.kernel, kda.window_pass = #kda.window_pass<key_dim = 32, value_dim = 32, window = 64, scale = 0.17677669529663687 : f64, varlen = false>} {
  return
}

// REMARK: remark: kda-gpu-select-strategy: the window kernel 'window_f32' takes the shared-memory tile lowering, several times slower than lanes: q, k and v are not all bf16 or all fp16
// CHECK-LABEL: func.func @window_f32
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "tiles"
func.func @window_f32(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>) attributes {kda.kernel, kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 64, scale = 0.125 : f64, varlen = false>} {
  return
}
// REMARK: remark: kda-gpu-select-strategy: the window kernel 'window_k256' takes the shared-memory tile lowering, several times slower than lanes: K = 256, V = 256 are not multiples of 16 up to 128
// On a chip with wgmma, heads of 256 take lanes (Q in shared memory too).
// HOPPER-LABEL: func.func @window_k256
// HOPPER-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma", program = "derived">
// AMD-LABEL: func.func @window_k256
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "mfma", program = "derived">
// WMMA-LABEL: func.func @window_k256
// WMMA-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "K = 256, V = 256 are not multiples of 16 up to 128
// CHECK-LABEL: func.func @window_k256
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "tiles"
func.func @window_k256(%q: tensor<?x?x?x256xf16>, %k: tensor<?x?x?x256xf16>, %v: tensor<?x?x?x256xf16>) attributes {kda.kernel, kda.window_pass = #kda.window_pass<key_dim = 256, value_dim = 256, window = 64, scale = 0.0625 : f64, varlen = true>} {
  return
}

// AMD's intra kernel takes every gate (@intra16 above: log-space g, its
// decays factored per group of keys on the unit) where its shared memory
// fits the chip: K = V = 128 on gfx942's MFMA; K = V = 256 on gfx1100's
// WMMA (4 warps of 32) would need 67072 bytes of its 65536.
// AMD-LABEL: func.func @intra_lb128
// AMD-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", instruction = "mfma", program = "derived">
// WMMA-LABEL: func.func @intra_lb128
// WMMA-SAME: kind = "lanes", instruction = "wmma"
// WMMA-LABEL: func.func @intra_lb256
// WMMA-SAME: kind = "tiles", reason = "its shared memory (67072 bytes at K = 256, V = 256) exceeds the chip's 65536"
func.func @intra_lb128() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = lower_bound, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = sigmoid, l2norm = true, scale = 0.088388347648318433 : f64>>} {
  return
}
func.func @intra_lb256() attributes {kda.kernel, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 256, value_dim = 256, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = lower_bound, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = sigmoid, l2norm = true, scale = 0.0625 : f64>>} {
  return
}

// Elementwise kernels are tiles without a remark; functions that are not
// kernels are left alone.
// REMARK-NOT: remark
// CHECK-LABEL: func.func @kda_mix_kernel
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "elementwise", kind = "tiles"
// CHECK-LABEL: func.func @host
// CHECK-NOT: kda.strategy
func.func @kda_mix_kernel() attributes {kda.kernel} {
  return
}
func.func @host() {
  return
}

// Without remarks=true the decisions are recorded and nothing is said.
// QUIET-NOT: remark


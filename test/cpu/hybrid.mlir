// Hybrids (linear + window attention, summed or gated with head-wise and
// channel-wise gates), multi-scale states (scaled decays and separate gates),
// and a standalone kda.gate folded into the recurrence by kda-fuse-prologue.
// RUN: kda-run %s --function=sum_linear_window --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=gated_head --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gated_channel_bf16 --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=gated_twelve_heads --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=sum_three_twelve_heads --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gated_per_position_varlen --chunk=16 --seqlens=30,1,59 --check | FileCheck %s
// RUN: kda-run %s --function=multi_scale_decays --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=multi_scale_gated --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gate_then_recurrence --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=gate_alone --check | FileCheck %s
// RUN: kda-run %s --function=gated_overlap --chunk=16 --check | FileCheck %s
// A layer's piece (kda.tune.hybrid_pieces_config's form): the gated delta part from a state to
// a state, the window over earlier keys of its own k and v (S = 200 rows for T = 130).
// RUN: kda-run %s --function=gated_pieces_form --chunk=16 --check | FileCheck %s --check-prefixes=CHECK,STATE
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL
// STATE: result 1: {{.*}} ok

func.func @sum_linear_window(%q: tensor<1x90x2x32xf32>, %k: tensor<1x90x2x32xf32>, %v: tensor<1x90x2x16xf32>, %g: tensor<1x90x2x32xf32>, %b: tensor<1x90x2xf32>) -> tensor<1x90x2x16xf32> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x90x2x32xf32>) beta(%b : tensor<1x90x2xf32>) : tensor<1x90x2x32xf32>, tensor<1x90x2x32xf32>, tensor<1x90x2x16xf32> -> tensor<1x90x2x16xf32>
  %win = kda.window_attention %q, %k, %v {window = 16 : i64} : tensor<1x90x2x32xf32>, tensor<1x90x2x32xf32>, tensor<1x90x2x16xf32> -> tensor<1x90x2x16xf32>
  %o = kda.hybrid sum %lin, %win : tensor<1x90x2x16xf32>, tensor<1x90x2x16xf32> -> tensor<1x90x2x16xf32>
  return %o : tensor<1x90x2x16xf32>
}

func.func @gated_head(%q: tensor<1x70x2x32xf32>, %k: tensor<1x70x2x32xf32>, %v: tensor<1x70x4x16xf32>, %g: tensor<1x70x4xf32>, %b: tensor<1x70x4xf32>, %z: tensor<1x70x4xf32>) -> tensor<1x70x4x16xf32> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x4xf32>) beta(%b : tensor<1x70x4xf32>) : tensor<1x70x2x32xf32>, tensor<1x70x2x32xf32>, tensor<1x70x4x16xf32> -> tensor<1x70x4x16xf32>
  %win = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<1x70x2x32xf32>, tensor<1x70x2x32xf32>, tensor<1x70x4x16xf32> -> tensor<1x70x4x16xf32>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x70x4xf32>) : tensor<1x70x4x16xf32>, tensor<1x70x4x16xf32> -> tensor<1x70x4x16xf32>
  return %o : tensor<1x70x4x16xf32>
}

func.func @gated_channel_bf16(%q: tensor<2x64x2x32xbf16>, %k: tensor<2x64x2x32xbf16>, %v: tensor<2x64x2x32xbf16>, %g: tensor<2x64x2x32xf32>, %b: tensor<2x64x2xf32>, %z: tensor<2x64x2x32xf32>) -> tensor<2x64x2x32xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x2x32xf32>) beta(%b : tensor<2x64x2xf32>) : tensor<2x64x2x32xbf16>, tensor<2x64x2x32xbf16>, tensor<2x64x2x32xbf16> -> tensor<2x64x2x32xbf16>
  %win = kda.window_attention %q, %k, %v {window = 20 : i64} : tensor<2x64x2x32xbf16>, tensor<2x64x2x32xbf16>, tensor<2x64x2x32xbf16> -> tensor<2x64x2x32xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<2x64x2x32xf32>) : tensor<2x64x2x32xbf16>, tensor<2x64x2x32xbf16> -> tensor<2x64x2x32xbf16>
  return %o : tensor<2x64x2x32xbf16>
}

// Twelve heads of V = 128: the mix in the window's epilogue
// (kda-fuse-window-mix); test/emulate/forward.test runs it on the emulator.
func.func @gated_twelve_heads(%q: tensor<1x20x12x16xbf16>, %k: tensor<1x20x12x16xbf16>, %v: tensor<1x20x12x128xbf16>, %g: tensor<1x20x12x16xf32>, %b: tensor<1x20x12xf32>, %z: tensor<1x20x12xf32>) -> tensor<1x20x12x128xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x20x12x16xf32>) beta(%b : tensor<1x20x12xf32>) : tensor<1x20x12x16xbf16>, tensor<1x20x12x16xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  %win = kda.window_attention %q, %k, %v {window = 5 : i64} : tensor<1x20x12x16xbf16>, tensor<1x20x12x16xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x20x12xf32>) : tensor<1x20x12x128xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  return %o : tensor<1x20x12x128xbf16>
}

// A sum of three branches stays an elementwise kernel (on the GPU, one
// program a row of 12 heads of V = 128).
func.func @sum_three_twelve_heads(%q: tensor<1x20x12x16xbf16>, %k: tensor<1x20x12x16xbf16>, %v: tensor<1x20x12x128xbf16>, %g: tensor<1x20x12x16xf32>, %b: tensor<1x20x12xf32>) -> tensor<1x20x12x128xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x20x12x16xf32>) beta(%b : tensor<1x20x12xf32>) : tensor<1x20x12x16xbf16>, tensor<1x20x12x16xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  %w0 = kda.window_attention %q, %k, %v {window = 5 : i64} : tensor<1x20x12x16xbf16>, tensor<1x20x12x16xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  %w1 = kda.window_attention %q, %k, %v {window = 2 : i64} : tensor<1x20x12x16xbf16>, tensor<1x20x12x16xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  %o = kda.hybrid sum %lin, %w0, %w1 : tensor<1x20x12x128xbf16>, tensor<1x20x12x128xbf16>, tensor<1x20x12x128xbf16> -> tensor<1x20x12x128xbf16>
  return %o : tensor<1x20x12x128xbf16>
}

// Per-position windows over packed sequences, the gated mix fused into the
// window (kda-fuse-window-mix): the epilogue's rows are the sequences'.
func.func @gated_per_position_varlen(%q: tensor<1x90x2x32xbf16>, %k: tensor<1x90x2x32xbf16>, %v: tensor<1x90x2x32xbf16>, %g: tensor<1x90x2x32xf32>, %b: tensor<1x90x2xf32>, %w: tensor<90xi32>, %cu: tensor<4xi32>, %z: tensor<1x90x2xf32>) -> tensor<1x90x2x32xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x90x2x32xf32>) beta(%b : tensor<1x90x2xf32>) cu_seqlens(%cu : tensor<4xi32>) : tensor<1x90x2x32xbf16>, tensor<1x90x2x32xbf16>, tensor<1x90x2x32xbf16> -> tensor<1x90x2x32xbf16>
  %win = kda.window_attention %q, %k, %v window_sizes(%w : tensor<90xi32>) cu_seqlens(%cu : tensor<4xi32>) : tensor<1x90x2x32xbf16>, tensor<1x90x2x32xbf16>, tensor<1x90x2x32xbf16> -> tensor<1x90x2x32xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x90x2xf32>) : tensor<1x90x2x32xbf16>, tensor<1x90x2x32xbf16> -> tensor<1x90x2x32xbf16>
  return %o : tensor<1x90x2x32xbf16>
}

func.func @multi_scale_decays(%q: tensor<1x80x2x32xf32>, %k: tensor<1x80x2x32xf32>, %v: tensor<1x80x2x16xf32>, %g: tensor<1x80x2x32xf32>, %b: tensor<1x80x2xf32>, %s0: tensor<3x1x2x32x16xf32>) -> (tensor<1x80x2x16xf32>, tensor<3x1x2x32x16xf32>) {
  %o, %s = kda.multi_scale delta sum %q, %k, %v gates(%g : tensor<1x80x2x32xf32>) beta(%b : tensor<1x80x2xf32>) initial_states(%s0 : tensor<3x1x2x32x16xf32>) {decay_scales = [1.0, 0.5, 0.0]} : tensor<1x80x2x32xf32>, tensor<1x80x2x32xf32>, tensor<1x80x2x16xf32> -> tensor<1x80x2x16xf32> final_states tensor<3x1x2x32x16xf32>
  return %o, %s : tensor<1x80x2x16xf32>, tensor<3x1x2x32x16xf32>
}

func.func @multi_scale_gated(%q: tensor<1x50x2x32xf32>, %k: tensor<1x50x2x32xf32>, %v: tensor<1x50x2x16xf32>, %g0: tensor<1x50x2xf32>, %g1: tensor<1x50x2xf32>, %b: tensor<1x50x2xf32>, %z: tensor<1x50x2x2xf32>) -> tensor<1x50x2x16xf32> {
  %o = kda.multi_scale delta gated %q, %k, %v gates(%g0, %g1 : tensor<1x50x2xf32>, tensor<1x50x2xf32>) beta(%b : tensor<1x50x2xf32>) z(%z : tensor<1x50x2x2xf32>) : tensor<1x50x2x32xf32>, tensor<1x50x2x32xf32>, tensor<1x50x2x16xf32> -> tensor<1x50x2x16xf32>
  return %o : tensor<1x50x2x16xf32>
}

func.func @gate_then_recurrence(%q: tensor<1x60x2x32xf32>, %k: tensor<1x60x2x32xf32>, %v: tensor<1x60x2x16xf32>, %graw: tensor<1x60x2x32xf32>, %a: tensor<2xf32>, %d: tensor<2x32xf32>, %b: tensor<1x60x2xf32>) -> tensor<1x60x2x16xf32> {
  %g = kda.gate lower_bound channel %graw A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x32xf32>) {lower_bound = -3.0 : f64} : tensor<1x60x2x32xf32> -> tensor<1x60x2x32xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x60x2x32xf32>) beta(%b : tensor<1x60x2xf32>) : tensor<1x60x2x32xf32>, tensor<1x60x2x32xf32>, tensor<1x60x2x16xf32> -> tensor<1x60x2x16xf32>
  return %o : tensor<1x60x2x16xf32>
}

func.func @gate_alone(%graw: tensor<1x60x4xbf16>, %a: tensor<4xf32>, %d: tensor<4xf32>) -> tensor<1x60x4xf32> {
  %g = kda.gate softplus head %graw A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4xf32>) : tensor<1x60x4xbf16> -> tensor<1x60x4xf32>
  return %g : tensor<1x60x4xf32>
}

// The overlap schedule (kda.hybrid {overlap}): on the CPU the fused mix as
// any other; on NVIDIA's register kernels the state pass publishes its
// progress (every 16 chunks and at its end) and the window waits for it
// before it reads the rows it mixes (kda-gpu-layer-entry's clones).
func.func @gated_overlap(%q: tensor<1x300x2x64xbf16>, %k: tensor<1x300x2x64xbf16>, %v: tensor<1x300x2x64xbf16>, %g: tensor<1x300x2x64xf32>, %b: tensor<1x300x2xf32>, %z: tensor<1x300x2xf32>) -> tensor<1x300x2x64xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x300x2x64xf32>) beta(%b : tensor<1x300x2xf32>) : tensor<1x300x2x64xbf16>, tensor<1x300x2x64xbf16>, tensor<1x300x2x64xbf16> -> tensor<1x300x2x64xbf16>
  %win = kda.window_attention %q, %k, %v {window = 40 : i64} : tensor<1x300x2x64xbf16>, tensor<1x300x2x64xbf16>, tensor<1x300x2x64xbf16> -> tensor<1x300x2x64xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x300x2xf32>) {overlap} : tensor<1x300x2x64xbf16>, tensor<1x300x2x64xbf16> -> tensor<1x300x2x64xbf16>
  return %o : tensor<1x300x2x64xbf16>
}

func.func @gated_pieces_form(%q: tensor<1x130x2x64xbf16>, %k: tensor<1x130x2x64xbf16>, %v: tensor<1x130x2x64xbf16>, %g: tensor<1x130x2x64xbf16>, %b: tensor<1x130x2xbf16>, %h0: tensor<1x2x64x64xf32>, %z: tensor<1x130x2xbf16>, %wk: tensor<1x200x2x64xbf16>, %wv: tensor<1x200x2x64xbf16>) -> (tensor<1x130x2x64xbf16>, tensor<1x2x64x64xf32>) {
  %lin, %ht = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x130x2x64xbf16>) beta(%b : tensor<1x130x2xbf16>) initial_state(%h0 : tensor<1x2x64x64xf32>) : tensor<1x130x2x64xbf16>, tensor<1x130x2x64xbf16>, tensor<1x130x2x64xbf16> -> tensor<1x130x2x64xbf16> final_state tensor<1x2x64x64xf32>
  %win = kda.window_attention %q, %wk, %wv {window = 64 : i64, earlier_keys} : tensor<1x130x2x64xbf16>, tensor<1x200x2x64xbf16>, tensor<1x200x2x64xbf16> -> tensor<1x130x2x64xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x130x2xbf16>) : tensor<1x130x2x64xbf16>, tensor<1x130x2x64xbf16> -> tensor<1x130x2x64xbf16>
  return %o, %ht : tensor<1x130x2x64xbf16>, tensor<1x2x64x64xf32>
}

// The gradient of kda.gated_delta, derived from the forward algorithm
// (passes/GatedDeltaBackward.h: each chunk's step recomputed under a tape of
// its tile primitives and its adjoint emitted, passes/TileAdjoint.h),
// compiled for the CPU and run: every input's gradient against the float64
// oracle's (test/oracle gatedDeltaGrad, reverse mode over SPEC.md's token
// recurrence) for seeded random output gradients. f32 arithmetic against
// float64: relative RMSE near 1e-7 (dA_log, a sum with cancellation, near
// 1e-5), under a bar of 1e-4.
// RUN: kda-run %s --function=log_space --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=LOG
// RUN: kda-run %s --function=log_space --chunk=64 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=LOG
// RUN: kda-run %s --function=log_space --chunk=1 --sub-chunk=1 --grad --check | FileCheck %s --check-prefix=LOG
// RUN: kda-run %s --function=kimi --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=KIMI
// RUN: kda-run %s --function=kimi --chunk=32 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=KIMI
// RUN: kda-run %s --function=softplus --chunk=32 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=SOFT
// RUN: kda-run %s --function=gdn --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=GDN
// RUN: kda-run %s --function=head_softplus --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=HEAD
// A wrong gradient fails the check (the first result scaled by 1 + 3 x its bar):
// RUN: not kda-run %s --function=kimi --chunk=16 --sub-chunk=16 --grad --check --inject-fault=result 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FAULT
// RUN: kda-run %s --function=varlen --seqlens=37,1,52 --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=VARLEN
// An empty sequence among them: no rows, its initial state's gradient is the final state's.
// RUN: kda-run %s --function=varlen --seqlens=37,0,53 --chunk=16 --sub-chunk=16 --grad --check | FileCheck %s --check-prefix=VARLEN
// What the derived gradient does not take yet says so:
// RUN: not kda-run %s --function=boundary --grad --check 2>&1 | FileCheck %s --check-prefix=BOUNDARY
// RUN: not kda-run %s --function=no_recurrence --grad --check 2>&1 | FileCheck %s --check-prefix=NONE

// The log-space gate (FLA's default call: g precomputed, no prologue), an
// initial state; T = 100 is not a multiple of the chunk.
// LOG: @log_space_grad compiled
// LOG-COUNT-6: bar=1e-04 ok
// LOG-NOT: FAIL
func.func @log_space(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2x32xf32>, %b: tensor<2x100x2xf32>, %s0: tensor<2x2x32x32xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x100x2x32xf32>) beta(%b : tensor<2x100x2xf32>) initial_state(%s0 : tensor<2x2x32x32xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

// Kimi's call: bf16 inputs, the lower-bound gate with A_log and dt_bias, l2
// norm and beta's sigmoid in the op, one q / k head for two value heads
// (GVA: their dq and dk sum), an initial and a final state: dq, dk, dv,
// d(raw gate), d(beta logits), dh0, dA_log, ddt_bias.
// KIMI: @kimi_grad compiled
// KIMI: result 0: tensor<2x70x1x32xf32> {{.*}} ok
// KIMI: result 5: tensor<2x2x32x16xf32> {{.*}} ok
// KIMI: result 6: tensor<2xf32> {{.*}} ok
// KIMI: result 7: tensor<2x32xf32> {{.*}} ok
// KIMI-NOT: FAIL
func.func @kimi(%q: tensor<2x70x1x32xbf16>, %k: tensor<2x70x1x32xbf16>, %v: tensor<2x70x2x16xbf16>, %g: tensor<2x70x2x32xbf16>, %beta: tensor<2x70x2xbf16>, %h0: tensor<2x2x32x16xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x32xf32>) -> (tensor<2x70x2x16xbf16>, tensor<2x2x32x16xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x70x2x32xbf16>) beta(%beta : tensor<2x70x2xbf16>) initial_state(%h0 : tensor<2x2x32x16xf32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<2x70x1x32xbf16>, tensor<2x70x1x32xbf16>, tensor<2x70x2x16xbf16> -> tensor<2x70x2x16xbf16> final_state tensor<2x2x32x16xf32>
  return %o, %ht : tensor<2x70x2x16xbf16>, tensor<2x2x32x16xf32>
}

// Kimi-Linear-48B's softplus gate, K = 64, no states.
// SOFT: @softplus_grad compiled
// SOFT-COUNT-7: bar=1e-04 ok
// SOFT-NOT: FAIL
func.func @softplus(%q: tensor<1x50x2x64xf32>, %k: tensor<1x50x2x64xf32>, %v: tensor<1x50x2x32xf32>, %g: tensor<1x50x2x64xf32>, %beta: tensor<1x50x2xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x64xf32>) -> tensor<1x50x2x32xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x50x2x64xf32>) beta(%beta : tensor<1x50x2xf32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate softplus>} : tensor<1x50x2x64xf32>, tensor<1x50x2x64xf32>, tensor<1x50x2x32xf32> -> tensor<1x50x2x32xf32>
  return %o : tensor<1x50x2x32xf32>
}

// Gated DeltaNet's form: one log-space gate per head and token (its
// gradient sums the channels'), a V-major state.
// GDN: @gdn_grad compiled
// GDN: result 3: tensor<2x40x2xf32> {{.*}} ok
// GDN: result 5: tensor<2x2x16x32xf32> {{.*}} ok
// GDN-NOT: FAIL
func.func @gdn(%q: tensor<2x40x2x32xf32>, %k: tensor<2x40x2x32xf32>, %v: tensor<2x40x2x16xf32>, %g: tensor<2x40x2xf32>, %b: tensor<2x40x2xf32>, %s0: tensor<2x2x16x32xf32>) -> (tensor<2x40x2x16xf32>, tensor<2x2x16x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x40x2xf32>) beta(%b : tensor<2x40x2xf32>) initial_state(%s0 : tensor<2x2x16x32xf32>) {state_layout = #kda<layout v_major>} : tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32> -> tensor<2x40x2x16xf32> final_state tensor<2x2x16x32xf32>
  return %o, %s : tensor<2x40x2x16xf32>, tensor<2x2x16x32xf32>
}

// A head-wise softplus gate with a head-wise dt_bias [HV].
// HEAD: @head_softplus_grad compiled
// HEAD-COUNT-7: bar=1e-04 ok
// HEAD-NOT: FAIL
func.func @head_softplus(%q: tensor<1x40x2x32xf32>, %k: tensor<1x40x2x32xf32>, %v: tensor<1x40x2x16xf32>, %g: tensor<1x40x2xf32>, %beta: tensor<1x40x2xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2xf32>) -> tensor<1x40x2x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x40x2xf32>) beta(%beta : tensor<1x40x2xf32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate softplus>} : tensor<1x40x2x32xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2x16xf32> -> tensor<1x40x2x16xf32>
  return %o : tensor<1x40x2x16xf32>
}

// FAULT-DAG: result 0: {{.*}} FAIL
// FAULT-DAG: kda-run: error: output check failed

// Kimi's call on a packed batch (cu_seqlens: 37, 1 and 52 tokens, each with its
// own states), V-major states: the sequences share the rows of a head, and
// each one's gradient stays in its own rows.
// VARLEN: @varlen_grad compiled
// VARLEN-COUNT-8: bar=1e-04 ok
// VARLEN-NOT: FAIL
func.func @varlen(%q: tensor<1x90x1x32xbf16>, %k: tensor<1x90x1x32xbf16>, %v: tensor<1x90x2x16xbf16>, %g: tensor<1x90x2x32xbf16>, %beta: tensor<1x90x2xbf16>, %h0: tensor<3x2x16x32xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x32xf32>, %cu: tensor<4xi32>) -> (tensor<1x90x2x16xbf16>, tensor<3x2x16x32xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x90x2x32xbf16>) beta(%beta : tensor<1x90x2xbf16>) initial_state(%h0 : tensor<3x2x16x32xf32>) cu_seqlens(%cu : tensor<4xi32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>} : tensor<1x90x1x32xbf16>, tensor<1x90x1x32xbf16>, tensor<1x90x2x16xbf16> -> tensor<1x90x2x16xbf16> final_state tensor<3x2x16x32xf32>
  return %o, %ht : tensor<1x90x2x16xbf16>, tensor<3x2x16x32xf32>
}

// NONE: --grad: @no_recurrence must hold exactly one kda.gated_delta op (it has 0)
func.func @no_recurrence(%q: tensor<1x16x2x32xf32>, %k: tensor<1x16x2x32xf32>, %v: tensor<1x16x2x32xf32>) -> tensor<1x16x2x32xf32> {
  %o = kda.window_attention %q, %k, %v {window = 4 : i64} : tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32>, tensor<1x16x2x32xf32> -> tensor<1x16x2x32xf32>
  return %o : tensor<1x16x2x32xf32>
}

// BOUNDARY: --grad: the derived gradient does not take chunk-boundary states yet
func.func @boundary(%q: tensor<1x64x2x32xf32>, %k: tensor<1x64x2x32xf32>, %v: tensor<1x64x2x32xf32>, %g: tensor<1x64x2x32xf32>, %b: tensor<1x64x2xf32>) -> (tensor<1x64x2x32xf32>, tensor<1x2x2x32x32xf32>) {
  %o, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x32xf32>) beta(%b : tensor<1x64x2xf32>) {boundary_interval = 32 : i64} : tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32> -> tensor<1x64x2x32xf32> boundary_states tensor<1x2x2x32x32xf32>
  return %o, %bs : tensor<1x64x2x32xf32>, tensor<1x2x2x32x32xf32>
}

// The gradient op written as such (what kda.ops' autograd compiles): run and
// checked like any op, the oracle evaluating kda.gated_delta_grad itself.
// bf16 inputs: SPEC.md's bar for results computed from 16-bit values.
// RUN: kda-run %s --function=grad_op --chunk=16 --sub-chunk=16 --check | FileCheck %s --check-prefix=OP
// OP: @grad_op compiled
// OP-COUNT-8: bar=5e-03 ok
// OP-NOT: FAIL
func.func @grad_op(%q: tensor<1x50x1x32xbf16>, %k: tensor<1x50x1x32xbf16>, %v: tensor<1x50x2x16xbf16>, %do: tensor<1x50x2x16xbf16>, %g: tensor<1x50x2x32xbf16>, %beta: tensor<1x50x2xbf16>, %h0: tensor<1x2x32x16xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x32xf32>, %dht: tensor<1x2x32x16xf32>) -> (tensor<1x50x1x32xf32>, tensor<1x50x1x32xf32>, tensor<1x50x2x16xf32>, tensor<1x50x2x32xf32>, tensor<1x50x2xf32>, tensor<1x2x32x16xf32>, tensor<2xf32>, tensor<2x32xf32>) {
  %dq, %dk, %dv, %dg, %db, %dh0, %da, %dd = kda.gated_delta_grad delta %q, %k, %v, %do gate(%g : tensor<1x50x2x32xbf16>) beta(%beta : tensor<1x50x2xbf16>) initial_state(%h0 : tensor<1x2x32x16xf32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x32xf32>) d_final_state(%dht : tensor<1x2x32x16xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<1x50x1x32xbf16>, tensor<1x50x1x32xbf16>, tensor<1x50x2x16xbf16>, tensor<1x50x2x16xbf16> -> tensor<1x50x1x32xf32>, tensor<1x50x1x32xf32>, tensor<1x50x2x16xf32> d_gate tensor<1x50x2x32xf32> d_beta tensor<1x50x2xf32> d_initial_state tensor<1x2x32x16xf32> d_A_log tensor<2xf32> d_dt_bias tensor<2x32xf32>
  return %dq, %dk, %dv, %dg, %db, %dh0, %da, %dd : tensor<1x50x1x32xf32>, tensor<1x50x1x32xf32>, tensor<1x50x2x16xf32>, tensor<1x50x2x32xf32>, tensor<1x50x2xf32>, tensor<1x2x32x16xf32>, tensor<2xf32>, tensor<2x32xf32>
}

// The forward's states kept, the gradient reading them instead of
// recomputing (FLA's split: the state pass reruns with chunk-boundary states
// at the chunk, the backward reads them): a forward op whose boundary states
// at interval 16 feed the gradient's chunk_states, both compiled, both
// evaluated by the oracle.
// RUN: kda-run %s --function=kept_states --chunk=16 --sub-chunk=16 --check | FileCheck %s --check-prefix=KEPT
// KEPT: @kept_states compiled
// KEPT-COUNT-6: bar=1e-04 ok
// KEPT-NOT: FAIL
// Tiled in chunks other than the kept interval: refused, saying why.
// RUN: not kda-run %s --function=kept_states --chunk=32 --sub-chunk=16 --check 2>&1 | FileCheck %s --check-prefix=KEPT32
// KEPT32: chunk_states every 16 tokens, but the gradient is tiled in chunks of 32
func.func @kept_states(%q: tensor<2x40x2x32xf32>, %k: tensor<2x40x2x32xf32>, %v: tensor<2x40x2x16xf32>, %g: tensor<2x40x2x32xf32>, %b: tensor<2x40x2xf32>, %h0: tensor<2x2x16x32xf32>, %do: tensor<2x40x2x16xf32>) -> (tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2xf32>, tensor<2x2x16x32xf32>) {
  %o, %states = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x40x2x32xf32>) beta(%b : tensor<2x40x2xf32>) initial_state(%h0 : tensor<2x2x16x32xf32>) {boundary_interval = 16 : i64, state_layout = #kda<layout v_major>} : tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32> -> tensor<2x40x2x16xf32> boundary_states tensor<2x3x2x16x32xf32>
  %dq, %dk, %dv, %dg, %db, %dh0 = kda.gated_delta_grad delta %q, %k, %v, %do gate(%g : tensor<2x40x2x32xf32>) beta(%b : tensor<2x40x2xf32>) initial_state(%h0 : tensor<2x2x16x32xf32>) chunk_states(%states : tensor<2x3x2x16x32xf32>) {states_interval = 16 : i64, state_layout = #kda<layout v_major>} : tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32>, tensor<2x40x2x16xf32> -> tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32> d_gate tensor<2x40x2x32xf32> d_beta tensor<2x40x2xf32> d_initial_state tensor<2x2x16x32xf32>
  return %dq, %dk, %dv, %dg, %db, %dh0 : tensor<2x40x2x32xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2x16xf32>, tensor<2x40x2x32xf32>, tensor<2x40x2xf32>, tensor<2x2x16x32xf32>
}

// The kept states are what the gradient reads: given other states than the
// forward's, its gradients are not the oracle's (which knows the true ones).
// RUN: not kda-run %s --function=kept_wrong --chunk=16 --sub-chunk=16 --check 2>&1 | FileCheck %s --check-prefix=WRONG
// WRONG: FAIL
func.func @kept_wrong(%q: tensor<1x40x2x32xf32>, %k: tensor<1x40x2x32xf32>, %v: tensor<1x40x2x16xf32>, %g: tensor<1x40x2x32xf32>, %b: tensor<1x40x2xf32>, %do: tensor<1x40x2x16xf32>, %states: tensor<1x3x2x32x16xf32>) -> (tensor<1x40x2x32xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2x16xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2xf32>) {
  %dq, %dk, %dv, %dg, %db = kda.gated_delta_grad delta %q, %k, %v, %do gate(%g : tensor<1x40x2x32xf32>) beta(%b : tensor<1x40x2xf32>) chunk_states(%states : tensor<1x3x2x32x16xf32>) {states_interval = 16 : i64} : tensor<1x40x2x32xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2x16xf32>, tensor<1x40x2x16xf32> -> tensor<1x40x2x32xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2x16xf32> d_gate tensor<1x40x2x32xf32> d_beta tensor<1x40x2xf32>
  return %dq, %dk, %dv, %dg, %db : tensor<1x40x2x32xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2x16xf32>, tensor<1x40x2x32xf32>, tensor<1x40x2xf32>
}

// V split over programs (#kda.tile v_block, as GPUs compile it): each V block's
// program gives its share of the gradients the blocks share (q, k, the gate,
// beta, A_log, dt_bias), summed over the blocks (and GVA's value heads) by
// grids of their own; dv and dh0 are each block's own. Kimi's call with GVA,
// kept states in V-major layout, and a packed batch.
// RUN: kda-run %s --function=vblocks --seqlens=23,40 --chunk=16 --sub-chunk=16 --check | FileCheck %s --check-prefix=VBLOCKS
// VBLOCKS: @vblocks compiled
// VBLOCKS-COUNT-8: bar=1e-04 ok
// VBLOCKS-NOT: FAIL
func.func @vblocks(%q: tensor<1x63x1x32xf32>, %k: tensor<1x63x1x32xf32>, %v: tensor<1x63x2x16xf32>, %g: tensor<1x63x2x32xf32>, %beta: tensor<1x63x2xf32>, %h0: tensor<2x2x16x32xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x32xf32>, %cu: tensor<3xi32>, %do: tensor<1x63x2x16xf32>, %dht: tensor<2x2x16x32xf32>) -> (tensor<1x63x1x32xf32>, tensor<1x63x1x32xf32>, tensor<1x63x2x16xf32>, tensor<1x63x2x32xf32>, tensor<1x63x2xf32>, tensor<2x2x16x32xf32>, tensor<2xf32>, tensor<2x32xf32>) {
  %o, %ht, %states = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x63x2x32xf32>) beta(%beta : tensor<1x63x2xf32>) initial_state(%h0 : tensor<2x2x16x32xf32>) cu_seqlens(%cu : tensor<3xi32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, boundary_interval = 16 : i64, state_layout = #kda<layout v_major>} : tensor<1x63x1x32xf32>, tensor<1x63x1x32xf32>, tensor<1x63x2x16xf32> -> tensor<1x63x2x16xf32> final_state tensor<2x2x16x32xf32> boundary_states tensor<2x3x2x16x32xf32>
  %dq, %dk, %dv, %dg, %db, %dh0, %da, %dd = kda.gated_delta_grad delta %q, %k, %v, %do gate(%g : tensor<1x63x2x32xf32>) beta(%beta : tensor<1x63x2xf32>) initial_state(%h0 : tensor<2x2x16x32xf32>) cu_seqlens(%cu : tensor<3xi32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x32xf32>) d_final_state(%dht : tensor<2x2x16x32xf32>) chunk_states(%states : tensor<2x3x2x16x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, states_interval = 16 : i64, state_layout = #kda<layout v_major>, tile = #kda.tile<chunk = 16, v_block = 8>} : tensor<1x63x1x32xf32>, tensor<1x63x1x32xf32>, tensor<1x63x2x16xf32>, tensor<1x63x2x16xf32> -> tensor<1x63x1x32xf32>, tensor<1x63x1x32xf32>, tensor<1x63x2x16xf32> d_gate tensor<1x63x2x32xf32> d_beta tensor<1x63x2xf32> d_initial_state tensor<2x2x16x32xf32> d_A_log tensor<2xf32> d_dt_bias tensor<2x32xf32>
  return %dq, %dk, %dv, %dg, %db, %dh0, %da, %dd : tensor<1x63x1x32xf32>, tensor<1x63x1x32xf32>, tensor<1x63x2x16xf32>, tensor<1x63x2x32xf32>, tensor<1x63x2xf32>, tensor<2x2x16x32xf32>, tensor<2xf32>, tensor<2x32xf32>
}

// Raw gate and beta logits past exp's range (+/-120 at every 7th and 11th
// element, Inputs/extreme_gate_npy.py): the forward's sigmoid and softplus
// overflow exp(.) to inf and still give 0 or x; their derivatives there are 0
// (an adjoint of exp that multiplied a zero gradient by inf made NaN in
// d_gate, dA_log and ddt_bias: 8 x 4096 tokens on the H200, twenty-third
// session).
// RUN: %python %S/Inputs/extreme_gate_npy.py %t.g.npy 1 50 2 64
// RUN: %python %S/Inputs/extreme_gate_npy.py %t.b.npy 1 50 2
// RUN: kda-run %s --function=extreme_lb --chunk=16 --sub-chunk=16 --grad --check --input=3=%t.g.npy --input=4=%t.b.npy | FileCheck %s --check-prefix=EXTREME
// The softplus gate with A_log = log(0.01): its exp(x) overflows at x = 120
// while the decays stay moderate (with exp(A_log) near 16 they reach
// e^-1900, and dA_log, a sum of such terms with cancellation, is then off
// the float64 oracle by about 1.2e-4 in f32).
// RUN: %python %S/Inputs/extreme_gate_npy.py %t.a.npy fill=-4.605170 2
// RUN: kda-run %s --function=softplus --chunk=16 --sub-chunk=16 --grad --check --input=3=%t.g.npy --input=4=%t.b.npy --input=5=%t.a.npy | FileCheck %s --check-prefix=EXTREME
// EXTREME-COUNT-7: bar=1e-04 ok
// EXTREME-NOT: FAIL
func.func @extreme_lb(%q: tensor<1x50x2x64xf32>, %k: tensor<1x50x2x64xf32>, %v: tensor<1x50x2x32xf32>, %g: tensor<1x50x2x64xf32>, %beta: tensor<1x50x2xf32>, %A_log: tensor<2xf32>, %dt_bias: tensor<2x64xf32>) -> tensor<1x50x2x32xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x50x2x64xf32>) beta(%beta : tensor<1x50x2xf32>) A_log(%A_log : tensor<2xf32>) dt_bias(%dt_bias : tensor<2x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<1x50x2x64xf32>, tensor<1x50x2x64xf32>, tensor<1x50x2x32xf32> -> tensor<1x50x2x32xf32>
  return %o : tensor<1x50x2x32xf32>
}

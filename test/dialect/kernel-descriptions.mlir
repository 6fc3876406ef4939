// RUN: kda-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// The kernel descriptions kda-tile-chunks hands the target lowerings
// (#kda.intra_pass, #kda.state_pass, #kda.decode_pass with their shared
// #kda.prologue, #kda.window_pass) and the strategy stage's decision
// (#kda.strategy) are typed attributes: they round-trip, and a description a
// pass could not read is refused by its verifier, naming the field.

// CHECK-LABEL: func.func private @intra
// CHECK-SAME: kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 64, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = softplus, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = sigmoid, l2norm = true, scale = 0.088378899999999996 : f64>>
func.func private @intra() attributes {kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 64, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = softplus, lower_bound = -5.0 : f64, beta = true, beta_activation = sigmoid, l2norm = true, scale = 0.0883789 : f64>>}

// CHECK-LABEL: func.func private @state
// CHECK-SAME: kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 32, v_major = true, boundary = true, boundary_pool = false, boundary_interval = 64, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, 32, 4]>
func.func private @state() attributes {kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 32, v_major = true, boundary = true, boundary_pool = false, boundary_interval = 64, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, 32, 4]>}

// CHECK-LABEL: func.func private @decode
// CHECK-SAME: kda.decode_pass = #kda.decode_pass<key_dim = 128, value_dim = 128, v_major = true, multi_token = false, prologue = <delta = true, gate = head, gate_activation = lower_bound
func.func private @decode() attributes {kda.decode_pass = #kda.decode_pass<key_dim = 128, value_dim = 128, v_major = true, multi_token = false, prologue = <delta = true, gate = head, gate_activation = lower_bound, lower_bound = -5.0 : f64, beta = false, beta_activation = none, l2norm = false, scale = 1.0 : f64>>}

// -----

// expected-error @+1 {{#kda.intra_pass: 'tile_chunk' must be a multiple of 'chunk' (16), found 24}}
func.func private @bad_tile_chunk() attributes {kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 24, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w"], grid = [-1, -1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.0 : f64, beta = true, beta_activation = none, l2norm = false, scale = 1.0 : f64>>}

// -----

// expected-error @+1 {{#kda.state_pass: 'workspaces' holds the roles "w", "u", "q", "k", "p", "g", found "x"}}
func.func private @bad_role() attributes {kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 32, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "x"], grid = [-1, 4]>}

// -----

// expected-error @+1 {{#kda.state_pass: 'boundary_interval' must be a positive multiple of 'chunk' (16), found 40}}
func.func private @bad_interval() attributes {kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 128, v_block = 32, v_major = false, boundary = true, boundary_pool = false, boundary_interval = 40, workspaces = ["w"], grid = [-1, 4]>}

// -----

// expected-error @+1 {{#kda.intra_pass: 'grid' has the extents of (sequence, chunk, head), found 2 of them}}
func.func private @bad_grid() attributes {kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 128, value_dim = 128, workspaces = ["w"], grid = [-1, 4], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.0 : f64, beta = true, beta_activation = none, l2norm = false, scale = 1.0 : f64>>}

// -----

// expected-error @+3 {{expected ::mlir::kda::GateForm to be one of: none, channel, head}}
// expected-error @+2 {{failed to parse Kda_PrologueAttr parameter 'gate'}}
// expected-error @+1 {{failed to parse Kda_DecodePassAttr parameter 'prologue'}}
func.func private @bad_gate() attributes {kda.decode_pass = #kda.decode_pass<key_dim = 128, value_dim = 128, v_major = true, multi_token = false, prologue = <delta = true, gate = token, gate_activation = none, lower_bound = -5.0 : f64, beta = false, beta_activation = none, l2norm = false, scale = 1.0 : f64>>}

// -----

// The window kernel's description and the strategy stage's decision round-
// trip; the strategy elides what it does not have (no reason for lanes, no
// step without sub-chunk steps).
// CHECK-LABEL: func.func private @window
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes">
// CHECK-SAME: kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 64, window = 0, scale = 1.250000e-01 : f64, varlen = true>
func.func private @window() attributes {kda.window_pass = #kda.window_pass<key_dim = 128, value_dim = 64, window = 0, scale = 0.125 : f64, varlen = true>, kda.strategy = #kda.strategy<kernel = "window", kind = "lanes">}
// CHECK-LABEL: func.func private @steps
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", step = 16, tile_chunk = 64>
func.func private @steps() attributes {kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", step = 16, tile_chunk = 64>}
// CHECK-LABEL: func.func private @tiles
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "fp32">
func.func private @tiles() attributes {kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "fp32">}
// CHECK-LABEL: func.func private @wgmma
// CHECK-SAME: kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma", program = "derived">
func.func private @wgmma() attributes {kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "wgmma", program = "derived">}

// -----

// expected-error @+1 {{#kda.strategy: a 'reason' goes with tiles and only with tiles (kind 'tiles', reason '')}}
func.func private @tiles_without_reason() attributes {kda.strategy = #kda.strategy<kernel = "window", kind = "tiles">}

// -----

// expected-error @+1 {{#kda.strategy: 'kind' is lanes or tiles, found 'fast'}}
func.func private @bad_kind() attributes {kda.strategy = #kda.strategy<kernel = "decode", kind = "fast">}

// -----

// A matrix instruction goes with lanes, and is one kda writes.
// expected-error @+1 {{#kda.strategy: 'instruction' is mma_sync, wgmma, mfma or wmma, for lanes only, found 'wgmma' (kind 'tiles')}}
func.func private @tiles_with_instruction() attributes {kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "fp32", instruction = "wgmma">}

// -----

// expected-error @+1 {{#kda.strategy: 'instruction' is mma_sync, wgmma, mfma or wmma, for lanes only, found 'xdl' (kind 'lanes')}}
func.func private @unknown_instruction() attributes {kda.strategy = #kda.strategy<kernel = "window", kind = "lanes", instruction = "xdl">}

// -----

// A program (how a lane kernel is written) goes with lanes: derived (an
// algorithm of passes/ on lane tiles, every lane kernel's). The per-lane
// programs written against the algorithm are gone.
// expected-error @+1 {{#kda.strategy: 'program' is derived, for lanes only, found 'handwritten' (kind 'lanes')}}
func.func private @unknown_program() attributes {kda.strategy = #kda.strategy<kernel = "state", kind = "lanes", program = "handwritten">}

// -----

// expected-error @+1 {{#kda.strategy: 'program' is derived, for lanes only, found 'per_lane' (kind 'lanes')}}
func.func private @per_lane_program() attributes {kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes", program = "per_lane">}

// -----

// expected-error @+1 {{#kda.strategy: 'program' is derived, for lanes only, found 'derived' (kind 'tiles')}}
func.func private @tiles_with_program() attributes {kda.strategy = #kda.strategy<kernel = "state", kind = "tiles", reason = "fp32", program = "derived">}

// -----

// Chunks in flight (staged copies) go with lanes: 2 to 8, or 0 for none.
// expected-error @+1 {{#kda.strategy: 'stages' is 0 or 2 to 8, for lanes only, found 1 (kind 'lanes')}}
func.func private @one_stage() attributes {kda.strategy = #kda.strategy<kernel = "state", kind = "lanes", program = "derived", stages = 1>}

// -----

// expected-error @+1 {{#kda.strategy: 'stages' is 0 or 2 to 8, for lanes only, found 3 (kind 'tiles')}}
func.func private @tiles_with_stages() attributes {kda.strategy = #kda.strategy<kernel = "state", kind = "tiles", reason = "fp32", stages = 3>}

// -----

// expected-error @+1 {{#kda.strategy: 'step' and 'tile_chunk' go together, tile_chunk a multiple of step, found 16 and 40}}
func.func private @bad_steps() attributes {kda.strategy = #kda.strategy<kernel = "state", kind = "lanes", step = 16, tile_chunk = 40>}

// -----

// expected-error @+1 {{#kda.window_pass: 'scale' must be finite and positive, found -1}}
func.func private @bad_window_scale() attributes {kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = 8, scale = -1.0 : f64, varlen = false>}

// -----

// expected-error @+1 {{#kda.window_pass: 'window' must be a size >= 1 (or 0: per-position sizes), found -2}}
func.func private @bad_window() attributes {kda.window_pass = #kda.window_pass<key_dim = 64, value_dim = 64, window = -2, scale = 1.0 : f64, varlen = false>}

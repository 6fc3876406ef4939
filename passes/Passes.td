//===- Passes.td - kda -> kda transformations --------------*- tablegen -*-===//

#ifndef KDA_PASSES_PASSES_TD
#define KDA_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def KdaTileChunks : Pass<"kda-tile-chunks", "func::FuncOp"> {
  let summary = "Rewrite kda ops into their chunkwise, tiled form";
  let description = [{
    Rewrites `kda.gated_delta` into the chunkwise form of SPEC.md section 3:
    an `scf.forall` over (sequence, value head) programs, a sequential
    `scf.for` over chunks carrying the fp32 state, and per chunk the tile
    computation of passes/GatedDeltaKernel.cpp (gate cumsum, intra-chunk
    matrices with sub-chunk reference points, the UT transform, WY factors,
    output and state update) on static f32 tiles. Partial last chunks,
    varlen, GVA, initial / final / boundary states and the fused prologue
    are handled here. `kda.decode_step` becomes one token step per
    (sequence, head) on its pool slot, `kda.window_attention` a tiled
    online-softmax loop over key blocks.

    The chunk size comes from the op's `#kda.tile` attribute, else from the
    `chunk` option. `chunk=1` gives the token-by-token recurrence (the
    sequence-level form). With `schedule=chunk-parallel` the chunk step is
    split in two grids (GatedDeltaKernel.h: emitIntraChunk, emitStateStep):
    the intra-chunk work of every chunk runs in parallel and only the state
    step stays on the sequential chain. The output is target-independent (tensor, linalg,
    scf, arith, math).
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"64",
           "tokens per chunk when the op has no #kda.tile (1: recurrence)">,
    Option<"subChunk", "sub-chunk", "int64_t", /*default=*/"16",
           "tokens per sub-chunk when the op has no #kda.tile">,
    Option<"vBlock", "v-block", "int64_t", /*default=*/"0",
           "columns of V per program when the op's #kda.tile sets none "
           "(0: all of V; ignored where it does not divide V)">,
    Option<"vBlockF32", "v-block-f32", "int64_t", /*default=*/"0",
           "the same for gated delta ops with fp32 q and k, where it divides "
           "V (0 or not dividing: v-block's); recorded as the kernel's "
           "kda.tile">,
    Option<"vBlockGradient", "v-block-gradient", "int64_t", /*default=*/"0",
           "columns of V per program of kda.gated_delta_grad when its "
           "#kda.tile sets none (0: v-block's)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"sequential\"",
           "how kda.gated_delta's chunks are scheduled: 'sequential' (one "
           "program per (sequence, head, V block) walks its chunks) or "
           "'chunk-parallel' (a grid over every (sequence, chunk, head) "
           "computes the state-independent part of each chunk into f32 "
           "workspaces; the sequential pass then carries only the state "
           "step and the output)">,
    Option<"boundarySlots", "boundary-slots", "std::string",
           /*default=*/"\"copy\"",
           "how boundary states into pool slots (boundary_indices) are "
           "written: 'copy' (recorded densely, then copied into their slots "
           "by a loop after the grid: the CPU), 'kernel' (the target's "
           "state kernel writes the slots; the tile program leaves the pool "
           "alone: NVIDIA's kda-gpu-state-registers) or 'none' (refused "
           "with an error)">,
    Option<"gradientStates", "gradient-states", "std::string",
           /*default=*/"\"recompute\"",
           "where kda.gated_delta_grad without chunk_states gets the state "
           "before each chunk: 'recompute' (each program runs the forward "
           "over its chunks first, keeping the states in a buffer of its "
           "own: the CPU) or 'required' (refused with an error: GPU "
           "programs have no such buffer, the forward's boundary states are "
           "passed instead)">,
    Option<"gradientDStatesBf16", "gradient-d-states-bf16", "bool",
           /*default=*/"false",
           "kda.gated_delta_grad's reverse scan records dS after every chunk "
           "in bf16 (f32 by default): half the bytes the scan stores and the "
           "step grid reads (a GB at T = 8192, H = 32, K = V = 128); sums "
           "and products stay f32">,
    Option<"gradientGateOutside", "gradient-gate-outside", "bool",
           /*default=*/"false",
           "kda.gated_delta_grad's chunk grid applies a channel-wise gate's "
           "activation outside its tape and writes the activated gate's "
           "gradient (f32); a grid of its own (`gate`) takes it through the "
           "activation's adjoint to d_gate and the shares of dA_log and "
           "ddt_bias (#kda.intra_pass's gate_outside). NVIDIA's chunk lanes "
           "then take the softplus gate">,
    Option<"subChunkSteps", "sub-chunk-steps", "bool", /*default=*/"false",
           "chunk-parallel only: an op whose chunk holds several sub-chunks "
           "of 16 tokens is tiled at the sub-chunk. The state pass then "
           "carries the coupling between a chunk's sub-chunks, instead of "
           "the off-diagonal blocks of the chunk's matrices: the form of the "
           "NVIDIA lane kernels, whose intra-chunk program is one sub-chunk. "
           "The kernel descriptions keep the op's chunk as `tile_chunk`">,
    Option<"wideSteps", "wide-steps", "bool", /*default=*/"false",
           "with sub-chunk-steps: the state pass steps the op's whole chunk "
           "at once, its sub-chunks coupled inside the step "
           "(GatedDeltaKernel.h, emitWideStateStep): chunk / 16 times fewer "
           "sequential steps, each reading the state once. The state grid "
           "has no lane program for it yet (tile lowering)">,
    Option<"segments", "segments", "int64_t", /*default=*/"1",
           "chunk-parallel kda.gated_delta without boundary states whose "
           "#kda.tile sets none: sequence-parallel segments per sequence "
           "(1: none). A summary grid gives each segment its transition and "
           "offset, a combine grid scans them into each segment's start "
           "state, and the state grid runs the segments side by side">,
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "the largest head dimension (K, V) the target lowers (0: any). "
           "The GPU pipelines' tiles of [C, K] live in shared memory and "
           "registers: past 1024 nothing fits, and the lowering takes "
           "minutes before the chip's limits refuse it">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def KdaOutlineKernels : Pass<"kda-outline-kernels", "ModuleOp"> {
  let summary = "Move each kda op into a kernel function, one per configuration";
  let description = [{
    Replaces every `kda.gated_delta`, `kda.decode_step` and
    `kda.window_attention` with a `func.call` to a private function holding
    just that op. Ops with the same attributes and types share one function,
    so a model of twenty identical KDA layers compiles one kernel, and every
    later stage (tiling, a target's code generation, a bundle's kernel list)
    sees kernels as functions. Ops with dynamically shaped results stay in
    place (kernels return results through caller-allocated buffers).

    With `destination-style`, every such op is outlined whatever its shapes:
    the kernel takes one extra argument per result that is not already a
    destination operand (the buffer it writes), and carries `kda.abi`, the
    name and dimension names of each argument (from the op's verifier), which
    GPU kernels turn into their parameter list.
  }];
  let options = [
    Option<"destinationStyle", "destination-style", "bool", /*default=*/"false",
           "Outline every kda op, with result buffers as arguments">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KdaDecompose : Pass<"kda-decompose", "func::FuncOp"> {
  let summary = "Express kda.gate, kda.hybrid and kda.multi_scale with simpler ops";
  let description = [{
    `kda.multi_scale` becomes one `kda.gated_delta` per scale (its gate
    scaled by the constant or taken from its own tensor) and an elementwise
    combination; `kda.gate` and `kda.hybrid` become elementwise
    `linalg.generic` ops.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def KdaFusePrologue : Pass<"kda-fuse-prologue", "func::FuncOp"> {
  let summary = "Fold gate activations into the recurrence that consumes them";
  let description = [{
    A `kda.gate` whose only use is the gate operand of a `kda.gated_delta` or
    `kda.decode_step` without its own activation is folded into that op
    (`gate_activation`, `A_log`, `dt_bias`, `lower_bound`), so the activation
    runs inside the kernel on the tile it loads instead of as a separate
    pass over memory.
  }];
}

def KdaFuseWindowMix : Pass<"kda-fuse-window-mix", "func::FuncOp"> {
  let summary = "Fold a hybrid's mix into the epilogue of its window attention";
  let description = [{
    A two-branch `kda.hybrid` whose window branch is a `kda.window_attention`
    used only there (the second branch of a gated mix; either of a sum)
    becomes that window with `mix_linear` (the other branch), `mix_gate` (z)
    and `mix`: the window kernel mixes its output registers with the other
    branch and writes the layer's output once (no mix kernel).
  }];
}

def KdaScalarAdjoint : Pass<"kda-scalar-adjoint", "ModuleOp"> {
  let summary = "Add the reverse-mode derivative of every function of scalars";
  let description = [{
    For every function of floating-point scalars of one type that returns
    one such scalar, adds `<name>_grad`, taking the same arguments and
    returning the value and its partial derivative with respect to each
    argument (filling in a declaration of that name and type where the
    module has one), by the rules of passes/ScalarAdjoint.h (emitScalarAdjoint: the
    derivative of an elementwise map body, the first piece of the derived
    backward, docs/backward.md). A body that reaches its result through an op
    without a rule is an error naming the op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def KdaTestTileAdjoint : Pass<"kda-test-tile-adjoint", "ModuleOp"> {
  let summary = "Add tile programs, their derived adjoints and finite-difference checks (a test)";
  let description = [{
    Fills the module with small programs written against TileBuilder (one
    per primitive with an adjoint rule, and the gated delta rule's chunk step
    from passes/GatedDeltaKernel.cpp with both gate forms), each one's
    gradient derived by a TapeTileBuilder (passes/TileAdjoint.h), a
    `check_<name>` function printing, per input, whether every element's
    gradient agrees with a central finite difference of the forward, and
    `main` running them all (test/passes/tile-adjoint.mlir lowers and runs
    it with mlir-runner).
  }];
  let options = [
    Option<"printErrors", "print-errors", "bool", /*default=*/"false",
           "also print each input's largest relative error before its verdict">,
    ListOption<"only", "only", "std::string",
               "the programs to add (default: all but 'row_max', whose "
               "primitive has no rule and makes the pass fail)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // KDA_PASSES_PASSES_TD

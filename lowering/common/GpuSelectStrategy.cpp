//===- GpuSelectStrategy.cpp - lanes or tiles, decided once ---------------===//
//
// kda-gpu-select-strategy runs once the kernels of a GPU pipeline are split
// (GpuSplitSchedule) and before they are bufferized: for every kernel function
// it decides how the kernel is written (Strategy.h) and records it as
//
//   kda.strategy = #kda.strategy<kernel = "intra" | "state" | "decode" |
//                      "window" | "chunkwise" | "elementwise",
//                    kind = "lanes" | "tiles", reason = "..." (tiles only),
//                    step, tile_chunk (a chunk run as sub-chunk steps)>
//
// from the target (vendor, tensor cores, warp size, threads), the pipeline's
// switches (intra-registers, state-registers, decode-registers,
// window-registers, state-stages)
// and what each lane kernel's layout takes (the *LanesRefusal functions). The
// register passes write the kernels it gives them lanes; kda-gpu-map-kernels
// copies the attribute into the kernel's launch description, and kda-compile
// into the manifest. With `remarks`, every kernel of a gated delta op or a
// decode step that gets tiles is named in a remark with the reason and the
// fix (kda-compile asks for them): no configuration falls back in silence.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/Strategy.h"
#include "lowering/lanes/LaneTiles.h"

#include "dialect/KdaDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <tuple>

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUSELECTSTRATEGY
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

struct Decision {
  std::string kernel, reason, fix;
  std::string instruction = {}; // lanes: the products' matrix instruction
  std::string program = {};     // lanes: "derived" (an algorithm of passes/)
  int64_t stages = 0;           // lanes: chunks in flight (staged copies)
};

Decision decide(func::FuncOp f, const kda::StrategyOptions &o) {
  auto intra = f->getAttrOfType<kda::IntraPassAttr>(kda::kIntraPassAttr);
  auto state = f->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr);
  auto decode = f->getAttrOfType<kda::DecodePassAttr>(kda::kDecodePassAttr);
  StringRef name = f.getSymName();
  const char *noTensorCores = "tensor-cores=false: the lane kernels are "
                              "written on the matrix instructions";
  if (intra) {
    Decision d{"intra", "", ""};
    if (!o.tensorCores)
      d.reason = noTensorCores;
    else if (!o.intraLanes)
      d.reason = "switched off (intra-registers=false)";
    else if (std::string why = kda::intraLanesRefusal(intra, o.threads,
                                                       &d.fix, o.instructions,
                                                       o.sharedMemory);
             !why.empty())
      d.reason = why;
    if (d.reason.empty()) {
      // tf32 m16n8k8 (GpuIntraRegisters.cpp); AMD: MFMA / WMMA on f32
      // tiles (LaneTileBuilder::unitProduct).
      d.instruction = o.instructions;
      d.program = "derived";      // GatedDeltaKernel.cpp's emitIntraChunk
    }
    return d;
  }
  // A gradient's chunk grid: the intra-chunk part recomputed under the
  // tape and its adjoint from the step grid's seeds, on the forward intra
  // program's lanes (GpuIntraRegisters.cpp).
  if (auto chunk = f->getAttrOfType<kda::IntraPassAttr>(kda::kChunkPassAttr)) {
    Decision d{"chunk", "", ""};
    if (!o.nvidia)
      d.reason = "AMD targets have no lane kernel for the gradient's chunk "
                 "grid yet";
    else if (!o.tensorCores)
      d.reason = noTensorCores;
    else if (!o.intraLanes)
      d.reason = "switched off (intra-registers=false)";
    else if (!o.chunkLanes)
      d.reason = "switched off (chunk-registers=false)";
    else if (std::string why = kda::chunkLanesRefusal(chunk, o.threads,
                                                         &d.fix);
               !why.empty())
      d.reason = why;
    if (d.reason.empty()) {
      d.instruction = "mma_sync";
      d.program = "derived";
    }
    return d;
  }
  // A gradient's step grid: the state step's adjoint with respect to each
  // chunk's inputs, on the state program's layouts (GpuStateRegisters.cpp,
  // emitStep).
  if (auto step = f->getAttrOfType<kda::StatePassAttr>(kda::kStepPassAttr)) {
    Decision d{"step", "", ""};
    if (!o.tensorCores)
      d.reason = noTensorCores;
    else if (!o.stateLanes)
      d.reason = "switched off (state-registers=false)";
    else if (!o.stepLanes)
      d.reason = "switched off (step-registers=false)";
    else if (std::string why = kda::stepLanesRefusal(f, step, o.threads,
                                                      &d.fix, o.instructions);
             !why.empty())
      d.reason = why;
    if (d.reason.empty()) {
      d.instruction = "mma_sync";
      d.program = "derived";
    }
    return d;
  }
  // A gradient's reverse scan is the state program run backwards (the
  // tape's adjoint of emitStateStep on lane tiles): the same decision.
  auto reverse = f->getAttrOfType<kda::StatePassAttr>(kda::kReversePassAttr);
  if (state || reverse) {
    Decision d{reverse ? "reverse" : "state", "", ""};
    if (!o.nvidia && reverse)
      d.reason = "AMD targets have no lane kernel for the gradient's reverse "
                 "scan yet (the state program on MFMA / WMMA runs forwards "
                 "only)";
    else if (!o.tensorCores)
      d.reason = noTensorCores;
    else if (!o.stateLanes)
      d.reason = "switched off (state-registers=false)";
    else if (std::string why = kda::stateLanesRefusal(
                 f, reverse ? reverse : state, o.threads, &d.fix,
                 static_cast<bool>(reverse), o.instructions);
             !why.empty())
      d.reason = why;
    if (d.reason.empty()) {
      // bf16 m16n8k16 for 16-bit workspaces, 3xTF32 m16n8k8 for f32 ones
      // (GpuStateRegisters.cpp), always the derived program: emitStateStep
      // on lane tiles. AMD: the chip's MFMA or WMMA (LaneTileBuilder's
      // unitProduct), its copies staged without cp.async.
      // (The reverse scan runs on mma.sync only: AMD's is refused above,
      // and an emulated-WMMA build, --emulate-wmma, keeps its own.)
      d.instruction = reverse ? "mma_sync" : o.instructions;
      d.program = "derived";
      // It stages its chunks' workspaces (cp.async): how many are in flight
      // is the shape policy's or the tuning database's choice
      // (python/kda/tune.py), given here as state-stages.
      d.stages = o.stateStages;
    }
    return d;
  }
  if (decode) {
    Decision d{"decode", "", ""};
    if (!o.decodeLanes)
      d.reason = "switched off (decode-registers=false)";
    else if (std::string why = kda::decodeLanesRefusal(decode, o.warpSize);
             !why.empty()) {
      d.reason = why;
      d.fix = "K and V multiples of 32 take the register decode kernel";
    }
    if (d.reason.empty())
      d.program = "derived"; // GatedDeltaKernel.cpp's step at C = 1
    return d;
  }
  if (auto window =
          f->getAttrOfType<kda::WindowPassAttr>(kda::kWindowPassAttr)) {
    Decision d{"window", "", ""};
    // AMD's units (and WMMA emulated on NVIDIA): no wgmma.
    const bool unit =
        kda::unitChoice(o.instructions).unit != kda::MatrixUnit::MmaSync;
    const bool wgmma = o.wgmma && !unit;
    if (!o.tensorCores)
      d.reason = noTensorCores;
    else if (!o.windowLanes)
      d.reason = "switched off (window-registers=false)";
    else if (std::string why = kda::windowLanesRefusal(
                 window, f.getFunctionType().getInputs(), wgmma,
                 o.instructions);
             !why.empty()) {
      d.reason = why;
      d.fix = "bf16 or fp16 q, k and v with K and V multiples of 16 up to "
              "128 (up to 256 on MFMA; on sm_90a, multiples of 64 up to 256) "
              "take the register window kernel";
    }
    if (d.reason.empty()) {
      d.instruction =
          unit ? o.instructions : kda::windowInstruction(window, wgmma);
      d.program = "derived"; // WindowAttentionKernel.cpp's windowStep
    }
    return d;
  }
  if (name.contains("window_attention"))
    return {"window",
            "its description (kda.window_pass) is missing", ""};
  // (Names are kda-outline-kernels' kda_<op>_kernel, and kda-gpu-split-
  // schedule's _<grid> after them.)
  // The gradient's sums (dq and dk over a q / k head's value heads, the
  // gate parameters' shares over sequences and chunks): a few additions per
  // element, tile programs by design, like the combine.
  if (name.contains("gated_delta_grad"))
    return {"gradient",
            "the derived gradient's sums (over value heads, sequences and "
            "chunks) are tile programs by design",
            ""};
  // The segments' combine grid: per program, P products of a K x K
  // transition with the state's V block, in order; small, and a tile
  // program by design.
  if (name.contains("gated_delta") && name.ends_with("_combine"))
    return {"combine",
            "the segments' combine (a few K x K products per program) is a "
            "tile program by design",
            ""};
  if (name.contains("gated_delta"))
    return {"chunkwise",
            "the sequential schedule (schedule=sequential) has no lane "
            "kernels",
            "compile with the chunk-parallel schedule (the GPU default)"};
  return {"elementwise",
          "elementwise work between kda ops is a tile program by design", ""};
}

struct SelectStrategyPass : kda::impl::KdaGpuSelectStrategyBase<SelectStrategyPass> {
  using Base::Base;
  SelectStrategyPass() = default;
  // kda.strategy is an attribute of the kda dialect, which a module of
  // elementwise work alone (no kda op) has not loaded: creating the
  // attribute without it crashed.
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<kda::KdaDialect>();
  }
  explicit SelectStrategyPass(const kda::StrategyOptions &o) {
    nvidia = o.nvidia;
    tensorCores = o.tensorCores;
    intraLanes = o.intraLanes;
    stateLanes = o.stateLanes;
    stepLanes = o.stepLanes;
    chunkLanes = o.chunkLanes;
    decodeLanes = o.decodeLanes;
    windowLanes = o.windowLanes;
    stateStages = o.stateStages;
    threads = o.threads;
    warpSize = o.warpSize;
    instructions = o.instructions;
    sharedMemory = o.sharedMemory;
    wgmma = o.wgmma;
    remarks = o.remarks;
  }

  void runOnOperation() override {
    kda::StrategyOptions o;
    o.nvidia = nvidia;
    o.tensorCores = tensorCores;
    o.intraLanes = intraLanes;
    o.stateLanes = stateLanes;
    o.stepLanes = stepLanes;
    o.chunkLanes = chunkLanes;
    o.decodeLanes = decodeLanes;
    o.windowLanes = windowLanes;
    o.stateStages = stateStages;
    o.threads = threads;
    o.warpSize = warpSize;
    o.instructions = instructions;
    o.sharedMemory = sharedMemory;
    o.wgmma = wgmma;
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f->hasAttr("kda.kernel") || f.isExternal())
        continue;
      Decision d = decide(f, o);
      // The op's own #kda.tile comes first (then the tuning database and
      // the shape policy, given as state-stages, then the target's
      // default). Fields at their defaults say nothing (they cannot be told
      // from fields left out).
      if (auto tile = f->getAttrOfType<kda::TileAttr>("kda.tile")) {
        // Warps per program are the pipeline's threads for every kernel;
        // a different count in one op's tile would be dropped silently.
        if (tile.getWarps() != 4 &&
            tile.getWarps() * o.warpSize != o.threads) {
          mlir::emitError(f.getLoc()) << "kda-gpu-select-strategy: #kda.tile warps = "
                        << tile.getWarps() << " of kernel '" << f.getSymName()
                        << "': warps come from the threads per block of every "
                           "kernel ("
                        << o.threads << " threads: " << o.threads / o.warpSize
                        << " of " << o.warpSize
                        << " lanes); compile with threads = "
                        << tile.getWarps() * o.warpSize
                        << " (kda-compile --block-threads) or leave warps out";
          return signalPassFailure();
        }
        // Chunks in flight of the state program (its cp.async pipeline
        // takes 2 to 8; one stage is no pipeline, which it does not have).
        if (d.stages > 0 && tile.getStages() != 2)
          d.stages = std::max<int64_t>(2, tile.getStages());
      }
      // A chunk run as sub-chunk steps (kda-tile-chunks' sub-chunk-steps):
      // the manifest says which step the kernel takes for the op's chunk.
      std::optional<std::pair<int64_t, int64_t>> chunks;
      if (auto intra = f->getAttrOfType<kda::IntraPassAttr>(kda::kIntraPassAttr))
        chunks = {intra.getChunk(), intra.getTileChunk()};
      if (auto state = f->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr))
        chunks = {state.getChunk(), state.getTileChunk()};
      int64_t step = 0, tileChunk = 0;
      if (chunks && chunks->first != chunks->second)
        std::tie(step, tileChunk) = *chunks;
      f->setAttr(kda::kStrategyAttr,
                 kda::StrategyAttr::get(&getContext(), d.kernel,
                                        d.reason.empty() ? "lanes" : "tiles",
                                        d.reason, step, tileChunk,
                                        d.instruction, d.program, d.stages));
      if (remarks && !d.reason.empty() && d.kernel != "elementwise" &&
          d.kernel != "combine" && d.kernel != "gradient") {
        // At the op's location, without the kernel's IR (a remark, not an
        // error to debug).
        InFlightDiagnostic r = mlir::emitRemark(f.getLoc())
                               << "kda-gpu-select-strategy: the " << d.kernel
                               << " kernel '" << f.getSymName()
                               << "' takes the shared-memory tile lowering, "
                                  "several times slower than lanes: "
                               << d.reason;
        if (!d.fix.empty())
          r << "; fix: " << d.fix;
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass>
mlir::kda::createGpuSelectStrategyPass(const StrategyOptions &o) {
  return std::make_unique<SelectStrategyPass>(o);
}


bool mlir::kda::runsOnLanes(func::FuncOp func, StringRef refusal) {
  if (auto s = func->getAttrOfType<StrategyAttr>(kStrategyAttr))
    return s.getKind() == "lanes";
  return refusal.empty();
}

StringRef mlir::kda::strategyInstruction(func::FuncOp func) {
  if (auto s = func->getAttrOfType<StrategyAttr>(kStrategyAttr))
    return s.getInstruction();
  return "";
}

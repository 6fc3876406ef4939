//===- GpuTileMatmuls.cpp - tile matmuls on NVIDIA tensor cores -----------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace {
struct TileMatmulsPass
    : PassWrapper<TileMatmulsPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TileMatmulsPass)
  StringRef getArgument() const override { return "kda-gpu-tile-matmuls"; }
  StringRef getDescription() const override {
    return "Run tile matmuls on tensor cores (nvgpu.mma.sync)";
  }
  void runOnOperation() override {}
};
} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuTileMatmulsPass() {
  return std::make_unique<TileMatmulsPass>();
}

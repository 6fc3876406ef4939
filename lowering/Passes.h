//===- Passes.h - the passes of lowering/ ---------------------*- C++ -*-===//
//
// Declared in lowering/Passes.td (base classes, option structs, creation
// and registration: registerKdaLoweringPasses). The pipelines that order
// them: CpuPipeline.h, GpuPipeline.h.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_PASSES_H
#define KDA_LOWERING_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kda {

#define GEN_PASS_DECL
#include "lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Passes.h.inc"

} // namespace mlir::kda

#endif // KDA_LOWERING_PASSES_H

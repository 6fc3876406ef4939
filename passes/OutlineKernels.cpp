//===- OutlineKernels.cpp - one kernel function per kda op configuration --===//

#include "passes/Passes.h"

#include "dialect/KdaOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAOUTLINEKERNELS
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

/// What makes two ops the same kernel: name, attributes, operand and result
/// types (and which optional operands are present, via the segment sizes).
std::string configurationKey(Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << op->getAttrDictionary() << "(";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << ")->(";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << ")";
  return key;
}

struct KdaOutlineKernelsPass
    : mlir::kda::impl::KdaOutlineKernelsBase<KdaOutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::StringMap<func::FuncOp> kernels;
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (!isa<GatedDeltaOp, DecodeStepOp, WindowAttentionOp>(op) ||
          op->getParentOfType<func::FuncOp>()->hasAttr("kda.kernel"))
        return;
      // Kernels return their results through caller-allocated buffers,
      // which needs static result shapes; other ops stay where they are.
      if (llvm::all_of(op->getResultTypes(), [](Type t) {
            return cast<ShapedType>(t).hasStaticShape();
          }))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      func::FuncOp &kernel = kernels[configurationKey(op)];
      if (!kernel) {
        OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
        auto type = b.getFunctionType(op->getOperandTypes(),
                                      op->getResultTypes());
        std::string name =
            "kda_" + op->getName().stripDialect().str() + "_kernel";
        kernel = func::FuncOp::create(b, op->getLoc(), name, type);
        kernel.setPrivate();
        kernel->setAttr("kda.kernel", b.getUnitAttr());
        symbols.insert(kernel); // uniques the name
        Block *entry = kernel.addEntryBlock();
        b.setInsertionPointToStart(entry);
        IRMapping mapping;
        mapping.map(op->getOperands(), entry->getArguments());
        Operation *clone = b.clone(*op, mapping);
        func::ReturnOp::create(b, op->getLoc(), clone->getResults());
      }
      OpBuilder b(op);
      auto call = func::CallOp::create(b, op->getLoc(), kernel,
                                       op->getOperands());
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
  }
};

} // namespace

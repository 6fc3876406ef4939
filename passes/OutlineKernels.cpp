//===- OutlineKernels.cpp - one kernel function per kda op configuration --===//

#include "passes/Passes.h"

#include "dialect/KdaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
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
  using KdaOutlineKernelsBase::KdaOutlineKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::StringMap<func::FuncOp> kernels;
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (!isa<GatedDeltaOp, GatedDeltaGradOp, DecodeStepOp, WindowAttentionOp>(
               op) ||
          op->getParentOfType<func::FuncOp>()->hasAttr("kda.kernel"))
        return;
      // Kernels return their results through caller-allocated buffers,
      // which needs static result shapes unless the caller passes them
      // (destination style); other ops stay where they are.
      if (destinationStyle ||
          llvm::all_of(op->getResultTypes(), [](Type t) {
            return cast<ShapedType>(t).hasStaticShape();
          }))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      // Results a destination-style op already writes into an operand need
      // no extra argument.
      SmallVector<Value> destinations;
      if (destinationStyle && !isa<DestinationStyleOpInterface>(op))
        destinations.append(op->result_begin(), op->result_end());
      DimensionNames names;
      if (destinationStyle)
        names = abiNames(op);

      func::FuncOp &kernel = kernels[configurationKey(op)];
      if (!kernel) {
        OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
        SmallVector<Type> argTypes(op->getOperandTypes());
        for (Value d : destinations)
          argTypes.push_back(d.getType());
        auto type = b.getFunctionType(argTypes, op->getResultTypes());
        std::string name =
            "kda_" + op->getName().stripDialect().str() + "_kernel";
        kernel = func::FuncOp::create(b, op->getLoc(), name, type);
        kernel.setPrivate();
        kernel->setAttr("kda.kernel", b.getUnitAttr());
        symbols.insert(kernel); // uniques the name
        Block *entry = kernel.addEntryBlock();
        b.setInsertionPointToStart(entry);
        // One argument per operand, also where the op reads one value twice
        // (q and k the same tensor), which a value-to-value mapping would
        // merge (the ops have no regions: operands are all there is to map).
        Operation *clone = b.clone(*op);
        clone->setOperands(
            entry->getArguments().take_front(op->getNumOperands()));
        func::ReturnOp::create(b, op->getLoc(), clone->getResults());
        if (destinationStyle) {
          // Named from the kernel's own op, whose operands are distinct
          // arguments: an op that reads one value twice (q and k the same
          // tensor) still gets one name per argument ("q", "k"), which the
          // GPU lowerings look arguments up by.
          DimensionNames kernelNames = abiNames(clone);
          SmallVector<Value> described(clone->getOperands());
          if (!destinations.empty())
            described.append(clone->result_begin(), clone->result_end());
          kernel->setAttr("kda.abi",
                          describeArguments(b, kernelNames, described));
          // The op's own tiles, for the bundle manifest.
          if (Attribute tile = op->getAttr("tile"))
            kernel->setAttr("kda.tile", tile);
          // A fused window of a hybrid's overlap schedule.
          if (op->hasAttr(kOverlapAttr))
            kernel->setAttr(kOverlapAttr, b.getUnitAttr());
        }
      }
      OpBuilder b(op);
      SmallVector<Value> args(op->getOperands());
      for (Value d : destinations) {
        auto type = cast<RankedTensorType>(d.getType());
        SmallVector<Value> dynamicSizes;
        for (int64_t i = 0; i < type.getRank(); ++i)
          if (type.isDynamicDim(i)) {
            Value size = dynamicSizeOf(b, op, names, d, i);
            if (!size) {
              op->emitOpError() << "kda-outline-kernels: cannot tell the "
                                   "size of result dimension " << i;
              return signalPassFailure();
            }
            dynamicSizes.push_back(size);
          }
        args.push_back(tensor::EmptyOp::create(b, op->getLoc(), type.getShape(),
                                               type.getElementType(),
                                               dynamicSizes));
      }
      auto call = func::CallOp::create(b, op->getLoc(), kernel, args);
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
  }

  /// [{name, dims}] per kernel argument: dims hold static sizes as integers
  /// and dynamic ones as the verifier's dimension names.
  /// The op's kernel ABI (KernelAbiOpInterface: the names its verifier
  /// gives each operand, result and dimension), by value.
  static DimensionNames abiNames(Operation *op) {
    DimensionNames names;
    if (auto abi = dyn_cast<KernelAbiOpInterface>(op))
      for (KernelArgument &a : abi.getKernelArguments())
        names[a.value] = {a.name, a.dims};
    return names;
  }

  static ArrayAttr describeArguments(OpBuilder &b, DimensionNames names,
                                     ArrayRef<Value> values) {
    // Without cu_seqlens the number of sequences N is the batch B: one
    // symbol, so that a launch checks they agree.
    bool varlen = llvm::any_of(names, [](auto &entry) {
      return llvm::is_contained(entry.second.dims, "N+1");
    });
    if (!varlen)
      for (auto &entry : names)
        for (std::string &d : entry.second.dims)
          if (d == "N")
            d = "B";
    SmallVector<Attribute> entries;
    for (auto [i, v] : llvm::enumerate(values)) {
      auto type = cast<ShapedType>(v.getType());
      auto it = names.find(v);
      std::string name = "arg" + std::to_string(i);
      if (it != names.end())
        name = it->second.name;
      SmallVector<Attribute> dims;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (!type.isDynamicDim(d)) {
          dims.push_back(b.getI64IntegerAttr(type.getDimSize(d)));
        } else if (it != names.end() && d < (int64_t)it->second.dims.size()) {
          dims.push_back(b.getStringAttr(it->second.dims[d]));
        } else {
          dims.push_back(
              b.getStringAttr(name + "_" + std::to_string(d)));
        }
      }
      entries.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", b.getStringAttr(name)),
           b.getNamedAttr("dims", b.getArrayAttr(dims))}));
    }
    return b.getArrayAttr(entries);
  }

  /// A dynamic size of result `r` from an operand dimension with the same
  /// name (every result dimension of a kda op is named after an operand's;
  /// N, the number of sequences, is cu_seqlens' N+1 minus one, else B).
  /// Null when there is none.
  static Value dynamicSizeOf(OpBuilder &b, Operation *op,
                             const DimensionNames &names, Value r,
                             int64_t dim) {
    auto it = names.find(r);
    if (it == names.end() || dim >= (int64_t)it->second.dims.size())
      return {};
    Location loc = op->getLoc();
    auto find = [&](StringRef want) -> Value {
      for (Value operand : op->getOperands()) {
        auto o = names.find(operand);
        if (o == names.end())
          continue;
        for (auto [d, n] : llvm::enumerate(o->second.dims))
          if (n == want)
            return tensor::DimOp::create(b, loc, operand, d);
      }
      return {};
    };
    StringRef want = it->second.dims[dim];
    if (want == "HO") { // window attention's output heads: max(HQ, HV)
      Value hq = find("HQ"), hv = find("HV");
      if (!hq || !hv)
        return {};
      return arith::MaxUIOp::create(b, loc, hq, hv);
    }
    if (want == "NT") { // boundary states: ceil(T / boundary_interval)
      auto gd = dyn_cast<GatedDeltaOp>(op);
      Value t = find("T");
      if (!gd || !gd.getBoundaryInterval() || !t)
        return {};
      // With cu_seqlens, NT is the caller's (at most this, T being the
      // total); a bundle's caller passes the buffer and this host-side
      // allocation is not part of it.
      return arith::CeilDivUIOp::create(
          b, loc, t,
          arith::ConstantIndexOp::create(b, loc, *gd.getBoundaryInterval()));
    }
    if (want == "S") { // a pool of boundary states: the caller's
      // One slot per table entry on the host side; a bundle's caller passes
      // its own pool and this allocation is not part of it.
      auto gd = dyn_cast<GatedDeltaOp>(op);
      if (!gd || !gd.getBoundaryIndices())
        return {};
      Value table = gd.getBoundaryIndices();
      return arith::MulIOp::create(b, loc,
                                   tensor::DimOp::create(b, loc, table, 0),
                                   tensor::DimOp::create(b, loc, table, 1));
    }
    if (want != "N")
      return find(want);
    if (Value n1 = find("N+1"))
      return arith::SubIOp::create(b, loc, n1,
                                   arith::ConstantIndexOp::create(b, loc, 1));
    return find("B");
  }
};

} // namespace

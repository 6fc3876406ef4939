//===- GpuSplitSchedule.cpp - one kernel per program grid of a schedule ---===//
//
// kda-tile-chunks' chunk-parallel schedule leaves a kernel function with
// several program grids (scf.forall) that run one after another and hand
// each other tensors: the intra-chunk grid writes workspaces, the state grid
// reads them. A GPU launch is one grid, so this pass
//
//   * makes one kernel function per grid, named after its `kda.phase`
//     (kda_gated_delta_kernel_intra, kda_gated_delta_kernel_state), whose
//     arguments are the inputs it reads, the workspaces it reads, then what
//     it writes (workspaces, or the op's results for the last grid), each
//     described in `kda.abi` like every kernel argument;
//   * turns the original function into a host-side schedule that calls them
//     in order, with workspaces as fresh tensors;
//   * records the schedule as a bundle *entry* (module attribute
//     `kda.entries`): the op's parameters, the workspaces with their shapes
//     in the op's dimension symbols, and the launches with the name of the
//     tensor each kernel argument receives. The runtime runs an entry behind
//     one call and allocates its workspaces (runtime/BUNDLE.md).
//
//===----------------------------------------------------------------------===//

#include "dialect/KdaAttrs.h"
#include "lowering/GpuPipeline.h"

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUSPLITSCHEDULE
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

constexpr StringLiteral kKernelAttr = "kda.kernel";
constexpr StringLiteral kAbiAttr = "kda.abi";

/// An abi dims list as a manifest shape: integers and symbols.
ArrayAttr manifestShape(ArrayAttr dims, Builder &b) {
  SmallVector<Attribute> shape;
  for (Attribute d : dims) {
    if (auto s = dyn_cast<StringAttr>(d))
      shape.push_back(b.getStringAttr(kda::manifestSymbol(s.getValue())));
    else
      shape.push_back(d);
  }
  return b.getArrayAttr(shape);
}

/// The tensor.empty a grid output starts from (through fills).
tensor::EmptyOp emptyOf(Value v) {
  while (auto fill = v.getDefiningOp<linalg::FillOp>())
    v = fill.getOutputs()[0];
  return v.getDefiningOp<tensor::EmptyOp>();
}

struct SplitSchedulePass : kda::impl::KdaGpuSplitScheduleBase<SplitSchedulePass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<func::FuncDialect, tensor::TensorDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> candidates;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kKernelAttr) && f->hasAttr(kAbiAttr) && !f.isExternal())
        candidates.push_back(f);
    SmallVector<Attribute> entries;
    if (auto existing = module->getAttrOfType<ArrayAttr>("kda.entries"))
      entries.append(existing.begin(), existing.end());
    for (func::FuncOp f : candidates) {
      SmallVector<scf::ForallOp> grids;
      for (Operation &op : f.getBody().front())
        if (auto g = dyn_cast<scf::ForallOp>(op))
          grids.push_back(g);
      if (grids.size() < 2)
        continue;
      FailureOr<DictionaryAttr> entry = split(f, grids);
      if (failed(entry))
        return signalPassFailure();
      entries.push_back(*entry);
    }
    if (!entries.empty())
      module->setAttr("kda.entries",
                      ArrayAttr::get(&getContext(), entries));
  }

  /// The dims of a workspace that starts as `empty`: static sizes, and
  /// dynamic ones as the dimension name of the argument they are read from.
  FailureOr<ArrayAttr> workspaceDims(tensor::EmptyOp empty, func::FuncOp f,
                                     ArrayAttr abi, Builder &b) {
    SmallVector<Attribute> dims;
    auto type = empty.getType();
    unsigned dynamic = 0;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!type.isDynamicDim(d)) {
        dims.push_back(b.getI64IntegerAttr(type.getDimSize(d)));
        continue;
      }
      Value size = empty.getDynamicSizes()[dynamic++];
      auto dim = size.getDefiningOp<tensor::DimOp>();
      auto arg = dim ? dyn_cast<BlockArgument>(dim.getSource()) : nullptr;
      std::optional<int64_t> index =
          dim ? getConstantIntValue(dim.getIndex()) : std::nullopt;
      if (!arg || arg.getOwner() != &f.getBody().front() || !index)
        return empty.emitError("kda-gpu-split-schedule: workspace dimension ")
               << d << " is not a dimension of a kernel argument";
      auto argDims = cast<ArrayAttr>(
          cast<DictionaryAttr>(abi[arg.getArgNumber()]).get("dims"));
      dims.push_back(argDims[*index]);
    }
    return b.getArrayAttr(dims);
  }

  FailureOr<DictionaryAttr> split(func::FuncOp f,
                                  ArrayRef<scf::ForallOp> grids) {
    MLIRContext *ctx = f.getContext();
    Builder b(ctx);
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto abi = f->getAttrOfType<ArrayAttr>(kAbiAttr);
    const unsigned numArgs = f.getNumArguments();
    const unsigned firstDest = numArgs - ret.getNumOperands();
    auto argName = [&](unsigned i) {
      return cast<StringAttr>(cast<DictionaryAttr>(abi[i]).get("name"));
    };

    // Which grid writes each of the function's results (through casts):
    // any grid may (the gradient's first grid writes dv while later grids
    // sum dq); every other result of a grid is a workspace that only later
    // grids read.
    auto gridResultOf = [](Value v) -> OpResult {
      while (auto cast = v.getDefiningOp<tensor::CastOp>())
        v = cast.getSource();
      if (!v.getDefiningOp<scf::ForallOp>())
        return OpResult();
      return cast<OpResult>(v);
    };
    // Per grid: the indices of the function's results it writes.
    SmallVector<SmallVector<unsigned>> writes(grids.size());
    llvm::DenseSet<Value> returned;
    for (auto [j, value] : llvm::enumerate(ret.getOperands())) {
      OpResult r = gridResultOf(value);
      auto it = r ? llvm::find(grids, r.getOwner()) : grids.end();
      // Not a grid's (a destination left as the caller holds it): the last
      // kernel's, as before.
      size_t g = it == grids.end() ? grids.size() - 1 : it - grids.begin();
      writes[g].push_back(j);
      if (r)
        returned.insert(r);
    }
    // A result that a later grid's output starts from, where that later
    // grid writes one of the function's results from it (the gradient's dq
    // without GVA: the chunk grid writes its rows in place and the sums
    // none): both kernels write that result's buffer, the earlier first.
    // chained: the earlier grid's result -> the function's result index.
    llvm::DenseMap<Value, unsigned> chained;
    for (auto [gj, constG] : llvm::enumerate(grids)) {
      scf::ForallOp g = constG;
      for (unsigned j : writes[gj]) {
        OpResult r = gridResultOf(ret.getOperand(j));
        if (!r || r.getOwner() != g.getOperation())
          continue;
        Value init = g.getOutputs()[r.getResultNumber()];
        while (auto cast = init.getDefiningOp<tensor::CastOp>())
          init = cast.getSource();
        auto earlier = init.getDefiningOp<scf::ForallOp>();
        auto it = earlier ? llvm::find(grids, earlier) : grids.end();
        if (it == grids.end() || size_t(it - grids.begin()) >= gj ||
            !init.hasOneUse())
          continue;
        chained[init] = j;
        writes[it - grids.begin()].push_back(j);
        returned.insert(init);
      }
    }
    llvm::DenseMap<Value, std::pair<StringAttr, DictionaryAttr>> workspaces;
    SmallVector<Attribute> workspaceList;
    SmallVector<SmallVector<Value>> gridWorkspaces(grids.size());
    for (auto [gi, constG] : llvm::enumerate(grids)) {
      scf::ForallOp g = constG;
      const bool last = gi + 1 == grids.size();
      for (auto [r, result] : llvm::enumerate(g.getResults())) {
        if (returned.contains(result))
          continue;
        if (last)
          continue; // unused (the last grid's are the function's)
        tensor::EmptyOp empty = emptyOf(g.getOutputs()[r]);
        if (!empty)
          return g.emitError("kda-gpu-split-schedule: workspace ")
                 << r << " does not start as an empty tensor";
        FailureOr<ArrayAttr> dims = workspaceDims(empty, f, abi, b);
        if (failed(dims))
          return failure();
        auto name = b.getStringAttr("ws" + std::to_string(workspaces.size()));
        DictionaryAttr desc = b.getDictionaryAttr(
            {b.getNamedAttr("name", name), b.getNamedAttr("dims", *dims)});
        workspaces[result] = {name, desc};
        gridWorkspaces[gi].push_back(result);
        workspaceList.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("name", name),
             b.getNamedAttr("shape", manifestShape(*dims, b)),
             b.getNamedAttr("dtype",
                            b.getStringAttr(kda::manifestDtype(
                                cast<ShapedType>(result.getType())
                                    .getElementType())))}));
      }
    }

    OpBuilder mb(f);
    mb.setInsertionPointAfter(f);
    SymbolTable symbols(f->getParentOfType<ModuleOp>());
    SmallVector<func::FuncOp> kernels;
    SmallVector<SmallVector<Value>> kernelReads;
    SmallVector<Attribute> launches;
    for (auto [i, constGrid] : llvm::enumerate(grids)) {
      scf::ForallOp grid = constGrid;
      // What the grid needs from the function body: ops to clone, and
      // workspaces written by earlier grids.
      llvm::SetVector<Operation *> needed;
      llvm::SetVector<Value> reads;
      SmallVector<Operation *> worklist = {grid};
      // The earlier grid's own result where it writes a chained one.
      auto writtenBy = [&](unsigned j) -> Value {
        for (auto [v, k] : chained)
          if (k == j && v.getDefiningOp() == grid.getOperation())
            return v;
        return ret.getOperand(j);
      };
      // The ops between the grid and the results it writes (casts).
      for (unsigned j : writes[i])
        if (Operation *def = writtenBy(j).getDefiningOp();
            def && def != grid.getOperation() && def->getBlock() == &body)
          worklist.push_back(def);
      for (Operation *op : llvm::drop_begin(worklist))
        needed.insert(op);
      bool bad = false;
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        llvm::SetVector<Value> used;
        for (Value v : op->getOperands())
          used.insert(v);
        getUsedValuesDefinedAbove(op->getRegions(), used);
        for (Value v : used) {
          Operation *def = v.getDefiningOp();
          if (!def || def->getBlock() != &body)
            continue; // a function argument (or defined inside `op`)
          if (auto other = dyn_cast<scf::ForallOp>(def)) {
            if (other != grid) {
              if (chained.count(v))
                continue; // this kernel's destination (mapped below)
              if (!workspaces.count(v)) {
                bad = true;
                continue;
              }
              reads.insert(v);
            }
            continue;
          }
          if (needed.insert(def))
            worklist.push_back(def);
        }
      }
      if (bad)
        return grid.emitError("kda-gpu-split-schedule: a grid reads the "
                              "results of a later grid");

      // The kernel: inputs, workspaces read, then what it writes.
      SmallVector<Type> argTypes;
      SmallVector<Attribute> argAbi;
      SmallVector<Attribute> argNames;
      for (unsigned a = 0; a < firstDest; ++a) {
        argTypes.push_back(f.getArgument(a).getType());
        argAbi.push_back(abi[a]);
        argNames.push_back(argName(a));
      }
      for (Value r : reads) {
        argTypes.push_back(r.getType());
        argAbi.push_back(workspaces[r].second);
        argNames.push_back(workspaces[r].first);
      }
      SmallVector<Type> resultTypes;
      for (Value r : gridWorkspaces[i]) {
        argTypes.push_back(r.getType());
        argAbi.push_back(workspaces[r].second);
        argNames.push_back(workspaces[r].first);
        resultTypes.push_back(r.getType());
      }
      for (unsigned j : writes[i]) {
        unsigned a = firstDest + j;
        argTypes.push_back(f.getArgument(a).getType());
        argAbi.push_back(abi[a]);
        argNames.push_back(argName(a));
        resultTypes.push_back(ret.getOperand(j).getType());
      }
      std::string suffix = "_" + std::to_string(i);
      if (auto phases = f->getAttrOfType<ArrayAttr>(kda::kPhaseAttr);
          phases && phases.size() == grids.size())
        suffix = "_" + cast<StringAttr>(phases[i]).getValue().str();
      auto kernel = func::FuncOp::create(
          mb, f.getLoc(), f.getSymName().str() + suffix,
          b.getFunctionType(argTypes, resultTypes));
      kernel.setPrivate();
      symbols.insert(kernel);
      kernel->setAttr(kKernelAttr, b.getUnitAttr());
      kernel->setAttr(kAbiAttr, b.getArrayAttr(argAbi));
      if (Attribute tile = f->getAttr("kda.tile"))
        kernel->setAttr("kda.tile", tile);
      if (auto state =
              f->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr)) {
        if (suffix == "_state")
          kernel->setAttr(kda::kStatePassAttr, state);
        // The segments' summary kernel is a state program too (its
        // description says `summary`).
        if (auto summary = f->getAttrOfType<kda::StatePassAttr>(
                kda::kSummaryPassAttr);
            summary && suffix == "_summary")
          kernel->setAttr(kda::kStatePassAttr, summary);
        if (suffix == "_intra")
          kernel->setAttr(kda::kChunkGridAttr,
                          b.getI64IntegerAttr(state.getChunk()));
      }
      if (Attribute reverse = f->getAttr(kda::kReversePassAttr))
        if (suffix == "_reverse")
          kernel->setAttr(kda::kReversePassAttr, reverse);
      if (Attribute step = f->getAttr(kda::kStepPassAttr))
        if (suffix == "_step")
          kernel->setAttr(kda::kStepPassAttr, step);
      if (Attribute intra = f->getAttr(kda::kIntraPassAttr))
        if (suffix == "_intra")
          kernel->setAttr(kda::kIntraPassAttr, intra);
      if (Attribute chunk = f->getAttr(kda::kChunkPassAttr))
        if (suffix == "_chunk")
          kernel->setAttr(kda::kChunkPassAttr, chunk);
      Block *entry = kernel.addEntryBlock();
      IRMapping map;
      unsigned next = 0;
      for (unsigned a = 0; a < firstDest; ++a)
        map.map(f.getArgument(a), entry->getArgument(next++));
      for (Value r : reads)
        map.map(r, entry->getArgument(next++));
      next += gridWorkspaces[i].size(); // the destinations of workspaces
      for (unsigned j : writes[i]) {
        BlockArgument dest = entry->getArgument(next++);
        map.map(f.getArgument(firstDest + j), dest);
        // A later grid of a chained result starts from the destination.
        for (auto [v, k] : chained)
          if (k == j && v.getDefiningOp() != grid.getOperation())
            map.map(v, dest);
      }
      OpBuilder kb = OpBuilder::atBlockEnd(entry);
      for (Operation &op : body) {
        if (&op == grid.getOperation() || needed.contains(&op))
          kb.clone(op, map);
      }
      SmallVector<Value> results;
      for (Value r : gridWorkspaces[i])
        results.push_back(map.lookup(r));
      for (auto [at, j] : llvm::enumerate(writes[i])) {
        Value r = map.lookupOrDefault(writtenBy(j));
        Type want = resultTypes[gridWorkspaces[i].size() + at];
        if (r.getType() != want)
          r = tensor::CastOp::create(kb, f.getLoc(), want, r);
        results.push_back(r);
      }
      func::ReturnOp::create(kb, f.getLoc(), results);
      mb.setInsertionPointAfter(kernel);
      kernels.push_back(kernel);
      kernelReads.push_back(SmallVector<Value>(reads.begin(), reads.end()));
      launches.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("kernel", b.getStringAttr(kernel.getSymName())),
           b.getNamedAttr("args", b.getArrayAttr(argNames))}));
    }

    // The original function becomes the host-side schedule: its kernels in
    // order, each workspace a fresh tensor.
    Block *schedule = new Block();
    f.getBody().push_front(schedule);
    for (BlockArgument a : body.getArguments())
      schedule->addArgument(a.getType(), a.getLoc());
    OpBuilder sb = OpBuilder::atBlockEnd(schedule);
    IRMapping map;
    for (auto [o, n] : llvm::zip(body.getArguments(), schedule->getArguments()))
      map.map(o, n);
    SmallVector<Value> finalResults(ret.getNumOperands());
    for (auto [i, constGrid] : llvm::enumerate(grids)) {
      SmallVector<Value> args;
      for (unsigned a = 0; a < firstDest; ++a)
        args.push_back(schedule->getArgument(a));
      for (Value r : kernelReads[i])
        args.push_back(map.lookup(r));
      for (Value r : gridWorkspaces[i]) {
        scf::ForallOp grid = constGrid;
        Value out = grid.getOutputs()[cast<OpResult>(r).getResultNumber()];
        tensor::EmptyOp empty = emptyOf(out);
        SmallVector<Value> sizes;
        for (Value s : empty.getDynamicSizes()) {
          auto dim = s.getDefiningOp<tensor::DimOp>();
          sizes.push_back(tensor::DimOp::create(
              sb, f.getLoc(), map.lookup(dim.getSource()),
              *getConstantIntValue(dim.getIndex())));
        }
        args.push_back(tensor::EmptyOp::create(sb, f.getLoc(),
                                               empty.getType(), sizes));
      }
      // (A chained result's later kernel takes what the earlier wrote.)
      for (unsigned j : writes[i])
        args.push_back(finalResults[j] ? finalResults[j]
                                       : schedule->getArgument(firstDest + j));
      auto call = func::CallOp::create(sb, f.getLoc(), kernels[i], args);
      unsigned c = 0;
      for (Value r : gridWorkspaces[i])
        map.map(r, call.getResult(c++));
      for (unsigned j : writes[i])
        finalResults[j] = call.getResult(c++);
    }
    func::ReturnOp::create(sb, f.getLoc(), finalResults);
    body.dropAllDefinedValueUses();
    body.erase();
    f->removeAttr(kKernelAttr);
    f->removeAttr(kAbiAttr);
    f->removeAttr("kda.tile");
    f->removeAttr(kda::kPhaseAttr);
    f->removeAttr(kda::kSummaryPassAttr);
    f->removeAttr(kda::kStatePassAttr);
    f->removeAttr(kda::kIntraPassAttr);
    f->removeAttr(kda::kReversePassAttr);
    f->removeAttr(kda::kStepPassAttr);
    f->removeAttr(kda::kChunkPassAttr);

    // The bundle entry: the op's parameters as its kernel would have had
    // them, the workspaces, the launches.
    SmallVector<Attribute> params;
    for (unsigned a = 0; a < numArgs; ++a) {
      auto type = cast<ShapedType>(f.getArgument(a).getType());
      params.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", argName(a)),
           b.getNamedAttr("shape",
                          manifestShape(cast<ArrayAttr>(
                                            cast<DictionaryAttr>(abi[a]).get(
                                                "dims")),
                                        b)),
           b.getNamedAttr("dtype", b.getStringAttr(
                                       kda::manifestDtype(type.getElementType())))}));
    }
    return b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(f.getSymName())),
         b.getNamedAttr("params", b.getArrayAttr(params)),
         b.getNamedAttr("workspaces", b.getArrayAttr(workspaceList)),
         b.getNamedAttr("launches", b.getArrayAttr(launches))});
  }
};

} // namespace

std::string mlir::kda::manifestSymbol(StringRef dim) {
  std::string s;
  for (char c : dim) {
    if (c == '+')
      s += "_plus_";
    else if (isalnum(static_cast<unsigned char>(c)) || c == '_')
      s += c;
    else
      s += '_';
  }
  return s;
}

StringRef mlir::kda::manifestDtype(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  return "";
}

std::unique_ptr<Pass> mlir::kda::createGpuSplitSchedulePass() {
  return std::make_unique<SplitSchedulePass>();
}

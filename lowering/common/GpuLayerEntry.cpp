//===- GpuLayerEntry.cpp - a function of several kda kernels as one entry -===//
//
// A model layer is more than one kda op: a gated hybrid is a gated delta
// rule (itself an entry of two kernels, kda-gpu-split-schedule), a window
// attention and the mix (a kernel of kda-gpu-outline-elementwise). After
// those passes the layer's function is host code: calls to kernels and
// entries on fresh tensors. This pass records such a function as one more
// bundle entry (module attribute `kda.entries`, runtime/BUNDLE.md), named
// after the function, so that the runtime runs the whole layer behind one
// call, with one workspace allocation:
//
//   * the function's arguments are the entry's first parameters, named by
//     their `kda.name` argument attribute, else after the kernel parameter
//     that first receives them (q, k, v, gate, ...);
//     each result is a parameter after them (`o`, the buffer the last
//     kernel writes in place of the function's fresh tensor; o0, o1, ...
//     for several, or the result's `kda.name`);
//   * every other destination (a `tensor.empty` a call writes: the gated
//     delta's output, the window's) is a workspace `cI_NAME` (call I, the
//     callee's parameter name), and a called entry's own workspaces are
//     spliced in as `cI_wsJ`;
//   * each call is a launch (an entry's launches in its order), its
//     arguments renamed to the layer's parameters and workspaces.
//
// The runtime checks at load that every launch argument has the shape of
// the kernel parameter it feeds, symbol for symbol. The pass therefore
// unifies dimensions across calls (a value passed to two kernels, a
// tensor.empty sized from another tensor's dims) and records the entry only
// where every class of equal dimensions has one symbol in every kernel that
// sees it (kda-gpu-outline-elementwise names a mix's loops after the kernel
// whose result it walks, so a hybrid's mix says B and T like the gated
// delta rule). A function this does not describe (other host work, a
// destination that is not a fresh tensor, two symbols for one dimension)
// gets no entry and keeps its kernels; the remark says why.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "lowering/Passes.h"
#include "lowering/Strategy.h"
#include "dialect/KdaAttrs.h"
#include "passes/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPULAYERENTRY
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

/// What a call's callee takes: its parameters (name, manifest shape) in
/// order, and for an entry its workspaces and launches.
struct Callee {
  SmallVector<std::string> names;
  SmallVector<ArrayAttr> shapes;
  DictionaryAttr entry; // null for a kernel
};

/// One launch of the layer before its schedule: the manifest fields so far,
/// the kernel, its arguments (buffer names), the call it comes from and its
/// index among that call's launches.
struct Pending {
  SmallVector<NamedAttribute> fields;
  StringAttr kernel;
  SmallVector<Attribute> args;
  size_t call, inCall;
};

/// Classes of equal dimensions, keyed by strings (union-find).
struct Classes {
  llvm::StringMap<std::string> parent;
  std::string leader(const std::string &key) {
    auto it = parent.find(key);
    if (it == parent.end() || it->second == key)
      return key;
    std::string root = leader(it->second);
    parent[key] = root;
    return root;
  }
  void join(const std::string &a, const std::string &b) {
    std::string ra = leader(a), rb = leader(b);
    if (ra != rb)
      parent[ra] = rb;
  }
};

struct LayerEntryPass : kda::impl::KdaGpuLayerEntryBase<LayerEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> entries;
    llvm::StringMap<DictionaryAttr> byName;
    if (auto existing = module->getAttrOfType<ArrayAttr>("kda.entries"))
      for (Attribute a : existing) {
        entries.push_back(a);
        auto e = cast<DictionaryAttr>(a);
        byName[cast<StringAttr>(e.get("name")).getValue()] = e;
      }
    const size_t before = entries.size();
    // (An entry whose state kernel now takes the counters is rewritten
    // even where its layer then gets no entry of its own.)
    bool rewritten = false;
    for (auto f : module.getOps<func::FuncOp>())
      if (progress && !f.isExternal() && !f->hasAttr("kda.kernel") &&
          !byName.count(f.getSymName()))
        rewritten |= threadProgress(f, byName, entries);
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || f->hasAttr("kda.kernel") ||
          byName.count(f.getSymName()))
        continue;
      std::string why;
      FailureOr<DictionaryAttr> entry = record(f, byName, why);
      if (succeeded(entry)) {
        entries.push_back(*entry);
      } else if (!why.empty() && remarks) {
        f.emitRemark() << "kda-gpu-layer-entry: @" << f.getSymName()
                       << " gets no bundle entry of its own: " << why;
      }
    }
    if (entries.size() != before || rewritten)
      module->setAttr("kda.entries",
                      ArrayAttr::get(&getContext(), entries));
  }

  /// Each launch's dependencies (`after`: the earlier launches that write
  /// what it reads or writes, or read what it writes; a kernel writes its
  /// last arguments, one per result of its function) and stream. Where a
  /// called entry's launches after its first (the gated delta's state pass)
  /// are independent of another call's (the window), they go to the side
  /// stream (`stream` 1): the runtime runs them beside that work, at the
  /// device's greatest priority, so that the latency-bound state pass and
  /// the compute-bound window share the chip (docs/pipelining.md).
  void schedule(func::FuncOp f, ArrayRef<func::CallOp> calls,
                ArrayRef<Pending> pending, SmallVectorImpl<Attribute> &launches,
                Builder &b, int progressState = -1, int progressWindow = -1,
                StringRef counter = "") {
    ModuleOp module = f->getParentOfType<ModuleOp>();
    const size_t n = pending.size();
    SmallVector<llvm::StringSet<>> reads(n), writes(n);
    for (auto [l, p] : llvm::enumerate(pending)) {
      // (A kernel the module does not hold: every argument may be written.)
      auto fn = module.lookupSymbol<func::FuncOp>(p.kernel);
      size_t written = fn ? fn.getNumResults() : p.args.size();
      for (auto [a, arg] : llvm::enumerate(p.args)) {
        StringRef name = cast<StringAttr>(arg).getValue();
        if (a + written >= p.args.size())
          writes[l].insert(name);
        else
          reads[l].insert(name);
      }
    }
    auto meets = [](const llvm::StringSet<> &x, const llvm::StringSet<> &y) {
      for (const auto &e : x)
        if (y.contains(e.getKey()))
          return true;
      return false;
    };
    SmallVector<SmallVector<size_t>> after(n);
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < j; ++i)
        if (meets(writes[i], reads[j]) || meets(writes[i], writes[j]) ||
            meets(reads[i], writes[j]))
          after[j].push_back(i);
    // Which launches depend on which, transitively.
    SmallVector<llvm::SmallBitVector> reach(n, llvm::SmallBitVector(n));
    for (size_t j = 0; j < n; ++j)
      for (size_t i : after[j]) {
        reach[j].set(i);
        reach[j] |= reach[i];
      }
    SmallVector<int> stream(n, 0);
    if (overlap)
      for (size_t ci = 0; ci < calls.size(); ++ci) {
        SmallVector<size_t> tail, others;
        for (size_t l = 0; l < n; ++l) {
          if (pending[l].call == ci && pending[l].inCall > 0)
            tail.push_back(l);
          else if (pending[l].call != ci)
            others.push_back(l);
        }
        bool independent = llvm::any_of(others, [&](size_t o) {
          return llvm::all_of(tail, [&](size_t t) {
            return !reach[t].test(o) && !reach[o].test(t);
          });
        });
        if (tail.empty() || !independent)
          continue;
        for (size_t t : tail)
          stream[t] = 1;
        break; // one side stream
      }
    // The overlap schedule (threadProgress): the state pass alone on the
    // side stream, the window after its progress.
    if (progressState >= 0) {
      llvm::fill(stream, 0);
      stream[progressState] = 1;
    }
    const bool twoStreams = llvm::is_contained(stream, 1);
    for (auto [l, p] : llvm::enumerate(pending)) {
      SmallVector<NamedAttribute> fields(p.fields);
      if (twoStreams) {
        SmallVector<Attribute> deps;
        for (size_t i : after[l])
          deps.push_back(b.getI64IntegerAttr(i));
        fields.push_back(b.getNamedAttr("after", b.getArrayAttr(deps)));
        // The side stream's launches hold a multiprocessor a block where
        // their grid leaves half the device to the other stream (the
        // runtime decides per call): beside co-resident window warps the
        // state pass's latency-bound programs lose their issue slots.
        if (stream[l]) {
          fields.push_back(b.getNamedAttr("stream", b.getI64IntegerAttr(1)));
          fields.push_back(b.getNamedAttr("alone", b.getBoolAttr(true)));
        }
        if (int(l) == progressWindow)
          fields.push_back(b.getNamedAttr(
              "progress",
              b.getDictionaryAttr(
                  {b.getNamedAttr("counter", b.getStringAttr(counter)),
                   b.getNamedAttr("after",
                                  b.getI64IntegerAttr(progressState))})));
      }
      launches.push_back(b.getDictionaryAttr(fields));
    }
  }

  /// The overlap schedule of a hybrid layer (kda.hybrid {overlap}: a fused
  /// window kernel marked kda.overlap whose mix_linear is the output of a
  /// gated delta entry's state kernel, dense), threaded through the IR
  /// before the layer is recorded: the state kernel, the entry function
  /// that calls it and the window kernel take an i32 argument `progress`
  /// [B, HV, V / v_block + 1] before their destinations; the layer makes it
  /// (a fresh tensor, a workspace of its entry) and passes it to both
  /// calls. The state kernel is marked to publish its progress every
  /// kProgressEvery chunks (kda.publish_progress), the window to wait for
  /// it (kda.wait_progress: the chunk); the lane passes emit both, and
  /// schedule() puts the state pass on the side stream with the window's
  /// `progress` (runtime/BUNDLE.md, "Progress").
  static constexpr int64_t kProgressEvery = 16;
  bool threadProgress(func::FuncOp f, llvm::StringMap<DictionaryAttr> &byName,
                      SmallVectorImpl<Attribute> &entries) {
    bool changed = false;
    ModuleOp module = f->getParentOfType<ModuleOp>();
    Builder b(f.getContext());
    auto abiIndex = [](func::FuncOp fn, StringRef name) -> int {
      auto abi = fn ? fn->getAttrOfType<ArrayAttr>("kda.abi") : nullptr;
      std::optional<unsigned> i =
          abi ? kda::abiArgumentIndex(abi, name) : std::nullopt;
      return i ? int(*i) : -1;
    };
    auto through = [](Value v) {
      while (auto cast = v.getDefiningOp<tensor::CastOp>())
        v = cast.getSource();
      return v;
    };
    // `fn` takes progress (dims as `like`'s first and third, then slots)
    // before its destinations; returns where.
    auto addArgument = [&](func::FuncOp fn, RankedTensorType type,
                           ArrayRef<Attribute> dims) {
      const unsigned at = fn.getNumArguments() - fn.getNumResults();
      (void)fn.insertArgument(at, type, DictionaryAttr(), fn.getLoc());
      if (auto abi = fn->getAttrOfType<ArrayAttr>("kda.abi")) {
        SmallVector<Attribute> list(abi.begin(), abi.end());
        list.insert(list.begin() + at,
                    b.getDictionaryAttr(
                        {b.getNamedAttr("dims", b.getArrayAttr(dims)),
                         b.getNamedAttr("name", b.getStringAttr("progress"))}));
        fn->setAttr("kda.abi", b.getArrayAttr(list));
      }
      return at;
    };
    SmallVector<func::CallOp> calls(f.getBody().getOps<func::CallOp>());
    for (func::CallOp wCall : calls) {
      auto window = module.lookupSymbol<func::FuncOp>(wCall.getCallee());
      auto wdesc = window ? window->getAttrOfType<kda::WindowPassAttr>(
                                kda::kWindowPassAttr)
                          : nullptr;
      const int ml = abiIndex(window, "mix_linear");
      if (!wdesc || !window->hasAttr(kda::kOverlapAttr) ||
          wdesc.getVarlen().getValue() || ml < 0 ||
          abiIndex(window, "progress") >= 0)
        continue;
      // Only where both kernels take lanes (the tile lowerings neither
      // publish nor wait): 16-bit inputs, a window of the register kernel's
      // sizes. Elsewhere the fused window follows the state pass.
      auto sixteenBit = [](Type t) {
        auto shaped = dyn_cast<ShapedType>(t);
        return shaped && (shaped.getElementType().isBF16() ||
                          shaped.getElementType().isF16());
      };
      if (!kda::windowLanesRefusal(wdesc, window.getFunctionType().getInputs(),
                                   /*chipHasWgmma=*/false)
               .empty() ||
          !sixteenBit(wCall.getOperand(0).getType()))
        continue;
      auto eCall = through(wCall.getOperand(ml)).getDefiningOp<func::CallOp>();
      auto entryFn =
          eCall ? module.lookupSymbol<func::FuncOp>(eCall.getCallee()) : nullptr;
      if (!entryFn || !byName.count(entryFn.getSymName()) ||
          eCall.getNumResults() != 1)
        continue;
      // The entry's state kernel call.
      func::CallOp sCall;
      func::FuncOp state;
      for (auto c : entryFn.getBody().getOps<func::CallOp>()) {
        auto fn = module.lookupSymbol<func::FuncOp>(c.getCallee());
        auto sdesc = fn ? fn->getAttrOfType<kda::StatePassAttr>(
                              kda::kStatePassAttr)
                        : nullptr;
        if (sdesc && !sdesc.getSummary() && sdesc.getSegments() <= 1 &&
            abiIndex(fn, "cu_seqlens") < 0 && abiIndex(fn, "o") >= 0)
          sCall = c, state = fn;
      }
      if (!state)
        continue;
      auto sdesc = state->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr);
      const int o = abiIndex(state, "o");
      auto dimsOf = [&](func::FuncOp fn, int i) {
        return cast<ArrayAttr>(cast<DictionaryAttr>(
                                   fn->getAttrOfType<ArrayAttr>("kda.abi")[i])
                                   .get("dims"));
      };
      ArrayAttr oDims = dimsOf(state, o);
      auto V = dyn_cast<IntegerAttr>(oDims[3]);
      if (!V || sdesc.getVBlock() <= 0 || V.getInt() % sdesc.getVBlock())
        continue;
      const int64_t slots = V.getInt() / sdesc.getVBlock() + 1;
      // The entry's destination (o, [B, T, HV, V]) sizes the counters.
      Value oDest = eCall.getOperand(eCall.getNumOperands() - 1);
      auto oType = cast<RankedTensorType>(oDest.getType());
      SmallVector<int64_t> shape = {oType.getDimSize(0), oType.getDimSize(2),
                                    slots};
      auto type = RankedTensorType::get(shape, b.getI32Type());
      auto slotsAttr = b.getI64IntegerAttr(slots);
      // The state kernel, the entry function and its JSON.
      const unsigned sAt =
          addArgument(state, type, {oDims[0], oDims[2], slotsAttr});
      state->setAttr(kda::kPublishProgressAttr,
                     b.getI64IntegerAttr(kProgressEvery));
      const unsigned eAt = entryFn.getNumArguments() - entryFn.getNumResults();
      (void)entryFn.insertArgument(eAt, type, DictionaryAttr(),
                                   entryFn.getLoc());
      {
        SmallVector<Value> operands(sCall.getOperands());
        operands.insert(operands.begin() + sAt, entryFn.getArgument(eAt));
        sCall->setOperands(operands);
      }
      DictionaryAttr json = byName[entryFn.getSymName()];
      auto eo = cast<DictionaryAttr>(
          cast<ArrayAttr>(json.get("params"))[eAt]); // its o
      auto eoShape = cast<ArrayAttr>(eo.get("shape"));
      SmallVector<Attribute> params(
          cast<ArrayAttr>(json.get("params")).getValue());
      params.insert(params.begin() + eAt,
                    b.getDictionaryAttr(
                        {b.getNamedAttr("dtype", b.getStringAttr("i32")),
                         b.getNamedAttr("name", b.getStringAttr("progress")),
                         b.getNamedAttr("shape",
                                        b.getArrayAttr({eoShape[0], eoShape[2],
                                                        slotsAttr}))}));
      SmallVector<Attribute> launches;
      for (Attribute a : cast<ArrayAttr>(json.get("launches"))) {
        auto l = cast<DictionaryAttr>(a);
        if (cast<StringAttr>(l.get("kernel")).getValue() !=
            state.getSymName()) {
          launches.push_back(a);
          continue;
        }
        SmallVector<Attribute> args(cast<ArrayAttr>(l.get("args")).getValue());
        args.insert(args.begin() + sAt, b.getStringAttr("progress"));
        SmallVector<NamedAttribute> fields(l.getValue());
        for (NamedAttribute &field : fields)
          if (field.getName() == "args")
            field.setValue(b.getArrayAttr(args));
        launches.push_back(b.getDictionaryAttr(fields));
      }
      SmallVector<NamedAttribute> fields(json.getValue());
      for (NamedAttribute &field : fields) {
        if (field.getName() == "params")
          field.setValue(b.getArrayAttr(params));
        if (field.getName() == "launches")
          field.setValue(b.getArrayAttr(launches));
      }
      DictionaryAttr updated = b.getDictionaryAttr(fields);
      for (Attribute &e : entries)
        if (e == json)
          e = updated;
      byName[entryFn.getSymName()] = updated;
      // The window kernel.
      ArrayAttr mlDims = dimsOf(window, ml);
      const unsigned wAt =
          addArgument(window, type, {mlDims[0], mlDims[2], slotsAttr});
      window->setAttr(kda::kWaitProgressAttr,
                      b.getI64IntegerAttr(sdesc.getChunk()));
      // The layer's counters, passed to both calls.
      OpBuilder ob(eCall);
      SmallVector<Value> sizes;
      for (int d : {0, 2})
        if (oType.isDynamicDim(d))
          sizes.push_back(tensor::DimOp::create(ob, eCall.getLoc(), oDest, d));
      Value counters =
          tensor::EmptyOp::create(ob, eCall.getLoc(), type, sizes);
      SmallVector<Value> eOperands(eCall.getOperands());
      eOperands.insert(eOperands.begin() + eAt, counters);
      eCall->setOperands(eOperands);
      SmallVector<Value> wOperands(wCall.getOperands());
      wOperands.insert(wOperands.begin() + wAt, counters);
      wCall->setOperands(wOperands);
      changed = true;
    }
    return changed;
  }

  /// The entry for `f`, or failure with `why` (empty: not a layer at all,
  /// such as a function of one call, nothing to say).
  FailureOr<DictionaryAttr> record(func::FuncOp f,
                                   const llvm::StringMap<DictionaryAttr> &byName,
                                   std::string &why) {
    Builder b(f.getContext());
    if (!llvm::hasSingleElement(f.getBody()))
      return failure();
    Block &body = f.getBody().front();
    SmallVector<func::CallOp> calls;
    for (Operation &op : body) {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        calls.push_back(call);
        continue;
      }
      if (isa<tensor::DimOp, tensor::EmptyOp, tensor::CastOp,
              arith::ConstantOp, func::ReturnOp>(op))
        continue;
      // Sizes of fresh tensors (the window's HO = max(HQ, HV)): the
      // callee's own symbol names that dimension.
      if (isa<arith::ArithDialect>(op.getDialect()) &&
          llvm::all_of(op.getResultTypes(),
                       [](Type t) { return t.isIndex(); }))
        continue;
      why = "it computes more than kernel calls (" +
            op.getName().getStringRef().str() + ")";
      return failure();
    }
    if (calls.size() < 2)
      return failure();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Each callee's parameters.
    SmallVector<Callee> callees;
    for (func::CallOp call : calls) {
      Callee c;
      StringRef name = call.getCallee();
      if (auto it = byName.find(name); it != byName.end()) {
        c.entry = it->second;
        for (Attribute p : cast<ArrayAttr>(c.entry.get("params"))) {
          auto param = cast<DictionaryAttr>(p);
          c.names.push_back(cast<StringAttr>(param.get("name")).str());
          c.shapes.push_back(cast<ArrayAttr>(param.get("shape")));
        }
      } else {
        auto fn = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr());
        auto abi = fn ? fn->getAttrOfType<ArrayAttr>("kda.abi") : nullptr;
        if (!fn || !fn->hasAttr("kda.kernel") || !abi) {
          why = "@" + name.str() + " is neither a kernel nor an entry";
          return failure();
        }
        for (Attribute a : abi) {
          auto d = cast<DictionaryAttr>(a);
          c.names.push_back(cast<StringAttr>(d.get("name")).str());
          SmallVector<Attribute> shape;
          for (Attribute dim : cast<ArrayAttr>(d.get("dims"))) {
            if (auto s = dyn_cast<StringAttr>(dim))
              shape.push_back(
                  b.getStringAttr(kda::manifestSymbol(s.getValue())));
            else
              shape.push_back(dim);
          }
          c.shapes.push_back(b.getArrayAttr(shape));
        }
      }
      if (c.names.size() != call.getNumOperands()) {
        why = "@" + name.str() + " takes " + std::to_string(c.names.size()) +
              " tensors, the call passes " +
              std::to_string(call.getNumOperands());
        return failure();
      }
      callees.push_back(std::move(c));
    }

    // Buffers: the function's arguments, then one per destination use.
    struct Buffer {
      std::string name;
      ShapedType type;
      bool param = false;
    };
    SmallVector<Buffer> buffers;
    llvm::DenseMap<Value, unsigned> bufferOf; // a value -> the buffer holding it
    llvm::StringSet<> taken;
    auto unique = [&](std::string name) {
      std::string n = name;
      for (int i = 1; taken.contains(n); ++i)
        n = name + "_" + std::to_string(i);
      taken.insert(n);
      return n;
    };
    // Argument names: the first callee parameter that receives them.
    SmallVector<std::string> argNames(f.getNumArguments());
    for (auto [ci, call] : llvm::enumerate(calls))
      for (auto [oi, operand] : llvm::enumerate(call.getOperands()))
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && arg.getOwner() == &body && argNames[arg.getArgNumber()].empty())
          argNames[arg.getArgNumber()] = callees[ci].names[oi];
    for (BlockArgument arg : f.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || kda::manifestDtype(type.getElementType()).empty()) {
        why = "argument " + std::to_string(arg.getArgNumber()) +
              " is not a tensor of a runtime dtype";
        return failure();
      }
      std::string name = argNames[arg.getArgNumber()];
      // A name the function gives its argument ({kda.name = "z"}: the
      // hybrid's gate, which only the mix kernel's `in2` reads).
      if (auto given = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       "kda.name"))
        name = given.str();
      if (name.empty() || taken.contains(name))
        name = "arg" + std::to_string(arg.getArgNumber());
      bufferOf[arg] = buffers.size();
      buffers.push_back({unique(name), type, true});
    }
    auto through = [](Value v) {
      while (auto cast = v.getDefiningOp<tensor::CastOp>())
        v = cast.getSource();
      return v;
    };
    // Per call and operand: the buffer it passes.
    SmallVector<SmallVector<unsigned>> args(calls.size());
    for (auto [ci, call] : llvm::enumerate(calls)) {
      const unsigned firstDest = call.getNumOperands() - call.getNumResults();
      for (auto [oi, operand] : llvm::enumerate(call.getOperands())) {
        Value v = through(operand);
        if (oi >= firstDest) {
          // A destination: a fresh tensor, a buffer of its own (two calls
          // on one CSE'd tensor.empty still write two buffers).
          if (!v.getDefiningOp<tensor::EmptyOp>()) {
            why = "call " + std::to_string(ci) + " (@" +
                  call.getCallee().str() + ") writes into a tensor that is "
                  "not fresh (parameter " + callees[ci].names[oi] + ")";
            return failure();
          }
          auto type = cast<ShapedType>(v.getType());
          if (kda::manifestDtype(type.getElementType()).empty()) {
            why = "a destination's element type has no runtime dtype";
            return failure();
          }
          args[ci].push_back(buffers.size());
          bufferOf[call.getResult(oi - firstDest)] = buffers.size();
          buffers.push_back({"c" + std::to_string(ci) + "_" +
                                 callees[ci].names[oi],
                             type, false});
          continue;
        }
        auto it = bufferOf.find(v);
        if (it == bufferOf.end() && v.getDefiningOp<tensor::EmptyOp>()) {
          // A fresh tensor calls read and write in place (the overlap
          // schedule's progress counters): a workspace of its own, not
          // initialised (the kernels that take it say how they use it).
          auto type = cast<ShapedType>(v.getType());
          if (kda::manifestDtype(type.getElementType()).empty()) {
            why = "a fresh tensor's element type has no runtime dtype";
            return failure();
          }
          it = bufferOf.try_emplace(v, buffers.size()).first;
          buffers.push_back({"c" + std::to_string(ci) + "_" +
                                 callees[ci].names[oi],
                             type, false});
        }
        if (it == bufferOf.end()) {
          why = "call " + std::to_string(ci) + " (@" + call.getCallee().str() +
                ") reads a value that no argument or earlier call holds "
                "(parameter " + callees[ci].names[oi] + ")";
          return failure();
        }
        args[ci].push_back(it->second);
      }
    }
    // The results: the buffers their calls wrote become parameters.
    SmallVector<unsigned> outputs;
    for (Value r : ret.getOperands()) {
      Value v = through(r);
      auto it = bufferOf.find(v);
      if (!isa<OpResult>(v) || it == bufferOf.end() ||
          buffers[it->second].param) {
        why = "a result is not written by one of its calls";
        return failure();
      }
      buffers[it->second].param = true;
      outputs.push_back(it->second);
    }
    // A result the function names ({kda.name = "final_state"}: the state a
    // layer in pieces passes on) keeps its name; the others are o, o0, o1..
    for (auto [i, o] : llvm::enumerate(outputs)) {
      std::string name = outputs.size() == 1 ? "o" : "o" + std::to_string(i);
      if (auto given = f.getResultAttrOfType<StringAttr>(i, "kda.name"))
        name = given.str();
      buffers[o].name = unique(name);
    }
    // Workspace names (identifiers, unique among parameters and workspaces).
    for (Buffer &buffer : buffers)
      if (!buffer.param)
        buffer.name = unique(buffer.name);

    // Dimensions: one class per set of equal ones. Keys: "#B:d" for
    // dimension d of buffer B, "cI:S" for symbol S of call I's callee.
    Classes same;
    auto dimKey = [](unsigned buffer, int64_t d) {
      return "#" + std::to_string(buffer) + ":" + std::to_string(d);
    };
    for (auto [ci, call] : llvm::enumerate(calls))
      for (auto [oi, buffer] : llvm::enumerate(args[ci])) {
        ArrayAttr shape = callees[ci].shapes[oi];
        ShapedType type = buffers[buffer].type;
        if (shape.size() != size_t(type.getRank())) {
          why = "call " + std::to_string(ci) + " parameter " +
                callees[ci].names[oi] + " has rank " +
                std::to_string(shape.size()) + ", the tensor " +
                std::to_string(type.getRank());
          return failure();
        }
        for (auto [d, dim] : llvm::enumerate(shape))
          if (auto s = dyn_cast<StringAttr>(dim))
            same.join(dimKey(buffer, d),
                           "c" + std::to_string(ci) + ":" + s.str());
      }
    // A fresh tensor sized from another's dims.
    for (auto [ci, call] : llvm::enumerate(calls)) {
      const unsigned firstDest = call.getNumOperands() - call.getNumResults();
      for (unsigned oi = firstDest; oi < call.getNumOperands(); ++oi) {
        auto empty = through(call.getOperand(oi)).getDefiningOp<tensor::EmptyOp>();
        unsigned dynamic = 0;
        for (int64_t d = 0; d < empty.getType().getRank(); ++d) {
          if (!empty.getType().isDynamicDim(d))
            continue;
          auto dim = empty.getDynamicSizes()[dynamic++]
                         .getDefiningOp<tensor::DimOp>();
          std::optional<int64_t> index =
              dim ? getConstantIntValue(dim.getIndex()) : std::nullopt;
          auto it = dim ? bufferOf.find(through(dim.getSource()))
                        : bufferOf.end();
          if (!index || it == bufferOf.end())
            continue; // computed: its callee's symbol names it
          same.join(dimKey(args[ci][oi], d), dimKey(it->second, *index));
        }
      }
    }
    // One symbol per class: the first a callee gives it (the first call's,
    // the gated delta's B, T, H, HV in a hybrid); a later class that a
    // callee calls by a taken name gets that name with a suffix. Where a
    // kernel names a class otherwise (the window kernel's HO for HV), its
    // launches carry the map (`symbols`) that the runtime's shape checks
    // apply.
    llvm::StringMap<std::string> symbolOf; // class leader -> symbol
    llvm::StringSet<> symbolTaken;
    SmallVector<llvm::StringMap<std::string>> renames(calls.size());
    for (auto [ci, callee] : llvm::enumerate(callees))
      for (ArrayAttr shape : callee.shapes)
        for (Attribute dim : shape) {
          auto s = dyn_cast<StringAttr>(dim);
          if (!s)
            continue;
          std::string leader =
              same.leader("c" + std::to_string(ci) + ":" + s.str());
          auto it = symbolOf.find(leader);
          if (it == symbolOf.end()) {
            std::string name = s.str();
            for (int i = 2; symbolTaken.contains(name); ++i)
              name = s.str() + "_" + std::to_string(i);
            symbolTaken.insert(name);
            it = symbolOf.try_emplace(leader, name).first;
          }
          if (it->second != s.str())
            renames[ci][s.getValue()] = it->second;
        }
    auto shapeOf = [&](unsigned buffer) -> FailureOr<ArrayAttr> {
      SmallVector<Attribute> shape;
      ShapedType type = buffers[buffer].type;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (!type.isDynamicDim(d)) {
          shape.push_back(b.getI64IntegerAttr(type.getDimSize(d)));
          continue;
        }
        std::string key = dimKey(buffer, d);
        auto it = symbolOf.find(same.leader(key));
        if (it == symbolOf.end()) {
          why = "dimension " + std::to_string(d) + " of " +
                buffers[buffer].name + " is named by no kernel";
          return failure();
        }
        shape.push_back(b.getStringAttr(it->second));
      }
      return b.getArrayAttr(shape);
    };
    auto dtypeOf = [&](unsigned buffer) {
      return b.getStringAttr(
          kda::manifestDtype(buffers[buffer].type.getElementType()));
    };

    SmallVector<Attribute> params, workspaces, launches;
    SmallVector<unsigned> paramOrder;
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      paramOrder.push_back(i);
    paramOrder.append(outputs.begin(), outputs.end());
    for (unsigned p : paramOrder) {
      FailureOr<ArrayAttr> shape = shapeOf(p);
      if (failed(shape))
        return failure();
      params.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", b.getStringAttr(buffers[p].name)),
           b.getNamedAttr("shape", *shape),
           b.getNamedAttr("dtype", dtypeOf(p))}));
    }
    for (auto [i, buffer] : llvm::enumerate(buffers)) {
      if (buffer.param)
        continue;
      FailureOr<ArrayAttr> shape = shapeOf(i);
      if (failed(shape))
        return failure();
      workspaces.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", b.getStringAttr(buffer.name)),
           b.getNamedAttr("shape", *shape),
           b.getNamedAttr("dtype", dtypeOf(i))}));
    }
    SmallVector<Pending> pending;
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      func::CallOp call = calls[ci];
      const Callee &c = callees[ci];
      auto argName = [&](unsigned oi) {
        return b.getStringAttr(buffers[args[ci][oi]].name);
      };
      // The kernel's symbols the layer names otherwise.
      SmallVector<NamedAttribute> symbolMap;
      for (auto &[from, to] : renames[ci])
        symbolMap.push_back(b.getNamedAttr(from, b.getStringAttr(to)));
      size_t inCall = 0;
      auto launch = [&](Attribute kernel, ArrayRef<Attribute> names) {
        SmallVector<NamedAttribute> fields = {
            b.getNamedAttr("kernel", kernel),
            b.getNamedAttr("args", b.getArrayAttr(names))};
        // Only the symbols this kernel's tensors have (the runtime refuses
        // a map key that is not one of them): an entry's map is its
        // parameters', and one of its kernels may see fewer.
        SmallVector<NamedAttribute> map;
        auto fn = f->getParentOfType<ModuleOp>().lookupSymbol<func::FuncOp>(
            cast<StringAttr>(kernel));
        auto abi = fn ? fn->getAttrOfType<ArrayAttr>("kda.abi") : nullptr;
        for (const NamedAttribute &m : symbolMap) {
          bool has = !abi; // (no description: keep the map whole)
          if (abi)
            for (Attribute a : abi)
              for (Attribute dim :
                   cast<ArrayAttr>(cast<DictionaryAttr>(a).get("dims")))
                if (auto sym = dyn_cast<StringAttr>(dim))
                  has = has || kda::manifestSymbol(sym.getValue()) ==
                                   m.getName().getValue();
          if (has)
            map.push_back(m);
        }
        if (!map.empty())
          fields.push_back(b.getNamedAttr("symbols", b.getDictionaryAttr(map)));
        pending.push_back({std::move(fields), cast<StringAttr>(kernel),
                           SmallVector<Attribute>(names), ci, inCall++});
      };
      if (!c.entry) {
        SmallVector<Attribute> names;
        for (unsigned oi = 0; oi < call.getNumOperands(); ++oi)
          names.push_back(argName(oi));
        launch(call.getCalleeAttr().getAttr(), names);
        continue;
      }
      // An entry: its workspaces renamed into the layer's, its launches
      // with their arguments renamed.
      std::string prefix = "c" + std::to_string(ci) + "_";
      llvm::StringMap<StringAttr> rename;
      for (auto [oi, name] : llvm::enumerate(c.names))
        rename[name] = argName(oi);
      if (auto list = dyn_cast_or_null<ArrayAttr>(c.entry.get("workspaces")))
        for (Attribute a : list) {
          auto ws = cast<DictionaryAttr>(a);
          StringRef name = cast<StringAttr>(ws.get("name")).getValue();
          StringAttr renamed = b.getStringAttr(unique(prefix + name.str()));
          rename[name] = renamed;
          // Its shape in the layer's symbols.
          SmallVector<NamedAttribute> fields(ws.getValue());
          for (NamedAttribute &field : fields) {
            if (field.getName() == "name")
              field.setValue(renamed);
            if (field.getName() != "shape")
              continue;
            SmallVector<Attribute> shape;
            for (Attribute dim : cast<ArrayAttr>(field.getValue())) {
              auto sym = dyn_cast<StringAttr>(dim);
              auto it = sym ? renames[ci].find(sym.getValue())
                            : renames[ci].end();
              shape.push_back(it == renames[ci].end()
                                  ? dim
                                  : b.getStringAttr(it->second));
            }
            field.setValue(b.getArrayAttr(shape));
          }
          workspaces.push_back(b.getDictionaryAttr(fields));
        }
      for (Attribute a : cast<ArrayAttr>(c.entry.get("launches"))) {
        SmallVector<Attribute> names;
        for (Attribute arg :
             cast<ArrayAttr>(cast<DictionaryAttr>(a).get("args")))
          names.push_back(rename.lookup(cast<StringAttr>(arg).getValue()));
        launch(cast<DictionaryAttr>(a).get("kernel"), names);
      }
    }
    // The overlap schedule's pair (threadProgress): the state launch that
    // publishes, the window launch that waits, and their counters.
    int progressState = -1, progressWindow = -1;
    std::string counter;
    {
      ModuleOp module = f->getParentOfType<ModuleOp>();
      for (auto [l, p] : llvm::enumerate(pending)) {
        auto fn = module.lookupSymbol<func::FuncOp>(p.kernel);
        if (!fn)
          continue;
        if (fn->hasAttr(kda::kPublishProgressAttr))
          progressState = int(l);
        if (fn->hasAttr(kda::kWaitProgressAttr)) {
          progressWindow = int(l);
          auto abi = fn->getAttrOfType<ArrayAttr>("kda.abi");
          if (std::optional<unsigned> i =
                  abi ? kda::abiArgumentIndex(abi, "progress") : std::nullopt)
            counter = cast<StringAttr>(p.args[*i]).str();
        }
      }
      if (progressState < 0 || progressWindow < progressState ||
          counter.empty())
        progressState = progressWindow = -1;
    }
    schedule(f, calls, pending, launches, b, progressState, progressWindow,
             counter);
    // The runtime binds an entry's symbols from its parameters only.
    llvm::StringSet<> bound;
    for (Attribute p : params)
      for (Attribute dim :
           cast<ArrayAttr>(cast<DictionaryAttr>(p).get("shape")))
        if (auto sym = dyn_cast<StringAttr>(dim))
          bound.insert(sym.getValue());
    for (Attribute w : workspaces)
      for (Attribute dim :
           cast<ArrayAttr>(cast<DictionaryAttr>(w).get("shape")))
        if (auto sym = dyn_cast<StringAttr>(dim);
            sym && !bound.contains(sym.getValue())) {
          why = "workspace dimension " + sym.str() +
                " is in no parameter of the layer";
          return failure();
        }
    for (const auto &map : renames)
      for (auto &[from, to] : map)
        if (!bound.contains(to)) {
          why = "dimension " + to + " is in no parameter of the layer";
          return failure();
        }
    return b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(f.getSymName())),
         b.getNamedAttr("params", b.getArrayAttr(params)),
         b.getNamedAttr("workspaces", b.getArrayAttr(workspaces)),
         b.getNamedAttr("launches", b.getArrayAttr(launches))});
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuLayerEntryPass(bool remarks,
                                                        bool progress) {
  KdaGpuLayerEntryOptions options;
  options.remarks = remarks;
  options.progress = progress;
  return std::make_unique<LayerEntryPass>(options);
}

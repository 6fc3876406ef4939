//===- ScalarAdjoint.cpp - reverse-mode derivatives of scalar bodies ------===//
//
// emitScalarAdjoint (ScalarAdjoint.h), and the kda-scalar-adjoint pass that
// exposes it on functions of scalars (its lit tests check the rules against
// central finite differences, executed).
//
//===----------------------------------------------------------------------===//

#include "passes/ScalarAdjoint.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

#include "passes/Passes.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDASCALARADJOINT
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

FailureOr<SmallVector<Value>>
mlir::kda::emitScalarAdjoint(ImplicitLocOpBuilder &b, Value y,
                             ArrayRef<Value> wrt, Value seed,
                             std::string &why, ArrayRef<Value> constants) {
  auto type = dyn_cast<FloatType>(y.getType());
  if (!type || seed.getType() != type) {
    why = "the value and its seed must be floating-point scalars of one type";
    return failure();
  }
  llvm::SmallDenseSet<Value> leaves(wrt.begin(), wrt.end());
  // Whether a value depends on `wrt` (memoized), and the dependent ops in
  // topological order (operands before users).
  DenseMap<Value, bool> depends;
  SmallVector<Operation *> order;
  llvm::SmallPtrSet<Operation *, 16> seen;
  llvm::SmallDenseSet<Value> fixed(constants.begin(), constants.end());
  std::function<bool(Value)> visit = [&](Value v) -> bool {
    if (leaves.contains(v))
      return true;
    if (fixed.contains(v))
      return false;
    auto it = depends.find(v);
    if (it != depends.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    bool dep = false;
    if (op) {
      for (Value operand : op->getOperands())
        dep |= visit(operand);
      if (dep && seen.insert(op).second)
        order.push_back(op);
    }
    depends[v] = dep;
    return dep;
  };
  SmallVector<Value> partials;
  auto cst = [&](double v) -> Value {
    return arith::ConstantOp::create(b, b.getFloatAttr(type, v));
  };
  auto zero = [&]() { return cst(0.0); };
  if (!visit(y)) {
    for (size_t i = 0; i < wrt.size(); ++i)
      partials.push_back(zero());
    return partials;
  }

  DenseMap<Value, Value> adj;
  adj[y] = seed;
  auto mul = [&](Value x, Value z) -> Value {
    return arith::MulFOp::create(b, x, z);
  };
  auto div = [&](Value x, Value z) -> Value {
    return arith::DivFOp::create(b, x, z);
  };
  // Adds a contribution to the adjoint of `v` (only where v depends on
  // `wrt`: the others are constants).
  auto add = [&](Value v, Value contribution) {
    if (!leaves.contains(v) && !depends.lookup(v))
      return;
    Value &a = adj[v];
    a = a ? Value(arith::AddFOp::create(b, a, contribution)) : contribution;
  };
  // g * (a derivative that may have overflowed), zero where g is: the
  // forward takes an exp past its range in stride (a sigmoid's 1 / (1 +
  // exp(-x)) is 0 for x below -88.7, a softplus's branch not taken is
  // dropped), and a zero gradient reaching that exp must stay zero, not
  // become 0 * inf = NaN (it did, in d_gate, dA_log and ddt_bias).
  auto strongZero = [&](Value g, Value product) -> Value {
    Value isZero =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, g, zero());
    return arith::SelectOp::create(b, isZero, zero(), product);
  };
  // The first (or second) branch's share of g under a condition.
  auto where = [&](Value cond, Value g, bool first) -> Value {
    return first ? arith::SelectOp::create(b, cond, g, zero()).getResult()
                 : arith::SelectOp::create(b, cond, zero(), g).getResult();
  };

  for (Operation *op : llvm::reverse(order)) {
    if (op->getNumResults() != 1)
      return why = "'" + op->getName().getStringRef().str() +
                   "' has several results", failure();
    Value r = op->getResult(0);
    Value g = adj.lookup(r);
    if (!g)
      continue; // y does not reach it through differentiable operands
    if (r.getType() != type) {
      why = "'" + op->getName().getStringRef().str() +
            "' computes a value of another type on the way to the result";
      return failure();
    }
    if (auto o = dyn_cast<arith::AddFOp>(op)) {
      add(o.getLhs(), g);
      add(o.getRhs(), g);
    } else if (auto o = dyn_cast<arith::SubFOp>(op)) {
      add(o.getLhs(), g);
      add(o.getRhs(), arith::NegFOp::create(b, g));
    } else if (auto o = dyn_cast<arith::MulFOp>(op)) {
      add(o.getLhs(), mul(g, o.getRhs()));
      add(o.getRhs(), mul(g, o.getLhs()));
    } else if (auto o = dyn_cast<arith::DivFOp>(op)) {
      // d(a / b) = da / b - (a / b) db / b
      add(o.getLhs(), div(g, o.getRhs()));
      add(o.getRhs(), arith::NegFOp::create(b, div(mul(g, r), o.getRhs())));
    } else if (auto o = dyn_cast<arith::NegFOp>(op)) {
      add(o.getOperand(), arith::NegFOp::create(b, g));
    } else if (auto o = dyn_cast<arith::SelectOp>(op)) {
      // The condition is a choice, not a value: each branch gets g where it
      // is the one taken.
      add(o.getTrueValue(), where(o.getCondition(), g, true));
      add(o.getFalseValue(), where(o.getCondition(), g, false));
    } else if (isa<arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
                   arith::MinNumFOp>(op)) {
      Value x = op->getOperand(0), z = op->getOperand(1);
      bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
      Value firstWins = arith::CmpFOp::create(
          b, isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE, x,
          z);
      add(x, where(firstWins, g, true));
      add(z, where(firstWins, g, false));
    } else if (auto o = dyn_cast<math::FmaOp>(op)) {
      add(o.getA(), mul(g, o.getB()));
      add(o.getB(), mul(g, o.getA()));
      add(o.getC(), g);
    } else if (auto o = dyn_cast<math::ExpOp>(op)) {
      add(o.getOperand(), strongZero(g, mul(g, r)));
    } else if (auto o = dyn_cast<math::Exp2Op>(op)) {
      add(o.getOperand(),
          strongZero(g, mul(g, mul(r, cst(llvm::numbers::ln2)))));
    } else if (auto o = dyn_cast<math::LogOp>(op)) {
      add(o.getOperand(), div(g, o.getOperand()));
    } else if (auto o = dyn_cast<math::Log1pOp>(op)) {
      add(o.getOperand(),
          div(g, arith::AddFOp::create(b, cst(1.0), o.getOperand())));
    } else if (auto o = dyn_cast<math::SqrtOp>(op)) {
      add(o.getOperand(), div(mul(g, cst(0.5)), r));
    } else if (auto o = dyn_cast<math::RsqrtOp>(op)) {
      // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 r^3
      add(o.getOperand(), mul(g, mul(cst(-0.5), mul(r, mul(r, r)))));
    } else if (auto o = dyn_cast<math::TanhOp>(op)) {
      add(o.getOperand(),
          mul(g, arith::SubFOp::create(b, cst(1.0), mul(r, r))));
    } else if (auto o = dyn_cast<math::AbsFOp>(op)) {
      Value negative = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT,
                                             o.getOperand(), cst(0.0));
      add(o.getOperand(),
          arith::SelectOp::create(b, negative, arith::NegFOp::create(b, g),
                                  g));
    } else {
      why = "no derivative rule for '" + op->getName().getStringRef().str() +
            "', which the result depends on";
      return failure();
    }
  }
  for (Value w : wrt) {
    Value a = adj.lookup(w);
    partials.push_back(a ? a : zero());
  }
  return partials;
}

namespace {

struct ScalarAdjointPass
    : kda::impl::KdaScalarAdjointBase<ScalarAdjointPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      if (f.isExternal())
        continue;
      FunctionType ft = f.getFunctionType();
      auto type = ft.getNumResults() == 1
                      ? dyn_cast<FloatType>(ft.getResult(0))
                      : FloatType();
      bool scalar = type && f.getBody().hasOneBlock() &&
                    llvm::all_of(ft.getInputs(),
                                 [&](Type t) { return t == type; });
      if (!scalar)
        continue; // only functions of one float type's scalars
      auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
      SmallVector<Type> results(ft.getNumInputs() + 1, type);
      auto gradType = FunctionType::get(&getContext(), ft.getInputs(), results);
      std::string name = (f.getSymName() + "_grad").str();
      // A declaration of the gradient (what callers in the same module
      // reference before this pass runs) gets the body; anything else by
      // that name is an error.
      auto grad = module.lookupSymbol<func::FuncOp>(name);
      if (grad && (!grad.isExternal() || grad.getFunctionType() != gradType)) {
        f.emitError() << "kda-scalar-adjoint: '" << name
                      << "' exists and is not a declaration of type "
                      << gradType;
        return signalPassFailure();
      }
      bool declared = static_cast<bool>(grad);
      if (!grad) {
        OpBuilder top(module.getContext());
        top.setInsertionPointAfter(f);
        grad = func::FuncOp::create(top, f.getLoc(), name, gradType);
      }
      Block *entry = grad.addEntryBlock();
      ImplicitLocOpBuilder b(f.getLoc(), entry, entry->begin());
      IRMapping map;
      for (auto [from, to] :
           llvm::zip(f.getArguments(), entry->getArguments()))
        map.map(from, to);
      for (Operation &op : f.getBody().front().without_terminator())
        b.clone(op, map);
      Value y = map.lookup(ret.getOperand(0));
      std::string why;
      SmallVector<Value> wrt(entry->getArguments());
      FailureOr<SmallVector<Value>> partials = kda::emitScalarAdjoint(
          b, y, wrt,
          arith::ConstantOp::create(b, b.getFloatAttr(type, 1.0)), why);
      if (failed(partials)) {
        f.emitError() << "kda-scalar-adjoint: " << why;
        if (declared)
          entry->erase();
        else
          grad.erase();
        return signalPassFailure();
      }
      SmallVector<Value> out = {y};
      llvm::append_range(out, *partials);
      func::ReturnOp::create(b, out);
    }
  }
};

} // namespace

//===- LaneBuilder.h - scalar builders of the lane kernels' drivers --------===//
//
// The lane kernels' drivers (GpuStateRegisters, GpuIntraRegisters,
// GpuDecodeRegisters: the grids, loads and stores around an algorithm of
// passes/ run on LaneTileBuilder tiles) build their code from index and f32
// arithmetic on one ImplicitLocOpBuilder; these are the shorthands they share.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_LANEBUILDER_H
#define KDA_LOWERING_LANEBUILDER_H

#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace mlir::kda {

struct LaneBuilder {
  ImplicitLocOpBuilder &b;

  explicit LaneBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value add(Value x, int64_t c) { return c == 0 ? x : add(x, idx(c)); }
  Value mul(Value x, int64_t c) {
    return c == 1 ? x : arith::MulIOp::create(b, x, idx(c));
  }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value fma(Value x, Value y, Value acc) {
    return math::FmaOp::create(b, x, y, acc);
  }
  Value toF32(Value v) {
    return v.getType().isF32() ? v
                               : arith::ExtFOp::create(b, b.getF32Type(), v);
  }
  Value fromF32(Value v, Type t) {
    return t.isF32() ? v : arith::TruncFOp::create(b, t, v);
  }
  /// `body(p)` for every piece p < total of a copy that `count` threads
  /// (a block's, or a warp's lanes) share: thread `id` takes id, id +
  /// count, ...; the last pass, where it does not fill `count`, is guarded.
  void forEachPiece(Value id, int64_t count, int64_t total,
                    llvm::function_ref<void(Value)> body) {
    for (int64_t s0 = 0; s0 < total; s0 += count) {
      Value p = add(id, s0);
      OpBuilder::InsertionGuard guard(b);
      if (s0 + count > total) {
        auto inRange = scf::IfOp::create(b, ult(p, idx(total)), false);
        b.setInsertionPointToStart(inRange.thenBlock());
      }
      body(p);
    }
  }
};

/// The kernel argument `name` of `func` (its kda.abi), or null.
inline Value abiArgument(func::FuncOp func, ArrayAttr abi, StringRef name) {
  std::optional<unsigned> i = abiArgumentIndex(abi, name);
  return i ? func.getArgument(*i) : Value();
}

/// The intra-chunk workspaces of a kernel by role, ws[0..5] = w (A beta
/// Gamma K), u, q (Gamma Q), k (the decayed k), p, g (exp(g_last)): a
/// description's `roles` name the arguments ws0, ws1, ... in order; null
/// where a role is absent or the kernel does not take that workspace.
inline void workspacesByRole(func::FuncOp func, ArrayAttr abi,
                             ArrayRef<std::string> roles, Value (&ws)[6]) {
  static const char *const kRoles[] = {"w", "u", "q", "k", "p", "g"};
  for (auto [i, role] : llvm::enumerate(roles))
    for (int r = 0; r < 6; ++r)
      if (role == kRoles[r])
        ws[r] = abiArgument(func, abi, "ws" + std::to_string(i));
}

/// The gradient's seed workspaces (the chunk grid's inputs), numbered after
/// the intra grid's workspaces (`roles`): the reverse scan's dS, then its
/// dV_new (dU, seeds[5]), then the step grid's seeds[0..4] = dW (delta
/// rule), d(Gamma Q), d(decayed k), dP, d(exp(g_last)) (gates)
/// (kda-gpu-split-schedule numbers the grids' workspaces in the order of
/// the grids and of their results). Returns the number the next workspace
/// takes (the chunk grid's own).
inline int64_t seedWorkspaces(func::FuncOp func, ArrayAttr abi,
                              ArrayRef<std::string> roles, Value (&seeds)[6]) {
  const bool delta = llvm::is_contained(roles, "w");
  const bool decays = llvm::is_contained(roles, "g");
  int64_t next = roles.size() + 1;
  seeds[5] = abiArgument(func, abi, "ws" + std::to_string(next++));
  for (int s = 0; s < 5; ++s) {
    if ((s == 0 && !delta) || (s == 4 && !decays))
      continue;
    seeds[s] = abiArgument(func, abi, "ws" + std::to_string(next++));
  }
  return next;
}

/// The one program grid of a chunk-parallel kernel, which a lane pass
/// rewrites, and which of the dimensions `described` names (its extents,
/// -1 dynamic) it still has: the GPU pipelines keep a grid's dimensions of
/// extent 1, but where a canonicalizer folded them away the remaining
/// induction variables are the other coordinates, in order. Nullopt (with
/// an error naming `pass`) where the function is not one grid of that rank.
struct ProgramGrid {
  scf::ForallOp forall;
  SmallVector<int64_t> kept; // described dimension of each induction variable
};
inline std::optional<ProgramGrid>
findProgramGrid(func::FuncOp func, ArrayRef<int64_t> described,
                StringRef pass) {
  SmallVector<scf::ForallOp> grids;
  for (Operation &op : func.getBody().front())
    if (auto f = dyn_cast<scf::ForallOp>(op))
      grids.push_back(f);
  if (grids.size() != 1 || !grids[0].getOutputs().empty()) {
    func.emitError() << pass
                     << ": the strategy gives this kernel lanes, but it is "
                        "not one grid of programs";
    return std::nullopt;
  }
  ProgramGrid grid{grids[0], {}};
  const int64_t rank = grid.forall.getRank();
  for (auto [d, extent] : llvm::enumerate(described))
    if (extent != 1 || rank == static_cast<int64_t>(described.size()))
      grid.kept.push_back(d);
  if (grid.kept.size() != static_cast<size_t>(rank)) {
    func.emitError() << pass
                     << ": the grid's rank does not match its description";
    return std::nullopt;
  }
  return grid;
}

/// The program's coordinates in its description's order (`grid`'s kept
/// dimensions; zero for those the grid no longer has), built by `b` inside
/// `forall`'s body (the grid's, or one the pass put in its place).
inline SmallVector<Value> programCoordinates(scf::ForallOp forall,
                                             const ProgramGrid &grid,
                                             ImplicitLocOpBuilder &b,
                                             int64_t described = 3) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  SmallVector<Value> ivs(described, zero);
  for (auto [i, d] : llvm::enumerate(grid.kept))
    ivs[d] = forall.getInductionVar(i);
  return ivs;
}

/// Erases a program's body (its tile lowering), keeping the terminator.
inline void clearProgram(Block *body) {
  SmallVector<Operation *> old;
  for (Operation &op : body->without_terminator())
    old.push_back(&op);
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }
}

} // namespace mlir::kda

#endif // KDA_LOWERING_LANEBUILDER_H

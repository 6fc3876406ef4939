//===- OracleEval.h - float64 evaluation of a kda function ------*- C++ -*-===//
//
// Interprets a func.func made of kda ops with the float64 oracle
// (test/oracle/Oracle.h): the reference kda-run compares compiled results
// against.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_KDA_RUN_ORACLEEVAL_H
#define KDA_TOOLS_KDA_RUN_ORACLEEVAL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace kda::run {

/// Evaluates `f` in float64. `args`: one vector per function argument,
/// row-major, with the element count of the argument's (static) type.
/// `results`: one vector per function result, row-major.
///
/// The body must be a single block of kda.gated_delta, kda.gate,
/// kda.decode_step, kda.window_attention, kda.hybrid, kda.multi_scale,
/// arith.constant (dense tensors, or scalars), tensor.empty (zeros) and
/// func.return. Every attribute is honoured (update, scale or its default
/// 1/sqrt(K), state layout, qk_l2norm, beta and gate activations,
/// lower_bound, boundary_interval, cu_seqlens, decode indices, window or
/// window_sizes, hybrid and multi_scale combination modes, decay_scales).
///
/// Intermediate values stay float64: nothing is rounded to the element
/// types of the IR (the reference is the exact computation; round the
/// results yourself if you want the values a bf16 program would store).
///
/// The function is verified first. Returns "" on success, else a message:
/// verifier diagnostics, an argument count or size mismatch, a value that
/// must be integral and is not (cu_seqlens, indices, window_sizes), an
/// unsupported op (named, with its location), or an oracle Status message
/// prefixed with the op that produced it. Never aborts on bad input.
std::string evaluateWithOracle(mlir::func::FuncOp f,
                               const std::vector<std::vector<double>> &args,
                               std::vector<std::vector<double>> &results);

} // namespace kda::run

#endif // KDA_TOOLS_KDA_RUN_ORACLEEVAL_H

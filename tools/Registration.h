//===- Registration.h - one registration shared by every kda tool --*- C++ -*-===//
//
// kda-opt, the compile driver and kda-run all see the same dialects and
// passes: upstream's (the kda pipelines lower through them) and ours.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_REGISTRATION_H
#define KDA_TOOLS_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace kda {
/// Registers every upstream dialect and extension and the kda dialect into
/// `registry`, and every upstream and kda pass and pipeline globally.
void registerEverything(mlir::DialectRegistry &registry);
} // namespace kda

#endif // KDA_TOOLS_REGISTRATION_H

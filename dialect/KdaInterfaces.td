//===- KdaInterfaces.td - kda op interfaces ------------------*- tablegen -*-===//

#ifndef KDA_DIALECT_KDAINTERFACES_TD
#define KDA_DIALECT_KDAINTERFACES_TD

include "mlir/IR/OpBase.td"

def Kda_KernelAbiOpInterface : OpInterface<"KernelAbiOpInterface"> {
  let cppNamespace = "::mlir::kda";
  let description = [{
    The kernel ABI of a kda op: each shaped operand and result, in order
    (operands, then results), with the name its kernel argument takes ("q",
    "gate", "initial_state", "o") and the names of its dimensions ("B", "T",
    "H", "HV", "K", "V"; "N+1" for cu_seqlens). The op's verifier is where
    they are stated, once: every shape check it makes names its value and
    dimensions, and this interface collects them (kda::kernelArguments), so
    the names a diagnostic shows, the kernel's arguments (kda-outline-kernels'
    kda.abi), the bundle manifest's parameters and the GPU lowerings'
    argument look-ups are one set. Values the verifier does not check (an op
    that does not verify) get none.
  }];
  let methods = [
    InterfaceMethod<
      "The op's kernel arguments with their ABI names and dimension names; "
      "empty when the op does not verify.",
      "::llvm::SmallVector<::mlir::kda::KernelArgument>", "getKernelArguments",
      (ins), [{}],
      [{ return ::mlir::kda::kernelArguments($_op.getOperation()); }]>
  ];
}

#endif // KDA_DIALECT_KDAINTERFACES_TD

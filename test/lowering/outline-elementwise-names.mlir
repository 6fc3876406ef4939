// RUN: kda-opt %s --kda-gpu-outline-elementwise | FileCheck %s

// Loops that no kernel's result walks keep names after their position (D0,
// D1); a loop over a kernel's result takes that kernel's symbol, also where
// the first operand is a function argument (the kernel's result is the second).

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @sum_of_arguments
// CHECK: call @kda_elementwise_kernel(
func.func @sum_of_arguments(%a: tensor<?x?x8xf32>, %b: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x?x8xf32>
  %d1 = tensor.dim %a, %c1 : tensor<?x?x8xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%e : tensor<?x?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<?x?x8xf32>
  return %s : tensor<?x?x8xf32>
}

// CHECK-LABEL: func.func @sum_with_a_kernel_result
// CHECK: call @kda_elementwise_kernel_0(
func.func @sum_with_a_kernel_result(%a: tensor<?x?x8xf32>, %b: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x?x8xf32>
  %d1 = tensor.dim %a, %c1 : tensor<?x?x8xf32>
  %e0 = tensor.empty(%d0, %d1) : tensor<?x?x8xf32>
  %k = call @producer(%b, %e0) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %k : tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%e : tensor<?x?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<?x?x8xf32>
  return %s : tensor<?x?x8xf32>
}

func.func private @producer(%x: tensor<?x?x8xf32>, %o: tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    attributes {kda.kernel, kda.abi = [{name = "x", dims = ["N", "T", 8]}, {name = "o", dims = ["N", "T", 8]}]} {
  return %x : tensor<?x?x8xf32>
}

// CHECK: func.func private @kda_elementwise_kernel(
// CHECK-SAME: kda.abi = [{dims = ["D0", "D1", 8], name = "in0"}, {dims = ["D0", "D1", 8], name = "in1"}, {dims = ["D0", "D1", 8], name = "out"}]
// CHECK: func.func private @kda_elementwise_kernel_0(
// CHECK-SAME: kda.abi = [{dims = ["N", "T", 8], name = "in0"}, {dims = ["N", "T", 8], name = "in1"}, {dims = ["N", "T", 8], name = "out"}]

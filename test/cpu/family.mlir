// Every member of the gated delta family against the float64 oracle, chunk
// sizes 16/32/64 (sub-chunks 16 and 32), the token recurrence (chunk 1), and
// T = 100, which is not a multiple of any chunk.
// RUN: kda-run %s --function=linear_attention --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=linear_attention --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=linear_attention --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=linear_attention --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=linear_attention --chunk=64 --sub-chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=mamba2 --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=mamba2 --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=mamba2 --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=mamba2 --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=mamba2 --chunk=64 --sub-chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=gla --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=gla --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gla --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gla --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gla --chunk=64 --sub-chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=deltanet --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=deltanet --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=deltanet --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=deltanet --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=deltanet --chunk=64 --sub-chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=gated_deltanet --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=gated_deltanet --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gated_deltanet --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gated_deltanet --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gated_deltanet --chunk=64 --sub-chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda --chunk=1 --sub-chunk=1 --check | FileCheck %s
// RUN: kda-run %s --function=kda --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda --chunk=32 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda --chunk=64 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda --chunk=64 --sub-chunk=32 --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @linear_attention(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta additive %q, %k, %v  : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @mamba2(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta additive %q, %k, %v gate(%g : tensor<2x100x2xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @gla(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2x32xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta additive %q, %k, %v gate(%g : tensor<2x100x2x32xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @deltanet(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %b: tensor<2x100x2xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v beta(%b : tensor<2x100x2xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @gated_deltanet(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2xf32>, %b: tensor<2x100x2xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x100x2xf32>) beta(%b : tensor<2x100x2xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @kda(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %g: tensor<2x100x2x32xf32>, %b: tensor<2x100x2xf32>) -> (tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x100x2x32xf32>) beta(%b : tensor<2x100x2xf32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x100x2x32xf32>, tensor<2x2x32x32xf32>
}

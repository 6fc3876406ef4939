// Head dimensions that are not powers of two (K, V in {60, 64, 100, 128}),
// grouped value heads (HV = 2H, 4H), bf16 / f16 inputs, and the fused
// prologue (l2 norm, beta sigmoid, gate activations).
// RUN: kda-run %s --function=kda_k60_v100 --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda_k100_v60 --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda_k64_v64 --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda_k128_v128 --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda_gva --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=gdn_gva --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda_bf16 --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=kda_bf16 --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda_f16 --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=kda_prologue --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=kda_softplus --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=gdn_softplus_head --chunk=16 --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @kda_k60_v100(%q: tensor<1x70x2x60xf32>, %k: tensor<1x70x2x60xf32>, %v: tensor<1x70x2x100xf32>, %g: tensor<1x70x2x60xf32>, %b: tensor<1x70x2xf32>) -> (tensor<1x70x2x100xf32>, tensor<1x2x60x100xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x2x60xf32>) beta(%b : tensor<1x70x2xf32>) : tensor<1x70x2x60xf32>, tensor<1x70x2x60xf32>, tensor<1x70x2x100xf32> -> tensor<1x70x2x100xf32> final_state tensor<1x2x60x100xf32>
  return %o, %s : tensor<1x70x2x100xf32>, tensor<1x2x60x100xf32>
}

func.func @kda_k100_v60(%q: tensor<1x70x2x100xf32>, %k: tensor<1x70x2x100xf32>, %v: tensor<1x70x2x60xf32>, %g: tensor<1x70x2x100xf32>, %b: tensor<1x70x2xf32>) -> (tensor<1x70x2x60xf32>, tensor<1x2x100x60xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x2x100xf32>) beta(%b : tensor<1x70x2xf32>) : tensor<1x70x2x100xf32>, tensor<1x70x2x100xf32>, tensor<1x70x2x60xf32> -> tensor<1x70x2x60xf32> final_state tensor<1x2x100x60xf32>
  return %o, %s : tensor<1x70x2x60xf32>, tensor<1x2x100x60xf32>
}

func.func @kda_k64_v64(%q: tensor<1x70x2x64xf32>, %k: tensor<1x70x2x64xf32>, %v: tensor<1x70x2x64xf32>, %g: tensor<1x70x2x64xf32>, %b: tensor<1x70x2xf32>) -> (tensor<1x70x2x64xf32>, tensor<1x2x64x64xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x2x64xf32>) beta(%b : tensor<1x70x2xf32>) : tensor<1x70x2x64xf32>, tensor<1x70x2x64xf32>, tensor<1x70x2x64xf32> -> tensor<1x70x2x64xf32> final_state tensor<1x2x64x64xf32>
  return %o, %s : tensor<1x70x2x64xf32>, tensor<1x2x64x64xf32>
}

func.func @kda_k128_v128(%q: tensor<1x70x2x128xf32>, %k: tensor<1x70x2x128xf32>, %v: tensor<1x70x2x128xf32>, %g: tensor<1x70x2x128xf32>, %b: tensor<1x70x2xf32>) -> (tensor<1x70x2x128xf32>, tensor<1x2x128x128xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x70x2x128xf32>) beta(%b : tensor<1x70x2xf32>) : tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32> -> tensor<1x70x2x128xf32> final_state tensor<1x2x128x128xf32>
  return %o, %s : tensor<1x70x2x128xf32>, tensor<1x2x128x128xf32>
}

func.func @kda_gva(%q: tensor<2x50x2x32xf32>, %k: tensor<2x50x2x32xf32>, %v: tensor<2x50x4x16xf32>, %g: tensor<2x50x4x32xf32>, %b: tensor<2x50x4xf32>) -> (tensor<2x50x4x16xf32>, tensor<2x4x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x50x4x32xf32>) beta(%b : tensor<2x50x4xf32>) : tensor<2x50x2x32xf32>, tensor<2x50x2x32xf32>, tensor<2x50x4x16xf32> -> tensor<2x50x4x16xf32> final_state tensor<2x4x32x16xf32>
  return %o, %s : tensor<2x50x4x16xf32>, tensor<2x4x32x16xf32>
}

func.func @gdn_gva(%q: tensor<1x50x1x32xf32>, %k: tensor<1x50x1x32xf32>, %v: tensor<1x50x4x16xf32>, %g: tensor<1x50x4xf32>, %b: tensor<1x50x4xf32>) -> (tensor<1x50x4x16xf32>, tensor<1x4x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x50x4xf32>) beta(%b : tensor<1x50x4xf32>) : tensor<1x50x1x32xf32>, tensor<1x50x1x32xf32>, tensor<1x50x4x16xf32> -> tensor<1x50x4x16xf32> final_state tensor<1x4x32x16xf32>
  return %o, %s : tensor<1x50x4x16xf32>, tensor<1x4x32x16xf32>
}

func.func @kda_bf16(%q: tensor<2x90x2x64xbf16>, %k: tensor<2x90x2x64xbf16>, %v: tensor<2x90x2x64xbf16>, %g: tensor<2x90x2x64xf32>, %b: tensor<2x90x2xf32>) -> (tensor<2x90x2x64xbf16>, tensor<2x2x64x64xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x90x2x64xf32>) beta(%b : tensor<2x90x2xf32>) : tensor<2x90x2x64xbf16>, tensor<2x90x2x64xbf16>, tensor<2x90x2x64xbf16> -> tensor<2x90x2x64xbf16> final_state tensor<2x2x64x64xf32>
  return %o, %s : tensor<2x90x2x64xbf16>, tensor<2x2x64x64xf32>
}

func.func @kda_f16(%q: tensor<1x40x2x32xf16>, %k: tensor<1x40x2x32xf16>, %v: tensor<1x40x2x32xf16>, %g: tensor<1x40x2x32xf32>, %b: tensor<1x40x2xf32>) -> (tensor<1x40x2x32xf16>, tensor<1x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x40x2x32xf32>) beta(%b : tensor<1x40x2xf32>) : tensor<1x40x2x32xf16>, tensor<1x40x2x32xf16>, tensor<1x40x2x32xf16> -> tensor<1x40x2x32xf16> final_state tensor<1x2x32x32xf32>
  return %o, %s : tensor<1x40x2x32xf16>, tensor<1x2x32x32xf32>
}

func.func @kda_prologue(%q: tensor<2x80x2x32xf32>, %k: tensor<2x80x2x32xf32>, %v: tensor<2x80x2x32xf32>, %g: tensor<2x80x2x32xf32>, %b: tensor<2x80x2xf32>, %a: tensor<2xf32>, %d: tensor<2x32xf32>) -> (tensor<2x80x2x32xf32>, tensor<2x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x80x2x32xf32>) beta(%b : tensor<2x80x2xf32>) A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<2x80x2x32xf32>, tensor<2x80x2x32xf32>, tensor<2x80x2x32xf32> -> tensor<2x80x2x32xf32> final_state tensor<2x2x32x32xf32>
  return %o, %s : tensor<2x80x2x32xf32>, tensor<2x2x32x32xf32>
}

func.func @kda_softplus(%q: tensor<1x80x2x32xf32>, %k: tensor<1x80x2x32xf32>, %v: tensor<1x80x2x32xf32>, %g: tensor<1x80x2x32xf32>, %b: tensor<1x80x2xf32>, %a: tensor<2xf32>, %d: tensor<2x32xf32>) -> (tensor<1x80x2x32xf32>, tensor<1x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x80x2x32xf32>) beta(%b : tensor<1x80x2xf32>) A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid_neg_eigval>, gate_activation = #kda<gate softplus>, scale = 0.3 : f64} : tensor<1x80x2x32xf32>, tensor<1x80x2x32xf32>, tensor<1x80x2x32xf32> -> tensor<1x80x2x32xf32> final_state tensor<1x2x32x32xf32>
  return %o, %s : tensor<1x80x2x32xf32>, tensor<1x2x32x32xf32>
}

func.func @gdn_softplus_head(%q: tensor<1x80x2x32xf32>, %k: tensor<1x80x2x32xf32>, %v: tensor<1x80x2x32xf32>, %g: tensor<1x80x2xf32>, %b: tensor<1x80x2xf32>, %a: tensor<2xf32>, %d: tensor<2xf32>) -> (tensor<1x80x2x32xf32>, tensor<1x2x32x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x80x2xf32>) beta(%b : tensor<1x80x2xf32>) A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2xf32>) {gate_activation = #kda<gate softplus>} : tensor<1x80x2x32xf32>, tensor<1x80x2x32xf32>, tensor<1x80x2x32xf32> -> tensor<1x80x2x32xf32> final_state tensor<1x2x32x32xf32>
  return %o, %s : tensor<1x80x2x32xf32>, tensor<1x2x32x32xf32>
}

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
module {
  func.func @gated_hybrid(%arg0: tensor<?x?x4x64xbf16>, %arg1: tensor<?x?x4x64xbf16>, %arg2: tensor<?x?x4x64xbf16>, %arg3: tensor<?x?x4x64xbf16>, %arg4: tensor<?x?x4xbf16>, %arg5: tensor<?x?x4xbf16>) -> tensor<?x?x4x64xbf16> {
    %cst = arith.constant 1.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0_0 : tensor<?x?x4x64xbf16>
    %c1_1 = arith.constant 1 : index
    %dim_2 = tensor.dim %arg0, %c1_1 : tensor<?x?x4x64xbf16>
    %0 = tensor.empty(%dim, %dim_2) : tensor<?x?x4x64xbf16>
    %1 = call @kda_gated_delta_kernel(%arg0, %arg1, %arg2, %arg3, %arg4, %0) : (tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4xbf16>, tensor<?x?x4x64xbf16>) -> tensor<?x?x4x64xbf16>
    %c0_3 = arith.constant 0 : index
    %dim_4 = tensor.dim %arg0, %c0_3 : tensor<?x?x4x64xbf16>
    %c1_5 = arith.constant 1 : index
    %dim_6 = tensor.dim %arg0, %c1_5 : tensor<?x?x4x64xbf16>
    %2 = tensor.empty(%dim_4, %dim_6) : tensor<?x?x4x64xbf16>
    %3 = call @kda_window_attention_kernel(%arg0, %arg1, %arg2, %2) : (tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>) -> tensor<?x?x4x64xbf16>
    %dim_7 = tensor.dim %1, %c0 : tensor<?x?x4x64xbf16>
    %dim_8 = tensor.dim %1, %c1 : tensor<?x?x4x64xbf16>
    %4 = tensor.empty(%dim_7, %dim_8) : tensor<?x?x4x64xbf16>
    %5 = linalg.generic {indexing_maps = [#map, #map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%1, %3, %arg5 : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4xbf16>) outs(%4 : tensor<?x?x4x64xbf16>) {
    ^bb0(%in: bf16, %in_9: bf16, %in_10: bf16, %out: bf16):
      %6 = arith.extf %in : bf16 to f32
      %7 = arith.extf %in_9 : bf16 to f32
      %8 = arith.extf %in_10 : bf16 to f32
      %9 = arith.negf %8 : f32
      %10 = math.exp %9 : f32
      %11 = arith.addf %10, %cst : f32
      %12 = arith.divf %cst, %11 : f32
      %13 = arith.subf %6, %7 : f32
      %14 = arith.mulf %12, %13 : f32
      %15 = arith.addf %7, %14 : f32
      %16 = arith.truncf %15 : f32 to bf16
      linalg.yield %16 : bf16
    } -> tensor<?x?x4x64xbf16>
    return %5 : tensor<?x?x4x64xbf16>
  }
  func.func private @kda_gated_delta_kernel(%arg0: tensor<?x?x4x64xbf16>, %arg1: tensor<?x?x4x64xbf16>, %arg2: tensor<?x?x4x64xbf16>, %arg3: tensor<?x?x4x64xbf16>, %arg4: tensor<?x?x4xbf16>, %arg5: tensor<?x?x4x64xbf16>) -> tensor<?x?x4x64xbf16> attributes {kda.abi = [{dims = ["B", "T", 4, 64], name = "q"}, {dims = ["B", "T", 4, 64], name = "k"}, {dims = ["B", "T", 4, 64], name = "v"}, {dims = ["B", "T", 4, 64], name = "gate"}, {dims = ["B", "T", 4], name = "beta"}, {dims = ["B", "T", 4, 64], name = "o"}], kda.kernel} {
    %o = kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<?x?x4x64xbf16>) beta(%arg4 : tensor<?x?x4xbf16>) : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
    return %o : tensor<?x?x4x64xbf16>
  }
  func.func private @kda_window_attention_kernel(%arg0: tensor<?x?x4x64xbf16>, %arg1: tensor<?x?x4x64xbf16>, %arg2: tensor<?x?x4x64xbf16>, %arg3: tensor<?x?x4x64xbf16>) -> tensor<?x?x4x64xbf16> attributes {kda.abi = [{dims = ["B", "T", 4, 64], name = "q"}, {dims = ["B", "T", 4, 64], name = "k"}, {dims = ["B", "T", 4, 64], name = "v"}, {dims = ["B", "T", 4, 64], name = "o"}], kda.kernel} {
    %0 = kda.window_attention %arg0, %arg1, %arg2 {window = 64 : i64} : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
    return %0 : tensor<?x?x4x64xbf16>
  }
}



#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map5 = affine_map<(d0, d1, d2) -> (d1, d0)>
module attributes {kda.entries = [{launches = [{args = ["q", "k", "v", "ws0", "ws1", "ws2", "ws3", "ws4"], kernel = "kda_gated_delta_kernel_intra"}, {args = ["q", "k", "v", "ws0", "ws2", "ws3", "ws4", "ws1", "o"], kernel = "kda_gated_delta_kernel_state"}], name = "kda_gated_delta_kernel", params = [{dtype = "bf16", name = "q", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "k", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "v", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "o", shape = [1, "T", 1, 64]}], workspaces = [{dtype = "bf16", name = "ws0", shape = [1, "T", 1, 64]}, {dtype = "f32", name = "ws1", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "ws2", shape = [1, "T", 1, 64]}, {dtype = "bf16", name = "ws3", shape = [1, "T", 1, 64]}, {dtype = "f32", name = "ws4", shape = [1, "T", 1, 16]}]}]} {
  func.func @f(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> {
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %arg0, %c1 : tensor<1x?x1x64xbf16>
    %0 = tensor.empty(%dim) : tensor<1x?x1x64xbf16>
    %1 = call @kda_gated_delta_kernel(%arg0, %arg1, %arg2, %0) : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16>
    return %1 : tensor<1x?x1x64xbf16>
  }
  func.func private @kda_gated_delta_kernel(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>, %arg3: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> {
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %arg0, %c1 : tensor<1x?x1x64xbf16>
    %0 = tensor.empty(%dim) : tensor<1x?x1x64xbf16>
    %c1_0 = arith.constant 1 : index
    %dim_1 = tensor.dim %arg0, %c1_0 : tensor<1x?x1x64xbf16>
    %1 = tensor.empty(%dim_1) : tensor<1x?x1x64xf32>
    %c1_2 = arith.constant 1 : index
    %dim_3 = tensor.dim %arg0, %c1_2 : tensor<1x?x1x64xbf16>
    %2 = tensor.empty(%dim_3) : tensor<1x?x1x64xbf16>
    %c1_4 = arith.constant 1 : index
    %dim_5 = tensor.dim %arg0, %c1_4 : tensor<1x?x1x64xbf16>
    %3 = tensor.empty(%dim_5) : tensor<1x?x1x64xbf16>
    %c1_6 = arith.constant 1 : index
    %dim_7 = tensor.dim %arg0, %c1_6 : tensor<1x?x1x64xbf16>
    %4 = tensor.empty(%dim_7) : tensor<1x?x1x16xf32>
    %5:5 = call @kda_gated_delta_kernel_intra(%arg0, %arg1, %arg2, %0, %1, %2, %3, %4) : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>) -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>)
    %6 = call @kda_gated_delta_kernel_state(%arg0, %arg1, %arg2, %5#0, %5#2, %5#3, %5#4, %5#1, %arg3) : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16>
    return %6 : tensor<1x?x1x64xbf16>
  }
  func.func private @kda_gated_delta_kernel_intra(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>, %arg3: tensor<1x?x1x64xbf16>, %arg4: tensor<1x?x1x64xf32>, %arg5: tensor<1x?x1x64xbf16>, %arg6: tensor<1x?x1x64xbf16>, %arg7: tensor<1x?x1x16xf32>) -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>) attributes {kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "ws0"}, {dims = [1, "T", 1, 64], name = "ws1"}, {dims = [1, "T", 1, 64], name = "ws2"}, {dims = [1, "T", 1, 64], name = "ws3"}, {dims = [1, "T", 1, 16], name = "ws4"}], kda.chunk_grid = 16 : i64, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 64, value_dim = 64, workspaces = ["w", "u", "q", "k", "p"], grid = [1, -1, 1], prologue = <delta = true, gate = none, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = false, beta_activation = none, l2norm = false, scale = 1.250000e-01 : f64>>, kda.kernel} {
    %cst = arith.constant 1.250000e-01 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %arg0, %c1 : tensor<1x?x1x64xbf16>
    %0 = tensor.empty(%dim) : tensor<1x?x1x64xbf16>
    %1 = tensor.empty(%dim) : tensor<1x?x1x64xf32>
    %2 = tensor.empty(%dim) : tensor<1x?x1x16xf32>
    %3 = arith.ceildivui %dim, %c16 : index
    %4:5 = scf.forall (%arg8, %arg9, %arg10) in (1, %3, 1) shared_outs(%arg11 = %0, %arg12 = %1, %arg13 = %0, %arg14 = %0, %arg15 = %2) -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>) {
      %5 = arith.muli %arg9, %c16 : index
      %6 = arith.minui %5, %dim : index
      %7 = arith.subi %dim, %6 : index
      %8 = arith.minui %7, %c16 : index
      %extracted_slice = tensor.extract_slice %arg11[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_1 = tensor.extract_slice %arg12[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xf32> to tensor<?x64xf32>
      %extracted_slice_2 = tensor.extract_slice %arg13[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_3 = tensor.extract_slice %arg14[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_4 = tensor.extract_slice %arg15[0, %5, 0, 0] [1, %8, 1, 16] [1, 1, 1, 1] : tensor<1x?x1x16xf32> to tensor<?x16xf32>
      %9 = arith.maxui %8, %c1 : index
      %10 = arith.subi %9, %c1 : index
      %dim_5 = tensor.dim %arg1, %c1 : tensor<1x?x1x64xbf16>
      %11 = tensor.empty() : tensor<16x64xf32>
      %12 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%11 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %29 = linalg.index 0 : index
        %30 = linalg.index 1 : index
        %31 = arith.minui %29, %10 : index
        %32 = arith.addi %5, %31 : index
        %33 = arith.maxui %dim_5, %c1 : index
        %34 = arith.subi %33, %c1 : index
        %35 = arith.minui %32, %34 : index
        %extracted = tensor.extract %arg1[%c0, %35, %c0, %30] : tensor<1x?x1x64xbf16>
        %36 = arith.extf %extracted : bf16 to f32
        %37 = arith.cmpi ult, %29, %8 : index
        %38 = arith.select %37, %36, %cst_0 : f32
        linalg.yield %38 : f32
      } -> tensor<16x64xf32>
      %dim_6 = tensor.dim %arg2, %c1 : tensor<1x?x1x64xbf16>
      %13 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%11 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %29 = linalg.index 0 : index
        %30 = linalg.index 1 : index
        %31 = arith.minui %29, %10 : index
        %32 = arith.addi %5, %31 : index
        %33 = arith.maxui %dim_6, %c1 : index
        %34 = arith.subi %33, %c1 : index
        %35 = arith.minui %32, %34 : index
        %extracted = tensor.extract %arg2[%c0, %35, %c0, %30] : tensor<1x?x1x64xbf16>
        %36 = arith.extf %extracted : bf16 to f32
        %37 = arith.cmpi ult, %29, %8 : index
        %38 = arith.select %37, %36, %cst_0 : f32
        linalg.yield %38 : f32
      } -> tensor<16x64xf32>
      %14 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%11 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %29 = linalg.index 0 : index
        %30 = linalg.index 1 : index
        %31 = arith.minui %29, %10 : index
        %32 = arith.addi %5, %31 : index
        %33 = arith.maxui %dim, %c1 : index
        %34 = arith.subi %33, %c1 : index
        %35 = arith.minui %32, %34 : index
        %extracted = tensor.extract %arg0[%c0, %35, %c0, %30] : tensor<1x?x1x64xbf16>
        %36 = arith.extf %extracted : bf16 to f32
        %37 = arith.cmpi ult, %29, %8 : index
        %38 = arith.select %37, %36, %cst_0 : f32
        %39 = arith.mulf %38, %cst : f32
        linalg.yield %39 : f32
      } -> tensor<16x64xf32>
      %15 = tensor.empty() : tensor<16x16xf32>
      %16 = linalg.fill ins(%cst_0 : f32) outs(%15 : tensor<16x16xf32>) -> tensor<16x16xf32>
      %17 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%14, %12 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%16 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %29 = arith.mulf %in, %in_16 : f32
        %30 = arith.addf %out, %29 : f32
        linalg.yield %30 : f32
      } -> tensor<16x16xf32>
      %18 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%17 : tensor<16x16xf32>) outs(%15 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %out: f32):
        %29 = linalg.index 0 : index
        %30 = linalg.index 1 : index
        %31 = arith.cmpi ule, %30, %29 : index
        %32 = arith.select %31, %in, %cst_0 : f32
        linalg.yield %32 : f32
      } -> tensor<16x16xf32>
      %19 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%12, %12 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%16 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %29 = arith.mulf %in, %in_16 : f32
        %30 = arith.addf %out, %29 : f32
        linalg.yield %30 : f32
      } -> tensor<16x16xf32>
      %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%19 : tensor<16x16xf32>) outs(%15 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %out: f32):
        %29 = linalg.index 0 : index
        %30 = linalg.index 1 : index
        %31 = arith.cmpi ult, %30, %29 : index
        %32 = arith.select %31, %in, %cst_0 : f32
        linalg.yield %32 : f32
      } -> tensor<16x16xf32>
      %21 = scf.forall (%arg16) in (16) shared_outs(%arg17 = %15) -> (tensor<16x16xf32>) {
        %extracted_slice_16 = tensor.extract_slice %arg17[0, %arg16] [16, 1] [1, 1] : tensor<16x16xf32> to tensor<16xf32>
        %29 = scf.for %arg18 = %c0 to %c16 step %c1 iter_args(%arg19 = %extracted_slice_16) -> (tensor<16xf32>) {
          %30 = scf.for %arg20 = %c0 to %arg18 step %c1 iter_args(%arg21 = %cst_0) -> (f32) {
            %extracted = tensor.extract %20[%arg18, %arg20] : tensor<16x16xf32>
            %extracted_17 = tensor.extract %arg19[%arg20] : tensor<16xf32>
            %34 = arith.mulf %extracted, %extracted_17 : f32
            %35 = arith.addf %arg21, %34 : f32
            scf.yield %35 : f32
          }
          %31 = arith.cmpi eq, %arg18, %arg16 : index
          %32 = arith.uitofp %31 : i1 to f32
          %33 = arith.subf %32, %30 : f32
          %inserted = tensor.insert %33 into %arg19[%arg18] : tensor<16xf32>
          scf.yield %inserted : tensor<16xf32>
        }
        scf.forall.in_parallel {
          tensor.parallel_insert_slice %29 into %arg17[0, %arg16] [16, 1] [1, 1] : tensor<16xf32> into tensor<16x16xf32>
        }
      }
      %22 = linalg.fill ins(%cst_0 : f32) outs(%11 : tensor<16x64xf32>) -> tensor<16x64xf32>
      %23 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%21, %12 : tensor<16x16xf32>, tensor<16x64xf32>) outs(%22 : tensor<16x64xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %29 = arith.mulf %in, %in_16 : f32
        %30 = arith.addf %out, %29 : f32
        linalg.yield %30 : f32
      } -> tensor<16x64xf32>
      %24 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%21, %13 : tensor<16x16xf32>, tensor<16x64xf32>) outs(%22 : tensor<16x64xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %29 = arith.mulf %in, %in_16 : f32
        %30 = arith.addf %out, %29 : f32
        linalg.yield %30 : f32
      } -> tensor<16x64xf32>
      %extracted_slice_7 = tensor.extract_slice %23[0, 0] [%8, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %25 = tensor.empty(%8) : tensor<?x64xbf16>
      %26 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_7 : tensor<?x64xf32>) outs(%25 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %29 = arith.truncf %in : f32 to bf16
        linalg.yield %29 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice = tensor.insert_slice %26 into %extracted_slice[0, 0] [%8, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_8 = tensor.extract_slice %24[0, 0] [%8, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %inserted_slice_9 = tensor.insert_slice %extracted_slice_8 into %extracted_slice_1[0, 0] [%8, 64] [1, 1] : tensor<?x64xf32> into tensor<?x64xf32>
      %extracted_slice_10 = tensor.extract_slice %14[0, 0] [%8, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %27 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_10 : tensor<?x64xf32>) outs(%25 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %29 = arith.truncf %in : f32 to bf16
        linalg.yield %29 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice_11 = tensor.insert_slice %27 into %extracted_slice_2[0, 0] [%8, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_12 = tensor.extract_slice %12[0, 0] [%8, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %28 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_12 : tensor<?x64xf32>) outs(%25 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %29 = arith.truncf %in : f32 to bf16
        linalg.yield %29 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice_13 = tensor.insert_slice %28 into %extracted_slice_3[0, 0] [%8, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_14 = tensor.extract_slice %18[0, 0] [%8, 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
      %inserted_slice_15 = tensor.insert_slice %extracted_slice_14 into %extracted_slice_4[0, 0] [%8, 16] [1, 1] : tensor<?x16xf32> into tensor<?x16xf32>
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %inserted_slice into %arg11[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_9 into %arg12[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<?x64xf32> into tensor<1x?x1x64xf32>
        tensor.parallel_insert_slice %inserted_slice_11 into %arg13[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_13 into %arg14[0, %5, 0, 0] [1, %8, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_15 into %arg15[0, %5, 0, 0] [1, %8, 1, 16] [1, 1, 1, 1] : tensor<?x16xf32> into tensor<1x?x1x16xf32>
      }
    }
    return %4#0, %4#1, %4#2, %4#3, %4#4 : tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>
  }
  func.func private @kda_gated_delta_kernel_state(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>, %arg3: tensor<1x?x1x64xbf16>, %arg4: tensor<1x?x1x64xbf16>, %arg5: tensor<1x?x1x64xbf16>, %arg6: tensor<1x?x1x16xf32>, %arg7: tensor<1x?x1x64xf32>, %arg8: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> attributes {kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "ws0"}, {dims = [1, "T", 1, 64], name = "ws2"}, {dims = [1, "T", 1, 64], name = "ws3"}, {dims = [1, "T", 1, 16], name = "ws4"}, {dims = [1, "T", 1, 64], name = "ws1"}, {dims = [1, "T", 1, 64], name = "o"}], kda.kernel, kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 64, v_block = 16, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p"], grid = [1, 1, 4]>} {
    %cst = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %arg0, %c1 : tensor<1x?x1x64xbf16>
    %0 = tensor.empty(%dim) : tensor<1x?x1x64xbf16>
    %1 = arith.ceildivui %dim, %c16 : index
    %2 = scf.forall (%arg9, %arg10, %arg11) in (1, 1, 4) shared_outs(%arg12 = %0) -> (tensor<1x?x1x64xbf16>) {
      %3 = arith.muli %arg11, %c16 : index
      %4 = tensor.empty() : tensor<64x16xf32>
      %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<64x16xf32>) -> tensor<64x16xf32>
      %extracted_slice = tensor.extract_slice %arg12[0, 0, 0, %3] [1, %dim, 1, 16] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x16xbf16>
      %6:2 = scf.for %arg13 = %c0 to %1 step %c1 iter_args(%arg14 = %5, %arg15 = %extracted_slice) -> (tensor<64x16xf32>, tensor<?x16xbf16>) {
        %7 = arith.muli %arg13, %c16 : index
        %8 = arith.subi %dim, %7 : index
        %9 = arith.minui %8, %c16 : index
        %10 = arith.maxui %9, %c1 : index
        %11 = arith.subi %10, %c1 : index
        %12 = tensor.empty() : tensor<16x64xf32>
        %13 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %28 = linalg.index 0 : index
          %29 = linalg.index 1 : index
          %30 = arith.minui %28, %11 : index
          %31 = arith.addi %7, %30 : index
          %32 = arith.maxui %dim, %c1 : index
          %33 = arith.subi %32, %c1 : index
          %34 = arith.minui %31, %33 : index
          %extracted = tensor.extract %arg3[%c0, %34, %c0, %29] : tensor<1x?x1x64xbf16>
          %35 = arith.extf %extracted : bf16 to f32
          %36 = arith.cmpi ult, %28, %9 : index
          %37 = arith.select %36, %35, %cst : f32
          linalg.yield %37 : f32
        } -> tensor<16x64xf32>
        %14 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %28 = linalg.index 0 : index
          %29 = linalg.index 1 : index
          %30 = arith.minui %28, %11 : index
          %31 = arith.addi %7, %30 : index
          %32 = arith.maxui %dim, %c1 : index
          %33 = arith.subi %32, %c1 : index
          %34 = arith.minui %31, %33 : index
          %extracted = tensor.extract %arg4[%c0, %34, %c0, %29] : tensor<1x?x1x64xbf16>
          %35 = arith.extf %extracted : bf16 to f32
          %36 = arith.cmpi ult, %28, %9 : index
          %37 = arith.select %36, %35, %cst : f32
          linalg.yield %37 : f32
        } -> tensor<16x64xf32>
        %15 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %28 = linalg.index 0 : index
          %29 = linalg.index 1 : index
          %30 = arith.minui %28, %11 : index
          %31 = arith.addi %7, %30 : index
          %32 = arith.maxui %dim, %c1 : index
          %33 = arith.subi %32, %c1 : index
          %34 = arith.minui %31, %33 : index
          %extracted = tensor.extract %arg5[%c0, %34, %c0, %29] : tensor<1x?x1x64xbf16>
          %35 = arith.extf %extracted : bf16 to f32
          %36 = arith.cmpi ult, %28, %9 : index
          %37 = arith.select %36, %35, %cst : f32
          linalg.yield %37 : f32
        } -> tensor<16x64xf32>
        %16 = tensor.empty() : tensor<16x16xf32>
        %17 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%16 : tensor<16x16xf32>) {
        ^bb0(%out: f32):
          %28 = linalg.index 0 : index
          %29 = linalg.index 1 : index
          %30 = arith.minui %28, %11 : index
          %31 = arith.addi %7, %30 : index
          %32 = arith.maxui %dim, %c1 : index
          %33 = arith.subi %32, %c1 : index
          %34 = arith.minui %31, %33 : index
          %extracted = tensor.extract %arg6[%c0, %34, %c0, %29] : tensor<1x?x1x16xf32>
          %35 = arith.cmpi ult, %28, %9 : index
          %36 = arith.select %35, %extracted, %cst : f32
          linalg.yield %36 : f32
        } -> tensor<16x16xf32>
        %18 = linalg.fill ins(%cst : f32) outs(%16 : tensor<16x16xf32>) -> tensor<16x16xf32>
        %19 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%13, %arg14 : tensor<16x64xf32>, tensor<64x16xf32>) outs(%18 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.mulf %in, %in_1 : f32
          %29 = arith.addf %out, %28 : f32
          linalg.yield %29 : f32
        } -> tensor<16x16xf32>
        %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%19 : tensor<16x16xf32>) outs(%16 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %out: f32):
          %28 = linalg.index 0 : index
          %29 = linalg.index 1 : index
          %30 = arith.minui %28, %11 : index
          %31 = arith.addi %7, %30 : index
          %32 = arith.maxui %dim, %c1 : index
          %33 = arith.subi %32, %c1 : index
          %34 = arith.minui %31, %33 : index
          %35 = arith.addi %3, %29 : index
          %extracted = tensor.extract %arg7[%c0, %34, %c0, %35] : tensor<1x?x1x64xf32>
          %36 = arith.cmpi ult, %28, %9 : index
          %37 = arith.select %36, %extracted, %cst : f32
          %38 = arith.subf %37, %in : f32
          linalg.yield %38 : f32
        } -> tensor<16x16xf32>
        %21 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%14, %arg14 : tensor<16x64xf32>, tensor<64x16xf32>) outs(%18 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.mulf %in, %in_1 : f32
          %29 = arith.addf %out, %28 : f32
          linalg.yield %29 : f32
        } -> tensor<16x16xf32>
        %22 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%17, %20 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%18 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.mulf %in, %in_1 : f32
          %29 = arith.addf %out, %28 : f32
          linalg.yield %29 : f32
        } -> tensor<16x16xf32>
        %23 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%21, %22 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%16 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.addf %in, %in_1 : f32
          linalg.yield %28 : f32
        } -> tensor<16x16xf32>
        %24 = linalg.generic {indexing_maps = [#map5, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%15, %20 : tensor<16x64xf32>, tensor<16x16xf32>) outs(%5 : tensor<64x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.mulf %in, %in_1 : f32
          %29 = arith.addf %out, %28 : f32
          linalg.yield %29 : f32
        } -> tensor<64x16xf32>
        %25 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg14, %24 : tensor<64x16xf32>, tensor<64x16xf32>) outs(%4 : tensor<64x16xf32>) {
        ^bb0(%in: f32, %in_1: f32, %out: f32):
          %28 = arith.addf %in, %in_1 : f32
          linalg.yield %28 : f32
        } -> tensor<64x16xf32>
        %extracted_slice_0 = tensor.extract_slice %23[0, 0] [%9, 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
        %26 = tensor.empty(%9) : tensor<?x16xbf16>
        %27 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_0 : tensor<?x16xf32>) outs(%26 : tensor<?x16xbf16>) {
        ^bb0(%in: f32, %out: bf16):
          %28 = arith.truncf %in : f32 to bf16
          linalg.yield %28 : bf16
        } -> tensor<?x16xbf16>
        %inserted_slice = tensor.insert_slice %27 into %arg15[%7, 0] [%9, 16] [1, 1] : tensor<?x16xbf16> into tensor<?x16xbf16>
        scf.yield %25, %inserted_slice : tensor<64x16xf32>, tensor<?x16xbf16>
      }
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %6#1 into %arg12[0, 0, 0, %3] [1, %dim, 1, 16] [1, 1, 1, 1] : tensor<?x16xbf16> into tensor<1x?x1x64xbf16>
      }
    }
    return %2 : tensor<1x?x1x64xbf16>
  }
}



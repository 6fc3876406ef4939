#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map5 = affine_map<(d0, d1, d2) -> (d1, d0)>
module {
  func.func @f(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> {
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %arg0, %c1 : tensor<1x?x1x64xbf16>
    %0 = tensor.empty(%dim) : tensor<1x?x1x64xbf16>
    %1 = call @kda_gated_delta_kernel(%arg0, %arg1, %arg2, %0) : (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16>
    return %1 : tensor<1x?x1x64xbf16>
  }
  func.func private @kda_gated_delta_kernel(%arg0: tensor<1x?x1x64xbf16>, %arg1: tensor<1x?x1x64xbf16>, %arg2: tensor<1x?x1x64xbf16>, %arg3: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> attributes {kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "o"}], kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 64, value_dim = 64, workspaces = ["w", "u", "q", "k", "p"], grid = [1, -1, 1], prologue = <delta = true, gate = none, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = false, beta_activation = none, l2norm = false, scale = 1.250000e-01 : f64>>, kda.kernel, kda.phase = ["intra", "state"], kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 64, v_block = 16, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p"], grid = [1, 1, 4]>} {
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
    %4:5 = scf.forall (%arg4, %arg5, %arg6) in (1, %3, 1) shared_outs(%arg7 = %0, %arg8 = %1, %arg9 = %0, %arg10 = %0, %arg11 = %2) -> (tensor<1x?x1x64xbf16>, tensor<1x?x1x64xf32>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x16xf32>) {
      %6 = arith.muli %arg5, %c16 : index
      %7 = arith.minui %6, %dim : index
      %8 = arith.subi %dim, %7 : index
      %9 = arith.minui %8, %c16 : index
      %extracted_slice = tensor.extract_slice %arg7[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_1 = tensor.extract_slice %arg8[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xf32> to tensor<?x64xf32>
      %extracted_slice_2 = tensor.extract_slice %arg9[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_3 = tensor.extract_slice %arg10[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x64xbf16>
      %extracted_slice_4 = tensor.extract_slice %arg11[0, %6, 0, 0] [1, %9, 1, 16] [1, 1, 1, 1] : tensor<1x?x1x16xf32> to tensor<?x16xf32>
      %10 = arith.maxui %9, %c1 : index
      %11 = arith.subi %10, %c1 : index
      %dim_5 = tensor.dim %arg1, %c1 : tensor<1x?x1x64xbf16>
      %12 = tensor.empty() : tensor<16x64xf32>
      %13 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %30 = linalg.index 0 : index
        %31 = linalg.index 1 : index
        %32 = arith.minui %30, %11 : index
        %33 = arith.addi %6, %32 : index
        %34 = arith.maxui %dim_5, %c1 : index
        %35 = arith.subi %34, %c1 : index
        %36 = arith.minui %33, %35 : index
        %extracted = tensor.extract %arg1[%c0, %36, %c0, %31] : tensor<1x?x1x64xbf16>
        %37 = arith.extf %extracted : bf16 to f32
        %38 = arith.cmpi ult, %30, %9 : index
        %39 = arith.select %38, %37, %cst_0 : f32
        linalg.yield %39 : f32
      } -> tensor<16x64xf32>
      %dim_6 = tensor.dim %arg2, %c1 : tensor<1x?x1x64xbf16>
      %14 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %30 = linalg.index 0 : index
        %31 = linalg.index 1 : index
        %32 = arith.minui %30, %11 : index
        %33 = arith.addi %6, %32 : index
        %34 = arith.maxui %dim_6, %c1 : index
        %35 = arith.subi %34, %c1 : index
        %36 = arith.minui %33, %35 : index
        %extracted = tensor.extract %arg2[%c0, %36, %c0, %31] : tensor<1x?x1x64xbf16>
        %37 = arith.extf %extracted : bf16 to f32
        %38 = arith.cmpi ult, %30, %9 : index
        %39 = arith.select %38, %37, %cst_0 : f32
        linalg.yield %39 : f32
      } -> tensor<16x64xf32>
      %15 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%12 : tensor<16x64xf32>) {
      ^bb0(%out: f32):
        %30 = linalg.index 0 : index
        %31 = linalg.index 1 : index
        %32 = arith.minui %30, %11 : index
        %33 = arith.addi %6, %32 : index
        %34 = arith.maxui %dim, %c1 : index
        %35 = arith.subi %34, %c1 : index
        %36 = arith.minui %33, %35 : index
        %extracted = tensor.extract %arg0[%c0, %36, %c0, %31] : tensor<1x?x1x64xbf16>
        %37 = arith.extf %extracted : bf16 to f32
        %38 = arith.cmpi ult, %30, %9 : index
        %39 = arith.select %38, %37, %cst_0 : f32
        %40 = arith.mulf %39, %cst : f32
        linalg.yield %40 : f32
      } -> tensor<16x64xf32>
      %16 = tensor.empty() : tensor<16x16xf32>
      %17 = linalg.fill ins(%cst_0 : f32) outs(%16 : tensor<16x16xf32>) -> tensor<16x16xf32>
      %18 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%15, %13 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%17 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %30 = arith.mulf %in, %in_16 : f32
        %31 = arith.addf %out, %30 : f32
        linalg.yield %31 : f32
      } -> tensor<16x16xf32>
      %19 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%18 : tensor<16x16xf32>) outs(%16 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %out: f32):
        %30 = linalg.index 0 : index
        %31 = linalg.index 1 : index
        %32 = arith.cmpi ule, %31, %30 : index
        %33 = arith.select %32, %in, %cst_0 : f32
        linalg.yield %33 : f32
      } -> tensor<16x16xf32>
      %20 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%13, %13 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%17 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %30 = arith.mulf %in, %in_16 : f32
        %31 = arith.addf %out, %30 : f32
        linalg.yield %31 : f32
      } -> tensor<16x16xf32>
      %21 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%20 : tensor<16x16xf32>) outs(%16 : tensor<16x16xf32>) {
      ^bb0(%in: f32, %out: f32):
        %30 = linalg.index 0 : index
        %31 = linalg.index 1 : index
        %32 = arith.cmpi ult, %31, %30 : index
        %33 = arith.select %32, %in, %cst_0 : f32
        linalg.yield %33 : f32
      } -> tensor<16x16xf32>
      %22 = scf.forall (%arg12) in (16) shared_outs(%arg13 = %16) -> (tensor<16x16xf32>) {
        %extracted_slice_16 = tensor.extract_slice %arg13[0, %arg12] [16, 1] [1, 1] : tensor<16x16xf32> to tensor<16xf32>
        %30 = scf.for %arg14 = %c0 to %c16 step %c1 iter_args(%arg15 = %extracted_slice_16) -> (tensor<16xf32>) {
          %31 = scf.for %arg16 = %c0 to %arg14 step %c1 iter_args(%arg17 = %cst_0) -> (f32) {
            %extracted = tensor.extract %21[%arg14, %arg16] : tensor<16x16xf32>
            %extracted_17 = tensor.extract %arg15[%arg16] : tensor<16xf32>
            %35 = arith.mulf %extracted, %extracted_17 : f32
            %36 = arith.addf %arg17, %35 : f32
            scf.yield %36 : f32
          }
          %32 = arith.cmpi eq, %arg14, %arg12 : index
          %33 = arith.uitofp %32 : i1 to f32
          %34 = arith.subf %33, %31 : f32
          %inserted = tensor.insert %34 into %arg15[%arg14] : tensor<16xf32>
          scf.yield %inserted : tensor<16xf32>
        }
        scf.forall.in_parallel {
          tensor.parallel_insert_slice %30 into %arg13[0, %arg12] [16, 1] [1, 1] : tensor<16xf32> into tensor<16x16xf32>
        }
      }
      %23 = linalg.fill ins(%cst_0 : f32) outs(%12 : tensor<16x64xf32>) -> tensor<16x64xf32>
      %24 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%22, %13 : tensor<16x16xf32>, tensor<16x64xf32>) outs(%23 : tensor<16x64xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %30 = arith.mulf %in, %in_16 : f32
        %31 = arith.addf %out, %30 : f32
        linalg.yield %31 : f32
      } -> tensor<16x64xf32>
      %25 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%22, %14 : tensor<16x16xf32>, tensor<16x64xf32>) outs(%23 : tensor<16x64xf32>) {
      ^bb0(%in: f32, %in_16: f32, %out: f32):
        %30 = arith.mulf %in, %in_16 : f32
        %31 = arith.addf %out, %30 : f32
        linalg.yield %31 : f32
      } -> tensor<16x64xf32>
      %extracted_slice_7 = tensor.extract_slice %24[0, 0] [%9, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %26 = tensor.empty(%9) : tensor<?x64xbf16>
      %27 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_7 : tensor<?x64xf32>) outs(%26 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %30 = arith.truncf %in : f32 to bf16
        linalg.yield %30 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice = tensor.insert_slice %27 into %extracted_slice[0, 0] [%9, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_8 = tensor.extract_slice %25[0, 0] [%9, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %inserted_slice_9 = tensor.insert_slice %extracted_slice_8 into %extracted_slice_1[0, 0] [%9, 64] [1, 1] : tensor<?x64xf32> into tensor<?x64xf32>
      %extracted_slice_10 = tensor.extract_slice %15[0, 0] [%9, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %28 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_10 : tensor<?x64xf32>) outs(%26 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %30 = arith.truncf %in : f32 to bf16
        linalg.yield %30 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice_11 = tensor.insert_slice %28 into %extracted_slice_2[0, 0] [%9, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_12 = tensor.extract_slice %13[0, 0] [%9, 64] [1, 1] : tensor<16x64xf32> to tensor<?x64xf32>
      %29 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_12 : tensor<?x64xf32>) outs(%26 : tensor<?x64xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %30 = arith.truncf %in : f32 to bf16
        linalg.yield %30 : bf16
      } -> tensor<?x64xbf16>
      %inserted_slice_13 = tensor.insert_slice %29 into %extracted_slice_3[0, 0] [%9, 64] [1, 1] : tensor<?x64xbf16> into tensor<?x64xbf16>
      %extracted_slice_14 = tensor.extract_slice %19[0, 0] [%9, 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
      %inserted_slice_15 = tensor.insert_slice %extracted_slice_14 into %extracted_slice_4[0, 0] [%9, 16] [1, 1] : tensor<?x16xf32> into tensor<?x16xf32>
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %inserted_slice into %arg7[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_9 into %arg8[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<?x64xf32> into tensor<1x?x1x64xf32>
        tensor.parallel_insert_slice %inserted_slice_11 into %arg9[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_13 into %arg10[0, %6, 0, 0] [1, %9, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<1x?x1x64xbf16>
        tensor.parallel_insert_slice %inserted_slice_15 into %arg11[0, %6, 0, 0] [1, %9, 1, 16] [1, 1, 1, 1] : tensor<?x16xf32> into tensor<1x?x1x16xf32>
      }
    }
    %5 = scf.forall (%arg4, %arg5, %arg6) in (1, 1, 4) shared_outs(%arg7 = %0) -> (tensor<1x?x1x64xbf16>) {
      %6 = arith.muli %arg6, %c16 : index
      %7 = tensor.empty() : tensor<64x16xf32>
      %8 = linalg.fill ins(%cst_0 : f32) outs(%7 : tensor<64x16xf32>) -> tensor<64x16xf32>
      %extracted_slice = tensor.extract_slice %arg7[0, 0, 0, %6] [1, %dim, 1, 16] [1, 1, 1, 1] : tensor<1x?x1x64xbf16> to tensor<?x16xbf16>
      %9:2 = scf.for %arg8 = %c0 to %3 step %c1 iter_args(%arg9 = %8, %arg10 = %extracted_slice) -> (tensor<64x16xf32>, tensor<?x16xbf16>) {
        %10 = arith.muli %arg8, %c16 : index
        %11 = arith.subi %dim, %10 : index
        %12 = arith.minui %11, %c16 : index
        %13 = arith.maxui %12, %c1 : index
        %14 = arith.subi %13, %c1 : index
        %15 = tensor.empty() : tensor<16x64xf32>
        %16 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%15 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %31 = linalg.index 0 : index
          %32 = linalg.index 1 : index
          %33 = arith.minui %31, %14 : index
          %34 = arith.addi %10, %33 : index
          %35 = arith.maxui %dim, %c1 : index
          %36 = arith.subi %35, %c1 : index
          %37 = arith.minui %34, %36 : index
          %extracted = tensor.extract %4#0[%c0, %37, %c0, %32] : tensor<1x?x1x64xbf16>
          %38 = arith.extf %extracted : bf16 to f32
          %39 = arith.cmpi ult, %31, %12 : index
          %40 = arith.select %39, %38, %cst_0 : f32
          linalg.yield %40 : f32
        } -> tensor<16x64xf32>
        %17 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%15 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %31 = linalg.index 0 : index
          %32 = linalg.index 1 : index
          %33 = arith.minui %31, %14 : index
          %34 = arith.addi %10, %33 : index
          %35 = arith.maxui %dim, %c1 : index
          %36 = arith.subi %35, %c1 : index
          %37 = arith.minui %34, %36 : index
          %extracted = tensor.extract %4#2[%c0, %37, %c0, %32] : tensor<1x?x1x64xbf16>
          %38 = arith.extf %extracted : bf16 to f32
          %39 = arith.cmpi ult, %31, %12 : index
          %40 = arith.select %39, %38, %cst_0 : f32
          linalg.yield %40 : f32
        } -> tensor<16x64xf32>
        %18 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%15 : tensor<16x64xf32>) {
        ^bb0(%out: f32):
          %31 = linalg.index 0 : index
          %32 = linalg.index 1 : index
          %33 = arith.minui %31, %14 : index
          %34 = arith.addi %10, %33 : index
          %35 = arith.maxui %dim, %c1 : index
          %36 = arith.subi %35, %c1 : index
          %37 = arith.minui %34, %36 : index
          %extracted = tensor.extract %4#3[%c0, %37, %c0, %32] : tensor<1x?x1x64xbf16>
          %38 = arith.extf %extracted : bf16 to f32
          %39 = arith.cmpi ult, %31, %12 : index
          %40 = arith.select %39, %38, %cst_0 : f32
          linalg.yield %40 : f32
        } -> tensor<16x64xf32>
        %19 = tensor.empty() : tensor<16x16xf32>
        %20 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%19 : tensor<16x16xf32>) {
        ^bb0(%out: f32):
          %31 = linalg.index 0 : index
          %32 = linalg.index 1 : index
          %33 = arith.minui %31, %14 : index
          %34 = arith.addi %10, %33 : index
          %35 = arith.maxui %dim, %c1 : index
          %36 = arith.subi %35, %c1 : index
          %37 = arith.minui %34, %36 : index
          %extracted = tensor.extract %4#4[%c0, %37, %c0, %32] : tensor<1x?x1x16xf32>
          %38 = arith.cmpi ult, %31, %12 : index
          %39 = arith.select %38, %extracted, %cst_0 : f32
          linalg.yield %39 : f32
        } -> tensor<16x16xf32>
        %21 = linalg.fill ins(%cst_0 : f32) outs(%19 : tensor<16x16xf32>) -> tensor<16x16xf32>
        %22 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%16, %arg9 : tensor<16x64xf32>, tensor<64x16xf32>) outs(%21 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.mulf %in, %in_2 : f32
          %32 = arith.addf %out, %31 : f32
          linalg.yield %32 : f32
        } -> tensor<16x16xf32>
        %23 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%22 : tensor<16x16xf32>) outs(%19 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %out: f32):
          %31 = linalg.index 0 : index
          %32 = linalg.index 1 : index
          %33 = arith.minui %31, %14 : index
          %34 = arith.addi %10, %33 : index
          %35 = arith.maxui %dim, %c1 : index
          %36 = arith.subi %35, %c1 : index
          %37 = arith.minui %34, %36 : index
          %38 = arith.addi %6, %32 : index
          %extracted = tensor.extract %4#1[%c0, %37, %c0, %38] : tensor<1x?x1x64xf32>
          %39 = arith.cmpi ult, %31, %12 : index
          %40 = arith.select %39, %extracted, %cst_0 : f32
          %41 = arith.subf %40, %in : f32
          linalg.yield %41 : f32
        } -> tensor<16x16xf32>
        %24 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%17, %arg9 : tensor<16x64xf32>, tensor<64x16xf32>) outs(%21 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.mulf %in, %in_2 : f32
          %32 = arith.addf %out, %31 : f32
          linalg.yield %32 : f32
        } -> tensor<16x16xf32>
        %25 = linalg.generic {indexing_maps = [#map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%20, %23 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%21 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.mulf %in, %in_2 : f32
          %32 = arith.addf %out, %31 : f32
          linalg.yield %32 : f32
        } -> tensor<16x16xf32>
        %26 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%24, %25 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%19 : tensor<16x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.addf %in, %in_2 : f32
          linalg.yield %31 : f32
        } -> tensor<16x16xf32>
        %27 = linalg.generic {indexing_maps = [#map5, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%18, %23 : tensor<16x64xf32>, tensor<16x16xf32>) outs(%8 : tensor<64x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.mulf %in, %in_2 : f32
          %32 = arith.addf %out, %31 : f32
          linalg.yield %32 : f32
        } -> tensor<64x16xf32>
        %28 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg9, %27 : tensor<64x16xf32>, tensor<64x16xf32>) outs(%7 : tensor<64x16xf32>) {
        ^bb0(%in: f32, %in_2: f32, %out: f32):
          %31 = arith.addf %in, %in_2 : f32
          linalg.yield %31 : f32
        } -> tensor<64x16xf32>
        %extracted_slice_1 = tensor.extract_slice %26[0, 0] [%12, 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
        %29 = tensor.empty(%12) : tensor<?x16xbf16>
        %30 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%extracted_slice_1 : tensor<?x16xf32>) outs(%29 : tensor<?x16xbf16>) {
        ^bb0(%in: f32, %out: bf16):
          %31 = arith.truncf %in : f32 to bf16
          linalg.yield %31 : bf16
        } -> tensor<?x16xbf16>
        %inserted_slice = tensor.insert_slice %30 into %arg10[%10, 0] [%12, 16] [1, 1] : tensor<?x16xbf16> into tensor<?x16xbf16>
        scf.yield %28, %inserted_slice : tensor<64x16xf32>, tensor<?x16xbf16>
      }
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %9#1 into %arg7[0, 0, 0, %6] [1, %dim, 1, 16] [1, 1, 1, 1] : tensor<?x16xbf16> into tensor<1x?x1x64xbf16>
      }
    }
    return %5 : tensor<1x?x1x64xbf16>
  }
}



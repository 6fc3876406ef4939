// The small KDA prefill of register-passes.mlir (bf16, K = V = 32, T = 32) as the GPU
// pipeline hands it to the register passes: bufferized kernels with their descriptions
// (kda.intra_pass, kda.state_pass) and kda-gpu-select-strategy's kda.strategy.
// Regenerate: kda-opt <that prefill> --kda-lower-to-nvvm="chip=sm_90a format=none"
//   --mlir-print-ir-before=kda-gpu-decode-registers --mlir-print-ir-module-scope --mlir-disable-threading
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map5 = affine_map<(d0, d1) -> (d1)>
#map6 = affine_map<(d0, d1, d2) -> (d1, d0)>
module attributes {kda.entries = [{launches = [{args = ["q", "k", "v", "gate", "beta", "ws0", "ws1", "ws2", "ws3", "ws4", "ws5"], kernel = "kda_gated_delta_kernel_intra"}, {args = ["q", "k", "v", "gate", "beta", "ws0", "ws2", "ws3", "ws4", "ws1", "ws5", "o"], kernel = "kda_gated_delta_kernel_state"}], name = "kda_gated_delta_kernel", params = [{dtype = "bf16", name = "q", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "k", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "v", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "gate", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "beta", shape = [1, 32, 1]}, {dtype = "bf16", name = "o", shape = [1, 32, 1, 32]}], workspaces = [{dtype = "bf16", name = "ws0", shape = [1, 32, 1, 32]}, {dtype = "f32", name = "ws1", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "ws2", shape = [1, 32, 1, 32]}, {dtype = "bf16", name = "ws3", shape = [1, 32, 1, 32]}, {dtype = "f32", name = "ws4", shape = [1, 32, 1, 16]}, {dtype = "f32", name = "ws5", shape = [1, 32, 1, 32]}]}]} {
  func.func @small(%arg0: memref<1x32x1x32xbf16>, %arg1: memref<1x32x1x32xbf16>, %arg2: memref<1x32x1x32xbf16>, %arg3: memref<1x32x1x32xbf16>, %arg4: memref<1x32x1xbf16>) -> memref<1x32x1x32xbf16> {
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xbf16>
    %0 = call @kda_gated_delta_kernel(%arg0, %arg1, %arg2, %arg3, %arg4, %alloc) : (memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1xbf16>, memref<1x32x1x32xbf16>) -> memref<1x32x1x32xbf16>
    return %0 : memref<1x32x1x32xbf16>
  }
  func.func private @kda_gated_delta_kernel(%arg0: memref<1x32x1x32xbf16>, %arg1: memref<1x32x1x32xbf16>, %arg2: memref<1x32x1x32xbf16>, %arg3: memref<1x32x1x32xbf16>, %arg4: memref<1x32x1xbf16>, %arg5: memref<1x32x1x32xbf16>) -> memref<1x32x1x32xbf16> {
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xbf16>
    %alloc_0 = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xf32>
    %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xbf16>
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xbf16>
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x16xf32>
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<1x32x1x32xf32>
    call @kda_gated_delta_kernel_intra(%arg0, %arg1, %arg2, %arg3, %arg4, %alloc, %alloc_0, %alloc_1, %alloc_2, %alloc_3, %alloc_4) : (memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xf32>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x16xf32>, memref<1x32x1x32xf32>) -> ()
    call @kda_gated_delta_kernel_state(%arg0, %arg1, %arg2, %arg3, %arg4, %alloc, %alloc_1, %alloc_2, %alloc_3, %alloc_0, %alloc_4, %arg5) : (memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x32xbf16>, memref<1x32x1x16xf32>, memref<1x32x1x32xf32>, memref<1x32x1x32xf32>, memref<1x32x1x32xbf16>) -> ()
    return %arg5 : memref<1x32x1x32xbf16>
  }
  func.func private @kda_gated_delta_kernel_intra(%arg0: memref<1x32x1x32xbf16>, %arg1: memref<1x32x1x32xbf16>, %arg2: memref<1x32x1x32xbf16>, %arg3: memref<1x32x1x32xbf16>, %arg4: memref<1x32x1xbf16>, %arg5: memref<1x32x1x32xbf16>, %arg6: memref<1x32x1x32xf32>, %arg7: memref<1x32x1x32xbf16>, %arg8: memref<1x32x1x32xbf16>, %arg9: memref<1x32x1x16xf32>, %arg10: memref<1x32x1x32xf32>) attributes {kda.abi = [{dims = [1, 32, 1, 32], name = "q"}, {dims = [1, 32, 1, 32], name = "k"}, {dims = [1, 32, 1, 32], name = "v"}, {dims = [1, 32, 1, 32], name = "gate"}, {dims = [1, 32, 1], name = "beta"}, {dims = [1, 32, 1, 32], name = "ws0"}, {dims = [1, 32, 1, 32], name = "ws1"}, {dims = [1, 32, 1, 32], name = "ws2"}, {dims = [1, 32, 1, 32], name = "ws3"}, {dims = [1, 32, 1, 16], name = "ws4"}, {dims = [1, 32, 1, 32], name = "ws5"}], kda.chunk_grid = 16 : i64, kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 16, sub_chunk = 16, key_dim = 32, value_dim = 32, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [1, 2, 1], prologue = <delta = true, gate = channel, gate_activation = none, lower_bound = -5.000000e+00 : f64, beta = true, beta_activation = none, l2norm = false, scale = 0.17677669529663687 : f64>>, kda.kernel, kda.strategy = #kda.strategy<kernel = "intra", kind = "lanes">} {
    %c31 = arith.constant 31 : index
    %c32 = arith.constant 32 : index
    %cst = arith.constant 0.176776692 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.forall (%arg11, %arg12, %arg13) in (1, 2, 1) {
      %0 = arith.muli %arg12, %c16 : index
      %1 = arith.minui %0, %c32 : index
      %2 = arith.subi %c32, %1 : index
      %3 = arith.minui %2, %c16 : index
      %4 = arith.minui %3, %c1 : index
      %subview = memref.subview %arg5[0, %0, 0, 0] [1, %3, 1, 32] [1, 1, 1, 1] : memref<1x32x1x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_1 = memref.subview %arg6[0, %0, 0, 0] [1, %3, 1, 32] [1, 1, 1, 1] : memref<1x32x1x32xf32> to memref<?x32xf32, strided<[32, 1], offset: ?>>
      %subview_2 = memref.subview %arg7[0, %0, 0, 0] [1, %3, 1, 32] [1, 1, 1, 1] : memref<1x32x1x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_3 = memref.subview %arg8[0, %0, 0, 0] [1, %3, 1, 32] [1, 1, 1, 1] : memref<1x32x1x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_4 = memref.subview %arg9[0, %0, 0, 0] [1, %3, 1, 16] [1, 1, 1, 1] : memref<1x32x1x16xf32> to memref<?x16xf32, strided<[16, 1], offset: ?>>
      %subview_5 = memref.subview %arg10[0, %0, 0, 0] [1, %4, 1, 32] [1, 1, 1, 1] : memref<1x32x1x32xf32> to memref<?x32xf32, strided<[32, 1], offset: ?>>
      %5 = arith.maxui %3, %c1 : index
      %6 = arith.subi %5, %c1 : index
      %alloc = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc : memref<16x32xf32>) {
      ^bb0(%out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 1 : index
        %9 = arith.minui %7, %6 : index
        %10 = arith.addi %0, %9 : index
        %11 = arith.minui %10, %c31 : index
        %12 = memref.load %arg1[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
        %13 = arith.extf %12 : bf16 to f32
        %14 = arith.cmpi ult, %7, %3 : index
        %15 = arith.select %14, %13, %cst_0 : f32
        linalg.yield %15 : f32
      }
      %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_6 : memref<16x32xf32>) {
      ^bb0(%out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 1 : index
        %9 = arith.minui %7, %6 : index
        %10 = arith.addi %0, %9 : index
        %11 = arith.minui %10, %c31 : index
        %12 = memref.load %arg0[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
        %13 = arith.extf %12 : bf16 to f32
        %14 = arith.cmpi ult, %7, %3 : index
        %15 = arith.select %14, %13, %cst_0 : f32
        %16 = arith.mulf %15, %cst : f32
        linalg.yield %16 : f32
      }
      %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_7 : memref<16x32xf32>) {
      ^bb0(%out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 1 : index
        %9 = arith.minui %7, %6 : index
        %10 = arith.addi %0, %9 : index
        %11 = arith.minui %10, %c31 : index
        %12 = memref.load %arg3[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
        %13 = arith.extf %12 : bf16 to f32
        %14 = arith.cmpi ult, %7, %3 : index
        %15 = arith.select %14, %13, %cst_0 : f32
        linalg.yield %15 : f32
      }
      %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_8 : memref<16x16xf32>) {
      ^bb0(%out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 1 : index
        %9 = arith.cmpi ule, %8, %7 : index
        %10 = arith.uitofp %9 : i1 to f32
        linalg.yield %10 : f32
      }
      %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_9 : memref<16x32xf32>)
      %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_10 : memref<16x32xf32>)
      linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_8, %alloc_7 : memref<16x16xf32>, memref<16x32xf32>) outs(%alloc_10 : memref<16x32xf32>) {
      ^bb0(%in: f32, %in_39: f32, %out: f32):
        %7 = arith.mulf %in, %in_39 : f32
        %8 = arith.addf %out, %7 : f32
        linalg.yield %8 : f32
      }
      %subview_11 = memref.subview %alloc_10[15, 0] [1, 32] [1, 1] : memref<16x32xf32> to memref<32xf32, strided<[1], offset: 480>>
      %alloc_12 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_12 : memref<16x16xf32>)
      %alloc_13 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_13 : memref<16x16xf32>)
      linalg.generic {indexing_maps = [#map1, #map4, #map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_6, %alloc, %alloc_10, %alloc_10 : memref<16x32xf32>, memref<16x32xf32>, memref<16x32xf32>, memref<16x32xf32>) outs(%alloc_13 : memref<16x16xf32>) {
      ^bb0(%in: f32, %in_39: f32, %in_40: f32, %in_41: f32, %out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 2 : index
        %9 = arith.cmpi ule, %8, %7 : index
        %10 = arith.subf %in_40, %in_41 : f32
        %11 = arith.select %9, %10, %cst_0 : f32
        %12 = arith.mulf %in, %in_39 : f32
        %13 = math.exp %11 : f32
        %14 = arith.mulf %12, %13 : f32
        %15 = arith.select %9, %14, %cst_0 : f32
        %16 = arith.addf %out, %15 : f32
        linalg.yield %16 : f32
      }
      %alloc_14 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_14 : memref<16x16xf32>)
      linalg.generic {indexing_maps = [#map1, #map4, #map1, #map4, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc, %alloc, %alloc_10, %alloc_10 : memref<16x32xf32>, memref<16x32xf32>, memref<16x32xf32>, memref<16x32xf32>) outs(%alloc_14 : memref<16x16xf32>) {
      ^bb0(%in: f32, %in_39: f32, %in_40: f32, %in_41: f32, %out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 2 : index
        %9 = arith.cmpi ult, %8, %7 : index
        %10 = arith.subf %in_40, %in_41 : f32
        %11 = arith.select %9, %10, %cst_0 : f32
        %12 = arith.mulf %in, %in_39 : f32
        %13 = math.exp %11 : f32
        %14 = arith.mulf %12, %13 : f32
        %15 = arith.select %9, %14, %cst_0 : f32
        %16 = arith.addf %out, %15 : f32
        linalg.yield %16 : f32
      }
      %alloc_15 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_14 : memref<16x16xf32>) outs(%alloc_15 : memref<16x16xf32>) {
      ^bb0(%in: f32, %out: f32):
        %7 = linalg.index 0 : index
        %8 = arith.minui %7, %6 : index
        %9 = arith.addi %0, %8 : index
        %10 = arith.minui %9, %c31 : index
        %11 = memref.load %arg4[%c0, %10, %c0] : memref<1x32x1xbf16>
        %12 = arith.extf %11 : bf16 to f32
        %13 = arith.cmpi ult, %7, %3 : index
        %14 = arith.select %13, %12, %cst_0 : f32
        %15 = arith.mulf %in, %14 : f32
        linalg.yield %15 : f32
      }
      %alloc_16 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
      scf.forall (%arg14) in (16) {
        %subview_39 = memref.subview %alloc_16[0, %arg14] [16, 1] [1, 1] : memref<16x16xf32> to memref<16xf32, strided<[16], offset: ?>>
        scf.for %arg15 = %c0 to %c16 step %c1 {
          %7 = scf.for %arg16 = %c0 to %arg15 step %c1 iter_args(%arg17 = %cst_0) -> (f32) {
            %11 = memref.load %alloc_15[%arg15, %arg16] : memref<16x16xf32>
            %12 = memref.load %subview_39[%arg16] : memref<16xf32, strided<[16], offset: ?>>
            %13 = arith.mulf %11, %12 : f32
            %14 = arith.addf %arg17, %13 : f32
            scf.yield %14 : f32
          }
          %8 = arith.cmpi eq, %arg15, %arg14 : index
          %9 = arith.uitofp %8 : i1 to f32
          %10 = arith.subf %9, %7 : f32
          memref.store %10, %subview_39[%arg15] : memref<16xf32, strided<[16], offset: ?>>
        }
      }
      %alloc_17 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_10 : memref<16x32xf32>) outs(%alloc_17 : memref<16x32xf32>) {
      ^bb0(%in: f32, %out: f32):
        %7 = linalg.index 0 : index
        %8 = arith.minui %7, %6 : index
        %9 = arith.addi %0, %8 : index
        %10 = arith.minui %9, %c31 : index
        %11 = memref.load %arg4[%c0, %10, %c0] : memref<1x32x1xbf16>
        %12 = arith.extf %11 : bf16 to f32
        %13 = arith.cmpi ult, %7, %3 : index
        %14 = arith.select %13, %12, %cst_0 : f32
        %15 = math.exp %in : f32
        %16 = linalg.index 1 : index
        %17 = memref.load %arg1[%c0, %10, %c0, %16] : memref<1x32x1x32xbf16>
        %18 = arith.extf %17 : bf16 to f32
        %19 = arith.select %13, %18, %cst_0 : f32
        %20 = arith.mulf %19, %15 : f32
        %21 = arith.mulf %20, %14 : f32
        linalg.yield %21 : f32
      }
      %alloc_18 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_18 : memref<16x32xf32>) {
      ^bb0(%out: f32):
        %7 = linalg.index 0 : index
        %8 = arith.minui %7, %6 : index
        %9 = arith.addi %0, %8 : index
        %10 = arith.minui %9, %c31 : index
        %11 = memref.load %arg4[%c0, %10, %c0] : memref<1x32x1xbf16>
        %12 = arith.extf %11 : bf16 to f32
        %13 = arith.cmpi ult, %7, %3 : index
        %14 = arith.select %13, %12, %cst_0 : f32
        %15 = linalg.index 1 : index
        %16 = memref.load %arg2[%c0, %10, %c0, %15] : memref<1x32x1x32xbf16>
        %17 = arith.extf %16 : bf16 to f32
        %18 = arith.select %13, %17, %cst_0 : f32
        %19 = arith.mulf %18, %14 : f32
        linalg.yield %19 : f32
      }
      %alloc_19 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_19 : memref<16x32xf32>)
      linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_16, %alloc_17 : memref<16x16xf32>, memref<16x32xf32>) outs(%alloc_19 : memref<16x32xf32>) {
      ^bb0(%in: f32, %in_39: f32, %out: f32):
        %7 = arith.mulf %in, %in_39 : f32
        %8 = arith.addf %out, %7 : f32
        linalg.yield %8 : f32
      }
      %alloc_20 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.fill ins(%cst_0 : f32) outs(%alloc_20 : memref<16x32xf32>)
      linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_16, %alloc_18 : memref<16x16xf32>, memref<16x32xf32>) outs(%alloc_20 : memref<16x32xf32>) {
      ^bb0(%in: f32, %in_39: f32, %out: f32):
        %7 = arith.mulf %in, %in_39 : f32
        %8 = arith.addf %out, %7 : f32
        linalg.yield %8 : f32
      }
      %alloc_21 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_10 : memref<16x32xf32>) outs(%alloc_21 : memref<16x32xf32>) {
      ^bb0(%in: f32, %out: f32):
        %7 = math.exp %in : f32
        %8 = linalg.index 0 : index
        %9 = linalg.index 1 : index
        %10 = arith.minui %8, %6 : index
        %11 = arith.addi %0, %10 : index
        %12 = arith.minui %11, %c31 : index
        %13 = memref.load %arg0[%c0, %12, %c0, %9] : memref<1x32x1x32xbf16>
        %14 = arith.extf %13 : bf16 to f32
        %15 = arith.cmpi ult, %8, %3 : index
        %16 = arith.select %15, %14, %cst_0 : f32
        %17 = arith.mulf %16, %cst : f32
        %18 = arith.mulf %17, %7 : f32
        linalg.yield %18 : f32
      }
      %alloc_22 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map, #map5, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_10, %subview_11 : memref<16x32xf32>, memref<32xf32, strided<[1], offset: 480>>) outs(%alloc_22 : memref<16x32xf32>) {
      ^bb0(%in: f32, %in_39: f32, %out: f32):
        %7 = linalg.index 0 : index
        %8 = linalg.index 1 : index
        %9 = arith.minui %7, %6 : index
        %10 = arith.addi %0, %9 : index
        %11 = arith.minui %10, %c31 : index
        %12 = memref.load %arg1[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
        %13 = arith.extf %12 : bf16 to f32
        %14 = arith.cmpi ult, %7, %3 : index
        %15 = arith.select %14, %13, %cst_0 : f32
        %16 = arith.subf %in_39, %in : f32
        %17 = math.exp %16 : f32
        %18 = arith.mulf %15, %17 : f32
        linalg.yield %18 : f32
      }
      %alloc_23 = memref.alloc() {alignment = 64 : i64} : memref<1x32xf32>
      linalg.generic {indexing_maps = [#map5, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_11 : memref<32xf32, strided<[1], offset: 480>>) outs(%alloc_23 : memref<1x32xf32>) {
      ^bb0(%in: f32, %out: f32):
        linalg.yield %in : f32
      }
      %subview_24 = memref.subview %alloc_19[0, 0] [%3, 32] [1, 1] : memref<16x32xf32> to memref<?x32xf32, strided<[32, 1]>>
      %alloc_25 = memref.alloc(%3) {alignment = 64 : i64} : memref<?x32xbf16>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_24 : memref<?x32xf32, strided<[32, 1]>>) outs(%alloc_25 : memref<?x32xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %7 = arith.truncf %in : f32 to bf16
        linalg.yield %7 : bf16
      }
      %subview_26 = memref.subview %subview[0, 0] [%3, 32] [1, 1] : memref<?x32xbf16, strided<[32, 1], offset: ?>> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      memref.copy %alloc_25, %subview_26 : memref<?x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_27 = memref.subview %alloc_20[0, 0] [%3, 32] [1, 1] : memref<16x32xf32> to memref<?x32xf32, strided<[32, 1]>>
      %subview_28 = memref.subview %subview_1[0, 0] [%3, 32] [1, 1] : memref<?x32xf32, strided<[32, 1], offset: ?>> to memref<?x32xf32, strided<[32, 1], offset: ?>>
      memref.copy %subview_27, %subview_28 : memref<?x32xf32, strided<[32, 1]>> to memref<?x32xf32, strided<[32, 1], offset: ?>>
      %subview_29 = memref.subview %alloc_21[0, 0] [%3, 32] [1, 1] : memref<16x32xf32> to memref<?x32xf32, strided<[32, 1]>>
      %alloc_30 = memref.alloc(%3) {alignment = 64 : i64} : memref<?x32xbf16>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_29 : memref<?x32xf32, strided<[32, 1]>>) outs(%alloc_30 : memref<?x32xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %7 = arith.truncf %in : f32 to bf16
        linalg.yield %7 : bf16
      }
      %subview_31 = memref.subview %subview_2[0, 0] [%3, 32] [1, 1] : memref<?x32xbf16, strided<[32, 1], offset: ?>> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      memref.copy %alloc_30, %subview_31 : memref<?x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_32 = memref.subview %alloc_22[0, 0] [%3, 32] [1, 1] : memref<16x32xf32> to memref<?x32xf32, strided<[32, 1]>>
      %alloc_33 = memref.alloc(%3) {alignment = 64 : i64} : memref<?x32xbf16>
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_32 : memref<?x32xf32, strided<[32, 1]>>) outs(%alloc_33 : memref<?x32xbf16>) {
      ^bb0(%in: f32, %out: bf16):
        %7 = arith.truncf %in : f32 to bf16
        linalg.yield %7 : bf16
      }
      %subview_34 = memref.subview %subview_3[0, 0] [%3, 32] [1, 1] : memref<?x32xbf16, strided<[32, 1], offset: ?>> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      memref.copy %alloc_33, %subview_34 : memref<?x32xbf16> to memref<?x32xbf16, strided<[32, 1], offset: ?>>
      %subview_35 = memref.subview %alloc_13[0, 0] [%3, 16] [1, 1] : memref<16x16xf32> to memref<?x16xf32, strided<[16, 1]>>
      %subview_36 = memref.subview %subview_4[0, 0] [%3, 16] [1, 1] : memref<?x16xf32, strided<[16, 1], offset: ?>> to memref<?x16xf32, strided<[16, 1], offset: ?>>
      memref.copy %subview_35, %subview_36 : memref<?x16xf32, strided<[16, 1]>> to memref<?x16xf32, strided<[16, 1], offset: ?>>
      %subview_37 = memref.subview %alloc_23[0, 0] [%4, 32] [1, 1] : memref<1x32xf32> to memref<?x32xf32, strided<[32, 1]>>
      %subview_38 = memref.subview %subview_5[0, 0] [%4, 32] [1, 1] : memref<?x32xf32, strided<[32, 1], offset: ?>> to memref<?x32xf32, strided<[32, 1], offset: ?>>
      memref.copy %subview_37, %subview_38 : memref<?x32xf32, strided<[32, 1]>> to memref<?x32xf32, strided<[32, 1], offset: ?>>
    }
    return
  }
  func.func private @kda_gated_delta_kernel_state(%arg0: memref<1x32x1x32xbf16>, %arg1: memref<1x32x1x32xbf16>, %arg2: memref<1x32x1x32xbf16>, %arg3: memref<1x32x1x32xbf16>, %arg4: memref<1x32x1xbf16>, %arg5: memref<1x32x1x32xbf16>, %arg6: memref<1x32x1x32xbf16>, %arg7: memref<1x32x1x32xbf16>, %arg8: memref<1x32x1x16xf32>, %arg9: memref<1x32x1x32xf32>, %arg10: memref<1x32x1x32xf32>, %arg11: memref<1x32x1x32xbf16>) attributes {kda.abi = [{dims = [1, 32, 1, 32], name = "q"}, {dims = [1, 32, 1, 32], name = "k"}, {dims = [1, 32, 1, 32], name = "v"}, {dims = [1, 32, 1, 32], name = "gate"}, {dims = [1, 32, 1], name = "beta"}, {dims = [1, 32, 1, 32], name = "ws0"}, {dims = [1, 32, 1, 32], name = "ws2"}, {dims = [1, 32, 1, 32], name = "ws3"}, {dims = [1, 32, 1, 16], name = "ws4"}, {dims = [1, 32, 1, 32], name = "ws1"}, {dims = [1, 32, 1, 32], name = "ws5"}, {dims = [1, 32, 1, 32], name = "o"}], kda.kernel, kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 32, v_block = 16, v_major = false, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [1, 1, 2]>, kda.strategy = #kda.strategy<kernel = "state", kind = "lanes">} {
    %c31 = arith.constant 31 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.forall (%arg12, %arg13, %arg14) in (1, 1, 2) {
      %0 = arith.muli %arg14, %c16 : index
      %alloc = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
      linalg.fill ins(%cst : f32) outs(%alloc : memref<32x16xf32>)
      %subview = memref.subview %arg11[0, 0, 0, %0] [1, 32, 1, 16] [1, 1, 1, 1] : memref<1x32x1x32xbf16> to memref<32x16xbf16, strided<[32, 1], offset: ?>>
      %alloc_0 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
      linalg.fill ins(%cst : f32) outs(%alloc_0 : memref<32x16xf32>)
      %1 = scf.for %arg15 = %c0 to %c2 step %c1 iter_args(%arg16 = %alloc_0) -> (memref<32x16xf32>) {
        %2 = arith.muli %arg15, %c16 : index
        %3 = arith.subi %c32, %2 : index
        %4 = arith.minui %3, %c16 : index
        %5 = arith.maxui %4, %c1 : index
        %6 = arith.subi %5, %c1 : index
        %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_1 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %7 = linalg.index 0 : index
          %8 = linalg.index 1 : index
          %9 = arith.minui %7, %6 : index
          %10 = arith.addi %2, %9 : index
          %11 = arith.minui %10, %c31 : index
          %12 = memref.load %arg5[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
          %13 = arith.extf %12 : bf16 to f32
          %14 = arith.cmpi ult, %7, %4 : index
          %15 = arith.select %14, %13, %cst : f32
          linalg.yield %15 : f32
        }
        %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_2 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %7 = linalg.index 0 : index
          %8 = linalg.index 1 : index
          %9 = arith.minui %7, %6 : index
          %10 = arith.addi %2, %9 : index
          %11 = arith.minui %10, %c31 : index
          %12 = memref.load %arg6[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
          %13 = arith.extf %12 : bf16 to f32
          %14 = arith.cmpi ult, %7, %4 : index
          %15 = arith.select %14, %13, %cst : f32
          linalg.yield %15 : f32
        }
        %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_3 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %7 = linalg.index 0 : index
          %8 = linalg.index 1 : index
          %9 = arith.minui %7, %6 : index
          %10 = arith.addi %2, %9 : index
          %11 = arith.minui %10, %c31 : index
          %12 = memref.load %arg7[%c0, %11, %c0, %8] : memref<1x32x1x32xbf16>
          %13 = arith.extf %12 : bf16 to f32
          %14 = arith.cmpi ult, %7, %4 : index
          %15 = arith.select %14, %13, %cst : f32
          linalg.yield %15 : f32
        }
        %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_4 : memref<16x16xf32>) {
        ^bb0(%out: f32):
          %7 = linalg.index 0 : index
          %8 = linalg.index 1 : index
          %9 = arith.minui %7, %6 : index
          %10 = arith.addi %2, %9 : index
          %11 = arith.minui %10, %c31 : index
          %12 = memref.load %arg8[%c0, %11, %c0, %8] : memref<1x32x1x16xf32>
          %13 = arith.cmpi ult, %7, %4 : index
          %14 = arith.select %13, %12, %cst : f32
          linalg.yield %14 : f32
        }
        %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_5 : memref<16x16xf32>)
        %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_6 : memref<16x16xf32>)
        linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_1, %arg16 : memref<16x32xf32>, memref<32x16xf32>) outs(%alloc_6 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = arith.mulf %in, %in_16 : f32
          %8 = arith.addf %out, %7 : f32
          linalg.yield %8 : f32
        }
        %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_6 : memref<16x16xf32>) outs(%alloc_7 : memref<16x16xf32>) {
        ^bb0(%in: f32, %out: f32):
          %7 = linalg.index 0 : index
          %8 = linalg.index 1 : index
          %9 = arith.minui %7, %6 : index
          %10 = arith.addi %2, %9 : index
          %11 = arith.minui %10, %c31 : index
          %12 = arith.addi %0, %8 : index
          %13 = memref.load %arg9[%c0, %11, %c0, %12] : memref<1x32x1x32xf32>
          %14 = arith.cmpi ult, %7, %4 : index
          %15 = arith.select %14, %13, %cst : f32
          %16 = arith.subf %15, %in : f32
          linalg.yield %16 : f32
        }
        %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_8 : memref<16x16xf32>)
        linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_2, %arg16 : memref<16x32xf32>, memref<32x16xf32>) outs(%alloc_8 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = arith.mulf %in, %in_16 : f32
          %8 = arith.addf %out, %7 : f32
          linalg.yield %8 : f32
        }
        %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_9 : memref<16x16xf32>)
        linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_4, %alloc_7 : memref<16x16xf32>, memref<16x16xf32>) outs(%alloc_9 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = arith.mulf %in, %in_16 : f32
          %8 = arith.addf %out, %7 : f32
          linalg.yield %8 : f32
        }
        %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_8, %alloc_9 : memref<16x16xf32>, memref<16x16xf32>) outs(%alloc_10 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = arith.addf %in, %in_16 : f32
          linalg.yield %7 : f32
        }
        %alloc_11 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_11 : memref<32x16xf32>)
        linalg.generic {indexing_maps = [#map6, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_3, %alloc_7 : memref<16x32xf32>, memref<16x16xf32>) outs(%alloc_11 : memref<32x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = arith.mulf %in, %in_16 : f32
          %8 = arith.addf %out, %7 : f32
          linalg.yield %8 : f32
        }
        %alloc_12 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg16, %alloc_11 : memref<32x16xf32>, memref<32x16xf32>) outs(%alloc_12 : memref<32x16xf32>) {
        ^bb0(%in: f32, %in_16: f32, %out: f32):
          %7 = linalg.index 0 : index
          %8 = arith.minui %7, %c31 : index
          %9 = arith.minui %8, %c31 : index
          %10 = memref.load %arg10[%c0, %2, %c0, %9] : memref<1x32x1x32xf32>
          %11 = arith.cmpi ult, %7, %c32 : index
          %12 = arith.select %11, %10, %cst : f32
          %13 = math.exp %12 : f32
          %14 = arith.mulf %in, %13 : f32
          %15 = arith.addf %14, %in_16 : f32
          linalg.yield %15 : f32
        }
        %subview_13 = memref.subview %alloc_10[0, 0] [%4, 16] [1, 1] : memref<16x16xf32> to memref<?x16xf32, strided<[16, 1]>>
        %alloc_14 = memref.alloc(%4) {alignment = 64 : i64} : memref<?x16xbf16>
        linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_13 : memref<?x16xf32, strided<[16, 1]>>) outs(%alloc_14 : memref<?x16xbf16>) {
        ^bb0(%in: f32, %out: bf16):
          %7 = arith.truncf %in : f32 to bf16
          linalg.yield %7 : bf16
        }
        %subview_15 = memref.subview %subview[%2, 0] [%4, 16] [1, 1] : memref<32x16xbf16, strided<[32, 1], offset: ?>> to memref<?x16xbf16, strided<[32, 1], offset: ?>>
        memref.copy %alloc_14, %subview_15 : memref<?x16xbf16> to memref<?x16xbf16, strided<[32, 1], offset: ?>>
        scf.yield %alloc_12 : memref<32x16xf32>
      }
    }
    return
  }
}



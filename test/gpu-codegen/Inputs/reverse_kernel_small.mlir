// The reverse scan of a small gradient (bf16, K = V = 32, V blocks of 16, Kimi's
// gate, varlen, V-major states) as the GPU pipeline hands it to the register
// passes: the bufferized tile program with its description (kda.reverse_pass)
// and kda-gpu-select-strategy's kda.strategy.
// Regenerate: test/gpu-codegen/Inputs/kimi_grad.mlir with 128 -> 32 and v_block = 16,
//   kda-opt --kda-lower-to-nvvm="chip=sm_90a format=none threads=256"
//   --mlir-print-ir-before=kda-gpu-decode-registers --mlir-print-ir-module-scope
//   --mlir-disable-threading, this function kept.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map5 = affine_map<(d0, d1) -> (d1)>
#map6 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map7 = affine_map<(d0, d1, d2) -> (d1, d0)>
#map8 = affine_map<(d0, d1) -> (d1, d0)>
#map9 = affine_map<(d0) -> (d0)>
module {
  func.func private @kda_gated_delta_grad_kernel_reverse(%arg0: memref<1x?x?x32xbf16>, %arg1: memref<1x?x?x32xbf16>, %arg2: memref<1x?x?x32xbf16>, %arg3: memref<1x?x?x32xbf16>, %arg4: memref<1x?x?x32xbf16>, %arg5: memref<1x?x?xbf16>, %arg6: memref<?x?x32x32xf32>, %arg7: memref<?xi32>, %arg8: memref<?xf32>, %arg9: memref<?x32xf32>, %arg10: memref<?x?x32x32xf32>, %arg11: memref<?x?x?x32x32xf32>, %arg12: memref<1x?x?x32xf32>, %arg13: memref<1x?x?x32xf32>, %arg14: memref<1x?x?x32xf32>, %arg15: memref<1x?x?x16xf32>, %arg16: memref<1x?x?x32xf32>, %arg17: memref<?x?x?x32x32xf32>, %arg18: memref<1x?x?x32xf32>, %arg19: memref<?x?x32x32xf32>) attributes {kda.abi = [{dims = [1, "T", "H", 32], name = "q"}, {dims = [1, "T", "H", 32], name = "k"}, {dims = [1, "T", "HV", 32], name = "v"}, {dims = [1, "T", "HV", 32], name = "d_o"}, {dims = [1, "T", "HV", 32], name = "gate"}, {dims = [1, "T", "HV"], name = "beta"}, {dims = ["N", "HV", 32, 32], name = "initial_state"}, {dims = ["N+1"], name = "cu_seqlens"}, {dims = ["HV"], name = "A_log"}, {dims = ["HV", 32], name = "dt_bias"}, {dims = ["N", "HV", 32, 32], name = "d_final_state"}, {dims = ["N", "NT", "HV", 32, 32], name = "chunk_states"}, {dims = [1, "T", "HV", 32], name = "ws0"}, {dims = [1, "T", "HV", 32], name = "ws2"}, {dims = [1, "T", "HV", 32], name = "ws3"}, {dims = [1, "T", "HV", 16], name = "ws4"}, {dims = [1, "T", "HV", 32], name = "ws5"}, {dims = ["N", "NT", "HV", 32, 32], name = "ws6"}, {dims = [1, "T", "HV", 32], name = "ws7"}, {dims = ["N", "HV", 32, 32], name = "d_initial_state"}], kda.kernel, kda.reverse_pass = #kda.state_pass<chunk = 16, tile_chunk = 16, key_dim = 32, v_block = 16, v_major = true, boundary = false, boundary_pool = false, boundary_interval = 0, workspaces = ["w", "u", "q", "k", "p", "g"], grid = [-1, -1, 2], value_dim = 32>, kda.strategy = #kda.strategy<kernel = "reverse", kind = "lanes", instruction = "mma_sync", program = "derived", stages = 2>, kda.tile = #kda.tile<chunk = 16, v_block = 16>} {
    %c31 = arith.constant 31 : index
    %c15 = arith.constant 15 : index
    %c32 = arith.constant 32 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %dim = memref.dim %arg0, %c1 : memref<1x?x?x32xbf16>
    %dim_0 = memref.dim %arg11, %c1 : memref<?x?x?x32x32xf32>
    %dim_1 = memref.dim %arg17, %c2 : memref<?x?x?x32x32xf32>
    %dim_2 = memref.dim %arg19, %c0 : memref<?x?x32x32xf32>
    scf.forall (%arg20, %arg21, %arg22) in (%dim_2, %dim_1, 2) {
      %0 = arith.muli %arg22, %c16 : index
      %1 = memref.load %arg7[%arg20] : memref<?xi32>
      %2 = arith.index_cast %1 : i32 to index
      %3 = arith.addi %arg20, %c1 : index
      %4 = memref.load %arg7[%3] : memref<?xi32>
      %5 = arith.index_cast %4 : i32 to index
      %6 = arith.subi %5, %2 : index
      %7 = arith.ceildivui %6, %c16 : index
      %alloc = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc : memref<32x16xf32>) {
      ^bb0(%out: f32):
        %9 = linalg.index 0 : index
        %10 = linalg.index 1 : index
        %11 = arith.minui %10, %c15 : index
        %12 = arith.addi %0, %11 : index
        %13 = arith.minui %12, %c31 : index
        %14 = memref.load %arg10[%arg20, %arg21, %13, %9] : memref<?x?x32x32xf32>
        %15 = arith.cmpi ult, %10, %c16 : index
        %16 = arith.select %15, %14, %cst : f32
        linalg.yield %16 : f32
      }
      %subview = memref.subview %arg17[%arg20, 0, %arg21, 0, %0] [1, %dim_0, 1, 32, 16] [1, 1, 1, 1, 1] : memref<?x?x?x32x32xf32> to memref<?x32x16xf32, strided<[?, 32, 1], offset: ?>>
      %subview_3 = memref.subview %arg18[0, %2, %arg21, %0] [1, %6, 1, 16] [1, 1, 1, 1] : memref<1x?x?x32xf32> to memref<?x16xf32, strided<[?, 1], offset: ?>>
      %8 = scf.for %arg23 = %c0 to %7 step %c1 iter_args(%arg24 = %alloc) -> (memref<32x16xf32>) {
        %9 = arith.subi %7, %c1 : index
        %10 = arith.subi %9, %arg23 : index
        %11 = arith.muli %10, %c16 : index
        %12 = arith.addi %2, %11 : index
        %13 = arith.subi %6, %11 : index
        %14 = arith.minui %13, %c16 : index
        %subview_6 = memref.subview %subview[%10, 0, 0] [1, 32, 16] [1, 1, 1] : memref<?x32x16xf32, strided<[?, 32, 1], offset: ?>> to memref<32x16xf32, strided<[32, 1], offset: ?>>
        memref.copy %arg24, %subview_6 : memref<32x16xf32> to memref<32x16xf32, strided<[32, 1], offset: ?>>
        %15 = arith.maxui %14, %c1 : index
        %16 = arith.subi %15, %c1 : index
        %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_7 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %17 = linalg.index 0 : index
          %18 = linalg.index 1 : index
          %19 = arith.minui %17, %16 : index
          %20 = arith.addi %12, %19 : index
          %21 = arith.maxui %dim, %c1 : index
          %22 = arith.subi %21, %c1 : index
          %23 = arith.minui %20, %22 : index
          %24 = memref.load %arg12[%c0, %23, %arg21, %18] : memref<1x?x?x32xf32>
          %25 = arith.cmpi ult, %17, %14 : index
          %26 = arith.select %25, %24, %cst : f32
          linalg.yield %26 : f32
        }
        %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_8 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %17 = linalg.index 0 : index
          %18 = linalg.index 1 : index
          %19 = arith.minui %17, %16 : index
          %20 = arith.addi %12, %19 : index
          %21 = arith.maxui %dim, %c1 : index
          %22 = arith.subi %21, %c1 : index
          %23 = arith.minui %20, %22 : index
          %24 = memref.load %arg13[%c0, %23, %arg21, %18] : memref<1x?x?x32xf32>
          %25 = arith.cmpi ult, %17, %14 : index
          %26 = arith.select %25, %24, %cst : f32
          linalg.yield %26 : f32
        }
        %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_9 : memref<16x32xf32>) {
        ^bb0(%out: f32):
          %17 = linalg.index 0 : index
          %18 = linalg.index 1 : index
          %19 = arith.minui %17, %16 : index
          %20 = arith.addi %12, %19 : index
          %21 = arith.maxui %dim, %c1 : index
          %22 = arith.subi %21, %c1 : index
          %23 = arith.minui %20, %22 : index
          %24 = memref.load %arg14[%c0, %23, %arg21, %18] : memref<1x?x?x32xf32>
          %25 = arith.cmpi ult, %17, %14 : index
          %26 = arith.select %25, %24, %cst : f32
          linalg.yield %26 : f32
        }
        %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_10 : memref<16x16xf32>) {
        ^bb0(%out: f32):
          %17 = linalg.index 0 : index
          %18 = linalg.index 1 : index
          %19 = arith.minui %17, %16 : index
          %20 = arith.addi %12, %19 : index
          %21 = arith.maxui %dim, %c1 : index
          %22 = arith.subi %21, %c1 : index
          %23 = arith.minui %20, %22 : index
          %24 = memref.load %arg15[%c0, %23, %arg21, %18] : memref<1x?x?x16xf32>
          %25 = arith.cmpi ult, %17, %14 : index
          %26 = arith.select %25, %24, %cst : f32
          linalg.yield %26 : f32
        }
        %dim_11 = memref.dim %arg3, %c1 : memref<1x?x?x32xbf16>
        %alloc_12 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_12 : memref<16x16xf32>)
        %alloc_13 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_13 : memref<16x16xf32>)
        linalg.generic {indexing_maps = [#map2, #map3, #map4], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_9, %arg24 : memref<16x32xf32>, memref<32x16xf32>) outs(%alloc_13 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.mulf %in, %in_24 : f32
          %18 = arith.addf %out, %17 : f32
          linalg.yield %18 : f32
        }
        %alloc_14 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_14 : memref<16x16xf32>) {
        ^bb0(%out: f32):
          %17 = linalg.index 0 : index
          %18 = linalg.index 1 : index
          %19 = arith.minui %17, %16 : index
          %20 = arith.addi %12, %19 : index
          %21 = arith.maxui %dim_11, %c1 : index
          %22 = arith.subi %21, %c1 : index
          %23 = arith.minui %20, %22 : index
          %24 = arith.addi %0, %18 : index
          %25 = memref.load %arg3[%c0, %23, %arg21, %24] : memref<1x?x?x32xbf16>
          %26 = arith.extf %25 : bf16 to f32
          %27 = arith.cmpi ult, %17, %14 : index
          %28 = arith.select %27, %26, %cst : f32
          linalg.yield %28 : f32
        }
        %alloc_15 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_15 : memref<16x16xf32>)
        linalg.generic {indexing_maps = [#map7, #map3, #map4], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_10, %alloc_14 : memref<16x16xf32>, memref<16x16xf32>) outs(%alloc_15 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.mulf %in, %in_24 : f32
          %18 = arith.addf %out, %17 : f32
          linalg.yield %18 : f32
        }
        %alloc_16 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_13, %alloc_15 : memref<16x16xf32>, memref<16x16xf32>) outs(%alloc_16 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.addf %in, %in_24 : f32
          linalg.yield %17 : f32
        }
        %alloc_17 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_17 : memref<32x16xf32>)
        %alloc_18 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_18 : memref<32x16xf32>)
        linalg.generic {indexing_maps = [#map7, #map3, #map4], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_8, %alloc_14 : memref<16x32xf32>, memref<16x16xf32>) outs(%alloc_18 : memref<32x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.mulf %in, %in_24 : f32
          %18 = arith.addf %out, %17 : f32
          linalg.yield %18 : f32
        }
        %alloc_19 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
        linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_13, %alloc_15 : memref<16x16xf32>, memref<16x16xf32>) outs(%alloc_19 : memref<16x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.addf %in, %in_24 : f32
          %18 = arith.negf %17 : f32
          linalg.yield %18 : f32
        }
        %alloc_20 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.fill ins(%cst : f32) outs(%alloc_20 : memref<32x16xf32>)
        linalg.generic {indexing_maps = [#map7, #map3, #map4], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_7, %alloc_19 : memref<16x32xf32>, memref<16x16xf32>) outs(%alloc_20 : memref<32x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %out: f32):
          %17 = arith.mulf %in, %in_24 : f32
          %18 = arith.addf %out, %17 : f32
          linalg.yield %18 : f32
        }
        %alloc_21 = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
        linalg.generic {indexing_maps = [#map, #map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg24, %alloc_18, %alloc_20 : memref<32x16xf32>, memref<32x16xf32>, memref<32x16xf32>) outs(%alloc_21 : memref<32x16xf32>) {
        ^bb0(%in: f32, %in_24: f32, %in_25: f32, %out: f32):
          %17 = linalg.index 0 : index
          %18 = arith.minui %17, %c31 : index
          %19 = arith.minui %18, %c31 : index
          %20 = memref.load %arg16[%c0, %12, %arg21, %19] : memref<1x?x?x32xf32>
          %21 = arith.cmpi ult, %17, %c32 : index
          %22 = arith.select %21, %20, %cst : f32
          %23 = arith.mulf %in, %22 : f32
          %24 = arith.addf %23, %in_24 : f32
          %25 = arith.addf %24, %in_25 : f32
          linalg.yield %25 : f32
        }
        %subview_22 = memref.subview %alloc_16[0, 0] [%14, 16] [1, 1] : memref<16x16xf32> to memref<?x16xf32, strided<[16, 1]>>
        %subview_23 = memref.subview %subview_3[%11, 0] [%14, 16] [1, 1] : memref<?x16xf32, strided<[?, 1], offset: ?>> to memref<?x16xf32, strided<[?, 1], offset: ?>>
        memref.copy %subview_22, %subview_23 : memref<?x16xf32, strided<[16, 1]>> to memref<?x16xf32, strided<[?, 1], offset: ?>>
        scf.yield %alloc_21 : memref<32x16xf32>
      }
      %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
      linalg.generic {indexing_maps = [#map8, #map], iterator_types = ["parallel", "parallel"]} ins(%8 : memref<32x16xf32>) outs(%alloc_4 : memref<16x32xf32>) {
      ^bb0(%in: f32, %out: f32):
        linalg.yield %in : f32
      }
      %subview_5 = memref.subview %arg19[%arg20, %arg21, %0, 0] [1, 1, 16, 32] [1, 1, 1, 1] : memref<?x?x32x32xf32> to memref<16x32xf32, strided<[32, 1], offset: ?>>
      memref.copy %alloc_4, %subview_5 : memref<16x32xf32> to memref<16x32xf32, strided<[32, 1], offset: ?>>
    }
    return
  }
}

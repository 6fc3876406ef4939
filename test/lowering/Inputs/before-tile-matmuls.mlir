#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map4 = affine_map<(d0, d1) -> (d0)>
#map5 = affine_map<(d0) -> (d0)>
#map6 = affine_map<(d0, d1, d2) -> (d1, d2)>
module {
  func.func @win(%arg0: memref<1x?x1x64xbf16>, %arg1: memref<1x?x1x64xbf16>, %arg2: memref<1x?x1x64xbf16>) -> memref<1x?x1x64xbf16> {
    %c1 = arith.constant 1 : index
    %dim = memref.dim %arg0, %c1 : memref<1x?x1x64xbf16>
    %alloc = memref.alloc(%dim) {alignment = 64 : i64} : memref<1x?x1x64xbf16>
    call @kda_window_attention_kernel(%arg0, %arg1, %arg2, %alloc) : (memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>) -> ()
    return %alloc : memref<1x?x1x64xbf16>
  }
  func.func private @kda_window_attention_kernel(%arg0: memref<1x?x1x64xbf16>, %arg1: memref<1x?x1x64xbf16>, %arg2: memref<1x?x1x64xbf16>, %arg3: memref<1x?x1x64xbf16>) attributes {kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "window attention has no lane kernel yet (FlashAttention-style register tiles are the windows issue's)">} {
    %c64 = arith.constant 64 : index
    %cst = arith.constant 0xFF800000 : f32
    %cst_0 = arith.constant -1.000000e+30 : f32
    %c63 = arith.constant 63 : index
    %cst_1 = arith.constant 1.250000e-01 : f32
    %cst_2 = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %dim = memref.dim %arg0, %c1 : memref<1x?x1x64xbf16>
    scf.forall (%arg4, %arg5) in (1, 1) {
      %subview = memref.subview %arg3[0, 0, 0, 0] [1, %dim, 1, 64] [1, 1, 1, 1] : memref<1x?x1x64xbf16> to memref<?x64xbf16, strided<[64, 1]>>
      %0 = arith.ceildivui %dim, %c16 : index
      scf.for %arg6 = %c0 to %0 step %c1 {
        %1 = arith.muli %arg6, %c16 : index
        %2 = arith.subi %dim, %1 : index
        %3 = arith.minui %2, %c16 : index
        %4 = arith.maxui %3, %c1 : index
        %5 = arith.subi %4, %c1 : index
        %alloc = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc : memref<16x64xf32>) {
        ^bb0(%out: f32):
          %12 = linalg.index 0 : index
          %13 = linalg.index 1 : index
          %14 = arith.minui %12, %5 : index
          %15 = arith.addi %1, %14 : index
          %16 = arith.maxui %dim, %c1 : index
          %17 = arith.subi %16, %c1 : index
          %18 = arith.minui %15, %17 : index
          %19 = memref.load %arg0[%c0, %18, %c0, %13] : memref<1x?x1x64xbf16>
          %20 = arith.extf %19 : bf16 to f32
          %21 = arith.cmpi ult, %12, %3 : index
          %22 = arith.select %21, %20, %cst_2 : f32
          %23 = arith.mulf %22, %cst_1 : f32
          linalg.yield %23 : f32
        }
        %6 = arith.cmpi ugt, %1, %c63 : index
        %7 = arith.subi %1, %c63 : index
        %8 = arith.select %6, %7, %c0 : index
        %9 = arith.divui %8, %c16 : index
        %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        linalg.fill ins(%cst_0 : f32) outs(%alloc_3 : memref<16xf32>)
        %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        linalg.fill ins(%cst_2 : f32) outs(%alloc_4 : memref<16xf32>)
        %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        linalg.fill ins(%cst_2 : f32) outs(%alloc_5 : memref<16x64xf32>)
        %10 = arith.addi %arg6, %c1 : index
        %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        linalg.fill ins(%cst_2 : f32) outs(%alloc_6 : memref<16xf32>)
        %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        linalg.fill ins(%cst_2 : f32) outs(%alloc_7 : memref<16x64xf32>)
        %11:3 = scf.for %arg7 = %9 to %10 step %c1 iter_args(%arg8 = %alloc_3, %arg9 = %alloc_6, %arg10 = %alloc_7) -> (memref<16xf32>, memref<16xf32>, memref<16x64xf32>) {
          %12 = arith.muli %arg7, %c16 : index
          %13 = arith.subi %dim, %12 : index
          %14 = arith.minui %13, %c16 : index
          %15 = arith.maxui %14, %c1 : index
          %16 = arith.subi %15, %c1 : index
          %dim_12 = memref.dim %arg1, %c1 : memref<1x?x1x64xbf16>
          %alloc_13 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_13 : memref<16x64xf32>) {
          ^bb0(%out: f32):
            %17 = linalg.index 0 : index
            %18 = linalg.index 1 : index
            %19 = arith.minui %17, %16 : index
            %20 = arith.addi %12, %19 : index
            %21 = arith.maxui %dim_12, %c1 : index
            %22 = arith.subi %21, %c1 : index
            %23 = arith.minui %20, %22 : index
            %24 = memref.load %arg1[%c0, %23, %c0, %18] : memref<1x?x1x64xbf16>
            %25 = arith.extf %24 : bf16 to f32
            %26 = arith.cmpi ult, %17, %14 : index
            %27 = arith.select %26, %25, %cst_2 : f32
            linalg.yield %27 : f32
          }
          %dim_14 = memref.dim %arg2, %c1 : memref<1x?x1x64xbf16>
          %alloc_15 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%alloc_15 : memref<16x64xf32>) {
          ^bb0(%out: f32):
            %17 = linalg.index 0 : index
            %18 = linalg.index 1 : index
            %19 = arith.minui %17, %16 : index
            %20 = arith.addi %12, %19 : index
            %21 = arith.maxui %dim_14, %c1 : index
            %22 = arith.subi %21, %c1 : index
            %23 = arith.minui %20, %22 : index
            %24 = memref.load %arg2[%c0, %23, %c0, %18] : memref<1x?x1x64xbf16>
            %25 = arith.extf %24 : bf16 to f32
            %26 = arith.cmpi ult, %17, %14 : index
            %27 = arith.select %26, %25, %cst_2 : f32
            linalg.yield %27 : f32
          }
          %alloc_16 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          linalg.fill ins(%cst_2 : f32) outs(%alloc_16 : memref<16x16xf32>)
          linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc, %alloc_13 : memref<16x64xf32>, memref<16x64xf32>) outs(%alloc_16 : memref<16x16xf32>) {
          ^bb0(%in: f32, %in_25: f32, %out: f32):
            %17 = arith.mulf %in, %in_25 : f32
            %18 = arith.addf %out, %17 : f32
            linalg.yield %18 : f32
          }
          %alloc_17 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_16 : memref<16x16xf32>) outs(%alloc_17 : memref<16x16xf32>) {
          ^bb0(%in: f32, %out: f32):
            %17 = linalg.index 0 : index
            %18 = linalg.index 1 : index
            %19 = arith.addi %1, %17 : index
            %20 = arith.addi %12, %18 : index
            %21 = arith.cmpi ule, %20, %19 : index
            %22 = arith.cmpi ult, %20, %dim : index
            %23 = arith.subi %19, %20 : index
            %24 = arith.cmpi slt, %23, %c64 : index
            %25 = arith.andi %21, %22 : i1
            %26 = arith.andi %25, %24 : i1
            %27 = arith.select %26, %in, %cst : f32
            linalg.yield %27 : f32
          }
          %alloc_18 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          linalg.fill ins(%cst : f32) outs(%alloc_18 : memref<16xf32>)
          linalg.generic {indexing_maps = [#map, #map4], iterator_types = ["parallel", "reduction"]} ins(%alloc_17 : memref<16x16xf32>) outs(%alloc_18 : memref<16xf32>) {
          ^bb0(%in: f32, %out: f32):
            %17 = arith.maximumf %out, %in : f32
            linalg.yield %17 : f32
          }
          %alloc_19 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          linalg.generic {indexing_maps = [#map5, #map5, #map5], iterator_types = ["parallel"]} ins(%arg8, %alloc_18 : memref<16xf32>, memref<16xf32>) outs(%alloc_19 : memref<16xf32>) {
          ^bb0(%in: f32, %in_25: f32, %out: f32):
            %17 = arith.maximumf %in, %in_25 : f32
            linalg.yield %17 : f32
          }
          %alloc_20 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          linalg.generic {indexing_maps = [#map, #map4, #map4, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_16, %arg8, %alloc_18 : memref<16x16xf32>, memref<16xf32>, memref<16xf32>) outs(%alloc_20 : memref<16x16xf32>) {
          ^bb0(%in: f32, %in_25: f32, %in_26: f32, %out: f32):
            %17 = arith.maximumf %in_25, %in_26 : f32
            %18 = linalg.index 0 : index
            %19 = linalg.index 1 : index
            %20 = arith.addi %1, %18 : index
            %21 = arith.addi %12, %19 : index
            %22 = arith.cmpi ule, %21, %20 : index
            %23 = arith.cmpi ult, %21, %dim : index
            %24 = arith.subi %20, %21 : index
            %25 = arith.cmpi slt, %24, %c64 : index
            %26 = arith.andi %22, %23 : i1
            %27 = arith.andi %26, %25 : i1
            %28 = arith.select %27, %in, %cst : f32
            %29 = arith.subf %28, %17 : f32
            %30 = math.exp %29 : f32
            linalg.yield %30 : f32
          }
          %alloc_21 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          linalg.fill ins(%cst_2 : f32) outs(%alloc_21 : memref<16xf32>)
          linalg.generic {indexing_maps = [#map, #map4], iterator_types = ["parallel", "reduction"]} ins(%alloc_20 : memref<16x16xf32>) outs(%alloc_21 : memref<16xf32>) {
          ^bb0(%in: f32, %out: f32):
            %17 = arith.addf %out, %in : f32
            linalg.yield %17 : f32
          }
          %alloc_22 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          linalg.generic {indexing_maps = [#map5, #map5, #map5, #map5, #map5], iterator_types = ["parallel"]} ins(%arg9, %arg8, %alloc_18, %alloc_21 : memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>) outs(%alloc_22 : memref<16xf32>) {
          ^bb0(%in: f32, %in_25: f32, %in_26: f32, %in_27: f32, %out: f32):
            %17 = arith.maximumf %in_25, %in_26 : f32
            %18 = arith.subf %in_25, %17 : f32
            %19 = math.exp %18 : f32
            %20 = arith.mulf %in, %19 : f32
            %21 = arith.addf %20, %in_27 : f32
            linalg.yield %21 : f32
          }
          %alloc_23 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          linalg.fill ins(%cst_2 : f32) outs(%alloc_23 : memref<16x64xf32>)
          linalg.generic {indexing_maps = [#map1, #map6, #map3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%alloc_20, %alloc_15 : memref<16x16xf32>, memref<16x64xf32>) outs(%alloc_23 : memref<16x64xf32>) {
          ^bb0(%in: f32, %in_25: f32, %out: f32):
            %17 = arith.mulf %in, %in_25 : f32
            %18 = arith.addf %out, %17 : f32
            linalg.yield %18 : f32
          }
          %alloc_24 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          linalg.generic {indexing_maps = [#map, #map4, #map4, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg10, %arg8, %alloc_18, %alloc_23 : memref<16x64xf32>, memref<16xf32>, memref<16xf32>, memref<16x64xf32>) outs(%alloc_24 : memref<16x64xf32>) {
          ^bb0(%in: f32, %in_25: f32, %in_26: f32, %in_27: f32, %out: f32):
            %17 = arith.maximumf %in_25, %in_26 : f32
            %18 = arith.subf %in_25, %17 : f32
            %19 = math.exp %18 : f32
            %20 = arith.mulf %in, %19 : f32
            %21 = arith.addf %20, %in_27 : f32
            linalg.yield %21 : f32
          }
          scf.yield %alloc_19, %alloc_22, %alloc_24 : memref<16xf32>, memref<16xf32>, memref<16x64xf32>
        }
        %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel"]} ins(%11#2, %11#1 : memref<16x64xf32>, memref<16xf32>) outs(%alloc_8 : memref<16x64xf32>) {
        ^bb0(%in: f32, %in_12: f32, %out: f32):
          %12 = arith.divf %in, %in_12 : f32
          linalg.yield %12 : f32
        }
        %subview_9 = memref.subview %alloc_8[0, 0] [%3, 64] [1, 1] : memref<16x64xf32> to memref<?x64xf32, strided<[64, 1]>>
        %alloc_10 = memref.alloc(%3) {alignment = 64 : i64} : memref<?x64xbf16>
        linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%subview_9 : memref<?x64xf32, strided<[64, 1]>>) outs(%alloc_10 : memref<?x64xbf16>) {
        ^bb0(%in: f32, %out: bf16):
          %12 = arith.truncf %in : f32 to bf16
          linalg.yield %12 : bf16
        }
        %subview_11 = memref.subview %subview[%1, 0] [%3, 64] [1, 1] : memref<?x64xbf16, strided<[64, 1]>> to memref<?x64xbf16, strided<[64, 1], offset: ?>>
        memref.copy %alloc_10, %subview_11 : memref<?x64xbf16> to memref<?x64xbf16, strided<[64, 1], offset: ?>>
      }
    }
    return
  }
}



module {
  func.func @win(%arg0: memref<1x?x1x64xbf16>, %arg1: memref<1x?x1x64xbf16>, %arg2: memref<1x?x1x64xbf16>) -> memref<1x?x1x64xbf16> {
    %c1 = arith.constant 1 : index
    %dim = memref.dim %arg0, %c1 : memref<1x?x1x64xbf16>
    %alloc = memref.alloc(%dim) {alignment = 64 : i64} : memref<1x?x1x64xbf16>
    call @kda_window_attention_kernel(%arg0, %arg1, %arg2, %alloc) : (memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>, memref<1x?x1x64xbf16>) -> ()
    return %alloc : memref<1x?x1x64xbf16>
  }
  func.func private @kda_window_attention_kernel(%arg0: memref<1x?x1x64xbf16>, %arg1: memref<1x?x1x64xbf16>, %arg2: memref<1x?x1x64xbf16>, %arg3: memref<1x?x1x64xbf16>) attributes {kda.abi = [{dims = [1, "T", 1, 64], name = "q"}, {dims = [1, "T", 1, 64], name = "k"}, {dims = [1, "T", 1, 64], name = "v"}, {dims = [1, "T", 1, 64], name = "o"}], kda.kernel, kda.strategy = #kda.strategy<kernel = "window", kind = "tiles", reason = "window attention has no lane kernel yet (FlashAttention-style register tiles are the windows issue's)">} {
    %cst = arith.constant dense<0.000000e+00> : vector<2x2xf32>
    %c8 = arith.constant 8 : index
    %c4 = arith.constant 4 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant -1.000000e+30 : f32
    %c63 = arith.constant 63 : index
    %cst_2 = arith.constant 1.250000e-01 : f32
    %cst_3 = arith.constant 0.000000e+00 : f32
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
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
          %12 = arith.minui %arg7, %5 : index
          %13 = arith.addi %1, %12 : index
          %14 = arith.maxui %dim, %c1 : index
          %15 = arith.subi %14, %c1 : index
          %16 = arith.minui %13, %15 : index
          %17 = memref.load %arg0[%c0, %16, %c0, %arg8] : memref<1x?x1x64xbf16>
          %18 = arith.extf %17 : bf16 to f32
          %19 = arith.cmpi ult, %arg7, %3 : index
          %20 = arith.select %19, %18, %cst_3 : f32
          %21 = arith.mulf %20, %cst_2 : f32
          memref.store %21, %alloc[%arg7, %arg8] : memref<16x64xf32>
          scf.reduce 
        }
        %6 = arith.cmpi ugt, %1, %c63 : index
        %7 = arith.subi %1, %c63 : index
        %8 = arith.select %6, %7, %c0 : index
        %9 = arith.divui %8, %c16 : index
        %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        scf.parallel (%arg7) = (%c0) to (%c16) step (%c1) {
          memref.store %cst_1, %alloc_4[%arg7] : memref<16xf32>
          scf.reduce 
        }
        %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        scf.parallel (%arg7) = (%c0) to (%c16) step (%c1) {
          memref.store %cst_3, %alloc_5[%arg7] : memref<16xf32>
          scf.reduce 
        }
        %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
          memref.store %cst_3, %alloc_6[%arg7, %arg8] : memref<16x64xf32>
          scf.reduce 
        }
        %10 = arith.addi %arg6, %c1 : index
        %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
        scf.parallel (%arg7) = (%c0) to (%c16) step (%c1) {
          memref.store %cst_3, %alloc_7[%arg7] : memref<16xf32>
          scf.reduce 
        }
        %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
          memref.store %cst_3, %alloc_8[%arg7, %arg8] : memref<16x64xf32>
          scf.reduce 
        }
        %11:3 = scf.for %arg7 = %9 to %10 step %c1 iter_args(%arg8 = %alloc_4, %arg9 = %alloc_7, %arg10 = %alloc_8) -> (memref<16xf32>, memref<16xf32>, memref<16x64xf32>) {
          %12 = arith.muli %arg7, %c16 : index
          %13 = arith.subi %dim, %12 : index
          %14 = arith.minui %13, %c16 : index
          %15 = arith.maxui %14, %c1 : index
          %16 = arith.subi %15, %c1 : index
          %dim_13 = memref.dim %arg1, %c1 : memref<1x?x1x64xbf16>
          %alloc_14 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          scf.parallel (%arg11, %arg12) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
            %21 = arith.minui %arg11, %16 : index
            %22 = arith.addi %12, %21 : index
            %23 = arith.maxui %dim_13, %c1 : index
            %24 = arith.subi %23, %c1 : index
            %25 = arith.minui %22, %24 : index
            %26 = memref.load %arg1[%c0, %25, %c0, %arg12] : memref<1x?x1x64xbf16>
            %27 = arith.extf %26 : bf16 to f32
            %28 = arith.cmpi ult, %arg11, %14 : index
            %29 = arith.select %28, %27, %cst_3 : f32
            memref.store %29, %alloc_14[%arg11, %arg12] : memref<16x64xf32>
            scf.reduce 
          }
          %dim_15 = memref.dim %arg2, %c1 : memref<1x?x1x64xbf16>
          %alloc_16 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          scf.parallel (%arg11, %arg12) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
            %21 = arith.minui %arg11, %16 : index
            %22 = arith.addi %12, %21 : index
            %23 = arith.maxui %dim_15, %c1 : index
            %24 = arith.subi %23, %c1 : index
            %25 = arith.minui %22, %24 : index
            %26 = memref.load %arg2[%c0, %25, %c0, %arg12] : memref<1x?x1x64xbf16>
            %27 = arith.extf %26 : bf16 to f32
            %28 = arith.cmpi ult, %arg11, %14 : index
            %29 = arith.select %28, %27, %cst_3 : f32
            memref.store %29, %alloc_16[%arg11, %arg12] : memref<16x64xf32>
            scf.reduce 
          }
          %alloc_17 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          %thread_id_x = gpu.thread_id  x
          %17 = arith.remui %thread_id_x, %c32 : index
          %18 = arith.divui %thread_id_x, %c32 : index
          scf.for %arg11 = %18 to %c2 step %c4 {
            %21 = arith.divui %arg11, %c2 : index
            %22 = arith.muli %21, %c16 : index
            %23 = arith.remui %arg11, %c2 : index
            %24 = arith.muli %23, %c8 : index
            %25 = arith.divui %17, %c4 : index
            %26 = arith.remui %17, %c4 : index
            %27 = arith.muli %26, %c2 : index
            %28 = arith.addi %22, %25 : index
            %29 = arith.addi %24, %27 : index
            %30 = arith.divui %17, %c4 : index
            %31 = arith.remui %17, %c4 : index
            %32 = arith.muli %31, %c2 : index
            %33 = arith.addi %32, %c1 : index
            %34 = arith.addi %22, %30 : index
            %35 = arith.addi %24, %33 : index
            %36 = arith.divui %17, %c4 : index
            %37 = arith.remui %17, %c4 : index
            %38 = arith.addi %36, %c8 : index
            %39 = arith.muli %37, %c2 : index
            %40 = arith.addi %22, %38 : index
            %41 = arith.addi %24, %39 : index
            %42 = arith.divui %17, %c4 : index
            %43 = arith.remui %17, %c4 : index
            %44 = arith.addi %42, %c8 : index
            %45 = arith.muli %43, %c2 : index
            %46 = arith.addi %45, %c1 : index
            %47 = arith.addi %22, %44 : index
            %48 = arith.addi %24, %46 : index
            %49 = scf.for %arg12 = %c0 to %c64 step %c8 iter_args(%arg13 = %cst) -> (vector<2x2xf32>) {
              %54 = arith.divui %17, %c4 : index
              %55 = arith.remui %17, %c4 : index
              %56 = arith.addi %22, %54 : index
              %57 = arith.addi %56, %c8 : index
              %58 = arith.addi %arg12, %55 : index
              %59 = arith.addi %58, %c4 : index
              %60 = arith.addi %24, %54 : index
              %61 = memref.load %alloc[%56, %58] : memref<16x64xf32>
              %62 = memref.load %alloc[%57, %58] : memref<16x64xf32>
              %63 = memref.load %alloc[%56, %59] : memref<16x64xf32>
              %64 = memref.load %alloc[%57, %59] : memref<16x64xf32>
              %65 = memref.load %alloc_14[%60, %58] : memref<16x64xf32>
              %66 = memref.load %alloc_14[%60, %59] : memref<16x64xf32>
              %67 = vector.from_elements %61, %62, %63, %64 : vector<4x1xf32>
              %68 = vector.from_elements %65, %66 : vector<2x1xf32>
              %69 = nvgpu.mma.sync(%67, %68, %arg13) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
              scf.yield %69 : vector<2x2xf32>
            }
            %50 = vector.extract %49[0, 0] : f32 from vector<2x2xf32>
            memref.store %50, %alloc_17[%28, %29] : memref<16x16xf32>
            %51 = vector.extract %49[0, 1] : f32 from vector<2x2xf32>
            memref.store %51, %alloc_17[%34, %35] : memref<16x16xf32>
            %52 = vector.extract %49[1, 0] : f32 from vector<2x2xf32>
            memref.store %52, %alloc_17[%40, %41] : memref<16x16xf32>
            %53 = vector.extract %49[1, 1] : f32 from vector<2x2xf32>
            memref.store %53, %alloc_17[%47, %48] : memref<16x16xf32>
          } {kda.warp_distributed}
          %alloc_18 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          scf.parallel (%arg11, %arg12) = (%c0, %c0) to (%c16, %c16) step (%c1, %c1) {
            %21 = memref.load %alloc_17[%arg11, %arg12] : memref<16x16xf32>
            %22 = arith.addi %1, %arg11 : index
            %23 = arith.addi %12, %arg12 : index
            %24 = arith.cmpi ule, %23, %22 : index
            %25 = arith.cmpi ult, %23, %dim : index
            %26 = arith.subi %22, %23 : index
            %27 = arith.cmpi slt, %26, %c64 : index
            %28 = arith.andi %24, %25 : i1
            %29 = arith.andi %28, %27 : i1
            %30 = arith.select %29, %21, %cst_0 : f32
            memref.store %30, %alloc_18[%arg11, %arg12] : memref<16x16xf32>
            scf.reduce 
          }
          %alloc_19 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            memref.store %cst_0, %alloc_19[%arg11] : memref<16xf32>
            scf.reduce 
          }
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            scf.for %arg12 = %c0 to %c16 step %c1 {
              %21 = memref.load %alloc_18[%arg11, %arg12] : memref<16x16xf32>
              %22 = memref.load %alloc_19[%arg11] : memref<16xf32>
              %23 = arith.maximumf %22, %21 : f32
              memref.store %23, %alloc_19[%arg11] : memref<16xf32>
            }
            scf.reduce 
          }
          %alloc_20 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            %21 = memref.load %arg8[%arg11] : memref<16xf32>
            %22 = memref.load %alloc_19[%arg11] : memref<16xf32>
            %23 = arith.maximumf %21, %22 : f32
            memref.store %23, %alloc_20[%arg11] : memref<16xf32>
            scf.reduce 
          }
          %alloc_21 = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
          scf.parallel (%arg11, %arg12) = (%c0, %c0) to (%c16, %c16) step (%c1, %c1) {
            %21 = memref.load %alloc_17[%arg11, %arg12] : memref<16x16xf32>
            %22 = memref.load %arg8[%arg11] : memref<16xf32>
            %23 = memref.load %alloc_19[%arg11] : memref<16xf32>
            %24 = arith.maximumf %22, %23 : f32
            %25 = arith.addi %1, %arg11 : index
            %26 = arith.addi %12, %arg12 : index
            %27 = arith.cmpi ule, %26, %25 : index
            %28 = arith.cmpi ult, %26, %dim : index
            %29 = arith.subi %25, %26 : index
            %30 = arith.cmpi slt, %29, %c64 : index
            %31 = arith.andi %27, %28 : i1
            %32 = arith.andi %31, %30 : i1
            %33 = arith.select %32, %21, %cst_0 : f32
            %34 = arith.subf %33, %24 : f32
            %35 = math.exp %34 : f32
            memref.store %35, %alloc_21[%arg11, %arg12] : memref<16x16xf32>
            scf.reduce 
          }
          %alloc_22 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            memref.store %cst_3, %alloc_22[%arg11] : memref<16xf32>
            scf.reduce 
          }
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            scf.for %arg12 = %c0 to %c16 step %c1 {
              %21 = memref.load %alloc_21[%arg11, %arg12] : memref<16x16xf32>
              %22 = memref.load %alloc_22[%arg11] : memref<16xf32>
              %23 = arith.addf %22, %21 : f32
              memref.store %23, %alloc_22[%arg11] : memref<16xf32>
            }
            scf.reduce 
          }
          %alloc_23 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
          scf.parallel (%arg11) = (%c0) to (%c16) step (%c1) {
            %21 = memref.load %arg9[%arg11] : memref<16xf32>
            %22 = memref.load %arg8[%arg11] : memref<16xf32>
            %23 = memref.load %alloc_19[%arg11] : memref<16xf32>
            %24 = memref.load %alloc_22[%arg11] : memref<16xf32>
            %25 = arith.maximumf %22, %23 : f32
            %26 = arith.subf %22, %25 : f32
            %27 = math.exp %26 : f32
            %28 = arith.mulf %21, %27 : f32
            %29 = arith.addf %28, %24 : f32
            memref.store %29, %alloc_23[%arg11] : memref<16xf32>
            scf.reduce 
          }
          %alloc_24 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          %thread_id_x_25 = gpu.thread_id  x
          %19 = arith.remui %thread_id_x_25, %c32 : index
          %20 = arith.divui %thread_id_x_25, %c32 : index
          scf.for %arg11 = %20 to %c8 step %c4 {
            %21 = arith.divui %arg11, %c8 : index
            %22 = arith.muli %21, %c16 : index
            %23 = arith.remui %arg11, %c8 : index
            %24 = arith.muli %23, %c8 : index
            %25 = arith.divui %19, %c4 : index
            %26 = arith.remui %19, %c4 : index
            %27 = arith.muli %26, %c2 : index
            %28 = arith.addi %22, %25 : index
            %29 = arith.addi %24, %27 : index
            %30 = arith.divui %19, %c4 : index
            %31 = arith.remui %19, %c4 : index
            %32 = arith.muli %31, %c2 : index
            %33 = arith.addi %32, %c1 : index
            %34 = arith.addi %22, %30 : index
            %35 = arith.addi %24, %33 : index
            %36 = arith.divui %19, %c4 : index
            %37 = arith.remui %19, %c4 : index
            %38 = arith.addi %36, %c8 : index
            %39 = arith.muli %37, %c2 : index
            %40 = arith.addi %22, %38 : index
            %41 = arith.addi %24, %39 : index
            %42 = arith.divui %19, %c4 : index
            %43 = arith.remui %19, %c4 : index
            %44 = arith.addi %42, %c8 : index
            %45 = arith.muli %43, %c2 : index
            %46 = arith.addi %45, %c1 : index
            %47 = arith.addi %22, %44 : index
            %48 = arith.addi %24, %46 : index
            %49 = scf.for %arg12 = %c0 to %c16 step %c8 iter_args(%arg13 = %cst) -> (vector<2x2xf32>) {
              %54 = arith.divui %19, %c4 : index
              %55 = arith.remui %19, %c4 : index
              %56 = arith.addi %22, %54 : index
              %57 = arith.addi %56, %c8 : index
              %58 = arith.addi %arg12, %55 : index
              %59 = arith.addi %58, %c4 : index
              %60 = arith.addi %24, %54 : index
              %61 = memref.load %alloc_21[%56, %58] : memref<16x16xf32>
              %62 = memref.load %alloc_21[%57, %58] : memref<16x16xf32>
              %63 = memref.load %alloc_21[%56, %59] : memref<16x16xf32>
              %64 = memref.load %alloc_21[%57, %59] : memref<16x16xf32>
              %65 = memref.load %alloc_16[%58, %60] : memref<16x64xf32>
              %66 = memref.load %alloc_16[%59, %60] : memref<16x64xf32>
              %67 = vector.from_elements %61, %62, %63, %64 : vector<4x1xf32>
              %68 = vector.from_elements %65, %66 : vector<2x1xf32>
              %69 = nvgpu.mma.sync(%67, %68, %arg13) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
              scf.yield %69 : vector<2x2xf32>
            }
            %50 = vector.extract %49[0, 0] : f32 from vector<2x2xf32>
            memref.store %50, %alloc_24[%28, %29] : memref<16x64xf32>
            %51 = vector.extract %49[0, 1] : f32 from vector<2x2xf32>
            memref.store %51, %alloc_24[%34, %35] : memref<16x64xf32>
            %52 = vector.extract %49[1, 0] : f32 from vector<2x2xf32>
            memref.store %52, %alloc_24[%40, %41] : memref<16x64xf32>
            %53 = vector.extract %49[1, 1] : f32 from vector<2x2xf32>
            memref.store %53, %alloc_24[%47, %48] : memref<16x64xf32>
          } {kda.warp_distributed}
          %alloc_26 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
          scf.parallel (%arg11, %arg12) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
            %21 = memref.load %arg10[%arg11, %arg12] : memref<16x64xf32>
            %22 = memref.load %arg8[%arg11] : memref<16xf32>
            %23 = memref.load %alloc_19[%arg11] : memref<16xf32>
            %24 = memref.load %alloc_24[%arg11, %arg12] : memref<16x64xf32>
            %25 = arith.maximumf %22, %23 : f32
            %26 = arith.subf %22, %25 : f32
            %27 = math.exp %26 : f32
            %28 = arith.mulf %21, %27 : f32
            %29 = arith.addf %28, %24 : f32
            memref.store %29, %alloc_26[%arg11, %arg12] : memref<16x64xf32>
            scf.reduce 
          }
          scf.yield %alloc_20, %alloc_23, %alloc_26 : memref<16xf32>, memref<16xf32>, memref<16x64xf32>
        }
        %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
          %12 = memref.load %11#2[%arg7, %arg8] : memref<16x64xf32>
          %13 = memref.load %11#1[%arg7] : memref<16xf32>
          %14 = arith.divf %12, %13 : f32
          memref.store %14, %alloc_9[%arg7, %arg8] : memref<16x64xf32>
          scf.reduce 
        }
        %subview_10 = memref.subview %alloc_9[0, 0] [%3, 64] [1, 1] : memref<16x64xf32> to memref<?x64xf32, strided<[64, 1]>>
        %alloc_11 = memref.alloc(%3) {alignment = 64 : i64} : memref<?x64xbf16>
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%3, %c64) step (%c1, %c1) {
          %12 = memref.load %subview_10[%arg7, %arg8] : memref<?x64xf32, strided<[64, 1]>>
          %13 = arith.truncf %12 : f32 to bf16
          memref.store %13, %alloc_11[%arg7, %arg8] : memref<?x64xbf16>
          scf.reduce 
        }
        %subview_12 = memref.subview %subview[%1, 0] [%3, 64] [1, 1] : memref<?x64xbf16, strided<[64, 1]>> to memref<?x64xbf16, strided<[64, 1], offset: ?>>
        scf.parallel (%arg7, %arg8) = (%c0, %c0) to (%3, %c64) step (%c1, %c1) {
          %12 = memref.load %alloc_11[%arg7, %arg8] : memref<?x64xbf16>
          memref.store %12, %subview_12[%arg7, %arg8] : memref<?x64xbf16, strided<[64, 1], offset: ?>>
          scf.reduce 
        }
      }
    }
    return
  }
}



// RUN: not kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" 2>&1 | FileCheck %s
// RUN: not kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" 2>&1 | FileCheck %s
// RUN: kda-opt %s --kda-lower-to-cpu -o /dev/null

// The GPU lowerings take head dimensions up to 1024 ([C, K] tiles in shared
// memory and registers: past that nothing fits a block). Wider ones are
// refused at once; they took minutes in the canonicalizer (2^31, found by
// scripts/fuzz-structure.py, was a hang). The CPU takes any.
// CHECK: error: kda-tile-chunks: head dimension K = 4096 exceeds the largest this target lowers, 1024 (its tiles would not fit a block)
func.func @wide(%q: tensor<1x32x1x4096xf32>, %k: tensor<1x32x1x4096xf32>, %v: tensor<1x32x1x16xf32>) -> tensor<1x32x1x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x32x1x4096xf32>, tensor<1x32x1x4096xf32>, tensor<1x32x1x16xf32> -> tensor<1x32x1x16xf32>
  return %o : tensor<1x32x1x16xf32>
}

// Causal sliding-window attention: windows of 1, 64, larger than T and per
// position; GQA and the KDA head grouping; varlen never crossing sequences.
// RUN: kda-run %s --function=window_1 --check | FileCheck %s
// RUN: kda-run %s --function=window_64 --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=window_64 --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=window_past_t --check | FileCheck %s
// RUN: kda-run %s --function=window_per_position --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=window_gqa_varlen --chunk=16 --seqlens=50,1,99 --check | FileCheck %s
// RUN: kda-run %s --function=window_kda_grouping_bf16 --chunk=32 --check | FileCheck %s
// Windows of 2^63 - 1 (static, and per position from an int64 .npy): every key
// of the sequence. Their f32 copies rounded to 2^63, which does not convert
// back to i64, and every key was masked: NaN (found by
// scripts/fuzz-structure.py's execution of mutants).
// RUN: kda-run %s --function=window_unbounded --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=window_unbounded --chunk=1 --check | FileCheck %s
// Per position, 2^63 - 1024 (the oracle takes integers up to 2^62, so no
// --check): the same output, bit for bit, as sizes of 200 (past T = 100).
// RUN: rm -rf %t && mkdir -p %t/huge %t/w200
// RUN: %python %S/Inputs/int64_npy.py 100 9223372036854774784 %t/huge.npy
// RUN: %python %S/Inputs/int64_npy.py 100 200 %t/w200.npy
// RUN: kda-run %s --function=window_per_position_i64 --input=3=%t/huge.npy --seed=5 --chunk=16 --output-dir=%t/huge
// RUN: kda-run %s --function=window_per_position_i64 --input=3=%t/w200.npy --seed=5 --chunk=16 --output-dir=%t/w200
// RUN: %python -c "import sys; a, b = (open(p, 'rb').read() for p in sys.argv[1:]); sys.exit(0 if a == b else 'outputs differ')" %t/huge/out0.npy %t/w200/out0.npy
// Earlier keys: the queries are the last T of S key rows (a chunk of a
// sequence whose earlier keys are kept), S - T not a multiple of the chunk.
// RUN: kda-run %s --function=window_earlier_keys --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=window_earlier_keys --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=window_earlier_keys_per_position --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=window_earlier_keys_causal --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=window_earlier_keys_mix --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=window_head_128 --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=window_head_256 --chunk=32 --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @window_1(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>) -> tensor<2x100x2x32xf32> {
  %o = kda.window_attention %q, %k, %v  {window = 1 : i64} : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32>
  return %o : tensor<2x100x2x32xf32>
}

func.func @window_64(%q: tensor<2x200x2x32xf32>, %k: tensor<2x200x2x32xf32>, %v: tensor<2x200x2x32xf32>) -> tensor<2x200x2x32xf32> {
  %o = kda.window_attention %q, %k, %v  {window = 64 : i64} : tensor<2x200x2x32xf32>, tensor<2x200x2x32xf32>, tensor<2x200x2x32xf32> -> tensor<2x200x2x32xf32>
  return %o : tensor<2x200x2x32xf32>
}

func.func @window_past_t(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x32xf32>) -> tensor<1x100x2x32xf32> {
  %o = kda.window_attention %q, %k, %v  {window = 1000 : i64} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32> -> tensor<1x100x2x32xf32>
  return %o : tensor<1x100x2x32xf32>
}

func.func @window_per_position(%q: tensor<2x100x2x32xf32>, %k: tensor<2x100x2x32xf32>, %v: tensor<2x100x2x32xf32>, %w: tensor<100xi32>) -> tensor<2x100x2x32xf32> {
  %o = kda.window_attention %q, %k, %v window_sizes(%w : tensor<100xi32>) : tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32>, tensor<2x100x2x32xf32> -> tensor<2x100x2x32xf32>
  return %o : tensor<2x100x2x32xf32>
}

func.func @window_gqa_varlen(%q: tensor<1x150x4x32xf32>, %k: tensor<1x150x1x32xf32>, %v: tensor<1x150x1x16xf32>, %cu: tensor<4xi32>) -> tensor<1x150x4x16xf32> {
  %o = kda.window_attention %q, %k, %v cu_seqlens(%cu : tensor<4xi32>) {window = 20 : i64} : tensor<1x150x4x32xf32>, tensor<1x150x1x32xf32>, tensor<1x150x1x16xf32> -> tensor<1x150x4x16xf32>
  return %o : tensor<1x150x4x16xf32>
}

func.func @window_kda_grouping_bf16(%q: tensor<1x90x2x64xbf16>, %k: tensor<1x90x2x64xbf16>, %v: tensor<1x90x4x64xbf16>) -> tensor<1x90x4x64xbf16> {
  %o = kda.window_attention %q, %k, %v  {window = 33 : i64} : tensor<1x90x2x64xbf16>, tensor<1x90x2x64xbf16>, tensor<1x90x4x64xbf16> -> tensor<1x90x4x64xbf16>
  return %o : tensor<1x90x4x64xbf16>
}

func.func @window_unbounded(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x32xf32>) -> tensor<1x100x2x32xf32> {
  %o = kda.window_attention %q, %k, %v  {window = 9223372036854775807 : i64} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32> -> tensor<1x100x2x32xf32>
  return %o : tensor<1x100x2x32xf32>
}

func.func @window_per_position_i64(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x32xf32>, %w: tensor<100xi64>) -> tensor<1x100x2x32xf32> {
  %o = kda.window_attention %q, %k, %v window_sizes(%w : tensor<100xi64>) : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32> -> tensor<1x100x2x32xf32>
  return %o : tensor<1x100x2x32xf32>
}

func.func @window_earlier_keys(%q: tensor<1x100x2x64xbf16>, %k: tensor<1x300x1x64xbf16>, %v: tensor<1x300x1x64xbf16>) -> tensor<1x100x2x64xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 70 : i64, earlier_keys} : tensor<1x100x2x64xbf16>, tensor<1x300x1x64xbf16>, tensor<1x300x1x64xbf16> -> tensor<1x100x2x64xbf16>
  return %o : tensor<1x100x2x64xbf16>
}

func.func @window_earlier_keys_per_position(%q: tensor<1x90x2x64xbf16>, %k: tensor<1x157x2x64xbf16>, %v: tensor<1x157x2x64xbf16>, %w: tensor<90xi32>) -> tensor<1x90x2x64xbf16> {
  %o = kda.window_attention %q, %k, %v window_sizes(%w : tensor<90xi32>) {earlier_keys} : tensor<1x90x2x64xbf16>, tensor<1x157x2x64xbf16>, tensor<1x157x2x64xbf16> -> tensor<1x90x2x64xbf16>
  return %o : tensor<1x90x2x64xbf16>
}

func.func @window_earlier_keys_causal(%q: tensor<2x50x2x32xf32>, %k: tensor<2x130x2x32xf32>, %v: tensor<2x130x2x16xf32>) -> tensor<2x50x2x16xf32> {
  %o = kda.window_attention %q, %k, %v {window = 1000 : i64, earlier_keys} : tensor<2x50x2x32xf32>, tensor<2x130x2x32xf32>, tensor<2x130x2x16xf32> -> tensor<2x50x2x16xf32>
  return %o : tensor<2x50x2x16xf32>
}

func.func @window_earlier_keys_mix(%q: tensor<1x90x2x64xbf16>, %k: tensor<1x200x2x64xbf16>, %v: tensor<1x200x2x64xbf16>, %x: tensor<1x90x2x64xbf16>, %z: tensor<1x90x2xf32>) -> tensor<1x90x2x64xbf16> {
  %o = kda.window_attention %q, %k, %v mix_linear(%x : tensor<1x90x2x64xbf16>) mix_gate(%z : tensor<1x90x2xf32>) {window = 64 : i64, mix = #kda<combine gated>, earlier_keys} : tensor<1x90x2x64xbf16>, tensor<1x200x2x64xbf16>, tensor<1x200x2x64xbf16> -> tensor<1x90x2x64xbf16>
  return %o : tensor<1x90x2x64xbf16>
}

// Heads of 128 (the bench's) and 256 (sm_90a's wgmma keeps Q in the shared
// swizzle and reads A through a descriptor), over earlier keys.
func.func @window_head_128(%q: tensor<1x80x2x128xbf16>, %k: tensor<1x150x2x128xbf16>, %v: tensor<1x150x2x128xbf16>) -> tensor<1x80x2x128xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 90 : i64, earlier_keys} : tensor<1x80x2x128xbf16>, tensor<1x150x2x128xbf16>, tensor<1x150x2x128xbf16> -> tensor<1x80x2x128xbf16>
  return %o : tensor<1x80x2x128xbf16>
}

func.func @window_head_256(%q: tensor<1x70x2x256xbf16>, %k: tensor<1x110x1x256xbf16>, %v: tensor<1x110x1x256xbf16>) -> tensor<1x70x2x256xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 50 : i64, earlier_keys} : tensor<1x70x2x256xbf16>, tensor<1x110x1x256xbf16>, tensor<1x110x1x256xbf16> -> tensor<1x70x2x256xbf16>
  return %o : tensor<1x70x2x256xbf16>
}

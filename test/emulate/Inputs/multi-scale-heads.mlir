// A multi-scale layer of 42 heads of V = 128: its elementwise kernels (the scaled gate, the
// mix) take 4096 elements a program, 32 heads, so each row is a whole block and a partial one of 10
// heads, and the four indices a thread an iteration run past the partial block's end (loaded
// at its last index, not stored). test/emulate/forward.test.
func.func @multi_scale_forty_two_heads(%q: tensor<1x20x42x32xbf16>, %k: tensor<1x20x42x32xbf16>, %v: tensor<1x20x42x128xbf16>, %g: tensor<1x20x42x32xf32>, %b: tensor<1x20x42xbf16>, %z: tensor<1x20x42x2xbf16>) -> tensor<1x20x42x128xbf16> {
  %o = kda.multi_scale delta gated %q, %k, %v gates(%g : tensor<1x20x42x32xf32>) beta(%b : tensor<1x20x42xbf16>) z(%z : tensor<1x20x42x2xbf16>) {decay_scales = [1.0, 0.25], qk_l2norm} : tensor<1x20x42x32xbf16>, tensor<1x20x42x32xbf16>, tensor<1x20x42x128xbf16> -> tensor<1x20x42x128xbf16>
  return %o : tensor<1x20x42x128xbf16>
}

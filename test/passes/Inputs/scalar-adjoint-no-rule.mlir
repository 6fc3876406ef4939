// A body whose result goes through an op without a derivative rule.
func.func @angle(%x: f32) -> f32 {
  %a = math.atan %x : f32
  return %a : f32
}

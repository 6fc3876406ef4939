// RUN: kda-opt %s --kda-gpu-layer-entry=remarks=true 2>&1 | FileCheck %s

// kda-gpu-layer-entry alone: a function of calls to an entry (@ent, two
// kernels through a workspace, as kda-gpu-split-schedule records it) and a
// kernel (@mix) becomes the entry "layer": its arguments and result the
// parameters, the fresh tensors between calls and the called entry's
// workspaces renamed (c0_o, c0_ws0), y named by its kda.name (only @mix,
// whose parameter is in1, reads it), and @mix's own dimension names (A, B)
// mapped to the layer's (N, T) on its launch. Functions it cannot describe
// keep their kernels and say why. Where a called entry's later launches
// (the state pass) are independent of another call's, they run on the side
// stream ("stream" 1, "alone": a multiprocessor a block where the runtime can;
// "after": what each launch follows). An argument whose
// first kernel parameter name is taken is named after its position (arg1).

// CHECK: remark: kda-gpu-layer-entry: @writes_an_argument gets no bundle entry of its own: call 0 (@k1) writes into a tensor that is not fresh (parameter w)
// CHECK: remark: kda-gpu-layer-entry: @host_math gets no bundle entry of its own: it computes more than kernel calls (arith.addf)
// CHECK: kda.entries = [{launches = [{args = ["x", "ws0"], kernel = "k1"}, {args = ["ws0", "o"], kernel = "k2"}], name = "ent"
// CHECK-SAME: {launches = [{args = ["x", "c0_ws0"], kernel = "k1"}, {args = ["c0_ws0", "c0_o"], kernel = "k2"}, {args = ["c0_o", "y", "o"], kernel = "mix", symbols = {A = "N", B = "T"}}], name = "layer", params = [{dtype = "f32", name = "x", shape = ["N", "T"]}, {dtype = "f32", name = "y", shape = ["N", "T"]}, {dtype = "f32", name = "o", shape = ["N", "T"]}], workspaces = [{dtype = "f32", name = "c0_o", shape = ["N", "T"]}, {dtype = "f32", name = "c0_ws0", shape = ["N", "T"]}]},
// CHECK-SAME: {launches = [{after = [], args = ["x", "c0_ws0"], kernel = "k1"}, {after = [0], alone = true, args = ["c0_ws0", "c0_o"], kernel = "k2", stream = 1 : i64}, {after = [], args = ["arg1", "c1_w"], kernel = "k1"}, {after = [1, 2], args = ["c0_o", "c1_w", "o"], kernel = "mix", symbols = {A = "N", B = "T"}}], name = "two_branches"
// CHECK-SAME: {launches = [{args = ["x", "o0"], kernel = "k1"}, {args = ["o0", "o1"], kernel = "k1"}], name = "twice", params = [{dtype = "f32", name = "x", shape = ["N", "T"]}, {dtype = "f32", name = "o0", shape = ["N", "T"]}, {dtype = "f32", name = "o1", shape = ["N", "T"]}], workspaces = []}
// CHECK-SAME: {launches = [{args = ["in0", "in1", "c0_out"], kernel = "mix"}, {args = ["c0_out", "c1_ws0"], kernel = "k1", symbols = {N = "A", T = "B"}}, {args = ["c1_ws0", "o"], kernel = "k2", symbols = {N = "A", T = "B"}}], name = "mix_first", params = [{dtype = "f32", name = "in0", shape = ["A", "B"]}, {dtype = "f32", name = "in1", shape = ["A", "B"]}, {dtype = "f32", name = "o", shape = ["A", "B"]}], workspaces = [{dtype = "f32", name = "c0_out", shape = ["A", "B"]}, {dtype = "f32", name = "c1_ws0", shape = ["A", "B"]}]}
// CHECK-NOT: name = "single"
// CHECK-NOT: name = "writes_an_argument"

module attributes {kda.entries = [{name = "ent",
    params = [{name = "x", shape = ["N", "T"], dtype = "f32"}, {name = "o", shape = ["N", "T"], dtype = "f32"}],
    workspaces = [{name = "ws0", shape = ["N", "T"], dtype = "f32"}],
    launches = [{kernel = "k1", args = ["x", "ws0"]}, {kernel = "k2", args = ["ws0", "o"]}]}]} {
  func.func private @ent(tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  func.func private @k1(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {kda.kernel, kda.abi = [{name = "x", dims = ["N", "T"]}, {name = "w", dims = ["N", "T"]}]} {
    return %x : tensor<?x?xf32>
  }
  func.func private @k2(%w: tensor<?x?xf32>, %o: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {kda.kernel, kda.abi = [{name = "w", dims = ["N", "T"]}, {name = "o", dims = ["N", "T"]}]} {
    return %w : tensor<?x?xf32>
  }
  func.func private @mix(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %o: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {kda.kernel, kda.abi = [{name = "in0", dims = ["A", "B"]}, {name = "in1", dims = ["A", "B"]},
                                         {name = "out", dims = ["A", "B"]}]} {
    return %a : tensor<?x?xf32>
  }

  func.func @layer(%x: tensor<?x?xf32>, %y: tensor<?x?xf32> {kda.name = "y"}) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %x, %c0 : tensor<?x?xf32>
    %t = tensor.dim %x, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%n, %t) : tensor<?x?xf32>
    %lin = call @ent(%x, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %o = call @mix(%lin, %y, %e) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %o : tensor<?x?xf32>
  }

  // Two branches: @ent's state launch (k2) is independent of the second
  // branch (k1 on y), so it goes to the side stream; every launch names the
  // launches it follows.
  func.func @two_branches(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %x, %c0 : tensor<?x?xf32>
    %t = tensor.dim %x, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%n, %t) : tensor<?x?xf32>
    %lin = call @ent(%x, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %win = call @k1(%y, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %o = call @mix(%lin, %win, %e) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %o : tensor<?x?xf32>
  }

  // One kernel twice, two results: each call's destination a buffer of its
  // own, the results the parameters o0 and o1, the second launch after the first.
  func.func @twice(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %x, %c0 : tensor<?x?xf32>
    %t = tensor.dim %x, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%n, %t) : tensor<?x?xf32>
    %a = call @k1(%x, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %b = call @k1(%a, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %a, %b : tensor<?x?xf32>, tensor<?x?xf32>
  }

  // The mix first: the layer's dimensions are its A and B, so @ent's
  // launches map N and T to them and its workspace is [A, B].
  func.func @mix_first(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %x, %c0 : tensor<?x?xf32>
    %t = tensor.dim %x, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%n, %t) : tensor<?x?xf32>
    %m = call @mix(%x, %y, %e) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %o = call @ent(%m, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %o : tensor<?x?xf32>
  }

  // One call: nothing to record (the callee is its own entry or kernel).
  func.func @single(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = tensor.dim %x, %c0 : tensor<?x?xf32>
    %t = tensor.dim %x, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%n, %t) : tensor<?x?xf32>
    %o = call @ent(%x, %e) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %o : tensor<?x?xf32>
  }

  func.func @writes_an_argument(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %a = call @k1(%x, %w) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %b = call @k1(%a, %w) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %b : tensor<?x?xf32>
  }

  func.func @host_math(%x: tensor<?x?xf32>, %s: f32) -> f32 {
    %r = arith.addf %s, %s : f32
    return %r : f32
  }
}

// The derivative of scalar bodies (passes/ScalarAdjoint.h, the rules every
// map's adjoint will use): the structure of one, then every rule executed
// against central finite differences in float64, then an op without a rule.
// RUN: kda-opt %s --kda-scalar-adjoint | FileCheck %s
// RUN: kda-opt %s --kda-scalar-adjoint | mlir-opt --convert-vector-to-llvm --convert-math-to-llvm \
// RUN:   --convert-arith-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils \
// RUN: | FileCheck %s --check-prefix=EXEC
// RUN: not kda-opt %S/Inputs/scalar-adjoint-no-rule.mlir --kda-scalar-adjoint 2>&1 \
// RUN: | FileCheck %s --check-prefix=ERR

// Kimi-Linear's softplus gate, -exp(A_log) softplus(x + dt_bias), softplus
// taken as its argument above 20 (SPEC.md): the comparison keeps its choice,
// each branch gets the seed where it is taken.
// CHECK-LABEL: func.func private @softplus_gate_grad(
// CHECK-SAME: -> (f64, f64, f64, f64)
// (x and dt_bias enter as their sum: one partial for both.)
// CHECK: %[[BIG:.*]] = arith.cmpf ogt
// CHECK: arith.select %[[BIG]], %{{.*}}, %cst
// CHECK: %[[SOFT:.*]] = arith.select %[[BIG]], %cst{{.*}}, %{{.*}}
// CHECK: arith.divf %[[SOFT]],
// CHECK: return %{{.*}}, %[[DX:.*]], %[[DX]], %{{.*}} : f64, f64, f64, f64
func.func @softplus_gate(%x: f64, %dt: f64, %alog: f64) -> f64 {
  %s = arith.addf %x, %dt : f64
  %e = math.exp %s : f64
  %l = math.log1p %e : f64
  %c20 = arith.constant 20.0 : f64
  %big = arith.cmpf ogt, %s, %c20 : f64
  %sp = arith.select %big, %s, %l : f64
  %ea = math.exp %alog : f64
  %m = arith.mulf %ea, %sp : f64
  %r = arith.negf %m : f64
  return %r : f64
}

// The lower-bound gate, lb sigmoid(exp(A_log) (x + dt_bias)), lb = -5.
func.func @lb_gate(%x: f64, %dt: f64, %alog: f64) -> f64 {
  %s = arith.addf %x, %dt : f64
  %ea = math.exp %alog : f64
  %z = arith.mulf %ea, %s : f64
  %nz = arith.negf %z : f64
  %e = math.exp %nz : f64
  %one = arith.constant 1.0 : f64
  %d = arith.addf %one, %e : f64
  %sg = arith.divf %one, %d : f64
  %lb = arith.constant -5.0 : f64
  %r = arith.mulf %lb, %sg : f64
  return %r : f64
}

// The l2 norm's scaling, s x rsqrt(n + 1e-6), and a decayed operand,
// a exp(g - r).
func.func @norm(%x: f64, %n: f64, %s: f64) -> f64 {
  %eps = arith.constant 1.0e-6 : f64
  %t = arith.addf %n, %eps : f64
  %q = math.rsqrt %t : f64
  %xq = arith.mulf %x, %q : f64
  %r = arith.mulf %s, %xq : f64
  return %r : f64
}
func.func @decayed(%a: f64, %g: f64, %ref: f64) -> f64 {
  %d = arith.subf %g, %ref : f64
  %e = math.exp %d : f64
  %r = arith.mulf %a, %e : f64
  return %r : f64
}

// The remaining rules at once: tanh, sqrt, abs, division, maximum, fma,
// exp2, log, subtraction, and an argument used twice.
func.func @misc(%a: f64, %b: f64, %c: f64) -> f64 {
  %t = math.tanh %a : f64
  %s = math.sqrt %b : f64
  %ts = arith.mulf %t, %s : f64
  %ab = math.absf %c : f64
  %q = arith.divf %ab, %b : f64
  %m = arith.maximumf %a, %c : f64
  %f = math.fma %a, %b, %c : f64
  %x = math.exp2 %c : f64
  %l = math.log %b : f64
  %aa = arith.mulf %a, %a : f64
  %u = arith.subf %ts, %q : f64
  %v = arith.addf %u, %m : f64
  %w = arith.addf %v, %f : f64
  %y = arith.addf %w, %x : f64
  %z = arith.addf %y, %l : f64
  %r = arith.subf %z, %aa : f64
  return %r : f64
}

// The gradients the pass fills in.
func.func private @softplus_gate_grad(f64, f64, f64) -> (f64, f64, f64, f64)
func.func private @lb_gate_grad(f64, f64, f64) -> (f64, f64, f64, f64)
func.func private @norm_grad(f64, f64, f64) -> (f64, f64, f64, f64)
func.func private @decayed_grad(f64, f64, f64) -> (f64, f64, f64, f64)
func.func private @misc_grad(f64, f64, f64) -> (f64, f64, f64, f64)

// Central differences of f at x (step 1e-6 per argument).
func.func private @fd3(%f: (f64, f64, f64) -> f64, %x0: f64, %x1: f64, %x2: f64) -> (f64, f64, f64) {
  %h = arith.constant 1.0e-6 : f64
  %h2 = arith.constant 2.0e-6 : f64
  %a0 = arith.addf %x0, %h : f64
  %b0 = arith.subf %x0, %h : f64
  %fa0 = func.call_indirect %f(%a0, %x1, %x2) : (f64, f64, f64) -> f64
  %fb0 = func.call_indirect %f(%b0, %x1, %x2) : (f64, f64, f64) -> f64
  %n0 = arith.subf %fa0, %fb0 : f64
  %d0 = arith.divf %n0, %h2 : f64
  %a1 = arith.addf %x1, %h : f64
  %b1 = arith.subf %x1, %h : f64
  %fa1 = func.call_indirect %f(%x0, %a1, %x2) : (f64, f64, f64) -> f64
  %fb1 = func.call_indirect %f(%x0, %b1, %x2) : (f64, f64, f64) -> f64
  %n1 = arith.subf %fa1, %fb1 : f64
  %d1 = arith.divf %n1, %h2 : f64
  %a2 = arith.addf %x2, %h : f64
  %b2 = arith.subf %x2, %h : f64
  %fa2 = func.call_indirect %f(%x0, %x1, %a2) : (f64, f64, f64) -> f64
  %fb2 = func.call_indirect %f(%x0, %x1, %b2) : (f64, f64, f64) -> f64
  %n2 = arith.subf %fa2, %fb2 : f64
  %d2 = arith.divf %n2, %h2 : f64
  return %d0, %d1, %d2 : f64, f64, f64
}

// Prints 1 where the derivative agrees with the difference (1e-6 relative,
// at least 1e-6 absolute), 0 where not.
func.func private @agree(%d: f64, %fd: f64) -> () {
  %e = arith.subf %d, %fd : f64
  %ae = math.absf %e : f64
  %afd = math.absf %fd : f64
  %one = arith.constant 1.0 : f64
  %s = arith.maximumf %afd, %one : f64
  %tol = arith.constant 1.0e-6 : f64
  %lim = arith.mulf %s, %tol : f64
  %ok = arith.cmpf ole, %ae, %lim : f64
  vector.print %ok : i1
  return
}

func.func private @check(%f: (f64, f64, f64) -> f64, %g: (f64, f64, f64) -> (f64, f64, f64, f64),
                         %x0: f64, %x1: f64, %x2: f64) -> () {
  %v, %d0, %d1, %d2 = func.call_indirect %g(%x0, %x1, %x2) : (f64, f64, f64) -> (f64, f64, f64, f64)
  %f0, %f1, %f2 = func.call @fd3(%f, %x0, %x1, %x2) : ((f64, f64, f64) -> f64, f64, f64, f64) -> (f64, f64, f64)
  func.call @agree(%d0, %f0) : (f64, f64) -> ()
  func.call @agree(%d1, %f1) : (f64, f64) -> ()
  func.call @agree(%d2, %f2) : (f64, f64) -> ()
  return
}

// EXEC-COUNT-21: {{^}}1{{$}}
// EXEC-NOT: {{^}}0{{$}}
func.func @main() {
  %c = arith.constant 0.3 : f64
  %d = arith.constant -0.2 : f64
  %e = arith.constant 1.1 : f64
  %big = arith.constant 25.0 : f64
  %p = arith.constant 0.7 : f64
  %n = arith.constant 2.5 : f64
  %m = arith.constant -0.4 : f64
  %sp = func.constant @softplus_gate : (f64, f64, f64) -> f64
  %spg = func.constant @softplus_gate_grad : (f64, f64, f64) -> (f64, f64, f64, f64)
  func.call @check(%sp, %spg, %c, %d, %e) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  func.call @check(%sp, %spg, %big, %d, %c) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  %lb = func.constant @lb_gate : (f64, f64, f64) -> f64
  %lbg = func.constant @lb_gate_grad : (f64, f64, f64) -> (f64, f64, f64, f64)
  func.call @check(%lb, %lbg, %p, %d, %c) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  %nm = func.constant @norm : (f64, f64, f64) -> f64
  %nmg = func.constant @norm_grad : (f64, f64, f64) -> (f64, f64, f64, f64)
  func.call @check(%nm, %nmg, %p, %n, %e) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  %dc = func.constant @decayed : (f64, f64, f64) -> f64
  %dcg = func.constant @decayed_grad : (f64, f64, f64) -> (f64, f64, f64, f64)
  func.call @check(%dc, %dcg, %p, %m, %c) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  %mi = func.constant @misc : (f64, f64, f64) -> f64
  %mig = func.constant @misc_grad : (f64, f64, f64) -> (f64, f64, f64, f64)
  func.call @check(%mi, %mig, %p, %n, %m) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  func.call @check(%mi, %mig, %m, %n, %p) : ((f64, f64, f64) -> f64, (f64, f64, f64) -> (f64, f64, f64, f64), f64, f64, f64) -> ()
  return
}

// ERR: error: kda-scalar-adjoint: no derivative rule for 'math.atan', which the result depends on

//===- OracleTest.cpp - unit tests of the float64 reference ---------------===//
//
// The oracle is what every other numeric test trusts, so it is checked here
// against hand-worked numbers, closed forms and structural identities
// (retrieval, explicit sums, head repetition, splitting sequences, resuming
// from boundary states, transposition) rather than against itself.
//
//===----------------------------------------------------------------------===//

#include "test/oracle/Oracle.h"

#include <limits>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kda::oracle;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Tensor make(std::vector<int64_t> shape, std::vector<double> data) {
  Tensor t(std::move(shape));
  EXPECT_EQ(t.data.size(), data.size()) << "make(): wrong element count";
  t.data = std::move(data);
  return t;
}

/// Seeded random tensors (std::mt19937 is specified bit-exactly; the
/// distributions are not, but every comparison below is between two
/// computations on the same draws).
struct Rng {
  std::mt19937 gen;
  explicit Rng(unsigned seed) : gen(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen); }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen);
  }

  Tensor normal(std::vector<int64_t> shape, double stddev = 1.0) {
    Tensor t(std::move(shape));
    for (double &x : t.data)
      x = stddev * normal();
    return t;
  }
  /// Rows along the last axis with unit L2 norm (typical q / k).
  Tensor unitRows(std::vector<int64_t> shape) {
    Tensor t = normal(std::move(shape));
    const int64_t K = t.shape.back();
    for (size_t r = 0; r * K < t.data.size(); ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < K; ++i)
        ss += t.data[r * K + i] * t.data[r * K + i];
      for (int64_t i = 0; i < K; ++i)
        t.data[r * K + i] /= std::sqrt(ss);
    }
    return t;
  }
  /// beta in (0, 1).
  Tensor beta(std::vector<int64_t> shape) {
    Tensor t(std::move(shape));
    for (double &x : t.data)
      x = uniform(0.05, 0.95);
    return t;
  }
  /// g = log(sigmoid(n)), n ~ N(0, 1): a valid log-decay (< 0).
  Tensor logSigmoid(std::vector<int64_t> shape) {
    Tensor t(std::move(shape));
    for (double &x : t.data)
      x = std::log(sigmoid(normal()));
    return t;
  }
};

::testing::AssertionResult near(const Tensor &a, const Tensor &b, double tol) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << "shapes differ";
  if (a.data.size() != b.data.size())
    return ::testing::AssertionFailure() << "sizes differ";
  const double err = maxAbsError(a.data, b.data);
  if (!(err <= tol))
    return ::testing::AssertionFailure()
           << "max abs error " << err << " > " << tol;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult allFinite(const Tensor &t) {
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]))
      return ::testing::AssertionFailure()
             << "element " << i << " = " << t.data[i];
  return ::testing::AssertionSuccess();
}

/// x[lead...] as a tensor of shape [1, rest...].
Tensor pick(const Tensor &x, const std::vector<int64_t> &lead) {
  std::vector<int64_t> rest(x.shape.begin() + lead.size(), x.shape.end());
  int64_t inner = 1;
  for (int64_t d : rest)
    inner *= d;
  int64_t off = 0;
  for (size_t i = 0; i < lead.size(); ++i)
    off = off * x.shape[i] + lead[i];
  rest.insert(rest.begin(), 1);
  Tensor r(rest);
  std::copy_n(x.data.begin() + off * inner, inner, r.data.begin());
  return r;
}

/// Tokens [t0, t1) of a [1, T, ...] tensor.
Tensor tokens(const Tensor &x, int64_t t0, int64_t t1) {
  EXPECT_EQ(x.shape[0], 1);
  int64_t inner = 1;
  for (size_t i = 2; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  std::vector<int64_t> s = x.shape;
  s[1] = t1 - t0;
  Tensor r(s);
  std::copy_n(x.data.begin() + t0 * inner, (t1 - t0) * inner, r.data.begin());
  return r;
}

/// Swaps the last two axes.
Tensor transposeLast2(const Tensor &x) {
  std::vector<int64_t> s = x.shape;
  const int64_t R = s[s.size() - 2], C = s.back();
  std::swap(s[s.size() - 2], s.back());
  Tensor r(s);
  for (int64_t b = 0; b * R * C < x.numel(); ++b)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j)
        r.data[b * R * C + j * R + i] = x.data[b * R * C + i * C + j];
  return r;
}

/// [B, T, H, D] -> [B, T, H * rep, D], head h' holding head h' / rep.
Tensor repeatHeads(const Tensor &x, int64_t rep) {
  const int64_t BT = x.shape[0] * x.shape[1], H = x.shape[2], D = x.shape[3];
  Tensor r({x.shape[0], x.shape[1], H * rep, D});
  for (int64_t bt = 0; bt < BT; ++bt)
    for (int64_t h = 0; h < H * rep; ++h)
      for (int64_t d = 0; d < D; ++d)
        r.data[(bt * H * rep + h) * D + d] = x.data[(bt * H + h / rep) * D + d];
  return r;
}

/// Runs gatedDelta and fails the test on an error status.
GatedDeltaResult run(const GatedDeltaArgs &a) {
  GatedDeltaResult r;
  Status s = gatedDelta(a, r);
  EXPECT_TRUE(s.ok()) << s.message;
  return r;
}

/// A random KDA problem (channel-wise gate, beta, optional initial state).
GatedDeltaArgs randomKda(Rng &rng, int64_t B, int64_t T, int64_t H, int64_t HV,
                         int64_t K, int64_t V, int64_t N = -1) {
  GatedDeltaArgs a;
  a.q = rng.unitRows({B, T, H, K});
  a.k = rng.unitRows({B, T, H, K});
  a.v = rng.normal({B, T, HV, V});
  a.g = rng.logSigmoid({B, T, HV, K});
  a.beta = rng.beta({B, T, HV});
  if (N != 0)
    a.initialState = rng.normal({N < 0 ? B : N, HV, K, V}, 0.5);
  return a;
}

//===----------------------------------------------------------------------===//
// Tensor, scalar functions, metrics
//===----------------------------------------------------------------------===//

TEST(Tensor, ShapeNumelOffset) {
  Tensor absent;
  EXPECT_FALSE(absent.present());
  EXPECT_EQ(absent.numel(), 0);
  Tensor t({2, 3, 4}, 1.5);
  EXPECT_TRUE(t.present());
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 24);
  ASSERT_EQ(t.data.size(), 24u);
  EXPECT_EQ(t.data[23], 1.5);
  EXPECT_EQ(t.offset({1, 2, 3}), 23);
  EXPECT_EQ(t.offset({1, 0, 2}), 14);
  t.at({0, 1, 1}) = 7.0;
  EXPECT_EQ(t.data[5], 7.0);
  Tensor empty({3, 0, 2});
  EXPECT_TRUE(empty.present());
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Scalar, SoftplusThresholdAndStability) {
  // Taken as x strictly above 20 ...
  EXPECT_EQ(softplus(20.5), 20.5);
  EXPECT_EQ(softplus(1000.0), 1000.0);
  // ... and log(1 + e^x) at and below it (differs from x by e^-20 ~ 2.06e-9).
  EXPECT_NEAR(softplus(20.0) - 20.0, std::exp(-20.0), 1e-15);
  EXPECT_GT(softplus(20.0), 20.0);
  EXPECT_NEAR(softplus(19.9), std::log1p(std::exp(19.9)), 1e-12);
  EXPECT_NEAR(softplus(0.0), std::log(2.0), 1e-16);
  EXPECT_NEAR(softplus(1.0), std::log(1.0 + std::exp(1.0)), 1e-15);
  EXPECT_NEAR(softplus(-3.0), std::log(1.0 + std::exp(-3.0)), 1e-15);
  // Tiny for very negative x, relatively accurate, never NaN.
  EXPECT_NEAR(softplus(-40.0) / std::exp(-40.0), 1.0, 1e-12);
  EXPECT_EQ(softplus(-1000.0), 0.0);
}

TEST(Scalar, Sigmoid) {
  EXPECT_EQ(sigmoid(0.0), 0.5);
  EXPECT_NEAR(sigmoid(std::log(3.0)), 0.75, 1e-15);
  EXPECT_NEAR(sigmoid(-std::log(3.0)), 0.25, 1e-15);
  EXPECT_EQ(sigmoid(1000.0), 1.0);
  EXPECT_EQ(sigmoid(-1000.0), 0.0); // no inf/inf = NaN
  EXPECT_NEAR(sigmoid(-40.0) / std::exp(-40.0), 1.0, 1e-12);
}

TEST(Metrics, RelativeRmseAndMaxAbs) {
  // ||(0.3, -0.4)|| / ||(3, 4)|| = 0.5 / 5.
  EXPECT_NEAR(relativeRmse({3.3, 3.6}, {3.0, 4.0}), 0.1, 1e-15);
  EXPECT_NEAR(maxAbsError({3.3, 3.6}, {3.0, 4.0}), 0.4, 1e-15);
  // Zero reference: the norm of the output.
  EXPECT_NEAR(relativeRmse({3.0, 4.0}, {0.0, 0.0}), 5.0, 1e-15);
  EXPECT_EQ(relativeRmse({0.0}, {0.0}), 0.0);
  // Mismatched sizes and NaN never pass a bar.
  EXPECT_FALSE(relativeRmse({1.0}, {1.0, 2.0}) <= 1.0);
  EXPECT_FALSE(maxAbsError({1.0}, {1.0, 2.0}) <= 1.0);
  EXPECT_FALSE(maxAbsError({NAN, 1.0}, {1.0, 1.0}) <= 1.0);
  EXPECT_FALSE(relativeRmse({NAN, 1.0}, {1.0, 1.0}) <= 1.0);
}

//===----------------------------------------------------------------------===//
// Hand-computed recurrences (B = H = HV = 1, T = 2, K = V = 2 unless noted)
//===----------------------------------------------------------------------===//

TEST(HandComputed, DeltaRule) {
  // t=1: k=(1,0) v=(1,2) beta=.5, S0=0: r=0, S1 = .5 k v^T = [[.5,1],[0,0]],
  //      q=(1,1): o1 = S1^T q = (.5, 1).
  // t=2: k=(.6,.8) v=(3,-1) beta=1: r = S1^T k = (.3,.6), v-r = (2.7,-1.6),
  //      S2 = S1 + k (v-r)^T = [[2.12, .04], [2.16, -1.28]],
  //      q=(0,2): o2 = 2 * row 1 = (4.32, -2.56).
  GatedDeltaArgs a;
  a.q = make({1, 2, 1, 2}, {1, 1, 0, 2});
  a.k = make({1, 2, 1, 2}, {1, 0, 0.6, 0.8});
  a.v = make({1, 2, 1, 2}, {1, 2, 3, -1});
  a.beta = make({1, 2, 1}, {0.5, 1.0});
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {0.5, 1, 4.32, -2.56}), 1e-14));
  EXPECT_TRUE(
      near(r.finalState, make({1, 1, 2, 2}, {2.12, 0.04, 2.16, -1.28}), 1e-14));
  // With beta = 1 the last key now retrieves exactly its value: S2^T k2 = v2.
  const double *S = r.finalState.data.data();
  EXPECT_NEAR(S[0] * 0.6 + S[2] * 0.8, 3.0, 1e-14);
  EXPECT_NEAR(S[1] * 0.6 + S[3] * 0.8, -1.0, 1e-14);
}

TEST(HandComputed, AdditiveWithScale) {
  // scale = .5, no gate.
  // t=1: k=(1,2) v=(1,-1): S1 = [[1,-1],[2,-2]]; q=(1,0): o1 = .5 (1,-1).
  // t=2: k=(0,1) v=(2,3): S2 = [[1,-1],[4,1]];  q=(1,1): o2 = .5 (5,0).
  GatedDeltaArgs a;
  a.update = Update::Additive;
  a.q = make({1, 2, 1, 2}, {1, 0, 1, 1});
  a.k = make({1, 2, 1, 2}, {1, 2, 0, 1});
  a.v = make({1, 2, 1, 2}, {1, -1, 2, 3});
  a.scale = 0.5;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {0.5, -0.5, 2.5, 0}), 1e-15));
  EXPECT_TRUE(near(r.finalState, make({1, 1, 2, 2}, {1, -1, 4, 1}), 1e-15));
}

TEST(HandComputed, DefaultScaleIsInverseSqrtK) {
  // K = 4, V = 2, T = 1, beta absent (1): S = k v^T with k = e0, v = (2,6);
  // q = e0: o = scale * v, scale = 1/sqrt(4) = .5 -> (1, 3).
  GatedDeltaArgs a;
  a.q = make({1, 1, 1, 4}, {1, 0, 0, 0});
  a.k = make({1, 1, 1, 4}, {1, 0, 0, 0});
  a.v = make({1, 1, 1, 2}, {2, 6});
  EXPECT_TRUE(near(run(a).o, make({1, 1, 1, 2}, {1, 3}), 1e-15));
  a.scale = 2.0;
  EXPECT_TRUE(near(run(a).o, make({1, 1, 1, 2}, {4, 12}), 1e-15));
}

TEST(HandComputed, HeadWiseGateAdditive) {
  // g = (log .5, log .25) head-wise, scale 1.
  // t=1: S1 = .5 * 0 + (1,0)(2,4)^T = [[2,4],[0,0]];  q=(1,1): o1 = (2,4).
  // t=2: S2 = .25 S1 + (0,1)(1,1)^T = [[.5,1],[1,1]]; q=(1,1): o2 = (1.5,2).
  GatedDeltaArgs a;
  a.update = Update::Additive;
  a.q = make({1, 2, 1, 2}, {1, 1, 1, 1});
  a.k = make({1, 2, 1, 2}, {1, 0, 0, 1});
  a.v = make({1, 2, 1, 2}, {2, 4, 1, 1});
  a.g = make({1, 2, 1}, {std::log(0.5), std::log(0.25)});
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {2, 4, 1.5, 2}), 1e-15));
  EXPECT_TRUE(near(r.finalState, make({1, 1, 2, 2}, {0.5, 1, 1, 1}), 1e-15));
}

TEST(HandComputed, HeadWiseGateDeltaWithInitialState) {
  // GDN: g = log .5 at both steps, beta = 1, S0 = [[1,2],[3,4]], scale 1.
  // t=1: decay -> [[.5,1],[1.5,2]]; k=(1,0): r=(.5,1), row 0 := v=(10,20):
  //      S1 = [[10,20],[1.5,2]]; q=(0,1): o1 = (1.5, 2).
  // t=2: decay -> [[5,10],[.75,1]]; k=(0,1): r=(.75,1), row 1 := v=(0,0):
  //      S2 = [[5,10],[0,0]]; q=(1,1): o2 = (5, 10).
  GatedDeltaArgs a;
  a.q = make({1, 2, 1, 2}, {0, 1, 1, 1});
  a.k = make({1, 2, 1, 2}, {1, 0, 0, 1});
  a.v = make({1, 2, 1, 2}, {10, 20, 0, 0});
  a.g = make({1, 2, 1}, {std::log(0.5), std::log(0.5)});
  a.initialState = make({1, 1, 2, 2}, {1, 2, 3, 4});
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {1.5, 2, 5, 10}), 1e-14));
  EXPECT_TRUE(near(r.finalState, make({1, 1, 2, 2}, {5, 10, 0, 0}), 1e-14));
}

TEST(HandComputed, ChannelWiseGateAdditive) {
  // GLA: alpha = (.5, .25) per K-row at both steps, scale 1.
  // t=1: S1 = (1,1)(4,8)^T = [[4,8],[4,8]]; q=(1,0): o1 = (4,8).
  // t=2: decay -> [[2,4],[1,2]]; + (1,0)(1,1)^T -> S2 = [[3,5],[1,2]];
  //      q=(1,1): o2 = (4,7).
  GatedDeltaArgs a;
  a.update = Update::Additive;
  a.q = make({1, 2, 1, 2}, {1, 0, 1, 1});
  a.k = make({1, 2, 1, 2}, {1, 1, 1, 0});
  a.v = make({1, 2, 1, 2}, {4, 8, 1, 1});
  const double l5 = std::log(0.5), l25 = std::log(0.25);
  a.g = make({1, 2, 1, 2}, {l5, l25, l5, l25});
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {4, 8, 4, 7}), 1e-15));
  EXPECT_TRUE(near(r.finalState, make({1, 1, 2, 2}, {3, 5, 1, 2}), 1e-15));
}

TEST(HandComputed, ChannelWiseGateDelta) {
  // KDA: same gates and inputs as above, beta = .5 at both steps.
  // t=1: S1 = .5 (1,1)(4,8)^T = [[2,4],[2,4]]; q=(1,0): o1 = (2,4).
  // t=2: decay -> [[1,2],[.5,1]]; k=(1,0): r=(1,2), v-r=(0,-1),
  //      S2 = [[1,1.5],[.5,1]]; q=(1,1): o2 = (1.5, 2.5).
  GatedDeltaArgs a;
  a.q = make({1, 2, 1, 2}, {1, 0, 1, 1});
  a.k = make({1, 2, 1, 2}, {1, 1, 1, 0});
  a.v = make({1, 2, 1, 2}, {4, 8, 1, 1});
  const double l5 = std::log(0.5), l25 = std::log(0.25);
  a.g = make({1, 2, 1, 2}, {l5, l25, l5, l25});
  a.beta = make({1, 2, 1}, {0.5, 0.5});
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(near(r.o, make({1, 2, 1, 2}, {2, 4, 1.5, 2.5}), 1e-15));
  EXPECT_TRUE(near(r.finalState, make({1, 1, 2, 2}, {1, 1.5, 0.5, 1}), 1e-15));
}

//===----------------------------------------------------------------------===//
// Structural properties of the recurrence
//===----------------------------------------------------------------------===//

/// Rows of a random orthonormal K x K basis (Gram-Schmidt, applied twice).
std::vector<std::vector<double>> orthonormalBasis(Rng &rng, int64_t K) {
  std::vector<std::vector<double>> basis;
  while (static_cast<int64_t>(basis.size()) < K) {
    std::vector<double> x(K);
    for (double &e : x)
      e = rng.normal();
    for (int pass = 0; pass < 2; ++pass)
      for (const auto &b : basis) {
        double d = 0.0;
        for (int64_t i = 0; i < K; ++i)
          d += x[i] * b[i];
        for (int64_t i = 0; i < K; ++i)
          x[i] -= d * b[i];
      }
    double n = 0.0;
    for (double e : x)
      n += e * e;
    for (double &e : x)
      e /= std::sqrt(n);
    basis.push_back(x);
  }
  return basis;
}

TEST(DeltaRule, OrthonormalKeysRetrieveEveryValue) {
  // Write T = K associations k_t -> v_t (beta = 1, no gate, zero state) with
  // orthonormal keys. Batch row b reads with q = k_b at the last step, so
  // o[b, T-1] must equal v_b: every written value is retrieved.
  constexpr int64_t K = 8, V = 8, T = K, B = K;
  Rng rng(11);
  const auto basis = orthonormalBasis(rng, K);
  const Tensor values = rng.normal({T, V});
  GatedDeltaArgs a;
  a.q = rng.normal({B, T, 1, K});
  a.k = Tensor({B, T, 1, K});
  a.v = Tensor({B, T, 1, V});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < K; ++i)
        a.k.at({b, t, 0, i}) = basis[t][i];
      for (int64_t j = 0; j < V; ++j)
        a.v.at({b, t, 0, j}) = values.at({t, j});
    }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < K; ++i)
      a.q.at({b, T - 1, 0, i}) = basis[b][i];
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < V; ++j)
      EXPECT_NEAR(r.o.at({b, T - 1, 0, j}), values.at({b, j}), 1e-12)
          << "value " << b << " channel " << j;
}

TEST(DeltaRule, RewritingAKeyReplacesItsValue) {
  // k_a -> v1, k_b -> v2, k_a -> v3 with beta = 1: reading k_a gives v3 (the
  // delta rule erases v1), reading k_b still gives v2.
  constexpr int64_t K = 4, V = 3;
  Rng rng(12);
  const auto basis = orthonormalBasis(rng, K);
  const Tensor vals = rng.normal({3, V});
  GatedDeltaArgs a;
  a.q = Tensor({2, 3, 1, K});
  a.k = Tensor({2, 3, 1, K});
  a.v = Tensor({2, 3, 1, V});
  const int keyOf[3] = {0, 1, 0};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      for (int64_t i = 0; i < K; ++i)
        a.k.at({b, t, 0, i}) = basis[keyOf[t]][i];
      for (int64_t j = 0; j < V; ++j)
        a.v.at({b, t, 0, j}) = vals.at({t, j});
    }
  for (int64_t i = 0; i < K; ++i) {
    a.q.at({0, 2, 0, i}) = basis[0][i];
    a.q.at({1, 2, 0, i}) = basis[1][i];
  }
  a.scale = 1.0;
  GatedDeltaResult r = run(a);
  for (int64_t j = 0; j < V; ++j) {
    EXPECT_NEAR(r.o.at({0, 2, 0, j}), vals.at({2, j}), 1e-12);
    EXPECT_NEAR(r.o.at({1, 2, 0, j}), vals.at({1, j}), 1e-12);
  }
}

TEST(Additive, EqualsExplicitDecayedSum) {
  // S_t = (prod_{r<=t} alpha_r) * S_0 + sum_{s<=t} (prod_{r in (s,t]} alpha_r)
  //       * k_s v_s^T  (alpha per K-row),  o_t = S_t^T (scale q_t).
  constexpr int64_t T = 6, H = 1, HV = 2, K = 3, V = 4;
  Rng rng(21);
  GatedDeltaArgs a = randomKda(rng, 1, T, H, HV, K, V);
  a.update = Update::Additive;
  a.beta = Tensor();
  GatedDeltaResult r = run(a);
  const double scale = 1.0 / std::sqrt(3.0);

  for (int64_t hv = 0; hv < HV; ++hv)
    for (int64_t t = 0; t < T; ++t) {
      // decay(s, t)[i] = prod_{r in (s, t]} alpha_r[i] (s = -1: from S_0).
      auto decay = [&](int64_t s, int64_t i) {
        double p = 1.0;
        for (int64_t rr = s + 1; rr <= t; ++rr)
          p *= std::exp(a.g.at({0, rr, hv, i}));
        return p;
      };
      std::vector<double> S(K * V);
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j) {
          double x = decay(-1, i) * a.initialState.at({0, hv, i, j});
          for (int64_t s = 0; s <= t; ++s)
            x += decay(s, i) * a.k.at({0, s, 0, i}) * a.v.at({0, s, hv, j});
          S[i * V + j] = x;
        }
      for (int64_t j = 0; j < V; ++j) {
        double o = 0.0;
        for (int64_t i = 0; i < K; ++i)
          o += S[i * V + j] * scale * a.q.at({0, t, 0, i});
        EXPECT_NEAR(r.o.at({0, t, hv, j}), o, 1e-13) << "t=" << t;
      }
      if (t == T - 1) {
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j)
            EXPECT_NEAR(r.finalState.at({0, hv, i, j}), S[i * V + j], 1e-13);
      }
    }
}

TEST(GatedDelta, GvaEqualsExplicitlyRepeatedHeads) {
  // HV = 2H: value head hv reads q/k head hv / 2. Repeating q/k heads
  // explicitly (H' = HV) must give identical results.
  Rng rng(31);
  GatedDeltaArgs a = randomKda(rng, 2, 7, 2, 4, 5, 3);
  a.qkL2Norm = true;
  a.q = rng.normal({2, 7, 2, 5});
  a.k = rng.normal({2, 7, 2, 5});
  GatedDeltaArgs b = a;
  b.q = repeatHeads(a.q, 2);
  b.k = repeatHeads(a.k, 2);
  GatedDeltaResult ra = run(a), rb = run(b);
  EXPECT_TRUE(near(ra.o, rb.o, 1e-15));
  EXPECT_TRUE(near(ra.finalState, rb.finalState, 1e-15));
  // And the grouping is hv / 2, not hv % 2: swapping q/k heads changes o.
  GatedDeltaArgs c = b;
  for (int64_t bt = 0; bt < 14; ++bt)
    for (int64_t i = 0; i < 5; ++i) {
      std::swap(c.q.data[(bt * 4 + 1) * 5 + i], c.q.data[(bt * 4 + 2) * 5 + i]);
      std::swap(c.k.data[(bt * 4 + 1) * 5 + i], c.k.data[(bt * 4 + 2) * 5 + i]);
    }
  EXPECT_FALSE(near(ra.o, run(c).o, 1e-6));
}

TEST(GatedDelta, VarlenEqualsSeparateRuns) {
  // Uneven lengths including 1 and 0; K, V not powers of two.
  const std::vector<int64_t> cu = {0, 4, 5, 5, 11};
  constexpr int64_t T = 11, H = 1, HV = 2, K = 5, V = 3;
  Rng rng(41);
  GatedDeltaArgs a = randomKda(rng, 1, T, H, HV, K, V, 4);
  a.cuSeqlens = cu;
  GatedDeltaResult r = run(a);
  ASSERT_EQ(r.finalState.shape, (std::vector<int64_t>{4, HV, K, V}));
  for (int64_t n = 0; n < 4; ++n) {
    GatedDeltaArgs s = a;
    s.cuSeqlens.clear();
    s.q = tokens(a.q, cu[n], cu[n + 1]);
    s.k = tokens(a.k, cu[n], cu[n + 1]);
    s.v = tokens(a.v, cu[n], cu[n + 1]);
    s.g = tokens(a.g, cu[n], cu[n + 1]);
    s.beta = tokens(a.beta, cu[n], cu[n + 1]);
    s.initialState = pick(a.initialState, {n});
    GatedDeltaResult rs = run(s);
    EXPECT_TRUE(near(tokens(r.o, cu[n], cu[n + 1]), rs.o, 1e-15))
        << "seq " << n;
    EXPECT_TRUE(near(pick(r.finalState, {n}), rs.finalState, 1e-15))
        << "seq " << n;
  }
  // The empty sequence returns its initial state unchanged.
  EXPECT_TRUE(near(pick(r.finalState, {2}), pick(a.initialState, {2}), 0.0));
}

TEST(GatedDelta, ResumingFromBoundaryStatesReproducesTheRun) {
  constexpr int64_t T = 37, C = 8, HV = 2, K = 6, V = 5;
  Rng rng(51);
  GatedDeltaArgs a = randomKda(rng, 1, T, 1, HV, K, V);
  a.boundaryInterval = C;
  GatedDeltaResult full = run(a);
  ASSERT_EQ(full.boundaryStates.shape, (std::vector<int64_t>{1, 5, HV, K, V}));
  EXPECT_TRUE(near(pick(full.boundaryStates, {0, 0}), a.initialState, 0.0));
  for (int64_t j = 0; j < 5; ++j) {
    GatedDeltaArgs s = a;
    s.boundaryInterval = 0;
    s.q = tokens(a.q, j * C, T);
    s.k = tokens(a.k, j * C, T);
    s.v = tokens(a.v, j * C, T);
    s.g = tokens(a.g, j * C, T);
    s.beta = tokens(a.beta, j * C, T);
    s.initialState = pick(full.boundaryStates, {0, j});
    GatedDeltaResult rs = run(s);
    EXPECT_TRUE(near(tokens(full.o, j * C, T), rs.o, 1e-13)) << "chunk " << j;
    EXPECT_TRUE(near(full.finalState, rs.finalState, 1e-13)) << "chunk " << j;
  }
}

TEST(GatedDelta, BoundaryIntervalNear2To63IsOneState) {
  // Any positive interval is valid (the verifier accepts 2^63 - 1): one
  // boundary state per sequence, the one before its first token. NT was
  // computed as (L + C - 1) / C, which overflowed to a negative count.
  constexpr int64_t HV = 1, K = 3, V = 2;
  Rng rng(53);
  GatedDeltaArgs a = randomKda(rng, 2, 9, 1, HV, K, V);
  a.boundaryInterval = std::numeric_limits<int64_t>::max();
  GatedDeltaResult r = run(a);
  ASSERT_EQ(r.boundaryStates.shape, (std::vector<int64_t>{2, 1, HV, K, V}));
  for (int64_t n = 0; n < 2; ++n)
    EXPECT_TRUE(near(pick(r.boundaryStates, {n, 0}), pick(a.initialState, {n}),
                     0.0));
}

TEST(GatedDelta, VarlenBoundaryStates) {
  // Lengths 10, 3, 0, 8 with C = 4: NT = ceil(10 / 4) = 3. State j exists
  // iff chunk j exists (j * C < length); others are zero.
  const std::vector<int64_t> cu = {0, 10, 13, 13, 21};
  constexpr int64_t C = 4, HV = 1, K = 3, V = 2;
  Rng rng(52);
  GatedDeltaArgs a = randomKda(rng, 1, 21, 1, HV, K, V, 4);
  a.cuSeqlens = cu;
  a.boundaryInterval = C;
  GatedDeltaResult r = run(a);
  ASSERT_EQ(r.boundaryStates.shape, (std::vector<int64_t>{4, 3, HV, K, V}));
  const Tensor zero({1, HV, K, V});
  for (int64_t n = 0; n < 4; ++n) {
    const int64_t len = cu[n + 1] - cu[n];
    for (int64_t j = 0; j < 3; ++j) {
      const Tensor bs = pick(r.boundaryStates, {n, j});
      if (j * C >= len) {
        EXPECT_TRUE(near(bs, zero, 0.0)) << "seq " << n << " chunk " << j;
        continue;
      }
      if (j == 0) {
        EXPECT_TRUE(near(bs, pick(a.initialState, {n}), 0.0));
      }
      GatedDeltaArgs s = a;
      s.cuSeqlens.clear();
      s.boundaryInterval = 0;
      const int64_t t0 = cu[n] + j * C, t1 = cu[n + 1];
      s.q = tokens(a.q, t0, t1);
      s.k = tokens(a.k, t0, t1);
      s.v = tokens(a.v, t0, t1);
      s.g = tokens(a.g, t0, t1);
      s.beta = tokens(a.beta, t0, t1);
      s.initialState = bs;
      GatedDeltaResult rs = run(s);
      EXPECT_TRUE(near(tokens(r.o, t0, t1), rs.o, 1e-13));
      EXPECT_TRUE(near(pick(r.finalState, {n}), rs.finalState, 1e-13));
    }
  }
}

TEST(GatedDelta, VMajorIsTransposedKMajor) {
  Rng rng(61);
  GatedDeltaArgs a = randomKda(rng, 2, 9, 1, 2, 4, 3);
  a.boundaryInterval = 4;
  GatedDeltaResult rk = run(a);
  GatedDeltaArgs b = a;
  b.layout = StateLayout::VMajor;
  b.initialState = transposeLast2(a.initialState);
  GatedDeltaResult rv = run(b);
  ASSERT_EQ(rv.finalState.shape, (std::vector<int64_t>{2, 2, 3, 4}));
  EXPECT_TRUE(near(rv.o, rk.o, 0.0));
  EXPECT_TRUE(near(rv.finalState, transposeLast2(rk.finalState), 0.0));
  EXPECT_TRUE(near(rv.boundaryStates, transposeLast2(rk.boundaryStates), 0.0));
}

//===----------------------------------------------------------------------===//
// Prologue: L2 norm, beta and gate activations
//===----------------------------------------------------------------------===//

TEST(Prologue, L2NormByHand) {
  // q = k = (.003, .004): sum of squares 2.5e-5, so with the 1e-6 epsilon
  // o = q.k (normalised) * v = 2.5e-5 / (2.5e-5 + 1e-6) = 0.961538...
  GatedDeltaArgs a;
  a.update = Update::Additive;
  a.q = make({1, 1, 1, 2}, {0.003, 0.004});
  a.k = a.q;
  a.v = make({1, 1, 1, 1}, {1.0});
  a.scale = 1.0;
  a.qkL2Norm = true;
  EXPECT_NEAR(run(a).o.data[0], 2.5e-5 / (2.5e-5 + 1e-6), 1e-15);
  // The scale applies after normalisation: o scales linearly with it.
  a.scale = 3.0;
  EXPECT_NEAR(run(a).o.data[0], 3.0 * 2.5e-5 / (2.5e-5 + 1e-6), 1e-14);
}

TEST(Prologue, L2NormEqualsNormalisedInputs) {
  Rng rng(71);
  GatedDeltaArgs a = randomKda(rng, 1, 5, 2, 2, 4, 3);
  a.q = rng.normal({1, 5, 2, 4}, 3.0);
  a.k = rng.normal({1, 5, 2, 4}, 3.0);
  a.qkL2Norm = true;
  GatedDeltaArgs b = a;
  b.qkL2Norm = false;
  for (Tensor *t : {&b.q, &b.k})
    for (size_t r = 0; r < 10; ++r) {
      double ss = 0.0;
      for (int i = 0; i < 4; ++i)
        ss += t->data[r * 4 + i] * t->data[r * 4 + i];
      for (int i = 0; i < 4; ++i)
        t->data[r * 4 + i] /= std::sqrt(ss + 1e-6);
    }
  EXPECT_TRUE(near(run(a).o, run(b).o, 1e-14));
}

TEST(Prologue, BetaActivations) {
  // K = V = 1, k = q = v = 1, scale 1, T = 1: o = beta.
  GatedDeltaArgs a;
  a.q = make({1, 1, 1, 1}, {1});
  a.k = a.q;
  a.v = make({1, 1, 1, 1}, {1});
  a.scale = 1.0;
  a.beta = make({1, 1, 1}, {0.3});
  EXPECT_NEAR(run(a).o.data[0], 0.3, 1e-16);
  a.betaActivation = BetaActivation::Sigmoid;
  EXPECT_NEAR(run(a).o.data[0], 1.0 / (1.0 + std::exp(-0.3)), 1e-15);
  a.betaActivation = BetaActivation::SigmoidNegEigval;
  EXPECT_NEAR(run(a).o.data[0], 2.0 / (1.0 + std::exp(-0.3)), 1e-15);
  // Two steps with 2*sigmoid(b) > 1: S1 = b1, S2 = S1 + b2 (0 - S1): the
  // memory overshoots (negative eigenvalue 1 - b2 of the transition).
  a.q = make({1, 2, 1, 1}, {1, 1});
  a.k = a.q;
  a.v = make({1, 2, 1, 1}, {1, 0});
  a.beta = make({1, 2, 1}, {0.0, 2.0});
  const double b1 = 1.0, b2 = 2.0 / (1.0 + std::exp(-2.0));
  EXPECT_NEAR(run(a).o.data[1], b1 * (1.0 - b2), 1e-15);
  EXPECT_LT(run(a).o.data[1], 0.0);
}

TEST(Prologue, GateActivationForms) {
  // Channel-wise [B=1, T=1, HV=2, K=2].
  const Tensor gRaw = make({1, 1, 2, 2}, {0.3, -1.2, 2.0, 25.0});
  const Tensor aLog = make({2}, {std::log(2.0), std::log(16.0)});
  const Tensor dt = make({2, 2}, {0.1, 0.2, -0.5, -4.0});
  const double x[4] = {0.4, -1.0, 1.5, 21.0}; // gRaw + dtBias
  const double A[4] = {2.0, 2.0, 16.0, 16.0}; // exp(A_log) per head
  auto sp = [](double y) { return std::log(1.0 + std::exp(y)); };
  auto sg = [](double y) { return 1.0 / (1.0 + std::exp(-y)); };
  Tensor g;

  GateParams p;
  p.activation = GateActivation::Softplus;
  p.aLog = aLog;
  p.dtBias = dt;
  ASSERT_TRUE(gateActivation(gRaw, p, true, g).ok());
  ASSERT_EQ(g.shape, gRaw.shape);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(g.data[i], -A[i] * sp(x[i]), 1e-14) << i;
  // x = 21 > 20: softplus(x) = x, not log(1 + e^21) = 21 + 7.6e-10.
  EXPECT_NEAR(g.data[3], -16.0 * 21.0, 1e-12);
  EXPECT_GT(std::fabs(-16.0 * sp(21.0) - g.data[3]), 1e-8);

  // Softplus without A_log: factor exp(0) = 1; without dt_bias: 0.
  GateParams q;
  q.activation = GateActivation::Softplus;
  ASSERT_TRUE(gateActivation(gRaw, q, true, g).ok());
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(g.data[i], -sp(gRaw.data[i]), 1e-14) << i;
  EXPECT_EQ(g.data[3], -25.0);

  GateParams lb;
  lb.activation = GateActivation::LowerBound;
  lb.lowerBound = -3.0;
  lb.aLog = aLog;
  lb.dtBias = dt;
  ASSERT_TRUE(gateActivation(gRaw, lb, true, g).ok());
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(g.data[i], -3.0 * sg(A[i] * x[i]), 1e-14) << i;
  lb.aLog = Tensor(); // g = lb * sigmoid(g_raw + dt_bias)
  ASSERT_TRUE(gateActivation(gRaw, lb, true, g).ok());
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(g.data[i], -3.0 * sg(x[i]), 1e-14) << i;

  // Head-wise [B=1, T=2, HV=2] with dtBias [HV].
  const Tensor hRaw = make({1, 2, 2}, {0.5, -0.5, 1.0, 3.0});
  GateParams h;
  h.activation = GateActivation::LowerBound;
  h.aLog = make({2}, {0.0, std::log(0.5)});
  h.dtBias = make({2}, {1.0, -1.0});
  ASSERT_TRUE(gateActivation(hRaw, h, false, g).ok());
  const double hx[4] = {1.5 * 1.0, -1.5 * 0.5, 2.0 * 1.0, 2.0 * 0.5};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(g.data[i], -5.0 * sg(hx[i]), 1e-14) << i;

  // None copies.
  ASSERT_TRUE(gateActivation(gRaw, GateParams{}, true, g).ok());
  EXPECT_EQ(g.data, gRaw.data);
}

TEST(Prologue, GatedDeltaAppliesActivationsLikeManualPreprocessing) {
  Rng rng(81);
  GatedDeltaArgs a = randomKda(rng, 1, 6, 1, 2, 4, 3);
  a.g = rng.normal({1, 6, 2, 4}, 2.0);
  a.beta = rng.normal({1, 6, 2});
  a.betaActivation = BetaActivation::Sigmoid;
  a.gate.activation = GateActivation::Softplus;
  a.gate.aLog = rng.normal({2});
  a.gate.dtBias = rng.normal({2, 4});
  GatedDeltaArgs b = a;
  b.gate = GateParams{};
  b.betaActivation = BetaActivation::None;
  ASSERT_TRUE(gateActivation(a.g, a.gate, true, b.g).ok());
  for (double &x : b.beta.data)
    x = sigmoid(x);
  GatedDeltaResult ra = run(a), rb = run(b);
  EXPECT_TRUE(near(ra.o, rb.o, 0.0));
  EXPECT_TRUE(near(ra.finalState, rb.finalState, 0.0));
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

TEST(Decode, EqualsOneTokenGatedDeltaOnNamedSlots) {
  constexpr int64_t N = 3, P = 5, H = 1, HV = 2, K = 4, V = 3;
  Rng rng(91);
  DecodeArgs d;
  d.q = rng.normal({N, H, K});
  d.k = rng.normal({N, H, K});
  d.v = rng.normal({N, HV, V});
  d.g = rng.normal({N, HV, K});
  d.beta = rng.normal({N, HV});
  d.statePool = rng.normal({P, HV, K, V});
  d.indices = {3, -1, 0};
  d.qkL2Norm = true;
  d.betaActivation = BetaActivation::Sigmoid;
  d.gate.activation = GateActivation::LowerBound;
  d.gate.dtBias = rng.normal({HV, K});
  DecodeResult r;
  Status s = decodeStep(d, r);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(r.o.shape, (std::vector<int64_t>{N, HV, V}));
  ASSERT_EQ(r.statePool.shape, d.statePool.shape);

  const int64_t slot = HV * K * V;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t idx = d.indices[n];
    if (idx < 0) { // skipped: zero output
      for (int64_t i = 0; i < HV * V; ++i)
        EXPECT_EQ(r.o.data[n * HV * V + i], 0.0);
      continue;
    }
    GatedDeltaArgs a;
    a.q = pick(d.q, {n});
    a.q.shape = {1, 1, H, K};
    a.k = pick(d.k, {n});
    a.k.shape = {1, 1, H, K};
    a.v = pick(d.v, {n});
    a.v.shape = {1, 1, HV, V};
    a.g = pick(d.g, {n});
    a.g.shape = {1, 1, HV, K};
    a.beta = pick(d.beta, {n});
    a.beta.shape = {1, 1, HV};
    a.initialState = pick(d.statePool, {idx});
    a.qkL2Norm = true;
    a.betaActivation = d.betaActivation;
    a.gate = d.gate;
    GatedDeltaResult ref = run(a);
    Tensor o = pick(r.o, {n});
    o.shape = {1, 1, HV, V};
    EXPECT_TRUE(near(o, ref.o, 0.0)) << "sequence " << n;
    EXPECT_TRUE(near(pick(r.statePool, {idx}), ref.finalState, 0.0));
  }
  // Unnamed slots 1, 2, 4 are bit-exact copies.
  for (int64_t p : {1, 2, 4})
    EXPECT_EQ(std::memcmp(r.statePool.data.data() + p * slot,
                          d.statePool.data.data() + p * slot,
                          sizeof(double) * slot),
              0)
        << "slot " << p;
  // The named slots did change.
  EXPECT_FALSE(near(pick(r.statePool, {3}), pick(d.statePool, {3}), 1e-9));
}

TEST(Decode, ReadsOneSlotWritesAnother) {
  // Sequence n steps from readIndices[n] into indices[n]: the same as a
  // step in place on a pool whose destination slot held the read state.
  constexpr int64_t N = 4, P = 9, H = 1, HV = 2, K = 4, V = 3;
  Rng rng(93);
  DecodeArgs d;
  d.q = rng.normal({N, H, K});
  d.k = rng.normal({N, H, K});
  d.v = rng.normal({N, HV, V});
  d.g = rng.logSigmoid({N, HV, K});
  d.beta = rng.normal({N, HV});
  d.betaActivation = BetaActivation::Sigmoid;
  d.qkL2Norm = true;
  d.statePool = rng.normal({P, HV, K, V});
  d.readIndices = {2, 5, -1, 2}; // two sequences may read one slot
  d.indices = {6, -1, 8, 7};     // -1: no write; sequence 2 is skipped
  DecodeResult r;
  Status s = decodeStep(d, r);
  ASSERT_TRUE(s.ok()) << s.message;
  const int64_t slot = HV * K * V;
  for (int64_t n = 0; n < N; ++n) {
    if (d.readIndices[n] < 0) {
      for (int64_t i = 0; i < HV * V; ++i)
        EXPECT_EQ(r.o.data[n * HV * V + i], 0.0);
      continue;
    }
    DecodeArgs inPlace = d;
    inPlace.readIndices.clear();
    inPlace.indices = std::vector<int64_t>(N, -1);
    inPlace.indices[n] = d.readIndices[n];
    DecodeResult ref;
    ASSERT_TRUE(decodeStep(inPlace, ref).ok());
    EXPECT_TRUE(near(pick(r.o, {n}), pick(ref.o, {n}), 0.0)) << "sequence " << n;
    if (d.indices[n] >= 0)
      EXPECT_TRUE(near(pick(r.statePool, {d.indices[n]}),
                       pick(ref.statePool, {d.readIndices[n]}), 0.0));
  }
  // Read slots, the unwritten destination of sequence 1 and every other
  // slot are bit-exact copies.
  for (int64_t p : {0, 1, 2, 3, 4, 5})
    EXPECT_EQ(std::memcmp(r.statePool.data.data() + p * slot,
                          d.statePool.data.data() + p * slot,
                          sizeof(double) * slot),
              0)
        << "slot " << p;

  auto refuses = [&](std::vector<int64_t> reads) {
    DecodeArgs bad = d;
    bad.readIndices = std::move(reads);
    Status st = decodeStep(bad, r);
    return !st.ok() && st.message.find("readIndices") != std::string::npos;
  };
  EXPECT_TRUE(refuses({2, 6, -1, 2})); // reads sequence 0's destination
  EXPECT_TRUE(refuses({2, 9, -1, 2})); // past the pool
  EXPECT_TRUE(refuses({2, 5, -1}));    // not N entries
}

TEST(Decode, MultiTokenKeepsTheStateAfterEachNamedToken) {
  // Sequence n takes T tokens from slot indices[n][0] and writes its state
  // after token t to indices[n][t]: the T-token recurrence from that slot,
  // its state after t + 1 tokens in the slot.
  constexpr int64_t N = 3, T = 4, P = 16, H = 1, HV = 2, K = 4, V = 3;
  Rng rng(94);
  DecodeArgs d;
  d.q = rng.normal({N, T, H, K});
  d.k = rng.normal({N, T, H, K});
  d.v = rng.normal({N, T, HV, V});
  d.g = rng.logSigmoid({N, T, HV, K});
  d.beta = rng.normal({N, T, HV});
  d.betaActivation = BetaActivation::Sigmoid;
  d.qkL2Norm = true;
  d.statePool = rng.normal({P, HV, K, V});
  d.indices = {3, 9, -1, 11,   // state after token 2 not kept
               -1, 4, 5, 6,    // sequence 1: indices[1][0] < 0, skipped
               0, 1, 2, 7};
  DecodeResult r;
  Status s = decodeStep(d, r);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(r.o.shape, (std::vector<int64_t>{N, T, HV, V}));
  for (int64_t n : {0, 2}) {
    for (int64_t t = 0; t < T; ++t) {
      GatedDeltaArgs a;
      auto first = [&](const Tensor &x, std::vector<int64_t> shape) {
        Tensor y = pick(x, {n});
        y.data.resize(y.numel() / T * (t + 1));
        y.shape = shape;
        return y;
      };
      a.q = first(d.q, {1, t + 1, H, K});
      a.k = first(d.k, {1, t + 1, H, K});
      a.v = first(d.v, {1, t + 1, HV, V});
      a.g = first(d.g, {1, t + 1, HV, K});
      a.beta = first(d.beta, {1, t + 1, HV});
      a.initialState = pick(d.statePool, {d.indices[n * T]});
      a.qkL2Norm = true;
      a.betaActivation = d.betaActivation;
      GatedDeltaResult ref = run(a);
      Tensor o = pick(r.o, {n, t});
      Tensor refO = pick(ref.o, {0, t});
      EXPECT_TRUE(near(o, refO, 1e-12)) << "sequence " << n << " token " << t;
      if (int64_t dest = d.indices[n * T + t]; dest >= 0)
        EXPECT_TRUE(near(pick(r.statePool, {dest}), ref.finalState, 1e-12))
            << "sequence " << n << " token " << t;
    }
  }
  for (int64_t i = 0; i < T * HV * V; ++i)
    EXPECT_EQ(r.o.data[1 * T * HV * V + i], 0.0); // skipped
  // The skipped sequence's destinations and unnamed slots are bit-exact.
  const int64_t slot = HV * K * V;
  for (int64_t p : {4, 5, 6, 8, 10, 12, 13, 14, 15})
    EXPECT_EQ(std::memcmp(r.statePool.data.data() + p * slot,
                          d.statePool.data.data() + p * slot,
                          sizeof(double) * slot),
              0)
        << "slot " << p;
  DecodeArgs bad = d;
  bad.indices[5] = 3; // slot 3 twice
  EXPECT_FALSE(decodeStep(bad, r).ok());
}

TEST(Decode, VMajorPoolIsTransposed) {
  Rng rng(92);
  DecodeArgs d;
  d.q = rng.unitRows({2, 1, 3});
  d.k = rng.unitRows({2, 1, 3});
  d.v = rng.normal({2, 1, 2});
  d.g = rng.logSigmoid({2, 1});
  d.statePool = rng.normal({3, 1, 3, 2});
  d.indices = {2, 0};
  DecodeArgs t = d;
  t.layout = StateLayout::VMajor;
  t.statePool = transposeLast2(d.statePool);
  DecodeResult rd, rt;
  ASSERT_TRUE(decodeStep(d, rd).ok());
  ASSERT_TRUE(decodeStep(t, rt).ok());
  EXPECT_TRUE(near(rt.o, rd.o, 0.0));
  EXPECT_TRUE(near(rt.statePool, transposeLast2(rd.statePool), 0.0));
}

//===----------------------------------------------------------------------===//
// Window attention
//===----------------------------------------------------------------------===//

/// Full causal softmax attention per batch row, written without the max
/// subtraction (inputs are small), heads mapped as in the header.
Tensor fullCausal(const Tensor &q, const Tensor &k, const Tensor &v,
                  double scale) {
  const int64_t B = q.shape[0], T = q.shape[1], HQ = q.shape[2], K = q.shape[3],
                HK = k.shape[2], HV = v.shape[2], V = v.shape[3],
                HO = std::max(HQ, HV);
  Tensor o({B, T, HO, V});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < HO; ++h) {
        double den = 0.0;
        std::vector<double> num(V, 0.0);
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0.0;
          for (int64_t i = 0; i < K; ++i)
            dot +=
                q.at({b, t, h / (HO / HQ), i}) * k.at({b, s, h / (HO / HK), i});
          const double w = std::exp(scale * dot);
          den += w;
          for (int64_t j = 0; j < V; ++j)
            num[j] += w * v.at({b, s, h / (HO / HV), j});
        }
        for (int64_t j = 0; j < V; ++j)
          o.at({b, t, h, j}) = num[j] / den;
      }
  return o;
}

Tensor window(const WindowArgs &a) {
  Tensor o;
  Status s = windowAttention(a, o);
  EXPECT_TRUE(s.ok()) << s.message;
  return o;
}

TEST(Window, WidthOneReturnsTheMappedValueHead) {
  Rng rng(101);
  // KDA grouping: HQ = HK = 2 < HV = 4, output head o reads v head o.
  WindowArgs a;
  a.q = rng.normal({2, 5, 2, 3});
  a.k = rng.normal({2, 5, 2, 3});
  a.v = rng.normal({2, 5, 4, 2});
  a.window = 1;
  EXPECT_TRUE(near(window(a), a.v, 1e-15));
  // GQA: HQ = 4 > HK = HV = 2, output head o reads v head o / 2.
  a.q = rng.normal({2, 5, 4, 3});
  a.v = rng.normal({2, 5, 2, 2});
  EXPECT_TRUE(near(window(a), repeatHeads(a.v, 2), 1e-15));
}

TEST(Window, WideWindowEqualsFullCausalAttention) {
  Rng rng(102);
  WindowArgs a;
  a.q = rng.normal({2, 7, 2, 4});
  a.k = rng.normal({2, 7, 2, 4});
  a.v = rng.normal({2, 7, 2, 3});
  const Tensor ref = fullCausal(a.q, a.k, a.v, 0.5); // default 1/sqrt(4)
  for (int64_t w : {7, 8, 1000}) {
    a.window = w;
    EXPECT_TRUE(near(window(a), ref, 1e-14)) << "W=" << w;
  }
  a.window = 6; // one position short: differs at the last token
  EXPECT_FALSE(near(window(a), ref, 1e-9));
  a.window = 7;
  a.scale = 0.9;
  EXPECT_TRUE(near(window(a), fullCausal(a.q, a.k, a.v, 0.9), 1e-14));
}

TEST(Window, PerPositionWindows) {
  Rng rng(103);
  WindowArgs a;
  a.q = rng.normal({1, 6, 1, 3});
  a.k = rng.normal({1, 6, 1, 3});
  a.v = rng.normal({1, 6, 1, 2});
  a.window = 3;
  const Tensor perOp = window(a);
  a.window = 0;
  a.windowPerPosition = std::vector<int64_t>(6, 3);
  EXPECT_TRUE(near(window(a), perOp, 0.0));

  // By hand, K = V = 1, q = 1, scale 1, k = (0, 0, ln 3), v = (1, 2, 4),
  // windows (1, 2, 2): o0 = v0 = 1; o1 = (v0 + v1)/2 = 1.5;
  // o2 over positions 1, 2 with weights 1 : 3 -> (2 + 3*4)/4 = 3.5.
  WindowArgs h;
  h.q = make({1, 3, 1, 1}, {1, 1, 1});
  h.k = make({1, 3, 1, 1}, {0, 0, std::log(3.0)});
  h.v = make({1, 3, 1, 1}, {1, 2, 4});
  h.scale = 1.0;
  h.windowPerPosition = {1, 2, 2};
  EXPECT_TRUE(near(window(h), make({1, 3, 1, 1}, {1, 1.5, 3.5}), 1e-15));
  // Window 3 at the last token: weights 1 : 1 : 3 -> (1 + 2 + 12)/5 = 3.
  h.windowPerPosition = {1, 2, 3};
  EXPECT_NEAR(window(h).data[2], 3.0, 1e-15);
}

TEST(Window, VarlenNeverCrossesSequenceBoundaries) {
  const std::vector<int64_t> cu = {0, 3, 4, 9};
  Rng rng(104);
  WindowArgs a;
  a.q = rng.normal({1, 9, 2, 3});
  a.k = rng.normal({1, 9, 1, 3});
  a.v = rng.normal({1, 9, 1, 2});
  a.cuSeqlens = cu;
  for (bool perPosition : {false, true}) {
    if (perPosition) {
      a.window = 0;
      a.windowPerPosition = {2, 5, 1, 4, 3, 9, 2, 4, 6};
    } else {
      a.window = 4;
    }
    const Tensor o = window(a);
    for (size_t n = 0; n + 1 < cu.size(); ++n) {
      WindowArgs s = a;
      s.cuSeqlens.clear();
      s.q = tokens(a.q, cu[n], cu[n + 1]);
      s.k = tokens(a.k, cu[n], cu[n + 1]);
      s.v = tokens(a.v, cu[n], cu[n + 1]);
      if (perPosition)
        s.windowPerPosition.assign(a.windowPerPosition.begin() + cu[n],
                                   a.windowPerPosition.begin() + cu[n + 1]);
      EXPECT_TRUE(near(tokens(o, cu[n], cu[n + 1]), window(s), 0.0))
          << "sequence " << n << " perPosition " << perPosition;
    }
  }
}

TEST(Window, EarlierKeysAreTheTailOfTheWholeSequence) {
  // Queries of rows t0.. of a sequence with the keys of rows 0..: the same
  // rows as the whole sequence's window attention, per op and per position,
  // GQA; the keys may also start later than row 0 where the window allows.
  Rng rng(106);
  WindowArgs whole;
  whole.q = rng.normal({1, 23, 4, 3});
  whole.k = rng.normal({1, 23, 2, 3});
  whole.v = rng.normal({1, 23, 2, 2});
  for (int perPosition = 0; perPosition < 2; ++perPosition) {
    whole.window = perPosition ? 0 : 5;
    if (perPosition)
      for (int64_t t = 0; t < 23; ++t)
        whole.windowPerPosition.push_back(1 + (t * 7) % 9);
    const Tensor ref = window(whole);
    for (int64_t t0 : {0, 1, 9, 22}) {
      for (int64_t k0 : {int64_t(0), std::max<int64_t>(0, t0 - 8)}) {
        WindowArgs part = whole;
        part.q = tokens(whole.q, t0, 23);
        part.k = tokens(whole.k, k0, 23);
        part.v = tokens(whole.v, k0, 23);
        if (perPosition)
          part.windowPerPosition.assign(whole.windowPerPosition.begin() + t0,
                                        whole.windowPerPosition.end());
        EXPECT_TRUE(near(window(part), tokens(ref, t0, 23), 1e-15))
            << "queries from " << t0 << ", keys from " << k0
            << " perPosition " << perPosition;
      }
    }
  }
  // Fewer keys than queries, and earlier keys with cuSeqlens: errors.
  WindowArgs bad = whole;
  bad.window = 5;
  bad.windowPerPosition.clear();
  bad.k = tokens(whole.k, 1, 23);
  bad.v = tokens(whole.v, 1, 23);
  Tensor o;
  Status s = windowAttention(bad, o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("S >= T = 23 rows"), std::string::npos) << s.message;
  bad.q = tokens(whole.q, 2, 23);
  bad.cuSeqlens = {0, 10, 21};
  s = windowAttention(bad, o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("dense"), std::string::npos) << s.message;
}

TEST(Window, HeadGroupingEqualsExplicitRepetition) {
  Rng rng(105);
  // GQA: HQ = 4, HK = HV = 2.
  WindowArgs a;
  a.q = rng.normal({1, 6, 4, 3});
  a.k = rng.normal({1, 6, 2, 3});
  a.v = rng.normal({1, 6, 2, 2});
  a.window = 3;
  WindowArgs b = a;
  b.k = repeatHeads(a.k, 2);
  b.v = repeatHeads(a.v, 2);
  EXPECT_TRUE(near(window(a), window(b), 0.0));
  // KDA grouping: HQ = HK = 1, HV = 3.
  a.q = rng.normal({1, 6, 1, 3});
  a.k = rng.normal({1, 6, 1, 3});
  a.v = rng.normal({1, 6, 3, 2});
  b = a;
  b.q = repeatHeads(a.q, 3);
  b.k = repeatHeads(a.k, 3);
  const Tensor o = window(a);
  ASSERT_EQ(o.shape, (std::vector<int64_t>{1, 6, 3, 2}));
  EXPECT_TRUE(near(o, window(b), 0.0));
}

TEST(Window, LargeScoresStayFinite) {
  // Scores of +-1e4: a softmax without max subtraction would overflow.
  WindowArgs a;
  a.q = make({1, 3, 1, 1}, {100, 100, 100});
  a.k = make({1, 3, 1, 1}, {100, -100, 100});
  a.v = make({1, 3, 1, 1}, {1, 2, 3});
  a.scale = 1.0;
  a.window = 3;
  EXPECT_TRUE(near(window(a), make({1, 3, 1, 1}, {1, 1, 2}), 1e-12));
}

//===----------------------------------------------------------------------===//
// Hybrids and multi-scale
//===----------------------------------------------------------------------===//

TEST(Hybrid, SumAndGatedByHand) {
  const Tensor a = make({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor b = make({1, 1, 2, 2}, {10, 20, 30, 40});
  const Tensor c = make({1, 1, 2, 2}, {-1, -1, -1, -1});
  Tensor o;
  ASSERT_TRUE(hybridCombine({a, b, c}, Combine::Sum, Tensor(), o).ok());
  EXPECT_TRUE(near(o, make({1, 1, 2, 2}, {10, 21, 32, 43}), 0.0));

  // Head-wise z: sigmoid(0) = .5 for head 0, sigmoid(ln 3) = .75 for head 1.
  // head 0: .5 (1,2) + .5 (10,20) = (5.5, 11);
  // head 1: .75 (3,4) + .25 (30,40) = (9.75, 13).
  ASSERT_TRUE(hybridCombine({a, b}, Combine::Gated,
                            make({1, 1, 2}, {0, std::log(3.0)}), o)
                  .ok());
  EXPECT_TRUE(near(o, make({1, 1, 2, 2}, {5.5, 11, 9.75, 13}), 1e-14));

  // Channel-wise z: weights (.75, .25, .5, .25).
  ASSERT_TRUE(hybridCombine({a, b}, Combine::Gated,
                            make({1, 1, 2, 2}, {std::log(3.0), -std::log(3.0),
                                                0, -std::log(3.0)}),
                            o)
                  .ok());
  EXPECT_TRUE(
      near(o,
           make({1, 1, 2, 2}, {0.75 * 1 + 0.25 * 10, 0.25 * 2 + 0.75 * 20,
                               0.5 * 3 + 0.5 * 30, 0.25 * 4 + 0.75 * 40}),
           1e-14));
}

TEST(MultiScale, SumEqualsSumOfScaledRuns) {
  Rng rng(111);
  MultiScaleArgs m;
  m.base = randomKda(rng, 1, 8, 1, 2, 3, 4);
  m.decayScales = {1.0, 0.5, 2.0};
  MultiScaleResult r;
  Status s = multiScale(m, r);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(r.finalStates.shape, (std::vector<int64_t>{3, 1, 2, 3, 4}));
  Tensor sum(r.o.shape);
  for (int64_t i = 0; i < 3; ++i) {
    GatedDeltaArgs a = m.base;
    for (double &x : a.g.data)
      x *= m.decayScales[i];
    GatedDeltaResult ri = run(a);
    for (size_t j = 0; j < sum.data.size(); ++j)
      sum.data[j] += ri.o.data[j];
    EXPECT_TRUE(near(pick(r.finalStates, {i, 0}), ri.finalState, 0.0));
  }
  EXPECT_TRUE(near(r.o, sum, 1e-14));
}

TEST(MultiScale, GatedWithOwnGatesEqualsMixOfSeparateRuns) {
  Rng rng(112);
  MultiScaleArgs m;
  m.base = randomKda(rng, 1, 7, 1, 2, 3, 2);
  m.base.g = Tensor();
  m.gates = {rng.logSigmoid({1, 7, 2, 3}), rng.logSigmoid({1, 7, 2})};
  m.combine = Combine::Gated;
  m.z = rng.normal({1, 7, 2, 2});
  MultiScaleResult r;
  Status s = multiScale(m, r);
  ASSERT_TRUE(s.ok()) << s.message;
  Tensor mix(r.o.shape);
  for (int64_t i = 0; i < 2; ++i) {
    GatedDeltaArgs a = m.base;
    a.g = m.gates[i];
    GatedDeltaResult ri = run(a);
    for (size_t j = 0; j < mix.data.size(); ++j)
      mix.data[j] += sigmoid(m.z.data[(j / 2) * 2 + i]) * ri.o.data[j];
    EXPECT_TRUE(near(pick(r.finalStates, {i, 0}), ri.finalState, 0.0));
  }
  EXPECT_TRUE(near(r.o, mix, 1e-14));
}

TEST(MultiScale, ScalesApplyToTheActivatedGate) {
  // With a gate activation, scale m multiplies the activated log-decay.
  Rng rng(113);
  MultiScaleArgs m;
  m.base = randomKda(rng, 1, 5, 1, 1, 3, 2);
  m.base.g = rng.normal({1, 5, 1, 3});
  m.base.gate.activation = GateActivation::LowerBound;
  m.decayScales = {1.0, 0.25};
  MultiScaleResult r;
  ASSERT_TRUE(multiScale(m, r).ok());
  Tensor g;
  ASSERT_TRUE(gateActivation(m.base.g, m.base.gate, true, g).ok());
  Tensor sum(r.o.shape);
  for (double c : m.decayScales) {
    GatedDeltaArgs a = m.base;
    a.gate = GateParams{};
    a.g = g;
    for (double &x : a.g.data)
      x *= c;
    GatedDeltaResult ri = run(a);
    for (size_t j = 0; j < sum.data.size(); ++j)
      sum.data[j] += ri.o.data[j];
  }
  EXPECT_TRUE(near(r.o, sum, 1e-14));
}

//===----------------------------------------------------------------------===//
// Argument validation
//===----------------------------------------------------------------------===//

/// The status is an error whose message starts with "<name>: expected".
::testing::AssertionResult failsNaming(const Status &s,
                                       const std::string &name) {
  if (s.ok())
    return ::testing::AssertionFailure() << "unexpected success";
  if (s.message.rfind(name + ": expected", 0) != 0)
    return ::testing::AssertionFailure()
           << "message does not start with '" << name
           << ": expected': " << s.message;
  return ::testing::AssertionSuccess() << s.message;
}

TEST(Errors, GatedDeltaArguments) {
  Rng rng(121);
  const GatedDeltaArgs good = randomKda(rng, 1, 6, 2, 4, 3, 2);
  GatedDeltaResult r;
  ASSERT_TRUE(gatedDelta(good, r).ok());

  GatedDeltaArgs a = good;
  a.q = rng.normal({6, 2, 3}); // rank 3
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "q"));
  a = good;
  a.k = rng.normal({1, 6, 2, 4});
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "k"));
  a = good;
  a.v = rng.normal({1, 6, 3, 2}); // HV = 3 not a multiple of H = 2
  a.g = Tensor();
  a.beta = Tensor();
  a.initialState = Tensor();
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "v"));
  a = good;
  a.q.data.pop_back(); // storage does not match the shape
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "q"));
  a = good;
  a.g = rng.normal({1, 6, 4, 2}); // last axis not K
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "g"));
  a = good;
  a.beta = rng.normal({1, 6, 2});
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "beta"));
  a = good;
  a.update = Update::Additive; // with beta
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "beta"));
  a = good;
  a.initialState = rng.normal({1, 4, 2, 3}); // VMajor shape under KMajor
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "initialState"));
  a = good;
  a.boundaryInterval = -1;
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "boundaryInterval"));
  a = good;
  a.gate.activation = GateActivation::LowerBound;
  a.gate.lowerBound = 0.0;
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "gate.lowerBound"));
  a.gate.lowerBound = -5.5;
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "gate.lowerBound"));
  a = good;
  a.gate.activation = GateActivation::Softplus;
  a.gate.aLog = rng.normal({2});
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "gate.aLog"));
  a.gate.aLog = Tensor();
  a.gate.dtBias = rng.normal({4}); // channel-wise gate wants [HV, K]
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "gate.dtBias"));
  a = good;
  a.gate.aLog = rng.normal({4}); // parameters without an activation
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "gate.aLog"));
  a = good;
  a.g = Tensor();
  a.gate.activation = GateActivation::Softplus;
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "g"));
  a = good;
  a.beta = Tensor();
  a.betaActivation = BetaActivation::Sigmoid;
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "beta"));
  a = good;
  a.scale = std::nan("");
  EXPECT_TRUE(failsNaming(gatedDelta(a, r), "scale"));

  // cu_seqlens: B != 1, not starting at 0, decreasing, not ending at T.
  GatedDeltaArgs v = randomKda(rng, 2, 6, 1, 1, 3, 2, 0);
  v.cuSeqlens = {0, 3, 6};
  EXPECT_TRUE(failsNaming(gatedDelta(v, r), "cuSeqlens"));
  v = randomKda(rng, 1, 6, 1, 1, 3, 2, 0);
  for (const std::vector<int64_t> &cu : std::vector<std::vector<int64_t>>{
           {1, 6}, {0, 4, 3, 6}, {0, 3, 5}, {0}}) {
    v.cuSeqlens = cu;
    EXPECT_TRUE(failsNaming(gatedDelta(v, r), "cuSeqlens"));
  }
  v.cuSeqlens = {0, 3, 6};
  v.initialState = rng.normal({1, 1, 3, 2}); // N = 2 sequences
  EXPECT_TRUE(failsNaming(gatedDelta(v, r), "initialState"));
  // The result is untouched by a failing call.
  v.initialState = Tensor();
  ASSERT_TRUE(gatedDelta(v, r).ok());
  const Tensor before = r.o;
  v.cuSeqlens = {0, 7};
  EXPECT_FALSE(gatedDelta(v, r).ok());
  EXPECT_EQ(r.o.data, before.data);
}

TEST(Errors, DecodeArguments) {
  Rng rng(122);
  DecodeArgs good;
  good.q = rng.unitRows({2, 1, 3});
  good.k = rng.unitRows({2, 1, 3});
  good.v = rng.normal({2, 2, 2});
  good.statePool = rng.normal({4, 2, 3, 2});
  good.indices = {1, 3};
  DecodeResult r;
  ASSERT_TRUE(decodeStep(good, r).ok());
  DecodeArgs d = good;
  d.indices = {1, 4}; // out of the pool
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "indices"));
  d.indices = {2, 2}; // duplicate
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "indices"));
  d.indices = {-1, -1}; // both skipped is fine
  EXPECT_TRUE(decodeStep(d, r).ok());
  d.indices = {1};
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "indices"));
  d = good;
  d.statePool = rng.normal({4, 2, 2, 3}); // VMajor pool under KMajor
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "statePool"));
  d = good;
  d.v = rng.normal({2, 3, 2}); // HV = 3, H = 1: fine; pool wants HV = 3
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "statePool"));
  d = good;
  d.q = rng.normal({2, 2, 3});
  d.k = d.q;
  d.v = rng.normal({2, 3, 2}); // HV = 3 not a multiple of H = 2
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "v"));
  d = good;
  d.update = Update::Additive;
  d.beta = rng.normal({2, 2});
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "beta"));
  d = good;
  d.g = rng.normal({2, 2, 2});
  EXPECT_TRUE(failsNaming(decodeStep(d, r), "g"));
}

TEST(Errors, WindowHybridMultiScaleArguments) {
  Rng rng(123);
  WindowArgs good;
  good.q = rng.normal({1, 5, 2, 3});
  good.k = rng.normal({1, 5, 2, 3});
  good.v = rng.normal({1, 5, 2, 2});
  good.window = 2;
  Tensor o;
  ASSERT_TRUE(windowAttention(good, o).ok());
  WindowArgs w = good;
  w.window = 0;
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "window"));
  w.windowPerPosition = {1, 2, 3, 4, 5};
  EXPECT_TRUE(windowAttention(w, o).ok());
  w.window = 2; // both forms
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "window"));
  w.window = 0;
  w.windowPerPosition = {1, 2, 0, 4, 5};
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "windowPerPosition"));
  w.windowPerPosition = {1, 2, 3};
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "windowPerPosition"));
  w = good;
  w.v = rng.normal({1, 5, 3, 2}); // HV = 3 vs HQ = 2
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "v"));
  w = good;
  w.k = rng.normal({1, 5, 4, 3}); // HK = 4 does not divide HO = 2
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "k"));
  w = good;
  w.k = rng.normal({1, 5, 2, 4}); // K differs from q
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "k"));
  w = good;
  w.cuSeqlens = {0, 2, 4};
  EXPECT_TRUE(failsNaming(windowAttention(w, o), "cuSeqlens"));

  const Tensor a({1, 2, 2, 3}), b({1, 2, 2, 3}), c({1, 2, 3, 3});
  EXPECT_TRUE(
      failsNaming(hybridCombine({a}, Combine::Sum, Tensor(), o), "outputs"));
  EXPECT_TRUE(failsNaming(hybridCombine({a, c}, Combine::Sum, Tensor(), o),
                          "outputs[1]"));
  EXPECT_TRUE(failsNaming(
      hybridCombine({a, b, b}, Combine::Gated, Tensor({1, 2, 2}), o),
      "outputs"));
  EXPECT_TRUE(failsNaming(
      hybridCombine({a, b}, Combine::Gated, Tensor({1, 2, 3}), o), "z"));
  EXPECT_TRUE(
      failsNaming(hybridCombine({a, b}, Combine::Gated, Tensor(), o), "z"));

  MultiScaleArgs m;
  m.base = randomKda(rng, 1, 4, 1, 1, 2, 2);
  MultiScaleResult mr;
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "decayScales")); // no scales
  m.decayScales = {1.0};
  m.gates = {rng.logSigmoid({1, 4, 1})};
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "decayScales")); // both
  m.decayScales.clear();
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "base.g")); // g with gates
  m.base.g = Tensor();
  m.gates.push_back(rng.logSigmoid({1, 4, 2}));
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "gates[1]"));
  m.gates.pop_back();
  ASSERT_TRUE(multiScale(m, mr).ok());
  m.combine = Combine::Gated;
  m.z = rng.normal({1, 4, 1, 2}); // M = 1
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "z"));
  m.base.q = rng.normal({4, 1, 2});
  EXPECT_TRUE(failsNaming(multiScale(m, mr), "base.q"));

  Tensor g;
  GateParams p;
  p.activation = GateActivation::Softplus;
  p.dtBias = rng.normal({2});
  EXPECT_TRUE(failsNaming(gateActivation(rng.normal({1, 3, 2, 4}), p, true, g),
                          "params.dtBias"));
  EXPECT_TRUE(failsNaming(gateActivation(Tensor(), p, true, g), "gRaw"));
}

//===----------------------------------------------------------------------===//
// Stability
//===----------------------------------------------------------------------===//

TEST(Stability, LowerBoundGateAtMinusFiveOverLongSequence) {
  constexpr int64_t T = 4096, K = 16, V = 16;
  Rng rng(131);
  GatedDeltaArgs a = randomKda(rng, 1, T, 1, 1, K, V, 0);
  // g_raw = 40: sigmoid -> 1, so every per-token decay is e^-5 in every
  // channel (the lower bound).
  a.g = Tensor({1, T, 1, K}, 40.0);
  a.gate.activation = GateActivation::LowerBound;
  a.gate.lowerBound = -5.0;
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(allFinite(r.o));
  EXPECT_TRUE(allFinite(r.finalState));
  // With e^-5 decay the state is dominated by the last token; it is not 0.
  EXPECT_GT(std::fabs(r.o.data.back()) + std::fabs(r.o.data[V * (T - 1)]), 0.0);
}

TEST(Stability, SoftplusGateWithLargeALog) {
  constexpr int64_t T = 4096, K = 16, V = 16;
  Rng rng(132);
  GatedDeltaArgs a = randomKda(rng, 1, T, 1, 1, K, V, 0);
  a.g = rng.normal({1, T, 1, K}, 5.0);
  a.gate.activation = GateActivation::Softplus;
  a.gate.aLog = make({1}, {std::log(16.0)});
  a.gate.dtBias = rng.normal({1, K});
  GatedDeltaResult r = run(a);
  EXPECT_TRUE(allFinite(r.o));
  EXPECT_TRUE(allFinite(r.finalState));
  // Additive update with the same decays stays finite too.
  a.update = Update::Additive;
  a.beta = Tensor();
  r = run(a);
  EXPECT_TRUE(allFinite(r.o));
  EXPECT_TRUE(allFinite(r.finalState));
}

} // namespace

//===----------------------------------------------------------------------===//
// The gradient oracle against central finite differences
//===----------------------------------------------------------------------===//

namespace {

/// L = sum(dO * o) + sum(dHT * finalState) for the forward arguments.
double gradLoss(const GatedDeltaArgs &a, const Tensor &dO, const Tensor &dHT) {
  GatedDeltaResult r;
  Status s = gatedDelta(a, r);
  EXPECT_TRUE(s.ok()) << s.message;
  double loss = 0.0;
  for (size_t i = 0; i < r.o.data.size(); ++i)
    loss += dO.data[i] * r.o.data[i];
  if (dHT.present())
    for (size_t i = 0; i < r.finalState.data.size(); ++i)
      loss += dHT.data[i] * r.finalState.data[i];
  return loss;
}

/// Every element of every input: the analytic gradient against
/// (L(x + h) - L(x - h)) / 2h.
void expectGradientsMatchFiniteDifferences(const GatedDeltaArgs &base,
                                           unsigned seed) {
  Rng rng(seed);
  GatedDeltaResult fwd;
  ASSERT_TRUE(gatedDelta(base, fwd).ok());
  GatedDeltaGradArgs ga;
  ga.forward = base;
  ga.dO = rng.normal(fwd.o.shape);
  ga.dFinalState = rng.normal(fwd.finalState.shape);
  GatedDeltaGrads g;
  Status s = gatedDeltaGrad(ga, g);
  ASSERT_TRUE(s.ok()) << s.message;

  struct Input {
    const char *name;
    Tensor GatedDeltaArgs::*field = nullptr;
    Tensor GateParams::*gateField = nullptr;
    const Tensor *grad;
  };
  std::vector<Input> inputs = {
      {"q", &GatedDeltaArgs::q, nullptr, &g.dq},
      {"k", &GatedDeltaArgs::k, nullptr, &g.dk},
      {"v", &GatedDeltaArgs::v, nullptr, &g.dv},
      {"g", &GatedDeltaArgs::g, nullptr, &g.dg},
      {"beta", &GatedDeltaArgs::beta, nullptr, &g.dbeta},
      {"initialState", &GatedDeltaArgs::initialState, nullptr,
       &g.dInitialState},
      {"aLog", nullptr, &GateParams::aLog, &g.dALog},
      {"dtBias", nullptr, &GateParams::dtBias, &g.dDtBias},
  };
  const double h = 1e-5;
  int64_t checked = 0;
  for (const Input &in : inputs) {
    GatedDeltaArgs a = base;
    Tensor &x = in.field ? a.*in.field : a.gate.*in.gateField;
    if (!x.present()) {
      EXPECT_FALSE(in.grad->present()) << in.name << ": a gradient of an "
                                                     "absent input";
      continue;
    }
    ASSERT_EQ(in.grad->shape, x.shape) << in.name;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double x0 = x.data[i];
      x.data[i] = x0 + h;
      const double up = gradLoss(a, ga.dO, ga.dFinalState);
      x.data[i] = x0 - h;
      const double down = gradLoss(a, ga.dO, ga.dFinalState);
      x.data[i] = x0;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(in.grad->data[i], numeric, 1e-6 * (1.0 + std::abs(numeric)))
          << in.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

} // namespace

TEST(GatedDeltaGrad, KimiPrologueVarlenGvaStatesMatchFiniteDifferences) {
  // The delta rule with Kimi's prologue (l2 norm, beta sigmoid, softplus
  // gate with A_log and dt_bias), two value heads per q / k head, two
  // sequences of one batch row, V-major states in and out.
  Rng rng(11);
  GatedDeltaArgs a;
  const int64_t T = 7, H = 1, HV = 2, K = 3, V = 2;
  a.q = rng.normal({1, T, H, K});
  a.k = rng.normal({1, T, H, K});
  a.v = rng.normal({1, T, HV, V});
  a.g = rng.normal({1, T, HV, K});
  a.beta = rng.normal({1, T, HV});
  a.cuSeqlens = {0, 3, T};
  a.initialState = rng.normal({2, HV, V, K}, 0.5);
  a.layout = StateLayout::VMajor;
  a.qkL2Norm = true;
  a.betaActivation = BetaActivation::Sigmoid;
  a.gate.activation = GateActivation::Softplus;
  a.gate.aLog = rng.normal({HV}, 0.3);
  a.gate.dtBias = rng.normal({HV, K}, 0.3);
  expectGradientsMatchFiniteDifferences(a, 1);
}

TEST(GatedDeltaGrad, LowerBoundGateNegativeEigenvaluesMatchFiniteDifferences) {
  Rng rng(12);
  GatedDeltaArgs a;
  const int64_t B = 2, T = 5, H = 2, HV = 2, K = 4, V = 3;
  a.q = rng.normal({B, T, H, K});
  a.k = rng.unitRows({B, T, H, K});
  a.v = rng.normal({B, T, HV, V});
  a.g = rng.normal({B, T, HV, K});
  a.beta = rng.normal({B, T, HV});
  a.initialState = rng.normal({B, HV, K, V}, 0.5);
  a.scale = 0.7;
  a.betaActivation = BetaActivation::SigmoidNegEigval;
  a.gate.activation = GateActivation::LowerBound;
  a.gate.lowerBound = -3.0;
  a.gate.aLog = rng.normal({HV}, 0.3);
  expectGradientsMatchFiniteDifferences(a, 2);
}

TEST(GatedDeltaGrad, AdditiveHeadWiseGateWithoutStatesMatchesFiniteDifferences) {
  // Precomputed log-space head-wise decay (no activation), the additive
  // update, no beta, no initial state.
  Rng rng(13);
  GatedDeltaArgs a;
  const int64_t B = 1, T = 6, H = 1, HV = 3, K = 2, V = 2;
  a.q = rng.normal({B, T, H, K});
  a.k = rng.normal({B, T, H, K});
  a.v = rng.normal({B, T, HV, V});
  a.g = rng.normal({B, T, HV}, 0.2);
  for (double &x : a.g.data)
    x = -std::abs(x);
  a.update = Update::Additive;
  expectGradientsMatchFiniteDifferences(a, 3);
}

TEST(GatedDeltaGrad, DeltaRuleWithoutGateOrBetaMatchesFiniteDifferences) {
  Rng rng(14);
  GatedDeltaArgs a;
  a.q = rng.normal({1, 4, 1, 3});
  a.k = rng.unitRows({1, 4, 1, 3});
  a.v = rng.normal({1, 4, 1, 2});
  a.initialState = rng.normal({1, 1, 3, 2}, 0.5);
  expectGradientsMatchFiniteDifferences(a, 4);
}

TEST(GatedDeltaGrad, ErrorsNameTheArgument) {
  Rng rng(15);
  GatedDeltaGradArgs ga;
  ga.forward.q = rng.normal({1, 4, 1, 3});
  ga.forward.k = rng.normal({1, 4, 1, 3});
  ga.forward.v = rng.normal({1, 4, 1, 2});
  GatedDeltaGrads g;
  ga.dO = rng.normal({1, 4, 1, 3});
  Status s = gatedDeltaGrad(ga, g);
  EXPECT_NE(s.message.find("dO"), std::string::npos) << s.message;
  ga.dO = rng.normal({1, 4, 1, 2});
  ga.forward.boundaryInterval = 2;
  s = gatedDeltaGrad(ga, g);
  EXPECT_NE(s.message.find("forward.boundaryInterval"), std::string::npos)
      << s.message;
  ga.forward.boundaryInterval = 0;
  ga.dFinalState = rng.normal({1, 1, 3, 2});
  s = gatedDeltaGrad(ga, g);
  EXPECT_TRUE(s.ok()) << s.message; // dht without h0 is fine
  ga.dFinalState = rng.normal({2, 1, 3, 2});
  s = gatedDeltaGrad(ga, g);
  EXPECT_NE(s.message.find("dFinalState"), std::string::npos) << s.message;
}

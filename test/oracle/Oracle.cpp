//===- Oracle.cpp - float64 reference for every kda operation -------------===//
//
// A direct transcription of /work/shared/SPEC.md sections 2, 4 and 5 in
// float64: the token-by-token recurrence, a naive windowed softmax, and the
// combinators built on top. Nothing here is tiled, fused or reordered for
// speed: clarity and independence from the compiler's algorithms are the
// point.
//
// Conventions and choices the specification leaves open (documented here and
// asserted by OracleTest.cpp):
//  * Softplus gate form without A_log uses A_log = 0, i.e. a factor of 1:
//    g = -softplus(g_raw + dt_bias). Missing dt_bias means dt_bias = 0.
//  * Gate parameters (aLog / dtBias) given with GateActivation::None are an
//    error: they would otherwise be silently ignored.
//  * Boundary state j of a sequence of length L exists iff j * C < L (the
//    chunk starting there exists); other entries, and all entries of a
//    length-0 sequence, are zero.
//  * multiScale with decayScales multiplies the *activated* gate (the
//    log-decay) by c_m, so each scale decays as alpha^c_m.
//  * relativeRmse / maxAbsError return +inf when the sizes differ and NaN
//    when any difference is NaN, so no accuracy bar can pass by accident.
//
//===----------------------------------------------------------------------===//

#include "test/oracle/Oracle.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

namespace kda::oracle {

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor(std::vector<int64_t> s, double fill) : shape(std::move(s)) {
  data.assign(static_cast<size_t>(numel()), fill);
}

int64_t Tensor::numel() const {
  if (shape.empty())
    return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    assert(d >= 0 && "negative extent");
    n *= d;
  }
  return n;
}

int64_t Tensor::offset(const std::vector<int64_t> &index) const {
  assert(index.size() == shape.size() && "index rank differs from tensor rank");
  int64_t off = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    assert(index[i] >= 0 && index[i] < shape[i] && "index out of bounds");
    off = off * shape[i] + index[i];
  }
  return off;
}

//===----------------------------------------------------------------------===//
// Scalar functions
//===----------------------------------------------------------------------===//

double softplus(double x) {
  // SPEC.md: taken as x for x > 20 (matching the reference kernels, which
  // differ from log(1 + e^x) there by < 2.1e-9). Below the threshold use
  // log1p, and for positive x the rearrangement x + log1p(e^-x) so that e^x
  // never has to be formed.
  if (x > 20.0)
    return x;
  if (x > 0.0)
    return x + std::log1p(std::exp(-x));
  return std::log1p(std::exp(x));
}

double sigmoid(double x) {
  // Evaluate exp only of non-positive arguments: no overflow, no inf/inf.
  if (x >= 0.0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

namespace {

//===----------------------------------------------------------------------===//
// Argument checking helpers
//===----------------------------------------------------------------------===//

std::string str(const std::vector<int64_t> &v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

std::string str(const Tensor &t) {
  return t.present() ? str(t.shape) : "absent";
}

std::string str(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

Status fail(const std::string &name, const std::string &expected,
            const std::string &got) {
  return Status::error(name + ": expected " + expected + ", got " + got);
}

#define KDA_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    Status kdaStatus_ = (expr);                                                \
    if (!kdaStatus_.ok())                                                      \
      return kdaStatus_;                                                       \
  } while (false)

/// A present tensor's extents are non-negative and its storage matches them.
Status checkStorage(const std::string &name, const Tensor &t) {
  if (!t.present())
    return Status::success();
  for (int64_t d : t.shape)
    if (d < 0)
      return fail(name, "non-negative extents", str(t.shape));
  if (static_cast<int64_t>(t.data.size()) != t.numel())
    return fail(
        name, std::to_string(t.numel()) + " elements for shape " + str(t.shape),
        std::to_string(t.data.size()));
  return Status::success();
}

/// `want` has one entry per axis: the required extent, or -1 for "any".
/// `pattern` names the axes, e.g. "[B, T, HV]", for the message.
bool matches(const Tensor &t, const std::vector<int64_t> &want) {
  if (t.shape.size() != want.size())
    return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] >= 0 && t.shape[i] != want[i])
      return false;
  return true;
}

std::string describe(const std::string &pattern,
                     const std::vector<int64_t> &want) {
  bool anyFixed =
      std::any_of(want.begin(), want.end(), [](int64_t w) { return w >= 0; });
  if (!anyFixed)
    return "rank " + std::to_string(want.size()) + " " + pattern;
  std::string s = pattern + " = [";
  for (size_t i = 0; i < want.size(); ++i)
    s += (i ? ", " : "") + (want[i] >= 0 ? std::to_string(want[i]) : "*");
  return s + "]";
}

/// A required tensor of the given shape.
Status checkShape(const std::string &name, const Tensor &t,
                  const std::string &pattern,
                  const std::vector<int64_t> &want) {
  KDA_RETURN_IF_ERROR(checkStorage(name, t));
  if (!matches(t, want))
    return fail(name, describe(pattern, want), str(t));
  return Status::success();
}

/// An optional tensor: absent, or of the given shape.
Status checkOptional(const std::string &name, const Tensor &t,
                     const std::string &pattern,
                     const std::vector<int64_t> &want) {
  if (!t.present())
    return Status::success();
  KDA_RETURN_IF_ERROR(checkStorage(name, t));
  if (!matches(t, want))
    return fail(name, "absent or " + describe(pattern, want), str(t));
  return Status::success();
}

/// Extents that the math divides by or iterates over per head must be >= 1.
Status checkPositive(const std::string &name, const Tensor &t,
                     const std::vector<std::pair<int, const char *>> &axes) {
  for (const auto &[axis, label] : axes)
    if (t.shape[axis] < 1)
      return fail(name, std::string(label) + " >= 1", str(t.shape));
  return Status::success();
}

/// Rebuilds `t` with a new shape of the same element count (a view change).
Tensor reshaped(const Tensor &t, std::vector<int64_t> shape) {
  Tensor r;
  r.shape = std::move(shape);
  r.data = t.data;
  assert(r.numel() == static_cast<int64_t>(r.data.size()));
  return r;
}

//===----------------------------------------------------------------------===//
// Sequences and index math
//===----------------------------------------------------------------------===//

/// Tokens [begin, end) of batch row `batch` form one independent sequence.
struct Span {
  int64_t batch, begin, end;
  int64_t length() const { return end - begin; }
};

/// Splits the [B, T] token grid into sequences: one per batch row, or the
/// cuSeqlens pieces of the single batch row (FlashAttention convention).
Status sequenceSpans(const std::vector<int64_t> &cu, int64_t B, int64_t T,
                     std::vector<Span> &spans) {
  spans.clear();
  if (cu.empty()) {
    for (int64_t b = 0; b < B; ++b)
      spans.push_back({b, 0, T});
    return Status::success();
  }
  if (B != 1)
    return fail("cuSeqlens", "B == 1 with variable-length sequences",
                "B = " + std::to_string(B));
  if (cu.size() < 2)
    return fail("cuSeqlens", "N + 1 >= 2 offsets",
                std::to_string(cu.size()) + " offset(s)");
  if (cu.front() != 0)
    return fail("cuSeqlens", "cuSeqlens[0] == 0", std::to_string(cu.front()));
  for (size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1])
      return fail("cuSeqlens", "non-decreasing offsets",
                  "cuSeqlens[" + std::to_string(i) +
                      "] = " + std::to_string(cu[i]) + " < cuSeqlens[" +
                      std::to_string(i - 1) +
                      "] = " + std::to_string(cu[i - 1]));
    spans.push_back({0, cu[i - 1], cu[i]});
  }
  if (cu.back() != T)
    return fail("cuSeqlens", "last offset == T = " + std::to_string(T),
                std::to_string(cu.back()));
  return Status::success();
}

/// Offset of element [b, t, h, 0] of a row-major [B, T, heads, inner] tensor.
int64_t tokenOffset(int64_t b, int64_t t, int64_t h, int64_t T, int64_t heads,
                    int64_t inner) {
  return ((b * T + t) * heads + h) * inner;
}

/// Copies one stored state ([K, V] for KMajor, [V, K] for VMajor) into a
/// K-major working matrix. The recurrence only ever sees the K-major form.
void loadState(const double *src, StateLayout layout, int64_t K, int64_t V,
               double *S) {
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < V; ++j)
      S[i * V + j] =
          layout == StateLayout::KMajor ? src[i * V + j] : src[j * K + i];
}

void storeState(const double *S, StateLayout layout, int64_t K, int64_t V,
                double *dst) {
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < V; ++j)
      (layout == StateLayout::KMajor ? dst[i * V + j] : dst[j * K + i]) =
          S[i * V + j];
}

std::vector<int64_t> stateShape(StateLayout layout, std::vector<int64_t> lead,
                                int64_t K, int64_t V) {
  lead.push_back(layout == StateLayout::KMajor ? K : V);
  lead.push_back(layout == StateLayout::KMajor ? V : K);
  return lead;
}

std::string statePattern(const std::string &lead, StateLayout layout) {
  return "[" + lead +
         (layout == StateLayout::KMajor ? ", K, V] (KMajor)"
                                        : ", V, K] (VMajor)");
}

//===----------------------------------------------------------------------===//
// The recurrence (SPEC.md section 2), one token
//===----------------------------------------------------------------------===//

/// Advances the K-major K x V state `S` by one token and writes the token's
/// output `o` [V]. `alpha` [K] are the per-row decay factors exp(g) (all
/// equal for head-wise gates, 1 without a gate). `r` is [V] scratch.
/// This is the only place the recurrence is written; gatedDelta and
/// decodeStep (through gatedDelta) both call it.
void recurrenceStep(Update update, int64_t K, int64_t V, double *S,
                    const double *alpha, const double *q, double scale,
                    const double *k, const double *v, double beta, double *r,
                    double *o) {
  // S <- Diag(alpha) S
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < V; ++j)
      S[i * V + j] *= alpha[i];

  if (update == Update::Delta) {
    // r = S^T k: what the decayed memory currently returns for k.
    for (int64_t j = 0; j < V; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < K; ++i)
        acc += S[i * V + j] * k[i];
      r[j] = acc;
    }
    // S <- S + beta k (v - r)^T: erase the old association, write the new.
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j)
        S[i * V + j] += beta * k[i] * (v[j] - r[j]);
  } else {
    // S <- S + k v^T
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j)
        S[i * V + j] += k[i] * v[j];
  }

  // o = S^T (scale q), read after the update.
  for (int64_t j = 0; j < V; ++j) {
    double acc = 0.0;
    for (int64_t i = 0; i < K; ++i)
      acc += S[i * V + j] * (scale * q[i]);
    o[j] = acc;
  }
}

//===----------------------------------------------------------------------===//
// Prologue: validation, q/k normalisation, beta and gate activations
//===----------------------------------------------------------------------===//

/// How arguments are named in messages: gatedDelta uses the field names,
/// multiScale prefixes them with "base." and names per-scale gates itself.
struct Names {
  std::string prefix;
  std::string g;
  std::string operator()(const char *field) const { return prefix + field; }
};

Status gateActivationImpl(const Tensor &gRaw, const GateParams &params,
                          bool channelWise, Tensor &g, const std::string &gName,
                          const std::string &paramPrefix) {
  KDA_RETURN_IF_ERROR(checkStorage(gName, gRaw));
  const int64_t minRank = channelWise ? 2 : 1;
  if (gRaw.rank() < minRank)
    return fail(gName,
                channelWise ? "rank >= 2 [..., HV, K] for channel-wise gates"
                            : "rank >= 1 [..., HV] for head-wise gates",
                str(gRaw));
  const int64_t K = channelWise ? gRaw.shape.back() : 1;
  const int64_t HV = gRaw.shape[gRaw.rank() - minRank];
  const std::string aLogName = paramPrefix + "aLog";
  const std::string dtName = paramPrefix + "dtBias";

  if (params.activation == GateActivation::None) {
    // Parameters without an activation would be silently ignored.
    if (params.aLog.present())
      return fail(aLogName, "absent with gate activation None",
                  str(params.aLog));
    if (params.dtBias.present())
      return fail(dtName, "absent with gate activation None",
                  str(params.dtBias));
    g = gRaw;
    return Status::success();
  }
  if (params.activation != GateActivation::Softplus &&
      params.activation != GateActivation::LowerBound)
    return fail(paramPrefix + "activation", "None, Softplus or LowerBound",
                std::to_string(static_cast<int>(params.activation)));

  KDA_RETURN_IF_ERROR(checkOptional(aLogName, params.aLog, "[HV]", {HV}));
  if (channelWise)
    KDA_RETURN_IF_ERROR(
        checkOptional(dtName, params.dtBias, "[HV, K]", {HV, K}));
  else
    KDA_RETURN_IF_ERROR(checkOptional(dtName, params.dtBias, "[HV]", {HV}));
  const double lb = params.lowerBound;
  if (params.activation == GateActivation::LowerBound &&
      !(lb >= -5.0 && lb < 0.0))
    return fail(paramPrefix + "lowerBound", "a value in [-5, 0)", str(lb));

  g = Tensor(gRaw.shape);
  for (int64_t i = 0; i < gRaw.numel(); ++i) {
    const int64_t c = channelWise ? i % K : 0; // key channel
    const int64_t h = (i / K) % HV;            // value head
    const double x =
        gRaw.data[i] +
        (params.dtBias.present() ? params.dtBias.data[h * K + c] : 0.0);
    // A_log absent: exp(0) = 1 (see the file comment), which for the
    // lower-bound form is exactly the documented g = lb * sigmoid(x).
    const double a =
        params.aLog.present() ? std::exp(params.aLog.data[h]) : 1.0;
    if (params.activation == GateActivation::Softplus)
      g.data[i] = -a * softplus(x);
    else
      g.data[i] = lb * sigmoid(a * x);
  }
  return Status::success();
}

/// Everything the recurrence loop reads, after validation and the prologue.
struct Prepared {
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  std::vector<Span> spans;
  std::vector<double> q, k; // [B, T, H, K], L2-normalised when asked
  Tensor g;                 // activated log-decay, or absent
  std::vector<double> beta; // [B, T, HV] activated; 1 when absent
  double scale = 1.0;
};

void l2NormaliseRows(std::vector<double> &x, int64_t K) {
  for (size_t row = 0; row * K < x.size(); ++row) {
    double *p = x.data() + row * K;
    double ss = 0.0;
    for (int64_t i = 0; i < K; ++i)
      ss += p[i] * p[i];
    const double inv = 1.0 / std::sqrt(ss + 1e-6);
    for (int64_t i = 0; i < K; ++i)
      p[i] *= inv;
  }
}

Status prepare(const GatedDeltaArgs &a, const Names &n, Prepared &p) {
  // q, k [B, T, H, K]
  KDA_RETURN_IF_ERROR(
      checkShape(n("q"), a.q, "[B, T, H, K]", {-1, -1, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive(n("q"), a.q, {{2, "H"}, {3, "K"}}));
  p.B = a.q.shape[0];
  p.T = a.q.shape[1];
  p.H = a.q.shape[2];
  p.K = a.q.shape[3];
  KDA_RETURN_IF_ERROR(checkStorage(n("k"), a.k));
  if (a.k.shape != a.q.shape)
    return fail(n("k"), "the shape of q " + str(a.q.shape), str(a.k));

  // v [B, T, HV, V], HV a multiple of H (GVA)
  KDA_RETURN_IF_ERROR(
      checkShape(n("v"), a.v, "[B, T, HV, V]", {p.B, p.T, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive(n("v"), a.v, {{2, "HV"}, {3, "V"}}));
  p.HV = a.v.shape[2];
  p.V = a.v.shape[3];
  if (p.HV % p.H != 0)
    return fail(n("v"), "HV a multiple of H = " + std::to_string(p.H),
                "HV = " + std::to_string(p.HV));

  // Sequences
  {
    Status s = sequenceSpans(a.cuSeqlens, p.B, p.T, p.spans);
    if (!s.ok())
      return Status::error(n.prefix + s.message);
  }
  const int64_t N = static_cast<int64_t>(p.spans.size());

  // g: absent, head-wise [B, T, HV] or channel-wise [B, T, HV, K]
  if (a.g.present()) {
    KDA_RETURN_IF_ERROR(checkStorage(n.g, a.g));
    if (!matches(a.g, {p.B, p.T, p.HV}) && !matches(a.g, {p.B, p.T, p.HV, p.K}))
      return fail(n.g,
                  describe("[B, T, HV]", {p.B, p.T, p.HV}) + " or " +
                      describe("[B, T, HV, K]", {p.B, p.T, p.HV, p.K}),
                  str(a.g));
    KDA_RETURN_IF_ERROR(
        gateActivationImpl(a.g, a.gate, a.g.rank() == 4, p.g, n.g, n("gate.")));
  } else {
    if (a.gate.activation != GateActivation::None)
      return fail(n.g, "a raw gate tensor when gate.activation is not None",
                  "absent");
    if (a.gate.aLog.present() || a.gate.dtBias.present())
      return fail(n(a.gate.aLog.present() ? "gate.aLog" : "gate.dtBias"),
                  "absent without a gate tensor",
                  str(a.gate.aLog.present() ? a.gate.aLog : a.gate.dtBias));
  }

  // beta: required absent for the additive update, optional for Delta
  if (a.update == Update::Additive) {
    if (a.beta.present())
      return fail(n("beta"), "absent for the additive update", str(a.beta));
    if (a.betaActivation != BetaActivation::None)
      return fail(n("betaActivation"), "None for the additive update",
                  "an activation");
  } else if (a.update == Update::Delta) {
    KDA_RETURN_IF_ERROR(
        checkOptional(n("beta"), a.beta, "[B, T, HV]", {p.B, p.T, p.HV}));
    if (a.betaActivation != BetaActivation::None &&
        a.betaActivation != BetaActivation::Sigmoid &&
        a.betaActivation != BetaActivation::SigmoidNegEigval)
      return fail(n("betaActivation"), "None, Sigmoid or SigmoidNegEigval",
                  std::to_string(static_cast<int>(a.betaActivation)));
    if (a.betaActivation != BetaActivation::None && !a.beta.present())
      return fail(n("beta"), "beta logits when betaActivation is not None",
                  "absent");
  } else {
    return fail(n("update"), "Delta or Additive",
                std::to_string(static_cast<int>(a.update)));
  }

  if (a.layout != StateLayout::KMajor && a.layout != StateLayout::VMajor)
    return fail(n("layout"), "KMajor or VMajor",
                std::to_string(static_cast<int>(a.layout)));
  KDA_RETURN_IF_ERROR(checkOptional(n("initialState"), a.initialState,
                                    statePattern("N, HV", a.layout),
                                    stateShape(a.layout, {N, p.HV}, p.K, p.V)));

  if (a.scale && !std::isfinite(*a.scale))
    return fail(n("scale"), "a finite value", str(*a.scale));
  if (a.boundaryInterval < 0)
    return fail(n("boundaryInterval"), ">= 0 (0: no boundary states)",
                std::to_string(a.boundaryInterval));

  // Prologue. L2 normalisation precedes the scale, which the step applies.
  p.q = a.q.data;
  p.k = a.k.data;
  if (a.qkL2Norm) {
    l2NormaliseRows(p.q, p.K);
    l2NormaliseRows(p.k, p.K);
  }
  p.scale = a.scale.value_or(1.0 / std::sqrt(static_cast<double>(p.K)));
  p.beta.assign(static_cast<size_t>(p.B * p.T * p.HV), 1.0);
  if (a.beta.present()) {
    for (size_t i = 0; i < p.beta.size(); ++i) {
      const double b = a.beta.data[i];
      switch (a.betaActivation) {
      case BetaActivation::None:
        p.beta[i] = b;
        break;
      case BetaActivation::Sigmoid:
        p.beta[i] = sigmoid(b);
        break;
      case BetaActivation::SigmoidNegEigval:
        p.beta[i] = 2.0 * sigmoid(b);
        break;
      }
    }
  }
  return Status::success();
}

Status runGatedDelta(const GatedDeltaArgs &a, const Names &n,
                     GatedDeltaResult &result) {
  Prepared p;
  KDA_RETURN_IF_ERROR(prepare(a, n, p));
  const int64_t B = p.B, T = p.T, H = p.H, HV = p.HV, K = p.K, V = p.V;
  const int64_t N = static_cast<int64_t>(p.spans.size());
  const int64_t group = HV / H; // value heads per q/k head
  const int64_t C = a.boundaryInterval;

  GatedDeltaResult out;
  out.o = Tensor({B, T, HV, V});
  out.finalState = Tensor(stateShape(a.layout, {N, HV}, K, V));
  int64_t NT = 0;
  if (C > 0) {
    int64_t maxLen = 0;
    for (const Span &s : p.spans)
      maxLen = std::max(maxLen, s.length());
    // ceil(maxLen / C) without maxLen + C - 1, which overflows for an
    // interval near 2^63 (the verifier accepts any positive one).
    NT = maxLen == 0 ? 0 : (maxLen - 1) / C + 1;
    out.boundaryStates = Tensor(stateShape(a.layout, {N, NT, HV}, K, V));
  }

  const bool headWise = p.g.present() && p.g.rank() == 3;
  std::vector<double> S(K * V), alpha(K, 1.0), r(V);
  for (int64_t seq = 0; seq < N; ++seq) {
    const Span &span = p.spans[seq];
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / group; // GVA: the q/k head this value head reads
      if (a.initialState.present())
        loadState(a.initialState.data.data() + (seq * HV + hv) * K * V,
                  a.layout, K, V, S.data());
      else
        std::fill(S.begin(), S.end(), 0.0);

      for (int64_t t = span.begin; t < span.end; ++t) {
        const int64_t local = t - span.begin;
        if (C > 0 && local % C == 0) // state before chunk local / C
          storeState(S.data(), a.layout, K, V,
                     out.boundaryStates.data.data() +
                         ((seq * NT + local / C) * HV + hv) * K * V);
        if (p.g.present())
          for (int64_t i = 0; i < K; ++i)
            alpha[i] = std::exp(p.g.data[tokenOffset(span.batch, t, hv, T, HV,
                                                     headWise ? 1 : K) +
                                         (headWise ? 0 : i)]);
        const int64_t qk = tokenOffset(span.batch, t, h, T, H, K);
        const int64_t vo = tokenOffset(span.batch, t, hv, T, HV, V);
        recurrenceStep(a.update, K, V, S.data(), alpha.data(), &p.q[qk],
                       p.scale, &p.k[qk], &a.v.data[vo],
                       p.beta[tokenOffset(span.batch, t, hv, T, HV, 1)],
                       r.data(), &out.o.data[vo]);
      }
      storeState(S.data(), a.layout, K, V,
                 out.finalState.data.data() + (seq * HV + hv) * K * V);
    }
  }
  result = std::move(out);
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

Status gateActivation(const Tensor &gRaw, const GateParams &params,
                      bool channelWise, Tensor &g) {
  return gateActivationImpl(gRaw, params, channelWise, g, "gRaw", "params.");
}

Status gatedDelta(const GatedDeltaArgs &args, GatedDeltaResult &result) {
  return runGatedDelta(args, Names{"", "g"}, result);
}

Status gatedDeltaGrad(const GatedDeltaGradArgs &ga, GatedDeltaGrads &grads) {
  const GatedDeltaArgs &a = ga.forward;
  const Names n{"forward.", "forward.g"};
  if (a.boundaryInterval != 0)
    return fail(n("boundaryInterval"), "0 (boundary states have no gradient "
                "here)", std::to_string(a.boundaryInterval));
  Prepared p;
  KDA_RETURN_IF_ERROR(prepare(a, n, p));
  const int64_t B = p.B, T = p.T, H = p.H, HV = p.HV, K = p.K, V = p.V;
  const int64_t N = static_cast<int64_t>(p.spans.size());
  const int64_t group = HV / H;
  KDA_RETURN_IF_ERROR(checkShape("dO", ga.dO, "[B, T, HV, V]", {B, T, HV, V}));
  KDA_RETURN_IF_ERROR(checkOptional("dFinalState", ga.dFinalState,
                                    statePattern("N, HV", a.layout),
                                    stateShape(a.layout, {N, HV}, K, V)));

  const bool gated = p.g.present();
  const bool headWise = gated && p.g.rank() == 3;
  const int64_t gInner = headWise ? 1 : K;
  // Gradients of what the recurrence reads: the normalised q, k, the
  // activated gate and beta.
  std::vector<double> dqN(p.q.size(), 0.0), dkN(p.k.size(), 0.0);
  std::vector<double> dgAct(gated ? p.g.numel() : 0, 0.0);
  std::vector<double> dbetaAct(p.beta.size(), 0.0);
  GatedDeltaGrads out;
  out.dv = Tensor({B, T, HV, V});
  if (a.initialState.present())
    out.dInitialState = Tensor(a.initialState.shape);

  std::vector<double> alpha(K, 1.0), Sd(K * V), St(K * V), dS(K * V),
      e(V), de(V);
  for (int64_t seq = 0; seq < N; ++seq) {
    const Span &span = p.spans[seq];
    const int64_t L = span.length();
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / group;
      auto alphaAt = [&](int64_t t) {
        if (gated)
          for (int64_t i = 0; i < K; ++i)
            alpha[i] = std::exp(
                p.g.data[tokenOffset(span.batch, t, hv, T, HV, gInner) +
                         (headWise ? 0 : i)]);
      };
      // Forward, keeping the state before every token.
      std::vector<double> states((L + 1) * K * V, 0.0);
      if (a.initialState.present())
        loadState(a.initialState.data.data() + (seq * HV + hv) * K * V,
                  a.layout, K, V, states.data());
      std::vector<double> r(V), o(V);
      for (int64_t t = span.begin; t < span.end; ++t) {
        const int64_t local = t - span.begin;
        std::copy_n(states.begin() + local * K * V, K * V,
                    states.begin() + (local + 1) * K * V);
        alphaAt(t);
        const int64_t qk = tokenOffset(span.batch, t, h, T, H, K);
        const int64_t vo = tokenOffset(span.batch, t, hv, T, HV, V);
        recurrenceStep(a.update, K, V, states.data() + (local + 1) * K * V,
                       alpha.data(), &p.q[qk], p.scale, &p.k[qk],
                       &a.v.data[vo],
                       p.beta[tokenOffset(span.batch, t, hv, T, HV, 1)],
                       r.data(), o.data());
      }
      // Backward.
      std::fill(dS.begin(), dS.end(), 0.0);
      if (ga.dFinalState.present())
        loadState(ga.dFinalState.data.data() + (seq * HV + hv) * K * V,
                  a.layout, K, V, dS.data());
      for (int64_t t = span.end - 1; t >= span.begin; --t) {
        const int64_t local = t - span.begin;
        const double *prev = states.data() + local * K * V;
        const double *next = states.data() + (local + 1) * K * V;
        alphaAt(t);
        const int64_t qk = tokenOffset(span.batch, t, h, T, H, K);
        const int64_t vo = tokenOffset(span.batch, t, hv, T, HV, V);
        const int64_t bo = tokenOffset(span.batch, t, hv, T, HV, 1);
        const double *q = &p.q[qk], *k = &p.k[qk], *v = &a.v.data[vo];
        const double *dO = &ga.dO.data[vo];
        const double beta = p.beta[bo];
        // o = S_t^T (scale q).
        for (int64_t i = 0; i < K; ++i) {
          double acc = 0.0;
          for (int64_t j = 0; j < V; ++j) {
            acc += next[i * V + j] * dO[j];
            dS[i * V + j] += p.scale * q[i] * dO[j];
          }
          dqN[qk + i] += p.scale * acc;
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j)
            Sd[i * V + j] = alpha[i] * prev[i * V + j];
        if (a.update == Update::Delta) {
          // S_t = S' + beta k e^T, e = v - S'^T k.
          for (int64_t j = 0; j < V; ++j) {
            double rj = 0.0;
            for (int64_t i = 0; i < K; ++i)
              rj += Sd[i * V + j] * k[i];
            e[j] = v[j] - rj;
          }
          double dbeta = 0.0;
          for (int64_t j = 0; j < V; ++j) {
            double acc = 0.0;
            for (int64_t i = 0; i < K; ++i)
              acc += dS[i * V + j] * k[i];
            dbeta += acc * e[j];
            de[j] = beta * acc;
            out.dv.data[vo + j] += de[j];
          }
          dbetaAct[bo] += dbeta;
          for (int64_t i = 0; i < K; ++i) {
            double acc = 0.0;
            for (int64_t j = 0; j < V; ++j)
              acc += beta * dS[i * V + j] * e[j] - Sd[i * V + j] * de[j];
            dkN[qk + i] += acc;
          }
          for (int64_t i = 0; i < K; ++i)
            for (int64_t j = 0; j < V; ++j)
              dS[i * V + j] -= k[i] * de[j]; // now dS'
        } else {
          // S_t = S' + k v^T.
          for (int64_t i = 0; i < K; ++i) {
            double acc = 0.0;
            for (int64_t j = 0; j < V; ++j)
              acc += dS[i * V + j] * v[j];
            dkN[qk + i] += acc;
          }
          for (int64_t j = 0; j < V; ++j) {
            double acc = 0.0;
            for (int64_t i = 0; i < K; ++i)
              acc += dS[i * V + j] * k[i];
            out.dv.data[vo + j] += acc;
          }
        }
        // S' = Diag(alpha) S_{t-1}, alpha = exp(g).
        for (int64_t i = 0; i < K; ++i) {
          double dalpha = 0.0;
          for (int64_t j = 0; j < V; ++j) {
            dalpha += prev[i * V + j] * dS[i * V + j];
            dS[i * V + j] *= alpha[i];
          }
          if (gated)
            dgAct[tokenOffset(span.batch, t, hv, T, HV, gInner) +
                  (headWise ? 0 : i)] += alpha[i] * dalpha;
        }
      }
      if (a.initialState.present())
        storeState(dS.data(), a.layout, K, V,
                   out.dInitialState.data.data() + (seq * HV + hv) * K * V);
    }
  }

  // The prologue, backwards. l2 norm: x^ = x / n, n = sqrt(|x|^2 + 1e-6):
  // dx = (dx^ - x^ (x^ . dx^)) / n.
  auto throughNorm = [&](const Tensor &raw, const std::vector<double> &normed,
                         const std::vector<double> &dN) {
    Tensor d(raw.shape);
    for (int64_t row = 0; row * K < raw.numel(); ++row) {
      const double *x = raw.data.data() + row * K;
      const double *xh = normed.data() + row * K;
      const double *g = dN.data() + row * K;
      double *dx = d.data.data() + row * K;
      if (!a.qkL2Norm) {
        std::copy_n(g, K, dx);
        continue;
      }
      double ss = 0.0, dot = 0.0;
      for (int64_t i = 0; i < K; ++i) {
        ss += x[i] * x[i];
        dot += xh[i] * g[i];
      }
      const double inv = 1.0 / std::sqrt(ss + 1e-6);
      for (int64_t i = 0; i < K; ++i)
        dx[i] = (g[i] - xh[i] * dot) * inv;
    }
    return d;
  };
  out.dq = throughNorm(a.q, p.q, dqN);
  out.dk = throughNorm(a.k, p.k, dkN);

  if (a.beta.present()) {
    out.dbeta = Tensor(a.beta.shape);
    for (int64_t i = 0; i < a.beta.numel(); ++i) {
      const double s = sigmoid(a.beta.data[i]);
      const double scale =
          a.betaActivation == BetaActivation::None     ? 1.0
          : a.betaActivation == BetaActivation::Sigmoid ? s * (1.0 - s)
                                                        : 2.0 * s * (1.0 - s);
      out.dbeta.data[i] = dbetaAct[i] * scale;
    }
  }

  if (gated) {
    const GateParams &gp = a.gate;
    out.dg = Tensor(a.g.shape);
    if (gp.aLog.present())
      out.dALog = Tensor(gp.aLog.shape);
    if (gp.dtBias.present())
      out.dDtBias = Tensor(gp.dtBias.shape);
    for (int64_t i = 0; i < a.g.numel(); ++i) {
      if (gp.activation == GateActivation::None) {
        out.dg.data[i] = dgAct[i];
        continue;
      }
      const int64_t c = headWise ? 0 : i % K;
      const int64_t hh = (i / gInner) % HV;
      const int64_t bias = headWise ? hh : hh * K + c;
      const double x = a.g.data[i] + (gp.dtBias.present() ? gp.dtBias.data[bias] : 0.0);
      const double an = gp.aLog.present() ? std::exp(gp.aLog.data[hh]) : 1.0;
      double dx, dA; // d(activated g)/dx and /dA_log
      if (gp.activation == GateActivation::Softplus) {
        // g = -a softplus(x) (softplus(x) = x past 20).
        dx = -an * (x > 20.0 ? 1.0 : sigmoid(x));
        dA = -an * softplus(x);
      } else {
        // g = lb sigmoid(a x).
        const double s = sigmoid(an * x);
        dx = gp.lowerBound * s * (1.0 - s) * an;
        dA = gp.lowerBound * s * (1.0 - s) * an * x;
      }
      out.dg.data[i] = dgAct[i] * dx;
      if (gp.aLog.present())
        out.dALog.data[hh] += dgAct[i] * dA;
      if (gp.dtBias.present())
        out.dDtBias.data[bias] += dgAct[i] * dx;
    }
  }
  grads = std::move(out);
  return Status::success();
}

namespace {
Status multiTokenDecode(const DecodeArgs &a, DecodeResult &result);
} // namespace

Status decodeStep(const DecodeArgs &a, DecodeResult &result) {
  if (a.q.rank() == 4)
    return multiTokenDecode(a, result);
  // Shapes are validated here, under the decode names; the remaining checks
  // (gate parameters, beta / update consistency, scale) happen in the shared
  // gatedDelta prologue, whose names coincide with DecodeArgs' fields.
  KDA_RETURN_IF_ERROR(checkShape("q", a.q, "[N, H, K]", {-1, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive("q", a.q, {{1, "H"}, {2, "K"}}));
  const int64_t N = a.q.shape[0], H = a.q.shape[1], K = a.q.shape[2];
  KDA_RETURN_IF_ERROR(checkStorage("k", a.k));
  if (a.k.shape != a.q.shape)
    return fail("k", "the shape of q " + str(a.q.shape), str(a.k));
  KDA_RETURN_IF_ERROR(checkShape("v", a.v, "[N, HV, V]", {N, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive("v", a.v, {{1, "HV"}, {2, "V"}}));
  const int64_t HV = a.v.shape[1], V = a.v.shape[2];
  if (HV % H != 0)
    return fail("v", "HV a multiple of H = " + std::to_string(H),
                "HV = " + std::to_string(HV));
  KDA_RETURN_IF_ERROR(checkStorage("g", a.g));
  if (a.g.present() && !matches(a.g, {N, HV}) && !matches(a.g, {N, HV, K}))
    return fail("g",
                "absent, " + describe("[N, HV]", {N, HV}) + " or " +
                    describe("[N, HV, K]", {N, HV, K}),
                str(a.g));
  KDA_RETURN_IF_ERROR(checkOptional("beta", a.beta, "[N, HV]", {N, HV}));
  if (a.layout != StateLayout::KMajor && a.layout != StateLayout::VMajor)
    return fail("layout", "KMajor or VMajor",
                std::to_string(static_cast<int>(a.layout)));
  KDA_RETURN_IF_ERROR(checkShape("statePool", a.statePool,
                                 statePattern("P, HV", a.layout),
                                 stateShape(a.layout, {-1, HV}, K, V)));
  const int64_t P = a.statePool.shape[0];
  if (static_cast<int64_t>(a.indices.size()) != N)
    return fail("indices", "N = " + std::to_string(N) + " entries",
                std::to_string(a.indices.size()));
  std::map<int64_t, size_t> firstUse;
  for (size_t i = 0; i < a.indices.size(); ++i) {
    const int64_t slot = a.indices[i];
    if (slot < 0)
      continue;
    if (slot >= P)
      return fail(
          "indices",
          "slots in [0, P) = [0, " + std::to_string(P) + ") or negative (skip)",
          "indices[" + std::to_string(i) + "] = " + std::to_string(slot));
    auto [it, inserted] = firstUse.emplace(slot, i);
    if (!inserted)
      return fail("indices", "distinct non-negative slots",
                  "slot " + std::to_string(slot) + " at indices[" +
                      std::to_string(it->second) + "] and indices[" +
                      std::to_string(i) + "]");
  }

  // Where each sequence reads from: readIndices, else its destination.
  const bool separateReads = !a.readIndices.empty();
  if (separateReads && static_cast<int64_t>(a.readIndices.size()) != N)
    return fail("readIndices", "N = " + std::to_string(N) + " entries",
                std::to_string(a.readIndices.size()));
  const std::vector<int64_t> &reads = separateReads ? a.readIndices : a.indices;
  for (size_t i = 0; separateReads && i < reads.size(); ++i) {
    const int64_t slot = reads[i];
    if (slot >= P)
      return fail("readIndices",
                  "slots in [0, P) = [0, " + std::to_string(P) +
                      ") or negative (skip)",
                  "readIndices[" + std::to_string(i) + "] = " +
                      std::to_string(slot));
    // A step reads every state before it writes any only within one
    // sequence: another sequence's destination would be a race.
    if (slot < 0)
      continue;
    if (auto it = firstUse.find(slot); it != firstUse.end() && it->second != i)
      return fail("readIndices",
                  "no slot that another sequence writes",
                  "readIndices[" + std::to_string(i) + "] = " +
                      std::to_string(slot) + " is indices[" +
                      std::to_string(it->second) + "]");
  }

  // One step per sequence is the T = 1 sequence-level recurrence with the
  // read slots as initial states: run exactly that (B = N, T = 1).
  const int64_t slotSize = HV * K * V;
  GatedDeltaArgs s;
  s.q = reshaped(a.q, {N, 1, H, K});
  s.k = reshaped(a.k, {N, 1, H, K});
  s.v = reshaped(a.v, {N, 1, HV, V});
  if (a.g.present())
    s.g = reshaped(a.g, a.g.rank() == 2 ? std::vector<int64_t>{N, 1, HV}
                                        : std::vector<int64_t>{N, 1, HV, K});
  if (a.beta.present())
    s.beta = reshaped(a.beta, {N, 1, HV});
  s.initialState = Tensor(stateShape(a.layout, {N, HV}, K, V));
  for (int64_t i = 0; i < N; ++i)
    if (reads[i] >= 0)
      std::copy_n(a.statePool.data.begin() + reads[i] * slotSize, slotSize,
                  s.initialState.data.begin() + i * slotSize);
  s.update = a.update;
  s.scale = a.scale;
  s.layout = a.layout;
  s.qkL2Norm = a.qkL2Norm;
  s.betaActivation = a.betaActivation;
  s.gate = a.gate;

  GatedDeltaResult r;
  KDA_RETURN_IF_ERROR(runGatedDelta(s, Names{"", "g"}, r));

  DecodeResult out;
  out.o = reshaped(r.o, {N, HV, V});
  out.statePool = a.statePool; // unnamed slots: bit-exact copies
  for (int64_t i = 0; i < N; ++i) {
    if (reads[i] < 0) {
      std::fill_n(out.o.data.begin() + i * HV * V, HV * V, 0.0);
      continue;
    }
    if (a.indices[i] >= 0)
      std::copy_n(r.finalState.data.begin() + i * slotSize, slotSize,
                  out.statePool.data.begin() + a.indices[i] * slotSize);
  }
  result = std::move(out);
  return Status::success();
}

namespace {

/// Token t of a [N, T, ...] tensor as [N, ...] (absent stays absent).
Tensor tokenOf(const Tensor &x, int64_t t) {
  if (!x.present())
    return x;
  const int64_t N = x.shape[0], T = x.shape[1];
  std::vector<int64_t> shape = {N};
  shape.insert(shape.end(), x.shape.begin() + 2, x.shape.end());
  Tensor out(shape);
  const int64_t row = x.numel() / (N * T);
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(x.data.begin() + (n * T + t) * row, row,
                out.data.begin() + n * row);
  return out;
}

/// The multi-token form as T single-token steps on the pool plus N scratch
/// slots (P + n holds sequence n's state between tokens, whether or not a
/// token's state is kept), copying each kept state to its slot.
Status multiTokenDecode(const DecodeArgs &a, DecodeResult &result) {
  KDA_RETURN_IF_ERROR(checkShape("q", a.q, "[N, T, H, K]", {-1, -1, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive("q", a.q, {{1, "T"}}));
  const int64_t N = a.q.shape[0], T = a.q.shape[1];
  for (auto [name, x] : {std::pair<const char *, const Tensor *>{"k", &a.k},
                         {"v", &a.v}, {"g", &a.g}, {"beta", &a.beta}})
    if (x->present() &&
        (x->rank() < 3 || x->shape[0] != N || x->shape[1] != T))
      return fail(name, "[N, T, ...] = [" + std::to_string(N) + ", " +
                            std::to_string(T) + ", ...] (q's N and T)",
                  str(*x));
  if (!a.statePool.present() || a.statePool.rank() != 4)
    return fail("statePool", "[P, HV, K, V] or [P, HV, V, K]",
                str(a.statePool));
  const int64_t P = a.statePool.shape[0];
  if (static_cast<int64_t>(a.indices.size()) != N * T)
    return fail("indices", "[N, T] = " + std::to_string(N * T) + " entries",
                std::to_string(a.indices.size()));
  std::map<int64_t, int64_t> owner; // slot -> the sequence writing it
  for (int64_t i = 0; i < N * T; ++i) {
    const int64_t slot = a.indices[i];
    if (slot < 0)
      continue;
    if (slot >= P)
      return fail("indices",
                  "slots in [0, P) = [0, " + std::to_string(P) +
                      ") or negative (not kept)",
                  "indices[" + std::to_string(i / T) + "][" +
                      std::to_string(i % T) + "] = " + std::to_string(slot));
    if (!owner.emplace(slot, i / T).second)
      return fail("indices", "distinct non-negative slots",
                  "slot " + std::to_string(slot) + " named twice");
  }
  std::vector<int64_t> reads(N);
  if (!a.readIndices.empty() && static_cast<int64_t>(a.readIndices.size()) != N)
    return fail("readIndices", "N = " + std::to_string(N) + " entries",
                std::to_string(a.readIndices.size()));
  for (int64_t n = 0; n < N; ++n) {
    reads[n] = a.readIndices.empty() ? a.indices[n * T] : a.readIndices[n];
    if (reads[n] >= P)
      return fail("readIndices",
                  "slots in [0, P) = [0, " + std::to_string(P) +
                      ") or negative (skip)",
                  "slot " + std::to_string(reads[n]));
    if (auto it = owner.find(reads[n]); it != owner.end() && it->second != n)
      return fail("readIndices", "no slot that another sequence writes",
                  "sequence " + std::to_string(n) + " reads slot " +
                      std::to_string(reads[n]) + ", which sequence " +
                      std::to_string(it->second) + " writes");
  }

  // The pool and N scratch slots.
  const int64_t slotSize = a.statePool.numel() / P;
  Tensor pool(a.statePool.shape);
  pool.shape[0] = P + N;
  pool.data.assign(a.statePool.data.begin(), a.statePool.data.end());
  pool.data.resize((P + N) * slotSize, 0.0);
  Tensor o;
  for (int64_t t = 0; t < T; ++t) {
    DecodeArgs step = a;
    step.q = tokenOf(a.q, t);
    step.k = tokenOf(a.k, t);
    step.v = tokenOf(a.v, t);
    step.g = tokenOf(a.g, t);
    step.beta = tokenOf(a.beta, t);
    step.statePool = pool;
    step.indices.assign(N, -1);
    step.readIndices.assign(N, -1);
    for (int64_t n = 0; n < N; ++n) {
      if (reads[n] < 0)
        continue; // skipped: -1, -1
      step.readIndices[n] = t == 0 ? reads[n] : P + n;
      step.indices[n] = P + n;
    }
    DecodeResult r;
    KDA_RETURN_IF_ERROR(decodeStep(step, r));
    pool = std::move(r.statePool);
    if (t == 0) {
      std::vector<int64_t> shape = {N, T};
      shape.insert(shape.end(), r.o.shape.begin() + 1, r.o.shape.end());
      o = Tensor(shape);
    }
    const int64_t row = r.o.numel() / N;
    for (int64_t n = 0; n < N; ++n) {
      std::copy_n(r.o.data.begin() + n * row, row,
                  o.data.begin() + (n * T + t) * row);
      const int64_t dest = a.indices[n * T + t];
      if (reads[n] >= 0 && dest >= 0)
        std::copy_n(pool.data.begin() + (P + n) * slotSize, slotSize,
                    pool.data.begin() + dest * slotSize);
    }
  }
  DecodeResult out;
  out.o = std::move(o);
  out.statePool = a.statePool;
  std::copy_n(pool.data.begin(), P * slotSize, out.statePool.data.begin());
  result = std::move(out);
  return Status::success();
}

} // namespace

Status windowAttention(const WindowArgs &a, Tensor &o) {
  KDA_RETURN_IF_ERROR(checkShape("q", a.q, "[B, T, HQ, K]", {-1, -1, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive("q", a.q, {{2, "HQ"}, {3, "K"}}));
  const int64_t B = a.q.shape[0], T = a.q.shape[1], HQ = a.q.shape[2],
                K = a.q.shape[3];
  // Keys: T rows, or S >= T rows of one dense batch's sequences whose
  // queries are the last T (earlier keys: query row t sits at key row
  // t + S - T).
  const int64_t S = a.k.rank() == 4 ? a.k.shape[1] : T;
  if (S != T && !a.cuSeqlens.empty())
    return fail("k", "T = " + std::to_string(T) +
                         " rows with cuSeqlens (earlier keys need dense "
                         "sequences)",
                std::to_string(S) + " rows");
  if (S < T)
    return fail("k", "S >= T = " + std::to_string(T) + " rows",
                std::to_string(S) + " rows");
  KDA_RETURN_IF_ERROR(checkShape("k", a.k, "[B, S, HK, K]", {B, S, -1, K}));
  KDA_RETURN_IF_ERROR(checkPositive("k", a.k, {{2, "HK"}}));
  KDA_RETURN_IF_ERROR(checkShape("v", a.v, "[B, S, HV, V]", {B, S, -1, -1}));
  KDA_RETURN_IF_ERROR(checkPositive("v", a.v, {{2, "HV"}, {3, "V"}}));
  const int64_t HK = a.k.shape[2], HV = a.v.shape[2], V = a.v.shape[3];
  // Output heads HO = max(HQ, HV); every head count must divide HO.
  const int64_t HO = std::max(HQ, HV);
  if (HO % HQ != 0 || HO % HV != 0)
    return fail("v", "HV a multiple or a divisor of HQ = " + std::to_string(HQ),
                "HV = " + std::to_string(HV));
  if (HO % HK != 0)
    return fail("k", "HK dividing HO = max(HQ, HV) = " + std::to_string(HO),
                "HK = " + std::to_string(HK));

  // Exactly one of the two window forms.
  const bool perPosition = !a.windowPerPosition.empty();
  if (perPosition && a.window != 0)
    return fail("window",
                "0 when windowPerPosition is given (exactly one window form)",
                std::to_string(a.window));
  if (!perPosition && a.window < 1)
    return fail("window", ">= 1 (or a windowPerPosition tensor)",
                std::to_string(a.window));
  if (perPosition) {
    if (static_cast<int64_t>(a.windowPerPosition.size()) != T)
      return fail("windowPerPosition", "T = " + std::to_string(T) + " entries",
                  std::to_string(a.windowPerPosition.size()));
    for (size_t t = 0; t < a.windowPerPosition.size(); ++t)
      if (a.windowPerPosition[t] < 1)
        return fail("windowPerPosition", "entries >= 1",
                    "windowPerPosition[" + std::to_string(t) +
                        "] = " + std::to_string(a.windowPerPosition[t]));
  }
  std::vector<Span> spans;
  KDA_RETURN_IF_ERROR(sequenceSpans(a.cuSeqlens, B, T, spans));
  if (a.scale && !std::isfinite(*a.scale))
    return fail("scale", "a finite value", str(*a.scale));
  const double scale =
      a.scale.value_or(1.0 / std::sqrt(static_cast<double>(K)));

  Tensor out({B, T, HO, V});
  std::vector<double> p;
  for (const Span &span : spans) {
    for (int64_t t = span.begin; t < span.end; ++t) {
      const int64_t W = perPosition ? a.windowPerPosition[t] : a.window;
      // Causal window clipped at the sequence start: never crosses
      // cuSeqlens boundaries. The query's key row: t + S - T.
      const int64_t tk = t + (S - T);
      const int64_t lo = std::max(span.begin, tk - W + 1);
      for (int64_t ho = 0; ho < HO; ++ho) {
        const double *q =
            &a.q.data[tokenOffset(span.batch, t, ho / (HO / HQ), T, HQ, K)];
        p.assign(static_cast<size_t>(tk - lo + 1), 0.0);
        double maxScore = -std::numeric_limits<double>::infinity();
        for (int64_t s = lo; s <= tk; ++s) {
          const double *k =
              &a.k.data[tokenOffset(span.batch, s, ho / (HO / HK), S, HK, K)];
          double dot = 0.0;
          for (int64_t i = 0; i < K; ++i)
            dot += q[i] * k[i];
          p[s - lo] = scale * dot;
          maxScore = std::max(maxScore, p[s - lo]);
        }
        // Max-subtracted softmax: every exponent <= 0, the sum >= 1.
        double denom = 0.0;
        for (double &x : p) {
          x = std::exp(x - maxScore);
          denom += x;
        }
        double *dst = &out.data[tokenOffset(span.batch, t, ho, T, HO, V)];
        for (int64_t s = lo; s <= tk; ++s) {
          const double *v =
              &a.v.data[tokenOffset(span.batch, s, ho / (HO / HV), S, HV, V)];
          for (int64_t j = 0; j < V; ++j)
            dst[j] += p[s - lo] / denom * v[j];
        }
      }
    }
  }
  o = std::move(out);
  return Status::success();
}

Status hybridCombine(const std::vector<Tensor> &outputs, Combine combine,
                     const Tensor &z, Tensor &o) {
  if (combine == Combine::Sum) {
    if (outputs.size() < 2)
      return fail("outputs", "at least 2 tensors for Combine::Sum",
                  std::to_string(outputs.size()));
    if (z.present())
      return fail("z", "absent for Combine::Sum", str(z));
  } else if (combine == Combine::Gated) {
    if (outputs.size() != 2)
      return fail("outputs", "exactly 2 tensors for Combine::Gated",
                  std::to_string(outputs.size()));
  } else {
    return fail("combine", "Sum or Gated",
                std::to_string(static_cast<int>(combine)));
  }
  KDA_RETURN_IF_ERROR(checkStorage("outputs[0]", outputs[0]));
  if (!outputs[0].present())
    return fail("outputs[0]", "a tensor", "absent");
  for (size_t i = 1; i < outputs.size(); ++i) {
    const std::string name = "outputs[" + std::to_string(i) + "]";
    KDA_RETURN_IF_ERROR(checkStorage(name, outputs[i]));
    if (outputs[i].shape != outputs[0].shape)
      return fail(name, "the shape of outputs[0] " + str(outputs[0].shape),
                  str(outputs[i]));
  }

  if (combine == Combine::Sum) {
    Tensor out(outputs[0].shape);
    for (const Tensor &t : outputs)
      for (size_t i = 0; i < out.data.size(); ++i)
        out.data[i] += t.data[i];
    o = std::move(out);
    return Status::success();
  }

  KDA_RETURN_IF_ERROR(
      checkShape("outputs[0]", outputs[0], "[B, T, HV, V]", {-1, -1, -1, -1}));
  const std::vector<int64_t> &s = outputs[0].shape;
  KDA_RETURN_IF_ERROR(checkStorage("z", z));
  const bool headWise = matches(z, {s[0], s[1], s[2]});
  if (!headWise && !matches(z, s))
    return fail("z",
                describe("[B, T, HV]", {s[0], s[1], s[2]}) + " or " +
                    describe("[B, T, HV, V]", s),
                str(z));
  Tensor out(s);
  const int64_t V = s[3];
  for (size_t i = 0; i < out.data.size(); ++i) {
    const double w = sigmoid(z.data[headWise ? i / V : i]);
    out.data[i] = w * outputs[0].data[i] + (1.0 - w) * outputs[1].data[i];
  }
  o = std::move(out);
  return Status::success();
}

Status multiScale(const MultiScaleArgs &a, MultiScaleResult &result) {
  const GatedDeltaArgs &base = a.base;
  const bool ownGates = !a.gates.empty();
  if (ownGates && !a.decayScales.empty())
    return fail("decayScales", "empty when gates are given",
                std::to_string(a.decayScales.size()) + " scales");
  if (!ownGates && a.decayScales.empty())
    return fail("decayScales", "at least one scale (or gate tensors in gates)",
                "none");
  const int64_t M =
      static_cast<int64_t>(ownGates ? a.gates.size() : a.decayScales.size());
  if (ownGates && base.g.present())
    return fail("base.g", "absent when gates are given", str(base.g));
  if (!ownGates && !base.g.present())
    return fail("base.g", "a gate tensor to scale by decayScales", "absent");
  for (int64_t m = 0; m < static_cast<int64_t>(a.decayScales.size()); ++m)
    if (!std::isfinite(a.decayScales[m]) || a.decayScales[m] < 0.0)
      return fail("decayScales", "finite non-negative scales",
                  "decayScales[" + std::to_string(m) +
                      "] = " + str(a.decayScales[m]));
  if (base.boundaryInterval != 0)
    return fail("base.boundaryInterval",
                "0 (multiScale returns no boundary states)",
                std::to_string(base.boundaryInterval));
  if (a.combine != Combine::Sum && a.combine != Combine::Gated)
    return fail("combine", "Sum or Gated",
                std::to_string(static_cast<int>(a.combine)));
  if (a.combine == Combine::Sum && a.z.present())
    return fail("z", "absent for Combine::Sum", str(a.z));

  // The scaled form scales the activated log-decay: alpha_m = alpha^c_m.
  Tensor gActivated;
  if (!ownGates)
    KDA_RETURN_IF_ERROR(gateActivationImpl(base.g, base.gate,
                                           base.g.rank() == 4, gActivated,
                                           "base.g", "base.gate."));

  std::vector<GatedDeltaResult> runs(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    GatedDeltaArgs s = base;
    Names names{"base.", "base.g"};
    if (ownGates) {
      s.g = a.gates[m];
      names.g = "gates[" + std::to_string(m) + "]";
    } else {
      s.g = gActivated;
      for (double &x : s.g.data)
        x *= a.decayScales[m];
      s.gate = GateParams{}; // already applied
    }
    KDA_RETURN_IF_ERROR(runGatedDelta(s, names, runs[m]));
  }

  const std::vector<int64_t> &os = runs[0].o.shape; // [B, T, HV, V]
  if (a.combine == Combine::Gated)
    KDA_RETURN_IF_ERROR(
        checkShape("z", a.z, "[B, T, HV, M]", {os[0], os[1], os[2], M}));

  MultiScaleResult out;
  out.o = Tensor(os);
  const int64_t V = os[3];
  for (int64_t m = 0; m < M; ++m)
    for (size_t i = 0; i < out.o.data.size(); ++i) {
      const double w =
          a.combine == Combine::Sum ? 1.0 : sigmoid(a.z.data[(i / V) * M + m]);
      out.o.data[i] += w * runs[m].o.data[i];
    }
  std::vector<int64_t> fs = runs[0].finalState.shape;
  fs.insert(fs.begin(), M);
  out.finalStates = Tensor(fs);
  const size_t per = runs[0].finalState.data.size();
  for (int64_t m = 0; m < M; ++m)
    std::copy(runs[m].finalState.data.begin(), runs[m].finalState.data.end(),
              out.finalStates.data.begin() + m * per);
  result = std::move(out);
  return Status::success();
}

double relativeRmse(const std::vector<double> &out,
                    const std::vector<double> &ref) {
  if (out.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0, outNorm = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    outNorm += out[i] * out[i];
  }
  if (den == 0.0)
    return std::sqrt(outNorm);
  return std::sqrt(num) / std::sqrt(den);
}

double maxAbsError(const std::vector<double> &out,
                   const std::vector<double> &ref) {
  if (out.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  double m = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = std::fabs(out[i] - ref[i]);
    if (std::isnan(d))
      return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, d);
  }
  return m;
}

} // namespace kda::oracle

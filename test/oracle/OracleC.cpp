//===- OracleC.cpp - C ABI over the float64 oracle ------------------------===//
//
// Converts the C arguments of oracle_c.h to the oracle's Tensor / *Args
// structs, runs kda::oracle::gatedDelta / decodeStep / windowAttention
// unchanged, and copies the results into the caller's buffers. All
// validation of the operation's arguments is the oracle's own; this layer
// only checks what it adds (enum values, null pointers, buffer capacities).
//
//===----------------------------------------------------------------------===//

#include "test/oracle/oracle_c.h"
#include "test/oracle/Oracle.h"

#include <algorithm>
#include <string>

using namespace kda::oracle;

namespace {

thread_local std::string lastError;

const char *error(const std::string &message) {
  lastError = message;
  return lastError.c_str();
}

// Returns "" or an error message.
std::string toTensor(const char *name, const kda_oracle_tensor &t,
                     Tensor &out) {
  out = Tensor();
  if (t.rank == 0)
    return "";
  if (t.rank < 0 || t.rank > 8)
    return std::string(name) + ": rank " + std::to_string(t.rank) +
           " out of range";
  if (!t.shape)
    return std::string(name) + ": NULL shape with rank " +
           std::to_string(t.rank);
  std::vector<int64_t> shape(t.shape, t.shape + t.rank);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::string(name) + ": negative extent " + std::to_string(d);
    n *= d;
  }
  if (n > 0 && !t.data)
    return std::string(name) + ": NULL data for " + std::to_string(n) +
           " elements";
  out.shape = std::move(shape);
  out.data.assign(t.data, t.data + n);
  return "";
}

std::string options(const kda_oracle_options *o, Update &update,
                    StateLayout &layout, BetaActivation &beta,
                    GateActivation &gate) {
  if (!o)
    return "options: NULL";
  if (o->update != 0 && o->update != 1)
    return "options.update: expected 0 (delta) or 1 (additive), found " +
           std::to_string(o->update);
  if (o->state_layout != 0 && o->state_layout != 1)
    return "options.state_layout: expected 0 (K-major) or 1 (V-major), "
           "found " +
           std::to_string(o->state_layout);
  if (o->beta_activation < 0 || o->beta_activation > 2)
    return "options.beta_activation: expected 0, 1 or 2, found " +
           std::to_string(o->beta_activation);
  if (o->gate_activation < 0 || o->gate_activation > 2)
    return "options.gate_activation: expected 0, 1 or 2, found " +
           std::to_string(o->gate_activation);
  update = o->update == 0 ? Update::Delta : Update::Additive;
  layout = o->state_layout == 0 ? StateLayout::KMajor : StateLayout::VMajor;
  beta = o->beta_activation == 0   ? BetaActivation::None
         : o->beta_activation == 1 ? BetaActivation::Sigmoid
                                   : BetaActivation::SigmoidNegEigval;
  gate = o->gate_activation == 0   ? GateActivation::None
         : o->gate_activation == 1 ? GateActivation::Softplus
                                   : GateActivation::LowerBound;
  return "";
}

std::string copyOut(const char *name, const Tensor &t, double *buffer,
                    int64_t capacity, int64_t *shape, size_t rank) {
  if (t.shape.size() != rank)
    return std::string(name) + ": internal rank mismatch";
  if (shape)
    std::copy(t.shape.begin(), t.shape.end(), shape);
  if (!buffer)
    return "";
  if (capacity != t.numel())
    return std::string(name) + ": the buffer holds " +
           std::to_string(capacity) + " elements, the result has " +
           std::to_string(t.numel());
  std::copy(t.data.begin(), t.data.end(), buffer);
  return "";
}

#define KDA_C_TRY(expr)                                                        \
  do {                                                                         \
    std::string m_ = (expr);                                                   \
    if (!m_.empty())                                                           \
      return error(m_);                                                        \
  } while (false)

/// kda_oracle_gated_delta's arguments (shared with its gradient) as
/// GatedDeltaArgs; a message naming the bad argument, or empty.
std::string forwardArgs(kda_oracle_tensor q, kda_oracle_tensor k,
                        kda_oracle_tensor v, kda_oracle_tensor g,
                        kda_oracle_tensor beta, kda_oracle_tensor initial_state,
                        const int64_t *cu_seqlens, int64_t num_cu_seqlens,
                        kda_oracle_tensor A_log, kda_oracle_tensor dt_bias,
                        const kda_oracle_options *opts, GatedDeltaArgs &a) {
  std::string m;
#define KDA_TRY_ARG(expr)                                                      \
  if (!(m = (expr)).empty())                                                   \
    return m;
  KDA_TRY_ARG(options(opts, a.update, a.layout, a.betaActivation,
                      a.gate.activation));
  KDA_TRY_ARG(toTensor("q", q, a.q));
  KDA_TRY_ARG(toTensor("k", k, a.k));
  KDA_TRY_ARG(toTensor("v", v, a.v));
  KDA_TRY_ARG(toTensor("g", g, a.g));
  KDA_TRY_ARG(toTensor("beta", beta, a.beta));
  KDA_TRY_ARG(toTensor("initial_state", initial_state, a.initialState));
  KDA_TRY_ARG(toTensor("A_log", A_log, a.gate.aLog));
  KDA_TRY_ARG(toTensor("dt_bias", dt_bias, a.gate.dtBias));
#undef KDA_TRY_ARG
  if (num_cu_seqlens < 0 || (num_cu_seqlens > 0 && !cu_seqlens))
    return "cu_seqlens: NULL or negative count";
  if (num_cu_seqlens > 0)
    a.cuSeqlens.assign(cu_seqlens, cu_seqlens + num_cu_seqlens);
  if (opts->has_scale)
    a.scale = opts->scale;
  a.qkL2Norm = opts->qk_l2norm != 0;
  a.gate.lowerBound = opts->lower_bound;
  a.boundaryInterval = opts->boundary_interval;
  return "";
}

} // namespace

extern "C" const char *kda_oracle_gated_delta(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor initial_state, const int64_t *cu_seqlens,
    int64_t num_cu_seqlens, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *opts, double *o,
    int64_t o_capacity, int64_t *o_shape, double *final_state,
    int64_t final_capacity, int64_t *final_shape, double *boundary_states,
    int64_t boundary_capacity, int64_t *boundary_shape) {
  GatedDeltaArgs a;
  KDA_C_TRY(forwardArgs(q, k, v, g, beta, initial_state, cu_seqlens,
                        num_cu_seqlens, A_log, dt_bias, opts, a));

  GatedDeltaResult r;
  Status s = gatedDelta(a, r);
  if (!s.ok())
    return error(s.message);
  KDA_C_TRY(copyOut("o", r.o, o, o_capacity, o_shape, 4));
  KDA_C_TRY(copyOut("final_state", r.finalState, final_state, final_capacity,
                    final_shape, 4));
  if (a.boundaryInterval > 0)
    KDA_C_TRY(copyOut("boundary_states", r.boundaryStates, boundary_states,
                      boundary_capacity, boundary_shape, 5));
  lastError.clear();
  return nullptr;
}

extern "C" const char *kda_oracle_gated_delta_grad(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor initial_state, const int64_t *cu_seqlens,
    int64_t num_cu_seqlens, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *opts,
    kda_oracle_tensor d_o, kda_oracle_tensor d_final_state,
    const kda_oracle_buffer *grads) {
  if (!grads)
    return error("grads: NULL (8 buffers: dq, dk, dv, dg, dbeta, "
                 "d_initial_state, dA_log, ddt_bias)");
  GatedDeltaGradArgs ga;
  GatedDeltaArgs &a = ga.forward;
  KDA_C_TRY(forwardArgs(q, k, v, g, beta, initial_state, cu_seqlens,
                        num_cu_seqlens, A_log, dt_bias, opts, a));
  KDA_C_TRY(toTensor("d_o", d_o, ga.dO));
  KDA_C_TRY(toTensor("d_final_state", d_final_state, ga.dFinalState));

  GatedDeltaGrads r;
  Status s = gatedDeltaGrad(ga, r);
  if (!s.ok())
    return error(s.message);
  const std::pair<const char *, const Tensor *> outs[8] = {
      {"dq", &r.dq},       {"dk", &r.dk},
      {"dv", &r.dv},       {"dg", &r.dg},
      {"dbeta", &r.dbeta}, {"d_initial_state", &r.dInitialState},
      {"dA_log", &r.dALog}, {"ddt_bias", &r.dDtBias}};
  for (int i = 0; i < 8; ++i) {
    const auto &[name, t] = outs[i];
    if (!t->present()) {
      if (grads[i].data)
        return error(std::string(name) +
                     ": a buffer for the gradient of an absent input");
      continue;
    }
    if (!grads[i].data)
      continue;
    KDA_C_TRY(copyOut(name, *t, grads[i].data, grads[i].capacity, nullptr,
                      t->shape.size()));
  }
  lastError.clear();
  return nullptr;
}

extern "C" const char *kda_oracle_decode_step(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta, kda_oracle_tensor state_pool,
    const int64_t *indices, int64_t num_indices, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *opts, double *o,
    int64_t o_capacity, int64_t *o_shape, double *new_pool,
    int64_t pool_capacity, int64_t *pool_shape) {
  return kda_oracle_decode_step_rw(q, k, v, g, beta, state_pool, indices,
                                   num_indices, nullptr, 0, A_log, dt_bias,
                                   opts, o, o_capacity, o_shape, new_pool,
                                   pool_capacity, pool_shape);
}

extern "C" const char *kda_oracle_decode_step_rw(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta, kda_oracle_tensor state_pool,
    const int64_t *indices, int64_t num_indices, const int64_t *read_indices,
    int64_t num_read_indices, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *opts, double *o,
    int64_t o_capacity, int64_t *o_shape, double *new_pool,
    int64_t pool_capacity, int64_t *pool_shape) {
  DecodeArgs a;
  KDA_C_TRY(options(opts, a.update, a.layout, a.betaActivation,
                    a.gate.activation));
  if (opts->boundary_interval != 0)
    return error("options.boundary_interval: the decode step has no boundary "
                 "states (expected 0)");
  KDA_C_TRY(toTensor("q", q, a.q));
  KDA_C_TRY(toTensor("k", k, a.k));
  KDA_C_TRY(toTensor("v", v, a.v));
  KDA_C_TRY(toTensor("g", g, a.g));
  KDA_C_TRY(toTensor("beta", beta, a.beta));
  KDA_C_TRY(toTensor("state_pool", state_pool, a.statePool));
  KDA_C_TRY(toTensor("A_log", A_log, a.gate.aLog));
  KDA_C_TRY(toTensor("dt_bias", dt_bias, a.gate.dtBias));
  if (num_indices < 0 || (num_indices > 0 && !indices))
    return error("indices: NULL or negative count");
  a.indices.assign(indices, indices + num_indices);
  if (num_read_indices < 0 || (num_read_indices > 0 && !read_indices))
    return error("read_indices: NULL or negative count");
  a.readIndices.assign(read_indices, read_indices + num_read_indices);
  if (opts->has_scale)
    a.scale = opts->scale;
  a.qkL2Norm = opts->qk_l2norm != 0;
  a.gate.lowerBound = opts->lower_bound;

  DecodeResult r;
  Status s = decodeStep(a, r);
  if (!s.ok())
    return error(s.message);
  // o is [N, HV, V], or [N, T, HV, V] for several tokens (o_shape holds 4).
  KDA_C_TRY(copyOut("o", r.o, o, o_capacity, o_shape, r.o.shape.size()));
  KDA_C_TRY(copyOut("new_pool", r.statePool, new_pool, pool_capacity,
                    pool_shape, 4));
  lastError.clear();
  return nullptr;
}

extern "C" const char *kda_oracle_window_attention(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    int64_t window, const int64_t *window_sizes, int64_t num_window_sizes,
    const int64_t *cu_seqlens, int64_t num_cu_seqlens, int32_t has_scale,
    double scale, double *o, int64_t o_capacity, int64_t *o_shape) {
  WindowArgs a;
  KDA_C_TRY(toTensor("q", q, a.q));
  KDA_C_TRY(toTensor("k", k, a.k));
  KDA_C_TRY(toTensor("v", v, a.v));
  a.window = window;
  if (num_window_sizes < 0 || (num_window_sizes > 0 && !window_sizes))
    return error("window_sizes: NULL or negative count");
  if (num_window_sizes > 0)
    a.windowPerPosition.assign(window_sizes, window_sizes + num_window_sizes);
  if (num_cu_seqlens < 0 || (num_cu_seqlens > 0 && !cu_seqlens))
    return error("cu_seqlens: NULL or negative count");
  if (num_cu_seqlens > 0)
    a.cuSeqlens.assign(cu_seqlens, cu_seqlens + num_cu_seqlens);
  if (has_scale)
    a.scale = scale;

  Tensor out;
  Status s = windowAttention(a, out);
  if (!s.ok())
    return error(s.message);
  KDA_C_TRY(copyOut("o", out, o, o_capacity, o_shape, 4));
  lastError.clear();
  return nullptr;
}

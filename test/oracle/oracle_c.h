/*
 * C ABI over the float64 oracle (Oracle.h), for Python (ctypes) and other
 * FFIs. Build:
 *   g++ -std=c++17 -O2 -shared -fPIC -I. test/oracle/Oracle.cpp \
 *       test/oracle/OracleC.cpp -o liboracle.so
 * (from the repository root). test/gpu/oracle.py wraps it with numpy.
 *
 * Tensors are dense row-major float64 arrays with a shape; an absent optional
 * tensor has rank 0. Outputs go to caller-owned buffers whose capacities (in
 * elements) are passed; the actual output shapes are written back. Every
 * function returns NULL on success, or a message naming the offending
 * argument (thread-local; valid until the thread's next call). Nothing aborts
 * on bad input.
 */
#ifndef KDA_TEST_ORACLE_ORACLE_C_H
#define KDA_TEST_ORACLE_ORACLE_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const double *data;    /* numel elements; may be NULL when absent */
  int32_t rank;          /* 0 = absent */
  const int64_t *shape;  /* rank entries */
} kda_oracle_tensor;

/* Enum values (int32): */
/*   update:          0 delta, 1 additive                               */
/*   state_layout:    0 K-major [.., K, V], 1 V-major [.., V, K]         */
/*   beta_activation: 0 none, 1 sigmoid, 2 2*sigmoid (neg. eigenvalues)  */
/*   gate_activation: 0 none, 1 softplus, 2 lower_bound                  */
typedef struct {
  int32_t update;
  int32_t has_scale; /* 0: scale = 1/sqrt(K) */
  double scale;
  int32_t state_layout;
  int32_t qk_l2norm;
  int32_t beta_activation;
  int32_t gate_activation;
  double lower_bound;         /* lower_bound gate form only, in [-5, 0) */
  int64_t boundary_interval;  /* > 0: also boundary states */
} kda_oracle_options;

/* kda.gated_delta (SPEC.md section 2). q, k [B,T,H,K]; v [B,T,HV,V]; g
 * optional [B,T,HV] or [B,T,HV,K] (raw when gate_activation != 0); beta
 * optional [B,T,HV]; initial_state optional [N,HV,K,V] / [N,HV,V,K]; A_log
 * optional [HV]; dt_bias optional [HV,K] (channel gates) or [HV];
 * cu_seqlens: num_cu_seqlens = N + 1 offsets (0 = absent, then N = B).
 * Outputs: o [B,T,HV,V] (o_shape[4]); final_state (final_shape[4]);
 * boundary_states (boundary_shape[5], only with boundary_interval > 0; pass
 * NULL / 0 otherwise). final_state may be NULL to skip it. */
const char *kda_oracle_gated_delta(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor initial_state, const int64_t *cu_seqlens,
    int64_t num_cu_seqlens, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *options,
    double *o, int64_t o_capacity, int64_t *o_shape,
    double *final_state, int64_t final_capacity, int64_t *final_shape,
    double *boundary_states, int64_t boundary_capacity,
    int64_t *boundary_shape);

/* A caller-owned output buffer of `capacity` elements (NULL / 0: not
 * wanted). */
typedef struct {
  double *data;
  int64_t capacity;
} kda_oracle_buffer;

/* The gradient of kda_oracle_gated_delta (Oracle.h's gatedDeltaGrad) for
 * L = sum(d_o * o) + sum(d_final_state * final_state): the forward's inputs,
 * then d_o [B,T,HV,V] and d_final_state (optional, final_state's shape).
 * grads[8] receive dq, dk (q's shape), dv, dg, dbeta, d_initial_state,
 * dA_log, ddt_bias, each the shape of its input; a gradient whose input is
 * absent must have no buffer. options->boundary_interval must be 0. */
const char *kda_oracle_gated_delta_grad(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor initial_state, const int64_t *cu_seqlens,
    int64_t num_cu_seqlens, kda_oracle_tensor A_log,
    kda_oracle_tensor dt_bias, const kda_oracle_options *options,
    kda_oracle_tensor d_o, kda_oracle_tensor d_final_state,
    const kda_oracle_buffer *grads);

/* kda.decode_step (SPEC.md section 4). q, k [N,H,K]; v [N,HV,V]; g optional
 * [N,HV] / [N,HV,K]; beta optional [N,HV]; state_pool [P,HV,K,V] /
 * [P,HV,V,K]; indices: N entries (negative = skip). Outputs: o [N,HV,V]
 * (o_shape[3]), new_pool (same shape as state_pool; pool_shape[4]).
 * options->boundary_interval must be 0. */
const char *kda_oracle_decode_step(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor state_pool, const int64_t *indices, int64_t num_indices,
    kda_oracle_tensor A_log, kda_oracle_tensor dt_bias,
    const kda_oracle_options *options, double *o, int64_t o_capacity,
    int64_t *o_shape, double *new_pool, int64_t pool_capacity,
    int64_t *pool_shape);

/* kda_oracle_decode_step with separate read slots: sequence n reads
 * read_indices[n] (negative: skip) and writes indices[n] (negative: no
 * write). num_read_indices 0: read indices[n] (kda_oracle_decode_step).
 * Several tokens per sequence: q, k [N,T,H,K], v [N,T,HV,V], g / beta with
 * the T axis, indices [N,T] row-major (N T entries; the state after token t
 * goes to indices[n][t]), o [N,T,HV,V]; read indices[n][0] by default. */
const char *kda_oracle_decode_step_rw(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    kda_oracle_tensor g, kda_oracle_tensor beta,
    kda_oracle_tensor state_pool, const int64_t *indices, int64_t num_indices,
    const int64_t *read_indices, int64_t num_read_indices,
    kda_oracle_tensor A_log, kda_oracle_tensor dt_bias,
    const kda_oracle_options *options, double *o, int64_t o_capacity,
    int64_t *o_shape, double *new_pool, int64_t pool_capacity,
    int64_t *pool_shape);

/* kda.window_attention (SPEC.md section 5). q [B,T,HQ,K]; k [B,T,HK,K];
 * v [B,T,HV,V]; exactly one window form: window >= 1 (per op, then
 * num_window_sizes = 0) or window = 0 and window_sizes, num_window_sizes = T
 * entries (per position); cu_seqlens: num_cu_seqlens = N + 1 offsets (0 =
 * absent); has_scale = 0: scale = 1/sqrt(K). Output: o [B,T,HO,V] with
 * HO = max(HQ, HV) (o_shape[4]). */
const char *kda_oracle_window_attention(
    kda_oracle_tensor q, kda_oracle_tensor k, kda_oracle_tensor v,
    int64_t window, const int64_t *window_sizes, int64_t num_window_sizes,
    const int64_t *cu_seqlens, int64_t num_cu_seqlens, int32_t has_scale,
    double scale, double *o, int64_t o_capacity, int64_t *o_shape);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KDA_TEST_ORACLE_ORACLE_C_H */

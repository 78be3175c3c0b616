// Tensor-parallel linear layers (Megatron-LM, Shoeybi et al. 2019) and the
// sequence-parallel variants (Korthikanti et al. 2022). Each name says the
// collective it implies over the tensor-parallel group:
//
//   column_parallel_linear: weight rows (output features) split over TP.
//     forward  none (the input is replicated, or gathered by the caller
//              with sequence parallelism)
//     backward all-reduce of the input gradient, or reduce-scatter along
//              the sequence with sequence parallelism
//   row_parallel_linear: weight columns (input features) split over TP.
//     forward  all-reduce of the output, or reduce-scatter along the
//              sequence with sequence parallelism
//     backward none, or all-gather of the output gradient along the sequence
//              with sequence parallelism
//
// Sequence parallelism shards the token rows [N, h] of the LayerNorm and
// residual regions contiguously: TP rank r holds rows [r*N/tp, (r+1)*N/tp).
// With one TP rank every collective is a no-op.
#pragma once

#include <cstdint>

#include "meshtrain/comm/communicator.h"

namespace meshtrain {

struct TpContext {
  Communicator* comm = nullptr;  // the tensor-parallel group
  bool sequence_parallel = false;
  int rank() const { return comm ? comm->rank() : 0; }
  int size() const { return comm ? comm->size() : 1; }
};

// x_full [M, K] -> out [M, N_local] (+ bias [N_local]).
template <class T>
void column_parallel_linear_forward(T* out, const T* x_full, const T* w, const T* b, int M, int K, int N_local);

// dx_full [M, K] := partial input gradient, then reduced over TP: all-reduced
// in place, or (sequence parallel) reduce-scattered into dx_shard [M/tp, K].
// dw [N_local, K] += ; db [N_local] += (nullable).
template <class T>
void column_parallel_linear_backward(T* dx_full, T* dx_shard, float* dw, float* db, const T* dout, const T* x_full,
                                     const T* w, int M, int K, int N_local, const TpContext& tp);

// x_local [M, K_local] -> out: [M, N] all-reduced, or [M/tp, N] reduce-scattered
// (sequence parallel, through `scratch` [M, N]); then out += bias [N] + residual
// (both nullable; residual has out's shape).
template <class T>
void row_parallel_linear_forward(T* out, T* scratch, const T* x_local, const T* w, const T* b, const T* residual,
                                 int M, int K_local, int N, const TpContext& tp);

// dout: [M, N] replicated, or its shard [M/tp, N] all-gathered into
// `gathered` [M, N] first (sequence parallel). dx_local [M, K_local] := ;
// dw [N, K_local] += ; db [N] += from the full gradient (so it is complete on
// every TP rank).
template <class T>
void row_parallel_linear_backward(T* dx_local, T* gathered, float* dw, float* db, const T* dout, const T* x_local,
                                  const T* w, int M, int K_local, int N, const TpContext& tp);

// Sequence parallel: rows [M/tp, K] of this rank at their place in full [M, K]
// all-gathered in place. No-op without sequence parallelism.
template <class T>
void gather_sequence(T* full, int64_t M, int64_t K, const TpContext& tp);
// Sequence parallel: this rank's rows shard [M/tp, K] all-gathered into
// full [M, K] (an all-gather on the tp group).
template <class T>
void gather_sequence(T* full, const T* shard, int64_t M, int64_t K, const TpContext& tp);

}  // namespace meshtrain

#include "meshtrain/model/tensor_parallel.h"

#include "meshtrain/core/dtype.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/kernels/tensor_ops.h"

namespace meshtrain {

template <class T>
void column_parallel_linear_forward(T* out, const T* x_full, const T* w, const T* b, int M, int K, int N_local) {
  kernels::matmul_forward(out, x_full, w, b, M, K, N_local);
}

template <class T>
void column_parallel_linear_backward(T* dx_full, T* dx_shard, float* dw, float* db, const T* dout, const T* x_full,
                                     const T* w, int M, int K, int N_local, const TpContext& tp) {
  kernels::matmul_backward(dx_full, dw, db, dout, x_full, w, M, K, N_local, /*accumulate_dinp=*/false);
  if (tp.size() == 1) return;
  if (tp.sequence_parallel)
    tp.comm->reduce_scatter(dx_full, dx_shard, int64_t{M} / tp.size() * K);
  else
    tp.comm->all_reduce(dx_full, int64_t{M} * K);
}

template <class T>
void row_parallel_linear_forward(T* out, T* scratch, const T* x_local, const T* w, const T* b, const T* residual,
                                 int M, int K_local, int N, const TpContext& tp) {
  int64_t rows = M;
  if (tp.size() > 1 && tp.sequence_parallel) {
    kernels::matmul_forward<T>(scratch, x_local, w, nullptr, M, K_local, N);
    rows = M / tp.size();
    tp.comm->reduce_scatter(scratch, out, rows * N);
  } else {
    kernels::matmul_forward<T>(out, x_local, w, nullptr, M, K_local, N);
    if (tp.size() > 1) tp.comm->all_reduce(out, int64_t{M} * N);
  }
  kernels::bias_residual_add(out, b, residual, rows, N);
}

template <class T>
void row_parallel_linear_backward(T* dx_local, T* gathered, float* dw, float* db, const T* dout, const T* x_local,
                                  const T* w, int M, int K_local, int N, const TpContext& tp) {
  const T* dfull = dout;
  if (tp.size() > 1 && tp.sequence_parallel) {
    tp.comm->all_gather(dout, gathered, int64_t{M} / tp.size() * N);
    dfull = gathered;
  }
  kernels::matmul_backward(dx_local, dw, db, dfull, x_local, w, M, K_local, N, /*accumulate_dinp=*/false);
}

template <class T>
void gather_sequence(T* full, int64_t M, int64_t K, const TpContext& tp) {
  if (tp.size() == 1 || !tp.sequence_parallel) return;
  tp.comm->all_gather(Communicator::kInPlace, full, M / tp.size() * K);
}

template <class T>
void gather_sequence(T* full, const T* shard, int64_t M, int64_t K, const TpContext& tp) {
  tp.comm->all_gather(shard, full, M / tp.size() * K);
}

#define INSTANTIATE(T)                                                                                         \
  template void column_parallel_linear_forward<T>(T*, const T*, const T*, const T*, int, int, int);            \
  template void column_parallel_linear_backward<T>(T*, T*, float*, float*, const T*, const T*, const T*, int,  \
                                                   int, int, const TpContext&);                                \
  template void row_parallel_linear_forward<T>(T*, T*, const T*, const T*, const T*, const T*, int, int, int,  \
                                               const TpContext&);                                              \
  template void row_parallel_linear_backward<T>(T*, T*, float*, float*, const T*, const T*, const T*, int, int, \
                                                int, const TpContext&);                                        \
  template void gather_sequence<T>(T*, int64_t, int64_t, const TpContext&);                                 \
  template void gather_sequence<T>(T*, const T*, int64_t, int64_t, const TpContext&);
INSTANTIATE(float)
INSTANTIATE(bf16)

}  // namespace meshtrain

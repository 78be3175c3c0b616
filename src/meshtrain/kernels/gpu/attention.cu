// Causal attention on the GPU (contract: kernels/attention.h), FlashAttention
// style: the T x T scores are never stored; the forward saves the row
// log-sum-exp (natural log, of the scaled scores) as the CPU kernel does.
//
// Forward and dQ: a block of kQueries threads, one query row each, with its
// q (pre-scaled) and accumulators in registers; key/value tiles of kKeys
// rows staged in shared memory as fp32, zero-padded to the head-size bucket
// D; online softmax (running max m and sum l, rescaling the accumulator).
// dK and dV: a block of kKeysPerBlock threads, one key row each, walking the
// query tiles at or after its block, recomputing P = exp(S - lse).
// D_i = rowsum(dO_i * O_i) is computed first into fp32 scratch [B, H, T].
// Every sum runs in a fixed order in one thread: deterministic, no atomics.
// Head sizes: buckets D = 32, 64, 128 (hd <= D, padded with zeros).
#include <stdexcept>

#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr int kQueries = 64;        // forward / dQ: threads (queries) per block
constexpr int kKeys = 32;           // forward / dQ: keys per shared tile
constexpr int kKeysPerBlock = 64;   // dK dV: threads (keys) per block
constexpr int kQueryTile = 32;      // dK dV: queries per shared tile

// Row `t` of batch b, head h: which = 0 (q), 1 (k), 2 (v) of qkv [B, T, H, 3, hd].
template <class T>
__device__ inline const T* qkv_row(const T* qkv, int b, int t, int h, int T_, int H, int hd, int which) {
  return qkv + ((int64_t{b} * T_ + t) * H + h) * 3 * hd + int64_t{which} * hd;
}
// Row of out / dout [B, T, H, hd].
__device__ inline int64_t head_row(int b, int t, int h, int T_, int H, int hd) {
  return ((int64_t{b} * T_ + t) * H + h) * hd;
}

// Stages rows [k0, k0 + kKeys) of k and v (zeros past T_ and past hd).
template <class T, int D>
__device__ inline void load_kv_tile(float (*ks)[D], float (*vs)[D], const T* qkv, int b, int h, int k0, int T_,
                                    int H, int hd) {
  for (int e = threadIdx.x; e < kKeys * D; e += blockDim.x) {
    const int j = e / D, d = e % D, kj = k0 + j;
    float kv = 0, vv = 0;
    if (kj < T_ && d < hd) {
      const T* row = qkv_row(qkv, b, kj, h, T_, H, hd, 1);
      kv = ld(row[d]);
      vv = ld(row[hd + d]);
    }
    ks[j][d] = kv;
    vs[j][d] = vv;
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kQueries) forward_kernel(T* out, float* lse, const T* qkv, int T_, int H, int hd,
                                                           float scale) {
  __shared__ float ks[kKeys][D];
  __shared__ float vs[kKeys][D];
  const int b = blockIdx.y / H, h = blockIdx.y % H;
  const int q0 = blockIdx.x * kQueries, i = q0 + threadIdx.x;
  const bool active = i < T_;
  float q[D], acc[D];
  const T* qrow = active ? qkv_row(qkv, b, i, h, T_, H, hd, 0) : nullptr;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = (active && d < hd) ? ld(qrow[d]) * scale : 0.0f;
    acc[d] = 0;
  }
  float m = -INFINITY, l = 0;
  const int k_end = min(T_, q0 + kQueries);  // keys up to the block's last query
  for (int k0 = 0; k0 < k_end; k0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    load_kv_tile<T, D>(ks, vs, qkv, b, h, k0, T_, H, hd);
    __syncthreads();
    const int jn = active ? min(kKeys, i - k0 + 1) : 0;  // keys k0 .. i
    for (int j = 0; j < jn; ++j) {
      float s = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) s += q[d] * ks[j][d];
      const float m_new = fmaxf(m, s);
      const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
      const float p = expf(s - m_new);
      l = l * corr + p;
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] = acc[d] * corr + p * vs[j][d];
      m = m_new;
    }
  }
  if (!active) return;
  T* o = out + head_row(b, i, h, T_, H, hd);
  const float inv = 1.0f / l;
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < hd) o[d] = st<T>(acc[d] * inv);
  lse[int64_t{blockIdx.y} * T_ + i] = m + logf(l);
}

// D_i = sum_d dO[i, d] * O[i, d], one thread per (b, h, i); dsum [B, H, T].
template <class T>
__global__ void rowdot_kernel(float* dsum, const T* dout, const T* out, int B, int T_, int H, int hd) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (e >= int64_t{B} * H * T_) return;
  const int i = static_cast<int>(e % T_);
  const int bh = static_cast<int>(e / T_), b = bh / H, h = bh % H;
  const int64_t r = head_row(b, i, h, T_, H, hd);
  float s = 0;
  for (int d = 0; d < hd; ++d) s += ld(dout[r + d]) * ld(out[r + d]);
  dsum[e] = s;
}

template <class T, int D>
__global__ void __launch_bounds__(kQueries) dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                      const float* dsum, int T_, int H, int hd, float scale) {
  __shared__ float ks[kKeys][D];
  __shared__ float vs[kKeys][D];
  const int b = blockIdx.y / H, h = blockIdx.y % H;
  const int q0 = blockIdx.x * kQueries, i = q0 + threadIdx.x;
  const bool active = i < T_;
  float q[D], go[D], dq[D];
  const T* qrow = active ? qkv_row(qkv, b, i, h, T_, H, hd, 0) : nullptr;
  const T* grow = active ? dout + head_row(b, i, h, T_, H, hd) : nullptr;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = (active && d < hd) ? ld(qrow[d]) * scale : 0.0f;
    go[d] = (active && d < hd) ? ld(grow[d]) : 0.0f;
    dq[d] = 0;
  }
  const float li = active ? lse[int64_t{blockIdx.y} * T_ + i] : 0.0f;
  const float di = active ? dsum[int64_t{blockIdx.y} * T_ + i] : 0.0f;
  const int k_end = min(T_, q0 + kQueries);
  for (int k0 = 0; k0 < k_end; k0 += kKeys) {
    __syncthreads();
    load_kv_tile<T, D>(ks, vs, qkv, b, h, k0, T_, H, hd);
    __syncthreads();
    const int jn = active ? min(kKeys, i - k0 + 1) : 0;
    for (int j = 0; j < jn; ++j) {
      float s = 0, dp = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        s += q[d] * ks[j][d];
        dp += go[d] * vs[j][d];
      }
      const float ds = expf(s - li) * (dp - di);
#pragma unroll
      for (int d = 0; d < D; ++d) dq[d] += ds * ks[j][d];
    }
  }
  if (!active) return;
  T* dst = dqkv + ((int64_t{b} * T_ + i) * H + h) * 3 * hd;
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < hd) dst[d] = st<T>(dq[d] * scale);
}

template <class T, int D>
__global__ void __launch_bounds__(kKeysPerBlock) dkdv_kernel(T* dqkv, const T* dout, const T* qkv,
                                                             const float* lse, const float* dsum, int T_, int H,
                                                             int hd, float scale) {
  __shared__ float qs[kQueryTile][D];  // q * scale
  __shared__ float gs[kQueryTile][D];  // dO
  __shared__ float ls[kQueryTile], ds_[kQueryTile];
  const int b = blockIdx.y / H, h = blockIdx.y % H;
  const int k0 = blockIdx.x * kKeysPerBlock, j = k0 + threadIdx.x;
  const bool active = j < T_;
  float k[D], v[D], dk[D], dv[D];
  const T* krow = active ? qkv_row(qkv, b, j, h, T_, H, hd, 1) : nullptr;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    k[d] = (active && d < hd) ? ld(krow[d]) : 0.0f;
    v[d] = (active && d < hd) ? ld(krow[hd + d]) : 0.0f;
    dk[d] = 0;
    dv[d] = 0;
  }
  const float* lse_bh = lse + int64_t{blockIdx.y} * T_;
  const float* dsum_bh = dsum + int64_t{blockIdx.y} * T_;
  for (int i0 = k0; i0 < T_; i0 += kQueryTile) {  // queries at or after the block's first key
    __syncthreads();
    for (int e = threadIdx.x; e < kQueryTile * D; e += blockDim.x) {
      const int r = e / D, d = e % D, qi = i0 + r;
      const bool in = qi < T_ && d < hd;
      qs[r][d] = in ? ld(qkv_row(qkv, b, qi, h, T_, H, hd, 0)[d]) * scale : 0.0f;
      gs[r][d] = in ? ld(dout[head_row(b, qi, h, T_, H, hd) + d]) : 0.0f;
    }
    for (int r = threadIdx.x; r < kQueryTile; r += blockDim.x) {
      ls[r] = i0 + r < T_ ? lse_bh[i0 + r] : 0.0f;
      ds_[r] = i0 + r < T_ ? dsum_bh[i0 + r] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    const int r_begin = max(0, j - i0), r_end = min(kQueryTile, T_ - i0);  // queries i >= j, i < T_
    for (int r = r_begin; r < r_end; ++r) {
      float s = 0, dp = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        s += qs[r][d] * k[d];
        dp += gs[r][d] * v[d];
      }
      const float p = expf(s - ls[r]);
      const float dsc = p * (dp - ds_[r]);
#pragma unroll
      for (int d = 0; d < D; ++d) {
        dv[d] += p * gs[r][d];
        dk[d] += dsc * qs[r][d];
      }
    }
  }
  if (!active) return;
  T* dst = dqkv + ((int64_t{b} * T_ + j) * H + h) * 3 * hd;
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < hd) {
      dst[hd + d] = st<T>(dk[d]);
      dst[2 * hd + d] = st<T>(dv[d]);
    }
}

void check_shape(int B, int T_, int H, int hd) {
  if (hd < 1 || hd > kMaxAttentionHeadSize)
    throw std::invalid_argument("gpu attention: head size must be in [1, 128]");
  if (int64_t{B} * H > 65535) throw std::invalid_argument("gpu attention: batch x heads must be at most 65535");
}

template <class F> void by_bucket(int hd, F&& f) {
  if (hd <= 32) {
    f.template operator()<32>();
  } else if (hd <= 64) {
    f.template operator()<64>();
  } else {
    f.template operator()<128>();
  }
}

}  // namespace

template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int H, int hd) {
  check_shape(B, T_, H, hd);
  if (B * T_ == 0) return;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const dim3 grid((T_ + kQueries - 1) / kQueries, B * H);
  by_bucket(hd, [&]<int D>() { forward_kernel<T, D><<<grid, kQueries, 0, stream()>>>(out, lse, qkv, T_, H, hd, scale); });
  GPU_CHECK_LAUNCH();
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int H,
                        int hd) {
  check_shape(B, T_, H, hd);
  if (B * T_ == 0) return;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const int64_t rows = int64_t{B} * H * T_;
  Buffer dsum(MemCategory::workspace, rows * sizeof(float), false, Device::cuda);
  rowdot_kernel<<<blocks_for(rows, 256), 256, 0, stream()>>>(dsum.as<float>(), dout, out, B, T_, H, hd);
  GPU_CHECK_LAUNCH();
  const dim3 qgrid((T_ + kQueries - 1) / kQueries, B * H);
  const dim3 kgrid((T_ + kKeysPerBlock - 1) / kKeysPerBlock, B * H);
  by_bucket(hd, [&]<int D>() {
    dq_kernel<T, D><<<qgrid, kQueries, 0, stream()>>>(dqkv, dout, qkv, lse, dsum.as<float>(), T_, H, hd, scale);
    GPU_CHECK_LAUNCH();
    dkdv_kernel<T, D><<<kgrid, kKeysPerBlock, 0, stream()>>>(dqkv, dout, qkv, lse, dsum.as<float>(), T_, H, hd,
                                                              scale);
  });
  GPU_CHECK_LAUNCH();
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<bf16>(bf16*, float*, const bf16*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, const float*, int, int,
                                        int, int);
template void attention_backward<bf16>(bf16*, const bf16*, const bf16*, const bf16*, const float*, int, int, int,
                                       int);

}  // namespace meshtrain::gpu

#include "meshtrain/kernels/attention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "meshtrain/kernels/cpu/common.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/kernel_clock.h"

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define MT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define MT_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef MT_ADDRESS_SANITIZER
#define MT_ADDRESS_SANITIZER 0
#endif

namespace meshtrain::kernels {

using cpu::exp_approx;
using cpu::ld;
using cpu::st;

namespace {

// The tile products are small dense matrix products on fp32 scratch, written
// with vfloat (one SIMD register) so the accumulators stay in registers.
using cpu::kVL;
using cpu::vbroadcast;
using cpu::vload;
using cpu::vstore;
using vec = cpu::vfloat;

constexpr int kBlk = kAttentionBlock;
constexpr int kRows = 4;  // rows per register block

// C[r][0 : NV*kVL] (= or +=) sum_k A(r, k) * B[k][0 : NV*kVL] for r < kRows,
// with A(r, k) = A[r * ars + k * aks] (row-major A or a transposed view).
template <int NV, bool ACC>
inline void micro_kernel(float* __restrict C, int ldc, const float* __restrict A, int ars, int aks,
                         const float* __restrict B, int ldb, int K) {
  vec acc[kRows][NV];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = ACC ? vload(C + r * ldc + v * kVL) : vec{};
  for (int k = 0; k < K; ++k) {
    vec a[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) a[r] = vbroadcast(A[r * ars + k * aks]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      vec b = vload(B + static_cast<size_t>(k) * ldb + v * kVL);
      // Keep b in a register: otherwise the compiler folds the load into
      // each of the kRows multiply-adds, multiplying the loads by kRows.
      // Only where the vector is one register (AVX and up; a baseline x86-64
      // or an Arm build splits it and needs no hint) and not under
      // AddressSanitizer, which keeps b in memory where "v" cannot name it.
#if defined(__AVX__) && !MT_ADDRESS_SANITIZER
      asm("" : "+v"(b));
#endif
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) acc[r][v] += a[r] * b;
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) vstore(C + r * ldc + v * kVL, acc[r][v]);
}

// C[rows, width] (= or +=) A(rows, K) . B[K, width]; rows a multiple of
// kRows, width a multiple of kVL.
template <bool ACC>
void tile_gemm(float* C, int ldc, const float* A, int ars, int aks, const float* B, int ldb, int rows, int width,
               int K) {
  for (int r = 0; r < rows; r += kRows) {
    float* c = C + static_cast<size_t>(r) * ldc;
    const float* a = A + static_cast<size_t>(r) * ars;
    int w = 0;
    for (; w + 4 * kVL <= width; w += 4 * kVL) micro_kernel<4, ACC>(c + w, ldc, a, ars, aks, B + w, ldb, K);
    switch ((width - w) / kVL) {
      case 3: micro_kernel<3, ACC>(c + w, ldc, a, ars, aks, B + w, ldb, K); break;
      case 2: micro_kernel<2, ACC>(c + w, ldc, a, ars, aks, B + w, ldb, K); break;
      case 1: micro_kernel<1, ACC>(c + w, ldc, a, ars, aks, B + w, ldb, K); break;
      default: break;
    }
  }
}

// `rows` consecutive tokens of one head's q, k, v, o or do (`stride`
// elements apart) into fp32 dst[kRows-padded rows][hdp]; padding zeroed.
template <class T>
void load_rows(float* dst, int hdp, const T* src, size_t stride, int rows, int hd) {
  const int rows_pad = cpu::round_up(rows, kRows);
  for (int r = 0; r < rows_pad; ++r) {
    float* o = dst + static_cast<size_t>(r) * hdp;
    if (r < rows) {
      const T* s = src + r * stride;
#pragma omp simd
      for (int d = 0; d < hd; ++d) o[d] = ld(s[d]);
    } else {
      for (int d = 0; d < hd; ++d) o[d] = 0.0f;
    }
    for (int d = hd; d < hdp; ++d) o[d] = 0.0f;
  }
}

// `rows` consecutive tokens of one head as an fp32 matrix
// [round_up(rows, kRows)][hdp] with leading dimension ld: the input itself
// when T is float and already has that shape (hd a multiple of kVL, rows a
// multiple of kRows), otherwise a converted, zero-padded copy in scratch.
struct RowsView {
  const float* p;
  int ld;
};
template <class T>
RowsView rows_view(float* scratch, int hdp, const T* src, size_t stride, int rows, int hd) {
  if constexpr (std::is_same_v<T, float>) {
    if (hd == hdp && rows % kRows == 0) return {src, static_cast<int>(stride)};
  }
  load_rows(scratch, hdp, src, stride, rows, hd);
  return {scratch, hdp};
}

// `cols` consecutive tokens of k or v, transposed into dst[hd][kBlk]; columns
// cols..kBlk zeroed.
template <class T>
void load_transposed(float* dst, const T* src, size_t stride, int cols, int hd) {
  for (int d = 0; d < hd; ++d) {
    float* o = dst + d * kBlk;
#pragma omp simd
    for (int c = 0; c < cols; ++c) o[c] = ld(src[c * stride + d]);
    for (int c = cols; c < kBlk; ++c) o[c] = 0.0f;
  }
}

// Stores fp32 rows [rows][hdp] to `rows` tokens of one head.
template <class T>
void store_rows(T* dst, size_t stride, const float* src, int hdp, int rows, int hd) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<size_t>(r) * hdp;
    T* o = dst + r * stride;
#pragma omp simd
    for (int d = 0; d < hd; ++d) o[d] = st<T>(s[d]);
  }
}

}  // namespace

template <class T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int H, int hd, int G) {
  if (B <= 0 || T_ <= 0 || H <= 0 || hd <= 0) return;
  if (G <= 0) G = H;
  const int R = H / G;  // query heads per group
  const KernelTimer timer(KernelKind::attention, double(attention_forward_flops(B, T_, H, hd, true)));
  const int hdp = cpu::round_up(hd, kVL);
  const int nqb = cpu::ceil_div(T_, kBlk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t qkv_stride = static_cast<size_t>(G) * (R + 2) * hd;  // between tokens
  const size_t out_stride = static_cast<size_t>(H) * hd;
  const int nbh = B * H;
  const int items = nbh * nqb;
  const size_t tile = static_cast<size_t>(kBlk) * hdp;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    cpu::Scratch buf = cpu::make_scratch(4 * tile + static_cast<size_t>(kBlk) * kBlk + 3 * kBlk);
    float* Qt = buf.get();  // [hdp][kBlk]  (q * scale)^T of the query block
    float* Ks = Qt + tile;  // [kBlk][hdp]  k rows of the key block
    float* Vs = Ks + tile;  // [kBlk][hdp]  v rows
    float* Oa = Vs + tile;  // [kBlk][hdp]  unnormalised output rows
    float* St = Oa + tile;  // [kBlk keys][kBlk queries]  scores, then probabilities, transposed
    float* row_m = St + static_cast<size_t>(kBlk) * kBlk;  // running max per query
    float* row_l = row_m + kBlk;                           // running sum per query
    float* alpha = row_l + kBlk;                           // rescale factor per query
    // Items of one head are consecutive (its k and v stay in cache while
    // the threads work through its query blocks), the largest query block
    // (most key blocks) first.
#pragma omp for schedule(dynamic)
    for (int item = 0; item < items; ++item) {
      const int qb = nqb - 1 - item % nqb;
      const int bh = item / nqb;
      const int b = bh / H, h = bh % H;
      const int i0 = qb * kBlk;
      const int rows = T_ - i0 < kBlk ? T_ - i0 : kBlk;
      const int rows_pad = cpu::round_up(rows, kRows);
      // This head's q, and its group's k and v (offsets within a token).
      const T* group = qkv + static_cast<size_t>(b) * T_ * qkv_stride + static_cast<size_t>(h / R) * (R + 2) * hd;
      const T* qh = group + static_cast<size_t>(h % R) * hd;
      const T* kh = group + static_cast<size_t>(R) * hd;
      const T* vh = kh + hd;
      // Scores are computed transposed, S^T = K Q^T, so the softmax
      // statistics of the 64 queries are vectors and k, v are used as rows.
      load_transposed(Qt, qh + i0 * qkv_stride, qkv_stride, rows, hd);
      for (int d = 0; d < hd; ++d)
#pragma omp simd
        for (int r = 0; r < kBlk; ++r) Qt[d * kBlk + r] *= scale;
      std::memset(Oa, 0, sizeof(float) * rows_pad * hdp);
      for (int r = 0; r < kBlk; ++r) {
        row_m[r] = kNegInf;
        row_l[r] = 0.0f;
      }
      const int kend = i0 + rows;  // keys [0, kend) are visible to this block
      for (int j0 = 0; j0 < kend; j0 += kBlk) {
        const int cols = kend - j0 < kBlk ? kend - j0 : kBlk;
        const int cols_pad = cpu::round_up(cols, kRows);
        const RowsView K = rows_view(Ks, hdp, kh + j0 * qkv_stride, qkv_stride, cols, hd);
        const RowsView V = rows_view(Vs, hdp, vh + j0 * qkv_stride, qkv_stride, cols, hd);
        tile_gemm<false>(St, kBlk, K.p, K.ld, 1, Qt, kBlk, cols_pad, kBlk, hd);
        // Causal mask: key j0 + c is visible to query i0 + r iff c <= r + i0 - j0.
        if (j0 + cols - 1 > i0) {
          for (int c = 0; c < cols; ++c) {
            float* s = St + c * kBlk;
            const int first_visible = c - (i0 - j0);  // smallest r that sees key c
#pragma omp simd
            for (int r = 0; r < kBlk; ++r) s[r] = r < first_visible ? kNegInf : s[r];
          }
        }
        // Online softmax, vectorised over the queries.
        float mx[kBlk];
#pragma omp simd
        for (int r = 0; r < kBlk; ++r) mx[r] = row_m[r];
        for (int c = 0; c < cols; ++c) {
          const float* s = St + c * kBlk;
#pragma omp simd
          for (int r = 0; r < kBlk; ++r) mx[r] = s[r] > mx[r] ? s[r] : mx[r];
        }
        float sum[kBlk];
#pragma omp simd
        for (int r = 0; r < kBlk; ++r) {
          alpha[r] = exp_approx(row_m[r] - mx[r]);
          sum[r] = 0.0f;
        }
        for (int c = 0; c < cols; ++c) {
          float* s = St + c * kBlk;
#pragma omp simd
          for (int r = 0; r < kBlk; ++r) {
            const float p = exp_approx(s[r] - mx[r]);
            s[r] = p;
            sum[r] += p;
          }
        }
#pragma omp simd
        for (int r = 0; r < kBlk; ++r) {
          row_l[r] = row_l[r] * alpha[r] + sum[r];
          row_m[r] = mx[r];
        }
        if (j0 > 0) {
          for (int r = 0; r < rows; ++r) {
            float* o = Oa + static_cast<size_t>(r) * hdp;
            const float a = alpha[r];
#pragma omp simd
            for (int d = 0; d < hdp; ++d) o[d] *= a;
          }
        }
        // O += P V, with P read through its transpose.
        tile_gemm<true>(Oa, hdp, St, 1, kBlk, V.p, V.ld, rows_pad, hdp, cols);
      }
      for (int r = 0; r < rows; ++r) {
        const float inv = 1.0f / row_l[r];
        float* o = Oa + static_cast<size_t>(r) * hdp;
#pragma omp simd
        for (int d = 0; d < hdp; ++d) o[d] *= inv;
        lse[static_cast<size_t>(bh) * T_ + i0 + r] = row_m[r] + std::log(row_l[r]);
      }
      store_rows(out + static_cast<size_t>(b) * T_ * out_stride + static_cast<size_t>(i0) * out_stride +
                     static_cast<size_t>(h) * hd,
                 out_stride, Oa, hdp, rows, hd);
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int T_, int H,
                        int hd, int G) {
  if (B <= 0 || T_ <= 0 || H <= 0 || hd <= 0) return;
  if (G <= 0) G = H;
  const int R = H / G;  // query heads per group, sharing one k and v
  const KernelTimer timer(KernelKind::attention, double(attention_backward_flops(B, T_, H, hd, true)));
  const int hdp = cpu::round_up(hd, kVL);
  const int nb = cpu::ceil_div(T_, kBlk);
  const int Tp = nb * kBlk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t qkv_stride = static_cast<size_t>(G) * (R + 2) * hd;
  const size_t out_stride = static_cast<size_t>(H) * hd;
  const int nbg = B * G;
  const size_t tile = static_cast<size_t>(kBlk) * hdp;
#pragma omp parallel
  {
    cpu::Scratch buf = cpu::make_scratch(7 * tile + 2 * static_cast<size_t>(kBlk) * kBlk +
                                         static_cast<size_t>(R) * Tp * (hdp + 1));
    float* Kr = buf.get();   // [kBlk][hdp]  k rows
    float* Kt = Kr + tile;   // [hdp][kBlk]  k^T
    float* Vt = Kt + tile;   // [hdp][kBlk]  v^T
    float* dK = Vt + tile;   // [kBlk][hdp]
    float* dV = dK + tile;   // [kBlk][hdp]
    float* Qr = dV + tile;   // [kBlk][hdp]  q rows
    float* dO = Qr + tile;   // [kBlk][hdp]  dout rows
    float* P = dO + tile;    // [kBlk][kBlk] probabilities
    float* dS = P + static_cast<size_t>(kBlk) * kBlk;  // [kBlk][kBlk] dP, then dS (times scale)
    float* D = dS + static_cast<size_t>(kBlk) * kBlk;  // [R][Tp] rowsum(dO * O) per head of the group
    float* dQ = D + static_cast<size_t>(R) * Tp;        // [R][Tp][hdp]
#pragma omp for schedule(dynamic)
    for (int bg = 0; bg < nbg; ++bg) {
      const int b = bg / G, g = bg % G;
      const size_t group_off = static_cast<size_t>(b) * T_ * qkv_stride + static_cast<size_t>(g) * (R + 2) * hd;
      const T* kh = qkv + group_off + static_cast<size_t>(R) * hd;
      const T* vh = kh + hd;
      T* dgroup = dqkv + group_off;
      const size_t o_base = static_cast<size_t>(b) * T_ * out_stride + static_cast<size_t>(g) * R * hd;
      const int hdv = hd / kVL * kVL;
      for (int r = 0; r < R; ++r) {
        const T* o_head = out + o_base + static_cast<size_t>(r) * hd;
        const T* do_head = dout + o_base + static_cast<size_t>(r) * hd;
        for (int t = 0; t < T_; ++t) {
          const T* o = o_head + t * out_stride;
          const T* gr = do_head + t * out_stride;
          vec acc = cpu::sum_blocks(hdv, [&](int d) { return vload(o + d) * vload(gr + d); });
          if (hdv < hd)
            acc += cpu::vload_partial(o + hdv, hd - hdv, 0.0f) * cpu::vload_partial(gr + hdv, hd - hdv, 0.0f);
          D[static_cast<size_t>(r) * Tp + t] = cpu::hsum(acc);
        }
      }
      std::memset(dQ, 0, sizeof(float) * R * Tp * hdp);
      for (int kb = 0; kb < nb; ++kb) {
        const int j0 = kb * kBlk;
        const int cols = T_ - j0 < kBlk ? T_ - j0 : kBlk;
        const int cols_pad = cpu::round_up(cols, kRows);
        const RowsView K = rows_view(Kr, hdp, kh + j0 * qkv_stride, qkv_stride, cols, hd);
        load_transposed(Kt, kh + j0 * qkv_stride, qkv_stride, cols, hd);
        load_transposed(Vt, vh + j0 * qkv_stride, qkv_stride, cols, hd);
        std::memset(dK, 0, sizeof(float) * cols_pad * hdp);
        std::memset(dV, 0, sizeof(float) * cols_pad * hdp);
        // The group's query heads in order, so dK and dV sum them
        // deterministically.
        for (int r = 0; r < R; ++r) {
          const T* qh = qkv + group_off + static_cast<size_t>(r) * hd;
          const T* do_head = dout + o_base + static_cast<size_t>(r) * hd;
          const float* lse_bh = lse + (static_cast<size_t>(b) * H + static_cast<size_t>(g) * R + r) * T_;
          const float* Dr = D + static_cast<size_t>(r) * Tp;
          float* dQr = dQ + static_cast<size_t>(r) * Tp * hdp;
          for (int qb = kb; qb < nb; ++qb) {
            const int i0 = qb * kBlk;
            const int rows = T_ - i0 < kBlk ? T_ - i0 : kBlk;
            const int rows_pad = cpu::round_up(rows, kRows);
            const RowsView Q = rows_view(Qr, hdp, qh + i0 * qkv_stride, qkv_stride, rows, hd);
            const RowsView Gv = rows_view(dO, hdp, do_head + i0 * out_stride, out_stride, rows, hd);
            // P = exp(scale * q k^T - lse), zero where masked or padded.
            tile_gemm<false>(P, kBlk, Q.p, Q.ld, 1, Kt, kBlk, rows_pad, kBlk, hd);
            for (int rr = 0; rr < rows_pad; ++rr) {
              float* p = P + rr * kBlk;
              const int vis = rr < rows ? i0 + rr - j0 + 1 : 0;
              const int lim = vis < cols ? vis : cols;
              const float l = rr < rows ? lse_bh[i0 + rr] : 0.0f;
#pragma omp simd
              for (int c = 0; c < lim; ++c) p[c] = exp_approx(p[c] * scale - l);
              for (int c = lim; c < kBlk; ++c) p[c] = 0.0f;
            }
            // dV += P^T dO
            tile_gemm<true>(dV, hdp, P, 1, kBlk, Gv.p, Gv.ld, cols_pad, hdp, rows);
            // dP = dO v^T, then dS = P * (dP - D) * scale
            tile_gemm<false>(dS, kBlk, Gv.p, Gv.ld, 1, Vt, kBlk, rows_pad, kBlk, hd);
            for (int rr = 0; rr < rows_pad; ++rr) {
              float* ds = dS + rr * kBlk;
              const float* p = P + rr * kBlk;
              const float Di = rr < rows ? Dr[i0 + rr] : 0.0f;
#pragma omp simd
              for (int c = 0; c < kBlk; ++c) ds[c] = p[c] * (ds[c] - Di) * scale;
            }
            // dQ += dS k;  dK += dS^T q
            tile_gemm<true>(dQr + static_cast<size_t>(i0) * hdp, hdp, dS, kBlk, 1, K.p, K.ld, rows_pad, hdp, cols);
            tile_gemm<true>(dK, hdp, dS, 1, kBlk, Q.p, Q.ld, cols_pad, hdp, rows);
          }
        }
        store_rows(dgroup + static_cast<size_t>(R) * hd + j0 * qkv_stride, qkv_stride, dK, hdp, cols, hd);
        store_rows(dgroup + static_cast<size_t>(R + 1) * hd + j0 * qkv_stride, qkv_stride, dV, hdp, cols, hd);
      }
      for (int r = 0; r < R; ++r)
        store_rows(dgroup + static_cast<size_t>(r) * hd, qkv_stride, dQ + static_cast<size_t>(r) * Tp * hdp, hdp, T_,
                   hd);
    }
  }
}

#define MT_INSTANTIATE(T)                                                                                  \
  template void attention_forward<T>(T*, float*, const T*, int, int, int, int, int);                      \
  template void attention_backward<T>(T*, const T*, const T*, const T*, const float*, int, int, int, int, int);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels

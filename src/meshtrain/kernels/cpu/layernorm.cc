#include "meshtrain/kernels/layernorm.h"

#include <cmath>
#include <type_traits>

#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels {

using cpu::kVL;
using cpu::vbroadcast;
using cpu::vfloat;
using cpu::vload;
using cpu::vload_partial;
using cpu::vstore;
using cpu::vstore_partial;

// Rows are processed kVL columns at a time; the last partial group goes
// through the partial load/store helpers (padding lanes are neutral).

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight_in, const T* bias_in,
                       int N, int C, float eps) {
  const int Cv = C / kVL * kVL;
  const int tail = C - Cv;
#pragma omp parallel
  {
  // bf16: weight, bias and the current row converted to fp32 once.
  cpu::Scratch buf = cpu::make_scratch(std::is_same_v<T, float> ? 0 : 3 * static_cast<size_t>(C));
  const float* weight32 = cpu::as_f32(weight_in, C, buf.get());
  const float* bias32 = cpu::as_f32(bias_in, C, buf.get() + C);
#pragma omp for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = cpu::as_f32(inp + static_cast<size_t>(n) * C, C, buf.get() + 2 * C);
    const float* weight = weight32;
    const float* bias = bias32;
    T* o = out + static_cast<size_t>(n) * C;
    vfloat acc = cpu::sum_blocks(Cv, [&](int c) { return vload(x + c); });
    if (tail) acc += vload_partial(x + Cv, tail, 0.0f);
    const float m = cpu::hsum(acc) / static_cast<float>(C);
    const vfloat vm = vbroadcast(m);
    vfloat sq = cpu::sum_blocks(Cv, [&](int c) {
      const vfloat d = vload(x + c) - vm;
      return d * d;
    });
    if (tail) {
      const vfloat d = vload_partial(x + Cv, tail, m) - vm;
      sq += d * d;
    }
    const float s = 1.0f / std::sqrt(cpu::hsum(sq) / static_cast<float>(C) + eps);
    const vfloat vs = vbroadcast(s);
    for (int c = 0; c < Cv; c += kVL)
      vstore(o + c, (vload(x + c) - vm) * vs * vload(weight + c) + vload(bias + c));
    if (tail)
      vstore_partial(o + Cv,
                     (vload_partial(x + Cv, tail, 0.0f) - vm) * vs * vload_partial(weight + Cv, tail, 0.0f) +
                         vload_partial(bias + Cv, tail, 0.0f),
                     tail);
    if (mean != nullptr) mean[n] = m;
    if (rstd != nullptr) rstd[n] = s;
  }
  }
}

template <class T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight_in,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dinp) {
  const int Cv = C / kVL * kVL;
  const int tail = C - Cv;
  const int nblocks = cpu::ceil_div(N, cpu::kReduceRows);
  // partials[b] = [dweight partial (C) | dbias partial (C)] of row block b.
  cpu::Scratch partials = cpu::make_scratch(static_cast<size_t>(nblocks) * 2 * C);
#pragma omp parallel
  {
  // bf16: weight and the current rows of inp and dout converted to fp32 once.
  cpu::Scratch buf = cpu::make_scratch(std::is_same_v<T, float> ? 0 : 3 * static_cast<size_t>(C));
  const float* weight = cpu::as_f32(weight_in, C, buf.get());
#pragma omp for schedule(static)
  for (int b = 0; b < nblocks; ++b) {
    float* pw = partials.get() + static_cast<size_t>(b) * 2 * C;
    float* pb = pw + C;
    for (int c = 0; c < 2 * C; ++c) pw[c] = 0.0f;
    const int n1 = (b + 1) * cpu::kReduceRows < N ? (b + 1) * cpu::kReduceRows : N;
    for (int n = b * cpu::kReduceRows; n < n1; ++n) {
      const float* x = cpu::as_f32(inp + static_cast<size_t>(n) * C, C, buf.get() + C);
      const float* g = cpu::as_f32(dout + static_cast<size_t>(n) * C, C, buf.get() + 2 * C);
      T* dx = dinp + static_cast<size_t>(n) * C;
      const vfloat vm = vbroadcast(mean[n]);
      const float s = rstd[n];
      const vfloat vs = vbroadcast(s);
      // Pass 1: row sums of g*w and g*w*xhat; the parameter-gradient
      // partials of this block in the same pass.
      // Two interleaved accumulator pairs keep the row sums off the
      // critical path.
      vfloat sum_g[2] = {vbroadcast(0.0f), vbroadcast(0.0f)}, sum_gx[2] = {sum_g[0], sum_g[0]};
      auto step1 = [&](vfloat xv, vfloat gv, vfloat wv, int c, int width) {
        const vfloat xhat = (xv - vm) * vs;
        const vfloat gw = gv * wv;
        const int slot = (c / kVL) & 1;
        sum_g[slot] += gw;
        sum_gx[slot] += gw * xhat;
        if (width == kVL) {
          vstore(pb + c, vload(pb + c) + gv);
          vstore(pw + c, vload(pw + c) + gv * xhat);
        } else {
          vstore_partial(pb + c, vload_partial(pb + c, width, 0.0f) + gv, width);
          vstore_partial(pw + c, vload_partial(pw + c, width, 0.0f) + gv * xhat, width);
        }
      };
      for (int c = 0; c < Cv; c += kVL) step1(vload(x + c), vload(g + c), vload(weight + c), c, kVL);
      if (tail)
        step1(vload_partial(x + Cv, tail, 0.0f), vload_partial(g + Cv, tail, 0.0f),
              vload_partial(weight + Cv, tail, 0.0f), Cv, tail);
      const vfloat a = vbroadcast(cpu::hsum(sum_g[0] + sum_g[1]) / static_cast<float>(C));
      const vfloat bc = vbroadcast(cpu::hsum(sum_gx[0] + sum_gx[1]) / static_cast<float>(C));
      // Pass 2: dinp = rstd * (g*w - a - xhat * bc)  (= or +=)
      auto step2 = [&](vfloat xv, vfloat gv, vfloat wv, vfloat old) {
        const vfloat xhat = (xv - vm) * vs;
        return old + vs * (gv * wv - a - xhat * bc);
      };
      const vfloat zero = vbroadcast(0.0f);
      for (int c = 0; c < Cv; c += kVL)
        vstore(dx + c, step2(vload(x + c), vload(g + c), vload(weight + c), accumulate_dinp ? vload(dx + c) : zero));
      if (tail)
        vstore_partial(dx + Cv,
                       step2(vload_partial(x + Cv, tail, 0.0f), vload_partial(g + Cv, tail, 0.0f),
                             vload_partial(weight + Cv, tail, 0.0f),
                             accumulate_dinp ? vload_partial(dx + Cv, tail, 0.0f) : zero),
                       tail);
    }
  }
  }
  // Sum the block partials in block order into a [2C] staging row.
  cpu::Scratch sums = cpu::make_scratch(2 * static_cast<size_t>(C));
  for (int c = 0; c < 2 * C; ++c) sums[c] = 0.0f;
  cpu::reduce_partials_into(sums.get(), partials.get(), nblocks, 2 * C);
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    dweight[c] += sums[c];
    dbias[c] += sums[C + c];
  }
}

#define MT_INSTANTIATE(T)                                                                                       \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, float);              \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, const float*,          \
                                      const float*, int, int, bool);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels

// The Llama blocks' CPU kernels beside their GPT-2 counterparts, at the bench
// model's shapes (configs/models/bench.json: hidden 384, 6 heads of 64,
// sequence 256; micro-batch 8, so 2048 rows), fp32:
//   Norm        LayerNorm against RMSNorm on [2048, 384], forward and backward
//               (the backward accumulating into dinp, as in a block)
//   Activation  GELU on [2048, 1536] against SwiGLU on [2048, 2 x 1024]
//   Mlp         the whole MLP forward and backward: fc 384 -> 1536, GELU,
//               fc2 1536 -> 384 against fc 384 -> 2 x 1024, SwiGLU, fc2
//               1024 -> 384 (Llama's 8h/3 width: the same 1,179,648 weights)
//   Position    the learned position add ([2048, 384]) against rope on the
//               queries and keys, forward and backward, MHA and GQA layouts
//   Attention   MHA (6 key/value heads) against GQA (2 groups of 3 queries),
//               forward and backward
// Memory-bound kernels report GB/s of compulsory traffic (each tensor read or
// written once), matmuls and attention GFLOP/s (flops.h conventions).
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "meshtrain/core/rng.h"
#include "meshtrain/kernels/attention.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/layernorm.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/kernels/residual.h"
#include "meshtrain/kernels/rmsnorm.h"
#include "meshtrain/kernels/rope.h"
#include "meshtrain/kernels/swiglu.h"
#include "meshtrain/model/rope_scaling.h"

namespace mk = meshtrain::kernels;

namespace {

constexpr int kB = 8, kT = 256, kH = 6, kHd = 64, kC = kH * kHd, kN = kB * kT;
constexpr int kGeluF = 4 * kC, kSwigluF = 8 * kC / 3;  // 1536, 1024

std::vector<float> filled(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * 1.7320508f * (static_cast<float>(meshtrain::hash3(seed, 1, i) >> 40) * 0x1p-23f - 1.0f);
  return v;
}
void set_gbytes(benchmark::State& s, double bytes) {
  s.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void set_gflops(benchmark::State& s, double flops) {
  s.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- norms: forward reads inp, writes out; backward reads inp, dout, dinp, writes dinp.
template <bool kRms>
void Norm_Forward(benchmark::State& s) {
  auto inp = filled(size_t(kN) * kC, 1), w = filled(kC, 2), b = filled(kC, 3);
  std::vector<float> out(inp.size()), mean(kN), rstd(kN);
  for (auto _ : s) {
    if constexpr (kRms)
      mk::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), kN, kC, mk::kLayerNormEps);
    else
      mk::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kC,
                            mk::kLayerNormEps);
  }
  set_gbytes(s, 2.0 * 4 * kN * kC);
}
template <bool kRms>
void Norm_Backward(benchmark::State& s) {
  auto inp = filled(size_t(kN) * kC, 1), w = filled(kC, 2), b = filled(kC, 3), dout = filled(inp.size(), 4);
  std::vector<float> out(inp.size()), dinp(inp.size()), mean(kN), rstd(kN), dw(kC), db(kC);
  if constexpr (kRms)
    mk::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), kN, kC, mk::kLayerNormEps);
  else
    mk::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kC,
                          mk::kLayerNormEps);
  for (auto _ : s) {
    if constexpr (kRms)
      mk::rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), kN, kC, true);
    else
      mk::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                             rstd.data(), kN, kC, true);
  }
  set_gbytes(s, 4.0 * 4 * kN * kC);
}
BENCHMARK(Norm_Forward<false>)->Name("Norm_Forward/LayerNorm")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Norm_Forward<true>)->Name("Norm_Forward/RMSNorm")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Norm_Backward<false>)->Name("Norm_Backward/LayerNorm")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Norm_Backward<true>)->Name("Norm_Backward/RMSNorm")->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- activations: GELU reads N x F and writes N x F (backward: reads 2, writes 1);
// SwiGLU reads N x 2F and writes N x F (backward: reads 3F, writes 2F per row).
template <bool kSwiglu>
void Activation_Forward(benchmark::State& s) {
  const int F = kSwiglu ? kSwigluF : kGeluF;
  auto inp = filled(size_t(kN) * (kSwiglu ? 2 : 1) * F, 5);
  std::vector<float> out(size_t(kN) * F);
  for (auto _ : s) {
    if constexpr (kSwiglu)
      mk::swiglu_forward(out.data(), inp.data(), kN, F);
    else
      mk::gelu_forward(out.data(), inp.data(), inp.size());
  }
  set_gbytes(s, 4.0 * kN * F * (kSwiglu ? 3 : 2));
}
template <bool kSwiglu>
void Activation_Backward(benchmark::State& s) {
  const int F = kSwiglu ? kSwigluF : kGeluF;
  auto inp = filled(size_t(kN) * (kSwiglu ? 2 : 1) * F, 5), dout = filled(size_t(kN) * F, 6);
  std::vector<float> dinp(inp.size());
  for (auto _ : s) {
    if constexpr (kSwiglu)
      mk::swiglu_backward(dinp.data(), inp.data(), dout.data(), kN, F);
    else
      mk::gelu_backward(dinp.data(), inp.data(), dout.data(), inp.size());
  }
  set_gbytes(s, 4.0 * kN * F * (kSwiglu ? 5 : 3));
}
BENCHMARK(Activation_Forward<false>)->Name("Activation_Forward/GELU")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Activation_Forward<true>)->Name("Activation_Forward/SwiGLU")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Activation_Backward<false>)->Name("Activation_Backward/GELU")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Activation_Backward<true>)->Name("Activation_Backward/SwiGLU")->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- the whole MLP, forward then backward (weights' and input gradients).
template <bool kSwiglu>
void Mlp_ForwardBackward(benchmark::State& s) {
  const int F = kSwiglu ? kSwigluF : kGeluF, fc = kSwiglu ? 2 * F : F;
  auto x = filled(size_t(kN) * kC, 7), w1 = filled(size_t(fc) * kC, 8, 0.05f), w2 = filled(size_t(kC) * F, 9, 0.05f);
  auto dy = filled(size_t(kN) * kC, 10);
  std::vector<float> h(size_t(kN) * fc), a(size_t(kN) * F), y(size_t(kN) * kC), da(a.size()), dh(h.size()),
      dx(x.size()), dw1(w1.size()), dw2(w2.size());
  for (auto _ : s) {
    mk::matmul_forward<float>(h.data(), x.data(), w1.data(), nullptr, kN, kC, fc);
    if constexpr (kSwiglu)
      mk::swiglu_forward(a.data(), h.data(), kN, F);
    else
      mk::gelu_forward(a.data(), h.data(), h.size());
    mk::matmul_forward<float>(y.data(), a.data(), w2.data(), nullptr, kN, F, kC);
    mk::matmul_backward<float>(da.data(), dw2.data(), nullptr, dy.data(), a.data(), w2.data(), kN, F, kC, false);
    if constexpr (kSwiglu)
      mk::swiglu_backward(dh.data(), h.data(), da.data(), kN, F);
    else
      mk::gelu_backward(dh.data(), h.data(), da.data(), h.size());
    mk::matmul_backward<float>(dx.data(), dw1.data(), nullptr, dh.data(), x.data(), w1.data(), kN, kC, fc, false);
  }
  set_gflops(s, 3.0 * 2 * double(kN) * kC * (fc + F));  // forward 2MKN per matmul, backward twice that
}
BENCHMARK(Mlp_ForwardBackward<false>)->Name("Mlp_ForwardBackward/GELU")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Mlp_ForwardBackward<true>)->Name("Mlp_ForwardBackward/SwiGLU")->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- positions: the learned table's add (reads 2, writes 1 of [N, C])
// against rope in place on the queries and keys (read and written once).
void Position_LearnedAdd(benchmark::State& s) {
  auto x = filled(size_t(kN) * kC, 11), pos = filled(size_t(kN) * kC, 12);
  std::vector<float> out(x.size());
  for (auto _ : s) mk::residual_forward(out.data(), x.data(), pos.data(), x.size());
  set_gbytes(s, 3.0 * 4 * kN * kC);
}
template <bool kBackward>
void Position_Rope(benchmark::State& s) {
  const int G = static_cast<int>(s.range(0)), R = kH / G;
  auto qkv = filled(size_t(kN) * G * (R + 2) * kHd, 13);
  const std::vector<float> table = meshtrain::rope_cos_sin_table(kT, kHd, 10000, meshtrain::RopeScaling{});
  for (auto _ : s) {
    if constexpr (kBackward)
      mk::rope_backward(qkv.data(), table.data(), kB, kT, G, R, kHd);
    else
      mk::rope_forward(qkv.data(), table.data(), kB, kT, G, R, kHd);
  }
  set_gbytes(s, 2.0 * 4 * kN * G * (R + 1) * kHd);
}
BENCHMARK(Position_LearnedAdd)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Position_Rope<false>)->Name("Position_RopeForward")->ArgName("groups")->Arg(6)->Arg(2)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Position_Rope<true>)->Name("Position_RopeBackward")->ArgName("groups")->Arg(6)->Arg(2)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- attention, MHA (groups 6) and GQA (groups 2): the same FLOPs, a third
// of the keys and values.
void Attention_Forward(benchmark::State& s) {
  const int G = static_cast<int>(s.range(0)), R = kH / G;
  auto qkv = filled(size_t(kN) * G * (R + 2) * kHd, 14);
  std::vector<float> out(size_t(kN) * kC), lse(size_t(kB) * kH * kT);
  for (auto _ : s) mk::attention_forward(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHd, G);
  set_gflops(s, double(mk::attention_forward_flops(kB, kT, kH, kHd, true)));
}
void Attention_Backward(benchmark::State& s) {
  const int G = static_cast<int>(s.range(0)), R = kH / G;
  auto qkv = filled(size_t(kN) * G * (R + 2) * kHd, 14), dout = filled(size_t(kN) * kC, 15);
  std::vector<float> out(size_t(kN) * kC), lse(size_t(kB) * kH * kT), dqkv(qkv.size());
  mk::attention_forward(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHd, G);
  for (auto _ : s)
    mk::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), kB, kT, kH, kHd, G);
  set_gflops(s, double(mk::attention_backward_flops(kB, kT, kH, kHd, true)));
}
BENCHMARK(Attention_Forward)->ArgName("groups")->Arg(6)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Attention_Backward)->ArgName("groups")->Arg(6)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

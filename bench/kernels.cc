// CPU kernel benchmarks at the bench model's shapes (configs/models/bench.json:
// hidden 384, 6 heads, sequence 256, vocabulary 50304; micro-batch 8, so
// 2048 rows). Matmuls and attention report GFLOP/s (flops.h conventions;
// attention counts the causal pairs), memory-bound kernels report GB/s of
// compulsory traffic (each tensor read or written once). Matmul_Raw runs a
// pre-built oneDNN primitive on pre-built memory objects: the ceiling the
// matmul wrapper is measured against.
#include <benchmark/benchmark.h>

#include <dnnl.hpp>
#include <cstring>
#include <vector>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/kernels/attention.h"
#include "meshtrain/kernels/crossentropy.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/gelu.h"
#include "meshtrain/kernels/layernorm.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/kernels/residual.h"

namespace mk = meshtrain::kernels;
using meshtrain::bf16;

namespace {

template <class T>
std::vector<T> filled(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<T> v(n);
  // uniform in [-scale * sqrt(3), scale * sqrt(3)): unit variance times scale
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(scale * 1.7320508f *
                          (static_cast<float>(meshtrain::hash3(seed, 1, i) >> 40) * 0x1p-23f - 1.0f));
  return v;
}

void set_gflops(benchmark::State& s, double flops_per_iter) {
  s.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void set_gbytes(benchmark::State& s, double bytes_per_iter) {
  s.counters["GB/s"] = benchmark::Counter(bytes_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// M = 2048 rows; (K, N) of the bench model's linear layers and the LM head,
// plus a square 2048^3.
void matmul_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  for (auto [K, N] : {std::pair{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}, {384, 50304}, {2048, 2048}})
    b->Args({2048, K, N});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

template <class T>
void Matmul_Forward(benchmark::State& s) {
  const int M = s.range(0), K = s.range(1), N = s.range(2);
  auto inp = filled<T>(size_t(M) * K, 1), w = filled<T>(size_t(N) * K, 2, 0.05f), bias = filled<T>(N, 3);
  std::vector<T> out(size_t(M) * N);
  for (auto _ : s) mk::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), M, K, N);
  set_gflops(s, double(mk::matmul_forward_flops(M, K, N)));
}

// dinp and dweight (accumulate) plus dbias: 4MKN.
template <class T>
void Matmul_Backward(benchmark::State& s) {
  const int M = s.range(0), K = s.range(1), N = s.range(2);
  auto inp = filled<T>(size_t(M) * K, 1), w = filled<T>(size_t(N) * K, 2, 0.05f), dout = filled<T>(size_t(M) * N, 4);
  std::vector<T> dinp(size_t(M) * K);
  std::vector<float> dw(size_t(N) * K), db(N);
  for (auto _ : s)
    mk::matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), M, K, N, false);
  set_gflops(s, double(mk::matmul_backward_flops(M, K, N, true)));
}

// The same forward product (no bias) through a primitive and memory objects
// built once, outside the timed loop.
template <class T>
void Matmul_Raw(benchmark::State& s) {
  using dnnl::memory;
  const int M = s.range(0), K = s.range(1), N = s.range(2);
  auto inp = filled<T>(size_t(M) * K, 1), w = filled<T>(size_t(N) * K, 2, 0.05f);
  std::vector<T> out(size_t(M) * N);
  const auto dt = meshtrain::dtype_of<T>() == meshtrain::DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  memory::desc src({M, K}, dt, memory::dims{K, 1}), wei({K, N}, dt, memory::dims{1, K}),
      dst({M, N}, dt, memory::dims{N, 1});
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), eng));
  memory ms(src, eng, inp.data()), mw(wei, eng, w.data()), md(dst, eng, out.data());
  for (auto _ : s) {
    prim.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    strm.wait();
  }
  set_gflops(s, double(mk::matmul_forward_flops(M, K, N)));
}

// Per-call overhead of the wrapper (cache lookup, memory objects) on a tiny
// product, against the pre-built primitive.
void tiny_shape(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"})->Args({16, 16, 16})->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(Matmul_Forward<float>)->Apply(tiny_shape)->Name("Matmul_Forward<float>/overhead");
BENCHMARK(Matmul_Raw<float>)->Apply(tiny_shape)->Name("Matmul_Raw<float>/overhead");

BENCHMARK(Matmul_Forward<float>)->Apply(matmul_shapes);
BENCHMARK(Matmul_Raw<float>)->Apply(matmul_shapes);
BENCHMARK(Matmul_Backward<float>)->Apply(matmul_shapes);
BENCHMARK(Matmul_Forward<bf16>)->Apply(matmul_shapes);
BENCHMARK(Matmul_Raw<bf16>)->Apply(matmul_shapes);
BENCHMARK(Matmul_Backward<bf16>)->Apply(matmul_shapes);

constexpr int kB = 8, kT = 256, kH = 6, kHd = 64, kC = kH * kHd, kN = kB * kT, kV = 50304;

template <class T>
void Attention_Forward(benchmark::State& s) {
  auto qkv = filled<T>(size_t(kN) * 3 * kC, 5);
  std::vector<T> out(size_t(kN) * kC);
  std::vector<float> lse(size_t(kB) * kH * kT);
  for (auto _ : s) mk::attention_forward(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHd);
  set_gflops(s, double(mk::attention_forward_flops(kB, kT, kH, kHd, true)));
}

template <class T>
void Attention_Backward(benchmark::State& s) {
  auto qkv = filled<T>(size_t(kN) * 3 * kC, 5), dout = filled<T>(size_t(kN) * kC, 6);
  std::vector<T> out(size_t(kN) * kC), dqkv(qkv.size());
  std::vector<float> lse(size_t(kB) * kH * kT);
  mk::attention_forward(out.data(), lse.data(), qkv.data(), kB, kT, kH, kHd);
  for (auto _ : s)
    mk::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), kB, kT, kH, kHd);
  set_gflops(s, double(mk::attention_backward_flops(kB, kT, kH, kHd, true)));
}

BENCHMARK(Attention_Forward<float>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Attention_Backward<float>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Attention_Forward<bf16>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Attention_Backward<bf16>)->Unit(benchmark::kMillisecond)->UseRealTime();

// LayerNorm [2048, 384]: forward reads inp, writes out; backward reads inp
// and dout, writes dinp (parameters and row statistics are negligible).
template <class T>
void LayerNorm_Forward(benchmark::State& s) {
  auto inp = filled<T>(size_t(kN) * kC, 7), w = filled<T>(kC, 8), b = filled<T>(kC, 9);
  std::vector<T> out(inp.size());
  std::vector<float> mean(kN), rstd(kN);
  for (auto _ : s)
    mk::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kC,
                          mk::kLayerNormEps);
  set_gbytes(s, 2.0 * sizeof(T) * kN * kC);
}

template <class T>
void LayerNorm_Backward(benchmark::State& s) {
  auto inp = filled<T>(size_t(kN) * kC, 7), w = filled<T>(kC, 8), b = filled<T>(kC, 9);
  auto dout = filled<T>(inp.size(), 10);
  std::vector<T> out(inp.size()), dinp(inp.size());
  std::vector<float> mean(kN), rstd(kN), dw(kC), db(kC);
  mk::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kC,
                        mk::kLayerNormEps);
  for (auto _ : s)
    mk::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                           rstd.data(), kN, kC, false);
  set_gbytes(s, 3.0 * sizeof(T) * kN * kC);
}

BENCHMARK(LayerNorm_Forward<float>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(LayerNorm_Backward<float>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(LayerNorm_Forward<bf16>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(LayerNorm_Backward<bf16>)->Unit(benchmark::kMicrosecond)->UseRealTime();

// GELU on the MLP activation [2048, 1536]; residual add on [2048, 384].
template <class T>
void Gelu_Forward(benchmark::State& s) {
  auto inp = filled<T>(size_t(kN) * 4 * kC, 11);
  std::vector<T> out(inp.size());
  for (auto _ : s) mk::gelu_forward(out.data(), inp.data(), inp.size());
  set_gbytes(s, 2.0 * sizeof(T) * inp.size());
}
template <class T>
void Gelu_Backward(benchmark::State& s) {
  auto inp = filled<T>(size_t(kN) * 4 * kC, 11), dout = filled<T>(inp.size(), 12);
  std::vector<T> dinp(inp.size());
  for (auto _ : s) mk::gelu_backward(dinp.data(), inp.data(), dout.data(), inp.size());
  set_gbytes(s, 3.0 * sizeof(T) * inp.size());
}
template <class T>
void Residual_Forward(benchmark::State& s) {
  auto a = filled<T>(size_t(kN) * kC, 13), b = filled<T>(a.size(), 14);
  std::vector<T> out(a.size());
  for (auto _ : s) mk::residual_forward(out.data(), a.data(), b.data(), a.size());
  set_gbytes(s, 3.0 * sizeof(T) * a.size());
}
// Reference point for the memory-bound kernels: memcpy of the GELU tensor.
void Memcpy_Baseline(benchmark::State& s) {
  auto a = filled<float>(size_t(kN) * 4 * kC, 15);
  std::vector<float> b(a.size());
  for (auto _ : s) {
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  set_gbytes(s, 2.0 * sizeof(float) * a.size());
}

BENCHMARK(Gelu_Forward<float>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Gelu_Backward<float>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Gelu_Forward<bf16>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Gelu_Backward<bf16>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Residual_Forward<float>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Residual_Forward<bf16>)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(Memcpy_Baseline)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Cross-entropy over [2048, 50304] logits (one rank): forward = row max +
// sum-exp passes (two reads) + loss; backward one read and one write, in place.
template <class T>
void CrossEntropy_Forward(benchmark::State& s) {
  auto logits = filled<T>(size_t(kN) * kV, 16, 2.0f);
  std::vector<int32_t> tgt(kN);
  for (int n = 0; n < kN; ++n) tgt[n] = (n * 7919) % kV;
  std::vector<float> mx(kN), se(kN), tl(kN), loss(kN);
  for (auto _ : s) {
    mk::crossentropy_row_max(mx.data(), logits.data(), kN, kV, kV);
    mk::crossentropy_sumexp(se.data(), tl.data(), logits.data(), mx.data(), tgt.data(), kN, kV, 0, kV);
    mk::crossentropy_loss(loss.data(), mx.data(), se.data(), tl.data(), kN);
  }
  set_gbytes(s, 2.0 * sizeof(T) * kN * kV);
  s.counters["GFLOP/s"] = benchmark::Counter(1e-9 * double(mk::crossentropy_forward_flops(kN, kV)),
                                             benchmark::Counter::kIsIterationInvariantRate);
}
template <class T>
void CrossEntropy_Backward(benchmark::State& s) {
  auto logits = filled<T>(size_t(kN) * kV, 16, 2.0f);
  std::vector<int32_t> tgt(kN);
  for (int n = 0; n < kN; ++n) tgt[n] = (n * 7919) % kV;
  std::vector<float> mx(kN), se(kN), tl(kN);
  mk::crossentropy_row_max(mx.data(), logits.data(), kN, kV, kV);
  mk::crossentropy_sumexp(se.data(), tl.data(), logits.data(), mx.data(), tgt.data(), kN, kV, 0, kV);
  // in place, as the model runs it (the values change, the work does not)
  for (auto _ : s)
    mk::crossentropy_backward(logits.data(), logits.data(), mx.data(), se.data(), tgt.data(), 1.0f / kN, kN, kV, 0,
                              kV);
  set_gbytes(s, 2.0 * sizeof(T) * kN * kV);
}

BENCHMARK(CrossEntropy_Forward<float>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CrossEntropy_Backward<float>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CrossEntropy_Forward<bf16>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CrossEntropy_Backward<bf16>)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

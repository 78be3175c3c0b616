// GPU kernel benchmarks, timed by CUDA events (manual time): the cuBLASLt
// bf16 ceiling (8192^3), the GPT-2 124M/774M layer matmuls at B x T = 8192
// tokens, and causal attention forward and backward at T = 1024, hd = 64.
// Counters: TFLOP/s of each kernel (kernels/flops.h counts). Skips (an
// error per benchmark) where no GPU is visible.
#include <benchmark/benchmark.h>

#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/gpu/kernels.h"
#include "meshtrain/kernels/gpu/runtime_api.h"

namespace meshtrain {
namespace {

bool ready(benchmark::State& state) {
  if (gpu::device_count() == 0) {
    state.SkipWithError(("no GPU visible: " + gpu::no_device_reason()).c_str());
    return false;
  }
  gpu::init(0);
  return true;
}

Buffer device(size_t bytes) { return Buffer(MemCategory::workspace, bytes, true, Device::cuda); }

// Runs `body` once untimed, then once per iteration between two events.
template <class F> void timed(benchmark::State& state, double flops, F&& body) {
  body();
  gpu::EventTimer t;
  for (auto _ : state) {
    t.start();
    body();
    t.stop();
    state.SetIterationTime(t.seconds());
  }
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

void Matmul_Bf16(benchmark::State& state) {
  if (!ready(state)) return;
  const int M = state.range(0), K = state.range(1), N = state.range(2);
  Buffer x = device(size_t(M) * K * 2), w = device(size_t(N) * K * 2), y = device(size_t(M) * N * 2);
  timed(state, kernels::matmul_forward_flops(M, K, N), [&] {
    gpu::matmul_forward<bf16>(y.as<bf16>(), x.as<bf16>(), w.as<bf16>(), nullptr, M, K, N);
  });
}
BENCHMARK(Matmul_Bf16)
    ->ArgNames({"M", "K", "N"})
    ->Args({8192, 8192, 8192})                                      // the ceiling
    ->Args({8192, 768, 2304})->Args({8192, 768, 768})->Args({8192, 768, 3072})->Args({8192, 3072, 768})
    ->Args({8192, 768, 50304})                                      // 124M
    ->Args({8192, 1280, 3840})->Args({8192, 1280, 5120})->Args({8192, 5120, 1280})
    ->Args({8192, 1280, 50304})                                     // 774M
    ->UseManualTime()->Unit(benchmark::kMillisecond);

void Attention_Bf16(benchmark::State& state) {
  if (!ready(state)) return;
  const int B = 8, T = 1024, H = state.range(0), hd = 64;
  const bool backward = state.range(1);
  const size_t nqkv = size_t(B) * T * H * 3 * hd;
  Buffer qkv = device(nqkv * 2), out = device(nqkv / 3 * 2), lse = device(size_t(B) * H * T * 4),
         dout = device(nqkv / 3 * 2), dqkv = device(nqkv * 2);
  gpu::attention_forward<bf16>(out.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, H, hd);
  const double flops = backward ? kernels::attention_backward_flops(B, T, H, hd, true)
                                : kernels::attention_forward_flops(B, T, H, hd, true);
  timed(state, flops, [&] {
    if (backward)
      gpu::attention_backward<bf16>(dqkv.as<bf16>(), dout.as<bf16>(), qkv.as<bf16>(), out.as<bf16>(),
                                    lse.as<float>(), B, T, H, hd);
    else
      gpu::attention_forward<bf16>(out.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, H, hd);
  });
}
BENCHMARK(Attention_Bf16)->ArgNames({"H", "backward"})->Args({12, 0})->Args({12, 1})->Args({20, 0})->Args({20, 1})
    ->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshtrain

BENCHMARK_MAIN();

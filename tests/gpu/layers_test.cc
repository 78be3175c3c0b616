// GPU against CPU: LayerNorm, embeddings, vocabulary-parallel cross-entropy,
// matmuls (cuBLASLt) and causal attention, fp32 and bf16, on odd shapes.
// Tolerances (relative, with a floor of 1% of the largest expected value):
// fp32 1e-5 for normalisation and softmax, 1e-4 for matmuls, attention and
// parameter gradients (different summation orders over up to ~1000 terms);
// bf16 1.6e-2 (outputs rounded to bf16 on both sides); bf16 matmuls are
// checked on each side against double precision (within_bf16_matmul_rounding:
// cuBLASLt may round the product before a bias or accumulate, oneDNN after).
#include <type_traits>

#include <fmt/format.h>

#include "meshtrain/kernels/attention.h"
#include "meshtrain/kernels/crossentropy.h"
#include "meshtrain/kernels/embedding.h"
#include "meshtrain/kernels/gpu/kernels.h"
#include "meshtrain/kernels/layernorm.h"
#include "meshtrain/kernels/matmul.h"

#include "gpu_testing.h"

namespace meshtrain {
namespace {

using namespace mt_test;

template <class T> class GpuLayers : public ::testing::Test {};
using Types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(GpuLayers, Types);

TYPED_TEST(GpuLayers, LayerNormMatchesCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  for (auto [N, C] : {std::pair{1, 7}, std::pair{67, 257}, std::pair{130, 768}}) {
    const auto x = make<T>(randn(size_t(N) * C, 1, 2.0f, 0.5f)), w = make<T>(randn(C, 2)),
               b = make<T>(randn(C, 3)), dy = make<T>(randn(size_t(N) * C, 4));
    std::vector<T> y(x.size()), dx = make<T>(randn(x.size(), 5));
    vecf mean(N), rstd(N), dw = randn(C, 6), db = randn(C, 7);
    DeviceVec<T> gx(x), gw(w), gb(b), gdy(dy), gy(x.size()), gdx(dx);
    DeviceVec<float> gmean(N), grstd(N), gdw(dw), gdb(db);
    kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C,
                               kernels::kLayerNormEps);
    kernels::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C, /*accumulate_dinp=*/true);
    gpu::layernorm_forward(gy.get(), gmean.get(), grstd.get(), gx.get(), gw.get(), gb.get(), N, C);
    gpu::layernorm_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), gmean.get(),
                            grstd.get(), N, C, true);
    const std::string at = fmt::format("N={} C={}", N, C);
    EXPECT_TRUE(close(as_float(gy.host()), as_float(y), tol<T>(1e-5))) << at;
    EXPECT_TRUE(close(gmean.host(), mean, 1e-5)) << at;
    EXPECT_TRUE(close(grstd.host(), rstd, 1e-5)) << at;
    EXPECT_TRUE(close(as_float(gdx.host()), as_float(dx), tol<T>(1e-4))) << at;
    EXPECT_TRUE(close(gdw.host(), dw, 1e-4)) << at;
    EXPECT_TRUE(close(gdb.host(), db, 1e-4)) << at;
  }
}

TYPED_TEST(GpuLayers, EmbeddingsMatchCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  const int B = 3, T_local = 37, N = B * T_local, C = 129, V_local = 53, vocab_start = 40, P = 80, pos = 11;
  std::vector<int32_t> tok(N);
  for (int n = 0; n < N; ++n) tok[n] = (n * 37 + 5) % 120;  // some inside [40, 93), some outside
  const auto wte = make<T>(randn(size_t(V_local) * C, 1)), wpe = make<T>(randn(size_t(P) * C, 2)),
             dy = make<T>(randn(size_t(N) * C, 3));
  std::vector<T> y(size_t(N) * C);
  vecf dwte = randn(wte.size(), 4), dwpe = randn(wpe.size(), 5);
  DeviceVec<int32_t> gtok(tok);
  DeviceVec<T> gwte(wte), gwpe(wpe), gdy(dy), gy(y.size());
  DeviceVec<float> gdwte(dwte), gdwpe(dwpe);
  kernels::token_embedding_forward(y.data(), tok.data(), wte.data(), N, C, vocab_start, V_local);
  kernels::position_embedding_forward(y.data(), wpe.data(), N, T_local, pos, C);
  kernels::token_embedding_backward(dwte.data(), dy.data(), tok.data(), N, C, vocab_start, V_local);
  kernels::position_embedding_backward(dwpe.data(), dy.data(), N, T_local, pos, C);
  gpu::token_embedding_forward(gy.get(), gtok.get(), gwte.get(), N, C, vocab_start, V_local);
  gpu::position_embedding_forward(gy.get(), gwpe.get(), N, T_local, pos, C);
  gpu::token_embedding_backward(gdwte.get(), gdy.get(), gtok.get(), N, C, vocab_start, V_local);
  gpu::position_embedding_backward(gdwpe.get(), gdy.get(), N, T_local, pos, C);
  EXPECT_TRUE(close(as_float(gy.host()), as_float(y), tol<T>(1e-6)));
  EXPECT_TRUE(close(gdwte.host(), dwte, 1e-5));
  EXPECT_TRUE(close(gdwpe.host(), dwpe, 1e-5));
}

TYPED_TEST(GpuLayers, CrossEntropyMatchesCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  // The last rank of a vocabulary split: 1000 local columns, 917 real.
  const int N = 45, V_local = 1000, vocab_start = 2000, n_valid = 917;
  const auto logits = make<T>(randn(size_t(N) * V_local, 1, 3.0f));
  std::vector<int32_t> tgt(N);
  for (int n = 0; n < N; ++n) tgt[n] = n % 3 == 0 ? 17 : vocab_start + (n * 131) % n_valid;  // some not local
  vecf mx(N), se(N), tl(N), loss(N);
  std::vector<T> dl(logits.size());
  kernels::crossentropy_row_max(mx.data(), logits.data(), N, V_local, n_valid);
  kernels::crossentropy_sumexp(se.data(), tl.data(), logits.data(), mx.data(), tgt.data(), N, V_local, vocab_start,
                               n_valid);
  kernels::crossentropy_loss(loss.data(), mx.data(), se.data(), tl.data(), N);
  kernels::crossentropy_backward(dl.data(), logits.data(), mx.data(), se.data(), tgt.data(), 1.0f / N, N, V_local,
                                 vocab_start, n_valid);
  DeviceVec<T> gl(logits);
  DeviceVec<int32_t> gt(tgt);
  DeviceVec<float> gmx(N), gse(N), gtl(N), gloss(N);
  gpu::crossentropy_row_max(gmx.get(), gl.get(), N, V_local, n_valid);
  gpu::crossentropy_sumexp(gse.get(), gtl.get(), gl.get(), gmx.get(), gt.get(), N, V_local, vocab_start, n_valid);
  gpu::crossentropy_loss(gloss.get(), gmx.get(), gse.get(), gtl.get(), N);
  gpu::crossentropy_backward(gl.get(), gl.get(), gmx.get(), gse.get(), gt.get(), 1.0f / N, N, V_local, vocab_start,
                             n_valid);  // in place
  EXPECT_TRUE(bitwise_equal(gmx.host(), mx));
  EXPECT_TRUE(close(gse.host(), se, 1e-5));
  EXPECT_TRUE(bitwise_equal(gtl.host(), tl));
  EXPECT_TRUE(close(gloss.host(), loss, 1e-5));
  EXPECT_TRUE(close(as_float(gl.host()), as_float(dl), tol<T>(1e-5)));
}

TYPED_TEST(GpuLayers, MatmulMatchesCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  struct Shape { int M, K, N; };
  for (Shape s : {Shape{1, 1, 1}, Shape{37, 65, 129}, Shape{256, 768, 2304}, Shape{100, 33, 1001}}) {
    const auto x = make<T>(randn(size_t(s.M) * s.K, 1)), w = make<T>(randn(size_t(s.N) * s.K, 2, 0.05f)),
               b = make<T>(randn(s.N, 3)), dy = make<T>(randn(size_t(s.M) * s.N, 4));
    for (bool bias : {false, true}) {
      std::vector<T> y(size_t(s.M) * s.N);
      kernels::matmul_forward(y.data(), x.data(), w.data(), bias ? b.data() : nullptr, s.M, s.K, s.N);
      DeviceVec<T> gx(x), gw(w), gb(b), gy(y.size());
      gpu::matmul_forward(gy.get(), gx.get(), gw.get(), bias ? gb.get() : nullptr, s.M, s.K, s.N);
      const std::string at = fmt::format("forward M={} K={} N={} bias={}", s.M, s.K, s.N, bias);
      if constexpr (std::is_same_v<T, bf16>) {
        const vecf bf = as_float(b);
        const auto ref = matmul_reference(as_float(x), as_float(w), s.M, s.K, s.N, 1, s.K,
                                          [&](int, int n) { return bias ? double(bf[n]) : 0.0; });
        EXPECT_TRUE(within_bf16_matmul_rounding(as_float(y), ref)) << "cpu " << at;
        EXPECT_TRUE(within_bf16_matmul_rounding(as_float(gy.host()), ref)) << "gpu " << at;
      } else {
        EXPECT_TRUE(close(gy.host(), y, 1e-4)) << at;
      }
    }
    for (bool acc : {false, true}) {
      std::vector<T> dx = make<T>(randn(x.size(), 5));
      const vecf dx0 = as_float(dx);
      vecf dw = randn(w.size(), 6), db = randn(s.N, 7);
      DeviceVec<T> gx(x), gw(w), gdy(dy), gdx(dx);
      DeviceVec<float> gdw(dw), gdb(db);
      kernels::matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), s.M, s.K, s.N, acc);
      gpu::matmul_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), s.M, s.K, s.N, acc);
      const std::string at = fmt::format("backward M={} K={} N={} accumulate={}", s.M, s.K, s.N, acc);
      if constexpr (std::is_same_v<T, bf16>) {
        const auto ref = matmul_reference(as_float(dy), as_float(w), s.M, s.N, s.K, s.K, 1,
                                          [&](int m, int k) { return acc ? double(dx0[size_t(m) * s.K + k]) : 0.0; });
        EXPECT_TRUE(within_bf16_matmul_rounding(as_float(dx), ref)) << "cpu " << at;
        EXPECT_TRUE(within_bf16_matmul_rounding(as_float(gdx.host()), ref)) << "gpu " << at;
      } else {
        EXPECT_TRUE(close(gdx.host(), dx, 1e-4)) << at;
      }
      EXPECT_TRUE(close(gdw.host(), dw, 1e-4)) << at;
      EXPECT_TRUE(close(gdb.host(), db, 1e-4)) << at;
    }
  }
}

TYPED_TEST(GpuLayers, AttentionMatchesCpu) {
  using T = TypeParam;
  MT_REQUIRE_GPU();
  struct Dims { int B, T, H, hd; };
  for (Dims d : {Dims{1, 1, 1, 8}, Dims{2, 67, 3, 24}, Dims{1, 130, 2, 64}, Dims{2, 97, 1, 128},
                 Dims{1, 256, 4, 40}}) {
    const size_t nqkv = size_t(d.B) * d.T * d.H * 3 * d.hd, nout = nqkv / 3, nlse = size_t(d.B) * d.H * d.T;
    const auto qkv = make<T>(randn(nqkv, 1)), dy = make<T>(randn(nout, 2));
    std::vector<T> y(nout), dqkv(nqkv);
    vecf lse(nlse);
    kernels::attention_forward(y.data(), lse.data(), qkv.data(), d.B, d.T, d.H, d.hd);
    kernels::attention_backward(dqkv.data(), dy.data(), qkv.data(), y.data(), lse.data(), d.B, d.T, d.H, d.hd);
    DeviceVec<T> gqkv(qkv), gdy(dy), gy(nout), gdqkv(nqkv);
    DeviceVec<float> glse(nlse);
    gpu::attention_forward(gy.get(), glse.get(), gqkv.get(), d.B, d.T, d.H, d.hd);
    const std::string at = fmt::format("B={} T={} H={} hd={}", d.B, d.T, d.H, d.hd);
    EXPECT_TRUE(close(as_float(gy.host()), as_float(y), tol<T>(1e-4))) << "forward " << at;
    EXPECT_TRUE(close(glse.host(), lse, 1e-5)) << "lse " << at;
    // The backward from the CPU's forward, so both see the same inputs.
    DeviceVec<T> gy_cpu(y);
    DeviceVec<float> glse_cpu(lse);
    gpu::attention_backward(gdqkv.get(), gdy.get(), gqkv.get(), gy_cpu.get(), glse_cpu.get(), d.B, d.T, d.H, d.hd);
    EXPECT_TRUE(close(as_float(gdqkv.host()), as_float(dqkv), tol<T>(1e-4))) << "backward " << at;
    // Deterministic: the same call twice gives the same bits.
    DeviceVec<T> again(nqkv);
    gpu::attention_backward(again.get(), gdy.get(), gqkv.get(), gy_cpu.get(), glse_cpu.get(), d.B, d.T, d.H, d.hd);
    EXPECT_TRUE(bitwise_equal(again.host(), gdqkv.host())) << at;
  }
}

TEST(GpuRuntime, AllocatorTracksDeviceMemory) {
  MT_REQUIRE_GPU();
  size_t free0 = 0, total = 0;
  gpu::mem_info(&free0, &total);
  const MemorySnapshot before = MemoryTracker::of(Device::cuda).snapshot();
  {
    Buffer b(MemCategory::parameters, size_t{256} << 20, true, Device::cuda);
    const MemorySnapshot during = MemoryTracker::of(Device::cuda).snapshot();
    EXPECT_EQ(during.current[0] - before.current[0], int64_t{256} << 20);
    size_t free1 = 0;
    gpu::mem_info(&free1, &total);
    EXPECT_GE(int64_t(free0) - int64_t(free1), int64_t{256} << 20) << "cudaMemGetInfo sees the allocation";
    std::vector<float> h(16);
    gpu::copy(h.data(), b.data(), sizeof(float) * h.size());
    for (float x : h) EXPECT_EQ(x, 0.0f);
  }
  EXPECT_EQ(MemoryTracker::of(Device::cuda).snapshot().current[0], before.current[0]);
  gpu::EventTimer t;
  t.start();
  t.stop();
  EXPECT_GE(t.seconds(), 0.0);
}

}  // namespace
}  // namespace meshtrain

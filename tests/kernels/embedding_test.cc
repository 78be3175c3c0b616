// Token and position embeddings: forward against a reference, backward by
// finite differences, vocabulary-parallel ranges, accumulation, bf16 and
// determinism.
#include "meshtrain/kernels/embedding.h"

#include "testing.h"

namespace meshtrain::kernels {
namespace {

using namespace mt_test;

vecd ref_embedding(const std::vector<int32_t>& tok, const vecd& wte, const vecd& wpe, int N, int C, int vstart,
                   int V_local, int T_local, int pos_offset) {
  vecd out(size_t(N) * C, 0.0);
  for (int n = 0; n < N; ++n) {
    const int row = tok[n] - vstart;
    const int pos = pos_offset + n % T_local;
    for (int c = 0; c < C; ++c)
      out[n * C + c] = (row >= 0 && row < V_local ? wte[row * C + c] : 0.0) + wpe[pos * C + c];
  }
  return out;
}

struct EmbeddingCase {
  int N = 15, C = 19, V = 16, vstart = 5, V_local = 7, T_local = 5, pos_offset = 4, P = 12;
  std::vector<int32_t> tok;
  EmbeddingCase() {
    for (int n = 0; n < N; ++n) tok.push_back(static_cast<int32_t>((n * 7 + 3) % V));
  }
};

// Forward: token rows copied (or zero outside this rank's range), position
// rows added; exact in fp32 (rtol 1e-6).
TEST(Embedding, ForwardMatchesReference) {
  EmbeddingCase s;
  const vecf wte = randn(s.V_local * s.C, 1), wpe = randn(s.P * s.C, 2);
  vecf out(s.N * s.C, 99.0f);
  token_embedding_forward(out.data(), s.tok.data(), wte.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_forward(out.data(), wpe.data(), s.N, s.T_local, s.pos_offset, s.C);
  const vecd ref = ref_embedding(s.tok, to_double(wte), to_double(wpe), s.N, s.C, s.vstart, s.V_local, s.T_local,
                                 s.pos_offset);
  EXPECT_TRUE(close(out, ref, 1e-6));
}

// Finite differences of loss = sum(out * G) for every element of wte and
// wpe; gradients accumulate onto random starting values; position rows
// outside [pos_offset, pos_offset + T_local) stay untouched. rtol 1e-3.
TEST(Embedding, GradientMatchesFiniteDifferences) {
  EmbeddingCase s;
  const vecf wte = randn(s.V_local * s.C, 3), wpe = randn(s.P * s.C, 4), g = randn(s.N * s.C, 5);
  vecd ted = to_double(wte), ped = to_double(wpe);
  const vecd gd = to_double(g);
  auto loss = [&] {
    return dot(ref_embedding(s.tok, ted, ped, s.N, s.C, s.vstart, s.V_local, s.T_local, s.pos_offset), gd);
  };
  const vecf dte0 = randn(wte.size(), 6), dpe0 = randn(wpe.size(), 7);
  vecf dte = dte0, dpe = dpe0;
  token_embedding_backward(dte.data(), g.data(), s.tok.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_backward(dpe.data(), g.data(), s.N, s.T_local, s.pos_offset, s.C);
  for (size_t i = 0; i < dte.size(); ++i) dte[i] -= dte0[i];
  for (size_t i = 0; i < dpe.size(); ++i) dpe[i] -= dpe0[i];
  auto st = grad_check(loss, ted, dte, 10000);
  auto sp = grad_check(loss, ped, dpe, 10000);
  EXPECT_TRUE(close(st.kernel, st.numeric, 1e-3));
  EXPECT_TRUE(close(sp.kernel, sp.numeric, 1e-3));
  for (int p = 0; p < s.P; ++p) {
    if (p >= s.pos_offset && p < s.pos_offset + s.T_local) continue;
    for (int c = 0; c < s.C; ++c) EXPECT_EQ(dpe[p * s.C + c], 0.0f);
  }
}

// bf16 vs fp32 on identical inputs: rtol 2e-2.
TEST(Embedding, Bf16MatchesFloat) {
  EmbeddingCase s;
  const vecf wte = round_bf16(randn(s.V_local * s.C, 8)), wpe = round_bf16(randn(s.P * s.C, 9));
  const vecf g = round_bf16(randn(s.N * s.C, 10));
  vecf out(s.N * s.C), dte(wte.size(), 0.0f), dpe(wpe.size(), 0.0f);
  token_embedding_forward(out.data(), s.tok.data(), wte.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_forward(out.data(), wpe.data(), s.N, s.T_local, s.pos_offset, s.C);
  token_embedding_backward(dte.data(), g.data(), s.tok.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_backward(dpe.data(), g.data(), s.N, s.T_local, s.pos_offset, s.C);
  const auto te16 = to_bf16(wte), pe16 = to_bf16(wpe), g16 = to_bf16(g);
  std::vector<bf16> out16(out.size());
  vecf dte16(wte.size(), 0.0f), dpe16(wpe.size(), 0.0f);
  token_embedding_forward(out16.data(), s.tok.data(), te16.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_forward(out16.data(), pe16.data(), s.N, s.T_local, s.pos_offset, s.C);
  token_embedding_backward(dte16.data(), g16.data(), s.tok.data(), s.N, s.C, s.vstart, s.V_local);
  position_embedding_backward(dpe16.data(), g16.data(), s.N, s.T_local, s.pos_offset, s.C);
  EXPECT_TRUE(close(from_bf16(out16), out, 2e-2));
  EXPECT_TRUE(close(dte16, dte, 2e-2));
  EXPECT_TRUE(close(dpe16, dpe, 2e-2));
}

// Many repeated tokens: the backward is bitwise identical across calls and
// for 1 vs 2 threads.
TEST(Embedding, BackwardDeterministicAcrossThreadCounts) {
  const int N = 512, C = 72, V = 50, T_local = 64, P = 64;
  std::vector<int32_t> tok(N);
  for (int n = 0; n < N; ++n) tok[n] = (n * 13) % V;
  const vecf g = randn(N * C, 11);
  auto run = [&] {
    vecf dte(V * C, 0.0f), dpe(P * C, 0.0f);
    token_embedding_backward(dte.data(), g.data(), tok.data(), N, C, 0, V);
    position_embedding_backward(dpe.data(), g.data(), N, T_local, 0, C);
    return std::pair{dte, dpe};
  };
  std::pair<vecf, vecf> a, b, c;
  with_threads(2, [&] { a = run(); b = run(); });
  with_threads(1, [&] { c = run(); });
  EXPECT_TRUE(bitwise_equal(a.first, b.first) && bitwise_equal(a.second, b.second));
  EXPECT_TRUE(bitwise_equal(a.first, c.first) && bitwise_equal(a.second, c.second));
}

}  // namespace
}  // namespace meshtrain::kernels

// Sampling: top-k and temperature as documented, and generation's shape and
// determinism on a randomly initialised model.
#include "meshtrain/train/generate.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "meshtrain/model/layout.h"

namespace meshtrain {
namespace {

TEST(Sampling, TopOneIsTheLargestLogitWhateverTheSeed) {
  const std::vector<float> logits = {0.1f, 2.5f, -1.0f, 2.4f, 0.0f};
  std::vector<std::pair<float, int>> cand(logits.size());
  SamplingOptions o;
  o.top_k = 1;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    EXPECT_EQ(sample_top_k(logits.data(), o, 0, cand), 1);
  }
}

TEST(Sampling, DrawsOnlyFromTheTopKInProportion) {
  // Two equal leaders, the rest far below: top-2 draws each about half the
  // time and never another token; top-5 at a high temperature reaches the rest.
  const std::vector<float> logits = {5.0f, -3.0f, 5.0f, -3.0f, -3.0f};
  std::vector<std::pair<float, int>> cand(logits.size());
  SamplingOptions o;
  o.top_k = 2;
  o.temperature = 1.0f;
  int first = 0;
  const int n = 400;
  for (int step = 0; step < n; ++step) {
    const int t = sample_top_k(logits.data(), o, step, cand);
    ASSERT_TRUE(t == 0 || t == 2) << t;
    first += t == 0;
  }
  EXPECT_GT(first, n * 35 / 100);
  EXPECT_LT(first, n * 65 / 100);
  o.top_k = 5;
  o.temperature = 100.0f;
  std::set<int> seen;
  for (int step = 0; step < n; ++step) seen.insert(sample_top_k(logits.data(), o, step, cand));
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Generate, AppendsTheTokensAndGreedyIgnoresTheSeed) {
  const ModelConfig m = load_model_config("tiny");
  const Layout L = Layout::build(m, ParallelConfig{}, 0, 0);
  std::vector<float> w(size_t(L.numel()));
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (float& x : w) x = d(g);
  SamplingOptions o;
  o.new_tokens = 12;
  o.top_k = 1;
  o.seed = 1;
  const std::vector<int32_t> a = generate(m, w, {0, 3, 5}, o);
  o.seed = 99;
  const std::vector<int32_t> b = generate(m, w, {0, 3, 5}, o);
  ASSERT_EQ(a.size(), 15u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::vector<int32_t>(a.begin(), a.begin() + 3), (std::vector<int32_t>{0, 3, 5}));
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < m.vocab_size) << t;
  o.top_k = 40;
  o.temperature = 5.0f;
  const std::vector<int32_t> c = generate(m, w, {0, 3, 5}, o);
  o.seed = 100;
  EXPECT_NE(c, generate(m, w, {0, 3, 5}, o));  // a flat distribution: seeds differ
}

}  // namespace
}  // namespace meshtrain

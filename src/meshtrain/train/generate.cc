#include "meshtrain/train/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/data/tokenizer.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/model/block.h"
#include "meshtrain/model/embedding_layer.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/norm.h"

namespace meshtrain {

int sample_top_k(const float* logits, const SamplingOptions& o, int step, std::vector<std::pair<float, int>>& cand) {
  const int vocab = static_cast<int>(cand.size());
  for (int v = 0; v < vocab; ++v) cand[v] = {logits[v] / std::max(o.temperature, 1e-4f), v};
  const int k = std::clamp(o.top_k, 1, vocab);
  std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), std::greater<>());
  double z = 0;
  for (int i = 0; i < k; ++i) z += std::exp(cand[i].first - cand[0].first);
  double r = uniform01(o.seed, 77, static_cast<uint64_t>(step)) * z;
  for (int i = 0; i < k; ++i) {
    r -= std::exp(cand[i].first - cand[0].first);
    if (r <= 0) return cand[i].second;
  }
  return cand[k - 1].second;
}

std::vector<int32_t> generate(const ModelConfig& m, const std::vector<float>& weights, std::vector<int32_t> prompt,
                              const SamplingOptions& o) {
  check(!prompt.empty(), "generation needs a prompt of at least one token");
  ParallelConfig p;  // serial, one sequence
  const Layout L = Layout::build(m, p, 0, 0);
  MT_ASSERT(static_cast<int64_t>(weights.size()) == L.numel());
  const float* W = weights.data();
  const int h = m.hidden_size, S = m.seq_length, V = static_cast<int>(m.padded_vocab());
  const TpContext tp{};
  ParallelConfig act = p;
  act.micro_batch_size = 1;
  // Buffers sized for the full context, reused by every layer.
  const auto specs = block_stash(m, act, false);
  Buffer stash(MemCategory::activations, [&] {
    int64_t b = 0;
    for (const auto& t : specs) b += (t.bytes() + 63) / 64 * 64;
    return b;
  }());
  BlockActs<float> a;
  bind_acts(a, TensorMap(specs, stash.data()));
  Buffer x(MemCategory::activations, int64_t{S} * h * 4), y(MemCategory::activations, int64_t{S} * h * 4);
  Buffer stats(MemCategory::workspace, 2 * S * 4), logits(MemCategory::workspace, int64_t{V} * 4);
  const Unit& word = L.word_embedding();
  const Unit* pos = L.position_embedding();
  const Unit& lnf = L.final_norm();
  const Unit& out_w = L.output_weight();
  std::vector<std::pair<float, int>> cand(m.vocab_size);
  // Built once: the rope cos/sin table is for the full context.
  BlockDims bd = block_dims(m, act);

  for (int step = 0; step < o.new_tokens; ++step) {
    const int T = static_cast<int>(std::min<size_t>(prompt.size(), S));
    const int32_t* ctx = prompt.data() + prompt.size() - T;
    EmbeddingDims ed{1, T, h, V, 0, 1, false};
    embedding_forward(a.input, (float*)nullptr, ctx, W + word.offset, pos ? W + pos->offset : nullptr, ed, tp);
    bd.S = T;
    for (const Unit& u : L.units()) {
      if (u.kind != UnitKind::block) continue;
      block_forward(block_weights(u, W + u.offset), a, x.as<float>(), BlockScratch<float>{}, bd, tp);
      std::copy_n(x.as<float>(), int64_t{T} * h, a.input);
    }
    // Logits of the last position only.
    const float* last = a.input + int64_t{T - 1} * h;
    norm_forward(m.rmsnorm, y.as<float>(), stats.as<float>(), stats.as<float>() + 1, last, W + lnf.offset,
                 m.rmsnorm ? nullptr : W + lnf.offset + h, 1, h, static_cast<float>(m.norm_epsilon));
    kernels::matmul_forward<float>(logits.as<float>(), y.as<float>(), W + out_w.offset, nullptr, 1, h, V);
    const int pick = sample_top_k(logits.as<float>(), o, step, cand);
    prompt.push_back(pick);
  }
  return prompt;
}

void print_sample(const ModelConfig& m, const std::vector<float>& weights, const std::string& tokenizer,
                  const std::string& prompt_text, const SamplingOptions& o) {
  std::unique_ptr<data::Tokenizer> tok;
  if (!tokenizer.empty()) tok = data::load_tokenizer(tokenizer);
  std::vector<int32_t> prompt = tok && !prompt_text.empty() ? tok->encode(prompt_text) : std::vector<int32_t>{};
  prompt.insert(prompt.begin(), tok ? tok->eot() : 0);
  const std::vector<int32_t> out = generate(m, weights, prompt, o);
  if (tok)
    fmt::print("\nsample:\n{}{}\n", prompt_text, tok->decode(std::span<const int32_t>(out).subspan(prompt.size())));
  else
    fmt::print("\nsample (token ids): {}\n", fmt::join(out, " "));
}

}  // namespace meshtrain

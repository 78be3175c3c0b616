#include "meshtrain/model/activations.h"

#include <algorithm>

namespace meshtrain {

namespace {
struct Dims {
  int64_t n, ns, h, hl, fl, hl_heads, seq, mbs;
  int e;
};
Dims dims(const ModelConfig& m, const ParallelConfig& p) {
  const int64_t n = int64_t{p.micro_batch_size} * m.seq_length;
  return Dims{n,
              p.sequence_parallel ? n / p.tp : n,
              m.hidden_size,
              m.hidden_size / p.tp,
              m.ffn() / p.tp,
              m.num_attention_heads / p.tp,
              m.seq_length,
              p.micro_batch_size,
              p.bf16 ? 2 : 4};
}
}  // namespace

int64_t total_bytes(const std::vector<TensorSpec>& v) {
  int64_t b = 0;
  for (const auto& t : v) b += t.bytes();
  return b;
}

int64_t allocated_bytes(const std::vector<TensorSpec>& v) {
  int64_t b = 0;
  for (const auto& t : v) b += t.allocated_bytes();
  return b;
}

bool block_is_recomputed(const ParallelConfig& p, int index_in_chunk, int layers_in_chunk) {
  if (p.recompute != Recompute::full) return false;
  if (p.recompute_method == RecomputeMethod::uniform) return true;
  return index_in_chunk < std::min(p.recompute_num_layers, layers_in_chunk);
}

std::vector<TensorSpec> block_stash(const ModelConfig& m, const ParallelConfig& p, bool recompute_this_block) {
  const Dims d = dims(m, p);
  if (recompute_this_block) return {{"input", d.ns * d.h, d.e}};
  std::vector<TensorSpec> v = {
      {"input", d.ns * d.h, d.e},          {"ln1.mean", d.ns, 4}, {"ln1.rstd", d.ns, 4},
      {"ln1.out", d.ns * d.h, d.e},         {"qkv", d.n * 3 * d.hl, d.e},
  };
  if (p.recompute != Recompute::selective) {
    v.push_back({"attn.out", d.n * d.hl, d.e});
    v.push_back({"attn.lse", d.mbs * d.hl_heads * d.seq, 4});
  }
  for (TensorSpec t : std::initializer_list<TensorSpec>{{"mid", d.ns * d.h, d.e},
                                                         {"ln2.mean", d.ns, 4},
                                                         {"ln2.rstd", d.ns, 4},
                                                         {"ln2.out", d.ns * d.h, d.e},
                                                         {"fc.out", d.n * d.fl, d.e},
                                                         {"gelu.out", d.n * d.fl, d.e}})
    v.push_back(t);
  return v;
}

std::vector<TensorSpec> rank_working_set(const ModelConfig& m, const ParallelConfig& p, bool has_head) {
  const Dims d = dims(m, p);
  std::vector<TensorSpec> v;
  if (p.recompute == Recompute::full) {
    for (const TensorSpec& t : block_stash(m, p, false))
      if (t.name != "input") v.push_back(t);
  } else if (p.recompute == Recompute::selective) {
    v.push_back({"attn.out", d.n * d.hl, d.e});
    v.push_back({"attn.lse", d.mbs * d.hl_heads * d.seq, 4});
  }
  v.push_back({"d.ln.out", d.n * d.h, d.e});
  v.push_back({"d.wide", d.n * std::max(3 * d.hl, d.fl), d.e});
  v.push_back({"d.attn.out", d.n * d.hl, d.e});
  if (p.sequence_parallel && p.tp > 1) {
    v.push_back({"row.out", d.n * d.h, d.e});
    v.push_back({"gathered", d.n * d.h, d.e});
  }
  v.push_back({"discard", d.ns * d.h, d.e});
  if (has_head)
    for (const TensorSpec& t : head_working_set(m, p)) v.push_back(t);
  return v;
}

std::vector<TensorSpec> embedding_stash(const ModelConfig& m, const ParallelConfig& p) {
  const Dims d = dims(m, p);
  return {{"tokens", d.n, 4}, {"targets", d.n, 4}};
}

std::vector<TensorSpec> head_stash(const ModelConfig& m, const ParallelConfig& p) {
  const Dims d = dims(m, p);
  return {{"d.input", d.ns * d.h, d.e}};
}

int64_t head_logits_rows(const ModelConfig& m, const ParallelConfig& p) {
  // Bounded so the logits scratch stays near 64 MiB whatever the vocabulary,
  // but at least 256 rows: each pass re-reads and re-writes the whole word
  // embedding gradient, so few passes matter more than a small scratch. The
  // micro-batch's rows are split evenly over the passes (no short last pass,
  // whose matmuls would run far below the others' efficiency).
  const int64_t n = int64_t{p.micro_batch_size} * m.seq_length;
  const int64_t per_row = m.padded_vocab() / p.tp * (p.bf16 ? 2 : 4);
  const int64_t cap =
      std::clamp<int64_t>(std::max<int64_t>((int64_t{64} << 20) / std::max<int64_t>(per_row, 1), 256), 1, n);
  const int64_t passes = (n + cap - 1) / cap;
  return (n + passes - 1) / passes;
}

std::vector<TensorSpec> head_working_set(const ModelConfig& m, const ParallelConfig& p) {
  const Dims d = dims(m, p);
  const int64_t r = head_logits_rows(m, p);
  return {{"logits", r * (m.padded_vocab() / p.tp), d.e},
          {"row.stats", 3 * r, 4},
          {"lnf.out", d.n * d.h, d.e},
          {"lnf.stats", 2 * d.ns, 4},
          {"d.lnf.out", d.n * d.h, d.e}};
}

}  // namespace meshtrain

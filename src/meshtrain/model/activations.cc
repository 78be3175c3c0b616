#include "meshtrain/model/activations.h"

#include <algorithm>
#include <iterator>

namespace meshtrain {

namespace {
struct Dims {
  int64_t n, ns, h, hl, fl, hl_heads, seq, mbs;
  int e;
  int64_t ql;   // qkv width on this rank: (heads + 2 kv heads) x head_dim / tp
  int64_t fcl;  // fc output width on this rank: ffn/tp, twice that with SwiGLU
};
Dims dims(const ModelConfig& m, const ParallelConfig& p) {
  const int64_t n = int64_t{p.micro_batch_size} * m.seq_length;
  const int64_t fl = m.ffn() / p.tp;
  return Dims{n,
              p.sequence_parallel ? n / p.tp : n,
              m.hidden_size,
              m.hidden_size / p.tp,
              fl,
              m.num_attention_heads / p.tp,
              m.seq_length,
              p.micro_batch_size,
              p.bf16 ? 2 : 4,
              (int64_t{m.num_attention_heads} + 2 * m.kv_heads()) * m.head_dim() / p.tp,
              m.gated_mlp ? 2 * fl : fl};
}
}  // namespace

const char* act_name(Act a) {
  static constexpr const char* kNames[] = {
      "input",    "ln1.mean", "ln1.rstd", "ln1.out",  "qkv",      "attn.out",   "attn.lse", "mid",
      "ln2.mean", "ln2.rstd", "ln2.out",  "fc.out",   "act.out",  "d.ln.out",   "d.wide",   "d.attn.out",
      "d.act.out", "row.out",  "gathered", "discard",  "logits",   "row.stats", "lnf.out",   "lnf.stats", "d.lnf.out",
      "tokens",   "targets",  "d.input"};
  static_assert(std::size(kNames) == static_cast<size_t>(Act::count));
  return kNames[static_cast<size_t>(a)];
}

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
  if (recompute_this_block) return {{Act::input, d.ns * d.h, d.e}};
  // RMSNorm keeps no mean.
  auto stats = [&](std::vector<TensorSpec>& v, Act mean, Act rstd) {
    if (!m.rmsnorm) v.push_back({mean, d.ns, 4});
    v.push_back({rstd, d.ns, 4});
  };
  std::vector<TensorSpec> v = {{Act::input, d.ns * d.h, d.e}};
  stats(v, Act::ln1_mean, Act::ln1_rstd);
  v.push_back({Act::ln1_out, d.ns * d.h, d.e});
  v.push_back({Act::qkv, d.n * d.ql, d.e});
  if (p.recompute != Recompute::selective) {
    v.push_back({Act::attn_out, d.n * d.hl, d.e});
    v.push_back({Act::attn_lse, d.mbs * d.hl_heads * d.seq, 4});
  }
  v.push_back({Act::mid, d.ns * d.h, d.e});
  stats(v, Act::ln2_mean, Act::ln2_rstd);
  v.push_back({Act::ln2_out, d.ns * d.h, d.e});
  v.push_back({Act::fc_out, d.n * d.fcl, d.e});
  v.push_back({Act::act_out, d.n * d.fl, d.e});
  return v;
}

std::vector<TensorSpec> rank_working_set(const ModelConfig& m, const ParallelConfig& p, bool has_head) {
  const Dims d = dims(m, p);
  std::vector<TensorSpec> v;
  if (p.recompute == Recompute::full) {
    for (const TensorSpec& t : block_stash(m, p, false))
      if (t.id != Act::input) v.push_back(t);
  } else if (p.recompute == Recompute::selective) {
    v.push_back({Act::attn_out, d.n * d.hl, d.e});
    v.push_back({Act::attn_lse, d.mbs * d.hl_heads * d.seq, 4});
  }
  v.push_back({Act::d_ln_out, d.n * d.h, d.e});
  v.push_back({Act::d_wide, d.n * std::max(d.ql, d.fcl), d.e});
  v.push_back({Act::d_attn_out, d.n * d.hl, d.e});
  if (m.gated_mlp) v.push_back({Act::d_act_out, d.n * d.fl, d.e});
  if (p.sequence_parallel && p.tp > 1) {
    v.push_back({Act::row_out, d.n * d.h, d.e});
    v.push_back({Act::gathered, d.n * d.h, d.e});
  }
  v.push_back({Act::discard, d.ns * d.h, d.e});
  if (has_head)
    for (const TensorSpec& t : head_working_set(m, p)) v.push_back(t);
  return v;
}

std::vector<TensorSpec> embedding_stash(const ModelConfig& m, const ParallelConfig& p) {
  const Dims d = dims(m, p);
  return {{Act::tokens, d.n, 4}, {Act::targets, d.n, 4}};
}

std::vector<TensorSpec> head_stash(const ModelConfig& m, const ParallelConfig& p) {
  const Dims d = dims(m, p);
  return {{Act::d_input, d.ns * d.h, d.e}};
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
  return {{Act::logits, r * (m.padded_vocab() / p.tp), d.e},
          {Act::row_stats, 3 * r, 4},
          {Act::lnf_out, d.n * d.h, d.e},
          {Act::lnf_stats, 2 * d.ns, 4},
          {Act::d_lnf_out, d.n * d.h, d.e}};
}

}  // namespace meshtrain

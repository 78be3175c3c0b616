#include "meshtrain/perf/memory_model.h"

#include <algorithm>

#include "meshtrain/model/activations.h"

namespace meshtrain::perf {

namespace {

// Softmax probabilities of one block's attention without flash attention.
double score_matrix_bytes(const ModelConfig& m, const ParallelConfig& p) {
  if (p.flash_attention) return 0;
  const double heads = double(m.num_attention_heads) / p.tp;
  return double(p.micro_batch_size) * heads * double(m.seq_length) * m.seq_length * (p.bf16 ? 2 : 4);
}

}  // namespace

double peak_stash_bytes(ScheduleKind kind, int pp, int vpp, int m, int stage, const std::vector<double>& chunk_bytes,
                        PerfCache& cache) {
  // 1F1B and interleaved repeat one pattern after their warm-up, which is at
  // most (pp - 1) * 2 + (vpp - 1) * pp forwards long; GPipe holds everything.
  int walk = m;
  if (kind == ScheduleKind::one_f_one_b) walk = std::min(m, pp + 1);
  if (kind == ScheduleKind::interleaved && m > pp) walk = std::min(m, pp * (vpp + 3));
  if (kind == ScheduleKind::gpipe) {
    double all = 0;
    for (double b : chunk_bytes) all += b;
    return all * m;
  }
  const Schedule& s = cache.schedule(kind, pp, vpp, walk);
  double now = 0, peak = 0;
  for (const Action& a : s.stages[stage]) {
    if (a.kind == ActionKind::forward) peak = std::max(peak, now += chunk_bytes[a.chunk]);
    if (a.kind == ActionKind::backward) now -= chunk_bytes[a.chunk];
  }
  return peak;
}

MemoryBytes stage_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& sys, int stage,
                         PerfCache& cache) {
  const StageLayout& L = cache.stage_layout(m, p, stage);
  const StateBytes& st = L.state[p.zero_stage][p.bf16 ? 1 : 0];
  MemoryBytes b;
  b.parameters = double(st.parameters);
  b.gradients = double(st.gradients);
  b.optimizer = double(st.optimizer);

  // Stash of one micro-batch through each chunk.
  const int layers = m.num_layers / (p.pp * p.vpp);
  const double scores = score_matrix_bytes(m, p);
  const double plain = double(total_bytes(block_stash(m, p, false))) +
                       (p.recompute == Recompute::selective ? 0.0 : scores);
  const double recomputed = double(total_bytes(block_stash(m, p, true)));
  double blocks = 0;
  for (int i = 0; i < layers; ++i) blocks += block_is_recomputed(p, i, layers) ? recomputed : plain;
  const double head = double(total_bytes(head_stash(m, p)));
  std::vector<double> chunk_bytes(p.vpp, blocks);
  bool has_head = false;
  for (int c = 0; c < p.vpp; ++c)
    if (c * p.pp + stage == p.pp * p.vpp - 1) {
      chunk_bytes[c] += head;
      has_head = true;
    }
  const int mb = p.num_micro_batches();
  const double stash = peak_stash_bytes(p.schedule, p.pp, p.vpp, mb, stage, chunk_bytes, cache);
  // Token ids and targets are held for every micro-batch of the step.
  const double batch = double(mb) * double(total_bytes(embedding_stash(m, p)));
  const double working = double(total_bytes(rank_working_set(m, p, has_head))) + 2 * scores;
  b.activations = stash + batch + working;

  const double e = p.bf16 ? 2 : 4;
  const double tokens = double(p.micro_batch_size) * m.seq_length / (p.sequence_parallel ? p.tp : 1);
  if (p.pp > 1) b.comm_buffers += 4 * tokens * m.hidden_size * e;
  if (p.zero_stage >= 2) b.comm_buffers += double(L.max_unit_numel) * 4;
  if (p.zero_stage >= 3) b.comm_buffers += 2 * double(L.max_unit_numel) * e;

  b.workspace = sys.memory.reserved_bytes + sys.memory.fragmentation * (b.activations + b.comm_buffers);
  return b;
}

MemoryEstimate estimate_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& sys,
                               PerfCache& cache) {
  MemoryEstimate r;
  r.capacity = sys.memory.hbm_bytes;
  r.worst = stage_memory(m, p, sys, 0, cache);
  if (p.pp > 1) {
    MemoryBytes last = stage_memory(m, p, sys, p.pp - 1, cache);
    if (last.total() > r.worst.total()) {
      r.worst = last;
      r.worst_stage = p.pp - 1;
    }
  }
  return r;
}

}  // namespace meshtrain::perf

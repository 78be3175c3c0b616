#include "meshtrain/perf/memory_model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "meshtrain/model/activations.h"
#include "meshtrain/perf/context_parallel.h"

namespace meshtrain::perf {

namespace {

// Softmax probabilities of one block's attention without flash attention.
double score_matrix_bytes(const ModelConfig& m, const ParallelConfig& p) {
  if (p.flash_attention) return 0;
  const double heads = double(m.num_attention_heads) / p.tp;
  return double(p.micro_batch_size) * heads * double(m.seq_length) * m.seq_length * (p.bf16 ? 2 : 4);
}

// Micro-batches a walk of the schedule needs: 1F1B and interleaved repeat
// one pattern after their warm-up, which is at most (pp - 1) * 2 + (vpp - 1)
// * pp forwards long; GPipe holds everything.
int walk_length(ScheduleKind kind, int pp, int vpp, int m) {
  if (kind == ScheduleKind::one_f_one_b) return std::min(m, pp + 1);
  if (kind == ScheduleKind::interleaved && m > pp) return std::min(m, pp * (vpp + 3));
  return m;
}

}  // namespace

double peak_stash_bytes(ScheduleKind kind, int pp, int vpp, int m, int stage, const std::vector<double>& chunk_bytes,
                        PerfCache& cache) {
  const int walk = walk_length(kind, pp, vpp, m);
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

namespace {

// Walks the engine's communication buffers over the action list of one
// stage (see memory_model.h) and returns their peak.
class CommBufferWalk {
 public:
  CommBufferWalk(const StageLayout& L, const ParallelConfig& p, double boundary_bytes, const ZeroRuntime& z)
      : L_(L), p_(p), z_(z), e_(p.bf16 ? 2 : 4), g_(z.reduce_in_model_dtype ? e_ : 4), boundary_(boundary_bytes),
        sharded_(p.zero_stage >= 2), gathered_(L.unit_numel.size(), false), grad_(L.unit_numel.size(), false) {}

  double run(const std::vector<Action>& actions) {
    for (const Action& a : actions) {
      const ChunkUnits& c = L_.chunk_order[a.chunk];
      const bool head = !c.head.empty();
      switch (a.kind) {
        case ActionKind::recv_forward: break;  // received into the stash
        case ActionKind::forward:
          if (!head) add(boundary_);  // the output, until its send completes
          if (sharded_) forward_units(c, head);
          break;
        case ActionKind::send_forward: sub(boundary_); break;
        case ActionKind::recv_backward: add(boundary_); break;  // the output gradient
        case ActionKind::backward:
          if (sharded_) backward_units(c);
          if (!c.embedding.empty() && !head) sub(boundary_);  // no send: freed with the stash
          break;
        case ActionKind::send_backward:
          if (head) add(boundary_);  // the head's input gradient, copied out of its stash
          sub(boundary_);
          break;
      }
    }
    return peak_;
  }

 private:
  // The units a chunk's forward gathers, in order (the head's run in it).
  static std::vector<int> forward_sequence(const ChunkUnits& c, bool head) {
    std::vector<int> seq(c.embedding);
    seq.insert(seq.end(), c.blocks.begin(), c.blocks.end());
    if (head) seq.insert(seq.end(), c.head.begin(), c.head.end());
    return seq;
  }
  // ZeRO-2/3 buffers of a chunk's forward (the head's backward runs in it)
  // and of its backward.
  void forward_units(const ChunkUnits& c, bool head) {
    const std::vector<int> seq = forward_sequence(c, head);
    const size_t e = c.embedding.size(), b = e + c.blocks.size();
    for (size_t k = 0; k < e; ++k) gather(seq, k);
    for (int u : c.embedding) release(u);
    for (size_t k = e; k < b; ++k) {
      gather(seq, k);
      release(seq[k]);
    }
    if (!head) return;
    for (size_t k = b; k < seq.size(); ++k) gather(seq, k);
    for (int u : c.head) begin_backward(u);
    for (int u : c.head) end_backward(u);
    for (int u : c.head) release(u);
  }
  void backward_units(const ChunkUnits& c) {
    const std::vector<int> seq(c.blocks.rbegin(), c.blocks.rend());
    for (size_t k = 0; k < seq.size(); ++k) {
      gather(seq, k);
      begin_backward(seq[k]);
      end_backward(seq[k]);
      release(seq[k]);
    }
    for (int u : c.embedding) begin_backward(u);
    for (int u : c.embedding) end_backward(u);
  }
  void add(double b) { peak_ = std::max(peak_, now_ += b); }
  void sub(double b) { now_ -= b; }
  double numel(int u) const { return double(L_.unit_numel[u]); }
  // Elements of unit u held at once: all of it, or the framework's limit.
  static double capped(double n, double limit) { return limit > 0 ? std::min(n, limit) : n; }
  // ZeRO-3: the weights of unit seq[k] all-gathered for its forward or
  // backward, and those of the next z.prefetch_units units of the sequence
  // gathered ahead: held from then until each is used and released.
  void gather(const std::vector<int>& seq, size_t k) {
    for (size_t j = k; j < seq.size() && j <= k + size_t(z_.prefetch_units); ++j) gather(seq[j]);
  }
  void gather(int u) {
    if (p_.zero_stage < 3 || gathered_[u]) return;
    gathered_[u] = true;
    add(capped(numel(u), z_.gather_elements) * e_);
  }
  void release(int u) {
    if (p_.zero_stage < 3 || !gathered_[u]) return;
    gathered_[u] = false;
    sub(capped(numel(u), z_.gather_elements) * e_);
  }
  // ZeRO-2/3: a unit's full gradient (fp32 in the engine; one reduce bucket
  // in the model dtype in DeepSpeed) while its backward runs, then
  // reduce-scattered into a shard; the engine completes all but the newest
  // two reductions after posting one. With hybrid sharding a completed
  // reduction keeps its shard while the shard is all-reduced over the
  // replicas, again at most two at once.
  void begin_backward(int u) {
    if (p_.zero_stage < 2 || grad_[u]) return;
    grad_[u] = true;
    add(capped(numel(u), z_.reduce_bucket_elements) * g_);
  }
  void end_backward(int u) {
    if (p_.zero_stage < 2) return;
    grad_[u] = false;
    const double full = capped(numel(u), z_.reduce_bucket_elements) * g_;
    const double shard = full / p_.shard_size();
    add(shard);
    pending_.push_back({full, shard});
    while (pending_.size() > kReductionsInFlight) {
      const auto [done_full, done_shard] = pending_.front();
      pending_.erase(pending_.begin());
      sub(done_full);  // the reduce-scatter's input
      if (!p_.hybrid_shard()) {
        sub(done_shard);
        continue;
      }
      replicating_.push_back(done_shard);
      if (replicating_.size() > kReductionsInFlight) {
        sub(replicating_.front());
        replicating_.erase(replicating_.begin());
      }
    }
  }

  const StageLayout& L_;
  const ParallelConfig& p_;
  const ZeroRuntime z_;
  const double e_, g_, boundary_;
  const bool sharded_;  // ZeRO-2/3: gradients (and weights) held per unit
  std::vector<bool> gathered_, grad_;
  // Reduce-scatters, and replica all-reduces, in flight at once: the engine's
  // bound (ShardedState::kReductionsInFlight).
  static constexpr size_t kReductionsInFlight = 2;
  std::vector<std::pair<double, double>> pending_;  // each reduce-scatter in flight: its input and output bytes
  std::vector<double> replicating_;                 // shard bytes of each all-reduce over the replicas in flight
  double now_ = 0, peak_ = 0;
};

}  // namespace

double peak_comm_buffer_bytes(const ModelConfig& m, const ParallelConfig& p, int stage, PerfCache& cache,
                              bool full_walk, const ZeroRuntime& z) {
  const StageLayout& L = cache.stage_layout(m, p, stage);
  const double tokens = double(p.micro_batch_size) * m.seq_length / (p.sequence_parallel ? p.tp : 1);
  const double boundary = tokens * m.hidden_size * (p.bf16 ? 2 : 4);
  // GPipe's ZeRO window and sends repeat per micro-batch too: two suffice.
  int mb = p.schedule == ScheduleKind::gpipe ? std::min(p.num_micro_batches(), 2)
                                             : walk_length(p.schedule, p.pp, p.vpp, p.num_micro_batches());
  if (full_walk) mb = p.num_micro_batches();
  const Schedule& s = cache.schedule(p.schedule, p.pp, p.vpp, mb);
  const PerfCache::CommBufferKey key{&L,     &s,     stage,          boundary,          p.zero_stage,
                                     p.bf16, p.shard_size(), z.gather_elements, z.reduce_bucket_elements,
                                     z.reduce_in_model_dtype, z.prefetch_units};
  if (const std::optional<double> peak = cache.comm_buffer_peak(key)) return *peak;
  return cache.remember_comm_buffer_peak(key, CommBufferWalk(L, p, boundary, z).run(s.stages[stage]));
}

double op_level_stash_bytes(const ModelConfig& m, const ParallelConfig& p) {
  const double e = p.bf16 ? 2 : 4, t = p.tp;
  const double n = double(p.micro_batch_size) * m.seq_length, ns = p.sequence_parallel ? n / t : n;
  const double h = m.hidden_size, kv = double(m.kv_heads()) * m.head_dim(), f = m.ffn();
  // Matmul outputs per token in execution order; every other one is kept.
  std::vector<double> mm = {h / t, kv / t, kv / t, h};
  if (m.gated_mlp) mm.insert(mm.end(), {f / t, f / t, h});
  else mm.insert(mm.end(), {f / t, h});
  auto aligned = [](double bytes) { return std::ceil(bytes / 64) * 64; };
  double b = aligned(ns * h * e) + aligned(n * h / t * e);  // input, attention output
  b += aligned(double(p.micro_batch_size) * m.num_attention_heads / t * m.seq_length * 4);  // log-sum-exp
  for (size_t i = 0; i < mm.size(); i += 2) b += aligned(n * mm[i] * e);
  return b;
}

namespace {

// Parameters, gradients and optimizer state of a stage's rank, as the
// framework keeps them.
void model_state(const StageLayout& L, const ParallelConfig& p, const PerfOptions& o, MemoryBytes& b) {
  const StateBytes& st = L.state[p.zero_stage][p.bf16 ? 1 : 0];
  b.parameters = double(st.parameters);
  b.gradients = double(st.gradients);
  b.optimizer = double(st.optimizer);
  if (fp32_gradient_allreduce(o, p)) {
    // DeepSpeed's BF16_Optimizer: fp32 gradients of every parameter, and the
    // 16-bit ones the backward writes, kept until the next backward
    // (PipelineEngine: clear_lp_grads() before it, update_hp_grads(
    // clear_lp_grads=False) after).
    b.gradients *= 1.5;
  } else if (o.model_dtype_gradients && p.bf16) {
    b.gradients /= 2;
  }
  if (o.zero.fp32_sharded_parameters && p.bf16 && p.zero_stage == 3) {
    b.parameters *= 2;        // fp32 shards instead of bf16
    b.optimizer *= 8.0 / 12;  // Adam m and v, no separate master copy
  }
}

// A framework's whole-micro-batch logits and its loss's tensors
// (PerfOptions::whole_logits, loss_bytes_per_logit) beyond the engine's
// chunked logits scratch, which rank_working_set counts.
double framework_logits_extra(const ModelConfig& m, const ParallelConfig& p, const PerfOptions& o) {
  if (!o.whole_logits) return 0;
  const double e = p.bf16 ? 2 : 4, cols = double(m.padded_vocab() / p.tp);
  const double whole = double(p.micro_batch_size) * m.seq_length * cols * (e + o.loss_bytes_per_logit);
  return std::max(0.0, whole - double(head_logits_rows(m, p)) * cols * e);
}

// Ring attention's receive buffers (cost view, CP > 1): the K and V chunk
// in flight beside the one in hand, and backward their gradients too. Under
// PerfOptions::cp_all_gather, the whole sequence's K and V gathered, and
// backward their gradients before the reduce-scatter.
double cp_kv_buffer_bytes(const ModelConfig& m, const ParallelConfig& p, const PerfOptions& o) {
  if (p.cp == 1) return 0;
  return (o.cp_all_gather ? 2.0 * p.cp : 4.0) * kv_chunk_bytes(m, p);
}

// Activations of a stage's rank: the stash of the micro-batches in flight
// (each tensor 64-byte aligned), the step's token ids and targets, and one
// block's working set.
double stage_activations(const ModelConfig& m, const ParallelConfig& p, const StageLayout& L, int stage,
                         PerfCache& cache, const PerfOptions& o) {
  const double scores = score_matrix_bytes(m, p);
  const bool op_level = o.op_level_selective && p.recompute == Recompute::selective;
  const double plain = op_level ? op_level_stash_bytes(m, p)
                                : double(allocated_bytes(block_stash(m, p, false))) +
                                      (p.recompute == Recompute::selective ? 0.0 : scores);
  const double recomputed = double(allocated_bytes(block_stash(m, p, true)));
  const double head = double(allocated_bytes(head_stash(m, p)));
  std::vector<double> chunk_bytes(p.vpp, 0.0);
  bool has_head = false;
  for (int c = 0; c < p.vpp; ++c) {
    const int layers = L.chunk_layers[c];
    for (int i = 0; i < layers; ++i) chunk_bytes[c] += block_is_recomputed(p, i, layers) ? recomputed : plain;
    const int v = c * p.pp + stage;
    if (v == p.pp * p.vpp - 1) {
      chunk_bytes[c] += head;
      // A chunk of the head alone stashes its received input, as a
      // recomputed block does.
      if (layers == 0 && v > 0) chunk_bytes[c] += recomputed;
      has_head = true;
    }
  }
  const int mb = p.num_micro_batches();
  const double stash = peak_stash_bytes(p.schedule, p.pp, p.vpp, mb, stage, chunk_bytes, cache);
  // Token ids and targets are held for every micro-batch of the step (two
  // allocations of their exact size).
  const double batch = double(mb) * double(total_bytes(embedding_stash(m, p)));
  // Op-level checkpointing rebuilds a block's other tensors in its backward,
  // as full recompute does.
  ParallelConfig wp = p;
  if (op_level) wp.recompute = Recompute::full;
  const double working =
      double(allocated_bytes(rank_working_set(m, wp, has_head))) + 2 * scores + cp_kv_buffer_bytes(m, p, o);
  return stash + batch + working + (has_head ? framework_logits_extra(m, p, o) : 0.0);
}

// stage_memory of a cost view.
MemoryBytes view_stage_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& sys, int stage,
                              PerfCache& cache, const PerfOptions& o) {
  const StageLayout& L = cache.stage_layout(m, p, stage);
  MemoryBytes b;
  model_state(L, p, o, b);
  b.activations = stage_activations(m, p, L, stage, cache, o);
  b.comm_buffers = peak_comm_buffer_bytes(m, p, stage, cache, false, o.zero);
  b.fragmentation = sys.memory.fragmentation * (b.activations + b.comm_buffers);
  b.workspace = sys.memory.reserved_bytes + b.fragmentation;
  return b;
}

}  // namespace

MemoryBytes stage_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& sys, int stage,
                         PerfCache& cache, const PerfOptions& o) {
  if (p.cp == 1) return view_stage_memory(m, p, sys, stage, cache, o);
  const CostView v = cost_view(m, p);
  return view_stage_memory(v.model, v.parallel, sys, stage, cache, o);
}

MemoryEstimate estimate_memory(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& sys,
                               PerfCache& cache, const PerfOptions& o) {
  MemoryEstimate r;
  r.capacity = sys.memory.hbm_bytes;
  r.allocator_retries = o.allocator_retries;
  r.worst = stage_memory(m, p, sys, 0, cache, o);
  // Uneven stages: a middle stage may run more layers than the first; stage
  // 1 has the most micro-batches in flight of them.
  std::vector<int> others;
  if (p.pp > 2 && p.uneven_stages()) others.push_back(1);
  if (p.pp > 1) others.push_back(p.pp - 1);
  for (int st : others) {
    MemoryBytes b = stage_memory(m, p, sys, st, cache, o);
    if (b.total() > r.worst.total()) {
      r.worst = b;
      r.worst_stage = st;
    }
  }
  return r;
}

}  // namespace meshtrain::perf

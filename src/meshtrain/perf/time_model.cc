#include "meshtrain/perf/time_model.h"

#include <algorithm>
#include <cmath>

#include "meshtrain/model/activations.h"
#include "meshtrain/perf/collective.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/perf/context_parallel.h"

namespace meshtrain::perf {

namespace {

// Communication hidden behind `compute` where it fits: the excess shows, and
// the hidden part costs the compute `share` of itself (the SMs a collective
// holds, or the interference of a pipelined overlap).
double behind(double comm, double compute, double share) {
  return std::max(comm - compute, 0.0) + share * std::min(comm, compute);
}

// Megatron-LM's gradient bucket: 40M elements.
constexpr double kBucketElements = 40e6;

// Prices the pieces of one micro-batch for a given config on a system.
struct Pricer {
  const ModelConfig& m;
  const ParallelConfig& p;
  const SystemSpec& s;
  const PerfOptions& o;
  double e;       // bytes per activation element
  double n;       // tokens per micro-batch
  double ns;      // tokens per rank in sequence-parallel regions
  double h, f;    // hidden, FFN
  int t;

  Pricer(const ModelConfig& m_, const ParallelConfig& p_, const SystemSpec& s_, const PerfOptions& o_)
      : m(m_), p(p_), s(s_), o(o_) {
    e = p.bf16 ? 2 : 4;
    n = double(p.micro_batch_size) * m.seq_length;
    t = p.tp;
    ns = p.sequence_parallel ? n / t : n;
    h = m.hidden_size;
    f = m.ffn();
  }

  double peak() const { return s.peak_flops(p.bf16); }
  // A [rows, inner] x [inner, cols] matmul: the efficiency of its smallest
  // dimension, times the share of tile slots its output fills. With a
  // `ceiling` (> 0), the curve's shape scaled so that its top is the ceiling,
  // never below the curve.
  double gemm_priced(double rows, double inner, double cols, double ceiling) const {
    const Curve& c = s.matmul_efficiency(p.bf16);
    double eff = c(std::min({rows, inner, cols}));
    if (ceiling > 0) eff = std::max(eff, ceiling * eff / (c.points().empty() ? 1.0 : c.points().back().second));
    eff *= s.gemm_wave_utilization(rows, cols);
    return 2 * rows * inner * cols / (peak() * eff) + s.compute.kernel_overhead_s;
  }
  // Its backward: the input gradient [rows, cols] x [cols, inner] and the
  // weight gradient [inner, rows] x [rows, cols]; the same smallest
  // dimension, so twice the forward where waves are not modelled.
  double gemm_backward_priced(double rows, double inner, double cols, double ceiling) const {
    if (s.compute.gemm_units <= 0) return 2 * gemm_priced(rows, inner, cols, ceiling);
    return gemm_priced(rows, cols, inner, ceiling) + gemm_priced(inner, rows, cols, ceiling);
  }
  // A block's GEMMs, at the fitted curve.
  double gemm(double rows, double inner, double cols) const { return gemm_priced(rows, inner, cols, 0); }
  double gemm_backward(double rows, double inner, double cols) const {
    return gemm_backward_priced(rows, inner, cols, 0);
  }
  // The output layer's, which stand alone: at the device's bare-GEMM
  // ceiling. The fitted curve stands for a block's GEMMs and whatever else of
  // the block the model does not list; these have nothing else.
  double bare_ceiling() const { return p.bf16 ? s.compute.matmul_ceiling_bf16 : 0.0; }
  double memory(double bytes) const {
    return bytes / (s.memory.bandwidth_gbs * 1e9 * s.memory.elementwise_efficiency) + s.compute.kernel_overhead_s;
  }
  double tp(Collective k, double bytes) const { return collective_time(s, k, bytes, t, 1); }
  double tp_sent(Collective k, double bytes) const { return collective_bytes_sent(k, bytes, t); }
  double exposed_tp(double comm, double gemm_s) const {
    if (!o.tp_comm_overlap) return comm;
    return behind(comm, gemm_s, 0.25);
  }

  // --- one transformer block, one micro-batch ---
  // The block's four matmuls (QKV, output projection, MLP in and out) as
  // `price` (gemm or gemm_backward) costs them.
  // Output widths of the block's column-parallel matmuls on this rank: QKV
  // and the first MLP matmul (gate and up where gated).
  double qkv_cols() const { return (h + 2 * double(m.kv_heads()) * m.head_dim()) / t; }
  double mlp_in_cols() const { return m.gated_mlp ? 2 * f / t : f / t; }
  template <typename Price>
  double block_gemms(Price price) const {
    return price(n, h, qkv_cols()) + price(n, h / t, h) + price(n, h, mlp_in_cols()) + price(n, f / t, h);
  }
  double block_gemm_forward() const {
    return block_gemms([this](double r, double i, double c) { return gemm(r, i, c); });
  }
  double block_gemm_backward() const {
    return block_gemms([this](double r, double i, double c) { return gemm_backward(r, i, c); });
  }
  // Keys each query attends over: the whole sequence (under CP, the cost
  // view's seq_length is one rank's share of it).
  double keys() const { return double(m.seq_length) * p.cp; }
  double attention_forward() const {
    const double full = attention_core_flops_per_token(m) * p.cp * n / t;
    if (p.flash_attention) {
      // A causal kernel skips the blocks above the diagonal (128-wide tiles).
      const double tiles = std::max(1.0, keys() / 128);
      const double executed = full * (tiles + 1) / (2 * tiles);
      return executed / (peak() * s.compute.flash_attention_efficiency) + s.compute.kernel_overhead_s;
    }
    const double eff = s.compute.attention_matmul_efficiency > 0 ? s.compute.attention_matmul_efficiency
                                                                   : s.matmul_efficiency(p.bf16)(m.head_dim());
    const double scores = double(p.micro_batch_size) * m.num_attention_heads / t * double(m.seq_length) *
                          m.seq_length * e;
    return full / (peak() * eff) + 2 * s.compute.kernel_overhead_s + memory(4 * scores);
  }
  double attention_backward() const {
    if (p.flash_attention) return 2.5 * attention_forward();
    const double scores = double(p.micro_batch_size) * m.num_attention_heads / t * double(m.seq_length) *
                          m.seq_length * e;
    return 2 * (attention_forward() - memory(4 * scores)) + memory(8 * scores);
  }
  // Bytes the norm, activation and rotary kernels move per micro-batch on
  // this rank, as the kernels read and write them (kernels/*.h).
  //   norm forward: input read, output written; per row the fp32 statistics
  //     (LayerNorm mean and rstd, RMSNorm rstd only) written; the parameter
  //     vectors (LayerNorm weight and bias, RMSNorm weight) read.
  //   norm backward: input and output gradient read (and the input gradient
  //     it accumulates into, in a block), the input gradient written; statistics and parameters
  //     read; per 32 rows one fp32 partial row of each parameter gradient
  //     written and read back (LayerNorm two, RMSNorm one).
  //   GELU: fc output read, activation written; backward: fc output and
  //     activation gradient read, fc gradient written.
  //   SwiGLU: gate and up read (2f), activation written (f); backward: gate,
  //     up and activation gradient read, gate and up gradients written.
  //   rope: the queries and keys (not the values) read and written, forward
  //     and again backward on their gradients, and the [S, hd] fp32 table read.
  double norm_forward_bytes() const {
    const double k = m.rmsnorm ? 1 : 2;
    return 2 * ns * h * e + k * (4 * ns + h * e);
  }
  double norm_backward_bytes(bool accumulate) const {
    const double k = m.rmsnorm ? 1 : 2;
    return (accumulate ? 4 : 3) * ns * h * e + k * (4 * ns + h * e + 2 * (ns / 32) * h * 4);
  }
  double activation_bytes(bool backward) const {
    const double passes = m.gated_mlp ? (backward ? 5 : 3) : (backward ? 3 : 2);
    return passes * n * f / t * e;
  }
  double rope_bytes() const {
    if (!m.rotary) return 0;
    const double qk = h + double(m.kv_heads()) * m.head_dim();
    return 2 * n * qk / t * e + double(m.seq_length) * m.head_dim() * 4;
  }
  // 2 norms, 2 dropout+residual adds (2 reads, 1 write; backward twice that)
  // on the sequence-parallel region, the activation on the FFN width, rope.
  double block_memory_forward() const {
    const double rope = m.rotary ? memory(rope_bytes()) : 0;
    return memory(2 * norm_forward_bytes()) + memory(6 * ns * h * e) + memory(activation_bytes(false)) + rope;
  }
  double block_memory_backward() const {
    const double rope = m.rotary ? memory(rope_bytes()) : 0;
    return memory(2 * norm_backward_bytes(true)) + memory(12 * ns * h * e) + memory(activation_bytes(true)) + rope;
  }
  // Op-level selective checkpointing (PerfOptions::op_level_selective) runs
  // again the matmuls it did not keep (the 2nd, 4th, ... in execution order:
  // k, output projection, w3 gated; k, output projection, fc2 plain) and
  // every element-wise op of the block; attention's output is kept.
  double op_level_recompute() const {
    const double kv = double(m.kv_heads()) * m.head_dim();
    const double mlp = m.gated_mlp ? gemm(n, h, f / t) : gemm(n, f / t, h);
    return gemm(n, h, kv / t) + gemm(n, h / t, h) + mlp + block_memory_forward();
  }
  // TP collectives of one pass (forward, or backward) through a block.
  double block_tp_pass() const {
    if (t == 1) return 0;
    if (p.sequence_parallel)
      return 2 * tp(Collective::all_gather, n * h * e) + 2 * tp(Collective::reduce_scatter, n * h * e);
    return 2 * tp(Collective::all_reduce, n * h * e);
  }
  double block_tp_pass_bytes() const {
    if (t == 1) return 0;
    if (p.sequence_parallel)
      return 2 * tp_sent(Collective::all_gather, n * h * e) + 2 * tp_sent(Collective::reduce_scatter, n * h * e);
    return 2 * tp_sent(Collective::all_reduce, n * h * e);
  }

  // The backward's TP collectives where Megatron-LM runs the column-parallel
  // ones asynchronously (PerfOptions::async_tp_backward): the input
  // gradients' all-reduces (SP: reduce-scatters) under the weight-gradient
  // GEMMs of QKV and the first MLP matmul, with SP the stashed inputs'
  // re-gathers under their input-gradient GEMMs, each costing that GEMM the
  // collective's SM share while hidden; with SP the two gathers that undo
  // the forward's reduce-scatters stay in line.
  double async_backward_tp() const {
    const double share = s.compute.collective_sm_share;
    const double act = n * h * e;
    double exposed = 0;
    if (!p.sequence_parallel) {
      const double ar = tp(Collective::all_reduce, act);
      for (const double cols : {qkv_cols(), mlp_in_cols()}) exposed += behind(ar, gemm(h, n, cols), share);
      return exposed;
    }
    const double rs = tp(Collective::reduce_scatter, act), ag = tp(Collective::all_gather, act);
    for (const double cols : {qkv_cols(), mlp_in_cols()}) {
      exposed += behind(rs, gemm(h, n, cols), share);
      exposed += behind(ag, gemm(n, cols, h), share);
      exposed += ag;
    }
    return exposed;
  }

  // With SP the backward all-gathers the two stashed LayerNorm-output
  // shards again for the column-parallel weight gradients.
  double block_sp_regather() const {
    return (t > 1 && p.sequence_parallel) ? 2 * tp(Collective::all_gather, n * h * e) : 0;
  }
  double block_sp_regather_bytes() const {
    return (t > 1 && p.sequence_parallel) ? 2 * tp_sent(Collective::all_gather, n * h * e) : 0;
  }

  // One block pass's K and V round the CP ring: the rank's chunk of K and V
  // (forward), and with their gradients (backward), sent cp - 1 times, each
  // step under the attention of the chunk in hand; the ring is as fast as
  // its slowest hop (the one across nodes where the group spans them).
  // With PerfOptions::cp_all_gather: one all-gather of every rank's K and V
  // (forward) or reduce-scatter of their gradients (backward), exposed.
  double kv_exchange(bool backward) const {
    if (p.cp == 1) return 0;
    const int first = rank_of(p, {0, 0, 0}), second = rank_of(p, {0, 1, 0});
    if (o.cp_all_gather)
      return collective_time(s, backward ? Collective::reduce_scatter : Collective::all_gather,
                             p.cp * kv_chunk_bytes(m, p), p.cp, second - first);
    const int last = rank_of(p, {0, p.cp - 1, 0});
    const double bytes = (backward ? 2 : 1) * kv_chunk_bytes(m, p);
    const double hop = std::max(p2p_time(s, bytes, first, second), p2p_time(s, bytes, last, first));
    const double attention = (backward ? attention_backward() : attention_forward()) / p.cp;
    return (p.cp - 1) * std::max(hop - attention, 0.0);
  }
  double kv_exchange_bytes(bool backward) const {
    return (p.cp - 1) * (backward && !o.cp_all_gather ? 2 : 1) * kv_chunk_bytes(m, p);
  }

  struct Block {
    ChunkCost cost;   // dp fields unused here
    double tp_bytes;  // sent per micro-batch
    double cp_bytes;
  };
  Block block(bool recomputed) const {
    const double gf = block_gemm_forward(), gb = block_gemm_backward();
    const double fwd_compute = gf + attention_forward() + block_memory_forward() + o.layer_pass_overhead_s;
    double bwd_compute = gb + attention_backward() + block_memory_backward() + o.layer_pass_overhead_s;
    const double pass = block_tp_pass();
    double bwd_tp = (o.async_tp_backward && !o.tp_comm_overlap && t > 1) ? async_backward_tp()
                                                                         : exposed_tp(pass + block_sp_regather(), gb);
    double bytes = 2 * block_tp_pass_bytes() + block_sp_regather_bytes();
    if (recomputed) {
      bwd_compute += fwd_compute;
      bwd_tp += exposed_tp(pass, gf);
      bytes += block_tp_pass_bytes();
    } else if (p.recompute == Recompute::selective) {
      bwd_compute += o.op_level_selective ? op_level_recompute() : attention_forward();
    }
    Block b{};
    b.cost.forward_compute_s = fwd_compute;
    b.cost.forward_tp_s = exposed_tp(pass, gf);
    b.cost.backward_compute_s = bwd_compute;
    b.cost.backward_tp_s = bwd_tp;
    b.tp_bytes = bytes;
    // Full recompute passes the forward's K and V round the ring again.
    const double ring_forward = kv_exchange(false), ring_forward_bytes = kv_exchange_bytes(false);
    b.cost.forward_cp_s = ring_forward;
    b.cost.backward_cp_s = kv_exchange(true) + (recomputed ? ring_forward : 0);
    b.cp_bytes = ring_forward_bytes + kv_exchange_bytes(true) + (recomputed ? ring_forward_bytes : 0);
    return b;
  }

  // --- embedding and head, one micro-batch ---
  Block embedding() const {
    Block b{};
    const double positions = m.learned_positions ? 2 : 0;  // read the table, add
    b.cost.forward_compute_s = memory((1 + positions) * n * h * e + 4 * n);
    b.cost.backward_compute_s = memory(n * h * (e + 8));  // scatter-add into fp32 gradients
    if (t > 1) {
      const auto k = p.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce;
      b.cost.forward_tp_s = tp(k, n * h * e);
      b.tp_bytes = tp_sent(k, n * h * e);
      if (p.sequence_parallel) {
        b.cost.backward_tp_s = tp(Collective::all_gather, n * h * e);
        b.tp_bytes += tp_sent(Collective::all_gather, n * h * e);
      }
    }
    return b;
  }
  // The head runs its backward right after its forward (its loss gradient is
  // known then), so both count in the forward action.
  Block head() const {
    Block b{};
    const double v = double(m.padded_vocab()) / t;
    const double logits = gemm_priced(n, h, v, bare_ceiling()),
                 logits_backward = gemm_backward_priced(n, h, v, bare_ceiling());
    // Cross-entropy in fp32 over this rank's vocabulary slice: convert,
    // max, exp-sum, normalize forward (4e + 16 bytes per logit), softmax
    // minus one-hot and convert back backward (2e + 8).
    const double loss_fwd = memory(n * v * (4 * e + 16)), loss_bwd = memory(n * v * (2 * e + 8));
    b.cost.forward_compute_s = memory(norm_forward_bytes()) + logits + loss_fwd +    // norm, GEMM, loss
                               loss_bwd + logits_backward + memory(norm_backward_bytes(false));  // backward
    if (t > 1) {
      double c = 3 * tp(Collective::all_reduce, n * 4);  // max, sum, target logit
      double bytes = 3 * tp_sent(Collective::all_reduce, n * 4);
      const auto k = p.sequence_parallel ? Collective::all_gather : Collective::all_reduce;
      c += tp(k, n * h * e);  // SP: gather the input; else all-reduce the input gradient
      bytes += tp_sent(k, n * h * e);
      if (p.sequence_parallel) {
        c += tp(Collective::reduce_scatter, n * h * e);
        bytes += tp_sent(Collective::reduce_scatter, n * h * e);
      }
      b.cost.forward_tp_s = exposed_tp(c, logits + logits_backward);
      b.tp_bytes = bytes;
    }
    return b;
  }
};

ChunkCost add(ChunkCost a, const ChunkCost& b, double times = 1) {
  a.forward_compute_s += times * b.forward_compute_s;
  a.forward_tp_s += times * b.forward_tp_s;
  a.forward_dp_s += times * b.forward_dp_s;
  a.backward_compute_s += times * b.backward_compute_s;
  a.backward_tp_s += times * b.backward_tp_s;
  a.backward_dp_s += times * b.backward_dp_s;
  a.forward_cp_s += times * b.forward_cp_s;
  a.backward_cp_s += times * b.backward_cp_s;
  return a;
}

// Communication that overlaps `compute` except one of `pieces` pieces, plus
// what it costs the compute it hides behind: a collective's kernels hold a
// share of the device's SMs (one CTA per channel) while they run, so that
// share of the overlapped time is lost to compute (`sm_share`, 0 where not
// modelled).
double overlapped(double comm, double compute, int pieces, double sm_share) {
  const double first = comm / std::max(pieces, 1);
  const double hidden = std::max(0.0, std::min(comm, compute) - first);
  return std::max(comm - compute, 0.0) + first + sm_share * hidden;
}

// Prices one step stage by stage: the blocks of each chunk, its ZeRO
// collectives, the step-end reduction, the pipeline boundaries.
class StepPricer {
 public:
  StepPricer(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, const PerfOptions& o,
             PerfCache& cache)
      : m_(m), p_(p), s_(s), o_(o), cache_(cache), pr_(m, p, s, o), plain_(pr_.block(false)),
        recomputed_(pr_.block(true)), emb_(pr_.embedding()), head_(pr_.head()), pbytes_(p.bf16 ? 2 : 4),
        boundary_(pr_.n * pr_.h * pr_.e / p.tp) {}

  StepCosts run() {
    StepCosts r;
    r.pp = p_.pp;
    r.vpp = p_.vpp;
    r.num_micro_batches = p_.num_micro_batches();
    r.chunks.resize(size_t(p_.pp) * p_.vpp);
    r.grad_reduce_s.assign(p_.pp, std::vector<double>(p_.vpp, 0.0));
    r.bucket_fraction.assign(p_.pp, 1.0);
    r.param_gather_s.assign(p_.pp, 0.0);
    r.optimizer_s.assign(p_.pp, 0.0);
    r.tp_bytes.assign(p_.pp, 0.0);
    r.pp_bytes.assign(p_.pp, 0.0);
    r.dp_bytes.assign(p_.pp, 0.0);
    r.cp_bytes.assign(p_.pp, 0.0);
    transfers(r);
    // Stages differ only as first, middle or last (also in their layers).
    const StageLayout* kinds[3] = {&cache_.stage_layout(m_, p_, 0),
                                   &cache_.stage_layout(m_, p_, p_.pp > 2 ? 1 : 0),
                                   &cache_.stage_layout(m_, p_, p_.pp - 1)};
    for (int st = 0; st < p_.pp; ++st) stage(st, *kinds[st == 0 ? 0 : st == p_.pp - 1 ? 2 : 1], r);
    embedding_sync(r);
    return r;
  }

 private:
  // Pipeline boundaries: each TP rank sends its 1/TP slice; without
  // sequence parallelism the receiver all-gathers it over TP.
  void transfers(StepCosts& r) const {
    r.transfer_s.assign(p_.pp, 0.0);
    if (p_.pp == 1) return;
    const double regather = (p_.tp > 1 && !p_.sequence_parallel)
                                ? collective_time(s_, Collective::all_gather, pr_.n * pr_.h * pr_.e, p_.tp, 1)
                                : 0;
    for (int st = 0; st < p_.pp; ++st) {
      const int a = rank_of(p_, {0, 0, st}), b = rank_of(p_, {0, 0, (st + 1) % p_.pp});
      r.transfer_s[st] = p2p_time(s_, boundary_, a, b) + regather;
    }
  }

  // The blocks of one chunk of `layers` layers (stage_layers.h: uneven
  // stages run different counts, so the slowest stage sets the pace in the
  // pipeline simulation), with the embedding or the head where virtual
  // stage v holds them.
  Pricer::Block chunk_compute(int layers, int v) const {
    Pricer::Block all{};
    auto add_block = [&](const Pricer::Block& b) {
      all.cost = add(all.cost, b.cost);
      all.tp_bytes += b.tp_bytes;
      all.cp_bytes += b.cp_bytes;
    };
    for (int i = 0; i < layers; ++i) add_block(block_is_recomputed(p_, i, layers) ? recomputed_ : plain_);
    if (v == 0) add_block(emb_);
    if (v == p_.pp * p_.vpp - 1) add_block(head_);
    return all;
  }

  // The groups data parallelism reduces over: all DP ranks, ZeRO's shard
  // group (consecutive DP ranks; all of them unless sharding is hybrid) and
  // the shard's replicas across the groups.
  enum class Over { dp, shard, replicas };
  int group_size(Over g) const {
    return g == Over::dp ? p_.dp : g == Over::shard ? p_.shard_size() : p_.shard_replicas();
  }
  double group_time(Over g, Collective k, double bytes) const {
    const int stride = g == Over::replicas ? p_.tp * p_.shard_size() : p_.tp;
    return collective_time(s_, k, bytes, group_size(g), stride);
  }
  double group_sent(Over g, Collective k, double bytes) const { return collective_bytes_sent(k, bytes, group_size(g)); }

  // ZeRO-2/3 collectives of chunk c as frameworks issue them: per unit, at
  // least `calls` per unit, or per bucket of `limit` elements over the
  // chunk; each call pays the collective's latency.
  double sharded_calls(Over g, Collective k, const StageLayout& L, int c, double bytes_per_element, double limit,
                       int calls) const {
    if (limit > 0 && calls <= 1) return in_buckets(g, k, double(L.chunk_numel[c]), bytes_per_element, limit);
    double t = 0, last_n = -1, last_t = 0;  // blocks repeat one size: price it once
    const ChunkUnits& cu = L.chunk_order[c];
    for (const auto* list : {&cu.embedding, &cu.blocks, &cu.head})
      for (int u : *list) {
        const double n = double(L.unit_numel[u]);
        if (n != last_n) {
          const double k_calls = std::max(double(calls), limit > 0 ? std::ceil(n / limit) : 1.0);
          last_n = n;
          last_t = k_calls * group_time(g, k, n / k_calls * bytes_per_element);
        }
        t += last_t;
      }
    return t;
  }

  // One ZeRO collective call over the shard group, plus, where the runtime
  // uses c10d's list form, its copies through the flat buffer: one kernel per
  // rank of the group and a pass over the buffer (ZeroRuntime::list_collectives).
  double shard_call(Collective k, double bytes) const {
    double t = group_time(Over::shard, k, bytes);
    if (o_.zero.list_collectives) t += pr_.memory(2 * bytes) + (p_.shard_size() - 1) * s_.compute.kernel_overhead_s;
    return t;
  }

  // Reduce-scatters of chunk c issued one per parameter tensor
  // (ZeroRuntime::per_tensor_calls).
  double per_tensor_reduce_scatters(const StageLayout& L, int c, double bytes_per_element) const {
    double t = 0;
    const ChunkUnits& cu = L.chunk_order[c];
    for (const auto* list : {&cu.embedding, &cu.blocks, &cu.head})
      for (int u : *list)
        for (int64_t n : L.unit_tensors[u]) t += shard_call(Collective::reduce_scatter, double(n) * bytes_per_element);
    return t;
  }

  // ZeRO-3 all-gathers of chunk c per micro-batch, as the runtime issues
  // them: the forward's, and the backward's with the re-gathers of a
  // recomputed block's tensors that its recompute could not keep
  // (ZeroRuntime::reuse_elements).
  struct Gathers {
    double forward_s = 0, backward_s = 0, forward_elements = 0, backward_elements = 0;
  };
  Gathers zero3_gathers(const StageLayout& L, int c) const {
    const ZeroRuntime& z = o_.zero;
    const double numel = double(L.chunk_numel[c]);
    if (!z.per_tensor_calls && z.reuse_elements <= 0) {
      const double ag =
          sharded_calls(Over::shard, Collective::all_gather, L, c, pbytes_, z.gather_elements, z.gather_calls_per_unit);
      return {ag, ag, numel, numel};
    }
    Gathers g;
    const ChunkUnits& cu = L.chunk_order[c];
    const std::vector<int64_t>* last = nullptr;  // blocks repeat one shape: price it once per recompute mode
    UnitGathers last_ug[2];
    for (const auto* list : {&cu.embedding, &cu.blocks, &cu.head})
      for (size_t i = 0; i < list->size(); ++i) {
        const int u = (*list)[i];
        const bool recomputed = list == &cu.blocks && block_is_recomputed(p_, int(i), L.chunk_layers[c]);
        const std::vector<int64_t>& tensors = L.unit_tensors[u];
        if (!last || tensors != *last) {
          last = &tensors;
          last_ug[0] = unit_gathers(tensors, false);
          last_ug[1] = unit_gathers(tensors, true);
        }
        const UnitGathers& ug = last_ug[recomputed ? 1 : 0];
        g.forward_s += ug.forward_s;
        g.backward_s += ug.forward_s + ug.regather_s;
        g.forward_elements += ug.elements;
        g.backward_elements += ug.elements + ug.regather_elements;
      }
    if (!z.per_tensor_calls) {  // calls as the runtime groups them, scaled by the re-gathered share
      const double share = g.forward_elements > 0 ? g.backward_elements / g.forward_elements : 1;
      const double calls =
          sharded_calls(Over::shard, Collective::all_gather, L, c, pbytes_, z.gather_elements, z.gather_calls_per_unit);
      return {calls, calls * share, numel, numel * share};
    }
    return g;
  }

  // One unit's gathers: the tensors gathered per use (persistent ones stay
  // gathered), the time of one pass over them, and what a recomputed
  // block's backward gathers again: tensor k stays gathered from its
  // recompute to its backward if the tensors used in between (the later
  // ones, in the recompute and again in the backward) hold fewer than
  // reuse_elements.
  struct UnitGathers {
    double forward_s = 0, regather_s = 0, elements = 0, regather_elements = 0;
  };
  UnitGathers unit_gathers(const std::vector<int64_t>& tensors, bool recomputed) const {
    const ZeroRuntime& z = o_.zero;
    UnitGathers ug;
    double later = 0;  // elements of the gathered tensors after the current one
    for (size_t k = tensors.size(); k-- > 0;) {
      const double n = double(tensors[k]);
      if (n < z.persistence_elements) continue;
      const double t = shard_call(Collective::all_gather, n * pbytes_);
      ug.forward_s += t;
      ug.elements += n;
      if (recomputed && z.reuse_elements > 0 && 2 * later >= z.reuse_elements) {
        ug.regather_s += t;
        ug.regather_elements += n;
      }
      later += n;
    }
    return ug;
  }

  // ZeRO-2/3 per micro-batch, added to chunk c's cost; returns the bytes
  // per step.
  double sharded_dp(const StageLayout& L, int c, ChunkCost& cc) const {
    const int mb = p_.num_micro_batches();
    const double numel = double(L.chunk_numel[c]);
    const int units = L.chunk_units[c];
    double bytes = 0;
    // The backward's collectives share the network and hide behind the same
    // compute: the gathers of the next units and, overlapped, the
    // reduce-scatters of the last ones.
    const double share = s_.compute.collective_sm_share;
    double backward_hidden = 0, backward_exposed = 0;
    framework_copies(numel, cc);
    if (p_.zero_stage >= 2) {
      const double gbytes = sharded_gradient_bytes(), bucket = o_.zero.reduce_bucket_elements;
      // The per-tensor and serialized runtimes are ZeRO-3's (ZeroRuntime).
      const bool stage3_runtime = p_.zero_stage >= 3;
      double rs = stage3_runtime && o_.zero.per_tensor_calls
                      ? per_tensor_reduce_scatters(L, c, gbytes)
                      : sharded_calls(Over::shard, Collective::reduce_scatter, L, c, gbytes, bucket, 1);
      bytes += mb * group_sent(Over::shard, Collective::reduce_scatter, numel * gbytes);
      if (p_.hybrid_shard() && !o_.zero.replica_reduce_at_boundary) {  // each shard all-reduced across replicas
        const double shard_gbytes = gbytes / p_.shard_size();
        rs += sharded_calls(Over::replicas, Collective::all_reduce, L, c, shard_gbytes, bucket, 1);
        bytes += mb * group_sent(Over::replicas, Collective::all_reduce, numel * shard_gbytes);
      }
      (o_.overlap_grad_reduce && !(stage3_runtime && o_.zero.serialized) ? backward_hidden : backward_exposed) += rs;
    }
    if (p_.zero_stage >= 3) {
      const Gathers g = zero3_gathers(L, c);
      if (o_.zero.serialized || o_.zero.gather_at_use) {
        cc.forward_dp_s += g.forward_s;
        backward_exposed += g.backward_s;
      } else {
        cc.forward_dp_s += overlapped(g.forward_s, cc.forward_compute_s, units, share);
        backward_hidden += g.backward_s;
      }
      bytes += mb * (group_sent(Over::shard, Collective::all_gather, g.forward_elements * pbytes_) +
                     group_sent(Over::shard, Collective::all_gather, g.backward_elements * pbytes_));
    }
    if (backward_hidden > 0) cc.backward_dp_s += overlapped(backward_hidden, cc.backward_compute_s, units, share);
    cc.backward_dp_s += backward_exposed;
    return bytes;
  }

  // Elements per gradient bucket (PerfOptions::dp_scaled_buckets).
  double bucket_elements() const {
    return o_.dp_scaled_buckets ? std::max(kBucketElements, 1e6 * p_.dp * p_.cp) : kBucketElements;
  }

  // The collective over `numel` elements in ceil(numel / limit) calls of one
  // size, each paying the collective's latency; one call where limit is 0.
  double in_buckets(Over g, Collective k, double numel, double bytes_per_element, double limit) const {
    const double n = limit > 0 ? std::max(1.0, std::ceil(numel / limit)) : 1.0;
    return n * group_time(g, k, numel / n * bytes_per_element);
  }

  // The step-end collective over `numel` elements as Megatron issues it: one
  // call per gradient bucket where it overlaps (`per_bucket`), else one.
  double bucketed(Over g, Collective k, double numel, double bytes_per_element, bool per_bucket) const {
    return in_buckets(g, k, numel, bytes_per_element, per_bucket ? bucket_elements() : 0);
  }

  // A framework's copies around its ZeRO-2/3 collectives, per micro-batch
  // (ZeroRuntime::gather_copy_out, grad_copy_in): memory-bound passes over
  // the chunk's `numel` elements on the compute stream.
  void framework_copies(double numel, ChunkCost& cc) const {
    if (p_.zero_stage >= 3 && o_.zero.gather_copy_out) {
      const double copy = pr_.memory(numel * 2 * pbytes_);
      cc.forward_compute_s += copy;
      cc.backward_compute_s += copy;
    }
    if (p_.zero_stage >= 2 && o_.zero.grad_copy_in)
      cc.backward_compute_s += pr_.memory(numel * (pbytes_ + sharded_gradient_bytes()));
  }

  // Bytes per gradient element a ZeRO-2/3 reduce-scatter moves: the model
  // dtype where the framework reduces in it, else fp32.
  double sharded_gradient_bytes() const { return o_.zero.reduce_in_model_dtype ? pbytes_ : 4; }

  // Bytes per gradient element the step-end reductions move: fp32 (Megatron's
  // main_grad, DeepSpeed's BF16_Optimizer), else the 16-bit gradients a
  // DeepSpeed engine holds.
  double reduced_gradient_bytes() const {
    return o_.model_dtype_gradients && !fp32_gradient_allreduce(o_, p_) ? pbytes_ : 4;
  }

  // Step-end reduction of chunk c (ZeRO-0/1): fp32 gradients (Megatron's
  // main_grad), or the 16-bit gradients a DeepSpeed engine holds and
  // reduces as they are; DeepSpeed's BF16_Optimizer all-reduces fp32 ones
  // even under ZeRO-1. Under ZeRO-2/3, only MiCS's all-reduce of the
  // gradient shard across the replicas (ZeroRuntime::
  // replica_reduce_at_boundary). Returns the bytes per step.
  double step_end_reduction(double numel, double& time_s) const {
    const bool fp32_allreduce = fp32_gradient_allreduce(o_, p_);
    const double step_gbytes = reduced_gradient_bytes();
    if (p_.zero_stage == 0 || fp32_allreduce) {
      time_s = bucketed(Over::dp, Collective::all_reduce, numel, step_gbytes, o_.overlap_grad_reduce);
      return group_sent(Over::dp, Collective::all_reduce, numel * step_gbytes);
    }
    if (p_.zero_stage >= 2) {
      if (!p_.hybrid_shard() || !o_.zero.replica_reduce_at_boundary) return 0;
      const double shard_numel = numel / p_.shard_size(), gbytes = sharded_gradient_bytes();
      time_s = bucketed(Over::replicas, Collective::all_reduce, shard_numel, gbytes, o_.overlap_grad_reduce);
      return group_sent(Over::replicas, Collective::all_reduce, shard_numel * gbytes);
    }
    if (p_.zero_stage != 1) return 0;
    time_s = bucketed(Over::shard, Collective::reduce_scatter, numel, step_gbytes, o_.overlap_grad_reduce);
    double sent = group_sent(Over::shard, Collective::reduce_scatter, numel * step_gbytes);
    if (p_.hybrid_shard()) {  // the reduced shard all-reduced across the replicas
      const double shard_bytes = numel * step_gbytes / p_.shard_size();
      time_s += group_time(Over::replicas, Collective::all_reduce, shard_bytes);
      sent += group_sent(Over::replicas, Collective::all_reduce, shard_bytes);
    }
    return sent;
  }

  void stage(int st, const StageLayout& L, StepCosts& r) const {
    const int mb = p_.num_micro_batches();
    double tp_bytes = 0, dp_bytes = 0, cp_bytes = 0;
    int sends = 0;
    for (int c = 0; c < p_.vpp; ++c) {
      const int v = c * p_.pp + st;
      const Pricer::Block blocks = chunk_compute(L.chunk_layers[c], v);
      ChunkCost cc = blocks.cost;
      sends += (v > 0) + (v < p_.pp * p_.vpp - 1);
      dp_bytes += sharded_dp(L, c, cc);
      dp_bytes += step_end_reduction(double(L.chunk_numel[c]), r.grad_reduce_s[st][c]);
      cc.forward_compute_s += s_.compute.action_overhead_s;
      cc.backward_compute_s += s_.compute.action_overhead_s;
      r.chunks[size_t(st) * p_.vpp + c] = cc;
      tp_bytes += mb * blocks.tp_bytes;
      cp_bytes += mb * blocks.cp_bytes;
    }
    if (p_.zero_stage == 1 || p_.zero_stage == 2) {
      r.param_gather_s[st] =
          bucketed(Over::shard, Collective::all_gather, double(L.numel), pbytes_, o_.overlap_param_gather);
      dp_bytes += group_sent(Over::shard, Collective::all_gather, double(L.numel) * pbytes_);
    }
    r.bucket_fraction[st] = std::min(1.0, bucket_elements() / std::max(1.0, double(L.numel)));
    const double shard = p_.zero_stage >= 1 ? double(L.numel) / p_.shard_size() : double(L.numel);
    r.optimizer_s[st] = pr_.memory(shard * (p_.bf16 ? 34 : 32));
    r.tp_bytes[st] = tp_bytes;
    r.dp_bytes[st] = dp_bytes;
    r.cp_bytes[st] = cp_bytes;
    r.pp_bytes[st] = double(mb) * sends * boundary_;
  }

  // Tied embedding gradients, summed between the first and last stage in
  // the dtype the step-end reduction moves.
  void embedding_sync(StepCosts& r) const {
    if (p_.pp == 1 || !m_.tied_embeddings) return;
    const double bytes = double(m_.padded_vocab()) / p_.tp * m_.hidden_size * reduced_gradient_bytes();
    r.embedding_sync_s = collective_time(s_, Collective::all_reduce, bytes, 2, p_.tp * p_.dp * (p_.pp - 1));
    const double sent = collective_bytes_sent(Collective::all_reduce, bytes, 2);
    r.pp_bytes[0] += sent;
    r.pp_bytes[p_.pp - 1] += sent;
  }

  const ModelConfig& m_;
  const ParallelConfig& p_;
  const SystemSpec& s_;
  const PerfOptions& o_;
  PerfCache& cache_;
  const Pricer pr_;
  const Pricer::Block plain_, recomputed_, emb_, head_;
  const double pbytes_;
  const double boundary_;  // bytes per pipeline send and TP rank
};

}  // namespace

StepCosts step_costs(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, const PerfOptions& o,
                     PerfCache& cache) {
  if (p.cp == 1) return StepPricer(m, p, s, o, cache).run();
  const CostView v = cost_view(m, p);
  return StepPricer(v.model, v.parallel, s, o, cache).run();
}

}  // namespace meshtrain::perf

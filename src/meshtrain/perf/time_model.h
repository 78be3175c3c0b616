// Time model: how long each piece of one training step takes on one rank,
// the durations the pipeline simulation walks with.
//
// Compute. A GEMM of M x K by K x N takes 2MKN / (peak x eff(min(M, N, K))
// x waves(M, N)) with eff the system's matmul efficiency curve for the dtype
// (tensor parallelism shrinks N or K by TP and so lowers the efficiency) and
// waves the share of useful tile slots of its output
// (SystemSpec::gemm_wave_utilization; 1 where not modelled). Its backward
// pair prices the data gradient (output M x K) and the weight gradient
// (output K x N) the same way: twice the forward without waves. The output
// layer's GEMMs, which stand alone, take the curve's shape scaled to the
// device's measured bare-GEMM ceiling (ComputeSpec::matmul_ceiling_bf16)
// where the system gives one: the fitted curve stands for a block's GEMMs
// and the block work this model does not list. Memory-
// bound kernels (LayerNorm or RMSNorm, GELU or SwiGLU, rope, dropout+
// residual, softmax, cross-entropy in fp32, embedding lookup) cost bytes read
// and written / (HBM bandwidth x elementwise efficiency), each norm, activation
// and rope pass by what its kernel reads and writes (time_model.cc): RMSNorm
// keeps one statistic and one parameter gradient per row block where
// LayerNorm keeps two, SwiGLU reads and writes the gate and up halves, rope
// touches the queries and keys only. Attention: with flash attention, the
// FLOPs a causal kernel executes (about half the s^2 product) at the
// system's flash efficiency, backward 2.5 x forward, no s^2 memory traffic;
// without it, the full score GEMMs at the matmul efficiency of head_dim plus
// four passes over the s^2 score matrix forward and eight backward. Each
// kernel pays the system's launch overhead, each forward and backward
// action of a chunk its host-side action overhead (framework work between
// kernels), and each pass through a block (forward, recompute, backward) the
// profile's PerfOptions::layer_pass_overhead_s.
//
// Recompute: full recompute runs a block's forward again (with its tensor-
// parallel collectives) inside its backward; selective runs the attention
// core again, or with PerfOptions::op_level_selective (torchtitan) the
// matmuls it did not keep and the block's element-wise ops.
//
// Communication per micro-batch (collective.h prices each):
//   TP: per block 2 all-reduces forward and 2 backward of the block's
//       activation (micro-batch x seq x hidden), or with sequence
//       parallelism 2 all-gathers + 2 reduce-scatters each way; the
//       embedding and head add theirs. With --tp-comm-overlap a block's
//       collectives run under its GEMMs in 4 pieces: exposed =
//       max(comm - gemm, 0) + min(comm, gemm) / 4.
//   PP: each boundary moves micro-batch x seq x hidden / TP per rank (each
//       TP rank its slice; without sequence parallelism the receiver
//       all-gathers it over TP).
//   CP: each block pass sends its K and V round the CP ring (Megatron-Core's
//       TransformerEngine ring attention): cp - 1 steps of the rank's K and
//       V chunk forward, and of K, V and their gradients backward, each step
//       under the attention of the chunk in hand: exposed = (cp - 1) x
//       max(step - attention / cp, 0). The ring runs at its slowest hop.
//   DP: ZeRO-2 reduce-scatters each chunk's gradients after every micro-
//       batch's backward, ZeRO-3 also all-gathers its parameters before each
//       forward and backward; one call per unit (block, embedding, head), or
//       as the framework issues them (PerfOptions::zero: per bucket, per
//       sub-module), each paying its latency; these overlap the chunk's
//       compute except one unit's worth (the reduce-scatter only with
//       --overlap-grad-reduce).
//       ZeRO-0 all-reduces, ZeRO-1 reduce-scatters the fp32
//       gradients once per step (the 16-bit ones where the framework holds
//       them so, PerfOptions::model_dtype_gradients: DeepSpeed; DeepSpeed's
//       BF16_Optimizer all-reduces fp32 ones, PerfOptions::bf16_optimizer); ZeRO-1/2
//       all-gather the updated parameters after the optimizer.
// Optimizer: Adam over the rank's shard, memory-bound: 34 bytes per element
// with bf16 (fp32 gradient, master weight, m and v read and written, bf16
// weight written, gradient norm), 32 in fp32.
#pragma once

#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/perf_cache.h"
#include "meshtrain/perf/perf_options.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

// One micro-batch through one model chunk on one rank, by where time goes.
struct ChunkCost {
  double forward_compute_s = 0, forward_tp_s = 0, forward_dp_s = 0, forward_cp_s = 0;
  double backward_compute_s = 0, backward_tp_s = 0, backward_dp_s = 0, backward_cp_s = 0;
  double forward_s() const { return forward_compute_s + forward_tp_s + forward_dp_s + forward_cp_s; }
  double backward_s() const { return backward_compute_s + backward_tp_s + backward_dp_s + backward_cp_s; }
};

// Everything one step costs, per stage.
struct StepCosts {
  int pp = 1, vpp = 1, num_micro_batches = 1;
  std::vector<ChunkCost> chunks;                  // [stage * vpp + chunk]
  std::vector<double> transfer_s;                 // [stage]: stage -> stage + 1 (mod pp)
  std::vector<std::vector<double>> grad_reduce_s; // [stage][chunk]: once per step (ZeRO-0/1)
  // [stage]: one bucket / the stage's parameters (uncovered: the last
  // reduced, the first gathered)
  std::vector<double> bucket_fraction;
  std::vector<double> param_gather_s;             // [stage]: after the optimizer (ZeRO-1/2)
  std::vector<double> optimizer_s;                // [stage]
  double embedding_sync_s = 0;                    // tied embedding gradients, stage 0 and pp-1
  // Bytes each rank of a stage sends per step, by parallel dimension.
  std::vector<double> tp_bytes, pp_bytes, dp_bytes, cp_bytes;  // [stage]

  const ChunkCost& chunk(int stage, int c) const { return chunks[stage * vpp + c]; }
};

// The config must be valid (validate(m, p, world)); a CP layout is priced
// through its cost view (context_parallel.h).
StepCosts step_costs(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, const PerfOptions& o,
                     PerfCache& cache);

}  // namespace meshtrain::perf

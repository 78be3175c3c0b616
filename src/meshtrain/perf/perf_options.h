// PerfOptions: framework behaviours the performance model prices, as the
// framework that ran a config has them (Megatron-LM's flag names for the
// overlaps). The defaults describe this project's engine.
//
// ZeroRuntime: how a framework runs sharded data parallelism (ZeRO-2/3),
// which sets both the buffers it holds and the collectives it issues:
//   gather_elements  ZeRO-3 parameters gathered at once, at most. 0: one unit
//                    (a block, the embedding, the head) at a time, as the
//                    engine and FSDP (one wrapped block, the next prefetched
//                    while it runs) gather. DeepSpeed ZeRO-3 gathers each
//                    sub-module's parameters and keeps at most
//                    stage3_max_live_parameters (default 1e9) alive.
//   reduce_bucket_elements  gradient elements reduce-scattered per call. 0:
//                    one unit per call (engine, FSDP). DeepSpeed:
//                    reduce_bucket_size (default 5e8).
//   reduce_in_model_dtype  gradients are reduced in the model's dtype (bf16 /
//                    fp16: DeepSpeed ZeRO, FSDP with a bf16 reduce dtype)
//                    instead of fp32 (the engine).
//   prefetch_units   units gathered ahead of the one in use, in the order a
//                    forward or backward uses them, and held until used
//                    (FSDP's forward and backward prefetch and the engine's:
//                    1; DeepSpeed, which bounds its gathers by
//                    gather_elements: 0).
//   fp32_sharded_parameters  the shards the rank keeps between steps are the
//                    fp32 parameters the optimizer updates, cast to bf16
//                    only when gathered (FSDP's mixed precision: "outside
//                    forward and backward, the sharded parameters are kept in
//                    full precision"): 4 + 4 + 8 bytes per element (weights,
//                    gradients, Adam m and v) instead of the engine's bf16
//                    weights plus fp32 master copy, 2 + 4 + 12.
//   gather_calls_per_unit  all-gathers issued per unit: 1 (engine, FSDP: one
//                    flat buffer per block); DeepSpeed gathers per sub-module
//                    (QKV, projection, the two MLP matrices, the LayerNorms
//                    and biases coalesced by its prefetch bucket): 6.
//   gather_copy_out  each gathered unit is copied out of the all-gather's
//                    flat output into per-parameter tensors (FSDP2:
//                    foreach_all_gather_copy_out, split_with_sizes_copy), a
//                    read and a write of the unit in the parameter dtype per
//                    gather; FSDP1 and DeepSpeed gather into the buffer the
//                    parameters view, and the engine too.
//   grad_copy_in     each unit's unsharded gradient is copied (cast to the
//                    reduce dtype) into the reduce-scatter's input (FSDP2:
//                    foreach_reduce_scatter_copy_in, _chunk_cat; FSDP1: the
//                    flat gradient cast to the reduce dtype; DeepSpeed: the
//                    contiguous gradient bucket); the engine reduces from the
//                    gradient buffer itself.
//   persistence_elements  parameter tensors smaller than this stay gathered
//                    from the step to the end of the next backward and are
//                    never gathered per use (DeepSpeed ZeRO-3: 1e5, fixed in
//                    its 2021 stage3.py, stage3_param_persistence_threshold
//                    later). 0: none.
//   per_tensor_calls one all-gather per parameter tensor (at least
//                    persistence_elements) and one reduce-scatter per
//                    parameter tensor, instead of gather_calls_per_unit and
//                    reduce_bucket_elements (DeepSpeed 2021:
//                    _allgather_param and _reduce_scatter_gradient per
//                    parameter).
//   serialized       the runtime synchronizes the device around every fetch,
//                    so no ZeRO-3 collective runs beside compute (DeepSpeed
//                    2021: fetch_sub_module waits on its gathers, then calls
//                    torch.cuda.synchronize(), which also waits for the
//                    reduction stream; each prefetched gather is preceded by
//                    torch.cuda.synchronize()). Every gather and reduce-scatter
//                    is exposed.
//   list_collectives each call uses c10d's list form (all_gather into N
//                    views, reduce_scatter from N views), which copies
//                    through a flat buffer one view at a time: N kernels per
//                    call, N the shard group (DeepSpeed 2021 with PyTorch's
//                    ProcessGroupNCCL before _all_gather_base).
//   gather_at_use    each ZeRO-3 gather blocks at the unit's use, so none
//                    hides behind compute (the engine under train
//                    --no-zero-prefetch, with prefetch_units 0).
//   reuse_elements   with activation recomputation, a parameter tensor stays
//                    gathered from its recompute to its backward only if the
//                    parameters used in between number fewer than this
//                    (DeepSpeed's stage3_max_reuse_distance, 1e9); otherwise
//                    the backward gathers it again. 0: one gather serves the
//                    recompute and the backward (the engine, FSDP, whose
//                    pre-backward hook gathers the unit before its
//                    checkpointed forward reruns).
//   replica_reduce_at_boundary  under hybrid sharding, each gradient shard is
//                    all-reduced across the replicas once a step, with the
//                    last micro-batch's backward, not after every micro-batch
//                    (DeepSpeed's MiCS_Optimizer: allreduce_mics_shard_grads
//                    returns unless is_gradient_accumulation_boundary); the
//                    shard group's reduce-scatter still runs every one.
// Every call pays its collective's latency, which for a ring all-gather or
// reduce-scatter grows with the group (collective.h).
#pragma once

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::perf {

struct ZeroRuntime {
  double gather_elements = 0;
  double reduce_bucket_elements = 0;
  bool reduce_in_model_dtype = false;
  int prefetch_units = 1;
  int gather_calls_per_unit = 1;
  bool fp32_sharded_parameters = false;
  bool gather_copy_out = false;
  bool grad_copy_in = false;
  double persistence_elements = 0;
  bool per_tensor_calls = false;
  bool serialized = false;
  bool list_collectives = false;
  double reuse_elements = 0;
  bool gather_at_use = false;
  bool replica_reduce_at_boundary = false;
};

struct PerfOptions {
  // Recompute::selective as torchtitan's op-level selective activation
  // checkpointing (its policy: per block, keep the outputs of every other
  // matmul, counting from the first, and of attention; recompute the rest,
  // element-wise ops included, in the backward) instead of Megatron's
  // selective recompute of the attention core. Memory: memory_model.h;
  // time: time_model.h.
  bool op_level_selective = false;
  bool overlap_grad_reduce = false;   // step-end gradient reduction runs under the last backward
  bool overlap_param_gather = false;  // ZeRO-1/2 parameter all-gather runs under the next forward
  bool tp_comm_overlap = false;       // TP collectives pipelined with the adjacent GEMMs
  bool overlap_p2p_comm = false;      // pipeline sends do not hold the sender
  // Megatron-Core's default gradient bucket under overlap_grad_reduce:
  // max(40M, 1M x DP) elements (DistributedDataParallelConfig.bucket_size:
  // "larger DP sizes need larger buckets to ensure collectives do not become
  // latency-bound"), DP counting context-parallel ranks. Else 40M, Megatron-
  // LM's earlier constant and the engine's. Each bucket is one collective;
  // the last one reduced after the backward and, with overlap_param_gather,
  // the first one gathered before the forward wait uncovered.
  bool dp_scaled_buckets = false;
  // Megatron-LM's column-parallel backward (LinearWithGradAccumulationAnd-
  // AsyncCommunication, 2022 on; --no-async-tensor-model-parallel-allreduce
  // turns it off): the input gradient's all-reduce, or with sequence
  // parallelism its reduce-scatter, runs under the weight-gradient GEMM, and
  // the re-gather of the stashed sequence-parallel input under the input-
  // gradient GEMM. Superseded by tp_comm_overlap where both are set.
  bool async_tp_backward = false;
  // Context parallelism as Meta trained Llama 3 (Dubey et al. 2024, Sec.
  // 3.3.2): K and V all-gathered over the CP group before each block's
  // attention, "the all-gather communication latency is exposed in the
  // critical path", and their gradients reduce-scattered in the backward;
  // instead of Megatron-Core's ring, whose steps run under the attention of
  // the chunk in hand.
  bool cp_all_gather = false;
  // Gradients held in the model's 16-bit dtype between the backward and the
  // step, as DeepSpeed's engine holds them (ZeRO paper, Rajbhandari et al.
  // SC20, Sec. 3.1: 2 bytes of parameters and 2 of gradients per element,
  // 12 of optimizer state), instead of the engine's fp32 gradients.
  bool model_dtype_gradients = false;
  // DeepSpeed's BF16_Optimizer (DeepSpeed 0.6, 2022, written for BLOOM:
  // bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md,
  // 'Rebalancing layers': gradients accumulated in fp32, "4bytes x params
  // and it's not sharded across gpus"), which DeepSpeed's engine takes for
  // bf16 with ZeRO 0, or ZeRO 1 under pipeline parallelism: every rank
  // holds fp32 gradients of all its parameters (and the bf16 ones of the
  // last backward, which the pipeline engine clears only before the next:
  // 6 bytes an element), and the pipeline engine all-reduces them in fp32
  // at the step end (deepspeed/runtime/pipe/engine.py, _exec_reduce_grads
  // -> _bf16_reduce_grads -> buffered_allreduce_fallback over the
  // optimizer's fp32 gradients).
  // Applies where fp32_gradient_allreduce() says.
  bool bf16_optimizer = false;
  // Host time per transformer layer per pass (forward, recompute, backward)
  // that the GPU work does not hide, per micro-batch: a cost that favours
  // fewer, larger micro-batches and fewer layers per rank. Megatron-
  // DeepSpeed 2021-22: 2 ms, from BigScience's micro-batch sweeps of the
  // 181B prototype on 02-21 (chronicles-prequel.md, "48 node contenders":
  // TP 8, PP 12 and PP 6, micro-batch 1 to 4 at global batch 2,048; the
  // per-micro-batch cost that makes the model's micro-batch 1 to 4 ratio
  // match is 43 ms on 6 layers and 80 ms on 12, 2.4 and 2.2 ms per layer
  // pass with full recompute). Engine and other frameworks: 0.
  double layer_pass_overhead_s = 0;
  // The loss as the framework computes it. The engine computes the head in
  // chunks of rows and holds one chunk's logits (whole_logits false).
  // Frameworks hold the whole micro-batch's 16-bit logits over the rank's
  // vocabulary slice and, per logit element at the loss's peak,
  // loss_bytes_per_logit more: Megatron-LM and Megatron-DeepSpeed 4 (the
  // fp32 copy that the vocabulary-parallel cross-entropy turns in place into
  // the softmax it saves: gpt_model's vocab_parallel_cross_entropy(
  // output.float(), labels)); PyTorch's F.cross_entropy over pred.float()
  // (torchtitan, FSDP and DeepSpeed users) 8 (the fp32 copy and the fp32
  // log-softmax it saves); llm-foundry's fused cross-entropy (flash-attn's
  // CrossEntropyLoss, its default loss_fn) 2 (the logits' 16-bit gradient).
  bool whole_logits = false;
  double loss_bytes_per_logit = 0;
  // PyTorch's caching allocator frees its cached blocks and retries a failed
  // allocation before it reports out of memory (PyTorch CUDA semantics,
  // "Memory management"), so under it a layout fits when what is live fits;
  // the fragmentation allowance counts only in the reported total. The
  // engine's fit keeps the allowance.
  bool allocator_retries = false;
  ZeroRuntime zero;
};

// Whether the step-end reduction all-reduces fp32 gradients held for every
// parameter (PerfOptions::bf16_optimizer) for this layout.
inline bool fp32_gradient_allreduce(const PerfOptions& o, const ParallelConfig& p) {
  return o.bf16_optimizer && p.bf16 && (p.zero_stage == 0 || (p.zero_stage == 1 && p.pp > 1));
}

}  // namespace meshtrain::perf

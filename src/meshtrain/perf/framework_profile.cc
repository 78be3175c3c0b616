#include "meshtrain/perf/framework_profile.h"

#include <fmt/format.h>

#include "meshtrain/core/error.h"

namespace meshtrain::perf {

namespace {

// DeepSpeed ZeRO-3 defaults (DeepSpeed configuration JSON documentation):
// stage3_max_live_parameters 1e9, reduce_bucket_size 5e8, gradients reduced
// in the fp16/bf16 model dtype; a block is gathered per sub-module.
ZeroRuntime deepspeed_zero() { return {1e9, 5e8, true, 0, 6}; }

std::vector<FrameworkProfile> build() {
  std::vector<FrameworkProfile> v;
  FrameworkProfile p;

  p = {};
  p.name = "megatron-lm-2021";
  p.sequence_parallel = false;
  p.selective_recompute = false;
  p.partial_recompute = false;
  p.flash_attention = false;
  p.zero_stages = {0};
  p.basis = "Megatron-LM as of Narayanan et al. SC21: interleaved 1F1B added there; sequence parallelism and "
            "selective recompute and the block recompute method arrive with Korthikanti et al. 2022 (Megatron-LM v3.0), the distributed optimizer "
            "(--use-distributed-optimizer) in late 2022; no fused attention kernel";
  v.push_back(p);

  p = {};
  p.name = "megatron-lm-2022";
  p.flash_attention = false;
  p.zero_stages = {0};
  p.basis = "Megatron-LM v3.0 (Korthikanti et al. 2022): --sequence-parallel, --recompute-granularity selective; "
            "no distributed optimizer in the published runs, no flash attention (added 2023)";
  v.push_back(p);

  p = {};
  p.name = "megatron-deepspeed-2021";
  p.interleaving = false;
  p.sequence_parallel = false;
  p.selective_recompute = false;
  p.partial_recompute = false;
  p.flash_attention = false;
  p.zero_stages = {0, 1};
  p.basis = "Megatron-DeepSpeed (MT-NLG 530B, BLOOM 176B): DeepSpeed's PipelineEngine runs one 1F1B schedule, no "
            "interleaving; DeepSpeed allows only ZeRO-0/1 with pipeline parallelism; full activation checkpointing; "
            "Megatron's 2021 tensor parallelism without sequence parallelism";
  v.push_back(p);

  p = v.back();
  p.name = "megatron-deepspeed-2023";
  p.flash_attention = true;
  p.basis = "Megatron-DeepSpeed with a FlashAttention-2 port (Dash et al. ISC 2024 on Frontier): as "
            "megatron-deepspeed-2021 plus fused attention";
  v.push_back(p);

  p = {};
  p.name = "megatron-core-2024";
  p.options.overlap_grad_reduce = p.options.overlap_param_gather = true;
  p.options.tp_comm_overlap = p.options.overlap_p2p_comm = true;
  p.basis = "Megatron-Core r0.8 (2024): interleaving, sequence parallelism, selective recompute, distributed optimizer, "
            "TransformerEngine fused attention; --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap and "
            "overlapped pipeline sends as its README's H100 table lists";
  v.push_back(p);

  p = {};
  p.name = "deepspeed-zero3";
  p.interleaving = false;
  p.sequence_parallel = false;
  p.selective_recompute = false;
  p.partial_recompute = false;
  p.flash_attention = false;
  p.zero_stages = {3};
  p.options.overlap_grad_reduce = true;
  p.options.zero = deepspeed_zero();
  p.basis = "DeepSpeed ZeRO stage 3 (Rajbhandari et al. SC20/SC21, DeepSpeed config docs): overlap_comm on, "
            "stage3_max_live_parameters 1e9, reduce_bucket_size 5e8, per-sub-module gathers, fp16/bf16 gradient "
            "reduction; activation checkpointing full or none";
  v.push_back(p);

  p = {};
  p.name = "fsdp-2022";
  p.interleaving = false;
  p.sequence_parallel = false;
  p.selective_recompute = false;
  p.partial_recompute = false;
  p.flash_attention = false;
  p.zero_stages = {3};
  p.options.overlap_grad_reduce = true;
  p.options.zero = {0, 0, true, 1, 1};
  p.basis = "FairScale/PyTorch FSDP as used for OPT-175B (Zhang et al. 2022, with Megatron tensor parallelism): one "
            "flat parameter per wrapped block, forward and backward prefetch of the next block, gradients "
            "reduce-scattered in fp16 overlapping the backward";
  v.push_back(p);

  p = {};
  p.name = "torchtitan-2024";
  p.interleaving = false;
  p.zero_stages = {3};
  p.options.overlap_grad_reduce = true;
  p.options.zero = {0, 0, false, 1, 1};
  p.basis = "torchtitan (Liang et al. 2024) FSDP2: per-block fully_shard with implicit prefetch of the next block, "
            "bf16 parameters with fp32 gradient reduction (its default mixed-precision policy), PyTorch SDPA "
            "(flash) attention, selective or full activation checkpointing";
  v.push_back(p);
  return v;
}

}  // namespace

const std::vector<FrameworkProfile>& framework_profiles() {
  static const std::vector<FrameworkProfile> v = build();
  return v;
}

const FrameworkProfile& framework_profile(const std::string& name) {
  std::string known;
  for (const FrameworkProfile& p : framework_profiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error(fmt::format("unknown framework profile '{}' (known: {})", name, known));
}

}  // namespace meshtrain::perf

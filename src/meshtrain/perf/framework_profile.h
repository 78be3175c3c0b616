// Framework profiles: what a named training framework release could do, so
// that a published run is predicted as its framework ran it and the knobs
// its authors did not publish are planned only over what that framework
// offered. Each profile states where its facts come from (`basis`).
//
//   tensor_parallel      tensor parallelism at all (TP > 1)
//   pipeline             pipeline parallelism at all (PP > 1)
//   interleaving         interleaved 1F1B (virtual pipeline stages)
//   sequence_parallel    Megatron sequence parallelism
//   sequence_parallel_always  its tensor parallelism always shards the norms
//                        and residuals over the sequence (no TP without SP)
//   selective_recompute  attention-core recompute (else full or none)
//   partial_recompute    full recompute of only some blocks per chunk
//                        (Megatron's --recompute-method block)
//   flash_attention      a fused attention kernel
//   zero_stages          the ZeRO stages it runs (0: plain data parallel)
//   hybrid_shard         ZeRO state sharded over part of the DP group and
//                        replicated across the rest (HSDP)
//   stage_partition      how its pipeline balances layers that do not
//                        divide (parallel/stage_layers.h)
//   hardware_tflops      the TFLOP/s its runs publish count the recomputed
//                        forward (hardware FLOPs): a published TFLOP/s
//                        whose kind is not given is read so
//   recipe_recompute     the recompute every published recipe of it sets,
//                        where they agree: what a published run of it did
//                        when its authors do not say (validate fills a blank
//                        with it; plan still searches every option)
//   recipe_stage_counting  likewise, what its published pipelines count as
//                        layers when they split them (validate fills a blank
//                        stage_counting with it)
//   recipe_flash_attention  likewise, whether a published run of it that
//                        names no attention kernel ran a fused one
//   options              overlaps and the ZeRO runtime (perf_options.h)
//   family               the code base the release belongs to: releases of
//                        one family share their kernels and layer code, so
//                        efficiency data fitted on one of them is the
//                        first fallback for another (validate_cv.h)
//   efficiency_family    where not `family`, the code base whose layers the
//                        release's published runs ran, and so whose
//                        efficiency data it falls back to (a runtime that
//                        wraps a user's model brings no kernels of its own)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/perf_options.h"

namespace meshtrain::perf {

struct FrameworkProfile {
  std::string name;
  std::string family;
  std::string efficiency_family;  // empty: family
  bool tensor_parallel = true;
  bool pipeline = true;
  bool interleaving = true;
  bool sequence_parallel = true;
  bool sequence_parallel_always = false;
  bool selective_recompute = true;
  bool partial_recompute = true;
  bool flash_attention = true;
  bool context_parallel = false;  // Megatron-Core 2024 and torchtitan 2024: ring attention over CP ranks
  std::vector<int> zero_stages{0, 1, 2, 3};
  bool hybrid_shard = false;             // PyTorch FSDP's HYBRID_SHARD (2.0 on), torchtitan's dp_replicate x dp_shard
  int max_zero_stage_with_pipeline = 3;  // DeepSpeed's pipeline engine: 1
  StagePartition stage_partition = StagePartition::even;
  bool hardware_tflops = false;
  std::optional<Recompute> recipe_recompute;
  std::optional<StageCounting> recipe_stage_counting;
  std::optional<bool> recipe_flash_attention;
  PerfOptions options;
  std::string basis;
};

const std::vector<FrameworkProfile>& framework_profiles();

// The profile called `name`; throws Error naming the known ones otherwise.
const FrameworkProfile& framework_profile(const std::string& name);
// The profile called `name`, or nullptr.
const FrameworkProfile* find_framework_profile(const std::string& name);
// The family whose efficiency data `p` falls back to.
const std::string& efficiency_family(const FrameworkProfile& p);

// The profile a published run's free-text framework description names, for
// rows that give no profile: torchtitan or FSDP2 -> torchtitan-2024;
// NeMo -> nemo-2024; Megatron-Core -> megatron-core-2024; Megatron with DeepSpeed (and
// GPT-NeoX) -> megatron-deepspeed-2021, -2022 where it names DeepSpeed's
// BF16_Optimizer or the run is bf16 from March 2022 or a bare 2022
// (`precision` "bf16": the optimizer DeepSpeed then takes), -2023 from 2023 or with
// FlashAttention-2; DeepSpeed alone -> deepspeed-zero3-2021 for 2021 or
// earlier, else deepspeed-zero3; FSDP in a 4D or
// pipelined stack -> megatron-core-2024; Composer / llm-foundry ->
// llm-foundry-2023 (-pure where `precision` names FSDP's PURE mixed
// precision); FSDP, FairScale, metaseq -> fsdp-2022; Megatron-LM -> by year
// (2021 or earlier; 2022, a bare 2023 and "2023-01" to "2023-06":
// megatron-lm-2022; "2023-07" on and 2024 on: megatron-core-2024). The year is the latest
// 2015-2029 written in `framework`, else in `source`, with its month where
// written "YYYY-MM", or the month of an arXiv identifier ("arXiv
// 2104.04473": April 2021). Empty when nothing matches.
std::string infer_profile(const std::string& framework, const std::string& source,
                          const std::string& precision = "");

// The stage partition a layout takes under `f`: f's own (DeepSpeed's
// balanced one for Megatron-DeepSpeed) where the layout gives no first/last
// stage counts and keeps the default even partition; `given` otherwise.
// Whether the embedding and the head count as layers does not matter.
StagePartition partition_under(const FrameworkProfile& f, int first_stage_layers, int last_stage_layers,
                               StagePartition given);

// Why framework `f` could not run layout `p` of a model with `num_layers`
// transformer layers, as one phrase ("" when it could): tensor parallelism,
// pipeline or virtual pipeline stages, sequence parallelism (or TP without it, where its TP always
// shards the sequence), selective or partial recompute, a fused attention
// kernel or a ZeRO stage it does not have; a stage split other than its
// own (Megatron-DeepSpeed balances layers that do not divide and has no
// first/last counts; Megatron-LM refuses a remainder).
std::string unsupported_by(const FrameworkProfile& f, const ParallelConfig& p, int num_layers);

}  // namespace meshtrain::perf

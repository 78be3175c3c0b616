#include "meshtrain/perf/framework_profile.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/text.h"

namespace meshtrain::perf {

namespace {

// What a framework offers, in FrameworkProfile's order.
struct Features {
  bool interleaving, sequence_parallel, selective_recompute, partial_recompute, flash_attention;
};

FrameworkProfile make(std::string name, std::string family, Features f, std::vector<int> zero_stages, PerfOptions o, std::string basis) {
  FrameworkProfile p;
  p.name = std::move(name);
  p.family = std::move(family);
  p.interleaving = f.interleaving;
  p.sequence_parallel = f.sequence_parallel;
  p.selective_recompute = f.selective_recompute;
  p.partial_recompute = f.partial_recompute;
  p.flash_attention = f.flash_attention;
  p.zero_stages = std::move(zero_stages);
  p.options = o;
  p.basis = std::move(basis);
  return p;
}

PerfOptions overlapping(bool grad, bool param, bool tp, bool p2p, ZeroRuntime z = {}) {
  PerfOptions o;
  o.overlap_grad_reduce = grad;
  o.overlap_param_gather = param;
  o.tp_comm_overlap = tp;
  o.overlap_p2p_comm = p2p;
  o.zero = z;
  return o;
}

// DeepSpeed ZeRO-3 defaults (DeepSpeed configuration JSON documentation):
// stage3_max_live_parameters 1e9, reduce_bucket_size 5e8, gradients
// reduced in the fp16/bf16 model dtype; a block gathered per sub-module.
// Under activation checkpointing a sub-module's parameters stay gathered
// from its recompute to its backward when reused within
// stage3_max_reuse_distance (1e9) elements.
ZeroRuntime deepspeed_zero3() {
  ZeroRuntime z{1e9, 5e8, true, 0, 6, false, false, true};
  z.reuse_elements = 1e9;
  return z;
}

// DeepSpeed ZeRO-3 as first released (v0.3.13, March 2021, to the
// coalesced gathers and reduce-scatters of late 2021): stage3.py's
// PartitionedParameterCoordinator and partition_parameters.py. Each
// parameter tensor of 1e5 elements or more (persistence_threshold, fixed)
// is gathered by its own torch.distributed.all_gather into world_size
// views and its gradient reduce-scattered by its own reduce_scatter from
// world_size views; fetch_sub_module waits for the gathers and calls
// torch.cuda.synchronize(), and _allgather_param synchronizes before each
// prefetched gather, so nothing runs beside compute.
ZeroRuntime deepspeed_zero3_2021() {
  ZeroRuntime z = deepspeed_zero3();
  z.persistence_elements = 1e5;
  z.per_tensor_calls = true;
  z.serialized = true;
  z.list_collectives = true;
  return z;
}

// The 2024 Megatron-Core stacks: Megatron-Core r0.8 itself and NeMo 24.x,
// which runs its models.
bool megatron_core_2024(const FrameworkProfile& p) { return p.name == "megatron-core-2024" || p.name == "nemo-2024"; }

// What a family could do beyond its release's Features.
void add_capabilities(FrameworkProfile& p) {
  // No pipeline parallelism: DeepSpeed runs ZeRO-2/3 only without its
  // PipelineEngine (its pipeline documentation: ZeRO-2 and ZeRO-3 are not
  // supported with pipeline parallelism; Megatron-DeepSpeed likewise takes
  // ZeRO-2/3 only at PP 1, see unsupported_by), and FairScale/PyTorch FSDP of
  // 2022 had no pipeline schedule (OPT-175B: FSDP with Megatron TP only).
  // DeepSpeed ZeRO-3 alone wraps a user's PyTorch model, which has no
  // tensor-parallel layers (Megatron's come with Megatron-DeepSpeed).
  if (p.family == "deepspeed" || p.name == "fsdp-2022" || p.family == "llm-foundry") p.pipeline = false;
  if (p.family == "deepspeed" || p.family == "llm-foundry") p.tensor_parallel = false;
  // torchtitan's tensor-parallel plan (apply_tp in parallelize_llama.py,
  // 2024) places SequenceParallel() on attention_norm, ffn_norm and the final
  // norm, the embedding's output sharded on the sequence dimension: Megatron
  // sequence parallelism whenever TP > 1.
  if (p.name == "torchtitan-2024") p.sequence_parallel_always = true;
  // Context parallelism: Megatron-Core's --context-parallel-size (ring
  // attention through TransformerEngine, 2024) and torchtitan's
  // experimental context_parallel (ring attention over DTensor, Liang et
  // al. 2024); the 2021-23 stacks, FSDP and llm-foundry have none.
  p.context_parallel = megatron_core_2024(p) || p.name == "torchtitan-2024" || p.name == "llama3-2024";
  // Hybrid sharding: PyTorch FSDP's ShardingStrategy.HYBRID_SHARD (PyTorch
  // 2.0, 2023: sharded inside a group, replicated across groups), which
  // Composer passes through and torchtitan runs as dp_replicate x dp_shard
  // (FSDP2 over a 2D device mesh). FairScale's 2022 FSDP had none, so a
  // fsdp-2022 row only states it for the runtime's later releases (IBM's
  // fms-fsdp, 2024). Megatron's partial distributed optimizer,
  // Megatron-Core 2024's. DeepSpeed's own ZeRO-3 profiles shard over the
  // whole group; MiCS is their hybrid (deepspeed-mics).
  p.hybrid_shard = p.family == "pytorch-fsdp" || p.family == "llm-foundry" || p.name == "deepspeed-mics";
}

// How a family runs a step. DeepSpeed's engine (Megatron-DeepSpeed's too)
// keeps 16-bit gradients. The 2021-22 Megatron-DeepSpeed stack spends about
// 2 ms per layer pass that the GPU work does not hide
// (PerfOptions::layer_pass_overhead_s). Megatron-DeepSpeed builds a
// DeepSpeed PipelineModule with partition_method 'type:transformer' (or
// '|embedding'): layers that do not divide are balanced with
// partition_balanced, not refused.
void add_runtime(FrameworkProfile& p) {
  if (p.family == "megatron-deepspeed" || p.family == "deepspeed") p.options.model_dtype_gradients = true;
  // NeMo's training configs reduce gradients in bf16 (NeMo-Framework-Launcher
  // conf/training, e.g. nemotron/nemotron_340b.yaml: optim.grad_sync_dtype
  // bf16), which NeMo passes to Megatron-Core's DistributedDataParallelConfig
  // as grad_reduce_in_fp32 = False: the gradient buffer is bf16.
  if (p.name == "nemo-2024") p.options.model_dtype_gradients = true;
  // Megatron-LM's asynchronous column-parallel backward, default since v3.0
  // (2022; the SC21 runs predate it).
  if (p.family == "megatron" && p.name != "megatron-lm-2021") p.options.async_tp_backward = true;
  // Megatron-Core's gradient buckets grow with DP (2024 releases).
  if (megatron_core_2024(p)) p.options.dp_scaled_buckets = true;
  if (p.name == "nemo-2024") p.max_zero_stage_with_pipeline = 1;  // its FSDP runs without a pipeline
  if (p.name == "megatron-deepspeed-2021" || p.name == "megatron-deepspeed-2022")
    p.options.layer_pass_overhead_s = 2e-3;
  if (p.name == "megatron-deepspeed-2022") p.options.bf16_optimizer = true;
  if (p.family == "megatron-deepspeed") {
    p.stage_partition = StagePartition::balanced;
    // Its ZeRO-2/3, DeepSpeed's own, only without pipeline parallelism.
    p.max_zero_stage_with_pipeline = 1;
    p.options.zero = p.name == "megatron-deepspeed-2021" ? deepspeed_zero3_2021() : deepspeed_zero3();
  }
  p.options.whole_logits = true;
  p.options.allocator_retries = true;  // every profile runs on PyTorch
  p.options.loss_bytes_per_logit = p.family == "megatron" || p.family == "megatron-deepspeed" ? 4
                                   : p.family == "llm-foundry"                                ? 2
                                                                                              : 8;
}

// What the runs published with a family show where a row does not say.
void add_published_practice(FrameworkProfile& p) {
  // Megatron-LM before v3.0 and Megatron-DeepSpeed had only full
  // activation checkpointing, and every run published with them that says
  // checkpoints every block (Narayanan et al. 2021, whose eq. 3 counts the
  // recomputed forward; MT-NLG; GPT-NeoX-20B; BLOOM and its prototypes;
  // Dash et al. on Frontier): a run of theirs whose authors do not say is
  // taken to have done the same, not to have dropped it where it fits.
  if (p.name == "megatron-lm-2021" || p.family == "megatron-deepspeed") p.recipe_recompute = Recompute::full;
  // Their published TFLOP/s count the recomputed forward: Narayanan et
  // al.'s eq. 3 (four passes a block under recompute), Megatron-DeepSpeed's
  // throughput_calculator (megatron/utils.py: checkpoint_activations_factor
  // 4, else 3) and DeepSpeed's flops profiler, which counts what runs.
  // Megatron-LM from 2022 logs model FLOPs (its num_floating_point_operations
  // counts three passes), torchtitan and llm-foundry publish MFU.
  p.hardware_tflops = p.name == "megatron-lm-2021" || p.family == "megatron-deepspeed" || p.family == "deepspeed";
  // BigScience's fork with the BF16_Optimizer counts the tied embedding and
  // head as pipeline layers in every run published with it: BLOOM-176B's
  // launch script and the prototypes from 2022-02-28 pass
  // --pp-partition-method 'type:transformer|embedding' (tr11-176B-ml
  // README and chronicles-prequel.md).
  if (p.name == "megatron-deepspeed-2022") p.recipe_stage_counting = StageCounting::embedding_head;
  // DeepSpeed's first ZeRO-3 was published on Megatron's GPT layers
  // (DeepSpeedExamples' Megatron-LM-v1.1.5-ZeRO3, March 2021: the ZeRO-3 GPT
  // of its release and of Narayanan et al.'s comparison), not on the
  // Hugging Face models its later runs wrap.
  if (p.name == "deepspeed-zero3-2021") p.efficiency_family = "megatron-deepspeed";
  // DeepSpeed ZeRO-3 wraps a user's model and brings no attention kernel: a
  // run published with it that names none is taken to have run the model's
  // own, unfused, not planned to the faster fused one.
  if (p.family == "deepspeed") p.recipe_flash_attention = false;
}

std::vector<FrameworkProfile> build() {
  const ZeroRuntime deepspeed = deepspeed_zero3(), deepspeed_2021 = deepspeed_zero3_2021();
  // FSDP keeps fp32 sharded parameters (PyTorch FSDP MixedPrecision docs);
  // FSDP2 copies gathered units out of the all-gather buffer.
  const ZeroRuntime fsdp_fp16{0, 0, true, 1, 1, true, false, true}, fsdp1_fp32{0, 0, false, 1, 1, true, false, true},
      fsdp2_fp32{0, 0, false, 1, 1, true, true, true};
  const PerfOptions none;
  PerfOptions llama3 = overlapping(true, true, true, true);
  llama3.cp_all_gather = true;
  PerfOptions torchtitan = overlapping(true, false, false, false, fsdp2_fp32);
  torchtitan.op_level_selective = true;
  // Families: the runtime that drives a step. Megatron-LM and Megatron-Core
  // (its library since 2023) run Megatron's own pipeline schedules, gradient
  // reduction and optimizer; Megatron-DeepSpeed keeps Megatron's layers but
  // runs DeepSpeed's PipelineEngine and ZeRO optimizer; FairScale/PyTorch
  // FSDP and torchtitan run PyTorch's eager or compiled kernels under FSDP;
  // DeepSpeed ZeRO-3 wraps a user's PyTorch model.
  std::vector<FrameworkProfile> v = {
      make("megatron-lm-2021", "megatron", {true, false, false, false, false}, {0}, none,
           "Megatron-LM as of Narayanan et al. SC21: interleaved 1F1B added there; sequence parallelism, selective "
           "recompute and the block recompute method arrive with Korthikanti et al. 2022 (Megatron-LM v3.0), the "
           "distributed optimizer (--use-distributed-optimizer) in late 2022; no fused attention kernel"),
      make("megatron-lm-2022", "megatron", {true, true, true, true, false}, {0}, none,
           "Megatron-LM v3.0 (Korthikanti et al. 2022): --sequence-parallel, --recompute-granularity selective, "
           "the column-parallel backward's collectives under its GEMMs (asynchronous by default); no "
           "distributed optimizer in the published runs, no flash attention (added 2023)"),
      make("megatron-deepspeed-2021", "megatron-deepspeed", {false, false, false, false, false}, {0, 1, 2, 3}, none,
           "Megatron-DeepSpeed (MT-NLG 530B, BLOOM 176B): DeepSpeed's PipelineEngine runs one 1F1B schedule, no "
           "interleaving; DeepSpeed allows only ZeRO-0/1 with pipeline parallelism (ZeRO-2/3, DeepSpeed's own, "
           "at PP 1); full activation checkpointing; Megatron's 2021 tensor parallelism without sequence "
           "parallelism"),
      make("megatron-deepspeed-2022", "megatron-deepspeed", {false, false, false, false, false}, {0, 1, 2, 3}, none,
           "Megatron-DeepSpeed as BigScience trained BLOOM-176B (bigscience fork, March 2022 on): as "
           "megatron-deepspeed-2021, with bf16 through DeepSpeed's BF16_Optimizer (fp32 gradients of every "
           "parameter beside the 16-bit ones of the last backward, all-reduced in fp32 at the step end)"),
      make("megatron-deepspeed-2023", "megatron-deepspeed", {false, false, false, false, true}, {0, 1, 2, 3}, none,
           "Megatron-DeepSpeed with a FlashAttention-2 port (Dash et al. ISC 2024 on Frontier): as "
           "megatron-deepspeed-2021 plus fused attention"),
      make("megatron-core-2024", "megatron", {true, true, true, true, true}, {0, 1},
           overlapping(true, true, true, true),
           "Megatron-Core r0.8 (2024): interleaving, sequence parallelism, selective recompute, distributed "
           "optimizer (optimizer state sharded, gradients reduce-scattered from a whole buffer: ZeRO-1; no "
           "parameter sharding before Megatron-FSDP, 2025), TransformerEngine fused attention; "
           "--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap and overlapped pipeline sends as its "
           "README's H100 table lists"),
      make("nemo-2024", "megatron", {true, true, true, true, true}, {0, 1, 3}, overlapping(true, true, true, true),
           "NVIDIA NeMo Framework 24.x containers (Megatron-Core models through NeMo's recipes, as NVIDIA's DGX "
           "Cloud benchmarking recipes of 2024 run them): megatron-core-2024's features and overlaps, the "
           "recipes setting TransformerEngine's userbuffer TP overlap (ub_tp_comm_overlap) and overlap_p2p_comm; "
           "its PyTorch FSDP option (model.fsdp: tensor parallelism, no pipeline) as ZeRO-3 at PP 1; "
           "a later software generation than Megatron-Core r0.8's README table, with its own efficiency point"),
      make("llama3-2024", "megatron", {true, true, true, true, true}, {0, 1, 2, 3}, llama3,
           "Meta's 4D-parallel stack that trained Llama 3 (Dubey et al. 2024, Sec. 3.3.2): Megatron-style TP with "
           "sequence parallelism, an interleaved pipeline with uneven first and last stages, FSDP-style sharding of "
           "optimizer state and gradients, flash attention, and context parallelism by all-gathering K and V "
           "(exposed), not a ring; the overlaps of megatron-core-2024"),
      make("deepspeed-zero3", "deepspeed", {false, false, false, false, true}, {3},
           overlapping(true, false, false, false, deepspeed),
           "DeepSpeed ZeRO stage 3 (Rajbhandari et al. SC20/SC21, DeepSpeed config docs): overlap_comm on, "
           "stage3_max_live_parameters 1e9, reduce_bucket_size 5e8, per-sub-module gathers, fp16/bf16 gradient "
           "reduction; activation checkpointing full or none; the wrapped model's attention, fused where the "
           "model calls FlashAttention (2022 on) or PyTorch's SDPA (2.0, 2023), as AMSP's runs did"),
      make("deepspeed-zero3-2021", "deepspeed", {false, false, false, false, false}, {3},
           overlapping(true, false, false, false, deepspeed_2021),
           "DeepSpeed ZeRO stage 3 as first released (v0.3.13, March 2021, until the coalesced collectives of "
           "late 2021; stage3.py, partition_parameters.py): one all-gather per parameter tensor of 1e5 elements "
           "or more (smaller ones persist), one reduce-scatter per parameter gradient, both through c10d's list "
           "form (a copy per rank of the group), and a device synchronize in every fetch, so no collective "
           "hides behind compute; 16-bit gradient reduction; activation checkpointing full or none"),
      make("fsdp-2022", "pytorch-fsdp", {false, false, false, true, false}, {3},
           overlapping(true, false, false, false, fsdp_fp16),
           "FairScale/PyTorch FSDP as used for OPT-175B (Zhang et al. 2022, with Megatron tensor parallelism): one "
           "flat parameter per wrapped block, forward and backward prefetch of the next block, gradients "
           "reduce-scattered in fp16 overlapping the backward; activation checkpointing of any subset of the blocks "
           "(apply_activation_checkpointing's check_fn, as IBM's every-n-th-block scheme uses)"),
      make("llm-foundry-2023", "llm-foundry", {false, false, false, false, true}, {3},
           overlapping(true, false, false, false, fsdp1_fp32),
           "MosaicML llm-foundry on Composer (2023, its MPT benchmark tables): PyTorch FSDP FULL_SHARD, one flat "
           "parameter per MPT block with forward and backward prefetch, mixed_precision DEFAULT (bf16 compute, "
           "fp32 gradient reduction), activation checkpointing of every block or none, flash or Triton attention, "
           "its default loss_fn fused_crossentropy (flash-attn's CrossEntropyLoss); no tensor or pipeline "
           "parallelism"),
      make("torchtitan-2024", "pytorch-fsdp", {false, true, true, true, true}, {3}, torchtitan,
           "torchtitan (Liang et al. 2024) FSDP2: per-block fully_shard with implicit prefetch of the next block, "
           "bf16 parameters with fp32 gradient reduction (its default mixed-precision policy), PyTorch SDPA "
           "(flash) attention, full or selective activation checkpointing; its selective 'op' mode is op-level "
           "(torch.utils.checkpoint policy in torchtitan's parallelize_llama.py, 2024: save the output of every "
           "other aten.mm and of scaled_dot_product_attention, recompute the rest), not Megatron's attention-core "
           "recompute"),
  };
  const auto named = [&v](const char* name) {
    return std::find_if(v.begin(), v.end(), [&](const FrameworkProfile& p) { return p.name == name; });
  };
  // llm-foundry's tables print FSDP's mixed precision: PURE reduces in bf16.
  const auto foundry = named("llm-foundry-2023");
  FrameworkProfile pure = *foundry;
  pure.name += "-pure";
  pure.options.zero = fsdp_fp16;
  pure.basis = "llm-foundry-2023 with FSDP mixed_precision PURE: bf16 gradient reduction (and bf16 buffers)";
  v.insert(foundry + 1, pure);
  // MiCS is DeepSpeed's ZeRO-3 runtime over a partition group.
  FrameworkProfile mics = *named("deepspeed-zero3");
  mics.name = "deepspeed-mics";
  mics.options.zero.replica_reduce_at_boundary = true;
  mics.basis =
      "MiCS (Zhang et al., VLDB 2022: 'MiCS: Near-linear Scaling for Training Gigantic Model on Public "
      "Cloud'): ZeRO-3 sharded inside a partition group (a node or a few) and replicated across the groups, "
      "each gradient shard all-reduced across the replicas at the accumulation boundary; DeepSpeed's "
      "MiCS_Init / MiCS_Optimizer (mics_shard_size, v0.9, 2023) over its ZeRO-3 runtime, and SageMaker's "
      "model parallelism library's sharded data parallelism (2022), which BloombergGPT ran";
  v.insert(named("deepspeed-zero3-2021") + 1, mics);
  for (FrameworkProfile& p : v) {
    add_capabilities(p);
    add_runtime(p);
    add_published_practice(p);
  }
  return v;
}

}  // namespace

const std::vector<FrameworkProfile>& framework_profiles() {
  static const std::vector<FrameworkProfile> v = build();
  return v;
}

const FrameworkProfile* find_framework_profile(const std::string& name) {
  for (const FrameworkProfile& p : framework_profiles())
    if (p.name == name) return &p;
  return nullptr;
}

const std::string& efficiency_family(const FrameworkProfile& p) {
  return p.efficiency_family.empty() ? p.family : p.efficiency_family;
}

const FrameworkProfile& framework_profile(const std::string& name) {
  if (const FrameworkProfile* p = find_framework_profile(name)) return *p;
  std::string known;
  for (const FrameworkProfile& p : framework_profiles()) known += (known.empty() ? "" : ", ") + p.name;
  throw Error(fmt::format("unknown framework profile '{}' (known: {})", name, known));
}

namespace {

// Whether text[k] is a decimal digit (false past the end).
bool digit_at(const std::string& text, size_t k) {
  return k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]));
}

// The date of an arXiv identifier ("arXiv 2104.04473", "arxiv.org/abs/
// 2104.04473": YYMM.NNNNN, the month the paper was first submitted) as
// year * 100 + month, the latest in `text`; 0 for none.
int arxiv_date(const std::string& text) {
  const std::string t = ascii_lower(text);
  auto digit = [&](size_t k) { return digit_at(t, k); };
  int best = 0;
  for (size_t at = t.find("arxiv"); at != std::string::npos; at = t.find("arxiv", at + 1)) {
    size_t i = at + 5;
    while (i < t.size() && i < at + 20 && !digit(i)) ++i;
    size_t n = 0;
    while (digit(i + n)) ++n;
    if (n != 4 || i + 4 >= t.size() || t[i + 4] != '.' || !digit(i + 5) || !digit(i + 8)) continue;
    const int yy = std::stoi(t.substr(i, 2)), mm = std::stoi(t.substr(i + 2, 2));
    if (yy >= 7 && yy <= 29 && mm >= 1 && mm <= 12) best = std::max(best, (2000 + yy) * 100 + mm);
  }
  return best;
}

// The year of a venue written with two digits ("SC21", "NSDI '24",
// "NeurIPS'22", "MLSys 2022" is a four-digit year) as year * 100, the latest
// in `text`; 0 for none.
int venue_date(const std::string& text) {
  static const char* const venues[] = {"sc",    "isc",    "nsdi",    "osdi",    "sosp", "mlsys",   "neurips",
                                       "nips",  "icml",   "iclr",    "ppopp",   "atc",  "eurosys", "hpdc",
                                       "ipdps", "asplos", "isca",    "micro",   "hpca", "kdd",     "acl",
                                       "emnlp", "naacl",  "sigcomm", "cluster", "socc", "ics"};
  const std::string t = ascii_lower(text);
  auto alpha = [&](size_t k) { return k < t.size() && std::isalpha(static_cast<unsigned char>(t[k])); };
  int best = 0;
  for (const char* v : venues) {
    const std::string w = v;
    for (size_t at = t.find(w); at != std::string::npos; at = t.find(w, at + 1)) {
      if ((at > 0 && alpha(at - 1)) || alpha(at + w.size())) continue;
      size_t i = at + w.size();
      if (i < t.size() && t[i] == ' ') ++i;
      if (i < t.size() && t[i] == '\'') ++i;
      if (!digit_at(t, i) || !digit_at(t, i + 1) || digit_at(t, i + 2)) continue;
      const int yy = std::stoi(t.substr(i, 2));
      if (yy >= 15 && yy <= 29) best = std::max(best, (2000 + yy) * 100);
    }
  }
  return best;
}

// The latest date written in `text` as year * 100 + month: a year 2015-2029 as
// four digits of their own, with its month where written "YYYY-MM" (else 0),
// an arXiv identifier's month, or a venue's two-digit year; 0 for none.
int latest_date(const std::string& text) {
  auto digit = [&](size_t k) { return digit_at(text, k); };
  int best = std::max(arxiv_date(text), venue_date(text));
  for (size_t i = 0; i + 4 <= text.size(); ++i) {
    if (text.compare(i, 2, "20") != 0 || !digit(i + 2) || !digit(i + 3) || (i > 0 && digit(i - 1)) || digit(i + 4))
      continue;
    const int y = std::stoi(text.substr(i, 4));
    if (y < 2015 || y > 2029) continue;
    int month = 0;
    if (i + 7 <= text.size() && text[i + 4] == '-' && digit(i + 5) && digit(i + 6) && !digit(i + 7)) {
      const int m = std::stoi(text.substr(i + 5, 2));
      if (m >= 1 && m <= 12) month = m;
    }
    best = std::max(best, y * 100 + month);
  }
  return best;
}

}  // namespace

std::string infer_profile(const std::string& framework, const std::string& source, const std::string& precision) {
  const std::string f = ascii_lower(framework);
  auto has = [&](const char* word) { return f.find(word) != std::string::npos; };
  int date = latest_date(f);
  if (date == 0) date = latest_date(source);
  const int year = date / 100, month = date % 100;
  // ZeRO is DeepSpeed's name for its sharding (FSDP calls it FULL_SHARD).
  const bool zero = has("zero-1") || has("zero-2") || has("zero-3") || has("zero1") || has("zero2") || has("zero3") ||
                    has("zero stage") || has("zero++") || has("zero-infinity") || has("zero-offload");
  const bool deepspeed = has("deepspeed") || (zero && !has("fsdp") && !has("fairscale"));
  // MiCS: DeepSpeed's (mics_shard_size) or SageMaker's sharded data
  // parallelism, AWS's implementation of it.
  if (has_word(f, "mics") || (has("sagemaker") && (has("sharded data parallel") || has("smp"))))
    return "deepspeed-mics";
  if (has("torchtitan") || has("fsdp2")) return "torchtitan-2024";
  if (has("nemo")) return "nemo-2024";
  if (has("megatron-core") || has("megatron core") || has("mcore")) return "megatron-core-2024";
  if ((has("megatron") && deepspeed) || has("neox")) {
    const bool fa2 = has("flashattention-2") || has("flash-attention-2") || has("flash attention 2") || has("fa2");
    if (year >= 2023 || fa2) return "megatron-deepspeed-2023";
    const std::string prec = ascii_lower(precision);
    const bool bf16 = prec.find("bf16") != std::string::npos && prec.find("fp16") == std::string::npos;
    // DeepSpeed's BF16_Optimizer with pipeline parallelism: from March 2022
    // (BigScience's fork); a bare 2022 counts as after it.
    const bool after_march_2022 = year > 2022 || (year == 2022 && (month == 0 || month >= 3));
    const bool bf16_optimizer = has("bf16_optimizer") || has("bf16 optimizer") || (bf16 && after_march_2022);
    return bf16_optimizer ? "megatron-deepspeed-2022" : "megatron-deepspeed-2021";
  }
  if (deepspeed) return year != 0 && year <= 2021 ? "deepspeed-zero3-2021" : "deepspeed-zero3";
  if (has("llm-foundry") || has("composer")) {
    const std::string prec = ascii_lower(precision);
    return prec.find("pure") != std::string::npos ? "llm-foundry-2023-pure" : "llm-foundry-2023";
  }
  const bool fsdp = has("fsdp") || has("fairscale") || has("metaseq");
  // Meta's 4D stack of Llama 3 (its paper, Sec. 3.3.2).
  if (has("meta") && has("4d")) return "llama3-2024";
  // Sharded data parallelism inside a 4D (TP, PP, CP) stack runs Megatron-
  // style pipeline schedules, which the FSDP profiles do not have.
  if (fsdp && (has("4d") || has("pipeline") || has("+ pp"))) return "megatron-core-2024";
  if (fsdp) return "fsdp-2022";
  if (has("megatron")) {
    // Megatron-LM of the first half of 2023 predates the overlapped gradient
    // reduction, parameter gather and TP communication the 2024 profile
    // prices, which came in its second half; a bare 2023 is taken as the
    // earlier software (most of that year's releases).
    const bool late_2023 = year == 2023 && month >= 7;
    if (year >= 2024 || late_2023) return "megatron-core-2024";
    return year >= 2022 ? "megatron-lm-2022" : "megatron-lm-2021";
  }
  return "";
}

StagePartition partition_under(const FrameworkProfile& f, int first_stage_layers, int last_stage_layers,
                               StagePartition given) {
  const bool defaults = first_stage_layers == 0 && last_stage_layers == 0 && given == StagePartition::even;
  return defaults ? f.stage_partition : given;
}

std::string unsupported_by(const FrameworkProfile& f, const ParallelConfig& p, int num_layers) {
  const std::string& n = f.name;
  if (p.tp > 1 && !f.tensor_parallel) return fmt::format("{} has no tensor parallelism", n);
  if (p.pp > 1 && !f.pipeline) return fmt::format("{} has no pipeline parallelism", n);
  if (p.cp > 1 && !f.context_parallel) return fmt::format("{} has no context parallelism", n);
  if (p.vpp > 1 && !f.interleaving) return fmt::format("{} has no interleaved schedule (virtual pipeline stages)", n);
  if (p.sequence_parallel && p.tp > 1 && !f.sequence_parallel) return fmt::format("{} has no sequence parallelism", n);
  if (!p.sequence_parallel && p.tp > 1 && f.sequence_parallel_always)
    return fmt::format("{} always shards the sequence under TP (sequence parallelism on)", n);
  if (p.recompute == Recompute::selective && !f.selective_recompute)
    return fmt::format("{} has no selective recompute (full or none)", n);
  const bool partial = p.recompute == Recompute::full && p.recompute_method == RecomputeMethod::block &&
                       p.recompute_num_layers * p.pp * p.vpp < num_layers;
  if (partial && !f.partial_recompute) return fmt::format("{} recomputes every block or none", n);
  if (p.flash_attention && !f.flash_attention) return fmt::format("{} has no fused (flash) attention kernel", n);
  if (std::find(f.zero_stages.begin(), f.zero_stages.end(), p.zero_stage) == f.zero_stages.end())
    return fmt::format("{} runs ZeRO stage {} only", n, fmt::join(f.zero_stages, " or "));
  if (p.hybrid_shard() && !f.hybrid_shard)
    return fmt::format("{} shards ZeRO state over the whole data-parallel group (no hybrid sharding)", n);
  if (p.pp > 1 && p.zero_stage > f.max_zero_stage_with_pipeline) {
    std::vector<int> allowed(f.max_zero_stage_with_pipeline + 1);
    for (size_t z = 0; z < allowed.size(); ++z) allowed[z] = int(z);
    return fmt::format("{} runs ZeRO stage {} under pipeline parallelism", n, fmt::join(allowed, " or "));
  }
  const bool first_last = p.first_stage_layers > 0 || p.last_stage_layers > 0;
  if (f.stage_partition == StagePartition::balanced && first_last)
    return fmt::format("{} balances the pipeline stages itself (no first/last stage layer counts)", n);
  if (f.stage_partition == StagePartition::even && p.stage_partition == StagePartition::balanced)
    return fmt::format("{} does not balance layers that do not divide over the stages", n);
  return "";
}

}  // namespace meshtrain::perf

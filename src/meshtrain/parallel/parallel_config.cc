#include "meshtrain/parallel/parallel_config.h"

#include <cstdint>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/stage_layers.h"

namespace meshtrain {

std::string_view schedule_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
  }
  return "?";
}
ScheduleKind parse_schedule(std::string_view s) {
  if (s == "gpipe") return ScheduleKind::gpipe;
  if (s == "1f1b") return ScheduleKind::one_f_one_b;
  if (s == "interleaved") return ScheduleKind::interleaved;
  throw Error(fmt::format("unknown pipeline schedule '{}' (gpipe, 1f1b, interleaved)", s));
}
std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}
Recompute parse_recompute(std::string_view s) {
  if (s == "none" || s.empty()) return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  throw Error(fmt::format("unknown recompute granularity '{}' (none, selective, full)", s));
}
std::string_view recompute_method_name(RecomputeMethod m) {
  return m == RecomputeMethod::uniform ? "uniform" : "block";
}
RecomputeMethod parse_recompute_method(std::string_view s) {
  if (s == "uniform") return RecomputeMethod::uniform;
  if (s == "block") return RecomputeMethod::block;
  throw Error(fmt::format("unknown recompute method '{}' (uniform, block)", s));
}

std::string_view stage_counting_name(StageCounting c) {
  return c == StageCounting::transformer ? "transformer" : "embedding-head";
}
StageCounting parse_stage_counting(std::string_view s) {
  if (s == "transformer" || s.empty()) return StageCounting::transformer;
  if (s == "embedding-head") return StageCounting::embedding_head;
  throw Error(fmt::format("unknown pipeline layer counting '{}' (transformer, embedding-head)", s));
}
std::string_view stage_partition_name(StagePartition s) { return s == StagePartition::even ? "even" : "balanced"; }
StagePartition parse_stage_partition(std::string_view s) {
  if (s == "even" || s.empty()) return StagePartition::even;
  if (s == "balanced") return StagePartition::balanced;
  throw Error(fmt::format("unknown pipeline stage partition '{}' (even, balanced)", s));
}

void validate(const ModelConfig& m, const ParallelConfig& p, int world) {
  m.validate();
  check(p.tp > 0, "tensor-model-parallel-size must be positive (got {})", p.tp);
  check(p.pp > 0, "pipeline-model-parallel-size must be positive (got {})", p.pp);
  check(p.dp > 0, "data-parallel size must be positive (got {})", p.dp);
  check(p.cp > 0, "context-parallel size must be positive (got {})", p.cp);
  check(p.vpp > 0, "virtual pipeline chunks must be positive (got {})", p.vpp);
  check(p.micro_batch_size > 0, "micro-batch-size must be positive (got {})", p.micro_batch_size);
  check(p.global_batch_size > 0, "global-batch-size must be positive (got {})", p.global_batch_size);
  check(p.zero_stage >= 0 && p.zero_stage <= 3, "zero-stage must be 0, 1, 2 or 3 (got {})", p.zero_stage);
  check(p.zero_shard >= 0, "data-parallel shard size must be positive (got {})", p.zero_shard);
  if (p.zero_shard > 0) {
    check(p.dp % p.zero_shard == 0, "data-parallel size {} is not divisible by the data-parallel shard size {}", p.dp,
          p.zero_shard);
    check(p.zero_stage >= 1 || p.zero_shard == p.dp,
          "a data-parallel shard size ({} of {} ranks) needs ZeRO stage 1, 2 or 3 (hybrid sharding)", p.zero_shard,
          p.dp);
  }
  // The products below are ints: none may wrap.
  constexpr int64_t kMax = INT32_MAX;
  check(int64_t{p.tp} * p.cp * p.pp * p.dp <= kMax, "tp {} x cp {} x pp {} x dp {} ranks exceed {}", p.tp, p.cp, p.pp,
        p.dp, kMax);
  check(int64_t{p.pp} * p.vpp <= kMax, "pp {} x virtual chunks {} exceed {}", p.pp, p.vpp, kMax);
  check(int64_t{p.micro_batch_size} * p.dp <= kMax, "micro-batch-size {} x data-parallel size {} exceeds {}",
        p.micro_batch_size, p.dp, kMax);
  if (world > 0)
    check(world % (p.tp * p.cp * p.pp) == 0 && world == p.world(),
          "world size {} is not divisible by tensor-model-parallel-size x {}pipeline-model-parallel-size = {}",
          world, p.cp > 1 ? "context-parallel-size x " : "", p.tp * p.cp * p.pp);
  if (p.cp > 1) {
    check(m.seq_length % (2 * p.cp) == 0,
          "seq-length {} is not divisible by 2 x context-parallel-size = {} (two chunks a rank)", m.seq_length,
          2 * p.cp);
    check(p.flash_attention, "context parallelism needs flash attention (use-flash-attn)");
  }
  check(m.num_attention_heads % p.tp == 0, "num-attention-heads {} is not divisible by tensor-model-parallel-size {}",
        m.num_attention_heads, p.tp);
  check(m.kv_heads() % p.tp == 0, "num-kv-heads {} is not divisible by tensor-model-parallel-size {}", m.kv_heads(),
        p.tp);
  check(m.ffn() % p.tp == 0, "ffn-hidden-size {} is not divisible by tensor-model-parallel-size {}", m.ffn(), p.tp);
  check(m.padded_vocab() % p.tp == 0, "padded vocabulary {} is not divisible by tensor-model-parallel-size {}",
        m.padded_vocab(), p.tp);
  stage_layers(m.num_layers, p);  // throws on a split that does not divide
  check(p.global_batch_size % (p.micro_batch_size * p.dp) == 0,
        "global-batch-size {} is not divisible by micro-batch-size x data-parallel size = {}", p.global_batch_size,
        p.micro_batch_size * p.dp);
  if (p.schedule == ScheduleKind::interleaved) {
    check(p.pp > 1, "the interleaved schedule needs pipeline-model-parallel-size > 1");
    check(p.num_micro_batches() % p.pp == 0,
          "micro-batches per step {} is not a multiple of pipeline-model-parallel-size {} (interleaved schedule)",
          p.num_micro_batches(), p.pp);
  } else {
    check(p.vpp == 1, "virtual pipeline chunks need the interleaved schedule");
  }
  if (p.sequence_parallel)
    check(m.seq_length % p.tp == 0, "seq-length {} is not divisible by tensor-model-parallel-size {} (sequence parallel)",
          m.seq_length, p.tp);
  if (p.recompute != Recompute::none && p.recompute == Recompute::full)
    check(p.recompute_num_layers > 0, "recompute-num-layers must be positive (got {})", p.recompute_num_layers);
}

void to_json(nlohmann::json& j, const ParallelConfig& p) {
  j = nlohmann::json{{"tensor_model_parallel_size", p.tp},
                     {"pipeline_model_parallel_size", p.pp},
                     {"data_parallel_size", p.dp},
                     {"context_parallel_size", p.cp},
                     {"virtual_pipeline_chunks", p.vpp},
                     {"first_stage_layers", p.first_stage_layers},
                     {"last_stage_layers", p.last_stage_layers},
                     {"pipeline_layer_counting", stage_counting_name(p.stage_counting)},
                     {"pipeline_stage_partition", stage_partition_name(p.stage_partition)},
                     {"zero_stage", p.zero_stage},
                     {"data_parallel_shard_size", p.shard_size()},
                     {"sequence_parallel", p.sequence_parallel},
                     {"micro_batch_size", p.micro_batch_size},
                     {"global_batch_size", p.global_batch_size},
                     {"num_micro_batches", p.num_micro_batches()},
                     {"pipeline_schedule", schedule_name(p.schedule)},
                     {"recompute_granularity", recompute_name(p.recompute)},
                     {"recompute_method", recompute_method_name(p.recompute_method)},
                     {"recompute_num_layers", p.recompute_num_layers},
                     {"bf16", p.bf16},
                     {"use_flash_attn", p.flash_attention}};
}

void from_json(const nlohmann::json& j, ParallelConfig& p) {
  p = ParallelConfig{};
  p.tp = j.at("tensor_model_parallel_size").get<int>();
  p.pp = j.at("pipeline_model_parallel_size").get<int>();
  p.dp = j.at("data_parallel_size").get<int>();
  p.cp = j.value("context_parallel_size", 1);
  p.vpp = j.value("virtual_pipeline_chunks", 1);
  p.first_stage_layers = j.value("first_stage_layers", 0);
  p.last_stage_layers = j.value("last_stage_layers", 0);
  p.stage_counting = parse_stage_counting(j.value("pipeline_layer_counting", "transformer"));
  p.stage_partition = parse_stage_partition(j.value("pipeline_stage_partition", "even"));
  p.zero_stage = j.value("zero_stage", 0);
  p.zero_shard = j.value("data_parallel_shard_size", 0);
  if (p.zero_shard == p.dp) p.zero_shard = 0;
  p.sequence_parallel = j.value("sequence_parallel", false);
  p.micro_batch_size = j.at("micro_batch_size").get<int>();
  p.global_batch_size = j.at("global_batch_size").get<int>();
  p.schedule = parse_schedule(j.value("pipeline_schedule", "1f1b"));
  p.recompute = parse_recompute(j.value("recompute_granularity", "none"));
  p.recompute_method = parse_recompute_method(j.value("recompute_method", "uniform"));
  p.recompute_num_layers = j.value("recompute_num_layers", 1);
  p.bf16 = j.value("bf16", false);
  p.flash_attention = j.value("use_flash_attn", true);
}

}  // namespace meshtrain

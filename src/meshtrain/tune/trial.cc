#include "meshtrain/tune/trial.h"

#include "meshtrain/tune/planner.h"

namespace meshtrain::tune {

std::string layout_key(const ParallelConfig& p) { return describe(p); }

ParallelConfig config_from_json(const nlohmann::json& j) {
  ParallelConfig p;
  p.tp = j.at("tensor_model_parallel_size").get<int>();
  p.pp = j.at("pipeline_model_parallel_size").get<int>();
  p.dp = j.at("data_parallel_size").get<int>();
  p.vpp = j.value("virtual_pipeline_chunks", 1);
  p.first_stage_layers = j.value("first_stage_layers", 0);
  p.last_stage_layers = j.value("last_stage_layers", 0);
  p.stage_counting = parse_stage_counting(j.value("pipeline_layer_counting", "transformer"));
  p.stage_partition = parse_stage_partition(j.value("pipeline_stage_partition", "even"));
  p.zero_stage = j.value("zero_stage", 0);
  p.sequence_parallel = j.value("sequence_parallel", false);
  p.micro_batch_size = j.at("micro_batch_size").get<int>();
  p.global_batch_size = j.at("global_batch_size").get<int>();
  p.schedule = parse_schedule(j.value("pipeline_schedule", "1f1b"));
  p.recompute = parse_recompute(j.value("recompute_granularity", "none"));
  p.recompute_method = parse_recompute_method(j.value("recompute_method", "uniform"));
  p.recompute_num_layers = j.value("recompute_num_layers", 1);
  p.bf16 = j.value("bf16", false);
  p.flash_attention = j.value("use_flash_attn", true);
  return p;
}

void to_json(nlohmann::json& j, const Trial& t) {
  j = nlohmann::json{{"key", t.key},
                     {"config", t.config},
                     {"status", t.status},
                     {"reason", t.reason},
                     {"tokens_per_s", t.tokens_per_s},
                     {"memory_bytes", t.memory_bytes},
                     {"wall_s", t.wall_s},
                     {"predicted_tokens_per_s", t.predicted_tokens_per_s},
                     {"strategy", t.strategy},
                     {"commit", t.commit}};
}

void from_json(const nlohmann::json& j, Trial& t) {
  t.config = config_from_json(j.at("config"));
  t.key = j.value("key", layout_key(t.config));
  t.status = j.at("status").get<std::string>();
  t.reason = j.value("reason", "");
  t.tokens_per_s = j.value("tokens_per_s", 0.0);
  t.memory_bytes = j.value("memory_bytes", 0.0);
  t.wall_s = j.value("wall_s", 0.0);
  t.predicted_tokens_per_s = j.value("predicted_tokens_per_s", 0.0);
  t.strategy = j.value("strategy", "");
  t.commit = j.value("commit", "");
}

}  // namespace meshtrain::tune

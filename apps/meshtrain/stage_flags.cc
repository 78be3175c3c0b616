#include "stage_flags.h"

#include "meshtrain/core/error.h"

namespace meshtrain::cli {

void add_stage_flags(CLI::App* cmd, StageFlags& f, const std::string& group, bool virtual_stages) {
  cmd->add_option("--decoder-first-pipeline-num-layers", f.first,
                  "Transformer layers of the first pipeline stage (the other stages split the rest evenly)")
      ->group(group);
  cmd->add_option("--decoder-last-pipeline-num-layers", f.last,
                  "Transformer layers of the last pipeline stage (the other stages split the rest evenly)")
      ->group(group);
  cmd->add_option("--pipeline-layer-counting", f.counting,
                  "transformer, or embedding-head: the embedding and the head count as one layer each when the "
                  "layers are split over the (virtual) stages (Megatron-DeepSpeed; Megatron-core's "
                  "--account-for-embedding/loss-in-pipeline-split)")
      ->capture_default_str()->group(group);
  cmd->add_option("--pipeline-stage-partition", f.partition,
                  "even (a remainder is refused, as Megatron-LM), or balanced: DeepSpeed's partition_balanced, "
                  "ceil(items / stages) a stage in order, the last takes the rest (Megatron-DeepSpeed)")
      ->capture_default_str()->group(group);
  cmd->add_option("--pp-partition-method", f.pp_partition_method,
                  "Megatron-DeepSpeed's spelling: 'type:transformer' (balanced, transformer layers counted) or "
                  "'type:transformer|embedding' (balanced, the embedding and the head counted too)")
      ->group(group);
  cmd->add_flag("--account-for-embedding-in-pipeline-split", f.account_embedding,
                "Count the embedding as one layer in the pipeline split (Megatron-core; needs "
                "--account-for-loss-in-pipeline-split: the same as --pipeline-layer-counting embedding-head)")
      ->group(group);
  cmd->add_flag("--account-for-loss-in-pipeline-split", f.account_loss,
                "Count the output layer and loss as one layer in the pipeline split (Megatron-core; needs "
                "--account-for-embedding-in-pipeline-split)")
      ->group(group);
  if (virtual_stages)
    cmd->add_option("--num-virtual-stages-per-pipeline-rank", f.virtual_stages,
                    "Model chunks per pipeline stage; implies the interleaved schedule")
        ->group(group);
}

void apply_stage_flags(const StageFlags& f, bool layers_per_virtual_stage, ParallelConfig& p) {
  check(f.first >= 0 && f.last >= 0, "decoder-first/last-pipeline-num-layers must be positive (got {}, {})", f.first,
        f.last);
  p.first_stage_layers = f.first;
  p.last_stage_layers = f.last;
  p.stage_counting = parse_stage_counting(f.counting);
  check(f.account_embedding == f.account_loss,
        "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split go together: the "
        "engine splits the embedding and the loss together (--pipeline-layer-counting embedding-head)");
  if (f.account_embedding) p.stage_counting = StageCounting::embedding_head;
  p.stage_partition = parse_stage_partition(f.partition);
  if (!f.pp_partition_method.empty()) {
    const std::string& m = f.pp_partition_method;
    check(m == "type:transformer" || m == "type:transformer|embedding",
          "--pp-partition-method '{}' is not 'type:transformer' or 'type:transformer|embedding' (the partitions the "
          "engine runs)", m);
    p.stage_partition = StagePartition::balanced;
    if (m == "type:transformer|embedding") p.stage_counting = StageCounting::embedding_head;
  }
  if (f.virtual_stages) {
    check(!layers_per_virtual_stage,
          "--num-virtual-stages-per-pipeline-rank and --num-layers-per-virtual-pipeline-stage exclude each other");
    check(*f.virtual_stages > 0, "num-virtual-stages-per-pipeline-rank must be positive (got {})", *f.virtual_stages);
    p.vpp = *f.virtual_stages;
    if (p.vpp > 1) p.schedule = ScheduleKind::interleaved;
  }
  check(!(layers_per_virtual_stage && p.uneven_stages()),
        "uneven pipeline stages take --num-virtual-stages-per-pipeline-rank, not "
        "--num-layers-per-virtual-pipeline-stage (as Megatron-LM)");
}

}  // namespace meshtrain::cli

// The launch emitters: the paper's 175B layout on Frontier (Dash et al.:
// TP 4, PP 16, ZeRO-1, micro-batch 1, full recomputation, 1,024 GCDs, global
// batch 5,120; docs/STRATEGIES.md) as a Slurm script and as Megatron-LM
// arguments, checked against text written out by hand.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/tune/launch.h"

namespace meshtrain::tune {
namespace {

LaunchSpec frontier_175b() {
  LaunchSpec s;
  s.model = "175b";
  s.model_config = load_model_config("175b");
  ParallelConfig& p = s.parallel;
  p.tp = 4;
  p.pp = 16;
  p.dp = 16;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 5120;
  p.recompute = Recompute::full;
  p.bf16 = true;
  p.flash_attention = true;
  s.num_gpus = 1024;
  s.devices_per_node = 8;
  return s;
}

TEST(Launch, FrontierSlurmScriptFor175B) {
  const std::string expected =
      "#!/bin/bash\n"
      "#SBATCH --job-name=meshtrain-175b\n"
      "#SBATCH --nodes=128\n"
      "#SBATCH --ntasks-per-node=8\n"
      "#SBATCH --gpus-per-node=8\n"
      "#SBATCH --exclusive\n"
      "# 175b on 1024 GPUs (128 nodes of 8): tp=4 pp=16 vpp=1 dp=16 zero=1 mbs=1 recompute=full sp=off flash=on\n"
      "export OMP_NUM_THREADS=7\n"
      "srun --nodes=128 --ntasks=1024 --ntasks-per-node=8 --cpus-per-task=7 --gpus-per-task=1 --gpu-bind=closest \\\n"
      "  meshtrain train --model 175b --tensor-model-parallel-size 4 --pipeline-model-parallel-size 16 "
      "--zero-stage 1 --micro-batch-size 1 --global-batch-size 5120 --pipeline-schedule 1f1b "
      "--recompute-granularity full --bf16\n";
  EXPECT_EQ(slurm_script(frontier_175b(), "frontier"), expected);
  EXPECT_EQ(emit(frontier_175b(), "slurm-frontier"), expected);
}

TEST(Launch, DgxSlurmScriptBindsNoGcdPairs) {
  const std::string s = emit(frontier_175b(), "slurm-dgx");
  EXPECT_NE(s.find("--cpus-per-task=14 --gpus-per-task=1 \\\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("gpu-bind"), std::string::npos) << s;
}

TEST(Launch, MegatronArgumentsFor175B) {
  const std::string expected =
      "--tensor-model-parallel-size 4 \\\n"
      "--pipeline-model-parallel-size 16 \\\n"
      "--num-layers 96 \\\n"
      "--hidden-size 12288 \\\n"
      "--num-attention-heads 96 \\\n"
      "--ffn-hidden-size 49152 \\\n"
      "--seq-length 2048 \\\n"
      "--max-position-embeddings 2048 \\\n"
      "--micro-batch-size 1 \\\n"
      "--global-batch-size 5120 \\\n"
      "--recompute-granularity full \\\n"
      "--recompute-method uniform \\\n"
      "--recompute-num-layers 1 \\\n"
      "--use-distributed-optimizer \\\n"
      "--bf16 \\\n"
      "--use-flash-attn\n";
  EXPECT_EQ(megatron_args(frontier_175b()), expected);
}

TEST(Launch, MegatronRefusesZeroThree) {
  LaunchSpec s = frontier_175b();
  s.parallel.zero_stage = 3;
  EXPECT_THROW(megatron_args(s), Error);
}

TEST(Launch, InterleavedAndSequenceParallelFlags) {
  LaunchSpec s = frontier_175b();
  s.parallel.vpp = 3;
  s.parallel.pp = 8;
  s.parallel.schedule = ScheduleKind::interleaved;
  s.parallel.sequence_parallel = true;
  s.parallel.recompute = Recompute::selective;
  const std::string m = megatron_args(s);
  EXPECT_NE(m.find("--num-layers-per-virtual-pipeline-stage 4 \\\n"), std::string::npos) << m;
  EXPECT_NE(m.find("--sequence-parallel \\\n"), std::string::npos) << m;
  EXPECT_NE(m.find("--recompute-granularity selective \\\n"), std::string::npos) << m;
  const std::string t = train_command(s);
  EXPECT_NE(t.find("--pipeline-schedule interleaved --recompute-granularity selective "
                   "--num-layers-per-virtual-pipeline-stage 4 --sequence-parallel --bf16"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.rfind("mpirun -np 1024 meshtrain train --model 175b ", 0), 0u) << t;
}

TEST(Launch, EmbeddingHeadOverVirtualStagesIsMegatronCoreAccounting) {
  // 96 layers + embedding + head = 98 items on 7 stages x 2 chunks, 7 each.
  LaunchSpec s = frontier_175b();
  s.parallel.pp = 7;
  s.parallel.dp = 32;
  s.num_gpus = 896;
  s.parallel.stage_counting = StageCounting::embedding_head;
  s.parallel.vpp = 2;
  s.parallel.schedule = ScheduleKind::interleaved;
  const std::string m = megatron_args(s);
  EXPECT_NE(m.find("--account-for-embedding-in-pipeline-split \\\n--account-for-loss-in-pipeline-split \\\n"
                   "--num-virtual-stages-per-pipeline-rank 2 \\\n"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("decoder-first"), std::string::npos) << m;
  const std::string t = train_command(s);
  EXPECT_NE(t.find("--pipeline-layer-counting embedding-head --num-virtual-stages-per-pipeline-rank 2"),
            std::string::npos)
      << t;
  // One chunk per stage: Megatron-LM's first/last counts name the same split.
  s.parallel.vpp = 1;
  s.parallel.pp = 14;
  s.parallel.schedule = ScheduleKind::one_f_one_b;
  EXPECT_NE(megatron_args(s).find("--decoder-first-pipeline-num-layers 6 \\\n--decoder-last-pipeline-num-layers 6"),
            std::string::npos);
}

TEST(Launch, BalancedPartitionIsEvenWhereItDividesAndFirstLastWhereNot) {
  // DeepSpeed's balanced partition of 96 layers on 16 stages is 6 each: the
  // even split, which Megatron-LM takes without first/last counts.
  LaunchSpec s = frontier_175b();
  s.parallel.stage_partition = StagePartition::balanced;
  EXPECT_EQ(megatron_args(s).find("decoder-first"), std::string::npos) << megatron_args(s);
  // 96 on 14 stages: 7 a stage and 5 on the last.
  s.parallel.pp = 14;
  s.parallel.dp = 64;
  s.num_gpus = 3584;
  EXPECT_NE(megatron_args(s).find("--decoder-first-pipeline-num-layers 7 \\\n--decoder-last-pipeline-num-layers 5"),
            std::string::npos)
      << megatron_args(s);
}

TEST(Launch, ShapeFlagsOnlyWhereTheModelDiffersFromItsPreset) {
  LaunchSpec s = frontier_175b();
  s.model_config.seq_length = 4096;
  s.model_config.max_position_embeddings = 4096;
  const std::string t = train_command(s);
  EXPECT_NE(t.find("--model 175b --seq-length 4096 --max-position-embeddings 4096 --tensor"), std::string::npos) << t;
}

// A spec with the ZeRO-3 prefetch off carries --no-zero-prefetch into the
// train line (and so into the Slurm script); without ZeRO-3 it is refused.
TEST(Launch, NoZeroPrefetchIsCarriedIntoTheTrainLine) {
  LaunchSpec s = frontier_175b();
  s.zero_prefetch = false;
  EXPECT_THROW(train_command(s), Error);  // the 175B layout runs ZeRO-1
  s.parallel.zero_stage = 3;
  const std::string t = train_command(s);
  EXPECT_NE(t.find("--zero-stage 3"), std::string::npos) << t;
  EXPECT_NE(t.find(" --no-zero-prefetch"), std::string::npos) << t;
  EXPECT_NE(emit(s, "slurm-frontier").find(" --no-zero-prefetch\n"), std::string::npos);
  s.zero_prefetch = true;
  EXPECT_EQ(train_command(s).find("--no-zero-prefetch"), std::string::npos);
}

TEST(Launch, UnknownKindIsAnError) {
  EXPECT_THROW(emit(frontier_175b(), "pbs"), Error);
  EXPECT_THROW(slurm_script(frontier_175b(), "summit"), Error);
}

}  // namespace
}  // namespace meshtrain::tune

// Uneven pipeline stages (parallel/stage_layers.h): the splits Megatron-LM's
// first/last stage counts and the embedding-head counting (Megatron-DeepSpeed;
// Megatron-core's over virtual stages) make, their refusals, the Layout that places the blocks by them, the
// memory model (the most loaded stage decides fit), the time model (the
// slowest stage sets the pace) and the published-runs reader.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/parallel/stage_layers.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/perf/time_model.h"
#include "meshtrain/tune/planner.h"
#include "meshtrain/tune/search_space.h"
#include "meshtrain/tune/validate.h"

#include "gpt_shape.h"

namespace meshtrain {
namespace {

ParallelConfig pipeline(int pp, int first = 0, int last = 0, StageCounting c = StageCounting::transformer) {
  ParallelConfig p;
  p.pp = pp;
  p.first_stage_layers = first;
  p.last_stage_layers = last;
  p.stage_counting = c;
  p.global_batch_size = 4 * pp;
  return p;
}

std::string error_of(int layers, const ParallelConfig& p) {
  try {
    stage_layers(layers, p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StageLayers, EvenFirstLastAndEmbeddingHeadSplits) {
  EXPECT_EQ(stage_layers(24, pipeline(4)), (std::vector<int>{6, 6, 6, 6}));
  EXPECT_EQ(stage_layers(30, pipeline(4, 6, 6)), (std::vector<int>{6, 9, 9, 6}));
  EXPECT_EQ(stage_layers(31, pipeline(4, 4)), (std::vector<int>{4, 9, 9, 9}));
  EXPECT_EQ(stage_layers(8, pipeline(2, 3)), (std::vector<int>{3, 5}));
  EXPECT_EQ(stage_layers(8, pipeline(2, 0, 3)), (std::vector<int>{5, 3}));
  EXPECT_EQ(stage_layers(8, pipeline(2, 2, 6)), (std::vector<int>{2, 6}));
  // BLOOM-176B (bigscience tr11-176B-ml): 70 layers + embedding + head = 72
  // items on 12 stages, 6 each: embedding + 5, 6 x 10, 5 + head.
  std::vector<int> bloom(12, 6);
  bloom.front() = bloom.back() = 5;
  EXPECT_EQ(stage_layers(70, pipeline(12, 0, 0, StageCounting::embedding_head)), bloom);
  EXPECT_EQ(stage_layers(10, pipeline(4, 0, 0, StageCounting::embedding_head)), (std::vector<int>{2, 3, 3, 2}));
  EXPECT_EQ(stage_layers(8, pipeline(1, 0, 0, StageCounting::embedding_head)), (std::vector<int>{8}));
}

ParallelConfig balanced(int pp, StageCounting c = StageCounting::transformer) {
  ParallelConfig p = pipeline(pp, 0, 0, c);
  p.stage_partition = StagePartition::balanced;
  return p;
}

TEST(StageLayers, BalancedPartitionFillsStagesInOrder) {
  // BLOOM's prototype (chronicles-prequel.md, 'Re-do'): 78 layers on 12
  // stages, "the last stage has 1 block, while the rest have 7".
  std::vector<int> redo(12, 7);
  redo.back() = 1;
  EXPECT_EQ(stage_layers(78, balanced(12)), redo);
  EXPECT_EQ(stage_layers(72, balanced(24)), std::vector<int>(24, 3));  // divides: the even split
  EXPECT_EQ(stage_layers(7, balanced(4)), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(stage_layers(9, balanced(1)), (std::vector<int>{9}));
  // Counting the embedding and the head: 70 + 2 on 12 is BLOOM-176B's split;
  // 78 + 2 = 80 items, 7 a stage: embedding + 6, 7 x 10, 2 + head.
  std::vector<int> bloom(12, 6);
  bloom.front() = bloom.back() = 5;
  EXPECT_EQ(stage_layers(70, balanced(12, StageCounting::embedding_head)), bloom);
  std::vector<int> counted(12, 7);
  counted.front() = 6;
  counted.back() = 2;
  EXPECT_EQ(stage_layers(78, balanced(12, StageCounting::embedding_head)), counted);
  EXPECT_EQ(stage_layers(7, balanced(2, StageCounting::embedding_head)), (std::vector<int>{4, 3}));
  // Refused: a stage left without a layer (9 on 4: 3, 3, 3, 0; 5 + 2 on 4:
  // 2, 2, 2, 1 item, the last only the head), virtual stages, first/last.
  EXPECT_NE(error_of(9, balanced(4)).find("leaves stage 3 no transformer layer (3 a stage from the first)"),
            std::string::npos);
  EXPECT_NE(error_of(5, balanced(4, StageCounting::embedding_head)).find("leaves stage 3 no transformer layer"),
            std::string::npos);
  ParallelConfig v = balanced(2);
  v.vpp = 2;
  EXPECT_NE(error_of(8, v).find("has no virtual stages"), std::string::npos);
  ParallelConfig f = balanced(4);
  f.first_stage_layers = 2;
  EXPECT_NE(error_of(8, f).find("exclude each other"), std::string::npos);
}

TEST(StageLayers, VirtualStagesDivideEachStage) {
  ParallelConfig p = pipeline(4, 4, 4);
  p.vpp = 2;
  p.schedule = ScheduleKind::interleaved;
  const std::vector<int> s = stage_layers(20, p);  // 4, 6, 6, 4: chunks of 2, 3, 3, 2
  EXPECT_EQ(s, (std::vector<int>{4, 6, 6, 4}));
  // Virtual stages c x pp + s in order: 2 3 3 2 | 2 3 3 2.
  const std::vector<int> virt = virtual_stage_layers(20, p);
  EXPECT_EQ(virt, (std::vector<int>{2, 3, 3, 2, 2, 3, 3, 2}));
  const int firsts[] = {0, 2, 5, 8, 10, 12, 15, 18};
  for (int v = 0; v < 8; ++v) EXPECT_EQ(virtual_stage_first_layer(virt, v), firsts[v]) << v;
  p.first_stage_layers = p.last_stage_layers = 3;  // 3 does not divide by 2 chunks
  EXPECT_NE(error_of(22, p).find("are not divisible by the 2 virtual pipeline stages"), std::string::npos);
}

TEST(StageLayers, RefusesWhatDoesNotDivideInOneLine) {
  EXPECT_NE(error_of(70, pipeline(12)).find("num-layers 70 is not divisible by pipeline-model-parallel-size"),
            std::string::npos);
  EXPECT_NE(error_of(31, pipeline(4, 6, 6)).find("leaves 19 layers, not divisible over the other 2"),
            std::string::npos);
  EXPECT_NE(error_of(8, pipeline(2, 3, 3)).find("!= num-layers 8"), std::string::npos);
  EXPECT_NE(error_of(8, pipeline(1, 3)).find("need pipeline-model-parallel-size > 1"), std::string::npos);
  EXPECT_NE(error_of(8, pipeline(4, 0, 0, StageCounting::embedding_head))
                .find("num-layers 8 + 2 (embedding and head counted as layers) is not divisible"),
            std::string::npos);
  EXPECT_NE(error_of(8, pipeline(2, 3, 0, StageCounting::embedding_head)).find("exclude each other"),
            std::string::npos);
  EXPECT_NE(error_of(8, pipeline(4, 6, 0)).find("not divisible over the other 3"), std::string::npos);
  ParallelConfig v = pipeline(2, 0, 0, StageCounting::embedding_head);
  v.vpp = 2;
  EXPECT_NE(error_of(8, v).find("num-layers 8 + 2 (embedding and head counted as layers) is not divisible by "
                                "pipeline-model-parallel-size 2 x virtual pipeline stages 2 = 4"),
            std::string::npos);
  v.vpp = 3;  // 8 layers + 2 on 2 x 3 virtual stages do not divide either
  EXPECT_NE(error_of(8, v).find("= 6"), std::string::npos);
  for (const std::string& e : {error_of(70, pipeline(12)), error_of(31, pipeline(4, 6, 6)), error_of(8, v)})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(StageLayers, LayoutPlacesTheBlocksOfEveryStage) {
  ModelConfig m = load_model_config("tiny");
  m.num_layers = 10;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  const ParallelConfig p = pipeline(4, 0, 0, StageCounting::embedding_head);
  std::vector<int> layers;
  for (int s = 0; s < 4; ++s) {
    const Layout L = Layout::build(m, p, 0, s);
    EXPECT_EQ(L.chunk_layers(0), (std::vector<int>{2, 3, 3, 2})[s]);
    for (int i = 0; i < L.chunk_layers(0); ++i) layers.push_back(L.block(0, i).layer);
    EXPECT_EQ(L.has_embedding(0), s == 0);
    EXPECT_EQ(L.has_head(0), s == 3);
  }
  EXPECT_EQ(layers, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

ParallelConfig interleaved(int pp, int vpp) {
  ParallelConfig p = pipeline(pp, 0, 0, StageCounting::embedding_head);
  p.vpp = vpp;
  p.schedule = ScheduleKind::interleaved;
  return p;
}

TEST(StageLayers, EmbeddingHeadOverVirtualStages) {
  // 6 layers + embedding + head on 2 x 2 virtual stages, 2 items each:
  // embedding + 1 | 2 | 2 | 1 + head.
  EXPECT_EQ(virtual_stage_layers(6, interleaved(2, 2)), (std::vector<int>{1, 2, 2, 1}));
  EXPECT_EQ(stage_layers(6, interleaved(2, 2)), (std::vector<int>{3, 3}));
  // On 2 x 4 one item each: virtual stage 0 the embedding alone, 7 the head alone.
  EXPECT_EQ(virtual_stage_layers(6, interleaved(2, 4)), (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(stage_layers(6, interleaved(2, 4)), (std::vector<int>{3, 3}));
  // Llama 3 405B (arXiv 2407.21783, Sec. 3.3.2): 126 layers on 16 stages of
  // 8 chunks; the first chunk of the first stage holds only the embedding,
  // the last chunk of the last stage only the output layer and the loss.
  const std::vector<int> llama = virtual_stage_layers(126, interleaved(16, 8));
  ASSERT_EQ(llama.size(), 128u);
  EXPECT_EQ(llama.front(), 0);
  EXPECT_EQ(llama.back(), 0);
  for (size_t v = 1; v + 1 < llama.size(); ++v) EXPECT_EQ(llama[v], 1) << v;
  std::vector<int> per_stage(16, 8);
  per_stage.front() = per_stage.back() = 7;
  EXPECT_EQ(stage_layers(126, interleaved(16, 8)), per_stage);
  EXPECT_EQ(virtual_stage_first_layer(llama, 1), 0);
  EXPECT_EQ(virtual_stage_first_layer(llama, 16), 15);  // chunk 1 of stage 0
  EXPECT_EQ(virtual_stage_first_layer(llama, 127), 126);
  // One chunk a stage: Megatron-DeepSpeed's split, as before.
  EXPECT_EQ(virtual_stage_layers(10, pipeline(4, 0, 0, StageCounting::embedding_head)),
            (std::vector<int>{2, 3, 3, 2}));
}

TEST(StageLayers, LayoutHoldsChunksWithoutBlocks) {
  ModelConfig m = load_model_config("tiny");
  m.num_layers = 6;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  const ParallelConfig p = interleaved(2, 4);
  const std::vector<int> virt = virtual_stage_layers(6, p);
  std::vector<std::vector<int>> by_virtual_stage(8);
  for (int s = 0; s < 2; ++s) {
    const Layout L = Layout::build(m, p, 0, s);
    for (int c = 0; c < 4; ++c) {
      const int v = c * 2 + s;
      ASSERT_EQ(L.chunk_layers(c), virt[v]) << v;
      EXPECT_EQ(L.first_layer(c), virtual_stage_first_layer(virt, v)) << v;
      for (int i = 0; i < L.chunk_layers(c); ++i) by_virtual_stage[v].push_back(L.block(c, i).layer);
      EXPECT_EQ(L.has_embedding(c), v == 0);
      EXPECT_EQ(L.has_head(c), v == 7);
    }
    EXPECT_THROW(L.block(s == 0 ? 0 : 3, 0), std::logic_error);  // the embedding's or the head's chunk
  }
  std::vector<int> layers;
  for (const auto& v : by_virtual_stage) layers.insert(layers.end(), v.begin(), v.end());
  EXPECT_EQ(layers, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

perf::SystemSpec big_device() { return perf::load_system_spec("dgx-a100-80gb"); }

ModelConfig gpt(int layers, int hidden, int heads, int seq, int vocab) {
  return testing::gpt_shape(layers, hidden, heads, seq, vocab);
}

TEST(StageLayers, TheMostLoadedStageDecidesMemory) {
  // 4 stages of 1, 7, 7, 1 layers: the middle stage 1 holds the most.
  const ModelConfig m = gpt(16, 1024, 16, 1024, 1000);
  ParallelConfig p = pipeline(4, 1, 1);
  p.bf16 = true;
  perf::PerfCache cache;
  const perf::MemoryEstimate e = perf::estimate_memory(m, p, big_device(), cache);
  EXPECT_EQ(e.worst_stage, 1);
  for (int s = 0; s < 4; ++s)
    EXPECT_LE(perf::stage_memory(m, p, big_device(), s, cache).total(), e.worst.total() + 1) << s;
  // Stage 1 holds 7 blocks' parameters, stage 0 one block's and the (small) embedding's.
  const perf::MemoryBytes first = perf::stage_memory(m, p, big_device(), 0, cache);
  EXPECT_GT(e.worst.parameters, 5 * first.parameters);
}

TEST(StageLayers, TheSlowestStageSetsThePace) {
  // The same model and GPUs: an even split beats 1, 7, 7, 1, and the uneven
  // split's critical stage carries 7 layers.
  const ModelConfig m = gpt(16, 2048, 16, 1024, 1000);
  ParallelConfig even = pipeline(4);
  even.global_batch_size = 32;
  even.bf16 = true;
  ParallelConfig skew = even;
  skew.first_stage_layers = skew.last_stage_layers = 1;
  const perf::Prediction a = perf::predict(m, even, big_device(), 4);
  const perf::Prediction b = perf::predict(m, skew, big_device(), 4);
  EXPECT_GT(b.step_time_s, a.step_time_s * 1.4);  // 7 / 4 layers at the pace-setting stage, less the head
  // The 7-layer stages run 7 blocks per chunk; their work for all
  // micro-batches bounds the step from below.
  perf::PerfCache cache;
  const perf::StepCosts c = perf::step_costs(m, skew, big_device(), {}, cache);
  const perf::ChunkCost& heavy = c.chunk(1, 0);
  EXPECT_GT(heavy.forward_compute_s, 3 * c.chunk(0, 0).forward_compute_s);  // 7 blocks vs 1 and the embedding
  EXPECT_GE(b.step_time_s, skew.num_micro_batches() * (heavy.forward_s() + heavy.backward_s()));
}

TEST(StageLayers, TimeModelPricesEveryChunkByItsOwnLayers) {
  // 6 layers on 2 x 4 virtual stages: stage 0's chunk 0 runs the embedding
  // alone, stage 1's chunk 3 the head alone, the others one block; on 2 x 2
  // the chunks run 1, 2 (stage 0) and 2, 1 (stage 1) blocks.
  const ModelConfig m = gpt(6, 4096, 32, 2048, 1000);
  ParallelConfig four = interleaved(2, 4);
  four.global_batch_size = 8;
  four.bf16 = true;
  ParallelConfig two = four;
  two.vpp = 2;
  perf::PerfCache cache;
  const perf::StepCosts c = perf::step_costs(m, four, big_device(), {}, cache);
  const perf::StepCosts d = perf::step_costs(m, two, big_device(), {}, cache);
  auto fwd = [](const perf::StepCosts& s, int stage, int chunk) { return s.chunk(stage, chunk).forward_compute_s; };
  const double block = fwd(d, 0, 1) - fwd(c, 0, 1);  // two blocks less one
  EXPECT_GT(block, 0);
  EXPECT_LT(fwd(c, 0, 0), fwd(c, 0, 1));  // the embedding alone costs less than a block
  EXPECT_NEAR(fwd(d, 0, 0) - fwd(c, 0, 0), block, 1e-9 * block);  // embedding + 1 block
  EXPECT_NEAR(fwd(d, 1, 1) - fwd(c, 1, 3), block, 1e-9 * block);  // 1 block + head
  EXPECT_NEAR(fwd(c, 1, 0), fwd(c, 0, 1), 1e-9 * block);          // a block alone on either stage
  EXPECT_GT(perf::predict(m, four, big_device(), 2).step_time_s, 0);
  EXPECT_TRUE(perf::estimate_memory(m, four, big_device(), cache).fits());
}

// A search space of one TP and PP, ZeRO-1, micro-batch 1, flash attention
// and the given recompute; the other knobs open.
tune::SearchSpace fixed_space(int tp, int pp, Recompute rc) {
  tune::SearchSpace sp;
  sp.tp = {tp};
  sp.pp = {pp};
  sp.zero_stage = {1};
  sp.micro_batch_size = {1};
  sp.recompute = {rc};
  sp.flash_attention = {true};
  return sp;
}

TEST(StageLayers, SearchSpaceOffersVirtualStagesForEmbeddingHead) {
  // Llama 3 405B's shape: 126 layers + 2 over 16 stages: 1, 2, 4 or 8 chunks.
  ModelConfig m = gpt(126, 16384, 128, 8192, 128256);
  tune::SearchSpace sp = fixed_space(8, 16, Recompute::none);
  sp.sequence_parallel = {true};
  sp.stage_counting = StageCounting::embedding_head;
  std::set<int> vpps;
  for (const ParallelConfig& p : tune::enumerate(m, sp, 8 * 16 * 4, 64, 8)) vpps.insert(p.vpp);
  EXPECT_EQ(vpps, (std::set<int>{1, 2, 4, 8}));
  // The published-runs reader leaves a blank vpp of such a row to that search.
  std::istringstream csv(
      "id,source,system,layers,hidden,heads,kv_heads,ffn,seq_len,vocab,num_gpus,tp,pp,vpp,zero_stage,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,precision,tflops_per_gpu,tflops_kind,stage_counting\n"
      "llama3-shape,test fixture,dgx-a100-80gb,126,16384,128,8,53248,8192,128256,512,8,16,,1,64,1,none,yes,yes,"
      "bf16,100,model,embedding-head\n");
  const tune::RunRows rows = tune::read_runs(tune::read_csv(csv));
  ASSERT_EQ(rows.rows.size(), 1u) << (rows.skipped.empty() ? "" : rows.skipped[0]);
  const tune::RunRow& r = rows.rows[0];
  EXPECT_TRUE(r.space.vpp.empty());
  EXPECT_EQ(r.space.stage_counting, StageCounting::embedding_head);
  vpps.clear();
  for (const ParallelConfig& p : tune::enumerate(r.model, r.space, r.num_gpus, r.global_batch, 8)) vpps.insert(p.vpp);
  EXPECT_EQ(vpps, (std::set<int>{1, 2, 4, 8}));
}

TEST(StageLayers, PlannerEvaluatesAndSearchesSplits) {
  // 70 layers on 12 stages only split with the embedding and the head counted.
  ModelConfig m = gpt(70, 1024, 16, 1024, 50000);
  tune::SearchSpace space = fixed_space(1, 12, Recompute::full);
  space.vpp = {1};
  const tune::Plan even = tune::plan(m, big_device(), 24, 48, space);
  EXPECT_TRUE(even.ranked.empty());
  space.search_stage_splits = true;
  const tune::Plan searched = tune::plan(m, big_device(), 24, 48, space);
  ASSERT_FALSE(searched.ranked.empty());
  EXPECT_EQ(searched.ranked[0].config.stage_counting, StageCounting::embedding_head);
  EXPECT_NE(tune::describe(searched.ranked[0].config).find("stages=embedding-head"), std::string::npos);
}

TEST(StageLayers, MegatronDeepSpeedRowsAreBalancedAndSearched) {
  // The same 78-layer row on 12 stages: Megatron-DeepSpeed balances it
  // (7 x 11 and 1), Megatron-LM refuses it.
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,precision,tflops_per_gpu,tflops_kind,profile\n";
  const std::string layout = ",test fixture,dgx-a100-80gb,78,13824,64,2048,250880,384,4,12,1,2048,2,full,no,no,fp16,150,"
                             "hardware,";
  std::istringstream csv(header + "ds" + layout + "megatron-deepspeed-2021\n" + "lm" + layout + "megatron-lm-2021\n");
  const tune::Validation v = tune::validate_runs(tune::read_csv(csv));
  ASSERT_EQ(v.rows.size(), 1u);
  EXPECT_EQ(v.rows[0].id, "ds");
  EXPECT_EQ(v.rows[0].config.stage_partition, StagePartition::balanced);
  EXPECT_TRUE(v.rows[0].compared);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("num-layers 78 is not divisible"), std::string::npos) << v.skipped[0];
  // A balanced search space offers every PP (12 does not divide 78) and no
  // virtual stages.
  ModelConfig m = gpt(78, 1024, 16, 1024, 50000);
  tune::SearchSpace sp;
  sp.stage_partition = StagePartition::balanced;
  std::set<int> pps, vpps;
  for (const ParallelConfig& p : tune::enumerate(m, sp, 96, 96, 8)) {
    pps.insert(p.pp);
    vpps.insert(p.vpp);
    EXPECT_EQ(p.stage_partition, StagePartition::balanced);
  }
  EXPECT_TRUE(pps.count(12));
  EXPECT_EQ(vpps, (std::set<int>{1}));
}

TEST(StageLayers, PublishedRunsReaderTakesTheSplitColumns) {
  const tune::Validation v =
      tune::validate_runs(tune::read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/uneven-stages-runs.csv"));
  ASSERT_EQ(v.rows.size(), 3u);
  EXPECT_EQ(v.rows[0].id, "bloom-shape-embedding-head");
  EXPECT_EQ(v.rows[0].config.stage_counting, StageCounting::embedding_head);
  EXPECT_EQ(v.rows[0].config.pp, 12);
  EXPECT_TRUE(v.rows[0].compared);
  // 70 layers on 12 stages with no split published: planned, not refused;
  // 70 + 2 = 72 divides, so the embedding and the head counted as layers.
  EXPECT_EQ(v.rows[1].id, "bloom-shape-unstated");
  EXPECT_EQ(v.rows[1].config.stage_counting, StageCounting::embedding_head);
  EXPECT_TRUE(v.rows[1].compared);
  EXPECT_EQ(v.rows[2].id, "first-last");
  EXPECT_EQ(v.rows[2].config.first_stage_layers, 6);
  EXPECT_EQ(v.rows[2].config.last_stage_layers, 6);
  ASSERT_EQ(v.skipped.size(), 2u);
  std::string skipped;
  for (const std::string& line : v.skipped) skipped += line + "\n";
  EXPECT_NE(skipped.find("first-last-not-dividing line 5: num-layers 30 minus"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("leaves 19 layers"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("unknown-counting line 6: unknown pipeline layer counting 'by-parameters'"),
            std::string::npos)
      << skipped;
}

}  // namespace
}  // namespace meshtrain

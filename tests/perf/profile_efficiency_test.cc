// Efficiency data per framework profile (one software generation on one
// system) and what the profiles change: a system file's per-profile entry
// replaces the pooled efficiency and interval for that profile's rows; the
// shrinkage toward the family's and the pooled fit is chosen by leave-one-
// source-out; torchtitan's op-level selective checkpointing is priced as
// what it keeps and recomputes; DeepSpeed keeps 16-bit gradients and
// torchtitan's TP is sequence-parallel.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/model/activations.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/planner.h"
#include "meshtrain/tune/validate.h"
#include "meshtrain/tune/validate_cv.h"

namespace meshtrain {
namespace {

TEST(SystemSpec, ProfileEfficiencyReplacesThePooledDataForThatProfileOnly) {
  nlohmann::json j = perf::load_system_spec("dgx-a100-80gb");
  j["profile_efficiency"] = nlohmann::json::object();  // only the entry below
  j["profile_efficiency"]["megatron-lm-2021"] = {
      {"matmul_efficiency_bf16", {{128, 0.3}, {4096, 0.6}}}, {"flash_attention_efficiency", 0.33},
      {"elementwise_efficiency", 0.45}, {"cv_abs_error", 0.07}};
  const perf::SystemSpec s = j.get<perf::SystemSpec>();
  s.validate();
  const perf::SystemSpec a = s.for_profile("megatron-lm-2021");
  EXPECT_DOUBLE_EQ(a.compute.matmul_efficiency_bf16(4096), 0.6);
  EXPECT_DOUBLE_EQ(a.compute.flash_attention_efficiency, 0.33);
  EXPECT_DOUBLE_EQ(a.memory.elementwise_efficiency, 0.45);
  EXPECT_DOUBLE_EQ(a.prediction_error, 0.07);
  EXPECT_NE(a.prediction_error_basis().find("megatron-lm-2021"), std::string::npos);  // the interval says whose
  EXPECT_TRUE(a.profile_efficiency.empty());
  const perf::SystemSpec b = s.for_profile("fsdp-2022");
  EXPECT_DOUBLE_EQ(b.compute.matmul_efficiency_bf16(4096), s.compute.matmul_efficiency_bf16(4096));
  EXPECT_DOUBLE_EQ(b.prediction_error, s.prediction_error);
  EXPECT_EQ(b.prediction_error_basis(), s.prediction_error_basis());
  EXPECT_DOUBLE_EQ(b.memory.elementwise_efficiency, s.memory.elementwise_efficiency);
  // Written back as read.
  const nlohmann::json again = s;
  EXPECT_DOUBLE_EQ(again["profile_efficiency"]["megatron-lm-2021"]["cv_abs_error"].get<double>(), 0.07);
  EXPECT_DOUBLE_EQ(again["profile_efficiency"]["megatron-lm-2021"]["elementwise_efficiency"].get<double>(), 0.45);
  // An efficiency above 1 is refused.
  j["profile_efficiency"]["megatron-lm-2021"]["flash_attention_efficiency"] = 1.5;
  EXPECT_THROW(j.get<perf::SystemSpec>().validate(), Error);
}

// The efficiencies are the device's and its kernels' (docs/PERFORMANCE-
// MODEL.md, "Fitting the efficiency data"): every file of one efficiency
// group carries the group's fitted point, interval and per-profile entries,
// also a node type no published row names (the H200, the H800), so that none keeps a
// hand-set point the fit has moved away from.
TEST(SystemSpec, EveryFileOfAnEfficiencyGroupCarriesTheGroupsFittedPoint) {
  std::map<std::string, std::vector<perf::SystemSpec>> groups;
  for (const auto& e : std::filesystem::directory_iterator(MESHTRAIN_SOURCE_DIR "/configs/systems")) {
    const perf::SystemSpec s = perf::load_system_spec(e.path().string());
    if (!s.efficiency_group.empty()) groups[s.efficiency_group].push_back(s);
  }
  ASSERT_GE(groups.size(), 2u);
  EXPECT_EQ(groups["gh100-sxm5"].size(), 5u);  // DGX H100, IBM's H100, Grand Teton's, the H200 and H800 nodes
  for (const auto& [group, files] : groups) {
    const perf::SystemSpec& a = files.front();
    for (const perf::SystemSpec& b : files) {
      SCOPED_TRACE(group + ": " + a.name + " and " + b.name);
      EXPECT_EQ(b.compute.matmul_efficiency_bf16.points(), a.compute.matmul_efficiency_bf16.points());
      EXPECT_DOUBLE_EQ(b.compute.flash_attention_efficiency, a.compute.flash_attention_efficiency);
      EXPECT_DOUBLE_EQ(b.memory.elementwise_efficiency, a.memory.elementwise_efficiency);
      EXPECT_DOUBLE_EQ(b.prediction_error, a.prediction_error);
      EXPECT_GT(b.prediction_error, 0);
      ASSERT_EQ(b.profile_efficiency.size(), a.profile_efficiency.size());
      for (const auto& [profile, pa] : a.profile_efficiency) {
        ASSERT_EQ(b.profile_efficiency.count(profile), 1u) << profile;
        const perf::ProfileEfficiency& pb = b.profile_efficiency.at(profile);
        EXPECT_EQ(pb.matmul_efficiency_bf16->points(), pa.matmul_efficiency_bf16->points()) << profile;
        EXPECT_EQ(pb.flash_attention_efficiency, pa.flash_attention_efficiency) << profile;
        EXPECT_EQ(pb.elementwise_efficiency, pa.elementwise_efficiency) << profile;
        EXPECT_DOUBLE_EQ(pb.prediction_error, pa.prediction_error) << profile;
      }
    }
  }
}

const char* kHeader =
    "id,source_key,system,model_name,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,zero_stage,global_batch,"
    "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n";

std::string row(const std::string& id, const std::string& source, const std::string& profile, int tp, int pp,
                double tflops, const std::string& model = "GPT 22B") {
  return fmt::format("{},{},frontier,{},48,6144,48,2048,50688,{},{},{},,0,640,1,full,no,yes,{},hardware,{}\n", id,
                     source, model, 16, tp, pp, tflops, profile);
}

// Two software generations on one system, two sources each: the second
// reports 30% more for the same layouts. One pooled fit misses both by about
// 13%; fitted apart (shrinkage chosen by the held-out error) each source is
// predicted from the other source of its own profile.
TEST(ProfileEfficiency, ShrinkageIsChosenByLeaveOneSourceOut) {
  std::string text = kHeader;
  const char* old_gen = "megatron-deepspeed-2021";
  const char* new_gen = "megatron-deepspeed-2023";
  for (int tp : {1, 2}) {
    text += row(fmt::format("o1-{}", tp), "old1", old_gen, tp, 16 / tp, 60);
    text += row(fmt::format("o2-{}", tp), "old2", old_gen, tp, 16 / tp, 60);
    text += row(fmt::format("n1-{}", tp), "new1", new_gen, tp, 16 / tp, 78);
    text += row(fmt::format("n2-{}", tp), "new2", new_gen, tp, 16 / tp, 78);
  }
  std::istringstream in(text), in_fit(text);
  const tune::CrossValidation cv = tune::cross_validate_by_source(tune::read_runs(tune::read_csv(in)));
  ASSERT_EQ(cv.held_out.all.rows, 8);
  ASSERT_EQ(cv.by_shrinkage.size(), tune::shrinkage_grid().size() * tune::shrinkage_grid().size());
  EXPECT_FALSE(cv.shrinkage.pooled());
  const tune::ShrinkageScore& pooled = cv.by_shrinkage.back();
  ASSERT_TRUE(pooled.shrinkage.pooled());
  EXPECT_GT(pooled.errors.median_abs_error, 0.08);
  EXPECT_LT(cv.held_out.all.median_abs_error, pooled.errors.median_abs_error / 2);
  for (const tune::SourceFold& f : cv.sources) EXPECT_FALSE(f.by_profile.empty()) << f.source;

  const tune::EfficiencyFits fits = tune::fit_efficiency(tune::read_runs(tune::read_csv(in_fit)));
  EXPECT_EQ(fits.shrinkage, cv.shrinkage);
  ASSERT_EQ(fits.systems.size(), 1u);
  const tune::EfficiencyFit& f = fits.systems[0];
  ASSERT_FALSE(f.profiles.empty());
  // The faster generation's point is faster; intervals come from the
  // held-out errors of the profile's own rows (4 rows each).
  EXPECT_GT(f.cv_abs_error, 0);
  for (const auto& [name, p] : f.profiles) {
    EXPECT_EQ(p.rows, 4) << name;
    // Held out, each source is predicted from the other source of its own
    // profile: closer than the pooled fit's ~13%. The interval is from the
    // nested folds, whose inner folds hold out the one other source of the
    // profile and so choose heavier shrinkage (8.8% here).
    EXPECT_GT(p.cv_abs_error, 0) << name;
    EXPECT_LT(p.cv_abs_error, 0.1) << name;
    EXPECT_LT(p.cv_abs_error, 0.8 * pooled.errors.median_abs_error) << name;
  }
}

// A profile with one published run, missed by far more than the group's
// rows are: its interval is that miss, not the group's 80th percentile.
TEST(ProfileEfficiency, AProfileWithOneMissedRowCarriesThatMissAsItsInterval) {
  std::string text = kHeader;
  for (const char* src : {"a", "b", "c"})
    for (int tp : {1, 2}) text += row(fmt::format("{}-{}", src, tp), src, "megatron-deepspeed-2021", tp, 16 / tp, 60);
  text += row("z-1", "z", "deepspeed-zero3", 1, 16, 30);  // half of what the others' rate predicts
  std::istringstream in(text);
  const tune::EfficiencyFits fits = tune::fit_efficiency(tune::read_runs(tune::read_csv(in)));
  ASSERT_EQ(fits.systems.size(), 1u);
  const tune::EfficiencyFit& f = fits.systems[0];
  ASSERT_TRUE(f.profiles.count("deepspeed-zero3"));
  const tune::ProfileFit& z = f.profiles.at("deepspeed-zero3");
  EXPECT_EQ(z.rows, 1);
  EXPECT_GT(z.cv_abs_error, 0.3);
  EXPECT_GT(z.cv_abs_error, 2 * f.cv_abs_error);
}

TEST(ProfileEfficiency, WithOneSourcePerProfileTheFoldFallsBackToThePooledFit) {
  std::string text = kHeader;
  for (int tp : {1, 2}) {
    text += row(fmt::format("a-{}", tp), "a", "megatron-deepspeed-2021", tp, 16 / tp, 60);
    text += row(fmt::format("b-{}", tp), "b", "megatron-deepspeed-2023", tp, 16 / tp, 78);
  }
  std::istringstream in(text);
  const tune::CrossValidation cv = tune::cross_validate_by_source(tune::read_runs(tune::read_csv(in)));
  for (const tune::SourceFold& f : cv.sources) EXPECT_TRUE(f.by_profile.empty()) << f.source;
  // Every shrinkage gives the same held-out errors: the larger weights are kept.
  EXPECT_TRUE(cv.shrinkage.pooled());
}

// Two framework families on one system: the Megatron family's sources
// report 30% more than the FSDP family's for the same layouts. Held out, a
// Megatron release that no other source ran (megatron-lm-2021) takes its
// family's point, fitted on the other Megatron-LM release's rows, not the
// system's pooled point: far closer than one pooled fit.
TEST(ProfileEfficiency, AProfileWithoutRowsTakesItsFamilysPoint) {
  std::string text = kHeader;
  for (int tp : {1, 2}) {
    text += row(fmt::format("a-{}", tp), "a", "megatron-lm-2021", tp, 16 / tp, 78);
    text += row(fmt::format("b-{}", tp), "b", "megatron-lm-2022", tp, 16 / tp, 78);
    text += row(fmt::format("c-{}", tp), "c", "fsdp-2022", tp, 16 / tp, 60);
    text += row(fmt::format("d-{}", tp), "d", "torchtitan-2024", tp, 16 / tp, 60);
  }
  ASSERT_EQ(perf::framework_profile("megatron-lm-2021").family, perf::framework_profile("megatron-lm-2022").family);
  ASSERT_NE(perf::framework_profile("megatron-lm-2021").family, perf::framework_profile("fsdp-2022").family);
  std::istringstream in(text);
  const tune::CrossValidation cv = tune::cross_validate_by_source(tune::read_runs(tune::read_csv(in)));
  ASSERT_FALSE(cv.shrinkage.pooled());
  const tune::ShrinkageScore& pooled = cv.by_shrinkage.back();
  EXPECT_GT(pooled.errors.median_abs_error, 0.08);
  // Within the fit's grid: emax moves in steps of 0.05 near 0.5, 10% apart,
  // so a held-out row can sit up to about 5% from the nearest point, plus
  // the model's own TP 1 against TP 2 ratio where both were published alike,
  // plus the pull of one row-equivalent (the least shrinkage offered)
  // toward the pooled point against the family's two rows.
  for (const tune::SourceFold& f : cv.sources) {
    EXPECT_FALSE(f.by_profile.empty()) << f.source;
    EXPECT_LT(f.errors.max_abs_error, 0.08) << f.source;
    EXPECT_LT(f.errors.max_abs_error, 0.7 * pooled.errors.median_abs_error) << f.source;
  }
}

TEST(Validate, SweepsOfEightOrMoreLayoutsAreRanked) {
  std::string text = kHeader;
  // 8 layouts of one model on one system from one source, reported in the
  // order the model predicts (fewer pipeline stages, less bubble here: all
  // within one node's 16 GPUs), and 7 of another model: too few to rank.
  int n = 0;
  for (int tp : {1, 2, 4, 8})
    for (int pp : {1, 2}) {
      text += row(fmt::format("s{}", n++), "sweep", "", tp, pp, 100 - tp - pp);
      if (n <= 7) text += row(fmt::format("t{}", n), "sweep", "", tp, pp, 60, "GPT 22B other");
    }
  std::istringstream in(text);
  const tune::Validation v = tune::validate_runs(tune::read_csv(in));
  const auto sweeps = tune::sweep_rankings(v);
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].model, "GPT 22B");
  EXPECT_EQ(sweeps[0].layouts, 8);
  EXPECT_GE(sweeps[0].spearman, -1.0);
  EXPECT_LE(sweeps[0].spearman, 1.0);
  // The same figures as a ranking of their own predictions: Spearman 1.
  tune::Validation self = v;
  for (auto& r : self.rows) r.reported = r.predicted;
  EXPECT_DOUBLE_EQ(tune::sweep_rankings(self)[0].spearman, 1.0);
}

TEST(Plan, CandidatesWithinTheIntervalOfTheBestAreCounted) {
  tune::Plan plan;
  for (double tps : {100.0, 95.0, 85.0, 70.0}) {
    tune::Candidate c;
    c.prediction.tokens_per_s = tps;
    plan.ranked.push_back(c);
  }
  EXPECT_EQ(tune::within_error_of_best(plan, 0), 0);
  EXPECT_EQ(tune::within_error_of_best(plan, 0.05), 1);  // 95 x 1.05 >= 100 x 0.95; 85 x 1.05 < 95
  EXPECT_EQ(tune::within_error_of_best(plan, 0.10), 2);  // 85 x 1.1 >= 90; 70 x 1.1 < 90
  EXPECT_EQ(tune::within_error_of_best(plan, 0.20), 3);
}

// torchtitan's op-level selective checkpointing on Llama 2 70B (64 A100,
// FSDP2, micro-batch 1 of 4,096 tokens): it keeps per block the input, q, v,
// w1's and w2's outputs and attention's output, so the published run fits,
// where Megatron's selective recompute (everything but the attention core)
// would not; its recompute (k, output projection, w3 and the element-wise
// ops) costs more than the attention core's but less than the whole block.
TEST(ProfileEfficiency, OpLevelSelectiveCheckpointingKeepsEveryOtherMatmul) {
  const ModelConfig m = load_model_config("llama2-70b");
  ASSERT_TRUE(m.gated_mlp);
  ParallelConfig p;
  p.dp = 64;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  p.global_batch_size = 64;
  p.recompute = Recompute::selective;
  p.flash_attention = true;
  p.bf16 = true;
  const double h = m.hidden_size, kv = double(m.kv_heads()) * m.head_dim(), f = m.ffn(), n = m.seq_length;
  const double expected = n * 2 * (h + h + h + kv + f + h) + double(m.num_attention_heads) * n * 4;
  EXPECT_NEAR(perf::op_level_stash_bytes(m, p), expected, 64 * 8);

  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfOptions megatron = perf::framework_profile("torchtitan-2024").options;
  megatron.op_level_selective = false;
  const perf::PerfOptions titan = perf::framework_profile("torchtitan-2024").options;
  ASSERT_TRUE(titan.op_level_selective);
  perf::PerfCache cache;
  EXPECT_FALSE(perf::estimate_memory(m, p, s, cache, megatron).fits());
  EXPECT_TRUE(perf::estimate_memory(m, p, s, cache, titan).fits());
  const double t_megatron = perf::predict(m, p, s, 64, megatron, &cache).step_time_s;
  const double t_titan = perf::predict(m, p, s, 64, titan, &cache).step_time_s;
  ParallelConfig full = p;
  full.recompute = Recompute::full;
  const double t_full = perf::predict(m, full, s, 64, titan, &cache).step_time_s;
  EXPECT_GT(t_titan, t_megatron);
  EXPECT_LT(t_titan, t_full);
}

// A layout in bf16 with full recompute at micro-batch 1.
ParallelConfig bf16_full_recompute(int tp, int pp, int dp, int zero, int gbs) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.zero_stage = zero;
  p.micro_batch_size = 1;
  p.global_batch_size = gbs;
  p.recompute = Recompute::full;
  p.bf16 = true;
  return p;
}

// Stage 0's memory on a DGX A100 80GB in bf16 with full recompute: as the
// engine runs the layout, and as `profile` runs it.
struct EngineAndProfile {
  perf::MemoryBytes engine, profile;
};
EngineAndProfile stage0_memory(const std::string& model, int tp, int pp, int dp, int zero, int gbs,
                               const std::string& profile) {
  const ParallelConfig p = bf16_full_recompute(tp, pp, dp, zero, gbs);
  const ModelConfig m = load_model_config(model);
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  return {perf::stage_memory(m, p, s, 0, cache, perf::PerfOptions{}),
          perf::stage_memory(m, p, s, 0, cache, perf::framework_profile(profile).options)};
}

// FSDP keeps the fp32 parameters it shards (the optimizer's copy) and casts
// to bf16 when gathering: 16 bytes per element, not the engine's 18.
TEST(ProfileEfficiency, FsdpKeepsFp32ShardsWithoutAMasterCopy) {
  ASSERT_TRUE(perf::framework_profile("torchtitan-2024").options.zero.fp32_sharded_parameters);
  const auto [a, b] = stage0_memory("llama2-13b", 1, 1, 8, 3, 8, "torchtitan-2024");
  EXPECT_DOUBLE_EQ(b.parameters, 2 * a.parameters);
  EXPECT_DOUBLE_EQ(b.gradients, a.gradients);
  EXPECT_NEAR(b.parameters + b.gradients + b.optimizer, (a.parameters + a.gradients + a.optimizer) * 16 / 18,
              1e-6 * a.optimizer);
}

// A framework's loss holds the whole micro-batch's logits: 16-bit logits
// plus 8 bytes per element for PyTorch's cross-entropy over pred.float()
// (torchtitan), 4 for Megatron's vocabulary-parallel one, 2 for llm-foundry's
// fused loss; the engine computes the head in chunks and holds none of it.
TEST(ProfileEfficiency, FrameworkLossesHoldTheWholeLogits) {
  EXPECT_FALSE(perf::PerfOptions{}.whole_logits);
  EXPECT_EQ(perf::framework_profile("torchtitan-2024").options.loss_bytes_per_logit, 8);
  EXPECT_EQ(perf::framework_profile("megatron-lm-2022").options.loss_bytes_per_logit, 4);
  EXPECT_EQ(perf::framework_profile("megatron-deepspeed-2021").options.loss_bytes_per_logit, 4);
  EXPECT_EQ(perf::framework_profile("llm-foundry-2023").options.loss_bytes_per_logit, 2);
  ParallelConfig p = bf16_full_recompute(1, 1, 8, 3, 16);
  p.micro_batch_size = 2;
  p.recompute = Recompute::selective;
  const ModelConfig m = load_model_config("llama3.1-8b");
  const perf::SystemSpec s = perf::load_system_spec("dgx-h100");
  perf::PerfCache cache;
  const perf::PerfOptions titan = perf::framework_profile("torchtitan-2024").options;
  perf::PerfOptions chunked = titan;
  chunked.whole_logits = false;
  const double with = perf::stage_memory(m, p, s, 0, cache, titan).activations;
  const double without = perf::stage_memory(m, p, s, 0, cache, chunked).activations;
  const double cols = double(m.padded_vocab());
  const double whole = 2.0 * m.seq_length * cols * (2 + 8);
  const double chunk = double(head_logits_rows(m, p)) * cols * 2;
  EXPECT_NEAR(with - without, whole - chunk, 1.0);
  EXPECT_GT(with - without, 19 * double(1 << 30));  // Llama 3.1 8B, 2 x 8,192 tokens
}

// Under PyTorch a layout fits when what is live fits: its caching allocator
// frees its cached blocks and retries before it fails, so the fragmentation
// share of the workspace counts in the total (what nvidia-smi shows), not in
// the fit. The engine's fit keeps it.
TEST(ProfileEfficiency, WhatIsLiveMustFitNotWhatTheAllocatorCaches) {
  const ParallelConfig p = bf16_full_recompute(8, 1, 8, 1, 64);
  const ModelConfig m = load_model_config("22b");
  perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  const perf::PerfOptions megatron = perf::framework_profile("megatron-lm-2022").options;
  ASSERT_TRUE(megatron.allocator_retries);
  ASSERT_FALSE(perf::PerfOptions{}.allocator_retries);
  const perf::MemoryBytes b = perf::stage_memory(m, p, s, 0, cache, megatron);
  EXPECT_GT(b.fragmentation, 0);
  EXPECT_DOUBLE_EQ(b.required(), b.total() - b.fragmentation);
  s.memory.hbm_bytes = 0.5 * (b.required() + b.total());  // between the two
  EXPECT_TRUE(perf::estimate_memory(m, p, s, cache, megatron).fits());
  s.memory.hbm_bytes = 0.99 * b.required();
  EXPECT_FALSE(perf::estimate_memory(m, p, s, cache, megatron).fits());
  // The engine keeps the allowance in its fit.
  const perf::MemoryBytes e = perf::stage_memory(m, p, s, 0, cache);
  s.memory.hbm_bytes = 0.5 * (e.required() + e.total());
  EXPECT_FALSE(perf::estimate_memory(m, p, s, cache).fits());
}

// DeepSpeed's engine keeps 16-bit gradients (ZeRO paper: 2 + 2 + 12 bytes
// per element at ZeRO-0): half the engine's fp32 gradients, nothing else.
TEST(ProfileEfficiency, DeepSpeedKeepsSixteenBitGradients) {
  ASSERT_TRUE(perf::framework_profile("megatron-deepspeed-2021").options.model_dtype_gradients);
  ASSERT_FALSE(perf::framework_profile("megatron-lm-2022").options.model_dtype_gradients);
  const auto [a, b] = stage0_memory("22b", 8, 2, 4, 1, 64, "megatron-deepspeed-2021");
  EXPECT_GT(a.gradients, 0);
  EXPECT_DOUBLE_EQ(b.gradients, a.gradients / 2);
  EXPECT_DOUBLE_EQ(b.parameters, a.parameters);
  EXPECT_DOUBLE_EQ(b.optimizer, a.optimizer);
}

// NeMo reduces gradients in bf16 (its training configs' grad_sync_dtype),
// so Megatron-Core's gradient buffer is bf16 under nemo-2024, fp32 under
// Megatron-Core as its README runs it.
TEST(ProfileEfficiency, NemoKeepsBf16Gradients) {
  ASSERT_TRUE(perf::framework_profile("nemo-2024").options.model_dtype_gradients);
  ASSERT_FALSE(perf::framework_profile("megatron-core-2024").options.model_dtype_gradients);
  const auto [a, b] = stage0_memory("22b", 8, 2, 4, 1, 64, "nemo-2024");
  EXPECT_DOUBLE_EQ(b.gradients, a.gradients / 2);
  EXPECT_DOUBLE_EQ(b.optimizer, a.optimizer);
}

// A layout over the capacity by less than the memory model's
// over-prediction is tight (it may fit), not one that fits; beyond it,
// neither.
TEST(ProfileEfficiency, TightIsWithinTheMemoryModelsError) {
  perf::MemoryEstimate e;
  e.capacity = 80;
  e.worst.parameters = 80;
  EXPECT_TRUE(e.fits());
  EXPECT_FALSE(e.tight());
  e.worst.parameters = 80 * (1 + perf::kMemoryOverPrediction / 2);
  EXPECT_FALSE(e.fits());
  EXPECT_TRUE(e.tight());
  e.worst.parameters = 80 * (1 + 2 * perf::kMemoryOverPrediction);
  EXPECT_FALSE(e.fits());
  EXPECT_FALSE(e.tight());
  // Headroom: the model's median under-prediction to spare.
  e.worst.parameters = 80 * (1 - perf::kMemoryUnderPrediction);
  EXPECT_TRUE(e.headroom());
  e.worst.parameters = 80 * (1 - perf::kMemoryUnderPrediction / 2);
  EXPECT_TRUE(e.fits());
  EXPECT_FALSE(e.headroom());
}

// ... and reduces them as they are at the step's end: the ZeRO-1
// reduce-scatter moves 2 bytes per element, not the engine's 4.
TEST(ProfileEfficiency, DeepSpeedReducesSixteenBitGradients) {
  const ParallelConfig p = bf16_full_recompute(8, 2, 4, 1, 64);
  const ModelConfig m = load_model_config("22b");
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  const perf::StepCosts a = perf::step_costs(m, p, s, perf::PerfOptions{}, cache);
  const perf::StepCosts b =
      perf::step_costs(m, p, s, perf::framework_profile("megatron-deepspeed-2021").options, cache);
  const double ga = a.grad_reduce_s[0][0], gb = b.grad_reduce_s[0][0];
  EXPECT_GT(ga, 0);
  EXPECT_LT(gb, 0.6 * ga);  // half the bytes, the same latency
  EXPECT_GT(gb, 0.4 * ga);
  EXPECT_DOUBLE_EQ(b.param_gather_s[0], a.param_gather_s[0]);  // bf16 parameters either way
}

// DeepSpeed's BF16_Optimizer (megatron-deepspeed-2022, BLOOM): fp32
// gradients of every parameter, all-reduced in fp32 at the step end, where
// the engine takes it (16-bit, ZeRO 0, or ZeRO 1 with pipeline parallelism).
TEST(ProfileEfficiency, Bf16OptimizerAllReducesFp32Gradients) {
  const perf::PerfOptions& bloom = perf::framework_profile("megatron-deepspeed-2022").options;
  const perf::PerfOptions& mtnlg = perf::framework_profile("megatron-deepspeed-2021").options;
  ASSERT_TRUE(bloom.bf16_optimizer);
  ASSERT_FALSE(mtnlg.bf16_optimizer);
  EXPECT_FALSE(perf::framework_profile("megatron-deepspeed-2023").options.bf16_optimizer);
  EXPECT_EQ(bloom.layer_pass_overhead_s, mtnlg.layer_pass_overhead_s);
  ParallelConfig p = bf16_full_recompute(8, 2, 4, 1, 64);
  EXPECT_TRUE(perf::fp32_gradient_allreduce(bloom, p));
  EXPECT_FALSE(perf::fp32_gradient_allreduce(mtnlg, p));
  ParallelConfig q = p;
  q.pp = 1;
  q.dp = 8;
  EXPECT_FALSE(perf::fp32_gradient_allreduce(bloom, q));  // ZeRO-1 without PP: DeepSpeed's ZeRO optimizer
  q.zero_stage = 0;
  EXPECT_TRUE(perf::fp32_gradient_allreduce(bloom, q));
  q.zero_stage = 2;
  EXPECT_FALSE(perf::fp32_gradient_allreduce(bloom, q));
  q = p;
  q.bf16 = false;
  EXPECT_FALSE(perf::fp32_gradient_allreduce(bloom, q));
  // Time: an all-reduce of 4 bytes an element against a reduce-scatter of
  // 2 (about 4x the bytes on the wire); the parameter all-gather is the same.
  const ModelConfig m = load_model_config("22b");
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  const perf::StepCosts a = perf::step_costs(m, p, s, mtnlg, cache), b = perf::step_costs(m, p, s, bloom, cache);
  EXPECT_GT(b.grad_reduce_s[0][0], 3 * a.grad_reduce_s[0][0]);
  EXPECT_LT(b.grad_reduce_s[0][0], 5 * a.grad_reduce_s[0][0]);
  EXPECT_DOUBLE_EQ(b.param_gather_s[0], a.param_gather_s[0]);
  // Bytes sent: 2 x 4 + 2 against 2 + 2 an element (times (dp - 1) / dp).
  EXPECT_NEAR(b.dp_bytes[0] / a.dp_bytes[0], 2.5, 0.01);
  // Memory: fp32 gradients (the engine's) and the 16-bit ones of the last
  // backward, three times DeepSpeed's 16-bit gradients alone.
  const auto [engine, deepspeed] = stage0_memory("22b", 8, 2, 4, 1, 64, "megatron-deepspeed-2021");
  const auto [engine2, bf16opt] = stage0_memory("22b", 8, 2, 4, 1, 64, "megatron-deepspeed-2022");
  EXPECT_DOUBLE_EQ(bf16opt.gradients, 3 * deepspeed.gradients);
  EXPECT_DOUBLE_EQ(bf16opt.gradients, 1.5 * engine2.gradients);
  EXPECT_DOUBLE_EQ(bf16opt.optimizer, deepspeed.optimizer);
}

// Megatron-Core's gradient buckets hold max(40M, 1M x DP) elements: at DP
// 256 a bucket is 6.4 times Megatron-LM's constant 40M, so the last bucket,
// reduced after the backward, is 6.4 times the share of the gradients, and
// the fewer calls pay less ring latency than 40M buckets do.
TEST(ProfileEfficiency, MegatronCoreBucketsGrowWithDataParallelism) {
  const perf::PerfOptions& core = perf::framework_profile("megatron-core-2024").options;
  ASSERT_TRUE(core.dp_scaled_buckets && core.overlap_grad_reduce);
  EXPECT_TRUE(perf::framework_profile("nemo-2024").options.dp_scaled_buckets);
  EXPECT_FALSE(perf::framework_profile("megatron-lm-2022").options.dp_scaled_buckets);
  perf::PerfOptions constant = core;
  constant.dp_scaled_buckets = false;
  const ModelConfig m = load_model_config("22b");  // 2.7e9 parameters a rank at TP 8
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  const ParallelConfig small = bf16_full_recompute(8, 1, 32, 1, 32), large = bf16_full_recompute(8, 1, 256, 1, 256);
  const perf::StepCosts a = perf::step_costs(m, small, s, core, cache), b = perf::step_costs(m, large, s, core, cache);
  // (the flat buffers are padded to a multiple of DP: 1e-3 of difference)
  EXPECT_NEAR(b.bucket_fraction[0] / a.bucket_fraction[0], 6.4, 6.4e-3);
  const perf::StepCosts c = perf::step_costs(m, large, s, constant, cache);
  EXPECT_NEAR(c.bucket_fraction[0] / a.bucket_fraction[0], 1.0, 1e-3);
  EXPECT_LT(b.grad_reduce_s[0][0], c.grad_reduce_s[0][0]);
  EXPECT_LT(b.param_gather_s[0], c.param_gather_s[0]);
}

// Megatron-DeepSpeed 2021 pays a host cost per layer pass: a chunk of L
// fully recomputed layers costs L passes more forward and 2 L more backward
// (recompute and backward) per micro-batch, nothing else changes.
TEST(ProfileEfficiency, MegatronDeepSpeedPaysPerLayerPass) {
  const perf::PerfOptions& ds = perf::framework_profile("megatron-deepspeed-2021").options;
  ASSERT_GT(ds.layer_pass_overhead_s, 0);
  EXPECT_EQ(perf::framework_profile("megatron-deepspeed-2023").options.layer_pass_overhead_s, 0);
  EXPECT_EQ(perf::framework_profile("megatron-lm-2021").options.layer_pass_overhead_s, 0);
  const ParallelConfig p = bf16_full_recompute(8, 4, 1, 0, 8);
  const ModelConfig m = load_model_config("22b");  // 48 layers: 12 a stage
  const perf::SystemSpec s = perf::load_system_spec("dgx-a100-80gb");
  perf::PerfCache cache;
  perf::PerfOptions plain = ds;
  plain.layer_pass_overhead_s = 0;
  const perf::StepCosts a = perf::step_costs(m, p, s, plain, cache), b = perf::step_costs(m, p, s, ds, cache);
  const double x = ds.layer_pass_overhead_s;
  EXPECT_NEAR(b.chunks[1].forward_compute_s - a.chunks[1].forward_compute_s, 12 * x, 1e-12);
  EXPECT_NEAR(b.chunks[1].backward_compute_s - a.chunks[1].backward_compute_s, 24 * x, 1e-12);
  EXPECT_DOUBLE_EQ(b.chunks[1].forward_tp_s, a.chunks[1].forward_tp_s);
}

// A row without a profile takes the one its framework text names, by the
// rules of perf::infer_profile; nothing when the text names none.
TEST(ProfileEfficiency, BlankProfileIsInferredFromTheFramework) {
  using perf::infer_profile;
  EXPECT_EQ(infer_profile("torchtitan (FSDP2, eager)", ""), "torchtitan-2024");
  EXPECT_EQ(infer_profile("NVIDIA NeMo 24.05", ""), "nemo-2024");
  EXPECT_EQ(infer_profile("Megatron-Core r0.8.0", ""), "megatron-core-2024");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed (bigscience fork, 2022-02)", ""), "megatron-deepspeed-2021");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed (ROCm 5.7, FlashAttention-2 port)", ""), "megatron-deepspeed-2023");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed (bigscience fork) + DeepSpeed BF16_Optimizer (ZeRO-1)", ""),
            "megatron-deepspeed-2022");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed", "BigScience 2022", "bf16"), "megatron-deepspeed-2022");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed", "BigScience 2022", "fp16"), "megatron-deepspeed-2021");
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed (2021)", "", "bf16"), "megatron-deepspeed-2021");
  // MT-NLG's paper (arXiv of January 2022) trained in bf16 before the optimizer came.
  EXPECT_EQ(infer_profile("Megatron-DeepSpeed", "Smith et al. (arXiv 2201.11990)", "bf16"), "megatron-deepspeed-2021");
  EXPECT_EQ(infer_profile("GPT-NeoX", "Black et al. 2022"), "megatron-deepspeed-2021");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", ""), "deepspeed-zero3");
  // MiCS, DeepSpeed's or SageMaker's (its sharded data parallelism), is
  // named as a word: "dynamics" is not it.
  EXPECT_EQ(infer_profile("DeepSpeed-MiCS (ZeRO-3 sharded within 8-GPU groups)", ""), "deepspeed-mics");
  EXPECT_EQ(infer_profile("Amazon SageMaker model parallelism (SMP), sharded data parallelism", "2023"),
            "deepspeed-mics");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3 (fluid dynamics code)", ""), "deepspeed-zero3");
  // An arXiv identifier dates its paper (YYMM): Narayanan et al.'s ZeRO-3
  // comparison ran DeepSpeed's 2021 release.
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "Narayanan et al. SC21 (arXiv 2104.04473)"), "deepspeed-zero3-2021");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "arxiv.org/abs/2306.10209"), "deepspeed-zero3");
  EXPECT_EQ(infer_profile("Megatron-LM", "arXiv:2205.05198"), "megatron-lm-2022");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "arXiv 2104"), "deepspeed-zero3");  // no identifier
  // A venue with a two-digit year dates its paper too.
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "Narayanan et al., SC21"), "deepspeed-zero3-2021");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "a talk at NeurIPS '20"), "deepspeed-zero3-2021");
  EXPECT_EQ(infer_profile("Megatron-LM", "Jiang et al., NSDI'24"), "megatron-core-2024");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "SC2021 poster"), "deepspeed-zero3-2021");  // four digits
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "SC 121"), "deepspeed-zero3");
  // ZeRO names DeepSpeed's sharding; "Zero Bubble" is a pipeline schedule.
  EXPECT_EQ(infer_profile("ZeRO-3 (no model parallelism)", "Narayanan et al., SC21"), "deepspeed-zero3-2021");
  EXPECT_EQ(infer_profile("Megatron + ZeRO-1", "2021"), "megatron-deepspeed-2021");
  EXPECT_EQ(infer_profile("Megatron-LM, Zero Bubble schedule", "2024"), "megatron-core-2024");
  EXPECT_EQ(infer_profile("FSDP (ZeRO-3)", ""), "fsdp-2022");
  EXPECT_EQ(infer_profile("DeepSpeed ZeRO-3", "DiSC21 cluster"), "deepspeed-zero3");  // not a word
  EXPECT_EQ(infer_profile("llm-foundry / Composer (PyTorch FSDP FULL_SHARD)", ""), "llm-foundry-2023");
  EXPECT_EQ(infer_profile("llm-foundry / Composer (PyTorch FSDP FULL_SHARD)", "", "bf16 (FSDP mixed_precision PURE)"),
            "llm-foundry-2023-pure");
  EXPECT_EQ(infer_profile("Meta internal 4D parallelism (FSDP + TP + PP + CP)", ""), "llama3-2024");
  EXPECT_EQ(infer_profile("FSDP + TP + PP (4D)", ""), "megatron-core-2024");
  EXPECT_EQ(infer_profile("Megatron-LM", "Narayanan et al., SC 2021"), "megatron-lm-2021");
  EXPECT_EQ(infer_profile("Megatron-LM", "Korthikanti et al. 2022, arXiv 2205.05198"), "megatron-lm-2022");
  EXPECT_EQ(infer_profile("Megatron-LM (2024 release)", "Narayanan et al. 2021"), "megatron-core-2024");
  // MegaScale's baseline: a Megatron-LM commit of January 2023 runs 2022's
  // features, as does a bare 2023; the second half of 2023 and later, the
  // 2024 ones.
  EXPECT_EQ(infer_profile("Megatron-LM (commit 285068c8, 2023-01)", "Jiang et al. 2024"), "megatron-lm-2022");
  EXPECT_EQ(infer_profile("Megatron-LM (2023-09)", ""), "megatron-core-2024");
  EXPECT_EQ(infer_profile("Megatron-LM", "a 2023 report"), "megatron-lm-2022");
  EXPECT_EQ(infer_profile("Megatron-LM", "a 2024 report"), "megatron-core-2024");
  EXPECT_EQ(infer_profile("Megatron-LM (2023-13)", ""), "megatron-lm-2022");  // not a month: a bare 2023
  EXPECT_EQ(infer_profile("JAX / MaxText", "2024"), "");
  // In a CSV: the blank profile column is filled, and says so.
  std::string text = kHeader;
  text += "a,s,dgx-a100-80gb,GPT 22B,48,6144,48,2048,50688,16,8,1,2,1,64,1,full,,no,60,hardware,\n";
  std::istringstream in(text);
  tune::CsvTable table = tune::read_csv(in);
  table.header.push_back("framework");
  for (auto& row : table.rows) row.push_back("Megatron-DeepSpeed (2021)");
  const tune::RunRows runs = tune::read_runs(table);
  ASSERT_EQ(runs.rows.size(), 1u);
  EXPECT_EQ(runs.rows[0].profile, "megatron-deepspeed-2021");
  EXPECT_TRUE(runs.rows[0].profile_inferred);
  EXPECT_TRUE(runs.rows[0].options.model_dtype_gradients);
  // A profile name this build does not know is read as framework text;
  // one that names nothing is refused with the known names.
  auto profile_of = [&](const std::string& profile, const std::string& framework = "") {
    tune::CsvTable u = table;
    for (size_t c = 0; c < u.header.size(); ++c) {
      if (u.header[c] == "profile") u.rows[0][c] = profile;
      if (u.header[c] == "framework") u.rows[0][c] = framework;
    }
    return tune::read_runs(u);
  };
  EXPECT_EQ(profile_of("nemo-24").rows.at(0).profile, "nemo-2024");
  EXPECT_EQ(profile_of("deepspeed-zero3-2022").rows.at(0).profile, "deepspeed-zero3");
  EXPECT_EQ(profile_of("maxtext-2024", "torchtitan").rows.at(0).profile, "torchtitan-2024");
  const tune::RunRows bad = profile_of("maxtext-2024");
  ASSERT_EQ(bad.rows.size(), 0u);
  ASSERT_EQ(bad.skipped.size(), 1u);
  EXPECT_NE(bad.skipped[0].find("unknown framework profile 'maxtext-2024'"), std::string::npos);
}

// torchtitan's tensor parallelism always runs the norms sequence-parallel:
// a row with TP and a blank seq_parallel is planned with SP only.
TEST(ProfileEfficiency, TorchtitanTensorParallelismIsSequenceParallel) {
  ASSERT_TRUE(perf::framework_profile("torchtitan-2024").sequence_parallel_always);
  std::string text = kHeader;
  text += "tt,s,frontier,GPT 22B,48,6144,48,2048,50688,16,8,1,2,3,64,1,full,,yes,60,hardware,torchtitan-2024\n";
  text += "mc,s,frontier,GPT 22B,48,6144,48,2048,50688,16,8,1,2,3,64,1,full,,yes,60,hardware,megatron-core-2024\n";
  std::istringstream in(text);
  const tune::RunRows runs = tune::read_runs(tune::read_csv(in));
  ASSERT_EQ(runs.rows.size(), 2u);
  EXPECT_EQ(runs.rows[0].space.sequence_parallel, std::vector<bool>{true});
  EXPECT_TRUE(runs.rows[1].space.sequence_parallel.empty());  // searched: both
}

}  // namespace
}  // namespace meshtrain

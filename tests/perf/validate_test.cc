// Validation of published runs: malformed input is listed rather than
// crashing or silently dropped, repeated runs are predicted once, and the
// leave-one-source-out refit predicts each source only with data fitted on
// the others.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/perf/system_match.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/validate.h"
#include "meshtrain/tune/validate_cv.h"

namespace meshtrain::tune {
namespace {

const char* kHeader =
    "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,zero_stage,global_batch,micro_batch,"
    "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind\n";

// A fully specified Frontier row (no knob planned).
std::string row(const std::string& id, const std::string& source, const std::string& tp = "1",
                const std::string& pp = "8", const std::string& tflops = "73.5", int gpus = 16) {
  return id + "," + source + ",frontier,48,6144,48,2048,50688," + std::to_string(gpus) + "," + tp + "," + pp +
         ",,0,640,1,full,no,yes," + tflops + ",hardware\n";
}

TEST(Csv, ByteOrderMarkIsNotPartOfTheFirstColumn) {
  std::istringstream in("\xEF\xBB\xBFid,name\na,b\n");
  const CsvTable t = read_csv(in);
  ASSERT_EQ(t.header.size(), 2u);
  EXPECT_EQ(t.header[0], "id");
  EXPECT_EQ(t.field(0, "id"), "a");
  std::istringstream in_ok("id,name\na,b\n");
  EXPECT_EQ(read_csv(in_ok).header[0], "id");
}

// Header names are matched as columns are asked for, whatever their case,
// surrounding spaces or word separators; a table written so compares every
// row it would with the names as the set spells them.
TEST(Csv, HeaderNamesAreReadInTheColumnsSpelling) {
  std::istringstream in(" ID ,Num GPUs,seq-len,TFLOPS_per_GPU,x  y\na,8,2048,150,z\n");
  const CsvTable t = read_csv(in);
  EXPECT_EQ(t.header, (std::vector<std::string>{"id", "num_gpus", "seq_len", "tflops_per_gpu", "x_y"}));
  EXPECT_EQ(t.field(0, "num_gpus"), "8");
  EXPECT_EQ(t.field(0, "seq_len"), "2048");
  std::istringstream spelled(std::string(kHeader) + row("a", "s"));
  std::string shouted = kHeader;
  for (char& ch : shouted) ch = ch == '_' ? ' ' : char(std::toupper(static_cast<unsigned char>(ch)));
  std::istringstream loud(shouted + row("a", "s"));
  const Validation plain = validate_runs(read_csv(spelled)), upper = validate_runs(read_csv(loud));
  ASSERT_EQ(plain.rows.size(), 1u);
  ASSERT_EQ(upper.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(upper.rows[0].prediction.tokens_per_s, plain.rows[0].prediction.tokens_per_s);
  // A column every run needs, missing from the header: one error, not one
  // per row.
  std::istringstream none("id,source,system,hidden,heads,seq_len,num_gpus\na,s,frontier,6144,48,2048,16\n");
  try {
    validate_runs(read_csv(none));
    ADD_FAILURE() << "a header without layers was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the header has no column layers"), std::string::npos) << e.what();
  }
}

TEST(Validate, ZeroTensorOrPipelineSizeIsMalformedNotADivisionByZero) {
  std::istringstream in(std::string(kHeader) + row("tp0", "s", "0") + row("pp0", "s", "1", "0") +
                        row("neg", "s", "-2") + row("ok", "s"));
  const Validation v = validate_runs(read_csv(in));
  ASSERT_EQ(v.rows.size(), 1u);
  EXPECT_EQ(v.rows[0].id, "ok");
  ASSERT_EQ(v.skipped.size(), 3u);
  EXPECT_NE(v.skipped[0].find("tp0"), std::string::npos);
  EXPECT_NE(v.skipped[0].find("column tp"), std::string::npos);
  EXPECT_NE(v.skipped[1].find("column pp"), std::string::npos);
  EXPECT_NE(v.skipped[2].find("neg"), std::string::npos);
}

TEST(Validate, NothingComparedWhenNoRowHasAFigure) {
  std::istringstream in(std::string(kHeader) + row("a", "s", "1", "8", ""));
  const Validation v = validate_runs(read_csv(in));
  ASSERT_EQ(v.rows.size(), 1u);
  EXPECT_FALSE(v.rows[0].compared);
  EXPECT_EQ(v.all.rows, 0);
}

// 100,000 rows, a few distinct runs among them: one plan per distinct run.
TEST(Validate, ManyRowsOfFewRunsTakeWellUnderAMinute) {
  std::string text = kHeader;
  const char* tps[] = {"1", "2", "4", "8"};
  for (int i = 0; i < 100000; ++i) {
    std::string id = "r";
    id += std::to_string(i);
    text += row(id, "s", tps[i % 4], "2", std::to_string(70 + i % 7));
  }
  std::istringstream in(text);
  const auto t0 = std::chrono::steady_clock::now();
  const Validation v = validate_runs(read_csv(in));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(v.all.rows, 100000);
  EXPECT_TRUE(v.skipped.empty());
  EXPECT_LT(s, 60.0);
  // Rows of one run share the prediction; their errors differ by the reported figure.
  EXPECT_EQ(v.rows[0].predicted, v.rows[4].predicted);
  EXPECT_NE(v.rows[0].error, v.rows[4].error);
  EXPECT_NE(v.rows[0].predicted, v.rows[1].predicted);
}

TEST(CrossValidation, EachSourceIsPredictedWithDataFittedOnTheOthers) {
  // Source "fast" reports 30% more than source "slow" for the same runs.
  std::string a = kHeader, b = kHeader, both = kHeader;
  for (const char* tp : {"1", "2"}) {
    a += row(std::string("slow-") + tp, "slow", tp, "8", "60");
    b += row(std::string("fast-") + tp, "fast", tp, "8", "78");
  }
  both += a.substr(a.find('\n') + 1) + b.substr(b.find('\n') + 1);
  std::istringstream in_a(a), in_b(b), in_both(both);
  const auto fit_slow = fit_efficiency(read_runs(read_csv(in_a)));
  const auto fit_fast = fit_efficiency(read_runs(read_csv(in_b)));
  ASSERT_EQ(fit_slow.systems.size(), 1u);
  ASSERT_EQ(fit_fast.systems.size(), 1u);
  EXPECT_LT(fit_slow.systems[0].best.emax, fit_fast.systems[0].best.emax);

  const CrossValidation cv = cross_validate_by_source(read_runs(read_csv(in_both)));
  ASSERT_EQ(cv.sources.size(), 2u);
  EXPECT_EQ(cv.held_out.all.rows, 4);
  for (const SourceFold& f : cv.sources) {
    const EfficiencyFit& other = f.source == "slow" ? fit_fast.systems[0] : fit_slow.systems[0];
    EXPECT_DOUBLE_EQ(f.fitted.at("frontier").emax, other.best.emax) << f.source;
    EXPECT_TRUE(f.pooled.empty());
    // Fitted on a source 30% off, the held-out rows are far from their own figures.
    EXPECT_GT(f.errors.median_abs_error, 0.1) << f.source;
  }
}

TEST(CrossValidation, ASystemSeenInOneSourceOnlyIsPredictedFromThePooledFit) {
  std::string text = std::string(kHeader) + row("a", "only", "1");
  text += "b,other,dgx-a100-80gb,48,6144,48,2048,50688,16,1,8,,0,640,1,full,no,no,130,hardware\n";
  text += "c,other,dgx-a100-80gb,48,6144,48,2048,50688,16,2,8,,0,640,1,full,no,no,140,hardware\n";
  std::istringstream in(text);
  const CrossValidation cv = cross_validate_by_source(read_runs(read_csv(in)));
  for (const SourceFold& f : cv.sources)
    if (f.source == "only") {
      ASSERT_EQ(f.pooled.size(), 1u);
      EXPECT_EQ(f.pooled[0], "frontier");
    }
}

// The ZeRO-3 runs beyond a node (docs/PERFORMANCE-MODEL.md, "ZeRO-3 beyond
// a node"): DeepSpeed ZeRO-3 on 1,024 GPUs, 2.4 and 3.4 times too fast
// while a ring's latency was the sum of its hops, is within 25% at the
// measured ring step (about 600 gathers of 1,023 steps a micro-batch), on
// the A800 file (NVLink 200 GB/s a direction, 4 HDR a node). Those rows are
// communication: the deepspeed-zero3 point fitted to the one-node and MiCS
// rows does not decide them.
TEST(Validate, ZeroThreeAtScaleRunsArePricedByTheirRings) {
  const Validation v = validate_runs(read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv"));
  int seen = 0;
  for (const RowResult& r : v.rows)
    if (r.id == "amsp-ds-zero3-l13b-1024" || r.id == "amsp-ds-zero3-l7b-1024") {
      ++seen;
      EXPECT_LT(std::fabs(r.error), 0.25) << r.id;
      EXPECT_GT(r.prediction.time.dp_comm, 5 * r.prediction.time.compute) << r.id;
    }
  EXPECT_EQ(seen, 2);
}

// The memory model's bound on its over-prediction (kMemoryOverPrediction,
// which decides MemoryEstimate::tight) holds on every published run that
// reports its peak, and its median under-prediction
// (kMemoryUnderPrediction, MemoryEstimate::headroom) is theirs.
TEST(Validate, MemoryOverPredictionIsBounded) {
  const Validation v = validate_runs(read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv"));
  std::vector<double> errors;
  for (const RowResult& r : v.rows)
    if (r.reported_memory > 0) {
      errors.push_back(r.memory_error);
      EXPECT_LE(r.memory_error, perf::kMemoryOverPrediction) << r.id;
    }
  ASSERT_EQ(errors.size(), 39u);
  std::nth_element(errors.begin(), errors.begin() + 19, errors.end());
  EXPECT_NEAR(errors[19], -perf::kMemoryUnderPrediction, 0.005);
}

// The stated accuracy of docs/PERFORMANCE-MODEL.md on the public set
// (median 3.1%, max 33.8%; BigScience's 72-layer sweep ranked at Spearman
// 0.80, its 78-layer one, balanced over 12 stages where it is pipelined so, at
// 0.93; MegaScale's Megatron-LM strong scaling of 175B from 256 to 12,288
// GPUs at 0.95): held as a regression guard, not a target. The maximum is
// MosaicML's MPT-70B on 64 A100 40GB (+34%; the same table's 128-GPU row is
// +4%), the known miss the docs name.
TEST(CrossValidation, PublishedSetLeaveOneSourceOut) {
  const CrossValidation cv =
      cross_validate_by_source(read_runs(read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv")));
  EXPECT_TRUE(cv.held_out.skipped.empty());
  EXPECT_EQ(cv.held_out.all.rows, 218);
  EXPECT_EQ(cv.sources.size(), 29u);
  EXPECT_LE(cv.held_out.all.median_abs_error, 0.08);
  EXPECT_LE(cv.held_out.all.max_abs_error, 0.35);
  // The flash efficiency is shrunk by a weight of its own, not the same as
  // emax's (validate_cv.h).
  EXPECT_NE(cv.shrinkage.k, cv.shrinkage.k_flash);
  // Nested: each source also left out of the choice of the two weights
  // (median 3.3%, max 70.6%: AMSP's MiCS 13B, the MiCS class of two
  // sources, AMSP's fold choosing a pair of its own without them). Rows are in the same order; a source whose pair is
  // the one chosen over all sources is predicted exactly as above.
  ASSERT_EQ(cv.nested.rows.size(), cv.held_out.rows.size());
  ASSERT_EQ(cv.nested_shrinkage.size(), cv.sources.size());
  EXPECT_EQ(cv.nested.all.rows, 218);
  EXPECT_LE(cv.nested.all.median_abs_error, 0.08);
  EXPECT_LE(cv.nested.all.max_abs_error, 0.75);
  std::map<std::string, Shrinkage> nested_pair(cv.nested_shrinkage.begin(), cv.nested_shrinkage.end());
  int same = 0;
  for (size_t i = 0; i < cv.nested.rows.size(); ++i) {
    const RowResult& a = cv.held_out.rows[i];
    const RowResult& b = cv.nested.rows[i];
    ASSERT_EQ(a.id, b.id);
    if (!(nested_pair.at(a.source) == cv.shrinkage)) continue;
    ++same;
    EXPECT_DOUBLE_EQ(a.predicted, b.predicted) << a.id;
  }
  EXPECT_GT(same, 0);
  // Every published run fits: NeMo's Nemotron-4 340B on 128 H100 (DP 2),
  // with NeMo's bf16 gradient buffer, at 81.2 GiB live of 80, within the
  // memory model's error (tight). Four of the six layouts BigScience
  // reported out of memory are predicted to fit (76.0, 79.1, 73.8 and 54.0
  // GiB live of 80).
  EXPECT_TRUE(cv.held_out.not_fitting.empty());
  EXPECT_EQ(cv.held_out.tight, std::vector<std::string>{"dgxc-nemotron4-340b-bf16-128"});
  EXPECT_EQ(cv.held_out.oom_mismatch,
            (std::vector<std::string>{"bloom-prequel-181b-dp32-tp2-pp6-mbs1-gbs2048",
                                      "bloom-prequel-184b-l100-h64-dp16-tp4-pp6-mbs2-bf16-0228",
                                      "bloom-prequel-184b-l100-h64-dp16-tp4-pp6-mbs1-bf16-0228",
                                      "bloom-prequel-206b-l82-h128-dp8-tp4-pp12-mbs2-bf16-0228"}));
  const std::vector<SweepRank> sweeps = sweep_rankings(cv.held_out);
  ASSERT_EQ(sweeps.size(), 3u);
  EXPECT_EQ(sweeps[0].layouts, 20);
  EXPECT_GE(sweeps[0].spearman, 0.8);
  EXPECT_EQ(sweeps[1].layouts, 8);
  EXPECT_GE(sweeps[1].spearman, 0.8);
  // The runs on 256 to 12,288 GPUs, held out: their fall in throughput with
  // scale (the interleaved bubble at fewer micro-batches per pipeline, the
  // gradient all-reduce a 2023 Megatron-LM leaves exposed) is predicted, not
  // fitted.
  EXPECT_EQ(sweeps[2].source, "jiang2024-megascale");
  EXPECT_EQ(sweeps[2].layouts, 8);
  EXPECT_GE(sweeps[2].spearman, 0.8);
  // Llama 3's 131K-token context-parallel run, held out: attention is half
  // its step, and it is the one row of the set that ties the fitted
  // attention efficiency to long sequences; without it the H100 fold picks
  // that efficiency from short-sequence rows, which barely constrain it
  // (+9.6% before the ring's step-size efficiency, +21.3% after, +38.1% with
  // the measured ring step, which slows the H100 FSDP and data-parallel rows
  // the fold then fits a faster attention to, +21.4% with Meta's exposed
  // all-gather of K and V, llama3-2024; in sample +1.0%; 16.5% slow while
  // the per-token costs the model does not list had only the attention term
  // to go into).
  for (const RowResult& r : cv.held_out.rows)
    if (r.id == "llama3-405b-131072-cp16") {
      EXPECT_EQ(r.config.cp, 16);
      EXPECT_LE(std::fabs(r.error), 0.25);
    }
  // MiCS (deepspeed-mics), held out both ways: BloombergGPT (+50% while no
  // other MiCS run was in the set) from AMSP's DeepSpeed-MiCS runs, and
  // those (57-71% fast at the system's point) from BloombergGPT.
  for (const RowResult& r : cv.held_out.rows)
    if (r.id == "bloomberggpt-50b-512") {
      EXPECT_LE(std::fabs(r.error), 0.2);
    }
  // DeepSpeed ZeRO-3 without model parallelism on 384 to 2,240 A100s at a
  // fixed batch (Narayanan et al. 2021, Table 2), held out: per-GPU
  // throughput falls about as the per-GPU batch does, since the 2021
  // runtime's per-tensor collectives, serialized with compute, take the
  // same time at every scale and the ring's hops grow with it.
  std::map<std::string, double> zero3;
  for (const RowResult& r : cv.held_out.rows)
    if (r.id.rfind("narayanan-t2-z3-", 0) == 0) {
      EXPECT_LE(std::fabs(r.error), 0.25) << r.id;
      zero3[r.id] = r.predicted;
    }
  ASSERT_EQ(zero3.size(), 6u);
  EXPECT_GT(zero3.at("narayanan-t2-z3-175b-384") / zero3.at("narayanan-t2-z3-175b-1536"), 3.0);
  EXPECT_GT(zero3.at("narayanan-t2-z3-530b-1120") / zero3.at("narayanan-t2-z3-530b-2240"), 1.7);
  for (const SourceFold& f : cv.sources) {
    if (f.source == "jiang2024-megascale") {
      EXPECT_EQ(f.errors.rows, 12);
      EXPECT_LE(f.errors.median_abs_error, 0.06);
      EXPECT_LE(f.errors.max_abs_error, 0.15);
    }
    if (f.source == "chen2024-amsp") {
      EXPECT_EQ(f.errors.rows, 5);
      EXPECT_LE(f.errors.max_abs_error, 0.35);
    }
  }
}


const char* kProfileHeader =
    "id,source,system,layers,hidden,heads,ffn,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
    "recompute,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,profile\n";

CsvTable table_of(const std::string& csv) {
  std::istringstream in(csv);
  return read_csv(in);
}

// DeepSpeed ZeRO-3 runs the wrapped model's attention: fused where the
// model calls a fused kernel (AMSP's runs, FlashAttention-2), so predict
// and plan take it; a published run that names none ran the model's own,
// which validate fills in rather than the faster fused one. Its 2021
// release predates FlashAttention.
TEST(Validate, DeepSpeedRunsTheModelsAttentionAndABlankIsUnfused) {
  ParallelConfig p;
  p.dp = 8;
  p.zero_stage = 3;
  p.bf16 = true;
  p.flash_attention = true;
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("deepspeed-zero3"), p, 32), "");
  EXPECT_EQ(perf::unsupported_by(perf::framework_profile("deepspeed-mics"), p, 32), "");
  EXPECT_NE(perf::unsupported_by(perf::framework_profile("deepspeed-zero3-2021"), p, 32), "");
  const Validation v = validate_runs(table_of(
      std::string(kProfileHeader) +
      "blank,s,dgx-a100-80gb,32,4096,32,16384,4096,50304,8,1,1,3,64,1,none,no,,1000,bf16,deepspeed-zero3\n"
      "fused,s,dgx-a100-80gb,32,4096,32,16384,4096,50304,8,1,1,3,64,1,none,no,yes,1000,bf16,deepspeed-zero3\n"));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[0].filled.at("flash_attn"), "no");
  EXPECT_FALSE(v.rows[0].config.flash_attention);
  EXPECT_TRUE(v.rows[1].config.flash_attention);
  EXPECT_FALSE(v.rows[1].beyond_profile);
}

// A published run fits. Where nothing its profile offers does (fsdp-2022
// assumes no fused attention; at 32K tokens the score matrices alone exceed
// the GPU), the blank is planned over every value instead, and the row says so.
TEST(Validate, ARunThatRanFitsEvenWhereItsProfileNarrowingWouldNot) {
  const Validation v = validate_runs(
      table_of(std::string(kProfileHeader) +
               "long,s,dgx-a100-80gb,32,4096,32,16384,32768,50304,8,1,1,3,8,1,full,no,,1000,bf16,fsdp-2022\n"
               "oom,s,dgx-a100-80gb,32,4096,32,16384,32768,50304,8,1,1,3,8,1,full,no,no,1000,bf16,fsdp-2022\n"));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_TRUE(v.rows[0].prediction.fits);
  EXPECT_TRUE(v.rows[0].beyond_profile);
  EXPECT_EQ(v.rows[0].filled.at("flash_attn"), "yes");
  // Published without flash attention: the knob is not planned, and the
  // model says it does not fit (a published knob is never overridden).
  EXPECT_FALSE(v.rows[1].prediction.fits);
  EXPECT_FALSE(v.rows[1].beyond_profile);
}

// Layers that do not divide by the published PP, no split published, an
// even-partition profile: the embedding and the head counted as layers
// (30 + 2 on 4 stages: 7, 8, 8, 7) instead of "not divisible".
TEST(Validate, LayersThatDoNotDivideAreSplitWhenNoSplitIsPublished) {
  const Validation v = validate_runs(table_of(
      std::string(kProfileHeader) +
      "uneven,s,dgx-h100,30,4096,32,16384,4096,50304,32,2,4,1,256,1,full,yes,yes,3000,bf16,megatron-core-2024\n"));
  ASSERT_EQ(v.rows.size(), 1u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_TRUE(v.rows[0].compared);
  EXPECT_EQ(v.rows[0].config.stage_counting, StageCounting::embedding_head);
}

TEST(Validate, ContextParallelRowsArePricedWithTheirCp) {
  const Validation v = validate_runs(table_of(
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,cp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n"
      "cp2,s,dgx-h100,32,4096,32,32768,50304,16,2,1,2,1,8,1,full,yes,yes,300,model,megatron-core-2024\n"
      "blank,s,dgx-h100,32,4096,32,8192,50304,16,2,1,,1,32,1,full,yes,yes,300,model,megatron-core-2024\n"
      "odd,s,dgx-h100,32,4096,32,8192,50304,16,2,1,3,1,32,1,full,yes,yes,300,model,megatron-core-2024\n"));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[0].id, "cp2");
  EXPECT_EQ(v.rows[0].config.cp, 2);
  EXPECT_EQ(v.rows[0].config.dp, 4);  // 16 GPUs / (TP 2 x CP 2)
  EXPECT_GT(v.rows[0].prediction.comm_bytes.cp, 0.0);
  EXPECT_EQ(v.rows[1].config.cp, 1);  // a blank cp is none
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("tp 2 x cp 3 x pp 1 does not divide num_gpus 16"), std::string::npos) << v.skipped[0];
}

// A value followed by the note tables append in parentheses is read as the
// value; ZeRO stages are read as tables name them. A note alone, or a
// number run into a unit, is still refused.
TEST(Validate, AFieldIsReadByItsValueAndNotItsNote) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n";
  auto line = [](const std::string& id, const std::string& gpus, const std::string& zero, const std::string& gbs,
                 const std::string& recompute, const std::string& sp) {
    return id + ",s,dgx-h100,32,4096,32,4096,50304," + gpus + ",2,1," + zero + "," + gbs + ",1," + recompute + "," +
           sp + ",yes,300,model,megatron-core-2024\n";
  };
  const Validation v = validate_runs(
      table_of(header + line("plain", "16", "1", "32", "selective", "yes") +
               line("noted", "\"16 (2 nodes)\"", "ZeRO-1", "~32", "selective (attention only)", "yes (with TP)") +
               line("stage", "16", "ZeRO stage 1", "32 (sequences)", "selective", "Y") +
               line("unit", "16", "1", "32seq", "selective", "yes") +
               line("note-only", "16", "(distributed optimizer)", "32", "selective", "yes") +
               line("zero4", "16", "ZeRO-4", "32", "selective", "yes")));
  ASSERT_EQ(v.rows.size(), 3u);
  for (int i : {1, 2}) {
    EXPECT_EQ(v.rows[i].config.zero_stage, 1);
    EXPECT_EQ(v.rows[i].config.recompute, Recompute::selective);
    EXPECT_TRUE(v.rows[i].config.sequence_parallel);
    EXPECT_DOUBLE_EQ(v.rows[i].prediction.tokens_per_s, v.rows[0].prediction.tokens_per_s);
  }
  ASSERT_EQ(v.skipped.size(), 3u);
  EXPECT_NE(v.skipped[0].find("'32seq' is not a number"), std::string::npos) << v.skipped[0];
  EXPECT_NE(v.skipped[1].find("'(distributed optimizer)' is not 0, 1, 2 or 3"), std::string::npos) << v.skipped[1];
  EXPECT_NE(v.skipped[2].find("'ZeRO-4' is not 0, 1, 2 or 3"), std::string::npos) << v.skipped[2];
}

// A number followed by its column's unit is read; another unit, or a
// multiplier the column does not take, refuses the row instead of being
// misread.
TEST(Validate, ANumberIsReadWithItsColumnsUnit) {
  const std::string header =
      "id,source,system,params_b,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n";
  auto line = [](const std::string& id, const std::string& params, const std::string& seq, const std::string& gpus,
                 const std::string& tflops) {
    return id + ",s,dgx-h100," + params + ",32,4096,32," + seq + ",50304," + gpus + ",2,1,1,32,1,full,yes,yes," +
           tflops + ",model,megatron-core-2024\n";
  };
  const Validation v = validate_runs(table_of(header + line("plain", "6.7", "4096", "16", "300") +
                                              line("units", "6.7B", "4096 tokens", "16 GPUs", "300 TFLOP/s") +
                                              line("giga", "6.7", "4096", "16", "300 GFLOP/s") +
                                              line("kilo", "6.7", "4K", "16", "300")));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(v.rows[1].reported, v.rows[0].reported);
  EXPECT_DOUBLE_EQ(v.rows[1].prediction.tokens_per_s, v.rows[0].prediction.tokens_per_s);
  ASSERT_EQ(v.skipped.size(), 2u);
  EXPECT_NE(v.skipped[0].find("'300 GFLOP/s' is not a number"), std::string::npos) << v.skipped[0];
  EXPECT_NE(v.skipped[1].find("'4K' is not a number"), std::string::npos) << v.skipped[1];
}

// Precision as tables print it: any 16-bit spelling is bf16 GEMMs, fp32 is
// fp32, text naming no width is read as a blank and said; FP8 and TF32,
// which the model does not price, refuse the row instead of passing as
// 16-bit (FP8 named as not run does not).
TEST(Validate, PrecisionIsReadAsTablesPrintItAndFp8IsRefused) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile,precision\n";
  auto line = [](const std::string& id, const std::string& precision) {
    return id + ",s,dgx-h100,32,4096,32,4096,50304,16,2,1,1,32,1,full,yes,yes,300,model,megatron-core-2024," +
           precision + "\n";
  };
  const Validation v = validate_runs(
      table_of(header + line("bf16", "bf16") + line("amp", "\"AMP (bfloat16)\"") + line("fp16", "fp16 mixed") +
               line("fp32", "FP32") + line("o2", "O2") + line("no-fp8", "\"bf16 (no FP8)\"") +
               line("fp8", "\"bf16, FP8 GEMMs (Transformer Engine)\"") + line("tf32", "TF32")));
  ASSERT_EQ(v.rows.size(), 6u);
  for (int i : {1, 2, 4, 5}) EXPECT_DOUBLE_EQ(v.rows[i].prediction.tokens_per_s, v.rows[0].prediction.tokens_per_s);
  EXPECT_FALSE(v.rows[3].config.bf16);
  EXPECT_LT(v.rows[3].prediction.tokens_per_s, 0.5 * v.rows[0].prediction.tokens_per_s);
  EXPECT_TRUE(v.rows[0].unread.empty());
  ASSERT_EQ(v.rows[4].unread.size(), 1u);
  EXPECT_NE(v.rows[4].unread[0].find("precision 'O2'"), std::string::npos);
  ASSERT_EQ(v.skipped.size(), 2u);
  EXPECT_NE(v.skipped[0].find("names FP8 GEMMs"), std::string::npos) << v.skipped[0];
  EXPECT_NE(v.skipped[1].find("names TF32 GEMMs"), std::string::npos) << v.skipped[1];
}

// One of tp and pp blank where model_parallel or dp fixes it is that value,
// said as inferred, and priced as the row with both given; where nothing
// fixes it, the plan fills it.
TEST(Validate, ABlankTpOrPpFixedByTheOtherColumnsIsRead) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,model_parallel,zero_stage,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n";
  auto line = [](const std::string& id, const std::string& mesh) {
    return id + ",s,dgx-a100-80gb,48,8192,64,2048,51200,64," + mesh +
           ",1,512,1,full,yes,no,150,model,megatron-lm-2022\n";
  };
  const Validation v = validate_runs(table_of(header + line("both", "4,4,4,") + line("tp-by-dp", ",4,4,") +
                                              line("pp-by-mp", "4,,,16") + line("open", ",4,,")));
  ASSERT_EQ(v.rows.size(), 4u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[1].config.tp, 4);
  EXPECT_EQ(v.rows[1].inferred.at("tp"), "4 (num_gpus / (dp x cp x pp))");
  EXPECT_EQ(v.rows[1].filled.count("tp"), 0u);
  EXPECT_EQ(v.rows[2].config.pp, 4);
  EXPECT_EQ(v.rows[2].inferred.at("pp"), "4 (model_parallel / tp)");
  for (int i : {1, 2}) EXPECT_DOUBLE_EQ(v.rows[i].prediction.tokens_per_s, v.rows[0].prediction.tokens_per_s);
  EXPECT_EQ(v.rows[3].inferred.count("tp"), 0u);
  EXPECT_EQ(v.rows[3].filled.count("tp"), 1u);
}

// A blank cp beside a published dp that leaves a factor over (tables that
// print DP without the CP sharing its ranks) is that factor, said as
// inferred; a dp that leaves nothing over keeps cp 1, and one that does not
// divide is still refused.
TEST(Validate, ABlankCpIsWhatAPublishedDpLeavesOver) {
  const Validation v = validate_runs(table_of(
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,cp,dp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n"
      "left,s,dgx-h100,32,4096,32,32768,50304,16,2,1,,4,1,8,1,full,yes,yes,300,model,megatron-core-2024\n"
      "given,s,dgx-h100,32,4096,32,32768,50304,16,2,1,2,4,1,8,1,full,yes,yes,300,model,megatron-core-2024\n"
      "none,s,dgx-h100,32,4096,32,8192,50304,16,2,1,,8,1,32,1,full,yes,yes,300,model,megatron-core-2024\n"
      "odd,s,dgx-h100,32,4096,32,8192,50304,16,2,1,,3,1,32,1,full,yes,yes,300,model,megatron-core-2024\n"));
  ASSERT_EQ(v.rows.size(), 3u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].config.cp, 2);
  EXPECT_EQ(v.rows[0].config.dp, 4);
  EXPECT_EQ(v.rows[0].inferred.at("cp"), "2 (num_gpus / (dp x tp x pp))");
  EXPECT_DOUBLE_EQ(v.rows[0].prediction.tokens_per_s, v.rows[1].prediction.tokens_per_s);
  EXPECT_EQ(v.rows[1].inferred.count("cp"), 0u);
  EXPECT_EQ(v.rows[2].config.cp, 1);
  EXPECT_EQ(v.rows[2].inferred.count("cp"), 0u);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("dp 3 x tp 2 x cp 1 x pp 1 is not num_gpus 16"), std::string::npos) << v.skipped[0];
}

// dp_shard: DP ranks per ZeRO shard group (hybrid sharding); blank is the
// whole group, and two rows that differ only in it are priced apart.
TEST(Validate, HybridShardRowsArePricedWithTheirGroup) {
  const Validation v = validate_runs(table_of(
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,dp_shard,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,profile\n"
      "hsdp,s,ibm-a100-80gb-400g,32,4096,32,4096,32000,128,1,1,3,8,256,2,none,no,yes,3000,bf16,torchtitan-2024\n"
      "full,s,ibm-a100-80gb-400g,32,4096,32,4096,32000,128,1,1,3,,256,2,none,no,yes,3000,bf16,torchtitan-2024\n"
      "odd,s,ibm-a100-80gb-400g,32,4096,32,4096,32000,128,1,1,3,6,256,2,none,no,yes,3000,bf16,torchtitan-2024\n"));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[0].config.zero_shard, 8);
  EXPECT_EQ(v.rows[1].config.zero_shard, 0);
  EXPECT_GT(v.rows[0].prediction.memory.optimizer, 15 * v.rows[1].prediction.memory.optimizer);
  EXPECT_NE(v.rows[0].prediction.tokens_per_s, v.rows[1].prediction.tokens_per_s);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("not divisible by the data-parallel shard size 6"), std::string::npos) << v.skipped[0];
}

// A table without a dp_shard column that names hybrid sharding in its
// framework or notes is sharded within one node (8 GPUs over TP 2: 4 DP
// ranks); a published dp_shard wins, and a group of one node is the whole DP
// group (nothing to infer).
TEST(Validate, HybridShardingNamedInTheTextShardsWithinANode) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,dp_shard,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,profile,framework,notes\n";
  auto line = [](const std::string& id, const std::string& gpus, const std::string& shard, const std::string& framework,
                 const std::string& notes) {
    return id + ",s,ibm-a100-80gb-400g,32,4096,32,4096,32000," + gpus + ",2,1,3," + shard +
           ",256,2,none,no,yes,3000,bf16,megatron-core-2024," + framework + "," + notes + "\n";
  };
  const Validation v = validate_runs(table_of(
      header + line("notes", "128", "", "PyTorch FSDP", "HSDP: sharded inside each node") +
      line("framework", "128", "", "FSDP HYBRID_SHARD", "") + line("given", "128", "2", "FSDP", "hybrid shard") +
      line("plain", "128", "", "FSDP", "full shard") + line("one-node", "8", "", "FSDP", "HSDP")));
  ASSERT_EQ(v.rows.size(), 5u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].config.zero_shard, 4);
  EXPECT_EQ(v.rows[0].hybrid_shard_inferred, 4);
  EXPECT_EQ(v.rows[1].config.zero_shard, 4);
  EXPECT_EQ(v.rows[2].config.zero_shard, 2);
  EXPECT_EQ(v.rows[2].hybrid_shard_inferred, 0);
  EXPECT_EQ(v.rows[3].config.zero_shard, 0);
  EXPECT_EQ(v.rows[4].config.zero_shard, 0);
  EXPECT_EQ(v.rows[4].hybrid_shard_inferred, 0);
}
// MiCS's partition group is a setting with no one-node default (DeepSpeed's
// mics_shard_size, SageMaker's sharded_data_parallel_degree): named without
// a size, the group is planned over one node and every power of two of
// nodes below the whole DP group. A 50B model's states over one node of A100
// 40GB do not fit (about 100 GB a GPU); the plan takes a group that does.
TEST(Validate, MicsNamedWithoutAGroupSizePlansTheGroup) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,precision,framework\n";
  const Validation v = validate_runs(
      table_of(header + "mics,s,dgx-a100-40gb,70,7680,40,2048,131072,512,1,1,3,2048,full,no,no,100,hardware,bf16,"
                        "SageMaker SMP with MiCS\n"
                        "hsdp,s,dgx-a100-40gb,70,7680,40,2048,131072,512,1,1,3,2048,full,no,no,100,hardware,bf16,"
                        "FSDP HYBRID_SHARD\n"));
  ASSERT_EQ(v.rows.size(), 2u) << (v.skipped.empty() ? "" : v.skipped[0]);
  const RowResult& mics = v.rows[0];
  EXPECT_EQ(mics.profile, "deepspeed-mics");
  EXPECT_EQ(mics.hybrid_shard_inferred, 8);
  ASSERT_TRUE(mics.filled.count("dp_shard"));
  EXPECT_EQ(mics.filled.at("dp_shard"), std::to_string(mics.config.zero_shard));
  EXPECT_GE(mics.config.zero_shard, 16);
  EXPECT_LT(mics.config.zero_shard, 512);
  EXPECT_TRUE(mics.prediction.fits);
  // FSDP's hybrid sharding is one node by its default groups, not planned:
  // the same model does not fit there.
  const RowResult& hsdp = v.rows[1];
  EXPECT_EQ(hsdp.config.zero_shard, 8);
  EXPECT_FALSE(hsdp.filled.count("dp_shard"));
  EXPECT_FALSE(hsdp.prediction.fits);
}

// A blank flash_attn where the framework column names the fused kernel
// (FlashAttention in any spelling, PyTorch's SDPA) is yes, not the
// profile's guess (PyTorch FSDP's blank reads unfused); a published "no"
// stays, and notes are not read (they also say what did not run).
TEST(Validate, FlashAttentionNamedInTheFrameworkFillsABlank) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,profile,framework,notes\n";
  auto line = [](const std::string& id, const std::string& flash, const std::string& framework,
                 const std::string& notes) {
    return id + ",s,dgx-a100-80gb,32,4096,32,4096,32000,64,1,1,3,128,2,full,no," + flash + ",3000,bf16,fsdp-2022," +
           framework + "," + notes + "\n";
  };
  const Validation v = validate_runs(table_of(header + line("sdpa", "", "PyTorch FSDP (SDPA)", "") +
                                              line("fa2", "", "FSDP with FlashAttention-2", "") +
                                              line("plain", "", "PyTorch FSDP", "FlashAttention was not used") +
                                              line("given", "no", "FSDP with flash-attn installed", "")));
  ASSERT_EQ(v.rows.size(), 4u) << (v.skipped.empty() ? "" : v.skipped[0]);
  for (int i : {0, 1}) {
    EXPECT_TRUE(v.rows[i].config.flash_attention) << v.rows[i].id;
    EXPECT_TRUE(v.rows[i].flash_attention_named) << v.rows[i].id;
    EXPECT_FALSE(v.rows[i].filled.count("flash_attn")) << v.rows[i].id;
  }
  EXPECT_FALSE(v.rows[2].config.flash_attention);
  EXPECT_FALSE(v.rows[2].flash_attention_named);
  EXPECT_FALSE(v.rows[3].config.flash_attention);
  EXPECT_FALSE(v.rows[3].flash_attention_named);
  for (const RowResult& r : v.rows) EXPECT_FALSE(r.beyond_profile) << r.id;
  EXPECT_GT(v.rows[0].prediction.tokens_per_s, v.rows[2].prediction.tokens_per_s);
}

// A blank micro-batch is planned over every divisor of a replica's share of
// the batch (up to 64), not only powers of two: MosaicML's MPT-125M ran 26
// sequences a GPU with no accumulation, and with 1 or 2 the plan paid 13 or
// 26 FSDP gathers a step (-87% on the set with micro_batch blanked).
TEST(Validate, ABlankMicroBatchIsPlannedOverEveryDivisor) {
  const Validation v = validate_runs(table_of(
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,recompute,"
      "seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,profile\n"
      "mpt125m,s,dgx-a100-40gb,12,768,12,2048,50368,128,1,1,3,3328,none,no,yes,40000,bf16,llm-foundry-2023-pure\n"));
  ASSERT_EQ(v.rows.size(), 1u) << (v.skipped.empty() ? "" : v.skipped[0]);
  const RowResult& r = v.rows[0];
  ASSERT_TRUE(r.filled.count("micro_batch"));
  EXPECT_EQ(r.config.micro_batch_size, 26);
  EXPECT_EQ(r.filled.at("micro_batch"), "26");
}

// A run that ran, whose layout fits only within the memory model's error
// (tight), is planned among those layouts, not given the fallback: NeMo's
// Nemotron-4 340B on 128 H100 is tight as published (81.2 GiB live of 80);
// with its sequence parallelism and interleaving blanked nothing fits, and
// the fallback (no sequence parallelism, no interleaving) was -30%.
TEST(Validate, ARunThatFitsOnlyTightIsPlannedAmongTheTightLayouts) {
  CsvTable t = read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv");
  const int id = t.column("id");
  auto row = std::find_if(t.rows.begin(), t.rows.end(),
                          [&](const auto& r) { return r[id] == "dgxc-nemotron4-340b-bf16-128"; });
  ASSERT_NE(row, t.rows.end());
  std::vector<std::string> nemotron = *row;
  t.rows = {nemotron, nemotron, nemotron};
  t.row_lines = {2, 3, 4};
  t.rows[1][id] += "-blanked";
  for (const char* col : {"seq_parallel", "vpp"}) t.rows[1][t.column(col)] = "";
  // Its ZeRO stage blanked: NeMo runs ZeRO-3 (its PyTorch FSDP option)
  // only without a pipeline, so PP 8 keeps the distributed optimizer
  // (ZeRO-1), tight, rather than a ZeRO-3 that fits (-75%).
  t.rows[2][id] += "-zero-blanked";
  t.rows[2][t.column("zero_stage")] = "";
  const Validation v = validate_runs(t);
  ASSERT_EQ(v.rows.size(), 3u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_LE(v.rows[2].config.zero_stage, 1);
  EXPECT_TRUE(v.rows[2].prediction.tight);
  EXPECT_LT(std::fabs(v.rows[2].error), 0.1);
  EXPECT_TRUE(v.rows[0].prediction.tight);
  const RowResult& blanked = v.rows[1];
  EXPECT_TRUE(blanked.prediction.tight);
  EXPECT_TRUE(blanked.config.sequence_parallel);
  EXPECT_GT(blanked.config.vpp, 1);
  EXPECT_LT(std::fabs(blanked.error), 0.1);
}

// Runs kept outside the set are written in the set's first columns (no
// profile, source_key, gated_mlp, stage split or counting, dp_shard or
// recompute_num_layers). The set cut to those columns is read whole and
// predicted about as with every column (2.9% / 30.9% in sample on
// 2026-12-05, against 2.8% / 30.9%): what the later columns say, the rest
// of the row and its framework text give.
TEST(Validate, TheSetInItsFirstColumnsIsReadWhole) {
  const CsvTable full = read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv");
  const std::vector<std::string> first = {"id",           "source",
                                          "table",        "model_name",
                                          "params_b",     "layers",
                                          "hidden",       "heads",
                                          "kv_heads",     "ffn",
                                          "seq_len",      "vocab",
                                          "gpu",          "gpus_per_node",
                                          "interconnect", "num_gpus",
                                          "tp",           "pp",
                                          "vpp",          "cp",
                                          "dp",           "model_parallel",
                                          "zero_stage",   "seq_parallel",
                                          "recompute",    "micro_batch",
                                          "grad_accum",   "global_batch",
                                          "precision",    "tflops_per_gpu",
                                          "mfu_pct",      "hfu_pct",
                                          "tokens_per_s", "tokens_per_s_per_gpu",
                                          "iter_time_s",  "peak_mem",
                                          "framework",    "notes",
                                          "system",       "tflops_kind",
                                          "flash_attn"};
  CsvTable cut;
  cut.header = first;
  cut.row_lines = full.row_lines;
  for (size_t r = 0; r < full.rows.size(); ++r) {
    std::vector<std::string> row;
    for (const auto& c : first) row.push_back(full.field(r, c));
    cut.rows.push_back(row);
  }
  const Validation v = validate_runs(cut);
  EXPECT_TRUE(v.skipped.empty()) << v.skipped[0];
  EXPECT_EQ(v.all.rows, 218);
  EXPECT_LE(v.all.median_abs_error, 0.04);
  EXPECT_LE(v.all.max_abs_error, 0.35);
  EXPECT_TRUE(v.not_fitting.empty());
  int profile_from_framework = 0;
  for (const RowResult& r : v.rows) profile_from_framework += r.profile_inferred;
  EXPECT_EQ(profile_from_framework, int(v.rows.size()));
}

// A row that publishes no PP may split its layers unevenly: Llama 3 405B's
// 126 layers with the layout and the split blanked are planned over PP
// counts that divide layers + 2 with the embedding and head counted as
// layers (Megatron's first/last stage option), not only over divisors of
// 126, which left PP 2 and 6 (-70%).
TEST(Validate, ARowWithoutPipelineSizeMaySplitItsLayersUnevenly) {
  CsvTable t = read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv");
  const int id = t.column("id");
  auto row = std::find_if(t.rows.begin(), t.rows.end(), [&](const auto& r) { return r[id] == "llama3-405b-16384"; });
  ASSERT_NE(row, t.rows.end());
  t.rows = {*row};
  t.row_lines = {2};
  for (const char* col : {"tp", "pp", "dp", "stage_counting"}) t.rows[0][t.column(col)] = "";
  const Validation v = validate_runs(t);
  ASSERT_EQ(v.rows.size(), 1u) << (v.skipped.empty() ? "" : v.skipped[0]);
  const RowResult& r = v.rows[0];
  EXPECT_NE(126 % r.config.pp, 0) << r.config.pp;
  EXPECT_EQ(r.filled.count("stage_counting"), 1u);
  EXPECT_LT(std::fabs(r.error), 0.15);
}

// A blank vocab is the tokenizer of the family the model's name names,
// else GPT-2's BPE padded as Megatron-LM pads it; a published one stays.
TEST(Validate, ABlankVocabularyFollowsTheModelFamily) {
  const RunRows runs = read_runs(
      table_of("id,source,system,model_name,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,"
               "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind\n"
               "a,s,dgx-h100,Llama 3.1 8B,32,4096,32,8192,,8,1,1,3,8,1,full,no,yes,300,model\n"
               "b,s,dgx-h100,Llama 2 13B,40,5120,40,4096,,8,1,1,3,8,1,full,no,yes,300,model\n"
               "c,s,dgx-h100,OPT-175B,96,12288,96,2048,,64,8,1,3,64,1,full,no,yes,300,model\n"
               "d,s,dgx-h100,BloombergGPT 50B,70,7680,40,2048,,64,1,1,3,64,1,full,no,no,100,hardware\n"
               "e,s,dgx-h100,BLOOM-176B,70,14336,112,2048,,64,8,1,1,64,1,full,no,no,100,hardware\n"
               "f,s,dgx-h100,GPT 22B,48,6144,48,2048,,8,8,1,1,8,1,full,no,no,100,hardware\n"
               "g,s,dgx-h100,Llama 3.1 405B,126,16384,128,8192,51200,64,8,8,1,64,1,full,no,yes,300,model\n"));
  ASSERT_EQ(runs.rows.size(), 7u) << (runs.skipped.empty() ? "" : runs.skipped[0]);
  const std::vector<int> want = {128256, 32000, 50272, 131072, 250880, 51200, 51200};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(runs.rows[i].model.vocab_size, want[i]) << runs.rows[i].id;
  EXPECT_EQ(runs.rows[0].inferred.at("vocab"), "128256 (from model name)");
  EXPECT_EQ(runs.rows[5].inferred.at("vocab"), "51200 (GPT-2's, padded)");
  EXPECT_FALSE(runs.rows[6].inferred.count("vocab"));
}

// A mesh published as its model-parallel or data-parallel size alone:
// the blank TP and PP are planned over the splits with that size, not over
// every mesh (Narayanan et al.'s Table 2 prints "model-parallel size 96"
// for 175B on 384 GPUs; unconstrained, TP 2 x PP 24 was planned, DP 8).
TEST(Validate, AModelParallelSizeAloneBoundsThePlannedMesh) {
  const std::string header =
      "id,source,system,framework,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,model_parallel,global_batch,"
      "micro_batch,recompute,tflops_per_gpu,tflops_kind\n";
  const Validation v =
      validate_runs(table_of(
          header + "mp,s,dgx-a100-80gb,Megatron-LM 2021,96,12288,96,2048,51200,384,,,,96,1536,1,full,153,hardware\n"
                   "dp,s,dgx-a100-80gb,Megatron-LM 2021,96,12288,96,2048,51200,384,,,4,,1536,1,full,153,hardware\n"
                   "tp,s,dgx-a100-80gb,Megatron-LM 2021,96,12288,96,2048,51200,384,8,,,96,1536,1,full,153,hardware\n"
                   "bad,s,dgx-a100-80gb,Megatron-LM 2021,96,12288,96,2048,51200,384,8,12,,48,1536,1,full,153,"
                   "hardware\n"));
  ASSERT_EQ(v.rows.size(), 4u);
  EXPECT_EQ(v.rows[0].config.tp * v.rows[0].config.pp, 96);
  EXPECT_EQ(v.rows[0].config.dp, 4);
  EXPECT_EQ(v.rows[1].config.dp, 4);
  EXPECT_EQ(v.rows[2].config.tp, 8);
  EXPECT_EQ(v.rows[2].config.pp, 12);
  EXPECT_TRUE(v.rows[2].unread.empty());
  // Given tp and pp are the mesh; a model_parallel that disagrees is said.
  EXPECT_EQ(v.rows[3].config.tp, 8);
  EXPECT_EQ(v.rows[3].config.pp, 12);
  EXPECT_TRUE(v.rows[3].compared);
  ASSERT_EQ(v.rows[3].unread.size(), 1u);
  EXPECT_NE(v.rows[3].unread[0].find("model_parallel 48 (not tp 8 x pp 12"), std::string::npos);
  EXPECT_TRUE(v.skipped.empty());
}

// DeepSpeed's first ZeRO-3 named without Megatron: the 2021 profile, priced
// with the efficiency data of the Megatron layers its published runs ran
// (FrameworkProfile::efficiency_family). Narayanan et al.'s Table 2 ZeRO-3
// runs so described, with the system from the GPU: within 25% (-20% to +9%
// in sample; -25% to -5% at the DeepSpeed family's point, fitted on runs of
// Hugging Face models).
TEST(Validate, DeepSpeedZero3Of2021TakesTheEfficiencyOfTheLayersItRan) {
  EXPECT_EQ(perf::efficiency_family(perf::framework_profile("deepspeed-zero3-2021")), "megatron-deepspeed");
  EXPECT_EQ(perf::efficiency_family(perf::framework_profile("deepspeed-zero3")), "deepspeed");
  const Validation v = validate_runs(table_of(
      "id,source,gpu,framework,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,"
      "micro_batch,recompute,tflops_per_gpu\n"
      "a,Narayanan et al. SC21,A100 80GB,DeepSpeed ZeRO-3,96,12288,96,2048,51200,384,1,1,3,1536,4,full,144\n"
      "b,Narayanan et al. SC21,A100 80GB,DeepSpeed ZeRO-3,96,12288,96,2048,51200,1536,1,1,3,1536,1,full,44\n"
      "c,Narayanan et al. SC21,A100 80GB,DeepSpeed ZeRO-3,105,20480,128,2048,51200,640,1,1,3,2560,4,full,138\n"
      "d,Narayanan et al. SC21,A100 80GB,DeepSpeed ZeRO-3,105,20480,128,2048,51200,2240,1,1,3,2240,1,full,48\n"));
  ASSERT_EQ(v.rows.size(), 4u);
  for (const RowResult& r : v.rows) {
    EXPECT_EQ(r.profile, "deepspeed-zero3-2021") << r.id;
    EXPECT_LE(std::fabs(r.error), 0.25) << r.id;
  }
}

// A blank global batch is what the row gives otherwise: tokens a second x
// seconds a step over the sequence, else micro-batch x accumulation x DP
// where the mesh is published; with neither the row is refused, naming both.
TEST(Validate, ABlankGlobalBatchComesFromTheRestOfTheRow) {
  const RunRows runs = read_runs(
      table_of("id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
               "grad_accum,recompute,seq_parallel,flash_attn,tokens_per_s,iter_time_s,tflops_per_gpu,tflops_kind\n"
               "rate,s,dgx-h100,32,4096,32,4096,32000,64,1,1,3,,,,full,no,yes,400000,10.24,,\n"
               "mesh,s,dgx-h100,32,4096,32,4096,32000,64,2,2,1,,2,4,full,no,yes,,,300,model\n"
               "none,s,dgx-h100,32,4096,32,4096,32000,64,,,3,,2,,full,no,yes,,,300,model\n"));
  ASSERT_EQ(runs.rows.size(), 2u);
  EXPECT_EQ(runs.rows[0].global_batch, 1000);  // 400,000 x 10.24 / 4,096
  EXPECT_EQ(runs.rows[0].inferred.at("global_batch"), "1000 (tokens/s x iteration time)");
  EXPECT_EQ(runs.rows[1].global_batch, 2 * 4 * 16);
  EXPECT_EQ(runs.rows[1].inferred.at("global_batch"), "128 (micro-batch x accumulation x DP 16)");
  ASSERT_EQ(runs.skipped.size(), 1u);
  EXPECT_NE(runs.skipped[0].find("global_batch is blank"), std::string::npos) << runs.skipped[0];
  // Two rows alike but for their rates: each is planned at its own batch
  // (the plan memo keys on the batch as resolved, not the blank column).
  const Validation v = validate_runs(
      table_of("id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
               "grad_accum,recompute,seq_parallel,flash_attn,tokens_per_s,iter_time_s\n"
               "a,s,dgx-h100,32,4096,32,4096,32000,64,1,1,3,,,,full,no,yes,409600,10.24\n"
               "b,s,dgx-h100,32,4096,32,4096,32000,64,1,1,3,,,,full,no,yes,409600,20.48\n"));
  ASSERT_EQ(v.rows.size(), 2u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].config.global_batch_size, 1024);
  EXPECT_EQ(v.rows[1].config.global_batch_size, 2048);
}

// gated_mlp blank: a Llama-family name means SwiGLU; a published "no" stays.
TEST(Validate, GatedMlpFollowsTheModelFamilyWhereBlank) {
  const RunRows runs = read_runs(table_of(
      "id,source,system,model_name,layers,hidden,heads,ffn,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,gated_mlp\n"
      "a,s,dgx-h100,Llama 2 7B,32,4096,32,11008,4096,32000,8,1,1,3,8,1,full,no,yes,300,model,\n"
      "b,s,dgx-h100,GPT-3 6.7B,32,4096,32,16384,2048,50257,8,1,1,3,8,1,full,no,yes,300,model,\n"
      "c,s,dgx-h100,LLaMA-7B (ablation),32,4096,32,16384,4096,32000,8,1,1,3,8,1,full,no,yes,300,model,no\n"));
  ASSERT_EQ(runs.rows.size(), 3u);
  EXPECT_TRUE(runs.rows[0].model.gated_mlp);
  EXPECT_FALSE(runs.rows[1].model.gated_mlp);
  EXPECT_FALSE(runs.rows[2].model.gated_mlp);
}

// kv_heads blank: 8 for the families whose released models all use
// grouped-query attention with 8 (Llama 3, Llama 2 34B and 70B, Mistral,
// Mixtral), as many as the heads otherwise; a published count stays.
TEST(Validate, KvHeadsFollowTheModelFamilyWhereBlank) {
  std::string csv =
      "id,source,system,model_name,layers,hidden,heads,kv_heads,ffn,seq_len,vocab,num_gpus,tp,pp,zero_stage,"
      "global_batch,micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind\n";
  const std::pair<const char*, const char*> rows[] = {{"Llama 3.1 8B", ""},   {"L3-70B", ""},     {"llama3-405b", ""},
                                                      {"Llama-2-70b-hf", ""}, {"Llama 2 7B", ""}, {"Mistral 7B", ""},
                                                      {"GPT-3 175B", ""},     {"Llama 3 8B", "4"}};
  int i = 0;
  for (const auto& [name, kv] : rows)
    csv += fmt::format("r{},s,dgx-h100,{},32,4096,32,{},11008,4096,32000,8,1,1,3,8,1,full,no,yes,300,model\n", i++,
                       name, kv);
  const RunRows runs = read_runs(table_of(csv));
  ASSERT_EQ(runs.rows.size(), 8u) << (runs.skipped.empty() ? "" : runs.skipped[0]);
  const int expected[] = {8, 8, 8, 8, 32, 8, 32, 4};
  for (size_t r = 0; r < 8; ++r) EXPECT_EQ(runs.rows[r].model.kv_heads(), expected[r]) << runs.rows[r].model.name;
}

// Every row of the public set that publishes kv_heads gets the same count
// from its model name alone, so a set without the column prices it alike.
TEST(Validate, EveryPublishedKvHeadsOfThePublicSetFollowsFromTheName) {
  const CsvTable t = read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv");
  const RunRows given = read_runs(t);
  int gqa = 0;
  for (const RunRow& r : given.rows) gqa += r.model.kv_heads() < r.model.num_attention_heads;
  EXPECT_GT(gqa, 15);
  const int kv = t.column("kv_heads");
  ASSERT_GE(kv, 0);
  CsvTable without = t;
  for (auto& row : without.rows) row[size_t(kv)] = "";
  const RunRows inferred = read_runs(without);
  ASSERT_EQ(inferred.rows.size(), given.rows.size());
  for (size_t r = 0; r < given.rows.size(); ++r)
    EXPECT_EQ(inferred.rows[r].model.kv_heads(), given.rows[r].model.kv_heads()) << given.rows[r].id;
}

// recompute_num_layers published: full recompute of that many blocks of
// each chunk (Megatron's block method, torchtitan's every-other-layer
// checkpointing), predicted as published and faster than every block.
TEST(Validate, PublishedRecomputeLayerCountIsPredictedAsPublished) {
  const Validation v = validate_runs(table_of(
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,recompute_num_layers,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision\n"
      "half,s,dgx-a100-80gb,32,4096,32,4096,32000,8,1,1,3,8,1,full,16,no,yes,3000,bf16\n"
      "all,s,dgx-a100-80gb,32,4096,32,4096,32000,8,1,1,3,8,1,full,,no,yes,3000,bf16\n"));
  ASSERT_EQ(v.rows.size(), 2u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].config.recompute_method, RecomputeMethod::block);
  EXPECT_EQ(v.rows[0].config.recompute_num_layers, 16);
  EXPECT_EQ(v.rows[1].config.recompute_method, RecomputeMethod::uniform);
  EXPECT_GT(v.rows[0].prediction.tokens_per_s, 1.05 * v.rows[1].prediction.tokens_per_s);
}

// Published runs kept elsewhere may come without a profile column: every row
// of the public set that names its profile must get the same one from its
// framework, source and precision text alone (perf::infer_profile), so a
// blank column prices a run as its named profile does.
TEST(Validate, EveryNamedProfileOfThePublicSetIsInferredFromItsText) {
  const CsvTable t = read_csv_file(MESHTRAIN_SOURCE_DIR "/tests/data/public-runs.csv");
  int named = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& given = t.field(r, "profile");
    if (given.empty()) continue;
    ++named;
    const std::string source = t.field(r, "source") + " " + t.field(r, "source_key");  // as read_runs reads it
    EXPECT_EQ(perf::infer_profile(t.field(r, "framework"), source, t.field(r, "precision")), given)
        << t.field(r, "id") << ": " << t.field(r, "framework");
  }
  EXPECT_GT(named, 150);
}

// A row whose system column is blank, or names no system file, takes the
// system its gpu column describes and says so (the A800 and H800 their own
// files: the A100's and H100's silicon with NVLink capped at 400 GB/s
// bidirectional); a row naming neither is skipped with one line.
TEST(Validate, BlankOrUnknownSystemIsInferredFromTheGpu) {
  EXPECT_EQ(perf::infer_system("MI250X GCD (Frontier)"), "frontier");
  EXPECT_EQ(perf::infer_system("A100 80GB (Selene DGX A100)"), "dgx-a100-80gb");
  EXPECT_EQ(perf::infer_system("A100-SXM4-40GB"), "dgx-a100-40gb");
  EXPECT_EQ(perf::infer_system("H100 96GB HBM2e (500 W, Grand Teton)"), "grandteton-h100-96gb-500w");
  EXPECT_EQ(perf::infer_system("H100 80GB"), "dgx-h100");
  EXPECT_EQ(perf::infer_system("selene"), "dgx-a100-80gb");
  EXPECT_EQ(perf::infer_system("LUMI-G"), "frontier");
  EXPECT_EQ(perf::infer_system("NVIDIA Eos"), "dgx-h100");
  // The export variants: their own NVLink, the same compute.
  EXPECT_EQ(perf::infer_system("A800"), "dgx-a800-80gb");
  EXPECT_EQ(perf::infer_system("NVIDIA H800 SXM5 80GB"), "hgx-h800");
  EXPECT_LT(perf::load_system_spec("hgx-h800").links[0].bandwidth_gbs,
            perf::load_system_spec("dgx-h100").links[0].bandwidth_gbs);
  EXPECT_EQ(perf::load_system_spec("hgx-h800").compute.peak_tflops_bf16,
            perf::load_system_spec("dgx-h100").compute.peak_tflops_bf16);
  EXPECT_EQ(perf::infer_system("geosciences cluster"), "");
  EXPECT_EQ(perf::infer_system("TPU v4"), "");
  // PCIe cards have no file: the SXM node's would overstate peak and links.
  EXPECT_EQ(perf::infer_system("H100 PCIe 80GB"), "");
  EXPECT_EQ(perf::infer_system("H100 NVL"), "");
  EXPECT_EQ(perf::infer_system("A100-PCIE-40GB"), "");
  EXPECT_EQ(perf::infer_system("H100 SXM5 (not the PCIe card)"), "dgx-h100");
  const std::string header =
      "id,source,system,gpu,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,zero_stage,global_batch,"
      "micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind\n";
  auto line = [](const std::string& id, const std::string& system, const std::string& gpu) {
    return id + ",s," + system + "," + gpu + ",48,6144,48,2048,50688,16,1,8,,0,640,1,full,no,yes,73.5,hardware\n";
  };
  std::istringstream in(header + line("named", "frontier", "") + line("blank", "", "MI250X GCD") +
                        line("unknown", "olcf-frontier", "MI250X") + line("none", "", "TPU v4"));
  const Validation v = validate_runs(read_csv(in));
  ASSERT_EQ(v.rows.size(), 3u);
  EXPECT_EQ(v.rows[0].system_from, "");
  for (int i : {1, 2}) {
    EXPECT_EQ(v.rows[i].system_from, "gpu") << v.rows[i].id;
    EXPECT_EQ(v.rows[i].system, "frontier");
    EXPECT_DOUBLE_EQ(v.rows[i].prediction.step_time_s, v.rows[0].prediction.step_time_s);
  }
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("column gpu ('TPU v4') names no device"), std::string::npos) << v.skipped[0];
}

// A blank ffn of a gated MLP follows the parameter count, the published one
// or the name's, through Llama's multipliers; a count the plain 8h/3 rule
// nearly gives is that rule; a plain MLP stays 4h.
TEST(Validate, BlankGatedFfnFollowsTheParameterCount) {
  const std::string header =
      "id,source,system,model_name,params_b,layers,hidden,heads,kv_heads,ffn,seq_len,vocab,"
      "num_gpus,tp,pp,zero_stage,global_batch,micro_batch,recompute,tokens_per_s_per_gpu\n";
  auto row = [](const std::string& id, const std::string& name, const std::string& params, int layers, int hidden,
                int heads, int kv, int vocab) {
    return fmt::format("{},s,dgx-a100-80gb,{},{},{},{},{},{},,4096,{},8,1,1,3,64,1,full,1000\n", id, name, params,
                       layers, hidden, heads, kv, vocab);
  };
  const tune::RunRows runs = tune::read_runs(table_of(
      header + row("l2-7b", "Llama 2 7B", "6.74", 32, 4096, 32, 32, 32000) +
      row("l2-70b", "Llama 2 70B", "69.0", 80, 8192, 64, 8, 32000) +
      row("l3-8b", "L3-8B", "", 32, 4096, 32, 8, 128256) +
      row("l3-405b", "Llama 3 405B", "405", 126, 16384, 128, 8, 128256) +
      row("unsized", "Llama", "", 32, 4096, 32, 32, 32000) + row("gpt", "GPT 175B", "175", 96, 12288, 96, 96, 51200)));
  ASSERT_EQ(runs.rows.size(), 6u) << (runs.skipped.empty() ? "" : runs.skipped[0]);
  EXPECT_EQ(runs.rows[0].model.ffn(), 11008);
  EXPECT_EQ(runs.rows[1].model.ffn(), 28672);
  EXPECT_EQ(runs.rows[2].model.ffn(), 14336);
  EXPECT_EQ(runs.rows[3].model.ffn(), 52992);  // 53,248 from the exact count (405.9 billion)
  EXPECT_EQ(runs.rows[4].model.ffn(), 11008);
  EXPECT_EQ(runs.rows[5].model.ffn(), 4 * 12288);
  const tune::RunRows odd =
      tune::read_runs(table_of(header + row("huge", "Llama 99999999999999999999B", "", 32, 4096, 32, 32, 32000) +
                               row("vast", "Llama", "1e30", 32, 4096, 32, 32, 32000)));
  ASSERT_EQ(odd.rows.size(), 2u);
  EXPECT_EQ(odd.rows[0].model.ffn(), 11008);
  EXPECT_EQ(odd.rows[1].model.ffn(), 11008);
}

// An interconnect column's words give a node's network: rates as written
// (per node, per GPU, counted links), counted links of a named kind, and
// nothing from the links inside a node.
TEST(SystemMatch, InterconnectTextGivesTheNodeNetwork) {
  auto gbs = [](const std::string& text) { return perf::read_node_network(text, 8).node_gbs; };
  EXPECT_DOUBLE_EQ(gbs("1600 Gbps RoCE between nodes (README heading)"), 200);
  EXPECT_DOUBLE_EQ(gbs("NVSwitch; 8x HDR InfiniBand (Azure NDm A100 v4, inferred)"), 200);
  EXPECT_DOUBLE_EQ(gbs("NVLink in node (inferred); eight 200 Gb/s NICs per server, multi-rail"), 200);
  EXPECT_DOUBLE_EQ(gbs("NVLink in node; RoCE 400 Gb/s per GPU (Arista 7800 / Minipack2 Clos)"), 400);
  EXPECT_DOUBLE_EQ(gbs("Infinity Fabric 200/100/50 GB/s in node; 4x25 GB/s Slingshot-11 per node"), 100);
  EXPECT_DOUBLE_EQ(gbs("NVLink/NVSwitch in node; 4 ConnectX-6 HCAs per node, 2 InfiniBand spine switches"), 100);
  EXPECT_DOUBLE_EQ(gbs("400 Gbps inter-node, GPUDirect RDMA"), 50);
  EXPECT_DOUBLE_EQ(gbs("NVLink in node; 4 Omni-Path links per node (Omni-Path Architecture)"), 50);
  EXPECT_DOUBLE_EQ(gbs("2 x 400 Gb/s NDR per node"), 100);
  EXPECT_DOUBLE_EQ(gbs("Slingshot-11, 4 NICs per node at 200 Gb/s"), 100);
  EXPECT_DOUBLE_EQ(gbs("8\u00d7HDR InfiniBand"), 200);
  EXPECT_DOUBLE_EQ(gbs("InfiniBand HDR (200 Gb/s) x 8 per node"), 200);
  EXPECT_DOUBLE_EQ(gbs("4 x NDR400"), 200);
  EXPECT_DOUBLE_EQ(gbs("NVLink 600 GB/s per GPU; 8x200 Gb/s HDR"), 200);
  EXPECT_DOUBLE_EQ(gbs("NVLink 3.0 (600 GB/s), InfiniBand HDR 200 Gb/s"), 0);
  EXPECT_DOUBLE_EQ(gbs("NVLink 600 GB/s and 8 HDR NICs"), 0);  // 4,800 GB/s: a misreading
  // Long digit runs are no counts and no rates (no overflow).
  EXPECT_DOUBLE_EQ(gbs("123456789012345678901234567890 Gbps inter-node"), 0);
  EXPECT_DOUBLE_EQ(gbs("99999999999999 NICs per node at 200 Gb/s"), 0);
  EXPECT_DOUBLE_EQ(gbs("200 Gb/s x 99999999999999 per node"), 25);
  EXPECT_DOUBLE_EQ(gbs("NVLink/NVSwitch; HDR InfiniBand"), 0);
  EXPECT_DOUBLE_EQ(gbs("NVLink 600 GB/s in node"), 0);
  EXPECT_DOUBLE_EQ(gbs("200 Gb/s per NIC"), 0);
  EXPECT_DOUBLE_EQ(gbs("not stated in the README"), 0);
  EXPECT_EQ(perf::read_node_network("4 Omni-Path links", 8).technology, "omni-path");
  EXPECT_EQ(perf::read_node_network("HDR InfiniBand", 8).technology, "infiniband");
  EXPECT_EQ(perf::read_node_network("one hundred nodes", 8).technology, "");
}

// A generic node file named for a cluster whose row says otherwise takes the
// file of the same device with the stated network or memory, or where no
// file has that network the named file with its network scaled to it; a GPU
// text naming another device takes that device's file; agreeing or silent
// text keeps the named file.
TEST(SystemMatch, RowTextRefinesAGenericSystemName) {
  auto match = [](const std::string& sys, const std::string& gpu, const std::string& ic) {
    const perf::SystemMatch m = perf::match_system(sys, gpu, ic);
    return m.name + (m.from.empty() ? "" : " (" + m.from + ")");
  };
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB", "NVLink 4; 4 Omni-Path links per node"),
            "jeanzay-a100-80gb (interconnect)");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB", "Omni-Path"), "jeanzay-a100-80gb (interconnect)");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB", "400 Gbps inter-node, GPUDirect RDMA"),
            "ibm-a100-80gb-400g (interconnect)");
  EXPECT_EQ(match("dgx-a100-40gb", "A100-SXM4-40GB", "4 ConnectX-6 HCAs per node"),
            "hgx-a100-40gb-4nic (interconnect)");
  EXPECT_EQ(match("dgx-h100", "H100 80GB", "800 Gbps inter-node"), "ibm-h100-80gb-800g (interconnect)");
  EXPECT_EQ(match("dgx-h100", "H100 96GB HBM2e (500 W)", "RDMA 400 Gb/s per GPU"), "grandteton-h100-96gb-500w (gpu)");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 40GB", ""), "dgx-a100-40gb (gpu)");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB (Jean Zay)", ""), "jeanzay-a100-80gb (gpu)");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB", "IBM cluster, GPUDirect RDMA"), "ibm-a100-80gb-400g (interconnect)");
  EXPECT_EQ(match("dgx-h100", "H100 80GB", "IBM cluster"), "ibm-h100-80gb-800g (interconnect)");
  EXPECT_EQ(match("ibm-h100-80gb-800g", "DGX H100", ""), "ibm-h100-80gb-800g");
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB (Selene)", "8x HDR InfiniBand"), "dgx-a100-80gb");
  EXPECT_EQ(match("dgx-a100-80gb", "A100", "HDR InfiniBand"), "dgx-a100-80gb");
  EXPECT_EQ(match("jeanzay-a100-80gb", "A100 80GB", "4 Omni-Path links per node"), "jeanzay-a100-80gb");
  EXPECT_EQ(match("ibm-a100-80gb-400g", "A100 80GB", "400 Gbps inter-node"), "ibm-a100-80gb-400g");
  EXPECT_EQ(match("", "A100 80GB", "4 Omni-Path links per node"), "jeanzay-a100-80gb (interconnect)");
  EXPECT_EQ(match("", "TPU v4", "ICI"), "");
  // The GPU text names another device, or the export variant with slower
  // NVLink: its file. The variant's file named beside the base device's text,
  // or a measured machine's file, is kept.
  EXPECT_EQ(match("frontier", "MI300X", ""), "mi300x-node (gpu)");
  EXPECT_EQ(match("dgx-h100", "AMD Instinct MI300X", ""), "mi300x-node (gpu)");
  EXPECT_EQ(match("dgx-a100-80gb", "H100 80GB", ""), "dgx-h100 (gpu)");
  EXPECT_EQ(match("dgx-h100", "H800 80GB", ""), "hgx-h800 (gpu)");
  EXPECT_EQ(match("dgx-a100-80gb", "A800 80GB", ""), "dgx-a800-80gb (gpu)");
  EXPECT_EQ(match("hgx-h800", "H100 80GB", ""), "hgx-h800");
  EXPECT_EQ(match("local", "H100 80GB", ""), "local");
  // No file of the device has the stated network: the named one, scaled.
  EXPECT_EQ(match("dgx-a100-80gb", "A100 80GB", "3 x 100 Gb/s Ethernet per node"), "dgx-a100-80gb@37.5 (interconnect)");
  EXPECT_EQ(match("dgx-a100-40gb", "A100 40GB", "4x100 Gbps EFA per node"), "dgx-a100-40gb@50 (interconnect)");
  const perf::SystemSpec scaled = perf::load_system_spec("dgx-a100-40gb@50");
  const perf::SystemSpec file = perf::load_system_spec("dgx-a100-40gb");
  EXPECT_DOUBLE_EQ(scaled.network.node_bandwidth_gbs(), 50);
  EXPECT_EQ(scaled.network.nics_per_node, file.network.nics_per_node);
  EXPECT_EQ(scaled.memory.hbm_bytes, file.memory.hbm_bytes);
  EXPECT_EQ(scaled.name, "dgx-a100-40gb@50");
  EXPECT_TRUE(perf::system_exists("dgx-a100-40gb@50"));
  EXPECT_FALSE(perf::system_exists("dgx-a100-40gb@fast"));
  EXPECT_FALSE(perf::system_exists("dgx-a100-40gb@-5"));
  EXPECT_FALSE(perf::system_exists("no-such-system@50"));
  // A NUL byte would name the presets' folder to the OS: no file, an Error;
  // as text the name still says Frontier.
  const std::string nul("\0\0frontier", 10);
  EXPECT_FALSE(perf::system_exists(nul));
  EXPECT_THROW(perf::load_system_spec(nul), meshtrain::Error);
  EXPECT_EQ(perf::match_system(nul, "", "").name, "frontier");
  // A name the OS refuses (longer than a file name may be; a file used as a
  // folder) is no file either, not a filesystem exception.
  const std::string long_name(300, 'x');
  EXPECT_FALSE(perf::system_exists(long_name));
  EXPECT_FALSE(perf::system_exists(long_name + "@50"));
  EXPECT_THROW(perf::load_system_spec(long_name), meshtrain::Error);
  const std::string file_as_folder = MESHTRAIN_SOURCE_DIR "/configs/systems/frontier.json/x";
  EXPECT_FALSE(perf::system_exists(file_as_folder));
  EXPECT_THROW(perf::load_system_spec(file_as_folder), meshtrain::Error);
  EXPECT_THROW(load_model_config(long_name), meshtrain::Error);
}

// Labelled with the DGX file, a Jean Zay row that states its Omni-Path links
// is priced with Jean Zay's network, as if it had named that file.
TEST(Validate, StatedInterconnectPricesTheClusterItDescribes) {
  const std::string header =
      "id,source,system,gpu,interconnect,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,dp,zero_stage,"
      "global_batch,micro_batch,recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,profile\n";
  auto line = [](const std::string& id, const std::string& system, const std::string& ic) {
    return id + ",s," + system + ",A100 80GB," + ic +
           ",24,4096,32,2048,50304,64,1,1,64,1,64,1,full,no,no,100,hardware,megatron-deepspeed-2021\n";
  };
  const Validation v = validate_runs(table_of(header + line("named", "jeanzay-a100-80gb", "") +
                                              line("labelled", "dgx-a100-80gb", "4 Omni-Path links per node") +
                                              line("dgx", "dgx-a100-80gb", "")));
  ASSERT_EQ(v.rows.size(), 3u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[1].system, "jeanzay-a100-80gb");
  EXPECT_EQ(v.rows[1].system_from, "interconnect");
  EXPECT_DOUBLE_EQ(v.rows[1].prediction.step_time_s, v.rows[0].prediction.step_time_s);
  EXPECT_GT(v.rows[1].prediction.step_time_s, 1.05 * v.rows[2].prediction.step_time_s);
}

// A blank recompute under a profile whose published runs all checkpoint
// every block (Megatron-LM 2021, Megatron-DeepSpeed) is filled with that,
// although a 1.3B model fits without it and runs faster so; a profile
// without such a recipe still takes the fastest choice, and a published
// "none" stays.
TEST(Validate, BlankRecomputeTakesTheRecipeOfItsFramework) {
  auto line = [](const std::string& id, const std::string& recompute, const std::string& profile) {
    return id + ",s,dgx-a100-80gb,24,2048,16,8192,2048,50304,8,1,1,0,64,2," + recompute + ",no,no,3000,fp16," +
           profile + "\n";
  };
  const Validation v = validate_runs(table_of(std::string(kProfileHeader) + line("mds", "", "megatron-deepspeed-2021") +
                                              line("lm", "", "megatron-lm-2021") + line("ds", "", "fsdp-2022") +
                                              line("none", "none", "megatron-deepspeed-2021")));
  ASSERT_EQ(v.rows.size(), 4u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].filled.at("recompute"), "full");
  EXPECT_EQ(v.rows[1].filled.at("recompute"), "full");
  EXPECT_EQ(v.rows[2].filled.at("recompute"), "none");
  EXPECT_EQ(v.rows[3].config.recompute, Recompute::none);
  EXPECT_TRUE(v.rows[3].prediction.fits);
  EXPECT_GT(v.rows[3].prediction.tokens_per_s, 1.1 * v.rows[0].prediction.tokens_per_s);
  EXPECT_EQ(perf::framework_profile("megatron-core-2024").recipe_recompute, std::nullopt);
}

// A blank stage_counting under BigScience's BF16 fork counts the embedding
// and the head as layers, as every run published with it did (BLOOM's 70
// layers on 12 stages); a published counting stays, and the 2021 profile
// keeps blocks only.
TEST(Validate, BlankStageCountingTakesTheRecipeOfItsFramework) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,precision,profile,stage_counting\n";
  auto line = [](const std::string& id, const std::string& profile, const std::string& counting) {
    return id + ",s,jeanzay-a100-80gb,70,14336,112,2048,250880,384,4,12,1,2048,2,full,no,no,150,hardware,bf16," +
           profile + "," + counting + "\n";
  };
  const Validation v = validate_runs(table_of(header + line("bf16-fork", "megatron-deepspeed-2022", "") +
                                              line("named", "megatron-deepspeed-2022", "transformer") +
                                              line("2021", "megatron-deepspeed-2021", "")));
  ASSERT_EQ(v.rows.size(), 3u) << (v.skipped.empty() ? "" : v.skipped[0]);
  EXPECT_EQ(v.rows[0].config.stage_counting, StageCounting::embedding_head);
  EXPECT_EQ(v.rows[0].filled.at("stage_counting"), "embedding-head");
  EXPECT_EQ(v.rows[1].config.stage_counting, StageCounting::transformer);
  EXPECT_EQ(v.rows[2].config.stage_counting, StageCounting::transformer);
  EXPECT_EQ(v.rows[2].filled.count("stage_counting"), 0u);
  EXPECT_NE(v.rows[0].prediction.step_time_s, v.rows[1].prediction.step_time_s);
}

// A published TFLOP/s without its kind is read as its profile publishes
// them: hardware FLOPs (recompute counted) for Megatron-DeepSpeed, model
// FLOPs for Megatron-Core; a kind that is neither is refused.
TEST(Validate, BlankTflopsKindFollowsTheProfile) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,tflops_per_gpu,tflops_kind,precision,profile\n";
  auto line = [](const std::string& id, const std::string& kind, const std::string& profile) {
    return id + ",s,dgx-a100-80gb,24,2048,16,2048,50304,8,1,1,0,64,2,full,no,no,150," + kind + ",fp16," + profile +
           "\n";
  };
  const Validation v = validate_runs(table_of(
      header + line("mds", "", "megatron-deepspeed-2021") + line("mds-model", "model", "megatron-deepspeed-2021") +
      line("core", "", "megatron-core-2024") + line("odd", "achieved", "megatron-deepspeed-2021")));
  ASSERT_EQ(v.rows.size(), 3u);
  EXPECT_EQ(v.rows[0].metric, "hardware_tflops_per_gpu");
  EXPECT_TRUE(v.rows[0].tflops_kind_inferred);
  EXPECT_EQ(v.rows[1].metric, "model_tflops_per_gpu");
  EXPECT_FALSE(v.rows[1].tflops_kind_inferred);
  EXPECT_EQ(v.rows[2].metric, "model_tflops_per_gpu");
  EXPECT_FALSE(v.rows[2].tflops_kind_inferred);
  // Full recompute: four passes a block counted against three.
  EXPECT_GT(v.rows[0].predicted, 1.2 * v.rows[1].predicted);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("tflops_kind: 'achieved' is neither hardware nor model"), std::string::npos)
      << v.skipped[0];
}

// Tables print activation checkpointing as yes or no: full or none.
TEST(Validate, RecomputeReadsYesAndNo) {
  auto line = [](const std::string& id, const std::string& recompute) {
    return id + ",s,dgx-a100-80gb,24,2048,16,8192,2048,50304,8,1,1,0,64,2," + recompute +
           ",no,no,3000,bf16,megatron-core-2024\n";
  };
  const RunRows runs = read_runs(table_of(std::string(kProfileHeader) + line("yes", "Yes") + line("off", "off") +
                                          line("sel", "selective") + line("odd", "sometimes")));
  ASSERT_EQ(runs.rows.size(), 3u);
  EXPECT_EQ(runs.rows[0].fallback.recompute, Recompute::full);
  EXPECT_EQ(runs.rows[1].fallback.recompute, Recompute::none);
  EXPECT_EQ(runs.rows[2].fallback.recompute, Recompute::selective);
  ASSERT_EQ(runs.skipped.size(), 1u);
  EXPECT_NE(runs.skipped[0].find("column recompute: 'sometimes' is not none, selective, full, yes or no"),
            std::string::npos)
      << runs.skipped[0];
}

// Published figures as tables print them: thousands separators, and a
// percentage column with its sign; a decimal comma is no number.
TEST(Validate, FiguresReadThousandsSeparatorsAndPercentSigns) {
  const std::string header =
      "id,source,system,layers,hidden,heads,seq_len,vocab,num_gpus,tp,pp,zero_stage,global_batch,micro_batch,"
      "recompute,seq_parallel,flash_attn,precision,profile,tokens_per_s_per_gpu,mfu_pct\n";
  auto line = [](const std::string& id, const std::string& tokens, const std::string& mfu) {
    return id + ",s,dgx-a100-80gb,24,2048,16,2048,50304,8,1,1,0,\"1,024\",2,full,no,no,bf16,megatron-core-2024," +
           tokens + "," + mfu + "\n";
  };
  const RunRows runs = read_runs(table_of(header + line("sep", "\"12,345.5\"", "") + line("pct", "", "47.8%") +
                                          line("comma", "\"1,5\"", "") + line("odd", "\"12,34\"", "")));
  ASSERT_EQ(runs.rows.size(), 2u);
  EXPECT_EQ(runs.rows[0].global_batch, 1024);
  EXPECT_DOUBLE_EQ(runs.rows[0].reported, 12345.5);
  EXPECT_EQ(runs.rows[1].metric, "mfu_pct");
  EXPECT_DOUBLE_EQ(runs.rows[1].reported, 47.8);
  ASSERT_EQ(runs.skipped.size(), 2u);
  EXPECT_NE(runs.skipped[0].find("'1,5' is not a number"), std::string::npos) << runs.skipped[0];
  EXPECT_NE(runs.skipped[1].find("'12,34' is not a number"), std::string::npos) << runs.skipped[1];
}

}  // namespace
}  // namespace meshtrain::tune

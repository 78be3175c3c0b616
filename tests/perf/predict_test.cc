// predict: the fields of the contract are consistent with each other, FLOPs
// follow the published convention, invalid configs name the failed
// constraint, and the system files load.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/perf/collective.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/perf/time_model.h"

namespace meshtrain::perf {
namespace {

ParallelConfig frontier_175b() {
  ParallelConfig p;
  p.tp = 4;
  p.pp = 16;
  p.dp = 2;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 640;
  p.recompute = Recompute::full;
  p.bf16 = true;
  return p;
}

// frontier_175b's settings on another mesh and global batch.
ParallelConfig frontier_175b_on(int tp, int pp, int dp, int global_batch) {
  ParallelConfig p = frontier_175b();
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.global_batch_size = global_batch;
  return p;
}

TEST(Predict, FieldsAreConsistent) {
  const ModelConfig m = load_model_config("175b");
  const SystemSpec s = load_system_spec("frontier");
  for (int vpp : {1, 2}) {
    ParallelConfig p = frontier_175b();
    p.vpp = vpp;
    p.schedule = vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
    const Prediction r = predict(m, p, s, 128);
    EXPECT_TRUE(r.fits);
    EXPECT_NEAR(r.tokens_per_s * r.step_time_s, 640.0 * 2048, 1e-6 * 640 * 2048);
    EXPECT_NEAR(r.time.total(), r.step_time_s, 1e-9 * r.step_time_s);
    EXPECT_NEAR(r.mfu, r.model_tflops_per_gpu / 191.5, 1e-12);
    EXPECT_GT(r.hardware_tflops_per_gpu, r.model_tflops_per_gpu);
    EXPECT_GT(r.time.tp_comm, 0);
    EXPECT_GT(r.time.bubble, 0);
    EXPECT_GT(r.bubble_fraction, 0);
    EXPECT_LT(r.bubble_fraction, 0.5);
    EXPECT_NEAR(r.memory.total(), r.memory.parameters + r.memory.gradients + r.memory.optimizer +
                                      r.memory.activations + r.memory.comm_buffers + r.memory.workspace, 1);
    const nlohmann::json j = r;
    for (const char* k : {"fits", "memory_bytes_per_gpu", "step_time_s", "tokens_per_s", "model_tflops_per_gpu",
                          "hardware_tflops_per_gpu", "mfu", "bubble_fraction", "time_s", "comm_bytes_per_gpu"})
      EXPECT_TRUE(j.contains(k)) << k;
    for (const char* k : {"parameters", "gradients", "optimizer", "activations", "comm_buffers", "workspace", "total"})
      EXPECT_TRUE(j["memory_bytes_per_gpu"].contains(k)) << k;
    for (const char* k : {"compute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer"})
      EXPECT_TRUE(j["time_s"].contains(k)) << k;
    for (const char* k : {"tp", "pp", "dp"}) EXPECT_TRUE(j["comm_bytes_per_gpu"].contains(k)) << k;
  }
}

TEST(Predict, InterleavingShrinksTheBubble) {
  const ModelConfig m = load_model_config("175b");
  const SystemSpec s = load_system_spec("frontier");
  ParallelConfig p = frontier_175b();
  p.global_batch_size = 64;  // 32 micro-batches: a visible bubble
  const Prediction one = predict(m, p, s, 128);
  p.vpp = 3;
  p.schedule = ScheduleKind::interleaved;
  const Prediction three = predict(m, p, s, 128);
  EXPECT_LT(three.time.bubble, one.time.bubble);
}

TEST(Predict, OverlapHidesDataParallelTime) {
  const ModelConfig m = load_model_config("22b");
  const SystemSpec s = load_system_spec("dgx-h100");
  ParallelConfig p;
  p.tp = 8;
  p.dp = 16;
  p.zero_stage = 1;
  p.global_batch_size = 64;
  p.bf16 = true;
  p.sequence_parallel = true;
  const Prediction plain = predict(m, p, s, 128);
  PerfOptions o;
  o.overlap_grad_reduce = true;
  o.overlap_param_gather = true;
  const Prediction overlapped = predict(m, p, s, 128, o);
  EXPECT_GT(plain.time.dp_comm, 0);
  // (Overlapped, the collectives run per 40M-element bucket, each at its
  // ring step's efficiency: not all of the one-call time is saved.)
  EXPECT_LT(overlapped.time.dp_comm, 0.8 * plain.time.dp_comm);
  EXPECT_LT(overlapped.step_time_s, plain.step_time_s);
  EXPECT_EQ(overlapped.comm_bytes.dp, plain.comm_bytes.dp);  // same bytes, less exposed
  // What is hidden still costs the compute it hides behind the collective's
  // share of the SMs: without that share, less shows.
  SystemSpec free_overlap = s;
  free_overlap.compute.collective_sm_share = 0;
  ASSERT_GT(s.compute.collective_sm_share, 0);
  const Prediction free = predict(m, p, free_overlap, 128, o);
  EXPECT_LT(free.time.dp_comm, 0.7 * plain.time.dp_comm);
  EXPECT_LT(free.time.dp_comm, overlapped.time.dp_comm);
  // ZeRO-3 gathers weights for every micro-batch: more bytes than ZeRO-1.
  p.zero_stage = 3;
  EXPECT_GT(predict(m, p, s, 128).comm_bytes.dp, plain.comm_bytes.dp);
}

TEST(Predict, ModelFlopsFollowNarayanan) {
  const ModelConfig m = load_model_config("175b");
  ParallelConfig p = frontier_175b();
  const double B = p.global_batch_size, s = m.seq_length, l = m.num_layers, h = m.hidden_size,
               V = double(m.padded_vocab());
  const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  const double tokens = B * s;
  EXPECT_NEAR(step_flops(m, p, tokens).model / model, 1.0, 1e-12);
  // Full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
  const double hw = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(step_flops(m, p, tokens).hardware / hw, 1.0, 1e-12);
  p.recompute = Recompute::none;
  EXPECT_EQ(step_flops(m, p, tokens).hardware, step_flops(m, p, tokens).model);
}

TEST(Predict, InvalidConfigsNameTheConstraint) {
  const ModelConfig m = load_model_config("175b");
  const SystemSpec s = load_system_spec("frontier");
  auto message = [&](ParallelConfig p, int gpus) {
    try {
      predict(m, p, s, gpus);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ParallelConfig p = frontier_175b();
  p.tp = 5;
  p.dp = 1;
  EXPECT_NE(message(p, 80).find("num-attention-heads"), std::string::npos);
  p = frontier_175b();
  EXPECT_NE(message(p, 64).find("world size"), std::string::npos);
  p.global_batch_size = 3;
  EXPECT_NE(message(p, 128).find("global-batch-size"), std::string::npos);
  p = frontier_175b();
  p.pp = 7;
  p.dp = 1;
  p.tp = 1;
  EXPECT_NE(message(p, 7).find("num-layers"), std::string::npos);
  p = frontier_175b();
  p.vpp = 2;
  p.schedule = ScheduleKind::interleaved;
  p.global_batch_size = 20;  // 10 micro-batches, not a multiple of pp = 16
  EXPECT_NE(message(p, 128).find("multiple of pipeline-model-parallel-size"), std::string::npos);
  p = frontier_175b();
  p.zero_stage = 4;
  EXPECT_NE(message(p, 128).find("zero-stage"), std::string::npos);
}

TEST(Collective, RingFactorsAndLinkClasses) {
  const SystemSpec s = load_system_spec("frontier");
  // TP of 2 sits on one MI250X, TP of 8 spans the node, DP with stride 8 crosses nodes.
  EXPECT_EQ(place_group(s, 2, 1).link->name, "package");
  EXPECT_EQ(place_group(s, 4, 1).link->name, "node");
  EXPECT_EQ(place_group(s, 8, 1).nodes, 1);
  EXPECT_EQ(place_group(s, 4, 8).nodes, 4);
  EXPECT_EQ(place_group(s, 4, 8).link, nullptr);
  EXPECT_EQ(place_group(s, 16, 2).ranks_per_node, 4);
  const LinkClass& node = *place_group(s, 8, 1).link;
  const double bytes = 1e9;
  const double bw = node.bandwidth_gbs * 1e9 * node.efficiency(bytes);
  EXPECT_NEAR(collective_time(s, Collective::all_reduce, bytes, 8, 1), 14 * node.latency_s + bytes * 2 * 7 / 8 / bw,
              1e-12);
  EXPECT_NEAR(collective_time(s, Collective::all_gather, bytes, 8, 1), 7 * node.latency_s + bytes * 7 / 8 / bw, 1e-12);
  EXPECT_EQ(collective_time(s, Collective::all_reduce, bytes, 1, 1), 0);
  // Across nodes the NICs are shared by the node's 8 devices.
  const double across = collective_time(s, Collective::all_reduce, bytes, 2, 8);
  const double share = 100e9 / 8 * s.network.efficiency(bytes);
  EXPECT_NEAR(across, 2 * s.network.latency_s + bytes / share, 1e-12);
  // Hierarchical: 16 ranks with stride 1 are 8 per node on 2 nodes. Inside
  // each node a reduce-scatter and an all-gather; across, each of the 8
  // ranks all-reduces its eighth of the bytes with its peer, all 8 at once
  // on the node's NICs (1/8 of them each): bytes/8 x 2(2-1)/2 / share.
  const double hier = collective_time(s, Collective::all_reduce, bytes, 16, 1);
  const double inside = collective_time(s, Collective::reduce_scatter, bytes, 8, 1) +
                        collective_time(s, Collective::all_gather, bytes, 8, 1);
  const double share8 = 100e9 / 8 * s.network.efficiency(bytes / 8);
  EXPECT_NEAR(hier, inside + 2 * s.network.latency_s + bytes / 8 / share8, 1e-12);
  EXPECT_GT(p2p_time(s, bytes, 0, 8), p2p_time(s, bytes, 0, 2));
  EXPECT_GT(p2p_time(s, bytes, 0, 2), p2p_time(s, bytes, 0, 1));
  // An all-gather over nodes is a ring whose steps move 1/nodes of a rank's
  // bytes: over 2 nodes (the network curve's nccl-tests set-up) at the
  // curve's point for those bytes, over 128 nodes at the point for 1/64 of
  // them. One rank a node (stride 8): no hops inside a node.
  const double b = 64e6;
  ASSERT_EQ(s.network.ring_step_s, 0);  // no measured step: the sum of the ring's network hops
  auto network_part = [&](int nodes) {
    return collective_time(s, Collective::all_gather, b, nodes, 8) - (nodes - 1) * s.network.latency_s;
  };
  const double nic = 100e9 / 8;
  EXPECT_NEAR(network_part(2), b / 2 / (nic * s.network.efficiency(b)), 1e-12);
  EXPECT_NEAR(network_part(128), b * 127 / 128 / (nic * s.network.efficiency(b / 64)), 1e-12);
  ASSERT_LT(s.network.efficiency(b / 64), s.network.efficiency(b));
}

TEST(SystemSpec, EveryDescribedSystemLoadsAndCitesSources) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(MESHTRAIN_SOURCE_DIR) / "configs" / "systems")) {
    if (e.path().extension() != ".json") continue;
    const SystemSpec s = load_system_spec(e.path().string());
    EXPECT_EQ(s.name, e.path().stem().string());
    EXPECT_FALSE(s.sources.empty()) << s.name;
    EXPECT_GT(s.matmul_efficiency(true)(4096), 0) << s.name;
    ++n;
  }
  EXPECT_GE(n, 6);
  EXPECT_THROW(load_system_spec("no-such-system"), Error);
}

// Wave quantization: tiles of 256 x 128 (either way) or 128 x 128 run 108
// at a time; the best choice's share of useful tile slots.
TEST(SystemSpec, WaveQuantizationCountsIdleTileSlots) {
  SystemSpec s = load_system_spec("dgx-a100-80gb");
  s.compute.gemm_units = 108;
  s.compute.gemm_tile = {256, 128};
  EXPECT_DOUBLE_EQ(s.gemm_wave_utilization(256 * 9, 128 * 12), 1.0);  // 108 tiles: one full wave
  // 2048 x 1792: 112 large tiles (2 waves, 112 / 216) or 224 square ones
  // (3 waves, 224 / 324): the square tiles waste less.
  EXPECT_NEAR(s.gemm_wave_utilization(2048, 1792), 224.0 / 324, 1e-12);
  // A partial tile counts its padding as waste: 100 x 100 in one 128 x 128 tile.
  EXPECT_NEAR(s.gemm_wave_utilization(100, 100), 1e4 / (108.0 * 128 * 128), 1e-12);
  s.compute.gemm_units = 0;
  EXPECT_DOUBLE_EQ(s.gemm_wave_utilization(2048, 1792), 1.0);
  // Priced in the step: a layout whose matmul outputs fill the waves badly
  // runs its compute slower when the waves are modelled.
  const ModelConfig m = load_model_config("175b");
  const ParallelConfig p = frontier_175b_on(8, 8, 1, 64);
  SystemSpec waves = s;
  waves.compute.gemm_units = 108;
  const Prediction off = predict(m, p, s, 64), on = predict(m, p, waves, 64);
  EXPECT_GT(on.time.compute, 1.02 * off.time.compute);
  EXPECT_LT(on.time.compute, 1.6 * off.time.compute);
  nlohmann::json j = waves;
  EXPECT_EQ(j.get<SystemSpec>().compute.gemm_units, 108);
  waves.compute.gemm_units = -1;
  EXPECT_THROW(waves.validate(), Error);
}

// The output layer's GEMMs stand alone: they run at the device's measured
// bare-GEMM ceiling (the fitted curve's shape, scaled to it), while the
// blocks keep the fitted curve. Logits forward, data and weight gradients:
// three GEMMs of 2 n h v FLOPs each on the last stage, nothing else moves.
TEST(TimeModel, OutputLayerGemmsRunAtTheBareGemmCeiling) {
  SystemSpec s = load_system_spec("dgx-a100-80gb");
  s.compute.gemm_units = 0;  // no waves: the three GEMMs price alike
  ModelConfig m = load_model_config("22b");
  m.vocab_size = 250880;
  ParallelConfig p = frontier_175b_on(2, 4, 1, 16);
  p.micro_batch_size = 2;
  PerfCache cache;
  SystemSpec bare = s, fitted = s;
  bare.compute.matmul_ceiling_bf16 = 0.859;
  fitted.compute.matmul_ceiling_bf16 = 0;
  const StepCosts a = step_costs(m, p, fitted, PerfOptions{}, cache);
  const StepCosts b = step_costs(m, p, bare, PerfOptions{}, cache);
  const double n = 2.0 * m.seq_length, h = m.hidden_size, v = double(m.padded_vocab()) / p.tp;
  const Curve& c = s.matmul_efficiency(true);
  const double top = c.points().back().second, e0 = c(n), e1 = 0.859 * c(n) / top;
  ASSERT_GT(e1, e0);
  const double saved = 3 * 2 * n * h * v / s.peak_flops(true) * (1 / e0 - 1 / e1);
  EXPECT_NEAR(a.chunk(3, 0).forward_compute_s - b.chunk(3, 0).forward_compute_s, saved, 1e-9 * saved);
  for (int st = 0; st < 3; ++st) {
    EXPECT_DOUBLE_EQ(b.chunk(st, 0).forward_compute_s, a.chunk(st, 0).forward_compute_s);
    EXPECT_DOUBLE_EQ(b.chunk(st, 0).backward_compute_s, a.chunk(st, 0).backward_compute_s);
  }
  // A ceiling below the curve never slows the GEMM; fp32 has no ceiling.
  SystemSpec low = s;
  low.compute.matmul_ceiling_bf16 = 0.1;
  EXPECT_DOUBLE_EQ(step_costs(m, p, low, PerfOptions{}, cache).chunk(3, 0).forward_compute_s,
                   a.chunk(3, 0).forward_compute_s);
  p.bf16 = false;
  EXPECT_DOUBLE_EQ(step_costs(m, p, bare, PerfOptions{}, cache).chunk(3, 0).forward_compute_s,
                   step_costs(m, p, fitted, PerfOptions{}, cache).chunk(3, 0).forward_compute_s);
  // Read, written and checked as a fraction of the peak.
  nlohmann::json j = bare;
  EXPECT_DOUBLE_EQ(j.get<SystemSpec>().compute.matmul_ceiling_bf16, 0.859);
  bare.compute.matmul_ceiling_bf16 = 1.2;
  EXPECT_THROW(bare.validate(), Error);
  bare.compute.matmul_ceiling_bf16 = -0.5;
  EXPECT_THROW(bare.validate(), Error);
}

// The tied embedding's gradients are summed between the first and the last
// stage in the dtype the step-end reduction moves: DeepSpeed's 16-bit
// gradients, fp32 for Megatron's main_grad and DeepSpeed's BF16_Optimizer.
TEST(TimeModel, TiedEmbeddingSyncMovesTheReducedGradientDtype) {
  const SystemSpec s = load_system_spec("jeanzay-a100-80gb");
  const ModelConfig m = load_model_config("22b");
  const ParallelConfig p = frontier_175b_on(4, 4, 2, 64);
  PerfCache cache;
  const double engine = step_costs(m, p, s, PerfOptions{}, cache).embedding_sync_s;
  const double fp16 = step_costs(m, p, s, framework_profile("megatron-deepspeed-2021").options, cache).embedding_sync_s;
  const double bf16_optimizer =
      step_costs(m, p, s, framework_profile("megatron-deepspeed-2022").options, cache).embedding_sync_s;
  EXPECT_GT(engine, 0);
  EXPECT_GT(fp16, 0.4 * engine);  // half the bytes, the same latency
  EXPECT_LT(fp16, 0.6 * engine);
  EXPECT_DOUBLE_EQ(bf16_optimizer, engine);
}

// ZeRO-3 as FSDP runs it: every unit's parameters gathered before its
// forward and backward, hidden behind the compute except the first unit's;
// what is hidden costs that compute the collective's SM share. The
// backward's gathers and reduce-scatters share one window.
TEST(TimeModel, HiddenCollectivesCostTheirSmShareOfCompute) {
  SystemSpec s = load_system_spec("dgx-a100-80gb");
  const ModelConfig m = load_model_config("llama2-7b");
  ParallelConfig p;
  p.dp = 64;
  p.zero_stage = 3;
  p.micro_batch_size = 2;
  p.global_batch_size = 128;
  p.bf16 = true;
  p.flash_attention = true;
  PerfOptions o;
  o.overlap_grad_reduce = true;
  PerfCache cache;
  SystemSpec none = s;
  none.compute.collective_sm_share = 0;
  s.compute.collective_sm_share = 0.2;
  const ChunkCost a = step_costs(m, p, none, o, cache).chunk(0, 0);
  const ChunkCost b = step_costs(m, p, s, o, cache).chunk(0, 0);
  ASSERT_GT(a.forward_dp_s, 0);
  EXPECT_DOUBLE_EQ(a.forward_compute_s, b.forward_compute_s);
  // Fully hidden but the first of `units` gathers: the share costs 0.2 x
  // (units - 1) first-unit gathers, one unit per block, the embedding's
  // table, the head's norm and its output matrix (untied).
  const double units = (b.forward_dp_s - a.forward_dp_s) / (0.2 * a.forward_dp_s) + 1;
  EXPECT_NEAR(units, m.num_layers + 3, 1e-6);
  EXPECT_GT(b.backward_dp_s, a.backward_dp_s);
  // A network so slow that the backward's gathers and reduce-scatters
  // together outlast its compute: the excess shows, the share costs no more
  // than 0.2 of the compute.
  SystemSpec slow = none;
  slow.network.nic_bandwidth_gbs /= 40;
  const ChunkCost c = step_costs(m, p, slow, o, cache).chunk(0, 0);
  EXPECT_GT(c.backward_dp_s, a.backward_dp_s * 10);
  slow.compute.collective_sm_share = 0.2;
  const ChunkCost d = step_costs(m, p, slow, o, cache).chunk(0, 0);
  EXPECT_LE(d.backward_dp_s - c.backward_dp_s, 0.2 * c.backward_compute_s + 1e-12);
  EXPECT_GT(d.backward_dp_s, c.backward_dp_s);
}

// Megatron-LM's asynchronous column-parallel backward (2022 on): the input
// gradients' all-reduces run under the weight-gradient GEMMs; with sequence
// parallelism the reduce-scatters and the stashed inputs' re-gathers do,
// and the two gathers that undo the forward's reduce-scatters stay in line.
TEST(TimeModel, MegatronHidesTheColumnParallelBackwardCollectives) {
  SystemSpec s = load_system_spec("dgx-a100-80gb");
  s.compute.collective_sm_share = 0;
  const ModelConfig m = load_model_config("22b");
  ParallelConfig p = frontier_175b_on(8, 4, 1, 8);
  p.recompute = Recompute::none;
  p.sequence_parallel = false;
  ASSERT_TRUE(framework_profile("megatron-lm-2022").options.async_tp_backward);
  ASSERT_FALSE(framework_profile("megatron-lm-2021").options.async_tp_backward);
  PerfOptions sync, async;
  async.async_tp_backward = true;
  PerfCache cache;
  const ChunkCost a = step_costs(m, p, s, sync, cache).chunk(1, 0);
  const ChunkCost b = step_costs(m, p, s, async, cache).chunk(1, 0);
  ASSERT_GT(a.backward_tp_s, 0);
  EXPECT_LT(b.backward_tp_s, 0.15 * a.backward_tp_s);  // NVLink all-reduces about as long as their GEMMs or less
  EXPECT_DOUBLE_EQ(b.forward_tp_s, a.forward_tp_s);
  EXPECT_DOUBLE_EQ(b.backward_compute_s, a.backward_compute_s);
  p.sequence_parallel = true;
  const ChunkCost c = step_costs(m, p, s, async, cache).chunk(1, 0);
  // Forward: 2 gathers and 2 reduce-scatters a block; backward: the 2
  // gathers in line, the rest hidden.
  EXPECT_GT(c.backward_tp_s, 0.35 * c.forward_tp_s);
  EXPECT_LT(c.backward_tp_s, 0.65 * c.forward_tp_s);
  s.compute.collective_sm_share = 0.2;
  EXPECT_GT(step_costs(m, p, s, async, cache).chunk(1, 0).backward_tp_s, c.backward_tp_s);
  // TP comm overlap (TransformerEngine's) supersedes it.
  async.tp_comm_overlap = true;
  PerfOptions te;
  te.tp_comm_overlap = true;
  EXPECT_DOUBLE_EQ(step_costs(m, p, s, async, cache).chunk(1, 0).backward_tp_s,
                   step_costs(m, p, s, te, cache).chunk(1, 0).backward_tp_s);
}

TEST(Curve, InterpolatesInLogSize) {
  const Curve c({{64, 0.2}, {256, 0.6}});
  EXPECT_DOUBLE_EQ(c(32), 0.2);
  EXPECT_DOUBLE_EQ(c(1024), 0.6);
  EXPECT_NEAR(c(128), 0.4, 1e-12);
  EXPECT_THROW(Curve({{64, 0.2}, {32, 0.6}}), Error);
}

}  // namespace
}  // namespace meshtrain::perf

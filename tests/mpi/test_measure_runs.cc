// Multi-rank measurement tests: each launches `meshtrain` under mpirun and
// checks what it measured.
//
//   CommBytes.*   communication counted per step equals the closed form for
//                 every (group, operation) on every rank of the tiny model;
//   Bubble.*      the measured pipeline bubble of GPipe and 1F1B on balanced
//                 stages is near (p-1)/(m+p-1), and interleaving lowers it;
//   Trace.*       the --trace file parses, with the expected spans per rank;
//   KernelTime.*  the kernel clock's matmul and attention FLOPs equal their
//                 closed forms, and the compute time split adds up;
//   BenchComm.*   bench comm on 2 and 4 ranks (and the non-blocking forms on
//                 2): sizes increase, bandwidths > 0;
//   Sweep.*       a 3-configuration grid gives one CSV row per configuration,
//                 an invalid one with its reason.
//
// The closed forms (per rank, per step; N = micro-batch x seq tokens, h the
// hidden size, E the bytes of an activation element (4 fp32, 2 bf16), m the
// micro-batches per step, Ls the blocks this rank runs, Ns = N/tp with
// sequence parallelism else N). Read from model/{block,tensor_parallel,
// embedding_layer,lm_head}.cc and parallel/{pipeline_engine,sharded_state}.cc:
//
// TP without SP (tp > 1), every micro-batch:
//   all_reduce of N*h*E: 2 per block forward (proj, fc2 outputs: row-parallel),
//   2 per block backward (qkv, fc input gradients: column-parallel), 2 more per
//   fully recomputed block (its forward runs again), 1 for the embedding
//   output (first stage), 1 for the head's input gradient (last stage);
//   the head's softmax statistics (last stage): per pass of R logits rows, an
//   all_reduce of R fp32 maxima and one of 2R fp32 sums (12 N bytes in all).
// TP with SP: each N*h all-reduce of a block becomes a reduce-scatter (the
//   row-parallel outputs; the column-parallel input gradients) and each
//   LayerNorm output / row-parallel output gradient an all-gather, all of
//   N*h*E as nccl-tests counts them: per block 2 all-gathers + 2
//   reduce-scatters forward and the same backward, plus 2 all-gathers in
//   the backward that gather the stashed LayerNorm-output shards again for
//   the weight gradients (Megatron's order); embedding: reduce-scatter
//   forward, all-gather backward; head: all-gather forward, reduce-scatter
//   of the input gradient; plus the fp32 all-reduce of each sequence-partial
//   gradient (LayerNorm weights and biases, position table) once per step
//   (ZeRO 0, 1) or once per micro-batch and backward contribution (ZeRO 2, 3).
// PP: per micro-batch and chunk boundary one activation forward and one
//   gradient backward of Ns*h*E: isend and recv each m x (chunks not last) +
//   m x (chunks not first), counted over virtual stages.
// DP (dp > 1), per unit (Layout) of padded size P elements:
//   ZeRO 0: one iall_reduce of P fp32;  ZeRO 1: one ireduce_scatter of P fp32
//   and an all_gather of the updated P weights (E bytes each);  ZeRO 2: an
//   ireduce_scatter of P fp32 per micro-batch and backward contribution (2 for
//   the tied word embedding on a single stage) and the weight all_gather;
//   ZeRO 3: the ireduce_scatters of ZeRO 2 and a gather of P weights
//   before each use: per micro-batch, blocks twice (forward, backward), the
//   embeddings once, the final LayerNorm and the head's word matrix once;
//   the first unit of each pass a blocking all_gather, the others posted
//   ahead as iall_gather (the engine's prefetch).
// Embedding group (pp > 1, tied): one all_reduce of the word embedding's
//   gradient, P fp32 (ZeRO 0) or its P/dp shard (ZeRO >= 1).
// World: the trainer's all_reduce of loss, token count, norm, the two stop
// requests (signal, duration) and the background-save state (ranks writing,
// ranks failed): 7 doubles, 56 bytes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shell.h"

#include "meshtrain/model/activations.h"
#include "meshtrain/model/layout.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / fmt::format("mt-measure-runs-{}", getpid());
  fs::create_directories(d);
  return d;
}

using meshtrain::testing::Outcome;

Outcome sh(const std::string& cmd) { return meshtrain::testing::run_shell(cmd, scratch() / "out.txt"); }

std::string mpirun(int np) { return fmt::format("OMP_NUM_THREADS=1 {} -np {} ", MT_MPIRUN, np); }

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

// ----------------------------------------------------------- comm bytes ---

struct Case {
  int np = 2, tp = 1, pp = 1, vpp = 1, zero = 0, gbs = 2;
  bool sp = false, bf16 = false;
  Recompute recompute = Recompute::none;
  std::string extra = {};  // further train flags that must not change the counts
  int shard = 0;           // hybrid sharding: DP ranks per ZeRO shard group
};

ParallelConfig parallel_of(const Case& c) {
  ParallelConfig p;
  p.tp = c.tp, p.pp = c.pp, p.dp = c.np / (c.tp * c.pp), p.vpp = c.vpp, p.zero_stage = c.zero;
  p.sequence_parallel = c.sp, p.bf16 = c.bf16, p.recompute = c.recompute;
  p.micro_batch_size = 1, p.global_batch_size = c.gbs, p.zero_shard = c.shard;
  p.schedule = c.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  return p;
}

std::string train_args(const Case& c, const ModelConfig& m) {
  std::string a = fmt::format(
      "--tensor-model-parallel-size {} --pipeline-model-parallel-size {} --zero-stage {} --global-batch-size {} "
      "--recompute-granularity {}",
      c.tp, c.pp, c.zero, c.gbs, recompute_name(c.recompute));
  if (c.vpp > 1) a += fmt::format(" --num-layers-per-virtual-pipeline-stage {}", m.num_layers / c.pp / c.vpp);
  if (c.sp) a += " --sequence-parallel";
  if (c.bf16) a += " --bf16";
  if (c.shard > 0) a += fmt::format(" --data-parallel-shard-size {}", c.shard);
  return a + " " + c.extra;
}

struct CallsBytes {
  double calls = 0, bytes = 0;
};
using Expected = std::map<std::pair<std::string, std::string>, CallsBytes>;

Expected expected_per_step(const ModelConfig& m, const ParallelConfig& p, RankCoord c) {
  Expected e;
  auto add = [&](const char* g, const char* op, double calls, double total_bytes) {
    auto& x = e[{g, op}];
    x.calls += calls;
    x.bytes += total_bytes;
  };
  const double E = p.bf16 ? 2 : 4, mb = p.num_micro_batches();
  const double N = double(p.micro_batch_size) * m.seq_length, h = m.hidden_size;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const Layout L = Layout::build(m, p, c.tp, c.pp);
  const int chunks = p.vpp;
  bool first = false, last = false;
  int layers = 0, recomputed = 0;
  for (int ch = 0; ch < chunks; ++ch) {
    first |= L.has_embedding(ch), last |= L.has_head(ch);
    const int n = L.chunk_layers(ch);
    layers += n;
    if (p.recompute == Recompute::full)
      for (int i = 0; i < n; ++i) recomputed += block_is_recomputed(p, i, n) ? 1 : 0;
  }
  const double act = N * h * E;
  const int64_t rows = head_logits_rows(m, p);
  const double passes = std::ceil(N / double(rows));

  // Units and how many backward contributions each gets per micro-batch.
  const Unit* word_head = L.find_unit("head.word");
  const bool single_tied = first && last && !word_head && !L.find_unit("head.output");
  auto contributions = [&](const Unit& u) { return single_tied && u.name == "embedding.word" ? 2.0 : 1.0; };

  if (p.tp > 1) {
    const double blocks_fwd = layers + recomputed;  // forward passes of blocks per micro-batch
    if (!sp) {
      add("tp", "all_reduce", mb * (2 * blocks_fwd + 2 * layers), mb * (2 * blocks_fwd + 2 * layers) * act);
      if (first) add("tp", "all_reduce", mb, mb * act);
      if (last) add("tp", "all_reduce", mb, mb * act);
    } else {
      const double n = mb * (2 * blocks_fwd + 2 * layers);
      add("tp", "all_gather", n + mb * 2 * layers, (n + mb * 2 * layers) * act);
      add("tp", "reduce_scatter", n, n * act);
      if (first) add("tp", "reduce_scatter", mb, mb * act), add("tp", "all_gather", mb, mb * act);
      if (last) add("tp", "all_gather", mb, mb * act), add("tp", "reduce_scatter", mb, mb * act);
      for (const Unit& u : L.units())
        for (const ParamSpec& s : u.params)
          if (s.sequence_partial_grad) {
            const double times = p.zero_stage >= 2 ? mb * contributions(u) : 1;
            add("tp", "all_reduce", times, times * s.numel() * 4.0);
          }
    }
    if (last) add("tp", "all_reduce", 2 * mb * passes, mb * 12 * N);  // softmax max and sums, fp32
  }

  if (p.pp > 1) {
    const double msg = (sp ? N / p.tp : N) * h * E;
    const int V = p.pp * p.vpp;
    double sends = 0;
    for (int ch = 0; ch < chunks; ++ch) {
      const int v = L.virtual_stage(ch);
      sends += (v < V - 1 ? mb : 0) + (v > 0 ? mb : 0);
    }
    add("pp", "isend", sends, sends * msg);
    add("pp", "recv", sends, sends * msg);
    if (first || last) {
      for (const Unit& u : L.units())
        if (u.name == "embedding.word" || u.name == "head.word") {
          const double n = p.zero_stage >= 1 ? u.shard_numel(p.shard_size()) : u.padded_numel;
          add("embedding", "all_reduce", 1, n * 4);
        }
    }
  }

  if (p.dp > 1) {
    // ZeRO's group: the DP group, or with hybrid sharding its block, each
    // reduced shard then all-reduced over the blocks' copies.
    const char* zg = p.hybrid_shard() ? "dp_shard" : "dp";
    for (const Unit& u : L.units()) {
      const double grad = u.padded_numel * 4.0, weights = u.padded_numel * E, shard = grad / p.shard_size();
      const double reductions = p.zero_stage >= 2 ? mb * contributions(u) : 1;
      if (p.zero_stage == 0) add("dp", "iall_reduce", 1, grad);
      if (p.zero_stage >= 1) add(zg, "ireduce_scatter", reductions, reductions * grad);
      if (p.zero_stage >= 1 && p.hybrid_shard())  // ZeRO-2/3: posted beside the reduce-scatters
        add("dp_replicate", p.zero_stage >= 2 ? "iall_reduce" : "all_reduce", reductions, reductions * shard);
      if (p.zero_stage == 1 || p.zero_stage == 2) add(zg, "all_gather", 1, weights);
    }
    // ZeRO-3, per micro-batch: a chunk's forward gathers its units in order
    // (embedding, blocks, head) and its backward the blocks in reverse; the
    // first of each pass is a blocking all_gather, each later one was
    // posted (iall_gather) while the one before it computed.
    if (p.zero_stage == 3)
      for (int ch = 0; ch < chunks; ++ch) {
        std::vector<const Unit*> forward_order;
        if (L.has_embedding(ch)) {
          forward_order.push_back(&L.word_embedding());
          if (const Unit* pu = L.position_embedding()) forward_order.push_back(pu);
        }
        for (int i = 0; i < L.chunk_layers(ch); ++i) forward_order.push_back(&L.block(ch, i));
        if (L.has_head(ch)) forward_order.push_back(&L.final_norm()), forward_order.push_back(&L.output_weight());
        auto pass = [&](const std::vector<const Unit*>& order) {
          for (size_t k = 0; k < order.size(); ++k)
            add(zg, k == 0 ? "all_gather" : "iall_gather", mb, mb * order[k]->padded_numel * E);
        };
        pass(forward_order);
        std::vector<const Unit*> backward_order;
        for (int i = L.chunk_layers(ch) - 1; i >= 0; --i) backward_order.push_back(&L.block(ch, i));
        pass(backward_order);
      }
  }
  add("world", "all_reduce", 1, 56);
  return e;
}

void check_comm_bytes(const Case& c) {
  const ModelConfig m = load_model_config("tiny");
  const ParallelConfig p = parallel_of(c);
  const fs::path report = scratch() / "comm.json";
  fs::remove(report);
  const Outcome o = sh(mpirun(c.np) + MESHTRAIN_BINARY + " train --model tiny --mock-data --train-iters 3 --quiet " +
                       train_args(c, m) + " --report " + report.string());
  ASSERT_EQ(o.rc, 0) << o.output;
  const nlohmann::json rep = read_json(report);
  const nlohmann::json& ranks = rep["measurements"]["ranks"];
  ASSERT_EQ(ranks.size(), size_t(c.np));
  for (const auto& r : ranks) {
    const RankCoord rc{r["coord"]["tp"].get<int>(), r["coord"]["dp"].get<int>(), r["coord"]["pp"].get<int>()};
    const double steps = r["comm_steps"].get<double>();
    EXPECT_EQ(steps, 2.0);  // three iterations, the first left out
    Expected got;
    for (const auto& x : r["comm"]) {
      auto& g = got[{x["group"].get<std::string>(), x["op"].get<std::string>()}];
      g.calls += x["calls"].get<double>() / steps;
      g.bytes += x["bytes"].get<double>() / steps;
    }
    const Expected want = expected_per_step(m, p, rc);
    const std::string who = fmt::format("rank {} (tp {}, dp {}, pp {})", r["rank"].get<int>(), rc.tp, rc.dp, rc.pp);
    for (const auto& [k, v] : want) {
      ASSERT_TRUE(got.count(k)) << who << ": no " << k.first << " " << k.second << " recorded";
      EXPECT_EQ(got[k].calls, v.calls) << who << ": calls of " << k.first << " " << k.second;
      EXPECT_EQ(got[k].bytes, v.bytes) << who << ": bytes of " << k.first << " " << k.second;
    }
    for (const auto& [k, v] : got)
      EXPECT_TRUE(want.count(k)) << who << ": unexpected " << k.first << " " << k.second << " (" << v.calls
                                 << " calls, " << v.bytes << " bytes per step)";
  }
}

TEST(CommBytes, TensorParallel) {
  check_comm_bytes(Case{.np = 2, .tp = 2, .gbs = 2});
  // Evaluation passes in between and after are not training communication.
  check_comm_bytes(Case{.np = 2, .tp = 2, .gbs = 2, .extra = "--eval-interval 1 --eval-iters 2"});
  check_comm_bytes(Case{.np = 2, .tp = 2, .gbs = 2, .bf16 = true, .recompute = Recompute::full});
}

TEST(CommBytes, SequenceParallel) {
  check_comm_bytes(Case{.np = 2, .tp = 2, .gbs = 2, .sp = true});
  check_comm_bytes(Case{.np = 4, .tp = 2, .zero = 2, .gbs = 4, .sp = true});
}

TEST(CommBytes, PipelineParallel) {
  check_comm_bytes(Case{.np = 2, .pp = 2, .gbs = 4});
  check_comm_bytes(Case{.np = 2, .pp = 2, .vpp = 2, .gbs = 4});
  check_comm_bytes(Case{.np = 4, .tp = 2, .pp = 2, .zero = 1, .gbs = 2, .sp = true});
}

TEST(CommBytes, DataParallelZeroStages) {
  for (int z = 0; z <= 3; ++z) check_comm_bytes(Case{.np = 2, .zero = z, .gbs = 4});
  check_comm_bytes(Case{.np = 4, .pp = 2, .zero = 3, .gbs = 4});
}

// Hybrid sharding over blocks of 2 of DP 4: the ZeRO collectives in the
// block, one all-reduce of each reduced shard over the other block.
TEST(CommBytes, HybridSharding) {
  for (int z = 1; z <= 3; ++z) check_comm_bytes(Case{.np = 4, .zero = z, .gbs = 8, .shard = 2});
}

// --------------------------------------------------------------- bubble ---

// A model whose two stages are balanced (the head and embedding are small
// next to four blocks of hidden 256) and whose compute dominates the
// activation transfers, on 2 ranks (one core each when the machine is idle).
// An iteration's bubble is the mean over the two ranks of 1 - compute / span
// (span: the longer train_step of the two, as run_report.h defines it); the
// run's is that of its least disturbed steady iteration (the smallest), since
// other load on this shared machine only adds waiting: a rank that gets less
// of a core makes its peer wait.
double measured_bubble(const std::string& sched_args, double* theory) {
  const fs::path report = scratch() / "bubble.json";
  fs::remove(report);
  const Outcome o = sh("OMPI_MCA_mpi_yield_when_idle=1 " + mpirun(2) + MESHTRAIN_BINARY +
                       " train --mock-data --num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 64 "
                       "--max-position-embeddings 64 --vocab-size 128 --pipeline-model-parallel-size 2 "
                       "--global-batch-size 4 --train-iters 8 --quiet --report " +
                       report.string() + " " + sched_args);
  EXPECT_EQ(o.rc, 0) << o.output;
  if (o.rc != 0) return -1;
  const nlohmann::json rep = read_json(report);
  const nlohmann::json& mm = rep["measurements"];
  *theory = mm["theory"]["bubble_fraction"].get<double>();
  const nlohmann::json& ranks = mm["ranks"];
  const size_t iters = ranks[0]["steps"]["pipeline_s"].size();
  double best = 1e9;
  for (size_t i = 1; i < iters; ++i) {
    double span = 0, sum = 0;
    for (const auto& r : ranks) span = std::max(span, r["steps"]["pipeline_s"][i].get<double>());
    for (const auto& r : ranks) sum += 1.0 - r["steps"]["compute_s"][i].get<double>() / span;
    best = std::min(best, sum / ranks.size());
  }
  return best;
}

// Tolerance: 0.1 absolute. A schedule outside it is run again, up to three
// times, and the smallest bubble counts.
double best_bubble(const std::string& sched_args, double* theory, double tol) {
  double best = 1e9;
  for (int attempt = 0; attempt < 3; ++attempt) {
    best = std::min(best, measured_bubble(sched_args, theory));
    if (std::abs(best - *theory) <= tol) break;
  }
  return best;
}

// The 1-minute load average (/proc/loadavg).
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = 0;
  f >> l;
  return l;
}

// A timing test: with other work holding a core it cannot hold, so a miss on
// a machine that was busy before the test (1-minute load above half the
// cores) is reported as skipped, with the figures, rather than failed.
TEST(Bubble, MatchesTheoryAndInterleavingLowersIt) {
  const double tol = 0.1;
  const double load = load_average();
  const bool busy = load > 0.5 * std::max(1u, std::thread::hardware_concurrency());
  double th_gpipe = 0, th_1f1b = 0, th_il = 0;
  const double gpipe = best_bubble("--pipeline-schedule gpipe", &th_gpipe, tol);
  const double one = best_bubble("--pipeline-schedule 1f1b", &th_1f1b, tol);
  const double il = best_bubble("--num-layers-per-virtual-pipeline-stage 2", &th_il, tol);
  EXPECT_DOUBLE_EQ(th_gpipe, 1.0 / 5.0);  // p = 2, m = 4
  EXPECT_DOUBLE_EQ(th_1f1b, 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(th_il, 1.0 / 10.0);    // v = 2
  std::printf("bubble: gpipe %.3f (theory %.3f), 1f1b %.3f (theory %.3f), interleaved %.3f (theory %.3f)\n", gpipe,
              th_gpipe, one, th_1f1b, il, th_il);
  const bool within = std::abs(gpipe - th_gpipe) <= tol && std::abs(one - th_1f1b) <= tol &&
                      std::abs(il - th_il) <= tol && il < one;
  if (!within && busy)
    GTEST_SKIP() << "machine busy before the test (load average " << load << "): measured bubbles gpipe " << gpipe
                 << ", 1f1b " << one << ", interleaved " << il << " are not a verdict";
  EXPECT_NEAR(gpipe, th_gpipe, tol);
  EXPECT_NEAR(one, th_1f1b, tol);
  EXPECT_NEAR(il, th_il, tol);
  EXPECT_LT(il, one);
}

// ---------------------------------------------------------------- trace ---

TEST(Trace, SpansPerRank) {
  const fs::path trace = scratch() / "trace.json", report = scratch() / "trace_report.json";
  fs::remove(trace);
  const int iters = 2;
  const Outcome o = sh(mpirun(4) + MESHTRAIN_BINARY +
                       fmt::format(" train --model tiny --mock-data --train-iters {} --quiet "
                                   "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                                   "--global-batch-size 4 --trace {} --report {}",
                                   iters, trace.string(), report.string()));
  ASSERT_EQ(o.rc, 0) << o.output;
  const nlohmann::json j = read_json(trace);  // parses
  ASSERT_TRUE(j.contains("traceEvents"));
  const int comm_base = 1 << 20;
  std::map<int, std::map<std::string, int>> spans;  // tid -> name -> count
  std::map<int, std::set<int>> pids;                // tid -> pids seen
  std::map<int, int64_t> comm_bytes;
  std::set<std::string> process_names;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") process_names.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();
    ASSERT_GE(e["dur"].get<double>(), 0.0);
    const int tid = e["tid"];
    spans[tid][e["name"]]++;
    pids[tid].insert(e["pid"].get<int>());
    if (tid >= comm_base) comm_bytes[tid - comm_base] += e["args"]["bytes"].get<int64_t>();
  }
  EXPECT_EQ(process_names, (std::set<std::string>{"stage 0", "stage 1"}));
  for (int r = 0; r < 4; ++r) {
    const int stage = r / 2;  // tp 2, dp 1: ranks 0-1 stage 0, 2-3 stage 1
    SCOPED_TRACE(fmt::format("rank {}", r));
    EXPECT_EQ(spans[r]["step"], iters);
    EXPECT_EQ(spans[r]["train_step"], iters);
    EXPECT_EQ(spans[r]["optimizer"], iters);
    // One span per forward and per backward of each micro-batch (global
    // batch 4 / micro-batch 1 / dp 1 = 4 micro-batches, one chunk).
    EXPECT_EQ(spans[r]["forward"], 4 * iters);
    EXPECT_EQ(spans[r]["backward"], 4 * iters);
    EXPECT_EQ(pids[r], std::set<int>{stage});
    EXPECT_EQ(pids[comm_base + r], std::set<int>{stage});
    EXPECT_GT(spans[comm_base + r]["all_reduce"], 0);  // TP and the loss all-reduce
    EXPECT_GT(spans[comm_base + r]["isend"], 0);
    EXPECT_GT(spans[comm_base + r]["recv"], 0);
    EXPECT_GT(comm_bytes[r], 0);
  }
}

// ---------------------------------------------------------- kernel time ---

// The kernel clock's FLOPs, summed over the ranks of a TP 2 x PP 2 run (dp
// 1: the ranks split one step's work), equal the closed forms of the
// shapes the engine runs (kernels/flops.h; tiny: h 32, ffn 4h, L 8 blocks,
// S 16, padded vocab Vp; T = global batch x S tokens, no recompute):
//   matmuls   = 3 x T x (L x 2 (3h^2 + h^2 + 2 h ffn) + 2 h Vp)
//               (forward, and the input and weight gradients)
//   attention = L x global batch x h x S (S+1)/2 x (4 + 10)
//               (causal pairs; forward 4, backward 10 per pair and h)
// and the time split is consistent: each part positive, their sum at most
// the compute time. --peak-from a bench gemm file gives each rank the
// file's peak per thread times its share of the cores (one OpenMP thread,
// at most cores / 4 ranks).
TEST(KernelTime, FlopsMatchClosedFormsAndTimesAddUp) {
  const fs::path report = scratch() / "kernel_report.json", gemm = scratch() / "kernel_gemm.json";
  std::ofstream(gemm) << R"({"bench": "gemm", "peak": {"fp32": {"tflops": 2.0, "tflops_per_thread": 0.5}}})";
  const int gbs = 4, iters = 3;
  const Outcome o = sh(mpirun(4) + MESHTRAIN_BINARY +
                       fmt::format(" train --model tiny --mock-data --train-iters {} --quiet "
                                   "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                                   "--global-batch-size {} --report {} --peak-from {}",
                                   iters, gbs, report.string(), gemm.string()));
  ASSERT_EQ(o.rc, 0) << o.output;
  const nlohmann::json j = read_json(report);
  // The report names the revision that produced it (core/build_commit.h).
  EXPECT_FALSE(j.value("meshtrain_commit", std::string()).empty());
  const double share = std::min(1.0, std::max(1u, std::thread::hardware_concurrency()) / 4.0);
  EXPECT_DOUBLE_EQ(j["measurements"]["peak_tflops_per_rank"].get<double>(), 0.5 * share);
  EXPECT_GT(j["measurements"]["aggregate"]["compute"]["matmul_efficiency"]["median"].get<double>(), 0);
  const ModelConfig m = load_model_config("tiny");
  const double h = m.hidden_size, ffn = m.ffn(), L = m.num_layers, S = m.seq_length, Vp = m.padded_vocab();
  const double T = double(gbs) * S;
  const double matmul = 3 * T * (L * 2 * (4 * h * h + 2 * h * ffn) + 2 * h * Vp);
  const double attention = L * gbs * h * S * (S + 1) / 2 * 14;
  double mm = 0, at = 0;
  for (const auto& r : j["measurements"]["ranks"]) {
    SCOPED_TRACE(fmt::format("rank {}", r["rank"].get<int>()));
    const auto& st = r["steps"];
    ASSERT_EQ(st["matmul_flops"].size(), size_t(iters));
    for (int i = 1; i < iters; ++i) EXPECT_EQ(st["matmul_flops"][i], st["matmul_flops"][0]);  // every step alike
    mm += st["matmul_flops"][1].get<double>();
    at += st["attention_flops"][1].get<double>();
    const auto& c = r["compute"];
    EXPECT_GT(c["matmul_s"].get<double>(), 0);
    EXPECT_GT(c["attention_s"].get<double>(), 0);
    EXPECT_LE(c["matmul_s"].get<double>() + c["attention_s"].get<double>(), c["compute_s"].get<double>());
    EXPECT_GT(c["matmul_tflops"].get<double>(), 0);
  }
  EXPECT_DOUBLE_EQ(mm, matmul);
  EXPECT_DOUBLE_EQ(at, attention);
}

// ----------------------------------------------------------- bench comm ---

void check_bench_comm(int np, bool nonblocking = false) {
  const fs::path out = scratch() / fmt::format("bench_comm_{}{}.json", np, nonblocking ? "_nb" : "");
  fs::remove(out);
  const Outcome o = sh(mpirun(np) + MESHTRAIN_BINARY + " bench comm --max-bytes 64K --iters 3 --warmup 1 --out " +
                       out.string() + (nonblocking ? " --nonblocking" : ""));
  ASSERT_EQ(o.rc, 0) << o.output;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["group_size"], np);
  EXPECT_EQ(j["nonblocking"], nonblocking);
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv"}) {
    SCOPED_TRACE(op);
    ASSERT_TRUE(j["results"].contains(op));
    const auto& pts = j["results"][op]["points"];
    ASSERT_GE(pts.size(), 10u);
    double prev = 0;
    for (const auto& p : pts) {
      EXPECT_GT(p["bytes"].get<double>(), prev);
      prev = p["bytes"].get<double>();
      EXPECT_GT(p["time_s"].get<double>(), 0.0);
      EXPECT_GT(p["algbw_Bps"].get<double>(), 0.0);
      EXPECT_GT(p["busbw_Bps"].get<double>(), 0.0);
    }
    EXPECT_EQ(prev, 65536.0);
    EXPECT_GE(j["results"][op]["fit"]["alpha_s"].get<double>(), 0.0);
  }
  EXPECT_NE(o.output.find("busbw"), std::string::npos);
}

TEST(BenchComm, TwoRanks) { check_bench_comm(2); }
TEST(BenchComm, FourRanks) { check_bench_comm(4); }
TEST(BenchComm, NonBlockingTwoRanks) { check_bench_comm(2, true); }

// ---------------------------------------------------------------- sweep ---

TEST(Sweep, ThreeConfigGrid) {
  const fs::path dir = scratch() / "sweep";
  fs::remove_all(dir);
  const Outcome o = sh(std::string("OMP_NUM_THREADS=1 ") + MESHTRAIN_BINARY +
                       " sweep --model tiny --ranks 2 --grid 'tp=1,2,3' --iters 2 --timeout 120 --out " + dir.string() +
                       " --launcher '" + MT_MPIRUN + " -np {ranks}'");
  ASSERT_EQ(o.rc, 0) << o.output;
  std::ifstream f(dir / "sweep.csv");
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << o.output;  // header + one row per configuration
  EXPECT_EQ(lines[0].rfind("name,tp,dp,status,reason", 0), 0u);
  EXPECT_EQ(lines[1].rfind("tp1,1,2,ok,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("tp2,2,1,ok,", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("tp3,3,0,invalid,world size 2 is not divisible", 0), 0u) << lines[3];
  const nlohmann::json j = read_json(dir / "sweep.json");
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_GT(j["rows"][0]["mem_total"].get<double>(), j["rows"][1]["mem_total"].get<double>());  // TP shards
  const Outcome s = sh(std::string(MESHTRAIN_BINARY) + " sweep --summarize " + dir.string());
  ASSERT_EQ(s.rc, 0) << s.output;
  EXPECT_NE(s.output.find("peak memory"), std::string::npos);
}

}  // namespace
}  // namespace meshtrain

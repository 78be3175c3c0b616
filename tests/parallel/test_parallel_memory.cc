// Per-rank memory accounting of the engine's parameter-sized state, under
// mpirun with any number of ranks W. For every (TP, PP, DP = W/(TP x PP),
// ZeRO 0-3, fp32/bf16, 1F1B or interleaved) the test model admits, each rank
// builds a ProcessMesh and a PipelineEngine directly and checks, on itself:
//
//   1. right after construction, the bytes the tracked allocator holds in the
//      parameters, gradients and optimizer categories equal
//      Layout::state_bytes(zero, bf16) of this rank's layout, and that closed
//      form equals bytes-per-parameter x elements: 16 (fp32) or 18 (bf16) per
//      parameter of the rank's padded flat layout, the ZeRO-sharded terms
//      divided by DP;
//   2. (fp32) after one training step and optimizer update, those categories are
//      unchanged and every transient buffer (ZeRO-3 gathered weights, ZeRO-2/3
//      unit gradients, pipeline send/receive buffers) has been released
//      (comm_buffers back to where it was);
//   3. after the engine is destroyed, every category is back to where it was.
//
// Rank 0 prints one line per configuration with every rank's figures; the
// exit status is non-zero if any rank found a mismatch.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/pipeline_engine.h"

namespace mt = meshtrain;

namespace {

// tiny, with 24 layers so that PP in {1, 2, 3, 4, 6, 8} (and interleaving)
// divides them.
mt::ModelConfig model() {
  mt::ModelConfig m = mt::load_model_config("tiny");
  m.num_layers = 24;
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  return m;
}

enum Figure { kParams, kGrads, kOpt, kNumFigures };
using Figures = std::array<int64_t, kNumFigures>;

Figures held(const mt::MemorySnapshot& s) {
  return {s.current[int(mt::MemCategory::parameters)], s.current[int(mt::MemCategory::gradients)],
          s.current[int(mt::MemCategory::optimizer)]};
}
Figures minus(const Figures& a, const Figures& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }

struct Checker {
  int rank;
  std::vector<std::string> failures;
  void expect(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

// One training step with made-up tokens and an optimizer update.
template <class T>
void run_step(mt::PipelineEngine<T>& engine, const mt::ModelConfig& m, const mt::ParallelConfig& p) {
  const int mbs = p.num_micro_batches();
  const int64_t N = int64_t{p.micro_batch_size} * m.seq_length;
  std::vector<int32_t> tokens(mbs * N), targets(mbs * N);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7919 + 13) % m.vocab_size);
    targets[i] = static_cast<int32_t>((i * 104729 + 5) % m.vocab_size);
  }
  const mt::StepBatch batch{tokens.data(), targets.data(), mbs};
  engine.train_step(batch, 1.0f / float(p.global_batch_size * m.seq_length));
  engine.state().step(1e-3f, 1.0f, 1, mt::AdamWConfig{});
}

template <class T>
void check_config(const mt::ModelConfig& m, const mt::ParallelConfig& p, mt::ProcessMesh& mesh, bool step,
                  const std::string& label, Checker& ck, Figures& measured, Figures& expected) {
  const mt::MemorySnapshot before = mt::MemoryTracker::global().snapshot();
  {
    mt::PipelineEngine<T> engine(m, p, mesh, /*seed=*/11);
    const mt::Layout& L = engine.layout();
    const mt::MemorySnapshot built = mt::MemoryTracker::global().snapshot();
    measured = minus(held(built), held(before));
    const mt::StateBytes sb = L.state_bytes(p.zero_stage, p.bf16);
    expected = {sb.parameters, sb.gradients, sb.optimizer};
    // The closed form, from the bytes per parameter (16 fp32, 18 bf16).
    const int64_t n = L.numel(), s = n / p.dp;
    ck.expect(n % p.dp == 0, label + ": flat layout size not divisible by DP");
    const int64_t w = p.bf16 ? 2 : 4, o = p.bf16 ? 12 : 8;
    ck.expect(w + 4 + o == (p.bf16 ? 18 : 16), label + ": bytes per parameter");
    const Figures closed = {(p.zero_stage >= 3 ? s : n) * w, (p.zero_stage >= 2 ? s : n) * 4,
                            (p.zero_stage >= 1 ? s : n) * o};
    ck.expect(closed == expected, label + fmt::format(": state_bytes {}/{}/{} differs from the closed form {}/{}/{}",
                                                      expected[0], expected[1], expected[2], closed[0], closed[1],
                                                      closed[2]));
    ck.expect(measured == expected,
              label + fmt::format(": allocated params/grads/optimizer {}/{}/{} bytes, state_bytes says {}/{}/{}",
                                  measured[0], measured[1], measured[2], expected[0], expected[1], expected[2]));
    if (step) {  // transient buffers must all be released again
      run_step(engine, m, p);
      const mt::MemorySnapshot stepped = mt::MemoryTracker::global().snapshot();
      const Figures after_step = minus(held(stepped), held(before));
      ck.expect(after_step == measured,
                label + fmt::format(": after a step params/grads/optimizer hold {}/{}/{} bytes, {}/{}/{} before",
                                    after_step[0], after_step[1], after_step[2], measured[0], measured[1],
                                    measured[2]));
      const int cb = int(mt::MemCategory::comm_buffers);
      ck.expect(stepped.current[cb] == built.current[cb],
                label + fmt::format(": {} comm_buffers bytes still held after the step (ZeRO-3 gathers, ZeRO-2/3 "
                                    "unit gradients or pipeline buffers not released)",
                                    stepped.current[cb] - built.current[cb]));
    }
  }
  const mt::MemorySnapshot after = mt::MemoryTracker::global().snapshot();
  for (int c = 0; c < mt::kNumMemCategories; ++c)
    ck.expect(after.current[c] == before.current[c],
              label + fmt::format(": {} bytes of {} leaked after the engine was destroyed",
                                  after.current[c] - before.current[c], mt::mem_category_name(mt::MemCategory(c))));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const mt::ModelConfig m = model();
  Checker ck{rank, {}};
  int configs = 0;
  try {
    for (int tp : {1, 2, 4, 8})
      for (int pp : {1, 2, 3, 4, 6, 8}) {
        if (world % (tp * pp) != 0) continue;
        mt::ParallelConfig shape;
        shape.tp = tp;
        shape.pp = pp;
        shape.dp = world / (tp * pp);
        try {
          mt::validate(m, shape, world);
        } catch (const mt::Error&) {
          continue;  // not a valid layout of this model on this world
        }
        mt::ProcessMesh mesh(shape);  // one mesh (collective) for all the variants below
        for (int vpp : {1, 2})
          for (int zero = 0; zero <= 3; ++zero)
            for (bool bf16 : {false, true}) {
              mt::ParallelConfig p;
              p.tp = tp;
              p.pp = pp;
              p.dp = world / (tp * pp);
              p.vpp = vpp;
              p.zero_stage = zero;
              p.bf16 = bf16;
              p.micro_batch_size = 1;
              p.schedule = vpp > 1 ? mt::ScheduleKind::interleaved : mt::ScheduleKind::one_f_one_b;
              p.global_batch_size = p.dp * (vpp > 1 ? pp : 2);
              p.sequence_parallel = tp > 1 && zero % 2 == 1;
              try {
                mt::validate(m, p, world);
              } catch (const mt::Error&) {
                continue;  // not a valid layout of this model on this world
              }
              const std::string label = fmt::format("tp{} pp{} dp{} vpp{} zero{} {}{}", tp, pp, p.dp, vpp, zero,
                                                    bf16 ? "bf16" : "fp32", p.sequence_parallel ? " sp" : "");
              const size_t failures_before = ck.failures.size();
              Figures measured{}, expected{};
              // A step for fp32 (bf16 differs only in element sizes, which
              // the construction check covers), to keep the test short.
              if (bf16)
                check_config<mt::bf16>(m, p, mesh, /*step=*/false, label, ck, measured, expected);
              else
                check_config<float>(m, p, mesh, /*step=*/true, label, ck, measured, expected);
              ++configs;
              // Every rank's figures to rank 0, which prints them.
              int64_t mine[2 * kNumFigures + 1] = {measured[0], measured[1], measured[2], expected[0],
                                                   expected[1], expected[2],
                                                   int64_t(ck.failures.size() - failures_before)};
              std::vector<int64_t> all(rank == 0 ? world * (2 * kNumFigures + 1) : 0);
              MPI_Gather(mine, 2 * kNumFigures + 1, MPI_INT64_T, all.data(), 2 * kNumFigures + 1, MPI_INT64_T, 0,
                         MPI_COMM_WORLD);
              if (rank == 0) {
                int64_t bad = 0;
                std::string per_rank;
                for (int r = 0; r < world; ++r) {
                  const int64_t* f = &all[r * (2 * kNumFigures + 1)];
                  bad += f[2 * kNumFigures] > 0;
                  per_rank += fmt::format(" r{}:{}/{}/{}", r, f[0], f[1], f[2]);
                }
                std::printf("%-8s %-34s params/grads/optimizer bytes per rank:%s\n", bad ? "MISMATCH" : "ok",
                            label.c_str(), per_rank.c_str());
              }
            }
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (const auto& f : ck.failures) std::fprintf(stderr, "[rank %d] FAIL %s\n", rank, f.c_str());
  std::fflush(stderr);
  int bad = static_cast<int>(ck.failures.size()), total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%s: %d configurations on %d ranks, %d failed checks\n", total == 0 ? "PASS" : "FAIL", configs,
                world, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}

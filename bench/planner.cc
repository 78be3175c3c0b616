// Planner speed: candidates costed per second (memory model, time model and
// pipeline simulation), for the largest case the planner is meant for (GPT
// 1T on 3,072 Frontier GCDs) and a mid-size one; plus single predictions.
#include <benchmark/benchmark.h>

#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/planner.h"

namespace {

using namespace meshtrain;

void plan_case(benchmark::State& state, const char* model, const char* system, int gpus, int gbs) {
  const ModelConfig m = load_model_config(model);
  const perf::SystemSpec s = perf::load_system_spec(system);
  int64_t candidates = 0, fitting = 0;
  for (auto _ : state) {
    perf::PerfCache cache;  // cold: every plan starts from nothing
    const tune::Plan p = tune::plan(m, s, gpus, gbs, {}, {}, &cache);
    candidates += p.candidates_evaluated;
    fitting += p.candidates_fitting;
    benchmark::DoNotOptimize(p.ranked.data());
  }
  state.counters["candidates"] = double(candidates) / double(state.iterations());
  state.counters["fitting"] = double(fitting) / double(state.iterations());
  state.counters["candidates_per_s"] = benchmark::Counter(double(candidates), benchmark::Counter::kIsRate);
}

void BM_Plan1TOn3072Frontier(benchmark::State& state) { plan_case(state, "1t", "frontier", 3072, 3072); }
void BM_Plan175BOn1024Frontier(benchmark::State& state) { plan_case(state, "175b", "frontier", 1024, 5120); }
void BM_Plan22BOn64DgxA100(benchmark::State& state) { plan_case(state, "22b", "dgx-a100-80gb", 64, 512); }

void BM_Predict175B(benchmark::State& state) {
  const ModelConfig m = load_model_config("175b");
  const perf::SystemSpec s = perf::load_system_spec("frontier");
  ParallelConfig p;
  p.tp = 4;
  p.pp = 16;
  p.dp = 2;
  p.zero_stage = 1;
  p.global_batch_size = 640;
  p.recompute = Recompute::full;
  p.bf16 = true;
  const bool warm = state.range(0) != 0;
  perf::PerfCache cache;
  for (auto _ : state) {
    perf::PerfCache cold;
    benchmark::DoNotOptimize(perf::predict(m, p, s, 128, {}, warm ? &cache : &cold).step_time_s);
  }
}

void BM_Simulate1F1B(benchmark::State& state) {
  const int pp = int(state.range(0)), m = int(state.range(1));
  const Schedule sch = make_schedule(ScheduleKind::one_f_one_b, pp, 1, m);
  perf::PipelineCosts c;
  c.pp = pp;
  c.forward_s.assign(pp, 1.0);
  c.backward_s.assign(pp, 2.0);
  c.transfer_s.assign(pp, 0.01);
  for (auto _ : state) benchmark::DoNotOptimize(perf::simulate(sch, c).makespan_s);
  state.counters["actions_per_s"] =
      benchmark::Counter(double(state.iterations()) * 6.0 * pp * m, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Plan1TOn3072Frontier)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan175BOn1024Frontier)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan22BOn64DgxA100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Predict175B)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Simulate1F1B)->Args({16, 320})->Args({128, 512})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

// Planner: every candidate configuration of a search space, costed by the
// performance model. Invalid combinations and those that do not fit in
// device memory are dropped and counted by reason; the rest are ranked by
// predicted throughput (tokens per second), ties broken by lower memory.
// Memory is checked first, so only fitting candidates pay for a pipeline
// simulation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/search_space.h"

namespace meshtrain::tune {

struct Candidate {
  ParallelConfig config;
  perf::Prediction prediction;
};

struct Plan {
  int64_t candidates_evaluated = 0;        // every combination considered
  int64_t candidates_fitting = 0;
  std::map<std::string, int64_t> dropped;  // reason -> count
  std::vector<Candidate> ranked;           // fitting candidates, fastest first
};

Plan plan(const ModelConfig& m, const perf::SystemSpec& s, int num_gpus, int global_batch_size,
          const SearchSpace& space = {}, const perf::PerfOptions& o = {}, perf::PerfCache* cache = nullptr);

// "tp=4 pp=16 vpp=1 dp=2 zero=1 mbs=1 recompute=full sp=off flash=on".
std::string describe(const ParallelConfig& p);

// One line on why the best candidate beats the runner-up: the throughput
// margin, the knobs that differ, and the time categories that differ most.
std::string why_best(const Plan& plan);

// How many candidates after the best have throughput intervals (prediction
// x (1 +- rel_error)) that overlap the best's: 0 when rel_error is 0.
int within_error_of_best(const Plan& plan, double rel_error);

// {candidates_evaluated, candidates_fitting, dropped, top: [{config,
// prediction}]} with the first `top` ranked candidates.
nlohmann::json plan_json(const Plan& plan, size_t top);

}  // namespace meshtrain::tune

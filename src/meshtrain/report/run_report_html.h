// The run report as a page to look at: `meshtrain report RUN.json -o
// report.html`. From the JSON that `train --report` writes
// (train/trainer.cc, measure/run_report.h) it draws
//   - the training loss per iteration and the validation losses;
//   - tokens per second and step time per iteration (the tokens each step
//     consumed, summed over ranks, over its time);
//   - peak memory by category on every rank;
//   - communication per step by group and operation (time, exposed time,
//     bytes: medians over the member ranks);
//   - the step of each pipeline stage split into forward, backward, waiting
//     in receives, optimizer and the rest (medians over the stage's ranks
//     and the steady iterations), and the bubble against (p-1)/(m+p-1);
//   - the pipeline timeline: every forward, backward and receive wait of
//     one steady iteration on each stage's row (measurements.ranks[].timeline);
//   - predicted against measured memory, and step time and throughput when
//     the prediction has them: the run's own "prediction" (the memory model)
//     or the performance model for a system (report --system, perf/).
// Fields a report lacks (a run without --eval-iters, one rank) leave their
// chart out.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace meshtrain::report {

// `prediction`: perf::Prediction's JSON, the run's memory-only "prediction",
// or null for none.
std::string run_report_html(const nlohmann::json& run, const nlohmann::json& prediction);

}  // namespace meshtrain::report

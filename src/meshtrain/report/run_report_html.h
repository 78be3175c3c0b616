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
//   - predicted against measured step time, throughput and memory, when a
//     prediction is given (the performance model for a system, perf/).
// Fields a report lacks (a run without --eval-iters, one rank) leave their
// chart out.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace meshtrain::report {

// `prediction`: perf::Prediction's JSON, or null for none.
std::string run_report_html(const nlohmann::json& run, const nlohmann::json& prediction);

}  // namespace meshtrain::report

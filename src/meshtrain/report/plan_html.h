// `plan --html`: the planner's searched space as a page to look at:
//   - a TP x PP heat map of the best predicted throughput of each cell (the
//     fastest fitting layout with that TP and PP, over every other knob);
//     cells where no layout fits are grey, with the reason;
//   - the chosen layout, why it beats the runner-up (tune::why_best), and the
//     predicted step of the best layouts split by where the time goes;
//   - the candidates dropped, by reason.
// `o` must be the options the plan was made with (a framework profile's),
// so that the grey cells state the memory that plan saw.
#pragma once

#include <string>

#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain::report {

std::string plan_html(const ModelConfig& m, const perf::SystemSpec& s, int num_gpus, int global_batch_size,
                      const tune::SearchSpace& space, const tune::Plan& plan, const perf::PerfOptions& o = {});

}  // namespace meshtrain::report

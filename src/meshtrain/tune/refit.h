// Calibration from trials (`meshtrain tune --calibrate FILE`): the system
// file's efficiency parameters refitted so that the model predicts the
// throughput the trials measured. Two scale factors are fitted:
//   compute  multiplies the matmul efficiency curves (bf16 and fp32), the
//            flash-attention and attention-matmul efficiencies and the
//            element-wise memory efficiency
//   comm     multiplies every link's efficiency curves (and per-operation
//            curves) and the network's
// by a grid search over 0.01 .. 10 (73 log-spaced values each) minimising the
// mean squared log(measured / predicted) tokens/s over the ok trials (the
// median where a layout ran more than once). Everything else is kept; the
// result's "sources" names the trials.
#pragma once

#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/trial.h"

namespace meshtrain::tune {

struct Refit {
  perf::SystemSpec system;
  double compute_scale = 1, comm_scale = 1;
  double rms_log_error_before = 0, rms_log_error_after = 0;
  int layouts = 0;
};

perf::SystemSpec scale_efficiencies(perf::SystemSpec s, double compute, double comm);

// Throws Error when no trial ran ok.
Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Trial>& trials);

}  // namespace meshtrain::tune

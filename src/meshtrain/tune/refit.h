// Calibration from trials (`meshtrain tune --calibrate FILE`): the system
// file's efficiency parameters refitted so that the model predicts the
// throughput the trials measured. Six factors are fitted, each multiplying
// one group of the file's figures:
//   matmul          the matmul efficiency curves (bf16 and fp32) and the
//                   non-flash attention matmul efficiency
//   attention       the flash-attention efficiency
//   elementwise     the memory-bound kernels' efficiency (norms, activations,
//                   softmax, the optimizer)
//   comm_bandwidth  every link's efficiency curves (and per-operation curves)
//                   and the network's
//   comm_latency    every link's and the network's latency per message step
//   kernel_overhead the per-kernel launch and synchronization cost
// Efficiencies stay within (0, 1] (a factor that would push a curve above 1
// holds it at 1). The fit minimises the mean squared log(measured /
// predicted) tokens/s over the layouts that ran ok (each layout's median
// where it ran more than once), by coordinate descent: each factor in turn
// is set to the best of a log-spaced grid (24 values a decade; 0.01 .. 10
// for efficiencies, 0.01 .. 1000 for latency and overhead) with the others
// held, until a round improves the error by less than 0.1%; then, with at
// least as many layouts as factors, Eigen's Levenberg-Marquardt moves all
// log factors at once from there (kept when it lowers the error). Everything else
// is kept; the result's "sources" names the trials and the factors.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/system_spec.h"
#include "meshtrain/tune/trial.h"

namespace meshtrain::tune {

enum class Factor { matmul, attention, elementwise, comm_bandwidth, comm_latency, kernel_overhead };
inline constexpr int kNumFactors = 6;
inline constexpr const char* kFactorNames[kNumFactors] = {"matmul",         "attention",    "elementwise",
                                                           "comm_bandwidth", "comm_latency", "kernel_overhead"};
using Factors = std::array<double, kNumFactors>;  // indexed by Factor
inline constexpr Factors kUnitFactors = {1, 1, 1, 1, 1, 1};

perf::SystemSpec scale_system(perf::SystemSpec s, const Factors& f);

// One layout's measured throughput (the median of its ok trials).
struct Measured {
  ParallelConfig config;
  std::string key;
  double tokens_per_s = 0;
};
std::vector<Measured> measured_layouts(const std::vector<Trial>& trials);

struct Refit {
  perf::SystemSpec system;
  Factors factors = kUnitFactors;
  double rms_log_error_before = 0, rms_log_error_after = 0;
  int layouts = 0;
};

// Throws Error when no layout ran ok.
Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Measured>& layouts);
Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Trial>& trials);

// "matmul x 0.52, attention x 1.1, ..."
std::string describe(const Factors& f);

}  // namespace meshtrain::tune

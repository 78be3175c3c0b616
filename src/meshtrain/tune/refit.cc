#include "meshtrain/tune/refit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

#include "meshtrain/core/error.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/perf/predict.h"

namespace meshtrain::tune {

namespace {

constexpr double kMinEfficiency = 1e-6;  // SystemSpec::validate's floor

double clamp_eff(double y) { return std::clamp(y, kMinEfficiency, 1.0); }

perf::Curve scaled(const perf::Curve& c, double f) {
  if (c.points().empty()) return perf::Curve(clamp_eff(f));
  auto p = c.points();
  for (auto& [x, y] : p) y = clamp_eff(y * f);
  return perf::Curve(p);
}

double get(const Factors& f, Factor k) { return f[static_cast<int>(k)]; }

bool wide(int k) { return k == static_cast<int>(Factor::comm_latency) || k == static_cast<int>(Factor::kernel_overhead); }

// Factors from their logarithms, each held within its search range.
Factors from_log(const Eigen::VectorXd& x) {
  Factors f;
  for (int k = 0; k < kNumFactors; ++k) f[k] = std::exp(std::clamp(x[k], std::log(0.01), std::log(wide(k) ? 1000 : 10)));
  return f;
}

// log(measured / predicted) of each layout, as a function of the log factors
// (Eigen's Levenberg-Marquardt functor).
struct LogResiduals {
  using Scalar = double;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };
  using InputType = Eigen::VectorXd;
  using ValueType = Eigen::VectorXd;
  using JacobianType = Eigen::MatrixXd;
  const ModelConfig* m;
  const perf::SystemSpec* base;
  int ranks;
  const std::vector<Measured>* layouts;
  perf::PerfCache* cache;
  int inputs() const { return kNumFactors; }
  int values() const { return static_cast<int>(layouts->size()); }
  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& r) const {
    const perf::SystemSpec s = scale_system(*base, from_log(x));
    for (size_t i = 0; i < layouts->size(); ++i) {
      const Measured& l = (*layouts)[i];
      r[i] = std::log(l.tokens_per_s / perf::predict(*m, l.config, s, ranks, {}, cache).tokens_per_s);
    }
    return 0;
  }
};

}  // namespace

perf::SystemSpec scale_system(perf::SystemSpec s, const Factors& f) {
  const double mm = get(f, Factor::matmul), bw = get(f, Factor::comm_bandwidth), lat = get(f, Factor::comm_latency);
  s.compute.matmul_efficiency_bf16 = scaled(s.compute.matmul_efficiency_bf16, mm);
  s.compute.matmul_efficiency_fp32 = scaled(s.compute.matmul_efficiency_fp32, mm);
  if (s.compute.attention_matmul_efficiency > 0)
    s.compute.attention_matmul_efficiency = clamp_eff(s.compute.attention_matmul_efficiency * mm);
  s.compute.flash_attention_efficiency = clamp_eff(s.compute.flash_attention_efficiency * get(f, Factor::attention));
  s.memory.elementwise_efficiency = clamp_eff(s.memory.elementwise_efficiency * get(f, Factor::elementwise));
  s.compute.kernel_overhead_s *= get(f, Factor::kernel_overhead);
  for (perf::LinkClass& l : s.links) {
    l.efficiency = scaled(l.efficiency, bw);
    for (auto& c : l.op_efficiency)
      if (c) c = scaled(*c, bw);
    l.latency_s *= lat;
  }
  s.network.efficiency = scaled(s.network.efficiency, bw);
  s.network.latency_s *= lat;
  return s;
}

std::vector<Measured> measured_layouts(const std::vector<Trial>& trials) {
  std::map<std::string, std::pair<ParallelConfig, std::vector<double>>> by_key;
  for (const Trial& t : trials)
    if (t.ok()) {
      auto& e = by_key[t.key];
      e.first = t.config;
      e.second.push_back(t.tokens_per_s);
    }
  std::vector<Measured> out;
  for (const auto& [key, e] : by_key) out.push_back({e.first, key, median_of(e.second)});
  return out;
}

std::string describe(const Factors& f) {
  std::string s;
  for (int i = 0; i < kNumFactors; ++i) s += fmt::format("{}{} x {:.3g}", i ? ", " : "", kFactorNames[i], f[i]);
  return s;
}

Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Measured>& layouts) {
  check(!layouts.empty(), "calibration needs at least one trial that ran ok");
  perf::PerfCache cache;  // keyed by schedule, layout and costs: valid across systems
  auto rms = [&](const Factors& f) {
    const perf::SystemSpec s = scale_system(base, f);
    double sum = 0;
    for (const Measured& l : layouts)
      sum += std::pow(std::log(l.tokens_per_s / perf::predict(m, l.config, s, ranks, {}, &cache).tokens_per_s), 2);
    return std::sqrt(sum / layouts.size());
  };
  Refit r;
  r.layouts = static_cast<int>(layouts.size());
  r.rms_log_error_before = rms(r.factors);
  r.rms_log_error_after = r.rms_log_error_before;
  for (int round = 0; round < 8; ++round) {
    const double start = r.rms_log_error_after;
    for (int k = 0; k < kNumFactors; ++k) {
      for (int i = 0; i <= (wide(k) ? 120 : 72); ++i) {
        Factors f = r.factors;
        f[k] = std::pow(10.0, -2 + i / 24.0);
        const double e = rms(f);
        if (e < r.rms_log_error_after) r.rms_log_error_after = e, r.factors = f;
      }
    }
    if (r.rms_log_error_after > 0.999 * start) break;
  }
  // Then all factors at once from there (the grid moves one at a time and
  // stalls where factors trade off), when the layouts determine them.
  if (layouts.size() >= static_cast<size_t>(kNumFactors)) {
    Eigen::VectorXd x(kNumFactors);
    for (int k = 0; k < kNumFactors; ++k) x[k] = std::log(r.factors[k]);
    Eigen::NumericalDiff<LogResiduals> f(LogResiduals{&m, &base, ranks, &layouts, &cache});
    Eigen::LevenbergMarquardt<Eigen::NumericalDiff<LogResiduals>> lm(f);
    lm.minimize(x);
    const Factors polished = from_log(x);
    if (const double e = rms(polished); e < r.rms_log_error_after) r.rms_log_error_after = e, r.factors = polished;
  }
  r.system = scale_system(base, r.factors);
  r.system.sources["tune calibration"] =
      fmt::format("{}, fitted to {} measured layouts (rms log error {:.3f} -> {:.3f})", describe(r.factors), r.layouts,
                  r.rms_log_error_before, r.rms_log_error_after);
  return r;
}

Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Trial>& trials) {
  return refit_system(m, base, ranks, measured_layouts(trials));
}

}  // namespace meshtrain::tune

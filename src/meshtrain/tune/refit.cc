#include "meshtrain/tune/refit.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/perf/predict.h"

namespace meshtrain::tune {

namespace {

perf::Curve scaled(const perf::Curve& c, double f) {
  if (c.points().empty()) return perf::Curve(f);
  auto p = c.points();
  for (auto& [x, y] : p) y *= f;
  return perf::Curve(p);
}

}  // namespace

perf::SystemSpec scale_efficiencies(perf::SystemSpec s, double compute, double comm) {
  s.compute.matmul_efficiency_bf16 = scaled(s.compute.matmul_efficiency_bf16, compute);
  s.compute.matmul_efficiency_fp32 = scaled(s.compute.matmul_efficiency_fp32, compute);
  s.compute.flash_attention_efficiency *= compute;
  s.compute.attention_matmul_efficiency *= compute;
  s.memory.elementwise_efficiency *= compute;
  for (perf::LinkClass& l : s.links) {
    l.efficiency = scaled(l.efficiency, comm);
    for (auto& c : l.op_efficiency)
      if (c) c = scaled(*c, comm);
  }
  s.network.efficiency = scaled(s.network.efficiency, comm);
  return s;
}

Refit refit_system(const ModelConfig& m, const perf::SystemSpec& base, int ranks, const std::vector<Trial>& trials) {
  std::map<std::string, std::pair<ParallelConfig, std::vector<double>>> measured;
  for (const Trial& t : trials)
    if (t.ok()) {
      auto& e = measured[t.key];
      e.first = t.config;
      e.second.push_back(t.tokens_per_s);
    }
  check(!measured.empty(), "calibration needs at least one trial that ran ok");
  perf::PerfCache cache;  // keyed by schedule, layout and costs: valid across systems
  auto rms = [&](const perf::SystemSpec& s) {
    double sum = 0;
    for (const auto& [key, e] : measured) {
      const double pred = perf::predict(m, e.first, s, ranks, {}, &cache).tokens_per_s;
      sum += std::pow(std::log(median_of(e.second) / pred), 2);
    }
    return std::sqrt(sum / measured.size());
  };
  Refit r;
  r.layouts = static_cast<int>(measured.size());
  r.rms_log_error_before = rms(base);
  r.rms_log_error_after = r.rms_log_error_before;
  r.system = base;
  for (int i = 0; i <= 72; ++i)
    for (int k = 0; k <= 72; ++k) {
      const double a = std::pow(10.0, -2 + i / 24.0), b = std::pow(10.0, -2 + k / 24.0);
      const perf::SystemSpec s = scale_efficiencies(base, a, b);
      const double e = rms(s);
      if (e < r.rms_log_error_after) r.rms_log_error_after = e, r.system = s, r.compute_scale = a, r.comm_scale = b;
    }
  r.system.sources["tune calibration"] = fmt::format(
      "compute efficiencies x {:.3g}, communication efficiencies x {:.3g}, fitted to {} measured layouts "
      "(rms log error {:.3f} -> {:.3f})",
      r.compute_scale, r.comm_scale, r.layouts, r.rms_log_error_before, r.rms_log_error_after);
  return r;
}

}  // namespace meshtrain::tune

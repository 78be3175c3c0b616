#include "meshtrain/tune/validate_cv.h"

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain::tune {

namespace {

constexpr double kFlash[] = {0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7};
constexpr int kNumFlash = sizeof(kFlash) / sizeof(kFlash[0]);

// Every row predicted at every grid point: at[g][i] for rows[i].
struct GridResults {
  std::vector<EfficiencyPoint> grid;
  std::vector<const RunRow*> rows;
  std::vector<std::vector<RowResult>> at;
  std::vector<std::string> skipped;  // rows whose system could not be loaded
};

GridResults evaluate_grid(const RunRows& runs) {
  GridResults g;
  g.grid = efficiency_grid();
  std::map<std::string, perf::SystemSpec> systems;
  perf::PerfCache cache;
  for (const RunRow& r : runs.rows) {
    try {
      if (!systems.count(r.system)) systems.emplace(r.system, perf::load_system_spec(r.system));
      // A row the model cannot describe (e.g. a layout it refuses) is
      // listed once here, as `validate` lists it, rather than ending the fit.
      (void)predict_run(r, systems.at(r.system), cache, nullptr);
      g.rows.push_back(&r);
    } catch (const Error& e) {
      g.skipped.push_back(fmt::format("{} line {}: {}", r.id, r.line, e.what()));
    }
  }
  g.at.resize(g.grid.size());
  for (size_t p = 0; p < g.grid.size(); ++p) {
    std::map<std::string, perf::SystemSpec> at_point = systems;
    for (auto& [name, spec] : at_point) set_efficiency(spec, g.grid[p]);
    PlanMemo memo;
    const size_t same_emax = p - p % kNumFlash;  // first point with this emax
    for (size_t i = 0; i < g.rows.size(); ++i) {
      const RunRow& r = *g.rows[i];
      const bool no_flash = r.space.flash_attention == std::vector<bool>{false};
      if (no_flash && p != same_emax)
        g.at[p].push_back(g.at[same_emax][i]);  // flash efficiency cannot matter
      else
        g.at[p].push_back(predict_run(r, at_point.at(r.system), cache, &memo));
    }
  }
  return g;
}

// The grid point that minimizes the objective over rows `idx`.
size_t best_point(const GridResults& g, const std::vector<size_t>& idx) {
  size_t best = 0;
  double best_obj = std::numeric_limits<double>::infinity();
  bool best_fits = false;
  for (size_t p = 0; p < g.grid.size(); ++p) {
    double sq = 0, mx = 0;
    int n = 0;
    bool fits = true;
    for (size_t i : idx) {
      const RowResult& r = g.at[p][i];
      if (!r.expected_oom && !r.prediction.fits) fits = false;
      if (!r.compared) continue;
      sq += r.error * r.error;
      mx = std::max(mx, std::fabs(r.error));
      ++n;
    }
    const double obj = n ? sq / n + 0.5 * mx * mx : 0;
    if ((fits && !best_fits) || (fits == best_fits && obj < best_obj)) {
      best = p;
      best_obj = obj;
      best_fits = fits;
    }
  }
  return best;
}

}  // namespace

std::vector<EfficiencyPoint> efficiency_grid() {
  std::vector<EfficiencyPoint> g;
  for (int e = 0; e <= 10; ++e)
    for (double f : kFlash) g.push_back({0.40 + 0.05 * e, f});
  return g;
}

void set_efficiency(perf::SystemSpec& s, const EfficiencyPoint& p) {
  std::vector<std::pair<double, double>> pts;
  for (double d = 32; d <= 16384; d *= 2) pts.emplace_back(d, p.emax * d / (d + 128));
  s.compute.matmul_efficiency_bf16 = perf::Curve(std::move(pts));
  s.compute.flash_attention_efficiency = p.flash;
}

std::vector<EfficiencyFit> fit_efficiency(const RunRows& runs) {
  const GridResults g = evaluate_grid(runs);
  std::map<std::string, std::vector<size_t>> by_system;
  for (size_t i = 0; i < g.rows.size(); ++i) by_system[g.rows[i]->system].push_back(i);
  std::vector<EfficiencyFit> fits;
  for (const auto& [system, idx] : by_system) {
    const size_t p = best_point(g, idx);
    std::vector<double> errs;
    for (size_t i : idx)
      if (g.at[p][i].compared) errs.push_back(g.at[p][i].error);
    fits.push_back({system, g.grid[p], summarize(errs)});
  }
  return fits;
}

CrossValidation cross_validate_by_source(const RunRows& runs) {
  const GridResults g = evaluate_grid(runs);
  CrossValidation cv;
  cv.held_out.skipped = runs.skipped;
  cv.held_out.skipped.insert(cv.held_out.skipped.end(), g.skipped.begin(), g.skipped.end());
  std::set<std::string> sources;
  for (const RunRow* r : g.rows) sources.insert(r->source);
  for (const std::string& src : sources) {
    SourceFold fold;
    fold.source = src;
    std::vector<size_t> others;
    std::map<std::string, std::vector<size_t>> held, train;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      if (g.rows[i]->source == src) {
        held[g.rows[i]->system].push_back(i);
      } else {
        others.push_back(i);
        train[g.rows[i]->system].push_back(i);
      }
    }
    std::vector<double> errs;
    for (const auto& [system, idx] : held) {
      const bool own = train.count(system) > 0;
      if (!own) fold.pooled.push_back(system);
      const size_t p = own ? best_point(g, train.at(system)) : best_point(g, others);
      fold.fitted[system] = g.grid[p];
      for (size_t i : idx) {
        cv.held_out.rows.push_back(g.at[p][i]);
        if (g.at[p][i].compared) errs.push_back(g.at[p][i].error);
      }
    }
    fold.errors = summarize(errs);
    cv.sources.push_back(std::move(fold));
  }
  tally(cv.held_out);
  return cv;
}

nlohmann::json cross_validation_json(const CrossValidation& cv) {
  nlohmann::json j = validation_json(cv.held_out);
  nlohmann::json folds = nlohmann::json::array();
  for (const SourceFold& f : cv.sources) {
    nlohmann::json fitted = nlohmann::json::object();
    for (const auto& [s, p] : f.fitted) fitted[s] = {{"emax", p.emax}, {"flash_attention_efficiency", p.flash}};
    folds.push_back({{"source", f.source},
                     {"rows", f.errors.rows},
                     {"median_abs_error", f.errors.median_abs_error},
                     {"max_abs_error", f.errors.max_abs_error},
                     {"fitted", fitted},
                     {"pooled", f.pooled}});
  }
  j["sources"] = folds;
  j["cv"] = "source";
  return j;
}

}  // namespace meshtrain::tune

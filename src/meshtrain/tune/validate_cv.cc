#include "meshtrain/tune/validate_cv.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/perf/framework_profile.h"

namespace meshtrain::tune {

namespace {

constexpr double kFlash[] = {0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7};
constexpr int kNumFlash = sizeof(kFlash) / sizeof(kFlash[0]);
// The memory-bound passes' share of HBM bandwidth; 0.7 was the fixed value
// before it was fitted, and stays the most the fit allows.
constexpr double kElementwise[] = {0.3, 0.45, 0.6, 0.7};
constexpr int kNumElementwise = sizeof(kElementwise) / sizeof(kElementwise[0]);

// log(predicted / reported)^2 for a relative error predicted / reported - 1.
double squared_log_ratio(double error) {
  const double l = std::log1p(error);
  return l * l;
}

// Every row predicted at every grid point: at[g][i] for rows[i].
struct GridResults {
  std::vector<EfficiencyPoint> grid;
  std::vector<const RunRow*> rows;
  std::vector<std::vector<RowResult>> at;
  std::vector<std::string> skipped;  // rows whose system could not be loaded
  std::vector<std::string> group;    // efficiency group of each row's system
  // sq[g][i]: log(predicted / reported)^2 of at[g][i] where compared
  std::vector<std::vector<double>> sq;
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
      g.group.push_back(systems.at(r.system).group());
    } catch (const Error& e) {
      g.skipped.push_back(fmt::format("{} line {}: {}", r.id, r.line, e.what()));
    }
  }
  g.at.resize(g.grid.size());
  for (size_t p = 0; p < g.grid.size(); ++p) {
    std::map<std::string, perf::SystemSpec> at_point = systems;
    for (auto& [name, spec] : at_point) set_efficiency(spec, g.grid[p]);
    PlanMemo memo;
    // The point with this emax and elementwise efficiency at the first flash
    // efficiency (the grid runs emax, then flash, then elementwise).
    const size_t first_flash = p - (p / kNumElementwise) % kNumFlash * kNumElementwise;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      const RunRow& r = *g.rows[i];
      const bool no_flash = r.space.flash_attention == std::vector<bool>{false};
      if (no_flash && p != first_flash)
        g.at[p].push_back(g.at[first_flash][i]);  // flash efficiency cannot matter
      else
        g.at[p].push_back(predict_run(r, at_point.at(r.system), cache, &memo));
    }
  }
  g.sq.resize(g.grid.size());
  for (size_t p = 0; p < g.grid.size(); ++p)
    for (const RowResult& r : g.at[p]) g.sq[p].push_back(r.compared ? squared_log_ratio(r.error) : 0.0);
  return g;
}

struct Score {
  bool fits = true;
  int compared = 0;
  double objective = 0;
};

// The fit's objective over `idx` at grid point p: the mean squared log
// ratio of predicted to reported (validate_cv.h).
Score score(const GridResults& g, size_t p, const std::vector<size_t>& idx) {
  Score s;
  double sq = 0;
  for (size_t i : idx) {
    const RowResult& r = g.at[p][i];
    if (!r.expected_oom && !r.prediction.fits) s.fits = false;
    if (!r.compared) continue;
    sq += g.sq[p][i];
    ++s.compared;
  }
  s.objective = s.compared ? sq / s.compared : 0;
  return s;
}

// The score of every grid point over a set of rows, computed on first use
// and kept: each fold scores the same training rows for every pair of
// shrinkage weights. Keyed by the rows' address, so a cache must not
// outlive the sets it was asked about.
class ScoreCache {
 public:
  explicit ScoreCache(const GridResults& g) : g_(g) {}
  const GridResults& grid() const { return g_; }
  const Score& at(const std::vector<size_t>& idx, size_t p) {
    auto [it, fresh] = scores_.try_emplace(&idx);
    if (fresh)
      for (size_t q = 0; q < g_.grid.size(); ++q) it->second.push_back(score(g_, q, idx));
    return it->second[p];
  }

 private:
  const GridResults& g_;
  std::map<const std::vector<size_t>*, std::vector<Score>> scores_;
};

double objective_of(const std::vector<double>& errors) {
  double sq = 0;
  for (double e : errors) sq += squared_log_ratio(e);
  return errors.empty() ? 0 : sq / double(errors.size());
}

// Grid index of a point's flash efficiency (efficiency_grid() runs emax,
// then flash, then elementwise).
size_t flash_index(size_t p) { return p / kNumElementwise % kNumFlash; }
// Point p with the flash efficiency of index f.
size_t with_flash(size_t p, size_t f) {
  return (p / (kNumFlash * kNumElementwise) * kNumFlash + f) * kNumElementwise + p % kNumElementwise;
}

// The grid point that minimizes a nested, shrunk objective over
// `levels` (most specific first, the last unshrunk): going from the last
// level to the first, obj = (n obj_level + k obj) / (n + k), n the level's
// compared rows. A point where some row of the first level does not fit
// loses to any point where all fit. With `flash` (an index), only points
// of that flash efficiency are considered.
size_t best_point_shrunk(ScoreCache& cache, const std::vector<const std::vector<size_t>*>& levels, double k,
                         std::optional<size_t> flash = std::nullopt) {
  const GridResults& g = cache.grid();
  size_t best = 0;
  double best_obj = std::numeric_limits<double>::infinity();
  bool best_fits = false;
  for (size_t p = 0; p < g.grid.size(); ++p) {
    if (flash && flash_index(p) != *flash) continue;
    Score s = cache.at(*levels.back(), p);
    double obj = s.objective;
    for (size_t l = levels.size() - 1; l-- > 0;) {
      s = cache.at(*levels[l], p);
      if (s.compared + k > 0) obj = (s.compared * s.objective + k * obj) / (s.compared + k);
    }
    if ((s.fits && !best_fits) || (s.fits == best_fits && obj < best_obj)) {
      best = p;
      best_obj = obj;
      best_fits = s.fits;
    }
  }
  return best;
}

// The grid point that minimizes the objective over rows `idx`; with
// `pooled`, the objective shrunk toward the objective over `pooled` by k
// row-equivalents (validate_cv.h).
size_t best_point(const GridResults& g, const std::vector<size_t>& idx, const std::vector<size_t>* pooled = nullptr,
                  double k = 0) {
  std::vector<const std::vector<size_t>*> levels{&idx};
  if (pooled && k > 0) levels.push_back(pooled);
  ScoreCache cache(g);
  return best_point_shrunk(cache, levels, k);
}

// Rows of each efficiency group (systems of one device), of each (group,
// framework family) and of each (group, profile), among `idx`.
struct Split {
  // by group; family key "group/family", profile key "group/profile"
  std::map<std::string, std::vector<size_t>> system, family, profile;
};
Split split(const GridResults& g, const std::vector<size_t>& idx) {
  Split s;
  for (size_t i : idx) {
    const RunRow& r = *g.rows[i];
    s.system[g.group[i]].push_back(i);
    if (r.profile.empty()) continue;
    s.profile[g.group[i] + "/" + r.profile].push_back(i);
    s.family[g.group[i] + "/" + perf::efficiency_family(perf::framework_profile(r.profile))].push_back(i);
  }
  return s;
}

// The point for rows of `profile` on a system fitted on `train`: the
// profile's rows shrunk toward its family's rows, those toward the
// system's, by k_flash row-equivalents for the flash efficiency and then by
// k for the rest at that flash efficiency (infinity: the system's pooled
// value). A profile without rows of its own takes its family's point.
size_t profile_point(ScoreCache& cache, const Split& train, const std::string& system, const std::string& profile,
                     size_t pooled_point, const Shrinkage& k) {
  if (k.pooled() || profile.empty()) return pooled_point;
  std::vector<const std::vector<size_t>*> levels;
  if (auto it = train.profile.find(system + "/" + profile); it != train.profile.end()) levels.push_back(&it->second);
  const std::string& family = perf::efficiency_family(perf::framework_profile(profile));
  if (auto it = train.family.find(system + "/" + family); it != train.family.end()) levels.push_back(&it->second);
  if (levels.empty()) return pooled_point;
  levels.push_back(&train.system.at(system));
  const size_t flash = flash_index(std::isinf(k.k_flash) ? pooled_point : best_point_shrunk(cache, levels, k.k_flash));
  if (std::isinf(k.k)) return with_flash(pooled_point, flash);
  return best_point_shrunk(cache, levels, k.k, flash);
}

struct Folds {
  std::vector<size_t> index;     // g.rows index of each held-out result
  std::vector<RowResult> rows;   // held out
  std::vector<SourceFold> sources;
};

// What a fold trains on, the same at every shrinkage: its held-out rows and
// the others, split, and the pooled point of each held-out system.
struct FoldBasis {
  std::string source;
  Split held, train;
  std::map<std::string, size_t> pooled_point;  // held-out system -> grid point
  std::vector<std::string> pooled;             // systems fitted across hardware
};

// One basis per source, over the rows of every source but `without` (none:
// every row).
std::vector<FoldBasis> fold_bases(const GridResults& g, const std::string* without = nullptr) {
  std::set<std::string> sources;
  for (const RunRow* r : g.rows)
    if (!without || r->source != *without) sources.insert(r->source);
  std::vector<FoldBasis> out;
  for (const std::string& src : sources) {
    FoldBasis b;
    b.source = src;
    std::vector<size_t> held_idx, others;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      if (without && g.rows[i]->source == *without) continue;
      (g.rows[i]->source == src ? held_idx : others).push_back(i);
    }
    b.held = split(g, held_idx);
    b.train = split(g, others);
    for (const auto& [system, idx] : b.held.system) {
      const bool own = b.train.system.count(system) > 0;
      if (!own) b.pooled.push_back(system);
      b.pooled_point[system] = own ? best_point(g, b.train.system.at(system)) : best_point(g, others);
    }
    out.push_back(std::move(b));
  }
  return out;
}

Folds run_folds(ScoreCache& cache, const std::vector<FoldBasis>& bases, const Shrinkage& k) {
  const GridResults& g = cache.grid();
  Folds out;
  for (const FoldBasis& b : bases) {
    SourceFold fold;
    fold.source = b.source;
    fold.pooled = b.pooled;
    std::vector<double> errs;
    for (const auto& [system, idx] : b.held.system) {
      const bool own = b.train.system.count(system) > 0;
      const size_t p0 = b.pooled_point.at(system);
      fold.fitted[system] = g.grid[p0];
      std::map<std::string, size_t> by_profile;
      for (size_t i : idx) {
        const std::string& prof = g.rows[i]->profile;
        if (!by_profile.count(prof)) by_profile[prof] = own ? profile_point(cache, b.train, system, prof, p0, k) : p0;
        const size_t p = by_profile[prof];
        if (p != p0) fold.by_profile[system + "/" + prof] = g.grid[p];
        out.index.push_back(i);
        out.rows.push_back(g.at[p][i]);
        if (g.at[p][i].compared) errs.push_back(g.at[p][i].error);
      }
    }
    fold.errors = summarize(errs);
    out.sources.push_back(std::move(fold));
  }
  return out;
}

// Every pair of shrinkage weights' folds scored; the chosen pair (lowest
// held-out objective, ties to the larger k, then the larger k_flash) kept in
// `folds`.
struct Selection {
  Shrinkage k;
  Folds folds;
  std::vector<ShrinkageScore> scores;
};
Selection select_shrinkage(const GridResults& g, const std::vector<FoldBasis>& bases) {
  Selection sel;
  double best = std::numeric_limits<double>::infinity();
  const std::vector<double> ks = shrinkage_grid();
  ScoreCache cache(g);
  for (auto k = ks.rbegin(); k != ks.rend(); ++k)
    for (auto kf = ks.rbegin(); kf != ks.rend(); ++kf) {
      const Shrinkage pair{*k, *kf};
      Folds f = run_folds(cache, bases, pair);
      std::vector<double> errs;
      for (const RowResult& r : f.rows)
        if (r.compared) errs.push_back(r.error);
      const double obj = objective_of(errs);
      sel.scores.push_back({pair, summarize(errs), obj});
      if (obj < best - 1e-12) {
        best = obj;
        sel.k = pair;
        sel.folds = std::move(f);
      }
    }
  std::reverse(sel.scores.begin(), sel.scores.end());
  return sel;
}

// Each source predicted at the pair of shrinkage weights that leave-one-
// source-out chooses among the other sources (nested: the held-out source
// neither fits the efficiency data nor chooses the weights); `chosen` gets
// each source's pair, in the order of `outer`.
Folds nested_folds(const GridResults& g, const std::vector<FoldBasis>& outer, std::vector<Shrinkage>& chosen) {
  Folds out;
  for (const FoldBasis& b : outer) {
    const Shrinkage k = select_shrinkage(g, fold_bases(g, &b.source)).k;
    chosen.push_back(k);
    ScoreCache cache(g);
    const std::vector<FoldBasis> one{b};
    Folds f = run_folds(cache, one, k);
    out.index.insert(out.index.end(), f.index.begin(), f.index.end());
    out.rows.insert(out.rows.end(), f.rows.begin(), f.rows.end());
    out.sources.push_back(std::move(f.sources.front()));
  }
  return out;
}

// The held-out |error| of each compared row `keep` accepts.
std::vector<double> held_out_abs_errors(const Folds& f, const std::function<bool(const RunRow&)>& keep,
                                        const GridResults& g) {
  std::vector<double> e;
  for (size_t j = 0; j < f.rows.size(); ++j)
    if (f.rows[j].compared && keep(*g.rows[f.index[j]])) e.push_back(std::fabs(f.rows[j].error));
  return e;
}

// 80th percentile of the held-out |error| of the compared rows `keep`
// accepts; 0 with fewer than `min_rows` of them.
double abs_error_p80(const Folds& f, const std::function<bool(const RunRow&)>& keep, const GridResults& g,
                     int min_rows) {
  const std::vector<double> e = held_out_abs_errors(f, keep, g);
  return int(e.size()) >= min_rows ? quantile_of(e, 0.8) : 0.0;
}

// A profile's interval: the 80th percentile of its rows' held-out |error|
// with 3 rows or more; with 1 or 2, the group's widened to cover them (a
// profile whose one published run is missed by 50% is not known to the
// group's 7%); 0 without rows or where the group's already covers them.
double profile_abs_error(const Folds& f, const std::function<bool(const RunRow&)>& keep, const GridResults& g,
                         double group_p80) {
  const std::vector<double> e = held_out_abs_errors(f, keep, g);
  if (e.size() >= 3) return quantile_of(e, 0.8);
  const double worst = e.empty() ? 0 : *std::max_element(e.begin(), e.end());
  return worst > group_p80 ? worst : 0;
}

}  // namespace

std::vector<EfficiencyPoint> efficiency_grid() {
  std::vector<EfficiencyPoint> g;
  for (int e = 0; e <= 10; ++e)
    for (double f : kFlash)
      for (double x : kElementwise) g.push_back({0.40 + 0.05 * e, f, x});
  return g;
}

std::vector<double> shrinkage_grid() { return {1, 2, 4, 8, 16, 32, std::numeric_limits<double>::infinity()}; }

bool Shrinkage::pooled() const { return std::isinf(k) && std::isinf(k_flash); }

std::string shrinkage_weight_name(double k) { return std::isinf(k) ? "inf" : fmt::format("{:g}", k); }

std::string shrinkage_name(const Shrinkage& s) {
  return fmt::format("k {}, k_flash {}", shrinkage_weight_name(s.k), shrinkage_weight_name(s.k_flash));
}

void set_efficiency(perf::SystemSpec& s, const EfficiencyPoint& p) {
  std::vector<std::pair<double, double>> pts;
  for (double d = 32; d <= 16384; d *= 2) pts.emplace_back(d, p.emax * d / (d + 128));
  s.compute.matmul_efficiency_bf16 = perf::Curve(std::move(pts));
  s.compute.flash_attention_efficiency = p.flash;
  s.memory.elementwise_efficiency = p.elementwise;
  s.profile_efficiency.clear();
}

EfficiencyFits fit_efficiency(const RunRows& runs) {
  const GridResults g = evaluate_grid(runs);
  const std::vector<FoldBasis> bases = fold_bases(g);
  const Selection sel = select_shrinkage(g, bases);
  // Intervals from the nested folds: what a new source's runs are missed by.
  std::vector<Shrinkage> chosen;
  const Folds held = nested_folds(g, bases, chosen);
  std::vector<size_t> all(g.rows.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const Split sp = split(g, all);
  ScoreCache cache(g);
  std::map<std::string, std::string> group_of;  // system -> group
  for (size_t i = 0; i < g.rows.size(); ++i) group_of[g.rows[i]->system] = g.group[i];
  EfficiencyFits out;
  out.shrinkage = sel.k;
  for (const auto& [system, group] : group_of) {
    const std::vector<size_t>& idx = sp.system.at(group);
    EfficiencyFit fit;
    fit.system = system;
    const size_t p0 = best_point(g, idx);
    fit.best = g.grid[p0];
    auto in_group = [&, &group = group](const RunRow& r) { return group_of.at(r.system) == group; };
    fit.cv_abs_error = abs_error_p80(held, in_group, g, 1);
    std::vector<double> errs;
    std::map<std::string, size_t> points;
    for (size_t i : idx) {
      const std::string& prof = g.rows[i]->profile;
      if (!points.count(prof)) points[prof] = profile_point(cache, sp, group, prof, p0, sel.k);
      const RowResult& r = g.at[points[prof]][i];
      if (r.compared) errs.push_back(r.error);
    }
    fit.errors = summarize(errs);
    // A profile without rows on the group takes its family's point, as in
    // the folds (deepspeed-zero3-2021 Megatron-DeepSpeed's: efficiency_family).
    for (const perf::FrameworkProfile& f : perf::framework_profiles())
      if (!points.count(f.name)) points[f.name] = profile_point(cache, sp, group, f.name, p0, sel.k);
    for (const auto& [prof, p] : points) {
      if (prof.empty()) continue;  // rows without a profile: the group's point
      ProfileFit pf;
      pf.point = g.grid[p];
      const auto own = sp.profile.find(group + "/" + prof);
      pf.rows = own == sp.profile.end() ? 0 : int(own->second.size());
      pf.cv_abs_error = profile_abs_error(
          held, [&, &prof = prof](const RunRow& r) { return in_group(r) && r.profile == prof; }, g, fit.cv_abs_error);
      if (p == p0 && pf.cv_abs_error == 0) continue;  // the group's point and interval
      fit.profiles[prof] = pf;
    }
    out.systems.push_back(std::move(fit));
  }
  return out;
}

CrossValidation cross_validate_by_source(const RunRows& runs) {
  const GridResults g = evaluate_grid(runs);
  const std::vector<FoldBasis> bases = fold_bases(g);
  Selection sel = select_shrinkage(g, bases);
  CrossValidation cv;
  cv.held_out.skipped = runs.skipped;
  cv.held_out.skipped.insert(cv.held_out.skipped.end(), g.skipped.begin(), g.skipped.end());
  cv.held_out.rows = std::move(sel.folds.rows);
  cv.sources = std::move(sel.folds.sources);
  cv.shrinkage = sel.k;
  cv.by_shrinkage = std::move(sel.scores);
  tally(cv.held_out);
  std::vector<Shrinkage> chosen;
  Folds nested = nested_folds(g, bases, chosen);
  cv.nested.skipped = cv.held_out.skipped;
  cv.nested.rows = std::move(nested.rows);
  tally(cv.nested);
  for (size_t i = 0; i < bases.size(); ++i) cv.nested_shrinkage.push_back({bases[i].source, chosen[i]});
  return cv;
}

nlohmann::json shrinkage_json(const Shrinkage& s) {
  auto value = [](double k) { return std::isinf(k) ? nlohmann::json("inf") : nlohmann::json(k); };
  return {{"k", value(s.k)}, {"k_flash", value(s.k_flash)}};
}

nlohmann::json cross_validation_json(const CrossValidation& cv) {
  nlohmann::json j = validation_json(cv.held_out);
  auto point = [](const EfficiencyPoint& p) {
    return nlohmann::json{
        {"emax", p.emax}, {"flash_attention_efficiency", p.flash}, {"elementwise_efficiency", p.elementwise}};
  };
  nlohmann::json folds = nlohmann::json::array();
  for (const SourceFold& f : cv.sources) {
    nlohmann::json fitted = nlohmann::json::object(), by_profile = nlohmann::json::object();
    for (const auto& [s, p] : f.fitted) fitted[s] = point(p);
    for (const auto& [s, p] : f.by_profile) by_profile[s] = point(p);
    folds.push_back({{"source", f.source},
                     {"rows", f.errors.rows},
                     {"median_abs_error", f.errors.median_abs_error},
                     {"max_abs_error", f.errors.max_abs_error},
                     {"fitted", fitted},
                     {"by_profile", by_profile},
                     {"pooled", f.pooled}});
  }
  nlohmann::json ks = nlohmann::json::array();
  for (const ShrinkageScore& s : cv.by_shrinkage)
    ks.push_back({{"shrinkage", shrinkage_json(s.shrinkage)},
                  {"median_abs_error", s.errors.median_abs_error},
                  {"max_abs_error", s.errors.max_abs_error},
                  {"objective", s.objective}});
  nlohmann::json chosen = nlohmann::json::object();
  for (const auto& [source, k] : cv.nested_shrinkage) chosen[source] = shrinkage_json(k);
  nlohmann::json nested_rows = nlohmann::json::array();
  for (const RowResult& r : cv.nested.rows)
    if (r.compared) nested_rows.push_back({{"id", r.id}, {"error", r.error}});
  j["nested"] = {{"median_abs_error", cv.nested.all.median_abs_error},
                 {"max_abs_error", cv.nested.all.max_abs_error},
                 {"compared", cv.nested.all.rows},
                 {"shrinkage_by_source", chosen},
                 {"rows", nested_rows}};
  j["sources"] = folds;
  j["by_shrinkage"] = ks;
  j["shrinkage"] = shrinkage_json(cv.shrinkage);
  j["cv"] = "source";
  return j;
}

}  // namespace meshtrain::tune

// meshtrain validate: predictions against published runs (tune/validate.h),
// in-sample, refitted (--fit) or leave-one-source-out, plain and nested
// (--cv source, tune/validate_cv.h). Exits non-zero when no row could be compared or any
// row is malformed (each is listed on stderr).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/tune/planner.h"
#include "meshtrain/tune/validate.h"
#include "meshtrain/tune/validate_cv.h"

namespace meshtrain::cli {

namespace {

struct ValidateArgs {
  std::string file;
  std::string cv;
  bool fit = false;
  bool json = false;
};

void print_rows(const tune::Validation& v) {
  fmt::print("{:<20} {:<14} {:<24} {:>9} {:>9} {:>8}  {:<4} {}\n", "id", "system", "metric", "reported", "predicted",
             "error", "fits", "planned (blank knobs)");
  for (const auto& r : v.rows) {
    std::string filled;
    auto add = [&](const std::string& item) { filled += (filled.empty() ? "" : " ") + item; };
    for (const auto& [k, x] : r.filled) add(k + "=" + x);
    if (!r.system_from.empty()) add("system=" + r.system + " (from " + r.system_from + ")");
    if (r.profile_inferred) add("profile=" + r.profile + " (from framework)");
    if (r.flash_attention_named) add("flash_attn=yes (from framework)");
    for (const auto& [column, value] : r.inferred) add(column + "=" + value);
    if (r.tflops_kind_inferred) add("tflops_kind=hardware (from profile)");
    if (r.hybrid_shard_inferred)
      add(r.filled.count("dp_shard") ? "(hybrid sharding named)"
                                     : fmt::format("dp_shard={} (hybrid sharding named)", r.hybrid_shard_inferred));
    if (r.beyond_profile) add("(beyond " + r.profile + ")");
    for (const auto& why : r.unread) add("unread: " + why);
    const std::string err = r.compared ? fmt::format("{:+.1f}%", 100 * r.error) : "-";
    fmt::print("{:<20} {:<14} {:<24} {:>9.4g} {:>9.4g} {:>8}  {:<4} {}\n", r.id, r.system,
               r.expected_oom ? "fits (expect no)" : r.metric, r.reported, r.predicted, err,
               r.prediction.fits    ? "yes"
               : r.prediction.tight ? "tight"
                                    : "NO",
               filled);
  }
}

void print_summary(const tune::Validation& v) {
  fmt::print("\n{} rows compared: median |error| {:.1f}%, max |error| {:.1f}%\n", v.all.rows,
             100 * v.all.median_abs_error, 100 * v.all.max_abs_error);
  for (const auto& [s, e] : v.by_system)
    fmt::print("  {:<14} {:>3} rows: median {:.1f}%, max {:.1f}%\n", s, e.rows, 100 * e.median_abs_error,
               100 * e.max_abs_error);
  if (v.memory.rows > 0) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& r : v.rows)
      if (r.reported_memory > 0) {
        lo = std::min(lo, r.memory_error);
        hi = std::max(hi, r.memory_error);
      }
    fmt::print("peak memory where published: {} rows, median |error| {:.1f}%, max {:.1f}% (predicted {:+.1f}% ... {:+.1f}%)\n",
               v.memory.rows, 100 * v.memory.median_abs_error, 100 * v.memory.max_abs_error, 100 * lo, 100 * hi);
  }
  if (!v.not_fitting.empty()) fmt::print("published runs the model says do not fit: {}\n", fmt::join(v.not_fitting, " "));
  if (!v.tight.empty())
    fmt::print("published runs over the capacity by less than the model's memory error ({:.0f}%, tight): {}\n",
               100 * perf::kMemoryOverPrediction, fmt::join(v.tight, " "));
  if (!v.oom_mismatch.empty())
    fmt::print("runs reported out of memory that the model says fit: {}\n", fmt::join(v.oom_mismatch, " "));
  for (const auto& w : tune::sweep_rankings(v))
    fmt::print("sweep {} / {} / {} ({}): {} layouts, Spearman {:.2f} (predicted vs published)\n", w.source, w.model,
               w.system, w.metric, w.layouts, w.spearman);
}

// The held-out objective of every pair of shrinkage weights: one line per
// k, one column per k_flash; then the chosen pair's errors.
void print_shrinkage(const tune::CrossValidation& cv) {
  const std::vector<double> ks = tune::shrinkage_grid();
  fmt::print(
      "\nper-profile shrinkage (row-equivalents of the family's and the system's fit; inf: the system's "
      "point): held-out objective by k (emax, elementwise; lines) and k_flash (columns)\n{:>8}",
      "");
  for (double kf : ks) fmt::print(" {:>7}", tune::shrinkage_weight_name(kf));
  fmt::print("\n");
  for (size_t i = 0; i < ks.size(); ++i) {
    fmt::print("  k {:>4}", tune::shrinkage_weight_name(ks[i]));
    for (size_t j = 0; j < ks.size(); ++j) {
      const tune::ShrinkageScore& s = cv.by_shrinkage[i * ks.size() + j];
      fmt::print(" {:>6.4f}{}", s.objective, s.shrinkage == cv.shrinkage ? "*" : " ");
    }
    fmt::print("\n");
  }
  for (const auto& s : cv.by_shrinkage)
    if (s.shrinkage == cv.shrinkage || s.shrinkage.pooled())
      fmt::print("  {} {:<22} median {:.1f}%, max {:.1f}%, objective {:.4f}\n",
                 s.shrinkage == cv.shrinkage ? "chosen" : "pooled", tune::shrinkage_name(s.shrinkage),
                 100 * s.errors.median_abs_error, 100 * s.errors.max_abs_error, s.objective);
}

// The nested figure: each source at the pair the other sources choose.
void print_nested(const tune::CrossValidation& cv) {
  std::map<std::string, int> pairs;  // pair name -> folds choosing it
  for (const auto& [source, k] : cv.nested_shrinkage) ++pairs[tune::shrinkage_name(k)];
  std::string chosen;
  for (const auto& [name, n] : pairs) chosen += fmt::format("{}{} in {}", chosen.empty() ? "" : "; ", name, n);
  fmt::print(
      "  nested (each source also left out of the choice of the pair): median {:.1f}%, max {:.1f}% over {} rows; "
      "pairs chosen: {} of {} folds\n",
      100 * cv.nested.all.median_abs_error, 100 * cv.nested.all.max_abs_error, cv.nested.all.rows, chosen,
      cv.nested_shrinkage.size());
}

void print_folds(const tune::CrossValidation& cv) {
  fmt::print("\nleave-one-source-out: each source predicted with efficiency data fitted without it\n");
  fmt::print("{:<28} {:>4} {:>8} {:>8}  {}\n", "source", "rows", "median", "max", "fitted (system: emax/flash)");
  for (const auto& f : cv.sources) {
    std::string fitted;
    for (const auto& [s, p] : f.fitted) fitted += fmt::format("{}{}: {:.2f}/{:.2f}", fitted.empty() ? "" : ", ", s, p.emax, p.flash);
    for (const auto& [s, p] : f.by_profile) fitted += fmt::format(", {}: {:.2f}/{:.2f}", s, p.emax, p.flash);
    if (!f.pooled.empty()) fitted += fmt::format(" (pooled over systems: {})", fmt::join(f.pooled, " "));
    fmt::print("{:<28} {:>4} {:>7.1f}% {:>7.1f}%  {}\n", f.source.substr(0, 28), f.errors.rows,
               100 * f.errors.median_abs_error, 100 * f.errors.max_abs_error, fitted);
  }
  print_shrinkage(cv);
  print_nested(cv);
}

// Non-zero when nothing was compared or any row was malformed.
int verdict(const tune::Validation& v) {
  for (const auto& s : v.skipped) std::cerr << "validate: malformed row " << s << "\n";
  if (v.all.rows == 0) std::cerr << "validate: no row could be compared\n";
  return v.all.rows == 0 || !v.skipped.empty() ? 1 : 0;
}

int run_validate(const ValidateArgs& a) {
  const tune::CsvTable table = tune::read_csv_file(a.file);
  if (a.fit) {
    const tune::EfficiencyFits fits = tune::fit_efficiency(tune::read_runs(table));
    nlohmann::json j = nlohmann::json::array();
    for (const auto& f : fits.systems) {
      nlohmann::json profiles = nlohmann::json::object();
      for (const auto& [name, p] : f.profiles)
        profiles[name] = {{"emax", p.point.emax},
                          {"flash_attention_efficiency", p.point.flash},
                          {"elementwise_efficiency", p.point.elementwise},
                          {"rows", p.rows},
                          {"cv_abs_error", p.cv_abs_error}};
      j.push_back({{"system", f.system}, {"emax", f.best.emax}, {"flash_attention_efficiency", f.best.flash},
                   {"elementwise_efficiency", f.best.elementwise},
                   {"rows", f.errors.rows}, {"median_abs_error", f.errors.median_abs_error},
                   {"max_abs_error", f.errors.max_abs_error}, {"cv_abs_error", f.cv_abs_error},
                   {"profiles", profiles}});
      if (a.json) continue;
      fmt::print("{:<14} {:>3} rows: emax {:.2f}, flash {:.2f}, elementwise {:.2f}: in-sample median {:.1f}%, "
                 "max {:.1f}%; held-out 80th percentile {:.1f}%\n",
                 f.system, f.errors.rows, f.best.emax, f.best.flash, f.best.elementwise,
                 100 * f.errors.median_abs_error,
                 100 * f.errors.max_abs_error, 100 * f.cv_abs_error);
      for (const auto& [name, p] : f.profiles)
        fmt::print("  profile {:<24} {:>3} rows: emax {:.2f}, flash {:.2f}, elementwise {:.2f}\n", name, p.rows,
                   p.point.emax, p.point.flash, p.point.elementwise);
    }
    if (a.json)
      std::cout << nlohmann::json{{"shrinkage", tune::shrinkage_json(fits.shrinkage)}, {"systems", j}}.dump(2) << "\n";
    else
      fmt::print("per-profile shrinkage {} (chosen by leave-one-source-out)\n", tune::shrinkage_name(fits.shrinkage));
    return fits.systems.empty() ? 1 : 0;
  }
  if (!a.cv.empty()) {
    check(a.cv == "source", "--cv: '{}' is not a fold kind (source)", a.cv);
    const tune::CrossValidation cv = tune::cross_validate_by_source(tune::read_runs(table));
    if (a.json) {
      std::cout << tune::cross_validation_json(cv).dump(2) << "\n";
    } else {
      print_rows(cv.held_out);
      print_folds(cv);
      print_summary(cv.held_out);
    }
    return verdict(cv.held_out);
  }
  const tune::Validation v = tune::validate_runs(table);
  if (a.json) {
    std::cout << tune::validation_json(v).dump(2) << "\n";
  } else {
    print_rows(v);
    print_summary(v);
  }
  return verdict(v);
}

}  // namespace

void add_validate_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* c = app.add_subcommand("validate", "Compare predictions with published runs (CSV)");
  c->add_option("runs", a->file, "CSV with the columns of tests/data/public-runs.csv")->required();
  c->add_flag("--json", a->json, "{rows: [{id, filled, prediction, reported, error}], median_abs_error, ...}");
  c->add_option("--cv", a->cv,
                "source: refit each system's efficiency data without one source's rows and predict that source; "
                "also nested, the shrinkage weights chosen without it too");
  c->add_flag("--fit", a->fit, "Fit each system's efficiency data (emax, flash) to all of its rows, and each framework profile's "
              "shrunk toward it, and print them");
  // Errors (meshtrain::Error) reach main, which prints them on one line.
  c->callback([a, &run] { run = [a] { return run_validate(*a); }; });
}

}  // namespace meshtrain::cli

// meshtrain validate: predictions against published runs (tune/validate.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/tune/planner.h"
#include "meshtrain/tune/validate.h"

namespace meshtrain::cli {

namespace {

struct ValidateArgs {
  std::string file;
  bool json = false;
};

int run_validate(const ValidateArgs& a) {
  const tune::Validation v = tune::validate_runs(tune::read_csv_file(a.file));
  if (a.json) {
    std::cout << tune::validation_json(v).dump(2) << "\n";
    return 0;
  }
  fmt::print("{:<20} {:<14} {:<24} {:>9} {:>9} {:>8}  {:<4} {}\n", "id", "system", "metric", "reported", "predicted",
             "error", "fits", "planned (blank knobs)");
  for (const auto& r : v.rows) {
    std::string filled;
    for (const auto& [k, x] : r.filled) filled += (filled.empty() ? "" : " ") + k + "=" + x;
    const std::string err = r.compared ? fmt::format("{:+.1f}%", 100 * r.error) : "-";
    fmt::print("{:<20} {:<14} {:<24} {:>9.4g} {:>9.4g} {:>8}  {:<4} {}\n", r.id, r.system,
               r.expected_oom ? "fits (expect no)" : r.metric, r.reported, r.predicted, err,
               r.prediction.fits ? "yes" : "NO", filled);
  }
  fmt::print("\n{} rows compared: median |error| {:.1f}%, max |error| {:.1f}%\n", v.all.rows,
             100 * v.all.median_abs_error, 100 * v.all.max_abs_error);
  for (const auto& [s, e] : v.by_system)
    fmt::print("  {:<14} {:>3} rows: median {:.1f}%, max {:.1f}%\n", s, e.rows, 100 * e.median_abs_error,
               100 * e.max_abs_error);
  if (!v.not_fitting.empty()) {
    fmt::print("published runs the model says do not fit:");
    for (const auto& id : v.not_fitting) fmt::print(" {}", id);
    fmt::print("\n");
  }
  if (!v.oom_mismatch.empty()) {
    fmt::print("runs reported out of memory that the model says fit:");
    for (const auto& id : v.oom_mismatch) fmt::print(" {}", id);
    fmt::print("\n");
  }
  for (const auto& s : v.skipped) fmt::print("skipped {}\n", s);
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* c = app.add_subcommand("validate", "Compare predictions with published runs (CSV)");
  c->add_option("runs", a->file, "CSV with the columns of tests/data/public-runs.csv")->required();
  c->add_flag("--json", a->json, "{rows: [{id, filled, prediction, reported, error}], median_abs_error, ...}");
  // Errors (meshtrain::Error) reach main, which prints them on one line.
  c->callback([a, &run] { run = [a] { return run_validate(*a); }; });
}

}  // namespace meshtrain::cli

// meshtrain tune: search the parallel layouts of a model with short real
// trials (tune/tuner.h), guided by a strategy: grid, random, bo (Gaussian-
// process UCB) or model (the performance model as the prior). Each trial is
// a `meshtrain train` job under the launcher; each result is appended to
// --results as it ends, and a second call on the same file continues.
// --replay answers trials from recorded measurements instead (for comparing
// strategies; --evaluate prints their regret table; --check-model and
// --cross-validate score the --system file's predictions against the
// recorded layouts, tune/model_check.h). --calibrate writes a system file
// refitted to the trials (tune/refit.h); --emit prints the best layout as a
// command line, Slurm script or Megatron-LM arguments.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/measure/sweep.h"
#include "meshtrain/tune/launch.h"
#include "meshtrain/tune/model_check.h"
#include "meshtrain/tune/refit.h"
#include "meshtrain/tune/results_file.h"
#include "meshtrain/tune/tuner.h"

namespace meshtrain::cli {

namespace {

namespace fs = std::filesystem;

struct TuneFlags {
  std::string model = "bench", system;
  int ranks = 1, global_batch_size = 0;
  std::vector<int> tp, pp, vpp, zero, zero_shard, mbs;
  std::vector<std::string> recompute;
  bool sp = false, no_sp = false, bf16 = false;
  tune::TuneOptions o;
  int trial_iters = 4;
  std::string launcher = "mpirun --oversubscribe --allow-run-as-root -np {ranks}";
  double timeout_s = 600;
  std::string trial_dir;
  std::vector<std::string> replay;
  bool evaluate = false, json = false, check_model = false;
  int cross_validate = 0;
  std::vector<int> budgets = {4, 8, 12};
  std::vector<std::string> strategies = {"grid", "random", "bo", "model"};
  int seeds = 10;
  double within = 0.03;
  std::string calibrate, emit;
  std::vector<std::string> extra;
};

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("meshtrain") : p.string();
}

tune::SearchSpace search_space(const TuneFlags& f) {
  check(!(f.sp && f.no_sp), "--sequence-parallel and --no-sequence-parallel exclude each other");
  tune::SearchSpace s;
  s.tp = f.tp;
  s.pp = f.pp;
  s.vpp = f.vpp.empty() ? std::vector<int>{1} : f.vpp;
  s.zero_stage = f.zero;
  s.zero_shard = f.zero_shard;
  s.micro_batch_size = f.mbs;
  for (const std::string& r : f.recompute) s.recompute.push_back(parse_recompute(r));
  if (f.sp) s.sequence_parallel = {true};
  if (f.no_sp) s.sequence_parallel = {false};
  s.flash_attention = {true};  // the engine's attention is always the tiled kernel
  s.bf16 = f.bf16;
  s.partial_recompute = false;
  return s;
}

void print_trial(const tune::Trial& t, int n, int budget, bool repeat) {
  const std::string what = fmt::format("[{}/{}] {}{}", n, budget, t.key, repeat ? " (repeat)" : "");
  if (t.ok())
    fmt::print("{}: {:.0f} tokens/s, peak {:.1f} MiB{} in {:.1f} s\n", what, t.tokens_per_s, t.memory_bytes / 1048576.0,
               t.predicted_tokens_per_s > 0 ? fmt::format(" (model {:.0f})", t.predicted_tokens_per_s) : "",
               t.wall_s);
  else
    fmt::print("{}: {}: {}\n", what, t.status, t.reason);
  std::fflush(stdout);
}

int run_evaluate(const TuneFlags& f, const tune::TuneSpace& space) {
  const nlohmann::json e =
      tune::evaluate_strategies(space, f.replay, f.strategies, f.budgets, f.seeds, f.o, f.within);
  if (f.json) {
    std::cout << e.dump(2) << "\n";
    return 0;
  }
  fmt::print("true best (median of the recorded figures): {} at {:.0f} tokens/s\n",
             e["true_best"]["key"].get<std::string>(), e["true_best"]["tokens_per_s"].get<double>());
  fmt::print("regret = 1 - true(found) / true(best) over {} seeds\n{:<8} {:>6} {:>8} {:>8} {:>8} {:>10}\n", f.seeds,
             "strategy", "budget", "mean", "median", "worst", fmt::format("<= {:.0f}%", 100 * f.within));
  for (const auto& r : e["strategies"])
    fmt::print("{:<8} {:>6} {:>7.1f}% {:>7.1f}% {:>7.1f}% {:>9.0f}%\n", r["strategy"].get<std::string>(),
               r["budget"].get<int>(), 100 * r["mean"].get<double>(), 100 * r["median"].get<double>(),
               100 * r["worst"].get<double>(), 100 * r["within"].get<double>());
  return 0;
}

// The recorded layouts of the space, each with the median of its ok trials
// and the space's own config (the replay files may name fewer knobs).
std::vector<tune::Measured> recorded_layouts(const TuneFlags& f, const tune::TuneSpace& space, int gbs) {
  std::vector<tune::Measured> out;
  for (tune::Measured l : tune::measured_layouts(tune::ReplayTrials(f.replay, f.o.seed, gbs).all())) {
    const int i = space.find(l.key);
    if (i < 0) continue;
    l.config = space.points[i].config;
    out.push_back(std::move(l));
  }
  check(!out.empty(), "the replay files measured no layout of this search space");
  return out;
}

int run_check_model(const TuneFlags& f, const ModelConfig& m, const perf::SystemSpec& sys,
                    const tune::TuneSpace& space, int gbs) {
  const std::vector<tune::Measured> layouts = recorded_layouts(f, space, gbs);
  const tune::ModelCheck c = f.cross_validate > 0 ? tune::cross_validate(m, sys, f.ranks, layouts, f.cross_validate)
                                                  : tune::check_model(m, sys, f.ranks, layouts);
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : c.rows)
      rows.push_back({{"key", r.key}, {"measured", r.measured}, {"predicted", r.predicted}, {"fold", r.fold}});
    nlohmann::json folds = nlohmann::json::array();
    for (const auto& k : c.fold_factors) folds.push_back(tune::describe(k));
    std::cout << nlohmann::json{{"rows", rows},
                                {"rms_log_error", c.rms_log_error},
                                {"median_abs_error", c.median_abs_error},
                                {"max_abs_error", c.max_abs_error},
                                {"spearman", c.spearman},
                                {"folds", folds}}
                     .dump(2)
              << "\n";
    return 0;
  }
  fmt::print("{:<44} {:>10} {:>10} {:>7}{}\n", "layout", "measured", "predicted", "error",
             f.cross_validate > 0 ? "  fold" : "");
  for (const auto& r : c.rows)
    fmt::print("{:<44} {:>10.0f} {:>10.0f} {:>6.1f}%{}\n", r.key, r.measured, r.predicted,
               100 * (r.predicted / r.measured - 1), r.fold >= 0 ? fmt::format("  {:>4}", r.fold) : "");
  for (size_t k = 0; k < c.fold_factors.size(); ++k)
    fmt::print("fold {} refit: {}\n", k, tune::describe(c.fold_factors[k]));
  fmt::print("{} layouts{}: median |error| {:.1f}%, max {:.1f}%, rms log error {:.3f}, Spearman {:.3f}\n",
             c.rows.size(),
             f.cross_validate > 0 ? fmt::format(", each predicted by a refit without its fold ({} folds)", f.cross_validate)
                                  : "",
             100 * c.median_abs_error, 100 * c.max_abs_error, c.rms_log_error, c.spearman);
  return 0;
}

int run_tune_command(TuneFlags f) {
  check(f.ranks > 0, "--ranks must be positive");
  check(f.trial_iters >= 2, "--trial-iters must be at least 2 (the first iteration is warm-up, not measured)");
  const ModelConfig m = sweep_model(f.model, f.extra);
  m.validate();
  const int gbs = f.global_batch_size > 0 ? f.global_batch_size
                                          : f.ranks * (f.mbs.empty() ? 1 : *std::max_element(f.mbs.begin(), f.mbs.end()));
  std::optional<perf::SystemSpec> sys;
  if (!f.system.empty()) sys = perf::load_system_spec(f.system);
  const tune::TuneSpace space = tune::make_tune_space(m, search_space(f), f.ranks, gbs, sys ? &*sys : nullptr);
  f.o.commit = build_commit();
  if (f.check_model || f.cross_validate > 0) {
    check(!f.replay.empty() && sys.has_value(), "--check-model and --cross-validate need --replay and --system");
    return run_check_model(f, m, *sys, space, gbs);
  }
  if (f.evaluate) {
    check(!f.replay.empty(), "--evaluate needs --replay FILE[,FILE...]");
    return run_evaluate(f, space);
  }
  std::unique_ptr<tune::TrialSource> source;
  if (!f.replay.empty()) {
    source = std::make_unique<tune::ReplayTrials>(f.replay, f.o.seed, gbs);
  } else {
    tune::LaunchSpecForTrials l;
    l.model = f.model;
    l.num_layers = m.num_layers;
    l.ranks = f.ranks;
    l.trial_iters = f.trial_iters;
    l.launcher = f.launcher;
    l.exe = self_exe();
    l.extra = f.extra;
    l.timeout_s = f.timeout_s;
    l.dir = !f.trial_dir.empty() ? f.trial_dir : !f.o.results.empty() ? f.o.results + ".trials" : "tune-trials";
    source = std::make_unique<tune::LaunchedTrials>(l);
  }
  if (!f.json)
    fmt::print("tune {}: {} layouts ({} invalid combinations left out), {} ranks, strategy {}, budget {} trials{}\n",
               m.name, space.points.size(), space.invalid, f.ranks, f.o.strategy, f.o.budget_trials,
               f.replay.empty() ? "" : " (replayed from recorded measurements)");
  tune::TuneOutcome r;
  try {
    r = tune::run_tune(space, *source, f.o, [&](const tune::Trial& t, int n, bool rep) {
      if (!f.json) print_trial(t, n, f.o.budget_trials, rep);
    });
  } catch (const tune::TrialsStopped& s) {
    fmt::print(stderr, "meshtrain tune: stopped by signal {}; the trial in flight was ended, the others are in {}\n",
               s.signal, f.o.results.empty() ? std::string("no results file") : f.o.results);
    return 128 + s.signal;
  }
  if (!f.calibrate.empty()) {
    check(sys.has_value(), "--calibrate needs --system (the file to refit)");
    const tune::Refit fit = tune::refit_system(m, *sys, f.ranks, r.trials);
    write_output_file(f.calibrate, {nlohmann::json(fit.system).dump(2), "\n"}, "calibrated system file");
    if (!f.json)
      fmt::print("calibrated {} -> {}: {}; rms log error {:.3f} -> {:.3f} over {} layouts\n", sys->name, f.calibrate,
                 tune::describe(fit.factors), fit.rms_log_error_before, fit.rms_log_error_after, fit.layouts);
  }
  if (f.json) {
    std::cout << tune::tune_json(space, f.o, r).dump(2) << "\n";
  } else {
    if (r.resumed) fmt::print("{} trials resumed from {}\n", r.resumed, f.o.results);
    fmt::print("loop {:.1f} s: trials {:.1f} s, overhead {:.3f} s (choosing {:.3f} s)\n", r.loop_s, r.trials_s,
               r.loop_s - r.trials_s, r.decide_s);
    if (r.best >= 0)
      fmt::print("best: {} at {:.0f} tokens/s (median of {})\n", space.points[r.best].key, r.best_tokens_per_s,
                 r.best_measurements);
    else
      fmt::print("no trial ran ok\n");
  }
  if (!f.emit.empty()) {
    check(r.best >= 0, "--emit: no trial ran ok, nothing to emit");
    tune::LaunchSpec s{f.model, m, space.points[r.best].config, f.ranks, f.ranks};
    std::cout << tune::emit(s, f.emit);
  }
  return r.best >= 0 ? 0 : 1;
}

}  // namespace

void add_tune_command(CLI::App& app, Runner& run) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* c = app.add_subcommand("tune", "Search parallel layouts with short real trials (grid, random, bo, model)");
  c->add_option("--model", f->model, "Model preset or JSON path; shape flags after -- override it")->capture_default_str();
  c->add_option("--ranks", f->ranks, "Ranks of every trial")->capture_default_str();
  c->add_option("--system", f->system, "System file for the model's predictions (needed by --strategy model)");
  c->add_option("--global-batch-size", f->global_batch_size, "Default: ranks x the largest micro-batch");
  c->add_option("--tensor-model-parallel-size", f->tp, "TP sizes to search (comma-separated; default all)")->delimiter(',');
  c->add_option("--pipeline-model-parallel-size", f->pp, "PP sizes to search")->delimiter(',');
  c->add_option("--virtual-pipeline-chunks", f->vpp, "Model chunks per stage to search (default 1)")->delimiter(',');
  c->add_option("--zero-stage", f->zero, "ZeRO stages to search")->delimiter(',');
  c->add_option("--data-parallel-shard-size", f->zero_shard,
                "ZeRO shard groups to search, in data-parallel ranks (hybrid sharding; 0: the whole group, the "
                "default)")
      ->delimiter(',');
  c->add_option("--micro-batch-size", f->mbs, "Micro-batch sizes to search")->delimiter(',');
  c->add_option("--recompute-granularity", f->recompute, "none, selective, full: those to search")->delimiter(',');
  c->add_flag("--sequence-parallel", f->sp, "Only layouts with sequence parallelism (where TP > 1)");
  c->add_flag("--no-sequence-parallel", f->no_sp, "Only layouts without");
  c->add_flag("--bf16", f->bf16, "Trials in bf16 mixed precision");
  c->add_option("--strategy", f->o.strategy, "grid, random, bo or model")->capture_default_str();
  c->add_option("--budget-trials", f->o.budget_trials, "Trials in all (resumed and repeats included)")
      ->capture_default_str();
  c->add_option("--budget-seconds", f->o.budget_s, "Start no trial after this many seconds (0: none)");
  c->add_option("--seed", f->o.seed, "Seed of the random choices")->capture_default_str();
  c->add_option("--beta", f->o.beta, "UCB weight of the standard deviation (default 2 for bo, 1 for model)");
  c->add_option("--repeat-band", f->o.repeat_band,
                "Measure a layout again when its first trial beats another's best or falls short of it by at most this "
                "fraction (0: never)")
      ->capture_default_str();
  c->add_option("--trial-iters", f->trial_iters, "Iterations per trial; the first is warm-up and not measured")
      ->capture_default_str();
  c->add_option("--launcher", f->launcher, "Launch command of a trial; {ranks} is replaced")->capture_default_str();
  c->add_option("--timeout", f->timeout_s, "Seconds before a trial is killed and recorded as timed out")
      ->capture_default_str();
  c->add_option("--results", f->o.results, "JSON-lines file of the trials, appended as each ends; resumed if it exists");
  c->add_option("--trial-dir", f->trial_dir, "Folder of the trials' reports and logs (default RESULTS.trials)");
  c->add_option("--replay", f->replay,
                "Answer trials from recorded measurements (tune results files or sweep.json), comma-separated; "
                "a layout measured k times answers with one of its k figures, drawn with the seed")
      ->delimiter(',');
  c->add_flag("--evaluate", f->evaluate, "With --replay: every strategy at every budget over --seeds seeds; regret table");
  c->add_option("--budgets", f->budgets, "Budgets of --evaluate")->delimiter(',')->capture_default_str();
  c->add_option("--strategies", f->strategies, "Strategies of --evaluate")->delimiter(',')->capture_default_str();
  c->add_option("--seeds", f->seeds, "Seeds of --evaluate")->capture_default_str();
  c->add_option("--within", f->within, "Regret counted as a success by --evaluate")->capture_default_str();
  c->add_option("--calibrate", f->calibrate, "Write the --system file refitted to the trials here");
  c->add_flag("--check-model", f->check_model,
              "With --replay and --system: each recorded layout's median beside the prediction; error and Spearman");
  c->add_option("--cross-validate", f->cross_validate,
                "With --replay and --system: as --check-model, each layout predicted by a refit on the other K-1 "
                "folds of layouts");
  c->add_option("--emit", f->emit, "Print the best layout as: train, slurm-frontier, slurm-dgx or megatron");
  c->add_flag("--json", f->json, "{trials, best: {key, config, tokens_per_s, measurements}, strategy, ...}");
  c->add_option("extra", f->extra, "Further train flags, after --")->expected(-1);
  c->callback([f, &run] { run = [f] { return run_tune_command(*f); }; });
}

}  // namespace meshtrain::cli

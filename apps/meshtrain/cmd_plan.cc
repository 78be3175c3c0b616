// meshtrain plan: every candidate layout of a model on a system, costed by
// the performance model and ranked by predicted throughput (tune/planner.h).
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "framework_flag.h"
#include "stage_flags.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/clock.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/report/html_page.h"
#include "meshtrain/report/plan_html.h"
#include "meshtrain/tune/launch.h"
#include "meshtrain/tune/planner.h"

namespace meshtrain::cli {

namespace {

struct PlanArgs {
  std::string model, system;
  int num_gpus = 0, global_batch_size = 0;
  std::optional<int> seq_length, tp, pp, cp, zero_stage, micro_batch_size;
  std::string recompute;  // empty: searched
  size_t top = 5;
  bool fp32 = false, json = false, no_partial_recompute = false;
  bool sp = false, no_sp = false, no_interleaving = false, flash = false, no_flash = false, hybrid_shard = false;
  std::string csv, emit, html;
  StageFlags stages;
  bool search_stage_splits = false;
  perf::PerfOptions options;
  std::string framework;
};

double gib(double b) { return b / 1073741824.0; }

void write_csv(std::ostream& out, const tune::Plan& plan) {
  out << "rank,tp,pp,vpp,dp,zero_stage,micro_batch_size,num_micro_batches,recompute,recompute_method,"
         "recompute_num_layers,sequence_parallel,flash_attention,fits,memory_total_bytes,step_time_s,tokens_per_s,"
         "model_tflops_per_gpu,hardware_tflops_per_gpu,mfu,bubble_fraction,compute_s,tp_comm_s,pp_comm_s,dp_comm_s,"
         "bubble_s,optimizer_s,cp,cp_comm_s,dp_shard\n";
  int rank = 0;
  for (const auto& c : plan.ranked) {
    const auto& p = c.config;
    const auto& r = c.prediction;
    out << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.0f},{:.6g},{:.6g},{:.4g},{:.4g},{:.4f},{:.4f},"
        "{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{:.6g},{}\n",
        ++rank, p.tp, p.pp, p.vpp, p.dp, p.zero_stage, p.micro_batch_size, p.num_micro_batches(),
        recompute_name(p.recompute), recompute_method_name(p.recompute_method), p.recompute_num_layers,
        p.sequence_parallel ? 1 : 0, p.flash_attention ? 1 : 0, r.fits ? 1 : 0, r.memory.total(), r.step_time_s,
        r.tokens_per_s, r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, r.mfu, r.bubble_fraction, r.time.compute,
        r.time.tp_comm, r.time.pp_comm, r.time.dp_comm, r.time.bubble, r.time.optimizer, p.cp, r.time.cp_comm,
        p.shard_size());
  }
}

// The knobs the flags fix, the rest left to the search; narrowed to what
// `framework` runs when one is given.
tune::SearchSpace space_of(const PlanArgs& a, const ModelConfig& m, const perf::FrameworkProfile* framework) {
  tune::SearchSpace space;
  // Fixed knobs are checked here: a TP or PP of 0 would divide by zero.
  check(!a.tp || *a.tp >= 1, "--tensor-model-parallel-size must be at least 1 (got {})", a.tp.value_or(0));
  check(!a.pp || *a.pp >= 1, "--pipeline-model-parallel-size must be at least 1 (got {})", a.pp.value_or(0));
  check(!a.cp || *a.cp >= 1, "--context-parallel-size must be at least 1 (got {})", a.cp.value_or(0));
  check_context_parallel_flag(a.cp.value_or(1), framework);
  check(!a.micro_batch_size || *a.micro_batch_size >= 1, "--micro-batch-size must be at least 1 (got {})",
        a.micro_batch_size.value_or(0));
  check(!a.zero_stage || (*a.zero_stage >= 0 && *a.zero_stage <= 3), "--zero-stage must be 0, 1, 2 or 3 (got {})",
        a.zero_stage.value_or(0));
  if (a.tp) space.tp = {*a.tp};
  if (a.pp) space.pp = {*a.pp};
  if (a.cp) space.cp = {*a.cp};
  if (a.zero_stage) space.zero_stage = {*a.zero_stage};
  if (a.micro_batch_size) space.micro_batch_size = {*a.micro_batch_size};
  if (!a.recompute.empty()) space.recompute = {parse_recompute(a.recompute)};
  check(!(a.sp && a.no_sp), "--sequence-parallel and --no-sequence-parallel exclude each other");
  check(!(a.flash && a.no_flash), "--use-flash-attn and --no-flash-attn exclude each other");
  if (a.sp) space.sequence_parallel = {true};
  if (a.no_sp) space.sequence_parallel = {false};
  if (a.flash) space.flash_attention = {true};
  if (a.no_flash) space.flash_attention = {false};
  if (a.no_interleaving) space.vpp = {1};
  space.hybrid_shard = a.hybrid_shard;  // a profile that has it turns it on too
  ParallelConfig split;
  apply_stage_flags(a.stages, false, split);
  space.first_stage_layers = split.first_stage_layers;
  space.last_stage_layers = split.last_stage_layers;
  space.stage_counting = split.stage_counting;
  space.stage_partition = split.stage_partition;
  space.search_stage_splits = a.search_stage_splits;
  space.bf16 = !a.fp32;
  space.partial_recompute = !a.no_partial_recompute && a.recompute.empty();
  if (framework) {
    tune::restrict_to_framework(*framework, space, m);
    space.framework = framework;
  }
  return space;
}

// The table: what was searched, what was dropped and why, the best
// candidates and why the first wins. Non-zero when nothing fits.
int print_plan(const PlanArgs& a, const ModelConfig& m, const perf::SystemSpec& sys,
               const perf::FrameworkProfile* framework, const tune::Plan& plan, double elapsed) {
  fmt::print("{} ({:.3g}B parameters) on {} x {}, global batch {} x {} tokens\n", m.name, m.num_parameters() / 1e9,
             a.num_gpus, sys.name, a.global_batch_size, m.seq_length);
  print_framework(framework);
  fmt::print("{} candidates evaluated, {} fit ({:.2f} s)\n", plan.candidates_evaluated, plan.candidates_fitting,
             elapsed);
  for (const auto& [reason, n] : plan.dropped) fmt::print("  dropped {:>8}: {}\n", n, reason);
  if (plan.ranked.empty()) {
    fmt::print("no candidate fits\n");
    return 1;
  }
  const bool live = framework && framework->options.allocator_retries;
  if (live)
    fmt::print("mem GiB: live memory, what must fit (PyTorch's caching allocator frees its cache and retries)\n");
  fmt::print("\n{:>3} {:<62} {:>7} {:>9} {:>6} {:>6} {:>8} {:>8} {:>8} {:>7}\n", "#", "config", "mem GiB",
             "tokens/s", "MFU%", "HFU%", "tp s", "pp s", "dp s", "bubble%");
  for (size_t i = 0; i < plan.ranked.size() && i < a.top; ++i) {
    const auto& c = plan.ranked[i];
    const auto& r = c.prediction;
    fmt::print("{:>3} {:<62} {:>7.1f} {:>9.4g} {:>6.1f} {:>6.1f} {:>8.3g} {:>8.3g} {:>8.3g} {:>7.1f}\n", i + 1,
               tune::describe(c.config), gib(live ? r.memory.required() : r.memory.total()), r.tokens_per_s,
               100 * r.mfu, 100 * r.hfu, r.time.tp_comm, r.time.pp_comm, r.time.dp_comm, 100 * r.bubble_fraction);
  }
  fmt::print("\n{}\n", tune::why_best(plan));
  if (!plan.ranked.front().prediction.headroom)
    fmt::print(
        "the best candidate needs more than {:.0f}% of the device's memory: this model is a median {:.1f}% "
        "under published peaks, so it may not fit\n",
        100 * (1 - perf::kMemoryUnderPrediction), 100 * perf::kMemoryUnderPrediction);
  if (const int n = tune::within_error_of_best(plan, sys.prediction_error); n > 0)
    fmt::print(
        "the best and the next {} candidate(s) are within each other's +-{:.0f}% ({}): the ranking "
        "among them is not resolved by the model\n",
        n, 100 * sys.prediction_error, sys.prediction_error_basis());
  return 0;
}

int run_plan(const PlanArgs& a) {
  const OutputFile csv = OutputFile::open(a.csv, "plan table");  // a bad path fails before planning
  ModelConfig m = load_model_config(a.model);
  if (a.seq_length) {
    m.seq_length = *a.seq_length;
    if (m.max_position_embeddings > 0 && m.max_position_embeddings < m.seq_length)
      m.max_position_embeddings = m.seq_length;
  }
  perf::SystemSpec sys = perf::load_system_spec(a.system);
  perf::PerfOptions options = a.options;
  const perf::FrameworkProfile* framework = apply_framework_flag(a.framework, options, sys);
  const tune::SearchSpace space = space_of(a, m, framework);
  const Stopwatch watch;
  const tune::Plan plan = tune::plan(m, sys, a.num_gpus, a.global_batch_size, space, options);
  const double elapsed = watch.elapsed_s();

  if (!a.html.empty()) report::write_html(a.html, report::plan_html(m, sys, a.num_gpus, a.global_batch_size, space, plan, options));
  if (!a.emit.empty()) {
    check(!plan.ranked.empty(), "--emit: no candidate fits");
    std::cout << tune::emit({a.model, m, plan.ranked[0].config, a.num_gpus, sys.devices_per_node}, a.emit);
    return 0;
  }
  if (!a.csv.empty()) {
    std::ostringstream table;
    write_csv(table, plan);
    csv.write({table.str()});
    if (csv.kind() == OutputFile::Kind::standard_output) return plan.ranked.empty() ? 1 : 0;
  }
  if (a.json) {
    nlohmann::json j = tune::plan_json(plan, a.top);
    j["planning_seconds"] = elapsed;
    j["framework_profile"] = a.framework;
    j["prediction_error"] = sys.prediction_error;
    j["within_error_of_best"] = tune::within_error_of_best(plan, sys.prediction_error);
    j["meshtrain_commit"] = build_commit();
    std::cout << j.dump(2) << "\n";
    return plan.ranked.empty() ? 1 : 0;
  }
  return print_plan(a, m, sys, framework, plan, elapsed);
}

}  // namespace

void add_plan_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand("plan", "Rank every parallel layout of a model on a system by predicted throughput");
  c->add_option("--model", a->model, "Model preset (configs/models) or JSON file")->required();
  c->add_option("--system", a->system, "System name (configs/systems) or JSON file")->required();
  c->add_option("--num-gpus", a->num_gpus)->required();
  c->add_option("--global-batch-size", a->global_batch_size)->required();
  c->add_option("--seq-length", a->seq_length);
  c->add_option("--top", a->top, "Candidates to show (default 5)")->check(CLI::NonNegativeNumber);
  c->add_option("--tensor-model-parallel-size", a->tp, "Fix TP instead of searching it");
  c->add_option("--pipeline-model-parallel-size", a->pp, "Fix PP instead of searching it");
  c->add_option("--context-parallel-size", a->cp,
                "Fix CP instead of searching it (searched under a framework profile that has it)");
  c->add_option("--zero-stage", a->zero_stage, "Fix the ZeRO stage instead of searching it");
  c->add_option("--micro-batch-size", a->micro_batch_size, "Fix the micro-batch instead of searching it");
  c->add_option("--recompute-granularity", a->recompute, "Fix recompute (none, selective, full: every block) "
                                                         "instead of searching it");
  c->add_flag("--sequence-parallel", a->sp, "Only layouts with sequence parallelism (where TP > 1)");
  c->add_flag("--no-sequence-parallel", a->no_sp, "Only layouts without sequence parallelism");
  c->add_flag("--no-interleaving", a->no_interleaving, "Only non-interleaved schedules (one chunk per stage)");
  c->add_flag("--hybrid-shard", a->hybrid_shard,
              "Also plan ZeRO shard groups of one node and of powers of two of nodes, replicated across the "
              "groups (on by default under a framework profile that has hybrid sharding)");
  c->add_flag("--use-flash-attn", a->flash, "Only layouts with flash attention");
  c->add_flag("--no-flash-attn", a->no_flash, "Only layouts without flash attention");
  add_stage_flags(c, a->stages, "Uneven pipeline stages (fixed on every candidate)", false);
  c->add_flag("--search-uneven-stages", a->search_stage_splits,
              "Also try every pipeline size with the embedding and the head counted as layers (Megatron-DeepSpeed)");
  c->add_flag("--fp32", a->fp32, "Plan for fp32 instead of bf16 mixed precision");
  c->add_flag("--no-partial-recompute", a->no_partial_recompute, "Do not search --recompute-method block");
  c->add_flag("--overlap-grad-reduce", a->options.overlap_grad_reduce);
  c->add_flag("--overlap-param-gather", a->options.overlap_param_gather);
  c->add_flag("--tp-comm-overlap", a->options.tp_comm_overlap);
  c->add_flag("--overlap-p2p-comm", a->options.overlap_p2p_comm);
  add_framework_flag(c, a->framework);
  c->add_flag("--json", a->json, "{candidates_evaluated, candidates_fitting, dropped, top, why_best, planning_seconds, meshtrain_commit}");
  c->add_option("--emit", a->emit, "Print the best layout as: train (a meshtrain train line), slurm-frontier, "
                                   "slurm-dgx (batch scripts) or megatron (Megatron-LM arguments)");
  c->add_option("--html", a->html, "Write the searched space as an HTML page of charts to this file");
  c->add_option("--csv", a->csv, "Write the whole ranked list as CSV to this file ('-': standard output)");
  // Errors (meshtrain::Error) reach main, which prints them on one line.
  c->callback([a, &run] { run = [a] { return run_plan(*a); }; });
}

}  // namespace meshtrain::cli

// meshtrain sweep: one real `meshtrain train` run per valid configuration of
// a grid, each a subprocess under the launcher with its own report and a
// time-out; the reports are collected into DIR/sweep.json and DIR/sweep.csv.
// `meshtrain sweep --summarize DIR` prints each knob's effect on peak memory,
// exposed communication and throughput with the other knobs held fixed.
//
//   DIR/runs/<name>.json   the run's report     DIR/runs/<name>.log  its output
//   DIR/sweep.json         {"spec", "grid", "rows"}
//   DIR/sweep.csv          one row per configuration (invalid ones with the reason)
//   DIR/summary.json       written by --summarize
#include <string.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/measure/child_group.h"
#include "meshtrain/measure/sweep.h"
#include "meshtrain/tune/launch.h"

namespace meshtrain::cli {

namespace {

namespace fs = std::filesystem;
using tune::shell_quote;

struct SweepFlags {
  std::string model = "tiny";
  int ranks = 1;
  std::string grid;
  int iters = 5;
  std::string out;
  std::string launcher = "mpirun --oversubscribe --allow-run-as-root -np {ranks}";
  int gbs = 0;
  double timeout_s = 600;
  double peak_tflops = 0;
  bool dry_run = false, resume = false;
  std::string summarize;
  std::vector<std::string> extra;
};

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("meshtrain") : p.string();
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  try {
    return nlohmann::json::parse(f);
  } catch (...) {
    return nullptr;
  }
}

void write_outputs(const fs::path& dir, const nlohmann::json& spec, const Grid& grid,
                   const std::vector<nlohmann::json>& rows) {
  write_output_file((dir / "sweep.json").string(),
                    {nlohmann::json{{"spec", spec}, {"grid", grid_json(grid)}, {"rows", rows}}.dump(2) + "\n"},
                    "sweep results");
  write_output_file((dir / "sweep.csv").string(), {rows_to_csv(rows, sweep_columns(grid))}, "sweep table");
}

int run_summarize(const std::string& dir) {
  const nlohmann::json j = read_json_file((fs::path(dir) / "sweep.json").string());
  check(j.is_object() && j.contains("rows"), "{} holds no sweep.json (run meshtrain sweep --out {} first)", dir, dir);
  const Grid grid = grid_from_json(j["grid"]);
  const std::vector<nlohmann::json> rows = j["rows"].get<std::vector<nlohmann::json>>();
  int ok = 0, invalid = 0, failed = 0;
  for (const auto& r : rows) {
    const std::string s = r.value("status", "");
    (s == "ok" ? ok : s == "invalid" ? invalid : failed)++;
  }
  fmt::print("sweep {}: {} configurations: {} ran, {} invalid, {} failed or timed out\n", dir, rows.size(), ok,
             invalid, failed);
  const nlohmann::json s = summarize_sweep(grid, rows);
  fmt::print("{}", summary_text(s));
  fmt::print("peak memory: tracked bytes of the most loaded rank; exposed comm: seconds per step the most exposed "
             "rank waited in communication; tokens/s: consumed tokens over the median step time.\n");
  write_output_file((fs::path(dir) / "summary.json").string(), {s.dump(2) + "\n"}, "sweep summary");
  return 0;
}

int run_sweep(const SweepFlags& f) {
  if (!f.summarize.empty()) return run_summarize(f.summarize);
  check(!f.grid.empty(), "--grid is required (or --summarize DIR)");
  check(!f.out.empty() || f.dry_run, "--out DIR is required");
  check(f.iters >= 1, "--iters must be positive");
  check(f.ranks >= 1, "--ranks must be positive (got {})", f.ranks);
  check(f.gbs >= 0, "--global-batch-size must not be negative (got {})", f.gbs);
  check(std::isfinite(f.timeout_s) && f.timeout_s >= 0, "--timeout must be a finite number >= 0 (got {})",
        f.timeout_s);
  check(std::isfinite(f.peak_tflops) && f.peak_tflops >= 0, "--peak-tflops must be a finite number >= 0 (got {})",
        f.peak_tflops);
  SweepSpec spec;
  spec.model = f.model;
  spec.model_config = sweep_model(f.model, f.extra);
  spec.ranks = f.ranks;
  spec.global_batch_size = f.gbs;
  spec.iters = f.iters;
  spec.grid = parse_grid(f.grid);
  spec.extra = f.extra;
  const std::vector<SweepPoint> points = expand_sweep(spec);
  int valid = 0;
  for (const SweepPoint& p : points) valid += p.valid;
  fmt::print("sweep: {} configurations, {} valid, {} ranks, model {}\n", points.size(), valid, f.ranks, f.model);
  const bool wants_data = std::find_if(f.extra.begin(), f.extra.end(), [](const std::string& a) {
                            return a == "--data-path" || a.rfind("--data-path=", 0) == 0 || a == "--mock-data";
                          }) != f.extra.end();
  std::string launcher = f.launcher;
  for (size_t at; (at = launcher.find("{ranks}")) != std::string::npos;)
    launcher.replace(at, 7, std::to_string(f.ranks));
  const fs::path dir = f.out.empty() ? fs::path(".") : fs::path(f.out);
  if (!f.dry_run) fs::create_directories(dir / "runs");
  const nlohmann::json spec_json{{"model", f.model},       {"ranks", f.ranks},     {"grid", f.grid},
                                 {"iters", f.iters},       {"launcher", launcher}, {"global_batch_size", f.gbs},
                                 {"timeout_s", f.timeout_s}, {"extra", f.extra},   {"peak_tflops", f.peak_tflops}};
  // With --resume, the rows of an earlier sweep.json keep their run's exit
  // code and wall time.
  std::map<std::string, nlohmann::json> earlier;
  if (f.resume) {
    const nlohmann::json old = read_json_file((dir / "sweep.json").string());
    if (old.is_object() && old.contains("rows"))
      for (const auto& r : old["rows"]) earlier[r.value("name", "")] = r;
  }
  std::vector<nlohmann::json> rows;
  int n = 0;
  catch_stop_signals();  // SIGTERM/SIGINT end the running job's whole process group
  for (const SweepPoint& p : points) {
    ++n;
    if (stop_signal() != 0) {
      if (!f.dry_run) write_outputs(dir, spec_json, spec.grid, rows);
      fmt::print("meshtrain sweep: stopped by signal {} ({}); --resume continues\n", stop_signal(),
                 strsignal(stop_signal()));
      return 128 + stop_signal();
    }
    if (!p.valid) {
      fmt::print("[{}/{}] {}: invalid: {}\n", n, points.size(), p.name, p.reason);
      rows.push_back(sweep_row(p, "invalid", p.reason, nullptr));
      continue;
    }
    const std::string report = (dir / "runs" / (p.name + ".json")).string();
    const std::string log = (dir / "runs" / (p.name + ".log")).string();
    std::string cmd = launcher + " " + shell_quote(self_exe()) + " train --model " + shell_quote(f.model) +
                      " --train-iters " + std::to_string(f.iters) + " --quiet --report " + shell_quote(report);
    if (!wants_data) cmd += " --mock-data";
    if (f.peak_tflops > 0) cmd += fmt::format(" --peak-tflops {}", f.peak_tflops);
    for (const std::string& a : p.train_args) cmd += " " + shell_quote(a);
    for (const std::string& a : f.extra) cmd += " " + shell_quote(a);
    if (f.dry_run) {
      fmt::print("[{}/{}] {}: {}\n", n, points.size(), p.name, cmd);
      rows.push_back(sweep_row(p, "not_run", "dry run", nullptr));
      continue;
    }
    if (f.resume) {
      const nlohmann::json rep = read_json_file(report);
      if (rep.is_object()) {
        nlohmann::json row = sweep_row(p, "ok", "", rep);
        row["report"] = report;
        if (const auto it = earlier.find(p.name); it != earlier.end())
          for (const char* k : {"exit_code", "wall_s"})
            if (it->second.contains(k)) row[k] = it->second[k];
        fmt::print("[{}/{}] {}: kept from an earlier run\n", n, points.size(), p.name);
        rows.push_back(row);
        write_outputs(dir, spec_json, spec.grid, rows);
        continue;
      }
    }
    fs::remove(report);
    fmt::print("[{}/{}] {}: running ... ", n, points.size(), p.name);
    std::fflush(stdout);
    const ChildOutcome o = run_in_group(cmd, log, f.timeout_s);
    if (o.stopped_by != 0) {
      // Told to stop: the run and every process it started have been ended.
      rows.push_back(sweep_row(p, "stopped", fmt::format("stopped by signal {}", o.stopped_by), nullptr));
      write_outputs(dir, spec_json, spec.grid, rows);
      fmt::print("stopped\nmeshtrain sweep: stopped by signal {} ({}); the run {} and its processes were ended; "
                 "--resume continues\n", o.stopped_by, strsignal(o.stopped_by), p.name);
      return 128 + o.stopped_by;
    }
    const nlohmann::json rep = o.exit_code == 0 ? read_json_file(report) : nlohmann::json();
    nlohmann::json row;
    if (o.timed_out) {
      row = sweep_row(p, "timeout", fmt::format("no result within {} s", f.timeout_s), nullptr);
    } else if (o.exit_code != 0 || !rep.is_object()) {
      row = sweep_row(p, "failed",
                      o.exit_code != 0 ? fmt::format("exit {}: {}", o.exit_code, failure_line(log))
                                       : std::string("no report written"),
                      nullptr);
    } else {
      row = sweep_row(p, "ok", "", rep);
    }
    row["exit_code"] = o.exit_code;
    row["wall_s"] = o.wall_s;
    row["report"] = report;
    const std::string st = row["status"];
    if (st == "ok")
      fmt::print("ok in {:.1f} s | {:.0f} tokens/s | peak {:.1f} MiB | exposed comm {:.4f} s/step\n", o.wall_s,
                 row.value("tokens_per_s", 0.0), row.value("mem_total", 0.0) / (1 << 20),
                 row.value("comm_exposed_s", 0.0));
    else
      fmt::print("{}: {}\n", st, row["reason"].get<std::string>());
    rows.push_back(row);
    write_outputs(dir, spec_json, spec.grid, rows);
  }
  if (!f.dry_run) {
    write_outputs(dir, spec_json, spec.grid, rows);
    fmt::print("wrote {} and {}\n", (dir / "sweep.csv").string(), (dir / "sweep.json").string());
  }
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand(
      "sweep", "Run `meshtrain train` for every valid configuration of a grid and collect the reports "
               "(or --summarize DIR: each knob's effect with the others held fixed)");
  auto f = std::make_shared<SweepFlags>();
  cmd->add_option("--model", f->model, "Model preset or JSON path")->capture_default_str();
  cmd->add_option("--ranks", f->ranks, "Ranks per run")->capture_default_str();
  cmd->add_option("--grid", f->grid,
                  "Knobs and values: \"tp=1,2,4;pp=1,2,4;zero=0,1,2,3;mbs=1,2,4;recompute=none,selective,full;"
                  "schedule=1f1b,interleaved\" (also vpp, sp, bf16, gbs); the first value of each is its baseline");
  cmd->add_option("--iters", f->iters, "Training iterations per run")->capture_default_str();
  cmd->add_option("--out", f->out, "Folder for the runs, sweep.csv and sweep.json");
  cmd->add_option("--launcher", f->launcher, "Launch command; {ranks} is replaced by --ranks")->capture_default_str();
  cmd->add_option("--global-batch-size", f->gbs, "Global batch of every run (default ranks x the largest mbs)");
  cmd->add_option("--timeout", f->timeout_s, "Seconds before a run is killed and recorded as timed out")
      ->capture_default_str();
  cmd->add_option("--peak-tflops", f->peak_tflops, "Passed to every run for MFU/HFU (per rank)");
  cmd->add_flag("--dry-run", f->dry_run, "Print the configurations and commands; run nothing");
  cmd->add_flag("--resume", f->resume, "Keep the reports already in DIR/runs instead of running them again");
  cmd->add_option("--summarize", f->summarize, "Print the per-knob analysis of the sweep in this folder");
  cmd->add_option("extra", f->extra, "Further train flags, after --")->expected(-1);
  cmd->callback([&run, f] { run = [f] { return run_sweep(*f); }; });
}

}  // namespace meshtrain::cli

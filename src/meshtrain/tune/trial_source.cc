#include "meshtrain/tune/trial_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/child_group.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/measure/sweep.h"
#include "meshtrain/tune/launch.h"
#include "meshtrain/tune/results_file.h"

namespace meshtrain::tune {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  try {
    return nlohmann::json::parse(f);
  } catch (...) {
    return nullptr;
  }
}

bool log_says_oom(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (line.find("out of memory") != std::string::npos || line.find("bad_alloc") != std::string::npos) return true;
  return false;
}

// The trials of a sweep.json: each row's knobs as a layout.
std::vector<Trial> sweep_trials(const nlohmann::json& j, int gbs_default) {
  std::vector<Trial> out;
  const int gbs = j["spec"].value("global_batch_size", 0) > 0 ? j["spec"]["global_batch_size"].get<int>() : gbs_default;
  for (const auto& r : j["rows"]) {
    if (r.value("status", "") == "invalid") continue;
    auto knob = [&](const char* k, const std::string& d) { return r.contains(k) ? r[k].get<std::string>() : d; };
    Trial t;
    ParallelConfig& p = t.config;
    p.tp = std::stoi(knob("tp", "1"));
    p.pp = std::stoi(knob("pp", "1"));
    p.dp = r.value("dp", 1);
    p.zero_stage = std::stoi(knob("zero", "0"));
    p.micro_batch_size = std::stoi(knob("mbs", "1"));
    p.global_batch_size = std::stoi(knob("gbs", std::to_string(gbs)));
    p.recompute = parse_recompute(knob("recompute", "none"));
    p.schedule = parse_schedule(knob("schedule", "1f1b"));
    if (p.schedule == ScheduleKind::interleaved) p.vpp = std::stoi(knob("vpp", "2"));
    p.sequence_parallel = knob("sp", "0") == "1";
    p.bf16 = knob("bf16", "0") == "1";
    t.key = layout_key(p);
    t.status = r.value("status", "");
    t.reason = r.value("reason", "");
    t.tokens_per_s = r.value("tokens_per_s", 0.0);
    t.memory_bytes = r.value("mem_total", 0.0);
    t.wall_s = r.value("wall_s", 0.0);
    t.strategy = "sweep";
    out.push_back(t);
  }
  return out;
}

}  // namespace

LaunchedTrials::LaunchedTrials(LaunchSpecForTrials s) : s_(std::move(s)) {
  for (size_t at; (at = s_.launcher.find("{ranks}")) != std::string::npos;)
    s_.launcher.replace(at, 7, std::to_string(s_.ranks));
  fs::create_directories(s_.dir);
  catch_stop_signals();
  while (fs::exists(fs::path(s_.dir) / (std::to_string(n_) + ".log"))) ++n_;  // keep an earlier tune's logs
}

LaunchedTrials::~LaunchedTrials() = default;

std::string LaunchedTrials::command(const TunePoint& p, const std::string& report) const {
  std::string cmd = fmt::format("{} {} train --model {} --train-iters {} --quiet --report {}", s_.launcher,
                                shell_quote(s_.exe), shell_quote(s_.model), s_.trial_iters, shell_quote(report));
  const bool wants_data = std::any_of(s_.extra.begin(), s_.extra.end(), [](const std::string& a) {
    return a == "--data-path" || a.rfind("--data-path=", 0) == 0 || a == "--mock-data";
  });
  if (!wants_data) cmd += " --mock-data";
  std::vector<std::string> args = train_args(p.config, s_.num_layers);
  args.insert(args.end(), s_.extra.begin(), s_.extra.end());
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  return cmd;
}

Trial LaunchedTrials::run(const TunePoint& p) {
  const std::string base = (fs::path(s_.dir) / std::to_string(n_++)).string();
  const std::string report = base + ".json", log = base + ".log";
  fs::remove(report);
  fs::remove(log);
  const ChildOutcome o = run_in_group(command(p, report), log, s_.timeout_s);
  if (o.stopped_by != 0) throw TrialsStopped{o.stopped_by};
  Trial t;
  t.config = p.config;
  t.key = p.key;
  t.wall_s = o.wall_s;
  const nlohmann::json rep = o.exit_code == 0 ? read_json(report) : nlohmann::json();
  if (o.timed_out) {
    t.status = "timeout";
    t.reason = fmt::format("no result within {} s (log {})", s_.timeout_s, log);
  } else if (o.exit_code != 0 && log_says_oom(log)) {
    t.status = "oom";
    t.reason = fmt::format("exit {}: {}", o.exit_code, failure_line(log));
  } else if (o.exit_code != 0 || !rep.is_object()) {
    t.status = "failed";
    t.reason = o.exit_code != 0 ? fmt::format("exit {}: {}", o.exit_code, failure_line(log))
                                : fmt::format("no report written (log {})", log);
  } else {
    const nlohmann::json row = sweep_row(SweepPoint{}, "ok", "", rep);
    t.tokens_per_s = row.value("tokens_per_s", 0.0);
    t.memory_bytes = row.value("mem_total", 0.0);
    t.status = t.tokens_per_s > 0 ? "ok" : "failed";
    if (!t.ok()) t.reason = "the report has no tokens/s";
  }
  return t;
}

ReplayTrials::ReplayTrials(const std::vector<std::string>& files, uint64_t seed, int gbs) : rng_(seed) {
  for (const std::string& f : files) {
    std::vector<Trial> trials;
    const nlohmann::json j = read_json(f);
    if (j.is_object() && j.contains("rows")) {
      trials = sweep_trials(j, gbs);
    } else {
      check(fs::exists(f), "replay file {} does not exist", f);
      trials = read_results(f);
    }
    check(!trials.empty(), "replay file {} holds no trials (a tune results file or a sweep.json)", f);
    for (Trial& t : trials) recorded_[t.key].push_back(std::move(t));
  }
}

Trial ReplayTrials::run(const TunePoint& p) {
  const auto it = recorded_.find(p.key);
  check(it != recorded_.end(), "the replay files never measured {}", p.key);
  const auto& v = it->second;
  Trial t = v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  t.config = p.config;
  return t;
}

std::vector<Trial> ReplayTrials::all() const {
  std::vector<Trial> out;
  for (const auto& [key, v] : recorded_) out.insert(out.end(), v.begin(), v.end());
  return out;
}

double ReplayTrials::truth(const std::string& key) const {
  const auto it = recorded_.find(key);
  if (it == recorded_.end()) return 0;
  std::vector<double> v;
  for (const Trial& t : it->second)
    if (t.ok()) v.push_back(t.tokens_per_s);
  return v.empty() ? 0 : median_of(v);
}

double ReplayTrials::spread(const std::string& key) const {
  const auto it = recorded_.find(key);
  std::vector<double> v;
  if (it != recorded_.end())
    for (const Trial& t : it->second)
      if (t.ok()) v.push_back(t.tokens_per_s);
  if (v.size() < 2) return 0;
  return (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / median_of(v);
}

}  // namespace meshtrain::tune

// Validation against published runs (tune/published_run.h reads them):
// each row is planned over its blank knobs on its system, the best
// predicted layout is kept (its values reported in `filled`), and its
// prediction is compared with what the authors reported (RunRow::metric;
// a run reported out of memory: whether it fits). error = predicted /
// reported - 1.
//
// Rows that describe the same run (every field the prediction reads equal)
// are predicted once: a table of N rows costs one plan per distinct run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/csv.h"
#include "meshtrain/tune/published_run.h"
#include "meshtrain/tune/search_space.h"

namespace meshtrain::tune {

struct RowResult {
  std::string id;
  std::string system;
  std::string source;
  std::string profile;
  bool profile_inferred = false;
  std::string system_from;
  bool tflops_kind_inferred = false;
  int hybrid_shard_inferred = 0;
  bool flash_attention_named = false;
  std::map<std::string, std::string> inferred;  // RunRow::inferred
  std::vector<std::string> unread;              // RunRow::unread
  std::string model;                          // column model_name
  ParallelConfig config;                      // as predicted, blanks filled
  std::map<std::string, std::string> filled;  // planned knob -> chosen value
  perf::Prediction prediction;
  std::string metric;                         // what was compared
  double reported = 0, predicted = 0;
  double error = 0;                           // predicted / reported - 1
  bool compared = false;                      // a throughput figure was compared
  bool expected_oom = false;                  // the row reports running out of memory
  double reported_memory = 0;                 // published peak, bytes (0: none)
  double memory_error = 0;                    // predicted peak / published - 1 when one is published
  // Blanks filled outside what the profile offers, because nothing it offers
  // fits a run that ran (RunRow::widened).
  bool beyond_profile = false;
};

// Plans (or predicts) one row on `system` (as the caller passes it: with
// the row's profile efficiency applied, SystemSpec::for_profile, or not). `memo` (may be null) holds the
// plans of rows already seen on the same system data, by RunRow::key.
using PlanMemo = std::map<std::string, std::pair<ParallelConfig, perf::Prediction>>;
RowResult predict_run(const RunRow& row, const perf::SystemSpec& system, perf::PerfCache& cache,
                      PlanMemo* memo = nullptr);

struct ErrorSummary {
  int rows = 0;
  double median_abs_error = 0, max_abs_error = 0;
};
ErrorSummary summarize(std::vector<double> errors);

struct Validation {
  std::vector<RowResult> rows;
  std::vector<std::string> skipped;      // "id or line: why", malformed rows
  std::vector<std::string> not_fitting;  // ids of published runs the model says do not fit
  std::vector<std::string> tight;        // ids of published runs over the capacity within the model's error
  std::vector<std::string> oom_mismatch; // ids reported OOM that the model says fit
  ErrorSummary all;
  std::map<std::string, ErrorSummary> by_system;
  ErrorSummary memory;  // predicted vs published peak memory, rows that publish one
};

// Fills not_fitting, oom_mismatch, all, by_system and memory from `rows`.
void tally(Validation& v);

// A published sweep: compared rows sharing source, model name, system and
// metric with at least `min_layouts` distinct layouts (parallel config and
// global batch), and Spearman's rank correlation of predicted and reported
// figures over its rows: whether the model orders the layouts as published.
struct SweepRank {
  std::string source, model, system, metric;
  int rows = 0, layouts = 0;
  double spearman = 0;
};
std::vector<SweepRank> sweep_rankings(const Validation& v, int min_layouts = 8);

// Systems are loaded by name (load_system_spec) from each row's `system`.
Validation validate_runs(const CsvTable& table, perf::PerfCache* cache = nullptr);

nlohmann::json validation_json(const Validation& v);

}  // namespace meshtrain::tune

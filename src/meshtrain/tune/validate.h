// Validation against published runs: a CSV with the columns of
// tests/data/public-runs.csv, read by name (unknown columns ignored).
//
// Each row gives a model shape, a system, the GPU count, the parallel knobs
// its authors published and the throughput they reported. Knobs left blank
// (tp, pp, vpp, ZeRO stage, micro-batch, recompute, sequence parallelism,
// flash attention) were tuned by the authors, so they are planned over: the
// best predicted value is used and reported in `filled`. Framework
// behaviours named in the row's notes (--overlap-grad-reduce,
// --overlap-param-gather, --tp-comm-overlap, --overlap-p2p-comm or "PP
// overlap default") are applied. Precision is bf16 unless the row says fp32.
// A row's `profile` (perf/framework_profile.h) sets its framework's overlaps
// and ZeRO runtime and narrows its blank knobs to what that framework could
// do. Optional columns: gated_mlp (SwiGLU), recompute_num_layers (with
// recompute full: Megatron's block method), source_key (short source name),
// first_stage_layers and last_stage_layers (Megatron-LM's
// --decoder-first/last-pipeline-num-layers), stage_counting (blank or
// "transformer": layers only; "embedding-head": the embedding and the head
// counted as pipeline layers, Megatron-DeepSpeed's and, over virtual stages,
// Megatron-core's --account-for-embedding/loss-in-pipeline-split; a blank
// vpp is then searched over every v with pp x v dividing layers + 2) -- the
// uneven stages of parallel/stage_layers.h; blank: an even split.
//
// The prediction is compared with, in order of preference: TFLOP/s per GPU
// of the row's tflops_kind (hardware: recompute counted, else model), tokens
// per second per GPU, MFU, HFU, iteration time, tokens per second. error =
// predicted / reported - 1.
// A row whose peak_mem is "OOM" is checked for fits == false instead.
// Malformed rows (a non-numeric or non-positive count, tp or pp of 0, dp x
// tp x pp != num_gpus, ...) are listed in `skipped` with their line.
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
#include "meshtrain/tune/search_space.h"

namespace meshtrain::tune {

// One row as read: what to predict and what to compare with.
struct RunRow {
  std::string id, system;
  std::string source;  // column source_key, else source: rows of one publication
  std::string profile; // column profile (perf/framework_profile.h), else inferred; may be empty
  bool profile_inferred = false;  // from the framework column (perf::infer_profile)
  std::string system_from;        // "" as named, else the column that chose it (perf::match_system)
  bool tflops_kind_inferred = false;  // tflops_kind blank: hardware, as the profile publishes
  // dp_shard blank, hybrid sharding named: the DP ranks of a node (MiCS: the
  // least planned).
  int hybrid_shard_inferred = 0;
  bool flash_attention_named = false;  // flash_attn blank, a fused attention kernel named in the framework column
  // Blank columns given a value from the rest of the row: column -> "value
  // (whence)", e.g. vocab -> "32000 (from model name)".
  std::map<std::string, std::string> inferred;
  int line = 0;
  ModelConfig model;
  int num_gpus = 0, global_batch = 0;
  SearchSpace space;
  // The blanks left open over every value, not only the profile's: planned
  // when a run that ran fits nowhere in `space` (the profile's narrowing
  // cannot describe it then).
  SearchSpace widened;
  ParallelConfig fallback;  // used when nothing planned fits
  perf::PerfOptions options;
  std::vector<std::string> blanks;
  std::string metric;       // what is compared; empty when nothing is
  double reported = 0;
  bool expected_oom = false;
  double reported_memory = 0;  // column peak_mem as a size, bytes; 0 when blank or OOM
  // Fields left unread, not guessed, with why ("peak_mem '76' (...)"): the
  // row is compared on what else it gives.
  std::vector<std::string> unread;
  std::string key;          // every field the prediction reads
};

struct RunRows {
  std::vector<RunRow> rows;
  std::vector<std::string> skipped;  // "id line N: why"
};

RunRows read_runs(const CsvTable& table);

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

// A published training run, read from one row of a CSV with the columns of
// tests/data/public-runs.csv (by name, whatever their case or separators;
// unknown columns ignored), into what the planner searches and what the
// prediction is compared with.
//
// Each row gives a model shape, a system, the GPU count, the parallel knobs
// its authors published and the throughput they reported. Knobs left blank
// (tp, pp, vpp, ZeRO stage, micro-batch, recompute, sequence parallelism,
// flash attention) were tuned by the authors, so they are left open in
// RunRow::space to be planned over. Framework behaviours named in the row's
// notes (--overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap,
// --overlap-p2p-comm or "PP overlap default") are applied. Precision is
// 16-bit GEMMs unless the row says fp32; a row naming FP8 or TF32 GEMMs is
// refused. A row's `profile` (perf/framework_profile.h) sets its
// framework's overlaps and ZeRO runtime and narrows its blank knobs to what
// that framework could do. Optional columns: gated_mlp (SwiGLU),
// recompute_num_layers (with recompute full: Megatron's block method),
// source_key (short source name), first_stage_layers and last_stage_layers
// (Megatron-LM's --decoder-first/last-pipeline-num-layers), stage_counting
// (blank or "transformer": layers only; "embedding-head": the embedding and
// the head counted as pipeline layers, Megatron-DeepSpeed's and, over
// virtual stages, Megatron-core's --account-for-embedding/loss-in-pipeline-
// split; a blank vpp is then searched over every v with pp x v dividing
// layers + 2) -- the uneven stages of parallel/stage_layers.h; blank: an
// even split.
//
// A value is read as tables print it: a note in parentheses or brackets
// after it, a leading "~", thousands separators and the column's own unit
// are dropped. A blank the rest of the row fixes (tp or pp from
// model_parallel or the GPU count, cp from what dp leaves over, vocab or
// kv heads from the model's name) is read back and listed in
// RunRow::inferred.
//
// The metric is, in order of preference: TFLOP/s per GPU of the row's
// tflops_kind (hardware: recompute counted, else model), tokens per second
// per GPU, MFU, HFU, iteration time, tokens per second. A row whose
// peak_mem is "OOM" is checked for not fitting instead.
//
// Malformed rows (a non-numeric or non-positive count, tp or pp of 0, dp x
// tp x pp != num_gpus, ...) are listed in RunRows::skipped with their line;
// a header without a column every run needs is one error for the table.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "meshtrain/perf/perf_options.h"
#include "meshtrain/tune/csv.h"
#include "meshtrain/tune/search_space.h"

namespace meshtrain::tune {

// One row as read: what to predict and what to compare with.
struct RunRow {
  std::string id, system;
  std::string source;                 // column source_key, else source: rows of one publication
  std::string profile;                // column profile (perf/framework_profile.h), else inferred; may be empty
  bool profile_inferred = false;      // from the framework column (perf::infer_profile)
  std::string system_from;            // "" as named, else the column that chose it (perf::match_system)
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
  std::string metric;  // what is compared; empty when nothing is
  double reported = 0;
  bool expected_oom = false;
  double reported_memory = 0;  // column peak_mem as a size, bytes; 0 when blank or OOM
  // Fields left unread, not guessed, with why ("peak_mem '76' (...)"): the
  // row is compared on what else it gives.
  std::vector<std::string> unread;
  std::string key;  // every field the prediction reads
};

struct RunRows {
  std::vector<RunRow> rows;
  std::vector<std::string> skipped;  // "id line N: why"
};

RunRows read_runs(const CsvTable& table);

}  // namespace meshtrain::tune

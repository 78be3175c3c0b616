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
// overlap default") are applied. Precision is bf16
// unless the row says fp32.
//
// The prediction is compared with, in order of preference: TFLOP/s per GPU
// of the row's tflops_kind (hardware: recompute counted, else model), MFU,
// HFU, iteration time, tokens per second. error = predicted / reported - 1.
// A row whose peak_mem is "OOM" is checked for fits == false instead.
// Malformed rows are reported and skipped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/perf/predict.h"
#include "meshtrain/tune/csv.h"

namespace meshtrain::tune {

struct RowResult {
  std::string id;
  std::string system;
  ParallelConfig config;                      // as predicted, blanks filled
  std::map<std::string, std::string> filled;  // planned knob -> chosen value
  perf::Prediction prediction;
  std::string metric;                         // what was compared
  double reported = 0, predicted = 0;
  double error = 0;                           // predicted / reported - 1
  bool compared = false;                      // a throughput figure was compared
  bool expected_oom = false;                  // the row reports running out of memory
};

struct ErrorSummary {
  int rows = 0;
  double median_abs_error = 0, max_abs_error = 0;
};

struct Validation {
  std::vector<RowResult> rows;
  std::vector<std::string> skipped;      // "id or line: why", malformed rows
  std::vector<std::string> not_fitting;  // ids of published runs the model says do not fit
  std::vector<std::string> oom_mismatch; // ids reported OOM that the model says fit
  ErrorSummary all;
  std::map<std::string, ErrorSummary> by_system;
};

// Systems are loaded by name (load_system_spec) from each row's `system`.
Validation validate_runs(const CsvTable& table, perf::PerfCache* cache = nullptr);

nlohmann::json validation_json(const Validation& v);

}  // namespace meshtrain::tune

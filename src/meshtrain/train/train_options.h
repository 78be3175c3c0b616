// TrainOptions: every resolved setting of a training run (the CLI fills it
// from Megatron-named flags and a model preset).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/core/terminal.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/optim/adamw.h"
#include "meshtrain/optim/lr_schedule.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

struct TrainOptions {
  ModelConfig model;
  ParallelConfig parallel;
  // ZeRO-3: gather each unit's weights one unit ahead, non-blocking, while
  // the current one computes (ShardedState::prefetch); false: when needed,
  // holding one unit's weights fewer (--no-zero-prefetch).
  bool zero_prefetch = true;
  LrSchedule lr;
  AdamWConfig adam;
  float clip_grad = 1.0f;  // global-norm clipping threshold; 0 disables
  int train_iters = 10;
  uint64_t seed = 1234;
  std::string data_path;   // folder with train.bin (and val.bin), a token file, a glob of them, or a
                           // Megatron indexed dataset (data/token_dataset.h)
  bool mock_data = false;  // deterministic pseudo-random tokens instead of a file
  int eval_interval = 0;   // 0: evaluate only at the end (when eval_iters > 0)
  int eval_iters = 0;      // validation batches per evaluation
  std::string report_path; // JSON run report (rank 0 writes it)
  std::string trace_path;  // Chrome trace of the run
  std::string dump_weights_path;  // the trained weights, gathered, in serial order
  int sample_tokens = 0;       // after training, generate this many tokens (rank 0)
  std::string sample_prompt;   // text to continue (needs a tokenizer)
  std::string tokenizer;       // for the sample; "": the data folder's (data/tokenizer.h)
  double peak_tflops = 0;  // per rank, for MFU/HFU; 0: not reported
  int log_interval = 1;
  bool quiet = false;      // no per-iteration lines
  LiveOutput progress = LiveOutput::automatic;  // progress bar and ETA (core/terminal.h)
  std::string log_file;    // per-interval metrics as JSON lines (rank 0), flushed each interval

  // Faults: a non-finite loss or gradient norm stops the run unless fewer
  // than skip_nonfinite such steps were skipped so far (no update, counted).
  int skip_nonfinite = 0;

  // Checkpoints (Megatron's flags; docs/CHECKPOINTS.md).
  std::string save_dir;         // --save: write checkpoints here
  int save_interval = 0;        // --save-interval: every N iterations (0: only at the end / exit)
  std::string load_dir;         // --load: resume from this directory's `latest` (or an iter_* folder)
  int exit_interval = 0;        // --exit-interval: stop after iteration N (saving first with --save)
  double exit_duration_mins = 0;  // --exit-duration-in-mins: stop (and save) after M minutes
  bool exit_signal_handler = false;  // --exit-signal-handler: SIGTERM finishes the step, saves, exits 0
  int keep_last = 0;            // --keep-last: keep the K newest checkpoints (0: all)
  bool async_save = false;      // --async-save: snapshot to memory, write in a background thread
};

void to_json(nlohmann::json& j, const TrainOptions& o);

}  // namespace meshtrain

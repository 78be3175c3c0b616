// The training loop: data, the pipeline engine's step, global-norm clipping,
// AdamW with warmup + cosine, evaluation, logging and the run report.
// train() is collective over the mesh's world: every rank calls it.
#pragma once

#include <vector>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/train/train_options.h"

namespace meshtrain {

struct TrainResult {
  std::vector<double> losses;      // training loss per iteration
  std::vector<double> step_times_s;
  std::vector<double> grad_norms;
  std::vector<double> lrs;
  std::vector<std::pair<int, double>> val_losses;  // (iteration, loss)
  double tokens_per_s = 0;         // median over iterations after the first
  double tokens_per_step = 0;      // consumed, counted from the batches
};

// Checks the options (configuration, data files) on every rank before any
// large allocation; throws Error naming the first problem.
void check_options(const TrainOptions& o, int world_size);

TrainResult train(const TrainOptions& o, ProcessMesh& mesh);

}  // namespace meshtrain

// The range of every training value that check_options (trainer.h) leaves
// open: the optimizer's and the schedule's numbers, the run's counts, and the
// combinations that would otherwise be ignored silently. Called on every rank
// before anything is allocated; throws Error naming the flag and the value.
//   --lr, --min-lr          finite, >= 0, min-lr <= lr
//   --lr-warmup-iters       >= 0; --lr-decay-iters >= 0
//   --weight-decay          finite, >= 0
//   --adam-beta1/2          in [0, 1)
//   --adam-eps              finite, > 0
//   --clip-grad             finite, >= 0 (0: off)
//   --train-iters           >= 1
//   --log-interval          >= 1
//   --eval-iters            > 0 only with validation data (mock data or a
//                           folder holding val.bin)
//   --mock-data             excludes --data-path
//   --sample-tokens         >= 0
//   --peak-tflops           finite, >= 0
//   micro-batch x seq-length, global batch x seq-length: within 32 bits
//   (token positions are int indices)
#pragma once

#include "meshtrain/train/train_options.h"

namespace meshtrain {

void check_option_ranges(const TrainOptions& o);

}  // namespace meshtrain

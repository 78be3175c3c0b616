#include "meshtrain/train/train_options.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/data/token_dataset.h"
#include "meshtrain/train/batch_source.h"
#include "meshtrain/train/trainer.h"

namespace meshtrain {

void to_json(nlohmann::json& j, const TrainOptions& o) {
  j = nlohmann::json{{"model", o.model},
                     {"parallel", o.parallel},
                     {"lr", o.lr.lr},
                     {"min_lr", o.lr.min_lr},
                     {"lr_warmup_iters", o.lr.warmup},
                     {"lr_decay_iters", o.lr.decay_iters},
                     {"adam_beta1", o.adam.beta1},
                     {"adam_beta2", o.adam.beta2},
                     {"adam_eps", o.adam.eps},
                     {"weight_decay", o.adam.weight_decay},
                     {"clip_grad", o.clip_grad},
                     {"train_iters", o.train_iters},
                     {"seed", o.seed},
                     {"data_path", o.data_path},
                     {"mock_data", o.mock_data},
                     {"eval_interval", o.eval_interval},
                     {"eval_iters", o.eval_iters},
                     {"peak_tflops", o.peak_tflops},
                     {"skip_nonfinite", o.skip_nonfinite},
                     {"save", o.save_dir},
                     {"save_interval", o.save_interval},
                     {"load", o.load_dir},
                     {"exit_interval", o.exit_interval},
                     {"exit_duration_in_mins", o.exit_duration_mins},
                     {"exit_signal_handler", o.exit_signal_handler},
                     {"keep_last", o.keep_last},
                     {"async_save", o.async_save},
                     {"zero_prefetch", o.zero_prefetch}};
}

void check_options(const TrainOptions& o, int world_size) {
  namespace fs = std::filesystem;
  ParallelConfig p = o.parallel;
  validate(o.model, p, world_size);
  check(p.cp == 1,
        "context-parallel-size {}: the engine runs no context parallelism (the performance model prices it "
        "under a framework profile that has it)",
        p.cp);
  check(o.train_iters >= 0, "train-iters must not be negative (got {})", o.train_iters);
  check(o.lr.lr >= 0, "lr must not be negative (got {})", o.lr.lr);
  check(o.clip_grad >= 0, "clip-grad must not be negative (got {})", o.clip_grad);
  check(o.eval_iters >= 0 && o.eval_interval >= 0, "eval-iters and eval-interval must not be negative");
  check(o.save_interval == 0 || !o.save_dir.empty(), "--save-interval needs --save DIR");
  check(!o.async_save || !o.save_dir.empty(), "--async-save needs --save DIR");
  check(o.zero_prefetch || p.zero_stage == 3, "--no-zero-prefetch applies to --zero-stage 3 (got {})", p.zero_stage);
  if (!o.mock_data) {
    check(!o.data_path.empty(), "no --data-path given (or use --mock-data)");
    const data::DataPaths paths = data::resolve_data_path(o.data_path);
    const data::TokenDataset t(paths.train);  // validates headers and sizes
    check(t.size() >= int64_t{o.model.seq_length} + 1, "token data {} holds {} tokens, fewer than seq-length + 1 = {}",
          paths.train, t.size(), o.model.seq_length + 1);
    t.validate_vocab(o.model.vocab_size);
    if (!paths.val.empty() && o.eval_iters > 0) {
      const data::TokenDataset val(paths.val);
      check(val.size() >= int64_t{o.model.seq_length} * o.parallel.global_batch_size + 1,
            "validation data {} holds {} tokens, fewer than one global batch", paths.val, val.size());
      val.validate_vocab(o.model.vocab_size);
    }
  }
}

}  // namespace meshtrain

#include "meshtrain/train/option_ranges.h"

#include <climits>
#include <cmath>
#include <filesystem>

#include "meshtrain/core/error.h"
#include "meshtrain/data/token_dataset.h"

namespace meshtrain {

namespace {

void check_finite_nonneg(double v, const char* flag) {
  check(std::isfinite(v) && v >= 0, "{} must be a finite number >= 0 (got {})", flag, v);
}

// Validation data: mock data, or data whose --data-path resolves to a
// validation set (data/token_dataset.h); a path that names nothing has none.
bool has_validation_data(const TrainOptions& o) {
  if (o.mock_data) return true;
  try {
    return !data::resolve_data_path(o.data_path).val.empty();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void check_option_ranges(const TrainOptions& o) {
  check_finite_nonneg(o.lr.lr, "--lr");
  check_finite_nonneg(o.lr.min_lr, "--min-lr");
  check(o.lr.min_lr <= o.lr.lr, "--min-lr {} is above --lr {}", o.lr.min_lr, o.lr.lr);
  check(o.lr.warmup >= 0, "--lr-warmup-iters must not be negative (got {})", o.lr.warmup);
  check(o.lr.decay_iters >= 0, "--lr-decay-iters must not be negative (got {})", o.lr.decay_iters);
  check_finite_nonneg(o.adam.weight_decay, "--weight-decay");
  check(o.adam.beta1 >= 0 && o.adam.beta1 < 1, "--adam-beta1 must be in [0, 1) (got {})", o.adam.beta1);
  check(o.adam.beta2 >= 0 && o.adam.beta2 < 1, "--adam-beta2 must be in [0, 1) (got {})", o.adam.beta2);
  check(std::isfinite(o.adam.eps) && o.adam.eps > 0, "--adam-eps must be a finite number > 0 (got {})", o.adam.eps);
  check_finite_nonneg(o.clip_grad, "--clip-grad");
  check(o.train_iters >= 1, "--train-iters must be at least 1 (got {})", o.train_iters);
  check(o.log_interval >= 1, "--log-interval must be at least 1 (got {})", o.log_interval);
  check(o.eval_interval >= 0, "--eval-interval must not be negative (got {})", o.eval_interval);
  check(o.eval_iters >= 0, "--eval-iters must not be negative (got {})", o.eval_iters);
  check(!(o.mock_data && !o.data_path.empty()), "--mock-data and --data-path exclude each other");
  check(o.eval_iters == 0 || has_validation_data(o),
        "--eval-iters {} but no validation data: --data-path {} has no val.bin or val shards", o.eval_iters,
        o.data_path);
  check(o.sample_tokens >= 0, "--sample-tokens must not be negative (got {})", o.sample_tokens);
  check_finite_nonneg(o.peak_tflops, "--peak-tflops");
  const ParallelConfig& p = o.parallel;
  const int64_t seq = o.model.seq_length;
  check(int64_t{p.micro_batch_size} * seq <= INT_MAX, "micro-batch-size {} x seq-length {} exceeds {} tokens",
        p.micro_batch_size, seq, INT_MAX);
  check(int64_t{p.global_batch_size} * seq <= INT_MAX, "global-batch-size {} x seq-length {} exceeds {} tokens",
        p.global_batch_size, seq, INT_MAX);
}

}  // namespace meshtrain

#include "meshtrain/train/batch_source.h"

#include <algorithm>
#include <filesystem>

#include "meshtrain/core/rng.h"

namespace meshtrain {

BatchSource::BatchSource(const TrainOptions& o) : o_(o) {
  if (o.mock_data) return;
  const data::DataPaths paths = data::resolve_data_path(o.data_path);
  train_ = std::make_unique<data::TokenDataset>(paths.train);
  sampler_ = std::make_unique<data::SequenceSampler>(*train_, o.model.seq_length, o.seed);
  if (!paths.val.empty() && o.eval_iters > 0) {
    val_ = std::make_unique<data::TokenDataset>(paths.val);
    eval_ = std::make_unique<data::EvalSampler>(*val_, o.model.seq_length, o.parallel.global_batch_size);
  }
}

bool BatchSource::has_eval() const { return o_.mock_data ? o_.eval_iters > 0 : eval_ != nullptr; }

int64_t BatchSource::eval_batches() const {
  return o_.mock_data ? o_.eval_iters : std::min<int64_t>(o_.eval_iters, eval_->num_batches());
}

void BatchSource::fill(int64_t it, bool eval, int dp_rank, int32_t* tokens, int32_t* targets) const {
  const ParallelConfig& p = o_.parallel;
  const int m = p.num_micro_batches(), N = p.micro_batch_size * o_.model.seq_length;
  for (int mb = 0; mb < m; ++mb) {
    const int first = data::micro_batch_first_sequence(dp_rank, m, mb, p.micro_batch_size);
    int32_t* tk = tokens + int64_t{mb} * N;
    int32_t* tg = targets + int64_t{mb} * N;
    if (o_.mock_data)
      mock(it, eval, first, tk, tg);
    else if (eval)
      eval_->fill_micro_batch(it, first, p.micro_batch_size, tk, tg);
    else
      sampler_->fill_micro_batch(it, p.global_batch_size, first, p.micro_batch_size, tk, tg);
  }
}

// Token t of sequence j of batch `it`: a hash, so any layout sees the same.
void BatchSource::mock(int64_t it, bool eval, int first, int32_t* tk, int32_t* tg) const {
  const int S = o_.model.seq_length, V = o_.model.vocab_size;
  for (int b = 0; b < o_.parallel.micro_batch_size; ++b) {
    const uint64_t seq = static_cast<uint64_t>(it) * o_.parallel.global_batch_size + first + b;
    for (int t = 0; t <= S; ++t) {
      const int32_t v = static_cast<int32_t>(hash3(o_.seed, eval ? 2 : 1, seq * (S + 1) + t) % V);
      if (t < S) tk[b * S + t] = v;
      if (t > 0) tg[b * S + t - 1] = v;
    }
  }
}

}  // namespace meshtrain

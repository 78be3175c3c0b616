// BatchSource: the tokens of a step for this rank, from token data (data/token_dataset.h)
// or mock data. The samples of global batch `it` depend on the seed and the
// iteration alone, never on the layout (data/loader.h), so a resumed run
// continues with exactly the batches an uninterrupted one would see.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/data/loader.h"
#include "meshtrain/data/token_dataset.h"
#include "meshtrain/train/train_options.h"

namespace meshtrain {

class BatchSource {
 public:
  explicit BatchSource(const TrainOptions& o);  // opens and validates the files
  bool has_eval() const;
  int64_t eval_batches() const;

  // Micro-batch i of DP rank `dp_rank` at tokens + i*N, targets + i*N
  // (N = micro_batch x seq) for training iteration `it` (or validation
  // batch `it` when `eval`).
  void fill(int64_t it, bool eval, int dp_rank, int32_t* tokens, int32_t* targets) const;

 private:
  void mock(int64_t it, bool eval, int first, int32_t* tk, int32_t* tg) const;
  const TrainOptions& o_;
  std::unique_ptr<data::TokenDataset> train_, val_;
  std::unique_ptr<data::SequenceSampler> sampler_;
  std::unique_ptr<data::EvalSampler> eval_;
};

}  // namespace meshtrain

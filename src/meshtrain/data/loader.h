// The deterministic data loader: which token sequences each training step and
// each evaluation step reads.
//
// Samples. A token dataset (token_dataset.h) of N tokens is cut into num_samples = (N - 1) / S
// samples of S + 1 tokens at stride S (S = seq_length): sample k is tokens
// [k*S, k*S + S]; its input is the first S of them, its target the last S
// (the input shifted by one). Tokens past the last whole sample are unused.
//
// Training order. The sequences of global batch i (of B sequences) sit at
// global positions g = i*B + j, j in [0, B). Position g falls in epoch
// e = g / num_samples and reads sample perm_e(g % num_samples), where perm_e
// is a pseudo-random permutation of the samples keyed by (seed, e). Every
// sample is read once per epoch, and the samples of global batch i depend only
// on (dataset, seq_length, seed, i, B): never on the data-parallel size or the
// micro-batch size.
//
// Splitting a global batch. A data-parallel rank r of D, running M
// micro-batches of b sequences each (B = D*M*b), reads in micro-batch m the
// b consecutive sequences starting at
//     first_sequence = (r*M + m) * b            (micro_batch_first_sequence)
// so ranks in order, each with its micro-batches in order, read the global
// batch in order, whatever D, M and b.
#pragma once

#include <cstdint>

#include "meshtrain/data/token_dataset.h"

namespace meshtrain::data {

// Index of the first sequence of micro-batch `micro` (of `num_micro_batches`)
// on data-parallel rank `dp_rank`, within its global batch.
inline int micro_batch_first_sequence(int dp_rank, int num_micro_batches, int micro,
                                      int micro_batch_size) {
  return (dp_rank * num_micro_batches + micro) * micro_batch_size;
}

// The samples of a token dataset, cut as described above. Holds a reference to
// `tokens`, which must outlive it.
class SampleSlicer {
 public:
  // Throws Error naming the file when it holds fewer than seq_length + 1
  // tokens, or when seq_length < 1.
  SampleSlicer(const TokenDataset& tokens, int seq_length);

  int seq_length() const { return seq_length_; }
  int64_t num_samples() const { return num_samples_; }
  const TokenDataset& dataset() const { return *tokens_; }

  // Writes sample k's input to inputs[0, S) and its target to targets[0, S).
  void fill(int64_t k, int32_t* inputs, int32_t* targets) const;

 private:
  const TokenDataset* tokens_;
  int seq_length_;
  int64_t num_samples_;
};

// Training sequences in the seeded order described above. Stateless and
// thread-safe: any rank may ask for any step in any order.
class SequenceSampler {
 public:
  // See SampleSlicer for the errors.
  SequenceSampler(const TokenDataset& tokens, int seq_length, uint64_t seed);

  int seq_length() const { return samples_.seq_length(); }
  int64_t num_samples() const { return samples_.num_samples(); }

  // The sample read by sequence j (0 <= j < global_batch_size) of global
  // batch `iteration` (>= 0).
  int64_t sample_index(int64_t iteration, int global_batch_size, int j) const;
  // The epoch that sequence j of global batch `iteration` falls in.
  int64_t epoch(int64_t iteration, int global_batch_size, int j) const;

  // Writes sample k's input and target to inputs[0, S) and targets[0, S).
  void fill(int64_t sample, int32_t* inputs, int32_t* targets) const {
    samples_.fill(sample, inputs, targets);
  }

  // Writes sequences first_sequence .. first_sequence + count - 1 of global
  // batch `iteration`: sequence first_sequence + c goes to inputs[c*S, c*S + S)
  // and targets[c*S, c*S + S). Requires first_sequence + count <=
  // global_batch_size.
  void fill_micro_batch(int64_t iteration, int global_batch_size, int first_sequence, int count,
                        int32_t* inputs, int32_t* targets) const;

 private:
  SampleSlicer samples_;
  uint64_t seed_;
};

// Evaluation sequences in file order: sequence j of evaluation batch b (of B
// sequences) is sample b*B + j. Only whole batches are used, so every
// evaluation batch has B sequences. Split among ranks and micro-batches with
// the same convention as training.
class EvalSampler {
 public:
  // Throws Error naming the file when it does not hold one whole batch.
  EvalSampler(const TokenDataset& tokens, int seq_length, int global_batch_size);

  int seq_length() const { return samples_.seq_length(); }
  int global_batch_size() const { return global_batch_size_; }
  int64_t num_batches() const { return samples_.num_samples() / global_batch_size_; }

  // As SequenceSampler::fill_micro_batch, for evaluation batch `batch` in
  // [0, num_batches()).
  void fill_micro_batch(int64_t batch, int first_sequence, int count, int32_t* inputs,
                        int32_t* targets) const;

 private:
  SampleSlicer samples_;
  int global_batch_size_;
};

}  // namespace meshtrain::data

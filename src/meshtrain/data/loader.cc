#include "meshtrain/data/loader.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/data/permutation.h"

namespace meshtrain::data {

namespace {

// Stream of the counter-based generator that keys each epoch's permutation.
constexpr uint64_t kEpochStream = 0x5eb1e5a3a9f1e0c1ull;

void check_micro_batch(int global_batch_size, int first_sequence, int count) {
  check(global_batch_size > 0, "global batch size {} is not positive", global_batch_size);
  check(first_sequence >= 0 && count >= 0 &&
            static_cast<int64_t>(first_sequence) + count <= global_batch_size,
        "sequences {}..{} are outside a global batch of {}", first_sequence,
        static_cast<int64_t>(first_sequence) + count - 1, global_batch_size);
}

}  // namespace

SampleSlicer::SampleSlicer(const TokenDataset& tokens, int seq_length)
    : tokens_(&tokens), seq_length_(seq_length) {
  check(seq_length >= 1, "sequence length {} is not positive", seq_length);
  check(tokens.size() >= static_cast<int64_t>(seq_length) + 1,
        "token data {} holds {} tokens, fewer than one sample of seq_length + 1 = {}", tokens.spec(),
        tokens.size(), static_cast<int64_t>(seq_length) + 1);
  num_samples_ = (tokens.size() - 1) / seq_length;
}

void SampleSlicer::fill(int64_t k, int32_t* inputs, int32_t* targets) const {
  MT_ASSERT(k >= 0 && k < num_samples_);
  tokens_->read(k * seq_length_, seq_length_, inputs);
  tokens_->read(k * seq_length_ + 1, seq_length_, targets);
}

SequenceSampler::SequenceSampler(const TokenDataset& tokens, int seq_length, uint64_t seed)
    : samples_(tokens, seq_length), seed_(seed) {}

int64_t SequenceSampler::epoch(int64_t iteration, int global_batch_size, int j) const {
  check_micro_batch(global_batch_size, j, 1);
  check(iteration >= 0, "iteration {} is negative", iteration);
  const uint64_t g = static_cast<uint64_t>(iteration) * static_cast<uint64_t>(global_batch_size) +
                     static_cast<uint64_t>(j);
  return static_cast<int64_t>(g / static_cast<uint64_t>(num_samples()));
}

int64_t SequenceSampler::sample_index(int64_t iteration, int global_batch_size, int j) const {
  const uint64_t e = static_cast<uint64_t>(epoch(iteration, global_batch_size, j));
  const uint64_t n = static_cast<uint64_t>(num_samples());
  const uint64_t g = static_cast<uint64_t>(iteration) * static_cast<uint64_t>(global_batch_size) +
                     static_cast<uint64_t>(j);
  const Permutation perm(n, hash3(seed_, kEpochStream, e));
  return static_cast<int64_t>(perm(g - e * n));
}

void SequenceSampler::fill_micro_batch(int64_t iteration, int global_batch_size, int first_sequence,
                                       int count, int32_t* inputs, int32_t* targets) const {
  check_micro_batch(global_batch_size, first_sequence, count);
  const int s = seq_length();
  for (int c = 0; c < count; ++c) {
    const int64_t k = sample_index(iteration, global_batch_size, first_sequence + c);
    samples_.fill(k, inputs + static_cast<int64_t>(c) * s, targets + static_cast<int64_t>(c) * s);
  }
}

EvalSampler::EvalSampler(const TokenDataset& tokens, int seq_length, int global_batch_size)
    : samples_(tokens, seq_length), global_batch_size_(global_batch_size) {
  check(global_batch_size > 0, "global batch size {} is not positive", global_batch_size);
  check(samples_.num_samples() >= global_batch_size,
        "token data {} holds {} sequences of {}+1 tokens, fewer than one evaluation batch of {}",
        tokens.spec(), samples_.num_samples(), seq_length, global_batch_size);
}

void EvalSampler::fill_micro_batch(int64_t batch, int first_sequence, int count, int32_t* inputs,
                                   int32_t* targets) const {
  check_micro_batch(global_batch_size_, first_sequence, count);
  check(batch >= 0 && batch < num_batches(), "evaluation batch {} is outside 0..{}", batch,
        num_batches() - 1);
  const int s = seq_length();
  for (int c = 0; c < count; ++c) {
    const int64_t k = batch * global_batch_size_ + first_sequence + c;
    samples_.fill(k, inputs + static_cast<int64_t>(c) * s, targets + static_cast<int64_t>(c) * s);
  }
}

}  // namespace meshtrain::data

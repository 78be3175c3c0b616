#include "meshtrain/data/loader.h"

#include <algorithm>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "temp_dir.h"

namespace meshtrain::data {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// A token file whose token t is t % 60000, so a sample's first token tells
// where it starts.
class LoaderTest : public ::testing::Test {
 protected:
  void make(int64_t num_tokens) {
    std::vector<uint16_t> tokens(static_cast<size_t>(num_tokens));
    for (int64_t t = 0; t < num_tokens; ++t) tokens[t] = static_cast<uint16_t>(t % 60000);
    write_token_file(dir_.file("t.bin"), tokens);
    file_ = std::make_unique<TokenDataset>(dir_.file("t.bin"));
  }
  const TokenDataset& file() const { return *file_; }

  TempDir dir_;
  std::unique_ptr<TokenDataset> file_;
};

TEST_F(LoaderTest, SamplesAreShiftedWindows) {
  make(1001);
  const SampleSlicer s(file(), 10);
  EXPECT_EQ(s.num_samples(), 100);  // (1001 - 1) / 10
  std::vector<int32_t> in(10), tg(10);
  s.fill(99, in.data(), tg.data());
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(in[t], 990 + t);
    EXPECT_EQ(tg[t], 991 + t);
  }
  make(1000);
  EXPECT_EQ(SampleSlicer(file(), 10).num_samples(), 99);  // the last window lacks its target
}

TEST_F(LoaderTest, TooFewTokens) {
  make(16);
  EXPECT_NO_THROW(SequenceSampler(file(), 15, 1));
  try {
    SequenceSampler(file(), 16, 1);
    FAIL() << "16 tokens accepted for seq_length 16";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file().spec()));
    EXPECT_THAT(e.what(), HasSubstr("holds 16 tokens, fewer than one sample of seq_length + 1 = 17"));
  }
  EXPECT_THROW(SequenceSampler(file(), 0, 1), Error);
}

TEST_F(LoaderTest, DeterministicFromSeed) {
  make(5000);
  const SequenceSampler a(file(), 16, 7), b(file(), 16, 7), c(file(), 16, 8);
  int differ = 0;
  for (int64_t it = 0; it < 20; ++it)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(a.sample_index(it, 8, j), b.sample_index(it, 8, j));
      differ += a.sample_index(it, 8, j) != c.sample_index(it, 8, j);
    }
  EXPECT_GT(differ, 140);  // of 160; agreement is by chance only
}

TEST_F(LoaderTest, EachSampleOncePerEpoch) {
  make(16 * 103 + 1);
  const SequenceSampler s(file(), 16, 3);
  const int64_t n = s.num_samples();
  ASSERT_EQ(n, 103);
  const int gbs = 8;
  // Three epochs' worth of sequences, read batch by batch.
  std::vector<std::vector<int64_t>> epochs(3);
  for (int64_t g = 0; g < 3 * n; ++g) {
    const int64_t it = g / gbs;
    const int j = static_cast<int>(g % gbs);
    EXPECT_EQ(s.epoch(it, gbs, j), g / n);
    epochs[g / n].push_back(s.sample_index(it, gbs, j));
  }
  for (auto& e : epochs) {
    std::vector<int64_t> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(sorted[k], k);
  }
  EXPECT_NE(epochs[0], epochs[1]);  // each epoch has its own order
  // Not the identity order either.
  int in_place = 0;
  for (int64_t k = 0; k < n; ++k) in_place += epochs[0][k] == k;
  EXPECT_LT(in_place, 10);
}

TEST_F(LoaderTest, MicroBatchesTileTheGlobalBatch) {
  make(20000);
  const int seq = 12, gbs = 8;
  const SequenceSampler s(file(), seq, 99);
  for (int64_t it : {0, 1, 17}) {
    // Reference: the whole global batch at once.
    std::vector<int32_t> ref_in(gbs * seq), ref_tg(gbs * seq);
    s.fill_micro_batch(it, gbs, 0, gbs, ref_in.data(), ref_tg.data());
    for (int j = 0; j < gbs; ++j) {
      std::vector<int32_t> in(seq), tg(seq);
      s.fill(s.sample_index(it, gbs, j), in.data(), tg.data());
      ASSERT_TRUE(std::equal(in.begin(), in.end(), ref_in.begin() + j * seq));
      ASSERT_TRUE(std::equal(tg.begin(), tg.end(), ref_tg.begin() + j * seq));
      EXPECT_EQ(ref_in[j * seq] % seq, 0);  // windows start at multiples of seq
    }
    for (int dp : {1, 2, 4}) {
      for (int mbs : {1, 2}) {
        const int num_micro = gbs / (dp * mbs);
        std::vector<int32_t> in, tg;
        for (int rank = 0; rank < dp; ++rank)
          for (int m = 0; m < num_micro; ++m) {
            std::vector<int32_t> mi(mbs * seq), mt(mbs * seq);
            s.fill_micro_batch(it, gbs, micro_batch_first_sequence(rank, num_micro, m, mbs), mbs,
                               mi.data(), mt.data());
            in.insert(in.end(), mi.begin(), mi.end());
            tg.insert(tg.end(), mt.begin(), mt.end());
          }
        EXPECT_EQ(in, ref_in) << "dp=" << dp << " mbs=" << mbs << " it=" << it;
        EXPECT_EQ(tg, ref_tg) << "dp=" << dp << " mbs=" << mbs << " it=" << it;
      }
    }
  }
}

TEST_F(LoaderTest, BatchesDependOnGlobalBatchSize) {
  make(20000);
  const SequenceSampler s(file(), 12, 5);
  // Sequence positions, not iterations, define the order: batch 1 of size 4
  // is the second half of batch 0 of size 8.
  for (int j = 0; j < 4; ++j) EXPECT_EQ(s.sample_index(1, 4, j), s.sample_index(0, 8, 4 + j));
}

TEST_F(LoaderTest, MicroBatchOutsideGlobalBatch) {
  make(2000);
  const SequenceSampler s(file(), 8, 1);
  std::vector<int32_t> in(64), tg(64);
  EXPECT_THROW(s.fill_micro_batch(0, 8, 6, 4, in.data(), tg.data()), Error);
  EXPECT_THROW(s.fill_micro_batch(0, 0, 0, 0, in.data(), tg.data()), Error);
  EXPECT_THROW(s.sample_index(-1, 8, 0), Error);
}

TEST_F(LoaderTest, EvalSamplerReadsInFileOrder) {
  make(1000);
  const EvalSampler e(file(), 10, 4);
  EXPECT_EQ(e.num_batches(), 24);  // 99 samples -> 24 whole batches of 4
  std::vector<int32_t> in(20), tg(20);
  e.fill_micro_batch(3, 2, 2, in.data(), tg.data());  // samples 14 and 15
  EXPECT_EQ(in[0], 140);
  EXPECT_EQ(tg[0], 141);
  EXPECT_EQ(in[10], 150);
  EXPECT_EQ(tg[19], 160);
  EXPECT_THROW(e.fill_micro_batch(24, 0, 4, in.data(), tg.data()), Error);
  try {
    EvalSampler(file(), 10, 100);
    FAIL() << "99 samples accepted for a batch of 100";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("fewer than one evaluation batch of 100"));
  }
}

}  // namespace
}  // namespace meshtrain::data

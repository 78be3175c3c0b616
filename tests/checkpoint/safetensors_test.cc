#include "meshtrain/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include "meshtrain/checkpoint/checkpoint_dir.h"
#include "meshtrain/core/error.h"

namespace meshtrain::checkpoint {
namespace {

TEST(Safetensors, HeaderRoundTrip) {
  const std::vector<StEntry> entries = {{"a/weight", StDtype::bf16, {3}, 0, 6}, {"a/exp_avg", StDtype::f32, {3}, 6, 18}};
  const std::string h = st_header_bytes(entries, {{"format", "pt"}});
  EXPECT_EQ((h.size() - 8) % 8, 0u);  // padded to 8 bytes
  const int64_t n = st_header_length(h, static_cast<int64_t>(h.size()) + 18);
  EXPECT_EQ(n, static_cast<int64_t>(h.size()) - 8);
  const auto parsed = st_parse_header(h.substr(8), 18);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed.at("a/weight").dtype, StDtype::bf16);
  EXPECT_EQ(parsed.at("a/exp_avg").begin, 6);
  EXPECT_EQ(parsed.at("a/exp_avg").end, 18);
  EXPECT_EQ(parsed.at("a/exp_avg").shape, std::vector<int64_t>{3});
}

TEST(Safetensors, RejectsBadHeaders) {
  EXPECT_THROW(st_header_length("abc", 3), Error);
  const std::string h = st_header_bytes({{"x", StDtype::f32, {2}, 0, 8}}, {});
  EXPECT_THROW(st_header_length(h, 12), Error);        // the header runs past the file
  EXPECT_THROW(st_parse_header(h.substr(8), 4), Error);  // data beyond the section
  EXPECT_THROW(st_parse_header("{\"x\": {\"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [0, 2]}}", 2), Error);
  EXPECT_THROW(st_parse_header("{\"x\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8), Error);
  EXPECT_THROW(st_parse_header("not json", 0), Error);
}

TEST(CheckpointDir, IterationNames) {
  EXPECT_EQ(iteration_dir_name(10), "iter_0000010");
  EXPECT_EQ(iteration_dir_name(1234567), "iter_1234567");
}

}  // namespace
}  // namespace meshtrain::checkpoint

#include "meshtrain/core/json_integer.h"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

TEST(JsonInteger, OnlyIntegersInRange) {
  using nlohmann::json;
  EXPECT_EQ(json_integer(json(7), 0, 10, "x"), 7);
  EXPECT_EQ(json_integer(json(uint64_t{5}), 0, 10, "x"), 5);
  EXPECT_EQ(json_integer(json(-3), -5, 10, "x"), -3);
  EXPECT_THROW(json_integer(json(2.7), 0, 10, "x"), Error);
  EXPECT_THROW(json_integer(json(1e300), 0, INT64_MAX, "x"), Error);
  EXPECT_THROW(json_integer(json("3"), 0, 10, "x"), Error);
  EXPECT_THROW(json_integer(json(11), 0, 10, "x"), Error);
  EXPECT_THROW(json_integer(json(UINT64_MAX), 0, INT64_MAX, "x"), Error);
  EXPECT_THROW(json_integer(json(int64_t{4294967360}), 0, INT32_MAX, "x"), Error);
  try {
    json_integer(json(2.5), 0, 10, "model field 'num_layers'");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model field 'num_layers' must be an integer in [0, 10] (got 2.5)");
  }
}

}  // namespace
}  // namespace meshtrain

// Available memory from /proc/meminfo and a cgroup's limit; an allocation
// that fails names its size.
#include "meshtrain/core/host_memory.h"

#include <string>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {
namespace {

const char* kMeminfo = "MemTotal:       24683548 kB\nMemFree:         1000000 kB\nMemAvailable:   22634240 kB\n";

TEST(HostMemory, MemAvailableWithoutCgroupLimit) {
  const AvailableMemory a = available_memory_from(kMeminfo, "max\n", "123\n");
  EXPECT_EQ(a.bytes, int64_t{22634240} * 1024);
  EXPECT_EQ(a.source, "MemAvailable");
  // cgroup v1 without a limit reports a number near 2^63.
  EXPECT_EQ(available_memory_from(kMeminfo, "9223372036854771712\n", "3533262848\n").source, "MemAvailable");
}

TEST(HostMemory, TheCgroupLimitWinsWhenSmaller) {
  const AvailableMemory a = available_memory_from(kMeminfo, "8589934592\n", "1073741824\n");
  EXPECT_EQ(a.bytes, int64_t{7} << 30);
  EXPECT_EQ(a.source, "the cgroup's memory limit");
  EXPECT_EQ(available_memory_from(kMeminfo, "100\n", "200\n").bytes, 0);  // over its limit already
}

TEST(HostMemory, UnknownWhenNothingIsReadable) {
  EXPECT_TRUE(available_memory_from("", "", "").source.empty());
  EXPECT_GT(node_memory_total_bytes(), 0);
  EXPECT_GT(node_available_memory().bytes, 0);
}

TEST(HostMemory, AFailedAllocationNamesItsSize) {
  try {
    Buffer b(MemCategory::optimizer, size_t{1} << 62);
    FAIL() << "allocated 4 EiB";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate 4611686018427387904 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("optimizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshtrain

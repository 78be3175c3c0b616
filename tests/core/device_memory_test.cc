// The device seam of the tracked allocator: a Buffer allocates through its
// device's allocator, is tracked by that device's tracker only, and caches
// large released blocks per device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "meshtrain/core/device.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {
namespace {

// Host memory posing as a device, counting what it is asked for.
class CountingAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    return std::aligned_alloc(64, bytes);
  }
  void release(void* p, size_t) override {
    ++releases;
    std::free(p);
  }
  void zero(void* p, size_t bytes) override {
    ++zeroes;
    std::memset(p, 0, bytes);
  }
  int allocations = 0, releases = 0, zeroes = 0;
};

struct Installed {
  explicit Installed(DeviceAllocator* a) { install_device_allocator(Device::cuda, a); }
  ~Installed() {
    release_cached_memory();
    install_device_allocator(Device::cuda, nullptr);
  }
};

TEST(DeviceMemory, NamesParseBack) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu);
  EXPECT_EQ(parse_device("cuda"), Device::cuda);
  EXPECT_FALSE(parse_device("gpu").has_value());
  EXPECT_EQ(device_name(Device::cuda), "cuda");
}

TEST(DeviceMemory, NoAllocatorIsAClearError) {
  install_device_allocator(Device::cuda, nullptr);
  EXPECT_THROW(Buffer(MemCategory::gradients, 128, true, Device::cuda), std::runtime_error);
  EXPECT_NE(device_allocator(Device::cpu), nullptr);
}

TEST(DeviceMemory, DeviceBufferIsTrackedOnItsDeviceOnly) {
  CountingAllocator a;
  Installed guard(&a);
  const MemorySnapshot host0 = MemoryTracker::global().snapshot();
  const MemorySnapshot dev0 = MemoryTracker::of(Device::cuda).snapshot();
  {
    Buffer b(MemCategory::optimizer, 1000, true, Device::cuda);
    EXPECT_EQ(b.device(), Device::cuda);
    EXPECT_EQ(a.allocations, 1);
    EXPECT_EQ(a.zeroes, 1);
    Buffer moved = std::move(b);
    EXPECT_EQ(moved.device(), Device::cuda);
    const MemorySnapshot dev = MemoryTracker::of(Device::cuda).snapshot();
    EXPECT_EQ(dev.current[static_cast<int>(MemCategory::optimizer)] -
                  dev0.current[static_cast<int>(MemCategory::optimizer)],
              1000);
    EXPECT_EQ(MemoryTracker::global().snapshot().current_total, host0.current_total);
  }
  EXPECT_EQ(a.releases, 1);  // small blocks go straight back
  EXPECT_EQ(MemoryTracker::of(Device::cuda).snapshot().current_total, dev0.current_total);
}

TEST(DeviceMemory, LargeBlocksAreCachedPerDevice) {
  CountingAllocator a;
  Installed guard(&a);
  const size_t big = size_t{2} << 20;
  const int64_t host_cached = cached_bytes(Device::cpu);
  { Buffer b(MemCategory::activations, big, false, Device::cuda); }
  EXPECT_EQ(a.releases, 0);
  EXPECT_EQ(cached_bytes(Device::cuda), static_cast<int64_t>(big));
  EXPECT_EQ(cached_bytes(Device::cpu), host_cached);
  { Buffer b(MemCategory::activations, big, false, Device::cuda); }
  EXPECT_EQ(a.allocations, 1);  // the cached block was handed out again
  EXPECT_EQ(a.zeroes, 0);
  release_cached_memory();
  EXPECT_EQ(a.releases, 1);
  EXPECT_EQ(cached_bytes(Device::cuda), 0);
}

}  // namespace
}  // namespace meshtrain

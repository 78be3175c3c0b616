#include "meshtrain/core/device.h"

#include <cstdlib>
#include <cstring>

namespace meshtrain {

std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

std::optional<Device> parse_device(std::string_view s) {
  if (s == "cpu") return Device::cpu;
  if (s == "cuda") return Device::cuda;
  return std::nullopt;
}

namespace {
class HostAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, bytes); }
  void release(void* p, size_t) override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
};

DeviceAllocator*& slot(Device d) {
  static HostAllocator host;
  static DeviceAllocator* slots[kNumDevices] = {&host, nullptr};
  return slots[static_cast<int>(d)];
}
}  // namespace

DeviceAllocator* device_allocator(Device d) { return slot(d); }

void install_device_allocator(Device d, DeviceAllocator* a) {
  if (d != Device::cpu) slot(d) = a;
}

}  // namespace meshtrain

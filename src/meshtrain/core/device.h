// Devices a Buffer can live on, and the seam through which each one's memory
// is obtained. The host allocator is built into core; the CUDA allocator is
// installed by the GPU backend (src/meshtrain/kernels/gpu) when that backend
// is compiled and a device is visible, so core never calls a device runtime.
//
// An allocator hands out raw blocks (64-byte aligned on the host, the
// runtime's alignment on a device) and zeroes them; the Buffer around it does
// the tracking by category and the caching of released blocks, per device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace meshtrain {

enum class Device : uint8_t { cpu, cuda };
constexpr int kNumDevices = 2;
std::string_view device_name(Device d);
// "cpu" or "cuda"; nullopt for anything else.
std::optional<Device> parse_device(std::string_view s);

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // A block of `bytes` (a multiple of 64), or nullptr when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
};

// The allocator of d; nullptr when no backend installed one.
DeviceAllocator* device_allocator(Device d);
// Installs (or, with nullptr, removes) the allocator of a device other than
// the host. Not owned; it must outlive every Buffer on that device.
void install_device_allocator(Device d, DeviceAllocator* a);

}  // namespace meshtrain

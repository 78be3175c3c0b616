#include "meshtrain/core/memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view mem_category_name(MemCategory c) {
  static constexpr std::string_view names[] = {"parameters", "gradients",    "optimizer",
                                               "activations", "comm_buffers", "workspace",
                                               "checkpoint"};
  return names[static_cast<int>(c)];
}

MemoryTracker& MemoryTracker::of(Device d) {
  static MemoryTracker t[kNumDevices];
  return t[static_cast<int>(d)];
}

MemoryTracker& MemoryTracker::global() { return of(Device::cpu); }

void MemoryTracker::on_alloc(MemCategory c, int64_t bytes) {
  const int i = static_cast<int>(c);
  s_.current[i] += bytes;
  if (s_.current[i] > s_.peak[i]) s_.peak[i] = s_.current[i];
  s_.current_total += bytes;
  if (s_.current_total > s_.peak_total) s_.peak_total = s_.current_total;
}

void MemoryTracker::on_free(MemCategory c, int64_t bytes) {
  s_.current[static_cast<int>(c)] -= bytes;
  s_.current_total -= bytes;
}

void MemoryTracker::reset_peaks() {
  s_.peak = s_.current;
  s_.peak_total = s_.current_total;
}

namespace {
constexpr size_t kCacheMin = size_t{1} << 20;
size_t rounded_size(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Released large blocks of one device, by size.
struct BlockCache {
  std::multimap<size_t, void*> blocks;
  int64_t bytes = 0;
};
BlockCache& block_cache(Device d) {
  static BlockCache c[kNumDevices];
  return c[static_cast<int>(d)];
}

DeviceAllocator& allocator_or_throw(Device d) {
  DeviceAllocator* a = device_allocator(d);
  if (!a) throw std::runtime_error(fmt::format("no allocator for device {}: the backend is not compiled in or not initialised",
                                               device_name(d)));
  return *a;
}
}  // namespace

int64_t cached_bytes(Device d) { return block_cache(d).bytes; }

void release_cached_memory() {
  for (int i = 0; i < kNumDevices; ++i) {
    const Device d = static_cast<Device>(i);
    BlockCache& c = block_cache(d);
    if (c.blocks.empty()) continue;
    DeviceAllocator& a = allocator_or_throw(d);
    for (auto& [size, p] : c.blocks) a.release(p, size);
    c.blocks.clear();
    c.bytes = 0;
  }
}

Buffer::Buffer(MemCategory c, size_t bytes, bool zero, Device device) : bytes_(bytes), cat_(c), device_(device) {
  if (bytes == 0) return;
  DeviceAllocator& a = allocator_or_throw(device_);
  BlockCache& cache = block_cache(device_);
  const size_t rounded = rounded_size(bytes);
  if (auto it = cache.blocks.find(rounded); it != cache.blocks.end()) {
    data_ = it->second;
    cache.blocks.erase(it);
    cache.bytes -= static_cast<int64_t>(rounded);
  } else {
    data_ = a.allocate(rounded);
  }
  if (!data_) {
    bytes_ = 0;
    throw Error(fmt::format("cannot allocate {} bytes ({:.2f} GiB) of {} on {}: out of memory", bytes,
                            double(bytes) / 1073741824.0, mem_category_name(c), device_name(device_)));
  }
  if (zero) a.zero(data_, rounded);
  MemoryTracker::of(device_).on_alloc(cat_, static_cast<int64_t>(bytes_));
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (data_) {
    const size_t rounded = rounded_size(bytes_);
    if (rounded >= kCacheMin) {
      BlockCache& cache = block_cache(device_);
      cache.blocks.emplace(rounded, data_);
      cache.bytes += static_cast<int64_t>(rounded);
    } else {
      allocator_or_throw(device_).release(data_, rounded);
    }
    MemoryTracker::of(device_).on_free(cat_, static_cast<int64_t>(bytes_));
  }
  data_ = nullptr;
  bytes_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), cat_(o.cat_), device_(o.device_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    cat_ = o.cat_;
    device_ = o.device_;
  }
  return *this;
}

static int64_t status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::atoll(line.c_str() + n) * 1024;
  return 0;
}
int64_t process_rss_bytes() { return status_kb("VmRSS:"); }
int64_t process_peak_rss_bytes() { return status_kb("VmHWM:"); }

}  // namespace meshtrain

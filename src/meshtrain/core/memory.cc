#include "meshtrain/core/memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <string>
#include <utility>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view mem_category_name(MemCategory c) {
  static constexpr std::string_view names[] = {"parameters", "gradients",    "optimizer",
                                               "activations", "comm_buffers", "workspace"};
  return names[static_cast<int>(c)];
}

MemoryTracker& MemoryTracker::global() {
  static MemoryTracker t;
  return t;
}

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
std::multimap<size_t, void*>& block_cache() {
  static std::multimap<size_t, void*> c;
  return c;
}
int64_t g_cached = 0;
size_t rounded_size(size_t bytes) { return (bytes + 63) / 64 * 64; }
}  // namespace

int64_t cached_bytes() { return g_cached; }

void release_cached_memory() {
  for (auto& [size, p] : block_cache()) std::free(p);
  block_cache().clear();
  g_cached = 0;
}

Buffer::Buffer(MemCategory c, size_t bytes, bool zero) : bytes_(bytes), cat_(c) {
  if (bytes == 0) return;
  const size_t rounded = rounded_size(bytes);
  if (auto it = block_cache().find(rounded); it != block_cache().end()) {
    data_ = it->second;
    block_cache().erase(it);
    g_cached -= static_cast<int64_t>(rounded);
  } else {
    data_ = std::aligned_alloc(64, rounded);
  }
  if (!data_)
    throw Error(fmt::format("cannot allocate {} bytes ({:.2f} GiB) of {}: out of memory", bytes,
                            double(bytes) / 1073741824.0, mem_category_name(c)));
  if (zero) std::memset(data_, 0, rounded);
  MemoryTracker::global().on_alloc(cat_, static_cast<int64_t>(bytes_));
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (data_) {
    const size_t rounded = rounded_size(bytes_);
    if (rounded >= kCacheMin) {
      block_cache().emplace(rounded, data_);
      g_cached += static_cast<int64_t>(rounded);
    } else {
      std::free(data_);
    }
    MemoryTracker::global().on_free(cat_, static_cast<int64_t>(bytes_));
  }
  data_ = nullptr;
  bytes_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), cat_(o.cat_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    cat_ = o.cat_;
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

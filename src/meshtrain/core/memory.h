// The tracked allocator. Every byte the engine holds comes from a Buffer, and
// every Buffer is tagged with the category it is accounted to and the device
// it lives on (core/device.h). One tracker per device keeps current and peak
// bytes per category and the peak of their total, so a run can report where
// its memory went and tests can compare the measured figures with the closed
// forms of the memory model, on the host and on a GPU alike.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "meshtrain/core/device.h"

namespace meshtrain {

enum class MemCategory : uint8_t {
  parameters,    // working weights (bf16 or fp32), gathered ZeRO-3 weights
  gradients,     // fp32 parameter gradients (full or ZeRO-2/3 shard)
  optimizer,     // fp32 master weights and Adam moments
  activations,   // everything stashed for backward, and the live layer tensors
  comm_buffers,  // send/receive staging, gradient buckets
  workspace,     // scratch that lives within one kernel or layer call
  checkpoint,    // checkpoint I/O: the --async-save snapshot (kept between saves), read and write staging
};
constexpr int kNumMemCategories = 7;
std::string_view mem_category_name(MemCategory c);

struct MemorySnapshot {
  std::array<int64_t, kNumMemCategories> current{};
  std::array<int64_t, kNumMemCategories> peak{};
  int64_t current_total = 0;
  int64_t peak_total = 0;
};

// Process-wide accounting, one tracker per device (per rank).
class MemoryTracker {
 public:
  // The host's tracker.
  static MemoryTracker& global();
  static MemoryTracker& of(Device d);
  void on_alloc(MemCategory c, int64_t bytes);
  void on_free(MemCategory c, int64_t bytes);
  MemorySnapshot snapshot() const { return s_; }
  // Peaks restart from the current values (e.g. after set-up).
  void reset_peaks();

 private:
  MemorySnapshot s_;
};

// An owning, 64-byte aligned allocation on one device. Move-only.
//
// Large blocks (1 MiB and up) go back to a cache when released and are
// handed out again to the next request of exactly the same size, as a
// caching allocator does: a step allocates the same stash and buffer sizes
// micro-batch after micro-batch, and reusing them avoids faulting fresh
// pages in each time. The tracker counts bytes held by live Buffers only;
// cached_bytes() says how much the cache keeps besides. Each device has its
// own cache and tracker; a device Buffer throws std::runtime_error when no
// allocator is installed for its device and std::bad_alloc when it is full.
class Buffer {
 public:
  Buffer() = default;
  // zero: fill with zeros (skip for buffers fully written before read).
  Buffer(MemCategory c, size_t bytes, bool zero = true, Device device = Device::cpu);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  template <typename T> T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return cat_; }
  Device device() const { return device_; }
  bool empty() const { return bytes_ == 0; }
  void reset();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemCategory cat_ = MemCategory::workspace;
  Device device_ = Device::cpu;
};

// Bytes kept by the cache of released blocks of a device (the host by
// default); release_cached_memory() frees those of every device.
int64_t cached_bytes(Device d = Device::cpu);
void release_cached_memory();

// Resident set size of this process now and at its peak (from /proc), bytes.
int64_t process_rss_bytes();
int64_t process_peak_rss_bytes();

}  // namespace meshtrain

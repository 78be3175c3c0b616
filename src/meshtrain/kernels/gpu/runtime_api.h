// The GPU backend's runtime, seen from host code that includes no vendor
// header: which devices are visible, the one device and stream this process
// uses, copies between host and device memory, memory figures, and timing of
// asynchronous device work by events (host clocks would time the launch,
// not the work).
//
// init(d) selects device d, creates the process's stream, and installs the
// device allocator of core/device.h, so Buffer(..., Device::cuda) works from
// then on. Every kernel of kernels.h runs on that stream and returns at
// once; synchronize() waits for all of it. Errors throw std::runtime_error.
// Everything here is for one thread per process, as the CPU kernels are.
// Because all device work is ordered on the one stream, a kernel's scratch
// Buffer may be released as soon as the kernel is queued: a block handed
// out again from the cache is used by later work on the same stream only,
// and cudaFree waits for the device.
#pragma once

#include <cstddef>
#include <string>

namespace meshtrain::gpu {

// Devices visible to this process (0 when there is no driver or no device).
int device_count();
// Why no device is visible ("" when one is): the runtime's own message.
std::string no_device_reason();

void init(int device = 0);
bool initialized();
// "NVIDIA H200, 139.8 GiB, 132 SMs, sm_90" of the current device.
std::string device_description();

void synchronize();
// Copies of `bytes`, in either direction or device to device (unified
// addressing tells which); synchronous with respect to the host.
void copy(void* dst, const void* src, size_t bytes);
void mem_info(size_t* free_bytes, size_t* total_bytes);

// Times the device work issued between start() and stop() on the stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  void stop();
  // Waits for the stop event; seconds between the two events.
  double seconds() const;

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace meshtrain::gpu

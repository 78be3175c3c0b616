#include <cstdio>

#include "meshtrain/core/device.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/runtime_api.h"

namespace meshtrain::gpu {

void throw_gpu_error(const char* what, const char* call, const char* file, int line) {
  // fmt's compile-time format strings do not compile under nvcc: plain strings here.
  throw std::runtime_error(std::string("GPU error: ") + what + " (" + call + " at " + file + ":" +
                           std::to_string(line) + ")");
}

namespace {

// Device memory through the runtime. Blocks come back 256-byte aligned.
class CudaAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (gpuMalloc(&p, bytes) != gpuSuccess) {
      (void)gpuGetLastError();  // clear the sticky out-of-memory error
      return nullptr;
    }
    return p;
  }
  void release(void* p, size_t) override { (void)gpuFree(p); }
  void zero(void* p, size_t bytes) override {
    GPU_CHECK(gpuMemsetAsync(p, 0, bytes, stream()));
    GPU_CHECK(gpuStreamSynchronize(stream()));
  }
};

struct State {
  bool ready = false;
  int device = 0;
  gpuStream_t stream{};
  CudaAllocator allocator;
};
State& state() {
  static State s;
  return s;
}

}  // namespace

int device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  const gpuError_t e = gpuGetDeviceCount(&n);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    return gpuGetErrorString(e);
  }
  return n > 0 ? "" : "the runtime reports no device";
}

void init(int device) {
  State& s = state();
  if (s.ready) {
    if (device != s.device) throw std::runtime_error("gpu::init: the process already uses another device");
    return;
  }
  const int n = device_count();
  if (device < 0 || device >= n)
    throw std::runtime_error("gpu::init: device " + std::to_string(device) + " requested, " + std::to_string(n) +
                             " visible" + (n ? "" : " (" + no_device_reason() + ")"));
  GPU_CHECK(gpuSetDevice(device));
  GPU_CHECK(gpuStreamCreateWithFlags(&s.stream, gpuStreamNonBlocking));
  s.device = device;
  s.ready = true;
  install_device_allocator(Device::cuda, &s.allocator);
}

bool initialized() { return state().ready; }

gpuStream_t stream() {
  if (!state().ready) throw std::runtime_error("GPU backend used before gpu::init");
  return state().stream;
}

std::string device_description() {
  gpuDeviceProp p{};
  GPU_CHECK(gpuGetDeviceProperties(&p, state().device));
  char line[512];
  std::snprintf(line, sizeof line, "%s, %.1f GiB, %d SMs, sm_%d%d", p.name, p.totalGlobalMem / double(1u << 30),
                p.multiProcessorCount, p.major, p.minor);
  return line;
}

void synchronize() { GPU_CHECK(gpuStreamSynchronize(stream())); }

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDefault, stream()));
  GPU_CHECK(gpuStreamSynchronize(stream()));
}

void mem_info(size_t* free_bytes, size_t* total_bytes) { GPU_CHECK(gpuMemGetInfo(free_bytes, total_bytes)); }

EventTimer::EventTimer() {
  gpuEvent_t a, b;
  GPU_CHECK(gpuEventCreate(&a));
  GPU_CHECK(gpuEventCreate(&b));
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  (void)gpuEventDestroy(static_cast<gpuEvent_t>(start_));
  (void)gpuEventDestroy(static_cast<gpuEvent_t>(stop_));
}

void EventTimer::start() { GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(start_), stream())); }
void EventTimer::stop() { GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(stop_), stream())); }

double EventTimer::seconds() const {
  GPU_CHECK(gpuEventSynchronize(static_cast<gpuEvent_t>(stop_)));
  float ms = 0;
  GPU_CHECK(gpuEventElapsedTime(&ms, static_cast<gpuEvent_t>(start_), static_cast<gpuEvent_t>(stop_)));
  return ms * 1e-3;
}

}  // namespace meshtrain::gpu

// One source for CUDA and HIP (the way llm.c keeps one): the kernels of this
// folder include this header instead of a vendor's, and use
//   - gpu* names for the runtime (gpuStream_t, gpuMalloc, gpuMemcpyAsync, ...),
//     mapped to cuda* or hip*;
//   - kWarpSize (32 on NVIDIA, 64 on AMD CDNA: MI250X wavefronts) and the
//     warp_* reductions below, written for either width;
//   - ld()/st() to read and write float and meshtrain::bf16 storage with fp32
//     arithmetic; bf16 rounding is the bit-exact round-to-nearest-even of
//     core/dtype.h on every vendor, so host and device agree on conversions.
// GPU_CHECK(call) throws std::runtime_error naming the call, file and line.
// Device code only includes this header from .cu files (hipcc compiles them
// as HIP with -x hip); the host-facing declarations are in kernels.h and
// runtime_api.h, which need no vendor header.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "meshtrain/core/dtype.h"

#if defined(__HIPCC__) || defined(MESHTRAIN_HIP)
#include <hip/hip_runtime.h>
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuStream_t hipStream_t
#define gpuEvent_t hipEvent_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuMemGetInfo hipMemGetInfo
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceSynchronize hipDeviceSynchronize
#else
#include <cuda_runtime.h>
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuStream_t cudaStream_t
#define gpuEvent_t cudaEvent_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuMemGetInfo cudaMemGetInfo
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceSynchronize cudaDeviceSynchronize
#endif

namespace meshtrain::gpu {

#if defined(__HIPCC__) || defined(MESHTRAIN_HIP)
#if defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#else
inline constexpr int kWarpSize = 64;
#endif
__device__ inline float shfl_xor(float v, int lane_mask) { return __shfl_xor(v, lane_mask); }
__device__ inline double shfl_xor(double v, int lane_mask) { return __shfl_xor(v, lane_mask); }
#else
inline constexpr int kWarpSize = 32;
__device__ inline float shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
__device__ inline double shfl_xor(double v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
#endif

[[noreturn]] void throw_gpu_error(const char* what, const char* call, const char* file, int line);

#define GPU_CHECK(call)                                                                   \
  do {                                                                                    \
    const gpuError_t gpu_check_err_ = (call);                                             \
    if (gpu_check_err_ != gpuSuccess)                                                     \
      ::meshtrain::gpu::throw_gpu_error(gpuGetErrorString(gpu_check_err_), #call, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: reports a bad launch configuration at once.
#define GPU_CHECK_LAUNCH() GPU_CHECK(gpuGetLastError())

// The stream every kernel of the backend runs on (runtime.cu; one per process).
gpuStream_t stream();

// --- Storage loads and stores (fp32 arithmetic) ------------------------------
__device__ inline float ld(float x) { return x; }
__device__ inline float ld(bf16 x) { return __uint_as_float(static_cast<uint32_t>(x.bits) << 16); }
template <class T> __device__ inline T st(float f);
template <> __device__ inline float st<float>(float f) { return f; }
template <> __device__ inline bf16 st<bf16>(float f) {
  uint32_t u = __float_as_uint(f);
  bf16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r.bits = static_cast<uint16_t>((u >> 16) | 0x40);
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = static_cast<uint16_t>(u >> 16);
  }
  return r;
}

// --- Reductions ---------------------------------------------------------------
template <class V> __device__ inline V warp_sum(V v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += shfl_xor(v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v = fmaxf(v, shfl_xor(v, o));
  return v;
}
// Sum (or max) over the block; every thread gets the result. blockDim.x is a
// multiple of kWarpSize and at most kWarpSize^2; `scratch` holds kWarpSize
// values. The order of additions is fixed by the block shape, so results are
// deterministic.
template <class V> __device__ inline V block_sum(V v, V* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : V(0);
  return warp_sum(v);
}
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Blocks of `threads` covering n elements (at least 1, at most grid.x's limit).
inline unsigned int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned int>(b < 1 ? 1 : (b > 0x7fffffff ? 0x7fffffff : b));
}

}  // namespace meshtrain::gpu

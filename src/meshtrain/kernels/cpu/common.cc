#include "meshtrain/kernels/cpu/common.h"

namespace meshtrain::kernels::cpu {

void reduce_partials_into(float* dst, const float* partials, int nblocks, int width) {
  constexpr int kCols = 256;
  const int nchunks = ceil_div(width, kCols);
#pragma omp parallel for schedule(static)
  for (int chunk = 0; chunk < nchunks; ++chunk) {
    const int c0 = chunk * kCols;
    const int c1 = c0 + kCols < width ? c0 + kCols : width;
    float acc[kCols];
    for (int c = c0; c < c1; ++c) acc[c - c0] = 0.0f;
    for (int b = 0; b < nblocks; ++b) {
      const float* p = partials + static_cast<size_t>(b) * width;
#pragma omp simd
      for (int c = c0; c < c1; ++c) acc[c - c0] += p[c];
    }
#pragma omp simd
    for (int c = c0; c < c1; ++c) dst[c] += acc[c - c0];
  }
}

}  // namespace meshtrain::kernels::cpu

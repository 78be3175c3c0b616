// Process-wide time and FLOP counters of the kernels that carry a step's
// FLOPs: the oneDNN matmuls (every linear layer and the logits) and the
// tiled attention kernels. Everything else a step computes (LayerNorm, GELU,
// residuals, embeddings, cross-entropy, bf16 conversions) and the
// collectives inside the layers are the rest of the compute time.
//
// Each public matmul_* / attention_* call holds a KernelTimer for its whole
// duration; the counters only grow. A reader takes kernel_totals() before
// and after the span it measures and subtracts (the counters are shared by
// every thread of the process, and calls are meant to come from one).
// FLOPs are those of kernels/flops.h for the call's shape.
#pragma once

#include <cstdint>

namespace meshtrain::kernels {

enum class KernelKind { matmul, attention };
inline constexpr int kNumKernelKinds = 2;

struct KernelTotals {
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
  KernelTotals operator-(const KernelTotals& o) const {
    return {calls - o.calls, seconds - o.seconds, flops - o.flops};
  }
};

KernelTotals kernel_totals(KernelKind kind);

// Adds one call, its wall time (construction to destruction) and `flops`.
class KernelTimer {
 public:
  KernelTimer(KernelKind kind, double flops);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  KernelKind kind_;
  double flops_;
  int64_t start_ns_;
};

}  // namespace meshtrain::kernels

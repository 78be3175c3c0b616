#include "meshtrain/kernels/kernel_clock.h"

#include <atomic>

#include "meshtrain/core/clock.h"

namespace meshtrain::kernels {

namespace {

struct Counter {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> ns{0};
  std::atomic<double> flops{0};
};

Counter& counter(KernelKind k) {
  static Counter counters[kNumKernelKinds];
  return counters[static_cast<int>(k)];
}

}  // namespace

KernelTotals kernel_totals(KernelKind kind) {
  const Counter& c = counter(kind);
  return {c.calls.load(), c.ns.load() * 1e-9, c.flops.load()};
}

KernelTimer::KernelTimer(KernelKind kind, double flops) : kind_(kind), flops_(flops), start_ns_(now_ns()) {}

KernelTimer::~KernelTimer() {
  Counter& c = counter(kind_);
  c.ns.fetch_add(now_ns() - start_ns_, std::memory_order_relaxed);
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.flops.fetch_add(flops_, std::memory_order_relaxed);
}

}  // namespace meshtrain::kernels

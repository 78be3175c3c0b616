// Learning rate: linear warmup from 0 to `lr` over `warmup` iterations, then
// cosine decay to `min_lr` at `decay_iters` (Megatron's --lr-decay-style
// cosine), constant min_lr after.
#pragma once

#include <algorithm>
#include <cmath>

namespace meshtrain {

struct LrSchedule {
  float lr = 3e-4f;
  float min_lr = 0.0f;
  int warmup = 0;
  int decay_iters = 1;

  // it: 0-based iteration.
  float at(int it) const {
    if (warmup > 0 && it < warmup) return lr * static_cast<float>(it + 1) / static_cast<float>(warmup);
    const int span = std::max(decay_iters - warmup, 1);
    const float frac = std::clamp(static_cast<float>(it - warmup) / static_cast<float>(span), 0.0f, 1.0f);
    return min_lr + 0.5f * (lr - min_lr) * (1.0f + std::cos(3.14159265358979f * frac));
  }
};

}  // namespace meshtrain

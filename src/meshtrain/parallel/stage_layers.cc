#include "meshtrain/parallel/stage_layers.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

// Megatron-LM: the first and/or last stage given, the others even.
std::vector<int> first_last_split(int L, const ParallelConfig& p) {
  const int first = p.first_stage_layers, last = p.last_stage_layers;
  check(first >= 0 && last >= 0, "decoder-first/last-pipeline-num-layers must be positive (got {}, {})", first, last);
  check(p.pp > 1, "decoder-first/last-pipeline-num-layers need pipeline-model-parallel-size > 1");
  check(p.stage_counting == StageCounting::transformer,
        "decoder-first/last-pipeline-num-layers and pipeline-layer-counting embedding-head exclude each other");
  const int middle = p.pp - (first > 0) - (last > 0);
  const int rest = L - first - last;
  if (middle == 0) {
    check(rest == 0, "decoder-first-pipeline-num-layers {} + decoder-last-pipeline-num-layers {} != num-layers {} "
          "(pipeline-model-parallel-size 2)", first, last, L);
    return {first, last};
  }
  check(rest >= middle && rest % middle == 0,
        "num-layers {} minus decoder-first/last-pipeline-num-layers ({}, {}) leaves {} layers, not divisible over "
        "the other {} pipeline stages (at least one each)",
        L, first, last, rest, middle);
  std::vector<int> s(p.pp, rest / middle);
  if (first > 0) s.front() = first;
  if (last > 0) s.back() = last;
  return s;
}

// Megatron-DeepSpeed: embedding and head counted as layers.
std::vector<int> embedding_head_split(int L, const ParallelConfig& p) {
  check(p.vpp == 1, "pipeline-layer-counting embedding-head has no virtual pipeline stages "
        "(Megatron-DeepSpeed's pipeline has no interleaved schedule)");
  if (p.pp == 1) return {L};
  check((L + 2) % p.pp == 0,
        "num-layers {} + 2 (embedding and head counted as layers) is not divisible by "
        "pipeline-model-parallel-size {}", L, p.pp);
  const int per = (L + 2) / p.pp;
  check(per >= 2, "num-layers {} + 2 over {} pipeline stages leaves the first and last stage no transformer layer",
        L, p.pp);
  std::vector<int> s(p.pp, per);
  s.front() -= 1;
  s.back() -= 1;
  return s;
}

}  // namespace

std::vector<int> stage_layers(int L, const ParallelConfig& p) {
  std::vector<int> s;
  if (p.first_stage_layers != 0 || p.last_stage_layers != 0) {
    s = first_last_split(L, p);
  } else if (p.stage_counting == StageCounting::embedding_head) {
    s = embedding_head_split(L, p);
  } else {
    check(L % (p.pp * p.vpp) == 0,
          "num-layers {} is not divisible by pipeline-model-parallel-size x virtual chunks = {}", L, p.pp * p.vpp);
    return std::vector<int>(p.pp, L / p.pp);
  }
  for (int i = 0; i < p.pp; ++i)
    check(s[i] % p.vpp == 0, "the {} layers of pipeline stage {} are not divisible by the {} virtual pipeline stages",
          s[i], i, p.vpp);
  return s;
}

int virtual_stage_first_layer(const std::vector<int>& per_stage, int vpp, int v) {
  const int pp = static_cast<int>(per_stage.size());
  int first = 0;
  for (int u = 0; u < v; ++u) first += per_stage[u % pp] / vpp;
  return first;
}

}  // namespace meshtrain

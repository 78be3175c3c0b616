#include "meshtrain/parallel/stage_layers.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

// Megatron-LM: the first and/or last stage given, the others even; [pp].
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

// Per-stage counts, each divided evenly over its vpp chunks; [pp x vpp].
std::vector<int> chunks_of_stages(const std::vector<int>& stages, int vpp) {
  const int pp = static_cast<int>(stages.size());
  for (int i = 0; i < pp; ++i)
    check(stages[i] % vpp == 0, "the {} layers of pipeline stage {} are not divisible by the {} virtual pipeline stages",
          stages[i], i, vpp);
  std::vector<int> v(static_cast<size_t>(pp) * vpp);
  for (size_t u = 0; u < v.size(); ++u) v[u] = stages[u % pp] / vpp;
  return v;
}

// Megatron-DeepSpeed (vpp 1) and Megatron-core's account-for-embedding/loss
// split: embedding and head counted as layers over the virtual stages.
std::vector<int> embedding_head_split(int L, const ParallelConfig& p) {
  const int n = p.pp * p.vpp;
  if (n == 1) return {L};
  if (p.vpp == 1)
    check((L + 2) % p.pp == 0,
          "num-layers {} + 2 (embedding and head counted as layers) is not divisible by "
          "pipeline-model-parallel-size {}", L, p.pp);
  else
    check((L + 2) % n == 0,
          "num-layers {} + 2 (embedding and head counted as layers) is not divisible by "
          "pipeline-model-parallel-size {} x virtual pipeline stages {} = {}", L, p.pp, p.vpp, n);
  const int per = (L + 2) / n;
  check(p.vpp > 1 || per >= 2,
        "num-layers {} + 2 over {} pipeline stages leaves the first and last stage no transformer layer", L, p.pp);
  std::vector<int> v(static_cast<size_t>(n), per);
  v.front() -= 1;
  v.back() -= 1;
  return v;
}

// DeepSpeed's partition_balanced over unit-weight items: the smallest
// bottleneck b = ceil(items / pp), each stage filled with b items in order;
// [pp] items per stage, 0 where none are left.
std::vector<int> balanced_items(int items, int pp) {
  const int b = (items + pp - 1) / pp;
  std::vector<int> s(pp, 0);
  int left = items;
  for (int i = 0; i < pp; ++i) {
    s[i] = std::min(b, left);
    left -= s[i];
  }
  return s;
}

// Megatron-DeepSpeed's --pp-partition-method 'type:transformer' (the
// embedding and the head weigh nothing) or 'type:transformer|embedding'
// (one each) with DeepSpeed's balancing; [pp].
std::vector<int> balanced_split(int L, const ParallelConfig& p) {
  check(p.vpp == 1, "the balanced pipeline partition (DeepSpeed) has no virtual stages (got {} per pipeline rank)",
        p.vpp);
  check(p.first_stage_layers == 0 && p.last_stage_layers == 0,
        "decoder-first/last-pipeline-num-layers and the balanced pipeline partition exclude each other");
  const bool counted = p.stage_counting == StageCounting::embedding_head;
  std::vector<int> s = balanced_items(counted ? L + 2 : L, p.pp);
  if (counted) {  // the embedding is the first item, the head the last
    s.front() -= 1;
    s.back() -= 1;
  }
  for (int i = 0; i < p.pp; ++i)
    check(s[i] > 0,
          "the balanced partition of num-layers {}{} over pipeline-model-parallel-size {} leaves stage {} no "
          "transformer layer ({} a stage from the first)",
          L, counted ? " + 2 (embedding and head counted as layers)" : "", p.pp, i, (L + 2 * counted + p.pp - 1) / p.pp);
  return s;
}

}  // namespace

std::vector<int> virtual_stage_layers(int L, const ParallelConfig& p) {
  std::vector<int> v;
  if (p.stage_partition == StagePartition::balanced && p.pp > 1) {
    v = balanced_split(L, p);
  } else if (p.first_stage_layers != 0 || p.last_stage_layers != 0) {
    v = chunks_of_stages(first_last_split(L, p), p.vpp);
  } else if (p.stage_counting == StageCounting::embedding_head) {
    v = embedding_head_split(L, p);
  } else {
    check(L % (p.pp * p.vpp) == 0,
          "num-layers {} is not divisible by pipeline-model-parallel-size x virtual chunks = {}", L, p.pp * p.vpp);
    return std::vector<int>(static_cast<size_t>(p.pp) * p.vpp, L / (p.pp * p.vpp));
  }
  std::vector<int> stage(p.pp, 0);
  for (size_t u = 0; u < v.size(); ++u) stage[u % p.pp] += v[u];
  for (int s = 0; s < p.pp; ++s)
    check(stage[s] > 0, "pipeline stage {} runs no transformer layer (num-layers {} over {} x {} virtual stages)", s, L,
          p.pp, p.vpp);
  return v;
}

std::vector<int> stage_layers(int L, const ParallelConfig& p) {
  const std::vector<int> v = virtual_stage_layers(L, p);
  std::vector<int> s(p.pp, 0);
  for (size_t u = 0; u < v.size(); ++u) s[u % p.pp] += v[u];
  return s;
}

int virtual_stage_first_layer(const std::vector<int>& per_virtual_stage, int v) {
  int first = 0;
  for (int u = 0; u < v; ++u) first += per_virtual_stage[static_cast<size_t>(u)];
  return first;
}

}  // namespace meshtrain

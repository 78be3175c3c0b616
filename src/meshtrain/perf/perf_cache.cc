#include "meshtrain/perf/perf_cache.h"

#include <algorithm>

namespace meshtrain::perf {

const Schedule& PerfCache::schedule(ScheduleKind kind, int pp, int vpp, int m) {
  const auto key = std::make_tuple(int(kind), pp, vpp, m);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = schedules_.find(key); it != schedules_.end()) return *it->second;
  }
  auto s = std::make_unique<Schedule>(make_schedule(kind, pp, vpp, m));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = schedules_.try_emplace(key, std::move(s));
  return *it->second;
}

const StageLayout& PerfCache::stage_layout(const ModelConfig& m, const ParallelConfig& p, int stage) {
  // Middle stages all hold the same amount; represent them by stage 1.
  const int kind = stage == 0 ? 0 : stage == p.pp - 1 ? p.pp - 1 : 1;
  std::vector<int64_t> shape = {m.num_layers,          m.hidden_size,     m.num_attention_heads, m.kv_heads(),
                                m.ffn(),               m.padded_vocab(),  m.max_positions(),     m.gated_mlp,
                                m.tied_embeddings,     m.learned_positions, p.tp,               p.pp,
                                p.vpp,                 p.shard_size(),    m.rmsnorm,             m.bias_linear,
                                p.first_stage_layers,  p.last_stage_layers, int(p.stage_counting),
                                int(p.stage_partition)};
  LayoutKey key{std::move(shape), kind};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = layouts_.find(key); it != layouts_.end()) return *it->second;
  }
  const Layout L = Layout::build(m, p, 0, kind);
  auto s = std::make_unique<StageLayout>();
  s->numel = L.numel();
  for (int c = 0; c < p.vpp; ++c) s->chunk_layers.push_back(L.chunk_layers(c));
  s->chunk_numel.assign(p.vpp, 0);
  s->chunk_units.assign(p.vpp, 0);
  s->chunk_order.assign(p.vpp, ChunkUnits{});
  auto index = [&](const char* name) {
    const Unit* u = L.find_unit(name);
    return u ? static_cast<int>(u - L.units().data()) : -1;
  };
  for (const Unit& u : L.units()) {
    s->chunk_numel[u.chunk] += u.padded_numel;
    s->chunk_units[u.chunk] += 1;
    s->unit_numel.push_back(u.padded_numel);
    std::vector<int64_t>& tensors = s->unit_tensors.emplace_back();
    for (const ParamSpec& t : u.params) tensors.push_back(t.numel());
    if (u.kind == UnitKind::block) s->chunk_order[u.chunk].blocks.push_back(static_cast<int>(&u - L.units().data()));
  }
  for (int c = 0; c < p.vpp; ++c) {
    ChunkUnits& o = s->chunk_order[c];
    std::sort(o.blocks.begin(), o.blocks.end(),
              [&](int a, int b) { return L.units()[a].layer < L.units()[b].layer; });
    if (L.has_embedding(c))
      for (const char* n : {"embedding.word", "embedding.position"})
        if (const int i = index(n); i >= 0) o.embedding.push_back(i);
    if (L.has_head(c)) {
      o.head.push_back(index("head.lnf"));
      for (const char* n : {"head.word", "head.output", "embedding.word"})
        if (const int i = index(n); i >= 0) {
          o.head.push_back(i);
          break;
        }
    }
  }
  for (int z = 0; z < 4; ++z)
    for (int b = 0; b < 2; ++b) s->state[z][b] = L.state_bytes(z, b == 1);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = layouts_.try_emplace(std::move(key), std::move(s));
  return *it->second;
}

const PipelineTimeline& PerfCache::timeline(ScheduleKind kind, int m, const PipelineCosts& c) {
  std::vector<double> key = {double(kind), double(c.pp), double(c.vpp), double(m), double(c.blocking_sends)};
  key.insert(key.end(), c.forward_s.begin(), c.forward_s.end());
  key.insert(key.end(), c.backward_s.begin(), c.backward_s.end());
  key.insert(key.end(), c.transfer_s.begin(), c.transfer_s.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = timelines_.find(key); it != timelines_.end()) return *it->second;
  }
  auto t = std::make_unique<PipelineTimeline>(simulate(schedule(kind, c.pp, c.vpp, m), c));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = timelines_.try_emplace(std::move(key), std::move(t));
  return *it->second;
}

std::optional<double> PerfCache::comm_buffer_peak(const CommBufferKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = comm_buffer_peaks_.find(key); it != comm_buffer_peaks_.end()) return it->second;
  return std::nullopt;
}

double PerfCache::remember_comm_buffer_peak(const CommBufferKey& key, double peak) {
  std::lock_guard<std::mutex> lock(mu_);
  comm_buffer_peaks_.try_emplace(key, peak);
  return peak;
}

}  // namespace meshtrain::perf

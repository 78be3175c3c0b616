#include "meshtrain/comm/mesh_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view group_name(GroupKind k) {
  switch (k) {
    case GroupKind::tp: return "tp";
    case GroupKind::dp: return "dp";
    case GroupKind::pp: return "pp";
    case GroupKind::mp: return "mp";
    case GroupKind::embedding: return "embedding";
    case GroupKind::world: return "world";
    case GroupKind::dp_shard: return "dp_shard";
    case GroupKind::dp_replicate: return "dp_replicate";
  }
  return "?";
}

GroupKind parse_group_kind(std::string_view name) {
  for (int i = 0; i < kNumGroupKinds; ++i)
    if (group_name(static_cast<GroupKind>(i)) == name) return static_cast<GroupKind>(i);
  throw Error(
      fmt::format("unknown process group '{}' (tp, dp, pp, mp, embedding, world, dp_shard, dp_replicate)", name));
}

std::vector<std::vector<int>> mesh_groups(const ParallelConfig& p, GroupKind kind) {
  std::vector<std::vector<int>> groups;
  switch (kind) {
    case GroupKind::tp:
      for (int s = 0; s < p.pp; ++s)
        for (int d = 0; d < p.dp; ++d) {
          auto& g = groups.emplace_back();
          for (int t = 0; t < p.tp; ++t) g.push_back(rank_of(p, {t, d, s}));
        }
      break;
    case GroupKind::dp:
      for (int s = 0; s < p.pp; ++s)
        for (int t = 0; t < p.tp; ++t) {
          auto& g = groups.emplace_back();
          for (int d = 0; d < p.dp; ++d) g.push_back(rank_of(p, {t, d, s}));
        }
      break;
    case GroupKind::pp:
    case GroupKind::embedding:
      for (int d = 0; d < p.dp; ++d)
        for (int t = 0; t < p.tp; ++t) {
          auto& g = groups.emplace_back();
          if (kind == GroupKind::pp) {
            for (int s = 0; s < p.pp; ++s) g.push_back(rank_of(p, {t, d, s}));
          } else {
            g.push_back(rank_of(p, {t, d, 0}));
            if (p.pp > 1) g.push_back(rank_of(p, {t, d, p.pp - 1}));
          }
        }
      break;
    case GroupKind::mp:
      for (int d = 0; d < p.dp; ++d) {
        auto& g = groups.emplace_back();
        for (int s = 0; s < p.pp; ++s)
          for (int t = 0; t < p.tp; ++t) g.push_back(rank_of(p, {t, d, s}));
      }
      break;
    case GroupKind::world: {
      auto& g = groups.emplace_back();
      for (int r = 0; r < p.world(); ++r) g.push_back(r);
      break;
    }
    case GroupKind::dp_shard:
    case GroupKind::dp_replicate: {
      if (!p.hybrid_shard()) break;
      const int S = p.shard_size(), R = p.shard_replicas();
      const bool shard = kind == GroupKind::dp_shard;
      for (int s = 0; s < p.pp; ++s)
        for (int t = 0; t < p.tp; ++t)
          for (int outer = 0; outer < (shard ? R : S); ++outer) {
            auto& g = groups.emplace_back();
            for (int inner = 0; inner < (shard ? S : R); ++inner)
              g.push_back(rank_of(p, {t, shard ? outer * S + inner : inner * S + outer, s}));
          }
      break;
    }
  }
  return groups;
}

std::vector<int> mesh_group_of(const ParallelConfig& p, GroupKind kind, int rank) {
  for (auto& g : mesh_groups(p, kind))
    for (int r : g)
      if (r == rank) return g;
  return {};
}

std::string describe_mesh(const ParallelConfig& p, int max_groups) {
  std::string out = fmt::format("mesh: world {} = tp {} x dp {} x pp {} (rank order: tp fastest, then dp, then pp)\n",
                                p.world(), p.tp, p.dp, p.pp);
  if (p.hybrid_shard())
    out += fmt::format("ZeRO state sharded over dp_shard groups of {}, replicated {} times\n", p.shard_size(),
                       p.shard_replicas());
  for (GroupKind k : {GroupKind::tp, GroupKind::dp, GroupKind::pp, GroupKind::mp, GroupKind::embedding,
                      GroupKind::dp_shard, GroupKind::dp_replicate}) {
    const auto groups = mesh_groups(p, k);
    if (groups.empty()) continue;  // no hybrid sharding
    std::string line = fmt::format("{:<22}", fmt::format("{} groups ({}):", group_name(k), groups.size()));
    for (size_t i = 0; i < groups.size(); ++i) {
      if (static_cast<int>(i) == max_groups) {
        line += fmt::format(" ... ({} more)", groups.size() - i);
        break;
      }
      line += fmt::format(" [{}]", fmt::join(groups[i], " "));
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace meshtrain

// Which world ranks form each parallel group of a (tp, dp, pp) mesh, as
// Megatron-LM builds them: ranks ordered with TP fastest, then DP, then PP
// (rank_of/coord_of in parallel/parallel_config.h), and
//   tp        ranks that differ only in their TP coordinate
//   dp        ranks that differ only in their DP coordinate
//   pp        ranks that differ only in their PP coordinate (a pipeline)
//   mp        model-parallel: ranks that share the DP coordinate (tp x pp)
//   embedding first and last stage of each pipeline (just the rank when pp == 1)
//   world     every rank
//   dp_shard  hybrid sharding (p.hybrid_shard()): consecutive DP ranks in
//             groups of p.shard_size(), over which ZeRO state is sharded
//   dp_replicate  the DP ranks holding the same shard, one from each
//             dp_shard group (torchtitan's names); both are empty lists of
//             groups when sharding is not hybrid
// Pure functions of the shape: no MPI. ProcessMesh builds the communicators;
// these lists describe them (and let tests check them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

enum class GroupKind { tp, dp, pp, mp, embedding, world, dp_shard, dp_replicate };
constexpr int kNumGroupKinds = 8;

// "tp", "dp", "pp", "mp", "embedding", "world", "dp_shard", "dp_replicate".
std::string_view group_name(GroupKind k);
// The kind named `name`; throws Error on an unknown name.
GroupKind parse_group_kind(std::string_view name);

// Every group of `kind` in the mesh p.tp x p.dp x p.pp, each as world ranks
// in group-rank order, groups listed in Megatron's construction order.
std::vector<std::vector<int>> mesh_groups(const ParallelConfig& p, GroupKind kind);

// The group of `kind` containing world rank `rank` (empty for a middle
// pipeline stage's embedding group).
std::vector<int> mesh_group_of(const ParallelConfig& p, GroupKind kind, int rank);

// A table for people, one line per group kind listing its groups, e.g.
//   mesh: world 8 = tp 2 x dp 2 x pp 2 (rank order: tp fastest, then dp, then pp)
//   tp groups (4):        [0 1] [2 3] [4 5] [6 7]
// Long lists are cut after `max_groups` groups per kind.
std::string describe_mesh(const ParallelConfig& p, int max_groups = 32);

}  // namespace meshtrain

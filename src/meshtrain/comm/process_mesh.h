// ProcessMesh: the one place where the parallel groups of a run are built.
// It is constructed once per process, collectively over the world
// communicator, from the TP and PP sizes (DP = world / (TP x PP)) and the
// ZeRO shard group (hybrid sharding), and the rest of the engine asks it for
// a group by name:
//   mesh.tp_group().all_reduce(...);   mesh.group(GroupKind::dp) ...
// Group membership is Megatron's (comm/mesh_groups.h). The mesh owns the
// communicators, the Watchdog they share, and hence their statistics.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include <mpi.h>

#include "meshtrain/comm/comm_stats.h"
#include "meshtrain/comm/comm_tracer.h"
#include "meshtrain/comm/communicator.h"
#include "meshtrain/comm/mesh_groups.h"
#include "meshtrain/comm/watchdog.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

class ProcessMesh {
 public:
  // Collective over `world` (duplicated; the mesh never uses it directly).
  // Throws Error unless tp, pp >= 1 and the world size is a multiple of
  // tp x pp. A watchdog_timeout_s <= 0 runs without a watchdog.
  ProcessMesh(int tp, int pp, MPI_Comm world = MPI_COMM_WORLD,
              double watchdog_timeout_s = Watchdog::timeout_from_env());
  // As above with p.tp, p.pp and p.zero_shard; also throws Error if p.dp
  // disagrees with world / (tp x pp) or the shard group does not divide it.
  explicit ProcessMesh(const ParallelConfig& p, MPI_Comm world = MPI_COMM_WORLD,
                       double watchdog_timeout_s = Watchdog::timeout_from_env());
  ~ProcessMesh();
  // Movable: the communicators and the watchdog stay where they are.
  ProcessMesh(ProcessMesh&&) noexcept;
  ProcessMesh(const ProcessMesh&) = delete;
  ProcessMesh& operator=(const ProcessMesh&) = delete;

  int tp() const { return shape_.tp; }
  int dp() const { return shape_.dp; }
  int pp() const { return shape_.pp; }
  int world_size() const { return shape_.world(); }
  int rank() const { return rank_; }  // in the world
  RankCoord coord() const { return coord_; }
  // The mesh's shape as a ParallelConfig (only tp, dp, pp and zero_shard are set).
  const ParallelConfig& shape() const { return shape_; }

  // --- Groups, asked for by name ------------------------------------------
  Communicator& tp_group() { return group(GroupKind::tp); }
  Communicator& dp_group() { return group(GroupKind::dp); }
  Communicator& pp_group() { return group(GroupKind::pp); }
  Communicator& mp_group() { return group(GroupKind::mp); }  // tp x pp
  // First and last stage of this rank's pipeline; only ranks on those stages
  // belong to one (see in_embedding_group()).
  Communicator& embedding_group() { return group(GroupKind::embedding); }
  Communicator& world() { return group(GroupKind::world); }
  // ZeRO's groups: the DP ranks its state is sharded over (dp_group() unless
  // sharding is hybrid), and, with hybrid sharding, the replicas of this
  // rank's shard (nullptr otherwise).
  Communicator& zero_shard_group() { return group(shape_.hybrid_shard() ? GroupKind::dp_shard : GroupKind::dp); }
  Communicator* zero_replica_group() {
    return shape_.hybrid_shard() ? &group(GroupKind::dp_replicate) : nullptr;
  }
  int zero_shard_rank() const { return coord_.dp % shape_.shard_size(); }  // in zero_shard_group()
  int zero_replica() const { return coord_.dp / shape_.shard_size(); }     // which copy of the shard
  Communicator& group(GroupKind kind);
  Communicator& group(std::string_view name) { return group(parse_group_kind(name)); }
  bool in_embedding_group() const { return is_first_stage() || is_last_stage(); }

  // --- Pipeline neighbours --------------------------------------------------
  bool is_first_stage() const { return coord_.pp == 0; }
  bool is_last_stage() const { return coord_.pp == shape_.pp - 1; }
  // Ranks of the next/previous stage, within pp_group() or in the world.
  // They wrap around (the last stage's next is the first), as Megatron's do,
  // which the interleaved schedule uses.
  int next_stage_rank() const { return (coord_.pp + 1) % shape_.pp; }
  int prev_stage_rank() const { return (coord_.pp + shape_.pp - 1) % shape_.pp; }
  int next_stage_world_rank() const;
  int prev_stage_world_rank() const;

  // The mesh for people (describe_mesh); rank 0 prints it.
  std::string describe() const { return describe_mesh(shape_); }

  // --- Instrumentation --------------------------------------------------------
  // Every group's statistics merged (keys are group names).
  CommStats stats() const;
  void reset_stats();
  // Attaches `t` (nullptr detaches) to every group.
  void set_tracer(CommTracer* t);
  const Watchdog* watchdog() const { return watchdog_.get(); }

 private:
  struct Shape {
    ParallelConfig p;
  };
  ProcessMesh(Shape shape, MPI_Comm world, double watchdog_timeout_s);

  ParallelConfig shape_;
  int rank_ = 0;
  RankCoord coord_;
  std::unique_ptr<NodePeers> peers_;    // outlives the watchdog that reads it
  std::unique_ptr<Watchdog> watchdog_;  // declared before the groups: outlives them
  std::array<std::unique_ptr<Communicator>, kNumGroupKinds> groups_;
};

}  // namespace meshtrain

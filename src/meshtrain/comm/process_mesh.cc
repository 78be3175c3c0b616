#include "meshtrain/comm/process_mesh.h"

#include "meshtrain/comm/comm_error.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

int world_size_of(MPI_Comm world) {
  int size = 0;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size", "world");
  return size;
}

ParallelConfig mesh_shape(int tp, int pp, int world, int zero_shard = 0) {
  check(tp >= 1 && pp >= 1, "process mesh: tp ({}) and pp ({}) must be at least 1", tp, pp);
  check(world % (tp * pp) == 0,
        "process mesh: world size {} is not a multiple of tp x pp = {} x {} = {}", world, tp, pp, tp * pp);
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = world / (tp * pp);
  check(zero_shard >= 0 && (zero_shard == 0 || p.dp % zero_shard == 0),
        "process mesh: data-parallel size {} is not divisible by the data-parallel shard size {}", p.dp, zero_shard);
  p.zero_shard = zero_shard;
  return p;
}

// Splits `parent` by colour; key orders ranks within each part.
// MPI_UNDEFINED colour yields MPI_COMM_NULL.
MPI_Comm split(MPI_Comm parent, int color, int key, std::string_view name) {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(parent, color, key, &out), "MPI_Comm_split", name);
  return out;
}

// p.tp, once p.dp is known to agree with the world size (the other
// constructor checks divisibility).
int tp_matching_world(const ParallelConfig& p, MPI_Comm world) {
  const int size = world_size_of(world);
  if (p.tp >= 1 && p.pp >= 1 && size % (p.tp * p.pp) == 0)
    check(p.dp == size / (p.tp * p.pp),
          "process mesh: the parallel config has dp {} but world size {} / (tp {} x pp {}) = {}", p.dp, size,
          p.tp, p.pp, size / (p.tp * p.pp));
  return p.tp;
}

}  // namespace

ProcessMesh::ProcessMesh(const ParallelConfig& p, MPI_Comm world, double watchdog_timeout_s)
    : ProcessMesh(Shape{mesh_shape(tp_matching_world(p, world), p.pp, world_size_of(world), p.zero_shard)}, world,
                  watchdog_timeout_s) {}

ProcessMesh::ProcessMesh(int tp, int pp, MPI_Comm world, double watchdog_timeout_s)
    : ProcessMesh(Shape{mesh_shape(tp, pp, world_size_of(world))}, world, watchdog_timeout_s) {}

ProcessMesh::ProcessMesh(Shape shape, MPI_Comm world, double watchdog_timeout_s) : shape_(shape.p) {
  check_mpi(MPI_Comm_rank(world, &rank_), "MPI_Comm_rank", "world");
  coord_ = coord_of(shape_, rank_);
  peers_ = std::make_unique<NodePeers>(world);
  peers_->name_dead_peer_on_sigterm();
  if (watchdog_timeout_s > 0) {
    watchdog_ = std::make_unique<Watchdog>(watchdog_timeout_s);
    watchdog_->watch_peers(peers_.get());
  }

  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(world, &dup), "MPI_Comm_dup", "world");
  // Every rank makes the same splits in the same order.
  const RankCoord c = coord_;
  const int t = shape_.tp, d = shape_.dp, S = shape_.shard_size();
  const bool hybrid = shape_.hybrid_shard();
  const int dp_line = c.pp * t + c.tp;  // which DP group
  const MPI_Comm comms[kNumGroupKinds] = {
      /*tp*/ split(dup, c.pp * d + c.dp, c.tp, "tp"),
      /*dp*/ split(dup, dp_line, c.dp, "dp"),
      /*pp*/ split(dup, c.dp * t + c.tp, c.pp, "pp"),
      /*mp*/ split(dup, c.dp, c.pp * t + c.tp, "mp"),
      /*embedding*/ split(dup, in_embedding_group() ? c.dp * t + c.tp : MPI_UNDEFINED, c.pp, "embedding"),
      /*world*/ dup,
      /*dp_shard*/ split(dup, hybrid ? dp_line * (d / S) + c.dp / S : MPI_UNDEFINED, c.dp % S, "dp_shard"),
      /*dp_replicate*/ split(dup, hybrid ? dp_line * S + c.dp % S : MPI_UNDEFINED, c.dp / S, "dp_replicate"),
  };
  for (int k = 0; k < kNumGroupKinds; ++k) {
    if (comms[k] == MPI_COMM_NULL) continue;
    groups_[k] = std::make_unique<Communicator>(comms[k], std::string(group_name(static_cast<GroupKind>(k))),
                                                /*owned=*/true);
    groups_[k]->set_watchdog(watchdog_.get());
  }
}

ProcessMesh::~ProcessMesh() = default;
ProcessMesh::ProcessMesh(ProcessMesh&&) noexcept = default;

Communicator& ProcessMesh::group(GroupKind kind) {
  Communicator* c = groups_[static_cast<int>(kind)].get();
  MT_ASSERT(c != nullptr);  // absent: the embedding group of middle stages, hybrid groups without it
  return *c;
}

int ProcessMesh::next_stage_world_rank() const {
  return rank_of(shape_, {coord_.tp, coord_.dp, next_stage_rank()});
}

int ProcessMesh::prev_stage_world_rank() const {
  return rank_of(shape_, {coord_.tp, coord_.dp, prev_stage_rank()});
}

CommStats ProcessMesh::stats() const {
  CommStats s;
  for (const auto& g : groups_)
    if (g) s.merge(g->stats());
  return s;
}

void ProcessMesh::reset_stats() {
  for (auto& g : groups_)
    if (g) g->reset_stats();
}

void ProcessMesh::set_tracer(CommTracer* t) {
  for (auto& g : groups_)
    if (g) g->set_tracer(t);
}

}  // namespace meshtrain
